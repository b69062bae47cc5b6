//! Streams and events. Everything has finished when its call returns, so streams order
//! nothing and events only record when they were reached (for `cuEventElapsedTime`).

use std::ffi::{c_int, c_uint, c_void};
use std::time::Instant;

use crate::device::*;

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
