#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the history tests and print its connection URL.
# Needs Debian's `postgresql` package (its binaries in /usr/lib/postgresql/<version>/bin). Run as root, the
# server runs as the `postgres` user (PostgreSQL refuses to run as root). Usage:
#   export OPSCOPE_TEST_POSTGRES="$(.ci/postgres.sh [DATA_DIR] [PORT])"
set -euo pipefail
data="$(realpath -m "${1:-/tmp/opscope-postgres}")"  # absolute: the server commands run from /
port="${2:-55432}"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
# From /: the postgres user may not enter the checkout (a clone in a 0700 temporary folder printed "could not
# change directory" for every call).
as_postgres() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }
if [ ! -s "$data/PG_VERSION" ]; then
  mkdir -p "$data"
  [ "$(id -u)" = 0 ] && chown postgres: "$data"
  as_postgres "$bin/initdb" -D "$data" -A trust -U postgres >/dev/null
fi
if ! as_postgres "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  as_postgres "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k /tmp" start >/dev/null
fi
psql_() { as_postgres psql -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ "$(psql_ -c "SELECT 1 FROM pg_roles WHERE rolname = 'opscope'")" != 1 ]; then
  psql_ -c "CREATE ROLE opscope LOGIN"
fi
if [ "$(psql_ -c "SELECT 1 FROM pg_database WHERE datname = 'opscope_test'")" != 1 ]; then
  psql_ -c "CREATE DATABASE opscope_test OWNER opscope"
fi
echo "postgresql://opscope@127.0.0.1:$port/opscope_test"
