#!/usr/bin/env bash
# Installs what is missing, builds quotactl in Release and runs a short demo on ./quota.db:
# migrate, define a limit of 5 messages per minute, then a burst of 7 consumes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DQUOTA_TESTS=OFF >/dev/null
cmake --build build/release -j "$(nproc)" --target quotactl >/dev/null
quotactl=build/release/tools/quotactl/quotactl

# Prints each command, then runs it; exit status 1 is a denial, which the demo expects.
run() {
  echo "\$ quotactl $*"
  local status=0
  "$quotactl" "$@" || status=$?
  if [ "$status" -gt 1 ]; then exit "$status"; fi
}

run migrate
run limit set send_message --max 5 --per 1m
run reset send_message alice
for _ in 1 2 3 4 5 6 7; do run consume send_message alice; done
run check send_message bob
run usage send_message
