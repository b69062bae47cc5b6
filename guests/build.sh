#!/usr/bin/env bash
# Rebuilds the guest corpus from source and copies the modules into guests/wasm/ as
# rust-<name>.wasm, c-<name>.wasm and bench-<name>.wasm (the benchmark suite's programs,
# crates/warpvisor-workloads), and the resident handlers (`warpvisor serve`) as
# resident-<name>.wasm: the benchmark programs ported to the guest SDK and the examples;
# C programs with DWARF (c/debug/) as dwarf-<name>.wasm.
# Usage: guests/build.sh [rust|c|bench|resident|all] (default all).
# Needs: rustup (adds the wasm32-wasip1 target itself) and, for C, clang-14 + lld-14 + wasi-libc:
#   apt-get install -y clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/wasm"
what="${1:-all}"
mkdir -p "$out"

need_wasm_target() {
    if ! command -v cargo >/dev/null; then
        echo "build.sh: cargo not found; install Rust with rustup" >&2
        exit 1
    fi
    if command -v rustup >/dev/null; then
        if ! rustup target list --installed | grep -qx wasm32-wasip1; then
            echo "build.sh: installing the wasm32-wasip1 target"
            rustup target add wasm32-wasip1
        fi
    fi
}

build_rust() {
    need_wasm_target
    # CARGO_BUILD_JOBS defaults to 1 here to stay light on shared machines; override if you like.
    (cd "$here/rust" && cargo build --release --locked --target wasm32-wasip1 \
        -j "${CARGO_BUILD_JOBS:-1}" --bins)
    local bin
    for src in "$here"/rust/src/bin/*.rs; do
        bin="$(basename "$src" .rs)"
        install -m 0644 "$here/rust/target/wasm32-wasip1/release/$bin.wasm" "$out/rust-$bin.wasm"
        echo "  wasm/rust-$bin.wasm"
    done
}

# The benchmark programs are members of the root workspace (the runner links the same code
# natively); the `guest` profile of the root Cargo.toml builds them with LTO.
build_bench() {
    need_wasm_target
    local root="$here/.." bin
    (cd "$root" && cargo build --locked --profile guest --target wasm32-wasip1 \
        -j "${CARGO_BUILD_JOBS:-1}" -p warpvisor-workloads --bins)
    for src in "$root"/crates/warpvisor-workloads/src/bin/*.rs; do
        bin="$(basename "$src" .rs)"
        case "$bin" in
            *_resident) name="resident-${bin%_resident}" ;;
            *) name="bench-$bin" ;;
        esac
        install -m 0644 "$root/target/wasm32-wasip1/guest/$bin.wasm" "$out/$name.wasm"
        echo "  wasm/$name.wasm"
    done
}

# The examples of the guest SDK (examples/resident-echo in Rust, examples/resident-echo.c).
build_resident() {
    need_wasm_target
    local root="$here/.."
    (cd "$root" && cargo build --locked --profile guest --target wasm32-wasip1 \
        -j "${CARGO_BUILD_JOBS:-1}" -p resident-echo)
    install -m 0644 "$root/target/wasm32-wasip1/guest/resident-echo.wasm" "$out/resident-echo.wasm"
    echo "  wasm/resident-echo.wasm"
    need_c
    "${CC_WASI:-clang-14}" --target=wasm32-wasi -O2 -Wall -Wextra -fuse-ld=lld -Wl,--strip-all \
        -o "$out/resident-echo_c.wasm" "$root/examples/resident-echo.c"
    chmod 0644 "$out/resident-echo_c.wasm"
    echo "  wasm/resident-echo_c.wasm"
}

need_c() {
    local cc="${CC_WASI:-clang-14}"
    if ! command -v "$cc" >/dev/null \
        || { ! command -v wasm-ld-14 >/dev/null && ! command -v wasm-ld >/dev/null; }; then
        echo "build.sh: $cc and wasm-ld (lld) are needed for the C guests; on Debian 12:" >&2
        echo "  apt-get install -y clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32" >&2
        exit 1
    fi
    if ! printf '#include <stdio.h>\nint main(void){puts("x");return 0;}\n' \
        | "$cc" --target=wasm32-wasi -O2 -fuse-ld=lld -x c -o /dev/null - 2>/dev/null; then
        echo "build.sh: $cc cannot build for wasm32-wasi: wasi-libc or the wasm32 compiler-rt" >&2
        echo "  builtins are missing; on Debian 12:" >&2
        echo "  apt-get install -y wasi-libc libclang-rt-14-dev-wasm32" >&2
        exit 1
    fi
}

build_c() {
    local cc="${CC_WASI:-clang-14}"
    need_c
    # wasm-ld's default shadow stack is only 64 KiB; give C the same 1 MiB that Rust's std gets,
    # so c-recurse's deep recursion fits.
    local name
    for src in "$here"/c/*.c; do
        name="$(basename "$src" .c)"
        "$cc" --target=wasm32-wasi -O2 -Wall -Wextra -fuse-ld=lld -Wl,--strip-all -Wl,-z,stack-size=1048576 \
            -o "$out/c-$name.wasm" "$src"
        chmod 0644 "$out/c-$name.wasm"
        echo "  wasm/c-$name.wasm"
    done
    # With DWARF and names (not stripped): `warpvisor simt`'s source-line report reads them.
    for src in "$here"/c/debug/*.c; do
        name="$(basename "$src" .c)"
        "$cc" --target=wasm32-wasi -O1 -g -Wall -Wextra -fuse-ld=lld -fdebug-prefix-map="$here"=guests \
            -o "$out/dwarf-$name.wasm" "$src"
        chmod 0644 "$out/dwarf-$name.wasm"
        echo "  wasm/dwarf-$name.wasm"
    done
}

case "$what" in
    rust) build_rust ;;
    c) build_c ;;
    bench) build_bench ;;
    resident) build_resident ;;
    all) build_rust; build_c; build_bench; build_resident ;;
    *) echo "usage: $0 [rust|c|bench|resident|all] " >&2; exit 2 ;;
esac
