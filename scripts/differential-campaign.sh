#!/usr/bin/env bash
# A differential campaign in chunks (docs/differential.md): seeds START..END of one backend,
# CHUNK at a time, each chunk's test output in OUT/BACKEND-A-B.log and one line per finished
# chunk in OUT/summary.txt (the commit, the range, the test's own count of modules compared and
# disagreements). Meant to run in the background at low priority; a chunk cut off counts for
# nothing. The test binary is copied first, so rebuilding the tree meanwhile does not change
# what runs.
#
#   nice -n 10 scripts/differential-campaign.sh opencl 750 10000 250 [OUT]
#   (backends: cpu, direct, opencl, cuda; OUT defaults to target/differential-campaign)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kind="$1" start="$2" end="$3" chunk="$4"
out="$(realpath -m "${5:-$root/target/differential-campaign}")"
mkdir -p "$out"
case "$kind" in
  cpu) var=WARPVISOR_DIFF_SEEDS; test=random_modules_agree_with_wasmtime_on_cpu ;;
  direct) var=WARPVISOR_DIFF_SEEDS_DIRECT; test=random_modules_agree_with_wasmtime_on_cpu_with_direct_calls ;;
  opencl) var=WARPVISOR_DIFF_SEEDS_OPENCL; test=random_modules_agree_with_wasmtime_on_opencl ;;
  cuda) var=WARPVISOR_DIFF_SEEDS_CUDA; test=random_modules_agree_with_wasmtime_on_cuda_through_the_cpu_driver ;;
  *) echo "backend: cpu, direct, opencl or cuda" >&2; exit 2 ;;
esac
cd "$root"
bin=$(cargo test -p warpvisor --test differential --no-run 2>&1 | sed -n 's/.*(\(.*differential-[0-9a-f]*\)).*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the differential test" >&2; exit 1; }
cp "$bin" "$out/differential-$kind"
rev=$(git rev-parse --short HEAD)
# Kernels of a campaign are built once each: keep them out of the shared caches.
export WARPVISOR_CACHE_DIR="$out/kernels-$kind" POCL_CACHE_DIR="$out/pocl-$kind"
cd "$root/crates/warpvisor"
for ((s = start; s < end; s += chunk)); do
  e=$((s + chunk)); [ "$e" -gt "$end" ] && e=$end
  t0=$(date +%s)
  env "$var=$s..$e" "$out/differential-$kind" --exact "$test" --nocapture >"$out/$kind-$s-$e.log" 2>&1
  rc=$?
  echo "$(date -u +%FT%TZ) $rev $kind $s..$e rc=$rc $(( $(date +%s) - t0 ))s $(grep -h 'modules compared' "$out/$kind-$s-$e.log")" >>"$out/summary.txt"
  rm -rf "$WARPVISOR_CACHE_DIR" "$POCL_CACHE_DIR"
done
