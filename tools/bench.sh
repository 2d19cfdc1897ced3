#!/usr/bin/env bash
# The full benchmark: builds quota-bench (Release), runs every case, keeps the run's JSON in
# bench/results/baseline.json, writes its tables into docs/performance.md (between the
# bench-results markers) and the README's headline table (bench/scripts/headline.py).
# About 7 minutes; run it when the machine is quiet (uptime's load average is recorded).
#
#   bash tools/bench.sh                  measure, then update the JSON and docs/performance.md
#   bash tools/bench.sh --docs-only      only re-render docs/performance.md's tables and the
#                                        README's headline from the saved JSON
#   bash tools/bench.sh --filter consume other quota-bench options are passed on (a filtered
#                                        run is written to build/release/bench/run.json and
#                                        leaves the saved JSON and the docs alone)
#   bash tools/bench.sh --postgresql     the PostgreSQL cases alone, on a private server that
#                                        tools/postgres.sh starts (and removes) for the run,
#                                        3 s per case: bench/results/postgresql.json and the
#                                        tables of docs/performance.md's section "PostgreSQL"
#                                        (between the bench-postgresql markers); about 6 minutes
set -euo pipefail
cd "$(dirname "$0")/.."

saved=bench/results/baseline.json
saved_postgresql=bench/results/postgresql.json
bench=build/release/bench/quota-bench
docs_only=0
postgresql=0
if [ "${1:-}" = "--docs-only" ]; then docs_only=1; shift; fi
if [ "${1:-}" = "--postgresql" ]; then postgresql=1; shift; fi

# Puts the tables of a saved run between <!-- NAME:begin --> and <!-- NAME:end --> in
# docs/performance.md.
put_tables() {
  "$bench" --report "$1" --markdown > build/release/bench/tables.md
  python3 - build/release/bench/tables.md docs/performance.md "$2" <<'PY'
import re, sys
tables = open(sys.argv[1]).read().strip()
path, name = sys.argv[2], sys.argv[3]
text = open(path).read()
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} ... {end} markers to put the tables between")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(f"{head}{begin}\n{tables}\n{end}{tail}")
print(f"{path}: tables updated from {sys.argv[1]}")
PY
}

bash tools/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target quota-bench >/dev/null

if ((postgresql)); then
  # shellcheck source=tools/postgres.sh
  source tools/postgres.sh
  postgres_start
  mkdir -p "$(dirname "$saved_postgresql")"
  "$bench" --postgres "$QUOTA_TEST_POSTGRES" --filter postgresql --duration 3 "$@" \
    --out "$saved_postgresql"
  put_tables "$saved_postgresql" bench-postgresql
  exit 0
fi

if ((!docs_only)); then
  if (($#)); then
    "$bench" --out build/release/bench/run.json "$@"
    exit 0
  fi
  mkdir -p "$(dirname "$saved")"
  "$bench" --out "$saved"
fi

put_tables "$saved" bench-results
if [ -f "$saved_postgresql" ]; then put_tables "$saved_postgresql" bench-postgresql; fi
python3 bench/scripts/headline.py --run "$saved" --update README.md
