//! The batcher of unmodified WASI programs: each request is one job (stdin, arguments,
//! environment); a [`Batcher`] gathers queued requests into batches — as many as the fleet has
//! VMs, or whatever arrived within the batch delay of the oldest — and runs each batch on one
//! fleet that stays allocated between batches (its VMs reset to their freshly instantiated
//! state before each batch, so no request sees another's bytes). Every request gets exactly
//! one reply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::device_time::DeviceTime;
use super::feed::QueueFeed;
use super::histogram::{self, Histogram};
use super::Submitted;

use crate::backend::wasmtime::WasiSetup;
use crate::codegen::CallMode;
use crate::runner::{Executor, RunError};
use crate::vmm::{FleetStats, Program, VmmError};
use crate::wasi::program::{JobResult, WasiFleet, WasiRunConfig};
use crate::wasi::WasiJob;

/// How requests become batches.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Most requests per batch (the fleet's VMs).
    pub max_batch: usize,
    /// A batch starts at the latest this long after its oldest request arrived.
    pub max_delay: Duration,
    /// Requests that may wait for a batch; more are refused ([`Submitted::Full`]).
    pub queue_depth: usize,
}

/// What a request gets back: its job's result, or why its batch could not run.
pub type Reply = Result<JobResult, String>;

/// Counters of a running batcher.
#[derive(Debug)]
pub struct BatcherStats {
    /// Batches run.
    pub batches: AtomicU64,
    /// Requests answered with a result.
    pub served: AtomicU64,
    /// Requests dropped before their batch ran because their client stopped waiting.
    pub abandoned: AtomicU64,
    /// Requests refused because the queue was full.
    pub refused: AtomicU64,
    /// Requests waiting for a batch now.
    pub queued: AtomicU64,
    /// VMs of the batch running now (0 between batches).
    pub running: AtomicU64,
    /// Jobs per batch.
    pub batch_size: Histogram,
    /// Seconds per batch (reset, run and results).
    pub batch_seconds: Histogram,
    /// Where the fleet's time went (fleets only).
    pub device: DeviceTime,
}

impl Default for BatcherStats {
    fn default() -> Self {
        BatcherStats {
            batches: AtomicU64::new(0),
            served: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            running: AtomicU64::new(0),
            batch_size: Histogram::new(histogram::SIZES),
            batch_seconds: Histogram::new(histogram::SECONDS),
            device: DeviceTime::default(),
        }
    }
}

/// A request waiting for a VM.
pub(super) struct Pending {
    pub(super) job: WasiJob,
    pub(super) arrived: Instant,
    pub(super) reply: oneshot::Sender<Reply>,
}

/// A queue of requests in front of one fleet (or a wasmtime pool) on a thread of its own.
pub struct Batcher {
    queue: Option<SyncSender<Pending>>,
    worker: Option<JoinHandle<()>>,
    stats: Arc<BatcherStats>,
}

impl Batcher {
    /// Compiles `wasm` for `executor`, creates its fleet of `options.max_batch` VMs, and
    /// starts serving; returns once the fleet is ready (or with the error that prevented it).
    pub fn start(
        executor: Executor,
        wasm: Vec<u8>,
        config: WasiRunConfig,
        options: BatchOptions,
    ) -> Result<Self, RunError> {
        let (queue, requests) = mpsc::sync_channel::<Pending>(options.queue_depth.max(1));
        let (ready_tx, ready) = mpsc::channel::<Result<(), RunError>>();
        let stats = Arc::new(BatcherStats::default());
        let counters = stats.clone();
        let worker = std::thread::Builder::new()
            .name("warpvisor-batcher".into())
            .spawn(move || {
                serve_on(
                    executor, &wasm, &config, options, requests, ready_tx, &counters,
                )
            })
            .map_err(|e| VmmError::Limit(format!("cannot start the batcher thread: {e}")))?;
        match ready.recv() {
            Ok(Ok(())) => Ok(Batcher {
                queue: Some(queue),
                worker: Some(worker),
                stats,
            }),
            Ok(Err(e)) => {
                let _ = worker.join();
                Err(e)
            }
            Err(_) => {
                let _ = worker.join();
                Err(VmmError::Limit("the batcher thread stopped while starting".into()).into())
            }
        }
    }

    /// Queues `job` unless the queue is full.
    pub fn submit(&self, job: WasiJob) -> Submitted<Reply> {
        let Some(queue) = &self.queue else {
            return Submitted::Closed;
        };
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            job,
            arrived: Instant::now(),
            reply,
        };
        // Counted before it can be taken, so the batcher's decrement never comes first.
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        let sent = queue.try_send(pending);
        if sent.is_err() {
            self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        }
        match sent {
            Ok(()) => Submitted::Queued(rx),
            Err(TrySendError::Full(_)) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                Submitted::Full
            }
            Err(TrySendError::Disconnected(_)) => Submitted::Closed,
        }
    }

    /// The batcher's counters.
    pub fn stats(&self) -> &BatcherStats {
        &self.stats
    }

    /// Stops taking requests, answers every queued one, and waits for the last batch.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.queue = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The batcher thread: builds the executor's batch runner, reports readiness, then serves.
fn serve_on(
    executor: Executor,
    wasm: &[u8],
    config: &WasiRunConfig,
    options: BatchOptions,
    requests: mpsc::Receiver<Pending>,
    ready: mpsc::Sender<Result<(), RunError>>,
    stats: &BatcherStats,
) {
    match executor {
        Executor::Fleet { backend, kernel } => {
            let mut config = config.clone();
            config.fleet.num_vms = options.max_batch as u32;
            let built = Program::compile_with_progress(wasm, &kernel, backend.as_ref(), &|_, _| {})
                .map(Arc::new)
                .and_then(|program| Ok((WasiFleet::new(program.clone(), &config)?, program)));
            let (fleet, program) = match built {
                Ok(f) => f,
                Err(e) => {
                    let _ = ready.send(Err(e.into()));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            if kernel.calls == CallMode::Continuations {
                serve_continuously(fleet, &program, &config, options, &requests, stats);
                return;
            }
            // A batch that fails as a whole (the device, not a guest: guests' traps are
            // results) leaves the fleet in an unknown state: the next batch gets a new one.
            let mut fleet = Some(fleet);
            // The current fleet's counters after its last batch.
            let mut last = FleetStats::default();
            let mut run = |jobs: &[WasiJob]| {
                let mut current = match fleet.take() {
                    Some(f) => f,
                    None => {
                        last = FleetStats::default();
                        WasiFleet::new(program.clone(), &config).map_err(|e| e.to_string())?
                    }
                };
                let results = current.run_batch(jobs).map_err(|e| e.to_string())?;
                let now = current.stats();
                stats.device.add(&last, &now);
                last = now;
                fleet = Some(current);
                Ok(results)
            };
            serve_batches(&mut run, options, &requests, stats);
        }
        Executor::Wasmtime(w) => {
            let setup = WasiSetup::from(config);
            let prepared = crate::frontend::to_binary(wasm)
                .map_err(|e| RunError::from(VmmError::from(e)))
                .and_then(|binary| w.prepare_wasi(&binary, &setup).map_err(RunError::from));
            let program = match prepared {
                Ok(p) => p,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            let mut run = |jobs: &[WasiJob]| Ok(w.run_pool(jobs.len(), |i| program.run(&jobs[i])));
            serve_batches(&mut run, options, &requests, stats);
        }
    }
}

/// Serves `requests` on `fleet` continuously (a kernel with continuations): VMs take requests
/// as they become free. A fleet that fails answers its requests with the error and is
/// replaced.
fn serve_continuously(
    mut fleet: WasiFleet,
    program: &Arc<Program>,
    config: &WasiRunConfig,
    options: BatchOptions,
    requests: &mpsc::Receiver<Pending>,
    stats: &BatcherStats,
) {
    let mut feed = QueueFeed::new(requests, stats, options, config.fleet.timeout);
    loop {
        let Err(e) = fleet.serve_continuously(&mut feed) else {
            return;
        };
        tracing::error!("the fleet failed: {e}; starting a new one");
        feed.fail_all(&e.to_string());
        fleet = match WasiFleet::new(program.clone(), config) {
            Ok(f) => f,
            Err(e) => {
                // No fleet: every request from now on gets the reason.
                let why = format!("no fleet: {e}");
                tracing::error!("{why}");
                while let Ok(p) = requests.recv() {
                    stats.queued.fetch_sub(1, Ordering::Relaxed);
                    let _ = p.reply.send(Err(why.clone()));
                }
                return;
            }
        };
    }
}

/// Runs one batch of jobs, one per VM: their results in order, or why the batch failed.
type BatchRunner<'a> = dyn FnMut(&[WasiJob]) -> Result<Vec<JobResult>, String> + 'a;

/// Forms batches from `requests` until every sender is gone and the queue is empty.
fn serve_batches(
    run: &mut BatchRunner<'_>,
    options: BatchOptions,
    requests: &mpsc::Receiver<Pending>,
    stats: &BatcherStats,
) {
    let max = options.max_batch.max(1);
    while let Ok(first) = requests.recv() {
        let deadline = first.arrived + options.max_delay;
        let mut batch = vec![first];
        while batch.len() < max {
            match requests.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(p) => batch.push(p),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        stats
            .queued
            .fetch_sub(batch.len() as u64, Ordering::Relaxed);
        // A request whose client stopped waiting (timed out, disconnected) takes no VM.
        let before = batch.len();
        batch.retain(|p| !p.reply.is_closed());
        stats
            .abandoned
            .fetch_add((before - batch.len()) as u64, Ordering::Relaxed);
        if batch.is_empty() {
            continue;
        }
        let jobs: Vec<WasiJob> = batch
            .iter_mut()
            .map(|p| std::mem::take(&mut p.job))
            .collect();
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.batch_size.observe(jobs.len() as f64);
        stats.running.store(jobs.len() as u64, Ordering::Relaxed);
        let started = Instant::now();
        let ran = run(&jobs);
        stats.batch_seconds.observe(started.elapsed().as_secs_f64());
        tracing::debug!(
            size = jobs.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            failed = ran.is_err(),
            "batch"
        );
        stats.running.store(0, Ordering::Relaxed);
        match ran {
            Ok(results) => {
                stats
                    .served
                    .fetch_add(results.len() as u64, Ordering::Relaxed);
                for (p, r) in batch.into_iter().zip(results) {
                    let _ = p.reply.send(Ok(r));
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
