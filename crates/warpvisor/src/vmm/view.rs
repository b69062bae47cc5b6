//! One VM's linear memory as a host function sees it: a bounds-checked view of the calling VM
//! and nothing else. It cannot name another VM, change the VM's memory size, or reach the
//! fleet's buffers, so no host function — WASI's or an embedder's — can make one VM's bytes
//! reachable from another or lead the kernel outside the fleet.

use super::buffers::FleetBuffers;
use crate::layout::PAGE;

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

/// The memory of the VM whose hypercall is being served.
pub struct VmMemory<'a> {
    buffers: &'a mut FleetBuffers,
    vm: u32,
}

impl<'a> VmMemory<'a> {
    /// VM `vm`'s memory in `buffers`. The fleet makes one for each hypercall it serves; an
    /// embedder may make one to exercise a host function on buffers of its own.
    pub fn new(buffers: &'a mut FleetBuffers, vm: u32) -> Self {
        VmMemory { buffers, vm }
    }

    /// The same view for a shorter borrow (to hand to a helper that keeps it).
    pub fn reborrow(&mut self) -> VmMemory<'_> {
        VmMemory {
            buffers: self.buffers,
            vm: self.vm,
        }
    }

    /// The index of the VM in its fleet.
    pub fn vm(&self) -> u32 {
        self.vm
    }

    /// The VM's current memory size in bytes.
    pub fn size(&self) -> u64 {
        let layout = self.buffers.layout;
        self.buffers
            .mem_pages
            .get(self.vm as usize)
            .map_or(0, |&p| p.min(layout.max_pages) as u64 * PAGE)
    }

    /// `Ok` if `[offset, offset + len)` lies in the VM's memory.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), OutOfBounds> {
        let size = self.size();
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(OutOfBounds { offset, len, size }),
        }
    }

    /// Copies the bytes at `offset` into `out`.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(offset, out.len() as u64)?;
        self.buffers.read_memory_into(self.vm, offset, out);
        Ok(())
    }

    /// `len` bytes at `offset` (checked before anything is allocated).
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, OutOfBounds> {
        self.check(offset, len as u64)?;
        Ok(self.buffers.read_memory(self.vm, offset, len))
    }

    /// Writes `bytes` at `offset`.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), OutOfBounds> {
        self.check(offset, bytes.len() as u64)?;
        self.buffers.write_memory(self.vm, offset, bytes);
        Ok(())
    }
}
