#!/usr/bin/env bash
# Overload test of `warpvisor serve`: measure capacity, then offer 3x capacity for 30 s with
# hey (an open-loop rate: workers x QPS each) while a checker sends tagged requests and checks
# each reply is its own. The server must keep answering, refuse the excess with 429 (bounded
# queue) rather than queueing without bound, keep its memory bounded, and answer every request
# it accepted exactly once with the right body.
#
#   scripts/serve-overload.sh [WARPVISOR_BINARY] [BACKEND] [SECONDS]
#
# Needs hey (apt-get install -y hey) and python3. Module: resident Strings (JSON tweets in,
# tokens and hashtags out), 64 VMs, queue depth 256.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
bin="${1:-target/release/warpvisor}"
backend="${2:-cpu}"
seconds="${3:-30}"
command -v hey >/dev/null || { echo "hey is needed: apt-get install -y hey" >&2; exit 2; }
work="$(mktemp -d)"
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

python3 - "$work/body.json" <<'PY'
import json, random, sys
random.seed(1)
words = "the gpu is fast and i love wasm on every core of this machine we run it".split()
tweets = [" ".join(random.choice(words) for _ in range(12)) + f" #tag{i % 7} #wasm" for i in range(100)]
open(sys.argv[1], "w").write(json.dumps({"tweets": tweets}))
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve guests/wasm/resident-strings.wasm --backend "$backend" --vms 64 --queue-depth 256 \
  --listen "127.0.0.1:$port" 2>"$work/server.log" &
server=$!
for _ in $(seq 1200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.25; done
url="http://127.0.0.1:$port/run"
rss() { awk '/VmRSS/ {print $2}' "/proc/$server/status"; }

# Capacity: closed loop, 64 connections, 10 s.
hey -z 10s -c 64 -m POST -D "$work/body.json" "$url" >"$work/capacity.txt"
capacity=$(awk '/Requests\/sec/ {printf "%d", $2}' "$work/capacity.txt")
echo "capacity ($backend, closed loop, 64 connections): $capacity requests/s; RSS $(rss) KiB"
rate=$((capacity * 3))
# More workers than the server holds (queue + VMs), so the offered rate is reached and the
# excess meets a full queue; each worker waits for its reply before its next request.
workers=1024
per_worker=$(( (rate + workers - 1) / workers ))
echo "offering $rate requests/s ($workers workers x $per_worker/s) for ${seconds}s"

# RSS every second during the overload.
( while kill -0 "$server" 2>/dev/null; do rss; sleep 1; done ) >"$work/rss.txt" &
sampler=$!
hey -z "${seconds}s" -c "$workers" -q "$per_worker" -t 30 -m POST -D "$work/body.json" "$url" \
  >"$work/overload.txt" &
load=$!
# The checker: tagged requests during the overload; each must be its own reply or a 429.
python3 - "$port" "$seconds" "$work/body.json" <<'PY'
import http.client, json, sys, time, threading
port, seconds, body = int(sys.argv[1]), float(sys.argv[2]), json.load(open(sys.argv[3]))
end = time.time() + seconds - 2
lock = threading.Lock()
stats = {"ok": 0, "refused": 0, "wrong": 0, "other": 0}
def check(t):
    i = 0
    while time.time() < end:
        i += 1
        tag = f"#check{t}x{i}"
        mine = dict(body, tweets=body["tweets"][:-1] + [f"unique {tag}"])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("POST", "/run", json.dumps(mine).encode())
            r = conn.getresponse(); data = r.read()
            key = ("ok" if tag[1:] in data.decode(errors="replace") else "wrong") if r.status == 200 \
                else "refused" if r.status in (429, 503) else "other"
        except Exception:
            key = "other"
        finally:
            conn.close()
        with lock:
            stats[key] += 1
threads = [threading.Thread(target=check, args=(t,)) for t in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("checker:", stats)
sys.exit(1 if stats["wrong"] or stats["other"] or not stats["ok"] else 0)
PY
wait "$load"
kill "$sampler" 2>/dev/null || true
echo "--- hey, offered 3x capacity:"
grep -E "Requests/sec|Total:|Status code|\[[0-9]+\]|50%|99%" "$work/overload.txt"
echo "RSS during the overload (KiB): max $(sort -n "$work/rss.txt" | tail -1), min $(sort -n "$work/rss.txt" | head -1)"
curl -sf "http://127.0.0.1:$port/metrics" | grep -E "^warpvisor_requests_total|^warpvisor_requests_refused_total|^warpvisor_queue_depth"
# Still answering afterwards.
curl -sf -o /dev/null -w "after the overload: %{http_code}\n" --data-binary @"$work/body.json" "$url"
