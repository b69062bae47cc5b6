//! Device memory (host allocations the kernels may touch), copies, and page-locked host
//! memory (ordinary host memory here).

use std::collections::HashMap;
use std::ffi::{c_uint, c_void};

use warpvisor::ptx::DeviceBuffer;

use crate::device::*;

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
