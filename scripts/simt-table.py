#!/usr/bin/env python3
"""The Markdown tables of docs/simt.md from the reports scripts/simt-bench.sh wrote
(docs/simt/NAME.json): efficiency per width, the recommended interleave with sectors per
memory access, the worst three functions and the costliest divergent branch."""
import json
import os
import sys

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "simt")
names = sys.argv[1:] or ["scrypt", "pbkdf2", "strings", "histogram", "lz4", "phash",
                         "phash_modified", "blur_bmp", "blur_jpeg", "bill_pdf"]
rows = []
for n in names:
    path = os.path.join(here, f"{n}.json")
    if not os.path.exists(path):
        continue
    with open(path) as f:
        rows.append((n, json.load(f)))

print("| benchmark | jobs | width 8 | width 16 | width 32 | launches per warp | sectors per access at interleave 0 / 4 / 8 | recommended |")
print("|---|---:|---:|---:|---:|---:|---|---:|")
for n, r in rows:
    w = {x["width"]: x for x in r["widths"]}
    s = r["sectors_per_instruction"]
    print(f"| {n} | {r['jobs']} | {100 * w[8]['efficiency']:.1f}% | {100 * w[16]['efficiency']:.1f}% "
          f"| {100 * w[32]['efficiency']:.1f}% | {w[32]['launches_per_warp']:.1f} "
          f"| {s[0]:.2f} / {s[1]:.2f} / {s[2]:.2f} | {r['recommended_interleave']} |")
print()
print("| benchmark | worst three functions at width 32 (efficiency, share of issued) | costliest divergent branch (share of idle lane slots) |")
print("|---|---|---|")
for n, r in rows:
    worst = "; ".join(f"`{f['name']}` {100 * f['efficiency']:.0f}%, {100 * f['issued_share']:.1f}%"
                      for f in r["functions"][:3])
    b = r["branches"][0] if r["branches"] else None
    if b and b["block"] is not None:
        branch = (f"`{b['function']}` block {b['block']} → {b['reconverges_at']} "
                  f"({100 * b['idle_share']:.0f}%)")
    elif b:
        branch = f"relaunch ({100 * b['idle_share']:.0f}%)"
    else:
        branch = "none"
    print(f"| {n} | {worst} | {branch} |")
