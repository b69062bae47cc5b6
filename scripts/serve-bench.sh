#!/usr/bin/env bash
# The serving benchmark: `warpvisor serve` driven by hey, against the jobs runner on the same
# fleet. For each benchmark ported to the guest SDK (scrypt, phash_modified, strings), on each
# backend: the jobs runner's throughput after compilation (`warpvisor run --jobs --stats`, 4
# batches of --vms jobs, kernel cache warm); `serve` of the WASI program and of the resident handler, closed loop (hey, 2 x
# VMs connections, 15 s): throughput and p50/p99 latency; and both served at a fixed rate of
# half the resident handler's capacity (hey -q): p50/p99. Then each benchmark's native x86
# handler behind the same HTTP stack (native-serve: axum on tokio), closed loop the same way.
# Markdown on stdout.
#
#   scripts/serve-bench.sh [BACKENDS] [VMS] [BENCHMARKS]
#   e.g. scripts/serve-bench.sh "cpu wasmtime" 64 "scrypt phash_modified strings lz4"
# (benchmarks without a resident port get "-" in its columns and a fixed rate of half the WASI
# program's capacity).
#
# SECONDS_PER_RUN sets each measured run (default 15); LOADGEN=wrk runs the closed loops with
# wrk instead of hey (the fixed-rate runs always use hey -q).
# Needs hey (apt-get install -y hey wrk), release builds of warpvisor, warpvisor-bench and native-serve
# (cargo build --release --workspace), and the machine otherwise idle.
set -euo pipefail
cd "$(dirname "$0")/.."
backends="${1:-cpu wasmtime}"
vms="${2:-64}"
benchmarks="${3:-scrypt phash_modified strings}"
bin=target/release/warpvisor
benchbin=target/release/warpvisor-bench
nativebin=target/release/native-serve
work="$(mktemp -d)"
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

serve() { # MODULE BACKEND
  "$bin" serve "$1" --backend "$2" --vms "$vms" --queue-depth $((vms * 8)) \
    --listen "127.0.0.1:$port" 2>"$work/server.log" &
  server=$!
  ready
}
serve_native() { # NAME
  "$nativebin" "$1" --listen "127.0.0.1:$port" 2>"$work/server.log" &
  server=$!
  ready
}
ready() {
  for _ in $(seq 2400); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return; sleep 0.25; done
  echo "serve did not start: $(cat "$work/server.log")" >&2; exit 1
}
stop() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; }
# hey's summary → "rps p50 p99 non200"
hey_stats() {
  awk '/Requests\/sec/ {rps=$2} / 50% in/ {p50=$3} / 99% in/ {p99=$3}
       /^\s*\[[0-9]+\]/ {code=substr($1,2,3); if (code!="200") bad+=$2}
       END {printf "%.1f %.1f %.1f %d\n", rps, p50*1000, p99*1000, bad}' "$1"
}

# wrk's summary (--latency) → "rps p50 p99 failed", latencies in ms; failed: replies not 2xx
# and socket errors ("Socket errors: connect 0, read 0, write 0, timeout 12").
wrk_stats() {
  awk 'function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
       /Requests\/sec/ {rps=$2} /^ +50%/ {p50=ms($2)} /^ +99%/ {p99=ms($2)} /Non-2xx/ {bad+=$5}
       /Socket errors/ {bad+=$4+$6+$8+$10}
       END {printf "%.1f %.1f %.1f %d\n", rps, p50, p99, bad}' "$1"
}
# One closed-loop run against /run: SECONDS BODY → "rps p50 p99 non200". LOADGEN=wrk drives it
# with wrk (one thread, epoll, C) instead of hey (Go): on this 2-core machine the load
# generator shares the cores with the server, and wrk takes a fraction of hey's CPU.
closed_loop() {
  if [ "${LOADGEN:-hey}" = wrk ]; then
    printf 'wrk.method = "POST"\nlocal f = io.open("%s", "rb")\nwrk.body = f:read("*a")\nf:close()\n' "$2" >"$work/post.lua"
    wrk -t1 -c $((vms * 2)) -d "${1}s" --latency -s "$work/post.lua" "http://127.0.0.1:$port/run" >"$work/closed.txt"
    wrk_stats "$work/closed.txt"
  else
    hey -z "${1}s" -c $((vms * 2)) -m POST -D "$2" "http://127.0.0.1:$port/run" >"$work/closed.txt"
    hey_stats "$work/closed.txt"
  fi
}

echo "| Benchmark | Backend | jobs runner (req/s) | serve WASI (req/s, p50/p99 ms) | serve resident (req/s, p50/p99 ms) | WASI / resident vs jobs runner | fixed rate (req/s): WASI p50/p99, resident p50/p99 |"
echo "|---|---|---|---|---|---|---|"
for name in $benchmarks; do
  models="bench"
  [ -e "guests/wasm/resident-$name.wasm" ] && models="bench resident"
  "$benchbin" --write-requests "$work" --benchmarks "$name" --vms "$vms" --batches 4 2>/dev/null
  jobs="$work/$name.jobs.jsonl"; n=$(wc -l <"$jobs")
  for backend in $backends; do
    "$bin" run "guests/wasm/bench-$name.wasm" --backend "$backend" --vms "$vms" --jobs "$jobs" >/dev/null 2>&1 # warm the cache
    # Throughput after compilation (--stats): a server compiles once, before it listens.
    runner=$("$bin" run "guests/wasm/bench-$name.wasm" --backend "$backend" --vms "$vms" \
      --jobs "$jobs" --stats 2>&1 >/dev/null | sed -n 's/.*(\([0-9.]*\) jobs\/s after compilation).*/\1/p')
    declare -A rps=([resident]=-) p50=([resident]=-) p99=([resident]=-)
    for model in $models; do
      serve "guests/wasm/$model-$name.wasm" "$backend"
      closed_loop 2 "$work/$name.body" >/dev/null # warm up
      read -r r a b bad < <(closed_loop "${SECONDS_PER_RUN:-15}" "$work/$name.body")
      rps[$model]=$r; p50[$model]=$a; p99[$model]=$b
      [ "$bad" = 0 ] || echo "warning: $name $backend $model: $bad replies not 200" >&2
      stop
    done
    capacity=${rps[resident]}
    [ "$capacity" = - ] && capacity=${rps[bench]}
    rate=$(python3 -c "print(max(1, int($capacity / 2)))")
    fixed=""
    for model in $models; do
      serve "guests/wasm/$model-$name.wasm" "$backend"
      workers=$((vms * 2)); q=$(python3 -c "print(max(1, round($rate / $workers)))")
      hey -z "${SECONDS_PER_RUN:-15}s" -c "$workers" -q "$q" -m POST -D "$work/$name.body" "http://127.0.0.1:$port/run" >"$work/fixed.txt"
      read -r r a b bad < <(hey_stats "$work/fixed.txt")
      fixed="$fixed $a/$b"
      stop
    done
    ratio=$(python3 -c "import sys; b, r, j = sys.argv[1:]; print(f'{float(b)/float(j):.2f}x / ' + ('-' if r == '-' else f'{float(r)/float(j):.2f}x'))" "${rps[bench]}" "${rps[resident]}" "$runner")
    echo "| $name | $backend | $runner | ${rps[bench]} (${p50[bench]}/${p99[bench]}) | ${rps[resident]} (${p50[resident]}/${p99[resident]}) | $ratio | $rate:$fixed |"
  done
done
echo
echo "| Benchmark | native handler, same HTTP stack (req/s, p50/p99 ms) |"
echo "|---|---|"
for name in $benchmarks; do
  "$benchbin" --write-requests "$work" --benchmarks "$name" --vms 1 --batches 1 2>/dev/null
  serve_native "$name"
  closed_loop 2 "$work/$name.body" >/dev/null # warm up
  read -r r a b bad < <(closed_loop "${SECONDS_PER_RUN:-15}" "$work/$name.body")
  [ "$bad" = 0 ] || echo "warning: $name native: $bad replies not 200" >&2
  stop
  echo "| $name | $r ($a/$b) |"
done
