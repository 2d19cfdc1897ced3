#!/usr/bin/env bash
# Runs a command of the project against another SQLite: builds libsqlite3.so.0 from an
# amalgamation (sqlite3.c) of the version to try, with the compile options of the system's
# SQLite (Debian's), and runs the command with it first on the library path. Nothing is
# fetched: the amalgamation is yours to give. The project is not rebuilt; SQLite's interface
# is stable, so the same binaries run against either library.
#
#   bench/scripts/with-sqlite.sh SQLITE3_C [--lookaside] [--keep DIR] -- COMMAND [ARGS...]
#
#   bench/scripts/with-sqlite.sh ~/sqlite-3.54.1/sqlite3.c -- build/debug/tests/quota_tests
#   bench/scripts/with-sqlite.sh ~/sqlite-3.54.1/sqlite3.c -- bench/scripts/bench-instructions.sh check/fixed_window/memory/1000
#   bench/scripts/with-sqlite.sh ~/sqlite-3.54.1/sqlite3.c --lookaside -- build/release/bench/quota-bench --filter /memory/
#
# --lookaside leaves out SQLITE_OMIT_LOOKASIDE (Debian builds without lookaside memory, so
# every cursor and buffer is a malloc); --keep DIR keeps the built library in DIR for the next
# call (built again only when the amalgamation or the options change). The options are read
# from `PRAGMA compile_options` of the system's SQLite (through python3), less those that an
# amalgamation cannot take or that are the compiler's: COMPILER, ENABLE_UPDATE_DELETE_LIMIT
# (needs the parser made from the full source), ATOMIC_INTRINSICS, DEFAULT_AUTOVACUUM.
# Debian's sqlite3 shell refuses a library other than its own ("header and source version
# mismatch"), so the test that runs the shell fails under this script, and only that one.
set -euo pipefail

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
fail() { echo "with-sqlite: $1" >&2; exit 2; }

source=""
lookaside=0
keep=""
while (($#)); do
  case "$1" in
    --lookaside) lookaside=1; shift ;;
    --keep) (($# >= 2)) || fail "--keep needs a folder"; keep=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    -*) fail "unknown option $1 (see --help)" ;;
    *) [ -z "$source" ] || fail "one amalgamation only, then -- and the command (see --help)"
       source=$1; shift ;;
  esac
done
[ -n "$source" ] || fail "name the amalgamation to build, sqlite3.c (see --help)"
[ -f "$source" ] || fail "no such file: $source (give the path of an amalgamation's sqlite3.c)"
grep -q '^#define SQLITE_VERSION ' "$source" ||
  fail "$source is not an amalgamation: it has no '#define SQLITE_VERSION' (give sqlite3.c)"
(($#)) || fail "give the command to run after -- (see --help)"
command -v python3 >/dev/null || fail "needs python3 to read the system's compile options"
command -v cc >/dev/null || fail "needs a C compiler (apt-get install gcc)"

options=$(python3 - "$lookaside" <<'EOF'
import sqlite3, sys
skip = {"COMPILER", "ENABLE_UPDATE_DELETE_LIMIT", "ATOMIC_INTRINSICS", "DEFAULT_AUTOVACUUM"}
if sys.argv[1] == "1":
    skip.add("OMIT_LOOKASIDE")
for (option,) in sqlite3.connect(":memory:").execute("PRAGMA compile_options"):
    if option.split("=")[0] not in skip:
        print("-DSQLITE_" + option)
EOF
)

version=$(awk '/^#define SQLITE_VERSION /{gsub(/"/, "", $3); print $3; exit}' "$source")
work=${keep:-$(mktemp -d)}
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
work=$(cd "$work" && pwd)  # absolute: the command may change folders
stamp=$( (sha256sum "$source" | cut -d' ' -f1; echo "$options") | sha256sum | cut -d' ' -f1)
library="$work/$stamp/libsqlite3.so.0"
if [ ! -f "$library" ]; then
  mkdir -p "$work/$stamp"
  echo "with-sqlite: building SQLite $version$( ((lookaside)) && echo ' with lookaside') (about a minute)" >&2
  # -w: the options repeat some of the amalgamation's own defines (MUTEX_PTHREADS), which only warns.
  # shellcheck disable=SC2086  # one option a word
  cc -O2 -fPIC -shared -Wl,-soname,libsqlite3.so.0 -w $options \
    -o "$library.tmp" "$source" -lpthread -ldl -lm
  mv "$library.tmp" "$library"
fi
LD_LIBRARY_PATH="$work/$stamp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
