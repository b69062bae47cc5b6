//! `warpvisor wasi-suite`: run the WASI test suite.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::FleetArgs;
use warpvisor::wasi::suite::{run_suite_reporting, TestOutcome};

/// Arguments of `warpvisor wasi-suite`.
#[derive(Args)]
pub struct WasiSuiteArgs {
    /// Folders of tests (searched recursively).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
    /// Print each test's result on stderr as it finishes (always when stderr is a terminal):
    /// for long runs logged to a file.
    #[arg(long)]
    progress: bool,
}

/// Runs `warpvisor wasi-suite`; returns the exit code (1 when a test failed).
pub fn run(args: WasiSuiteArgs) -> anyhow::Result<i32> {
    let mut out = super::stdout();
    let (executor, _) = args.fleet.executor()?;
    let scratch = std::env::temp_dir().join(format!("warpvisor-wasi-suite-{}", std::process::id()));
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for dir in &args.dirs {
        // Progress on stderr as tests finish; the ordered report follows on stdout.
        let wanted = super::progress::wanted(args.progress);
        let progress = |r: &warpvisor::wasi::suite::TestReport| {
            if !wanted {
                return;
            }
            let word = match r.outcome {
                TestOutcome::Passed => "ok",
                TestOutcome::Failed(_) => "FAIL",
                TestOutcome::Skipped(_) => "skip",
            };
            super::errln!("finished {word:4} {}", r.name);
        };
        for r in run_suite_reporting(dir, &executor, &scratch, &progress) {
            match r.outcome {
                TestOutcome::Passed => {
                    passed += 1;
                    writeln!(out, "ok   {}", r.name)?;
                }
                TestOutcome::Failed(why) => {
                    failed += 1;
                    writeln!(out, "FAIL {}: {why}", r.name)?;
                }
                TestOutcome::Skipped(why) => {
                    skipped += 1;
                    writeln!(out, "skip {}: {why}", r.name)?;
                }
            }
        }
    }
    writeln!(out, "{passed} passed, {failed} failed, {skipped} skipped")?;
    out.flush()?;
    Ok(if failed > 0 { 1 } else { 0 })
}
