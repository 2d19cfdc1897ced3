#!/usr/bin/env bash
# The PostgreSQL server's execution time of each statement a consume or check runs, against
# the bare statements, by EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) of the prepared statement
# with its generic plan (what the server keeps for a connection after five executions), on a
# private server (tools/postgres.sh) over 1,000 owners of a limit of each algorithm.
#
#   bench/scripts/pg-server-time.sh [--runs N] [--quotactl PATH]
#
# Prints, per statement, the median and the range of N executions (default 30), each on an
# owner picked at random with the clock 1 ms later each time; the statements are the library's
# own: the general ones as `quotactl sql` prints them, the plain ones from their golden files
# (tests/sql/postgresql/, which tests/core/statements_test.cpp holds equal to what the library
# runs). Execution only: no parse, plan, round trip or commit.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=30
quotactl=build/release/tools/quotactl/quotactl
while (($#)); do
  case "$1" in
    --runs|--quotactl)
      if (($# < 2)); then
        echo "pg-server-time: $1 needs a value (see --help)" >&2
        exit 2
      fi
      if [ "$1" = --runs ]; then runs=$2; else quotactl=$2; fi
      shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pg-server-time: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$runs" in
  ''|*[!0-9]*) echo "pg-server-time: --runs takes a whole number from 5 to 1000, not '$runs'" >&2; exit 2 ;;
esac
if ((runs < 5 || runs > 1000)); then
  echo "pg-server-time: --runs takes a whole number from 5 to 1000, not $runs" >&2
  exit 2
fi
if [ ! -x "$quotactl" ]; then
  echo "pg-server-time: $quotactl not found: build it (cmake --build build/release --target quotactl) or pass --quotactl PATH" >&2
  exit 2
fi

source tools/postgres.sh
postgres_start >/dev/null
uri=$QUOTA_TEST_POSTGRES
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$uri" "$@"; }

"$quotactl" --db "$uri" migrate >/dev/null
for algorithm in fixed_window sliding_window token_bucket sliding_log; do
  "$quotactl" --db "$uri" limit set "$algorithm" --algo "$algorithm" --max 100 --per 10s >/dev/null
done
now=1700000000000
# general_of OPERATION LIMIT: the statement `quotactl sql` prints, without its comments, the
# PREPARE line that names it and its final semicolon.
general_of() {
  "$quotactl" --db "$uri" sql "$1" "$2" | grep -v -e '^--' -e '^PREPARE ' |
    sed '$ s/;[[:space:]]*$//'
}
# The bare counter (quota-bench's upsert_text and select_text) and every owner's state: one
# consume per owner and limit, by the general statement.
psql_run <<SQL
CREATE TABLE text_counters (key text PRIMARY KEY, count bigint NOT NULL);
INSERT INTO text_counters SELECT 'user:' || i, 1 FROM generate_series(0, 999) AS i;
SQL
for algorithm in fixed_window sliding_window token_bucket sliding_log; do
  general=$(general_of consume "$algorithm")
  psql_run -c "DO \$\$
DECLARE i int;
BEGIN
  FOR i IN 0..999 LOOP
    EXECUTE \$q\$$general\$q\$ USING '$algorithm', 'user:' || i, 1::bigint, ($now + i)::bigint;
  END LOOP;
END \$\$;"
done

# median_of NAME SQL: the statement prepared with the engine's four parameters, executed
# $runs times under EXPLAIN ANALYZE with the generic plan.
median_of() {
  local name=$1 sql=$2 limit=$3 script
  script=$(mktemp)
  {
    echo "SET plan_cache_mode = force_generic_plan;"
    echo "PREPARE s(text, text, bigint, bigint) AS $sql;"
    local i
    for ((i = 0; i < runs; i++)); do
      echo "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) EXECUTE s('$limit', 'user:$((RANDOM % 1000))', 1, $((now + 10000 + i)));"
    done
  } >"$script"
  psql_run -A -t -f "$script" | sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' | sort -n |
    awk -v name="$name" '{ v[NR] = $1 } END {
      if (NR == 0) { print name ": no execution times (see the statement)"; exit 1 }
      printf "%-48s %8.3f ms  (%.3f to %.3f, %d runs)\n", name, v[int((NR + 1) / 2)], v[1], v[NR], NR }'
  rm -f "$script"
}

bare_upsert="INSERT INTO text_counters (key, count) VALUES (\$2, 1) ON CONFLICT (key) DO UPDATE SET count = text_counters.count + 1 WHERE \$1 IS NOT NULL AND \$3 IS NOT NULL AND \$4 IS NOT NULL RETURNING count"
bare_select="SELECT count FROM text_counters WHERE key = \$2 AND \$1 IS NOT NULL AND \$3 IS NOT NULL AND \$4 IS NOT NULL"
echo "PostgreSQL $(psql -X -A -t -c 'SHOW server_version' "$uri"), execution time per statement, median of $runs:"
median_of "upsert_text (bare)" "$bare_upsert" fixed_window
median_of "select_text (bare)" "$bare_select" fixed_window
for algorithm in fixed_window sliding_window token_bucket; do
  median_of "consume $algorithm, general" "$(general_of consume "$algorithm")" "$algorithm"
  median_of "consume $algorithm, plain" "$(cat "tests/sql/postgresql/consume_plain_$algorithm.sql")" "$algorithm"
  median_of "check $algorithm, general" "$(general_of check "$algorithm")" "$algorithm"
  median_of "check $algorithm, plain" "$(cat "tests/sql/postgresql/check_plain_$algorithm.sql")" "$algorithm"
done
# A sliding log's check is its general statement: no plain one.
median_of "consume sliding_log, general" "$(general_of consume sliding_log)" sliding_log
median_of "consume sliding_log, plain" "$(cat tests/sql/postgresql/consume_plain_sliding_log.sql)" sliding_log
