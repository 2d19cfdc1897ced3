#!/usr/bin/env python3
"""The README's headline performance table, made from a saved quota-bench run.

  bench/scripts/headline.py [--run bench/results/baseline.json] --update README.md
  bench/scripts/headline.py [--run bench/results/baseline.json] --check README.md

--update writes the table between the README's `<!-- bench-headline:begin -->` and
`<!-- bench-headline:end -->` lines (tools/bench.sh does, after every full run and with
--docs-only); --check exits with status 1 when the README's table is not the one the run
gives (the docs test runs it, so the README never shows figures of another run).
"""
import argparse
import json
import sys

BEGIN, END = "<!-- bench-headline:begin -->", "<!-- bench-headline:end -->"
ROWS = [
    ("upsert_int", "the floor: SQLite's bare upsert of one counter row"),
    ("article", "the SQL-only design of the article \"SQLite-only Rate Limiting\""),
    ("consume/fixed_window", "`consume`, `fixed_window`"),
    ("consume/sliding_window", "`consume`, `sliding_window`"),
    ("consume/token_bucket", "`consume`, `token_bucket`"),
    ("consume/sliding_log", "`consume`, `sliding_log`"),
]


def rate(ops):
    return f"{ops / 1000:.1f}k" if ops >= 10000 else f"{ops:.0f}"


def table(run):
    cases = {case["name"]: case for case in run["cases"]}
    lines = ["| 1,000 owners | a file (WAL, `synchronous=NORMAL`): ops/s | × floor | `:memory:`: ops/s | × floor |",
             "|---|---:|---:|---:|---:|"]
    for name, label in ROWS:
        cells = [label]
        for setting in ["wal_normal", "memory"]:
            key = f"{name}/{setting}/1000"
            if key not in cases:
                sys.exit(f"headline: the run has no case {key}: give a full run (bash tools/bench.sh)")
            case = cases[key]
            cells += [rate(case["ops_per_s"]), f"{case['ratios']['upsert']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    machine = run["machine"]
    lines.append("")
    lines.append(f"{machine['cpu']}, {machine['cores']} cores, SQLite {machine['sqlite']}, "
                 f"{machine['build_type']}; run of {machine['date'][:10]}, load average "
                 f"{machine['load_average_before']} before.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="bench/results/baseline.json")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--update", metavar="README")
    action.add_argument("--check", metavar="README")
    args = parser.parse_args()
    with open(args.run, encoding="utf-8") as saved:
        wanted = table(json.load(saved))
    path = args.update or args.check
    with open(path, encoding="utf-8") as readme:
        text = readme.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"headline: {path} has no {BEGIN} ... {END} lines to put the table between")
    head, rest = text.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    if args.check:
        if current.strip() != wanted:
            print(f"headline: {path}'s table is not the one {args.run} gives; run "
                  f"bash tools/bench.sh --docs-only. Wanted:\n{wanted}", file=sys.stderr)
            return 1
        print(f"{path}: the headline table is {args.run}'s")
        return 0
    with open(path, "w", encoding="utf-8") as readme:
        readme.write(f"{head}{BEGIN}\n{wanted}\n{END}{tail}")
    print(f"{path}: headline table updated from {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
