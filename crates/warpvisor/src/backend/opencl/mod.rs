//! The `opencl` backend: the OpenCL C kernel on any OpenCL device, one work-item per VM.
//!
//! The OpenCL library is loaded at run time (`opencl3`'s `dynamic` feature): warpvisor builds
//! and runs where no OpenCL is installed, and says why when this backend is asked for.

mod fleet;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod guard;
/// No guard regions off x86-64 Linux (`MemoryChecks::guard_unsupported`): none is ever made.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod guard {
    use crate::backend::BackendError;
    use std::ptr::NonNull;
    pub(super) enum GuardedMemory {}
    impl GuardedMemory {
        pub(super) fn new(_: u32, _: u64, _: u64) -> Result<Self, BackendError> {
            Err(BackendError::Launch(
                "guard regions need an x86-64 Linux host".into(),
            ))
        }
        pub(super) fn base(&self) -> NonNull<u8> {
            match *self {}
        }
        pub(super) fn controls(&self) -> *mut u8 {
            match *self {}
        }
        pub(super) fn stride(&self) -> u64 {
            match *self {}
        }
        pub(super) fn pages(&self, _: u32) -> u32 {
            match *self {}
        }
        pub(super) fn close(&self, _: u32, _: u32, _: u32) -> Result<(), BackendError> {
            match *self {}
        }
    }
}
mod host_calls;
mod program;
mod watched;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::Kernel as ClKernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};

use super::{
    downcast, Backend, BackendError, DeviceFleet, ImportService, Kernel, LaunchTimes, VmmOnly,
};
use crate::abi::{FleetBuffer, FleetShape};
use crate::codegen::{KernelOptions, MemoryChecks};
use fleet::ClFleet;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) use guard::take_fault as take_guard_fault;

/// One OpenCL device as `warpvisor devices` shows it.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Index for `--device`.
    pub index: usize,
    /// Platform name.
    pub platform: String,
    /// Device name.
    pub name: String,
    /// Whether it is a GPU.
    pub gpu: bool,
    /// Compute units.
    pub compute_units: u32,
    /// Global memory in bytes.
    pub global_memory: u64,
    /// Largest single allocation in bytes.
    pub max_allocation: u64,
    /// Driver version.
    pub driver: String,
    /// Why the device cannot serve imports while a kernel runs (`--calls direct`), if it
    /// cannot.
    pub sync_imports_unsupported: Option<String>,
}

fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: "opencl",
        reason: reason.into(),
    }
}

/// One enumeration at a time: PoCL 3.1 crashes (in `clGetDeviceInfo`) when threads enumerate
/// platforms and devices at once, as tests that each open a backend do.
static ENUMERATE_LOCK: Mutex<()> = Mutex::new(());

/// PoCL's switch for the SIGFPE handler it installs process-wide when it first lists its
/// devices. That handler steps over a faulting integer division on *any* thread, so after it a
/// `wasmtime` instance's `i32.div_s` by zero (the oracle, the fallback backend) returns garbage
/// instead of trapping: a CI run of the differential test saw exactly that. warpvisor's kernels
/// check every divisor themselves and never need it.
const POCL_SIGFPE_SWITCH: &str = "POCL_SIGFPE_HANDLER";

/// PoCL's switch for work-group functions specialised to each launch's local size, global
/// offset and grid size. A kernel is built generic when its binary is taken for the cache
/// (`program.rs`), and specialised once more at its first launch for each shape — which
/// doubles every cold build (the spec suite on PoCL: 12 minutes with it here, 2026-11-25;
/// one large module built twice, 30 s and 24 s). A fleet's kernel runs one VM per work-item,
/// divergent, where the specialisation has nothing to vectorise.
const POCL_SPECIALIZATION_SWITCH: &str = "POCL_WORK_GROUP_SPECIALIZATION";

/// Sets PoCL's switches before PoCL first initialises, unless the user chose: its SIGFPE
/// handler off, and no work-group specialisation.
fn configure_pocl() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for switch in [POCL_SIGFPE_SWITCH, POCL_SPECIALIZATION_SWITCH] {
            if std::env::var_os(switch).is_none() {
                std::env::set_var(switch, "0");
            }
        }
    });
}

/// Every OpenCL device of every platform, or why there are none.
pub fn devices() -> Result<Vec<(DeviceInfo, Device)>, BackendError> {
    let _one_at_a_time = ENUMERATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // PoCL adds to the environment with C's `setenv` while it first lists its devices.
    let _environment = crate::backend::environment::changing();
    configure_pocl();
    // An explicit OPENCL_DYLIB_PATH is the library the user wants: if none of its entries
    // loads, OpenCL is unavailable (cl3 would otherwise fall back to the system library).
    if let Ok(paths) = std::env::var("OPENCL_DYLIB_PATH") {
        // SAFETY: loading an OpenCL ICD loader runs only its initialisers.
        let loads = paths
            .split(';')
            .any(|p| unsafe { libloading::Library::new(p) }.is_ok());
        if !loads {
            return Err(unavailable(format!(
                "OPENCL_DYLIB_PATH={paths} names no loadable OpenCL library"
            )));
        }
    }
    if !cl3::is_opencl_runtime_available() {
        let path = std::env::var("OPENCL_DYLIB_PATH").unwrap_or_else(|_| "libOpenCL.so.1".into());
        return Err(unavailable(format!(
            "no OpenCL runtime could be loaded ({path}); install an OpenCL ICD loader and driver, e.g. ocl-icd-libopencl1 with pocl-opencl-icd"
        )));
    }
    let platforms = opencl3::platform::get_platforms()
        .map_err(|e| unavailable(format!("no OpenCL platform ({e})")))?;
    let mut out = Vec::new();
    for p in platforms {
        let pname = p.name().unwrap_or_default();
        let ids = p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default();
        for id in ids {
            let d = Device::new(id);
            let info = DeviceInfo {
                index: out.len(),
                platform: pname.clone(),
                name: d.name().unwrap_or_default().trim().to_string(),
                gpu: d.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0),
                compute_units: d.max_compute_units().unwrap_or(0),
                global_memory: d.global_mem_size().unwrap_or(0),
                max_allocation: d.max_mem_alloc_size().unwrap_or(0),
                driver: d.driver_version().unwrap_or_default(),
                sync_imports_unsupported: host_calls::sync_imports_unsupported(&d),
            };
            out.push((info, d));
        }
    }
    if out.is_empty() {
        return Err(unavailable("the OpenCL runtime reports no devices"));
    }
    Ok(out)
}

/// The `opencl` backend on one device.
pub struct OpenClBackend {
    info: DeviceInfo,
    shared: Arc<Shared>,
    /// The device's largest work-group.
    max_work_group: usize,
}

/// The context and queue every kernel and fleet of this backend uses; launches and transfers
/// are serialised on the queue.
struct Shared {
    context: Context,
    queue: Mutex<CommandQueue>,
    /// Whether the device is a CPU working in host memory (PoCL): mapping one of its buffers
    /// copies nothing, so fleets keep the buffers the host touches mapped between launches.
    /// Other devices that share host memory (integrated GPUs) may copy at a map, so they
    /// transfer with read and write commands.
    host_resident: bool,
}

// SAFETY: the queue is used only under its mutex; contexts are thread-safe in OpenCL.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The queue, for one launch or transfer. A panic elsewhere while it was held leaves
    /// nothing half-done that a later user could trip over (every user waits for its commands
    /// before letting go), so a poisoned lock is taken over.
    fn lock_queue(&self) -> MutexGuard<'_, CommandQueue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl OpenClBackend {
    /// Opens device `index` (default: the first GPU, else the first device).
    pub fn new(index: Option<usize>) -> Result<Self, BackendError> {
        // The guard-fault handler goes in before the runtime's compiler can register its own
        // (`backend/signals.rs` says why); a refusal surfaces when a guarded fleet is made.
        let _ = crate::backend::signals::install();
        let all = devices()?;
        let chosen = match index {
            Some(i) => all
                .into_iter()
                .nth(i)
                .ok_or_else(|| unavailable(format!("no OpenCL device {i}")))?,
            None => {
                let gpu = all.iter().position(|(d, _)| d.gpu).unwrap_or(0);
                all.into_iter()
                    .nth(gpu)
                    .ok_or_else(|| unavailable("no device"))?
            }
        };
        let context = Context::from_device(&chosen.1)
            .map_err(|e| BackendError::Launch(format!("creating an OpenCL context: {e}")))?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0)
            .map_err(|e| BackendError::Launch(format!("creating an OpenCL queue: {e}")))?;
        Ok(OpenClBackend {
            max_work_group: chosen.1.max_work_group_size().unwrap_or(1),
            info: chosen.0,
            shared: Arc::new(Shared {
                context,
                queue: Mutex::new(queue),
                host_resident: chosen.1.host_unified_memory().unwrap_or(false)
                    && chosen
                        .1
                        .dev_type()
                        .is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0),
            }),
        })
    }

    /// The device this backend runs on.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }
}

impl Backend for OpenClBackend {
    fn name(&self) -> &'static str {
        "opencl"
    }

    fn watches_writes(&self, options: &KernelOptions) -> bool {
        watched::watches_writes(self.shared.host_resident, options)
    }

    /// Guard regions where they work, except at `-O0`: there PoCL took longer to build a
    /// guarded kernel than an explicit one (c-sort, cold: 209 s against 133 s), while at
    /// `-O2` guarded kernels build 33-38% faster and run 3-6% faster (docs/benchmarks.md,
    /// nineteenth session).
    fn guard_regions_by_default(&self, options: &KernelOptions) -> bool {
        options.opt_level > 0 && self.guard_regions_unsupported(options).is_none()
    }

    fn guard_regions_unsupported(&self, options: &KernelOptions) -> Option<String> {
        MemoryChecks::guard_unsupported(options).or_else(|| {
            (!self.shared.host_resident).then(|| {
                format!(
                    "guard regions need an OpenCL CPU device computing in host memory \
                     (PoCL), and {} is not one",
                    self.info.name
                )
            })
        })
    }

    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError> {
        if options.synchronous_imports() {
            if let Some(why) = &self.info.sync_imports_unsupported {
                return Err(unavailable(format!(
                    "direct calls need the host to serve imports while a kernel runs, and {} \
                     cannot: {why} (--calls continuations works on every device)",
                    self.info.name
                )));
            }
        }
        let watch_writes = watched::watches_writes(self.shared.host_resident, options);
        let built = program::build(
            &self.shared.context,
            &self.info,
            code,
            options,
            watch_writes,
        )?;
        let entry = |name: &str| {
            ClKernel::create(&built, name)
                .map_err(|e| BackendError::Launch(format!("kernel entry {name}: {e}")))
        };
        let kernel = entry("wv_kernel")?;
        // The launch entry's own limit, which its private memory may make smaller than the
        // device's.
        let max_work_group = kernel
            .get_work_group_size(self.shared.context.default_device())
            .unwrap_or(self.max_work_group)
            .min(self.max_work_group);
        let reset = entry("wv_reset")?;
        Ok(Arc::new(OpenClKernel {
            shared: self.shared.clone(),
            _program: built,
            kernel,
            reset,
            sync_imports: options.synchronous_imports(),
            watch_writes,
            compute_units: self.info.compute_units,
            max_work_group,
            global_memory: self.info.global_memory,
            max_allocation: self.info.max_allocation,
        }))
    }

    fn copy_bandwidth(&self, bytes: usize) -> Result<f64, BackendError> {
        let ctx = &self.shared.context;
        let buffer = || {
            // SAFETY: no host pointer; the runtime allocates the buffer.
            unsafe {
                Buffer::<u8>::create(ctx, CL_MEM_READ_WRITE, bytes.max(1), std::ptr::null_mut())
            }
            .map_err(|e| BackendError::Launch(format!("a device buffer of {bytes} bytes: {e}")))
        };
        let (src, mut dst) = (buffer()?, buffer()?);
        let queue = self.shared.lock_queue();
        super::best_rate(bytes, 5, || {
            // SAFETY: both buffers hold `bytes` bytes.
            unsafe { queue.enqueue_copy_buffer(&src, &mut dst, 0, 0, bytes.max(1), &[]) }
                .map_err(|e| BackendError::Launch(format!("copying a buffer: {e}")))?;
            queue
                .finish()
                .map_err(|e| BackendError::Launch(format!("copying a buffer: {e}")))
        })
    }
}

/// A built OpenCL kernel: its launch entry (`wv_kernel`) and its reset entry (`wv_reset`).
/// Launches are serialised (under the queue's mutex): kernel arguments belong to the kernel
/// object.
struct OpenClKernel {
    shared: Arc<Shared>,
    _program: opencl3::program::Program,
    kernel: ClKernel,
    reset: ClKernel,
    /// The host serves imports while the launch entry runs (`host_calls.rs`).
    sync_imports: bool,
    /// Its stores leave dirty pages to the fleet's write watch (`watched.rs`).
    watch_writes: bool,
    compute_units: u32,
    /// The largest work-group the launch entry may run in.
    max_work_group: usize,
    global_memory: u64,
    max_allocation: u64,
}

// SAFETY: the kernel objects are used only under the shared queue's mutex.
unsafe impl Send for OpenClKernel {}
unsafe impl Sync for OpenClKernel {}

impl OpenClKernel {
    /// Runs `entry` (named `name`) on `fleet`, one work-item per VM, and waits for it, serving
    /// the VMs' imports meanwhile through `imports` if given (synchronous imports).
    fn run(
        &self,
        entry: &ClKernel,
        name: &str,
        fleet: &mut dyn DeviceFleet,
        imports: Option<&dyn ImportService>,
    ) -> Result<LaunchTimes, BackendError> {
        let fleet = downcast::<ClFleet>(fleet, "opencl")?;
        if !fleet.belongs_to(&self.shared) {
            return Err(BackendError::Launch(
                "this fleet's storage belongs to another OpenCL context".into(),
            ));
        }
        let num_vms = fleet.shape().layout.num_vms as usize;
        if num_vms == 0 {
            // OpenCL 1.2 rejects an empty range; there is nothing to run.
            return Ok(LaunchTimes::default());
        }
        // Launches serving imports on a CPU device leave a core to the host (`host_calls.rs`);
        // the others let the runtime pick work-groups.
        let local = imports.and_then(|_| {
            host_calls::local_size_sharing_cores(
                self.shared.host_resident,
                self.compute_units,
                self.max_work_group,
                num_vms,
            )
        });
        // The entries return for indices past the fleet's VMs.
        let global = local.map_or(num_vms, |l| num_vms.div_ceil(l) * l);
        // Guard faults keep an in-process compiler's builds waiting (`backend/signals.rs`).
        crate::backend::signals::while_faulting_if(fleet.guarded(), || {
            self.enqueue_and_wait(entry, name, fleet, imports, local, global)
        })
    }

    /// [`run`](Self::run)'s launch of `entry` over `global` work-items in groups of `local`.
    fn enqueue_and_wait(
        &self,
        entry: &ClKernel,
        name: &str,
        fleet: &mut ClFleet,
        imports: Option<&dyn ImportService>,
        local: Option<usize>,
        global: usize,
    ) -> Result<LaunchTimes, BackendError> {
        let queue = self.shared.lock_queue();
        let start = Instant::now();
        // Buffers the host mapped since the last launch are unmapped first (queued ahead of
        // the kernel, which the in-order queue starts after them).
        fleet.unmap_all(&queue)?;
        fleet.set_args(entry, name)?;
        // SAFETY: every parameter is set to a buffer or value of its type (`set_args`), and
        // the buffers live as long as the fleet, which outlives the wait below.
        let running = unsafe {
            queue.enqueue_nd_range_kernel(
                entry.get(),
                1,
                std::ptr::null(),
                &global,
                local
                    .as_ref()
                    .map_or(std::ptr::null(), |l| l as *const usize),
                &[],
            )
        }
        .map_err(|e| BackendError::Launch(format!("enqueueing {name}: {e}")))?;
        if let Some(imports) = imports {
            let storage = fleet.shared_memory().ok_or_else(|| {
                BackendError::Launch(
                    "a kernel with synchronous imports needs a fleet in shared memory".into(),
                )
            })?;
            queue
                .flush()
                .map_err(|e| BackendError::Launch(format!("starting {name}: {e}")))?;
            host_calls::serve_until_done(&running, storage, fleet.shape(), imports)?;
        }
        // The host reads every control block next: map them within this wait.
        let maps = fleet.map_after_launch(&queue, &[FleetBuffer::Vms]);
        queue
            .finish()
            .map_err(|e| BackendError::Launch(format!("running {name}: {e}")))?;
        fleet.maps_done(maps);
        // The fleet stays on the device: nothing moves at a launch.
        Ok(LaunchTimes {
            execute: start.elapsed(),
            transfer: Duration::ZERO,
        })
    }
}

impl Kernel for OpenClKernel {
    fn create_fleet(
        &self,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        _: VmmOnly,
    ) -> Result<Box<dyn DeviceFleet>, BackendError> {
        Ok(Box::new(ClFleet::new(
            self.shared.clone(),
            shape,
            data_blob,
            elem_blob,
            self.sync_imports,
            self.watch_writes,
        )?))
    }

    fn launch(
        &self,
        fleet: &mut dyn DeviceFleet,
        imports: &dyn ImportService,
    ) -> Result<LaunchTimes, BackendError> {
        // With continuations imports stop the VM; synchronous imports are served meanwhile.
        let serving = self.sync_imports.then_some(imports);
        self.run(&self.kernel, "wv_kernel", fleet, serving)
    }

    fn reset(&self, fleet: &mut dyn DeviceFleet) -> Result<LaunchTimes, BackendError> {
        let cl = downcast::<ClFleet>(fleet, "opencl")?;
        // The host's share of a reset of a watched fleet (finding written pages, protecting
        // new ones) counts as the reset's execution, as on `cpu`.
        let start = Instant::now();
        let resetting = cl.collect_written_pages()?;
        let collected = start.elapsed();
        let mut times = self.run(&self.reset, "wv_reset", cl, None)?;
        let host = Instant::now();
        cl.watch_new_pages(&resetting)?;
        cl.close_shrunk_memories(&resetting)?;
        times.execute += collected + host.elapsed();
        Ok(times)
    }

    fn check_capacity(
        &self,
        num_vms: u64,
        per_vm: u64,
        largest_per_vm: u64,
    ) -> Result<(), BackendError> {
        let fits =
            |n: u64| n * per_vm <= self.global_memory && n * largest_per_vm <= self.max_allocation;
        if fits(num_vms) {
            return Ok(());
        }
        let by_total = self.global_memory / per_vm.max(1);
        let by_alloc = self.max_allocation / largest_per_vm.max(1);
        Err(BackendError::Launch(format!(
            "{num_vms} VMs need {} MiB ({} MiB in one buffer), more than the device's {} MiB of global memory / {} MiB per allocation; at most {} VMs fit with these memory settings",
            (num_vms * per_vm) >> 20,
            (num_vms * largest_per_vm) >> 20,
            self.global_memory >> 20,
            self.max_allocation >> 20,
            by_total.min(by_alloc)
        )))
    }
}
