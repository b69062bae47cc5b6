//! Backends: turn kernel source into something that runs a fleet.
//!
//! - [`cpu`]: the host-C kernel compiled by the system C compiler, VMs spread over a pool of
//!   worker threads.
//! - [`opencl`]: the OpenCL C kernel on any OpenCL device (GPUs; PoCL on CPUs), one work-item
//!   per VM.
//! - [`cuda`]: the CUDA C++ kernel compiled by NVRTC, launched through the driver API, one
//!   thread per VM.
//! - [`wasmtime`]: no kernel: every job as an ordinary wasmtime instance (the oracle and the
//!   fallback).

pub mod cache;
pub mod cpu;
pub mod cuda;
pub mod environment;
mod fleet;
mod host_calls;
pub mod opencl;
pub mod select;
pub(crate) mod signals;
pub mod wasmtime;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) mod write_watch;
mod zeroed;

/// Whether this host lets a fleet in host memory watch it for writes (Linux 6.7 or later with
/// asynchronous userfaultfd write protection and `PAGEMAP_SCAN`, allowed to this process):
/// then kernels of `cpu` with guard regions and of OpenCL CPU devices leave dirty pages to the
/// MMU (`write_watch.rs`).
pub fn write_watch_available() -> bool {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    return write_watch::WriteWatch::available();
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    return false;
}

pub(crate) use fleet::dirty_marks;
pub(crate) use fleet::{check_ranges, downcast, gather, read_guarded, scatter, write_guarded};
pub use fleet::{merge_adjacent, DeviceFleet, Traffic, VmmOnly};
pub use zeroed::ZeroedBytes;

use std::sync::Arc;
use std::time::Duration;

use crate::abi::FleetShape;
use crate::codegen::{CodegenError, KernelOptions, MemoryChecks};

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
    /// The fleet's storage could not be allocated.
    #[error("out of memory allocating {bytes} bytes for the fleet (try fewer VMs or a smaller --max-memory)")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u64,
    },
}

/// Where the time of one launch went.
#[derive(Debug, Clone, Copy, Default)]
pub struct LaunchTimes {
    /// Running the kernel.
    pub execute: Duration,
    /// Moving fleet state between host and device (zero where they share memory).
    pub transfer: Duration,
}

/// A backend that can load kernels.
pub trait Backend: Send + Sync {
    /// Name used on the command line (`cpu`, ...).
    fn name(&self) -> &'static str;

    /// Builds (or fetches from the cache) the device program for one kernel source.
    fn load(&self, code: &str, options: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError>;

    /// The device's own copy bandwidth in bytes per second: `bytes` copied from one device
    /// buffer to another by the runtime (cpu: `memcpy` on every worker thread), the best of a
    /// few copies. Kernels' memory copies are measured against it.
    fn copy_bandwidth(&self, bytes: usize) -> Result<f64, BackendError>;

    /// Whether kernels built with `options` leave finding the pages VMs write to their
    /// fleets' write watch (the MMU, `write_watch.rs`) instead of marking them at every store.
    fn watches_writes(&self, options: &KernelOptions) -> bool {
        let _ = options;
        false
    }

    /// Why kernels built with `options` cannot use guard regions on this backend's device, if
    /// they cannot (`MemoryChecks::Auto` settles to guard regions where this is `None`).
    fn guard_regions_unsupported(&self, options: &KernelOptions) -> Option<String> {
        MemoryChecks::guard_unsupported(options)
    }

    /// Whether `MemoryChecks::Auto` settles to guard regions for `options` here (by default:
    /// wherever they are supported).
    fn guard_regions_by_default(&self, options: &KernelOptions) -> bool {
        self.guard_regions_unsupported(options).is_none()
    }

    /// `options` with `MemoryChecks::Auto` settled for this backend ([`MemoryChecks::settle`]).
    fn settle_memory_checks(&self, options: &KernelOptions) -> Result<KernelOptions, CodegenError> {
        MemoryChecks::settle(
            options,
            self.guard_regions_unsupported(options),
            self.guard_regions_by_default(options),
        )
    }
}

/// `bytes / t` for the fastest of `reps` runs of `copy` (after one untimed run that faults
/// the buffers in).
pub(crate) fn best_rate(
    bytes: usize,
    reps: usize,
    mut copy: impl FnMut() -> Result<(), BackendError>,
) -> Result<f64, BackendError> {
    copy()?;
    let mut best = Duration::MAX;
    for _ in 0..reps.max(1) {
        let start = std::time::Instant::now();
        copy()?;
        best = best.min(start.elapsed());
    }
    Ok(bytes as f64 / best.as_secs_f64().max(1e-9))
}

/// Imports served while a kernel runs: with direct calls (`CallMode::Direct`) the kernel
/// calls [`ImportService::serve`] from the worker running the VM and waits for it.
pub trait ImportService: Sync {
    /// Runs import `import` for the VM whose memory `memory` is; `words` holds the arguments
    /// (one word each, as in the result words) and receives the results. `false` when the VM
    /// must stop (a trap or an exit, which the service records).
    fn serve(&self, memory: &mut crate::vmm::VmMemory<'_>, import: u32, words: &mut [u64]) -> bool;

    /// Takes VM `vm`'s next trace words (a traced kernel, `warpvisor simt`).
    fn trace(&self, vm: u32, words: &[u32]) {
        let _ = (vm, words);
    }
}

/// Where a running fleet keeps what a VM's import touches: the control blocks and the memory
/// buffer laid out by `layout`, and the dirty-page map host writes are marked in (null: none).
/// For serving imports while a kernel runs the other VMs (direct calls on `cpu`, synchronous
/// imports on OpenCL).
#[derive(Clone, Copy)]
pub(crate) struct RunningFleet {
    pub vms: *const crate::abi::VmControl,
    pub mem: *mut u8,
    pub dirty: *mut u8,
    pub layout: crate::layout::InterleavedLayout,
}

impl RunningFleet {
    /// Serves VM `vm`'s call of import `import` through `imports` on its `mem_pages` of
    /// memory; `words` holds the arguments and receives the results. `false` when the VM must
    /// stop, also when the service panicked (a panic never unwinds into a kernel).
    ///
    /// # Safety
    /// The pointers are a live fleet's, and VM `vm` (below the fleet's size) waits for this
    /// call, so its control block and memory cells are this call's alone.
    pub(crate) unsafe fn serve(
        &self,
        imports: &dyn ImportService,
        vm: u32,
        import: u32,
        words: &mut [u64],
    ) -> bool {
        // SAFETY: the caller's contract.
        let mut memory = unsafe {
            let pages = std::ptr::addr_of!((*self.vms.add(vm as usize)).mem_pages).read();
            crate::vmm::VmMemory::in_running_fleet(
                self.mem,
                self.dirty,
                self.layout,
                vm,
                pages as u64 * crate::layout::PAGE,
            )
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            imports.serve(&mut memory, import, words)
        }))
        .unwrap_or(false)
    }
}

/// A loaded kernel (one partition of a program), ready to run fleets. Every partition of a
/// program on one backend can launch every fleet that any of them created.
pub trait Kernel: Send + Sync {
    /// Creates a fleet's storage on this kernel's device: every buffer of `shape`, zeroed,
    /// with the data and element segments' bytes in their blobs. Only the VMM can call this.
    fn create_fleet(
        &self,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        token: VmmOnly,
    ) -> Result<Box<dyn DeviceFleet>, BackendError>;

    /// Runs every VM that is ready (`ENTER`, `RESUME` or `RUNNING`) until each has finished,
    /// trapped or stopped for a hypercall or another partition. A kernel with direct calls
    /// has `imports` serve its imports during the launch; others stop VMs at imports.
    fn launch(
        &self,
        fleet: &mut dyn DeviceFleet,
        imports: &dyn ImportService,
    ) -> Result<LaunchTimes, BackendError>;

    /// Puts every VM back to the instantiation image in the fleet's image buffer (the reset
    /// entry, on the device).
    fn reset(&self, fleet: &mut dyn DeviceFleet) -> Result<LaunchTimes, BackendError>;

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

    /// A counting kernel's call-site counters so far (`KernelOptions::count_calls`:
    /// `profile::WORDS_PER_SITE` words per call site of the module, shared by every fleet the
    /// kernel runs); `None` for other kernels.
    fn call_counts(&self) -> Option<Vec<u64>> {
        None
    }
}

/// The kernel lines a compiler log's errors point at: `FILE:LINE:COL: error` (OpenCL, GCC) or
/// `FILE(LINE): error` (NVRTC). At most five.
pub(crate) fn offending_lines(log: &str, source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = String::new();
    for l in log.lines().filter(|l| l.contains("error")).take(5) {
        let number = match l.split_once('(') {
            Some((_, rest)) if rest.contains("): ") => rest.split(')').next(),
            _ => l.split(':').nth(1),
        };
        if let Some(n) = number.and_then(|n| n.trim().parse::<usize>().ok()) {
            if let Some(text) = n.checked_sub(1).and_then(|i| lines.get(i)) {
                out.push_str(&format!("  kernel line {n}: {}\n", text.trim()));
            }
        }
    }
    out
}
