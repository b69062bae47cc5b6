//! Where programs run: a fleet of VMs on a kernel backend, or ordinary wasmtime instances.
//! The command line and the WASI suite runner go through [`Executor`], so every backend takes
//! the same jobs and gives the same results, with the time of each phase.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::wasmtime::{WasiSetup, WasmtimeBackend, WasmtimeError};
use crate::backend::Backend;
use crate::codegen::KernelOptions;
use crate::vmm::{BuildProgress, CompileTimes, Fleet, FleetConfig, FleetStats, Imports};
use crate::vmm::{Outcome, Program};
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

/// Where the time of one run went. Phases a backend does not have stay zero. The phases do not
/// overlap: after compilation, [`RunStats::accounted`] of them add up to (nearly) the whole
/// [`RunStats::after_compilation`], and [`RunStats::unaccounted`] is the rest.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStats {
    /// Validation and translation to kernel source (wasmtime: compiling the module).
    pub translate: Duration,
    /// The device compiler or the kernel cache.
    pub device_compile: Duration,
    /// Creating the fleet's storage on the device (zeroed).
    pub allocate: Duration,
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
    /// The fleet's bookkeeping between launches: choosing partitions, preparing entries,
    /// collecting outcomes.
    pub schedule: Duration,
    /// The runner's own work on the host around the fleet: creating it beyond allocation
    /// and instantiation (shapes, images; for WASI programs the WASI state and its imports),
    /// each batch's jobs in (WASI arguments, environment, stdin) and results out (exit codes,
    /// captured output).
    pub host: Duration,
    /// Releasing the fleet and the program after the last batch.
    pub release: Duration,
    /// Writing the results, when the caller does and records it here (the command line).
    pub output: Duration,
    /// Bytes written to the device.
    pub bytes_to_device: u64,
    /// Bytes read from the device.
    pub bytes_from_device: u64,
    /// Gathered transfers between host and device.
    pub transfers: u64,
    /// Calls through the trampoline (continuation calls and hypercalls).
    pub slow_calls: u64,
    /// `call_indirect`s that reached a function.
    pub indirect_calls: u64,
    /// Live values saved in continuation frames.
    pub saved_words: u64,
    /// The whole run, end to end: compilation, the jobs, and the output when the caller
    /// records it.
    pub wall: Duration,
}

impl RunStats {
    fn from_fleet(compile: CompileTimes, fleet: &FleetStats) -> RunStats {
        RunStats {
            translate: compile.translate,
            device_compile: compile.device_compile,
            allocate: fleet.allocate,
            execute: fleet.execute,
            transfer: fleet.transfer,
            hypercall_service: fleet.hypercall_service,
            launches: fleet.launches,
            hypercalls: fleet.hypercalls,
            instantiate: fleet.instantiate,
            schedule: fleet.schedule,
            bytes_to_device: fleet.bytes_to_device,
            bytes_from_device: fleet.bytes_from_device,
            transfers: fleet.transfers,
            slow_calls: fleet.slow_calls,
            indirect_calls: fleet.indirect_calls,
            saved_words: fleet.saved_words,
            ..RunStats::default()
        }
    }

    /// The wall time after compilation: the whole run less translation and the device
    /// compiler.
    pub fn after_compilation(&self) -> Duration {
        self.wall
            .saturating_sub(self.translate + self.device_compile)
    }

    /// The time of every phase after compilation, summed.
    pub fn accounted(&self) -> Duration {
        self.allocate
            + self.instantiate
            + self.execute
            + self.transfer
            + self.hypercall_service
            + self.schedule
            + self.host
            + self.release
            + self.output
    }

    /// What no phase accounts for: [`RunStats::after_compilation`] less
    /// [`RunStats::accounted`].
    pub fn unaccounted(&self) -> Duration {
        self.after_compilation().saturating_sub(self.accounted())
    }

    /// Bytes moved between host and device per kernel launch, both ways.
    pub fn bytes_per_launch(&self) -> u64 {
        (self.bytes_to_device + self.bytes_from_device) / self.launches.max(1)
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
                let compile = program.compile_times;
                let (results, wasi) = run_jobs_with_stats(program, config, jobs)?;
                let mut stats = RunStats::from_fleet(compile, &wasi.fleet);
                stats.host = wasi.host;
                stats.release = wasi.release;
                stats.wall = start.elapsed();
                Ok((results, stats))
            }
            Executor::Wasmtime(w) => {
                let setup = WasiSetup::from(config);
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
                let compile = program.compile_times;
                let created = Instant::now();
                let mut f = Fleet::new(program, fleet, Imports::default())?;
                // Allocation and instantiation are the fleet's own phases; the rest of its
                // creation (shapes, images, segments) is the host's.
                let host = created.elapsed().saturating_sub(f.stats().accounted());
                let outcomes = f.invoke_batched(func, jobs)?;
                let mut stats = RunStats::from_fleet(compile, &f.stats());
                stats.host = host;
                let released = Instant::now();
                drop(f);
                stats.release = released.elapsed();
                stats.wall = start.elapsed();
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
