#!/bin/sh
# Builds and runs the inline sliding-log experiment (see inline_log.cpp's header and
# docs/performance-notes.md, "2026-11-26: inline sliding-log events, measured").
#
#   bench/experiments/inline_log/run.sh --quotactl PATH --work DIR [--repetitions N] [--ops N]
#     [--limits 10,100,1000] [--verify-only]
#
# --quotactl  a built quotactl (tools/quotactl/quotactl in a build folder)
# --work      an empty folder for the build, the databases and the WAL files (on a disk, not a
#             tmpfs: WAL/NORMAL's cost is the file's)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
quotactl="" work="" extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quotactl) quotactl=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --repetitions|--ops|--limits|--warmup|--verify) extra="$extra $1 $2"; shift 2 ;;
    --verify-only) extra="$extra $1"; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$quotactl" ] && [ -n "$work" ] || { echo "usage: run.sh --quotactl PATH --work DIR [...]" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$work/build" >/dev/null

# The base database: migrated by quotactl, the limits defined by it, and the statement it
# prints for a sliding_log consume.
rm -f "$work/base.db" "$work/base.db-wal" "$work/base.db-shm"
"$quotactl" --db "$work/base.db" migrate >/dev/null
"$quotactl" --db "$work/base.db" limit set log10 --max 10 --per 10s --algo sliding_log >/dev/null
"$quotactl" --db "$work/base.db" limit set log100 --max 100 --per 100s --algo sliding_log >/dev/null
"$quotactl" --db "$work/base.db" limit set log1000 --max 1000 --per 1000s --algo sliding_log >/dev/null
"$quotactl" --db "$work/base.db" limit set v3 --max 3 --per 1s --algo sliding_log >/dev/null
"$quotactl" --db "$work/base.db" limit set v20 --max 20 --per 5s --algo sliding_log >/dev/null
"$quotactl" --db "$work/base.db" sql consume log10 > "$work/current_consume.sql"
sqlite3 "$work/base.db" "PRAGMA journal_mode = DELETE" >/dev/null

"$work/build/inline_log" --base "$work/base.db" --current "$work/current_consume.sql" \
  --dir "$here" --work "$work" $extra
