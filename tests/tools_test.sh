#!/usr/bin/env bash
# Bad input to the tools that take it: bench/scripts/with-sqlite.sh, tools/schema.sh,
# bench/scripts/peers.sh and bench/scripts/pg-server-time.sh. Each exits with status 2 and a message that says what to do, and
# changes nothing (peers.sh installs, builds and starts nothing). bench/scripts/peers-report.py
# runs on a made-up run: its ratios and targets, and --update between the markers. tools/schema.sh
# also runs here with a stand-in quotactl, on a copy of the repository's schema/ folder: what it
# writes, that --check fails on a file that is out of date, and a quotactl whose migrate fails.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# --- bench/scripts/with-sqlite.sh: bad input runs nothing (the command would leave a marker).
tool="$root/bench/scripts/with-sqlite.sh"
printf 'int main(void) { return 0; }\n' >"$work/not-sqlite.c"
printf '#define SQLITE_VERSION "3.0.0"\n' >"$work/sqlite3.c"
marker="$work/ran"

expect_refusal() {  # expect_refusal TEXT ARGS... : exit status 2, TEXT in stderr, nothing run
  local text=$1
  shift
  local stderr status
  stderr=$(bash "$tool" "$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ] || [[ "$stderr" != *"$text"* ]] || [ -e "$marker" ]; then
    fail "with-sqlite.sh $* -> status $status, stderr: $stderr (wanted 2 and '$text')"
  fi
  rm -f "$marker"
}

expect_refusal "name the amalgamation" -- touch "$marker"
expect_refusal "no such file: $work/missing.c" "$work/missing.c" -- touch "$marker"
expect_refusal "is not an amalgamation" "$work/not-sqlite.c" -- touch "$marker"
expect_refusal "give the command to run after --" "$work/sqlite3.c"
expect_refusal "give the command to run after --" "$work/sqlite3.c" --
expect_refusal "unknown option --fast" "$work/sqlite3.c" --fast -- touch "$marker"
expect_refusal "one amalgamation only" "$work/sqlite3.c" "$work/sqlite3.c" -- touch "$marker"
expect_refusal "--keep needs a folder" "$work/sqlite3.c" --keep

if bash "$tool" --help | grep -q "SQLITE3_C"; then :; else
  fail "with-sqlite.sh --help does not show the usage"
fi

# --- tools/schema.sh, copied into a scratch repository so that nothing here writes the real
# schema/schema.sql. The stand-in quotactl creates a two-table schema at version 1.
repo="$work/repo"
mkdir -p "$repo/tools" "$repo/schema"
cp "$root/tools/schema.sh" "$repo/tools/schema.sh"
cp "$root/schema/schema.sql" "$repo/schema/schema.sql"
schema_sh="$repo/tools/schema.sh"
target="$repo/schema/schema.sql"
fake="$work/fake-quotactl"
cat >"$fake" <<'EOF'
#!/usr/bin/env bash
[ "$1" = --db ] && [ "$3" = migrate ] || { echo "fake quotactl: $*" >&2; exit 2; }
sqlite3 -batch -init /dev/null "$2" "CREATE TABLE quota_migrations (version INTEGER PRIMARY KEY);
  INSERT INTO quota_migrations VALUES (1);
  CREATE TABLE quota_limits (name TEXT UNIQUE);
  CREATE VIEW quota_names AS SELECT name FROM quota_limits;"
EOF
printf '#!/usr/bin/env bash\necho "database is locked" >&2\nexit 3\n' >"$work/failing-quotactl"
printf '#!/usr/bin/env bash\nexit 0\n' >"$work/silent-quotactl"
chmod +x "$fake" "$work/failing-quotactl" "$work/silent-quotactl"
printf 'not a program\n' >"$work/not-executable"

run_schema() {  # run_schema ARGS...: sets status, stdout and stderr of tools/schema.sh ARGS
  stdout=$(bash "$schema_sh" "$@" 2>"$work/stderr")
  status=$?
  stderr=$(cat "$work/stderr")
}

expect_schema() {  # expect_schema STATUS TEXT ARGS...: that status, TEXT in stderr, file kept
  local want=$1 text=$2
  shift 2
  local before
  before=$(cksum <"$target")
  run_schema "$@"
  if [ "$status" -ne "$want" ] || [[ "$stderr" != *"$text"* ]]; then
    fail "schema.sh $* -> status $status, stderr: $stderr (wanted $want and '$text')"
  fi
  if [ "$(cksum <"$target")" != "$before" ]; then
    fail "schema.sh $* changed schema/schema.sql"
  fi
}

expect_schema 2 "unknown option --fast" --fast "$fake"
expect_schema 2 "unknown option -x" --check -x
expect_schema 2 "no such quotactl: $work/missing" "$work/missing"
expect_schema 2 "no such quotactl: $work/missing" --check "$work/missing"
QUOTACTL="$work/missing" expect_schema 2 "no such quotactl: $work/missing"
expect_schema 2 "not an executable file: $work/not-executable" "$work/not-executable"
expect_schema 2 "not an executable file: $work" "$work"
expect_schema 2 "one quotactl only" "$fake" "$fake"
expect_schema 2 "the quotactl path is empty" --check ""
expect_schema 1 "database is locked" "$work/failing-quotactl"
expect_schema 1 "migrated no database" "$work/silent-quotactl"

# The real schema is not the stand-in's: --check says so, and writes nothing.
expect_schema 1 "schema/schema.sql is out of date: run tools/schema.sh" --check "$fake"

# Written from the stand-in's database: the header, then each object after a line naming it,
# in creation order, without the autoindex; byte for byte the same on a second run.
run_schema "$fake"
expected="$work/expected.sql"
{
  sed -n '1,7p' "$root/schema/schema.sql" | sed 's/(schema version [0-9]*)/(schema version 1)/'
  cat <<'EOF'

-- table quota_migrations
CREATE TABLE quota_migrations (version INTEGER PRIMARY KEY);

-- table quota_limits
CREATE TABLE quota_limits (name TEXT UNIQUE);

-- view quota_names
CREATE VIEW quota_names AS SELECT name FROM quota_limits;
EOF
} >"$expected"
if [ "$status" -ne 0 ] || ! cmp -s "$expected" "$target"; then
  fail "schema.sh with the stand-in -> status $status, stderr: $stderr; written:"
  diff -u "$expected" "$target"
fi
first=$(cksum <"$target")
QUOTACTL="$fake" run_schema
if [ "$status" -ne 0 ] || [ "$(cksum <"$target")" != "$first" ]; then
  fail "schema.sh with \$QUOTACTL -> status $status, or a different file on a second run"
fi
run_schema --check "$fake"
if [ "$status" -ne 0 ] || [[ "$stdout" != *"up to date (schema version 1)"* ]]; then
  fail "schema.sh --check after writing -> status $status, stdout: $stdout, stderr: $stderr"
fi

if bash "$schema_sh" --help | grep -q -- "--check"; then :; else
  fail "schema.sh --help does not show the usage"
fi
# --- bench/scripts/peers.sh: bad input is refused before anything is installed, built or
# started. Stand-ins for the commands it would run first leave a marker if it got that far.
stubs="$work/stubs"
mkdir -p "$stubs"
for command in apt-get npm cmake redis-server; do
  printf '#!/usr/bin/env bash\ntouch "%s"\nexit 1\n' "$marker" >"$stubs/$command"
  chmod +x "$stubs/$command"
done
# expect_stubbed_refusal TEXT COMMAND...: the command exits 2, says TEXT, and reached none of
# the stand-ins (no marker).
expect_stubbed_refusal() {
  local text=$1
  shift
  local stderr status
  stderr=$("$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ] || [[ "$stderr" != *"$text"* ]] || [ -e "$marker" ]; then
    fail "${*:3} -> status $status, stderr: $stderr (wanted 2 and '$text')"
  fi
  rm -f "$marker"
}
tool="$root/bench/scripts/peers.sh"
expect_peers_refusal() {  # expect_peers_refusal TEXT ARGS...
  expect_stubbed_refusal "$1" env PATH="$stubs:$PATH" bash "$tool" "${@:2}"
}
expect_peers_refusal "--rounds takes a number from 1 to 99, not '0'" --rounds 0
expect_peers_refusal "--rounds takes a number from 1 to 99, not 'three'" --rounds three
expect_peers_refusal "--rounds takes a whole number, not '2.5'" --rounds 2.5
expect_peers_refusal "--rounds needs a number" --rounds
expect_peers_refusal "--duration takes a number from 0.01 to 60, not '0'" --duration 0
expect_peers_refusal "--duration needs a number of seconds" --no-install --duration
expect_peers_refusal "--npm-dir must be outside the repository" --npm-dir "$root/node_modules"
expect_peers_refusal "--keep needs a folder" --keep
expect_peers_refusal "give one" --docs --docs-only
expect_peers_refusal "unknown argument '--fast'" --fast
if bash "$tool" --help | grep -q -- "--rounds N"; then :; else
  fail "peers.sh --help does not show the usage"
fi

# --- bench/scripts/pg-server-time.sh: bad input is refused before a server is started (a
# stand-in initdb would leave the marker).
tool="$root/bench/scripts/pg-server-time.sh"
printf '#!/usr/bin/env bash\ntouch "%s"\nexit 1\n' "$marker" >"$stubs/initdb"
chmod +x "$stubs/initdb"
expect_server_time_refusal() {  # expect_server_time_refusal TEXT ARGS...
  expect_stubbed_refusal "$1" env POSTGRES_BIN="$stubs" bash "$tool" "${@:2}"
}
expect_server_time_refusal "--runs takes a whole number from 5 to 1000, not 'three'" --runs three
expect_server_time_refusal "--runs takes a whole number from 5 to 1000, not 4" --runs 4
expect_server_time_refusal "--runs takes a whole number from 5 to 1000, not 1001" --runs 1001
expect_server_time_refusal "--runs needs a value" --runs
expect_server_time_refusal "$work/none not found: build it" --quotactl "$work/none"
expect_server_time_refusal "unknown option --fast" --fast
if bash "$tool" --help | grep -q -- "--runs N"; then :; else
  fail "pg-server-time.sh --help does not show the usage"
fi

# --- bench/scripts/peers-report.py on a made-up run of two rounds: the ratios are of ops/s,
# each the median of the rounds' ratios, and each target is judged on every algorithm.
run="$work/peers-run"
python3 - "$run" <<'EOF'
import json, os, sys
run = sys.argv[1]
algorithms = ["sliding_log", "fixed_window", "sliding_window", "token_bucket"]
os.makedirs(run)
json.dump({"date": "2026-01-01 00:00 UTC", "rounds": 2, "duration_s": 1.0, "owners": 1000,
           "load_before": "1.00 1.00 1.00", "load_after": "2.00 2.00 2.00",
           "orders": ["quota redis rlf raw", "raw rlf redis quota"]},
          open(os.path.join(run, "meta.json"), "w"))
def figures(ops, cpu=10.0):
    return {"ops_per_s": ops, "p50_us": 10.0, "p99_us": 20.0, "p999_us": 30.0, "max_us": 40.0,
            "allowed_share": 1.0, "operations": int(ops), "cpu_us_per_op": cpu}
for number, scale in ((1, 1.0), (2, 2.0)):
    where = os.path.join(run, f"round-{number}")
    os.makedirs(where)
    cases = [dict(name=f"consume/{a}/wal_normal/1000", **figures(scale * 1000 * (i + 1)))
             for i, a in enumerate(algorithms)]
    cases += [dict(name=f"upsert_{k}/wal_normal/1000", **figures(scale * 9000)) for k in ("int", "text")]
    machine = {"cpu": "A CPU", "cores": 2, "kernel": "Linux 1", "sqlite": "3.40.1", "compiler": "g++"}
    json.dump({"machine": machine, "cases": cases}, open(os.path.join(where, "quota.json"), "w"))
    # Redis at 1,000/s in round 1 and 4,000/s in round 2: fixed_window's ratios 2.00 and 1.00.
    # CPU per operation: quota 10 µs, Redis 30, the store 50, the bare upsert 5.
    for key, ops, cpu in (("redis", 1000 * scale * scale, 30.0), ("rlf", 500 * scale, 50.0),
                          ("raw", 4000 * scale, 5.0)):
        json.dump(dict(server=f"{key} 1", **figures(ops, cpu)),
                  open(os.path.join(where, f"{key}.json"), "w"))
EOF
report=$(python3 "$root/bench/scripts/peers-report.py" "$run" --save "$work/peers.json" 2>&1)
status=$?
for want in "every algorithm | ≥ 1.3× | sliding_log 0.75×, fixed_window 1.50×, sliding_window 2.25×, token_bucket 3.00× | MISSED |" \
  "every algorithm | ≥ 2.5× | sliding_log 2.00×, fixed_window 4.00×, sliding_window 6.00×, token_bucket 8.00× | MISSED |" \
  "| fixed_window | 1.50× | 1.00–2.00 | 4.00× | 4.00–4.00 | 0.50× | 0.50–0.50 |" \
  "| consume, CPU per decision | ÷ Redis Lua |" \
  "| fixed_window | 3.00× | 3.00–3.00 | 5.00× | 5.00–5.00 | 0.50× | 0.50–0.50 |" \
  "Load average 1.00 1.00 1.00 before, 2.00 2.00 2.00 after"; do
  if [ "$status" -ne 0 ] || [[ "$report" != *"$want"* ]]; then
    fail "peers-report.py -> status $status, no '$want' in: $report"
  fi
done
doc="$work/doc.md"
printf 'before\n<!-- bench-peers:begin -->\nold\n<!-- bench-peers:end -->\nafter\n' >"$doc"
python3 "$root/bench/scripts/peers-report.py" "$work/peers.json" --update "$doc" >/dev/null 2>&1
if [ "$(sed -n 2p "$doc")" != "<!-- bench-peers:begin -->" ] || grep -q '^old$' "$doc" ||
   ! grep -q 'fixed_window 1.50×' "$doc" || [ "$(tail -n 1 "$doc")" != "after" ]; then
  fail "peers-report.py --update did not replace what is between the markers: $(cat "$doc")"
fi
printf 'no markers\n' >"$doc"
if python3 "$root/bench/scripts/peers-report.py" "$work/peers.json" --update "$doc" >/dev/null 2>&1 ||
   [ "$(cat "$doc")" != "no markers" ]; then
  fail "peers-report.py --update on a file without markers did not fail, or changed it"
fi

if ((failures)); then exit 1; fi
echo "with-sqlite.sh, schema.sh, peers.sh and pg-server-time.sh: every bad input refused; schema.sh writes and checks; peers-report.py computes its ratios"
