//! Resident handlers: every VM runs the module's `_start` once and loops on the guest API
//! ([`super::guest_api`]), keeping its state (caches, parsed models) from request to request,
//! as VectorVisor's VMs do. With direct calls (`cpu`) only `request_next` and `sched_yield`
//! leave the kernel. On a fleet a [`Supervisor`] hands queued requests to the VMs parked
//! in `request_next` — a batch when every waiting VM gets one, when the oldest request has
//! waited the batch delay, or at once when a launch follows anyway — refuels a VM per request,
//! stops one that holds a request past the request timeout, and restarts (re-instantiates) a VM
//! that ended. On wasmtime each VM is an instance on a thread of its own.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::exchange::{HandlerReply, RequestExchange};
use super::guest_api::GuestApi;
use super::Submitted;
use crate::runner::{Executor, RunError};
use crate::vmm::{Fleet, FleetStats, Outcome, Program, Supervised, Supervisor, TrapKind, VmmError};
use crate::wasi::program::WasiRunConfig;
use crate::wasi::{link_with, WasiJob, WasiState};

/// A VM that ends this many times in a row without taking a request is not restarted again.
const START_FAILURES: u32 = 3;

/// How requests reach resident handlers.
#[derive(Debug, Clone, Copy)]
pub struct ResidentOptions {
    /// VMs (or wasmtime instances).
    pub vms: u32,
    /// Requests are handed out at the latest this long after the oldest arrived.
    pub max_delay: Duration,
    /// Requests that may wait for a VM; more are refused.
    pub queue_depth: usize,
    /// A VM holding a request this long is stopped (`timeout`) and restarted.
    pub request_timeout: Duration,
}

/// Resident handlers serving requests from a queue, on a thread of their own.
pub struct ResidentServer {
    exchange: Arc<RequestExchange>,
    worker: Option<JoinHandle<()>>,
}

impl ResidentServer {
    /// Compiles `wasm` for `executor` (on a fleet, `request_next` is a parking import: VMs
    /// park between requests), instantiates `options.vms` handlers and starts them; returns
    /// once they run.
    pub fn start(
        executor: Executor,
        wasm: Vec<u8>,
        config: WasiRunConfig,
        options: ResidentOptions,
    ) -> Result<Self, RunError> {
        let exchange = Arc::new(RequestExchange::new(options.vms, options.queue_depth));
        let (ready_tx, ready) = std::sync::mpsc::channel::<Result<(), RunError>>();
        let shared = exchange.clone();
        let worker = std::thread::Builder::new()
            .name("warpvisor-resident".into())
            .spawn(move || match executor {
                Executor::Fleet { backend, kernel } => {
                    // With direct calls `request_next` (and `sched_yield`) leave the kernel,
                    // the functions that reach them become continuations and everything else
                    // stays direct.
                    let kernel = super::guest_api::resident_kernel(kernel);
                    let built = Program::compile(&wasm, &kernel, backend.as_ref())
                        .map(Arc::new)
                        .and_then(|p| FleetHandlers::new(p, &config, shared.clone(), options));
                    match built {
                        Ok(mut handlers) => {
                            let _ = ready_tx.send(Ok(()));
                            handlers.run();
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.into()));
                        }
                    }
                }
                Executor::Wasmtime(w) => {
                    super::resident_wasmtime::serve(&w, &wasm, &config, options, &shared, ready_tx)
                }
            })
            .map_err(|e| VmmError::Limit(format!("cannot start the handlers' thread: {e}")))?;
        match ready.recv() {
            Ok(Ok(())) => Ok(ResidentServer {
                exchange,
                worker: Some(worker),
            }),
            Ok(Err(e)) => {
                let _ = worker.join();
                Err(e)
            }
            Err(_) => {
                let _ = worker.join();
                Err(VmmError::Limit("the handlers stopped while starting".into()).into())
            }
        }
    }

    /// Queues a request body.
    pub fn submit(&self, body: Vec<u8>) -> Submitted<HandlerReply> {
        self.exchange.submit(body)
    }

    /// The exchange (its counters, queue and busy VMs).
    pub fn exchange(&self) -> &RequestExchange {
        &self.exchange
    }

    /// Stops taking requests, answers every queued one, and waits for the handlers to stop.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.exchange.close();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Drop for ResidentServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a request holder is answered when its VM ends with `outcome`.
pub(super) fn ending_reply(outcome: &Outcome) -> HandlerReply {
    match outcome {
        Outcome::Trapped(kind) => HandlerReply::Trapped(*kind),
        Outcome::Exited(code) => HandlerReply::Exited(*code),
        Outcome::Returned(_) => HandlerReply::Exited(0),
    }
}

/// Restarts of one VM: whether it took a request since it last started, and how many times
/// in a row it ended without one.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StartRecord {
    took: bool,
    failures: u32,
}

impl StartRecord {
    /// The VM took a request.
    pub(super) fn took_request(&mut self) {
        self.took = true;
    }

    /// The VM ended: whether it may be started again.
    pub(super) fn ended(&mut self) -> bool {
        self.failures = if self.took { 0 } else { self.failures + 1 };
        self.took = false;
        self.failures < START_FAILURES
    }
}

/// Resident handlers on a fleet, and its supervisor.
struct FleetHandlers {
    fleet: Fleet,
    supervisor: FleetSupervisor,
}

struct FleetSupervisor {
    exchange: Arc<RequestExchange>,
    state: Arc<Mutex<WasiState>>,
    options: ResidentOptions,
    starts: Vec<StartRecord>,
    /// VMs not restarted again.
    gone: Vec<bool>,
    /// The fleet's counters at the last round (device time is reported as it grows).
    last: FleetStats,
}

impl FleetHandlers {
    fn new(
        program: Arc<Program>,
        config: &WasiRunConfig,
        exchange: Arc<RequestExchange>,
        options: ResidentOptions,
    ) -> Result<Self, VmmError> {
        let n = options.vms;
        let state = Arc::new(Mutex::new(WasiState::new(
            &config.program_name,
            config.preopens.clone(),
            n,
        )?));
        let api = GuestApi::for_fleet(exchange.clone());
        let imports = link_with(
            &program.module,
            state.clone(),
            config.allow_unknown_imports,
            Some(Box::new(api)),
        )?;
        let mut fleet_config = config.fleet;
        fleet_config.num_vms = n;
        let fleet = Fleet::new(program, fleet_config, imports)?;
        Ok(FleetHandlers {
            fleet,
            supervisor: FleetSupervisor {
                exchange,
                state,
                options,
                starts: vec![StartRecord::default(); n as usize],
                gone: vec![false; n as usize],
                last: FleetStats::default(),
            },
        })
    }

    fn run(&mut self) {
        if let Err(e) = self.fleet.run_supervised("_start", &mut self.supervisor) {
            tracing::error!("the fleet of resident handlers failed: {e}");
            self.supervisor
                .exchange
                .fail(format!("the fleet failed: {e}"));
        }
    }
}

impl FleetSupervisor {
    fn state(&self) -> std::sync::MutexGuard<'_, WasiState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logs what VM `vm` wrote to stderr and drops its stdout (a resident handler answers
    /// through the guest API).
    fn drain_output(&self, vm: u32) {
        let out = self.state().take_output(vm as usize);
        if !out.stderr.is_empty() {
            let text = String::from_utf8_lossy(&out.stderr);
            tracing::info!(vm, "guest stderr: {}", text.trim_end());
        }
    }
}

impl Supervisor for FleetSupervisor {
    fn round(&mut self, fleet: &mut Supervised<'_>) {
        let now = fleet.stats();
        self.exchange.stats.device.add(&self.last, &now);
        self.last = now;
        let ended = fleet.ended().to_vec();
        for (vm, outcome) in ended {
            self.exchange.ended(vm, ending_reply(&outcome));
            self.drain_output(vm);
            let again = self.starts[vm as usize].ended();
            if self.exchange.drained() {
                continue;
            }
            if !again {
                tracing::error!(vm, "VM ended {START_FAILURES} times without taking a request (last: {outcome:?}); not restarted");
                self.gone[vm as usize] = true;
                if self.gone.iter().all(|g| *g) {
                    self.exchange.fail(format!(
                        "every VM ended without taking a request (last: {outcome:?})"
                    ));
                }
                continue;
            }
            self.state().set_job(vm as usize, &WasiJob::default());
            self.exchange
                .stats
                .restarts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            fleet.restart(vm);
        }
        for vm in self.exchange.take_fresh() {
            self.starts[vm as usize].took_request();
            self.drain_output(vm);
            fleet.refuel(vm);
        }
        for vm in self.exchange.overdue(self.options.request_timeout) {
            fleet.stop(vm, TrapKind::Timeout);
        }
        for vm in self.exchange.hand_out(fleet.busy(), self.options.max_delay) {
            fleet.wake(vm);
        }
    }

    fn deadlines(&self) -> Vec<Option<Instant>> {
        self.exchange.deadlines(self.options.request_timeout)
    }

    fn idle(&mut self, until: Option<Instant>) -> bool {
        self.exchange.wait(until, self.options.max_delay)
    }
}
