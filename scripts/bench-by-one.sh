#!/usr/bin/env bash
# The full benchmark run, one benchmark at a time, each into its own JSON: for backends whose
# cold kernel builds take an hour or more in all (PoCL here), so that what finished is kept
# when the run is cut off. Prints, at the end (or with --summary alone), each benchmark's
# throughput against wasmtime per platform and their geometric means over the benchmarks
# finished.
#
#   scripts/bench-by-one.sh OUT [PLATFORMS] [BENCHMARK...]   # e.g. scripts/bench-by-one.sh /tmp/ocl native,wasmtime,opencl
#   scripts/bench-by-one.sh OUT --summary
#   WARPVISOR_BENCH_FLAGS=--profiled scripts/bench-by-one.sh OUT ...   # extra warpvisor-bench flags
#
# Benchmarks run cheapest kernel build first unless named.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-by-one.sh OUT [PLATFORMS|--summary] [BENCHMARK...]}
platforms=${2:-native,wasmtime,opencl}
shift $(( $# > 2 ? 2 : $# ))
mkdir -p "$out"
bench=${WARPVISOR_BENCH:-target/release/warpvisor-bench}
if [ "$platforms" != "--summary" ]; then
  benches=("$@")
  [ ${#benches[@]} -gt 0 ] || benches=(lz4 scrypt pbkdf2 histogram strings blur_bmp phash phash_modified bill_pdf blur_jpeg)
  for b in "${benches[@]}"; do
    t0=$(date +%s)
    # shellcheck disable=SC2086 # extra flags, word-split on purpose
    "$bench" --benchmarks "$b" --platforms "$platforms" --no-micro --no-compare-calls ${WARPVISOR_BENCH_FLAGS:-} \
      --json "$out/$b.json" --markdown "$out/$b.md" >"$out/$b.log" 2>&1
    echo "$(date -u +%FT%TZ) $b rc=$? $(( $(date +%s) - t0 ))s" >>"$out/progress.txt"
  done
fi
python3 - "$out" <<'EOF'
import json, math, pathlib, sys
rows, logs = [], {}
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    for b in json.load(open(p))["benchmarks"]:
        rows.append((b["title"], b["validated"], b["ratio_to_wasmtime"]))
plats = [k for k in ("warpvisor-cpu", "warpvisor-opencl", "warpvisor-cuda")
         if any(r[2].get(k) for r in rows)]
print("| Benchmark | validated | " + " | ".join(f"`{p}` x wasmtime" for p in plats) + " |")
print("|---|---|" + "---:|" * len(plats))
for t, v, r in rows:
    print(f"| {t} | {'yes' if v else 'NO'} | " + " | ".join(
        f"{r[p]:.2f}x" if r.get(p) else "-" for p in plats) + " |")
for p in plats:
    xs = [r[p] for _, _, r in rows if r.get(p)]
    if xs:
        print(f"geometric mean of {p} over {len(xs)} benchmarks: "
              f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}x")
EOF
