//! The VectorVisor benchmark suite (`vectorvisor.md` §4): the ten benchmark programs of
//! `warpvisor-workloads` served by the `native-x86` build, by wasmtime, and by warpvisor on
//! every kernel backend available — in one process, side by side, with every reply checked
//! against the native build's before a number is reported — plus the §4.2.1
//! microbenchmarks.
//!
//! Pipeline: [`platform::open`] → [`suite::Suite::run`] per benchmark ([`harness`] serves
//! and times, [`validation`] checks) → [`micro`] → [`report`] (JSON, Markdown, SVG).

pub mod call_modes;
pub mod cuda_on_cpu;
pub mod guests;
pub mod harness;
pub mod machine;
pub mod micro;
pub mod platform;
pub mod report;
pub mod settings;
pub mod suite;
pub mod validation;

use std::time::{Instant, SystemTime};

use warpvisor::codegen::CallMode;
use warpvisor_workloads::{Workload, WORKLOADS};

use crate::micro::MicroResults;
use crate::platform::{KernelPlatform, PerPlatform};
use crate::report::{BenchmarkResult, Report, SettingsReport};
use crate::settings::Settings;

/// Runs the suite as `settings` say; `progress` hears what is happening, line by line.
pub fn run(settings: &Settings, progress: &dyn Fn(&str)) -> Result<Report, String> {
    let started = Instant::now();
    let workloads = select(&settings.benchmarks)?;
    let (kernels, platforms) = platform::open(settings);
    for a in &platforms {
        progress(&format!(
            "{:<17} {}{}",
            a.platform,
            if a.available { "" } else { "not run: " },
            a.detail
        ));
    }
    let mut benchmarks = Vec::new();
    if !settings.micro_only {
        let suite = suite::Suite::new(settings, &kernels)?;
        for w in workloads {
            progress(&format!("{}: {}", w.title, w.summary));
            benchmarks.push(suite.run(w, progress));
        }
    }
    let micro = micro::run_all(settings, &kernels, progress);
    estimate_continuations(&mut benchmarks, &micro, &kernels);
    Ok(Report {
        warpvisor: env!("CARGO_PKG_VERSION"),
        started_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_sub(started.elapsed().as_secs()),
        machine: machine::describe(),
        settings: settings_report(settings, &kernels),
        platforms,
        benchmarks,
        microbenchmarks: Some(micro),
        total_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The benchmarks called `names` (all ten when empty), in the paper's order.
pub fn select(names: &[String]) -> Result<Vec<&'static Workload>, String> {
    if let Some(bad) = names
        .iter()
        .find(|n| warpvisor_workloads::find(n).is_none())
    {
        let known: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        return Err(format!(
            "no benchmark called `{bad}` (known: {})",
            known.join(", ")
        ));
    }
    Ok(WORKLOADS
        .iter()
        .filter(|w| names.is_empty() || names.iter().any(|n| n == w.name))
        .collect())
}

/// Fills each warpvisor run's continuation estimate from its backend's slow-call cost (runs
/// with direct calls make no continuation calls: their slow calls are host calls).
fn estimate_continuations(
    benchmarks: &mut [BenchmarkResult],
    micro: &MicroResults,
    kernels: &[KernelPlatform],
) {
    for run in benchmarks.iter_mut().flat_map(|b| b.runs.iter_mut()) {
        let continuations = kernels
            .iter()
            .any(|k| k.platform.key() == run.platform && k.kernel.calls == CallMode::Continuations);
        if !continuations {
            continue;
        }
        let cost = micro.slow_call.iter().find(|s| s.platform == run.platform);
        if let (Some(phases), Some(cost)) = (run.phases.as_mut(), cost) {
            phases.continuations_estimate_seconds =
                Some(phases.slow_calls as f64 * cost.ns_per_slow_call * 1e-9);
        }
    }
}

fn settings_report(s: &Settings, kernels: &[KernelPlatform]) -> SettingsReport {
    let mut interleave = PerPlatform::default();
    let mut partition_ops = PerPlatform::default();
    let mut calls = PerPlatform::default();
    let mut dirty_pages = PerPlatform::default();
    let mut memory_checks = PerPlatform::default();
    for k in kernels {
        interleave.set(k.platform, k.kernel.interleave);
        partition_ops.set(k.platform, k.kernel.partition_ops);
        calls.set(k.platform, k.kernel.calls.name());
        let mmu = k.backend.watches_writes(&k.kernel);
        dirty_pages.set(k.platform, if mmu { "mmu" } else { "marks" });
        let settled = k.backend.settle_memory_checks(&k.kernel);
        memory_checks.set(
            k.platform,
            settled.map_or("unsupported", |o| o.memory_checks.name()),
        );
    }
    SettingsReport {
        quick: s.quick,
        seed: s.seed,
        vms: s.vms,
        requests: s.requests(),
        min_seconds: s.min_time.as_secs_f64(),
        rounds: s.rounds,
        workers: s.workers,
        opt_level: s.opt_level,
        interleave,
        partition_ops,
        calls,
        dirty_pages,
        memory_checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmarks_are_selected_by_name_in_paper_order() {
        assert_eq!(select(&[]).unwrap().len(), 10);
        let two = select(&["lz4".into(), "scrypt".into()]).unwrap();
        assert_eq!(
            two.iter().map(|w| w.name).collect::<Vec<_>>(),
            ["scrypt", "lz4"]
        );
        let e = select(&["nope".into()]).unwrap_err();
        assert!(e.contains("`nope`") && e.contains("bill_pdf"), "{e}");
    }
}
