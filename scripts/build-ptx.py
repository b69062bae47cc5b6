#!/usr/bin/env python3
"""Compile the CUDA corpus of the PTX-on-CPU tests to PTX with NVRTC.

Every crates/warpvisor/tests/ptx/src/<stem>.cu becomes crates/warpvisor/tests/ptx/<stem>.ptx,
compiled with `--gpu-architecture=compute_70 -default-device` (no fast-math). The PTX is
committed so that the tests run without NVRTC; NVRTC is deterministic, so a rebuild with the
same NVRTC gives the same bytes.

NVRTC comes from the PyPI wheel `nvidia-cuda-nvrtc-cu12` (loaded through ctypes; nothing else
is needed).

    python3 scripts/build-ptx.py            # (re)write every .ptx
    python3 scripts/build-ptx.py --check    # compile, write nothing; exit 1 if a .ptx differs
"""

import argparse
import ctypes
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTX_DIR = os.path.join(ROOT, "crates", "warpvisor", "tests", "ptx")
SRC_DIR = os.path.join(PTX_DIR, "src")
OPTIONS = ["--gpu-architecture=compute_70", "-default-device"]


def load_nvrtc():
    try:
        import nvidia.cuda_nvrtc
    except ImportError:
        sys.exit("build-ptx: NVRTC not found: pip install nvidia-cuda-nvrtc-cu12")
    lib = os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib")
    names = sorted(f for f in os.listdir(lib) if f.startswith("libnvrtc.so"))
    if not names:
        sys.exit(f"build-ptx: no libnvrtc.so* in {lib}")
    nvrtc = ctypes.CDLL(os.path.join(lib, names[0]))
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    return nvrtc


def compile_cu(nvrtc, path):
    """PTX text of the .cu at `path`, or None after printing NVRTC's log."""
    with open(path, "rb") as f:
        source = f.read()
    name = os.path.basename(path).encode()
    prog = ctypes.c_void_p()
    r = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, name, 0, None, None)
    if r != 0:
        print(f"{path}: nvrtcCreateProgram: {nvrtc.nvrtcGetErrorString(r).decode()}",
              file=sys.stderr)
        return None
    try:
        opts = [o.encode() for o in OPTIONS]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        r = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        if r != 0:
            print(f"{path}: {nvrtc.nvrtcGetErrorString(r).decode()}", file=sys.stderr)
            print(log.value.decode(errors="replace"), file=sys.stderr)
            return None
        nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx.value.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; fail if a committed .ptx differs")
    args = parser.parse_args()

    nvrtc = load_nvrtc()
    sources = sorted(f for f in os.listdir(SRC_DIR) if f.endswith(".cu"))
    if not sources:
        sys.exit(f"build-ptx: no .cu files in {SRC_DIR}")
    failed, stale = [], []
    for cu in sources:
        ptx = compile_cu(nvrtc, os.path.join(SRC_DIR, cu))
        if ptx is None:
            failed.append(cu)
            continue
        out = os.path.join(PTX_DIR, cu[:-3] + ".ptx")
        rel = os.path.relpath(out, ROOT)
        try:
            with open(out, encoding="utf-8", newline="") as f:
                old = f.read()
        except FileNotFoundError:
            old = None
        if args.check:
            if old != ptx:
                stale.append(rel)
                print(f"{rel}: {'missing' if old is None else 'differs from NVRTC output'}",
                      file=sys.stderr)
        elif old != ptx:
            with open(out, "w", encoding="utf-8", newline="") as f:
                f.write(ptx)
            print(f"wrote {rel}")
    if failed:
        print(f"build-ptx: failed to compile {', '.join(failed)}", file=sys.stderr)
        return 1
    if stale:
        print("build-ptx: stale PTX; run python3 scripts/build-ptx.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
