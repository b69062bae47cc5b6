//! The oracle: a WASI program run by warpvisor's `wasmtime` backend (wasmtime with
//! wasmtime-wasi's preview1), one instance per job, with in-memory stdio.

use warpvisor::backend::wasmtime::{WasiSetup, WasmtimeBackend, WasmtimeConfig};
use warpvisor::wasi::program::JobResult;
use warpvisor::wasi::WasiJob;

/// Runs every job of `wasm` on wasmtime; `program_name` is `argv[0]`.
pub fn run(wasm: &[u8], program_name: &str, jobs: &[WasiJob]) -> Vec<JobResult> {
    let backend = WasmtimeBackend::new(WasmtimeConfig::default()).expect("a wasmtime engine");
    let setup = WasiSetup {
        program_name: program_name.into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
        max_memory_pages: 512,
    };
    backend
        .run_wasi(wasm, &setup, jobs)
        .expect("wasmtime runs the module")
        .0
}
