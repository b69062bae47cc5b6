//! The exported driver entry points (`extern "C"`, the names and `_v2` suffixes of
//! `cuda.h` 12.x). Handles are boxed Rust objects; a device pointer is a host address inside
//! an allocation of the runtime.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use warpvisor::ptx::{DeviceBuffer, Dim3, PtxError, PtxModule, PtxProgram, PtxRuntime};

/// `CUresult`.
pub type CUresult = c_uint;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;

const SUCCESS: CUresult = 0;
const INVALID_VALUE: CUresult = 1;
const OUT_OF_MEMORY: CUresult = 2;
const NOT_INITIALIZED: CUresult = 3;
const INVALID_DEVICE: CUresult = 101;
const INVALID_PTX: CUresult = 218;
const INVALID_HANDLE: CUresult = 400;
const NOT_FOUND: CUresult = 500;
const NOT_SUPPORTED: CUresult = 801;
const UNKNOWN: CUresult = 999;

/// The process's driver state.
struct Driver {
    runtime: PtxRuntime,
    /// Device allocations by address.
    memory: Mutex<HashMap<u64, DeviceBuffer>>,
    /// Page-locked host allocations (ordinary host memory here) by address, with their size.
    host: Mutex<HashMap<u64, Vec<u64>>>,
    cores: usize,
}

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

fn verbose(what: &str) {
    if std::env::var_os("WARPVISOR_CUDA_VERBOSE").is_some() {
        eprintln!("warpvisor CUDA driver: {what}");
    }
}

fn driver() -> Result<&'static Driver, CUresult> {
    match DRIVER.get() {
        Some(Ok(d)) => Ok(d),
        Some(Err(_)) => Err(UNKNOWN),
        None => Err(NOT_INITIALIZED),
    }
}

fn code(e: &PtxError) -> CUresult {
    verbose(&e.to_string());
    e.cuda_code()
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(c) => return c,
        }
    };
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
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetLimit(_limit: c_int, _value: usize) -> CUresult {
    // Stack, heap and printf limits: device functions' frames have their own stack here.
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetLimit(v: *mut usize, _limit: c_int) -> CUresult {
    if v.is_null() {
        return INVALID_VALUE;
    }
    *v = 1024;
    SUCCESS
}

// ---- memory ----

/// The allocation holding `[p, p + n)` and the offset of `p` in it.
fn find(memory: &HashMap<u64, DeviceBuffer>, p: u64, n: usize) -> Option<(&DeviceBuffer, usize)> {
    memory
        .iter()
        .find(|(&a, b)| p >= a && p - a + n as u64 <= b.len() as u64)
        .map(|(&a, b)| (b, (p - a) as usize))
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let d = tri!(driver());
    if p.is_null() || bytes == 0 {
        return INVALID_VALUE;
    }
    let b = match d.runtime.buffer(bytes) {
        Ok(b) => b,
        Err(e) => {
            verbose(&e.to_string());
            return OUT_OF_MEMORY;
        }
    };
    *p = b.address();
    if let Ok(mut m) = d.memory.lock() {
        m.insert(b.address(), b);
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(p: CUdeviceptr) -> CUresult {
    let d = tri!(driver());
    match d.memory.lock().ok().and_then(|mut m| m.remove(&p)) {
        Some(_) => SUCCESS,
        None if p == 0 => SUCCESS,
        None => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    p: *mut CUdeviceptr,
    bytes: usize,
    _s: *mut c_void,
) -> CUresult {
    cuMemAlloc_v2(p, bytes)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(p: CUdeviceptr, _s: *mut c_void) -> CUresult {
    cuMemFree_v2(p)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    let mut t = 0usize;
    let r = cuDeviceTotalMem_v2(&mut t, 0);
    if r != SUCCESS {
        return r;
    }
    if !free.is_null() {
        *free = t;
    }
    if !total.is_null() {
        *total = t;
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    if src.is_null() {
        return INVALID_VALUE;
    }
    let Ok(m) = d.memory.lock() else {
        return UNKNOWN;
    };
    let Some((b, off)) = find(&m, dst, n) else {
        return INVALID_VALUE;
    };
    let data = std::slice::from_raw_parts(src as *const u8, n);
    if b.write_at(off, data) {
        SUCCESS
    } else {
        INVALID_VALUE
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    if dst.is_null() {
        return INVALID_VALUE;
    }
    let Ok(m) = d.memory.lock() else {
        return UNKNOWN;
    };
    let Some((b, off)) = find(&m, src, n) else {
        return INVALID_VALUE;
    };
    match b.read_at(off, n) {
        Some(bytes) => {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, n);
            SUCCESS
        }
        None => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    let Ok(m) = d.memory.lock() else {
        return UNKNOWN;
    };
    let (Some((s, so)), Some((t, to))) = (find(&m, src, n), find(&m, dst, n)) else {
        return INVALID_VALUE;
    };
    match s.read_at(so, n) {
        Some(bytes) if t.write_at(to, &bytes) => SUCCESS,
        _ => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    _s: *mut c_void,
) -> CUresult {
    cuMemcpyHtoD_v2(dst, src, n)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    _s: *mut c_void,
) -> CUresult {
    cuMemcpyDtoH_v2(dst, src, n)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    _s: *mut c_void,
) -> CUresult {
    cuMemcpyDtoD_v2(dst, src, n)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: usize) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    let Ok(m) = d.memory.lock() else {
        return UNKNOWN;
    };
    let Some((b, off)) = find(&m, dst, n) else {
        return INVALID_VALUE;
    };
    if b.write_at(off, &vec![v; n]) {
        SUCCESS
    } else {
        INVALID_VALUE
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    v: u8,
    n: usize,
    _s: *mut c_void,
) -> CUresult {
    cuMemsetD8_v2(dst, v, n)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    p: *mut *mut c_void,
    bytes: usize,
    _flags: c_uint,
) -> CUresult {
    let d = tri!(driver());
    if p.is_null() {
        return INVALID_VALUE;
    }
    let mut words: Vec<u64> = Vec::new();
    if words.try_reserve_exact(bytes.div_ceil(8).max(1)).is_err() {
        return OUT_OF_MEMORY;
    }
    words.resize(bytes.div_ceil(8).max(1), 0);
    let addr = words.as_mut_ptr() as u64;
    *p = addr as *mut c_void;
    if let Ok(mut h) = d.host.lock() {
        h.insert(addr, words);
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(p: *mut *mut c_void, bytes: usize) -> CUresult {
    cuMemHostAlloc(p, bytes, 0)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    let d = tri!(driver());
    match d.host.lock().ok().and_then(|mut h| h.remove(&(p as u64))) {
        Some(_) => SUCCESS,
        None => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    _p: *mut c_void,
    _bytes: usize,
    _flags: c_uint,
) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(_p: *mut c_void) -> CUresult {
    SUCCESS
}

// ---- streams and events: everything has finished when its call returns ----

fn handle() -> *mut c_void {
    Box::into_raw(Box::new(Instant::now())) as *mut c_void
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(s: *mut *mut c_void, _flags: c_uint) -> CUresult {
    if s.is_null() {
        return INVALID_VALUE;
    }
    *s = handle();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    s: *mut *mut c_void,
    flags: c_uint,
    _p: c_int,
) -> CUresult {
    cuStreamCreate(s, flags)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(s: *mut c_void) -> CUresult {
    if !s.is_null() {
        drop(Box::from_raw(s as *mut Instant));
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(_s: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(_s: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(
    _s: *mut c_void,
    _e: *mut c_void,
    _f: c_uint,
) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(e: *mut *mut c_void, _flags: c_uint) -> CUresult {
    if e.is_null() {
        return INVALID_VALUE;
    }
    *e = handle();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(e: *mut c_void, _s: *mut c_void) -> CUresult {
    if e.is_null() {
        return INVALID_HANDLE;
    }
    *(e as *mut Instant) = Instant::now();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(_e: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(_e: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> CUresult {
    if ms.is_null() || start.is_null() || end.is_null() {
        return INVALID_VALUE;
    }
    let (a, b) = (*(start as *const Instant), *(end as *const Instant));
    *ms = b.saturating_duration_since(a).as_secs_f32() * 1e3;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CUresult {
    cuStreamDestroy_v2(e)
}

// ---- modules and launches ----

/// A loaded module; it owns the handles of its kernels (freed with it, as CUDA's are).
struct Module {
    program: PtxProgram,
    functions: Mutex<HashMap<String, Box<Function>>>,
}

/// A kernel of a module.
struct Function {
    module: *const Module,
    name: String,
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(m: *mut *mut c_void, image: *const c_void) -> CUresult {
    let d = tri!(driver());
    if m.is_null() || image.is_null() {
        return INVALID_VALUE;
    }
    let Ok(text) = CStr::from_ptr(image as *const c_char).to_str() else {
        verbose("the module image is not UTF-8 PTX text (cubins are not supported)");
        return INVALID_PTX;
    };
    let module = match PtxModule::parse(text) {
        Ok(x) => x,
        Err(e) => return code(&e),
    };
    match d.runtime.load(&module) {
        Ok(program) => {
            *m = Box::into_raw(Box::new(Module {
                program,
                functions: Mutex::new(HashMap::new()),
            })) as *mut c_void;
            SUCCESS
        }
        Err(e) => code(&e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    m: *mut *mut c_void,
    image: *const c_void,
    _n: c_uint,
    _options: *mut c_int,
    _values: *mut *mut c_void,
) -> CUresult {
    cuModuleLoadData(m, image)
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(m: *mut c_void) -> CUresult {
    if m.is_null() {
        return INVALID_HANDLE;
    }
    drop(Box::from_raw(m as *mut Module));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(
    f: *mut *mut c_void,
    m: *mut c_void,
    name: *const c_char,
) -> CUresult {
    if f.is_null() || m.is_null() || name.is_null() {
        return INVALID_VALUE;
    }
    let module = &*(m as *const Module);
    let Ok(name) = CStr::from_ptr(name).to_str() else {
        return INVALID_VALUE;
    };
    if module.program.param_layout(name).is_none() {
        return NOT_FOUND;
    }
    let Ok(mut functions) = module.functions.lock() else {
        return UNKNOWN;
    };
    let function = functions.entry(name.to_string()).or_insert_with(|| {
        Box::new(Function {
            module: module as *const Module,
            name: name.to_string(),
        })
    });
    *f = &mut **function as *mut Function as *mut c_void;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetGlobal_v2(
    p: *mut CUdeviceptr,
    bytes: *mut usize,
    m: *mut c_void,
    name: *const c_char,
) -> CUresult {
    if m.is_null() || name.is_null() {
        return INVALID_VALUE;
    }
    let module = &*(m as *const Module);
    let Ok(name) = CStr::from_ptr(name).to_str() else {
        return INVALID_VALUE;
    };
    match module.program.global(name) {
        Some((addr, size)) => {
            if !p.is_null() {
                *p = addr;
            }
            if !bytes.is_null() {
                *bytes = size as usize;
            }
            SUCCESS
        }
        None => NOT_FOUND,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncGetAttribute(v: *mut c_int, a: c_int, f: *mut c_void) -> CUresult {
    if v.is_null() || f.is_null() {
        return INVALID_VALUE;
    }
    *v = match a {
        0 => 1024, // MAX_THREADS_PER_BLOCK
        _ => 0,
    };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncSetAttribute(_f: *mut c_void, _a: c_int, _v: c_int) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncSetCacheConfig(_f: *mut c_void, _c: c_int) -> CUresult {
    SUCCESS
}

const LAUNCH_PARAM_END: usize = 0;
const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;

#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernel(
    f: *mut c_void,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    _stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    tri!(driver());
    if f.is_null() {
        return INVALID_HANDLE;
    }
    let function = &*(f as *const Function);
    let module = &*function.module;
    let Some((slots, bytes)) = module.program.param_layout(&function.name) else {
        return INVALID_HANDLE;
    };
    let mut buffer = vec![0u8; bytes as usize];
    if !params.is_null() {
        for (k, (offset, size)) in slots.iter().enumerate() {
            let p = *params.add(k);
            if p.is_null() {
                return INVALID_VALUE;
            }
            let src = std::slice::from_raw_parts(p as *const u8, *size as usize);
            buffer[*offset as usize..(*offset + *size) as usize].copy_from_slice(src);
        }
    } else if !extra.is_null() {
        // {BUFFER_POINTER, p, BUFFER_SIZE, &size, END}
        let (mut data, mut len) = (std::ptr::null::<u8>(), 0usize);
        let mut k = 0;
        loop {
            match *extra.add(k) as usize {
                LAUNCH_PARAM_END => break,
                LAUNCH_PARAM_BUFFER_POINTER => data = *extra.add(k + 1) as *const u8,
                LAUNCH_PARAM_BUFFER_SIZE => len = *(*extra.add(k + 1) as *const usize),
                _ => return INVALID_VALUE,
            }
            k += 2;
        }
        if data.is_null() || len < bytes as usize {
            return INVALID_VALUE;
        }
        buffer.copy_from_slice(std::slice::from_raw_parts(data, bytes as usize));
    } else if bytes > 0 {
        return INVALID_VALUE;
    }
    match module.program.launch_raw(
        &function.name,
        Dim3::new(gx, gy, gz),
        Dim3::new(bx, by, bz),
        shared,
        buffer,
    ) {
        Ok(()) => SUCCESS,
        Err(e) => code(&e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    n: *mut c_int,
    _f: *mut c_void,
    block: c_int,
    _shared: usize,
) -> CUresult {
    if n.is_null() || block <= 0 {
        return INVALID_VALUE;
    }
    *n = (2048 / block).max(1);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(
    _v: *mut c_void,
    _a: c_int,
    _p: CUdeviceptr,
) -> CUresult {
    NOT_SUPPORTED
}

fn error_text(e: CUresult) -> (&'static [u8], &'static [u8]) {
    match e {
        SUCCESS => (b"CUDA_SUCCESS\0", b"no error\0"),
        INVALID_VALUE => (b"CUDA_ERROR_INVALID_VALUE\0", b"invalid argument\0"),
        OUT_OF_MEMORY => (b"CUDA_ERROR_OUT_OF_MEMORY\0", b"out of memory\0"),
        NOT_INITIALIZED => (b"CUDA_ERROR_NOT_INITIALIZED\0", b"initialization error\0"),
        INVALID_DEVICE => (b"CUDA_ERROR_INVALID_DEVICE\0", b"invalid device ordinal\0"),
        INVALID_PTX => (
            b"CUDA_ERROR_INVALID_PTX\0",
            b"a PTX JIT compilation failed\0",
        ),
        INVALID_HANDLE => (b"CUDA_ERROR_INVALID_HANDLE\0", b"invalid resource handle\0"),
        NOT_FOUND => (b"CUDA_ERROR_NOT_FOUND\0", b"named symbol not found\0"),
        700 => (
            b"CUDA_ERROR_ILLEGAL_ADDRESS\0",
            b"an illegal memory access was encountered\0",
        ),
        701 => (
            b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES\0",
            b"too many resources requested for launch\0",
        ),
        719 => (
            b"CUDA_ERROR_LAUNCH_FAILED\0",
            b"unspecified launch failure\0",
        ),
        NOT_SUPPORTED => (b"CUDA_ERROR_NOT_SUPPORTED\0", b"operation not supported\0"),
        _ => (b"CUDA_ERROR_UNKNOWN\0", b"unknown error\0"),
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(e: CUresult, s: *mut *const c_char) -> CUresult {
    if s.is_null() {
        return INVALID_VALUE;
    }
    *s = error_text(e).0.as_ptr() as *const c_char;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(e: CUresult, s: *mut *const c_char) -> CUresult {
    if s.is_null() {
        return INVALID_VALUE;
    }
    *s = error_text(e).1.as_ptr() as *const c_char;
    SUCCESS
}
