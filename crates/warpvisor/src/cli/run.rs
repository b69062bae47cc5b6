//! `warpvisor run`: invoke an exported function on a fleet of VMs.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::{read_file, FleetArgs};
use warpvisor::jobs::{parse_arg, parse_job, result_line};
use warpvisor::vmm::{Fleet, Imports, Outcome, Program};

/// Arguments of `warpvisor run`.
#[derive(Args)]
pub struct RunArgs {
    /// The module (.wasm or .wat).
    module: PathBuf,
    /// Exported function to run.
    #[arg(long)]
    invoke: String,
    /// VMs in the fleet; with more jobs, jobs run in successive batches.
    #[arg(long, default_value_t = 1)]
    vms: u32,
    /// Jobs file: one JSON object per line, `{"args": [...]}`.
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// Write one JSON result line per job here (default: standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
    /// Arguments of the function (without --jobs: every VM gets these).
    #[arg(last = true)]
    args: Vec<String>,
}

pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    if args.vms == 0 {
        anyhow::bail!("--vms must be at least 1");
    }
    let bytes = read_file(&args.module)?;
    let backend = args.fleet.backend()?;
    let program = Arc::new(Program::compile(
        &bytes,
        &args.fleet.kernel(),
        backend.as_ref(),
    )?);
    if let Some((name, _)) = program.module.imports.first() {
        anyhow::bail!(
            "the module imports `{}`.`{}`, which `run --invoke` does not provide",
            name.module,
            name.name
        );
    }
    let func = match program.module.export(&args.invoke) {
        Some(warpvisor::frontend::ExportKind::Func(f)) => f,
        _ => anyhow::bail!("the module has no exported function `{}`", args.invoke),
    };
    let params = program.module.func_type(func).params().to_vec();
    let jobs: Vec<Vec<warpvisor::vmm::Value>> = match &args.jobs {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            let mut jobs = Vec::new();
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                if line.trim().is_empty() {
                    continue;
                }
                let job = parse_job(&line, &params)
                    .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?;
                jobs.push(job);
            }
            jobs
        }
        None => {
            if args.args.len() != params.len() {
                anyhow::bail!(
                    "`{}` takes {} arguments, {} given after --",
                    args.invoke,
                    params.len(),
                    args.args.len()
                );
            }
            let one = args
                .args
                .iter()
                .zip(&params)
                .map(|(a, t)| parse_arg(a, *t))
                .collect::<Result<Vec<_>, _>>()?;
            vec![one; args.vms as usize]
        }
    };
    let mut fleet = Fleet::new(program, args.fleet.fleet(args.vms), Imports::default())?;
    let outcomes = fleet.invoke_batched(&args.invoke, &jobs)?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    for (i, o) in outcomes.iter().enumerate() {
        writeln!(out, "{}", result_line(i, o))?;
    }
    out.flush()?;
    let traps = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Trapped(_)))
        .count();
    eprintln!(
        "{} jobs on {} VMs: {} returned, {} trapped",
        outcomes.len(),
        args.vms,
        outcomes.len() - traps,
        traps
    );
    Ok(0)
}
