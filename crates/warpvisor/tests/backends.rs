//! Backend choice and the first-run experience: `devices`, `--backend auto` (the default),
//! the built-in `wasmtime` backend, `--timeout`, `--stats`, and a clean failure when CUDA is
//! missing.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn warpvisor(args: &[&str]) -> Output {
    Command::new(common::warpvisor_bin())
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("backends");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `examples/hello.wasm` is `examples/hello.wat` assembled; `WARPVISOR_BLESS=1` rewrites it.
#[test]
fn example_binary_matches_its_source() {
    let wat = repo().join("examples/hello.wat");
    let built = wat::parse_file(&wat).unwrap();
    let path = repo().join("examples/hello.wasm");
    if std::env::var_os("WARPVISOR_BLESS").is_some() {
        std::fs::write(&path, &built).unwrap();
    }
    let committed = std::fs::read(&path).unwrap();
    assert!(
        committed == built,
        "examples/hello.wasm is stale: run WARPVISOR_BLESS=1 cargo test --test backends"
    );
}

/// The README's first command: no flags but `--vms`, the default backend, eight VMs.
#[test]
fn example_runs_with_no_other_flag() {
    let out = warpvisor(&[
        "run",
        "examples/hello.wasm",
        "--vms",
        "8",
        "--",
        "GPU",
        "VMs",
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Hello from a warpvisor VM!"), "{stdout}");
    assert!(stdout.contains("  arg: GPU\n  arg: VMs\n"), "{stdout}");
    assert!(stderr.contains("8 VMs: 8 exited 0"), "{stderr}");
    // The same program on wasmtime prints the same bytes (checksum included).
    let reference = warpvisor(&[
        "run",
        "examples/hello.wasm",
        "--backend",
        "wasmtime",
        "--",
        "GPU",
        "VMs",
    ]);
    assert_eq!(reference.status.code(), Some(0));
    assert_eq!(text(&reference.stdout), stdout);
}

#[test]
fn devices_names_every_backend_and_the_auto_pick() {
    let out = warpvisor(&["devices"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for name in ["cuda", "opencl", "cpu", "wasmtime"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}"));
        assert!(
            line.contains("available") || line.contains("unavailable — "),
            "{line}"
        );
    }
    // Each OpenCL device says whether it can serve imports while a kernel runs (PoCL can).
    let opencl_devices: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("opencl: available"))
        .skip(1)
        .take_while(|l| l.starts_with("  ["))
        .collect();
    for line in &opencl_devices {
        assert!(
            line.contains("synchronous imports (--calls direct): yes")
                || line.contains("synchronous imports (--calls direct): no, "),
            "{line}"
        );
    }
    let auto = stdout
        .lines()
        .find(|l| l.starts_with("auto: "))
        .unwrap_or_else(|| panic!("no auto line: {stdout}"));
    assert!(
        auto.contains('(') && auto.ends_with(')'),
        "the pick says why: {auto}"
    );
}

/// On warpvisor's CUDA driver for the CPU the cuda device is listed as able to serve imports
/// while a kernel runs (it maps page-locked host memory and copies beside running kernels),
/// and `run --backend cuda --calls direct` answers as continuations do.
#[test]
fn cuda_on_the_cpu_driver_serves_imports_while_a_kernel_runs() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    let Some(driver) = common::cuda_driver_library() else {
        return;
    };
    let with_driver = |args: &[&str]| {
        Command::new(common::warpvisor_bin())
            .current_dir(repo())
            .env(warpvisor::backend::cuda::DRIVER_VARIABLE, &driver)
            .args(args)
            .output()
            .unwrap()
    };
    let out = with_driver(&["devices"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let device = stdout
        .lines()
        .skip_while(|l| !l.starts_with("cuda: available"))
        .nth(1)
        .unwrap_or_else(|| panic!("no cuda device: {stdout}"));
    assert!(
        device.contains("synchronous imports (--calls direct): yes"),
        "{device}"
    );
    let run = |calls: &str| {
        let out = with_driver(&[
            "run",
            "examples/hello.wasm",
            "--backend",
            "cuda",
            "--calls",
            calls,
            "--vms",
            "4",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let direct = run("direct");
    assert!(!direct.is_empty());
    assert_eq!(direct, run("continuations"));
}

#[test]
fn cuda_backend_without_cuda_fails_naming_what_is_missing() {
    let cuda = warpvisor::backend::select::probe(warpvisor::backend::select::BackendKind::Cuda);
    let out = warpvisor(&[
        "run",
        "examples/fib.wat",
        "--backend",
        "cuda",
        "--invoke",
        "fib",
        "--",
        "10",
    ]);
    let stderr = text(&out.stderr);
    match cuda.state {
        Err(why) => {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
            assert!(stderr.contains("cuda") && stderr.contains(&why), "{stderr}");
            assert!(
                stderr.contains("libcuda")
                    || stderr.contains("NVRTC")
                    || stderr.contains("devices"),
                "names what is missing: {stderr}"
            );
        }
        // A machine with a GPU: the backend must then work.
        Ok(_) => {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            assert!(text(&out.stdout).contains("[55]"));
        }
    }
}

fn spin_jobs() -> PathBuf {
    let jobs = tmp("spin-jobs.jsonl");
    std::fs::write(
        &jobs,
        "{\"args\": []}\n{\"args\": [\"spin\"]}\n{\"args\": []}\n{\"args\": [\"spin\"]}\n",
    )
    .unwrap();
    jobs
}

/// VMs that never finish stop with `timeout`; the others complete, on a fleet and on wasmtime.
#[test]
fn timeout_stops_runaway_vms_and_the_others_complete() {
    let spin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/wasi/spin.wat");
    let jobs = spin_jobs();
    for backend in ["cpu", "wasmtime"] {
        let out = warpvisor(&[
            "run",
            spin.to_str().unwrap(),
            "--backend",
            backend,
            "--vms",
            "4",
            "--jobs",
            jobs.to_str().unwrap(),
            "--timeout",
            "0.5",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{backend}: {}",
            text(&out.stderr)
        );
        let lines: Vec<serde_json::Value> = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{backend}");
        for (i, l) in lines.iter().enumerate() {
            if i % 2 == 0 {
                assert_eq!(l["stdout"], "done\n", "{backend} job {i}: {l}");
                assert_eq!(l["trap"], serde_json::Value::Null, "{backend} job {i}");
            } else {
                assert_eq!(l["trap"], "timeout", "{backend} job {i}: {l}");
            }
        }
    }
}

/// A runaway loop without system calls on wasmtime is interrupted by `--timeout` too.
#[test]
fn wasmtime_timeout_interrupts_a_pure_loop() {
    let out = warpvisor(&[
        "run",
        "--backend",
        "wasmtime",
        "--timeout",
        "0.3",
        "--invoke",
        "spin",
        "--vms",
        "2",
        "examples/fib.wat",
    ]);
    // fib.wat has no `spin`: a clean error first.
    assert_eq!(out.status.code(), Some(1));
    let looping = tmp("loop.wat");
    std::fs::write(
        &looping,
        r#"(module (func (export "spin") (result i32) (loop $l (br $l)) (i32.const 0)))"#,
    )
    .unwrap();
    let out = warpvisor(&[
        "run",
        looping.to_str().unwrap(),
        "--backend",
        "wasmtime",
        "--timeout",
        "0.3",
        "--invoke",
        "spin",
        "--vms",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.matches("\"trap\": \"timeout\"").count(),
        2,
        "{stdout}"
    );
}

/// `--stats` reports every phase and a throughput.
#[test]
fn stats_report_every_phase() {
    let out = warpvisor(&["run", "examples/hello.wasm", "--vms", "4", "--stats"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    for phase in [
        "jobs/s",
        "translate",
        "device compile",
        "on-device execute",
        "transfers",
        "hypercall service",
        "allocation",
        "scheduling",
        "host jobs",
        "unaccounted",
        "bytes from the device",
    ] {
        assert!(stderr.contains(phase), "no {phase}: {stderr}");
    }
    assert!(stderr.contains("backend: "), "{stderr}");
}

/// The same jobs give the same result lines on the cpu fleet and on wasmtime.
#[test]
fn wasmtime_backend_gives_the_fleets_result_lines() {
    let jobs = tmp("hello-jobs.jsonl");
    let lines: String = (0..20)
        .map(|i| format!("{{\"args\": [\"job{i}\", \"{}\"]}}\n", "x".repeat(i)))
        .collect();
    std::fs::write(&jobs, lines).unwrap();
    let run = |backend: &str| {
        let out = warpvisor(&[
            "run",
            "examples/hello.wasm",
            "--backend",
            backend,
            "--vms",
            "8",
            "--jobs",
            jobs.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{backend}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let fleet = run("cpu");
    assert_eq!(fleet.lines().count(), 20);
    assert_eq!(fleet, run("wasmtime"));
}
