#!/usr/bin/env bash
# `warpvisor simt` on the ten benchmarks: traces JOBS requests of each on `cpu` (the traced
# kernel), times the same jobs untraced, analyses the trace, and writes each report to
# docs/simt/NAME.{md,json,svg}. One summary line per benchmark on stdout.
#
#   scripts/simt-bench.sh [JOBS] [BENCHMARKS]      (defaults: 256, all ten)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-256}
names=${2:-scrypt,pbkdf2,strings,histogram,lz4,phash,phash_modified,blur_bmp,blur_jpeg,bill_pdf}
wv=target/release/warpvisor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p docs/simt
target/release/warpvisor-bench --write-requests "$work" --benchmarks "$names" --vms "$jobs" --batches 1 2>/dev/null
for name in ${names//,/ }; do
  module=guests/wasm/bench-$name.wasm
  jobsfile=$work/$name.jobs.jsonl
  # Untraced, kernel cached: the time after compilation.
  $wv run --backend cpu "$module" --jobs "$jobsfile" --vms "$jobs" --output /dev/null --stats 2>/dev/null >/dev/null || true
  plain=$($wv run --backend cpu "$module" --jobs "$jobsfile" --vms "$jobs" --output /dev/null --stats 2>&1 >/dev/null \
    | sed -n 's/.*unaccounted.* of \([0-9.]*\) s after compilation.*/\1/p' | head -1)
  # Twice: the first compiles the traced kernel.
  $wv simt trace "$module" --jobs "$jobsfile" --vms "$jobs" --max-trace-mib 8000 -o "$work/$name.trace" >/dev/null 2>&1
  traced=$($wv simt trace "$module" --jobs "$jobsfile" --vms "$jobs" --max-trace-mib 8000 -o "$work/$name.trace" 2>&1 \
    | tee "$work/$name.trace.log" | sed -n 's/.* in \([0-9.]*\) s after compilation.*/\1/p')
  start=$(date +%s.%N)
  $wv simt analyze "$work/$name.trace" --json "docs/simt/$name.json" --svg "docs/simt/$name.svg" > "docs/simt/$name.md"
  analyse=$(echo "$(date +%s.%N) - $start" | bc)
  size=$(du -m "$work/$name.trace" | cut -f1)
  rm -f "$work/$name.trace"
  echo "$name jobs=$jobs untraced=${plain}s traced=${traced}s analyse=${analyse}s trace=${size}MiB $(grep -o 'traced .*' "$work/$name.trace.log" | head -1)"
done
