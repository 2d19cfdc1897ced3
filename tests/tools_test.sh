#!/usr/bin/env bash
# Bad input to the tools that take it: bench/scripts/with-sqlite.sh and tools/schema.sh. Each
# exits with status 2 and a message that says what to do, and changes nothing. tools/schema.sh
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
if ((failures)); then exit 1; fi
echo "with-sqlite.sh and schema.sh: every bad input refused; schema.sh writes and checks"
