//! The report as Markdown: the tables `docs/benchmarks.md` carries.

use std::fmt::Write;

use super::{BenchmarkResult, PlatformRun, Report, RunStatus};
use crate::call_modes::CallModes;
use crate::micro::MicroResults;
use crate::platform::{PerPlatform, Platform};

/// The whole report as Markdown.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let s = &r.settings;
    let _ = writeln!(
        out,
        "Machine: {} ({} threads, {} GiB, {}). {} run: {} requests per benchmark, fleets of {} VMs, at least {:.1} s per platform in {} rounds taken in turn, {} workers, device opt-level {}, seed {}. Total {:.0} s.\n",
        r.machine.cpu,
        r.machine.cores,
        r.machine.memory_gib,
        r.machine.os,
        if s.quick { "Quick" } else { "Full" },
        s.requests,
        s.vms,
        s.min_seconds,
        s.rounds,
        s.workers,
        s.opt_level,
        s.seed,
        r.total_seconds
    );
    out.push_str("Platforms:\n");
    for a in &r.platforms {
        let _ = writeln!(
            out,
            "- `{}`: {}{}",
            a.platform,
            if a.available { "" } else { "not run — " },
            a.detail
        );
    }
    for p in [Platform::Cpu, Platform::OpenCl, Platform::Cuda] {
        if let (Some(i), Some(ops)) = (s.interleave.get(p), s.partition_ops.get(p)) {
            let calls = s.calls.get(p).copied().unwrap_or("continuations");
            let dirty = s.dirty_pages.get(p).copied().unwrap_or("marks");
            let checks = s.memory_checks.get(p).copied().unwrap_or("explicit");
            let _ = writeln!(
                out,
                "- `{}` kernels: interleave {i}, partitions of {ops} operators (0: one kernel), \
                 {calls} calls, dirty pages by {dirty}, memory checks {checks}",
                p.key()
            );
        }
    }
    out.push('\n');
    throughput_table(&mut out, &r.benchmarks);
    ratio_table(&mut out, &r.benchmarks);
    latency_table(&mut out, &r.benchmarks);
    phase_table(&mut out, &r.benchmarks);
    call_mode_table(&mut out, &r.benchmarks);
    failures(&mut out, &r.benchmarks);
    if let Some(m) = &r.microbenchmarks {
        micro_tables(&mut out, m);
    }
    out
}

fn header(out: &mut String, first: &[&str], platforms: &[Platform]) {
    let mut cols: Vec<String> = first.iter().map(|c| c.to_string()).collect();
    cols.extend(platforms.iter().map(|p| format!("`{}`", p.key())));
    let _ = writeln!(out, "| {} |", cols.join(" | "));
    let align: Vec<&str> = (0..cols.len())
        .map(|i| if i < first.len() { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
}

/// The cell of platform `p` in row `b`: `value(x)` where `values` has one, else why not.
fn cell(
    b: &BenchmarkResult,
    p: Platform,
    values: &PerPlatform<f64>,
    value: impl Fn(f64) -> String,
) -> String {
    if let Some(&v) = values.get(p) {
        return value(v);
    }
    match b
        .runs
        .iter()
        .find(|r| r.platform == p.key())
        .map(|r| r.status)
    {
        Some(RunStatus::Mismatch) => "✗ differs".into(),
        Some(RunStatus::Error) => "✗ failed".into(),
        _ => "—".into(),
    }
}

fn throughput_table(out: &mut String, benches: &[BenchmarkResult]) {
    out.push_str("### Throughput (requests/s)\n\n");
    header(out, &["Benchmark", "Validated"], &Platform::ALL);
    for b in benches {
        let cells: Vec<String> = Platform::ALL
            .iter()
            .map(|&p| cell(b, p, &b.throughput, |v| format!("{v:.1}")))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            b.title,
            if b.validated { "yes" } else { "**no**" },
            cells.join(" | ")
        );
    }
    out.push('\n');
}

fn ratio_table(out: &mut String, benches: &[BenchmarkResult]) {
    let platforms = &Platform::ALL[1..];
    out.push_str("### Throughput relative to `native-x86` (and to `wasmtime`)\n\n");
    header(out, &["Benchmark"], platforms);
    for b in benches {
        let cells: Vec<String> = platforms
            .iter()
            .map(|&p| {
                cell(b, p, &b.ratio_to_native, |v| {
                    match b.ratio_to_wasmtime.get(p) {
                        Some(w) if p != Platform::Wasmtime => format!("{v:.3}× ({w:.2}×)"),
                        _ => format!("{v:.3}×"),
                    }
                })
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", b.title, cells.join(" | "));
    }
    out.push('\n');
}

fn latency_table(out: &mut String, benches: &[BenchmarkResult]) {
    out.push_str("### Batch latency (ms): one request on `native-x86` and `wasmtime`, one fleet of requests on warpvisor\n\n");
    header(out, &["Benchmark"], &Platform::ALL);
    for b in benches {
        let cells: Vec<String> = Platform::ALL
            .iter()
            .map(|&p| cell(b, p, &b.batch_latency_ms, |v| format!("{v:.2}")))
            .collect();
        let _ = writeln!(out, "| {} | {} |", b.title, cells.join(" | "));
    }
    out.push('\n');
}

fn phase_table(out: &mut String, benches: &[BenchmarkResult]) {
    let rows: Vec<(&BenchmarkResult, &PlatformRun)> = benches
        .iter()
        .flat_map(|b| b.runs.iter().map(move |r| (b, r)))
        .filter(|(_, r)| r.phases.is_some() && r.status == RunStatus::Validated)
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str("### Where warpvisor's time goes\n\n");
    out.push_str("Shares of the timed passes' wall time (the phases do not overlap; *Other* is what none of them measures); counts per request. *Allocate* creates the fleet's storage once, before the timed passes. *Continuations* estimates the save/restore time inside execution as slow calls × the backend's measured cost of one (see *Slow-call cost*). *Scheduling* is the fleet's bookkeeping between launches; *Jobs* the host staging requests and collecting replies. *Bytes / launch* counts both directions.\n\n");
    out.push_str("| Benchmark | Platform | Build + warm-up s | Allocate ms | Execute | Continuations (est.) | Transfers | Hypercalls | Instantiate | Scheduling | Jobs | Other | Launches / batch | Bytes / launch | Slow calls / req | Saved values / req | Indirect calls / req |\n");
    out.push_str(
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (b, r) in rows {
        let Some(ph) = r.phases else { continue };
        let pct = |x: f64| format!("{:.1}%", 100.0 * x / r.seconds.max(1e-9));
        let per_req = |x: u64| format!("{:.0}", x as f64 / r.requests.max(1) as f64);
        let batches = (r.requests as f64 / r.batch_size.max(1) as f64).max(1.0);
        let _ = writeln!(
            out,
            "| {} | `{}` | {:.1} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} |",
            b.title,
            r.platform,
            r.build_seconds + r.warmup_seconds,
            ph.allocate_seconds * 1e3,
            pct(ph.execute_seconds),
            ph.continuations_estimate_seconds.map_or("—".into(), pct),
            pct(ph.transfer_seconds),
            pct(ph.hypercall_seconds),
            pct(ph.instantiate_seconds),
            pct(ph.schedule_seconds),
            pct(ph.host_seconds),
            pct(ph.other_seconds),
            ph.launches as f64 / batches,
            ph.bytes_per_launch,
            per_req(ph.slow_calls),
            per_req(ph.saved_words),
            per_req(ph.indirect_calls),
        );
    }
    out.push('\n');
}

fn call_mode_table(out: &mut String, benches: &[BenchmarkResult]) {
    let rows: Vec<(&BenchmarkResult, &CallModes)> = benches
        .iter()
        .filter_map(|b| b.call_modes.as_ref().map(|c| (b, c)))
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "### Continuations measured (`warpvisor-cpu`, one batch in each call mode)

",
    );
    out.push_str("The same batch with direct calls and with continuations (the GPU backends' kernels), both with explicit memory checks and one kernel, fastest execution of three runs each; replies checked against `native-x86` in both. *Share* is the part of the continuation run's execution that direct calls save.

");
    out.push_str("| Benchmark | Slow calls / req, direct | Slow calls / req, continuations | Saved values / req, continuations | Execute ms, direct | Execute ms, continuations | Share |
");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for (b, c) in rows {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1}% |",
            b.title,
            c.direct.slow_calls_per_request,
            c.continuations.slow_calls_per_request,
            c.continuations.saved_values_per_request,
            c.direct.execute_seconds * 1e3,
            c.continuations.execute_seconds * 1e3,
            100.0 * c.slow_call_share,
        );
    }
    out.push('\n');
}

fn failures(out: &mut String, benches: &[BenchmarkResult]) {
    let bad: Vec<(&BenchmarkResult, &PlatformRun)> = benches
        .iter()
        .flat_map(|b| b.runs.iter().map(move |r| (b, r)))
        .filter(|(_, r)| r.status != RunStatus::Validated)
        .collect();
    let call_modes: Vec<(&BenchmarkResult, &String)> = benches
        .iter()
        .filter_map(|b| b.call_modes_error.as_ref().map(|e| (b, e)))
        .collect();
    if bad.is_empty() && call_modes.is_empty() {
        return;
    }
    out.push_str("### Not validated\n\n");
    for (b, e) in call_modes {
        let _ = writeln!(
            out,
            "- {} on `warpvisor-cpu` in both call modes: {}",
            b.title,
            e.replace('\n', " ")
        );
    }
    for (b, r) in bad {
        let _ = writeln!(
            out,
            "- {} on `{}`: {}",
            b.title,
            r.platform,
            r.detail.as_deref().unwrap_or("").replace('\n', " ")
        );
    }
    out.push('\n');
}

fn micro_tables(out: &mut String, m: &MicroResults) {
    if !m.slow_call.is_empty() {
        out.push_str("### Slow-call cost\n\n| Platform | VMs | ns per slow call (over a plain call) | ns per plain call |\n|---|---:|---:|---:|\n");
        for s in &m.slow_call {
            let _ = writeln!(
                out,
                "| `{}` | {} | {:.2} | {:.3} |",
                s.platform, s.vms, s.ns_per_slow_call, s.ns_per_plain_call
            );
        }
        out.push_str(
            "\nFleet execution time divided by the calls of all VMs (they run at once).\n\n",
        );
    }
    if !m.wasm2c.is_empty() {
        out.push_str("### Against wasm2c (one VM; wabt's wasm2c built with the kernels' compiler and flags)\n\n| Program | Work | Platform | Calls | warpvisor (s) | wasm2c (s) | warpvisor / wasm2c |\n|---|---|---|---|---:|---:|---:|\n");
        for r in &m.wasm2c {
            let _ = writeln!(
                out,
                "| {} | {} ({}) | `{}` | {} | {:.4} | {:.4} | {:.2}× |",
                r.program, r.what, r.arg, r.platform, r.calls, r.warpvisor_s, r.wasm2c_s, r.ratio
            );
        }
        out.push_str(
            "\nBest of three runs each; the results of both sides are compared first.\n\n",
        );
    }
    for p in &m.peak_copy {
        let rows: Vec<_> = m
            .memcopy
            .iter()
            .filter(|r| r.platform == p.platform)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "### Memcopy bandwidth on `{}` (GB/s and share of the device's peak copy, {:.2} GB/s over {} MiB)\n",
            p.platform,
            p.gb_per_s,
            p.bytes >> 20
        );
        let mut unrolls: Vec<u32> = rows.iter().map(|r| r.unroll).collect();
        unrolls.sort_unstable();
        unrolls.dedup();
        let heads: Vec<String> = unrolls.iter().map(|u| format!("unroll {u}")).collect();
        let _ = writeln!(
            out,
            "| Interleave | Width (bytes) | {} |",
            heads.join(" | ")
        );
        let _ = writeln!(out, "|---:|---:|{}|", vec!["---:"; unrolls.len()].join("|"));
        let mut keys: Vec<(u32, u32)> = rows.iter().map(|r| (r.interleave, r.width)).collect();
        keys.sort_unstable();
        keys.dedup();
        for (interleave, width) in keys {
            let cells: Vec<String> = unrolls
                .iter()
                .map(|&u| {
                    rows.iter()
                        .find(|r| r.interleave == interleave && r.width == width && r.unroll == u)
                        .map_or("—".into(), |r| {
                            format!("{:.2} ({:.0}%)", r.gb_per_s, 100.0 * r.fraction_of_peak)
                        })
                })
                .collect();
            let _ = writeln!(out, "| {interleave} | {width} | {} |", cells.join(" | "));
        }
        out.push('\n');
    }
    if !m.transfer.is_empty() {
        let mut platforms: Vec<&str> = m.transfer.iter().map(|t| t.platform).collect();
        platforms.dedup();
        out.push_str("### Hypercall transfer bandwidth (GB/s in + out; in parentheses, over hypercall service and transfer time only)\n\n");
        let _ = writeln!(
            out,
            "| Bytes per VM | {} |",
            platforms
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(out, "|---:|{}|", vec!["---:"; platforms.len()].join("|"));
        let mut sizes: Vec<usize> = m.transfer.iter().map(|t| t.bytes_per_vm).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let cells: Vec<String> = platforms
                .iter()
                .map(|p| {
                    m.transfer
                        .iter()
                        .find(|t| t.platform == *p && t.bytes_per_vm == size)
                        .map_or("—".into(), |t| {
                            format!("{:.3} ({:.3})", t.gb_per_s, t.service_gb_per_s)
                        })
                })
                .collect();
            let _ = writeln!(out, "| {} KiB | {} |", size >> 10, cells.join(" | "));
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, Phases};

    fn run_with(phases: Phases) -> BenchmarkResult {
        BenchmarkResult {
            name: "lz4",
            title: "LZ4",
            summary: "",
            validated: true,
            requests: 8,
            request_bytes: 0.0,
            reply_bytes: 0.0,
            throughput: PerPlatform::default(),
            ratio_to_native: PerPlatform::default(),
            ratio_to_wasmtime: PerPlatform::default(),
            batch_latency_ms: PerPlatform::default(),
            call_modes: None,
            call_modes_error: None,
            runs: vec![PlatformRun {
                platform: "warpvisor-cpu",
                status: RunStatus::Validated,
                detail: None,
                build_seconds: 1.0,
                warmup_seconds: 0.5,
                requests: 8,
                seconds: 2.0,
                throughput: 4.0,
                batch_size: 4,
                batch_latency_ms: Latency::default(),
                phases: Some(phases),
            }],
        }
    }

    /// A benchmark measured in both call modes gets a row with both modes' counts and times
    /// and the share direct calls save; a failed comparison is listed as not validated.
    #[test]
    fn call_mode_table_shows_both_modes_and_the_measured_share() {
        use crate::call_modes::ModeRun;
        let mut b = run_with(Phases::default());
        b.call_modes = Some(CallModes {
            requests: 8,
            direct: ModeRun {
                slow_calls_per_request: 6.0,
                saved_values_per_request: 0.0,
                execute_seconds: 0.003,
            },
            continuations: ModeRun {
                slow_calls_per_request: 1200.0,
                saved_values_per_request: 9000.0,
                execute_seconds: 0.004,
            },
            slow_call_share: 0.25,
        });
        let mut out = String::new();
        call_mode_table(&mut out, std::slice::from_ref(&b));
        assert!(
            out.contains("| LZ4 | 6 | 1200 | 9000 | 3.00 | 4.00 | 25.0% |"),
            "{out}"
        );
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["call_modes"]["slow_call_share"], 0.25, "{json}");
        b.call_modes = None;
        b.call_modes_error = Some("with continuations calls: reply 3 differs".into());
        let mut out = String::new();
        call_mode_table(&mut out, std::slice::from_ref(&b));
        assert!(out.is_empty(), "{out}");
        failures(&mut out, std::slice::from_ref(&b));
        assert!(
            out.contains("- LZ4 on `warpvisor-cpu` in both call modes: with continuations"),
            "{out}"
        );
    }

    /// Every phase gets its share of the timed passes, allocation its milliseconds, and the
    /// shares add up with *Other*.
    #[test]
    fn phase_table_shows_every_phase_and_the_bytes_per_launch() {
        let phases = Phases {
            allocate_seconds: 0.00125,
            execute_seconds: 1.0,
            transfer_seconds: 0.2,
            hypercall_seconds: 0.3,
            instantiate_seconds: 0.1,
            schedule_seconds: 0.16,
            host_seconds: 0.04,
            other_seconds: 0.2,
            launches: 10,
            hypercalls: 40,
            bytes_to_device: 6000,
            bytes_from_device: 4000,
            transfers: 30,
            bytes_per_launch: 1000,
            slow_calls: 80,
            indirect_calls: 0,
            saved_words: 16,
            continuations_estimate_seconds: None,
        };
        let mut out = String::new();
        phase_table(&mut out, &[run_with(phases)]);
        assert!(out.contains("| Scheduling | Jobs | Other |"), "{out}");
        assert!(
            out.contains("| Launches / batch | Bytes / launch |"),
            "{out}"
        );
        assert!(
            out.contains(
                "| LZ4 | `warpvisor-cpu` | 1.5 | 1.25 | 50.0% | — | 10.0% | 15.0% | 5.0% | 8.0% | 2.0% | 10.0% | 5 | 1000 | 10 | 2 | 0 |"
            ),
            "{out}"
        );
        let json = serde_json::to_value(phases).unwrap();
        for key in [
            "allocate_seconds",
            "schedule_seconds",
            "host_seconds",
            "bytes_to_device",
            "bytes_from_device",
            "transfers",
            "bytes_per_launch",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
    }
}
