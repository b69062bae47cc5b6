//! The command line: jobs in and results out, and a clear one-line error with exit code 1 for
//! every kind of bad input — never a panic.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn warpvisor(args: &[&str]) -> Output {
    Command::new(common::warpvisor_bin())
        .args(args)
        .output()
        .unwrap()
}

/// Exit code 1, one line on stderr, no panic.
fn assert_clean_error(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: exit status {:?}, stderr {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{what}: panicked: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{what}: not one line: {stderr}"
    );
}

const DIV: &str = r#"(module (func (export "div") (param i32 i32) (result i32) (i32.div_s (local.get 0) (local.get 1))))"#;

#[test]
fn jobs_file_with_every_seventh_dividing_by_zero() {
    let module = tmp("div.wat");
    std::fs::write(&module, DIV).unwrap();
    let jobs = tmp("div.jobs");
    let lines: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "{{\"args\": [{}, {}]}}",
                i * 3 + 1,
                if i % 7 == 0 { 0 } else { 1 + i % 5 }
            )
        })
        .collect();
    std::fs::write(&jobs, lines.join("\n")).unwrap();
    let output = tmp("div.out");
    let out = warpvisor(&[
        "run",
        module.to_str().unwrap(),
        "--invoke",
        "div",
        "--vms",
        "256",
        "--jobs",
        jobs.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = std::fs::read_to_string(&output).unwrap();
    let results: Vec<&str> = results.lines().collect();
    assert_eq!(results.len(), 1000);
    for (i, line) in results.iter().enumerate() {
        let expected = if i % 7 == 0 {
            format!("{{\"job\": {i}, \"trap\": \"integer_division_by_zero\"}}")
        } else {
            format!(
                "{{\"job\": {i}, \"results\": [{}]}}",
                (i * 3 + 1) / (1 + i % 5)
            )
        };
        assert_eq!(*line, expected);
    }
}

#[test]
fn floats_and_i64_print_exactly() {
    let module = tmp("f.wat");
    std::fs::write(
        &module,
        r#"(module (func (export "f") (param f64 i64 f32) (result f64 i64 f32)
             (f64.neg (local.get 0)) (local.get 1) (f32.div (local.get 2) (f32.const 0))))"#,
    )
    .unwrap();
    let out = warpvisor(&[
        "run",
        module.to_str().unwrap(),
        "--invoke",
        "f",
        "--",
        "0.0",
        "-9223372036854775808",
        "-1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"job": 0, "results": [-0.0, -9223372036854775808, "-inf"]}"#
    );
}

#[test]
fn missing_file_bad_flag_and_bad_arguments_are_one_line_errors() {
    assert_clean_error(
        &warpvisor(&["run", "/nonexistent.wasm", "--invoke", "f"]),
        "missing file",
    );
    assert_clean_error(&warpvisor(&["run", "--frobnicate"]), "bad flag");
    assert_clean_error(
        &warpvisor(&["wast", "--interleave", "3", "x.wast"]),
        "bad interleave",
    );
    let module = tmp("div2.wat");
    std::fs::write(&module, DIV).unwrap();
    let m = module.to_str().unwrap();
    assert_clean_error(
        &warpvisor(&["run", m, "--invoke", "div", "--", "1"]),
        "too few args",
    );
    assert_clean_error(
        &warpvisor(&["run", m, "--invoke", "div", "--", "x", "1"]),
        "bad arg",
    );
    assert_clean_error(&warpvisor(&["run", m, "--invoke", "nope"]), "no export");
    assert_clean_error(
        &warpvisor(&["run", m, "--invoke", "div", "--vms", "0"]),
        "zero VMs",
    );
    let jobs = tmp("bad.jobs");
    std::fs::write(&jobs, "{\"args\": [1, 2]}\nnot json\n").unwrap();
    assert_clean_error(
        &warpvisor(&[
            "run",
            m,
            "--invoke",
            "div",
            "--jobs",
            jobs.to_str().unwrap(),
        ]),
        "bad jobs line",
    );
}

fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn random_bytes_and_truncated_modules_are_rejected_cleanly() {
    let valid = wat::parse_str(DIV).unwrap();
    for seed in 0..40u64 {
        let path = tmp(&format!("random{seed}.wasm"));
        let mut bytes = random_bytes(seed, 16 + seed as usize * 7);
        if seed % 2 == 0 {
            // A valid header followed by garbage, or a truncated valid module.
            bytes = if seed % 4 == 0 {
                [b"\0asm\x01\0\0\0".as_slice(), &bytes].concat()
            } else {
                valid[..(seed as usize) % valid.len()].to_vec()
            };
        }
        std::fs::write(&path, &bytes).unwrap();
        assert_clean_error(
            &warpvisor(&["run", path.to_str().unwrap(), "--invoke", "div"]),
            &format!("seed {seed}"),
        );
    }
}

/// The binary modules of the suite's `assert_malformed` and `assert_invalid` directives.
fn bad_spec_modules(file: &Path) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(file).unwrap();
    let buf = wast::parser::ParseBuffer::new(&text).unwrap();
    let script = wast::parser::parse::<wast::Wast<'_>>(&buf).unwrap();
    let mut out = Vec::new();
    for d in script.directives {
        match d {
            wast::WastDirective::AssertMalformed { mut module, .. }
            | wast::WastDirective::AssertInvalid { mut module, .. } => {
                if let Ok(bytes) = module.encode() {
                    out.push(bytes);
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn spec_suite_malformed_and_invalid_modules_are_rejected_cleanly() {
    let dir = common::testsuite().join("wasm-spec");
    let mut n = 0;
    for name in [
        "binary.wast",
        "binary-leb128.wast",
        "custom.wast",
        "type.wast",
        "global.wast",
        "memory.wast",
    ] {
        for (i, bytes) in bad_spec_modules(&dir.join(name))
            .into_iter()
            .enumerate()
            .step_by(3)
        {
            let path = tmp(&format!("{name}.{i}.wasm"));
            std::fs::write(&path, &bytes).unwrap();
            assert_clean_error(
                &warpvisor(&["run", path.to_str().unwrap(), "--invoke", "f"]),
                &format!("{name} #{i}"),
            );
            n += 1;
        }
    }
    assert!(n > 50, "only {n} modules checked");
}

#[test]
fn unsupported_feature_is_named_with_its_function() {
    let path = tmp("simd.wat");
    std::fs::write(
        &path,
        r#"(module (func $ok) (func $uses_simd (export "v") (result i32)
             (i32x4.extract_lane 0 (v128.const i32x4 1 2 3 4))))"#,
    )
    .unwrap();
    let out = warpvisor(&["run", path.to_str().unwrap(), "--invoke", "v"]);
    assert_clean_error(&out, "simd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SIMD") && stderr.contains("uses_simd"),
        "{stderr}"
    );
}

#[test]
fn without_opencl_devices_explains_and_the_backend_fails_cleanly() {
    let out = Command::new(common::warpvisor_bin())
        .arg("devices")
        .env("OPENCL_DYLIB_PATH", "/nonexistent/libOpenCL.so")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("cpu: available"), "{stdout}");
    assert!(
        stdout.contains("opencl: unavailable") && stdout.contains("OPENCL_DYLIB_PATH"),
        "{stdout}"
    );
    let module = tmp("div3.wat");
    std::fs::write(&module, DIV).unwrap();
    let out = Command::new(common::warpvisor_bin())
        .args([
            "run",
            module.to_str().unwrap(),
            "--backend",
            "opencl",
            "--invoke",
            "div",
            "--",
            "1",
            "1",
        ])
        .env("OPENCL_DYLIB_PATH", "/nonexistent/libOpenCL.so")
        .output()
        .unwrap();
    assert_clean_error(&out, "opencl unavailable");
    assert!(String::from_utf8_lossy(&out.stderr).contains("opencl is unavailable"));
}

#[test]
fn a_fleet_too_big_for_the_device_names_the_largest_that_fits() {
    let module = tmp("mem.wat");
    std::fs::write(
        &module,
        r#"(module (memory 1) (func (export "f") (result i32) (i32.const 1)))"#,
    )
    .unwrap();
    let run = |checks: &[&str]| {
        let mut args = vec![
            "run",
            module.to_str().unwrap(),
            "--backend",
            "opencl",
            "--invoke",
            "f",
            "--vms",
            "200000",
            "--max-memory",
            "1024",
        ];
        args.extend_from_slice(checks);
        warpvisor(&args)
    };
    // Memories in device buffers: the device's capacity.
    let out = run(&["--memory-checks", "explicit"]);
    assert_clean_error(&out, "fleet too big");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("at most") && stderr.contains("VMs fit"),
        "{stderr}"
    );
    // Guard regions (PoCL's default): the address space they reserve, and the way out.
    let out = run(&[]);
    assert_clean_error(&out, "fleet too big for guard regions");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("at most 16256 VMs") && stderr.contains("--memory-checks explicit"),
        "{stderr}"
    );
}

const ONE: &str = r#"(module (func (export "one") (result i32) (i32.const 1)))"#;

/// The repository's `examples/` folder.
fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// `warpvisor run` of `jobs` (one line each) on the wasmtime backend: the error it gives.
fn jobs_error(module: &Path, invoke: Option<&str>, name: &str, jobs: &str) -> String {
    let path = tmp(name);
    std::fs::write(&path, jobs).unwrap();
    let mut args = vec![
        "run",
        module.to_str().unwrap(),
        "--backend",
        "wasmtime",
        "--jobs",
        path.to_str().unwrap(),
    ];
    if let Some(f) = invoke {
        args.extend(["--invoke", f]);
    }
    let out = warpvisor(&args);
    assert_clean_error(&out, name);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn invoke_job_lines_must_be_objects_with_known_keys() {
    let module = tmp("one.wat");
    std::fs::write(&module, ONE).unwrap();
    for (i, (line, why)) in [
        ("[1, 2]", "expected a JSON object, found an array"),
        ("42", "expected a JSON object, found a number"),
        ("null", "expected a JSON object, found null"),
        (r#"{"arg": []}"#, "unknown key `arg`, expected `args`"),
        (r#"{"args": [], "stdin": "x"}"#, "unknown key `stdin`"),
        (r#"{"args": null}"#, "\"args\" must be an array, not null"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("invoke{i}.jobs");
        // A good line first: the error names line 2.
        let stderr = jobs_error(&module, Some("one"), &name, &format!("{{}}\n{line}\n"));
        assert!(
            stderr.contains(&format!("{name} line 2: {why}")),
            "{line}: {stderr}"
        );
    }
}

#[test]
fn wasi_job_lines_must_be_objects_with_known_keys() {
    let module = tmp("start.wat");
    std::fs::write(&module, r#"(module (func (export "_start")))"#).unwrap();
    for (i, (line, why)) in [
        ("[\"a\"]", "expected a JSON object, found an array"),
        ("7", "expected a JSON object, found a number"),
        (
            r#"{"arg": ["a"]}"#,
            "unknown key `arg`, expected one of `args`, `env`, `stdin`, `stdin_base64`",
        ),
        (r#"{"args": ["a"], "stdn": "x"}"#, "unknown key `stdn`"),
        (r#"{"env": {"K": "V"}, "env": {}}"#, "duplicate key `env`"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("wasi{i}.jobs");
        let stderr = jobs_error(
            &module,
            None,
            &name,
            &format!("{{\"args\": []}}\n\n{line}\n"),
        );
        assert!(
            stderr.contains(&format!("{name} line 3: {why}")),
            "{line}: {stderr}"
        );
    }
}

/// Runs warpvisor with standard output a pipe whose reader is already gone (`| head` that
/// stopped reading): it must stop quietly, neither panicking nor reporting an error.
fn assert_quiet_on_closed_stdout(args: &[&str]) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(common::warpvisor_bin())
        .args(args)
        .env("OPENCL_DYLIB_PATH", "/nonexistent/libOpenCL.so")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    assert_eq!(stderr, "", "{args:?}");
}

#[test]
fn a_closed_standard_output_stops_every_command_quietly() {
    let module = tmp("div4.wat");
    std::fs::write(&module, DIV).unwrap();
    let m = module.to_str().unwrap();
    let script = div_script("pipe.wast");
    let hello = example("hello.wasm");
    for args in [
        &["--help"][..],
        &["--version"],
        &["compile", "--help"],
        &["run", "--help"],
        &["compile", m],
        &["compile", m, "--emit", "opencl"],
        &[
            "run",
            m,
            "--backend",
            "wasmtime",
            "--invoke",
            "div",
            "--vms",
            "3",
            "--",
            "6",
            "3",
        ],
        &[
            "run",
            hello.to_str().unwrap(),
            "--backend",
            "wasmtime",
            "--",
            "a",
        ],
        &["devices"],
        &["wast", "--backend", "cpu", script.to_str().unwrap()],
    ] {
        assert_quiet_on_closed_stdout(args);
    }
}

#[test]
fn endless_module_and_jobs_files_stop_at_the_size_limit() {
    let start = std::time::Instant::now();
    let out = warpvisor(&["run", "/dev/zero", "--invoke", "f"]);
    assert_clean_error(&out, "module /dev/zero");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("module file /dev/zero is larger than the limit of 1073741824 bytes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let module = tmp("one2.wat");
    std::fs::write(&module, ONE).unwrap();
    let out = warpvisor(&[
        "run",
        module.to_str().unwrap(),
        "--backend",
        "wasmtime",
        "--invoke",
        "one",
        "--jobs",
        "/dev/zero",
    ]);
    assert_clean_error(&out, "jobs /dev/zero");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("jobs file /dev/zero is larger than the limit of 1073741824 bytes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn absurd_flag_values_are_one_line_errors() {
    let module = tmp("one3.wat");
    std::fs::write(&module, ONE).unwrap();
    let m = module.to_str().unwrap();
    for (flag, value, why) in [
        ("--vms", "0", "0 is not in 1..=1048576"),
        ("--vms", "1048577", "is not in 1..=1048576"),
        ("--vms", "4294967295", "is not in 1..=1048576"),
        ("--max-memory", "65537", "is not in 0..=65536"),
        ("--max-memory", "4294967295", "is not in 0..=65536"),
        ("--stack-words", "4294967295", "is not in 0..=16777216"),
        (
            "--max-table-elements",
            "4294967295",
            "is not in 0..=10000000",
        ),
        ("--workers", "0", "is not in 1..=1024"),
        ("--workers", "100000000", "is not in 1..=1024"),
        ("--timeout", "1e18", "at most 31536000 seconds"),
        ("--timeout", "1e300", "at most 31536000 seconds"),
        ("--interleave", "3", "interleave must be 0, 4 or 8"),
        ("--opt-level", "4", "is not in 0..=3"),
        (
            "--dirty-pages",
            "mmu",
            "is not a dirty-page mode: use `auto` or `marks`",
        ),
    ] {
        let out = warpvisor(&[
            "run",
            m,
            "--backend",
            "wasmtime",
            "--invoke",
            "one",
            flag,
            value,
        ]);
        let what = format!("{flag} {value}");
        assert_clean_error(&out, &what);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains(why),
            "{what}: {stderr}"
        );
    }
}

/// A spec script `name` in the temporary folder: [`DIV`] and one assertion on it.
fn div_script(name: &str) -> PathBuf {
    let script = tmp(name);
    std::fs::write(
        &script,
        format!(
            "{DIV}\n(assert_return (invoke \"div\" (i32.const 6) (i32.const 3)) (i32.const 2))\n"
        ),
    )
    .unwrap();
    script
}

#[test]
fn progress_lines_come_on_stderr_when_asked_for() {
    let script = div_script("progress.wast");
    let run = |progress: bool| {
        let mut cmd = Command::new(common::warpvisor_bin());
        cmd.args(["wast", "--backend", "cpu"]).arg(&script);
        if progress {
            cmd.arg("--progress");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(
        run(true),
        "[1/1] progress.wast: 2 passed, 0 failed, 0 skipped\n"
    );
    // Not a terminal and not asked for: nothing.
    assert_eq!(run(false), "");
}

/// `--stdin FILE` (and `-` for warpvisor's own standard input) gives every VM those bytes,
/// as a job line's `stdin` would; combined with `--jobs` it is refused.
#[test]
fn stdin_flag_feeds_every_vm() {
    let wc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../guests/wasm/rust-wc.wasm");
    let wc = wc.to_str().unwrap();
    let text = "one two three\nfour five\n";
    let input = tmp("stdin.txt");
    std::fs::write(&input, text).unwrap();
    let jobs = tmp("stdin.jobs");
    std::fs::write(&jobs, format!("{{\"args\": [], \"stdin\": {text:?}}}\n")).unwrap();
    let reference = warpvisor(&[
        "run",
        wc,
        "--backend",
        "wasmtime",
        "--jobs",
        jobs.to_str().unwrap(),
    ]);
    assert!(reference.status.success(), "{reference:?}");
    let reference = String::from_utf8(reference.stdout).unwrap();
    // The program's own output, as the job line's result carries it.
    let expect_in_line = |raw: &str| {
        assert!(raw.contains("bytes=24"), "{raw}");
        assert!(
            reference.contains(&raw.replace('\n', "\\n")),
            "{raw} vs {reference}"
        );
    };
    // The flag only fills the jobs, which every backend runs alike (wasmtime: no kernel to build).
    let from_file = warpvisor(&[
        "run",
        wc,
        "--backend",
        "wasmtime",
        "--vms",
        "2",
        "--stdin",
        input.to_str().unwrap(),
    ]);
    assert!(from_file.status.success(), "{from_file:?}");
    assert!(String::from_utf8_lossy(&from_file.stderr).contains("2 exited 0"));
    expect_in_line(&String::from_utf8(from_file.stdout).unwrap());
    let mut piped = Command::new(common::warpvisor_bin())
        .args(["run", wc, "--backend", "wasmtime", "--stdin", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut pipe = piped.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    let piped = piped.wait_with_output().unwrap();
    assert!(piped.status.success(), "{piped:?}");
    expect_in_line(&String::from_utf8(piped.stdout).unwrap());
    let i = input.to_str().unwrap();
    assert_clean_error(
        &warpvisor(&["run", wc, "--stdin", i, "--jobs", jobs.to_str().unwrap()]),
        "--stdin with --jobs",
    );
    assert_clean_error(
        &warpvisor(&["run", wc, "--stdin", "/nonexistent-input"]),
        "missing --stdin file",
    );
}

/// `compile --emit ptx`: the PTX NVRTC makes of the kernel (no GPU needed), which the PTX
/// front end reads back.
#[test]
fn compile_emits_the_ptx_nvrtc_makes() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    let module = tmp("div-ptx.wat");
    std::fs::write(&module, DIV).unwrap();
    let ptx = tmp("div.ptx");
    let _ = std::fs::remove_file(&ptx);
    let out = warpvisor(&[
        "compile",
        module.to_str().unwrap(),
        "--emit",
        "ptx",
        "-o",
        ptx.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(
        text.contains(".target sm_90"),
        "{}",
        &text[..text.len().min(400)]
    );
    let parsed = warpvisor::ptx::PtxModule::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let entries: Vec<&str> = parsed
        .functions
        .iter()
        .filter(|f| f.is_entry)
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(entries, ["wv_kernel", "wv_reset"]);
}

/// `warpvisor profile` writes a profile that `run --profile` and `compile --profile` accept;
/// one of another module, or not a profile at all, is a one-line error.
#[test]
fn profiles_are_recorded_used_and_refused_when_they_do_not_fit() {
    let fib = example("fib.wat");
    let fib = fib.to_str().unwrap();
    let profile = tmp("fib.profile.json");
    let profile_arg = profile.to_str().unwrap();
    let out = warpvisor(&[
        "profile",
        fib,
        "--invoke",
        "fib",
        "--vms",
        "2",
        "-o",
        profile_arg,
        "--",
        "10",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&profile).unwrap();
    // fib(10) makes 176 recursive calls over its two call sites, in each of the 2 jobs.
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let calls: u64 = json["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(calls, 2 * 176, "{text}");
    for backend in ["cpu", "wasmtime"] {
        let out = warpvisor(&[
            "run",
            fib,
            "--invoke",
            "fib",
            "--backend",
            backend,
            "--profile",
            profile_arg,
            "--",
            "10",
        ]);
        if backend == "cpu" {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("[55]"), "{stdout}");
        } else {
            assert_clean_error(&out, "--profile on wasmtime");
        }
    }
    let out = warpvisor(&["compile", fib, "--profile", profile_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let div = tmp("div.wat");
    std::fs::write(&div, DIV).unwrap();
    let out = warpvisor(&["compile", div.to_str().unwrap(), "--profile", profile_arg]);
    assert_clean_error(&out, "a profile of another module");
    assert!(String::from_utf8_lossy(&out.stderr).contains("another module"));
    let junk = tmp("junk.profile.json");
    std::fs::write(&junk, "[1, 2").unwrap();
    let out = warpvisor(&["compile", fib, "--profile", junk.to_str().unwrap()]);
    assert_clean_error(&out, "a file that is not a profile");
}
