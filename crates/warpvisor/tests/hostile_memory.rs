//! A fleet of 64 hostile VMs, each asking one `fd_write` to copy 512 MiB (512 iovecs over the
//! same 1 MiB buffer), stays under 200 MB of resident memory. Alone in its test binary, so
//! the process's peak RSS is this run's.

mod common;
#[path = "hostile/mod.rs"]
mod hostile;

use hostile::{case, guest, on_fleet};

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn sixty_four_vms_with_hostile_iovecs_stay_under_200_mb() {
    let jobs = vec![case(8); 64];
    // A warm-up run builds the kernel (and shows the baseline).
    let _ = on_fleet("cpu", &guest("memory"), &jobs[..1], Vec::new());
    eprintln!("baseline peak RSS {} MB", peak_rss() >> 20);
    let results = on_fleet("cpu", &guest("memory"), &jobs, Vec::new());
    for r in &results {
        // Each wrote its 1 MiB buffer once (then errno 0 and the count): not 512 MiB.
        assert_eq!(r.stdout.len(), (1 << 20) + 5);
    }
    let peak = peak_rss();
    eprintln!("peak RSS {} MB", peak >> 20);
    assert!(peak < 200 << 20, "peak RSS {} MB", peak >> 20);
}
