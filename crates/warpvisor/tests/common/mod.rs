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
