//! The kernel ABI, defined once: everything the host and a kernel must agree on.
//!
//! - [`codes`]: VM status codes and trap codes.
//! - [`fleet`]: the per-VM control block (`wv_vm`), the fleet's buffers and scalars (`wv_fleet`,
//!   and the kernels' entry parameters in order), the instantiation image, and every per-VM
//!   index computation.
//! - [`c`]: the C declarations generated from those definitions for the kernel prelude and
//!   the dialects' entry points, with `_Static_assert`s that fail a kernel's build when a C
//!   compiler lays a struct out differently from Rust.
//!
//! Adding a field to the fleet means adding one line to a definition here; the kernels'
//! declarations, entry signatures and layout checks follow from it.

pub mod c;
pub mod codes;
pub mod fleet;

pub use codes::{status, KERNEL_TRAPS};
pub use fleet::{
    FleetAbi, FleetBuffer, FleetScalars, FleetShape, HostLaunch, HostServices, ImageLayout,
    KernelParam, PerVmArray, ScalarArg, VmControl, DIRTY_PAGE_SHIFT, FRAME_HEADER, NO_FRAME,
    NULL_REF,
};
