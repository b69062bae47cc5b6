//! `warpvisor serve`: a program behind HTTP, in one of two guest models (docs/serve.md).
//!
//! - An unmodified WASI program: each request is one job — the body is its standard input,
//!   `?arg=...` (repeatable) its arguments, `?env=NAME=VALUE` (repeatable) its environment
//!   after the `--env` flags — and the reply is its standard output ([`jobs`]). Requests are
//!   batched onto one fleet (`warpvisor::serve::Batcher`).
//! - A resident handler, which imports warpvisor's guest API: the body is the request its VM
//!   takes with `request_next`, the reply what it sends with `response_send` ([`resident`]).
//!
//! Both: 413 above `--max-request-bytes`, 429 with `Retry-After` when the queue is full, 504
//! after `--request-timeout`, 503 while shutting down. `GET /healthz` and `GET /readyz`
//! answer `ok` (`/readyz` 503 once stopping); `GET /metrics` gives counters and histograms in
//! Prometheus' text format ([`metrics`]), `GET /openapi.json` this interface in OpenAPI 3.
//! SIGTERM or Ctrl-C stop new connections and answer every accepted request first.

mod jobs;
mod metrics;
mod resident;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use metrics::Metrics;
use warpvisor::serve::guest_api;
use warpvisor::serve::{BatchOptions, Batcher, ResidentOptions, ResidentServer, Submitted};
use warpvisor::wasi::program::WasiRunConfig;

/// Arguments of `warpvisor serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The WASI program (.wasm or .wat).
    module: PathBuf,
    /// A call profile of the program (`warpvisor profile`): hot call_indirect targets become
    /// guarded direct calls, and partitions keep the calls that ran most together.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
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
    /// Log lines on stderr: `text`, or `json` (one object per event, for log collectors).
    /// Which events: WARPVISOR_LOG in tracing's filter syntax (default `info`; `debug` adds
    /// one event per request and per batch).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(flatten)]
    wasi: WasiArgs,
    #[command(flatten)]
    fleet: FleetArgs,
}

/// How log events are written.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The environment variable that selects log events.
const LOG_VARIABLE: &str = "WARPVISOR_LOG";

/// Sends `tracing` events to stderr in `format`, filtered by [`LOG_VARIABLE`].
fn init_logs(format: LogFormat) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var(LOG_VARIABLE) {
        Ok(spec) => EnvFilter::try_new(&spec)
            .map_err(|e| anyhow::anyhow!("{LOG_VARIABLE}={spec:?} is not a log filter: {e}"))?,
        Err(_) => EnvFilter::new("info"),
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    // A subscriber already set (a second server in one process) keeps logging.
    let _ = match format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().try_init(),
    };
    Ok(())
}

/// Which guest model the server runs, with its queue.
enum Model {
    /// An unmodified WASI program: one job per request.
    Jobs(Batcher),
    /// Resident handlers on the guest API.
    Resident(ResidentServer),
}

struct AppState {
    model: Model,
    env: Vec<(String, String)>,
    request_timeout: Duration,
    vms: u32,
    metrics: Metrics,
    /// Set once SIGTERM or Ctrl-C arrived: `/readyz` answers 503.
    stopping: AtomicBool,
}

/// Runs `warpvisor serve` until SIGTERM or Ctrl-C; returns the exit code.
pub fn run(mut args: ServeArgs) -> anyhow::Result<i32> {
    init_logs(args.log_format)?;
    if !(args.request_timeout > 0.0 && args.request_timeout <= 365.0 * 24.0 * 3600.0) {
        anyhow::bail!("--request-timeout must be more than 0 and at most a year");
    }
    let request_timeout = Duration::from_secs_f64(args.request_timeout);
    // A VM whose client has been answered 504 should not hold the fleet: without --timeout,
    // VMs are stopped once they have run for the request timeout.
    if args.fleet.timeout.is_none() {
        args.fleet.timeout = Some(request_timeout);
    }
    let bytes = read_file(&args.module)?;
    let binary = warpvisor::frontend::to_binary(&bytes)
        .with_context(|| format!("reading {}", args.module.display()))?
        .into_owned();
    let resident = guest_api::is_resident(
        &warpvisor::frontend::load(&binary)
            .with_context(|| format!("loading {}", args.module.display()))?,
    );
    let (mut executor, _) = args.fleet.executor()?;
    super::profile::apply_profile(args.profile.as_deref(), &bytes, &mut executor)?;
    let backend = executor.name();
    let config = WasiRunConfig {
        fleet: args.fleet.fleet(args.vms),
        program_name: program_name(&args.module),
        preopens: parse_dirs(&args.wasi.dirs)?,
        allow_unknown_imports: args.wasi.allow_unknown_imports,
    };
    let max_delay = Duration::from_millis(args.max_batch_delay);
    let queue_depth = args.queue_depth.unwrap_or(4 * args.vms as usize).max(1);
    let model = if resident {
        let options = ResidentOptions {
            vms: args.vms,
            max_delay,
            queue_depth,
            request_timeout,
        };
        Model::Resident(
            ResidentServer::start(executor, binary, config, options)
                .with_context(|| format!("starting {}", args.module.display()))?,
        )
    } else {
        let options = BatchOptions {
            max_batch: args.vms as usize,
            max_delay,
            queue_depth,
        };
        Model::Jobs(
            Batcher::start(executor, binary, config, options)
                .with_context(|| format!("starting {}", args.module.display()))?,
        )
    };
    let state = Arc::new(AppState {
        model,
        env: parse_env(&args.wasi.env)?,
        request_timeout,
        vms: args.vms,
        metrics: Metrics::default(),
        stopping: AtomicBool::new(false),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let kind = if resident {
        "resident handlers"
    } else {
        "WASI jobs"
    };
    runtime.block_on(listen(
        args.listen,
        args.max_request_bytes,
        state.clone(),
        format!("{backend}, {} VMs, {kind}", args.vms),
    ))?;
    // Every connection is closed; dropping the model answers what is still queued and waits
    // for the VMs to finish.
    drop(runtime);
    drop(state);
    Ok(0)
}

async fn listen(
    addr: SocketAddr,
    max_request_bytes: usize,
    state: Arc<AppState>,
    what: String,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/", post(handle))
        .route("/run", post(handle))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::render))
        .route("/openapi.json", get(openapi))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr()?;
    errln!("warpvisor serve: listening on http://{bound} ({what})");
    tracing::info!(address = %bound, serving = %what, "listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop_signal().await;
            state.stopping.store(true, Ordering::Relaxed);
            tracing::info!("stopping: answering the accepted requests");
        })
        .await
        .context("serving")?;
    errln!("warpvisor serve: stopped");
    Ok(())
}

/// `ok` while the server takes requests (it listens only once its kernel is built and its
/// VMs are instantiated); 503 once it is stopping.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.stopping.load(Ordering::Relaxed) {
        text(StatusCode::SERVICE_UNAVAILABLE, "stopping\n".into())
    } else {
        text(StatusCode::OK, "ok\n".into())
    }
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
const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    typed(StatusCode::OK, OPENAPI.to_string(), "application/json")
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

/// 429 with `Retry-After`.
fn queue_full() -> Response {
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, "the queue is full\n".into());
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// 504: no reply within the request timeout.
fn timed_out(state: &AppState) -> Response {
    text(
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "no reply within {:.3} s\n",
            state.request_timeout.as_secs_f64()
        ),
    )
}

/// A request, whichever the model: answered, and counted by status and latency.
async fn handle(
    State(state): State<Arc<AppState>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let response = match &state.model {
        Model::Jobs(batcher) => jobs::handle(&state, batcher, query, &headers, body).await,
        Model::Resident(server) => resident::handle(&state, server, query, body).await,
    };
    let (status, took) = (response.status().as_u16(), started.elapsed());
    state.metrics.request_done(status, took);
    let ms = took.as_secs_f64() * 1e3;
    if status >= 500 {
        let reason = response
            .headers()
            .get("x-warpvisor-trap")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::warn!(status, ms, trap = reason, "request failed");
    } else {
        tracing::debug!(status, ms, "request");
    }
    response
}

/// How much longer than the request timeout the front end waits for a reply: time for the
/// VM's own stop (between launches on a fleet, an epoch tick on wasmtime) to answer first, on
/// a loaded machine too.
const REPLY_GRACE: Duration = Duration::from_secs(1);

/// Waits for a submitted request's reply, at most the request timeout; `Err` is the
/// response to give instead (503 when the server stopped, 504 when the time ran out).
async fn await_reply<R>(state: &AppState, submitted: Submitted<R>) -> Result<R, Response> {
    let reply = match submitted {
        Submitted::Queued(rx) => rx,
        Submitted::Full => return Err(queue_full()),
        Submitted::Closed => {
            return Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting down\n".into(),
            ))
        }
    };
    // The VM holding the request is stopped at the request timeout and its reply says so;
    // the front end gives up a little later, when not even that reply came.
    match tokio::time::timeout(state.request_timeout + REPLY_GRACE, reply).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(_)) => Err(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request was dropped without a reply\n".into(),
        )),
        Err(_) => Err(timed_out(state)),
    }
}
