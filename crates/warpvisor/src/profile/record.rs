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

/// The counters of `program`'s counting kernel (a counting kernel is one partition), or none.
fn counters(program: &Program) -> Vec<u64> {
    program
        .kernels
        .iter()
        .find_map(|k| k.call_counts())
        .unwrap_or_default()
}

/// What the counters gained since they read `before`, as `binary`'s profile over `jobs` jobs.
fn profile_since(
    binary: &[u8],
    program: &Program,
    before: &[u64],
    jobs: usize,
) -> Result<CallProfile, RunError> {
    let binary = crate::frontend::to_binary(binary).map_err(VmmError::from)?;
    let module = crate::frontend::load(&binary).map_err(VmmError::from)?;
    let words: Vec<u64> = counters(program)
        .into_iter()
        .enumerate()
        .map(|(i, now)| {
            // A way's target word is an id, not a count: it stays as it is.
            let k = i % super::WORDS_PER_SITE;
            let target_id = k % 2 == 1 && k < super::WORDS_PER_SITE - 1;
            match target_id {
                true => now,
                false => now.wrapping_sub(before.get(i).copied().unwrap_or(0)),
            }
        })
        .collect();
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
