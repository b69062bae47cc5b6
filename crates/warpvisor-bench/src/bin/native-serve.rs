//! `native-serve NAME`: a benchmark's native x86 handler behind the HTTP stack of
//! `warpvisor serve` (axum on tokio, `POST /run`, `GET /readyz`), the `native-x86` baseline of
//! the serving benchmark (scripts/serve-bench.sh). The body is the request; the reply is the
//! handler's, 200, or 400 with the reason a malformed request was refused. At most `--workers`
//! requests run at once, on tokio's blocking threads.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use clap::Parser;
use tokio::sync::Semaphore;
use warpvisor_workloads::Workload;

/// Serve one benchmark's native handler over HTTP.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The benchmark (scrypt, pbkdf2, lz4, strings, histogram, phash, phash_modified,
    /// blur_bmp, blur_jpeg, bill_pdf).
    name: String,
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Requests handled at once (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
}

struct Server {
    workload: &'static Workload,
    slots: Semaphore,
}

async fn run(State(s): State<Arc<Server>>, body: Bytes) -> (StatusCode, Vec<u8>) {
    let Ok(_slot) = s.slots.acquire().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, b"stopping\n".to_vec());
    };
    let handler = s.workload.run;
    match tokio::task::spawn_blocking(move || handler(&body)).await {
        Ok(Ok(reply)) => (StatusCode::OK, reply),
        Ok(Err(e)) => (
            StatusCode::BAD_REQUEST,
            format!("bad request: {e}\n").into_bytes(),
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("handler failed: {e}\n").into_bytes(),
        ),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let workload = warpvisor_workloads::find(&args.name)
        .with_context(|| format!("no benchmark called {:?}", args.name))?;
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let state = Arc::new(Server {
        workload,
        slots: Semaphore::new(workers),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let app = Router::new()
            .route("/run", post(run))
            .route("/", post(run))
            .route("/readyz", get(|| async { "ok\n" }))
            // `warpvisor serve`'s default --max-request-bytes.
            .layer(DefaultBodyLimit::max(16 << 20))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        eprintln!(
            "native-serve: listening on http://{} ({}, {workers} workers)",
            listener.local_addr()?,
            workload.name
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .context("serving")
    })
}
