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
    let out = warpvisor(&[
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
    ]);
    assert_clean_error(&out, "fleet too big");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("at most") && stderr.contains("VMs fit"),
        "{stderr}"
    );
}
