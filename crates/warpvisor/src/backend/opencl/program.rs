//! Building OpenCL programs, with an on-disk cache of program binaries keyed by source,
//! device, driver and build options, and build failures reported with the offending lines.

use opencl3::context::Context;
use opencl3::program::Program;

use super::DeviceInfo;
use crate::backend::cache;
use crate::backend::{signals, BackendError};
use crate::codegen::KernelOptions;

/// Build options: exact float division and square root; optimisation per `opt_level`.
/// OpenCL C 1.2, or 3.0 for synchronous imports (their atomics at the scope of every SVM
/// device, `wv_status_publish`). With `watch_writes` stores mark no dirty pages (the fleet's
/// write watch finds them, `watched.rs`).
pub fn build_options(options: &KernelOptions, watch_writes: bool) -> String {
    let std = if options.synchronous_imports() {
        "CL3.0"
    } else {
        "CL1.2"
    };
    let mut o = format!("-cl-std={std} -cl-fp32-correctly-rounded-divide-sqrt");
    if options.opt_level == 0 {
        o.push_str(" -cl-opt-disable");
    }
    if watch_writes {
        o.push_str(" -DWV_DIRTY_BY_MMU=1");
    }
    o
}

/// One build at a time: PoCL's compiler cache races between concurrent builds in a process
/// (temporary files vanish under a parallel build), and builds did not overlap anyway.
static BUILD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Builds `code` for the context's device, reusing a cached binary when one exists.
pub fn build(
    context: &Context,
    device: &DeviceInfo,
    code: &str,
    options: &KernelOptions,
    watch_writes: bool,
) -> Result<Program, BackendError> {
    let _one_at_a_time = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let opts = build_options(options, watch_writes);
    let key = cache::key(&[
        env!("CARGO_PKG_VERSION").as_bytes(),
        device.platform.as_bytes(),
        device.name.as_bytes(),
        device.driver.as_bytes(),
        opts.as_bytes(),
        code.as_bytes(),
    ]);
    let dir = cache::cache_dir().join("opencl");
    let path = dir.join(format!("{key}.bin"));
    if let Ok(binary) = std::fs::read(&path) {
        let load = || Program::create_and_build_from_binary(context, &[&binary], &opts);
        if let Ok(p) = signals::while_compiling(load) {
            return Ok(p);
        }
        // A stale or foreign binary: rebuild from source below.
    }
    // PoCL's compiler registers signal handlers of its own (`backend/signals.rs` keeps guard
    // faults away from them). A signal that still reaches one during a build (a wasmtime
    // trap on another thread, say) deletes the build's temporary files ("unable to rename
    // temporary"): a failure that says nothing about the kernel, so the build is retried.
    let build = || Program::create_and_build_from_source(context, code, &opts);
    let mut attempt = signals::while_compiling(build);
    for _ in 0..3 {
        match &attempt {
            Err(log) if log.contains("unable to rename temporary") => {
                attempt = signals::while_compiling(build);
            }
            _ => break,
        }
    }
    let program = attempt.map_err(|log| {
        let lines = crate::backend::offending_lines(&log, code);
        BackendError::Compile {
            compiler: format!("OpenCL on {} ({})", device.name, device.platform),
            log: format!("{}\n{lines}", log.chars().take(4000).collect::<String>()),
        }
    })?;
    if let Ok(binaries) = program.get_binaries() {
        if let Some(b) = binaries.first().filter(|b| !b.is_empty()) {
            // The cache is an optimisation: failing to write it is not an error.
            let _ = std::fs::create_dir_all(&dir).and_then(|_| cache::write_atomically(&path, b));
        }
    }
    Ok(program)
}
