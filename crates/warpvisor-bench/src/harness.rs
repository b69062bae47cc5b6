//! Serving a benchmark's requests and timing it, the same way on every platform: one untimed
//! warm-up, then passes over the whole request set until the minimum time has passed. The
//! replies of the first timed pass are what validation compares.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use warpvisor::vmm::{FleetStats, VmmError};
use warpvisor::wasi::program::{JobResult, WasiFleet};
use warpvisor::wasi::WasiJob;

/// How one platform served a request set.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Replies of the first timed pass, in request order.
    pub replies: Vec<JobResult>,
    /// Requests served in the timed passes.
    pub requests: usize,
    /// Time of the timed passes.
    pub wall: Duration,
    /// Latency of each request (thread pools) or batch (fleets) in the timed passes.
    pub latencies: Vec<Duration>,
    /// Requests each latency covers: 1, or the fleet's size.
    pub batch_size: usize,
    /// Time of the untimed warm-up.
    pub warmup: Duration,
}

impl Served {
    /// Requests per second.
    pub fn throughput(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Serves `requests` with `workers` threads, each taking the next request: `serve` turns a
/// request into a reply.
pub fn on_threads(
    requests: &[Vec<u8>],
    workers: usize,
    min_time: Duration,
    serve: &(dyn Fn(&[u8]) -> JobResult + Sync),
) -> Served {
    let workers = workers.clamp(1, requests.len().max(1));
    // Warm-up: one request per worker (caches, allocators, lazily compiled code).
    let warm = Instant::now();
    one_pass(&requests[..workers.min(requests.len())], workers, serve);
    let mut served = Served {
        batch_size: 1,
        warmup: warm.elapsed(),
        ..Served::default()
    };
    let start = Instant::now();
    loop {
        let (replies, latencies) = one_pass(requests, workers, serve);
        served.requests += replies.len();
        served.latencies.extend(latencies);
        if served.replies.is_empty() {
            served.replies = replies;
        }
        if start.elapsed() >= min_time || requests.is_empty() {
            break;
        }
    }
    served.wall = start.elapsed();
    served
}

/// Every request once, on `workers` threads; replies and latencies in request order.
fn one_pass(
    requests: &[Vec<u8>],
    workers: usize,
    serve: &(dyn Fn(&[u8]) -> JobResult + Sync),
) -> (Vec<JobResult>, Vec<Duration>) {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, JobResult, Duration)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(request) = requests.get(i) else {
                    break;
                };
                let t = Instant::now();
                let reply = serve(request);
                let took = t.elapsed();
                done.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, reply, took));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _, _)| *i);
    done.into_iter().map(|(_, r, t)| (r, t)).unzip()
}

/// Where a fleet's time went in the timed passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetTime {
    /// The fleet's phases and traffic.
    pub fleet: FleetStats,
    /// The host's work around the fleet: staging each batch's jobs, collecting replies
    /// ([`WasiFleet::host_time`]).
    pub host: Duration,
}

/// Serves `jobs` on a fleet, batch after batch (a warm-up batch first, which also makes lazy
/// device compilers finish), and tells where the fleet's time went in the timed passes.
pub fn on_fleet(
    fleet: &mut WasiFleet,
    jobs: &[WasiJob],
    min_time: Duration,
) -> Result<(Served, FleetTime), VmmError> {
    let n = fleet.num_vms() as usize;
    let warm = Instant::now();
    fleet.run_batch(&jobs[..n.min(jobs.len())])?;
    let before = fleet.stats();
    let host_before = fleet.host_time();
    let mut served = Served {
        batch_size: n,
        warmup: warm.elapsed(),
        ..Served::default()
    };
    let start = Instant::now();
    let mut first = true;
    loop {
        for batch in jobs.chunks(n) {
            let t = Instant::now();
            let replies = fleet.run_batch(batch)?;
            served.latencies.push(t.elapsed());
            served.requests += replies.len();
            if first {
                served.replies.extend(replies);
            }
        }
        first = false;
        if start.elapsed() >= min_time || jobs.is_empty() {
            break;
        }
    }
    served.wall = start.elapsed();
    let spent = FleetTime {
        fleet: fleet.stats().since(&before),
        host: fleet.host_time().saturating_sub(host_before),
    };
    Ok((served, spent))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(r: &[u8]) -> JobResult {
        JobResult {
            exit_code: 0,
            stdout: r.to_vec(),
            stderr: Vec::new(),
            trap: None,
        }
    }

    #[test]
    fn thread_pools_keep_request_order_and_time_whole_passes() {
        let requests: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; i as usize]).collect();
        let served = on_threads(&requests, 3, Duration::from_millis(20), &echo);
        let out: Vec<Vec<u8>> = served.replies.iter().map(|r| r.stdout.clone()).collect();
        assert_eq!(out, requests);
        assert_eq!(served.requests % requests.len(), 0);
        assert!(served.requests >= requests.len());
        assert_eq!(served.latencies.len(), served.requests);
        assert!(served.wall >= Duration::from_millis(20));
        assert!(served.throughput() > 0.0);
    }
}
