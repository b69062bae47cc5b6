//! `warpvisor wasi-suite`: run the WASI test suite.

use std::path::PathBuf;

use clap::Args;

use super::FleetArgs;
use warpvisor::wasi::suite::{run_suite, TestOutcome};

/// Arguments of `warpvisor wasi-suite`.
#[derive(Args)]
pub struct WasiSuiteArgs {
    /// Folders of tests (searched recursively).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
}

pub fn run(args: WasiSuiteArgs) -> anyhow::Result<i32> {
    let (executor, _) = args.fleet.executor()?;
    let scratch = std::env::temp_dir().join(format!("warpvisor-wasi-suite-{}", std::process::id()));
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for dir in &args.dirs {
        for r in run_suite(dir, &executor, &scratch) {
            match r.outcome {
                TestOutcome::Passed => {
                    passed += 1;
                    println!("ok   {}", r.name);
                }
                TestOutcome::Failed(why) => {
                    failed += 1;
                    println!("FAIL {}: {why}", r.name);
                }
                TestOutcome::Skipped(why) => {
                    skipped += 1;
                    println!("skip {}: {why}", r.name);
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    Ok(if failed > 0 { 1 } else { 0 })
}
