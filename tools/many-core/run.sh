#!/usr/bin/env bash
# The many-core benchmark (docs/performance.md, "2026-11-27: many cores"): one `wozkit serve`
# given every core with 50,000 participants (needs an open-file limit above 50,000), the same
# with 10,000 or 19,000 (per-thread shares), and both processes pinned to two cores with 10,000,
# each on a fresh data folder on disk, DURATION (60) seconds measured by `wozkit bench`.
#
#   BIN=path/to/wozkit OUT=results-dir tools/many-core/run.sh [RUNS...]
#
# RUNS are names from the list below (default: all). Every result is the bench's --json, beside
# the server's log and the bench's standard error; machine.txt says what the machine was.
set -u
BIN=${BIN:-target/release/wozkit}
OUT=${OUT:-/tmp/many-core}
DURATION=${DURATION:-60}
mkdir -p "$OUT"
cores=$(nproc)
last=$((cores - 1))

{
  echo "cores: $cores"
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|Thread\(s\)|Socket\(s\)|MHz' || true
  echo "open files: soft $(ulimit -Sn) hard $(ulimit -Hn)"
  echo "ephemeral ports: $(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)"
  echo "somaxconn: $(cat /proc/sys/net/core/somaxconn 2>/dev/null)"
  uname -r
  free -m
  df -h . /tmp
  findmnt -T . -o SOURCE,FSTYPE,OPTIONS 2>/dev/null || true
  # fsync cost of the disk the data goes to: 200 synchronous 4 KiB writes
  start=$(date +%s%N)
  dd if=/dev/zero of=./fsync-probe bs=4k count=200 oflag=dsync 2>/dev/null
  end=$(date +%s%N)
  rm -f ./fsync-probe
  echo "fsync (dd oflag=dsync, 4 KiB): $(( (end - start) / 200000 )) µs per write"
} > "$OUT/machine.txt" 2>&1

# run NAME PARTICIPANTS CPUS [serve options...]
run() {
  local name=$1 n=$2 cpus=$3
  shift 3
  local data port spid sources
  data=$(mktemp -d "$PWD/perf-data-XXXX")
  port=$((20000 + RANDOM % 10000))
  sources=$(( (n + 9999) / 10000 + 1 ))
  echo "== $name: $n participants on CPUs $cpus ($(date +%T))"
  taskset -c "$cpus" "$BIN" serve --addr "127.0.0.1:$port" --data "$data" --join-limit 0 "$@" \
    >"$OUT/$name.server.log" 2>&1 &
  spid=$!
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  timeout $((DURATION + 240)) taskset -c "$cpus" "$BIN" bench --url "http://127.0.0.1:$port" \
    --participants "$n" --duration "$DURATION" --server-pid "$spid" \
    --source-addresses "$sources" ${BENCH_ARGS:-} --json >"$OUT/$name.json" 2>"$OUT/$name.bench.err"
  echo "   bench exit $?"
  grep -c panicked "$OUT/$name.server.log" | sed 's/^/   panics in the server log: /'
  kill -INT "$spid" 2>/dev/null
  wait "$spid"
  rm -rf "$data"
}

runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(all-50000 all-10000 two-10000)
for r in "${runs[@]}"; do
  case $r in
    all-50000) run all-50000 50000 "0-$last" ;;
    all-10000) run all-10000 10000 "0-$last" ;;
    two-10000) run two-10000 10000 "0,1" ;;
    all-30000) run all-30000 30000 "0-$last" ;;
    # 19,000 is as many as fit under an open-file limit of 20,000 (one socket per participant
    # on each side); "fast" sends 1.3 messages/s each, the message rate of 50,000 at 0.5/s.
    all-19000) run all-19000 19000 "0-$last" ;;
    all-19000-fast) BENCH_ARGS="--rate 1.3" run all-19000-fast 19000 "0-$last" ;;
    two-10000-w2) run two-10000-w2 10000 "0,1" --workers 2 ;;
    *) echo "unknown run $r" >&2 ;;
  esac
done
