//! `warpvisor simt`: trace a program's VMs and predict how they would run on SIMT hardware.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::run::{invoke_jobs, parse_dirs, parse_env, program_name, wasi_jobs};
use super::{errln, read_file, MAX_MEMORY_PAGES, MAX_VMS};
use warpvisor::backend::cpu::CpuBackend;
use warpvisor::simt::tracer::{trace_invoke, trace_wasi, traced_program};
use warpvisor::simt::{analyze, AnalysisConfig, CallModel, Cfg, Grouping, Report, Trace};
use warpvisor::vmm::FleetConfig;
use warpvisor::wasi::program::WasiRunConfig;

/// `warpvisor simt` subcommands.
#[derive(Subcommand)]
pub enum SimtCommand {
    /// Run jobs on a traced fleet (cpu) and write the trace.
    Trace(TraceArgs),
    /// Replay a trace in warps: SIMT efficiency, per-function losses, memory sectors.
    Analyze(AnalyzeArgs),
    /// Write a trace's warps as Accel-Sim traces (kernelslist.g, kernel-1.traceg).
    AccelSim(AccelSimArgs),
}

/// Arguments of `warpvisor simt accel-sim`.
#[derive(Args)]
pub struct AccelSimArgs {
    /// A file `warpvisor simt trace` wrote.
    trace: PathBuf,
    /// The folder to write (created).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The memory layout the addresses follow: 0, 4 or 8 bytes per cell.
    #[arg(long, default_value_t = 8, value_parser = super::parse_interleave)]
    interleave: u32,
}

/// Arguments of `warpvisor simt trace`.
#[derive(Args)]
pub struct TraceArgs {
    /// The module (.wasm or .wat).
    module: PathBuf,
    /// Exported function to call; without it the module is a WASI program and `_start` runs.
    #[arg(long)]
    invoke: Option<String>,
    /// Jobs file, as `warpvisor run --jobs`; without it every VM runs the arguments after --.
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// VMs in the traced fleet (the layout the memory analysis assumes).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=MAX_VMS as i64))]
    vms: u32,
    /// Where to write the trace.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Most MiB of trace records kept in all, counted as 4-byte words and shared equally by
    /// the jobs: a job's trace past its share is cut (the report says how many were). The
    /// trace is held in memory as words and written in a compact form (1–1.5 bytes a word).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_trace_mib: u32,
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

/// Arguments of `warpvisor simt analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    /// A file `warpvisor simt trace` wrote.
    trace: PathBuf,
    /// Warp widths to replay, comma-separated, each 1 to 64.
    #[arg(long, default_value = "8,16,32", value_delimiter = ',')]
    widths: Vec<u32>,
    /// How warps are formed: `consecutive` jobs (as the GPU backends place VMs) or `similar`
    /// (jobs of similar length together).
    #[arg(long, default_value = "consecutive", value_parser = ["consecutive", "similar"])]
    grouping: String,
    /// Where lanes reconverge: at immediate post-dominators of the `static` control flow (what
    /// a GPU compiler sees), or of the `dynamic` one (only the edges the jobs took, the paper's
    /// DCFG: untaken error paths do not delay reconvergence).
    #[arg(long, default_value = "static", value_parser = ["static", "dynamic"])]
    cfg: String,
    /// How the device runs calls: `continuations` (as warpvisor's GPU backends compile a
    /// module: calls and returns of functions that can reach an import go through the
    /// kernel's trampoline, where the warp's lanes meet again) or `direct` (every call native,
    /// on a device call stack; ThreadFuser's model).
    #[arg(long, default_value = "continuations", value_parser = ["continuations", "direct"])]
    calls: String,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write a chart of per-function efficiency (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// Runs `warpvisor simt`; returns the exit code.
pub fn run(command: SimtCommand) -> anyhow::Result<i32> {
    match command {
        SimtCommand::Trace(a) => trace(a),
        SimtCommand::Analyze(a) => analyze_trace(a),
        SimtCommand::AccelSim(a) => accel_sim(a),
    }
}

fn trace(args: TraceArgs) -> anyhow::Result<i32> {
    let bytes = read_file(&args.module)?;
    let binary = warpvisor::frontend::to_binary(&bytes)?;
    let total_words = (args.max_trace_mib as usize) << 18;
    let fleet = FleetConfig {
        num_vms: args.vms,
        max_memory_pages: args.max_memory,
        ..FleetConfig::default()
    };
    let backend = CpuBackend::new(args.workers)?;
    let compile = std::time::Instant::now();
    let program = traced_program(&binary, &backend, 2)?;
    let compiled = compile.elapsed();
    let start = std::time::Instant::now();
    let (trace, summary) = match &args.invoke {
        Some(func) => {
            let Some(ty) = warpvisor::frontend::export_func_type(&binary, func)? else {
                anyhow::bail!("the module has no exported function `{func}`");
            };
            let params = ty.params().to_vec();
            let jobs = invoke_jobs(args.jobs.as_deref(), &args.args, func, &params, args.vms)?;
            let max_words = total_words / jobs.len().max(1);
            let (outcomes, trace) = trace_invoke(&binary, program, func, fleet, &jobs, max_words)?;
            let trapped = outcomes
                .iter()
                .filter(|o| matches!(o, warpvisor::vmm::Outcome::Trapped(_)))
                .count();
            (trace, format!("{} jobs, {trapped} trapped", outcomes.len()))
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
            let max_words = total_words / jobs.len().max(1);
            let (results, trace) = trace_wasi(&binary, program, &config, &jobs, max_words)?;
            let trapped = results.iter().filter(|r| r.trap.is_some()).count();
            (trace, format!("{} jobs, {trapped} trapped", results.len()))
        }
    };
    let ran = start.elapsed();
    let file = std::fs::File::create(&args.output)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", args.output.display()))?;
    let mut out = std::io::BufWriter::new(file);
    trace.write(&mut out)?;
    out.flush()?;
    let size = out.get_ref().metadata().map_or(0, |m| m.len());
    let written = start.elapsed() - ran;
    let words = trace.total_words();
    let truncated = trace.jobs.iter().filter(|j| j.truncated).count();
    errln!(
        "traced {summary} in {:.3} s after compilation ({:.3} s): {words} words; wrote {:.1} MiB \
         to {} in {:.3} s{}",
        ran.as_secs_f64(),
        compiled.as_secs_f64(),
        size as f64 / (1 << 20) as f64,
        args.output.display(),
        written.as_secs_f64(),
        if truncated > 0 {
            format!(", {truncated} jobs cut at --max-trace-mib")
        } else {
            String::new()
        }
    );
    Ok(0)
}

fn analyze_trace(args: AnalyzeArgs) -> anyhow::Result<i32> {
    let trace = Trace::read_file(&args.trace)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.trace.display()))?;
    let grouping = match args.grouping.as_str() {
        "similar" => Grouping::Similar,
        _ => Grouping::Consecutive,
    };
    let config = AnalysisConfig {
        widths: args.widths.clone(),
        grouping,
        cfg: match args.cfg.as_str() {
            "dynamic" => Cfg::Dynamic,
            _ => Cfg::Static,
        },
        calls: match args.calls.as_str() {
            "direct" => CallModel::Direct,
            _ => CallModel::Continuations,
        },
    };
    let results = analyze(&trace, &config)?;
    let mut report = Report::new(&trace, grouping, &results);
    report.cfg = config.cfg;
    report.calls = config.calls;
    let mut out = super::stdout();
    out.write_all(report.markdown().as_bytes())?;
    out.flush()?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, report.svg())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(0)
}

fn accel_sim(args: AccelSimArgs) -> anyhow::Result<i32> {
    let trace = Trace::read_file(&args.trace)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.trace.display()))?;
    let summary = warpvisor::simt::accel_sim::write(&trace, &args.output, args.interleave)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    errln!(
        "{} warps, {} instruction lines to {}",
        summary.warps,
        summary.lines,
        args.output.join("kernel-1.traceg").display()
    );
    Ok(0)
}
