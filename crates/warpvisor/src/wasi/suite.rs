//! The WASI test-suite runner (`warpvisor wasi-suite`): every `*.wasm` test of a folder with its
//! JSON specification (args, env, root, exit_code, stdout; see the suite's specification.md),
//! run through warpvisor on one VM.

use std::path::{Path, PathBuf};

use super::program::WasiRunConfig;
use super::WasiJob;
use crate::runner::Executor;
use crate::vmm::FleetConfig;
use crate::work_queue;

/// How one test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestOutcome {
    /// Passed.
    Passed,
    /// Failed, with the reason.
    Failed(String),
    /// Not run, with the reason.
    Skipped(String),
}

/// One test's result.
#[derive(Debug, Clone)]
pub struct TestReport {
    /// `language/name`.
    pub name: String,
    /// Outcome.
    pub outcome: TestOutcome,
}

/// Every `.wasm` test below `dir`, sorted.
pub fn find_tests(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && p.extension().is_none_or(|x| x != "dir") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "wasm") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        let ty = e.file_type()?;
        if ty.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path())?, &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
            let mut perm = std::fs::metadata(&target)?.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&target, perm)?;
        }
    }
    Ok(())
}

/// Runs the test `wasm` against its specification.
pub fn run_test(wasm: &Path, executor: &Executor, scratch: &Path) -> TestOutcome {
    let spec_path = wasm.with_extension("json");
    let spec: serde_json::Value = match std::fs::read_to_string(&spec_path) {
        Ok(t) => match serde_json::from_str(&t) {
            Ok(v) => v,
            Err(e) => return TestOutcome::Failed(format!("bad specification: {e}")),
        },
        Err(_) => serde_json::json!({}),
    };
    if spec.get("operations").is_some() || spec.get("proposals").is_some() {
        return TestOutcome::Skipped(
            "operation-based specifications (sockets, http) are not supported".into(),
        );
    }
    let mut job = WasiJob::default();
    if let Some(args) = spec.get("args").and_then(|a| a.as_array()) {
        job.args = args
            .iter()
            .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
            .collect();
    }
    if let Some(env) = spec.get("env").and_then(|e| e.as_object()) {
        job.env = env
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )
            })
            .collect();
    }
    let test_dir = wasm.parent().unwrap_or(Path::new("."));
    let mut preopens = Vec::new();
    let _ = std::fs::remove_dir_all(scratch);
    if let Some(root) = spec.get("root").and_then(|r| r.as_str()) {
        // A private copy: tests write into their directory, and the suite is read-only.
        if let Err(e) = copy_dir(&test_dir.join(root), scratch) {
            return TestOutcome::Failed(format!("copying {root}: {e}"));
        }
        preopens.push((scratch.to_path_buf(), "/".to_string()));
    }
    let bytes = match std::fs::read(wasm) {
        Ok(b) => b,
        Err(e) => return TestOutcome::Failed(e.to_string()),
    };
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: 1,
            max_memory_pages: 1024,
            ..FleetConfig::default()
        },
        program_name: wasm
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        preopens,
        allow_unknown_imports: false,
    };
    let result = match executor.run_wasi(&bytes, &config, &[job], &|_, _| {}) {
        Ok((mut r, _)) if !r.is_empty() => r.remove(0),
        Ok(_) => return TestOutcome::Failed("no result".into()),
        Err(e) => return TestOutcome::Failed(format!("run: {e}")),
    };
    let _ = std::fs::remove_dir_all(scratch);
    let expected_code = spec.get("exit_code").and_then(|c| c.as_u64()).unwrap_or(0);
    if result.exit_code as u64 != expected_code {
        let stderr = String::from_utf8_lossy(&result.stderr);
        return TestOutcome::Failed(format!(
            "exit code {} (trap {:?}), expected {expected_code}; stderr: {}",
            result.exit_code,
            result.trap,
            stderr.lines().take(3).collect::<Vec<_>>().join(" | ")
        ));
    }
    if let Some(out) = spec.get("stdout").and_then(|s| s.as_str()) {
        if result.stdout != out.as_bytes() {
            return TestOutcome::Failed(format!(
                "stdout {:?}, expected {out:?}",
                String::from_utf8_lossy(&result.stdout)
            ));
        }
    }
    TestOutcome::Passed
}

/// Runs every test below `dir`, as many at once as the machine has cores (building their
/// kernels is most of the time); `scratch` is a folder the runner may fill and remove (each
/// test gets a folder of its own in it). Reports come in the order of the tests.
pub fn run_suite(dir: &Path, executor: &Executor, scratch: &Path) -> Vec<TestReport> {
    run_suite_reporting(dir, executor, scratch, &|_| {})
}

/// [`run_suite`], calling `on_done` with each report as its test finishes (in finishing order,
/// from the worker threads): progress for a long run.
pub fn run_suite_reporting(
    dir: &Path,
    executor: &Executor,
    scratch: &Path,
    on_done: &(dyn Fn(&TestReport) + Sync),
) -> Vec<TestReport> {
    let tests = find_tests(dir);
    let reports = work_queue::map_indexed(tests.len(), work_queue::default_workers(), |i| {
        let t = &tests[i];
        let name = t
            .strip_prefix(dir)
            .unwrap_or(t)
            .to_string_lossy()
            .into_owned();
        let outcome = run_test(t, executor, &scratch.join(i.to_string()));
        let report = TestReport { name, outcome };
        on_done(&report);
        report
    });
    let _ = std::fs::remove_dir_all(scratch);
    reports
}
