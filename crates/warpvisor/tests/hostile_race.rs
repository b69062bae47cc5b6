//! The sandbox under a racing host: while 64 VMs open and create files through `d/`, a host
//! thread keeps replacing `d` by a symlink leading outside (relative and absolute) and back.
//! A path checked is the path used: no VM may ever read or create anything outside.

mod common;
#[path = "hostile/mod.rs"]
mod hostile;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hostile::{guest, on_fleet};
use warpvisor::wasi::WasiJob;

/// Swaps `sandbox/d` between the real directory and a symlink to `outside` until `stop`.
fn swap_until(root: &Path, stop: &AtomicBool, swaps: &AtomicU64) {
    let (d, real) = (root.join("sandbox/d"), root.join("sandbox/d.real"));
    let targets = [Path::new("../outside").to_path_buf(), root.join("outside")];
    let mut k = 0usize;
    while !stop.load(Ordering::Relaxed) {
        if std::fs::rename(&d, &real).is_ok() {
            let _ = std::os::unix::fs::symlink(&targets[k % 2], &d);
            std::thread::yield_now();
            let _ = std::fs::remove_file(&d);
            let _ = std::fs::rename(&real, &d);
            swaps.fetch_add(1, Ordering::Relaxed);
        }
        k += 1;
    }
}

#[test]
fn racing_symlink_swaps_never_lead_a_guest_outside() {
    let root = std::env::temp_dir().join(format!("warpvisor-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("sandbox/d")).unwrap();
    std::fs::create_dir_all(root.join("outside")).unwrap();
    std::fs::write(root.join("outside/target.txt"), "S").unwrap();
    std::fs::write(root.join("sandbox/d/target.txt"), "i").unwrap();
    let wasm = guest("race");
    let jobs = vec![WasiJob::default(); 64];
    let preopens = vec![(root.join("sandbox"), "/sandbox".to_string())];
    // Build the kernel before the race starts.
    let _ = on_fleet("cpu", &wasm, &jobs[..1], preopens.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let racer = {
        let (root, stop, swaps) = (root.clone(), stop.clone(), swaps.clone());
        std::thread::spawn(move || swap_until(&root, &stop, &swaps))
    };
    let results = on_fleet("cpu", &wasm, &jobs, preopens);
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    let reads: usize = results.iter().map(|r| r.stdout.len()).sum();
    for r in &results {
        assert_eq!(r.exit_code, 0);
        assert!(
            r.stdout.iter().all(|&b| b == b'i'),
            "a VM read a file outside its directory: {:?}",
            String::from_utf8_lossy(&r.stdout)
        );
    }
    assert!(
        !root.join("outside/new").exists(),
        "a VM created a file outside"
    );
    assert_eq!(
        std::fs::read(root.join("outside/target.txt")).unwrap(),
        b"S"
    );
    eprintln!(
        "{} swaps, {reads} reads inside during the run",
        swaps.load(Ordering::Relaxed)
    );
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the host thread never swapped"
    );
    let _ = std::fs::remove_dir_all(&root);
}
