#!/usr/bin/env bash
# Two `warpvisor serve` replicas behind HAProxy on loopback; one replica is killed (SIGKILL)
# in the middle of a run of requests. Checks that every request the balancer could retry was
# answered 200 with its own reply, and that the survivor keeps serving.
#
#   scripts/serve-replicas.sh [WARPVISOR_BINARY] [REQUESTS]
#
# Needs haproxy (apt-get install -y haproxy) and python3. The module is the SDK's Rust example
# (guests/wasm/resident-echo.wasm), on the cpu backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/warpvisor}"
requests="${2:-3000}"
command -v haproxy >/dev/null || { echo "haproxy is needed: apt-get install -y haproxy" >&2; exit 2; }
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p1=$(port); p2=$(port); front=$(port)
start_replica() {
  "$bin" serve guests/wasm/resident-echo.wasm --backend cpu --vms 8 --queue-depth 256 \
    --listen "127.0.0.1:$1" >/dev/null 2>"$work/replica-$1.log" &
  pids+=($!)
}
start_replica "$p1"; r1=$!
start_replica "$p2"; r2=$!
for p in "$p1" "$p2"; do
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$p/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
done

cat >"$work/haproxy.cfg" <<CFG
global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  # A replica that dies takes its connections with it: requests whose reply did not come
  # are sent again to the other (the echo handler is idempotent), up to 3 times.
  option http-buffer-request
  retries 3
  retry-on conn-failure empty-response response-timeout
  option redispatch 1
frontend api
  bind 127.0.0.1:$front
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  server r1 127.0.0.1:$p1 check inter 200ms fall 1 rise 2
  server r2 127.0.0.1:$p2 check inter 200ms fall 1 rise 2
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
pids+=($!)
sleep 1

# The client: REQUESTS distinct requests over 32 connections; replica 1 is killed after a
# third of them have been answered.
python3 - "$front" "$requests" "$r1" <<'PY'
import http.client, os, signal, sys, threading
front, total, victim = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
done, bad, killed = [0], [], [False]
def worker(ids):
    conn = http.client.HTTPConnection("127.0.0.1", front, timeout=60)
    for i in ids:
        body = f"request {i}".encode()
        try:
            conn.request("POST", "/run", body)
            r = conn.getresponse()
            data = r.read()
            ok = r.status == 200 and data.split(b": ", 1)[-1] == body.upper()
        except Exception as e:
            ok, data = False, repr(e).encode()
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", front, timeout=60)
        with lock:
            done[0] += 1
            if not ok:
                bad.append((i, data[:80]))
            if done[0] == total // 3 and not killed[0]:
                os.kill(victim, signal.SIGKILL)
                killed[0] = True
                print(f"killed replica 1 (pid {victim}) after {done[0]} replies", flush=True)
threads = [threading.Thread(target=worker, args=(range(t, total, 32),)) for t in range(32)]
for t in threads: t.start()
for t in threads: t.join()
print(f"{done[0]} requests, {len(bad)} not answered 200 with their own reply")
for b in bad[:10]: print("  ", b)
sys.exit(1 if bad or not killed[0] else 0)
PY
# The survivor serves on, directly and through the balancer.
curl -sf --data-binary survivor "http://127.0.0.1:$p2/run" | grep -q "SURVIVOR"
curl -sf --data-binary balanced "http://127.0.0.1:$front/run" | grep -q "BALANCED"
echo "the survivor serves; replica 1 is gone: $(kill -0 "$r1" 2>/dev/null && echo no || echo yes)"
