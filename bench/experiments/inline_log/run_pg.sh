#!/bin/sh
# The inline sliding-log experiment on PostgreSQL (inline_log_pg.cpp).
#
#   bench/experiments/inline_log/run_pg.sh --quotactl PATH --work DIR --server URI
#     [--database NAME] [--repetitions N] [--ops N] [--limits 10,100,1000]
#
# --server    a PostgreSQL URI whose role may create databases; the experiment drops and
#             creates the database NAME (default quota_inline_log) on that server
set -eu
here=$(cd "$(dirname "$0")" && pwd)
quotactl="" work="" server="" database=quota_inline_log extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quotactl) quotactl=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --database) database=$2; shift 2 ;;
    --repetitions|--ops|--limits|--warmup|--verify) extra="$extra $1 $2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$quotactl" ] && [ -n "$work" ] && [ -n "$server" ] ||
  { echo "usage: run_pg.sh --quotactl PATH --work DIR --server URI [...]" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$work/build" --target inline_log_pg >/dev/null

psql -q "$server" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database"
# The same URI with the database's name in place of the server URI's.
uri=$(printf '%s' "$server" | sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$database#")
"$quotactl" --db "$uri" migrate >/dev/null
for limit in 10 100 1000; do
  "$quotactl" --db "$uri" limit set "log$limit" --max "$limit" --per "${limit}s" --algo sliding_log >/dev/null
done
"$quotactl" --db "$uri" limit set v3 --max 3 --per 1s --algo sliding_log >/dev/null
"$quotactl" --db "$uri" limit set v20 --max 20 --per 5s --algo sliding_log >/dev/null
"$quotactl" --db "$uri" sql consume log10 > "$work/current_consume_pg.sql"

"$work/build/inline_log_pg" --uri "$uri" --current "$work/current_consume_pg.sql" --dir "$here" $extra
