//! The driver entry points called as a C program would: results, copies and the CUDA error
//! codes of bad PTX, unknown kernels, out-of-range copies and illegal addresses.

use std::ffi::{c_void, CStr, CString};

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
        assert_eq!(name_of(launch(&mut params)), "CUDA_ERROR_ILLEGAL_ADDRESS");
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
