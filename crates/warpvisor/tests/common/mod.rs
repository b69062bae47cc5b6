//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use warpvisor::backend::cpu::CpuBackend;
use warpvisor::backend::Backend;

/// The `cpu` backend, shared by the tests of one binary (one worker pool).
pub fn cpu() -> Arc<dyn Backend> {
    static CPU: OnceLock<Arc<dyn Backend>> = OnceLock::new();
    CPU.get_or_init(|| {
        Arc::new(CpuBackend::new(None).expect("a C compiler is needed for the cpu backend"))
    })
    .clone()
}

/// The `opencl` backend (PoCL in CI). OpenCL being unavailable fails the test: CI installs
/// PoCL, so a missing runtime is a broken set-up, not a reason to pass.
pub fn opencl() -> Arc<dyn Backend> {
    static CL: OnceLock<Arc<dyn Backend>> = OnceLock::new();
    CL.get_or_init(|| {
        Arc::new(
            warpvisor::backend::opencl::OpenClBackend::new(None).unwrap_or_else(|e| {
                panic!("OpenCL is needed for this test (apt-get install pocl-opencl-icd): {e}")
            }),
        )
    })
    .clone()
}

/// A backend by name: `cpu` or `opencl`.
pub fn backend(name: &str) -> Arc<dyn Backend> {
    match name {
        "opencl" => opencl(),
        _ => cpu(),
    }
}

/// The kernel dialect a backend compiles.
pub fn dialect(name: &str) -> warpvisor::codegen::Dialect {
    match name {
        "opencl" => warpvisor::codegen::Dialect::OpenCl,
        _ => warpvisor::codegen::Dialect::C,
    }
}

/// The shared test suites: `$WARPVISOR_TESTSUITE`, else `shared/testsuite` beside the repo.
pub fn testsuite() -> PathBuf {
    if let Some(d) = std::env::var_os("WARPVISOR_TESTSUITE") {
        return PathBuf::from(d);
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    repo.join("../shared/testsuite")
}

/// The warpvisor binary built for these tests.
pub fn warpvisor_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_warpvisor"))
}
