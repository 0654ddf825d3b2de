#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback for the tests that need one, and print
# the DSN to use (CALLSAFE_PG_DSN). Usage: tools/postgres.sh start|stop|restart [PORT]
# PORT defaults to $CALLSAFE_PG_PORT, then 54329; each port has its own data folder
# ($CALLSAFE_PG_DATA, default /tmp/callsafe-pg-PORT) and socket, so engineers and tests
# that pick different ports never share a server.
set -euo pipefail
cmd=${1:-start}
port=${2:-${CALLSAFE_PG_PORT:-54329}}
data=${CALLSAFE_PG_DATA:-/tmp/callsafe-pg-$port}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || { echo "postgresql is not installed (apt-get install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
  start)
    if [ ! -s "$data/PG_VERSION" ]; then
      mkdir -p "$data"
      [ "$(id -u)" = 0 ] && chown postgres:postgres "$data"
      as_pg "$bin/initdb" -D "$data" -A trust -U postgres >/dev/null
    fi
    if ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k /tmp -c fsync=off" start >/dev/null
    fi
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
    ;;
  restart)
    "$0" stop "$port" && exec "$0" start "$port"
    ;;
  *) echo "usage: $0 start|stop|restart [PORT]" >&2; exit 2 ;;
esac
