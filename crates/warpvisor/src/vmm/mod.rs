//! The virtual machine monitor: a [`Program`] (a translated module loaded on a backend) and
//! the [`Fleet`] of VMs that runs it — instantiation, invocation, and hypercall service.

pub mod abi;
mod buffers;
mod fleet;
mod values;

use std::sync::Arc;

pub use buffers::{FleetBuffers, ZeroedBytes};
pub use fleet::{Fleet, FleetConfig, HostFunctions, HostStop, Imports, NoHost};
pub use values::{Outcome, TrapKind, Value};

use crate::backend::{Backend, BackendError, Kernel};

use crate::codegen::{self, CodegenError, KernelLayout, KernelOptions, KernelSource};
use crate::frontend::{self, FrontendError, Module};

/// Errors of the VMM and of the pipeline stages it drives.
#[derive(Debug, thiserror::Error)]
pub enum VmmError {
    /// The module was rejected by the front end.
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    /// The module could not be translated.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// No export of that name.
    #[error("the module has no exported function `{0}`")]
    NoSuchExport(String),
    /// Arguments do not match the function's parameters.
    #[error("`{name}` takes ({expected}); got {got}")]
    BadArguments {
        /// Function name.
        name: String,
        /// Expected parameter types.
        expected: String,
        /// What was given.
        got: String,
    },
    /// An allocation failed.
    #[error("out of memory allocating {bytes} bytes for the fleet (try fewer VMs or a smaller --max-memory)")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u64,
    },
    /// A configured limit was exceeded.
    #[error("{0}")]
    Limit(String),
    /// The module imports something the host does not provide.
    #[error("unknown import `{module}`.`{name}`")]
    UnknownImport {
        /// Import module.
        module: String,
        /// Import name.
        name: String,
    },
    /// Instantiation trapped (segment out of bounds, or the start function trapped).
    #[error("instantiation trapped: {0}")]
    InstantiationTrap(TrapKind),
}

/// A translated module loaded on a backend: ready to instantiate fleets.
pub struct Program {
    /// The module (without bodies).
    pub module: Module<'static>,
    /// The device programs, one per kernel partition.
    pub kernels: Vec<Arc<dyn Kernel>>,
    /// For each function, the partition whose kernel starts it.
    pub partition_of: Vec<u32>,
    /// Layout facts of the kernel.
    pub layout: KernelLayout,
    /// Settings the kernel was built with.
    pub options: KernelOptions,
}

impl Program {
    /// Validates, translates and loads `wasm` (binary or text) on `backend`.
    pub fn compile(
        wasm: &[u8],
        options: &KernelOptions,
        backend: &dyn Backend,
    ) -> Result<Program, VmmError> {
        let binary = frontend::to_binary(wasm)?;
        let module = frontend::load(&binary)?;
        let source = codegen::emit(&module, options)?;
        Self::from_source(module.into_shape(), &source, options, backend)
    }

    /// Loads already generated kernel source.
    pub fn from_source(
        module: Module<'static>,
        source: &KernelSource,
        options: &KernelOptions,
        backend: &dyn Backend,
    ) -> Result<Program, VmmError> {
        // Partitions build in parallel: device compilers are slow.
        let kernels = std::thread::scope(|s| {
            let handles: Vec<_> = source
                .partitions
                .iter()
                .map(|code| s.spawn(move || backend.load(code, options)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(BackendError::Launch("kernel build thread failed".into()))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(Program {
            module,
            kernels,
            partition_of: source.partition_of.clone(),
            layout: source.layout.clone(),
            options: options.clone(),
        })
    }
}
