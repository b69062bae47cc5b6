//! The `opencl` backend: the OpenCL C kernel on any OpenCL device, one work-item per VM.
//!
//! The OpenCL library is loaded at run time (`opencl3`'s `dynamic` feature): warpvisor builds
//! and runs where no OpenCL is installed, and says why when this backend is asked for.

mod program;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::{ExecuteKernel, Kernel as ClKernel};
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR,
};
use opencl3::types::{cl_mem, CL_NON_BLOCKING};

use super::{Backend, BackendError, Kernel, LaunchTimes};
use crate::codegen::KernelOptions;
use crate::vmm::FleetBuffers;

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
}

fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: "opencl",
        reason: reason.into(),
    }
}

/// Every OpenCL device of every platform, or why there are none.
pub fn devices() -> Result<Vec<(DeviceInfo, Device)>, BackendError> {
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
}

/// The context and queue every kernel of this backend uses; launches are serialised.
struct Shared {
    context: Context,
    queue: Mutex<CommandQueue>,
}

// SAFETY: the queue is used only under its mutex; contexts are thread-safe in OpenCL.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl OpenClBackend {
    /// Opens device `index` (default: the first GPU, else the first device).
    pub fn new(index: Option<usize>) -> Result<Self, BackendError> {
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
            info: chosen.0,
            shared: Arc::new(Shared {
                context,
                queue: Mutex::new(queue),
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

    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError> {
        let built = program::build(&self.shared.context, &self.info, code, options)?;
        let kernel = ClKernel::create(&built, "wv_kernel")
            .map_err(|e| BackendError::Launch(format!("kernel wv_kernel: {e}")))?;
        Ok(Arc::new(OpenClKernel {
            shared: self.shared.clone(),
            _program: built,
            kernel,
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
        let queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
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

/// A built OpenCL kernel. Launches are serialised (under the queue's mutex): kernel
/// arguments belong to the kernel object.
struct OpenClKernel {
    shared: Arc<Shared>,
    _program: opencl3::program::Program,
    kernel: ClKernel,
    global_memory: u64,
    max_allocation: u64,
}

// SAFETY: the kernel object is used only under the shared queue's mutex.
unsafe impl Send for OpenClKernel {}
unsafe impl Sync for OpenClKernel {}

/// A device buffer over a host slice (`CL_MEM_USE_HOST_PTR`: zero-copy where the device shares
/// host memory, as PoCL does; elsewhere the runtime copies at launch and at the map after it).
fn wrap<T>(context: &Context, slice: &mut [T]) -> Result<Buffer<T>, BackendError> {
    // SAFETY: the slice outlives the buffer (released before `launch` returns).
    unsafe {
        Buffer::<T>::create(
            context,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            slice.len().max(1),
            slice.as_mut_ptr().cast(),
        )
    }
    .map_err(|e| {
        BackendError::Launch(format!(
            "creating a device buffer of {} bytes: {e}",
            std::mem::size_of_val(slice)
        ))
    })
}

/// A buffer made by [`wrap`] over `len` host elements, as `sync_all` takes it.
fn region<T>(buffer: &Buffer<T>, len: usize) -> (cl_mem, usize) {
    (buffer.get(), len.max(1) * std::mem::size_of::<T>())
}

/// Makes the host copies of `buffers` (each with its element count) current: every buffer is
/// mapped and unmapped again. The commands are queued without blocking and waited for twice
/// in all, not once per buffer: on PoCL each blocking round trip costs tens of microseconds.
fn sync_all(queue: &CommandQueue, buffers: &[(cl_mem, usize)]) -> Result<(), BackendError> {
    let mut mapped = Vec::with_capacity(buffers.len());
    for &(buffer, bytes) in buffers {
        let mut ptr: cl_mem = std::ptr::null_mut();
        // SAFETY: the mapping covers the buffer; it is released below, after the wait.
        let _event = unsafe {
            cl3::command_queue::enqueue_map_buffer(
                queue.get(),
                buffer,
                CL_NON_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                bytes.max(1),
                &mut ptr,
                0,
                std::ptr::null(),
            )
        }
        .map(opencl3::event::Event::new)
        .map_err(|e| BackendError::Launch(format!("reading back a buffer: {e}")))?;
        mapped.push((buffer, ptr));
    }
    queue
        .finish()
        .map_err(|e| BackendError::Launch(format!("reading back the buffers: {e}")))?;
    for (buffer, ptr) in mapped {
        // SAFETY: `ptr` is the mapping of `buffer` made above.
        unsafe { queue.enqueue_unmap_mem_object(buffer, ptr, &[]) }
            .map_err(|e| BackendError::Launch(format!("releasing a buffer: {e}")))?;
    }
    queue
        .finish()
        .map_err(|e| BackendError::Launch(format!("releasing the buffers: {e}")))
}

impl Kernel for OpenClKernel {
    fn launch(&self, fleet: &mut FleetBuffers) -> Result<LaunchTimes, BackendError> {
        let start = Instant::now();
        let queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        let abi = fleet.abi();
        let ctx = &self.shared.context;
        // Zero-length slices still get a 1-element buffer (OpenCL has no empty buffers).
        let mut one = [0u8; 16];
        let mem_slice: &mut [u8] = if fleet.mem.as_slice().is_empty() {
            &mut one
        } else {
            fleet.mem.as_mut_slice()
        };
        let mem_len = mem_slice.len();
        let mem = wrap(ctx, mem_slice)?;
        let mem_pages = wrap(ctx, &mut fleet.mem_pages)?;
        let globals = wrap(ctx, &mut fleet.globals)?;
        let tables = wrap(ctx, &mut fleet.tables)?;
        let table_sizes = wrap(ctx, &mut fleet.table_sizes)?;
        let dropped = wrap(ctx, &mut fleet.dropped)?;
        let data_blob = wrap(ctx, &mut fleet.data_blob)?;
        let elem_blob = wrap(ctx, &mut fleet.elem_blob)?;
        let stack = wrap(ctx, &mut fleet.stack)?;
        let ret = wrap(ctx, &mut fleet.ret)?;
        let vms = wrap(ctx, &mut fleet.vms)?;
        let wrapped = start.elapsed();
        let run = Instant::now();
        // SAFETY: the arguments match `wv_kernel`'s parameters in order and type.
        unsafe {
            ExecuteKernel::new(&self.kernel)
                .set_arg(&mem)
                .set_arg(&mem_pages)
                .set_arg(&globals)
                .set_arg(&tables)
                .set_arg(&table_sizes)
                .set_arg(&dropped)
                .set_arg(&data_blob)
                .set_arg(&elem_blob)
                .set_arg(&stack)
                .set_arg(&ret)
                .set_arg(&vms)
                .set_arg(&abi.mem_stride)
                .set_arg(&abi.num_vms)
                .set_arg(&abi.max_pages)
                .set_arg(&abi.stack_words)
                .set_arg(&abi.max_depth)
                .set_global_work_size(abi.num_vms as usize)
                .enqueue_nd_range(&queue)
                .map_err(|e| BackendError::Launch(format!("enqueueing the kernel: {e}")))?;
        }
        queue
            .finish()
            .map_err(|e| BackendError::Launch(format!("running the kernel: {e}")))?;
        let execute = run.elapsed();
        let back = Instant::now();
        sync_all(
            &queue,
            &[
                region(&mem, mem_len),
                region(&mem_pages, fleet.mem_pages.len()),
                region(&globals, fleet.globals.len()),
                region(&tables, fleet.tables.len()),
                region(&table_sizes, fleet.table_sizes.len()),
                region(&dropped, fleet.dropped.len()),
                region(&stack, fleet.stack.len()),
                region(&ret, fleet.ret.len()),
                region(&vms, fleet.vms.len()),
            ],
        )?;
        Ok(LaunchTimes {
            execute,
            transfer: wrapped + back.elapsed(),
        })
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
