//! Where a served fleet's time goes on its device, summed over the server's life: what
//! `/metrics` reports as `warpvisor_device_seconds_total{phase=...}`, kernel launches and
//! hypercalls. Fleets only: a wasmtime pool has no device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::vmm::FleetStats;

/// The phases of [`DeviceTime`], as `/metrics` labels them.
pub const PHASES: [&str; 4] = ["execute", "transfer", "hypercall", "instantiate"];

/// Device time and work counts of the fleets behind one server.
#[derive(Debug, Default)]
pub struct DeviceTime {
    /// Nanoseconds per phase, in the order of [`PHASES`].
    nanos: [AtomicU64; 4],
    launches: AtomicU64,
    hypercalls: AtomicU64,
}

impl DeviceTime {
    /// Adds what fleet snapshot `now` has beyond `before` (two snapshots of the same fleet;
    /// `FleetStats::default()` for a new one).
    pub fn add(&self, before: &FleetStats, now: &FleetStats) {
        let phases = |s: &FleetStats| -> [Duration; 4] {
            [s.execute, s.transfer, s.hypercall_service, s.instantiate]
        };
        for ((slot, b), n) in self.nanos.iter().zip(phases(before)).zip(phases(now)) {
            let ns = n.saturating_sub(b).as_nanos();
            slot.fetch_add(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
        self.launches.fetch_add(
            now.launches.saturating_sub(before.launches),
            Ordering::Relaxed,
        );
        self.hypercalls.fetch_add(
            now.hypercalls.saturating_sub(before.hypercalls),
            Ordering::Relaxed,
        );
    }

    /// Seconds per phase, labelled as in [`PHASES`].
    pub fn seconds(&self) -> [(&'static str, f64); 4] {
        std::array::from_fn(|i| {
            let ns = self.nanos[i].load(Ordering::Relaxed);
            (PHASES[i], ns as f64 / 1e9)
        })
    }

    /// Kernel launches.
    pub fn launches(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    /// Hypercalls served.
    pub fn hypercalls(&self) -> u64 {
        self.hypercalls.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_difference_between_snapshots() {
        let t = DeviceTime::default();
        let a = FleetStats {
            execute: Duration::from_millis(100),
            launches: 3,
            hypercalls: 10,
            ..FleetStats::default()
        };
        let b = FleetStats {
            execute: Duration::from_millis(350),
            transfer: Duration::from_millis(20),
            launches: 5,
            hypercalls: 17,
            ..FleetStats::default()
        };
        t.add(&FleetStats::default(), &a);
        t.add(&a, &b);
        let s = t.seconds();
        assert_eq!(s[0], ("execute", 0.35));
        assert_eq!(s[1], ("transfer", 0.02));
        assert_eq!((t.launches(), t.hypercalls()), (5, 17));
        // A snapshot older than the last (a replaced fleet) adds nothing rather than wrapping.
        t.add(&b, &a);
        assert_eq!((t.launches(), t.seconds()[0].1), (5, 0.35));
    }
}
