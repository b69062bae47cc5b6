//! The microbenchmarks of `vectorvisor.md` §4.2.1, run on every warpvisor backend:
//!
//! - [`memcopy`]: a WebAssembly copy loop over copy widths and unrolls, with interleave 4
//!   and 8 (and 0 for reference), as a fraction of the device's own copy bandwidth;
//! - [`transfer`]: hypercall transfer bandwidth, each VM echoing 4 KiB to 256 KiB through
//!   `fd_read` and `fd_write`;
//! - [`slow_call`]: what one call through the trampoline costs over a plain call, which turns
//!   the benchmarks' slow-call counts into an estimate of continuation save/restore time;
//! - [`wasm2c`]: the `cpu` kernels against wabt's wasm2c built with the same compiler and
//!   flags, on recursive calls, indirect calls and a memory-bound loop.

pub mod memcopy;
pub mod slow_call;
pub mod transfer;
pub mod wasm2c;

use std::sync::Arc;

use serde::Serialize;
use warpvisor::codegen::MemoryChecks;
use warpvisor::vmm::{Outcome, Program, Value};

use crate::platform::KernelPlatform;

/// Every microbenchmark's rows.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MicroResults {
    /// Cost of a slow call, per backend.
    pub slow_call: Vec<slow_call::SlowCallResult>,
    /// The device's own copy bandwidth, per backend.
    pub peak_copy: Vec<memcopy::PeakCopy>,
    /// Memcopy bandwidth per backend, interleave, width and unroll.
    pub memcopy: Vec<memcopy::MemcopyResult>,
    /// Hypercall transfer bandwidth per backend and size.
    pub transfer: Vec<transfer::TransferResult>,
    /// `cpu` kernels against wasm2c, per program.
    pub wasm2c: Vec<wasm2c::Wasm2cResult>,
    /// Measurements that failed, with why.
    pub errors: Vec<String>,
}

/// `wat` built on `k`'s backend with interleave `interleave`.
fn build(k: &KernelPlatform, wat: &str, interleave: u32) -> Result<Arc<Program>, String> {
    let mut options = k.kernel.clone();
    options.interleave = interleave;
    if options.memory_checks == MemoryChecks::Guard {
        // Guard regions need contiguous memories: other interleaves check explicitly.
        options.memory_checks = MemoryChecks::default_for(&options);
    }
    Program::compile(wat.as_bytes(), &options, k.backend.as_ref())
        .map(Arc::new)
        .map_err(|e| format!("{e:#}"))
}

/// Checks that every VM returned `want`.
fn expect_all(what: &str, outcomes: &[Outcome], want: Value) -> Result<(), String> {
    match outcomes
        .iter()
        .position(|o| *o != Outcome::Returned(vec![want]))
    {
        None => Ok(()),
        Some(vm) => Err(format!(
            "{what}: VM {vm} gave {:?}, expected {want:?}",
            outcomes[vm]
        )),
    }
}

/// Runs the microbenchmarks on every kernel platform: the slow-call cost always (the
/// benchmarks' continuation estimates need it), memcopy and transfers when `settings.micro`.
/// A failure is recorded in `errors` and the other measurements go on.
pub fn run_all(
    settings: &crate::settings::Settings,
    kernels: &[KernelPlatform],
    progress: &dyn Fn(&str),
) -> MicroResults {
    let mut m = MicroResults::default();
    let vms = settings.micro_vms.max(1);
    // Work per measurement: about 20 M slow calls (5 M quick), 1 GB copied (100 MB quick).
    let scale: u64 = if settings.quick { 1 } else { 4 };
    for k in kernels {
        let key = k.platform.key();
        progress(&format!("microbenchmarks on {key}"));
        let reps = (5_000_000 * scale / (100 * settings.vms.max(1) as u64)).clamp(1, 1 << 20);
        match slow_call::run(k, settings.vms.max(1), reps as u32) {
            Ok(r) => {
                progress(&format!(
                    "  slow call: {:.2} ns over a plain call ({:.3} ns)",
                    r.ns_per_slow_call, r.ns_per_plain_call
                ));
                m.slow_call.push(r);
            }
            Err(e) => m.errors.push(format!("slow call on {key}: {e}")),
        }
        if !settings.micro {
            continue;
        }
        if k.kernel.dialect == warpvisor::codegen::Dialect::C {
            match wasm2c::run(k, settings.quick) {
                Ok(rows) => {
                    for r in &rows {
                        progress(&format!(
                            "  wasm2c, {}: warpvisor {:.3} s, wasm2c {:.3} s ({:.2}x)",
                            r.program, r.warpvisor_s, r.wasm2c_s, r.ratio
                        ));
                    }
                    m.wasm2c.extend(rows);
                }
                Err(e) => m.errors.push(format!("wasm2c comparison on {key}: {e}")),
            }
        }
        let peak = match memcopy::peak(k, vms) {
            Ok(p) => p,
            Err(e) => {
                m.errors.push(format!("device copy on {key}: {e}"));
                continue;
            }
        };
        progress(&format!("  device copy: {:.2} GB/s", peak.gb_per_s));
        let copy_reps = ((100 * scale) / vms as u64).clamp(1, 64) as u32;
        for interleave in memcopy::INTERLEAVES {
            match memcopy::run(k, interleave, vms, copy_reps, &peak) {
                Ok(rows) => {
                    let best = rows.iter().map(|r| r.gb_per_s).fold(0.0, f64::max);
                    progress(&format!(
                        "  memcopy, interleave {interleave}: best {best:.2} GB/s"
                    ));
                    m.memcopy.extend(rows);
                }
                Err(e) => m
                    .errors
                    .push(format!("memcopy on {key}, interleave {interleave}: {e}")),
            }
        }
        m.peak_copy.push(peak);
        match transfer::run(k, vms, if settings.quick { 3 } else { 10 }) {
            Ok(rows) => {
                if let Some(last) = rows.last() {
                    progress(&format!(
                        "  transfers: {:.3} GB/s at {} KiB per VM",
                        last.gb_per_s,
                        last.bytes_per_vm >> 10
                    ));
                }
                m.transfer.extend(rows);
            }
            Err(e) => m.errors.push(format!("transfers on {key}: {e}")),
        }
    }
    for e in &m.errors {
        progress(&format!("  FAILED: {e}"));
    }
    m
}
