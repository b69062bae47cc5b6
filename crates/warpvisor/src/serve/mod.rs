//! Serving a program to a stream of requests (`warpvisor serve`; the HTTP front end is the
//! binary's, `cli/serve.rs`). Two guest models, told apart by the module's imports:
//!
//! - unmodified WASI programs: each request is one job on a fleet reset between batches
//!   ([`batcher`]);
//! - resident handlers, which import the guest API ([`guest_api`]) and loop on "next request" /
//!   "send response", keeping their state across requests ([`resident`], over the request
//!   [`exchange`]).

pub mod batcher;
pub mod device_time;
pub mod exchange;
mod feed;
pub mod guest_api;
pub mod histogram;
pub mod resident;
mod resident_wasmtime;

pub use batcher::{BatchOptions, Batcher, BatcherStats, Reply};
pub use exchange::{ExchangeStats, HandlerReply, RequestExchange};
pub use resident::{ResidentOptions, ResidentServer};

use tokio::sync::oneshot;

/// The outcome of submitting a request.
#[derive(Debug)]
pub enum Submitted<R> {
    /// Queued: the reply arrives here.
    Queued(oneshot::Receiver<R>),
    /// The queue is full: try again later.
    Full,
    /// The server has stopped taking requests.
    Closed,
}
