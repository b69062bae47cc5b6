#!/usr/bin/env bash
# The first checks of the `cuda` backend on a real NVIDIA GPU, as one short script (a lent GPU
# machine gives minutes, not hours). Every step has its own time limit and failing steps do not
# stop the others; everything goes to $OUT (default ./gpu-out). docs/gpu-runs.md records a run.
#
#   scripts/gpu-run.sh BIN_DIR TESTSUITE_DIR
#
# BIN_DIR holds release builds of `warpvisor` and `warpvisor-bench`; TESTSUITE_DIR is
# ../shared/testsuite (wasm-spec/ and wasi/). NVRTC and libcuda are found through
# LD_LIBRARY_PATH (the CUDA toolkit's lib64 and the driver's folder are added when present).
set -uo pipefail
bin=${1:?BIN_DIR}
suite=${2:?TESTSUITE_DIR}
out=${OUT:-gpu-out}
mkdir -p "$out"
log="$out/gpu-run.log"
for d in /usr/local/cuda/lib64 /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export WARPVISOR_CACHE_DIR=/tmp/wv-cache
wv="$bin/warpvisor"
cores=$(nproc)

# step NAME SECONDS COMMAND...: runs one check with a limit, logging its exit status and time.
step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name (limit ${limit}s): $*" | tee -a "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
}

step machine 15 bash -c 'nvidia-smi; nproc; ls /usr/local/cuda/lib64/libnvrtc* 2>&1 | head -3'
step devices 20 "$wv" devices

# One program, one VM, end to end through NVRTC and the driver.
step hello 60 "$wv" run --backend cuda --stats guests/wasm/c-hello.wasm

# A 10,000-VM fleet of a WASI program, every job its own stdin; the replies must equal
# wasmtime's byte for byte.
python3 - <<'EOF'
import json, sys
with open("/tmp/wc-jobs.jsonl", "w") as f:
    for i in range(10000):
        text = " ".join(f"w{i}x{j}" for j in range(i % 37)) + "\n" * (i % 5)
        f.write(json.dumps({"args": ["wc"], "stdin": text}) + "\n")
EOF
step fleet10k-cuda 140 "$wv" run --backend cuda --vms 10000 --max-memory 48 --stats --jobs /tmp/wc-jobs.jsonl \
  --output /tmp/wc-cuda.jsonl guests/wasm/rust-wc.wasm
step fleet10k-wasmtime 40 "$wv" run --backend wasmtime --vms 10000 --max-memory 48 --jobs /tmp/wc-jobs.jsonl \
  --output /tmp/wc-wasmtime.jsonl guests/wasm/rust-wc.wasm
step fleet10k-compare 5 bash -c 'wc -l /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl && if cmp /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl; then echo IDENTICAL; else diff /tmp/wc-cuda.jsonl /tmp/wc-wasmtime.jsonl | head -20; exit 1; fi'

# Conformance: every non-SIMD spec script on cuda.
spec=$(ls "$suite"/wasm-spec/*.wast | grep -v '/simd_')
step spec-cuda 130 "$wv" wast --backend cuda --progress --parallel "$cores" $spec

# Throughput against native-x86 and wasmtime on this machine's cores, 4,096 VMs per batch.
step bench 120 "$bin/warpvisor-bench" --platforms native,wasmtime,cuda --benchmarks scrypt,pbkdf2 \
  --vms 4096 --batches 2 --min-seconds 2 --no-micro --json "$out/bench-cuda.json" \
  --markdown "$out/bench-cuda.md"

# The WASI suite's C tests on cuda, as long as time allows.
step wasi-cuda 50 "$wv" wasi-suite --backend cuda --progress "$suite"/wasi/tests/c
echo "=== done" | tee -a "$log"
