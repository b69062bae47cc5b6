#!/usr/bin/env python3
"""Served replies must equal the jobs runner's, byte for byte (issue 16's first acceptance line).

For each benchmark and backend: the benchmark's N distinct requests (warpvisor-bench
--write-requests) run once through the jobs runner (`warpvisor run --jobs`, the reference),
then through `warpvisor serve` of the WASI program and, where the benchmark is ported to the
guest SDK, of the resident handler, sent by CONCURRENCY client threads at once. Every reply must
be 200 with the jobs runner's stdout for that request as its body. One line per run on stdout;
exit status 1 if any reply differs.

    scripts/serve-identity.py --backends cpu,wasmtime --requests 10000 --concurrency 256

Needs release builds of warpvisor and warpvisor-bench (cargo build --release --workspace).
"""
import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/warpvisor")
BENCH = os.path.join(ROOT, "target/release/warpvisor-bench")
ALL = "scrypt,pbkdf2,lz4,strings,histogram,phash,phash_modified,blur_bmp,blur_jpeg,bill_pdf"
RESIDENT = {"scrypt", "phash_modified", "strings"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# Jobs per jobs-runner call: 10,000 image requests are over the runner's 1 GiB jobs-file limit.
CHUNK = 2000


def reference(name, backend, jobs_file, vms, work):
    """The jobs runner's stdout per request, in request order."""
    with open(jobs_file) as f:
        lines = f.readlines()
    results = []
    for start in range(0, len(lines), CHUNK):
        part = os.path.join(work, f"{name}.part.jsonl")
        with open(part, "w") as f:
            f.writelines(lines[start:start + CHUNK])
        out = os.path.join(work, f"{name}.{backend}.expected.jsonl")
        run = subprocess.run([BIN, "run", f"{ROOT}/guests/wasm/bench-{name}.wasm", "--backend",
                              backend, "--vms", str(vms), "--jobs", part, "--output", out],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"{name} on {backend}: the jobs runner failed: {run.stderr}")
        with open(out) as f:
            results.extend(f.readlines())
    replies = []
    for line in results:
        r = json.loads(line)
        if r.get("trap") or r.get("exit_code") != 0:
            sys.exit(f"{name} on {backend}: a job did not exit 0 in the jobs runner: {line}")
        replies.append(base64.b64decode(r["stdout_base64"]) if "stdout_base64" in r
                       else r["stdout"].encode())
    return replies


def serve(module, backend, vms, concurrency, work):
    port = free_port()
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen([BIN, "serve", module, "--backend", backend, "--vms", str(vms),
                             "--queue-depth", str(max(concurrency * 2, vms * 4)),
                             "--listen", f"127.0.0.1:{port}"], stderr=log, stdout=log)
    deadline = time.time() + 900
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"serve {module} exited: {open(log.name).read()}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.25)
    proc.kill()
    sys.exit(f"serve {module} was not ready in 900 s")


def drive(port, bodies, expected, concurrency):
    """Sends every body once from `concurrency` threads; returns (mismatches, seconds)."""
    local = threading.local()
    bad = []

    def one(i):
        c = getattr(local, "c", None)
        for attempt in range(2):
            try:
                if c is None:
                    c = local.c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                c.request("POST", "/run", body=bodies[i])
                r = c.getresponse()
                body = r.read()
                if r.status != 200 or body != expected[i]:
                    bad.append((i, r.status, body[:80]))
                return
            except (OSError, http.client.HTTPException) as e:
                c = local.c = None
                if attempt == 1:
                    bad.append((i, "error", str(e)))

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(len(bodies))))
    return bad, time.time() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="cpu,wasmtime")
    p.add_argument("--benchmarks", default=ALL)
    p.add_argument("--requests", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--vms", type=int, default=64)
    a = p.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as work:
        for name in a.benchmarks.split(","):
            subprocess.run([BENCH, "--write-requests", work, "--benchmarks", name,
                            "--vms", str(a.requests), "--batches", "1"],
                           check=True, stderr=subprocess.DEVNULL)
            jobs_file = os.path.join(work, f"{name}.jobs.jsonl")
            with open(jobs_file) as f:
                bodies = [base64.b64decode(json.loads(l)["stdin_base64"]) for l in f]
            for backend in a.backends.split(","):
                expected = reference(name, backend, jobs_file, a.vms, work)
                models = ["bench", "resident"] if name in RESIDENT else ["bench"]
                for model in models:
                    module = f"{ROOT}/guests/wasm/{model}-{name}.wasm"
                    proc, port = serve(module, backend, a.vms, a.concurrency, work)
                    try:
                        bad, secs = drive(port, bodies, expected, a.concurrency)
                    finally:
                        proc.terminate()
                        proc.wait()
                    kind = "WASI" if model == "bench" else "resident"
                    verdict = "identical" if not bad else f"{len(bad)} DIFFER, first {bad[0]}"
                    print(f"{name:15} {backend:9} {kind:9} {len(bodies)} requests, concurrency "
                          f"{a.concurrency}, {len(bodies) / secs:7.1f} req/s: {verdict}", flush=True)
                    failed |= bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
