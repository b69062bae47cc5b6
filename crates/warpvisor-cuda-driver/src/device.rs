//! Initialisation, the device and its attributes, contexts: the entry points every driver-API
//! program calls first, and the state the other modules share. Names and `_v2` suffixes are
//! `cuda.h` 12.x's; handles are boxed Rust objects; a device pointer is a host address inside
//! an allocation of the runtime.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::{Mutex, OnceLock};

use warpvisor::ptx::{DeviceBuffer, PtxError, PtxRuntime};

/// `CUresult`.
pub type CUresult = c_uint;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;

pub(crate) const SUCCESS: CUresult = 0;
pub(crate) const INVALID_VALUE: CUresult = 1;
pub(crate) const OUT_OF_MEMORY: CUresult = 2;
pub(crate) const NOT_INITIALIZED: CUresult = 3;
pub(crate) const INVALID_DEVICE: CUresult = 101;
pub(crate) const INVALID_PTX: CUresult = 218;
pub(crate) const INVALID_HANDLE: CUresult = 400;
pub(crate) const NOT_FOUND: CUresult = 500;
pub(crate) const NOT_SUPPORTED: CUresult = 801;
pub(crate) const UNKNOWN: CUresult = 999;

/// The process's driver state.
pub(crate) struct Driver {
    pub(crate) runtime: PtxRuntime,
    /// Device allocations by address.
    pub(crate) memory: Mutex<HashMap<u64, DeviceBuffer>>,
    /// Page-locked host allocations by address: runtime buffers, which kernels may touch.
    pub(crate) host: Mutex<HashMap<u64, DeviceBuffer>>,
    cores: usize,
}

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

pub(crate) fn verbose(what: &str) {
    if std::env::var_os("WARPVISOR_CUDA_VERBOSE").is_some() {
        eprintln!("warpvisor CUDA driver: {what}");
    }
}

pub(crate) fn driver() -> Result<&'static Driver, CUresult> {
    match DRIVER.get() {
        Some(Ok(d)) => Ok(d),
        Some(Err(_)) => Err(UNKNOWN),
        None => Err(NOT_INITIALIZED),
    }
}

pub(crate) fn code(e: &PtxError) -> CUresult {
    verbose(&e.to_string());
    e.cuda_code()
}

/// The context handle: one per process, never null.
static CONTEXT: u8 = 0;
fn context() -> *mut c_void {
    &CONTEXT as *const u8 as *mut c_void
}

#[no_mangle]
pub unsafe extern "C" fn cuInit(_flags: c_uint) -> CUresult {
    let d = DRIVER.get_or_init(|| {
        let runtime = PtxRuntime::new().map_err(|e| e.to_string())?;
        let cores = runtime.workers();
        Ok(Driver {
            runtime,
            memory: Mutex::new(HashMap::new()),
            host: Mutex::new(HashMap::new()),
            cores,
        })
    });
    match d {
        Ok(_) => SUCCESS,
        Err(e) => {
            verbose(e);
            UNKNOWN
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CUresult {
    if v.is_null() {
        return INVALID_VALUE;
    }
    *v = 12080;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CUresult {
    tri!(driver());
    if n.is_null() {
        return INVALID_VALUE;
    }
    *n = 1;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) -> CUresult {
    tri!(driver());
    if dev.is_null() {
        return INVALID_VALUE;
    }
    if ordinal != 0 {
        return INVALID_DEVICE;
    }
    *dev = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    let d = tri!(driver());
    if dev != 0 {
        return INVALID_DEVICE;
    }
    if name.is_null() || len <= 0 {
        return INVALID_VALUE;
    }
    let s = format!("warpvisor CPU ({} cores)", d.cores);
    let n = s.len().min(len as usize - 1);
    std::ptr::copy_nonoverlapping(s.as_ptr(), name as *mut u8, n);
    *name.add(n) = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    tri!(driver());
    if dev != 0 {
        return INVALID_DEVICE;
    }
    if bytes.is_null() {
        return INVALID_VALUE;
    }
    // What the host can give: its physical memory.
    let pages = libc_sysconf(libc::_SC_PAGESIZE) * libc_sysconf(libc::_SC_PHYS_PAGES);
    *bytes = pages.max(0) as usize;
    SUCCESS
}

fn libc_sysconf(name: c_int) -> i64 {
    // SAFETY: sysconf only reads.
    unsafe { libc::sysconf(name) as i64 }
}

/// Device attributes (CUdevice_attribute numbers): an H100's limits, this host's cores.
fn attribute(a: c_int, cores: usize) -> Option<c_int> {
    Some(match a {
        1 => 1024,            // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,        // MAX_BLOCK_DIM_X, _Y
        4 => 64,              // MAX_BLOCK_DIM_Z
        5 => i32::MAX,        // MAX_GRID_DIM_X
        6 | 7 => 65535,       // MAX_GRID_DIM_Y, _Z
        8 => 48 * 1024,       // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 64 * 1024,       // TOTAL_CONSTANT_MEMORY
        10 => 32,             // WARP_SIZE
        12 => 65536,          // MAX_REGISTERS_PER_BLOCK
        13 => 1_755_000,      // CLOCK_RATE (kHz)
        16 => cores as c_int, // MULTIPROCESSOR_COUNT
        19 => 1,              // CAN_MAP_HOST_MEMORY (page-locked memory is mapped)
        31 => 1,              // CONCURRENT_KERNELS (streams run at once)
        40 => 1,              // ASYNC_ENGINE_COUNT (copies run beside kernels)
        39 => 2048,           // MAX_THREADS_PER_MULTIPROCESSOR
        41 => 1,              // UNIFIED_ADDRESSING
        75 => 9,              // COMPUTE_CAPABILITY_MAJOR
        76 => 0,              // COMPUTE_CAPABILITY_MINOR
        81 => 228 * 1024,     // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        97 => 227 * 1024,     // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        115 => 0,             // MEMORY_POOLS_SUPPORTED: allocations are synchronous
        _ => 0,
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(v: *mut c_int, a: c_int, dev: CUdevice) -> CUresult {
    let d = tri!(driver());
    if dev != 0 {
        return INVALID_DEVICE;
    }
    if v.is_null() {
        return INVALID_VALUE;
    }
    match attribute(a, d.cores) {
        Some(x) => {
            *v = x;
            SUCCESS
        }
        None => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(
    ctx: *mut *mut c_void,
    dev: CUdevice,
) -> CUresult {
    tri!(driver());
    if dev != 0 {
        return INVALID_DEVICE;
    }
    if ctx.is_null() {
        return INVALID_VALUE;
    }
    *ctx = context();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(_dev: CUdevice) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    ctx: *mut *mut c_void,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    cuDevicePrimaryCtxRetain(ctx, dev)
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(_ctx: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(_ctx: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut *mut c_void) -> CUresult {
    if ctx.is_null() {
        return INVALID_VALUE;
    }
    *ctx = if driver().is_ok() {
        context()
    } else {
        std::ptr::null_mut()
    };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(_ctx: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut *mut c_void) -> CUresult {
    if !ctx.is_null() {
        *ctx = context();
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(dev: *mut CUdevice) -> CUresult {
    if dev.is_null() {
        return INVALID_VALUE;
    }
    *dev = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    crate::streams::synchronize_all()
}

/// `CU_LIMIT_STACK_SIZE`.
const LIMIT_STACK_SIZE: c_int = 0;

/// The stack each thread gets (`CU_LIMIT_STACK_SIZE`), as last set; CUDA's default is 1 KiB.
static STACK_SIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1024);

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetLimit(limit: c_int, value: usize) -> CUresult {
    if limit != LIMIT_STACK_SIZE {
        // Heap and printf limits: nothing here is sized by them.
        return SUCCESS;
    }
    // The threads of a CTA run one at a time to their next barrier, and a call never splits,
    // so one thread's call chain has the CTA's whole frame stack.
    if value as u64 > warpvisor::ptx::runtime::FRAME_STACK_BYTES {
        verbose(&format!(
            "a stack of {value} bytes a thread: device functions' frames have {} bytes here",
            warpvisor::ptx::runtime::FRAME_STACK_BYTES
        ));
        return INVALID_VALUE;
    }
    STACK_SIZE.store(value, std::sync::atomic::Ordering::Relaxed);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetLimit(v: *mut usize, limit: c_int) -> CUresult {
    if v.is_null() {
        return INVALID_VALUE;
    }
    *v = match limit {
        LIMIT_STACK_SIZE => STACK_SIZE.load(std::sync::atomic::Ordering::Relaxed),
        _ => 1024,
    };
    SUCCESS
}
