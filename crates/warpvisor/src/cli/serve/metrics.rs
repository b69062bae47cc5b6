//! `GET /metrics`: the server's counters, gauges and histograms in Prometheus' text format
//! (version 0.0.4): requests by status and their latency, the queue, VM utilisation, and per
//! model the batches (WASI jobs) or the handlers' answers and restarts (resident handlers).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{typed, AppState, Model};
use warpvisor::serve::device_time::DeviceTime;
use warpvisor::serve::histogram::{self, Histogram};

/// What the HTTP side measures itself.
pub(super) struct Metrics {
    /// Requests answered, by HTTP status.
    by_status: Mutex<BTreeMap<u16, u64>>,
    /// Seconds from a request's arrival to its reply.
    request_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            by_status: Mutex::new(BTreeMap::new()),
            request_seconds: Histogram::new(histogram::SECONDS),
        }
    }
}

impl Metrics {
    /// Counts a request answered with `status` after `took`.
    pub(super) fn request_done(&self, status: u16, took: Duration) {
        *self
            .by_status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(status)
            .or_default() += 1;
        self.request_seconds.observe(took.as_secs_f64());
    }
}

fn family(out: &mut String, kind: &str, name: &str, help: &str, value: u64) {
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    );
}

/// The fleet's device time by phase, its launches and hypercalls.
fn device(out: &mut String, d: &DeviceTime) {
    out.push_str(
        "# HELP warpvisor_device_seconds_total Seconds of the fleet's device work, by phase: \
         kernel execution, host-device transfers, hypercall service on the host, VM \
         (re)instantiation (0 on the wasmtime backend, which has no device).\n",
    );
    out.push_str("# TYPE warpvisor_device_seconds_total counter\n");
    for (phase, secs) in d.seconds() {
        let _ = writeln!(
            out,
            "warpvisor_device_seconds_total{{phase=\"{phase}\"}} {secs}"
        );
    }
    family(
        out,
        "counter",
        "warpvisor_kernel_launches_total",
        "Kernel launches.",
        d.launches(),
    );
    family(
        out,
        "counter",
        "warpvisor_hypercalls_total",
        "Hypercalls served.",
        d.hypercalls(),
    );
}

/// The metrics page.
pub(super) async fn render(State(state): State<Arc<AppState>>) -> Response {
    let mut out = String::new();
    out.push_str("# HELP warpvisor_requests_total Requests answered, by HTTP status.\n");
    out.push_str("# TYPE warpvisor_requests_total counter\n");
    for (code, n) in state
        .metrics
        .by_status
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        let _ = writeln!(out, "warpvisor_requests_total{{code=\"{code}\"}} {n}");
    }
    out.push_str(&state.metrics.request_seconds.render(
        "warpvisor_request_duration_seconds",
        "Seconds from a request's arrival to its reply.",
    ));
    family(
        &mut out,
        "gauge",
        "warpvisor_vms",
        "VMs serving requests.",
        state.vms as u64,
    );
    let relaxed = Ordering::Relaxed;
    match &state.model {
        Model::Jobs(batcher) => {
            let s = batcher.stats();
            family(
                &mut out,
                "gauge",
                "warpvisor_queue_depth",
                "Requests waiting for a batch.",
                s.queued.load(relaxed),
            );
            family(
                &mut out,
                "gauge",
                "warpvisor_vms_busy",
                "VMs running a request now.",
                s.running.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_batches_total",
                "Batches run.",
                s.batches.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_requests_served_total",
                "Requests answered with their job's result.",
                s.served.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_requests_abandoned_total",
                "Requests dropped before their batch because the client stopped waiting.",
                s.abandoned.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_requests_refused_total",
                "Requests refused with 429 because the queue was full.",
                s.refused.load(relaxed),
            );
            out.push_str(
                &s.batch_size
                    .render("warpvisor_batch_size", "Jobs per batch."),
            );
            out.push_str(&s.batch_seconds.render(
                "warpvisor_batch_duration_seconds",
                "Seconds per batch: reset, run and results.",
            ));
            device(&mut out, &s.device);
        }
        Model::Resident(server) => {
            let x = server.exchange();
            let s = &x.stats;
            family(
                &mut out,
                "gauge",
                "warpvisor_queue_depth",
                "Requests waiting for a VM.",
                x.queued() as u64,
            );
            family(
                &mut out,
                "gauge",
                "warpvisor_vms_busy",
                "VMs holding a request now.",
                x.busy_vms() as u64,
            );
            family(
                &mut out,
                "counter",
                "warpvisor_requests_served_total",
                "Requests the handler answered.",
                s.answered.load(relaxed),
            );
            family(&mut out, "counter", "warpvisor_requests_failed_total", "Requests answered for the handler: it trapped, exited, or sent no or too large a response.", s.failed.load(relaxed));
            family(
                &mut out,
                "counter",
                "warpvisor_requests_abandoned_total",
                "Requests dropped before a VM took them because the client stopped waiting.",
                s.abandoned.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_requests_refused_total",
                "Requests refused with 429 because the queue was full.",
                s.refused.load(relaxed),
            );
            family(
                &mut out,
                "counter",
                "warpvisor_vm_restarts_total",
                "VMs re-instantiated after they ended.",
                s.restarts.load(relaxed),
            );
            device(&mut out, &s.device);
        }
    }
    typed(StatusCode::OK, out, "text/plain; version=0.0.4")
}
