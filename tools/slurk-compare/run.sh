#!/usr/bin/env bash
# Slurk and wozkit under the same workload: participants in pairs, one text message
# every 2 s each, delivery latency from send to the partner's receipt.
#
# Needs internet (to clone Slurk), Python 3.9-3.12 and a wozkit release build.
# Everything Slurk is put under $WORK (default /tmp/slurk-compare), outside this repo.
#
#   tools/slurk-compare/run.sh                 # 50 100 200 400 participants, 60 s each
#   COUNTS="50 100" DURATION=30 tools/slurk-compare/run.sh
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-/tmp/slurk-compare}
COUNTS=${COUNTS:-"50 100 200 400"}
DURATION=${DURATION:-60}
SLURK_COMMIT=${SLURK_COMMIT:-0a3e73ee66a4910f62e1fee8219cd08cf80d7d58}
SLURK_PORT=${SLURK_PORT:-5055}
WOZKIT_PORT=${WOZKIT_PORT:-18095}
WOZKIT=${WOZKIT:-$WORK/wozkit}
mkdir -p "$WORK/results"

# 1. Slurk at the pinned commit, in its own venv (versions of the time of that commit).
if [ ! -d "$WORK/slurk" ]; then
    git clone https://github.com/clp-research/slurk "$WORK/slurk"
    git -C "$WORK/slurk" checkout "$SLURK_COMMIT"
    # With the marshmallow of server-requirements.txt a schema's declared fields are not
    # class attributes: reach the error schema's `errors` field through _declared_fields.
    sed -i "s/self.ERROR_SCHEMA.errors.allow_none = True/self.ERROR_SCHEMA._declared_fields['errors'].allow_none = True/" \
        "$WORK/slurk/slurk/extensions/api.py"
    # The pinned commit ("Apply black", 0a3e73e) dropped the two imports that register Slurk's
    # Socket.IO handlers, so clients connect and never join a room; upstream put them back two
    # and three days later (819bac6 "Reintroduce import statement", login events; 89f3cc7
    # "Import chat events again", chat events). Put the same two lines back here.
    grep -q '^from .events import \*' "$WORK/slurk/slurk/views/login/__init__.py" ||
        sed -i '1i from .events import *  # NOQA' "$WORK/slurk/slurk/views/login/__init__.py"
    grep -q '^import slurk.views.chat.events' "$WORK/slurk/slurk/views/chat/__init__.py" ||
        sed -i '1i import slurk.views.chat.events  # NOQA' "$WORK/slurk/slurk/views/chat/__init__.py"
fi
# A checkout made before the two imports were restored above measures nothing: check them.
grep -q '^from .events import \*' "$WORK/slurk/slurk/views/login/__init__.py" &&
    grep -q '^import slurk.views.chat.events' "$WORK/slurk/slurk/views/chat/__init__.py" || {
    echo "$WORK/slurk lacks the imports that register Slurk's chat handlers; remove it and run again" >&2
    exit 1
}
if [ ! -x "$WORK/server-venv/bin/gunicorn" ]; then
    python3 -m venv "$WORK/server-venv"
    "$WORK/server-venv/bin/pip" install -q -r "$HERE/server-requirements.txt"
fi
if [ ! -x "$WORK/client-venv/bin/python" ]; then
    python3 -m venv "$WORK/client-venv"
    "$WORK/client-venv/bin/pip" install -q -r "$HERE/client-requirements.txt"
fi

# 2. wozkit, copied out of target/ so other builds cannot replace it during a run.
if [ ! -x "$WOZKIT" ]; then
    (cd "$REPO" && cargo build --release -p wozkit)
    cp "$REPO/target/release/wozkit" "$WOZKIT"
fi

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }

run_slurk() {  # $1 = participants
    local n=$1 db="$WORK/slurk-$1.db" log="$WORK/slurk-$1.log"
    rm -f "$db"
    # As Slurk's scripts/start_server.sh starts it: one gunicorn gevent-websocket
    # worker, file SQLite; production mode so the REST API needs the admin token.
    (cd "$WORK/slurk"
     SLURK_SECRET_KEY=bench SLURK_DATABASE_URI="sqlite:///$db" FLASK_ENV=production \
        exec "$WORK/server-venv/bin/gunicorn" -b "127.0.0.1:$SLURK_PORT" --pid "$WORK/slurk.pid" \
        -k geventwebsocket.gunicorn.workers.GeventWebSocketWorker 'slurk:create_app()' \
        >"$log" 2>&1) &
    for _ in $(seq 150); do grep -q '^admin token' "$log" 2>/dev/null && break; sleep 0.2; done
    wait_port "$SLURK_PORT"
    local master worker token
    master=$(cat "$WORK/slurk.pid"); worker=$(pgrep -P "$master" | head -1)
    token=$(grep -A1 '^admin token' "$log" | tail -1)
    "$WORK/client-venv/bin/python" "$HERE/slurk_load.py" --url "http://127.0.0.1:$SLURK_PORT" \
        --admin-token "$token" --participants "$n" --duration "$DURATION" \
        --server-pid "$worker" --json | tee "$WORK/results/slurk-$n.json"
    kill -TERM "$master"; wait_gone "$master"; rm -f "$WORK/slurk.pid"
}

run_wozkit() {  # $1 = participants
    local n=$1 data="$WORK/wozkit-data-$1"
    rm -rf "$data"
    "$WOZKIT" serve --addr "127.0.0.1:$WOZKIT_PORT" --data "$data" --join-limit 0 \
        >"$WORK/wozkit-$n.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$WORK/wozkit.pid"
    wait_port "$WOZKIT_PORT"
    "$WOZKIT" bench --url "http://127.0.0.1:$WOZKIT_PORT" --participants "$n" \
        --duration "$DURATION" --server-pid "$pid" --json | tee "$WORK/results/wozkit-$n.json"
    kill -INT "$pid"; wait "$pid" || true; rm -f "$WORK/wozkit.pid"
}

# Stop a server left running if this script stops early.
trap 'for f in "$WORK/slurk.pid" "$WORK/wozkit.pid"; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; rm -f "$f"; done' EXIT

wait_gone() { for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; kill -9 "$1" || true; }

# 3. Alternate the two servers at each size, so a busy spell hits both.
for n in $COUNTS; do
    run_slurk "$n"
    run_wozkit "$n"
done
python3 "$HERE/table.py" "$WORK/results"
