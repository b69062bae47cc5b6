//! What continuations cost, measured rather than estimated: the same batch of a benchmark on
//! `cpu` with direct calls and with continuations (the kernels every GPU backend runs), both
//! with explicit memory checks and one kernel, so that the call mode is the only difference
//! between the two runs (`--compare-calls`).

use std::time::Duration;

use serde::Serialize;
use warpvisor::backend::Backend;
use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::wasi::program::JobResult;
use warpvisor::wasi::WasiJob;
use warpvisor_workloads::Workload;

use crate::{suite, validation};

/// Timed runs of the batch in each mode (after one untimed run); the fastest counts.
const REPEATS: usize = 3;

/// One call mode's run of the batch.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ModeRun {
    /// Calls through the trampoline or to the host, per request.
    pub slow_calls_per_request: f64,
    /// Live values frames saved, per request.
    pub saved_values_per_request: f64,
    /// Kernel execution time of the batch, the fastest of the timed runs.
    pub execute_seconds: f64,
}

/// One batch in both modes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CallModes {
    /// Requests in the batch.
    pub requests: usize,
    /// With direct calls: imports served while the kernel waits, native recursion.
    pub direct: ModeRun,
    /// With continuations.
    pub continuations: ModeRun,
    /// The share of the continuation run's execution that direct calls save:
    /// `1 - direct / continuations` (negative when direct calls ran slower).
    pub slow_call_share: f64,
}

/// Runs `jobs` (one batch: at most `vms` of them) on `backend` in both call modes and checks
/// both modes' replies against the first of `reference`.
pub fn measure(
    backend: &dyn Backend,
    base: &KernelOptions,
    w: &Workload,
    wasm: &[u8],
    vms: u32,
    jobs: &[WasiJob],
    reference: &[JobResult],
) -> Result<CallModes, String> {
    let reference = &reference[..jobs.len().min(reference.len())];
    let run = |calls: CallMode| -> Result<ModeRun, String> {
        let options = KernelOptions {
            calls,
            memory_checks: MemoryChecks::Explicit,
            partition_ops: 0,
            ..base.clone()
        };
        let mut fleet = suite::fleet(w, wasm, &options, backend, vms)?;
        let replies = fleet.run_batch(jobs).map_err(|e| e.to_string())?;
        validation::compare(reference, &replies)
            .map_err(|e| format!("with {} calls: {e}", calls.name()))?;
        let mut fastest = Duration::MAX;
        let mut counts = (0, 0);
        for _ in 0..REPEATS {
            let before = fleet.stats();
            fleet.run_batch(jobs).map_err(|e| e.to_string())?;
            let spent = fleet.stats().since(&before);
            fastest = fastest.min(spent.execute);
            counts = (spent.slow_calls, spent.saved_words);
        }
        let per_request = |n: u64| n as f64 / jobs.len().max(1) as f64;
        Ok(ModeRun {
            slow_calls_per_request: per_request(counts.0),
            saved_values_per_request: per_request(counts.1),
            execute_seconds: fastest.as_secs_f64(),
        })
    };
    let direct = run(CallMode::Direct)?;
    let continuations = run(CallMode::Continuations)?;
    Ok(CallModes {
        requests: jobs.len(),
        direct,
        continuations,
        slow_call_share: 1.0 - direct.execute_seconds / continuations.execute_seconds.max(1e-12),
    })
}
