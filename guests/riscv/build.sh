#!/usr/bin/env bash
# Builds the RISC-V guests into bin/ (committed, so the tests run where no cross compiler is):
#   bin/isa-<family>.elf  self-checking instruction tests (isa/*.S), exit 0 or the failing test
#   bin/<name>.elf        C programs on the freestanding mini libc (src/*.c + lib/), -O2
#   bin/glibc-<name>.elf  C programs on glibc (src/glibc/*.c), -O2 -static
# and checks every ISA test exits 0 under qemu-riscv64 (isa-wrong: 3, its deliberately wrong test).
# Needs: apt-get install -y gcc-riscv64-linux-gnu qemu-user
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
CC="${CC:-riscv64-linux-gnu-gcc}"
mkdir -p bin

for s in isa/*.S; do
    name="isa-$(basename "$s" .S)"
    "$CC" -nostdlib -static -march=rv64imafdc_zicsr_zifencei -mabi=lp64d -Iisa "$s" -o "bin/$name.elf"
    if command -v qemu-riscv64 >/dev/null; then
        code=0
        qemu-riscv64 "bin/$name.elf" || code=$?
        want=0
        [ "$name" = isa-wrong ] && want=3   # its test 3 is wrong on purpose
        if [ "$code" != "$want" ]; then echo "$name: exits $code under qemu-riscv64, not $want" >&2; exit 1; fi
    fi
    echo "  bin/$name.elf"
done

for s in src/*.c; do
    name="$(basename "$s" .c)"
    "$CC" -O2 -static -nostdlib -ffreestanding -fno-builtin -fno-stack-protector -Ilib \
        lib/start.S lib/mini.c "$s" -lgcc -o "bin/$name.elf"
    echo "  bin/$name.elf"
done

for s in src/glibc/*.c; do
    name="glibc-$(basename "$s" .c)"
    "$CC" -O2 -static "$s" -o "bin/$name.elf"
    echo "  bin/$name.elf"
done
