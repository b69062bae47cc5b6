#!/usr/bin/env bash
# Lists the test binaries `cargo test --workspace` builds, one per line: NAME KIND EXECUTABLE
# MANIFEST, the ones CI spends minutes in first (the README gives their times), so that a
# runner taking them in order leaves none of them running alone at the end. Builds first
# (cargo's errors on standard error); exit status 1 when the build fails or finds none.
#
#   scripts/test-binaries.sh        # used by scripts/test.sh and scripts/test-times.sh
set -uo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --no-run >&2 || exit 1
list=$(cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import sys, json
slow = ["wasi", "spec", "differential", "cuda", "riscv", "ptx_corpus", "guard_regions",
        "serve", "backends", "fleet"]
rows = []
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        rank = slow.index(name) if name in slow else len(slow)
        rows.append((rank, name, m["target"]["kind"][0], m["executable"], m["manifest_path"]))
for r in sorted(rows):
    print(*r[1:])
') || exit 1
[ -n "$list" ] || { echo "no test binaries found" >&2; exit 1; }
echo "$list"
