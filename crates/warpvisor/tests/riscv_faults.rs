//! Where a translated RISC-V program's memory ends, as under Linux and `qemu-riscv64`: a null
//! pointer (anything below Linux's `vm.mmap_min_addr`, 64 KiB) and addresses at or beyond
//! 4 GiB fault; the lowest and highest bytes of the program's own memory do not. Each program
//! is a few instructions assembled here (CI installs the RISC-V binutils and qemu;
//! `WARPVISOR_REQUIRE_RISCV_TOOLS=1` makes them required).

mod common;

use std::process::{Command, Stdio};

use common::riscv::{link, tools_here};
use std::sync::Arc;

use warpvisor::codegen::{CallMode, KernelOptions};
use warpvisor::riscv::{self, TranslateOptions};
use warpvisor::vmm::{FleetConfig, Program, TrapKind};
use warpvisor::wasi::program::{run_jobs, JobResult, WasiRunConfig};
use warpvisor::wasi::WasiJob;

/// A static executable whose `_start` runs `body`, then exits 0.
fn build(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("riscv-faults");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(format!("{name}.elf"));
    link(
        &format!(
            ".text\n.globl _start\n_start:\n{body}\n  li a0, 0\n  li a7, 93\n  ecall\n\
             .data\n.balign 8\nfirst: .dword 7\n"
        ),
        &exe,
    );
    exe
}

/// Whether qemu ran the program to exit 0 (else it died of a signal).
fn qemu_exits_zero(exe: &std::path::Path) -> bool {
    let status = Command::new("qemu-riscv64")
        .arg(exe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    status.code() == Some(0)
}

fn run(backend: &str, wasm: &[u8]) -> JobResult {
    let jobs = [WasiJob::default()];
    if backend == "wasmtime" {
        let setup = warpvisor::backend::wasmtime::WasiSetup {
            program_name: "prog".into(),
            preopens: Vec::new(),
            allow_unknown_imports: false,
            max_memory_pages: 512,
        };
        let engine =
            warpvisor::backend::wasmtime::WasmtimeBackend::new(Default::default()).unwrap();
        return engine.run_wasi(wasm, &setup, &jobs).unwrap().0.remove(0);
    }
    let kernel = KernelOptions {
        calls: CallMode::Direct,
        dialect: common::dialect(backend),
        ..KernelOptions::default()
    };
    let program =
        Arc::new(Program::compile(wasm, &kernel, common::backend(backend).as_ref()).unwrap());
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: 1,
            max_memory_pages: 512,
            ..FleetConfig::default()
        },
        program_name: "prog".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    run_jobs(program, &config, &jobs).unwrap().remove(0)
}

#[test]
fn null_pointers_and_addresses_beyond_4_gib_fault_as_under_linux() {
    if !tools_here() {
        return;
    }
    // (name, body, whether it runs to exit 0)
    let cases = [
        ("null-load", "  li t0, 0\n  ld t1, 0(t0)", false),
        ("null-store", "  sw zero, 16(zero)", false),
        ("below-64k", "  li t0, 0xfff8\n  ld t1, 0(t0)", false),
        (
            "at-4g",
            "  li t0, 1\n  slli t0, t0, 32\n  lbu t1, 0(t0)",
            false,
        ),
        ("negative", "  li t0, -8\n  ld t1, 0(t0)", false),
        ("amo-null", "  li t0, 8\n  amoadd.d t1, t0, (t0)", false),
        (
            "wrapping-offset",
            "  li t0, 1\n  slli t0, t0, 32\n  lbu t1, -1(t0)",
            false,
        ),
        (
            "own-data",
            "  la t0, first\n  ld t1, 0(t0)\n  sd t1, 0(t0)",
            true,
        ),
        ("stack", "  ld t1, 0(sp)\n  sd t1, -8(sp)", true),
    ];
    for (name, body, fine) in cases {
        let exe = build(name, body);
        assert_eq!(qemu_exits_zero(&exe), fine, "{name} under qemu");
        let wasm =
            riscv::translate(&std::fs::read(&exe).unwrap(), &TranslateOptions::default()).unwrap();
        for backend in ["wasmtime", "cpu"] {
            let r = run(backend, &wasm);
            if fine {
                assert_eq!((r.exit_code, r.trap), (0, None), "{name} on {backend}");
            } else {
                assert_eq!(
                    r.trap,
                    Some(TrapKind::MemoryOutOfBounds),
                    "{name} on {backend}"
                );
            }
        }
    }
}
