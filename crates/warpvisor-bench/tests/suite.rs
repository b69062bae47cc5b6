//! The benchmark runner end to end, kept small for CI: real benchmarks on every platform CI
//! has (native-x86, wasmtime, cpu, and opencl on PoCL), a wrong module caught by validation,
//! the microbenchmarks, the report formats and the command line.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use warpvisor::codegen::CallMode;
use warpvisor_bench::platform::Platform;
use warpvisor_bench::report::{chart, markdown, Report, RunStatus};
use warpvisor_bench::settings::Settings;

/// A tiny quick run: fleets of 4 VMs, two batches, one pass, kernels built without the
/// device compilers' optimisers (what is checked here is the runner, not the kernels' speed:
/// PoCL's optimiser alone took most of this test's two and a half minutes in CI).
fn tiny(benchmarks: &[&str], platforms: &[Platform]) -> Settings {
    Settings {
        vms: 4,
        opt_level: 0,
        batches: 2,
        min_time: Duration::ZERO,
        micro: false,
        micro_vms: 2,
        benchmarks: benchmarks.iter().map(|s| s.to_string()).collect(),
        platforms: platforms.to_vec(),
        ..Settings::quick()
    }
}

fn run(settings: &Settings) -> Report {
    warpvisor_bench::run(settings, &|line| eprintln!("{line}")).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "warpvisor-bench-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn small_benchmarks_validate_on_every_platform_ci_has() {
    let all = [
        Platform::Native,
        Platform::Wasmtime,
        Platform::Cpu,
        Platform::OpenCl,
    ];
    // LZ4 everywhere (OpenCL builds are slow on PoCL: one small module), Scrypt off OpenCL.
    // With the call modes compared on cpu.
    let mut report = run(&Settings {
        compare_calls: true,
        ..tiny(&["lz4"], &all)
    });
    // Scrypt with continuations forced on cpu: its slow calls are checked below.
    let scrypt = run(&Settings {
        cpu_calls: CallMode::Continuations,
        ..tiny(&["scrypt"], &all[..3])
    });
    for p in &report.platforms {
        let wanted = all.iter().any(|a| a.key() == p.platform);
        assert_eq!(p.available, wanted, "{}: {}", p.platform, p.detail);
    }
    report.benchmarks.extend(scrypt.benchmarks.clone());
    for b in &report.benchmarks {
        assert!(b.validated, "{}: {:?}", b.name, b.runs);
        assert_eq!(b.requests, 8);
        let platforms: &[Platform] = if b.name == "lz4" { &all } else { &all[..3] };
        for &p in platforms {
            let t = *b
                .throughput
                .get(p)
                .unwrap_or_else(|| panic!("{} on {}", b.name, p.key()));
            assert!(t > 0.0);
            let ratio = *b.ratio_to_native.get(p).unwrap();
            let native = *b.throughput.get(Platform::Native).unwrap();
            assert!((ratio - t / native).abs() < 1e-9);
        }
        assert!(b.throughput.get(Platform::Cuda).is_none());
        for run in b
            .runs
            .iter()
            .filter(|r| r.platform.starts_with("warpvisor"))
        {
            assert_eq!(run.batch_size, 4);
            let phases = run.phases.expect("warpvisor runs report their phases");
            assert!(phases.launches > 0 && phases.hypercalls > 0, "{phases:?}");
            // Every request reads stdin and writes stdout through hypercalls, which are calls
            // through the trampoline.
            assert!(phases.slow_calls >= phases.hypercalls, "{phases:?}");
        }
    }
    // LZ4's batch in both call modes, both replies checked, both timed. Its calls that do not
    // yield skip the trampoline in both (since 6d479af also through `call_indirect`), so the
    // modes make the same slow calls, its hypercalls; only continuations save live values at
    // them.
    let lz4 = &report.benchmarks[0];
    let modes = lz4.call_modes.expect("--compare-calls measured lz4");
    assert!(lz4.call_modes_error.is_none());
    assert_eq!(modes.requests, 4);
    assert!(
        modes.continuations.slow_calls_per_request >= modes.direct.slow_calls_per_request
            && modes.direct.slow_calls_per_request > 0.0,
        "{modes:?}"
    );
    assert!(
        modes.continuations.saved_values_per_request > 0.0
            && modes.direct.saved_values_per_request == 0.0,
        "{modes:?}"
    );
    assert!(modes.direct.execute_seconds > 0.0 && modes.continuations.execute_seconds > 0.0);
    assert!(scrypt.benchmarks[0].call_modes.is_none(), "not asked for");
    // With continuations, Scrypt's Rust code makes slow calls beyond its hypercalls (functions
    // that can panic).
    let cpu = scrypt.benchmarks[0]
        .runs
        .iter()
        .find(|r| r.platform == "warpvisor-cpu")
        .unwrap();
    let phases = cpu.phases.unwrap();
    assert!(phases.slow_calls > 10 * phases.hypercalls, "{phases:?}");
    assert!(phases
        .continuations_estimate_seconds
        .is_some_and(|s| s > 0.0));

    // The JSON carries the shape: every platform key, null where none ran.
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    let b0 = &json["benchmarks"][0];
    assert_eq!(b0["name"], "lz4");
    assert_eq!(b0["validated"], true);
    for key in [
        "native-x86",
        "wasmtime",
        "warpvisor-cpu",
        "warpvisor-opencl",
        "warpvisor-cuda",
    ] {
        assert!(b0["throughput"].get(key).is_some(), "{key} missing");
    }
    assert!(b0["throughput"]["warpvisor-cuda"].is_null());
    assert!(b0["throughput"]["warpvisor-opencl"].as_f64().unwrap() > 0.0);
    // Each warpvisor run says what its fleet moved and where its time went, allocation and
    // scheduling included, and the phases add up to at most the timed wall time.
    for run in b0["runs"].as_array().unwrap() {
        if !run["platform"].as_str().unwrap().starts_with("warpvisor") {
            continue;
        }
        let ph = &run["phases"];
        assert!(ph["allocate_seconds"].as_f64().unwrap() > 0.0, "{ph}");
        assert!(ph["schedule_seconds"].as_f64().unwrap() > 0.0, "{ph}");
        assert!(ph["host_seconds"].as_f64().unwrap() > 0.0, "{ph}");
        assert!(ph["bytes_per_launch"].as_u64().unwrap() > 0, "{ph}");
        assert!(ph["transfers"].as_u64().unwrap() > 0, "{ph}");
        let moved =
            ph["bytes_to_device"].as_u64().unwrap() + ph["bytes_from_device"].as_u64().unwrap();
        assert_eq!(
            moved / ph["launches"].as_u64().unwrap(),
            ph["bytes_per_launch"].as_u64().unwrap()
        );
        let timed: f64 = [
            "execute_seconds",
            "transfer_seconds",
            "hypercall_seconds",
            "instantiate_seconds",
            "schedule_seconds",
            "host_seconds",
        ]
        .iter()
        .map(|k| ph[*k].as_f64().unwrap())
        .sum();
        let wall = run["seconds"].as_f64().unwrap();
        assert!(timed <= wall * 1.000_001, "{timed} > {wall}: {ph}");
    }

    let md = markdown::render(&report);
    assert!(md.contains("| LZ4 | yes |"), "{md}");
    assert!(md.contains("### Where warpvisor's time goes"));
    assert!(md.contains("| Scheduling | Jobs | Other |"), "{md}");
    assert!(md.contains("### Continuations measured"), "{md}");
    let dir = scratch("chart");
    let svg = dir.join("chart.svg");
    chart::write_svg(&report, &svg).unwrap();
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("LZ4") && svg.contains("warpvisor-cpu"));
}

/// A module that is not the benchmark's program replies differently: the run says which
/// request differed and how, reports no number for that platform, and fails.
#[test]
fn a_wrong_module_fails_validation_and_gets_no_number() {
    let dir = scratch("wrong");
    let strings = warpvisor_bench::guests::module("strings", None).unwrap();
    std::fs::write(dir.join("bench-lz4.wasm"), strings).unwrap();
    let mut settings = tiny(&["lz4"], &[Platform::Native, Platform::Wasmtime]);
    settings.guests = Some(dir.clone());
    let report = run(&settings);
    let b = &report.benchmarks[0];
    assert!(!b.validated);
    assert!(!report.all_validated());
    assert!(b.throughput.get(Platform::Wasmtime).is_none());
    assert!(b.throughput.get(Platform::Native).is_some());
    let wt = b.runs.iter().find(|r| r.platform == "wasmtime").unwrap();
    assert_eq!(wt.status, RunStatus::Mismatch);
    let detail = wt.detail.as_deref().unwrap();
    assert!(detail.starts_with("request 0: exit code 1"), "{detail}");
    assert!(markdown::render(&report).contains("| LZ4 | **no** |"));

    // The command line exits 1 and says why.
    let out = Command::new(env!("CARGO_BIN_EXE_warpvisor-bench"))
        .args([
            "--quick",
            "--benchmarks",
            "lz4",
            "--platforms",
            "wasmtime",
            "--no-micro",
        ])
        .args([
            "--vms",
            "2",
            "--batches",
            "1",
            "--min-seconds",
            "0",
            "--guests",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NOT VALIDATED: request 0"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("**no**"));
}

#[test]
fn microbenchmarks_measure_copies_transfers_slow_calls_and_wasm2c_on_cpu() {
    let mut settings = tiny(&["lz4"], &[Platform::Native, Platform::Cpu]);
    settings.micro = true;
    let (kernels, _) = warpvisor_bench::platform::open(&settings);
    assert_eq!(kernels.len(), 1);
    let m = warpvisor_bench::micro::run_all(&settings, &kernels, &|l| eprintln!("{l}"));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    let s = &m.slow_call[0];
    assert!(s.slow_calls > 0 && s.ns_per_slow_call > 0.0, "{s:?}");
    let peak = &m.peak_copy[0];
    assert!(peak.gb_per_s > 0.1, "{peak:?}");
    let variants = warpvisor_bench::micro::memcopy::WIDTHS.len()
        * warpvisor_bench::micro::memcopy::UNROLLS.len()
        * warpvisor_bench::micro::memcopy::INTERLEAVES.len();
    assert_eq!(m.memcopy.len(), variants);
    for r in &m.memcopy {
        assert!(r.gb_per_s > 0.0 && r.fraction_of_peak > 0.0, "{r:?}");
        assert!((r.fraction_of_peak - r.gb_per_s / peak.gb_per_s).abs() < 1e-9);
    }
    let sizes: Vec<usize> = m.transfer.iter().map(|t| t.bytes_per_vm).collect();
    assert_eq!(sizes, warpvisor_bench::micro::transfer::SIZES);
    assert!(m
        .transfer
        .iter()
        .all(|t| t.gb_per_s > 0.0 && t.service_gb_per_s >= t.gb_per_s));
    // wasm2c's build ran each program and agreed with the kernel's result (run() checks).
    let programs: Vec<&str> = m.wasm2c.iter().map(|r| r.program).collect();
    assert_eq!(programs, ["recursive", "indirect", "memory"]);
    for r in &m.wasm2c {
        assert!(r.warpvisor_s > 0.0 && r.wasm2c_s > 0.0, "{r:?}");
        assert!((r.ratio - r.warpvisor_s / r.wasm2c_s).abs() < 1e-9, "{r:?}");
    }
}

#[test]
fn bad_command_lines_are_refused_with_a_reason() {
    for (args, says) in [
        (&["--benchmarks", "nope"][..], "no benchmark called `nope`"),
        (&["--platforms", "gpu"][..], "no platform called `gpu`"),
        (&["--interleave", "3"][..], "--interleave must be 0, 4 or 8"),
        (
            &["--vms", "0"][..],
            "--vms and --batches must be at least 1",
        ),
        (&["--min-seconds", "-1"][..], "--min-seconds"),
        (&["--frobnicate"][..], "--frobnicate"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_warpvisor-bench"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
