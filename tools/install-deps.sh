#!/usr/bin/env bash
# Installs the Debian packages that quota builds and tests with, when any is missing.
set -euo pipefail

packages=(cmake g++ make pkg-config sqlite3 libsqlite3-dev libsqlitecpp-dev libfmt-dev catch2
          libcli11-dev nlohmann-json3-dev libcpp-httplib-dev python3 binutils valgrind
          faketime clang libfuzzer-14-dev libclang-rt-14-dev postgresql-15 libpq-dev
          libtomlplusplus-dev prometheus-cpp-dev)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
