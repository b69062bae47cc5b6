//! The request exchange of resident handlers: a bounded queue of requests, the request each VM
//! holds, and the VMs waiting for one. The HTTP side submits; the guest API
//! ([`super::guest_api`]) takes and answers on behalf of a VM; the supervisor of the fleet (or
//! the wasmtime instances) hands queued requests to waiting VMs and answers for VMs that end.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::device_time::DeviceTime;
use super::Submitted;
use crate::vmm::TrapKind;

/// The most bytes of one response a handler may send (as of a WASI program's stdout).
pub const RESPONSE_LIMIT: usize = crate::wasi::OUTPUT_LIMIT;

/// How a resident handler answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerReply {
    /// The handler's response.
    Response {
        /// HTTP status (100–599).
        status: u16,
        /// Body.
        body: Vec<u8>,
    },
    /// The VM trapped while it held the request (`timeout`: the request timeout stopped it).
    Trapped(TrapKind),
    /// The VM exited (or returned from `_start`) while it held the request.
    Exited(u32),
    /// The handler asked for its next request without answering this one.
    NoResponse,
    /// The response was larger than [`RESPONSE_LIMIT`].
    TooLarge(usize),
    /// No VM could take it (every VM failed to start, or the server stopped).
    Unavailable(String),
}

/// Counters of an exchange.
#[derive(Debug, Default)]
pub struct ExchangeStats {
    /// Requests a handler answered with a response.
    pub answered: AtomicU64,
    /// Requests answered for the handler: traps, exits, no or oversized responses.
    pub failed: AtomicU64,
    /// Requests whose client stopped waiting before a VM took them.
    pub abandoned: AtomicU64,
    /// Requests refused because the queue was full.
    pub refused: AtomicU64,
    /// VMs restarted after they ended.
    pub restarts: AtomicU64,
    /// Where the fleet's time went (fleets only).
    pub device: DeviceTime,
}

/// A request waiting for, or held by, a VM.
struct Pending {
    body: Vec<u8>,
    arrived: Instant,
    reply: oneshot::Sender<HandlerReply>,
}

/// The request a VM holds.
struct Held {
    request: Pending,
    /// Bytes of the body the VM has read.
    read: usize,
}

/// The exchange's state, under its lock.
struct Desk {
    queue: VecDeque<Pending>,
    depth: usize,
    /// The request handed to each VM but not yet taken by its `request_next`.
    handed: Vec<Option<Pending>>,
    /// The request each VM holds.
    held: Vec<Option<Held>>,
    /// VMs parked in `request_next`, in the order they asked.
    waiting: VecDeque<u32>,
    /// VMs that took a request since the supervisor last asked ([`RequestExchange::take_fresh`]),
    /// each once.
    fresh: Vec<u32>,
    /// Whether each VM is in `fresh`.
    is_fresh: Vec<bool>,
    /// No more requests are taken; VMs get "stop" once the queue is empty.
    closing: bool,
    /// Why every VM is gone, when they are.
    failed: Option<String>,
}

impl Desk {
    /// No more requests are taken (closed, or every VM gone) and none is left.
    fn ending(&self) -> bool {
        self.closing || self.failed.is_some()
    }

    /// Ending, and nothing queued, handed out or held.
    fn drained(&self) -> bool {
        self.ending()
            && self.queue.is_empty()
            && self.handed.iter().all(Option::is_none)
            && self.held.iter().all(Option::is_none)
    }
}

/// What `request_next` gets for a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A request of this many body bytes is the VM's now.
    Request(usize),
    /// None yet: the VM waits.
    Wait,
    /// The server is stopping: the handler should return.
    Stop,
}

/// Requests between the HTTP side and a fleet's resident handlers.
pub struct RequestExchange {
    desk: Mutex<Desk>,
    /// Signalled when a request arrives or the exchange closes.
    arrived: Condvar,
    /// Counters.
    pub stats: ExchangeStats,
}

impl RequestExchange {
    /// An exchange for `vms` VMs whose queue holds at most `depth` requests.
    pub fn new(vms: u32, depth: usize) -> Self {
        RequestExchange {
            desk: Mutex::new(Desk {
                queue: VecDeque::new(),
                depth: depth.max(1),
                handed: (0..vms).map(|_| None).collect(),
                held: (0..vms).map(|_| None).collect(),
                waiting: VecDeque::new(),
                fresh: Vec::new(),
                is_fresh: vec![false; vms as usize],
                closing: false,
                failed: None,
            }),
            arrived: Condvar::new(),
            stats: ExchangeStats::default(),
        }
    }

    fn desk(&self) -> MutexGuard<'_, Desk> {
        self.desk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a request body unless the queue is full or the exchange is closed.
    pub fn submit(&self, body: Vec<u8>) -> Submitted<HandlerReply> {
        let mut desk = self.desk();
        if let Some(why) = &desk.failed {
            // Answered at once with the reason, rather than a bare refusal.
            let (reply, rx) = oneshot::channel();
            let _ = reply.send(HandlerReply::Unavailable(why.clone()));
            return Submitted::Queued(rx);
        }
        if desk.closing {
            return Submitted::Closed;
        }
        if desk.queue.len() >= desk.depth {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            return Submitted::Full;
        }
        let (reply, rx) = oneshot::channel();
        desk.queue.push_back(Pending {
            body,
            arrived: Instant::now(),
            reply,
        });
        drop(desk);
        self.arrived.notify_all();
        Submitted::Queued(rx)
    }

    /// Requests waiting for a VM.
    pub fn queued(&self) -> usize {
        self.desk().queue.len()
    }

    /// VMs holding a request.
    pub fn busy_vms(&self) -> usize {
        self.desk().held.iter().filter(|h| h.is_some()).count()
    }

    /// Stops taking requests; those queued are still served.
    pub fn close(&self) {
        self.desk().closing = true;
        self.arrived.notify_all();
    }

    /// Whether the exchange is closed and nothing is queued or held: the handlers may stop.
    pub fn drained(&self) -> bool {
        self.desk().drained()
    }

    /// `request_next` of VM `vm`: a request it holds and has not answered is answered
    /// [`HandlerReply::NoResponse`]; then the request handed to it (or, with `take_queued`,
    /// the oldest queued one) becomes its own.
    pub fn next(&self, vm: u32, take_queued: bool) -> Next {
        let mut desk = self.desk();
        let v = vm as usize;
        if v >= desk.held.len() {
            return Next::Stop;
        }
        if let Some(old) = desk.held[v].take() {
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
            let _ = old.request.reply.send(HandlerReply::NoResponse);
        }
        let mut request = desk.handed[v].take();
        if request.is_none() && take_queued {
            request = self.pop_live(&mut desk);
        }
        match request {
            Some(request) => {
                let len = request.body.len();
                desk.held[v] = Some(Held { request, read: 0 });
                desk.waiting.retain(|&w| w != vm);
                if !std::mem::replace(&mut desk.is_fresh[v], true) {
                    desk.fresh.push(vm);
                }
                Next::Request(len)
            }
            None if desk.ending() && desk.queue.is_empty() => Next::Stop,
            None => {
                if !desk.waiting.contains(&vm) {
                    desk.waiting.push_back(vm);
                }
                Next::Wait
            }
        }
    }

    /// The oldest queued request whose client still waits.
    fn pop_live(&self, desk: &mut Desk) -> Option<Pending> {
        while let Some(p) = desk.queue.pop_front() {
            if p.reply.is_closed() {
                self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return Some(p);
        }
        None
    }

    /// Copies the next unread bytes of VM `vm`'s request into `out`; how many (`None`: it
    /// holds no request).
    pub fn read(&self, vm: u32, out: &mut [u8]) -> Option<usize> {
        let mut desk = self.desk();
        let held = desk.held.get_mut(vm as usize)?.as_mut()?;
        let rest = &held.request.body[held.read..];
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        held.read += n;
        Some(n)
    }

    /// Answers VM `vm`'s request (`false`: it holds none).
    pub fn answer(&self, vm: u32, reply: HandlerReply) -> bool {
        let held = self.desk().held.get_mut(vm as usize).and_then(Option::take);
        let Some(held) = held else {
            return false;
        };
        let counter = match reply {
            HandlerReply::Response { .. } => &self.stats.answered,
            _ => &self.stats.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let _ = held.request.reply.send(reply);
        true
    }

    /// VM `vm` ended: the request it holds or was handed is answered `reply`, and it no longer
    /// waits.
    pub fn ended(&self, vm: u32, reply: HandlerReply) {
        self.answer(vm, reply);
        let mut desk = self.desk();
        if let Some(handed) = desk.handed.get_mut(vm as usize).and_then(Option::take) {
            // Never taken: back to the front of the queue for another VM.
            desk.queue.push_front(handed);
        }
        desk.waiting.retain(|&w| w != vm);
    }

    /// VMs that took a request since the last call (their fuel and clock start over).
    pub fn take_fresh(&self) -> Vec<u32> {
        let mut desk = self.desk();
        let fresh = std::mem::take(&mut desk.fresh);
        for &vm in &fresh {
            desk.is_fresh[vm as usize] = false;
        }
        fresh
    }

    /// VMs holding a request that arrived more than `limit` ago.
    pub fn overdue(&self, limit: Duration) -> Vec<u32> {
        let now = Instant::now();
        self.deadlines(limit)
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_some_and(|d| d <= now))
            .map(|(vm, _)| vm as u32)
            .collect()
    }

    /// When each VM's request becomes overdue (`limit` after it arrived; `None` for VMs
    /// holding none), by VM.
    pub fn deadlines(&self, limit: Duration) -> Vec<Option<Instant>> {
        self.desk()
            .held
            .iter()
            .map(|h| {
                h.as_ref()
                    .and_then(|h| h.request.arrived.checked_add(limit))
            })
            .collect()
    }

    /// Hands queued requests to waiting VMs when a batch is due: when `launching` (a launch
    /// follows anyway), when every waiting VM gets one, when the oldest has waited
    /// `max_delay`, or when closing. Returns the VMs to wake (with "stop" for each when the
    /// exchange is closed and empty).
    pub fn hand_out(&self, launching: bool, max_delay: Duration) -> Vec<u32> {
        let mut desk = self.desk();
        let ending = desk.ending();
        if ending && desk.queue.is_empty() {
            return desk.waiting.drain(..).collect();
        }
        let due = launching
            || ending
            || desk.queue.len() >= desk.waiting.len()
            || desk
                .queue
                .front()
                .is_some_and(|p| p.arrived.elapsed() >= max_delay);
        let mut woken = Vec::new();
        if !due {
            return woken;
        }
        while !desk.waiting.is_empty() {
            let Some(request) = self.pop_live(&mut desk) else {
                break;
            };
            let Some(vm) = desk.waiting.pop_front() else {
                break;
            };
            desk.handed[vm as usize] = Some(request);
            woken.push(vm);
        }
        woken
    }

    /// Blocks until a request may be handed out: one arrives, the oldest queued reaches
    /// `max_delay`, the exchange closes, or `until`. Returns whether the handlers should go
    /// on (`false`: closed and drained).
    pub fn wait(&self, until: Option<Instant>, max_delay: Duration) -> bool {
        let desk = self.desk();
        if desk.drained() {
            return false;
        }
        let batch_due = desk
            .queue
            .front()
            .filter(|_| !desk.waiting.is_empty())
            .map(|p| p.arrived + max_delay);
        let until = [until, batch_due].into_iter().flatten().min();
        let now = Instant::now();
        // Without a deadline, wake now and then anyway: request timeouts are checked by
        // the caller between waits.
        let limit = until.map_or(Duration::from_millis(50), |u| {
            u.saturating_duration_since(now)
                .min(Duration::from_millis(50))
        });
        let queued = desk.queue.len();
        let _ = self
            .arrived
            .wait_timeout_while(desk, limit, |d| d.queue.len() == queued && !d.closing);
        true
    }

    /// Blocks the calling thread until VM `vm` may find a request (a wasmtime instance's
    /// `request_next`): one is queued, or the exchange closes; at most `limit`.
    pub fn wait_for_request(&self, limit: Duration) {
        let desk = self.desk();
        let _ = self.arrived.wait_timeout_while(desk, limit, |d| {
            d.queue.is_empty() && !d.closing && d.failed.is_none()
        });
    }

    /// Every VM is gone for good (`why`): queued and later requests are answered unavailable.
    pub fn fail(&self, why: String) {
        let mut desk = self.desk();
        desk.failed = Some(why.clone());
        let queued: Vec<Pending> = desk.queue.drain(..).collect();
        drop(desk);
        for p in queued {
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
            let _ = p.reply.send(HandlerReply::Unavailable(why.clone()));
        }
        self.arrived.notify_all();
    }
}
