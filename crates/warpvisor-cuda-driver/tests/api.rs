//! The driver entry points called as a C program would: results, copies and the CUDA error
//! codes of bad PTX, unknown kernels, out-of-range copies and illegal addresses; launches that
//! run while the host goes on, and mapped host memory they share with it.

use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use warpvisor_cuda_driver::*;

/// NVRTC's PTX of `oob(int *out, int n) { out[threadIdx.x * n] = 1; }` and friends (the
/// warpvisor crate's test data).
const FAULTS: &str = include_str!("../../warpvisor/tests/ptx/faults.ptx");

fn name_of(code: CUresult) -> String {
    let mut s = std::ptr::null();
    // SAFETY: the out-pointer is valid; the driver returns a static string.
    unsafe {
        assert_eq!(cuGetErrorName(code, &mut s), 0);
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

#[test]
fn a_driver_api_program_runs_and_errors_are_cuda_codes() {
    // SAFETY: every pointer passed lives across the call that uses it.
    unsafe {
        assert_eq!(cuInit(0), 0);
        let mut count = 0;
        assert_eq!(cuDeviceGetCount(&mut count), 0);
        assert_eq!(count, 1);
        let mut name = [0i8; 64];
        assert_eq!(cuDeviceGetName(name.as_mut_ptr(), 64, 0), 0);
        let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
        assert!(name.starts_with("warpvisor CPU ("), "{name}");
        let mut major = 0;
        assert_eq!(cuDeviceGetAttribute(&mut major, 75, 0), 0);
        assert_eq!(major, 9);

        let mut module = std::ptr::null_mut();
        let text = CString::new(FAULTS).expect("PTX has no NUL");
        assert_eq!(
            cuModuleLoadData(&mut module, text.as_ptr() as *const c_void),
            0
        );
        let bad = CString::new(".version 8.8\n.target sm_70\nnonsense").expect("text");
        let mut other = std::ptr::null_mut();
        assert_eq!(
            name_of(cuModuleLoadData(&mut other, bad.as_ptr() as *const c_void)),
            "CUDA_ERROR_INVALID_PTX"
        );

        let mut f = std::ptr::null_mut();
        let missing = CString::new("missing").expect("name");
        assert_eq!(
            name_of(cuModuleGetFunction(&mut f, module, missing.as_ptr())),
            "CUDA_ERROR_NOT_FOUND"
        );
        let oob = CString::new("oob").expect("name");
        assert_eq!(cuModuleGetFunction(&mut f, module, oob.as_ptr()), 0);

        // 64 ints; each of 64 threads writes its element (stride 1), then every other (2).
        let mut d: CUdeviceptr = 0;
        assert_eq!(cuMemAlloc_v2(&mut d, 256), 0);
        let zeros = [0u8; 256];
        assert_eq!(cuMemcpyHtoD_v2(d, zeros.as_ptr() as *const c_void, 256), 0);
        assert_eq!(
            name_of(cuMemcpyHtoD_v2(d + 8, zeros.as_ptr() as *const c_void, 256)),
            "CUDA_ERROR_INVALID_VALUE"
        );
        let mut stride: i32 = 1;
        let mut params: [*mut c_void; 2] = [
            &mut d as *mut u64 as *mut c_void,
            &mut stride as *mut i32 as *mut c_void,
        ];
        let launch = |params: &mut [*mut c_void; 2]| {
            cuLaunchKernel(
                f,
                1,
                1,
                1,
                64,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(launch(&mut params), 0);
        let mut back = [0u8; 256];
        assert_eq!(cuMemcpyDtoH_v2(back.as_mut_ptr() as *mut c_void, d, 256), 0);
        assert!(back.chunks(4).all(|c| c == 1i32.to_le_bytes()));
        stride = 2;
        params[1] = &mut stride as *mut i32 as *mut c_void;
        // Launches are asynchronous: the fault is reported by the next wait, once.
        assert_eq!(launch(&mut params), 0);
        assert_eq!(name_of(cuCtxSynchronize()), "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert_eq!(cuCtxSynchronize(), 0);
        // Too many threads per block.
        let r = cuLaunchKernel(
            f,
            1,
            1,
            1,
            2048,
            1,
            1,
            0,
            std::ptr::null_mut(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        );
        assert_eq!(name_of(r), "CUDA_ERROR_INVALID_VALUE");
        assert_eq!(cuMemFree_v2(d), 0);
        assert_eq!(name_of(cuMemFree_v2(d)), "CUDA_ERROR_INVALID_VALUE");
        assert_eq!(cuModuleUnload(module), 0);
    }
}

#[test]
fn module_load_options_fill_the_logs_and_set_the_optimisation_level() {
    // CUjit_option: INFO_LOG_BUFFER 3, its size 4, ERROR_LOG_BUFFER 5, its size 6,
    // OPTIMIZATION_LEVEL 7.
    let mut info = [0u8; 128];
    let mut error = [0u8; 32];
    let mut options = [3i32, 4, 5, 6, 7];
    let load = |text: &CString, info: &mut [u8], error: &mut [u8], options: &mut [i32]| {
        let mut values: [*mut c_void; 5] = [
            info.as_mut_ptr() as *mut c_void,
            info.len() as *mut c_void,
            error.as_mut_ptr() as *mut c_void,
            error.len() as *mut c_void,
            std::ptr::null_mut(), // level 0
        ];
        let mut module = std::ptr::null_mut();
        // SAFETY: the buffers and arrays outlive the call; sizes are the buffers' sizes.
        let rc = unsafe {
            cuModuleLoadDataEx(
                &mut module,
                text.as_ptr() as *const c_void,
                5,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        (rc, module, values[1] as usize, values[3] as usize)
    };
    // SAFETY: no pointers.
    assert_eq!(unsafe { cuInit(0) }, 0);
    let good = CString::new(FAULTS).expect("no NUL");
    let (rc, module, info_used, _) = load(&good, &mut info, &mut error, &mut options);
    assert_eq!(name_of(rc), "CUDA_SUCCESS");
    let text = CStr::from_bytes_until_nul(&info).expect("NUL-terminated");
    assert_eq!(
        text.to_str(),
        Ok("warpvisor: PTX translated to C, compiled at -O0")
    );
    assert_eq!(
        info_used,
        text.to_bytes().len() + 1,
        "bytes used are written back"
    );
    // SAFETY: a module this driver returned.
    assert_eq!(unsafe { cuModuleUnload(module) }, 0);

    // Bad PTX: the error, cut to the 32-byte buffer, NUL-terminated.
    let bad = CString::new(
        ".version 8.8\n.target sm_70\n.address_size 64\n.entry k()\n{\n\tfrobnicate.u32 %r1;\n}",
    )
    .expect("no NUL");
    let (rc, _, _, error_used) = load(&bad, &mut info, &mut error, &mut options);
    assert_eq!(name_of(rc), "CUDA_ERROR_INVALID_PTX");
    let text = CStr::from_bytes_until_nul(&error).expect("NUL-terminated");
    assert!(text.to_bytes().starts_with(b"PTX line 6"), "{text:?}");
    assert_eq!((text.to_bytes().len(), error_used), (31, 32));
    // Options without their arrays are an invalid value.
    let mut module = std::ptr::null_mut();
    // SAFETY: the driver must refuse the null arrays before reading them.
    let rc = unsafe {
        cuModuleLoadDataEx(
            &mut module,
            good.as_ptr() as *const c_void,
            2,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(name_of(rc), "CUDA_ERROR_INVALID_VALUE");
}

/// A kernel that spins until the host writes a non-zero word into `flag`, then stores that
/// word plus one into `out`: a volatile load and a system-wide fence, as CUDA C's
/// `while (!*(volatile int *)flag) {} __threadfence_system();` compiles.
const WAIT_FOR_HOST: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry wait_for_host(.param .u64 flag, .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [out];
$L_spin:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_spin;
    membar.sys;
    add.s32 %r2, %r1, 1;
    st.global.u32 [%rd2], %r2;
    ret;
}
"#;

#[test]
fn a_kernel_runs_while_the_host_answers_it_through_mapped_memory_and_limits_are_kept() {
    // SAFETY: every pointer passed lives across the call that uses it; the mapped words are
    // touched by the host only through atomics while the kernel runs.
    unsafe {
        assert_eq!(cuInit(0), 0);
        let mut attr = 0;
        assert_eq!(cuDeviceGetAttribute(&mut attr, 19, 0), 0); // CAN_MAP_HOST_MEMORY
        assert_eq!(attr, 1);
        // CU_LIMIT_STACK_SIZE: kept up to the frame stack a CTA's threads share, refused above.
        assert_eq!(cuCtxSetLimit(0, 48 << 10), 0);
        let mut stack = 0usize;
        assert_eq!(cuCtxGetLimit(&mut stack, 0), 0);
        assert_eq!(stack, 48 << 10);
        assert_eq!(
            name_of(cuCtxSetLimit(0, 2 << 20)),
            "CUDA_ERROR_INVALID_VALUE"
        );
        assert_eq!(cuCtxGetLimit(&mut stack, 0), 0);
        assert_eq!(stack, 48 << 10);
        let mut module = std::ptr::null_mut();
        let text = CString::new(WAIT_FOR_HOST).expect("PTX has no NUL");
        assert_eq!(
            cuModuleLoadData(&mut module, text.as_ptr() as *const c_void),
            0
        );
        let mut f = std::ptr::null_mut();
        let name = CString::new("wait_for_host").expect("name");
        assert_eq!(cuModuleGetFunction(&mut f, module, name.as_ptr()), 0);

        let (mut flag, mut out) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(cuMemHostAlloc(&mut flag, 4, 2), 0); // DEVICEMAP
        assert_eq!(cuMemHostAlloc(&mut out, 4, 2), 0);
        let (mut dflag, mut dout): (CUdeviceptr, CUdeviceptr) = (0, 0);
        assert_eq!(cuMemHostGetDevicePointer_v2(&mut dflag, flag, 0), 0);
        assert_eq!(cuMemHostGetDevicePointer_v2(&mut dout, out, 0), 0);
        let mut unmapped = [0u8; 4];
        assert_eq!(
            name_of(cuMemHostGetDevicePointer_v2(
                &mut dout,
                unmapped.as_mut_ptr() as *mut c_void,
                0
            )),
            "CUDA_ERROR_INVALID_VALUE"
        );
        assert_eq!(cuMemHostGetDevicePointer_v2(&mut dout, out, 0), 0);

        // Device memory the host reads on another stream while the kernel runs.
        let mut d: CUdeviceptr = 0;
        assert_eq!(cuMemAlloc_v2(&mut d, 4), 0);
        let seven = 7u32.to_le_bytes();
        assert_eq!(cuMemcpyHtoD_v2(d, seven.as_ptr() as *const c_void, 4), 0);
        let mut side = std::ptr::null_mut();
        assert_eq!(cuStreamCreate(&mut side, 1), 0); // NON_BLOCKING

        let mut params: [*mut c_void; 2] = [
            &mut dflag as *mut u64 as *mut c_void,
            &mut dout as *mut u64 as *mut c_void,
        ];
        let null = std::ptr::null_mut();
        let rc = cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            null,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        );
        assert_eq!(
            rc, 0,
            "the launch returns while its kernel waits for the host"
        );
        assert_eq!(name_of(cuStreamQuery(null)), "CUDA_ERROR_NOT_READY");
        let mut back = [0u8; 4];
        let rc = cuMemcpyDtoHAsync_v2(back.as_mut_ptr() as *mut c_void, d, 4, side);
        assert_eq!(rc, 0);
        assert_eq!(cuStreamSynchronize(side), 0);
        assert_eq!(
            back, seven,
            "a non-blocking stream copies while the kernel runs"
        );
        assert_eq!(name_of(cuStreamQuery(null)), "CUDA_ERROR_NOT_READY");

        AtomicU32::from_ptr(flag as *mut u32).store(41, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(60);
        while cuStreamQuery(null) != 0 {
            assert!(
                Instant::now() < deadline,
                "the kernel never saw the host's word"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(cuStreamSynchronize(null), 0);
        assert_eq!(
            AtomicU32::from_ptr(out as *mut u32).load(Ordering::Acquire),
            42
        );

        assert_eq!(cuStreamDestroy_v2(side), 0);
        assert_eq!(cuMemFree_v2(d), 0);
        assert_eq!(cuMemFreeHost(flag), 0);
        assert_eq!(cuMemFreeHost(out), 0);
        assert_eq!(cuModuleUnload(module), 0);
    }
}
