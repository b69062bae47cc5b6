//! Serving a benchmark's requests and timing it, the same way on every platform: one untimed
//! warm-up, then passes over the whole request set until the minimum time has passed. The
//! replies of the first timed pass are what validation compares. The platforms of one
//! benchmark take turns ([`interleaved`]), so that a machine whose speed drifts over a run (a
//! shared host) slows all of them alike rather than whichever ran at the time.

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

/// A platform whose warm-up is done, serving its request set a whole pass at a time.
pub trait Server {
    /// Serves every request once: the replies in request order, and the latencies.
    fn pass(&mut self) -> Result<(Vec<JobResult>, Vec<Duration>), String>;

    /// The untimed warm-up's time, and the requests each latency covers.
    fn served(&self) -> Served;

    /// Where a fleet's time went since its warm-up; `None` for thread pools.
    fn spent(&self) -> Option<FleetTime> {
        None
    }
}

/// Timed passes on every server in turn: `rounds` rounds, in each of which every server serves
/// passes until `min_time / rounds` has passed (at least one), so that each gets at least
/// `min_time` in all. A server that fails is dropped from later rounds with its error.
pub fn interleaved(
    servers: &mut [&mut dyn Server],
    min_time: Duration,
    rounds: u32,
) -> Vec<Result<Served, String>> {
    let rounds = rounds.max(1);
    let slice = min_time / rounds;
    let mut results: Vec<Result<Served, String>> = servers.iter().map(|s| Ok(s.served())).collect();
    for _ in 0..rounds {
        for (server, result) in servers.iter_mut().zip(results.iter_mut()) {
            let Ok(served) = result else { continue };
            if let Err(e) = timed_passes(&mut **server, served, slice) {
                *result = Err(e);
            }
        }
    }
    results
}

/// Passes of `server` until `slice` has passed (at least one), added to `served`.
fn timed_passes(
    server: &mut dyn Server,
    served: &mut Served,
    slice: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let (replies, latencies) = server.pass()?;
        served.requests += replies.len();
        served.latencies.extend(latencies);
        if served.replies.is_empty() {
            served.replies = replies;
        }
        if start.elapsed() >= slice || served.requests == 0 {
            break;
        }
    }
    served.wall += start.elapsed();
    Ok(())
}

/// A pool of `workers` threads, each taking the next request: `serve` turns a request into a
/// reply.
pub struct ThreadServer<'a> {
    requests: &'a [Vec<u8>],
    workers: usize,
    serve: &'a (dyn Fn(&[u8]) -> JobResult + Sync),
    warmup: Duration,
}

impl<'a> ThreadServer<'a> {
    /// The pool, warmed up with one request per worker (caches, allocators, lazily compiled
    /// code).
    pub fn new(
        requests: &'a [Vec<u8>],
        workers: usize,
        serve: &'a (dyn Fn(&[u8]) -> JobResult + Sync),
    ) -> Self {
        let workers = workers.clamp(1, requests.len().max(1));
        let warm = Instant::now();
        one_pass(&requests[..workers.min(requests.len())], workers, serve);
        ThreadServer {
            requests,
            workers,
            serve,
            warmup: warm.elapsed(),
        }
    }
}

impl Server for ThreadServer<'_> {
    fn pass(&mut self) -> Result<(Vec<JobResult>, Vec<Duration>), String> {
        Ok(one_pass(self.requests, self.workers, self.serve))
    }

    fn served(&self) -> Served {
        Served {
            batch_size: 1,
            warmup: self.warmup,
            ..Served::default()
        }
    }
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

/// A fleet serving `jobs` batch after batch; [`Server::spent`] tells where its time went.
pub struct FleetServer<'a> {
    fleet: &'a mut WasiFleet,
    jobs: &'a [WasiJob],
    warmup: Duration,
    before: FleetStats,
    host_before: Duration,
}

impl<'a> FleetServer<'a> {
    /// The fleet, warmed up with one batch (which also makes lazy device compilers finish).
    pub fn new(fleet: &'a mut WasiFleet, jobs: &'a [WasiJob]) -> Result<Self, VmmError> {
        let n = fleet.num_vms() as usize;
        let warm = Instant::now();
        fleet.run_batch(&jobs[..n.min(jobs.len())])?;
        Ok(FleetServer {
            warmup: warm.elapsed(),
            before: fleet.stats(),
            host_before: fleet.host_time(),
            fleet,
            jobs,
        })
    }
}

impl Server for FleetServer<'_> {
    fn pass(&mut self) -> Result<(Vec<JobResult>, Vec<Duration>), String> {
        let n = (self.fleet.num_vms() as usize).max(1);
        let mut replies = Vec::with_capacity(self.jobs.len());
        let mut latencies = Vec::new();
        for batch in self.jobs.chunks(n) {
            let t = Instant::now();
            replies.extend(self.fleet.run_batch(batch).map_err(|e| e.to_string())?);
            latencies.push(t.elapsed());
        }
        Ok((replies, latencies))
    }

    fn served(&self) -> Served {
        Served {
            batch_size: self.fleet.num_vms() as usize,
            warmup: self.warmup,
            ..Served::default()
        }
    }

    fn spent(&self) -> Option<FleetTime> {
        Some(FleetTime {
            fleet: self.fleet.stats().since(&self.before),
            host: self.fleet.host_time().saturating_sub(self.host_before),
        })
    }
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
        let mut pool = ThreadServer::new(&requests, 3, &echo);
        let served = interleaved(&mut [&mut pool], Duration::from_millis(20), 1)
            .remove(0)
            .unwrap();
        let out: Vec<Vec<u8>> = served.replies.iter().map(|r| r.stdout.clone()).collect();
        assert_eq!(out, requests);
        assert_eq!(served.requests % requests.len(), 0);
        assert!(served.requests >= requests.len());
        assert_eq!(served.latencies.len(), served.requests);
        assert!(served.wall >= Duration::from_millis(20));
        assert!(served.throughput() > 0.0);
    }

    /// A server that logs each pass in a shared journal, sleeping `pass_time`, and fails at
    /// pass `fail_at` if given.
    struct Journaled<'j> {
        name: &'static str,
        pass_time: Duration,
        fail_at: Option<usize>,
        passes: usize,
        journal: &'j Mutex<Vec<&'static str>>,
    }

    impl Server for Journaled<'_> {
        fn pass(&mut self) -> Result<(Vec<JobResult>, Vec<Duration>), String> {
            self.passes += 1;
            if Some(self.passes) == self.fail_at {
                return Err(format!("{} failed", self.name));
            }
            self.journal.lock().unwrap().push(self.name);
            std::thread::sleep(self.pass_time);
            let reply = echo(format!("{} {}", self.name, self.passes).as_bytes());
            Ok((vec![reply], vec![self.pass_time]))
        }

        fn served(&self) -> Served {
            Served {
                batch_size: 1,
                ..Served::default()
            }
        }
    }

    #[test]
    fn interleaved_servers_take_turns_and_each_gets_the_minimum_time() {
        let journal = Mutex::new(Vec::new());
        let server = |name, ms, fail_at| Journaled {
            name,
            pass_time: Duration::from_millis(ms),
            fail_at,
            passes: 0,
            journal: &journal,
        };
        let (mut a, mut b, mut c) = (
            server("a", 2, None),
            server("b", 7, None),
            server("c", 1, Some(3)),
        );
        let min_time = Duration::from_millis(30);
        let served = interleaved(&mut [&mut a, &mut b, &mut c], min_time, 3);
        // Every round runs a's passes, then b's, then c's: turns, not one platform after another.
        let journal = journal.into_inner().unwrap();
        let turns: Vec<&str> = journal.iter().copied().fold(Vec::new(), |mut t, n| {
            if t.last() != Some(&n) {
                t.push(n);
            }
            t
        });
        assert_eq!(turns, ["a", "b", "c", "a", "b", "a", "b"]);
        for s in &served[..2] {
            let s = s.as_ref().unwrap();
            assert!(s.wall >= min_time, "{:?} < {min_time:?}", s.wall);
            assert_eq!(s.requests, s.latencies.len());
            // The replies kept are the first timed pass's.
            assert_eq!(s.replies.len(), 1);
        }
        assert_eq!(served[0].as_ref().unwrap().replies[0].stdout, b"a 1");
        // c failed in its first round, at its third pass, and took no more turns.
        assert_eq!(served[2].as_ref().unwrap_err(), "c failed");
    }
}
