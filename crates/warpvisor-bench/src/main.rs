//! `warpvisor-bench`: the benchmark suite's command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use warpvisor::codegen::{CallMode, DirtyPages, MemoryChecks};
use warpvisor_bench::platform::Platform;
use warpvisor_bench::report::{chart, markdown};
use warpvisor_bench::settings::Settings;

/// Runs the VectorVisor benchmarks on native x86, wasmtime and every warpvisor backend
/// available here, checks that every platform replies exactly as the native build does, and
/// reports throughput, ratios, batch latency and where warpvisor's time goes. The Markdown
/// report goes to standard output; progress to standard error. Exit code 1 when a benchmark
/// is not validated on some platform.
#[derive(Parser)]
#[command(name = "warpvisor-bench", version)]
struct Args {
    /// Small fleets and short passes: the whole suite in minutes (kernels cached).
    #[arg(long)]
    quick: bool,
    /// Write the report as JSON here (and the chart beside it, as FILE with `.svg`).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the Markdown report here too.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write the bar chart (SVG) here.
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
    /// Benchmarks to run, by name (default: all ten).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    benchmarks: Vec<String>,
    /// Platforms to run: native, wasmtime, cpu, opencl, cuda (default: all available; native
    /// always runs, as every reply is validated against it).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    platforms: Vec<String>,
    /// VMs per warpvisor fleet, the batch size (default 64; 16 with --quick).
    #[arg(long)]
    vms: Option<u32>,
    /// Batches of distinct requests per benchmark (default 4; 2 with --quick).
    #[arg(long)]
    batches: Option<u32>,
    /// Seconds each platform serves each benchmark at least (default 3; 0.3 with --quick).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    min_seconds: Option<f64>,
    /// Rounds in which the platforms of a benchmark take turns at their timed passes, each
    /// serving for min-seconds / rounds a round (default 4; 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: Option<u32>,
    /// Threads of native-x86, wasmtime and the cpu backend (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Seed of the request generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Memory interleave of every warpvisor backend: 0, 4 or 8 (default: 0 on CPUs, 8 on GPUs).
    #[arg(long)]
    interleave: Option<u32>,
    /// Device compiler optimisation level, 0-3.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=3))]
    opt_level: u8,
    /// Kernel partition size in operators (default: warpvisor's, e.g. 2000 on cuda, one kernel on opencl).
    #[arg(long)]
    partition_ops: Option<u32>,
    /// How warpvisor-cpu's kernels make calls: `direct` (default) or `continuations` (the
    /// device backends always use continuations).
    #[arg(long, value_name = "MODE")]
    calls: Option<String>,
    /// How warpvisor-cpu's and warpvisor-opencl's kernels check memory accesses: `guard`
    /// (guard regions: the default with interleave 0 on cpu with direct calls and on OpenCL
    /// CPU devices such as PoCL), `explicit` (a check per access) or `auto` (each backend's
    /// default).
    #[arg(long, value_name = "MODE")]
    memory_checks: Option<String>,
    /// How warpvisor-cpu's and warpvisor-opencl's resets find the pages VMs wrote: `auto`
    /// (default: the MMU where Linux offers it, on cpu with guard regions and on OpenCL CPU
    /// devices, else marks) or `marks` (a mark at every store).
    #[arg(long, value_name = "MODE")]
    dirty_pages: Option<String>,
    /// Skip the memcopy, transfer and wasm2c microbenchmarks.
    #[arg(long, conflicts_with = "micro_only")]
    no_micro: bool,
    /// Run only the microbenchmarks, not the ten benchmarks.
    #[arg(long)]
    micro_only: bool,
    /// VMs of the microbenchmarks' fleets (default: --vms).
    #[arg(long)]
    micro_vms: Option<u32>,
    /// Read bench-NAME.wasm from this folder instead of the modules built into the runner.
    #[arg(long, value_name = "DIR")]
    guests: Option<PathBuf>,
    /// Also run one batch of each benchmark on warpvisor-cpu with direct calls and with
    /// continuations (explicit memory checks, one kernel, both): slow calls per request in
    /// each mode and the share of execution they cost, measured (the default of the full run)
    #[arg(long, conflicts_with = "no_compare_calls")]
    compare_calls: bool,
    /// Skip that comparison
    #[arg(long)]
    no_compare_calls: bool,
    /// Build every warpvisor kernel with a call profile of its benchmark (`warpvisor
    /// profile`), recorded first on cpu from one batch of requests of another seed
    #[arg(long)]
    profiled: bool,
    /// Write each selected benchmark's requests for --seed into this folder and stop:
    /// NAME.body (the first request, for HTTP load generators) and NAME.jobs.jsonl (--batches
    /// x --vms jobs for `warpvisor run --jobs`; scripts/serve-bench.sh uses both).
    #[arg(long, value_name = "DIR")]
    write_requests: Option<PathBuf>,
}

/// `--write-requests`: the requests of the selected benchmarks as files.
fn write_requests(s: &Settings, dir: &std::path::Path) -> anyhow::Result<()> {
    use base64::Engine as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let count = (s.batches as usize).saturating_mul(s.vms as usize).max(1);
    for w in warpvisor_bench::select(&s.benchmarks).map_err(anyhow::Error::msg)? {
        let requests = w.requests(s.seed, count);
        let body = dir.join(format!("{}.body", w.name));
        std::fs::write(&body, &requests[0])
            .with_context(|| format!("writing {}", body.display()))?;
        let jobs: String = requests
            .iter()
            .map(|r| {
                let b64 = base64::engine::general_purpose::STANDARD.encode(r);
                format!("{}\n", serde_json::json!({ "stdin_base64": b64 }))
            })
            .collect();
        let path = dir.join(format!("{}.jobs.jsonl", w.name));
        std::fs::write(&path, jobs).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "{}: {} and {count} jobs in {}",
            w.name,
            body.display(),
            path.display()
        );
    }
    Ok(())
}

fn settings(a: &Args) -> anyhow::Result<Settings> {
    let mut s = if a.quick {
        Settings::quick()
    } else {
        Settings::full()
    };
    s.seed = a.seed;
    s.vms = a.vms.unwrap_or(s.vms);
    s.batches = a.batches.unwrap_or(s.batches);
    if s.vms == 0 || s.batches == 0 {
        anyhow::bail!("--vms and --batches must be at least 1");
    }
    if let Some(secs) = a.min_seconds {
        s.min_time = Duration::try_from_secs_f64(secs).map_err(|_| {
            anyhow::anyhow!("--min-seconds must be a non-negative number, not {secs}")
        })?;
    }
    if let Some(r) = a.rounds {
        s.rounds = r;
    }
    if let Some(w) = a.workers {
        anyhow::ensure!(w > 0, "--workers must be at least 1");
        s.workers = w;
    }
    s.benchmarks = a.benchmarks.clone();
    warpvisor_bench::select(&s.benchmarks).map_err(anyhow::Error::msg)?;
    s.platforms = a
        .platforms
        .iter()
        .map(|n| {
            Platform::from_name(n).ok_or_else(|| {
                anyhow::anyhow!("no platform called `{n}` (native, wasmtime, cpu, opencl, cuda)")
            })
        })
        .collect::<anyhow::Result<_>>()?;
    if let Some(i) = a.interleave {
        anyhow::ensure!(
            [0, 4, 8].contains(&i),
            "--interleave must be 0, 4 or 8, not {i}"
        );
        s.interleave = Some(i);
    }
    s.opt_level = a.opt_level;
    s.partition_ops = a.partition_ops;
    if let Some(name) = &a.calls {
        s.cpu_calls = CallMode::from_name(name).ok_or_else(|| {
            anyhow::anyhow!("--calls must be `direct` or `continuations`, not `{name}`")
        })?;
    }
    if let Some(name) = &a.memory_checks {
        s.memory_checks = Some(MemoryChecks::from_name(name).ok_or_else(|| {
            anyhow::anyhow!("--memory-checks must be `guard`, `explicit` or `auto`, not `{name}`")
        })?);
    }
    if let Some(name) = &a.dirty_pages {
        s.dirty_pages = DirtyPages::from_name(name).ok_or_else(|| {
            anyhow::anyhow!("--dirty-pages must be `auto` or `marks`, not `{name}`")
        })?;
    }
    s.micro = !a.no_micro;
    s.micro_only = a.micro_only;
    s.micro_vms = a.micro_vms.unwrap_or(s.vms);
    anyhow::ensure!(s.micro_vms > 0, "--micro-vms must be at least 1");
    s.guests = a.guests.clone();
    if a.compare_calls || a.no_compare_calls {
        s.compare_calls = a.compare_calls;
    }
    s.profiled = a.profiled;
    Ok(s)
}

fn run(a: Args) -> anyhow::Result<bool> {
    let s = settings(&a)?;
    if let Some(dir) = &a.write_requests {
        write_requests(&s, dir)?;
        return Ok(true);
    }
    let report =
        warpvisor_bench::run(&s, &|line| eprintln!("{line}")).map_err(anyhow::Error::msg)?;
    let md = markdown::render(&report);
    std::io::stdout().write_all(md.as_bytes())?;
    if let Some(path) = &a.markdown {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let chart_path = a
        .chart
        .clone()
        .or_else(|| a.json.as_ref().map(|j| j.with_extension("svg")));
    if let Some(path) = chart_path {
        chart::write_svg(&report, &path).map_err(anyhow::Error::msg)?;
    }
    if !report.all_validated() {
        eprintln!("error: not every benchmark was validated on every platform (see the report)");
    }
    Ok(report.all_validated())
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
