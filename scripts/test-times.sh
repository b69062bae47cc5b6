#!/usr/bin/env bash
# Times every test binary of the workspace one after another, cold kernel caches, as CI runs
# them (NVRTC from PyPI, WARPVISOR_REQUIRE_NVRTC=1, WARPVISOR_REQUIRE_RISCV_TOOLS=1): where CI's
# minutes go. One line per binary on stdout, each binary's output, with every test's time, in
# $LOGS/NAME.log (default target/test-times/).
#
#   scripts/test-times.sh
set -uo pipefail
cd "$(dirname "$0")/.."
logs=$(realpath -m "${LOGS:-target/test-times}")
mkdir -p "$logs"
nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export WARPVISOR_REQUIRE_NVRTC=1 WARPVISOR_REQUIRE_RISCV_TOOLS=1
export WARPVISOR_CACHE_DIR="$logs/kernel-cache" POCL_CACHE_DIR="$logs/pocl-cache"
rm -rf "$WARPVISOR_CACHE_DIR" "$POCL_CACHE_DIR"
mkdir -p "$WARPVISOR_CACHE_DIR" "$POCL_CACHE_DIR"
# Built first: timings without a compiler beside them.
scripts/test-binaries.sh 2>/dev/null | while read -r name kind exe manifest; do
  start=$(date +%s.%N)
  # libtest's per-test times are unstable options (RUSTC_BOOTSTRAP lets a stable harness take them).
  (cd "$(dirname "$manifest")" && RUSTC_BOOTSTRAP=1 "$exe" -Z unstable-options --report-time \
    >"$logs/$name-$kind.log" 2>&1)
  rc=$?
  printf "%-28s %-5s rc=%d %7.1f s\n" "$name" "$kind" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)"
done
