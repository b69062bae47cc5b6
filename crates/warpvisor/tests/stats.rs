//! `--stats` adds up: after compilation its phases (allocation, instantiation, execution,
//! transfers, hypercall service, scheduling, the host's work around the fleet, release,
//! output) account for at least 95% of the wall time without overlapping, and it reports the
//! bytes moved between host and device, per launch too. Checked on the `cpu` backend for an
//! `--invoke` run of a few hundred jobs and a WASI program in several batches.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stats");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The `--stats` report, read back.
#[derive(Debug, Default)]
struct Report {
    /// The whole run, from the `stats:` line.
    wall: f64,
    /// Every `  name  X s` line, in order.
    phases: Vec<(String, f64)>,
    /// The `unaccounted` line's seconds.
    unaccounted: f64,
    /// The `moved` line: bytes to, bytes from the device, per launch, transfers.
    moved: Option<(u64, u64, u64, u64)>,
    /// Launches, from the `on-device execute` line.
    launches: u64,
}

impl Report {
    fn phase(&self, name: &str) -> f64 {
        self.phases
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no `{name}` line in {self:?}"))
            .1
    }

    /// Wall time after compilation.
    fn after_compilation(&self) -> f64 {
        self.wall - self.phase("translate") - self.phase("device compile")
    }

    /// The phases after compilation, summed.
    fn accounted(&self) -> f64 {
        self.phases
            .iter()
            .filter(|(n, _)| !matches!(n.as_str(), "translate" | "device compile"))
            .map(|(_, s)| s)
            .sum()
    }
}

/// The number before ` s` at the start of `rest` (`0.001234 s ...`).
fn seconds(rest: &str) -> Option<f64> {
    rest.trim_start().split(" s").next()?.trim().parse().ok()
}

/// The unsigned integers of `text`, in order.
fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

fn parse(stderr: &str) -> Report {
    let mut r = Report::default();
    let mut lines = stderr.lines().skip_while(|l| !l.starts_with("stats: "));
    let head = lines.next().unwrap_or_else(|| panic!("no stats: {stderr}"));
    r.wall = seconds(head.split(" in ").nth(1).unwrap()).unwrap();
    for line in lines {
        let Some(line) = line.strip_prefix("  ") else {
            break;
        };
        // The name is everything before the first run of two spaces.
        let (name, rest) = line.split_once("  ").unwrap();
        match name {
            "moved" => {
                let n = numbers(rest);
                assert_eq!(n.len(), 4, "{line}");
                r.moved = Some((n[0], n[1], n[2], n[3]));
            }
            // Counts, not time.
            "slow calls" => {}
            "unaccounted" => r.unaccounted = seconds(rest).unwrap(),
            _ => {
                let s = seconds(rest).unwrap_or_else(|| panic!("no seconds: {line}"));
                if name == "on-device execute" {
                    r.launches = numbers(rest.split('(').nth(1).unwrap())[0];
                }
                r.phases.push((name.to_string(), s));
            }
        }
    }
    r
}

/// Runs `warpvisor run` with `--stats --backend cpu` and reads the report.
fn run_stats(args: &[&str]) -> Report {
    let out = Command::new(common::warpvisor_bin())
        .current_dir(repo())
        .arg("run")
        .args(args)
        .args(["--stats", "--backend", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    eprintln!("{stderr}");
    parse(&stderr)
}

/// The report adds up: every phase is there, they cover at least 95% of the time after
/// compilation and no more than all of it (phases that overlapped would count time twice),
/// the `unaccounted` line is the difference, and the bytes moved are reported.
fn check(r: &Report) {
    for phase in [
        "translate",
        "device compile",
        "allocation",
        "instantiation",
        "on-device execute",
        "transfers",
        "hypercall service",
        "scheduling",
        "host jobs",
        "release",
        "output",
    ] {
        r.phase(phase);
    }
    // Each printed number is rounded to a microsecond.
    let rounding = 1e-6 * (r.phases.len() + 1) as f64;
    let after = r.after_compilation();
    let accounted = r.accounted();
    assert!(after > 0.0, "{r:?}");
    assert!(
        accounted >= 0.95 * after,
        "the phases account for {accounted} s of {after} s after compilation ({:.1}%): {r:?}",
        100.0 * accounted / after
    );
    assert!(
        accounted <= after + rounding,
        "the phases add up to {accounted} s, more than the {after} s after compilation: {r:?}"
    );
    assert!(
        (after - accounted - r.unaccounted).abs() <= rounding + 1e-6,
        "{r:?}"
    );
    assert!(r.phase("allocation") > 0.0, "{r:?}");
    let (to, from, per_launch, transfers) = r.moved.unwrap_or_else(|| panic!("no moved: {r:?}"));
    assert!(to > 0 && from > 0 && transfers > 0, "{r:?}");
    assert!(r.launches > 0, "{r:?}");
    assert_eq!(per_launch, (to + from) / r.launches, "{r:?}");
}

/// The tests here measure where time goes: one at a time, so that neither measures a run
/// whose workers share the 2 cores with the other's C compiler.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `--invoke` over a few hundred jobs, in five batches (a reset before each but the first),
/// each long enough (fib 35–39) that a few hundred microseconds of scheduling noise between
/// phases stays well under the 5% the report may leave unaccounted.
#[test]
fn invoke_stats_add_up() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let jobs = tmp("fib-jobs.jsonl");
    let lines: String = (0..300)
        .map(|i| format!("{{\"args\": [{}]}}\n", 35 + i % 5))
        .collect();
    std::fs::write(&jobs, lines).unwrap();
    let r = run_stats(&[
        "examples/fib.wat",
        "--invoke",
        "fib",
        "--vms",
        "64",
        "--jobs",
        jobs.to_str().unwrap(),
    ]);
    check(&r);
    assert!(r.phase("instantiation") > 0.0, "{r:?}");
    // One launch per batch: fib makes no hypercalls.
    assert_eq!(r.launches, 5, "{r:?}");
}

/// A WASI program reading stdin and writing stdout, in four batches of sixteen.
#[test]
fn wasi_stats_add_up() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let jobs = tmp("sort-jobs.jsonl");
    let lines: String = (0..64u64)
        .map(|i| {
            let nums: Vec<String> = (0..2000u64)
                .map(|k| ((i * 7919 + k * 104_729) % 1_000_003).to_string())
                .collect();
            let order = if i % 2 == 0 { "asc" } else { "desc" };
            format!(
                "{{\"args\": [\"{order}\"], \"stdin\": \"{}\"}}\n",
                nums.join(" ")
            )
        })
        .collect();
    std::fs::write(&jobs, lines).unwrap();
    let r = run_stats(&[
        "guests/wasm/c-sort.wasm",
        "--vms",
        "16",
        "--jobs",
        jobs.to_str().unwrap(),
    ]);
    check(&r);
    assert!(r.phase("hypercall service") > 0.0, "{r:?}");
    assert!(r.phase("host jobs") > 0.0, "{r:?}");
}
