//! CUDA kernels on the CPU: PTX, NVIDIA's virtual GPU assembly, translated to C and run on
//! every core (Ocelot's design, `ocelot.md`).
//!
//! The pipeline: [`lexer`] and [`parser`] (text → [`ast::PtxModule`]) → [`emit`] (one C
//! function per kernel that runs a CTA with its threads fused into a loop, split at barriers
//! and warp operations; the runtime lives in `prelude.h`) → [`runtime`] (the system C
//! compiler and kernel cache of the `cpu` backend, CTAs spread over a worker pool, device
//! memory whose every access the kernel checks).
//!
//! ```no_run
//! use warpvisor::ptx::{Arg, Dim3, PtxModule, PtxRuntime};
//! # fn main() -> Result<(), warpvisor::ptx::PtxError> {
//! let module = PtxModule::parse(&std::fs::read_to_string("vector_add.ptx").unwrap())?;
//! let rt = PtxRuntime::new()?;
//! let program = rt.load(&module)?;
//! let (a, b, c) = (rt.buffer_from(&[0u8; 4096])?, rt.buffer_from(&[0u8; 4096])?, rt.buffer(4096)?);
//! program.launch("vector_add", Dim3::x(4), Dim3::x(256), 0,
//!     &[Arg::Buffer(&a), Arg::Buffer(&b), Arg::Buffer(&c), Arg::I32(1024)])?;
//! let sums = c.read();
//! # Ok(()) }
//! ```

pub mod ast;
pub mod emit;
pub mod lexer;
pub mod parser;
pub mod runtime;
pub mod simt;
pub mod subroutines;

pub use ast::PtxModule;
pub use runtime::{auto_opt_level, Arg, DeviceBuffer, Dim3, PtxProgram, PtxRuntime};
pub use simt::SimtCounts;

/// What can go wrong from PTX text to a finished launch. Each maps to a CUDA driver error
/// ([`PtxError::cuda_code`]).
#[derive(Debug, thiserror::Error)]
pub enum PtxError {
    /// The text is not PTX warpvisor can read.
    #[error("PTX line {line}: {message}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// An instruction or construct warpvisor does not translate.
    #[error("PTX line {line}: unsupported: {what}")]
    Unsupported {
        /// 1-based line.
        line: usize,
        /// The instruction or directive.
        what: String,
    },
    /// The C compiler or the kernel cache failed.
    #[error("{0}")]
    Backend(#[from] crate::backend::BackendError),
    /// No kernel of that name in the module.
    #[error("no kernel named `{0}` in the module")]
    NoSuchKernel(String),
    /// Arguments that do not match the kernel's parameters.
    #[error("kernel `{kernel}`: {message}")]
    BadArguments {
        /// The kernel.
        kernel: String,
        /// What did not match.
        message: String,
    },
    /// A grid, block or shared memory size outside the device's limits.
    #[error("invalid launch of `{kernel}`: {message}")]
    BadLaunch {
        /// The kernel.
        kernel: String,
        /// What is out of range.
        message: String,
    },
    /// A thread accessed memory outside every allocation.
    #[error("kernel `{kernel}`: illegal address 0x{address:x} in CTA ({}, {}, {}), thread ({}, {}, {}), by the access on PTX line {line}", cta[0], cta[1], cta[2], thread[0], thread[1], thread[2])]
    IllegalAddress {
        /// The kernel.
        kernel: String,
        /// The address (an offset for shared, local and parameter memory).
        address: u64,
        /// The CTA that faulted.
        cta: [u32; 3],
        /// The thread in that CTA.
        thread: [u32; 3],
        /// The PTX line of the faulting load, store or atomic.
        line: usize,
    },
    /// Threads of a CTA wait at barriers or warp operations that others never reach.
    #[error("kernel `{kernel}`: CTA ({}, {}, {}) deadlocked: threads wait at a barrier or warp operation the others never reach", cta[0], cta[1], cta[2])]
    Deadlock {
        /// The kernel.
        kernel: String,
        /// The CTA.
        cta: [u32; 3],
    },
    /// Device functions' frames outgrew their stack (`runtime::FRAME_STACK_BYTES`).
    #[error("kernel `{kernel}`: device functions' frames overflowed their stack in CTA ({}, {}, {})", cta[0], cta[1], cta[2])]
    StackOverflow {
        /// The kernel.
        kernel: String,
        /// The CTA.
        cta: [u32; 3],
    },
    /// The kernel executed `trap` (or jumped outside a `brx.idx` table).
    #[error("kernel `{kernel}`: trap in CTA ({}, {}, {})", cta[0], cta[1], cta[2])]
    Trap {
        /// The kernel.
        kernel: String,
        /// The CTA.
        cta: [u32; 3],
    },
}

impl PtxError {
    pub(crate) fn parse(line: usize, message: impl Into<String>) -> Self {
        PtxError::Parse {
            line,
            message: message.into(),
        }
    }

    /// The `CUresult` a CUDA driver reports for this error.
    pub fn cuda_code(&self) -> u32 {
        match self {
            PtxError::Parse { .. } => 218,       // CUDA_ERROR_INVALID_PTX
            PtxError::Unsupported { .. } => 218, // CUDA_ERROR_INVALID_PTX
            PtxError::Backend(_) => 999,         // CUDA_ERROR_UNKNOWN
            PtxError::NoSuchKernel(_) => 500,    // CUDA_ERROR_NOT_FOUND
            PtxError::BadArguments { .. } | PtxError::BadLaunch { .. } => 1, // INVALID_VALUE
            PtxError::IllegalAddress { .. } => 700, // CUDA_ERROR_ILLEGAL_ADDRESS
            PtxError::Deadlock { .. } | PtxError::Trap { .. } => 719, // LAUNCH_FAILED
            PtxError::StackOverflow { .. } => 701, // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        }
    }
}

impl PtxModule {
    /// Parses PTX text.
    pub fn parse(text: &str) -> Result<PtxModule, PtxError> {
        parser::parse(text)
    }
}
