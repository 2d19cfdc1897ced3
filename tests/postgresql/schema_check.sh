#!/usr/bin/env bash
# Checks migrations/postgresql/ on a real PostgreSQL server:
#
#   tests/postgresql/schema_check.sh [URI]     (URI defaults to $QUOTA_TEST_POSTGRES)
#
# URI is a postgresql:// connection URI of a database on the server (tools/postgres.sh makes
# one); the script creates a fresh database beside it, applies each migration in one
# transaction, runs schema_check.sql (tables, types, checks, triggers, reset, the views), then
#   - two sessions bringing the same new owner at once: the second waits for the first and
#     takes the DO UPDATE path; eight sessions consuming five new owners count every request;
#   - quota_usage against SQLite's for the same rows (sqlite3 shell, every migrations/0*.sql),
#     and reset_at's text against SQLite's strftime for a range of times;
# and drops the database again, also when a check fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
uri=${1:-${QUOTA_TEST_POSTGRES:-}}
if [ -z "$uri" ]; then
  echo "usage: $0 postgresql://USER@HOST/DB (or set QUOTA_TEST_POSTGRES)" >&2
  exit 2
fi
if ! command -v sqlite3 >/dev/null; then
  echo "$0: the sqlite3 shell is needed (Debian package sqlite3)" >&2
  exit 2
fi

db=quota_schema_check_$$
# The same URI with the database name replaced (the path between the host and the query).
check_uri=$(printf '%s' "$uri" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$db#")
work=$(mktemp -d)
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 "$uri" "$@"; }
pg() { psql -X -q -v ON_ERROR_STOP=1 "$check_uri" "$@"; }

cleanup() {
  psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "check failed: $*" >&2
  exit 1
}

psql_admin -c "CREATE DATABASE $db"
for migration in "$root"/migrations/postgresql/0*.sql; do pg -1 -f "$migration"; done
pg -f "$here/schema_helpers.sql"
pg -o /dev/null -f "$here/schema_check.sql"

# --- Concurrency: the same new owner from two sessions -----------------------------------
pg -c "INSERT INTO quota_limits VALUES ('race', 'fixed_window', 1000000, 1000000000)"
consume="SELECT row(allowed, used)::text FROM check_helpers.consume_window('race', 'new', 1, 5)"
# Session A brings the new owner and keeps its transaction open until session B waits for a
# lock (on A's row), then commits.
pg -At >"$work/a.out" <<EOF &
BEGIN;
$consume;
DO \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    IF EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted) THEN RETURN; END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RAISE EXCEPTION 'session B never waited for session A';
END
\$\$;
COMMIT;
EOF
a=$!
# Session B starts once A's row exists (uncommitted: seen through A's row lock count).
for _ in $(seq 1 1200); do
  [ "$(pg -At -c "SELECT count(*) FROM pg_locks WHERE relation = 'quota_windows'::regclass
                  AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()")" -gt 0 ] && break
  sleep 0.05
done
pg -At -c "$consume" >"$work/b.out"
wait "$a" || fail "session A failed: $(cat "$work/a.out")"
[ "$(cat "$work/a.out")" = "(t,1)" ] || fail "session A answered $(cat "$work/a.out"), not (t,1)"
[ "$(cat "$work/b.out")" = "(t,2)" ] ||
  fail "session B answered $(cat "$work/b.out"), not (t,2): it did not take the DO UPDATE path"
[ "$(pg -At -c "SELECT count(*) || ' ' || sum(used) FROM quota_windows
                WHERE limit_name = 'race'")" = "1 2" ] ||
  fail "the raced owner has not one row of 2"

# Eight sessions, 40 consumes each over five new owners: every consume is counted once.
for s in $(seq 1 8); do
  (for i in $(seq 1 40); do
     echo "SELECT check_helpers.consume_window('race', 'owner$((i % 5))', 1, 5);"
   done | pg -At >/dev/null) &
done
wait
[ "$(pg -At -c "SELECT count(*) || ' ' || sum(used) FROM quota_windows
                WHERE limit_name = 'race' AND owner LIKE 'owner%'")" = "5 320" ] ||
  fail "eight sessions: not five owners with 320 consumes in all"
echo "schema_check.sh: concurrent new owners take the DO UPDATE path, every consume counted"

# --- quota_usage against SQLite's, for the same rows ---------------------------------------
# The state's times lie in 2100, after the current time, so both views evaluate at seen_ms.
cat >"$work/rows.sql" <<'EOF'
DELETE FROM quota_limits;
INSERT INTO quota_limits (name, algorithm, maximum, period_ms, burst) VALUES
  ('fw', 'fixed_window', 10, 60000, NULL), ('sw', 'sliding_window', 10, 60000, NULL),
  ('log', 'sliding_log', 5, 1000, NULL), ('tb', 'token_bucket', 3, 1000, 4);
INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst) VALUES
  ('fw', 'tier', 'maximum', 100, NULL), ('*', 'vip', 'exempt', NULL, NULL),
  ('*', 'bad', 'deny', NULL, NULL), ('tb', 'tier', 'maximum', 6, 8);
-- fixed_window and sliding_window: current window (4102444800000 / 60000 = 68374080),
-- previous windows, an older window, a row written under another period, denials only.
INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used,
                           previous_used, denied, seen_ms, shadow_denied) VALUES
  ('fw', 'a', 10, 60000, 68374080, 4, 2, 0, 4102444830000, 0),
  ('fw', 'tier', 100, 60000, 68374080, 40, 0, 1, 4102444830000, 0),
  ('fw', 'vip', 10, 60000, 68374080, 12, 0, 0, 4102444830000, 0),
  ('fw', 'bad', 10, 60000, 68374080, 0, 0, 5, 4102444830000, 0),
  ('fw', 'old', 10, 60000, 68374078, 9, 9, 0, 4102444830000, 0),
  ('fw', 'quiet', 10, 60000, 68374080, 0, 0, 0, 4102444830000, 0),
  ('fw', 'shadow', 10, 60000, 68374080, 0, 0, 0, 4102444830000, 2),
  ('sw', 'a', 10, 60000, 68374080, 3, 7, 0, 4102444815001, 0),
  ('sw', 'b', 10, 60000, 68374079, 5, 1, 0, 4102444815001, 0),
  ('sw', 'c', 10, 30000, 136748160, 2, 9, 1, 4102444815001, 0);
-- sliding_log: live events, one expired, a merged running sum.
INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, newest_at_ms,
                              recorded, denied, seen_ms, shadow_denied) VALUES
  ('log', 'a', 5, 1000, 6, 4102444800900, 0, 1, 4102444801000, 0),
  ('log', 'gone', 5, 1000, 2, 4102444799000, 0, 0, 4102444801000, 0);
INSERT INTO quota_log (limit_name, owner, at_ms, cost, total) VALUES
  ('log', 'a', 4102444799500, 1, 1), ('log', 'a', 4102444800100, 2, 3),
  ('log', 'a', 4102444800900, 3, 6), ('log', 'gone', 4102444799000, 2, 2);
-- token_bucket: partly drained, in debt, full, an override's burst, another period.
INSERT INTO quota_buckets (limit_name, owner, maximum, period_ms, burst, level, denied,
                           seen_ms, shadow_denied) VALUES
  ('tb', 'a', 3, 1000, 4, 1500, 0, 4102444800000, 0),
  ('tb', 'debt', 3, 1000, 4, -2500, 2, 4102444800000, 0),
  ('tb', 'full', 3, 1000, 4, 4000, 0, 4102444800000, 0),
  ('tb', 'tier', 6, 1000, 8, 2000, 0, 4102444800000, 0),
  ('tb', 'scaled', 3, 500, 4, 700, 0, 4102444800000, 0);
-- Lockouts: blocks that hold, one that has ended, one on a limit without a block (ignored),
-- one on a limit in shadow mode (ignored).
UPDATE quota_limits SET block_ms = 3600000 WHERE name IN ('fw', 'log', 'tb');
UPDATE quota_windows SET blocked_until_ms = 4102444900000 WHERE owner IN ('a', 'bad', 'tier', 'vip');
UPDATE quota_windows SET blocked_until_ms = 4102444830000 WHERE owner = 'old';
UPDATE quota_log_owners SET blocked_until_ms = 4102444801001 WHERE owner = 'a';
UPDATE quota_buckets SET blocked_until_ms = 4102444900000 WHERE owner IN ('debt', 'a');
UPDATE quota_limits SET shadow = (name = 'tb');
EOF
query="SELECT * FROM quota_usage ORDER BY limit_name, owner;"
cat "$root"/migrations/0*.sql >"$work/sqlite-schema.sql"
sqlite3 "$work/usage.db" <"$work/sqlite-schema.sql"
sqlite3 "$work/usage.db" <"$work/rows.sql"
sqlite3 -separator '|' "$work/usage.db" "$query" >"$work/sqlite.out"
pg -f "$work/rows.sql"
pg -At -F '|' -c "$query" >"$work/postgresql.out"
[ "$(wc -l <"$work/sqlite.out")" -ge 12 ] || fail "SQLite's quota_usage has too few rows"
diff -u "$work/sqlite.out" "$work/postgresql.out" ||
  fail "quota_usage differs from SQLite's for the same rows (- SQLite, + PostgreSQL)"

# reset_at against strftime for every millisecond of a few seconds and some far times.
times="SELECT value FROM (SELECT 0 AS value UNION ALL SELECT 1 UNION ALL SELECT 1700000060123
       UNION ALL SELECT 4102444800000 UNION ALL SELECT 253402300799999
       UNION ALL SELECT 253402300800000 UNION ALL SELECT 951782400000 UNION ALL SELECT -1)
       AS v"
sqlite3 "$work/usage.db" "WITH RECURSIVE s(value) AS (SELECT 1700000000000 UNION ALL
  SELECT value + 1 FROM s WHERE value < 1700000003000) SELECT value,
  strftime('%Y-%m-%dT%H:%M:%fZ', value / 1000.0, 'unixepoch') FROM
  (SELECT value FROM s UNION ALL $times)" >"$work/sqlite-times.out"
pg -At -F '|' -c "SELECT value, CASE WHEN value BETWEEN -62135596800000 AND 253402300799999
  THEN to_char(timestamp '1970-01-01' + value * interval '1 millisecond',
               'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') END
  FROM (SELECT generate_series(1700000000000, 1700000003000) AS value UNION ALL $times) AS t" \
  >"$work/postgresql-times.out"
grep -q "reset_at_ms BETWEEN -62135596800000 AND 253402300799999" \
  "$root/migrations/postgresql/0006_initial.sql" ||
  fail "the view's reset_at is not the expression compared here"
diff -u "$work/sqlite-times.out" "$work/postgresql-times.out" ||
  fail "reset_at text differs from SQLite's strftime (- SQLite, + PostgreSQL)"
echo "schema_check.sh: quota_usage equals SQLite's ($(wc -l <"$work/sqlite.out") rows)," \
  "reset_at equals strftime ($(wc -l <"$work/sqlite-times.out") times)"
