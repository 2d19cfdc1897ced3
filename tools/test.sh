#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test three ways: Debug, Release, and
# Debug with AddressSanitizer and UndefinedBehaviorSanitizer. Warnings are errors throughout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

jobs=$(nproc)
run_suite() {
  local name=$1
  shift
  echo "== $name"
  cmake -S . -B "build/$name" -DQUOTA_WERROR=ON "$@" >/dev/null
  cmake --build "build/$name" -j "$jobs"
  (cd "build/$name" && ctest --output-on-failure -j "$jobs")
}

run_suite debug -DCMAKE_BUILD_TYPE=Debug
run_suite release -DCMAKE_BUILD_TYPE=Release
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite sanitize -DCMAKE_BUILD_TYPE=Debug -DQUOTA_SANITIZE=address,undefined
