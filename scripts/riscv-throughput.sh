#!/usr/bin/env bash
# Throughput of translated RISC-V programs (docs/riscv.md): the same C sources as native-x86
# (the mini libc's x86-64 port), under qemu-riscv64, and translated by warpvisor on wasmtime
# and on cpu (one VM; the kernel cache warmed by a first run). Wall-clock seconds, best of 5,
# of whole runs (translation from the cache, compilation or the kernel cache, the run); every
# platform's output is checked against the native build's first.
# Usage: scripts/riscv-throughput.sh [WARPVISOR] (default target/release/warpvisor)
# Needs: qemu-user, gcc-riscv64-linux-gnu (for nothing but guests/riscv/build.sh), cc.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wv="${1:-$root/target/release/warpvisor}"
g="$root/guests/riscv"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

native() {
    cc -O2 -static -nostdlib -ffreestanding -fno-builtin -fno-stack-protector -I"$g/lib" \
        "$g/lib/start-x86_64.S" "$g/lib/mini.c" "$g/src/$1.c" -lgcc -o "$work/$1-x86" 2>/dev/null
}

# Inputs: 16 MiB of pseudo-random text.
python3 - "$work/text" <<'PY'
import sys, random
random.seed(7)
words = "the gpu runs many virtual machines and each one is a RISC-V program".split()
out = []
size = 0
while size < 16 << 20:
    w = random.choice(words)
    out.append(w)
    size += len(w) + 1
open(sys.argv[1], "w").write(" ".join(out))
PY

best() { # best of 5 wall-clock seconds of "$@"
    local b=""
    for _ in 1 2 3 4 5; do
        local s e
        s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N)
        b=$(python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); b=sys.argv[3]; print(min(t, float(b)) if b else t)" "$s" "$e" "$b")
    done
    echo "$b"
}

ratios=()
printf "| program | native-x86 | qemu-riscv64 | warpvisor wasmtime | warpvisor cpu | cpu / qemu |\n|---|---|---|---|---|---|\n"
for prog in sha256 crc32 compress tokenize matmul; do
    native "$prog"
    # warpvisor reads the same bytes (`--stdin`) and arguments as qemu and the native build.
    if [ "$prog" = matmul ]; then
        n=$(best "$work/$prog-x86" 500 3)
        q=$(best qemu-riscv64 "$g/bin/$prog.elf" 500 3)
        input=(-- 500 3)
    else
        n=$(best sh -c "'$work/$prog-x86' < '$work/text'")
        q=$(best sh -c "qemu-riscv64 '$g/bin/$prog.elf' < '$work/text'")
        input=(--stdin "$work/text")
    fi
    # Every platform's output must be the native build's before any time counts.
    if [ "$prog" = matmul ]; then
        "$work/$prog-x86" 500 3 > "$work/native.out"
        qemu-riscv64 "$g/bin/$prog.elf" 500 3 > "$work/qemu.out"
    else
        "$work/$prog-x86" < "$work/text" > "$work/native.out"
        qemu-riscv64 "$g/bin/$prog.elf" < "$work/text" > "$work/qemu.out"
    fi
    cmp -s "$work/native.out" "$work/qemu.out" || { echo "$prog: qemu differs from native" >&2; exit 1; }
    for backend in wasmtime cpu; do
        "$wv" run "$g/bin/$prog.elf" --backend "$backend" --max-memory 4096 "${input[@]}" 2>/dev/null \
            > "$work/$backend.out"
        cmp -s "$work/native.out" "$work/$backend.out" \
            || { echo "$prog: warpvisor $backend differs from native" >&2; exit 1; }
    done
    w=$(best "$wv" run "$g/bin/$prog.elf" --backend wasmtime --max-memory 4096 "${input[@]}")
    c=$(best "$wv" run "$g/bin/$prog.elf" --backend cpu --max-memory 4096 "${input[@]}")
    python3 -c "import sys; n,q,w,c=map(float,sys.argv[2:]); print(f'| {sys.argv[1]} | {n:.3f} | {q:.3f} | {w:.3f} | {c:.3f} | {c/q:.2f} |')" "$prog" "$n" "$q" "$w" "$c"
    ratios+=("$(python3 -c "import sys; print(float(sys.argv[2]) / float(sys.argv[1]))" "$q" "$c")")
done
python3 -c "import sys, math; r=[float(x) for x in sys.argv[1:]]; print(f'| geometric mean | | | | | {math.exp(sum(map(math.log, r)) / len(r)):.2f} |')" "${ratios[@]}"
