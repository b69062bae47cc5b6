//! Modules (PTX text, translated and compiled by `warpvisor::ptx`), kernels, launches and
//! error names.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::Mutex;

use warpvisor::ptx::{Dim3, PtxModule, PtxProgram};

use crate::device::*;

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
    load_module(m, image, &JitOptions::default())
}

/// `CUjit_option` values the driver acts on.
const JIT_INFO_LOG_BUFFER: c_int = 3;
const JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
const JIT_ERROR_LOG_BUFFER: c_int = 5;
const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;
const JIT_OPTIMIZATION_LEVEL: c_int = 7;

/// What `cuModuleLoadDataEx`'s options ask for.
#[derive(Default)]
struct JitOptions {
    /// `CU_JIT_OPTIMIZATION_LEVEL` (0-4): the host C compiler's -O level (0, 1, 2 for 2-4);
    /// without it, `WARPVISOR_CUDA_JIT_LEVEL`, else the level for the module's size
    /// (`warpvisor::ptx::auto_opt_level`).
    level: Option<u32>,
    /// Where to write the compile log and the error, and the option value that holds each
    /// one's size (the driver writes back how many bytes it used, as CUDA's does).
    info_log: Option<(*mut c_char, *mut *mut c_void)>,
    error_log: Option<(*mut c_char, *mut *mut c_void)>,
}

/// Copies `text` into a log buffer of the size in `*size_slot`, NUL-terminated and cut to
/// fit; stores the bytes written (with the NUL) back into the slot.
unsafe fn write_log((buffer, size_slot): (*mut c_char, *mut *mut c_void), text: &str) {
    let cap = if size_slot.is_null() {
        0
    } else {
        *size_slot as usize
    };
    if buffer.is_null() || cap == 0 {
        return;
    }
    let n = text.len().min(cap - 1);
    std::ptr::copy_nonoverlapping(text.as_ptr(), buffer as *mut u8, n);
    *buffer.add(n) = 0;
    *size_slot = (n + 1) as *mut c_void;
}

/// `cuModuleLoadData` with options: the log buffers and the optimisation level are honoured,
/// the rest (register limits, targets, caches) mean nothing for the CPU and are accepted.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    m: *mut *mut c_void,
    image: *const c_void,
    n: c_uint,
    options: *mut c_int,
    values: *mut *mut c_void,
) -> CUresult {
    let mut jit = JitOptions::default();
    if n > 0 && (options.is_null() || values.is_null()) {
        return INVALID_VALUE;
    }
    let (mut info, mut info_size, mut error, mut error_size) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    for k in 0..n as usize {
        let value = *values.add(k);
        match *options.add(k) {
            JIT_OPTIMIZATION_LEVEL => jit.level = Some((value as usize).min(4) as u32),
            JIT_INFO_LOG_BUFFER => info = value as *mut c_char,
            JIT_INFO_LOG_BUFFER_SIZE_BYTES => info_size = values.add(k),
            JIT_ERROR_LOG_BUFFER => error = value as *mut c_char,
            JIT_ERROR_LOG_BUFFER_SIZE_BYTES => error_size = values.add(k),
            _ => {}
        }
    }
    jit.info_log = (!info.is_null()).then_some((info, info_size));
    jit.error_log = (!error.is_null()).then_some((error, error_size));
    load_module(m, image, &jit)
}

unsafe fn load_module(m: *mut *mut c_void, image: *const c_void, jit: &JitOptions) -> CUresult {
    let d = tri!(driver());
    if m.is_null() || image.is_null() {
        return INVALID_VALUE;
    }
    let fail = |e: &dyn std::fmt::Display, rc: CUresult| {
        if let Some(log) = jit.error_log {
            write_log(log, &e.to_string());
        }
        rc
    };
    let Ok(text) = CStr::from_ptr(image as *const c_char).to_str() else {
        verbose("the module image is not UTF-8 PTX text (cubins are not supported)");
        return fail(&"the module image is not UTF-8 PTX text", INVALID_PTX);
    };
    let module = match PtxModule::parse(text) {
        Ok(x) => x,
        Err(e) => return fail(&e, code(&e)),
    };
    // CUDA's levels 0-4 onto the C compiler's -O0..-O2.
    let level = jit
        .level
        .or_else(|| {
            std::env::var("WARPVISOR_CUDA_JIT_LEVEL")
                .ok()
                .and_then(|v| v.parse().ok())
        })
        .map(|l: u32| l.min(2) as u8);
    let loaded = if simt_log().is_some() {
        d.runtime.load_simt(&module, level)
    } else {
        d.runtime.load_with(&module, level)
    };
    match loaded {
        Ok(program) => {
            let used = program.opt_level();
            verbose(&format!("module translated to C, compiled at -O{used}"));
            if let Some(log) = jit.info_log {
                write_log(
                    log,
                    &format!("warpvisor: PTX translated to C, compiled at -O{used}"),
                );
            }
            *m = Box::into_raw(Box::new(Module {
                program,
                functions: Mutex::new(HashMap::new()),
            })) as *mut c_void;
            SUCCESS
        }
        Err(e) => fail(&e, code(&e)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(m: *mut c_void) -> CUresult {
    if m.is_null() {
        return INVALID_HANDLE;
    }
    // Launches of its kernels may still be queued or running.
    let pending = crate::streams::synchronize_all();
    drop(Box::from_raw(m as *mut Module));
    if pending != SUCCESS {
        return pending;
    }
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
    stream: *mut c_void,
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
    let (grid, block) = (Dim3::new(gx, gy, gz), Dim3::new(bx, by, bz));
    // What CUDA refuses at once is refused here; the launch itself runs on the stream.
    if let Err(e) = module
        .program
        .check_launch(&function.name, grid, block, shared, buffer.len())
    {
        return code(&e);
    }
    let launch = QueuedLaunch {
        function: function as *const Function,
    };
    crate::streams::enqueue(
        stream,
        Box::new(move || {
            // SAFETY: `cuModuleUnload`, which frees the module and its functions, first waits
            // for every stream.
            let function = unsafe { &*launch.function() };
            let module = unsafe { &*function.module };
            let before = module.program.simt_counts(&function.name);
            match module
                .program
                .launch_raw(&function.name, grid, block, shared, buffer)
            {
                Ok(()) => {
                    if let (Some(b), Some(after)) =
                        (before, module.program.simt_counts(&function.name))
                    {
                        log_simt(&function.name, [gx, gy, gz], [bx, by, bz], &after.since(&b));
                    }
                    SUCCESS
                }
                Err(e) => code(&e),
            }
        }),
    )
}

/// A launch on its way to a stream's thread: the kernel it runs.
struct QueuedLaunch {
    function: *const Function,
}

impl QueuedLaunch {
    /// The kernel (a method, so that a closure captures the whole value, which is `Send`).
    fn function(&self) -> *const Function {
        self.function
    }
}

// SAFETY: the function and its module are only read, and outlive the launch (above).
unsafe impl Send for QueuedLaunch {}

/// `WARPVISOR_CUDA_SIMT=PATH`: modules run under SIMT emulation and every launch appends a
/// line of JSON with its counts to PATH.
fn simt_log() -> Option<std::path::PathBuf> {
    std::env::var_os("WARPVISOR_CUDA_SIMT")
        .filter(|p| !p.is_empty())
        .map(Into::into)
}

fn log_simt(kernel: &str, grid: [u32; 3], block: [u32; 3], c: &warpvisor::ptx::SimtCounts) {
    let Some(path) = simt_log() else { return };
    let line = serde_json::json!({
        "kernel": kernel,
        "grid": grid,
        "block": block,
        "counts": c,
        "efficiency": c.efficiency(),
        "sectors_per_memory_instruction": c.sectors_per_memory_instruction(),
    });
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        verbose(&format!(
            "cannot append SIMT counts to {}: {e}",
            path.display()
        ));
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
        crate::streams::NOT_READY => (b"CUDA_ERROR_NOT_READY\0", b"device not ready\0"),
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
