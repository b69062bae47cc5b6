//! `warpvisor simt`: predicts how a program's VMs would run on SIMT hardware before they run
//! on any (ThreadFuser, `../shared/papers/threadfuser.md`).
//!
//! - [`blocks`]: the basic blocks of each function from WebAssembly's structured control flow,
//!   with their successors, memory operators and immediate post-dominators;
//! - [`codec`]: the compact form of a VM's records (varint differences);
//! - [`trace`]: a traced fleet's records (a kernel built with `KernelOptions::trace` records
//!   every block a VM enters and every address it accesses) and the versioned trace file;
//! - [`tracer`]: jobs run on a traced `cpu` fleet;
//! - [`dcfg`]: the dynamic control-flow graph (edges the jobs took), an option;
//! - [`replay`]: warps formed from the traced VMs, each replayed in lockstep under a SIMT
//!   stack that reconverges at immediate post-dominators, hypercalls as relaunch points;
//! - [`memory`]: a warp's accesses merged into 32-byte sectors through the fleet's real
//!   interleaved layout;
//! - [`source`]: source lines of the blocks' instructions (DWARF), for the report;
//! - [`report`]: the numbers, as Markdown and JSON;
//! - [`sass`] and [`accel_sim`]: the warps' instruction streams as Accel-Sim traces.

pub mod accel_sim;
pub mod blocks;
pub mod codec;
pub mod dcfg;
pub mod memory;
pub mod replay;
pub mod report;
pub mod sass;
pub mod source;
pub mod trace;
pub mod tracer;
mod warp;

pub use blocks::{BasicBlock, BlockEnd, BlockTable, FunctionBlocks, MemOp};
pub use replay::{analyze, AnalysisConfig, CallModel, Cfg, Grouping};
pub use report::Report;
pub use trace::{JobTrace, Trace, TraceHeader, TraceRecorder};

/// Words a traced VM buffers in the kernel before handing them to the host.
pub const KERNEL_TRACE_WORDS: u32 = 4096;

/// Why tracing or analysis failed.
#[derive(Debug, thiserror::Error)]
pub enum SimtError {
    /// The module's control flow could not be read.
    #[error("function {function}: {why}")]
    Module {
        /// The function.
        function: String,
        /// What was wrong.
        why: String,
    },
    /// Past a limit.
    #[error("{0}")]
    Limit(String),
    /// A trace file that is not one, or is damaged.
    #[error("not a usable trace: {0}")]
    BadTrace(String),
    /// A job's records do not follow the module's control flow.
    #[error("job {job}: the trace does not follow the control flow: {why}")]
    Mismatch {
        /// The job.
        job: usize,
        /// Where it went wrong.
        why: String,
    },
    /// Reading or writing a file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
