//! `warpvisor wast`: run spec-test scripts.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args;

use super::{read_limited, FleetArgs, MAX_MODULE_FILE_SIZE};
use warpvisor::backend::select::BackendKind;
use warpvisor::wast::{run_script, WastConfig};
use warpvisor::work_queue;

/// Arguments of `warpvisor wast`.
#[derive(Args)]
pub struct WastArgs {
    /// Script files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
    /// Scripts run at the same time (default: one per core).
    #[arg(long)]
    parallel: Option<usize>,
    /// Print every failure (by default the first 5 of each file).
    #[arg(long, short)]
    verbose: bool,
    /// Print each script's result on stderr as it finishes (always when stderr is a terminal):
    /// for long runs logged to a file.
    #[arg(long)]
    progress: bool,
}

/// Runs `warpvisor wast`; returns the exit code (1 when a directive failed).
pub fn run(args: WastArgs) -> anyhow::Result<i32> {
    let mut fleet_args = args.fleet.clone();
    // One VM per instance: spec scripts grow memory to ~800 pages.
    fleet_args.max_memory = fleet_args.max_memory.max(1024);
    fleet_args.workers = Some(1);
    let backend = fleet_args.backend()?;
    let kind = BackendKind::from_name(backend.name()).unwrap_or(BackendKind::Cpu);
    let config = WastConfig {
        kernel: fleet_args.kernel_for(kind),
        backend,
        fleet: fleet_args.fleet(1),
    };
    let mut scripts = Vec::new();
    for f in &args.files {
        let text = String::from_utf8(read_limited(f, MAX_MODULE_FILE_SIZE, "script file")?)
            .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", f.display()))?;
        let name = f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        scripts.push((name, text));
    }
    let threads = args.parallel.unwrap_or_else(work_queue::default_workers);
    let finished = AtomicUsize::new(0);
    let progress = super::progress::wanted(args.progress);
    let reports = work_queue::map_indexed(scripts.len(), threads, |i| {
        let (name, text) = &scripts[i];
        let r = run_script(name, text, &config);
        // Progress on stderr as scripts finish; the ordered report follows on stdout.
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        if !progress {
            return r;
        }
        super::errln!(
            "[{n}/{}] {}: {} passed, {} failed, {} skipped",
            scripts.len(),
            r.name,
            r.passed,
            r.failures.len(),
            r.skips.len()
        );
        r
    });
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut out = super::stdout();
    for r in reports {
        writeln!(
            out,
            "{}: {} passed, {} failed, {} skipped",
            r.name,
            r.passed,
            r.failures.len(),
            r.skips.len()
        )?;
        let shown = if args.verbose { usize::MAX } else { 5 };
        for f in r.failures.iter().take(shown) {
            writeln!(out, "  FAIL {}:{f}", r.name)?;
        }
        if r.failures.len() > shown {
            writeln!(
                out,
                "  ... {} more failures (--verbose shows all)",
                r.failures.len() - shown
            )?;
        }
        for s in &r.skips {
            writeln!(out, "  skip {}:{s}", r.name)?;
        }
        passed += r.passed;
        failed += r.failures.len();
        skipped += r.skips.len();
    }
    writeln!(out, "{passed} passed, {failed} failed, {skipped} skipped")?;
    out.flush()?;
    Ok(if failed > 0 { 1 } else { 0 })
}
