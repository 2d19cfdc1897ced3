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
set -euo pipefail
cd "$(dirname "$0")/.."

saved=bench/results/baseline.json
bench=build/release/bench/quota-bench
docs_only=0
if [ "${1:-}" = "--docs-only" ]; then docs_only=1; shift; fi

bash tools/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target quota-bench >/dev/null

if ((!docs_only)); then
  if (($#)); then
    "$bench" --out build/release/bench/run.json "$@"
    exit 0
  fi
  mkdir -p "$(dirname "$saved")"
  "$bench" --out "$saved"
fi

"$bench" --report "$saved" --markdown > build/release/bench/tables.md
python3 - build/release/bench/tables.md docs/performance.md <<'PY'
import re, sys
tables = open(sys.argv[1]).read().strip()
path = sys.argv[2]
text = open(path).read()
begin, end = "<!-- bench-results:begin -->", "<!-- bench-results:end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} ... {end} markers to put the tables between")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(f"{head}{begin}\n{tables}\n{end}{tail}")
print(f"{path}: tables updated from the saved run")
PY
python3 bench/scripts/headline.py --run "$saved" --update README.md
