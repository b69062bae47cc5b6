//! NVRTC: CUDA C++ kernel source to PTX, with a PTX cache keyed by source, target architecture,
//! NVRTC version and options. Works on machines without a GPU or driver.

use std::ffi::c_int;

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use crate::backend::{cache, BackendError};
use crate::codegen::KernelOptions;

/// The architecture NVRTC targets when no device says otherwise (H100 and H200).
pub const DEFAULT_ARCH: &str = "compute_90";

/// Whether NVRTC (`libnvrtc.so`) can be loaded, or why not.
pub fn nvrtc_status() -> Result<(i32, i32), BackendError> {
    // SAFETY: probing dlopens candidate library names; nothing is called unless one loads.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(BackendError::Unavailable {
            backend: "cuda",
            reason: "NVRTC (libnvrtc.so) was not found; install the CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12` and add its lib folder to LD_LIBRARY_PATH".into(),
        });
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is present (checked above); the out-pointers are valid.
    let rc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if rc != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(BackendError::Unavailable {
            backend: "cuda",
            reason: format!("NVRTC loaded but nvrtcVersion failed ({rc:?})"),
        });
    }
    Ok((major, minor))
}

/// NVRTC options for `options`: exact IEEE arithmetic (no fused multiply-add, precise divide
/// and square root, no flush to zero); `opt_level` 0 compiles without device optimisation.
fn nvrtc_options(options: &KernelOptions, arch: &'static str) -> CompileOptions {
    let mut extra = vec!["-w".to_string()];
    if options.opt_level == 0 {
        extra.push("-G".into());
    }
    CompileOptions {
        ftz: Some(false),
        prec_sqrt: Some(true),
        prec_div: Some(true),
        fmad: Some(false),
        options: extra,
        arch: Some(arch),
        name: Some("warpvisor_kernel.cu".into()),
        ..Default::default()
    }
}

/// Compiles `code` to PTX for `arch` (`compute_90`, ...), reusing the cache.
pub fn compile_ptx(
    code: &str,
    options: &KernelOptions,
    arch: &'static str,
) -> Result<String, BackendError> {
    let (major, minor) = nvrtc_status()?;
    if code.contains('\0') {
        return Err(BackendError::Launch(
            "kernel source contains a NUL byte".into(),
        ));
    }
    let opts = nvrtc_options(options, arch);
    let opts_text = format!("{:?} {:?} {}", opts.options, opts.arch, options.opt_level);
    let key = cache::key(&[
        env!("CARGO_PKG_VERSION").as_bytes(),
        format!("nvrtc {major}.{minor}").as_bytes(),
        opts_text.as_bytes(),
        code.as_bytes(),
    ]);
    let dir = cache::cache_dir().join("cuda");
    let path = dir.join(format!("{key}.ptx"));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        return Ok(ptx);
    }
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(code, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => {
            let log = log.to_string_lossy().into_owned();
            BackendError::Compile {
                compiler: format!("NVRTC {major}.{minor} ({arch})"),
                log: format!(
                    "{}\n{}",
                    log.chars().take(4000).collect::<String>(),
                    crate::backend::offending_lines(&log, code)
                ),
            }
        }
        other => BackendError::Compile {
            compiler: format!("NVRTC {major}.{minor}"),
            log: format!("{other:?}"),
        },
    })?;
    let text = ptx_text(&ptx)?;
    // The cache is an optimisation: failing to write it is not an error.
    let _ =
        std::fs::create_dir_all(&dir).and_then(|_| cache::write_atomically(&path, text.as_bytes()));
    Ok(text)
}

/// The PTX of a fresh NVRTC image as text.
fn ptx_text(ptx: &Ptx) -> Result<String, BackendError> {
    let bytes = ptx
        .as_bytes()
        .ok_or_else(|| BackendError::Launch("NVRTC returned no PTX image".into()))?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..end].to_vec())
        .map_err(|_| BackendError::Launch("NVRTC returned PTX that is not UTF-8".into()))
}
