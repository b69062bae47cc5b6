#!/usr/bin/env bash
# The GPU call of 2026-11-27 (docs/gpu-runs.md): warpvisor's fleet kernel on real hardware,
# the same 64 requests per benchmark as scripts/simt-vs-ptx.sh; outputs compared with
# wasmtime's, and the SIMT efficiency of `wv_kernel` read from the hardware counters by
# Nsight Compute (thread instructions / (warp instructions x 32), summed over launches).
#
# Run from the repository root with .gpu/ holding: warpvisor (release build of the
# development machine), cache.tar.xz (the kernel cache's cuda/ folder: PTX made there by
# `warpvisor compile --emit ptx` with NVRTC 13.0.88, the GPU machine's version, so no NVRTC
# runs here) and NAME.jobs (each benchmark's first 64 requests).
#
#   BENCHMARKS="lz4 pbkdf2" BUDGET=480 scripts/gpu-simt.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"; log="$out/gpu-simt.log"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export WARPVISOR_CACHE_DIR=/tmp/wv-cache
mkdir -p "$WARPVISOR_CACHE_DIR" && tar -xJf .gpu/cache.tar.xz -C "$WARPVISOR_CACHE_DIR"
wv=.gpu/warpvisor
budget=${BUDGET:-480}
step() {
  local name=$1 limit=$2; shift 2
  if (( SECONDS + 10 > budget )); then echo "=== $name: skipped (budget)" | tee -a "$log"; return 1; fi
  (( SECONDS + limit > budget )) && limit=$(( budget - SECONDS ))
  echo "=== $name (limit ${limit}s): $*" | tee -a "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
  return $rc
}
step machine 30 bash -c 'nvidia-smi -L; uname -r; nproc; which ncu; ncu --version | tail -1; ls /usr/local/cuda/lib64/libnvrtc.so.*; ls $WARPVISOR_CACHE_DIR/cuda | wc -l'
for b in ${BENCHMARKS:-lz4 pbkdf2 strings scrypt histogram}; do
  m=guests/wasm/bench-$b.wasm
  common=(--vms 64 --jobs ".gpu/$b.jobs" "$m")
  step "$b-cuda" 150 "$wv" run --backend cuda --stats --output "/tmp/$b-cuda.jsonl" "${common[@]}" || continue
  step "$b-wasmtime" 30 "$wv" run --backend wasmtime --output "/tmp/$b-wt.jsonl" "${common[@]}"
  step "$b-compare" 5 cmp "/tmp/$b-cuda.jsonl" "/tmp/$b-wt.jsonl" && echo "$b: IDENTICAL" | tee -a "$log"
  step "$b-ncu" 200 ncu --clock-control none --kernel-name wv_kernel --launch-count 3000 \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__thread_inst_executed_pred_on.sum \
    --csv --log-file "$out/ncu-$b.csv" "$wv" run --backend cuda --output "/tmp/$b-ncu.jsonl" "${common[@]}"
  python3 - "$b" "$out/ncu-$b.csv" <<'PY' 2>&1 | tee -a "$log"
import csv, sys
name, path = sys.argv[1:]
sums, launches = {}, set()
try:
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
except OSError as e:
    print(f"{name}: no ncu report ({e})"); sys.exit()
head = rows[0] if rows else []
for r in rows[1:]:
    rec = dict(zip(head, r))
    launches.add(rec.get("ID"))
    v = rec.get("Metric Value", "").replace(",", "")
    try:
        sums[rec["Metric Name"]] = sums.get(rec["Metric Name"], 0) + float(v)
    except (KeyError, ValueError):
        pass
warp = sums.get("smsp__inst_executed.sum", 0)
lane = sums.get("smsp__thread_inst_executed.sum", 0)
on = sums.get("smsp__thread_inst_executed_pred_on.sum", 0)
if warp:
    print(f"{name}: hardware SIMT efficiency {lane / (32 * warp):.4f} "
          f"(predicated-on {on / (32 * warp):.4f}) over {len(launches)} launches of wv_kernel, "
          f"{warp:.0f} warp instructions")
else:
    print(f"{name}: no wv_kernel counters in the ncu report")
PY
done
echo "=== done after $SECONDS s" | tee -a "$log"
