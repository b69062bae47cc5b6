//! A CUDA driver API on the CPU. The entry points a driver-API program (and cudarc, which
//! warpvisor's `cuda` backend uses) calls, backed by `warpvisor::ptx`: modules are PTX
//! translated to C and compiled, kernels run their CTAs on the host's cores, device memory is
//! host memory that kernels may touch only where it was allocated.
//!
//! One device, "warpvisor CPU (N cores)", with an H100's limits and compute capability 9.0.
//! Launches are asynchronous, as CUDA's: each stream runs its launches in order on a thread of
//! its own (`streams.rs`), page-locked host memory is mapped for kernels at its own address,
//! and a launch's error is reported by the next call that waits for it (`cuStreamSynchronize`,
//! a copy). Errors are the CUDA codes; with `WARPVISOR_CUDA_VERBOSE=1` the reason is also
//! printed on standard error.

#![allow(non_snake_case, clippy::missing_safety_doc)]

/// `?` for entry points: the early return of a `CUresult`.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(c) => return c,
        }
    };
}

mod device;
mod launch;
mod memory;
mod streams;

pub use device::*;
pub use launch::*;
pub use memory::*;
pub use streams::*;
