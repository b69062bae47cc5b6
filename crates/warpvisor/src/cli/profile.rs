//! `warpvisor profile`: run jobs on a counting kernel and write the module's call profile,
//! which `run --profile` and `compile --profile` build kernels for.

use std::path::{Path, PathBuf};

use clap::Args;

use super::run::{invoke_jobs, parse_dirs, parse_env, program_name, wasi_jobs};
use super::{errln, read_file, MAX_MEMORY_PAGES, MAX_VMS};
use warpvisor::backend::cpu::CpuBackend;
use warpvisor::profile::record::{counting_program, profile_invoke, profile_wasi};
use warpvisor::profile::CallProfile;
use warpvisor::runner::Executor;
use warpvisor::vmm::{FleetConfig, Outcome};
use warpvisor::wasi::program::WasiRunConfig;

/// Arguments of `warpvisor profile`.
#[derive(Args)]
pub struct ProfileArgs {
    /// The module (.wasm or .wat).
    module: PathBuf,
    /// Exported function to call; without it the module is a WASI program and `_start` runs.
    #[arg(long)]
    invoke: Option<String>,
    /// Jobs file, as `warpvisor run --jobs`; without it every VM runs the arguments after --.
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// VMs in the counting fleet.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=MAX_VMS as i64))]
    vms: u32,
    /// Where to write the profile (JSON).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Most 64 KiB pages a VM's memory may grow to.
    #[arg(long = "max-memory", default_value_t = 256, value_name = "PAGES",
          value_parser = clap::value_parser!(u32).range(0..=MAX_MEMORY_PAGES as i64))]
    max_memory: u32,
    /// Worker threads (default: one per core).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=super::MAX_WORKERS))]
    workers: Option<usize>,
    /// Environment variable of every WASI VM (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Preopen host directory HOST as GUEST for every WASI VM (repeatable).
    #[arg(long = "dir", value_name = "HOST::GUEST")]
    dirs: Vec<String>,
    /// Arguments (of the function, or of the WASI program) when there is no jobs file.
    #[arg(last = true)]
    args: Vec<String>,
}

/// Runs `warpvisor profile`; returns the exit code.
pub fn run(args: ProfileArgs) -> anyhow::Result<i32> {
    let bytes = read_file(&args.module)?;
    let binary = warpvisor::frontend::to_binary(&bytes)?;
    let fleet = FleetConfig {
        num_vms: args.vms,
        max_memory_pages: args.max_memory,
        ..FleetConfig::default()
    };
    let backend = CpuBackend::new(args.workers)?;
    let program = counting_program(&binary, &backend, 2)?;
    let start = std::time::Instant::now();
    let (profile, jobs, trapped) = match &args.invoke {
        Some(func) => {
            let Some(ty) = warpvisor::frontend::export_func_type(&binary, func)? else {
                anyhow::bail!("the module has no exported function `{func}`");
            };
            let jobs = invoke_jobs(
                args.jobs.as_deref(),
                &args.args,
                func,
                ty.params(),
                args.vms,
            )?;
            let (outcomes, profile) = profile_invoke(&binary, program, func, fleet, &jobs)?;
            let trapped = outcomes
                .iter()
                .filter(|o| matches!(o, Outcome::Trapped(_)))
                .count();
            (profile, outcomes.len(), trapped)
        }
        None => {
            let env = parse_env(&args.env)?;
            let jobs = wasi_jobs(
                args.jobs.as_deref(),
                &env,
                &args.args,
                Default::default(),
                args.vms,
            )?;
            let config = WasiRunConfig {
                fleet,
                program_name: program_name(&args.module),
                preopens: parse_dirs(&args.dirs)?,
                allow_unknown_imports: false,
            };
            let (results, profile) = profile_wasi(&binary, program, &config, &jobs)?;
            let trapped = results.iter().filter(|r| r.trap.is_some()).count();
            (profile, results.len(), trapped)
        }
    };
    write_profile(&args.output, &profile)?;
    let indirect = profile
        .sites
        .iter()
        .filter(|s| !s.targets.is_empty())
        .count();
    errln!(
        "profiled {jobs} jobs ({trapped} trapped) in {:.3} s: {} call sites ran, {indirect} of \
         them call_indirect; wrote {}",
        start.elapsed().as_secs_f64(),
        profile.sites.len(),
        args.output.display()
    );
    Ok(0)
}

/// The profile at `path` of the module `bytes` (binary or text), checked against it.
pub(super) fn load_profile(path: &Path, bytes: &[u8]) -> anyhow::Result<CallProfile> {
    let binary = warpvisor::frontend::to_binary(bytes)?;
    let module = warpvisor::frontend::load(&binary)?;
    Ok(CallProfile::load(path, &binary, &module)?)
}

/// Builds `executor`'s kernels with the profile at `path` (if any) of the module `bytes`; an
/// error for wasmtime, which builds no kernels.
pub(super) fn apply_profile(
    path: Option<&Path>,
    bytes: &[u8],
    executor: &mut Executor,
) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let profile = load_profile(path, bytes)?;
    match executor {
        Executor::Fleet { kernel, .. } => kernel.profile = Some(profile),
        Executor::Wasmtime(_) => anyhow::bail!(
            "--profile shapes the kernels of the cpu, opencl and cuda backends; wasmtime builds \
             none"
        ),
    }
    Ok(())
}

fn write_profile(path: &Path, profile: &CallProfile) -> anyhow::Result<()> {
    std::fs::write(path, profile.to_json())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}
