//! VM memories the MMU watches for writes on an OpenCL CPU device (PoCL): the fleet's memory
//! buffer lies in a mapping of the host's own (`CL_MEM_USE_HOST_PTR`), registered with a write
//! watch (`backend/write_watch.rs`), so the kernel's stores carry no dirty-page mark
//! (`-DWV_DIRTY_BY_MMU=1`) and the host fills the dirty-page map before each reset from the
//! MMU's record, as `cpu` does with guard regions. Used where the device computes in host
//! memory, the memory is contiguous per VM (interleave 0), imports wait for the host between
//! launches (continuations) and the host offers the watch ([`watches_writes`]).

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
use crate::backend::BackendError;
use crate::codegen::{DirtyPages, KernelOptions};

/// Whether a kernel built with `options` for a device (`host_resident`: a CPU computing in
/// host memory) leaves dirty pages to its fleets' write watch instead of marking them.
pub(super) fn watches_writes(host_resident: bool, options: &KernelOptions) -> bool {
    host_resident
        && options.dirty_pages == DirtyPages::Auto
        && options.interleave == 0
        && !options.synchronous_imports()
        && crate::backend::write_watch_available()
}

/// A VM and its memory's size in pages before a reset.
pub(super) type SizeBefore = (u32, u32);

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(super) use linux::WatchedMemory;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux {
    use super::SizeBefore;
    use crate::abi::DIRTY_PAGE_SHIFT;
    use crate::backend::write_watch::{FleetWatch, Mapping};
    use crate::backend::BackendError;

    /// The memory of a watched fleet: the mapping the memory buffer uses as its storage and
    /// the watch over it (declared first, so unregistered before the mapping goes).
    pub(in crate::backend::opencl) struct WatchedMemory {
        watch: FleetWatch,
        /// The mapping it made, or none when it watches a guarded fleet's reservation.
        _mapping: Option<Mapping>,
        base: *mut u8,
    }

    impl WatchedMemory {
        /// Reserves `bytes` of zeroed host memory for `num_vms` VMs and registers it.
        pub(in crate::backend::opencl) fn new(
            bytes: u64,
            num_vms: u32,
        ) -> Result<Self, BackendError> {
            let refused = |e: std::io::Error| {
                BackendError::Launch(format!(
                    "cannot watch the fleet's memory for writes ({e}); run with --dirty-pages \
                     marks (DirtyPages::Marks)"
                ))
            };
            let pages = usize::try_from(bytes.div_ceil(1 << DIRTY_PAGE_SHIFT))
                .map_err(|_| BackendError::OutOfMemory { bytes })?;
            let mapping = Mapping::new(pages).map_err(refused)?;
            let watch =
                FleetWatch::new(mapping.page(0), mapping.len(), num_vms).map_err(refused)?;
            Ok(WatchedMemory {
                watch,
                base: mapping.page(0),
                _mapping: Some(mapping),
            })
        }

        /// Watches `bytes` at `base` (a guarded fleet's reservation) for `num_vms` VMs.
        ///
        /// # Safety
        /// The memory must outlive the returned value.
        pub(in crate::backend::opencl) unsafe fn over(
            base: *mut u8,
            bytes: u64,
            num_vms: u32,
        ) -> Result<Self, BackendError> {
            let len = usize::try_from(bytes).map_err(|_| BackendError::OutOfMemory { bytes })?;
            let watch = FleetWatch::new(base, len, num_vms).map_err(|e| {
                BackendError::Launch(format!(
                    "cannot watch the fleet's memory for writes ({e}); run with --dirty-pages \
                     marks (DirtyPages::Marks)"
                ))
            })?;
            Ok(WatchedMemory {
                watch,
                _mapping: None,
                base,
            })
        }

        /// Where the memory buffer's bytes live.
        pub(in crate::backend::opencl) fn base(&self) -> *mut u8 {
            self.base
        }

        /// Before a reset: sets in `dirty` (the fleet's dirty-page map, a byte per page of the
        /// memory buffer) the pages each VM of `resetting` wrote below its size before it.
        ///
        /// # Safety
        /// `dirty` points at the fleet's whole dirty-page map, which nothing else uses now;
        /// `stride` is the bytes between VMs' memories and every VM's size fits its stride.
        pub(in crate::backend::opencl) unsafe fn collect(
            &mut self,
            stride: u64,
            resetting: &[SizeBefore],
            dirty: *mut u8,
        ) -> Result<(), BackendError> {
            for &(vm, pages) in resetting {
                let start = vm as u64 * stride;
                let len = (pages as u64) << 16;
                // SAFETY: the VM's first `len` bytes lie in its part of the registered mapping
                // (sizes fit the stride); the map has a byte per page of the mapping.
                unsafe {
                    self.watch.collect(
                        self.base.add(start as usize),
                        len,
                        dirty.add((start >> DIRTY_PAGE_SHIFT) as usize),
                    )
                }
                .map_err(|e| {
                    BackendError::Launch(format!("cannot read which pages VM {vm} wrote: {e}"))
                })?;
            }
            Ok(())
        }

        /// After a reset that restored them: protects each VM's memory up to `pages` pages
        /// where not yet protected.
        ///
        /// # Safety
        /// As [`WatchedMemory::collect`]: every size fits the stride.
        pub(in crate::backend::opencl) unsafe fn protect(
            &mut self,
            stride: u64,
            sizes: &[SizeBefore],
        ) -> Result<(), BackendError> {
            for &(vm, pages) in sizes {
                // SAFETY: the VM's first `pages` pages lie in its part of the mapping.
                unsafe {
                    self.watch.protect_up_to(
                        vm,
                        self.base.add((vm as u64 * stride) as usize),
                        (pages as u64) << 16,
                    )
                }
                .map_err(|e| {
                    BackendError::Launch(format!("cannot watch VM {vm}'s memory for writes: {e}"))
                })?;
            }
            Ok(())
        }
    }
}

/// No write watch off x86-64 Linux: [`watches_writes`] is false, so none is ever made.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) enum WatchedMemory {}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
impl WatchedMemory {
    pub(super) fn new(_: u64, _: u32) -> Result<Self, BackendError> {
        Err(BackendError::Launch(
            "this host cannot watch memory for writes; run with --dirty-pages marks".into(),
        ))
    }
    /// # Safety
    /// Never succeeds.
    pub(super) unsafe fn over(_: *mut u8, _: u64, _: u32) -> Result<Self, BackendError> {
        Self::new(0, 0)
    }
    pub(super) fn base(&self) -> *mut u8 {
        match *self {}
    }
    /// # Safety
    /// Never called: no value of this type exists.
    pub(super) unsafe fn collect(
        &mut self,
        _: u64,
        _: &[SizeBefore],
        _: *mut u8,
    ) -> Result<(), BackendError> {
        match *self {}
    }
    /// # Safety
    /// Never called: no value of this type exists.
    pub(super) unsafe fn protect(&mut self, _: u64, _: &[SizeBefore]) -> Result<(), BackendError> {
        match *self {}
    }
}
