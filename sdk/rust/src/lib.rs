//! Resident request handlers for `warpvisor serve`.
//!
//! A resident handler is an ordinary WASI program whose `main` loops over requests instead
//! of exiting after one: its VM stays instantiated, so whatever it builds up (caches, parsed
//! models, counters) serves the requests that follow. `warpvisor serve` recognises such a
//! program by its imports from the `warpvisor` module, which this crate wraps.
//!
//! ```no_run
//! use warpvisor_guest::{serve, Response};
//!
//! fn main() {
//!     let mut served = 0u64;
//!     serve(|body| {
//!         served += 1;
//!         Response::ok(format!("{served}: {}", String::from_utf8_lossy(body)))
//!     });
//! }
//! ```
//!
//! Built for any other target than `wasm32`, [`serve`] answers exactly one request: standard
//! input is the body, the response goes to standard output — handy to run the same handler
//! natively.

/// A response: an HTTP status and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status, 100–599.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// `200 OK` with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Self {
        Response::with_status(200, body)
    }

    /// Any status with `body`.
    pub fn with_status(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            body: body.into(),
        }
    }
}

/// Why [`respond`] did not send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// There is no request to answer (none taken yet, or already answered).
    NoRequest,
    /// The status is not within 100–599.
    BadStatus,
    /// The body is larger than the server accepts; the request was answered 500.
    TooLarge,
}

#[cfg(target_arch = "wasm32")]
mod sys {
    #[link(wasm_import_module = "warpvisor")]
    extern "C" {
        pub fn request_next() -> i32;
        pub fn request_read(ptr: *mut u8, len: i32) -> i32;
        pub fn response_send(status: i32, ptr: *const u8, len: i32) -> i32;
    }
}

/// Waits for this VM's next request and returns its body; `None` when the server is
/// stopping (return from `main` then). A request taken and not answered is answered 500.
#[cfg(target_arch = "wasm32")]
pub fn next_request() -> Option<Vec<u8>> {
    // SAFETY: the host writes at most `len` bytes at `ptr`, inside `body`'s spare capacity.
    unsafe {
        let len = sys::request_next();
        if len < 0 {
            return None;
        }
        let mut body: Vec<u8> = Vec::with_capacity(len as usize);
        while body.len() < len as usize {
            let rest = len as usize - body.len();
            let n = sys::request_read(body.as_mut_ptr().add(body.len()), rest as i32);
            if n <= 0 {
                break;
            }
            body.set_len(body.len() + n as usize);
        }
        Some(body)
    }
}

/// Answers the current request.
#[cfg(target_arch = "wasm32")]
pub fn respond(response: &Response) -> Result<(), SendError> {
    let len = i32::try_from(response.body.len()).map_err(|_| SendError::TooLarge)?;
    // SAFETY: the host reads `len` bytes at `ptr`, which `response.body` holds.
    match unsafe { sys::response_send(response.status as i32, response.body.as_ptr(), len) } {
        0 => Ok(()),
        -2 => Err(SendError::BadStatus),
        -3 => Err(SendError::TooLarge),
        _ => Err(SendError::NoRequest),
    }
}

/// Natively: standard input is the one request.
#[cfg(not(target_arch = "wasm32"))]
pub fn next_request() -> Option<Vec<u8>> {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::Relaxed) {
        return None;
    }
    let mut body = Vec::new();
    std::io::stdin().read_to_end(&mut body).ok()?;
    Some(body)
}

/// Natively: the body goes to standard output (the status, if not 200, to standard error).
#[cfg(not(target_arch = "wasm32"))]
pub fn respond(response: &Response) -> Result<(), SendError> {
    use std::io::Write;
    if !(100..=599).contains(&response.status) {
        return Err(SendError::BadStatus);
    }
    if response.status != 200 {
        eprintln!("status {}", response.status);
    }
    let mut out = std::io::stdout();
    out.write_all(&response.body)
        .and_then(|_| out.flush())
        .map_err(|_| SendError::NoRequest)
}

/// Answers every request with `handler` until the server stops. A response the server
/// refuses (a bad status) is answered `500` instead, so no request goes unanswered.
pub fn serve(mut handler: impl FnMut(&[u8]) -> Response) {
    while let Some(body) = next_request() {
        let response = handler(&body);
        if respond(&response) == Err(SendError::BadStatus) {
            let _ = respond(&Response::with_status(500, "the handler gave a bad status"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_carry_their_status() {
        assert_eq!(Response::ok("x").status, 200);
        assert_eq!(Response::with_status(404, "no").body, b"no");
    }
}
