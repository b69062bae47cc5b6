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
