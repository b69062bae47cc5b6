//! `WARPVISOR_CUDA_SIMT=PATH`: modules run under SIMT emulation and each launch appends its
//! counts to PATH as a line of JSON. (Its own test binary: the variable is read at module
//! load, and no other test here may see it.)

use std::ffi::{c_void, CString};

use warpvisor_cuda_driver::*;

const FAULTS: &str = include_str!("../../warpvisor/tests/ptx/faults.ptx");

#[test]
fn each_launch_appends_its_simt_counts() {
    let path = std::env::temp_dir().join(format!("warpvisor-simt-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    std::env::set_var("WARPVISOR_CUDA_SIMT", &path);
    // SAFETY: every pointer passed lives across the call that uses it.
    unsafe {
        assert_eq!(cuInit(0), 0);
        let mut module = std::ptr::null_mut();
        let text = CString::new(FAULTS).expect("PTX has no NUL");
        assert_eq!(
            cuModuleLoadData(&mut module, text.as_ptr() as *const c_void),
            0
        );
        let mut f = std::ptr::null_mut();
        let oob = CString::new("oob").expect("name");
        assert_eq!(cuModuleGetFunction(&mut f, module, oob.as_ptr()), 0);
        // oob(out, n): out[threadIdx.x * n] = 1; 64 threads, n = 1: two warps, each storing
        // 32 consecutive ints (128 bytes, four sectors), no branch.
        let mut d: CUdeviceptr = 0;
        assert_eq!(cuMemAlloc_v2(&mut d, 256), 0);
        let mut stride: i32 = 1;
        let mut params: [*mut c_void; 2] = [
            &mut d as *mut u64 as *mut c_void,
            &mut stride as *mut i32 as *mut c_void,
        ];
        for _ in 0..2 {
            let r = cuLaunchKernel(
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
            );
            assert_eq!(r, 0);
        }
        let mut back = [0u8; 256];
        assert_eq!(cuMemcpyDtoH_v2(back.as_mut_ptr() as *mut c_void, d, 256), 0);
        assert!(back.chunks(4).all(|c| c == 1i32.to_le_bytes()));
        assert_eq!(cuModuleUnload(module), 0);
    }
    let log = std::fs::read_to_string(&path).expect("the SIMT log was written");
    let _ = std::fs::remove_file(&path);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per launch: {log}");
    for l in &lines {
        assert_eq!(l["kernel"], "oob");
        assert_eq!(l["block"], serde_json::json!([64, 1, 1]));
        assert_eq!(l["efficiency"], 1.0);
        assert_eq!(l["counts"]["memory_instructions"], 2);
        assert_eq!(l["counts"]["sectors"], 8);
        assert_eq!(l["counts"]["divergences"], 0);
    }
}
