//! A VM's linear memory as WASI calls see it: every guest pointer, length and count checked
//! with checked arithmetic before anything is allocated, read or written.
//!
//! The rules are wasmtime-wasi's (wiggle's), so that a hostile guest gets the same answer on
//! every backend: a pointer out of bounds, or not aligned for the type it points to, traps
//! the VM; a call that would copy more than [`HOSTCALL_BUDGET`] bytes between guest and host
//! fails with `NOMEM` before copying anything.

use super::errno::{CallError, CallResult, NOMEM};
use crate::vmm::VmMemory;

/// The most bytes one WASI call may copy between the guest and the host (wasmtime's default
/// hostcall fuel, 128 MiB): iovec arrays, the buffer they name, paths, subscriptions.
pub const HOSTCALL_BUDGET: u64 = 128 << 20;

/// The memory of the calling VM during one WASI call, with that call's copy budget.
pub struct GuestMemory<'a> {
    memory: VmMemory<'a>,
    budget: u64,
}

impl<'a> GuestMemory<'a> {
    /// The calling VM's memory, with a fresh [`HOSTCALL_BUDGET`].
    pub fn new(memory: VmMemory<'a>) -> Self {
        GuestMemory {
            memory,
            budget: HOSTCALL_BUDGET,
        }
    }

    /// Traps unless `[ptr, ptr + len)` lies in the VM's memory and `ptr` is a multiple of
    /// `align`.
    pub fn check(&self, ptr: u32, len: u64, align: u32) -> CallResult<()> {
        if self.memory.check(ptr as u64, len).is_err() || !ptr.is_multiple_of(align.max(1)) {
            return Err(CallError::Trap);
        }
        Ok(())
    }

    /// How many bytes from `ptr` to the end of the VM's memory (0 past it).
    pub fn room(&self, ptr: u32) -> u64 {
        self.memory.size().saturating_sub(ptr as u64)
    }

    /// Charges `bytes` to this call's copy budget: `NOMEM` once it is spent.
    pub fn charge(&mut self, bytes: u64) -> CallResult<()> {
        self.budget = self
            .budget
            .checked_sub(bytes)
            .ok_or(CallError::Errno(NOMEM))?;
        Ok(())
    }

    /// Charges `count` elements of `size` bytes (an array the host will copy).
    pub fn charge_array(&mut self, count: u32, size: u32) -> CallResult<()> {
        self.charge(count as u64 * size as u64)
    }

    /// `len` bytes at `ptr` (bounds checked first, then copied).
    pub fn read(&mut self, ptr: u32, len: u32) -> CallResult<Vec<u8>> {
        self.memory
            .read(ptr as u64, len as usize)
            .map_err(|_| CallError::Trap)
    }

    /// Copies the bytes at `ptr` into `out` (bounds checked first): no intermediate copy.
    pub fn read_into(&mut self, ptr: u32, out: &mut [u8]) -> CallResult<()> {
        self.memory
            .read_into(ptr as u64, out)
            .map_err(|_| CallError::Trap)
    }

    /// Writes `bytes` at `ptr`.
    pub fn write(&mut self, ptr: u32, bytes: &[u8]) -> CallResult<()> {
        self.write_aligned(ptr, bytes, 1)
    }

    /// Writes `bytes` at `ptr`, which must be a multiple of `align` (a WASI struct).
    pub fn write_aligned(&mut self, ptr: u32, bytes: &[u8], align: u32) -> CallResult<()> {
        self.check(ptr, bytes.len() as u64, align)?;
        self.memory
            .write(ptr as u64, bytes)
            .map_err(|_| CallError::Trap)
    }

    /// A little-endian `u32` at `ptr` (4-aligned).
    pub fn u32(&mut self, ptr: u32) -> CallResult<u32> {
        self.check(ptr, 4, 4)?;
        let mut b = [0u8; 4];
        self.read_into(ptr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian `u32` (4-aligned).
    pub fn set_u32(&mut self, ptr: u32, v: u32) -> CallResult<()> {
        self.write_aligned(ptr, &v.to_le_bytes(), 4)
    }

    /// Writes a little-endian `u64` (8-aligned).
    pub fn set_u64(&mut self, ptr: u32, v: u64) -> CallResult<()> {
        self.write_aligned(ptr, &v.to_le_bytes(), 8)
    }

    /// A path or other string argument of `len` bytes at `ptr`, charged to the budget;
    /// invalid UTF-8 is `ILSEQ`.
    pub fn string(&mut self, ptr: u32, len: u32) -> CallResult<String> {
        self.charge(len as u64)?;
        let bytes = self.read(ptr, len)?;
        String::from_utf8(bytes).map_err(|_| CallError::Errno(super::errno::ILSEQ))
    }

    /// The first non-empty buffer of the iovec array at `iovs` (`count` entries), or an empty
    /// one: what wasmtime's `fd_read`/`fd_write` transfer in one call (a short transfer the
    /// guest's libc continues). The array and the buffer are charged to the budget; the
    /// buffer's bounds are checked when it is read or written, as in wasmtime (a read that
    /// returns nothing touches nothing).
    pub fn first_iovec(&mut self, iovs: u32, count: u32) -> CallResult<(u32, u32)> {
        self.charge_array(count, 8)?;
        for i in 0..count {
            let at = iovs
                .checked_add(i.checked_mul(8).ok_or(CallError::Trap)?)
                .ok_or(CallError::Trap)?;
            self.check(at, 8, 4)?;
            let (ptr, len) = (self.u32(at)?, self.u32(at + 4)?);
            if len == 0 {
                continue;
            }
            self.charge(len as u64)?;
            return Ok((ptr, len));
        }
        Ok((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(pages: u32) -> Vec<u8> {
        vec![0u8; pages as usize * 65536]
    }

    #[test]
    fn pointers_past_the_end_or_wrapping_trap() {
        let mut b = memory(1);
        let mut m = GuestMemory::new(VmMemory::from_bytes(&mut b));
        assert_eq!(m.read(65_532, 4).map(|v| v.len()), Ok(4));
        assert_eq!(m.read(65_533, 4), Err(CallError::Trap));
        assert_eq!(m.read(u32::MAX, 2), Err(CallError::Trap));
        assert_eq!(m.set_u32(u32::MAX - 1, 0), Err(CallError::Trap));
        assert_eq!(m.set_u32(2, 0), Err(CallError::Trap), "misaligned");
        assert_eq!(m.set_u64(4, 0), Err(CallError::Trap), "misaligned");
    }

    #[test]
    fn huge_iovec_requests_are_refused_before_copying() {
        let mut b = memory(1);
        let mut m = GuestMemory::new(VmMemory::from_bytes(&mut b));
        // 2^29 iovecs of 8 bytes: more than the budget, refused without reading them.
        assert_eq!(m.first_iovec(0, 1 << 29), Err(CallError::Errno(NOMEM)));
        let mut m = GuestMemory::new(VmMemory::from_bytes(&mut b));
        m.set_u32(0, 100).unwrap_or_else(|e| panic!("{e:?}"));
        m.set_u32(4, u32::MAX).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(m.first_iovec(0, 1), Err(CallError::Errno(NOMEM)));
        let mut m = GuestMemory::new(VmMemory::from_bytes(&mut b));
        m.set_u32(4, 70_000).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(m.first_iovec(0, 1), Ok((100, 70_000)), "checked when used");
        assert_eq!(m.read(100, 70_000), Err(CallError::Trap));
    }
}
