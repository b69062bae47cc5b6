//! `warpvisor devices`: every backend with its devices or the reason it is unavailable, and
//! what `--backend auto` picks.

use warpvisor::backend::select::{self, BackendKind};

pub fn run() -> anyhow::Result<i32> {
    let probes: Vec<_> = BackendKind::ALL.into_iter().map(select::probe).collect();
    for p in &probes {
        match &p.state {
            Ok(devices) => {
                println!("{}: available", p.kind.name());
                for d in devices {
                    println!("  {d}");
                }
            }
            Err(why) => println!("{}: unavailable — {why}", p.kind.name()),
        }
    }
    let (pick, why) = select::pick_auto(&probes);
    println!("auto: {} ({why})", pick.name());
    Ok(0)
}
