#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the store's conformance tests and prints ONE line on
# stdout, `WOZKIT_TEST_PG_URL=postgres://...`, for `eval "export $(.ci/start-postgres.sh)"`.
# Everything else goes to stderr.
#
# - Installs Debian's `postgresql` package if no initdb is found under /usr/lib/postgresql.
# - Creates a fresh cluster in $WOZKIT_PG_DIR (default /tmp/wozkit-pg; a server left there by an
#   earlier run is stopped and wiped first), owned by the `postgres` user when run as root
#   (initdb refuses root), by the calling user otherwise.
# - Listens on 127.0.0.1 only, on the first free port from $WOZKIT_PG_PORT (default 25432),
#   with its unix socket in the cluster directory under /tmp; trust authentication (local only).
#   The default lies below Linux's ephemeral range (32768-60999): a port in that range can be held
#   by any outgoing connection's local end, which a connect probe cannot see, and PostgreSQL then
#   fails to bind ("Address already in use"). A start that fails to bind is retried on the next
#   free port, up to $WOZKIT_PG_ATTEMPTS times (default 5).
# - Creates the database `wozkit_test`; the tests create one database per test beside it.
#
# Stop it with: pg_ctl -D /tmp/wozkit-pg/data stop  (as the owner), or just leave it.
set -euo pipefail

log() { echo "start-postgres: $*" >&2; }

find_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | while read -r dir; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; fi
  done | tail -n 1
}

bin=$(find_bin)
if [ -z "$bin" ]; then
  log "PostgreSQL not found; installing it with apt-get"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
  bin=$(find_bin)
  [ -n "$bin" ] || { log "no initdb after installing postgresql"; exit 1; }
fi

base=${WOZKIT_PG_DIR:-/tmp/wozkit-pg}
data="$base/data"

# Settings are checked before an earlier cluster is stopped and wiped below.
port=${WOZKIT_PG_PORT:-25432}
attempts=${WOZKIT_PG_ATTEMPTS:-5}
case "$port$attempts" in *[!0-9]*) log "WOZKIT_PG_PORT and WOZKIT_PG_ATTEMPTS must be numbers"; exit 1 ;; esac
if read -r low high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null \
  && [ "$port" -ge "$low" ] && [ "$port" -le "$high" ]; then
  log "warning: port $port is in the ephemeral range $low-$high; a client socket may hold it"
fi

if [ "$(id -u)" = 0 ]; then
  owner=postgres
  as_owner() { runuser -u postgres -- "$@"; }
else
  owner=$(id -un)
  as_owner() { "$@"; }
fi

# A server from an earlier run: stop it, so every run starts from an empty cluster.
if [ -f "$data/postmaster.pid" ]; then
  log "stopping the previous test server in $data"
  as_owner "$bin/pg_ctl" -D "$data" -m immediate -w stop >&2 || true
fi
rm -rf "$base"
mkdir -p "$base"
[ "$(id -u)" = 0 ] && chown "$owner" "$base"

# A listening port answers a connect; a port held by another socket's local end does not, so
# this probe only skips servers, and a bind failure at start is handled by retrying below.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
next_free_port() {
  local p=$1
  while port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}

log "initdb in $data ($("$bin/postgres" --version))"
as_owner "$bin/initdb" -D "$data" -U wozkit --auth=trust --encoding=UTF8 --locale=C >"$base/initdb.log" 2>&1 \
  || { cat "$base/initdb.log" >&2; exit 1; }

attempt=1
while :; do
  port=$(next_free_port "$port")
  log "starting on 127.0.0.1:$port (attempt $attempt of $attempts)"
  # A fresh log per attempt (pg_ctl creates it as the owner), so the check below reads only
  # this attempt's messages.
  rm -f "$base/server.log"
  if as_owner "$bin/pg_ctl" -D "$data" -l "$base/server.log" -w -t 60 \
    -o "-p $port -k $base -c listen_addresses=127.0.0.1 -c max_connections=400" start >&2; then
    break
  fi
  cat "$base/server.log" >&2 || true
  if ! grep -qiE "address already in use|could not bind|could not create any TCP/IP sockets" "$base/server.log" 2>/dev/null; then
    log "PostgreSQL failed to start, not because of its port (see the log above)"
    exit 1
  fi
  if [ "$attempt" -ge "$attempts" ]; then
    log "no port could be bound after $attempts attempts (last $port); set WOZKIT_PG_PORT to a free one"
    exit 1
  fi
  # pg_ctl gave up; make sure no half-started postmaster keeps the data directory.
  as_owner "$bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  log "port $port is taken (bind failed); trying the next one"
  port=$((port + 1))
  attempt=$((attempt + 1))
done

as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U wozkit wozkit_test >&2
echo "WOZKIT_TEST_PG_URL=postgres://wozkit@127.0.0.1:$port/wozkit_test"
