//! `warpvisor devices`: every backend with its devices or the reason it is unavailable, and
//! what `--backend auto` picks.

use std::io::Write;

use warpvisor::backend::select::{self, BackendKind};

/// Runs `warpvisor devices`; returns the exit code.
pub fn run() -> anyhow::Result<i32> {
    let mut out = super::stdout();
    let probes: Vec<_> = BackendKind::ALL.into_iter().map(select::probe).collect();
    for p in &probes {
        match &p.state {
            Ok(devices) => {
                writeln!(out, "{}: available", p.kind.name())?;
                for d in devices {
                    writeln!(out, "  {d}")?;
                }
            }
            Err(why) => writeln!(out, "{}: unavailable — {why}", p.kind.name())?,
        }
    }
    let (pick, why) = select::pick_auto(&probes);
    writeln!(out, "auto: {} ({why})", pick.name())?;
    out.flush()?;
    Ok(0)
}
