//! Analyses over the validated module: the call graph (which functions can yield and so need
//! continuations), canonical signatures for `call_indirect`, and local liveness for frames.

mod callgraph;
mod liveness;
mod postdom;

pub use callgraph::{CallGraph, Signatures};
pub use liveness::Liveness;
pub use postdom::post_dominators;
