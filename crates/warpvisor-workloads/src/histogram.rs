//! Histogram: an HDR histogram (`hdrhistogram`) of a log of response times sent as text, one
//! value per line — little computation per byte, like the paper's transfer-bound Histogram.

use hdrhistogram::Histogram;
use std::fmt::Write;

use crate::inputs::{self, Rng};
use crate::WorkloadError;

/// Samples per request.
const SAMPLES: usize = 16_384;
/// Largest recordable value: one hour in microseconds.
const HIGHEST: u64 = 3_600_000_000;

/// 16,384 response times in microseconds, one per line.
pub fn request(rng: &mut Rng) -> Vec<u8> {
    let mut out = String::new();
    for t in inputs::response_times(rng, SAMPLES) {
        let _ = writeln!(out, "{t}");
    }
    out.into_bytes()
}

/// Replies with the count, extremes, mean, standard deviation, percentiles, and the counts per
/// power-of-two bucket.
pub fn run(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let text = std::str::from_utf8(request)
        .map_err(|_| WorkloadError::new("the request is not UTF-8 text"))?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, HIGHEST, 3)
        .map_err(|e| WorkloadError::new(format!("histogram bounds: {e}")))?;
    for (n, line) in text.lines().enumerate() {
        let v: u64 = line
            .trim()
            .parse()
            .map_err(|_| WorkloadError::new(format!("line {}: `{line}` is not a number", n + 1)))?;
        hist.record(v.clamp(1, HIGHEST))
            .map_err(|e| WorkloadError::new(format!("line {}: {e}", n + 1)))?;
    }
    if hist.is_empty() {
        return Err(WorkloadError::new("no samples"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "count {} min {} max {} mean {:.3} stdev {:.3}",
        hist.len(),
        hist.min(),
        hist.max(),
        hist.mean(),
        hist.stdev()
    );
    for q in [0.5, 0.75, 0.9, 0.99, 0.999, 0.9999] {
        let _ = writeln!(out, "p{} {}", q * 100.0, hist.value_at_quantile(q));
    }
    for bucket in hist.iter_log(1, 2.0) {
        if bucket.count_since_last_iteration() > 0 {
            let _ = writeln!(
                out,
                "<= {} {}",
                bucket.value_iterated_to(),
                bucket.count_since_last_iteration()
            );
        }
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_log() {
        let log: String = (1..=1000).map(|v| format!("{v}\n")).collect();
        let reply = String::from_utf8(run(log.as_bytes()).unwrap()).unwrap();
        assert!(
            reply.starts_with("count 1000 min 1 max 1000 mean 500.500"),
            "{reply}"
        );
        assert!(reply.contains("p50 500\n"), "{reply}");
        assert!(run(b"12\nabc\n").is_err());
        assert!(run(b"").is_err());
    }
}
