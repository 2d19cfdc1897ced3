#!/usr/bin/env bash
# Installs what is missing, starts a private PostgreSQL server, then builds and runs the tests
# two ways: Release (every test) and Debug with AddressSanitizer and UndefinedBehaviorSanitizer
# (every test but those labelled slow; each against SQLite and that server); then builds the
# SQLite-only configuration
# (-DQUOTA_POSTGRESQL=OFF) and checks its installed package; then runs each libFuzzer target
# of fuzz/ (clang, with both sanitizers) on its corpus for QUOTA_FUZZ_SECONDS (default 30)
# seconds. Warnings are errors throughout; a failed test or a fuzzer's crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

# The PostgreSQL tests (tests/common/, tests/postgresql/) run against a private server made
# for this run and removed at its end, pass or fail (tools/postgres.sh). It trades durability
# for speed (no fsync): the tests about a server's crash or restart make servers of their own.
source tools/postgres.sh
postgres_start fsync=off synchronous_commit=off full_page_writes=off

jobs=$(nproc)
# run_suite NAME CTEST_FILTER CMAKE_OPTION...: configures and builds build/NAME, then runs its
# tests. The tests labelled "slow" (crashes, many processes, the same answers on both backends,
# long property runs, the packaging and documentation sessions: tests/CMakeLists.txt) run in
# the Release build only; the sanitizers' Debug build runs every other test (-LE slow).
run_suite() {
  local name=$1 filter=$2
  shift 2
  echo "== $name"
  # QUOTA_TESTS=ON even when a folder was configured without the tests (tools/demo.sh's
  # build/release), and a suite that finds no tests fails instead of passing.
  cmake -S . -B "build/$name" -DQUOTA_WERROR=ON -DQUOTA_TESTS=ON "$@" >/dev/null
  cmake --build "build/$name" -j "$jobs"
  # A test that hangs fails after --timeout seconds (the longest passes in about 80 s), so that
  # a hang is a named failure with its output rather than a run that never ends.
  # shellcheck disable=SC2086  # the filter is zero or two words
  (cd "build/$name" && ctest --output-on-failure --no-tests=error --timeout 600 -j "$jobs" $filter)
}

# No plain Debug suite: the sanitizers' suite is a Debug build that runs the same tests.
run_suite release "" -DCMAKE_BUILD_TYPE=Release
# The long property runs take one seed each under the sanitizers (QUOTA_PROPERTY_SEEDS): the
# Release build has run every seed of them.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 QUOTA_PROPERTY_SEEDS=1 \
  run_suite sanitize "-LE slow" -DCMAKE_BUILD_TYPE=Debug -DQUOTA_SANITIZE=address,undefined

# A build without PostgreSQL links no libpq anywhere. Not the whole suite again: the library,
# its shared twin and quotactl, installed into a scratch prefix and checked there
# (tests/embedding/package_test.py: ldd, pkg-config, the CMake files, consumers built with
# find_package and pkg-config, a smoke run of quotactl, postgresql:// refused).
echo "== sqlite-only"
cmake -S . -B build/sqlite-only -DCMAKE_BUILD_TYPE=Debug -DQUOTA_WERROR=ON -DQUOTA_TESTS=ON \
  -DQUOTA_POSTGRESQL=OFF >/dev/null
# What the package steps install, and nothing else (cmake/install.cmake: quota_installable,
# with quota::prometheus when this build has it).
cmake --build build/sqlite-only -j "$jobs" --target quota_installable
(cd build/sqlite-only && ctest --output-on-failure --no-tests=error --timeout 600 -j "$jobs" \
  -R '^package[.](exports|install|find_package|pkg_config|sqlite_only|components)$')

echo "== fuzz"
fuzz_seconds=${QUOTA_FUZZ_SECONDS:-30}
CC=clang CXX=clang++ cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DQUOTA_WERROR=ON \
  -DQUOTA_FUZZ=ON -DQUOTA_TESTS=OFF -DQUOTA_EXAMPLES=OFF -DQUOTA_INSTALL=OFF \
  -DQUOTA_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
cmake --build build/fuzz -j "$jobs" --target fuzz_quotactl_args fuzz_operations
for target in quotactl_args operations; do
  # New inputs go to a scratch folder (the first one named); the corpus in the repository is
  # only read. Paths are absolute: the quotactl target works in a scratch folder of its own.
  found=$(mktemp -d)
  log="$PWD/build/fuzz/fuzz_$target.log"
  echo "fuzz_$target: ${fuzz_seconds}s on fuzz/corpus/$target"
  if ! ASAN_OPTIONS=detect_leaks=1 "$PWD/build/fuzz/fuzz/fuzz_$target" \
      -max_total_time="$fuzz_seconds" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$PWD/build/fuzz/" "$found" "$PWD/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$target failed: the crashing input is in build/fuzz/, the log in $log"
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
  rm -rf "$found"
done
