#!/usr/bin/env bash
# Against what users would pick instead: quota's consume (quota-bench, each algorithm, a file in
# WAL/NORMAL) beside a Redis 7 Lua fixed-window limiter over loopback (bench/peers/redis_lua.cpp,
# hiredis, EVALSHA) and rate-limiter-flexible's SQLite store on better-sqlite3 in WAL/NORMAL
# with better-sqlite3's bare upsert under it (bench/peers/sqlite_store.js): one client each, the
# same 1,000 owners in the same order, in interleaved rounds (every other round in reverse
# order), then the median ratios of throughput and of CPU time per decision for
# docs/performance.md (bench/scripts/peers-report.py).
# Run on demand, never by the test command; a few minutes, more the first time (installs).
#
#   bench/scripts/peers.sh                  measure and print the tables (Markdown)
#   bench/scripts/peers.sh --docs           also keep the run in bench/results/peers.json and
#                                           put its tables into docs/performance.md
#   bench/scripts/peers.sh --docs-only      only re-render docs/performance.md's tables from
#                                           bench/results/peers.json
#
#   --rounds N       interleaved rounds (default 9; the ratios are the medians of the rounds')
#   --duration SECS  measured time per case and round (default 1, after 0.1 s of warm-up)
#   --npm-dir DIR    where rate-limiter-flexible and better-sqlite3 are installed (default
#                    ${XDG_CACHE_HOME:-~/.cache}/quota-peers; never the repository)
#   --no-install     install nothing: fail if something is missing
#   --keep DIR       keep the run's folder (each round's JSON, the logs) in DIR
#
# What it installs when missing: Debian's redis-server, libhiredis-dev, nodejs and npm
# (apt-get, as root), and rate-limiter-flexible with better-sqlite3 from npm into --npm-dir;
# better-sqlite3 is built from source there (node-gyp against the installed Node's headers)
# when npm leaves it unbuilt. It builds quota-bench and quota-peers-redis (Release) in
# build/release. The Redis server is its own: loopback only, a free port, no persistence, a
# temporary folder, stopped at the end, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
fail() { echo "peers: $1" >&2; exit 2; }

rounds=9
duration=1
npm_dir="${XDG_CACHE_HOME:-$HOME/.cache}/quota-peers"
install=1
keep=""
docs=0
docs_only=0
owners=1000
saved=bench/results/peers.json

number() {  # number OPTION VALUE LOW HIGH: VALUE, or a refusal
  python3 -c 'import sys
try: v = float(sys.argv[2])
except ValueError: sys.exit(1)
sys.exit(0 if float(sys.argv[3]) <= v <= float(sys.argv[4]) else 1)' "$@" ||
    fail "$1 takes a number from $3 to $4, not '$2' (see --help)"
  echo "$2"
}
while (($#)); do
  case "$1" in
    --rounds)
      (($# >= 2)) || fail "--rounds needs a number"
      rounds=$(number --rounds "$2" 1 99)
      [[ "$rounds" =~ ^[0-9]+$ ]] || fail "--rounds takes a whole number, not '$rounds'"
      shift 2 ;;
    --duration)
      (($# >= 2)) || fail "--duration needs a number of seconds"
      duration=$(number --duration "$2" 0.01 60); shift 2 ;;
    --npm-dir)
      (($# >= 2)) || fail "--npm-dir needs a folder"
      npm_dir=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --keep)
      (($# >= 2)) || fail "--keep needs a folder"
      keep=$2; shift 2 ;;
    --docs) docs=1; shift ;;
    --docs-only) docs_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
((docs && docs_only)) && fail "--docs measures and --docs-only does not: give one"
case "$npm_dir" in
  "$PWD"|"$PWD"/*) fail "--npm-dir must be outside the repository, not $npm_dir" ;;
esac

if ((docs_only)); then
  [ -f "$saved" ] || fail "no $saved to render: run with --docs first"
  python3 bench/scripts/peers-report.py "$saved" --update docs/performance.md
  exit 0
fi

# --- What it needs.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
[ -f /usr/include/hiredis/hiredis.h ] || missing+=(libhiredis-dev)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  ((install)) || fail "missing: ${missing[*]} (apt-get install them, or run without --no-install)"
  [ "$(id -u)" -eq 0 ] || fail "missing: ${missing[*]}; run as root, or apt-get install them first"
  echo "peers: installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
# better-sqlite3 12 needs Node 20 or later; 11 still builds on Debian 12's Node 18.
better="better-sqlite3@11"
if ((node_major >= 20)); then better="better-sqlite3@12"; fi
modules_work() {
  NODE_PATH="$npm_dir/node_modules" node -e \
    'require("rate-limiter-flexible"); new (require("better-sqlite3"))(":memory:").close()' \
    2>/dev/null
}
if ! modules_work; then
  ((install)) || fail "rate-limiter-flexible and better-sqlite3 are not usable in $npm_dir (run without --no-install)"
  mkdir -p "$npm_dir"
  if [ ! -d "$npm_dir/node_modules/rate-limiter-flexible" ] ||
     [ ! -d "$npm_dir/node_modules/better-sqlite3" ]; then
    echo "peers: installing rate-limiter-flexible@11 and $better into $npm_dir (npm)" >&2
    [ -f "$npm_dir/package.json" ] || echo '{"private": true}' >"$npm_dir/package.json"
    npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
      rate-limiter-flexible@11 "$better" >&2
  fi
  if ! modules_work; then
    # npm did not build better-sqlite3 (no prebuilt binary to download, or install scripts
    # not run): build it from source against the installed Node's headers.
    nodedir=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
    if [ ! -f "$nodedir/include/node/common.gypi" ]; then
      if ((!install)) || [ "$(id -u)" -ne 0 ]; then
        fail "no Node headers in $nodedir/include/node to build better-sqlite3 (apt-get install libnode-dev)"
      fi
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnode-dev >/dev/null
    fi
    gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
    if [ ! -f "$gyp" ]; then
      if ! command -v node-gyp >/dev/null; then
        if ((!install)) || [ "$(id -u)" -ne 0 ]; then
          fail "no node-gyp to build better-sqlite3 (apt-get install node-gyp)"
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq node-gyp >/dev/null
      fi
      gyp=$(command -v node-gyp)
    fi
    echo "peers: building better-sqlite3 from source (a few minutes)" >&2
    (cd "$npm_dir/node_modules/better-sqlite3" &&
      JOBS=2 node "$gyp" rebuild --release --nodedir="$nodedir" >"$npm_dir/build.log" 2>&1) ||
      fail "better-sqlite3 did not build: see $npm_dir/build.log"
    modules_work || fail "better-sqlite3 built but does not load: see $npm_dir/build.log"
  fi
fi

echo "peers: building quota-bench and quota-peers-redis (Release)" >&2
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target quota-bench quota-peers-redis >/dev/null
bench=build/release/bench/quota-bench
redis_client=build/release/bench/quota-peers-redis

# --- The run's folder and the private Redis server, both gone at the end, pass or fail.
work=$(mktemp -d "${TMPDIR:-/tmp}/quota-peers.XXXXXX")
redis_pid=""
cleanup() {
  local status=$?
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  if [ -n "$keep" ] && [ -d "$work" ]; then
    mkdir -p "$keep" && cp -r "$work"/. "$keep"/ && echo "peers: the run is kept in $keep" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
start_redis() {
  local attempt
  mkdir -p "$work/redis"
  for attempt in 1 2 3; do
    redis_port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
      --dir "$work/redis" --logfile "$work/redis/redis.log" --daemonize no \
      --protected-mode yes >/dev/null 2>&1 &
    redis_pid=$!
    for _ in $(seq 50); do
      if redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null | grep -q PONG; then return 0; fi
      kill -0 "$redis_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
    echo "peers: redis-server did not start on port $redis_port (attempt $attempt)" >&2
  done
  fail "redis-server did not start: see the log (run with --keep DIR)"
}
start_redis
redis_version=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
case "$redis_version" in
  7.*|8.*) ;;
  *) echo "peers: warning: Redis $redis_version, not 7: its Lua and commands may cost otherwise" >&2 ;;
esac

# --- The rounds. Within a round: quota's four consumes (one quota-bench run, its own
# baselines among them), Redis, the store, the bare upsert; every other round in reverse.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
filters=()
for algorithm in sliding_log fixed_window sliding_window token_bucket; do
  filters+=(--filter "consume/$algorithm/wal_normal/$owners\$")
done
"$bench" --work-dir "$work/templates" --prepare "${filters[@]}" >/dev/null
export NODE_PATH="$npm_dir/node_modules"

run_one() {  # run_one WHAT ROUND_DIR
  local what=$1 where=$2
  case "$what" in
    quota)
      "$bench" --work-dir "$work/templates" --repetitions 1 --duration "$duration" --json \
        "${filters[@]}" >"$where/quota.json" 2>"$where/quota.log" ||
        { tail -n 5 "$where/quota.log" >&2; fail "quota-bench failed"; } ;;
    redis)
      "$redis_client" --port "$redis_port" --duration "$duration" --owners "$owners" \
        >"$where/redis.json" ;;
    rlf|raw)
      node bench/peers/sqlite_store.js "$what" --db "$work/$what.db" --duration "$duration" \
        --owners "$owners" >"$where/$what.json"
      rm -f "$work/$what.db" "$work/$what.db-wal" "$work/$what.db-shm" ;;
  esac
}

orders=()
for ((round = 1; round <= rounds; ++round)); do
  order=(quota redis rlf raw)
  if ((round % 2 == 0)); then order=(raw rlf redis quota); fi
  orders+=("${order[*]}")
  mkdir -p "$work/round-$round"
  for what in "${order[@]}"; do
    run_one "$what" "$work/round-$round"
    echo "peers: [$round/$rounds] $what done" >&2
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$work/meta.json" "$rounds" "$duration" "$owners" "$load_before" "$load_after" \
  "${orders[@]}" <<'EOF'
import json, sys, time
path, rounds, duration, owners, before, after, *orders = sys.argv[1:]
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": int(rounds),
           "duration_s": float(duration), "owners": int(owners), "load_before": before,
           "load_after": after, "orders": orders}, open(path, "w"), indent=2)
EOF

if ((docs)); then
  mkdir -p "$(dirname "$saved")"
  python3 bench/scripts/peers-report.py "$work" --save "$saved" --update docs/performance.md
else
  python3 bench/scripts/peers-report.py "$work"
fi
