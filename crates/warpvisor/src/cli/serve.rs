//! `warpvisor serve`: a WASI program behind HTTP. Each request is one job — the body is its
//! standard input, `?arg=...` (repeatable) its arguments, `?env=NAME=VALUE` (repeatable) its
//! environment after the `--env` flags — and the reply is its standard output. Requests are
//! batched onto one resident fleet (`warpvisor::serve::Batcher`).
//!
//! Replies: 200 with the program's stdout when it exited (header `x-warpvisor-exit-code`,
//! and `x-warpvisor-stderr-bytes`); 500 naming the trap when it trapped (504 for the trap
//! `timeout`); with `Accept:
//! application/json`, the jobs runner's result line (`exit_code`, `stdout`, `stderr`, `trap`)
//! instead. 413 above `--max-request-bytes`, 429 with `Retry-After` when the queue is full,
//! 504 after `--request-timeout` (which also stops the VM, unless `--timeout` says
//! otherwise), 503 while shutting down. `GET /healthz` answers `ok`;
//! `GET /metrics` gives the batcher's counters in Prometheus' text format, `GET /openapi.json`
//! this interface in OpenAPI 3 (`serve_openapi.json`).
//! SIGTERM or Ctrl-C stop new connections and answer every accepted request first.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::Args;

use super::run::{parse_dirs, parse_env, program_name, WasiArgs};
use super::{errln, read_file, FleetArgs, MAX_VMS};
use warpvisor::serve::{BatchOptions, Batcher, Submitted};
use warpvisor::vmm::TrapKind;
use warpvisor::wasi::program::{result_line, WasiRunConfig};
use warpvisor::wasi::WasiJob;

/// Arguments of `warpvisor serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The WASI program (.wasm or .wat).
    module: PathBuf,
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// VMs in the fleet: the largest batch.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=MAX_VMS as i64))]
    vms: u32,
    /// A batch starts at the latest this many milliseconds after its oldest request arrived.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    max_batch_delay: u64,
    /// Requests that may wait for a batch (default: 4 batches); more get 429.
    #[arg(long)]
    queue_depth: Option<usize>,
    /// Largest request body; larger ones get 413.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    max_request_bytes: usize,
    /// Seconds a request may wait for its reply; then 504. Without --timeout, a VM still
    /// running this long after its batch started is stopped (`timeout`; checked between
    /// launches and hypercalls: use --fuel for guests that loop without system calls).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    request_timeout: f64,
    #[command(flatten)]
    wasi: WasiArgs,
    #[command(flatten)]
    fleet: FleetArgs,
}

struct AppState {
    batcher: Batcher,
    env: Vec<(String, String)>,
    request_timeout: Duration,
}

/// Runs `warpvisor serve` until SIGTERM or Ctrl-C; returns the exit code.
pub fn run(mut args: ServeArgs) -> anyhow::Result<i32> {
    if !(args.request_timeout > 0.0 && args.request_timeout <= 365.0 * 24.0 * 3600.0) {
        anyhow::bail!("--request-timeout must be more than 0 and at most a year");
    }
    // A VM whose client has been answered 504 should not hold the fleet: without --timeout,
    // VMs are stopped once their batch has run for the request timeout.
    if args.fleet.timeout.is_none() {
        args.fleet.timeout = Some(Duration::from_secs_f64(args.request_timeout));
    }
    let bytes = read_file(&args.module)?;
    let (executor, _) = args.fleet.executor()?;
    let backend = executor.name();
    let config = WasiRunConfig {
        fleet: args.fleet.fleet(args.vms),
        program_name: program_name(&args.module),
        preopens: parse_dirs(&args.wasi.dirs)?,
        allow_unknown_imports: args.wasi.allow_unknown_imports,
    };
    let options = BatchOptions {
        max_batch: args.vms as usize,
        max_delay: Duration::from_millis(args.max_batch_delay),
        queue_depth: args.queue_depth.unwrap_or(4 * args.vms as usize).max(1),
    };
    let batcher = Batcher::start(executor, bytes, config, options)
        .with_context(|| format!("starting {}", args.module.display()))?;
    let state = Arc::new(AppState {
        batcher,
        env: parse_env(&args.wasi.env)?,
        request_timeout: Duration::from_secs_f64(args.request_timeout),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(listen(
        args.listen,
        args.max_request_bytes,
        state.clone(),
        backend,
        args.vms,
    ))?;
    // Every connection is closed; dropping the batcher answers what is still queued and
    // waits for its last batch.
    drop(runtime);
    drop(state);
    Ok(0)
}

async fn listen(
    addr: SocketAddr,
    max_request_bytes: usize,
    state: Arc<AppState>,
    backend: &str,
    vms: u32,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/", post(handle))
        .route("/run", post(handle))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr()?;
    errln!("warpvisor serve: listening on http://{bound} ({backend}, {vms} VMs)");
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_signal())
        .await
        .context("serving")?;
    errln!("warpvisor serve: stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// The HTTP interface in OpenAPI 3.
const OPENAPI: &str = include_str!("serve_openapi.json");

async fn openapi() -> Response {
    typed(StatusCode::OK, OPENAPI.to_string(), "application/json")
}

/// Counters in Prometheus' text format.
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let s = state.batcher.stats();
    let counter = |name: &str, help: &str, v: u64| {
        format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n")
    };
    let body = [
        counter(
            "warpvisor_batches_total",
            "Batches run.",
            s.batches.load(Ordering::Relaxed),
        ),
        counter(
            "warpvisor_requests_served_total",
            "Requests answered with their job's result.",
            s.served.load(Ordering::Relaxed),
        ),
        counter(
            "warpvisor_requests_abandoned_total",
            "Requests dropped before their batch because the client stopped waiting.",
            s.abandoned.load(Ordering::Relaxed),
        ),
        counter(
            "warpvisor_requests_refused_total",
            "Requests refused with 429 because the queue was full.",
            s.refused.load(Ordering::Relaxed),
        ),
    ]
    .concat();
    typed(StatusCode::OK, body, "text/plain; version=0.0.4")
}

/// A reply with its content type.
fn typed(status: StatusCode, body: String, content_type: &'static str) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn text(status: StatusCode, body: String) -> Response {
    (status, body).into_response()
}

/// A request's job: `arg` and `env` query parameters after the server's environment.
fn job_of(
    env: &[(String, String)],
    query: Vec<(String, String)>,
    stdin: Vec<u8>,
) -> Result<WasiJob, String> {
    let mut job = WasiJob {
        args: Vec::new(),
        env: env.to_vec(),
        stdin,
    };
    for (k, v) in query {
        match k.as_str() {
            "arg" => job.args.push(v),
            "env" => {
                let (name, value) = v
                    .split_once('=')
                    .ok_or_else(|| format!("env takes NAME=VALUE, not `{v}`"))?;
                job.env.push((name.to_string(), value.to_string()));
            }
            other => return Err(format!("unknown query parameter `{other}` (arg, env)")),
        }
    }
    Ok(job)
}

async fn handle(
    State(state): State<Arc<AppState>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let job = match job_of(&state.env, query, body.to_vec()) {
        Ok(job) => job,
        Err(why) => return text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    };
    let reply = match state.batcher.submit(job) {
        Submitted::Queued(rx) => rx,
        Submitted::Full => {
            let mut r = text(StatusCode::TOO_MANY_REQUESTS, "the queue is full\n".into());
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
        Submitted::Closed => {
            return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".into())
        }
    };
    let result = match tokio::time::timeout(state.request_timeout, reply).await {
        Ok(Ok(Ok(r))) => r,
        Ok(Ok(Err(e))) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        Ok(Err(_)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the batch ended without a reply\n".into(),
            )
        }
        Err(_) => {
            return text(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "no reply within {:.3} s\n",
                    state.request_timeout.as_secs_f64()
                ),
            )
        }
    };
    // A VM stopped by the clock did not finish in time, like a request that timed out
    // waiting; any other trap is the program's failure.
    let status = match result.trap {
        None => StatusCode::OK,
        Some(TrapKind::Timeout) => StatusCode::GATEWAY_TIMEOUT,
        Some(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    let mut response = if wants_json {
        typed(
            status,
            format!("{}\n", result_line(0, &result)),
            "application/json",
        )
    } else if let Some(trap) = result.trap {
        text(status, format!("trapped: {trap}\n"))
    } else {
        (status, result.stdout).into_response()
    };
    let h = response.headers_mut();
    h.insert("x-warpvisor-exit-code", HeaderValue::from(result.exit_code));
    h.insert(
        "x-warpvisor-stderr-bytes",
        HeaderValue::from(result.stderr.len() as u64),
    );
    if let Some(trap) = result.trap {
        if let Ok(v) = HeaderValue::from_str(&trap.to_string()) {
            h.insert("x-warpvisor-trap", v);
        }
    }
    response
}
