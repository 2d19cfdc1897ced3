#!/usr/bin/env bash
# Bad input to bench/scripts/with-sqlite.sh: each exits with status 2 and a message that says
# what to do, and runs nothing (the command would leave a marker file).
set -uo pipefail
tool="$(dirname "$0")/../bench/scripts/with-sqlite.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'int main(void) { return 0; }\n' >"$work/not-sqlite.c"
printf '#define SQLITE_VERSION "3.0.0"\n' >"$work/sqlite3.c"
marker="$work/ran"
failures=0

expect_refusal() {  # expect_refusal TEXT ARGS... : exit status 2, TEXT in stderr, nothing run
  local text=$1
  shift
  local stderr status
  stderr=$(bash "$tool" "$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ] || [[ "$stderr" != *"$text"* ]] || [ -e "$marker" ]; then
    echo "FAILED: with-sqlite.sh $* -> status $status, stderr: $stderr (wanted 2 and '$text')"
    failures=$((failures + 1))
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
  echo "FAILED: --help does not show the usage"
  failures=$((failures + 1))
fi
if ((failures)); then exit 1; fi
echo "with-sqlite.sh: every bad input refused"
