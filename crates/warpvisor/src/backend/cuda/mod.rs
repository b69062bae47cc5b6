//! The `cuda` backend: the CUDA C++ kernel compiled by NVRTC and launched through the driver
//! API, one thread per VM. With `--calls direct` the host serves the VMs' imports while the
//! kernel runs (`host_calls.rs`).
//!
//! Both libraries are loaded at run time (`cudarc`'s `dynamic-loading`): warpvisor builds and
//! runs where CUDA is not installed, and says which library is missing when this backend is
//! asked for. NVRTC alone (no driver, no GPU) is enough for [`compile_ptx`].

mod fleet;
mod host_calls;
mod program;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::Ptx;

use fleet::CudaFleet;
pub use program::{compile_ptx, nvrtc_status, DEFAULT_ARCH};

use super::{
    downcast, Backend, BackendError, DeviceFleet, ImportService, Kernel, LaunchTimes, VmmOnly,
};
use crate::abi::FleetShape;
use crate::codegen::KernelOptions;

/// Threads per block: a multiple of the warp size; VMs of one warp run in lockstep.
const BLOCK: u32 = 128;

/// One CUDA device as `warpvisor devices` shows it.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Ordinal for `--device`.
    pub index: usize,
    /// Device name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Global memory in bytes.
    pub global_memory: u64,
    /// Why it cannot serve imports while a kernel runs (`--calls direct`), if it cannot.
    pub sync_imports_unsupported: Option<String>,
}

fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: "cuda",
        reason: reason.into(),
    }
}

fn driver_error(what: &str, e: impl std::fmt::Debug) -> BackendError {
    BackendError::Launch(format!("{what}: {e:?}"))
}

/// The environment variable naming a CUDA driver library to use instead of the system's:
/// `WARPVISOR_CUDA_DRIVER=target/release/libwarpvisor_cuda_driver.so` runs the `cuda`
/// backend on warpvisor's CUDA driver for the CPU (crate `warpvisor-cuda-driver`).
pub const DRIVER_VARIABLE: &str = "WARPVISOR_CUDA_DRIVER";

/// The driver library chosen for this process (`WARPVISOR_CUDA_DRIVER` or [`use_driver`]).
static DRIVER: std::sync::OnceLock<Result<std::path::PathBuf, String>> = std::sync::OnceLock::new();

/// Makes the `cuda` backend use the CUDA driver library at `path` (warpvisor's CPU driver,
/// `libwarpvisor_cuda_driver.so`) instead of the system's libcuda. It is loaded at once and
/// stays loaded; its SONAME is `libcuda.so`, so cudarc's `dlopen("libcuda.so")` finds it
/// among the loaded libraries instead of searching the disk. Must come before the first use
/// of the backend; a second call with another path is an error.
pub fn use_driver(path: &std::path::Path) -> Result<(), BackendError> {
    let chosen = DRIVER.get_or_init(|| {
        // SAFETY: loading a CUDA driver library runs only its initialisers; cudarc keeps
        // function pointers into it, so it is never unloaded.
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => {
                std::mem::forget(lib);
                Ok(path.to_path_buf())
            }
            Err(e) => Err(format!(
                "the CUDA driver {} cannot be loaded: {e}",
                path.display()
            )),
        }
    });
    match chosen {
        Ok(p) if p == path => Ok(()),
        Ok(p) => Err(unavailable(format!(
            "the CUDA driver {} is already in use; {} cannot replace it",
            p.display(),
            path.display()
        ))),
        Err(e) => Err(unavailable(e.clone())),
    }
}

/// Loads the library `WARPVISOR_CUDA_DRIVER` names, if set (see [`use_driver`]).
fn preload_driver() -> Result<(), BackendError> {
    match std::env::var_os(DRIVER_VARIABLE) {
        Some(path) => use_driver(std::path::Path::new(&path)),
        None => match DRIVER.get() {
            Some(Err(e)) => Err(unavailable(e.clone())),
            _ => Ok(()),
        },
    }
}

/// Whether the driver in use is warpvisor's CPU driver rather than an NVIDIA GPU's.
pub fn driver_is_cpu() -> bool {
    matches!(DRIVER.get(), Some(Ok(_)))
}

/// Every CUDA device, or why there are none (no driver library, no NVRTC, no device).
pub fn devices() -> Result<Vec<DeviceInfo>, BackendError> {
    preload_driver()?;
    // SAFETY: probing dlopens candidate library names; nothing is called unless one loads.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(unavailable(
            "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver is installed",
        ));
    }
    nvrtc_status()?;
    let count = CudaContext::device_count()
        .map_err(|e| unavailable(format!("the CUDA driver reports no devices ({e:?})")))?;
    if count <= 0 {
        return Err(unavailable("the CUDA driver reports no devices"));
    }
    let mut out = Vec::new();
    for i in 0..count as usize {
        let ctx = CudaContext::new(i).map_err(|e| driver_error("opening a CUDA device", e))?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .unwrap_or(0);
        out.push(DeviceInfo {
            index: i,
            name: ctx.name().unwrap_or_default(),
            compute_capability: ctx.compute_capability().unwrap_or((0, 0)),
            multiprocessors: sms.max(0) as u32,
            global_memory: ctx.total_mem().unwrap_or(0) as u64,
            sync_imports_unsupported: host_calls::sync_imports_unsupported(&ctx),
        });
    }
    Ok(out)
}

/// The `cuda` backend on one device.
pub struct CudaBackend {
    info: DeviceInfo,
    arch: &'static str,
    context: Arc<CudaContext>,
    /// Launches are serialised on one stream.
    stream: Mutex<Arc<CudaStream>>,
}

impl CudaBackend {
    /// Opens device `index` (default 0).
    pub fn new(index: Option<usize>) -> Result<Self, BackendError> {
        let all = devices()?;
        let i = index.unwrap_or(0);
        let info = all
            .into_iter()
            .nth(i)
            .ok_or_else(|| unavailable(format!("no CUDA device {i}")))?;
        let context =
            CudaContext::new(i).map_err(|e| driver_error("creating a CUDA context", e))?;
        let (major, minor) = info.compute_capability;
        // NVRTC takes the architecture as a static string: the few that exist are listed.
        let arch = match (major, minor) {
            (7, 0) => "compute_70",
            (7, 5) => "compute_75",
            (8, 0) => "compute_80",
            (8, 6) => "compute_86",
            (8, 9) => "compute_89",
            (9, 0) => "compute_90",
            (10, 0) => "compute_100",
            (12, 0) => "compute_120",
            _ => DEFAULT_ARCH,
        };
        let stream = context.default_stream();
        Ok(CudaBackend {
            info,
            arch,
            context,
            stream: Mutex::new(stream),
        })
    }

    /// The device this backend runs on.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError> {
        let sync_imports = options.synchronous_imports();
        if sync_imports {
            if let Some(why) = &self.info.sync_imports_unsupported {
                return Err(unavailable(format!(
                    "direct calls need the host to serve imports while a kernel runs, and {} \
                     cannot: {why} (--calls continuations works on every device)",
                    self.info.name
                )));
            }
        }
        let ptx = compile_ptx(code, options, self.arch)?;
        let module = self
            .context
            .load_module(Ptx::from_src(ptx))
            .map_err(|e| driver_error("loading the PTX module", e))?;
        let entry = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| driver_error(&format!("kernel has no entry point {name}"), e))
        };
        let launch = entry("wv_kernel")?;
        let reset = entry("wv_reset")?;
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // Copies the import service makes while a kernel runs go on a stream of their own,
        // which does not wait for the launch stream.
        let service = match sync_imports {
            true => Some(
                self.context
                    .new_stream()
                    .map_err(|e| driver_error("creating the import service's stream", e))?,
            ),
            false => None,
        };
        Ok(Arc::new(CudaKernel {
            stream: Mutex::new(stream),
            launch,
            reset,
            service,
            global_memory: self.info.global_memory,
        }))
    }

    fn copy_bandwidth(&self, bytes: usize) -> Result<f64, BackendError> {
        let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let alloc = || {
            stream
                .alloc_zeros::<u8>(bytes.max(1))
                .map_err(|e| driver_error(&format!("allocating {bytes} bytes"), e))
        };
        let (src, mut dst) = (alloc()?, alloc()?);
        super::best_rate(bytes, 5, || {
            stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(|e| driver_error("copying device memory", e))?;
            stream
                .synchronize()
                .map_err(|e| driver_error("copying device memory", e))
        })
    }
}

/// A loaded CUDA kernel: both entries of one partition's module.
struct CudaKernel {
    /// The backend's stream: launches are serialised on it, and every fleet's buffers and
    /// copies are queued on it too.
    stream: Mutex<Arc<CudaStream>>,
    /// `wv_kernel`: runs the ready VMs.
    launch: CudaFunction,
    /// `wv_reset`: puts every VM back to the instantiation image.
    reset: CudaFunction,
    /// With synchronous imports, the stream of the copies that serve them.
    service: Option<Arc<CudaStream>>,
    global_memory: u64,
}

impl CudaKernel {
    /// Runs `function` (the entry named `entry`) over every VM of `fleet` and waits for it,
    /// serving the VMs' imports meanwhile through `imports` if given (synchronous imports).
    fn run(
        &self,
        function: &CudaFunction,
        entry: &str,
        fleet: &mut dyn DeviceFleet,
        imports: Option<&dyn ImportService>,
    ) -> Result<LaunchTimes, BackendError> {
        let fleet = downcast::<CudaFleet>(fleet, "cuda")?;
        let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let serving = imports.zip(self.service.as_ref());
        let execute = fleet.run(&stream, function, entry, serving)?;
        // The buffers stay on the device: the VMM's gathered transfers are timed and counted
        // by the fleet, not here.
        Ok(LaunchTimes {
            execute,
            transfer: Duration::ZERO,
        })
    }
}

impl Kernel for CudaKernel {
    fn create_fleet(
        &self,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        _: VmmOnly,
    ) -> Result<Box<dyn DeviceFleet>, BackendError> {
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(Box::new(CudaFleet::new(
            stream,
            shape,
            data_blob,
            elem_blob,
            self.service.is_some(),
        )?))
    }

    fn launch(
        &self,
        fleet: &mut dyn DeviceFleet,
        imports: &dyn ImportService,
    ) -> Result<LaunchTimes, BackendError> {
        // With continuations imports stop the VM; synchronous imports are served meanwhile.
        let serving = self.service.is_some().then_some(imports);
        self.run(&self.launch, "wv_kernel", fleet, serving)
    }

    fn reset(&self, fleet: &mut dyn DeviceFleet) -> Result<LaunchTimes, BackendError> {
        self.run(&self.reset, "wv_reset", fleet, None)
    }

    fn check_capacity(
        &self,
        num_vms: u64,
        per_vm: u64,
        _largest_per_vm: u64,
    ) -> Result<(), BackendError> {
        if num_vms * per_vm <= self.global_memory {
            return Ok(());
        }
        Err(BackendError::Launch(format!(
            "{num_vms} VMs need {} MiB, more than the device's {} MiB; at most {} VMs fit with these memory settings",
            (num_vms * per_vm) >> 20,
            self.global_memory >> 20,
            self.global_memory / per_vm.max(1)
        )))
    }
}
