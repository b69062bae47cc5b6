//! Requests to resident handlers: the body is what the VM reads after `request_next`; the
//! reply is what it sends with `response_send` (its status and bytes), or 500 naming how
//! the VM failed to answer (504 when the request timeout stopped it).

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{await_reply, text, AppState};
use warpvisor::serve::{HandlerReply, ResidentServer};
use warpvisor::vmm::TrapKind;

/// Hands the body to the next free handler and answers with its response.
pub(super) async fn handle(
    state: &AppState,
    server: &ResidentServer,
    query: Vec<(String, String)>,
    body: Bytes,
) -> Response {
    if let Some((k, _)) = query.first() {
        return text(
            StatusCode::BAD_REQUEST,
            format!("unknown query parameter `{k}`: a resident handler takes the body only\n"),
        );
    }
    let reply = match await_reply(state, server.submit(body.to_vec())).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    let trapped = |kind: TrapKind| {
        let status = match kind {
            TrapKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut r = text(status, format!("trapped: {kind}\n"));
        if let Ok(v) = HeaderValue::from_str(&kind.to_string()) {
            r.headers_mut().insert("x-warpvisor-trap", v);
        }
        r
    };
    let failed = |why: String| text(StatusCode::INTERNAL_SERVER_ERROR, format!("{why}\n"));
    match reply {
        HandlerReply::Response { status, body } => match StatusCode::from_u16(status) {
            Ok(s) => (s, body).into_response(),
            Err(_) => failed(format!("the handler answered status {status}")),
        },
        HandlerReply::Trapped(kind) => trapped(kind),
        HandlerReply::Exited(code) => failed(format!(
            "the handler exited with code {code} before it answered"
        )),
        HandlerReply::NoResponse => {
            failed("the handler took its next request without answering this one".into())
        }
        HandlerReply::TooLarge(n) => failed(format!(
            "the handler's response of {n} bytes is larger than the limit of {} bytes",
            warpvisor::serve::exchange::RESPONSE_LIMIT
        )),
        HandlerReply::Unavailable(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}
