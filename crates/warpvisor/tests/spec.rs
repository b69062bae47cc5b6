//! Conformance: every non-SIMD script of the WebAssembly 2.0 spec suite, run through warpvisor's
//! own `wast` runner: on `cpu` (interleave 0, with continuations and with direct calls;
//! interleave 8 with the kernel split into small partitions) and on `opencl` (interleave 4).

mod common;

use std::sync::Mutex;

use warpvisor::codegen::{CallMode, KernelOptions};
use warpvisor::vmm::FleetConfig;
use warpvisor::wast::{run_script, ScriptReport, WastConfig};

fn run_suite(
    backend: &str,
    interleave: u32,
    partition_ops: u32,
    calls: CallMode,
) -> Vec<ScriptReport> {
    let dir = common::testsuite().join("wasm-spec");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("spec suite missing at {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wast"))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("simd_"))
        })
        .collect();
    files.sort();
    assert!(
        files.len() > 70,
        "expected the non-SIMD spec scripts in {}",
        dir.display()
    );
    let config = WastConfig {
        backend: common::backend(backend),
        kernel: KernelOptions {
            dialect: common::dialect(backend),
            interleave,
            partition_ops,
            calls,
            ..KernelOptions::default()
        },
        fleet: FleetConfig {
            max_memory_pages: 1024,
            ..FleetConfig::default()
        },
    };
    let next = Mutex::new(files.into_iter());
    let reports = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
            s.spawn(|| loop {
                let Some(path) = next.lock().unwrap().next() else {
                    break;
                };
                let text = std::fs::read_to_string(&path).unwrap();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let r = run_script(&name, &text, &config);
                reports.lock().unwrap().push(r);
            });
        }
    });
    reports.into_inner().unwrap()
}

fn check(backend: &str, interleave: u32, partition_ops: u32, calls: CallMode) {
    let reports = run_suite(backend, interleave, partition_ops, calls);
    let passed: usize = reports.iter().map(|r| r.passed).sum();
    let failed: usize = reports.iter().map(|r| r.failures.len()).sum();
    let skipped: usize = reports.iter().map(|r| r.skips.len()).sum();
    for r in &reports {
        for f in &r.failures {
            eprintln!("FAIL {}:{f}", r.name);
        }
        for s in &r.skips {
            eprintln!("skip {}:{s}", r.name);
        }
    }
    eprintln!(
        "{backend}, interleave {interleave}, {}: {passed} passed, {failed} failed, {skipped} skipped",
        calls.name()
    );
    let ran = passed + failed;
    assert!(passed > 25_000, "too few assertions ran: {passed}");
    assert!(
        passed * 1000 >= ran * 995,
        "pass rate below 99.5%: {passed}/{ran}"
    );
    assert!(
        skipped * 100 <= ran + skipped,
        "more than 1% skipped: {skipped}"
    );
    // Every skip names its reason.
    assert!(reports
        .iter()
        .flat_map(|r| &r.skips)
        .all(|s| s.split_once(": ").is_some_and(|(_, why)| !why.is_empty())));
}

#[test]
fn spec_suite_on_cpu_contiguous() {
    check("cpu", 0, 0, CallMode::Continuations);
}

#[test]
fn spec_suite_on_cpu_with_direct_calls() {
    check("cpu", 0, 0, CallMode::Direct);
}

#[test]
fn spec_suite_on_opencl_interleave_4() {
    check("opencl", 4, 0, CallMode::Continuations);
}

#[test]
fn spec_suite_on_cpu_interleave_8_in_small_partitions() {
    // Kernels of at most 30 operators: calls cross partitions all the time.
    check("cpu", 8, 30, CallMode::Continuations);
}
