#!/usr/bin/env bash
# A private PostgreSQL cluster for the test command: made in a temporary folder, listening only
# on a Unix socket in that folder (so it meets no other server on the machine), and always
# stopped and removed again.
#
#   source tools/postgres.sh
#   postgres_start [NAME=VALUE ...]
#                             # sets QUOTA_TEST_POSTGRES to a connection URI of a fresh database;
#                             # each NAME=VALUE is a server setting (fsync=off, ...)
#   ...                       # run the suites
#   postgres_stop             # stops the server and removes its folder (idempotent)
#
# postgres_start installs a stop on EXIT itself, so a failing suite still removes the cluster.
# PostgreSQL refuses to run as root: the server runs as the `postgres` system user, which the
# Debian package creates. The cluster trusts local connections (it is reachable only through
# its own socket, in a folder only root and postgres can enter); the tests that are about
# passwords and roles make their own roles with passwords inside it.

postgres_bin=${POSTGRES_BIN:-/usr/lib/postgresql/15/bin}
postgres_dir=""

postgres_as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

postgres_start() {
  if [ ! -x "$postgres_bin/initdb" ]; then
    echo "postgres.sh: $postgres_bin/initdb not found: install postgresql-15 (tools/install-deps.sh does)" >&2
    return 1
  fi
  postgres_dir=$(mktemp -d /tmp/quota-postgres.XXXXXX)
  chmod 0750 "$postgres_dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$postgres_dir"; fi
  trap postgres_stop EXIT
  postgres_as_server_user "$postgres_bin/initdb" -D "$postgres_dir/data" -U postgres \
    --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$postgres_dir/initdb.log" 2>&1 || {
    cat "$postgres_dir/initdb.log" >&2
    return 1
  }
  # No TCP at all; the socket lives in the cluster's own folder.
  local settings="-c listen_addresses='' -c unix_socket_directories='$postgres_dir'"
  settings+=" -c max_connections=200"
  local setting
  for setting in "$@"; do settings+=" -c $setting"; done
  postgres_as_server_user "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -w -t 60 \
    -l "$postgres_dir/server.log" -o "$settings" start >/dev/null || {
    cat "$postgres_dir/server.log" >&2
    return 1
  }
  postgres_as_server_user "$postgres_bin/createdb" -h "$postgres_dir" -U postgres quota_test
  export QUOTA_TEST_POSTGRES="postgresql://postgres@/quota_test?host=$postgres_dir"
  export QUOTA_TEST_POSTGRES_DIR="$postgres_dir"
  echo "postgres: a private cluster at $postgres_dir ($("$postgres_bin/postgres" --version))"
}

postgres_stop() {
  if [ -n "$postgres_dir" ] && [ -d "$postgres_dir" ]; then
    postgres_as_server_user "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -m immediate -w \
      stop >/dev/null 2>&1 || true
    rm -rf "$postgres_dir"
  fi
  postgres_dir=""
}
