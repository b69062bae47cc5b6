//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod riscv;

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

/// warpvisor's CUDA driver for the CPU (`libwarpvisor_cuda_driver.so`), built beside the test
/// binaries by `cargo test --workspace` (or `cargo build -p warpvisor-cuda-driver`).
pub fn cuda_driver_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let profile = deps.parent()?;
    // The one `cargo test` just built (in deps/) first: a `cargo build` copy in the profile
    // folder may be older.
    [deps, profile]
        .iter()
        .map(|d| d.join("libwarpvisor_cuda_driver.so"))
        .find(|p| p.exists())
}

/// Whether the `cuda` backend can run here through warpvisor's CPU driver (the driver library
/// and NVRTC found). Where CI requires them (`WARPVISOR_REQUIRE_NVRTC`) their absence fails
/// the test; elsewhere the test prints `NOT RUN` and returns.
pub fn cuda_on_cpu_here() -> bool {
    let required = std::env::var_os("WARPVISOR_REQUIRE_NVRTC").is_some();
    let why = match (cuda_driver_library(), warpvisor::backend::cuda::nvrtc_status()) {
        (Some(_), Ok(_)) => return true,
        (None, _) => "the CUDA driver for the CPU is not built (cargo build -p warpvisor-cuda-driver; cargo test --workspace builds it)".to_string(),
        (_, Err(e)) => e.to_string(),
    };
    assert!(!required, "WARPVISOR_REQUIRE_NVRTC is set but {why}");
    eprintln!("NOT RUN: {why}");
    false
}

/// The `cuda` backend on warpvisor's CUDA driver for the CPU (check [`cuda_on_cpu_here`]
/// first).
pub fn cuda() -> Arc<dyn Backend> {
    static CUDA: OnceLock<Arc<dyn Backend>> = OnceLock::new();
    CUDA.get_or_init(|| {
        let lib = cuda_driver_library().expect("the CUDA driver for the CPU is built");
        warpvisor::backend::cuda::use_driver(&lib).unwrap_or_else(|e| panic!("{e}"));
        Arc::new(
            warpvisor::backend::cuda::CudaBackend::new(None)
                .unwrap_or_else(|e| panic!("the cuda backend on the CPU driver: {e}")),
        )
    })
    .clone()
}

/// A backend by name: `cpu`, `opencl`, or `cuda` (on warpvisor's CPU driver).
pub fn backend(name: &str) -> Arc<dyn Backend> {
    match name {
        "opencl" => opencl(),
        "cuda" => cuda(),
        _ => cpu(),
    }
}

/// The kernel dialect a backend compiles.
pub fn dialect(name: &str) -> warpvisor::codegen::Dialect {
    match name {
        "opencl" => warpvisor::codegen::Dialect::OpenCl,
        "cuda" => warpvisor::codegen::Dialect::Cuda,
        _ => warpvisor::codegen::Dialect::C,
    }
}

/// A fleet of `wat`'s module on backend `name` (its dialect, the given interleave, other kernel
/// options at their defaults) with `config`, without imports.
pub fn fleet(
    name: &str,
    wat: &str,
    interleave: u32,
    config: warpvisor::vmm::FleetConfig,
) -> warpvisor::vmm::Fleet {
    let options = warpvisor::codegen::KernelOptions {
        dialect: dialect(name),
        interleave,
        ..Default::default()
    };
    let program =
        warpvisor::vmm::Program::compile(wat.as_bytes(), &options, backend(name).as_ref()).unwrap();
    warpvisor::vmm::Fleet::new(Arc::new(program), config, Default::default()).unwrap()
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
