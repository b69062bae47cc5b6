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
obj="$(mktemp -d)"
trap 'rm -rf "$obj"' EXIT
"$CC" -c lib/start.S -o "$obj/start.o"
"$CC" -c -O2 -ffreestanding -fno-builtin -fno-stack-protector -Ilib lib/mini.c -o "$obj/mini.o"

for s in isa/*.S; do
    name="isa-$(basename "$s" .S)"
    # Objects first, under fixed names: linking sources directly puts a random temporary file
    # name into the symbol table, and the committed binaries would change on every build.
    "$CC" -c -march=rv64imafdc_zicsr_zifencei -mabi=lp64d -Iisa "$s" -o "$obj/$name.o"
    "$CC" -nostdlib -static "$obj/$name.o" -o "bin/$name.elf"
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
    "$CC" -c -O2 -ffreestanding -fno-builtin -fno-stack-protector -Ilib "$s" -o "$obj/$name.o"
    "$CC" -static -nostdlib "$obj/start.o" "$obj/mini.o" "$obj/$name.o" -lgcc -o "bin/$name.elf"
    echo "  bin/$name.elf"
done

for s in src/glibc/*.c; do
    name="glibc-$(basename "$s" .c)"
    "$CC" -c -O2 "$s" -o "$obj/$name.o"
    "$CC" -static "$obj/$name.o" -o "bin/$name.elf"
    echo "  bin/$name.elf"
done
