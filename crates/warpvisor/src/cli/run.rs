//! `warpvisor run`: a WASI program's `_start`, or an exported function, once per job on the
//! selected backend.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

use super::progress::{print_stats, CompileProgress};
use super::{
    errln, read_file, read_limited, read_open_limited, FleetArgs, MAX_JOBS_FILE_SIZE, MAX_VMS,
};
use warpvisor::backend::cpu::CpuBackend;
use warpvisor::codegen::Dialect;
use warpvisor::jobs::{parse_arg, parse_job, result_line};
use warpvisor::runner::Executor;
use warpvisor::simt::tracer::{sample_invoke, sample_wasi};
use warpvisor::simt::Report;
use warpvisor::vmm::Outcome;
use warpvisor::wasi::program::{self, WasiRunConfig};
use warpvisor::wasi::{Stdin, WasiJob};
use wasmparser::ValType;

/// Arguments of `warpvisor run`.
#[derive(Args)]
pub struct RunArgs {
    /// The module (.wasm or .wat).
    module: PathBuf,
    /// Exported function to run; without it the module is a WASI program and `_start` runs.
    #[arg(long)]
    invoke: Option<String>,
    #[command(flatten)]
    wasi: WasiArgs,
    /// VMs in the fleet, 1 to 1048576; with more jobs, jobs run in successive batches.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_VMS as i64))]
    vms: u32,
    /// Jobs file, one JSON object per line: `{"args": [...]}` for --invoke; for WASI programs
    /// `{"args": [...], "env": {...}, "stdin": "..."}` (or `"stdin_base64"`).
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// Standard input of every WASI VM without --jobs: this file, which each VM reads from its
    /// start as `prog < FILE` would (`-`: warpvisor's own standard input, read to its end
    /// first). Job lines carry their own `stdin` instead.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["jobs", "invoke"])]
    stdin: Option<PathBuf>,
    /// Write one JSON result line per job here (default: standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Print throughput, the time of each phase (translate, device compile, allocation,
    /// instantiation, execution, transfers, hypercall service, scheduling, host work, output)
    /// with what none accounts for, and the bytes moved between host and device, on stderr.
    #[arg(long)]
    stats: bool,
    /// Before running, trace a sample of the jobs (the first 64) on cpu and predict how they
    /// would run on a GPU (`warpvisor simt`): SIMT efficiency, the function that leaves the
    /// most lanes idle, and the interleave with the fewest memory transactions, which opencl
    /// and cuda then use unless --interleave is given.
    #[arg(long)]
    analyze: bool,
    /// A call profile of the module (`warpvisor profile`): hot call_indirect targets become
    /// guarded direct calls, and partitions keep the calls that ran most together (kernel
    /// backends).
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
    /// Arguments of the function (without --jobs: every VM gets these).
    #[arg(last = true)]
    args: Vec<String>,
}

/// The flags of a WASI program's VMs (`run` and `serve`).
#[derive(Args)]
pub(super) struct WasiArgs {
    /// Environment variable of every WASI VM (repeatable); job lines and requests add their own.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Preopen host directory HOST as GUEST for every WASI VM (repeatable); VMs cannot leave it.
    #[arg(long = "dir", value_name = "HOST::GUEST")]
    pub dirs: Vec<String>,
    /// Let calls to imports warpvisor does not provide trap, instead of rejecting the module.
    #[arg(long)]
    pub allow_unknown_imports: bool,
}

/// Runs `warpvisor run`; returns the exit code.
pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    let bytes = read_file(&args.module)?;
    let (mut executor, why) = args.fleet.executor()?;
    super::profile::apply_profile(args.profile.as_deref(), &bytes, &mut executor)?;
    if args.stats {
        match why {
            Some(why) => errln!("backend: {} (auto: {why})", executor.name()),
            None => errln!("backend: {}", executor.name()),
        }
    }
    let Some(invoke) = args.invoke.clone() else {
        return run_wasi(&args, &mut executor, &bytes);
    };
    let binary = warpvisor::frontend::to_binary(&bytes)?;
    let Some(ty) = warpvisor::frontend::export_func_type(&binary, &invoke)? else {
        anyhow::bail!("the module has no exported function `{invoke}`");
    };
    let params = ty.params().to_vec();
    let jobs = invoke_jobs(args.jobs.as_deref(), &args.args, &invoke, &params, args.vms)?;
    if args.analyze {
        let backend = analysis_backend(&args)?;
        let fleet = args.fleet.fleet(args.vms);
        let report = sample_invoke(&binary, &backend, &invoke, fleet, &jobs)?;
        apply_analysis(&report, &mut executor, args.fleet.interleave.is_some());
    }
    let progress = CompileProgress::new(executor.name());
    let start = Instant::now();
    let (outcomes, mut stats) = executor.invoke(
        &binary,
        &invoke,
        args.fleet.fleet(args.vms),
        &jobs,
        &|done, total| progress.update(done, total),
    )?;
    let output = Instant::now();
    progress.finish();
    let mut out = result_writer(args.output.as_ref())?;
    for (i, o) in outcomes.iter().enumerate() {
        writeln!(out, "{}", result_line(i, o))?;
    }
    out.flush()?;
    drop(out);
    let traps = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Trapped(_)))
        .count();
    errln!(
        "{} jobs on {} VMs: {} returned, {} trapped",
        outcomes.len(),
        args.vms,
        outcomes.len() - traps,
        traps
    );
    stats.output = output.elapsed();
    stats.wall = start.elapsed();
    if args.stats {
        print_stats(&stats, outcomes.len(), args.vms);
    }
    Ok(0)
}

/// WASI jobs: the lines of `path` (each job's environment after `env`), or without a jobs
/// file `vms` copies of `args` with `env` and `stdin`.
pub(super) fn wasi_jobs(
    path: Option<&Path>,
    env: &[(String, String)],
    args: &[String],
    stdin: Stdin,
    vms: u32,
) -> anyhow::Result<Vec<WasiJob>> {
    let Some(path) = path else {
        let one = WasiJob {
            args: args.to_vec(),
            env: env.to_vec(),
            stdin,
        };
        return Ok(vec![one; vms as usize]);
    };
    read_lines(path)?
        .into_iter()
        .map(|(n, line)| {
            let mut job = program::parse_job(&line)
                .map_err(|e| anyhow::anyhow!("{} line {n}: {e}", path.display()))?;
            let mut all = env.to_vec();
            all.append(&mut job.env);
            job.env = all;
            Ok(job)
        })
        .collect()
}

/// The input of `--stdin`: a regular file stays a file that each VM reads from its start, as
/// `prog < file` (never copied whole into the host's memory); anything else — warpvisor's own
/// standard input for `-`, a pipe — is read now, at most [`MAX_JOBS_FILE_SIZE`] bytes.
fn read_stdin_file(path: &Path) -> anyhow::Result<Stdin> {
    if path != Path::new("-") {
        let file = std::fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("cannot read --stdin file {}: {e}", path.display()))?;
        if file.metadata().is_ok_and(|m| m.is_file()) {
            return Ok(Stdin::file(file));
        }
        return Ok(read_open_limited(file, path, MAX_JOBS_FILE_SIZE, "--stdin file")?.into());
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::io::stdin().lock(), MAX_JOBS_FILE_SIZE + 1),
        &mut bytes,
    )
    .map_err(|e| anyhow::anyhow!("reading standard input for --stdin: {e}"))?;
    if bytes.len() as u64 > MAX_JOBS_FILE_SIZE {
        anyhow::bail!(
            "standard input is larger than --stdin's limit of {MAX_JOBS_FILE_SIZE} bytes"
        );
    }
    Ok(bytes.into())
}

/// The `cpu` backend a `--analyze` sample is traced on.
fn analysis_backend(args: &RunArgs) -> anyhow::Result<CpuBackend> {
    CpuBackend::new(args.fleet.workers).map_err(|e| {
        anyhow::anyhow!("--analyze traces a sample on the cpu backend, which is unavailable: {e}")
    })
}

/// Reports a sample's analysis on stderr; on a GPU backend without --interleave, uses the
/// interleave it recommends.
fn apply_analysis(report: &Report, executor: &mut Executor, interleave_given: bool) {
    let Some(w) = report.widths.last() else {
        return;
    };
    let [s0, s4, s8] = report.sectors_per_instruction;
    errln!(
        "analyze: {} sampled jobs: SIMT efficiency {:.1}% at width {} ({:.1} launches per \
         warp); 32-byte sectors per memory access at interleave 0/4/8: {s0:.2}/{s4:.2}/{s8:.2}",
        report.jobs,
        100.0 * w.efficiency,
        w.width,
        w.launches_per_warp
    );
    if let Some(f) = report.worst(1).first() {
        // With DWARF, the line too.
        let line = report
            .worst_lines(1)
            .first()
            .map_or(String::new(), |l| format!(", worst at {}", l.location));
        let message = format!(
            "`{}` leaves the most lanes idle ({:.1}% efficient, {:.1}% of issued instructions{line})",
            f.name,
            100.0 * f.efficiency,
            100.0 * f.issued_share
        );
        if w.efficiency < 0.5 {
            errln!("warning: a poor fit for a GPU as it is: {message}; fix it first");
        } else if f.idle_lanes > 0 {
            errln!("analyze: {message}");
        }
    }
    if let Executor::Fleet { kernel, .. } = executor {
        if kernel.dialect != Dialect::C && !interleave_given {
            kernel.interleave = report.recommended_interleave;
            errln!(
                "analyze: using --interleave {} (fewest sectors)",
                report.recommended_interleave
            );
        }
    }
}

/// The non-blank lines of a jobs file of at most [`MAX_JOBS_FILE_SIZE`] bytes, with their
/// numbers (from 1).
pub(super) fn read_lines(path: &Path) -> anyhow::Result<Vec<(usize, String)>> {
    let bytes = read_limited(path, MAX_JOBS_FILE_SIZE, "jobs file")?;
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = std::str::from_utf8(line)
            .map_err(|_| anyhow::anyhow!("{} line {}: not UTF-8 text", path.display(), i + 1))?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.trim().is_empty() {
            out.push((i + 1, line.to_string()));
        }
    }
    Ok(out)
}

/// `run` of a WASI program: `_start` on every VM, one job each.
fn run_wasi(args: &RunArgs, executor: &mut Executor, bytes: &[u8]) -> anyhow::Result<i32> {
    let env = parse_env(&args.wasi.env)?;
    let preopens = parse_dirs(&args.wasi.dirs)?;
    let stdin = match &args.stdin {
        Some(path) => read_stdin_file(path)?,
        None => Stdin::default(),
    };
    let jobs = wasi_jobs(args.jobs.as_deref(), &env, &args.args, stdin, args.vms)?;
    let name = program_name(&args.module);
    let config = WasiRunConfig {
        fleet: args.fleet.fleet(args.vms),
        program_name: name,
        preopens,
        allow_unknown_imports: args.wasi.allow_unknown_imports,
    };
    if args.analyze {
        let backend = analysis_backend(args)?;
        let binary = warpvisor::frontend::to_binary(bytes)?;
        let report = sample_wasi(&binary, &backend, &config, &jobs)?;
        apply_analysis(&report, executor, args.fleet.interleave.is_some());
    }
    let progress = CompileProgress::new(executor.name());
    let start = Instant::now();
    let (results, mut stats) = executor.run_wasi(bytes, &config, &jobs, &|done, total| {
        progress.update(done, total)
    })?;
    let output = Instant::now();
    progress.finish();
    let trapped = results.iter().filter(|r| r.trap.is_some()).count();
    let nonzero = results.iter().filter(|r| r.exit_code != 0).count();
    if args.jobs.is_none() && args.output.is_none() {
        // N copies: the first VM's output, then a summary.
        if let Some(first) = results.first() {
            let mut out = super::stdout();
            out.write_all(&first.stdout)?;
            out.flush()?;
            let _ = std::io::stderr().write_all(&first.stderr);
            if let Some(k) = first.trap {
                errln!("VM 0 trapped: {k}");
            }
        }
        let exited = results
            .iter()
            .filter(|r| r.exit_code != 0 && r.trap.is_none())
            .count();
        errln!(
            "{} VMs: {} exited 0, {} exited non-zero, {} trapped",
            results.len(),
            results.len() - nonzero,
            exited,
            trapped
        );
        stats.output = output.elapsed();
        stats.wall = start.elapsed();
        if args.stats {
            print_stats(&stats, results.len(), args.vms);
        }
        return Ok(results.first().map_or(0, |r| r.exit_code as i32));
    }
    let mut out = result_writer(args.output.as_ref())?;
    for (i, r) in results.iter().enumerate() {
        writeln!(out, "{}", program::result_line(i, r))?;
    }
    out.flush()?;
    drop(out);
    errln!(
        "{} jobs on {} VMs: {} exited non-zero, {} trapped",
        results.len(),
        args.vms,
        nonzero,
        trapped
    );
    stats.output = output.elapsed();
    stats.wall = start.elapsed();
    if args.stats {
        print_stats(&stats, results.len(), args.vms);
    }
    Ok(0)
}

/// `--env NAME=VALUE` flags.
pub(super) fn parse_env(flags: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    flags
        .iter()
        .map(|e| {
            e.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow::anyhow!("--env takes NAME=VALUE, not `{e}`"))
        })
        .collect()
}

/// `--dir HOST::GUEST` flags: canonical host directories and their guest names.
pub(super) fn parse_dirs(flags: &[String]) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut preopens = Vec::new();
    for d in flags {
        let (host, guest) = d.split_once("::").unwrap_or((d.as_str(), d.as_str()));
        let host = std::fs::canonicalize(host).map_err(|e| anyhow::anyhow!("--dir {host}: {e}"))?;
        if !host.is_dir() {
            anyhow::bail!("--dir {}: not a directory", host.display());
        }
        preopens.push((host, guest.to_string()));
    }
    Ok(preopens)
}

/// `argv[0]` of a program's VMs: its file name.
pub(super) fn program_name(module: &Path) -> String {
    module.file_name().map_or_else(
        || "program.wasm".into(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Where result lines go: `--output FILE`, else standard output.
fn result_writer(path: Option<&PathBuf>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(super::stdout())),
    })
}

/// The argument lists of calls of export `func` taking `params`: one per line of the jobs file
/// `jobs`, or `args` (the arguments after `--`) once per VM of `vms`.
pub(super) fn invoke_jobs(
    jobs: Option<&Path>,
    args: &[String],
    func: &str,
    params: &[ValType],
    vms: u32,
) -> anyhow::Result<Vec<Vec<warpvisor::vmm::Value>>> {
    if let Some(path) = jobs {
        return read_lines(path)?
            .into_iter()
            .map(|(n, line)| {
                parse_job(&line, params)
                    .map_err(|e| anyhow::anyhow!("{} line {n}: {e}", path.display()))
            })
            .collect();
    }
    if args.len() != params.len() {
        anyhow::bail!(
            "`{func}` takes {} arguments, {} given after --",
            params.len(),
            args.len()
        );
    }
    let one = args
        .iter()
        .zip(params)
        .map(|(a, t)| parse_arg(a, *t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![one; vms as usize])
}
