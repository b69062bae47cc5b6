//! Recording a call profile: the module built with `KernelOptions::count_calls` on the `cpu`
//! backend with direct calls (what a call site does is a property of the program and its
//! inputs, not of the backend), jobs run on it in batches of the fleet's size, and the
//! kernel's counters read back as a [`CallProfile`].

use std::sync::{Arc, Mutex};

use super::{CallProfile, CallSites};
use crate::backend::Backend;
use crate::codegen::{CallMode, KernelOptions, MemoryChecks};
use crate::runner::RunError;
use crate::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, Value, VmmError};
use crate::wasi::program::{JobResult, WasiFleet, WasiRunConfig};
use crate::wasi::WasiJob;

/// Held while a profile is recorded. A counting kernel's counters live in its loaded library,
/// which the process shares between programs built from the same source: recordings take
/// turns, so that each sees only its own jobs' counts.
static RECORDING: Mutex<()> = Mutex::new(());

/// The kernel options of a counting kernel at optimisation level `opt_level`.
pub fn counting_kernel(opt_level: u8) -> KernelOptions {
    let mut options = KernelOptions {
        opt_level,
        calls: CallMode::Direct,
        count_calls: true,
        ..KernelOptions::default()
    };
    options.memory_checks = MemoryChecks::default_for(&options);
    options
}

/// The module `binary` compiled as a counting kernel on `backend` (`cpu`).
pub fn counting_program(
    binary: &[u8],
    backend: &dyn Backend,
    opt_level: u8,
) -> Result<Arc<Program>, RunError> {
    Ok(Arc::new(Program::compile(
        binary,
        &counting_kernel(opt_level),
        backend,
    )?))
}

/// The counters of `program`'s kernels, added up (zero words if none counts).
fn counters(program: &Program) -> Vec<u64> {
    let mut sum: Vec<u64> = Vec::new();
    for counts in program.kernels.iter().filter_map(|k| k.call_counts()) {
        sum.resize(sum.len().max(counts.len()), 0);
        for (s, c) in sum.iter_mut().zip(counts) {
            *s = s.wrapping_add(c);
        }
    }
    sum
}

/// What the counters gained between `before` and now, as `binary`'s profile over `jobs` jobs.
fn profile_since(
    binary: &[u8],
    program: &Program,
    before: &[u64],
    jobs: usize,
) -> Result<CallProfile, RunError> {
    let binary = crate::frontend::to_binary(binary).map_err(VmmError::from)?;
    let module = crate::frontend::load(&binary).map_err(VmmError::from)?;
    let mut words = counters(program);
    for (w, b) in words.iter_mut().zip(before) {
        *w = w.wrapping_sub(*b);
    }
    // The target words are ids, not counts: put them back.
    let after = counters(program);
    for (i, w) in words.iter_mut().enumerate() {
        let k = i % super::WORDS_PER_SITE;
        if k != 0 && k < super::WORDS_PER_SITE - 1 && k % 2 == 1 {
            *w = after[i];
        }
    }
    Ok(CallProfile::from_counts(
        &binary,
        &CallSites::of(&module),
        &words,
        jobs as u64,
    ))
}

/// Runs every WASI job's `_start` on a counting fleet: the results and the profile.
pub fn profile_wasi(
    binary: &[u8],
    program: Arc<Program>,
    config: &WasiRunConfig,
    jobs: &[WasiJob],
) -> Result<(Vec<JobResult>, CallProfile), RunError> {
    let _turn = RECORDING.lock().unwrap_or_else(|p| p.into_inner());
    let before = counters(&program);
    let mut fleet = WasiFleet::new(program.clone(), config)?;
    let mut results = Vec::with_capacity(jobs.len());
    for batch in jobs.chunks(fleet.num_vms() as usize) {
        results.extend(fleet.run_batch(batch)?);
    }
    let profile = profile_since(binary, &program, &before, jobs.len())?;
    Ok((results, profile))
}

/// Calls export `func` once per job on a counting fleet: the outcomes and the profile.
pub fn profile_invoke(
    binary: &[u8],
    program: Arc<Program>,
    func: &str,
    config: FleetConfig,
    jobs: &[Vec<Value>],
) -> Result<(Vec<Outcome>, CallProfile), RunError> {
    let _turn = RECORDING.lock().unwrap_or_else(|p| p.into_inner());
    let before = counters(&program);
    let mut fleet = Fleet::new(program.clone(), config, Imports::default())?;
    let mut outcomes = Vec::with_capacity(jobs.len());
    for batch in jobs.chunks(fleet.num_vms() as usize) {
        outcomes.extend(fleet.invoke_batched(func, batch)?);
    }
    let profile = profile_since(binary, &program, &before, jobs.len())?;
    Ok((outcomes, profile))
}
