//! A VM's linear memory as WASI calls see it: bounds-checked reads and writes through the
//! fleet's interleaved layout.

use super::errno::{Errno, FAULT};
use crate::layout::PAGE;
use crate::vmm::FleetBuffers;

/// The memory of one VM.
pub struct GuestMemory<'a> {
    buffers: &'a mut FleetBuffers,
    vm: u32,
}

impl<'a> GuestMemory<'a> {
    /// VM `vm`'s memory in `buffers`.
    pub fn new(buffers: &'a mut FleetBuffers, vm: u32) -> Self {
        GuestMemory { buffers, vm }
    }

    fn size(&self) -> u64 {
        self.buffers.mem_pages[self.vm as usize] as u64 * PAGE
    }

    fn check(&self, ptr: u32, len: u64) -> Result<(), Errno> {
        if ptr as u64 + len > self.size() {
            Err(FAULT)
        } else {
            Ok(())
        }
    }

    /// `len` bytes at `ptr`.
    pub fn read(&self, ptr: u32, len: u32) -> Result<Vec<u8>, Errno> {
        self.check(ptr, len as u64)?;
        Ok(self.buffers.read_memory(self.vm, ptr as u64, len as usize))
    }

    /// Writes `bytes` at `ptr`.
    pub fn write(&mut self, ptr: u32, bytes: &[u8]) -> Result<(), Errno> {
        self.check(ptr, bytes.len() as u64)?;
        self.buffers.write_memory(self.vm, ptr as u64, bytes);
        Ok(())
    }

    /// A little-endian `u32` at `ptr`.
    pub fn u32(&self, ptr: u32) -> Result<u32, Errno> {
        let b = self.read(ptr, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Writes a little-endian `u32`.
    pub fn set_u32(&mut self, ptr: u32, v: u32) -> Result<(), Errno> {
        self.write(ptr, &v.to_le_bytes())
    }

    /// Writes a little-endian `u64`.
    pub fn set_u64(&mut self, ptr: u32, v: u64) -> Result<(), Errno> {
        self.write(ptr, &v.to_le_bytes())
    }

    /// A UTF-8 string of `len` bytes at `ptr`.
    pub fn string(&self, ptr: u32, len: u32) -> Result<String, Errno> {
        String::from_utf8(self.read(ptr, len)?).map_err(|_| super::errno::ILSEQ)
    }

    /// The `(ptr, len)` pairs of an iovec array.
    pub fn iovecs(&self, iovs: u32, count: u32) -> Result<Vec<(u32, u32)>, Errno> {
        (0..count)
            .map(|i| {
                let at = iovs
                    .checked_add(i.checked_mul(8).ok_or(FAULT)?)
                    .ok_or(FAULT)?;
                Ok((self.u32(at)?, self.u32(at + 4)?))
            })
            .collect()
    }
}
