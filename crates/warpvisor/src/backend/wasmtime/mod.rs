//! The `wasmtime` backend: every job as an ordinary wasmtime instance (wasmtime-wasi's preview1
//! for WASI programs), spread over a pool of threads.
//!
//! It is not a kernel backend — nothing is translated — but it takes the same jobs and gives
//! the same results as a fleet: it is the oracle of the differential tests and the fallback
//! where no device and no C compiler are available.

mod resident;

pub use resident::InstanceHooks;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, Linker, Module, Store, StoreLimits, StoreLimitsBuilder, Trap, Val};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::vmm::{Outcome, TrapKind, Value};
use crate::wasi::program::{JobResult, WasiRunConfig, TRAP_EXIT_CODE};
use crate::wasi::WasiJob;

/// Most bytes kept of one instance's stdout or stderr: the fleets' limit.
const PIPE_CAPACITY: usize = crate::wasi::OUTPUT_LIMIT;

/// Why the wasmtime backend could not run a module (a guest's trap is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum WasmtimeError {
    /// wasmtime rejected the module or the configuration.
    #[error("wasmtime: {0}")]
    Module(String),
    /// The module's exports or imports do not fit the request.
    #[error("{0}")]
    Link(String),
}

/// Settings of the wasmtime backend.
#[derive(Debug, Clone, Default)]
pub struct WasmtimeConfig {
    /// Worker threads (0: one per core).
    pub workers: usize,
    /// wasmtime fuel per job (about one unit per operator); `None`: unmetered.
    pub fuel: Option<u64>,
    /// Wall-clock limit per job; `None`: none.
    pub timeout: Option<Duration>,
}

/// The settings of a WASI run that matter to wasmtime.
#[derive(Debug, Clone, Default)]
pub struct WasiSetup {
    /// `argv[0]` of every instance.
    pub program_name: String,
    /// Preopened directories `(host, guest)`.
    pub preopens: Vec<(PathBuf, String)>,
    /// Let calls to unknown imports trap instead of rejecting the module.
    pub allow_unknown_imports: bool,
    /// Most 64 KiB pages an instance's memory may grow to.
    pub max_memory_pages: u32,
}

impl From<&WasiRunConfig> for WasiSetup {
    /// What of a fleet's WASI settings applies to wasmtime instances.
    fn from(config: &WasiRunConfig) -> Self {
        WasiSetup {
            program_name: config.program_name.clone(),
            preopens: config.preopens.clone(),
            allow_unknown_imports: config.allow_unknown_imports,
            max_memory_pages: config.fleet.max_memory_pages,
        }
    }
}

/// The wasmtime backend: one engine; modules compiled once and instantiated per job.
pub struct WasmtimeBackend {
    engine: Engine,
    config: WasmtimeConfig,
}

/// A WASI program compiled and linked by [`WasmtimeBackend::prepare_wasi`]: each
/// [`WasiProgram::run`] is one job in a fresh instance.
pub struct WasiProgram<'b> {
    backend: &'b WasmtimeBackend,
    pre: wasmtime::InstancePre<InstanceState>,
    setup: WasiSetup,
}

impl WasiProgram<'_> {
    /// Runs `job`'s `_start` in its own instance with its own args, env and stdin.
    pub fn run(&self, job: &WasiJob) -> JobResult {
        let setup = &self.setup;
        let max_bytes = (setup.max_memory_pages as usize) << 16;
        let stdout = MemoryOutputPipe::new(PIPE_CAPACITY);
        let stderr = MemoryOutputPipe::new(PIPE_CAPACITY);
        let result = (|| {
            let args: Vec<&str> = std::iter::once(setup.program_name.as_str())
                .chain(job.args.iter().map(String::as_str))
                .collect();
            let mut b = WasiCtxBuilder::new();
            b.args(&args)
                .envs(&job.env)
                .stdin(MemoryInputPipe::new(job.stdin.to_bytes()?))
                .stdout(stdout.clone())
                .stderr(stderr.clone());
            for (host, guest) in &setup.preopens {
                b.preopened_dir(host, guest, FsPerms::ReadWrite)?;
            }
            let state = InstanceState {
                wasi: b.build_p1(),
                limits: StoreLimitsBuilder::new().memory_size(max_bytes).build(),
                extension: None,
            };
            let mut store = self.backend.store(state)?;
            store.limiter(|s| &mut s.limits);
            let instance = self.pre.instantiate(&mut store)?;
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call(&mut store, ())
        })();
        let (exit_code, trap) = match result {
            Ok(()) => (0, None),
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(I32Exit(code)) => (*code as u32, None),
                None => (TRAP_EXIT_CODE, Some(trap_kind(&e))),
            },
        };
        JobResult {
            exit_code,
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            trap,
        }
    }
}

/// What an instance's store holds.
struct InstanceState {
    wasi: WasiP1Ctx,
    limits: StoreLimits,
    /// The functions of another import module, for instances that live on
    /// ([`WasmtimeBackend::run_instances`]).
    extension: Option<Box<dyn crate::wasi::HostExtension>>,
}

impl WasmtimeBackend {
    /// An engine for `config`.
    pub fn new(config: WasmtimeConfig) -> Result<Self, WasmtimeError> {
        let mut c = Config::new();
        c.consume_fuel(config.fuel.is_some());
        c.epoch_interruption(config.timeout.is_some());
        let engine = Engine::new(&c).map_err(|e| WasmtimeError::Module(format!("{e:#}")))?;
        Ok(WasmtimeBackend { engine, config })
    }

    /// wasmtime's version, for `warpvisor devices`.
    pub fn version() -> &'static str {
        "wasmtime 48.0.8 (cranelift)"
    }

    fn compile(&self, wasm: &[u8]) -> Result<Module, WasmtimeError> {
        Module::new(&self.engine, wasm).map_err(|e| WasmtimeError::Module(format!("{e:#}")))
    }

    fn workers(&self, jobs: usize) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let w = if self.config.workers == 0 {
            cores
        } else {
            self.config.workers
        };
        w.clamp(1, jobs.max(1))
    }

    fn store<T>(&self, data: T) -> Result<Store<T>, wasmtime::Error> {
        let mut store = Store::new(&self.engine, data);
        if let Some(fuel) = self.config.fuel {
            store.set_fuel(fuel)?;
        }
        if self.config.timeout.is_some() {
            // The ticker below advances the epoch once the deadline has passed.
            store.set_epoch_deadline(1);
            store.epoch_deadline_trap();
        }
        Ok(store)
    }

    /// Runs `f(i)` for every job index on the worker pool, in job order, with the per-job
    /// wall-clock limit enforced by an epoch ticker.
    pub(crate) fn run_pool<R: Send>(&self, jobs: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
        let finished = AtomicBool::new(false);
        std::thread::scope(|s| {
            if let Some(limit) = self.config.timeout {
                // Every job starts with a deadline one epoch ahead; bumping the epoch once per
                // `limit` interrupts any job that has run at least `limit` (and at most twice it).
                let engine = self.engine.clone();
                let finished = &finished;
                s.spawn(move || {
                    let tick = Duration::from_millis(10).min(limit);
                    let mut waited = Duration::ZERO;
                    while !finished.load(Ordering::Acquire) {
                        std::thread::sleep(tick);
                        waited += tick;
                        if waited >= limit {
                            engine.increment_epoch();
                            waited = Duration::ZERO;
                        }
                    }
                });
            }
            // A worker only panics if wasmtime itself does; the ticker stops either way.
            let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::work_queue::map_indexed(jobs, self.workers(jobs), &f)
            }));
            finished.store(true, Ordering::Release);
            results.unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Runs every job's `_start` in its own instance with its own args, env and stdin.
    pub fn run_wasi(
        &self,
        wasm: &[u8],
        setup: &WasiSetup,
        jobs: &[WasiJob],
    ) -> Result<(Vec<JobResult>, Duration), WasmtimeError> {
        let start = Instant::now();
        let program = self.prepare_wasi(wasm, setup)?;
        let compiled = start.elapsed();
        let results = self.run_pool(jobs.len(), |i| program.run(&jobs[i]));
        Ok((results, compiled))
    }

    /// Compiles and links a WASI program once, for [`WasiProgram::run`] to instantiate per job
    /// (on whatever threads the caller likes). `WasmtimeConfig::timeout` needs the epoch ticker
    /// of [`WasmtimeBackend::run_wasi`]; jobs run this way are limited by fuel alone.
    pub fn prepare_wasi(
        &self,
        wasm: &[u8],
        setup: &WasiSetup,
    ) -> Result<WasiProgram<'_>, WasmtimeError> {
        let module = self.compile(wasm)?;
        let mut linker: Linker<InstanceState> = Linker::new(&self.engine);
        p1::add_to_linker_sync(&mut linker, |s: &mut InstanceState| &mut s.wasi)
            .map_err(|e| WasmtimeError::Link(format!("{e:#}")))?;
        if setup.allow_unknown_imports {
            linker
                .define_unknown_imports_as_traps(&module)
                .map_err(|e| WasmtimeError::Link(format!("{e:#}")))?;
        }
        // Unknown imports are rejected here, once, before any job runs.
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| WasmtimeError::Link(format!("{e:#}")))?;
        if !matches!(
            module.get_export("_start"),
            Some(wasmtime::ExternType::Func(_))
        ) {
            return Err(WasmtimeError::Link(
                "the module has no exported function `_start`".into(),
            ));
        }
        Ok(WasiProgram {
            backend: self,
            pre,
            setup: setup.clone(),
        })
    }

    /// Calls the export `func` once per job, each in a fresh instance of a module without
    /// imports.
    pub fn invoke(
        &self,
        wasm: &[u8],
        func: &str,
        max_memory_pages: u32,
        jobs: &[Vec<Value>],
    ) -> Result<(Vec<Outcome>, Duration), WasmtimeError> {
        let start = Instant::now();
        let module = self.compile(wasm)?;
        let compiled = start.elapsed();
        if let Some(i) = module.imports().next() {
            return Err(WasmtimeError::Link(format!(
                "the module imports `{}`.`{}`, which `run --invoke` does not provide",
                i.module(),
                i.name()
            )));
        }
        let Some(wasmtime::ExternType::Func(ty)) = module.get_export(func) else {
            return Err(WasmtimeError::Link(format!(
                "the module has no exported function `{func}`"
            )));
        };
        let numeric = |t: &wasmtime::ValType| {
            matches!(
                t,
                wasmtime::ValType::I32
                    | wasmtime::ValType::I64
                    | wasmtime::ValType::F32
                    | wasmtime::ValType::F64
            )
        };
        if !ty.params().all(|t| numeric(&t)) || !ty.results().all(|t| numeric(&t)) {
            return Err(WasmtimeError::Link(format!(
                "`{func}` takes or returns references, which the wasmtime backend cannot pass"
            )));
        }
        let results = ty.results().len();
        let max_bytes = (max_memory_pages as usize) << 16;
        let outcomes = self.run_pool(jobs.len(), |i| {
            let run = || -> Result<Vec<Val>, wasmtime::Error> {
                let limits = StoreLimitsBuilder::new().memory_size(max_bytes).build();
                let mut store = self.store(limits)?;
                store.limiter(|l| l);
                let instance = Linker::new(&self.engine).instantiate(&mut store, &module)?;
                let f = instance
                    .get_func(&mut store, func)
                    .ok_or_else(|| wasmtime::Error::msg("export vanished"))?;
                let args: Vec<Val> = jobs[i].iter().map(|v| to_val(*v)).collect();
                let mut out = vec![Val::I32(0); results];
                f.call(&mut store, &args, &mut out)?;
                Ok(out)
            };
            match run() {
                Ok(vals) => Outcome::Returned(vals.iter().map(from_val).collect()),
                Err(e) => Outcome::Trapped(trap_kind(&e)),
            }
        });
        Ok((outcomes, compiled))
    }
}

/// The trap kind of a wasmtime error (anything that is not a WebAssembly trap is a host error).
pub fn trap_kind(e: &wasmtime::Error) -> TrapKind {
    match e.downcast_ref::<Trap>() {
        Some(Trap::UnreachableCodeReached) => TrapKind::Unreachable,
        Some(Trap::MemoryOutOfBounds) => TrapKind::MemoryOutOfBounds,
        Some(Trap::TableOutOfBounds) => TrapKind::TableOutOfBounds,
        Some(Trap::IndirectCallToNull) => TrapKind::IndirectCallToNull,
        Some(Trap::BadSignature) => TrapKind::BadSignature,
        Some(Trap::IntegerOverflow) => TrapKind::IntegerOverflow,
        Some(Trap::IntegerDivisionByZero) => TrapKind::IntegerDivisionByZero,
        Some(Trap::BadConversionToInteger) => TrapKind::BadConversionToInteger,
        Some(Trap::StackOverflow) => TrapKind::StackOverflow,
        Some(Trap::NullReference) => TrapKind::NullReference,
        Some(Trap::OutOfFuel) => TrapKind::OutOfFuel,
        Some(Trap::Interrupt) => TrapKind::Timeout,
        _ => TrapKind::HostError,
    }
}

fn to_val(v: Value) -> Val {
    match v {
        Value::I32(x) => Val::I32(x),
        Value::I64(x) => Val::I64(x),
        Value::F32(b) => Val::F32(b),
        Value::F64(b) => Val::F64(b),
        // Excluded by `invoke`'s signature check.
        Value::FuncRef(_) => Val::FuncRef(None),
        Value::ExternRef(_) => Val::ExternRef(None),
    }
}

fn from_val(v: &Val) -> Value {
    match v {
        Val::I32(x) => Value::I32(*x),
        Val::I64(x) => Value::I64(*x),
        Val::F32(b) => Value::F32(*b),
        Val::F64(b) => Value::F64(*b),
        // Excluded by `invoke`'s signature check.
        _ => Value::ExternRef(None),
    }
}
