//! A histogram with fixed buckets, rendered in Prometheus' text format: what the server's
//! `/metrics` reports of batch sizes and latencies. Observations are lock-free.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket bounds for latencies in seconds: 1 ms to 60 s.
pub const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Bucket bounds for batch sizes: 1 to 4,096 VMs.
pub const SIZES: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];

/// Counts of observations at or below each bound, their sum and their number.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations falling in each bucket (not cumulative; `render` adds them up).
    buckets: Vec<AtomicU64>,
    /// The sum of the observations in millionths.
    sum_millionths: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// An empty histogram with these (ascending) bucket bounds.
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_millionths: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, value: f64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let millionths = (value.max(0.0) * 1e6).round() as u64;
        self.sum_millionths.fetch_add(millionths, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The histogram as a Prometheus metric family `name`.
    pub fn render(&self, name: &str, help: &str) -> String {
        let mut out = format!("# HELP {name} {help}\n# TYPE {name} histogram\n");
        let mut total = 0;
        for (i, bound) in self.bounds.iter().enumerate() {
            total += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {total}");
        }
        total += self.buckets[self.bounds.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
        let sum = self.sum_millionths.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {total}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_sum_adds_up() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0] {
            h.observe(v);
        }
        let text = h.render("x", "help");
        assert!(text.contains("x_bucket{le=\"1\"} 2\n"), "{text}");
        assert!(text.contains("x_bucket{le=\"2\"} 3\n"), "{text}");
        assert!(text.contains("x_bucket{le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("x_sum 6\n"), "{text}");
        assert!(text.contains("x_count 4\n"), "{text}");
    }
}
