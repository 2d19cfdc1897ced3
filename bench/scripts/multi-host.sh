#!/usr/bin/env bash
# Limits shared across hosts, shown (docs/performance.md, "Across hosts"): consumers in separate
# network namespaces of this machine, each reaching one PostgreSQL server through a proxy that
# adds latency, their clocks skewed by seconds (Debian's faketime), consume the same owner of
# a limit of each algorithm until it is full. Admission must be exact: the hosts together are
# allowed exactly --max, and the server's state counts exactly what they were allowed; once with
# the server's clock (Options::server_clock) and once with each host's own, skewed clock.
# Leases too, twice per clock: `concurrency` takes leases of a concurrency limit of --max that
# are never released (exactly --max allowed, and the server lists exactly those leases), and
# `concurrency held` has every thread take a lease of a limit of --lease-max, hold it --hold-ms,
# release it and ask again: the holding intervals that the consumers record on the machine's
# monotonic clock never overlap more than --lease-max deep. Prints a Markdown table (answered
# per second, p50 and p99 per host) and exits 1 when a total is not exact.
#
#   bench/scripts/multi-host.sh [--build DIR] [--hosts N] [--threads T] [--delay-ms D]
#                               [--skew-s S] [--max N] [--lease-max N] [--hold-ms MS]
#
# --build: a build folder with quotactl and quota-hosts-consumer (default build/release);
# --hosts: namespaces (default 3); --threads: consumers per host (default 2); --delay-ms: the
# one-way latency each proxy adds (default 5, a 10 ms round trip); --skew-s: host k's clock is
# (k - (N+1)/2)·S seconds off (default 2); --max: the limits' maximum per day (default 300);
# --lease-max: the leases held at once in the `concurrency held` case (default 2); --hold-ms:
# how long each of its leases is held (default 20).
# Needs root (ip netns), faketime and python3; the server is a private one (tools/postgres.sh)
# and everything made is removed at the end, pass or fail. Not run by the test command: it
# needs namespaces, which a CI container may lack.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=build/release hosts=3 threads=2 delay_ms=5 skew_s=2 max=300 lease_max=2 hold_ms=20
while [ $# -gt 0 ]; do
  case $1 in
    --build | --hosts | --threads | --delay-ms | --skew-s | --max | --lease-max | --hold-ms)
      [ $# -ge 2 ] || { echo "multi-host.sh: $1 takes a value" >&2; exit 2; }
      case $1 in
        --build) build=$2 ;;
        --hosts) hosts=$2 ;;
        --threads) threads=$2 ;;
        --delay-ms) delay_ms=$2 ;;
        --skew-s) skew_s=$2 ;;
        --max) max=$2 ;;
        --lease-max) lease_max=$2 ;;
        --hold-ms) hold_ms=$2 ;;
      esac
      shift 2 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "multi-host.sh: unknown option '${1:0:64}' (see --help)" >&2; exit 2 ;;
  esac
done
for value in "$hosts" "$threads" "$max" "$skew_s" "$delay_ms" "$lease_max" "$hold_ms"; do
  [[ $value =~ ^[0-9]+$ ]] || { echo "multi-host.sh: '${value:0:64}' is not a whole number ≥ 0" >&2; exit 2; }
done
[ "$hosts" -ge 1 ] && [ "$hosts" -le 50 ] || { echo "multi-host.sh: --hosts takes 1 to 50" >&2; exit 2; }
[ "$threads" -ge 1 ] && [ "$max" -ge 1 ] && [ "$lease_max" -ge 1 ] && [ "$hold_ms" -ge 1 ] ||
  { echo "multi-host.sh: --threads, --max, --lease-max and --hold-ms take ≥ 1" >&2; exit 2; }
quotactl=$build/tools/quotactl/quotactl
consumer=$build/bench/quota-hosts-consumer
for program in "$quotactl" "$consumer"; do
  [ -x "$program" ] || { echo "multi-host.sh: $program not found: build it (cmake --build $build --target quotactl quota-hosts-consumer) or pass --build" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "multi-host.sh: needs root for ip netns" >&2; exit 2; }
command -v faketime >/dev/null || { echo "multi-host.sh: faketime missing: bash tools/install-deps.sh" >&2; exit 2; }

source tools/postgres.sh
work=$(mktemp -d /tmp/quota-multi-host.XXXXXX)
proxies=()
cleanup() {
  for pid in "${proxies[@]}"; do kill "$pid" 2>/dev/null || true; done
  for k in $(seq 1 "$hosts"); do
    ip netns del "quota-host$k" 2>/dev/null || true
    ip link del "qhost$k" 2>/dev/null || true
  done
  rm -rf "$work"
  postgres_stop
}
postgres_start max_connections=300 >/dev/null
trap cleanup EXIT  # after postgres_start, whose own trap stops only the server
uri=$QUOTA_TEST_POSTGRES
"$quotactl" --db "$uri" migrate >/dev/null
chmod 0755 "$QUOTA_TEST_POSTGRES_DIR"  # the proxies reach the server's socket

# Host k: namespace quota-host$k, its end of a veth pair 10.231.k.2, the proxy at 10.231.k.1.
for k in $(seq 1 "$hosts"); do
  ns=quota-host$k
  ip netns add "$ns"
  ip link add "qhost$k" type veth peer name "qhost${k}in"
  ip link set "qhost${k}in" netns "$ns"
  ip addr add "10.231.$k.1/24" dev "qhost$k"
  ip link set "qhost$k" up
  ip -n "$ns" addr add "10.231.$k.2/24" dev "qhost${k}in"
  ip -n "$ns" link set "qhost${k}in" up
  ip -n "$ns" link set lo up
  python3 bench/hosts/delay_proxy.py --listen "10.231.$k.1:6432" \
    --to-unix "$QUOTA_TEST_POSTGRES_DIR/.s.PGSQL.5432" --delay-ms "$delay_ms" &
  proxies+=($!)
done
for k in $(seq 1 "$hosts"); do  # each proxy listens before any consumer starts
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/10.231.$k.1/6432") 2>/dev/null; then continue 2; fi
    sleep 0.1
  done
  echo "multi-host.sh: the proxy of host $k did not start" >&2
  exit 1
done

failures=0
echo "| clock | algorithm | host | clock offset | allowed | answered/s | p50 ms | p99 ms |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
for clock in server host; do
  for algorithm in fixed_window sliding_window token_bucket sliding_log concurrency held; do
    limit=hosts_${clock}_$algorithm
    flags=() requests=$(( 4 * max ))
    [ "$clock" = server ] && flags+=(--server-clock)
    case $algorithm in
      concurrency)  # leases never released: the limit fills as a rate limit does
        "$quotactl" --db "$uri" limit set "$limit" --max "$max" --algo concurrency --ttl 1h >/dev/null
        flags+=(--lease) ;;
      held)  # leases held for --hold-ms, then released
        "$quotactl" --db "$uri" limit set "$limit" --max "$lease_max" --algo concurrency --ttl 1m >/dev/null
        flags+=(--lease --hold-ms "$hold_ms")
        requests=$(( 30 * threads )) ;;
      *)
        "$quotactl" --db "$uri" limit set "$limit" --max "$max" --per 1d --algo "$algorithm" >/dev/null ;;
    esac
    pids=()
    for k in $(seq 1 "$hosts"); do
      # Host k's clock: (k - (hosts+1)/2)·skew seconds from the machine's, in tenths.
      offset=$(( (2 * k - hosts - 1) * skew_s * 5 ))
      sign=+; [ "$offset" -lt 0 ] && { sign=-; offset=$(( -offset )); }
      skew="$sign$((offset / 10)).$((offset % 10))s"
      # The wall clock skewed, the monotonic one not: the held intervals compare across hosts.
      ip netns exec "quota-host$k" env DONT_FAKE_MONOTONIC=1 FAKETIME_DONT_FAKE_MONOTONIC=1 \
        faketime -f "$skew" "$consumer" \
        --db "host=10.231.$k.1 port=6432 dbname=quota_test user=postgres" \
        --limit "$limit" --owner shared --threads "$threads" --requests "$requests" \
        --host "host$k" "${flags[@]}" >"$work/$limit.$k.json" &
      pids+=($!)
      echo "$skew" >"$work/$limit.$k.skew"
    done
    for pid in "${pids[@]}"; do wait "$pid" || failures=$((failures + 1)); done
    used=$("$quotactl" --db "$uri" --json usage "$limit" --owner shared |
      python3 -c 'import json,sys; rows=json.load(sys.stdin); print(sum(r["used"] for r in rows))')
    if [ "$algorithm" = concurrency ]; then  # the leases the server lists, one unit each
      leases=$("$quotactl" --db "$uri" --json lease list "$limit" --owner shared |
        python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
      [ "$leases" -eq "$used" ] ||
        { echo "NOT EXACT: $limit: the server lists $leases leases but counts $used held" >&2; failures=$((failures + 1)); }
    fi
    allowed=0
    for k in $(seq 1 "$hosts"); do
      python3 - "$work/$limit.$k.json" "$clock" "$algorithm" "$(cat "$work/$limit.$k.skew")" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {row['host']} | {sys.argv[4]} | {row['allowed']} | "
      f"{row['answered_per_second']:.0f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} |")
if row["failed"]:
    print(f"{row['host']}: {row['failed']} failed: {row['first_error']}", file=sys.stderr)
PY
      allowed=$(( allowed + $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["allowed"])' "$work/$limit.$k.json") ))
    done
    if [ "$algorithm" = held ]; then
      # Every lease was released; at no instant were more than --lease-max held.
      deepest=$(python3 - "$work"/"$limit".*.json <<'PY'
import json, sys
edges = []
for name in sys.argv[1:]:
    for start, end in json.load(open(name))["intervals"]:
        edges += [(start, 1), (end, -1)]
depth = deepest = 0
for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):  # an end before a start
    depth += step
    deepest = max(deepest, depth)
print(deepest)
PY
)
      echo "$limit: $allowed leases taken and released, at most $deepest held at once (maximum $lease_max)" >&2
      if [ "$deepest" -gt "$lease_max" ] || [ "$deepest" -lt 1 ] || [ "$used" -ne 0 ]; then
        echo "NOT EXACT: $limit: $deepest held at once of $lease_max, $used still held" >&2
        failures=$((failures + 1))
      fi
    elif [ "$allowed" -ne "$max" ] || [ "$used" -ne "$allowed" ]; then
      echo "NOT EXACT: $limit: the hosts were allowed $allowed of $max, the server counts $used" >&2
      failures=$((failures + 1))
    fi
  done
done
if [ "$failures" -ne 0 ]; then
  echo "multi-host.sh: $failures check(s) failed" >&2
  exit 1
fi
echo
echo "exact: every limit admitted exactly $max across $hosts hosts, and the server counts it;"
echo "held leases never overlapped more than $lease_max deep"
