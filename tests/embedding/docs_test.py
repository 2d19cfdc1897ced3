#!/usr/bin/env python3
"""The documentation's tests: STEP is one of

  markers   every fenced block of README.md and docs/*.md is preceded by a marker saying how
            it is checked (below); test-file names are unique and each is used by a
            package_test.py step; test-commands blocks name only paths that exist and pass
            only options that their script or program knows
  links     every relative link points at an existing file, and its #anchor at a heading of
            that file (GitHub's anchors)
  sessions  every test-shell and test-sqlite3 block prints exactly what it shows; README.md's
            after its first command's demo (tools/demo.sh --quotactl) has run in their folder,
            as a reader who follows it finds ./quota.db
  postgresql every test-postgresql block prints exactly what it shows, run on the test server
            ($QUOTA_TEST_POSTGRES; without it the step fails, saying how to start one)
  headline  the README's performance table is the one bench/results/baseline.json gives

The markers (a line of its own right above the block's opening fence):

  <!-- test-file: NAME -->     a file of a scratch project, built and run by package_test.py
                                (NAME.out: the exact output of the program)
  <!-- test-shell -->          a shell session: lines `$ COMMAND`, each followed by the output
                                it prints (stdout and stderr). A page's sessions run in order,
                                in one empty folder, with --quotactl's folder first on PATH.
  <!-- test-sqlite3: FILE -->  a session of the sqlite3 shell on FILE, in that same folder:
                                lines `sqlite> ` (and `   ...> `) are input, the others output.
                                A block without prompts is SQL that must print nothing.
  <!-- test-postgresql: URI --> a shell session as test-shell, on a PostgreSQL database: URI
                                is the one the block shows. A page's blocks run in order, in one
                                empty folder (with `docs` leading to docs/) and one fresh
                                database of the test server, whose URI replaces URI in the
                                commands; in the output, URI with its password masked stands for
                                the fresh one, masked alike. `export NAME=VALUE` sets NAME for
                                the page's later commands.
  <!-- test-commands: WHY -->  commands not run (WHY: too long, needs what the suite lacks);
                                only their paths and options are checked.

Output is compared line by line with trailing spaces removed (sqlite3's column mode pads).
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse

FENCE = re.compile(r"^```")
MARKER = re.compile(
    r"^<!-- (test-file|test-shell|test-sqlite3|test-postgresql|test-commands)(?:: (.*?))? -->$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
PROMPT = re.compile(r"^(sqlite> |   \.\.\.> )")


class Failure(Exception):
    pass


def pages(source):
    found = [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "*.md")))
    return [(os.path.relpath(path, source), open(path, encoding="utf-8").read()) for path in found]


def blocks(text):
    """Yields (line number, marker kind or None, marker argument, info string, body)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            info = lines[i][3:].strip()
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            marker = MARKER.match(lines[start - 1]) if start > 0 else None
            yield (start + 1, marker.group(1) if marker else None,
                   (marker.group(2) or "") if marker else "", info, "\n".join(body) + "\n")
        i += 1


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    found, seen = set(), {}
    in_fence = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and re.match(r"^#{1,6} ", line):
            base = slug(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def step_links(source):
    problems = []
    for page, text in pages(source):
        folder = os.path.dirname(os.path.join(source, page))
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z]+:", target):
                continue  # an absolute address, not ours to check
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(folder, path)) if path else os.path.join(source, page)
            if not os.path.exists(full):
                problems.append(f"{page}: link to {target}: no file {os.path.relpath(full, source)}")
                continue
            if anchor:
                if not full.endswith(".md"):
                    problems.append(f"{page}: link to {target}: an anchor into a file that is not Markdown")
                elif anchor not in anchors(open(full, encoding="utf-8").read()):
                    problems.append(f"{page}: link to {target}: {os.path.relpath(full, source)} "
                                    f"has no heading with the anchor #{anchor}")
    if problems:
        raise Failure("broken links:\n" + "\n".join(problems))
    print("every relative link and anchor of README.md and docs/*.md resolves")


def program_source(source, word):
    """The source text that holds the options of a program or script a command runs."""
    if word.endswith("bench/quota-bench"):
        return open(os.path.join(source, "bench", "main.cpp"), encoding="utf-8").read()
    if word.endswith("tools/quotactl/quotactl") or word == "quotactl":
        return "".join(open(f, encoding="utf-8").read()
                       for f in glob.glob(os.path.join(source, "tools", "quotactl", "*.cpp")))
    if word.startswith(("tools/", "bench/")) and os.path.isfile(os.path.join(source, word)):
        return open(os.path.join(source, word), encoding="utf-8").read()
    return None


def check_commands(source, page, line, body):
    problems = []
    for text in body.splitlines():
        command = text.split(" #", 1)[0]
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        program = None
        for word in words:
            if re.match(r"^(tools|bench|fuzz|examples|tests|include|src)/", word):
                if not os.path.exists(os.path.join(source, word)):
                    problems.append(f"{page}:{line}: {word} does not exist")
            known = program_source(source, word)
            if known is not None:
                program = known
                continue
            if program is not None and word.startswith("--"):
                option = word.split("=", 1)[0]
                if option not in program:
                    problems.append(f"{page}:{line}: {option} is not an option of its program")
    return problems


def step_markers(source):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import package_test  # the steps that use test-file blocks say which they use
    problems, files = [], {}
    for page, text in pages(source):
        for line, kind, argument, info, body in blocks(text):
            if kind is None:
                problems.append(f"{page}:{line}: a ```{info} block without a marker "
                                "(<!-- test-file: NAME -->, test-shell, test-sqlite3: FILE or "
                                "test-commands: WHY; see tests/embedding/docs_test.py)")
            elif kind == "test-file":
                if argument in files:
                    problems.append(f"{page}:{line}: test-file {argument} again (first in "
                                    f"{files[argument]})")
                files[argument] = f"{page}:{line}"
            elif kind == "test-commands":
                if not argument:
                    problems.append(f"{page}:{line}: test-commands without a reason")
                problems += check_commands(source, page, line, body)
            elif kind == "test-sqlite3" and not argument:
                problems.append(f"{page}:{line}: test-sqlite3 without a database file")
            elif kind == "test-postgresql":
                if not argument:
                    problems.append(f"{page}:{line}: test-postgresql without the URI it shows")
                problems += check_commands(source, page, line, "\n".join(
                    text[2:] for text in body.split("\n") if text.startswith("$ ")))
    for name in sorted(set(files) - set(package_test.USED_FILES)):
        problems.append(f"{files[name]}: test-file {name} is used by no package_test.py step")
    for name in sorted(set(package_test.USED_FILES) - set(files)):
        problems.append(f"package_test.py uses a test-file {name} that no page has")
    if problems:
        raise Failure("\n".join(problems))
    print(f"every block of README.md and docs/*.md is marked; {len(files)} test files, all used")


def normalized(text):
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n"))


def compare(page, line, what, shown, printed):
    if normalized(shown) != normalized(printed):
        raise Failure(f"{page}:{line}: {what} printed\n{printed}\ninstead of\n{shown}")


def run_shell(page, line, body, folder, env):
    for command, shown in session_commands(page, line, body):
        completed = subprocess.run(command, shell=True, cwd=folder, env=env, text=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=60)
        compare(page, line, f"`{command}`", shown, completed.stdout)


def run_sqlite3(page, line, database, body, folder, env):
    lines = body.rstrip("\n").split("\n")
    if any(PROMPT.match(text) for text in lines):
        stdin = "".join(PROMPT.sub("", text) + "\n" for text in lines if PROMPT.match(text))
        shown = "".join(text + "\n" for text in lines if not PROMPT.match(text))
        command = ["sqlite3", database]
    else:
        stdin, shown, command = body, "", ["sqlite3", "-bail", database]
    completed = subprocess.run(command, cwd=folder, env=env, input=stdin, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    compare(page, line, f"sqlite3 {database}", shown, completed.stdout)


def session_commands(page, line, body):
    """The (command, shown output) pairs of a session block."""
    commands = []
    for text in body.rstrip("\n").split("\n"):
        if text.startswith("$ "):
            commands.append([text[2:], ""])
        elif not commands:
            raise Failure(f"{page}:{line}: a session block must start with `$ `")
        else:
            commands[-1][1] += text + "\n"
    return commands


def masked(uri):
    """The URI as quota shows it: the password of user:PASSWORD@ and of password= as ***."""
    uri = re.sub(r"^([a-z]+://[^:/@?]*):[^@/?]*@", r"\1:***@", uri)
    return re.sub(r"(password=)[^&]*", r"\1***", uri)


def psql(uri, sql):
    completed = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", uri, "-c", sql],
                               text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
    if completed.returncode != 0:
        raise Failure(f"psql on the test server failed ({sql}):\n{completed.stdout}")


def with_database(uri, name):
    """`uri` with its database name replaced by `name`."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def step_postgresql(source, quotactl):
    server = os.environ.get("QUOTA_TEST_POSTGRES")
    if not server:
        raise Failure("$QUOTA_TEST_POSTGRES is not set: the test-postgresql blocks need a "
                      "PostgreSQL server; tools/test.sh starts one (docs/testing.md), or set it to "
                      "the URI of a server where this user may create databases")
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(quotactl)) + os.pathsep +
               os.environ.get("PATH", ""))
    env.pop("QUOTA_DB", None)
    env.pop("QUOTA_TEST_POSTGRES", None)
    count = 0
    for number, (page, text) in enumerate(pages(source)):
        found = [block for block in blocks(text) if block[1] == "test-postgresql"]
        if not found:
            continue
        name = f"quota_docs_{os.getpid()}_{number}"
        fresh = with_database(server, name)
        psql(server, f"CREATE DATABASE {name}")
        try:
            with tempfile.TemporaryDirectory() as folder:
                os.symlink(os.path.abspath(os.path.join(source, "docs")),
                           os.path.join(folder, "docs"))
                page_env = dict(env)
                for line, _, shown_uri, _, body in found:
                    for command, shown in session_commands(page, line, body):
                        command = command.replace(shown_uri, fresh)
                        shown = shown.replace(masked(shown_uri), masked(fresh))
                        assignment = re.match(r"^export (\w+)=(.*)$", command)
                        if assignment:
                            page_env[assignment.group(1)] = shlex.split(assignment.group(2))[0]
                            printed = ""
                        else:
                            printed = subprocess.run(
                                command, shell=True, cwd=folder, env=page_env, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=60).stdout
                        compare(page, line, f"`{command}`", shown, printed)
                    count += 1
        finally:
            psql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    print(f"{count} PostgreSQL sessions of README.md and docs/*.md print what they show")


def run_demo(source, quotactl, folder, env):
    """tools/demo.sh's demo in `folder`: the ./quota.db that README.md's first command leaves."""
    completed = subprocess.run(
        ["bash", os.path.abspath(os.path.join(source, "tools", "demo.sh")), "--quotactl",
         os.path.abspath(quotactl)],
        cwd=folder, env=env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, timeout=120)
    if completed.returncode != 0 or not os.path.exists(os.path.join(folder, "quota.db")):
        raise Failure(f"tools/demo.sh --quotactl exited {completed.returncode} without leaving "
                      f"./quota.db:\n{completed.stdout}")


def step_sessions(source, quotactl):
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(quotactl)) + os.pathsep +
               os.environ.get("PATH", ""))
    env.pop("QUOTA_DB", None)
    count = 0
    for page, text in pages(source):
        with tempfile.TemporaryDirectory() as folder:
            if page == "README.md":
                run_demo(source, quotactl, folder, env)
            for line, kind, argument, _, body in blocks(text):
                if kind == "test-shell":
                    run_shell(page, line, body, folder, env)
                elif kind == "test-sqlite3":
                    run_sqlite3(page, line, argument, body, folder, env)
                else:
                    continue
                count += 1
    print(f"{count} sessions of README.md and docs/*.md print what they show")


def step_headline(source):
    completed = subprocess.run(
        [sys.executable, os.path.join(source, "bench", "scripts", "headline.py"), "--run",
         os.path.join(source, "bench", "results", "baseline.json"), "--check",
         os.path.join(source, "README.md")], text=True)
    if completed.returncode != 0:
        raise Failure("the README's performance table is not the saved run's")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["markers", "links", "sessions", "postgresql", "headline"])
    parser.add_argument("--source", required=True)
    parser.add_argument("--quotactl", help="the quotactl the sessions run (step sessions)")
    args = parser.parse_args()
    try:
        if args.step == "markers":
            step_markers(args.source)
        elif args.step == "links":
            step_links(args.source)
        elif args.step == "sessions":
            if not args.quotactl:
                raise Failure("sessions needs --quotactl PROGRAM")
            step_sessions(args.source, args.quotactl)
        elif args.step == "postgresql":
            if not args.quotactl:
                raise Failure("postgresql needs --quotactl PROGRAM")
            step_postgresql(args.source, args.quotactl)
        else:
            step_headline(args.source)
    except Failure as failure:
        print(f"FAILED ({args.step}): {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
