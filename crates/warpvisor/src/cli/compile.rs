//! `warpvisor compile`: translate a module and write the kernel source.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{read_file, FleetArgs};
use warpvisor::backend::select::BackendKind;
use warpvisor::codegen::MemoryChecks;
use warpvisor::{codegen, frontend, work_queue};

/// Arguments of `warpvisor compile`.
#[derive(Args)]
pub struct CompileArgs {
    /// The module (.wasm or .wat).
    module: PathBuf,
    /// Kernel language to write: host C (cpu), OpenCL C (opencl), CUDA C++ (cuda), or the
    /// PTX NVRTC makes of the CUDA C++ for compute capability 9.0 (ptx; needs NVRTC, no GPU),
    /// which also fills the kernel cache the `cuda` backend reads on a machine with the same
    /// NVRTC version.
    #[arg(long, default_value = "c", value_parser = ["c", "opencl", "cuda", "ptx"])]
    emit: String,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// A call profile of the module (`warpvisor profile`): hot call_indirect targets become
    /// guarded direct calls, and partitions keep the calls that ran most together.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
}

/// Runs `warpvisor compile`; returns the exit code.
pub fn run(args: CompileArgs) -> anyhow::Result<i32> {
    let bytes = read_file(&args.module)?;
    let binary = frontend::to_binary(&bytes)?;
    let module = frontend::load(&binary)?;
    let kind = match args.emit.as_str() {
        "opencl" => BackendKind::OpenCl,
        "cuda" | "ptx" => BackendKind::Cuda,
        _ => BackendKind::Cpu,
    };
    let mut options = args.fleet.kernel_for(kind);
    if options.memory_checks == MemoryChecks::Auto {
        // No device to ask: guard regions where they apply whatever the device (cpu).
        options.memory_checks = MemoryChecks::default_for(&options);
    }
    if let Some(path) = &args.profile {
        options.profile = Some(super::profile::load_profile(path, &binary)?);
    }
    if warpvisor::serve::guest_api::is_resident(&module) {
        // The kernel `warpvisor serve` builds for it.
        options = warpvisor::serve::guest_api::resident_kernel(options);
    }
    let mut source = codegen::emit(&module, &options)?;
    if args.emit == "ptx" {
        // Partitions compile in parallel, as when a backend loads them.
        let arch = warpvisor::backend::cuda::DEFAULT_ARCH;
        let parts = &source.partitions;
        source.partitions =
            work_queue::map_indexed(parts.len(), work_queue::default_workers(), |i| {
                warpvisor::backend::cuda::compile_ptx(&parts[i], &options, arch)
                    .map_err(|e| anyhow::anyhow!("partition {i}: {e}"))
            })
            .into_iter()
            .collect::<anyhow::Result<Vec<String>>>()?;
    }
    let many = source.partitions.len() > 1;
    let mut stdout = super::stdout();
    for (i, code) in source.partitions.iter().enumerate() {
        match &args.output {
            Some(path) => {
                // Several partitions: FILE.cl becomes FILE.p0.cl, FILE.p1.cl, ...
                let path = if many {
                    let ext = path
                        .extension()
                        .map(|e| e.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    path.with_extension(format!("p{i}.{ext}"))
                } else {
                    path.clone()
                };
                std::fs::write(&path, code)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            }
            None => write!(stdout, "{code}")?,
        }
    }
    stdout.flush()?;
    Ok(0)
}
