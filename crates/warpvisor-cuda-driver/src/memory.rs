//! Device memory (host allocations the kernels may touch), copies, and page-locked host
//! memory — mapped, as under CUDA's unified addressing: a kernel may touch it too, at the
//! same address (`cuMemHostGetDevicePointer`). Copies wait for the work they are ordered
//! after (`streams::settle`) and then run on the calling thread.

use std::collections::HashMap;
use std::ffi::{c_uint, c_void};

use warpvisor::ptx::DeviceBuffer;

use crate::device::*;
use crate::streams::{settle, synchronize_all};

/// The allocation holding `[p, p + n)` and the offset of `p` in it.
fn find(memory: &HashMap<u64, DeviceBuffer>, p: u64, n: usize) -> Option<(&DeviceBuffer, usize)> {
    memory
        .iter()
        .find(|(&a, b)| p >= a && p - a + n as u64 <= b.len() as u64)
        .map(|(&a, b)| (b, (p - a) as usize))
}

/// Runs `f` on the device allocation or mapped host allocation holding `[p, p + n)` and the
/// offset of `p` in it; `INVALID_VALUE` when there is none.
fn with_buffer(
    d: &Driver,
    p: u64,
    n: usize,
    f: impl FnOnce(&DeviceBuffer, usize) -> bool,
) -> CUresult {
    let (Ok(m), Ok(h)) = (d.memory.lock(), d.host.lock()) else {
        return UNKNOWN;
    };
    match find(&m, p, n).or_else(|| find(&h, p, n)) {
        Some((b, off)) if f(b, off) => SUCCESS,
        _ => INVALID_VALUE,
    }
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
    // As CUDA's, a free waits for the device: no kernel may still use the memory. The memory
    // is freed whatever an earlier launch reports.
    let pending = synchronize_all();
    match d.memory.lock().ok().and_then(|mut m| m.remove(&p)) {
        Some(_) if pending != SUCCESS => pending,
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
    cuMemcpyHtoDAsync_v2(dst, src, n, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    cuMemcpyDtoHAsync_v2(dst, src, n, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    cuMemcpyDtoDAsync_v2(dst, src, n, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    s: *mut c_void,
) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    if src.is_null() {
        return INVALID_VALUE;
    }
    tri!(settled(s));
    let data = std::slice::from_raw_parts(src as *const u8, n);
    with_buffer(d, dst, n, |b, off| b.write_at(off, data))
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    s: *mut c_void,
) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    if dst.is_null() {
        return INVALID_VALUE;
    }
    tri!(settled(s));
    with_buffer(d, src, n, |b, off| match b.read_at(off, n) {
        Some(bytes) => {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, n);
            true
        }
        None => false,
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    s: *mut c_void,
) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    tri!(settled(s));
    let mut bytes = None;
    let rc = with_buffer(d, src, n, |b, off| {
        bytes = b.read_at(off, n);
        bytes.is_some()
    });
    match bytes {
        Some(bytes) if rc == SUCCESS => with_buffer(d, dst, n, |b, off| b.write_at(off, &bytes)),
        _ => rc,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: usize) -> CUresult {
    cuMemsetD8Async(dst, v, n, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    v: u8,
    n: usize,
    s: *mut c_void,
) -> CUresult {
    let d = tri!(driver());
    if n == 0 {
        return SUCCESS;
    }
    tri!(settled(s));
    with_buffer(d, dst, n, |b, off| b.write_at(off, &vec![v; n]))
}

/// Waits for what work on stream `s` is ordered after: `Err` with the first launch error
/// among it.
unsafe fn settled(s: *mut c_void) -> Result<(), CUresult> {
    match settle(s) {
        SUCCESS => Ok(()),
        e => Err(e),
    }
}

/// Page-locked host memory, mapped for kernels at the same address: a zeroed allocation of
/// the runtime (so a kernel may touch it), kept among the host allocations.
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
    let b = match d.runtime.buffer(bytes.max(1)) {
        Ok(b) => b,
        Err(e) => {
            verbose(&e.to_string());
            return OUT_OF_MEMORY;
        }
    };
    *p = b.address() as *mut c_void;
    match d.host.lock() {
        Ok(mut h) => {
            h.insert(b.address(), b);
            SUCCESS
        }
        Err(_) => UNKNOWN,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(p: *mut *mut c_void, bytes: usize) -> CUresult {
    cuMemHostAlloc(p, bytes, 0)
}

/// The device address of page-locked host memory: the same address (unified addressing).
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    let d = tri!(driver());
    if dptr.is_null() || flags != 0 {
        return INVALID_VALUE;
    }
    let Ok(h) = d.host.lock() else {
        return UNKNOWN;
    };
    match find(&h, p as u64, 1) {
        Some(_) => {
            *dptr = p as u64;
            SUCCESS
        }
        None => INVALID_VALUE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    let d = tri!(driver());
    // A kernel may still use mapped memory.
    let pending = synchronize_all();
    match d.host.lock().ok().and_then(|mut h| h.remove(&(p as u64))) {
        Some(_) if pending != SUCCESS => pending,
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
