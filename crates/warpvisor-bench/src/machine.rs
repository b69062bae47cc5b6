//! The machine a report comes from.

use crate::report::Machine;

/// This machine: CPU model and threads, memory, OS.
pub fn describe() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(
            || std::env::consts::ARCH.to_string(),
            |(_, v)| v.trim().to_string(),
        );
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: (kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    }
}
