//! Running jobs on a traced fleet: the kernel built with `KernelOptions::trace` on the `cpu`
//! backend with direct calls (the trace is a property of the program and its inputs, not of
//! the backend: every backend runs the same blocks and addresses), one job per VM, in
//! batches of the fleet's size.

use std::sync::Arc;

use super::trace::{JobTrace, Trace, TraceHeader};
use super::SimtError;
use crate::backend::Backend;
use crate::codegen::{CallMode, KernelOptions, MemoryChecks};
use crate::runner::RunError;
use crate::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, Value, VmmError};
use crate::wasi::program::{JobResult, WasiFleet, WasiRunConfig};
use crate::wasi::WasiJob;

/// Why a traced run failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceRunError {
    /// The module or the trace.
    #[error(transparent)]
    Simt(#[from] SimtError),
    /// Building or running the fleet.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl From<VmmError> for TraceRunError {
    fn from(e: VmmError) -> Self {
        TraceRunError::Run(RunError::Vmm(e))
    }
}

/// The kernel options of a traced kernel at optimisation level `opt_level`.
pub fn traced_kernel(opt_level: u8) -> KernelOptions {
    let mut options = KernelOptions {
        opt_level,
        calls: CallMode::Direct,
        trace: true,
        ..KernelOptions::default()
    };
    options.memory_checks = MemoryChecks::default_for(&options);
    options
}

/// A traced program: the module compiled with tracing on `backend` (`cpu`).
pub fn traced_program(
    binary: &[u8],
    backend: &dyn Backend,
    opt_level: u8,
) -> Result<Arc<Program>, TraceRunError> {
    Ok(Arc::new(Program::compile_with_progress(
        binary,
        &traced_kernel(opt_level),
        backend,
        &|_, _| {},
    )?))
}

fn header(binary: &[u8], fleet: &FleetConfig, entry: &str) -> Result<TraceHeader, TraceRunError> {
    let module = crate::frontend::load(binary).map_err(VmmError::from)?;
    // The pages each VM's slab holds, as `Fleet::new` reserves them.
    let max_pages = module.memory.as_ref().map_or(0, |m| {
        m.maximum
            .unwrap_or(65536)
            .min(fleet.max_memory_pages as u64) as u32
    });
    Ok(TraceHeader::new(
        binary,
        &module,
        fleet.num_vms,
        max_pages,
        entry,
    )?)
}

/// Runs every WASI job's `_start` on a traced fleet of `config.fleet.num_vms` VMs keeping at
/// most `max_words` trace words per job: the results and the trace.
pub fn trace_wasi(
    binary: &[u8],
    program: Arc<Program>,
    config: &WasiRunConfig,
    jobs: &[WasiJob],
    max_words: usize,
) -> Result<(Vec<JobResult>, Trace), TraceRunError> {
    let header = header(binary, &config.fleet, "_start")?;
    let mut fleet = WasiFleet::new(program, config)?;
    fleet.fleet_mut().set_trace_limit(max_words);
    let mut results = Vec::with_capacity(jobs.len());
    let mut traces = Vec::with_capacity(jobs.len());
    for batch in jobs.chunks(fleet.num_vms() as usize) {
        results.extend(fleet.run_batch(batch)?);
        traces.extend(take(fleet.fleet_mut(), batch.len()));
    }
    Ok((
        results,
        Trace {
            header,
            jobs: traces,
        },
    ))
}

/// Calls export `func` once per job on a traced fleet, keeping at most `max_words` trace
/// words per job: the outcomes and the trace.
pub fn trace_invoke(
    binary: &[u8],
    program: Arc<Program>,
    func: &str,
    config: FleetConfig,
    jobs: &[Vec<Value>],
    max_words: usize,
) -> Result<(Vec<Outcome>, Trace), TraceRunError> {
    let header = header(binary, &config, func)?;
    let mut fleet = Fleet::new(program, config, Imports::default())?;
    fleet.set_trace_limit(max_words);
    let mut outcomes = Vec::with_capacity(jobs.len());
    let mut traces = Vec::with_capacity(jobs.len());
    for batch in jobs.chunks(fleet.num_vms() as usize) {
        outcomes.extend(fleet.invoke_batched(func, batch)?);
        traces.extend(take(&mut fleet, batch.len()));
    }
    Ok((
        outcomes,
        Trace {
            header,
            jobs: traces,
        },
    ))
}

fn take(fleet: &mut Fleet, n: usize) -> Vec<JobTrace> {
    let mut t = fleet.take_trace().unwrap_or_default();
    t.resize(n.max(t.len()), JobTrace::default());
    t.truncate(n);
    t
}

/// Jobs a `run --analyze` sample traces at most.
pub const SAMPLE_JOBS: usize = 64;
/// Trace words a sample keeps in all (256 MiB).
pub const SAMPLE_WORDS: usize = 64 << 20;

/// Traces the first [`SAMPLE_JOBS`] WASI jobs on `cpu` and analyses them at widths 8, 16 and
/// 32: what `warpvisor run --analyze` reports.
pub fn sample_wasi(
    binary: &[u8],
    backend: &dyn Backend,
    config: &WasiRunConfig,
    jobs: &[WasiJob],
) -> Result<super::Report, TraceRunError> {
    let sample = &jobs[..jobs.len().min(SAMPLE_JOBS)];
    let mut config = config.clone();
    config.fleet.num_vms = sample.len().max(1) as u32;
    let program = traced_program(binary, backend, 2)?;
    let (_, trace) = trace_wasi(binary, program, &config, sample, per_job(sample.len()))?;
    report(&trace)
}

/// Traces the first [`SAMPLE_JOBS`] calls of export `func` on `cpu` and analyses them.
pub fn sample_invoke(
    binary: &[u8],
    backend: &dyn Backend,
    func: &str,
    config: FleetConfig,
    jobs: &[Vec<Value>],
) -> Result<super::Report, TraceRunError> {
    let sample = &jobs[..jobs.len().min(SAMPLE_JOBS)];
    let config = FleetConfig {
        num_vms: sample.len().max(1) as u32,
        ..config
    };
    let program = traced_program(binary, backend, 2)?;
    let (_, trace) = trace_invoke(binary, program, func, config, sample, per_job(sample.len()))?;
    report(&trace)
}

fn per_job(jobs: usize) -> usize {
    SAMPLE_WORDS / jobs.max(1)
}

fn report(trace: &Trace) -> Result<super::Report, TraceRunError> {
    let config = super::AnalysisConfig::default();
    let results = super::analyze(trace, &config)?;
    Ok(super::Report::new(trace, config.grouping, &results))
}
