//! Hypercall transfer bandwidth (`vectorvisor.md` §4.2.1, Figure 7): every VM reads its input
//! with `fd_read` and writes it back with `fd_write`, so each byte crosses between the host
//! and the VM's memory twice, through the hypercall path a real program's I/O takes.

use std::time::Instant;

use serde::Serialize;
use warpvisor::vmm::FleetConfig;
use warpvisor::wasi::program::{WasiFleet, WasiRunConfig};
use warpvisor::wasi::WasiJob;

use super::build;
use crate::platform::KernelPlatform;

/// Bytes per VM, 4 KiB to 256 KiB.
pub const SIZES: [usize; 7] = [
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
];

/// Where the echo buffer starts in the guest's memory (below it: the iovec and counters).
const BUFFER: usize = 1024;
/// Pages of the guest's memory: the buffer holds the largest size.
const PAGES: u32 = 6;

/// One size's bandwidth on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct TransferResult {
    /// The platform's report name.
    pub platform: &'static str,
    /// Bytes each VM reads and then writes.
    pub bytes_per_vm: usize,
    /// VMs.
    pub vms: u32,
    /// Batches timed.
    pub batches: u32,
    /// Bytes moved per second (in and out) over the whole batch, GB/s.
    pub gb_per_s: f64,
    /// Bytes moved per second of hypercall service and transfers alone, GB/s.
    pub service_gb_per_s: f64,
}

/// The echo guest: reads stdin to the end (or a full buffer), then writes it to stdout.
pub fn module() -> String {
    let cap = SIZES[SIZES.len() - 1];
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") {PAGES})
  (func (export "_start") (local $len i32) (local $n i32)
    (block $done (loop $more
      ;; iovec at 0: the rest of the buffer
      (i32.store (i32.const 0) (i32.add (i32.const {BUFFER}) (local.get $len)))
      (i32.store (i32.const 4) (i32.sub (i32.const {cap}) (local.get $len)))
      (br_if $done (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
      (local.set $n (i32.load (i32.const 8)))
      (br_if $done (i32.eqz (local.get $n)))
      (local.set $len (i32.add (local.get $len) (local.get $n)))
      (br_if $more (i32.lt_u (local.get $len) (i32.const {cap})))))
    (i32.store (i32.const 0) (i32.const {BUFFER}))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
"#
    )
}

/// Every size on `k` with `vms` VMs, `batches` timed batches each.
pub fn run(k: &KernelPlatform, vms: u32, batches: u32) -> Result<Vec<TransferResult>, String> {
    let program = build(k, &module(), k.kernel.interleave)?;
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: vms,
            max_memory_pages: PAGES,
            ..FleetConfig::default()
        },
        program_name: "echo".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    let mut fleet = WasiFleet::new(program, &config).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for (s, &size) in SIZES.iter().enumerate() {
        let jobs: Vec<WasiJob> = (0..vms as usize)
            .map(|vm| WasiJob {
                stdin: (0..size)
                    .map(|i| (i * 31 + vm * 7 + s) as u8)
                    .collect::<Vec<u8>>()
                    .into(),
                ..WasiJob::default()
            })
            .collect();
        fleet.run_batch(&jobs).map_err(|e| e.to_string())?; // warm-up
        let before = fleet.stats();
        let start = Instant::now();
        for _ in 0..batches {
            let replies = fleet.run_batch(&jobs).map_err(|e| e.to_string())?;
            if let Some(vm) = (0..jobs.len())
                .find(|&vm| jobs[vm].stdin.as_bytes() != Some(&replies[vm].stdout[..]))
            {
                return Err(format!(
                    "echo of {size} bytes: VM {vm} wrote back other bytes"
                ));
            }
        }
        let seconds = start.elapsed().as_secs_f64().max(1e-9);
        let stats = fleet.stats().since(&before);
        let service = (stats.hypercall_service + stats.transfer)
            .as_secs_f64()
            .max(1e-9);
        let bytes = 2.0 * size as f64 * vms as f64 * batches as f64;
        rows.push(TransferResult {
            platform: k.platform.key(),
            bytes_per_vm: size,
            vms,
            batches,
            gb_per_s: bytes / seconds / 1e9,
            service_gb_per_s: bytes / service / 1e9,
        });
    }
    Ok(rows)
}
