//! Backends: turn kernel source into something that runs a fleet.
//!
//! - [`cpu`]: the host-C kernel compiled by the system C compiler, VMs spread over a pool of
//!   worker threads.
//! - [`opencl`]: the OpenCL C kernel on any OpenCL device (GPUs; PoCL on CPUs), one work-item
//!   per VM.

pub mod cache;
pub mod cpu;
pub mod opencl;

use std::sync::Arc;

use crate::codegen::KernelOptions;
use crate::vmm::FleetBuffers;

/// Why a backend could not build or run a kernel.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot be used here.
    #[error("backend {backend} is unavailable: {reason}")]
    Unavailable {
        /// Backend name.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// The device compiler rejected the kernel.
    #[error("kernel compilation failed ({compiler}):\n{log}")]
    Compile {
        /// The compiler.
        compiler: String,
        /// Its diagnostics.
        log: String,
    },
    /// An I/O error around the kernel cache or the compiler.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// A launch failed.
    #[error("kernel launch failed: {0}")]
    Launch(String),
}

/// A backend that can load kernels.
pub trait Backend: Send + Sync {
    /// Name used on the command line (`cpu`, ...).
    fn name(&self) -> &'static str;

    /// Builds (or fetches from the cache) the device program for one kernel source.
    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError>;
}

/// A loaded kernel, ready to run fleets.
pub trait Kernel: Send + Sync {
    /// Runs every VM whose status is running until each has finished, trapped or stopped
    /// for a hypercall.
    fn launch(&self, fleet: &mut FleetBuffers) -> Result<(), BackendError>;

    /// Checks that a fleet of `num_vms` VMs fits the device: `per_vm` bytes in all, of which
    /// `largest_per_vm` in its largest buffer. The error names the largest fleet that fits.
    fn check_capacity(
        &self,
        num_vms: u64,
        per_vm: u64,
        largest_per_vm: u64,
    ) -> Result<(), BackendError> {
        let _ = (num_vms, per_vm, largest_per_vm);
        Ok(())
    }
}
