//! WASI programs on the fleet: per-VM jobs compared with wasmtime (the oracle), the WASI test
//! suite, and rejection of unknown imports.

mod common;
#[path = "common/oracle.rs"]
mod oracle;

use std::path::PathBuf;
use std::sync::Arc;

use warpvisor::backend::wasmtime::{WasmtimeBackend, WasmtimeConfig};
use warpvisor::codegen::{CallMode, KernelOptions};
use warpvisor::runner::Executor;
use warpvisor::vmm::{FleetConfig, Program, VmmError};
use warpvisor::wasi::program::{run_jobs, WasiRunConfig};
use warpvisor::wasi::suite::{find_tests, run_suite, run_test, TestOutcome, TestReport};
use warpvisor::wasi::WasiJob;

fn echo() -> Vec<u8> {
    let text = include_str!("wasi/echo.wat");
    wat::parse_str(text).unwrap()
}

/// 64 jobs, each with its own args, env and stdin.
fn jobs() -> Vec<WasiJob> {
    (0..64)
        .map(|i| WasiJob {
            args: (0..i % 5).map(|k| format!("arg{i}-{k}")).collect(),
            env: vec![("JOB".into(), i.to_string()), ("LANG".into(), "C".into())],
            stdin: format!("hello from job {i}\nsecond line\n")
                .repeat(i % 3)
                .into_bytes()
                .into(),
        })
        .collect()
}

fn run(
    backend: &str,
    calls: CallMode,
    wasm: &[u8],
    jobs: &[WasiJob],
    num_vms: u32,
    opt_level: u8,
) -> Vec<warpvisor::wasi::program::JobResult> {
    let kernel = KernelOptions {
        calls,
        dialect: common::dialect(backend),
        interleave: if backend == "opencl" { 4 } else { 0 },
        opt_level,
        partition_ops: if backend == "opencl" { 2000 } else { 0 },
        ..KernelOptions::default()
    };
    let program =
        Arc::new(Program::compile(wasm, &kernel, common::backend(backend).as_ref()).unwrap());
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms,
            max_memory_pages: 512,
            stack_words: 1 << 15,
            ..FleetConfig::default()
        },
        program_name: "prog.wasm".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    run_jobs(program, &config, jobs).unwrap()
}

/// Runs `jobs` on `backend` — on `cpu` with continuations and with direct calls — and
/// compares every result with wasmtime's.
fn check_against_wasmtime(backend: &str, wasm: &[u8], jobs: &[WasiJob], opt_level: u8) {
    let modes: &[CallMode] = if backend == "cpu" {
        &[CallMode::Continuations, CallMode::Direct]
    } else {
        &[CallMode::Continuations]
    };
    check_modes(backend, modes, wasm, jobs, opt_level);
}

/// [`check_against_wasmtime`] in the call modes `modes`.
fn check_modes(backend: &str, modes: &[CallMode], wasm: &[u8], jobs: &[WasiJob], opt_level: u8) {
    let theirs = oracle::run(wasm, "prog.wasm", jobs);
    for &calls in modes {
        let ours = run(backend, calls, wasm, jobs, 32, opt_level);
        assert_eq!(ours.len(), theirs.len());
        for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(
                o,
                t,
                "{backend} ({}): job {i} differs from wasmtime",
                calls.name()
            );
        }
    }
}

#[test]
fn echo_jobs_match_wasmtime_on_cpu() {
    check_against_wasmtime("cpu", &echo(), &jobs(), 2);
}

#[test]
fn echo_jobs_match_wasmtime_on_cuda_through_the_cpu_driver() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    check_against_wasmtime("cuda", &echo(), &jobs(), 2);
}

#[test]
fn echo_jobs_match_wasmtime_on_opencl() {
    check_against_wasmtime("opencl", &echo(), &jobs(), 2);
}

/// Synchronous imports on PoCL (`--calls direct`: the host serves WASI while the kernel runs,
/// over fine-grained SVM), interleave 4: the echo jobs and the C guests against wasmtime.
#[test]
fn wasi_jobs_match_wasmtime_on_opencl_with_synchronous_imports() {
    check_modes("opencl", &[CallMode::Direct], &echo(), &jobs(), 2);
    for (name, jobs) in guest_cases() {
        if ["c-hello.wasm", "c-exit_code.wasm", "c-recurse.wasm"].contains(&name) {
            eprintln!("{name}");
            check_modes("opencl", &[CallMode::Direct], &guest(name), &jobs, 0);
        }
    }
}

/// Synchronous imports on `cuda` through warpvisor's CPU driver (`--calls direct`: the host
/// serves WASI while the kernel runs, through a mailbox in mapped host memory and copies on a
/// stream of its own): the echo jobs and the C guests against wasmtime.
#[test]
fn wasi_jobs_match_wasmtime_on_cuda_with_synchronous_imports() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    check_modes("cuda", &[CallMode::Direct], &echo(), &jobs(), 2);
    for (name, jobs) in guest_cases() {
        if ["c-hello.wasm", "c-exit_code.wasm", "c-recurse.wasm"].contains(&name) {
            eprintln!("{name}");
            check_modes("cuda", &[CallMode::Direct], &guest(name), &jobs, 0);
        }
    }
}

fn guest(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../guests/wasm")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "guest {} missing ({e}); see guests/README.md",
            path.display()
        )
    })
}

fn with_args(args: impl Fn(usize) -> Vec<String>) -> Vec<WasiJob> {
    (0..64)
        .map(|i| WasiJob {
            args: args(i),
            ..WasiJob::default()
        })
        .collect()
}

/// The guest corpus (`guests/`) with 64 jobs each, every job with its own inputs.
fn guest_cases() -> Vec<(&'static str, Vec<WasiJob>)> {
    let numbers = |i: usize| -> Vec<u8> {
        (0..20 + i)
            .map(|k| format!("{}\n", (k * 7919 + i * 31) % 1000))
            .collect::<String>()
            .into_bytes()
    };
    let cases: Vec<(&str, Vec<WasiJob>)> = vec![
        ("rust-hello.wasm", jobs()),
        ("rust-wc.wasm", jobs()),
        (
            "rust-panic_exit.wasm",
            with_args(|i| match i % 4 {
                0 => vec!["panic".into()],
                1 => vec!["exit".into(), (i % 7).to_string()],
                2 => vec!["panic-exit".into()],
                _ => vec![],
            }),
        ),
        (
            "rust-fmt_floats.wasm",
            with_args(|i| {
                vec![
                    (i as f64 * 1.375 - 20.0).to_string(),
                    format!("{}", i * 1000 + 7),
                    "-0.0".into(),
                ]
            }),
        ),
        (
            "rust-recurse.wasm",
            with_args(|i| {
                vec![
                    (100 + 40 * i).to_string(),
                    (10 + i % 8).to_string(),
                    (2 + i % 4).to_string(),
                ]
            }),
        ),
        ("rust-dyn_dispatch.wasm", jobs()),
        (
            "rust-big_output.wasm",
            with_args(|i| vec![(i * 40).to_string()]),
        ),
        (
            "rust-heap.wasm",
            with_args(|i| vec![(1000 + i * 997).to_string()]),
        ),
        ("c-hello.wasm", jobs()),
        (
            "c-sort.wasm",
            (0..64)
                .map(|i| WasiJob {
                    args: if i % 2 == 0 {
                        vec!["desc".into()]
                    } else {
                        vec![]
                    },
                    stdin: numbers(i).into(),
                    ..WasiJob::default()
                })
                .collect(),
        ),
        (
            "c-exit_code.wasm",
            with_args(|i| vec![(i % 100).to_string()]),
        ),
        (
            "c-recurse.wasm",
            with_args(|i| vec![(10 + i * 30).to_string()]),
        ),
    ];
    cases
}

/// Every guest, 64 jobs on 32 VMs, against wasmtime.
/// Every guest with direct calls (cpu's default); with continuations the C guests and
/// [`CONTINUATION_RUST`] (their kernels are the other backends' kernels in C), every guest
/// with `WARPVISOR_CPU_GUESTS=all`.
#[test]
fn guest_programs_match_wasmtime_on_cpu() {
    let all = std::env::var("WARPVISOR_CPU_GUESTS").is_ok_and(|v| v == "all");
    for (name, jobs) in guest_cases() {
        eprintln!("{name}");
        let modes: &[CallMode] =
            if all || name.starts_with("c-") || CONTINUATION_RUST.contains(&name) {
                &[CallMode::Continuations, CallMode::Direct]
            } else {
                &[CallMode::Direct]
            };
        // -O0 keeps GCC's time on these 30-120 KiB programs to seconds.
        check_modes("cpu", modes, &guest(name), &jobs, 0);
    }
}

/// The Rust guests CI runs with continuations on `cpu`.
const CONTINUATION_RUST: &[&str] = &["rust-hello.wasm", "rust-panic_exit.wasm"];

/// The guests on PoCL, 64 jobs on 32 VMs, against wasmtime. PoCL compiles slowly (about 1 s
/// per 2,000-operator partition even at -cl-opt-disable) and one build at a time, so these
/// builds are most of this file's time in CI: CI runs three guests — standard output, deep
/// recursion through continuations, a Rust panic and exit codes (the other C guests run on
/// `cuda` and with synchronous imports on PoCL; `c-sort`, `c-exit_code` and `rust-hello`
/// took about 250 s of CI's PoCL time); `WARPVISOR_OPENCL_GUESTS=all` runs every guest (see
/// docs/wasi.md for that run).
#[test]
fn guest_programs_match_wasmtime_on_opencl() {
    check_guests(
        "opencl",
        "WARPVISOR_OPENCL_GUESTS",
        &["c-hello.wasm", "c-recurse.wasm", "rust-panic_exit.wasm"],
        0,
    );
}

/// The guests named in `quick` (every guest when `all_var` is `all`) on `backend` against
/// wasmtime.
fn check_guests(backend: &str, all_var: &str, quick: &[&str], opt_level: u8) {
    let all = std::env::var(all_var).is_ok_and(|v| v == "all");
    let mut ran = 0;
    for (name, jobs) in guest_cases() {
        if !all && !quick.contains(&name) {
            continue;
        }
        eprintln!("{name}");
        check_against_wasmtime(backend, &guest(name), &jobs, opt_level);
        ran += 1;
    }
    assert!(ran >= quick.len());
}

/// The guests on `cuda` through warpvisor's CPU driver (NVRTC's PTX translated back to C):
/// 64 jobs on 32 VMs each, against wasmtime. CI runs `c-sort` (standard input; 90-100 s cold
/// beside the other tests; `c-recurse` runs on PoCL with continuations and here with
/// synchronous imports, the other C guests through the WASI suite below): NVRTC alone takes
/// about 4 minutes per Rust guest's kernel here; `WARPVISOR_CUDA_GUESTS=all` runs every
/// guest.
#[test]
fn guest_programs_match_wasmtime_on_cuda_through_the_cpu_driver() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    check_guests(
        "cuda",
        "WARPVISOR_CUDA_GUESTS",
        &["c-sort.wasm"],
        CUDA_GUEST_OPT,
    );
}

/// NVRTC's level for the guests on the CPU driver: `-G` (per C guest 27 s of NVRTC,
/// translation and C compiler here against 61 s at -O2). -O2's PTX, what a GPU user runs, is
/// executed by the spec scripts and the differential seeds on `cuda`.
const CUDA_GUEST_OPT: u8 = 0;

/// A file as standard input (`Stdin::File`, read by each VM from its start in host chunks)
/// behaves as the same bytes do under wasmtime, up to the end of the guest's memory: one
/// `fd_read` of 1,000 bytes into the last 536 of memory, from files shorter than the room,
/// exactly its size, one byte more, and longer (a read that would spill past memory traps).
#[test]
fn a_file_as_stdin_reads_as_wasmtime_reads_it_up_to_the_end_of_memory() {
    let wasm = wat::parse_str(
        r#"(module
          (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (func (export "_start")
            (i32.store (i32.const 0) (i32.const 65000))
            (i32.store (i32.const 4) (i32.const 1000))
            (drop (call $read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
            (i32.store (i32.const 16) (i32.const 65000))
            (i32.store (i32.const 20) (i32.load (i32.const 8)))
            (drop (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))))"#,
    )
    .unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stdin-files");
    std::fs::create_dir_all(&dir).unwrap();
    let jobs: Vec<WasiJob> = [100usize, 536, 537, 70_000]
        .iter()
        .map(|&n| {
            let path = dir.join(format!("in-{n}"));
            std::fs::write(&path, (0..n).map(|i| (i * 13) as u8).collect::<Vec<u8>>()).unwrap();
            WasiJob {
                stdin: warpvisor::wasi::Stdin::file(std::fs::File::open(&path).unwrap()),
                ..WasiJob::default()
            }
        })
        .collect();
    // Racing files: one truncated and one removed after it was opened (the open handle still
    // reads it), as a host program might do while a fleet runs.
    let mut jobs = jobs;
    for (n, remove) in [(300usize, false), (200, true)] {
        let path = dir.join(format!("raced-{n}"));
        std::fs::write(&path, vec![7u8; 400]).unwrap();
        let stdin = warpvisor::wasi::Stdin::file(std::fs::File::open(&path).unwrap());
        if remove {
            std::fs::remove_file(&path).unwrap();
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(n as u64))
                .unwrap();
        }
        jobs.push(WasiJob {
            stdin,
            ..WasiJob::default()
        });
    }
    let theirs = oracle::run(&wasm, "prog.wasm", &jobs);
    let outcomes: Vec<(bool, usize)> = theirs
        .iter()
        .map(|r| (r.trap.is_some(), r.stdout.len()))
        .collect();
    // Read whole, read to the last byte of memory, and two reads that would spill: traps.
    assert_eq!(
        outcomes,
        [
            (false, 100),
            (false, 536),
            (true, 0),
            (true, 0),
            (false, 300),
            (false, 400)
        ]
    );
    check_against_wasmtime("cpu", &wasm, &jobs, 0);
}

#[test]
fn unknown_imports_are_rejected_by_name_unless_allowed() {
    let wasm = wat::parse_str(
        r#"(module (import "env" "mystery_call" (func (param i32)))
             (memory 1) (func (export "_start") (call 0 (i32.const 1))))"#,
    )
    .unwrap();
    let program = Arc::new(
        Program::compile(&wasm, &KernelOptions::default(), common::cpu().as_ref()).unwrap(),
    );
    let mut config = WasiRunConfig {
        fleet: FleetConfig::default(),
        program_name: "m.wasm".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    match run_jobs(program.clone(), &config, &[WasiJob::default()]) {
        Err(e @ VmmError::UnknownImport { .. }) => {
            assert!(e.to_string().contains("mystery_call"), "{e}")
        }
        other => panic!("expected an unknown-import error, got {other:?}"),
    }
    config.allow_unknown_imports = true;
    let r = run_jobs(program, &config, &[WasiJob::default()]).unwrap();
    assert!(r[0].trap.is_some(), "a call to an unknown import traps");
}

/// The WASI suite on `cpu` with continuations (the GPU backends' call model): CI runs the C
/// and AssemblyScript tests — the 46 Rust tests' kernels took 100 of this test's 153 s cold
/// here, and all 72 run with direct calls below, which is how `cpu` runs by default;
/// `WARPVISOR_CPU_CONTINUATIONS_SUITE=all` runs all 72.
#[test]
fn wasi_test_suite_on_cpu() {
    let executor = Executor::Fleet {
        backend: common::cpu(),
        kernel: KernelOptions {
            opt_level: 0,
            ..KernelOptions::default()
        },
    };
    check_suite_subset(
        "cpu",
        "WARPVISOR_CPU_CONTINUATIONS_SUITE",
        &executor,
        100,
        &["c", "assemblyscript"],
    );
}

#[test]
fn wasi_test_suite_on_cpu_with_direct_calls() {
    let dir = common::testsuite().join("wasi/tests");
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasi-suite-scratch-direct");
    let executor = Executor::Fleet {
        backend: common::cpu(),
        kernel: KernelOptions {
            opt_level: 0,
            calls: CallMode::Direct,
            ..KernelOptions::default()
        },
    };
    let reports = run_suite(&dir, &executor, &scratch);
    check_suite("cpu (direct calls)", &reports, 72, 100);
}

#[test]
fn wasi_test_suite_on_wasmtime() {
    let dir = common::testsuite().join("wasi/tests");
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasi-suite-scratch-wasmtime");
    let executor = Executor::Wasmtime(WasmtimeBackend::new(WasmtimeConfig::default()).unwrap());
    let reports = run_suite(&dir, &executor, &scratch);
    check_suite("wasmtime", &reports, 72, 95);
}

/// The WASI suite on PoCL. CI runs the 14 C tests (the AssemblyScript ones run on `cpu` in
/// both call modes: their 12 PoCL builds cost CI about a minute); `WARPVISOR_OPENCL_SUITE=all`
/// runs all 72 (25 minutes cold on 2 cores; docs/wasi.md).
#[test]
fn wasi_test_suite_on_opencl() {
    let executor = Executor::Fleet {
        backend: common::opencl(),
        kernel: KernelOptions {
            dialect: common::dialect("opencl"),
            opt_level: 0,
            interleave: 4,
            partition_ops: 2000,
            ..KernelOptions::default()
        },
    };
    check_suite_subset("opencl", "WARPVISOR_OPENCL_SUITE", &executor, 90, &["c"]);
}

/// The WASI suite's tests in the language folders `subsets` (all 72 when `all_var` is `all`)
/// on `executor`, at least `min_percent` passing.
fn check_suite_subset(
    backend: &str,
    all_var: &str,
    executor: &Executor,
    min_percent: usize,
    subsets: &[&str],
) {
    let all = std::env::var(all_var).is_ok_and(|v| v == "all");
    let root = common::testsuite().join("wasi/tests");
    let dirs: Vec<PathBuf> = if all {
        vec![root]
    } else {
        subsets.iter().map(|d| root.join(d)).collect()
    };
    // The suite has 14 C, 12 AssemblyScript and 46 Rust test programs.
    let expected: usize = if all {
        72
    } else {
        subsets
            .iter()
            .map(|d| match *d {
                "c" => 14,
                "assemblyscript" => 12,
                _ => 46,
            })
            .sum()
    };
    let scratch =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wasi-suite-scratch-{backend}"));
    let reports: Vec<_> = dirs
        .iter()
        .flat_map(|d| run_suite(d, executor, &scratch))
        .collect();
    check_suite(backend, &reports, expected, min_percent);
}

/// The WASI suite on `cuda` through warpvisor's CPU driver. CI runs every other C test (7 of
/// 14: the 14 took 214 s cold here, the longest test of CI); `WARPVISOR_CUDA_SUITE=c` runs
/// the 14, `WARPVISOR_CUDA_SUITE=all` all 72. NVRTC compiles with `-G` (opt level 0): per
/// C test program here NVRTC -O2 takes 36 s, the translation 3.9 s and the C compiler 21 s;
/// with -G 2.8 s, 6.7 s and 18 s. -G PTX runs through the CPU driver (this suite and the
/// guests above) and ran on a real GPU (a 10,000-VM fleet, docs/gpu-runs.md); -O2's PTX, what
/// a GPU user runs, is executed by the spec scripts and the differential seeds on `cuda`.
#[test]
fn wasi_test_suite_on_cuda_through_the_cpu_driver() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    let executor = Executor::Fleet {
        backend: common::cuda(),
        kernel: KernelOptions {
            dialect: common::dialect("cuda"),
            opt_level: 0,
            ..KernelOptions::default()
        },
    };
    if std::env::var_os("WARPVISOR_CUDA_SUITE").is_some() {
        let subsets: &[&str] = &["c"];
        check_suite_subset("cuda", "WARPVISOR_CUDA_SUITE", &executor, 100, subsets);
        return;
    }
    let root = common::testsuite().join("wasi/tests");
    let tests: Vec<PathBuf> = find_tests(&root.join("c")).into_iter().step_by(2).collect();
    assert_eq!(tests.len(), 7, "the suite's C tests changed");
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasi-suite-scratch-cuda");
    let reports = warpvisor::work_queue::map_indexed(
        tests.len(),
        warpvisor::work_queue::default_workers(),
        |i| TestReport {
            name: tests[i].to_string_lossy().into_owned(),
            outcome: run_test(&tests[i], &executor, &scratch.join(i.to_string())),
        },
    );
    check_suite("cuda", &reports, 7, 100);
}

/// Prints every test that did not pass, then asserts the suite's size and pass rate.
fn check_suite(
    backend: &str,
    reports: &[warpvisor::wasi::suite::TestReport],
    expected: usize,
    min_percent: usize,
) {
    let passed = reports
        .iter()
        .filter(|r| r.outcome == TestOutcome::Passed)
        .count();
    for r in reports {
        if r.outcome != TestOutcome::Passed {
            eprintln!("{}: {:?}", r.name, r.outcome);
        }
    }
    eprintln!(
        "WASI suite on {backend}: {passed} of {} passed",
        reports.len()
    );
    assert_eq!(reports.len(), expected, "tests found");
    assert!(
        passed * 100 >= reports.len() * min_percent,
        "{passed} of {} passed",
        reports.len()
    );
}
