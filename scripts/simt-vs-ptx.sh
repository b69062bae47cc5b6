#!/usr/bin/env bash
# The prediction against the PTX SIMT emulation: each benchmark's first JOBS requests traced
# on `cpu` and analysed at width 32 (predicted), then run on the `cuda` backend through
# warpvisor's CUDA driver with WARPVISOR_CUDA_SIMT, which runs the fleet kernel's PTX warp by
# warp (measured: lane instructions / (warp instructions x 32) over every launch of the fleet
# kernel, the reset kernel excluded). One line per benchmark; the correlation and mean
# absolute error at the end, and a failure (exit 1) when those miss the issue's bar (>= 0.9,
# <= 10 points). NVRTC must be importable (pip's nvidia-cuda-nvrtc-cu12); kernel
# builds take minutes per benchmark here.
#
#   scripts/simt-vs-ptx.sh [JOBS] [BENCHMARKS]      (defaults: 64, all ten)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-64}
names=${2:-scrypt,pbkdf2,strings,histogram,lz4,phash,phash_modified,blur_bmp,blur_jpeg,bill_pdf}
wv=target/release/warpvisor
nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib"))')
export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export WARPVISOR_CUDA_DRIVER=$PWD/target/release/libwarpvisor_cuda_driver.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/warpvisor-bench --write-requests "$work" --benchmarks "$names" --vms "$jobs" --batches 1 2>/dev/null
out=${OUT:-target/simt-vs-ptx.jsonl}
for name in ${names//,/ }; do
  module=guests/wasm/bench-$name.wasm
  head -"$jobs" "$work/$name.jobs.jsonl" > "$work/$name.part"
  $wv simt trace "$module" --jobs "$work/$name.part" --vms "$jobs" -o "$work/t" >/dev/null 2>&1
  $wv simt analyze "$work/t" --widths 32 --json "$work/p.json" >/dev/null
  rm -f "$work/t" "$work/log.jsonl"
  start=$(date +%s)
  WARPVISOR_CUDA_SIMT="$work/log.jsonl" $wv run --backend cuda "$module" --jobs "$work/$name.part" \
    --vms "$jobs" --output "$work/out.jsonl" >/dev/null 2>&1
  python3 - "$name" "$work/p.json" "$work/log.jsonl" "$(( $(date +%s) - start ))" "$out" <<'PY'
import json, sys
name, pred, log, secs, out = sys.argv[1:]
p = json.load(open(pred))["widths"][-1]["efficiency"]
warp = lane = off = launches = 0
for line in open(log):
    l = json.loads(line)
    if l["kernel"] != "wv_kernel":
        continue
    launches += 1
    warp += l["counts"]["warp_instructions"]
    lane += l["counts"]["lane_instructions"]
    off += l["counts"].get("guarded_off", 0)
m = lane / (32 * warp) if warp else float("nan")
# Lanes whose guard is false issue an instruction without executing it (if-converted code).
e = (lane - off) / (32 * warp) if warp else float("nan")
row = {"benchmark": name, "predicted": p, "measured": m, "measured_executing": e,
       "launches": launches, "seconds": int(secs)}
print(json.dumps(row))
open(out, "a").write(json.dumps(row) + "\n")
PY
done
python3 - "$out" <<'PY'
import json, sys, math
rows = [json.loads(l) for l in open(sys.argv[1])]
xs = [r["predicted"] for r in rows]; ys = [r["measured"] for r in rows]
n = len(rows)
if n >= 2:
    mx, my = sum(xs) / n, sum(ys) / n
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs)); sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    r = cov / (sx * sy) if sx and sy else float("nan")
    mae = 100 * sum(abs(x - y) for x, y in zip(xs, ys)) / n
    print(f"{n} benchmarks: correlation {r:.3f}, mean absolute error {mae:.1f} points")
    # The issue's bar: correlation >= 0.9 and mean absolute error <= 10 points.
    if not (r >= 0.9 and mae <= 10):
        print("FAILED: the prediction misses the PTX emulation's measurement (>= 0.9, <= 10)")
        sys.exit(1)
PY
