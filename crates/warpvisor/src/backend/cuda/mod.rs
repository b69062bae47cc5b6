//! The `cuda` backend: the CUDA C++ kernel compiled by NVRTC and launched through the driver
//! API, one thread per VM.
//!
//! Both libraries are loaded at run time (`cudarc`'s `dynamic-loading`): warpvisor builds and
//! runs where CUDA is not installed, and says which library is missing when this backend is
//! asked for. NVRTC alone (no driver, no GPU) is enough for [`compile_ptx`].

mod program;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

pub use program::{compile_ptx, nvrtc_status, DEFAULT_ARCH};

use super::{Backend, BackendError, Kernel, LaunchTimes};
use crate::codegen::KernelOptions;
use crate::vmm::FleetBuffers;

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

/// Every CUDA device, or why there are none (no driver library, no NVRTC, no device).
pub fn devices() -> Result<Vec<DeviceInfo>, BackendError> {
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
        let ptx = compile_ptx(code, options, self.arch)?;
        let module = self
            .context
            .load_module(Ptx::from_src(ptx))
            .map_err(|e| driver_error("loading the PTX module", e))?;
        let function = module
            .load_function("wv_kernel")
            .map_err(|e| driver_error("kernel wv_kernel", e))?;
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(Arc::new(CudaKernel {
            stream: Mutex::new(stream),
            function,
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

/// A loaded CUDA kernel.
struct CudaKernel {
    stream: Mutex<Arc<CudaStream>>,
    function: CudaFunction,
    global_memory: u64,
}

/// The bytes of a host buffer of plain-data words.
fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: every fleet buffer holds plain integers (or `#[repr(C)]` structs of them).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// The bytes of a host buffer of plain-data words, writable.
fn bytes_of_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; any byte pattern is a valid value of these types.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// A device copy of a host buffer (at least one byte: CUDA has no empty allocations).
fn upload(stream: &Arc<CudaStream>, host: &[u8]) -> Result<CudaSlice<u8>, BackendError> {
    if host.is_empty() {
        return stream
            .alloc_zeros::<u8>(1)
            .map_err(|e| driver_error("allocating device memory", e));
    }
    stream
        .clone_htod(host)
        .map_err(|e| driver_error(&format!("copying {} bytes to the device", host.len()), e))
}

fn download(
    stream: &Arc<CudaStream>,
    dev: &CudaSlice<u8>,
    host: &mut [u8],
) -> Result<(), BackendError> {
    if host.is_empty() {
        return Ok(());
    }
    stream
        .memcpy_dtoh(dev, host)
        .map_err(|e| driver_error("copying results from the device", e))
}

impl Kernel for CudaKernel {
    fn launch(&self, fleet: &mut FleetBuffers) -> Result<LaunchTimes, BackendError> {
        let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let abi = fleet.abi();
        let t0 = Instant::now();
        // Every buffer goes down before and comes back after the launch: the host may have
        // changed any of them while servicing hypercalls.
        let mem = upload(&stream, fleet.mem.as_slice())?;
        let mem_pages = upload(&stream, bytes_of(&fleet.mem_pages))?;
        let globals = upload(&stream, bytes_of(&fleet.globals))?;
        let tables = upload(&stream, bytes_of(&fleet.tables))?;
        let table_sizes = upload(&stream, bytes_of(&fleet.table_sizes))?;
        let dropped = upload(&stream, &fleet.dropped)?;
        let data_blob = upload(&stream, &fleet.data_blob)?;
        let elem_blob = upload(&stream, bytes_of(&fleet.elem_blob))?;
        let stack = upload(&stream, bytes_of(&fleet.stack))?;
        let ret = upload(&stream, bytes_of(&fleet.ret))?;
        let vms = upload(&stream, bytes_of(&fleet.vms))?;
        stream
            .synchronize()
            .map_err(|e| driver_error("copying to the device", e))?;
        let down = t0.elapsed();
        let t1 = Instant::now();
        let cfg = LaunchConfig {
            grid_dim: (abi.num_vms.div_ceil(BLOCK), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&self.function);
        launch
            .arg(&mem)
            .arg(&mem_pages)
            .arg(&globals)
            .arg(&tables)
            .arg(&table_sizes)
            .arg(&dropped)
            .arg(&data_blob)
            .arg(&elem_blob)
            .arg(&stack)
            .arg(&ret)
            .arg(&vms)
            .arg(&abi.mem_stride)
            .arg(&abi.num_vms)
            .arg(&abi.max_pages)
            .arg(&abi.stack_words)
            .arg(&abi.max_depth);
        // SAFETY: the arguments match `wv_kernel`'s parameters in order and type; every
        // buffer is as large as the fleet layout the kernel was built for says.
        unsafe { launch.launch(cfg) }.map_err(|e| driver_error("launching the kernel", e))?;
        stream
            .synchronize()
            .map_err(|e| driver_error("running the kernel", e))?;
        let execute = t1.elapsed();
        let t2 = Instant::now();
        download(&stream, &mem, fleet.mem.as_mut_slice())?;
        download(&stream, &mem_pages, bytes_of_mut(&mut fleet.mem_pages))?;
        download(&stream, &globals, bytes_of_mut(&mut fleet.globals))?;
        download(&stream, &tables, bytes_of_mut(&mut fleet.tables))?;
        download(&stream, &table_sizes, bytes_of_mut(&mut fleet.table_sizes))?;
        download(&stream, &dropped, &mut fleet.dropped)?;
        download(&stream, &stack, bytes_of_mut(&mut fleet.stack))?;
        download(&stream, &ret, bytes_of_mut(&mut fleet.ret))?;
        download(&stream, &vms, bytes_of_mut(&mut fleet.vms))?;
        stream
            .synchronize()
            .map_err(|e| driver_error("copying from the device", e))?;
        Ok(LaunchTimes {
            execute,
            transfer: down + t2.elapsed(),
        })
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
