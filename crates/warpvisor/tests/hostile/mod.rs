//! Shared by the hostile-guest tests: the guests (WAT with a shared prelude), sandboxes on the
//! host filesystem, and runs of one module on a fleet backend and on wasmtime.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use warpvisor::backend::wasmtime::{WasiSetup, WasmtimeBackend, WasmtimeConfig};
use warpvisor::codegen::KernelOptions;
use warpvisor::vmm::{FleetConfig, Program};
use warpvisor::wasi::program::{run_jobs, JobResult, WasiRunConfig};
use warpvisor::wasi::WasiJob;

use super::common;

/// Guest memory limit of every run (pages).
const MAX_PAGES: u32 = 64;

/// The hostile guest `name` (`tests/hostile/NAME.wat` with the prelude), assembled.
pub fn guest(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let read =
        |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    let text = read(&format!("{name}.wat")).replace(";; PRELUDE", &read("prelude.wat"));
    wat::parse_str(&text).unwrap_or_else(|e| panic!("{name}.wat: {e}"))
}

/// A job whose stdin selects case `case`.
pub fn case(case: u8) -> WasiJob {
    WasiJob {
        stdin: vec![case].into(),
        ..WasiJob::default()
    }
}

/// A host folder for one run: `outside.txt` (which no guest may touch) beside `sandbox/`
/// (the guest's `--dir`, holding `d/` and `inside.txt`), and a FIFO in each.
pub struct Sandbox {
    /// The folder holding both.
    pub root: PathBuf,
}

impl Sandbox {
    /// A fresh sandbox.
    pub fn new() -> Sandbox {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "warpvisor-hostile-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sandbox/d")).unwrap();
        std::fs::write(root.join("outside.txt"), "secret").unwrap();
        std::fs::write(root.join("sandbox/inside.txt"), "inside").unwrap();
        for fifo in ["fifo", "sandbox/fifo"] {
            let ok = std::process::Command::new("mkfifo")
                .arg(root.join(fifo))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "mkfifo {fifo}");
        }
        let s = Sandbox { root };
        // Times a guest might try to change: set to a known past value.
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(s.outside())
            .and_then(|f| f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t)))
            .unwrap();
        s
    }

    /// The guest's directory.
    pub fn dir(&self) -> PathBuf {
        self.root.join("sandbox")
    }

    /// The file outside the guest's directory.
    pub fn outside(&self) -> PathBuf {
        self.root.join("outside.txt")
    }

    /// The preopen list giving the guest `sandbox/` as `/sandbox` (fd 3).
    pub fn preopens(&self) -> Vec<(PathBuf, String)> {
        vec![(self.dir(), "/sandbox".into())]
    }

    /// The outside file's bytes, read without changing its access time (`O_NOATIME`).
    fn outside_contents(&self) -> Vec<u8> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        const O_NOATIME: i32 = 0o1000000;
        let mut bytes = Vec::new();
        std::fs::File::options()
            .read(true)
            .custom_flags(O_NOATIME)
            .open(self.outside())
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .unwrap();
        bytes
    }

    /// Everything under the root, one line per entry: path, kind, size or link target.
    pub fn listing(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out);
        out.sort();
        out
    }

    /// Panics unless nothing outside the guest's directory changed and the directory itself
    /// still exists.
    pub fn assert_contained(&self, what: &str) {
        use std::os::unix::fs::MetadataExt;
        assert!(
            self.dir().is_dir(),
            "{what}: the preopened directory was removed"
        );
        let m = std::fs::symlink_metadata(self.outside()).unwrap();
        assert_eq!(
            self.outside_contents(),
            b"secret",
            "{what}: outside.txt changed"
        );
        assert_eq!(
            m.mtime(),
            1_000_000_000,
            "{what}: outside.txt's mtime changed"
        );
        assert_eq!(
            m.atime(),
            1_000_000_000,
            "{what}: outside.txt's atime changed"
        );
        let mut top: Vec<String> = std::fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(
            top,
            ["fifo", "outside.txt", "sandbox"],
            "{what}: files appeared outside"
        );
        assert!(!Path::new("/pwned").exists(), "{what}: /pwned was created");
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.file_type().is_symlink() {
            out.push(format!(
                "{rel} -> {}",
                std::fs::read_link(&p).unwrap().display()
            ));
        } else if m.is_dir() {
            out.push(format!("{rel}/"));
            walk(root, &p, out);
        } else {
            out.push(format!("{rel} ({} bytes)", m.len()));
        }
    }
}

/// Runs `jobs` of `wasm` on a fleet of the named backend (`cpu`, `opencl`).
pub fn on_fleet(
    backend: &str,
    wasm: &[u8],
    jobs: &[WasiJob],
    preopens: Vec<(PathBuf, String)>,
) -> Vec<JobResult> {
    on_fleet_with_timeout(backend, wasm, jobs, preopens, None)
}

/// [`on_fleet`] with the fleet's wall-clock limit.
pub fn on_fleet_with_timeout(
    backend: &str,
    wasm: &[u8],
    jobs: &[WasiJob],
    preopens: Vec<(PathBuf, String)>,
    timeout: Option<std::time::Duration>,
) -> Vec<JobResult> {
    let kernel = KernelOptions {
        dialect: common::dialect(backend),
        interleave: if backend == "opencl" { 4 } else { 0 },
        opt_level: if backend == "opencl" { 0 } else { 1 },
        ..KernelOptions::default()
    };
    let program = Program::compile(wasm, &kernel, common::backend(backend).as_ref())
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: jobs.len() as u32,
            max_memory_pages: MAX_PAGES,
            timeout,
            ..FleetConfig::default()
        },
        program_name: "hostile.wasm".into(),
        preopens,
        allow_unknown_imports: false,
    };
    run_jobs(Arc::new(program), &config, jobs).unwrap_or_else(|e| panic!("{backend}: {e}"))
}

/// Runs `jobs` of `wasm` on wasmtime (the oracle), one instance per job.
pub fn on_wasmtime(
    wasm: &[u8],
    jobs: &[WasiJob],
    preopens: Vec<(PathBuf, String)>,
) -> Vec<JobResult> {
    let backend = WasmtimeBackend::new(WasmtimeConfig::default()).unwrap();
    let setup = WasiSetup {
        program_name: "hostile.wasm".into(),
        preopens,
        allow_unknown_imports: false,
        max_memory_pages: MAX_PAGES,
    };
    backend.run_wasi(wasm, &setup, jobs).unwrap().0
}

/// Runs `jobs` on `backend` (a fleet backend or `wasmtime`).
pub fn on(
    backend: &str,
    wasm: &[u8],
    jobs: &[WasiJob],
    preopens: Vec<(PathBuf, String)>,
) -> Vec<JobResult> {
    match backend {
        "wasmtime" => on_wasmtime(wasm, jobs, preopens),
        _ => on_fleet(backend, wasm, jobs, preopens),
    }
}

/// A result without its stdout bytes when they are long (for assertion messages).
pub fn brief(r: &JobResult) -> String {
    format!(
        "exit {} trap {:?} stdout {:?}",
        r.exit_code,
        r.trap,
        &r.stdout[..r.stdout.len().min(64)]
    )
}
