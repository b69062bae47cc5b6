//! Requests to an unmodified WASI program: each is one job (`?arg=`, `?env=`, the body as
//! standard input), answered with its standard output or the jobs runner's JSON envelope.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{await_reply, text, typed, AppState};
use warpvisor::serve::Batcher;
use warpvisor::vmm::TrapKind;
use warpvisor::wasi::program::result_line;
use warpvisor::wasi::WasiJob;

/// A request's job: `arg` and `env` query parameters after the server's environment.
fn job_of(
    env: &[(String, String)],
    query: Vec<(String, String)>,
    stdin: Bytes,
) -> Result<WasiJob, String> {
    let mut job = WasiJob {
        args: Vec::new(),
        env: env.to_vec(),
        stdin: stdin.into(),
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

/// Runs the request's job in the next batch and answers with its result.
pub(super) async fn handle(
    state: &AppState,
    batcher: &Batcher,
    query: Vec<(String, String)>,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let job = match job_of(&state.env, query, body) {
        Ok(job) => job,
        Err(why) => return text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    };
    let result = match await_reply(state, batcher.submit(job)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        Err(response) => return response,
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
