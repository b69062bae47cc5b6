#!/usr/bin/env bash
# The workspace's tests — every test binary and the doctests `cargo test --workspace` runs —
# with the test binaries run side by side, JOBS at a time (default: one per core), longest
# first. `cargo test` runs one binary after another, and most of CI's binaries spend their time
# in a few long tests (a PoCL build, an NVRTC compile) while the other cores wait; side by side
# they keep every core busy. One line per binary as it ends; each binary's output in
# $LOGS/NAME-KIND.log (default target/test-logs/), the failures' ends printed at the end.
#
#   scripts/test.sh                 # everything; exit status 1 if anything failed
#   scripts/test.sh FILTER...       # arguments go to every test binary (libtest's filters)
#   JOBS=1 scripts/test.sh          # one binary at a time, as `cargo test --workspace`
set -uo pipefail
cd "$(dirname "$0")/.."
logs=$(realpath -m "${LOGS:-target/test-logs}")
jobs=${JOBS:-$(nproc)}
mkdir -p "$logs"
rm -f "$logs"/*.log

list=$(scripts/test-binaries.sh) || exit 1

run_one() {  # name kind executable manifest [args...]
  local name=$1 kind=$2 exe=$3 manifest=$4 start rc
  shift 4
  start=$(date +%s)
  (cd "$(dirname "$manifest")" && "$exe" "$@") >"$logs/$name-$kind.log" 2>&1
  rc=$?
  printf "%-24s %-5s %s %5d s\n" "$name" "$kind" "$([ $rc = 0 ] && echo ok || echo FAILED)" \
    "$(($(date +%s) - start))"
  [ $rc = 0 ] || touch "$logs/$name-$kind.failed"
}
start=$(date +%s)
rm -f "$logs"/*.failed
while read -r name kind exe manifest; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_one "$name" "$kind" "$exe" "$manifest" "$@" &
done <<<"$list"
wait
echo "test binaries: $(($(date +%s) - start)) s, $jobs at a time"
if ! cargo test --workspace --doc "$@" >"$logs/doctests.log" 2>&1; then
  touch "$logs/doctests.failed"
  echo "doctests FAILED"
else
  echo "doctests ok"
fi

failed=$(ls "$logs"/*.failed 2>/dev/null)
if [ -n "$failed" ]; then
  for f in $failed; do
    log=${f%.failed}.log
    # libtest prints each failure's output at the end of its run.
    echo "=== $(basename "$log") (last 200 lines) ==="
    tail -n 200 "$log"
  done
  echo "FAILED: $(echo "$failed" | xargs -n1 basename | sed 's/\.failed$//' | tr '\n' ' ')"
  exit 1
fi
echo "all test binaries and doctests passed"
