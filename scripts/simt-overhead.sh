#!/usr/bin/env bash
# Tracing's cost and analysis time, per benchmark: JOBS requests untraced on `cpu` and on the
# traced kernel (the better of two runs each, kernels cached, the time after compilation),
# then a trace of 1,024 jobs within the default budget and the time `simt analyze` takes on it.
#
#   scripts/simt-overhead.sh [JOBS] [BENCHMARKS]      (defaults: 128, all ten)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-128}
names=${2:-scrypt,pbkdf2,strings,histogram,lz4,phash,phash_modified,blur_bmp,blur_jpeg,bill_pdf}
wv=target/release/warpvisor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/warpvisor-bench --write-requests "$work" --benchmarks "$names" --vms 1024 --batches 1 2>/dev/null
best() { sort -g | head -1; }
for name in ${names//,/ }; do
  module=guests/wasm/bench-$name.wasm
  head -"$jobs" "$work/$name.jobs.jsonl" > "$work/$name.part"
  $wv run --backend cpu "$module" --jobs "$work/$name.part" --vms "$jobs" --output /dev/null >/dev/null 2>&1
  plain=$(for i in 1 2; do $wv run --backend cpu "$module" --jobs "$work/$name.part" --vms "$jobs" --output /dev/null --stats 2>&1 >/dev/null \
    | sed -n 's/.*unaccounted.* of \([0-9.]*\) s after compilation.*/\1/p'; done | best)
  $wv simt trace "$module" --jobs "$work/$name.part" --vms "$jobs" --max-trace-mib 8000 -o "$work/t" >/dev/null 2>&1
  traced=$(for i in 1 2; do $wv simt trace "$module" --jobs "$work/$name.part" --vms "$jobs" --max-trace-mib 8000 -o "$work/t" 2>&1 \
    | sed -n 's/.* in \([0-9.]*\) s after compilation.*/\1/p'; done | best)
  # The last traced run's file: its size and how long writing it took.
  wrote=$($wv simt trace "$module" --jobs "$work/$name.part" --vms "$jobs" --max-trace-mib 8000 -o "$work/t" 2>&1 \
    | sed -n 's/.*words; wrote \([0-9.]*\) MiB to .* in \([0-9.]*\) s.*/\1 MiB in \2 s/p')
  rm -f "$work/t"
  cut=$($wv simt trace "$module" --jobs "$work/$name.jobs.jsonl" --vms 1024 -o "$work/t" 2>&1 | grep -o '[0-9]* jobs cut' || echo "0 jobs cut")
  start=$(date +%s.%N)
  $wv simt analyze "$work/t" > /dev/null
  analyse=$(echo "$(date +%s.%N) - $start" | bc)
  size=$(du -m "$work/t" | cut -f1)
  rm -f "$work/t"
  printf "%s jobs=%d untraced=%.3fs traced=%.3fs ratio=%.1f file %s | 1024 jobs: trace %d MiB, %s, analyse %.1fs\n" \
    "$name" "$jobs" "$plain" "$traced" "$(echo "$traced / $plain" | bc -l)" "$wrote" "$size" "$cut" "$analyse"
done
