//! The `cpu` backend: the host-C kernel, compiled by the system C compiler into a shared
//! object, run by a pool of worker threads (Ocelot's runtime design, `ocelot.md` §III.H).

mod compiler;
mod direct;
mod fleet;
pub(crate) mod guard;
mod pool;
mod stack;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use compiler::CCompiler;
pub(crate) use fleet::mark_dirty;
pub use fleet::CpuFleet;
pub(crate) use pool::WorkerPool;

use super::{
    downcast, signals, Backend, BackendError, DeviceFleet, ImportService, Kernel, LaunchTimes,
    VmmOnly,
};
use crate::abi::{FleetShape, HostLaunch, HostServices};
use crate::codegen::{CallMode, DirtyPages, KernelOptions, MemoryChecks};

pub use direct::{NATIVE_BYTES_PER_STACK_WORD, WORKER_STACK_BYTES};

/// `void wv_launch(const wv_fleet *f, uint32_t first, uint32_t end, uint32_t step)` and
/// `wv_reset_launch` (same parameters).
pub type LaunchFn = unsafe extern "C" fn(*mut HostLaunch, u32, u32, u32);

/// Whether kernels built with `options` leave finding the pages VMs wrote to their fleet's
/// write watch (`backend/write_watch.rs`) instead of marking them at every store: guard regions, and a
/// host that can watch writes.
pub fn watches_writes(options: &KernelOptions) -> bool {
    options.memory_checks == MemoryChecks::Guard
        && options.dirty_pages == DirtyPages::Auto
        && write_watch_available()
}

pub use crate::backend::write_watch_available;

/// The `cpu` backend.
pub struct CpuBackend {
    compiler: CCompiler,
    pool: Arc<WorkerPool>,
}

impl CpuBackend {
    /// A backend using the system C compiler and one worker per core (or `workers`).
    pub fn new(workers: Option<usize>) -> Result<Self, BackendError> {
        // Before any kernel is built in this process (`backend/signals.rs` says why); a
        // refusal surfaces when a guarded kernel is loaded.
        let _ = signals::install();
        let compiler = CCompiler::detect()?;
        let n =
            workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(CpuBackend {
            compiler,
            pool: Arc::new(WorkerPool::new(n.max(1)).map_err(BackendError::Launch)?),
        })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn watches_writes(&self, options: &KernelOptions) -> bool {
        watches_writes(options)
    }

    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError> {
        let library = self.compiler.build(code, options)?;
        let entry = |name: &[u8]| {
            // SAFETY: the library was built from our kernel source, whose entries have this
            // type (abi::c::entry_points).
            unsafe { library.get::<LaunchFn>(name).map(|f| *f) }
                .map_err(|e| BackendError::Launch(format!("kernel has no entry point: {e}")))
        };
        let launch = entry(b"wv_launch\0")?;
        let reset = entry(b"wv_reset_launch\0")?;
        let fault_unwind = if options.memory_checks == MemoryChecks::Guard {
            signals::install()?;
            // SAFETY: guarded kernels define `void wv_fault_unwind(uint64_t)` (prelude.h).
            let f = unsafe { library.get::<guard::FaultUnwindFn>(b"wv_fault_unwind\0") }
                .map(|f| *f)
                .map_err(|e| BackendError::Launch(format!("kernel has no fault entry: {e}")))?;
            Some(f)
        } else {
            None
        };
        let counts = if options.count_calls {
            // SAFETY: counting kernels define `uint64_t *wv_profile_counts(uint64_t *)`
            // (prelude.h).
            let f = unsafe { library.get::<CountsFn>(b"wv_profile_counts\0") }
                .map(|f| *f)
                .map_err(|e| BackendError::Launch(format!("kernel has no call counters: {e}")))?;
            Some(f)
        } else {
            None
        };
        Ok(Arc::new(CpuKernel {
            _library: library,
            launch,
            reset,
            counts,
            fault_unwind,
            direct: options.calls == CallMode::Direct,
            watch_writes: watches_writes(options),
            pool: self.pool.clone(),
        }))
    }

    fn copy_bandwidth(&self, bytes: usize) -> Result<f64, BackendError> {
        let oom = |e| BackendError::Launch(format!("allocating {bytes} bytes to copy: {e}"));
        let mut src = Vec::new();
        src.try_reserve_exact(bytes).map_err(oom)?;
        src.resize(bytes, 0xa5u8);
        let mut dst = Vec::new();
        dst.try_reserve_exact(bytes).map_err(oom)?;
        dst.resize(bytes, 0u8);
        let workers = self.pool.workers();
        let chunk = bytes.div_ceil(workers);
        // Raw addresses so that each worker can write its own disjoint chunk.
        let (from, to) = (src.as_ptr() as usize, dst.as_mut_ptr() as usize);
        super::best_rate(bytes, 5, || {
            self.pool
                .run(workers, &|w| {
                    let lo = (w * chunk).min(bytes);
                    let hi = (lo + chunk).min(bytes);
                    // SAFETY: [lo, hi) lies inside both buffers, which outlive `run`, and chunks
                    // of different workers do not overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (from as *const u8).add(lo),
                            (to as *mut u8).add(lo),
                            hi - lo,
                        )
                    };
                })
                .map_err(BackendError::Launch)
        })
    }
}

/// `uint64_t *wv_profile_counts(uint64_t *words)` of a counting kernel: its counters, and
/// how many words they are.
type CountsFn = unsafe extern "C" fn(*mut u64) -> *const u64;

/// A kernel loaded into this process.
struct CpuKernel {
    _library: libloading::Library,
    launch: LaunchFn,
    reset: LaunchFn,
    /// A counting kernel's counters.
    counts: Option<CountsFn>,
    /// `wv_fault_unwind` of a kernel with guard regions (`MemoryChecks::Guard`).
    fault_unwind: Option<guard::FaultUnwindFn>,
    /// Whether the kernel makes direct calls: it then runs only on the workers, whose
    /// stacks are sized for its recursion.
    direct: bool,
    /// Whether its stores leave the dirty pages to the fleet's write watch (`watches_writes`).
    watch_writes: bool,
    pool: Arc<WorkerPool>,
}

impl CpuKernel {
    /// Runs `entry` over every VM of `fleet`, spread over the workers, with `services`; VMs
    /// of a kernel with direct calls get `stack_budget` bytes of native stack; `guarded`: the
    /// kernel's `wv_fault_unwind` when its guard faults must be taken as traps.
    fn run(
        &self,
        entry: LaunchFn,
        fleet: &mut CpuFleet,
        services: HostServices,
        stack_budget: u64,
        guarded: Option<guard::FaultUnwindFn>,
    ) -> Result<LaunchTimes, BackendError> {
        let start = Instant::now();
        let abi = HostLaunch {
            fleet: fleet.abi(),
            services,
        };
        // A worker that could not guard its stack (guarded kernels only).
        let failure: Mutex<Option<BackendError>> = Mutex::new(None);
        // Each worker's own copy: the stack floor is the worker's.
        let on_this_thread = |first: u32, end: u32, step: u32| {
            let mut mine = abi;
            match guarded {
                Some(unwind) => {
                    // Guarded kernels do not check the floor: the pages below it fault.
                    let ran = stack::with_guarded_floor(stack_budget, |floor| {
                        mine.services.stack_floor = floor;
                        let mine: *mut HostLaunch = &mut mine;
                        // SAFETY: `abi` points into `fleet`, which outlives the call; each
                        // worker touches only its own VMs. The kernel writes only the copy's
                        // `unwind` and `running`.
                        let run = || unsafe { entry(mine, first, end, step) };
                        guard::with_scope(
                            mine,
                            abi.fleet.mem,
                            abi.fleet.num_vms,
                            abi.fleet.mem_stride,
                            unwind,
                            run,
                        )
                    });
                    if let Err(e) = ran {
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
                None => {
                    mine.services.stack_floor = direct::stack_floor(stack_budget);
                    let mine: *mut HostLaunch = &mut mine;
                    // SAFETY: as above.
                    unsafe { entry(mine, first, end, step) };
                }
            }
        };
        let n = abi.fleet.num_vms;
        let dispatch = || {
            if (n <= 1 && !self.direct) || self.pool.is_worker() {
                // One VM, or a launch from inside a host call on a worker (the other workers
                // may be waiting for that call): run here.
                on_this_thread(0, n, 1);
                Ok(())
            } else {
                // Interleaved assignment: worker w runs VMs w, w + W, w + 2W, ...
                let workers = self.pool.workers().min(n as usize) as u32;
                self.pool
                    .run(workers as usize, &|w| on_this_thread(w as u32, n, workers))
                    .map_err(BackendError::Launch)
            }
        };
        // Guard faults keep an in-process compiler's builds waiting (`backend/signals.rs`); a
        // launch from inside a host call runs under its outer launch's hold.
        signals::while_faulting_if(guarded.is_some() && !self.pool.is_worker(), dispatch)?;
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        // The kernel works on the host's buffers: nothing is transferred.
        Ok(LaunchTimes {
            execute: start.elapsed(),
            transfer: Duration::ZERO,
        })
    }
}

impl Kernel for CpuKernel {
    fn create_fleet(
        &self,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        _: VmmOnly,
    ) -> Result<Box<dyn DeviceFleet>, BackendError> {
        Ok(Box::new(CpuFleet::new(
            shape,
            data_blob,
            elem_blob,
            self.watch_writes,
        )?))
    }

    fn launch(
        &self,
        fleet: &mut dyn DeviceFleet,
        imports: &dyn ImportService,
    ) -> Result<LaunchTimes, BackendError> {
        let fleet = downcast::<CpuFleet>(fleet, "cpu")?;
        if !self.direct {
            return self.run(self.launch, fleet, HostServices::default(), 0, None);
        }
        // The VMs' call stack is native here, in proportion to their continuation stacks.
        let layout = fleet.shape().layout;
        let budget = layout.stack_words as u64 * direct::NATIVE_BYTES_PER_STACK_WORD;
        let abi = fleet.abi();
        let dirty = fleet.dirty_map();
        direct::with_services(&abi, layout, dirty, imports, |services| {
            // Launches (not resets) of a guarded kernel publish their scope to the fault
            // handler.
            self.run(self.launch, fleet, services, budget, self.fault_unwind)
        })
    }

    fn reset(&self, fleet: &mut dyn DeviceFleet) -> Result<LaunchTimes, BackendError> {
        let fleet = downcast::<CpuFleet>(fleet, "cpu")?;
        let before = fleet.guarded_sizes();
        // The host's share of a reset (finding written pages, taking pages away, protecting
        // new ones) counts as the reset's execution.
        let start = Instant::now();
        let resetting = match &before {
            Some(before) => fleet.collect_written_pages(before)?,
            None => Vec::new(),
        };
        let collected = start.elapsed();
        let mut times = self.run(self.reset, fleet, HostServices::default(), 0, None)?;
        let host = Instant::now();
        if let Some(before) = before {
            fleet.close_shrunk_memories(&before)?;
            fleet.watch_new_pages(&resetting, &before)?;
        }
        times.execute += collected + host.elapsed();
        Ok(times)
    }

    fn call_counts(&self) -> Option<Vec<u64>> {
        let f = self.counts?;
        let mut words = 0u64;
        // SAFETY: the kernel's counters are `words` aligned words in the loaded library, which
        // `self` keeps loaded; workers only change them through atomics, so they are read as
        // atomics too.
        let base = unsafe { f(&mut words) } as *mut u64;
        Some(
            (0..words)
                .map(|i| {
                    // SAFETY: as above; `i` is below the counters' length.
                    unsafe { std::sync::atomic::AtomicU64::from_ptr(base.add(i as usize)) }
                        .load(std::sync::atomic::Ordering::Relaxed)
                })
                .collect(),
        )
    }
}
