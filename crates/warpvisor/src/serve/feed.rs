//! The batcher's queue as a [`JobFeed`]: requests go to VMs as VMs become free, so a fleet
//! built with continuations serves WASI jobs continuously — a VM that finished takes the next
//! request at the next hypercall round instead of waiting for its batch to end.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::batcher::{BatchOptions, BatcherStats, Pending, Reply};
use crate::vmm::FleetStats;
use crate::wasi::continuous::JobFeed;
use crate::wasi::program::JobResult;
use crate::wasi::WasiJob;

/// A request on a VM: where its reply goes, and when its job started.
struct Held {
    reply: oneshot::Sender<Reply>,
    started: Instant,
}

/// Requests from the batcher's queue, handed to a continuously served fleet.
pub(super) struct QueueFeed<'a> {
    requests: &'a mpsc::Receiver<Pending>,
    stats: &'a BatcherStats,
    options: BatchOptions,
    /// A job running this long is stopped (`timeout`).
    job_timeout: Option<Duration>,
    /// Received, not yet on a VM.
    waiting: VecDeque<Pending>,
    held: Vec<Option<Held>>,
    /// Jobs started since the last round began (one round's starts count as one batch).
    started: usize,
    /// Every sender is gone: the server is stopping.
    closed: bool,
    /// The fleet's counters at the last round.
    last: FleetStats,
}

impl<'a> QueueFeed<'a> {
    /// A feed for a fleet of `options.max_batch` VMs.
    pub(super) fn new(
        requests: &'a mpsc::Receiver<Pending>,
        stats: &'a BatcherStats,
        options: BatchOptions,
        job_timeout: Option<Duration>,
    ) -> Self {
        QueueFeed {
            requests,
            stats,
            options,
            job_timeout,
            waiting: VecDeque::new(),
            held: (0..options.max_batch.max(1)).map(|_| None).collect(),
            started: 0,
            closed: false,
            last: FleetStats::default(),
        }
    }

    /// Takes a request off the queue (counted out of it); abandoned ones are dropped here.
    fn receive(&mut self, p: Pending) {
        self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        if p.reply.is_closed() {
            self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
        } else {
            self.waiting.push_back(p);
        }
    }

    /// Everything the queue holds now.
    fn receive_ready(&mut self) {
        loop {
            match self.requests.try_recv() {
                Ok(p) => self.receive(p),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    /// Answers every request held or waiting with `why` (the fleet failed; a new one follows).
    pub(super) fn fail_all(&mut self, why: &str) {
        self.last = FleetStats::default();
        for h in self.held.iter_mut().filter_map(Option::take) {
            let _ = h.reply.send(Err(why.to_string()));
        }
        for p in self.waiting.drain(..) {
            let _ = p.reply.send(Err(why.to_string()));
        }
        self.stats.running.store(0, Ordering::Relaxed);
    }

    fn sleep_until(until: Option<Instant>) {
        if let Some(t) = until {
            std::thread::sleep(t.saturating_duration_since(Instant::now()));
        }
    }
}

impl JobFeed for QueueFeed<'_> {
    fn round_begins(&mut self, now: &FleetStats) {
        self.stats.device.add(&self.last, now);
        self.last = *now;
        // The last round's starts were one batch.
        if self.started > 0 {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
            self.stats.batch_size.observe(self.started as f64);
            self.started = 0;
        }
    }

    fn job_for(&mut self, vm: u32) -> Option<WasiJob> {
        let slot = self.held.get_mut(vm as usize)?;
        if slot.is_some() {
            return None;
        }
        if self.waiting.is_empty() && !self.closed {
            self.receive_ready();
        }
        let mut p = self.waiting.pop_front()?;
        *self.held.get_mut(vm as usize)? = Some(Held {
            reply: p.reply,
            started: Instant::now(),
        });
        self.started += 1;
        self.stats.running.fetch_add(1, Ordering::Relaxed);
        Some(std::mem::take(&mut p.job))
    }

    fn finished(&mut self, vm: u32, result: JobResult) {
        if let Some(h) = self.held.get_mut(vm as usize).and_then(Option::take) {
            self.stats.served.fetch_add(1, Ordering::Relaxed);
            self.stats.running.fetch_sub(1, Ordering::Relaxed);
            let _ = h.reply.send(Ok(result));
        }
    }

    fn overdue(&mut self) -> Vec<u32> {
        let Some(limit) = self.job_timeout else {
            return Vec::new();
        };
        let now = Instant::now();
        self.held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.as_ref().is_some_and(|h| now - h.started >= limit))
            .map(|(vm, _)| vm as u32)
            .collect()
    }

    fn wait(&mut self, until: Option<Instant>, idle_vms: usize) -> bool {
        // A held request's deadline ends the wait too: its VM is stopped next round.
        let deadline = self
            .job_timeout
            .and_then(|limit| self.held.iter().flatten().map(|h| h.started + limit).min());
        let until = match (until, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if idle_vms > 0 && !self.waiting.is_empty() {
            return true;
        }
        if idle_vms == 0 || self.closed {
            // Nothing to hand out, or nobody to hand it to: sleep until a VM is due.
            Self::sleep_until(until.or_else(|| Some(Instant::now() + Duration::from_millis(1))));
            return !self.closed;
        }
        let first = match until {
            Some(t) => self
                .requests
                .recv_timeout(t.saturating_duration_since(Instant::now())),
            None => self
                .requests
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
        };
        let arrived = match first {
            Ok(p) => {
                let arrived = p.arrived;
                self.receive(p);
                arrived
            }
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                return false;
            }
        };
        // The whole fleet was idle: gather a batch, as many as the idle VMs or whatever came
        // within the batch delay of the first.
        if idle_vms == self.held.len() {
            let deadline = arrived + self.options.max_delay;
            while self.waiting.len() < idle_vms {
                match self
                    .requests
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    Ok(p) => self.receive(p),
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => {
                        self.closed = true;
                        break;
                    }
                }
            }
        }
        true
    }
}
