#!/usr/bin/env python3
"""The packaging tests: STEP is one of

  exports           the shared library (--library) exports the API and nothing else
  install           `cmake --install` of --build into WORK/prefix, and what lands there
  find_package      README's find_package project against WORK/prefix, and the same project
                    with docs/concepts.md's calendar example as its main.cpp
  pkg_config        README's pkg-config commands (C++ and the C API) against WORK/prefix
  add_subdirectory  README's add_subdirectory project against --source
  shared            a BUILD_SHARED_LIBS=ON build of --source, installed and used by README's
                    find_package project and pkg-config command
  sqlite_only       (a build without PostgreSQL) WORK/prefix, as `install` left it, has no libpq
                    anywhere: ldd of the library and quotactl, pkg-config's requirements, the
                    CMake files; find_package(quota COMPONENTS SQLite) works and PostgreSQL fails;
                    a postgresql:// location is refused clearly (Engine::open, quotactl exit 2)
  backend_options   QUOTA_SQLITE and QUOTA_POSTGRESQL: a value other than AUTO, ON or OFF, SQLite
                    OFF, and PostgreSQL ON without libpq each fail to configure, saying what to
                    do; AUTO without libpq configures SQLite alone
  components        find_package(quota COMPONENTS ...) against WORK/prefix: a backend's name in
                    any case is that backend; an unknown or missing component fails with a message
                    that names the components there are, and the option that builds a backend
  demo_install      a fresh build of the targets tools/demo.sh builds, then `cmake --install`
                    of it (as README.md offers after the demo): every file is there; and every
                    target cmake/install.cmake installs is one the demo's target builds
  python_readme     examples/python/README.md's commands, literally: install --build into a
                    fresh prefix, run the binding's demo (--check) and its app.py against the
                    shared library installed there; then README's Python example against it

The documentation's code is the test's code: every fenced block of README.md and docs/*.md
preceded by a line `<!-- test-file: NAME -->` is written to NAME in a scratch project, and
NAME.out, when present, is the exact output the program must print (docs_test.py checks that
every block has a marker and that every test-file is in USED_FILES). Everything runs
offline, in WORK/STEP (emptied first). With --sanitize-flags, programs linked against
--build's instrumented library are compiled and linked with those flags (for the README's
shell commands, through `cc` and `c++` wrappers put first in PATH).
"""
import argparse
import ctypes.util
import glob
import os
import re
import shutil
import subprocess
import sys
import urllib.request

README_FILE = re.compile(r"<!-- test-file: (\S+) -->\n```[\w+-]*\n(.*?)```\n", re.S)
# Every test-file block a step below uses; docs_test.py fails on a block outside this list.
USED_FILES = ["main.cpp", "main.cpp.out", "find_package/CMakeLists.txt",
              "add_subdirectory/CMakeLists.txt", "pkg-config.sh", "c-api/main.c",
              "c-api/pkg-config.sh", "c-api/main.c.out", "c-api-calendar/main.c",
              "c-api-calendar/main.c.out", "c-api-leases/main.c", "c-api-leases/main.c.out",
              "python/app.py", "python/app.py.out",
              "calendar/main.cpp", "calendar/main.cpp.out", "components/CMakeLists.txt",
              "prometheus/CMakeLists.txt", "prometheus/main.cpp", "prometheus/decisions.out",
              "leases/main.cpp", "leases/main.cpp.out"]
API_SYMBOL = re.compile(r"^(quota_\w+|quota::.*|(typeinfo|typeinfo name|vtable) for quota::.*)$")


class Failure(Exception):
    pass


def run(command, cwd=None, env=None, capture=False):
    print("+", " ".join(command) if isinstance(command, list) else command, flush=True)
    completed = subprocess.run(command, cwd=cwd, env=env, shell=isinstance(command, str),
                               stdout=subprocess.PIPE if capture else None,
                               stderr=subprocess.STDOUT if capture else None, text=True)
    if completed.returncode != 0:
        if capture:
            print(completed.stdout)
        raise Failure(f"exit status {completed.returncode}: {command}")
    return completed.stdout


def markdown_files(path):
    with open(path, encoding="utf-8") as markdown:
        files = dict(README_FILE.findall(markdown.read()))
    if not files:
        raise Failure(f"{path} has no `<!-- test-file: NAME -->` blocks")
    return files


def readme_files(source):
    """The test-file blocks of README.md and docs/*.md, by name."""
    files = {}
    for path in [os.path.join(source, "README.md")] + sorted(glob.glob(f"{source}/docs/*.md")):
        with open(path, encoding="utf-8") as page:
            files.update(README_FILE.findall(page.read()))
    if not files:
        raise Failure("README.md and docs/*.md have no `<!-- test-file: NAME -->` blocks")
    return files


def write_project(files, directory, names):
    """Writes README blocks `names` into `directory`; a name's first path part is dropped
    (find_package/CMakeLists.txt -> CMakeLists.txt)."""
    os.makedirs(directory, exist_ok=True)
    for name in names:
        if name not in files:
            raise Failure(f"README.md and docs/*.md lack the block {name}")
        with open(os.path.join(directory, os.path.basename(name)), "w", encoding="utf-8") as out:
            out.write(files[name])


def run_program(files, program, expected_name, cwd, env=None):
    """Runs `program` in the empty folder `cwd` and compares its output with README's
    block `expected_name`."""
    os.makedirs(cwd, exist_ok=True)
    output = run([program], cwd=cwd, env=env, capture=True)
    if output != files[expected_name]:
        raise Failure(f"{program} printed\n{output}\ninstead of README's {expected_name}:\n"
                      f"{files[expected_name]}")
    print(output, end="")


def configure_and_build(args, source, build, extra, target=None, sanitized=False):
    flags = args.sanitize_flags if sanitized else ""
    command = [args.cmake, "-S", source, "-B", build, "-G", args.generator,
               f"-DCMAKE_C_COMPILER={args.cc}", f"-DCMAKE_CXX_COMPILER={args.cxx}",
               # A plain, quick build: no optimisation, no debug information.
               "-DCMAKE_BUILD_TYPE=Debug", f"-DCMAKE_C_FLAGS_DEBUG=-O0 {flags}",
               f"-DCMAKE_CXX_FLAGS_DEBUG=-O0 {flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}"]
    run(command + extra, capture=True)
    build_command = [args.cmake, "--build", build, "--parallel", "2"]
    if target:
        build_command += ["--target", target]
    run(build_command, capture=True)


def find_one(pattern):
    found = glob.glob(pattern)
    if len(found) != 1:
        raise Failure(f"expected exactly one {pattern}, found {found}")
    return found[0]


def check_exports(library):
    output = run(["nm", "-D", "--defined-only", "--demangle", library], capture=True)
    names = [line.split(" ", 2)[2] for line in output.splitlines() if line.count(" ") >= 2]
    strays = [name for name in names if not API_SYMBOL.match(name)]
    if strays:
        raise Failure(f"{library} exports more than the API:\n" + "\n".join(strays[:20]))
    for wanted in ["quota_consume", "quota_last_error", "typeinfo for quota::Error"]:
        if wanted not in names:
            raise Failure(f"{library} does not export {wanted}")
    if not any(name.startswith("quota::Engine::consume(") for name in names):
        raise Failure(f"{library} does not export quota::Engine::consume")
    if any("detail::" in name for name in names):
        raise Failure(f"{library} exports internals (quota::detail)")
    print(f"{library}: {len(names)} symbols, all of them API")


def check_installed(prefix, quotactl):
    for header in ["engine", "error", "export", "limit", "quota", "result", "version"]:
        find_one(f"{prefix}/include/quota/{header}.h")
    if glob.glob(f"{prefix}/include/quota/*detail*") or glob.glob(f"{prefix}/include/*.h"):
        raise Failure("internal headers were installed")
    find_one(f"{prefix}/share/quota/migrations/0001_initial.sql")
    find_one(f"{prefix}/share/quota/schema.sql")
    find_one(f"{prefix}/lib*/cmake/quota/quotaConfig.cmake")
    find_one(f"{prefix}/lib*/cmake/quota/quotaConfigVersion.cmake")
    find_one(f"{prefix}/lib*/pkgconfig/quota.pc")
    if quotactl:
        program = find_one(f"{prefix}/bin/quotactl")
        run([program, "--db", f"{prefix}/check.db", "migrate"], capture=True)
        os.remove(f"{prefix}/check.db")


def compiler_wrappers(args, directory):
    """`cc` and `c++` that add the sanitizer flags, for README's literal shell commands."""
    os.makedirs(directory, exist_ok=True)
    for name, real in [("cc", args.cc), ("c++", args.cxx)]:
        path = os.path.join(directory, name)
        with open(path, "w") as wrapper:
            wrapper.write(f'#!/bin/sh\nexec "{real}" {args.sanitize_flags} "$@"\n')
        os.chmod(path, 0o755)


def pkg_config_builds(args, files, work, prefix, env):
    """README's two pkg-config commands, each run by sh in a folder holding its source (the C
    one also for embedding.md's calendar example)."""
    env = dict(env, PKG_CONFIG_PATH=os.path.dirname(find_one(f"{prefix}/lib*/pkgconfig/quota.pc")))
    for source, script, expected in [("main.cpp", "pkg-config.sh", "main.cpp.out"),
                                     ("c-api/main.c", "c-api/pkg-config.sh", "c-api/main.c.out"),
                                     ("c-api-calendar/main.c", "c-api/pkg-config.sh",
                                      "c-api-calendar/main.c.out"),
                                     ("c-api-leases/main.c", "c-api/pkg-config.sh",
                                      "c-api-leases/main.c.out")]:
        project = os.path.join(work, os.path.dirname(source) or "cpp")
        write_project(files, project, [source])
        run(files[script], cwd=project, env=env)
        run_program(files, os.path.join(project, "app"), expected, os.path.join(project, "run"),
                    env=env)


def check_shared_twin(args, prefix):
    """A static build installs its shared twin's runtime files for FFIs, without the
    libquota.so link that would make -lquota pick it over libquota.a."""
    find_one(f"{prefix}/lib*/libquota.a")
    soname = ".".join(args.version.split(".")[:2])
    library = find_one(f"{prefix}/lib*/libquota.so.{args.version}")
    link = find_one(f"{prefix}/lib*/libquota.so.{soname}")
    if os.path.realpath(link) != os.path.realpath(library):
        raise Failure(f"{link} does not point at {library}")
    if glob.glob(f"{prefix}/lib*/libquota.so"):
        raise Failure("a static build installed the libquota.so link: -lquota would link the "
                      "shared twin instead of libquota.a")
    check_exports(library)
    return link


def step_install(args, work):
    prefix = os.path.join(work, "prefix")
    run([args.cmake, "--install", args.build, "--prefix", prefix], capture=True)
    check_installed(prefix, quotactl=True)
    check_shared_twin(args, prefix)


def installed_consumer(args, work, files, name, blocks, expected):
    """Builds the blocks `blocks` against the installed prefix in WORK/NAME and checks that
    the program prints the block `expected`. Returns the installed prefix and the project."""
    prefix = os.path.join(os.path.dirname(work), "install", "prefix")
    project = os.path.join(work, name)
    write_project(files, project, blocks)
    configure_and_build(args, project, os.path.join(work, f"{name}-build"),
                        [f"-DCMAKE_PREFIX_PATH={prefix}"], sanitized=True)
    run_program(files, os.path.join(work, f"{name}-build", "app"), expected,
                os.path.join(work, f"{name}-run"))
    return prefix, project


def step_find_package(args, work, files):
    installed_consumer(args, work, files, "project", ["find_package/CMakeLists.txt", "main.cpp"],
                       "main.cpp.out")
    installed_consumer(args, work, files, "calendar",
                       ["find_package/CMakeLists.txt", "calendar/main.cpp"],
                       "calendar/main.cpp.out")
    installed_consumer(args, work, files, "leases",
                       ["find_package/CMakeLists.txt", "leases/main.cpp"],
                       "leases/main.cpp.out")


def step_prometheus(args, work, files):
    """The exporter of docs/embedding.md (the one of include/quota/prometheus.h) built against
    the installed package (a build with QUOTA_PROMETHEUS on) with nothing but
    find_package(quota COMPONENTS prometheus) and quota::prometheus: it links (the Exposer
    included), serves /metrics, and a scrape shows the decisions the docs show."""
    prefix = os.path.join(os.path.dirname(work), "install", "prefix")
    project = os.path.join(work, "project")
    write_project(files, project, ["prometheus/CMakeLists.txt", "prometheus/main.cpp"])
    build = os.path.join(work, "project-build")
    configure_and_build(args, project, build, [f"-DCMAKE_PREFIX_PATH={prefix}"], sanitized=True)
    # Any free port here (the docs' 127.0.0.1:9464 may be taken on a test machine).
    server = subprocess.Popen([os.path.join(build, "app"), "127.0.0.1:0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        match = re.match(r"serving (http://127\.0\.0\.1:\d+/metrics)$", line.strip())
        if not match:
            raise Failure(f"the exporter printed {line!r}, "
                          "not serving http://127.0.0.1:PORT/metrics")
        with urllib.request.urlopen(match.group(1), timeout=10) as response:
            text = response.read().decode()
    finally:
        server.kill()
        server.wait()
    scraped = "".join(line + "\n" for line in text.splitlines()
                      if line.startswith("quota_decisions_total"))
    if scraped != files["prometheus/decisions.out"]:
        raise Failure(f"the scrape's decisions are\n{scraped}\ninstead of the docs'\n"
                      f"{files['prometheus/decisions.out']}")
    print(scraped, end="")
    # A package built without it: find_package refuses the component and says how to get it.
    without = os.path.join(work, "without")
    shutil.copytree(prefix, without, symlinks=True)
    for path in glob.glob(f"{without}/lib*/cmake/quota/quotaPrometheusTargets*.cmake"):
        os.remove(path)
    refused = subprocess.run(
        [args.cmake, "-S", project, "-B", os.path.join(work, "without-build"),
         "-G", args.generator, f"-DCMAKE_CXX_COMPILER={args.cxx}",
         f"-DCMAKE_PREFIX_PATH={without}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if refused.returncode == 0 or "-DQUOTA_PROMETHEUS=ON" not in refused.stdout:
        print(refused.stdout)
        raise Failure("find_package(quota COMPONENTS prometheus) of a package without it "
                      "did not fail saying how to build it")


def step_pkg_config(args, work, files):
    prefix = os.path.join(os.path.dirname(work), "install", "prefix")
    # A shared libquota in a prefix of the test's own is found through LD_LIBRARY_PATH.
    libdir = os.path.dirname(find_one(f"{prefix}/lib*/pkgconfig"))
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    if args.sanitize_flags:
        wrappers = os.path.join(work, "wrappers")
        compiler_wrappers(args, wrappers)
        env["PATH"] = wrappers + os.pathsep + env["PATH"]
    pkg_config_builds(args, files, work, prefix, env)


def step_add_subdirectory(args, work, files):
    project = os.path.join(work, "project")
    write_project(files, project, ["add_subdirectory/CMakeLists.txt", "main.cpp"])
    os.makedirs(os.path.join(project, "third_party"))
    os.symlink(args.source, os.path.join(project, "third_party", "quota"))
    build = os.path.join(work, "build")
    configure_and_build(args, project, build, [], target="app")
    run_program(files, os.path.join(build, "app"), "main.cpp.out", os.path.join(work, "run"))
    # quota is not the top-level project here: no tests, no quotactl, no install rules.
    subbuild = os.path.join(build, "third_party", "quota")
    for absent in ["tests", "tools/quotactl", "examples"]:
        if os.path.exists(os.path.join(subbuild, absent)):
            raise Failure(f"quota as a subproject configured its {absent}")
    prefix = os.path.join(work, "prefix")
    run([args.cmake, "--install", build, "--prefix", prefix], capture=True)
    if os.path.exists(os.path.join(prefix, "include", "quota")):
        raise Failure("quota as a subproject installed its headers")


def step_shared(args, work, files):
    build = os.path.join(work, "build")
    prefix = os.path.join(work, "prefix")
    configure_and_build(args, args.source, build,
                        ["-DBUILD_SHARED_LIBS=ON", "-DQUOTA_TESTS=OFF", "-DQUOTA_QUOTACTL=OFF",
                         "-DQUOTA_EXAMPLES=OFF"])
    run([args.cmake, "--install", build, "--prefix", prefix], capture=True)
    check_installed(prefix, quotactl=False)
    if glob.glob(f"{prefix}/lib*/libquota.a"):
        raise Failure("a shared build installed a static library")
    library = find_one(f"{prefix}/lib*/libquota.so.{args.version}")
    find_one(f"{prefix}/lib*/libquota.so")
    check_exports(library)

    project = os.path.join(work, "project")
    write_project(files, project, ["find_package/CMakeLists.txt", "main.cpp"])
    consumer = os.path.join(work, "consumer")
    configure_and_build(args, project, consumer, [f"-DCMAKE_PREFIX_PATH={prefix}"])
    needed = run(["readelf", "-d", os.path.join(consumer, "app")], capture=True)
    if "libquota.so" not in needed:
        raise Failure("the find_package consumer does not link libquota.so")
    run_program(files, os.path.join(consumer, "app"), "main.cpp.out", os.path.join(work, "run"))

    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    pkg_config_builds(args, files, os.path.join(work, "pkg-config"), prefix, env)


NO_POSTGRESQL = ("this build of quota has no PostgreSQL support (configure with "
                 "-DQUOTA_POSTGRESQL=ON and libpq-dev installed)")
LIBPQ = re.compile(r"libpq|postgres", re.I)
# What in a CMake file would bring libpq: its name, PostgreSQL's imported targets, or a search
# for them (the component's name and the message of a build without it may be spelled).
CMAKE_LIBPQ = re.compile(r"libpq(?!-dev)|PostgreSQL::|find_(?:dependency|package)\(\s*PostgreSQL",
                         re.I)


# Engine::open on a file works; on a PostgreSQL location it throws the error that says how to
# get a build that has it, without the password, and creates nothing.
REFUSAL_MAIN = r"""#include <quota/engine.h>

#include <filesystem>
#include <iostream>

int main() {
  quota::Engine engine = quota::Engine::open("app.db");
  engine.define({"l", quota::Algorithm::fixed_window, 1, std::chrono::minutes(1), std::nullopt});
  if (!engine.consume("l", "o").allowed || engine.consume("l", "o").allowed) return 1;
  try {
    quota::Engine::open("postgresql://user:secret@localhost/app");
  } catch (const quota::Error& error) {
    const std::string what = error.what();
    if (error.code() != quota::ErrorCode::invalid_argument ||
        what.find("secret") != std::string::npos) {
      std::cout << "wrong error: " << what << "\n";
      return 1;
    }
    std::cout << what << "\n";
    return std::filesystem::exists("postgresql:") ? 1 : 0;
  }
  std::cout << "opened a PostgreSQL location\n";
  return 1;
}
"""


def no_libpq(what, text, pattern=LIBPQ):
    found = pattern.search(text)
    if found:
        raise Failure(f"{what} names {found.group(0)}:\n{text}")
    print(f"{what}: no libpq")


def step_sqlite_only(args, work, files):
    prefix = os.path.join(os.path.dirname(work), "install", "prefix")
    library = find_one(f"{prefix}/lib*/libquota.so.{args.version}")
    quotactl = find_one(f"{prefix}/bin/quotactl")
    for program in [library, quotactl]:
        no_libpq(f"ldd {program}", run(["ldd", program], capture=True))
    env = dict(os.environ,
               PKG_CONFIG_PATH=os.path.dirname(find_one(f"{prefix}/lib*/pkgconfig/quota.pc")))
    for flags in [["--print-requires", "--static"], ["--print-requires-private"],
                  ["--libs", "--static"]]:
        no_libpq(f"pkg-config {' '.join(flags)} quota",
                 run(["pkg-config"] + flags + ["quota"], env=env, capture=True))
    for path in sorted(glob.glob(f"{prefix}/lib*/cmake/quota/*.cmake")):
        with open(path, encoding="utf-8") as config:
            no_libpq(path, config.read(), CMAKE_LIBPQ)
    if glob.glob(f"{prefix}/share/quota/migrations/postgresql"):
        raise Failure("a build without PostgreSQL installed PostgreSQL's migrations")

    # The components (docs/embedding.md's project): SQLite is there, PostgreSQL is not.
    lists = files["components/CMakeLists.txt"]
    wanting_postgresql = lists.replace("COMPONENTS SQLite", "COMPONENTS PostgreSQL")
    if wanting_postgresql == lists:
        raise Failure("components/CMakeLists.txt does not ask for COMPONENTS SQLite")
    projects = {}
    for name, text in [("project", lists), ("missing", wanting_postgresql)]:
        projects[name] = os.path.join(work, name)
        os.makedirs(projects[name])
        with open(os.path.join(projects[name], "CMakeLists.txt"), "w", encoding="utf-8") as out:
            out.write(text)
        with open(os.path.join(projects[name], "main.cpp"), "w", encoding="utf-8") as out:
            out.write(REFUSAL_MAIN)
    refused = subprocess.run([args.cmake, "-S", projects["missing"], "-B",
                              os.path.join(work, "missing-build"), f"-DCMAKE_PREFIX_PATH={prefix}"],
                             capture_output=True, text=True)
    if refused.returncode == 0 or "PostgreSQL" not in refused.stdout + refused.stderr:
        raise Failure("find_package(quota REQUIRED COMPONENTS PostgreSQL) did not fail:\n"
                      + refused.stdout + refused.stderr)
    build = os.path.join(work, "build")
    configure_and_build(args, projects["project"], build, [f"-DCMAKE_PREFIX_PATH={prefix}"],
                        sanitized=True)
    configured = run([args.cmake, build], capture=True)
    if "quota backends: SQLite\n" not in configured:
        raise Failure(f"quota_BACKENDS is not SQLite alone:\n{configured}")
    scratch = os.path.join(work, "run")
    os.makedirs(scratch)
    output = run([os.path.join(build, "app")], cwd=scratch, capture=True)
    if NO_POSTGRESQL not in output:
        raise Failure(f"Engine::open on postgresql:// said {output!r}, not {NO_POSTGRESQL!r}")
    print(output, end="")

    # quotactl: a file works; a PostgreSQL location is bad input (exit 2), refused clearly.
    database = os.path.join(scratch, "cli.db")
    run([quotactl, "--db", database, "migrate"], capture=True)
    run([quotactl, "--db", database, "limit", "set", "l", "--max", "1", "--per", "1m"],
        capture=True)
    run([quotactl, "--db", database, "consume", "l", "o"], capture=True)
    for command in [["migrate"], ["consume", "l", "o"], ["status"]]:
        refused = subprocess.run([quotactl, "--db", "postgres://u:secret@localhost/app"] + command,
                                 capture_output=True, text=True)
        if (refused.returncode != 2 or NO_POSTGRESQL not in refused.stderr
                or "secret" in refused.stderr):
            raise Failure(f"quotactl {command} on postgres:// exited {refused.returncode} with "
                          f"{refused.stderr!r}, not 2 with {NO_POSTGRESQL!r}")
        print(f"quotactl {' '.join(command)}: {refused.stderr.strip()}")


def step_backend_options(args, work):
    """Configures --source (only configures: nothing is built) with each option value."""
    quiet = ["-DQUOTA_TESTS=OFF", "-DQUOTA_QUOTACTL=OFF", "-DQUOTA_EXAMPLES=OFF",
             "-DQUOTA_BENCH=OFF", "-DQUOTA_INSTALL=OFF"]
    # pkg-config looking in an empty folder finds no libpq, as on a machine without libpq-dev.
    no_libpq_dir = os.path.join(work, "no-pkgconfig")
    os.makedirs(no_libpq_dir)
    without_libpq = dict(os.environ, PKG_CONFIG_LIBDIR=no_libpq_dir, PKG_CONFIG_PATH="")
    cases = [(["-DQUOTA_POSTGRESQL=maybe"], None, False,
              "QUOTA_POSTGRESQL is 'maybe': give AUTO, ON or OFF"),
             (["-DQUOTA_SQLITE=OFF"], None, False, "configure with QUOTA_SQLITE=AUTO or ON"),
             (["-DQUOTA_POSTGRESQL=ON"], without_libpq, False,
              "QUOTA_POSTGRESQL=ON but libpq was not found: install libpq-dev and pkg-config, "
              "or configure with -DQUOTA_POSTGRESQL=OFF"),
             ([], without_libpq, True, "quota: backends SQLite\n")]
    for number, (options, env, succeeds, wanted) in enumerate(cases):
        build = os.path.join(work, f"build{number}")
        configured = subprocess.run([args.cmake, "-S", args.source, "-B", build, "-G",
                                     args.generator] + quiet + options, env=env,
                                    capture_output=True, text=True)
        # CMake wraps long messages: compare with the lines joined.
        said = re.sub(r"\s+", " ", configured.stdout + configured.stderr)
        if (configured.returncode == 0) != succeeds or re.sub(r"\s+", " ", wanted) not in said:
            raise Failure(f"configuring with {options} exited {configured.returncode}, "
                          f"without {wanted!r}:\n{configured.stdout}{configured.stderr}")
        print(f"{options or ['(AUTO, no libpq)']}: {wanted.strip()}")


def configure_components(args, work, name, prefix, request):
    """Configures a project whose only step is find_package(quota REQUEST): (exit status,
    output with its lines joined, as CMake wraps long messages)."""
    project = os.path.join(work, name)
    os.makedirs(project)
    with open(os.path.join(project, "CMakeLists.txt"), "w", encoding="utf-8") as out:
        out.write("cmake_minimum_required(VERSION 3.25)\nproject(components LANGUAGES CXX)\n"
                  f"find_package(quota {request})\n")
    configured = subprocess.run([args.cmake, "-S", project, "-B", f"{project}-build", "-G",
                                 args.generator, f"-DCMAKE_CXX_COMPILER={args.cxx}",
                                 f"-DCMAKE_PREFIX_PATH={prefix}"],
                                capture_output=True, text=True)
    said = re.sub(r"\s+", " ", configured.stdout + configured.stderr)
    print(f"find_package(quota {request}): exit {configured.returncode}")
    return configured.returncode, said


def step_components(args, work):
    prefix = os.path.join(os.path.dirname(work), "install", "prefix")
    config = find_one(f"{prefix}/lib*/cmake/quota/quotaConfig.cmake")
    with open(config, encoding="utf-8") as text:
        backends = re.search(r"^set\(quota_BACKENDS (.*)\)$", text.read(), re.M).group(1)
    shown = ", ".join(backends.split(";"))
    cases = [("found", "REQUIRED COMPONENTS sqlite", True, []),
             ("optional", "REQUIRED OPTIONAL_COMPONENTS mysql", True, []),
             ("unknown", "REQUIRED COMPONENTS mysql", False,
              [f"quota has no component 'mysql': its components are the backends this build "
               f"has ({shown}) and prometheus"]),
             ("prometheus", "REQUIRED COMPONENTS Prometheus", False,
              ["quota has no component 'Prometheus': the component is spelled prometheus"])]
    if "PostgreSQL" in backends.split(";"):
        cases.append(("both", "REQUIRED COMPONENTS SQLITE postgresql", True, []))
    for name, request, succeeds, wanted in cases:
        status, said = configure_components(args, work, name, prefix, request)
        if (status == 0) != succeeds or any(text not in said for text in wanted):
            raise Failure(f"find_package(quota {request}) exited {status}, not "
                          f"{'0' if succeeds else 'non-zero'} with {wanted}:\n{said}")
        if "-DQUOTA_MYSQL" in said or "-DQUOTA_PROMETHEUS=ON" in said and "Prometheus" in request:
            raise Failure(f"find_package(quota {request}) gave wrong advice:\n{said}")
    # A package with SQLite alone (its quota_BACKENDS cut so): PostgreSQL, in any case, is
    # refused with the option that builds it.
    alone = os.path.join(work, "sqlite-alone")
    shutil.copytree(prefix, alone, symlinks=True)
    config = find_one(f"{alone}/lib*/cmake/quota/quotaConfig.cmake")
    with open(config, encoding="utf-8") as text:
        edited = re.sub(r"^set\(quota_BACKENDS .*\)$", "set(quota_BACKENDS SQLite)", text.read(),
                        flags=re.M)
    with open(config, "w", encoding="utf-8") as out:
        out.write(edited)
    wanted = ("this build of quota has no PostgreSQL backend (it has SQLite): build and install "
              "it with -DQUOTA_POSTGRESQL=ON (libpq-dev)")
    status, said = configure_components(args, work, "missing", alone,
                                        "REQUIRED COMPONENTS postgresql")
    if status == 0 or wanted not in said:
        raise Failure(f"find_package(quota REQUIRED COMPONENTS postgresql) of a SQLite-only "
                      f"package exited {status} without {wanted!r}:\n{said}")


def step_demo_install(args, work):
    with open(os.path.join(args.source, "tools", "demo.sh"), encoding="utf-8") as script:
        demo = script.read()
    build_line = re.search(r"^\s*cmake --build build/release .*--target ([\w ]+?)\s*(?:>|$)", demo,
                           re.M)
    if not build_line:
        raise Failure("tools/demo.sh has no `cmake --build build/release ... --target ...` line")
    targets = build_line.group(1).split()
    with open(os.path.join(args.source, "cmake", "install.cmake"), encoding="utf-8") as rules:
        install_rules = rules.read()
    installed = set(re.findall(r"install\(TARGETS (\w+)", install_rules))
    gathered = re.search(r"foreach\(quota_installed ([\w ]+)\)", install_rules)
    missing = installed - set(gathered.group(1).split() if gathered else [])
    if missing:
        raise Failure(f"cmake/install.cmake installs {sorted(missing)}, which its target "
                      "quota_installable does not build")
    build = os.path.join(work, "build")
    configure_and_build(args, args.source, build, ["-DQUOTA_TESTS=OFF", "-DQUOTA_BENCH=OFF"],
                        target=targets[0])
    for target in targets[1:]:
        run([args.cmake, "--build", build, "--parallel", "2", "--target", target], capture=True)
    prefix = os.path.join(work, "prefix")
    run([args.cmake, "--install", build, "--prefix", prefix], capture=True)
    check_installed(prefix, quotactl=True)
    check_shared_twin(args, prefix)
    print(f"after building {' '.join(targets)} as tools/demo.sh does, cmake --install works")


def step_python_readme(args, work, files):
    guide = markdown_files(os.path.join(args.source, "examples", "python", "README.md"))
    # The guide's commands run from the top of the source tree, after its build commands:
    # here `build` is this build and `examples` the source's.
    os.symlink(args.build, os.path.join(work, "build"))
    os.symlink(os.path.join(args.source, "examples"), os.path.join(work, "examples"))
    write_project(guide, work, ["app.py"])
    run(guide["install.sh"], cwd=work, capture=True)
    check_installed(os.path.join(work, "prefix"), quotactl=True)
    library = check_shared_twin(args, os.path.join(work, "prefix"))
    print(run(guide["demo.sh"], cwd=work, capture=True), end="")
    # Given the static library, or nothing at all, the binding says what to give instead.
    demo = os.path.join(args.source, "examples", "python", "quota_ctypes.py")
    bare = {name: value for name, value in os.environ.items() if name != "QUOTA_LIBRARY"}
    cases = [(["--library", find_one(f"{work}/prefix/lib*/libquota.a")], "not libquota.a"),
             (["--library", os.path.join(work, "missing.so")], "not libquota.a")]
    if not ctypes.util.find_library("quota"):  # else this machine has one installed
        cases.append(([], "pass --library or set QUOTA_LIBRARY"))
    for library_arguments, wanted in cases:
        refused = subprocess.run([sys.executable, demo] + library_arguments, env=bare,
                                 capture_output=True, text=True)
        if refused.returncode != 2 or wanted not in refused.stderr:
            raise Failure(f"quota_ctypes.py {library_arguments} exited {refused.returncode} "
                          f"with {refused.stderr!r}, not 2 with {wanted!r}")
    output = run(guide["app.sh"], cwd=work, capture=True)
    if output != guide["app.py.out"]:
        raise Failure(f"app.py printed\n{output}\ninstead of examples/python/README.md's "
                      f"app.py.out:\n{guide['app.py.out']}")
    print(output, end="")

    # README's own Python example, against the library installed above.
    if "python/app.py" in files:
        readme = os.path.join(work, "readme")
        write_project(files, readme, ["python/app.py"])
        env = dict(os.environ, QUOTA_LIBRARY=library,
                   PYTHONPATH=os.path.join(args.source, "examples", "python"))
        output = run([sys.executable, os.path.join(readme, "app.py")], cwd=readme, env=env,
                     capture=True)
        if output != files["python/app.py.out"]:
            raise Failure(f"app.py printed\n{output}\ninstead of README's python/app.py.out")
        print(output, end="")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step")
    for option in ["source", "build", "work", "cmake", "generator", "cc", "cxx", "version",
                   "library"]:
        parser.add_argument(f"--{option}", required=True)
    parser.add_argument("--sanitize-flags", default="")
    args = parser.parse_args()
    work = os.path.join(args.work, args.step)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    files = readme_files(args.source)
    try:
        if args.step == "exports":
            check_exports(args.library)
        elif args.step == "install":
            step_install(args, work)
        elif args.step == "find_package":
            step_find_package(args, work, files)
        elif args.step == "prometheus":
            step_prometheus(args, work, files)
        elif args.step == "pkg_config":
            step_pkg_config(args, work, files)
        elif args.step == "add_subdirectory":
            step_add_subdirectory(args, work, files)
        elif args.step == "shared":
            step_shared(args, work, files)
        elif args.step == "backend_options":
            step_backend_options(args, work)
        elif args.step == "sqlite_only":
            step_sqlite_only(args, work, files)
        elif args.step == "components":
            step_components(args, work)
        elif args.step == "demo_install":
            step_demo_install(args, work)
        elif args.step == "python_readme":
            step_python_readme(args, work, files)
        else:
            raise Failure(f"unknown step {args.step}")
    except Failure as failure:
        print(f"FAILED ({args.step}): {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
