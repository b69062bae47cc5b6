#!/usr/bin/env bash
# The second GPU call of 2026-11-26 (docs/gpu-runs.md): correctness at --opt-level 0 (NVRTC -G)
# after NVRTC -O2 compile time ran out the first call. Run from the repository root with the
# release binaries in .gpu/ and the shared test suite in .gpu/testsuite/.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"; log="$out/gpu-run2.log"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export WARPVISOR_CACHE_DIR=/tmp/wv-cache
wv=.gpu/warpvisor
step() { local name=$1 limit=$2; shift 2; echo "=== $name (limit ${limit}s): $*" | tee -a "$log"; local t0=$SECONDS; timeout "$limit" "$@" >>"$log" 2>&1; echo "=== $name: exit $? after $((SECONDS - t0)) s" | tee -a "$log"; }
python3 - <<'PY'
import json
with open("/tmp/wc-jobs.jsonl", "w") as f:
    for i in range(10000):
        text = " ".join(f"w{i}x{j}" for j in range(i % 37)) + "\n" * (i % 5)
        f.write(json.dumps({"args": ["wc"], "stdin": text}) + "\n")
PY
step fleet10k-cuda-G 90 "$wv" run --backend cuda --opt-level 0 --vms 10000 --max-memory 48 --stats --jobs /tmp/wc-jobs.jsonl --output /tmp/wc-cuda.jsonl guests/wasm/rust-wc.wasm
step fleet10k-wasmtime 20 "$wv" run --backend wasmtime --vms 10000 --max-memory 48 --jobs /tmp/wc-jobs.jsonl --output /tmp/wc-wasmtime.jsonl guests/wasm/rust-wc.wasm
step fleet10k-compare 5 bash -c 'wc -l /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl && if cmp /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl; then echo IDENTICAL; else diff /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl | head -20; exit 1; fi'
spec=$(ls .gpu/testsuite/wasm-spec/*.wast)
step spec-cuda-G 110 "$wv" wast --backend cuda --opt-level 0 --parallel 16 $spec
step wasi-c-cuda-G 60 "$wv" wasi-suite --backend cuda --opt-level 0 .gpu/testsuite/wasi/tests/c
echo "=== done" | tee -a "$log"
