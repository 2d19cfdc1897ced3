#!/usr/bin/env bash
# Installs what is missing, builds quotactl in Release and runs a short demo on ./quota.db (of
# the checkout, quotactl's default database): migrate, define a limit of 5 messages per minute,
# then a burst of 7 consumes. Run again, it starts over on the same file (it resets alice).
#
#   --quotactl PROGRAM  run the demo with PROGRAM on ./quota.db of the current folder, without
#                       installing or building anything (the documentation's tests run it so)
set -euo pipefail
quotactl=""
if [ "${1:-}" = "--quotactl" ] && [ -n "${2:-}" ]; then
  quotactl=$2
elif [ $# -gt 0 ]; then
  echo "usage: bash tools/demo.sh [--quotactl PROGRAM]" >&2
  exit 2
fi

if [ -z "$quotactl" ]; then
  cd "$(dirname "$0")/.."
  bash tools/install-deps.sh
  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DQUOTA_TESTS=OFF >/dev/null
  # quota_installable: quotactl and everything `cmake --install build/release` copies.
  cmake --build build/release -j "$(nproc)" --target quota_installable >/dev/null
  quotactl=build/release/tools/quotactl/quotactl
fi

# Prints each command, then runs it; exit status 1 is a denial, which the demo expects.
run() {
  echo "\$ quotactl $*"
  local status=0
  "$quotactl" "$@" || status=$?
  if [ "$status" -gt 1 ]; then exit "$status"; fi
}

echo "# the demo's database: $PWD/quota.db"
run migrate
run limit set send_message --max 5 --per 1m
run reset send_message alice
for _ in 1 2 3 4 5 6 7; do run consume send_message alice; done
run check send_message bob
run usage send_message
echo "# the demo's limit and counters stay in $PWD/quota.db; README.md's quick start works on"
echo "# a database of its own, quickstart.db"
