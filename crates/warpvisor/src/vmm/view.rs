//! One VM's linear memory as a host function sees it: a bounds-checked view of the calling VM
//! and nothing else. It cannot name another VM, change the VM's memory size, or reach the
//! fleet's storage, so no host function — WASI's or an embedder's — can make one VM's bytes
//! reachable from another or lead the kernel outside the fleet.

use crate::abi::FleetBuffer;
use crate::backend::cpu::mark_dirty;
use crate::backend::{merge_adjacent, DeviceFleet};
use crate::layout::InterleavedLayout;

/// An access outside the calling VM's current memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes at {offset} lie outside the VM's {size} bytes of memory")]
pub struct OutOfBounds {
    /// Start of the access.
    pub offset: u64,
    /// Bytes accessed.
    pub len: u64,
    /// The VM's memory size in bytes.
    pub size: u64,
}

/// Why a host function's access to its VM's memory failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// Outside the VM's memory.
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
    /// The device failed to move the bytes.
    #[error("the device failed to move the VM's bytes: {0}")]
    Device(String),
}

/// Where the bytes are.
enum Backing<'a> {
    /// A VM of a fleet, on its device.
    Fleet {
        storage: &'a mut dyn DeviceFleet,
        layout: InterleavedLayout,
    },
    /// Plain host bytes (tests, embedders exercising host functions).
    Bytes(&'a mut [u8]),
    /// The memory buffer of a fleet whose kernel is running on the host (direct calls): other
    /// workers are running other VMs in the same buffer, so only this VM's cells are touched,
    /// and never through a slice of the whole buffer.
    Running {
        mem: *mut u8,
        /// The fleet's dirty-page map (null: none).
        dirty: *mut u8,
        layout: InterleavedLayout,
        _buffer: std::marker::PhantomData<&'a mut u8>,
    },
}

/// The memory of the VM whose hypercall is being served.
///
/// A host function cannot change its VM's memory size, nor get at the fleet's storage, whose
/// control blocks the kernel trusts; neither of these compiles:
///
/// ```compile_fail,E0616
/// fn grow(memory: &mut warpvisor::vmm::VmMemory<'_>) {
///     memory.size = 1 << 40; // private: the size comes from the VM's control block
/// }
/// ```
///
/// ```compile_fail,E0423
/// // Only the VMM can create a fleet's storage (`Kernel::create_fleet` needs this token).
/// let token = warpvisor::backend::VmmOnly(());
/// ```
pub struct VmMemory<'a> {
    backing: Backing<'a>,
    vm: u32,
    size: u64,
}

impl<'a> VmMemory<'a> {
    /// VM `vm`'s `size` bytes of memory in a fleet's storage (the VMM makes one per hypercall).
    pub(crate) fn in_fleet(
        storage: &'a mut dyn DeviceFleet,
        layout: InterleavedLayout,
        vm: u32,
        size: u64,
    ) -> Self {
        let size = size.min(layout.mem_stride());
        VmMemory {
            backing: Backing::Fleet { storage, layout },
            vm,
            size,
        }
    }

    /// VM `vm`'s `size` bytes of memory in the memory buffer at `mem`, laid out by `layout`,
    /// while the kernel runs the other VMs (a direct call from the VM's worker). Writes mark
    /// their pages in the dirty-page map `dirty` unless it is null.
    ///
    /// # Safety
    /// `mem` must be the fleet's memory buffer, holding `layout.mem_stride()` bytes for each of
    /// its VMs, valid for `'a`, and nothing else may touch VM `vm`'s cells for `'a` (its worker
    /// is waiting in this call); `dirty` null or that buffer's dirty-page map.
    pub(crate) unsafe fn in_running_fleet(
        mem: *mut u8,
        dirty: *mut u8,
        layout: InterleavedLayout,
        vm: u32,
        size: u64,
    ) -> Self {
        VmMemory {
            backing: Backing::Running {
                mem,
                dirty,
                layout,
                _buffer: std::marker::PhantomData,
            },
            vm,
            size: size.min(layout.mem_stride()),
        }
    }

    /// A view of plain host bytes as VM 0's memory: for exercising host functions without a
    /// fleet.
    pub fn from_bytes(bytes: &'a mut [u8]) -> Self {
        let size = bytes.len() as u64;
        VmMemory {
            backing: Backing::Bytes(bytes),
            vm: 0,
            size,
        }
    }

    /// The same view for a shorter borrow (to hand to a helper that keeps it).
    pub fn reborrow(&mut self) -> VmMemory<'_> {
        let backing = match &mut self.backing {
            Backing::Fleet { storage, layout } => Backing::Fleet {
                storage: &mut **storage,
                layout: *layout,
            },
            Backing::Bytes(b) => Backing::Bytes(b),
            Backing::Running {
                mem, dirty, layout, ..
            } => Backing::Running {
                mem: *mem,
                dirty: *dirty,
                layout: *layout,
                _buffer: std::marker::PhantomData,
            },
        };
        VmMemory {
            backing,
            vm: self.vm,
            size: self.size,
        }
    }

    /// The index of the VM in its fleet.
    pub fn vm(&self) -> u32 {
        self.vm
    }

    /// The VM's current memory size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `Ok` if `[offset, offset + len)` lies in the VM's memory.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), OutOfBounds> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(OutOfBounds {
                offset,
                len,
                size: self.size,
            }),
        }
    }

    /// Copies the bytes at `offset` into `out`.
    pub fn read_into(&mut self, offset: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.check(offset, out.len() as u64)?;
        match &mut self.backing {
            Backing::Bytes(b) => {
                let at = offset as usize;
                out.copy_from_slice(&b[at..at + out.len()]);
                Ok(())
            }
            Backing::Fleet { storage, layout } => {
                let ranges =
                    merge_adjacent(layout.memory_ranges(self.vm, offset, out.len() as u64));
                storage
                    .read(FleetBuffer::Mem, &ranges, out)
                    .map_err(|e| MemoryError::Device(e.to_string()))
            }
            Backing::Running { mem, layout, .. } => {
                let mut at = 0usize;
                for r in layout.memory_ranges(self.vm, offset, out.len() as u64) {
                    let n = (r.end - r.start) as usize;
                    // SAFETY: the range is one of this VM's cells inside the buffer
                    // (`in_running_fleet`'s contract, and the bounds check above).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            mem.add(r.start as usize),
                            out[at..at + n].as_mut_ptr(),
                            n,
                        )
                    };
                    at += n;
                }
                Ok(())
            }
        }
    }

    /// `len` bytes at `offset` (checked before anything is allocated).
    pub fn read(&mut self, offset: u64, len: usize) -> Result<Vec<u8>, MemoryError> {
        self.check(offset, len as u64)?;
        let mut out = vec![0u8; len];
        self.read_into(offset, &mut out)?;
        Ok(out)
    }

    /// Writes `bytes` at `offset`.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), MemoryError> {
        self.check(offset, bytes.len() as u64)?;
        match &mut self.backing {
            Backing::Bytes(b) => {
                let at = offset as usize;
                b[at..at + bytes.len()].copy_from_slice(bytes);
                Ok(())
            }
            Backing::Fleet { storage, layout } => {
                let ranges =
                    merge_adjacent(layout.memory_ranges(self.vm, offset, bytes.len() as u64));
                storage
                    .write(FleetBuffer::Mem, &ranges, bytes)
                    .map_err(|e| MemoryError::Device(e.to_string()))
            }
            Backing::Running {
                mem, dirty, layout, ..
            } => {
                let mut at = 0usize;
                for r in layout.memory_ranges(self.vm, offset, bytes.len() as u64) {
                    let n = (r.end - r.start) as usize;
                    // SAFETY: as in `read_into`; the dirty map, when there is one, covers the
                    // memory buffer (`in_running_fleet`'s contract).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            bytes[at..at + n].as_ptr(),
                            mem.add(r.start as usize),
                            n,
                        );
                        if !dirty.is_null() {
                            mark_dirty(*dirty, r.start, r.end);
                        }
                    };
                    at += n;
                }
                Ok(())
            }
        }
    }
}
