#!/usr/bin/env bash
# Kernel launches for one batch of each benchmark, as the OpenCL backend partitions and
# schedules them (by default continuations, --partition-ops 10000, explicit memory checks;
# CALLS=direct and PARTITION_OPS=N change the first two), on the backend named (default cpu: the same kernels' C built by GCC, which launches exactly as
# PoCL does — the launch loop and the partition plan are the backend's, not the compiler's —
# and builds in a fraction of PoCL's time).
#
#   scripts/launches.sh [BACKEND] [VMS] [BENCHMARK...]      # e.g. scripts/launches.sh opencl 64 bill_pdf
#   CALLS=direct PARTITION_OPS=0 scripts/launches.sh opencl 64  # synchronous imports, one kernel
#
# Prints one Markdown row per benchmark: launches for the batch of VMS requests, and for its
# first request alone (what partition crossings cost one VM; the rest is VMs out of step).
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-cpu}
vms=${2:-64}
shift $(( $# > 2 ? 2 : $# ))
calls=${CALLS:-continuations}
partition_ops=${PARTITION_OPS:-10000}
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(scrypt pbkdf2 blur_jpeg blur_bmp phash phash_modified bill_pdf histogram lz4 strings)
wv=${WARPVISOR:-target/release/warpvisor}
bench=${WARPVISOR_BENCH:-target/release/warpvisor-bench}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
list=$(IFS=,; echo "${benches[*]}")
"$bench" --write-requests "$dir" --benchmarks "$list" --vms "$vms" --batches 1 >/dev/null 2>&1

launches() { # module jobs vms -> "launches slow-calls"
  "$wv" run "$1" --backend "$backend" --calls "$calls" --memory-checks explicit \
    --partition-ops "$partition_ops" --vms "$3" --jobs "$2" --stats --output /dev/null 2>&1 |
    awk '/on-device execute/ { gsub(/[(]/, "", $5); l = $5 } /slow calls/ { s = $3 } END { print l, s }'
}

echo "| Benchmark ($backend, --calls $calls, --partition-ops $partition_ops) | Launches, batch of $vms | Launches, first request alone | Slow calls / request |"
echo "|---|---:|---:|---:|"
for b in "${benches[@]}"; do
  jobs="$dir/$b.jobs.jsonl"
  head -1 "$jobs" > "$dir/$b.one.jsonl"
  read -r batch slow < <(launches "guests/wasm/bench-$b.wasm" "$jobs" "$vms")
  read -r one _ < <(launches "guests/wasm/bench-$b.wasm" "$dir/$b.one.jsonl" 1)
  echo "| $b | $batch | $one | $(( slow / vms )) |"
done
