//! Memory bandwidth through the interleaved layout (`vectorvisor.md` §4.2.1, Figure 6): each
//! VM copies 1 MiB of its memory to another region with a WebAssembly loop that moves `width`
//! bytes per load/store pair, `unroll` pairs per iteration. Bandwidth is bytes copied per
//! second over the whole fleet, compared with the device's own buffer copy.

use std::fmt::Write;

use serde::Serialize;
use warpvisor::vmm::{Fleet, FleetConfig, Value};

use super::{build, expect_all};
use crate::platform::KernelPlatform;

/// Bytes each VM copies per pass.
pub const BYTES: u32 = 1 << 20;
/// Copy widths, bytes per load/store pair.
pub const WIDTHS: [u32; 4] = [1, 2, 4, 8];
/// Load/store pairs per loop iteration.
pub const UNROLLS: [u32; 3] = [1, 4, 8];
/// The interleaves measured: the paper's 4 and 8, and 0 (contiguous, the layout CPU devices
/// use) for reference.
pub const INTERLEAVES: [u32; 3] = [0, 4, 8];

/// One configuration's bandwidth.
#[derive(Debug, Clone, Serialize)]
pub struct MemcopyResult {
    /// The platform's report name.
    pub platform: &'static str,
    /// Bytes per memory cell.
    pub interleave: u32,
    /// Bytes per load/store pair.
    pub width: u32,
    /// Pairs per loop iteration.
    pub unroll: u32,
    /// VMs copying at once.
    pub vms: u32,
    /// Bytes copied in all, over every VM and pass.
    pub bytes: u64,
    /// Copy bandwidth, GB/s (10^9 bytes copied per second of kernel execution).
    pub gb_per_s: f64,
    /// `gb_per_s` over the device's own copy bandwidth.
    pub fraction_of_peak: f64,
}

/// A device's own copy bandwidth.
#[derive(Debug, Clone, Serialize)]
pub struct PeakCopy {
    /// The platform's report name.
    pub platform: &'static str,
    /// Bytes per copy.
    pub bytes: usize,
    /// GB/s.
    pub gb_per_s: f64,
}

fn load_store(width: u32) -> (&'static str, &'static str) {
    match width {
        1 => ("i32.load8_u", "i32.store8"),
        2 => ("i32.load16_u", "i32.store16"),
        4 => ("i32.load", "i32.store"),
        _ => ("i64.load", "i64.store"),
    }
}

/// The module: `init` fills the source, `copy_wW_uU(reps)` copies it `reps` times, `check`
/// returns 1 when the copy equals the source.
pub fn module() -> String {
    let mut wat = format!(
        "(module\n  (memory {pages} {pages})\n  (func (export \"init\") (result i32) (local $i i32)\n    (loop $l (i64.store (local.get $i) (i64.mul (i64.extend_i32_u (local.get $i)) (i64.const 0x9e3779b97f4a7c15)))\n      (local.set $i (i32.add (local.get $i) (i32.const 8)))\n      (br_if $l (i32.lt_u (local.get $i) (i32.const {BYTES}))))\n    (i32.const 1))\n  (func (export \"check\") (result i32) (local $i i32)\n    (loop $l\n      (if (i64.ne (i64.load (local.get $i)) (i64.load offset={BYTES} (local.get $i))) (then (return (i32.const 0))))\n      (local.set $i (i32.add (local.get $i) (i32.const 8)))\n      (br_if $l (i32.lt_u (local.get $i) (i32.const {BYTES}))))\n    (i32.const 1))\n",
        pages = 2 * BYTES / 65536
    );
    for width in WIDTHS {
        for unroll in UNROLLS {
            let (load, store) = load_store(width);
            let _ = writeln!(
                wat,
                "  (func (export \"copy_w{width}_u{unroll}\") (param $reps i32) (result i32) (local $i i32)\n    (loop $rep (local.set $i (i32.const 0))\n      (loop $copy"
            );
            for k in 0..unroll {
                let off = k * width;
                let _ = writeln!(
                    wat,
                    "        ({store} offset={} (local.get $i) ({load} offset={off} (local.get $i)))",
                    BYTES + off
                );
            }
            let _ = writeln!(
                wat,
                "        (local.set $i (i32.add (local.get $i) (i32.const {})))\n        (br_if $copy (i32.lt_u (local.get $i) (i32.const {BYTES}))))\n      (local.set $reps (i32.sub (local.get $reps) (i32.const 1)))\n      (br_if $rep (i32.gt_s (local.get $reps) (i32.const 0))))\n    (i32.const 1))",
                width * unroll
            );
        }
    }
    wat.push_str(")\n");
    wat
}

/// The device's peak copy bandwidth on `k`: the best of a copy as large as a fleet of `vms`
/// VMs copies in one pass (the same footprint, so caches favour neither side) and a 256 MiB
/// copy (what the memory itself sustains).
pub fn peak(k: &KernelPlatform, vms: u32) -> Result<PeakCopy, String> {
    let mut best: Option<PeakCopy> = None;
    for bytes in [vms as usize * BYTES as usize, 256 << 20] {
        let rate = k
            .backend
            .copy_bandwidth(bytes)
            .map_err(|e| format!("copying {bytes} bytes: {e}"))?;
        if best.as_ref().is_none_or(|b| rate / 1e9 > b.gb_per_s) {
            best = Some(PeakCopy {
                platform: k.platform.key(),
                bytes,
                gb_per_s: rate / 1e9,
            });
        }
    }
    best.ok_or_else(|| "no copy was measured".to_string())
}

/// Every width and unroll at interleave `interleave` on `k`, `vms` VMs, `reps` passes each.
pub fn run(
    k: &KernelPlatform,
    interleave: u32,
    vms: u32,
    reps: u32,
    peak: &PeakCopy,
) -> Result<Vec<MemcopyResult>, String> {
    let program = build(k, &module(), interleave)?;
    let config = FleetConfig {
        num_vms: vms,
        max_memory_pages: 2 * BYTES / 65536,
        ..FleetConfig::default()
    };
    let mut fleet = Fleet::new(program, config, Default::default()).map_err(|e| e.to_string())?;
    let none = vec![Vec::new(); vms as usize];
    let init = fleet.invoke("init", &none).map_err(|e| e.to_string())?;
    expect_all("init", &init, Value::I32(1))?;
    let mut rows = Vec::new();
    for width in WIDTHS {
        for unroll in UNROLLS {
            let name = format!("copy_w{width}_u{unroll}");
            // One untimed pass: caches, page faults, lazy device compilers.
            let warm = fleet
                .invoke(&name, &vec![vec![Value::I32(1)]; vms as usize])
                .map_err(|e| e.to_string())?;
            expect_all(&name, &warm, Value::I32(1))?;
            let before = fleet.stats().execute;
            let done = fleet
                .invoke(&name, &vec![vec![Value::I32(reps as i32)]; vms as usize])
                .map_err(|e| e.to_string())?;
            let seconds = fleet.stats().execute.saturating_sub(before).as_secs_f64();
            expect_all(&name, &done, Value::I32(1))?;
            let check = fleet.invoke("check", &none).map_err(|e| e.to_string())?;
            expect_all(&format!("check after {name}"), &check, Value::I32(1))?;
            let bytes = BYTES as u64 * vms as u64 * reps as u64;
            let gb_per_s = bytes as f64 / seconds.max(1e-9) / 1e9;
            rows.push(MemcopyResult {
                platform: k.platform.key(),
                interleave,
                width,
                unroll,
                vms,
                bytes,
                gb_per_s,
                fraction_of_peak: gb_per_s / peak.gb_per_s.max(1e-12),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_is_valid_and_exports_every_variant() {
        let wat = module();
        let binary = warpvisor::frontend::to_binary(wat.as_bytes()).unwrap();
        let m = warpvisor::frontend::load(&binary).unwrap();
        for w in WIDTHS {
            for u in UNROLLS {
                assert!(m.export(&format!("copy_w{w}_u{u}")).is_some());
            }
        }
        assert!(wat.contains("(i64.store offset=1048600 (local.get $i) (i64.load offset=24"));
    }
}
