#!/usr/bin/env bash
# Instructions per operation of quota-bench cases, counted by callgrind: stable on a noisy
# machine, so a change to a statement can be judged by one run.
#
#   bench/scripts/bench-instructions.sh consume/fixed_window/memory/1000
#   bench/scripts/bench-instructions.sh --annotate consume/sliding_log/wal_normal/1000
#   bench/scripts/bench-instructions.sh --operations 5000 upsert_int/memory/1000 check/token_bucket/memory/1000
#   bench/scripts/bench-instructions.sh --statement variant.sql [--setup drop.sql] consume/fixed_window/memory/1000
#   bench/scripts/bench-instructions.sh --page-size 1024 --pragma temp_store=2 upsert_int/memory/1000
#
# Each case (a name from `quota-bench --list`) runs in its own process: its database is set
# up and 1,000 operations warm it (preparing the statements), then callgrind counts only the
# function quota_bench_run_ops, which runs --operations operations (default 20,000) with no
# timing. Prints instructions (Ir) per operation; --annotate also prints the functions that
# take them (inclusive), and --keep DIR keeps the callgrind files there. --work-dir DIR keeps
# the template databases there for the next call (the 1,000,000-owner ones take minutes to
# build). --statement FILE counts the statement in FILE instead of the case's operation, on
# the case's database, bound as the engine binds its own (:limit, :owner, :cost, :now), after
# the SQL of --setup FILE: a statement variant is judged without rebuilding. --page-size,
# --pragma and --no-memstatus are quota-bench's (settings for the baselines and the engine
# alike).
# Builds quota-bench in build/release (Release) first, or in --build DIR.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/../.."

build=build/release
operations=20000
annotate=0
keep=""
work=""
replacement=()
settings=()
cases=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --operations) operations=$2; shift 2 ;;
    --annotate) annotate=1; shift ;;
    --keep) keep=$2; shift 2 ;;
    --work-dir) work=$2; shift 2 ;;
    --statement|--setup) replacement+=("$1" "$(cd "$caller" && realpath "$2")"); shift 2 ;;
    --page-size|--pragma) settings+=("$1" "$2"); shift 2 ;;
    --no-memstatus) settings+=("$1"); shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-instructions: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
if ((${#cases[@]} == 0)); then
  echo "bench-instructions: name at least one case (build/release/bench/quota-bench --list)" >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "bench-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j 2 --target quota-bench >/dev/null
bench="$build/bench/quota-bench"

if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
[ -n "$keep" ] && mkdir -p "$keep"
for name in "${cases[@]}"; do
  "$bench" --list | grep -x -- "$name" >/dev/null || { echo "bench-instructions: no case '$name' (see quota-bench --list)" >&2; exit 2; }
  # The templates are built natively first: under callgrind that would take minutes.
  "$bench" --prepare --work-dir "$work" --filter "$name" ${settings[@]+"${settings[@]}"} 2>/dev/null
  out="$work/callgrind.out"
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='quota_bench_run_ops*' \
    --callgrind-out-file="$out" "$bench" --work-dir "$work" --count-instructions "$name" \
    --operations "$operations" ${replacement[@]+"${replacement[@]}"} ${settings[@]+"${settings[@]}"} 2>"$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 1; }
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
  awk -v name="$name" -v total="$total" -v n="$operations" \
    'BEGIN { printf "%-48s %9.0f Ir/op\n", name, total / n }'
  if ((annotate)); then
    callgrind_annotate --inclusive=yes --threshold=98 "$out" 2>/dev/null | sed -n '/^Ir/,$p' | head -60
  fi
  if [ -n "$keep" ]; then cp "$out" "$keep/callgrind.out.${name//\//_}"; fi
done
