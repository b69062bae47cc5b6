//! Where programs run: a fleet of VMs on a kernel backend, or ordinary wasmtime instances.
//! The command line and the WASI suite runner go through [`Executor`], so every backend takes
//! the same jobs and gives the same results, with the time of each phase.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::wasmtime::{WasiSetup, WasmtimeBackend, WasmtimeError};
use crate::backend::Backend;
use crate::codegen::KernelOptions;
use crate::vmm::{BuildProgress, Fleet, FleetConfig, FleetStats, Imports, Outcome, Program};
use crate::vmm::{Value, VmmError};
use crate::wasi::program::{run_jobs_with_stats, JobResult, WasiRunConfig};
use crate::wasi::WasiJob;

/// Why a run could not happen (a guest's trap or exit is a result, not this).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The translating pipeline or the fleet failed.
    #[error(transparent)]
    Vmm(#[from] VmmError),
    /// wasmtime failed.
    #[error(transparent)]
    Wasmtime(#[from] WasmtimeError),
}

/// Where the time of one run went. Phases a backend does not have stay zero.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStats {
    /// Validation and translation to kernel source (wasmtime: compiling the module).
    pub translate: Duration,
    /// The device compiler or the kernel cache.
    pub device_compile: Duration,
    /// Kernel execution (wasmtime: running the instances).
    pub execute: Duration,
    /// Host–device transfers.
    pub transfer: Duration,
    /// Hypercall service on the host.
    pub hypercall_service: Duration,
    /// Kernel launches.
    pub launches: u64,
    /// Hypercalls serviced.
    pub hypercalls: u64,
    /// VM (re)instantiation between batches.
    pub instantiate: Duration,
    /// Calls through the trampoline (continuation calls and hypercalls).
    pub slow_calls: u64,
    /// `call_indirect`s that reached a function.
    pub indirect_calls: u64,
    /// Live values saved in continuation frames.
    pub saved_words: u64,
    /// The whole run, end to end.
    pub wall: Duration,
}

impl RunStats {
    fn from_fleet(program: &Program, fleet: FleetStats, wall: Duration) -> RunStats {
        RunStats {
            translate: program.compile_times.translate,
            device_compile: program.compile_times.device_compile,
            execute: fleet.execute,
            transfer: fleet.transfer,
            hypercall_service: fleet.hypercall_service,
            launches: fleet.launches,
            hypercalls: fleet.hypercalls,
            instantiate: fleet.instantiate,
            slow_calls: fleet.slow_calls,
            indirect_calls: fleet.indirect_calls,
            saved_words: fleet.saved_words,
            wall,
        }
    }
}

/// A backend ready to run programs.
pub enum Executor {
    /// A fleet of VMs in a kernel built with `kernel` on `backend`.
    Fleet {
        /// The kernel backend.
        backend: Arc<dyn Backend>,
        /// How kernels are built.
        kernel: KernelOptions,
    },
    /// One wasmtime instance per job.
    Wasmtime(WasmtimeBackend),
}

impl Executor {
    /// The backend's command-line name.
    pub fn name(&self) -> &'static str {
        match self {
            Executor::Fleet { backend, .. } => backend.name(),
            Executor::Wasmtime(_) => "wasmtime",
        }
    }

    /// Runs every job's `_start` (in batches of `config.fleet.num_vms` on a fleet).
    pub fn run_wasi(
        &self,
        wasm: &[u8],
        config: &WasiRunConfig,
        jobs: &[WasiJob],
        progress: BuildProgress<'_>,
    ) -> Result<(Vec<JobResult>, RunStats), RunError> {
        let start = Instant::now();
        match self {
            Executor::Fleet { backend, kernel } => {
                let program = Arc::new(Program::compile_with_progress(
                    wasm,
                    kernel,
                    backend.as_ref(),
                    progress,
                )?);
                let (results, fleet) = run_jobs_with_stats(program.clone(), config, jobs)?;
                let stats = RunStats::from_fleet(&program, fleet, start.elapsed());
                Ok((results, stats))
            }
            Executor::Wasmtime(w) => {
                let setup = WasiSetup {
                    program_name: config.program_name.clone(),
                    preopens: config.preopens.clone(),
                    allow_unknown_imports: config.allow_unknown_imports,
                    max_memory_pages: config.fleet.max_memory_pages,
                };
                let binary = crate::frontend::to_binary(wasm).map_err(VmmError::from)?;
                let (results, translate) = w.run_wasi(&binary, &setup, jobs)?;
                let wall = start.elapsed();
                Ok((results, wasmtime_stats(translate, wall)))
            }
        }
    }

    /// Calls the export `func` once per job (in batches of `fleet.num_vms` on a fleet).
    pub fn invoke(
        &self,
        wasm: &[u8],
        func: &str,
        fleet: FleetConfig,
        jobs: &[Vec<Value>],
        progress: BuildProgress<'_>,
    ) -> Result<(Vec<Outcome>, RunStats), RunError> {
        let start = Instant::now();
        match self {
            Executor::Fleet { backend, kernel } => {
                let program = Arc::new(Program::compile_with_progress(
                    wasm,
                    kernel,
                    backend.as_ref(),
                    progress,
                )?);
                if let Some((name, _)) = program.module.imports.first() {
                    return Err(VmmError::Limit(format!(
                        "the module imports `{}`.`{}`, which `run --invoke` does not provide",
                        name.module, name.name
                    ))
                    .into());
                }
                let mut f = Fleet::new(program.clone(), fleet, Imports::default())?;
                let outcomes = f.invoke_batched(func, jobs)?;
                let stats = RunStats::from_fleet(&program, f.stats(), start.elapsed());
                Ok((outcomes, stats))
            }
            Executor::Wasmtime(w) => {
                let binary = crate::frontend::to_binary(wasm).map_err(VmmError::from)?;
                let (outcomes, translate) =
                    w.invoke(&binary, func, fleet.max_memory_pages, jobs)?;
                Ok((outcomes, wasmtime_stats(translate, start.elapsed())))
            }
        }
    }
}

fn wasmtime_stats(translate: Duration, wall: Duration) -> RunStats {
    RunStats {
        translate,
        execute: wall.saturating_sub(translate),
        wall,
        ..RunStats::default()
    }
}
