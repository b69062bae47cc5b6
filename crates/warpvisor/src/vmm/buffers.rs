//! The fleet's host-side buffers: every VM's memory, globals, tables, call stack and control
//! state, laid out by [`InterleavedLayout`].

use std::alloc::{alloc_zeroed, dealloc, Layout};

use super::abi::{FleetAbi, VmControl};
use super::VmmError;
use crate::layout::InterleavedLayout;

/// A zero-filled byte buffer that reports allocation failure instead of aborting. Large
/// buffers come from the OS lazily, so reserved but untouched memory costs nothing.
pub struct ZeroedBytes {
    ptr: *mut u8,
    len: usize,
}

// The buffer is plain bytes owned by this value.
unsafe impl Send for ZeroedBytes {}
unsafe impl Sync for ZeroedBytes {}

impl ZeroedBytes {
    /// Allocates `len` zero bytes.
    pub fn new(len: usize) -> Result<Self, VmmError> {
        if len == 0 {
            return Ok(ZeroedBytes {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            });
        }
        let layout = Layout::from_size_align(len, 16)
            .map_err(|_| VmmError::OutOfMemory { bytes: len as u64 })?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(VmmError::OutOfMemory { bytes: len as u64 });
        }
        Ok(ZeroedBytes { ptr, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for ZeroedBytes {
    fn drop(&mut self) {
        if self.len > 0 {
            if let Ok(layout) = Layout::from_size_align(self.len, 16) {
                // SAFETY: allocated with this layout in `new`.
                unsafe { dealloc(self.ptr, layout) };
            }
        }
    }
}

/// Every buffer of one fleet.
pub struct FleetBuffers {
    /// The layout these buffers follow.
    pub layout: InterleavedLayout,
    /// Linear memories.
    pub mem: ZeroedBytes,
    /// Pages per VM.
    pub mem_pages: Vec<u32>,
    /// Globals (see [`InterleavedLayout::global_index`]).
    pub globals: Vec<u64>,
    /// Table elements, `table_words` per VM.
    pub tables: Vec<u32>,
    /// Table sizes, one per table per VM.
    pub table_sizes: Vec<u32>,
    /// Dropped flags, one per segment per VM.
    pub dropped: Vec<u8>,
    /// Data segment bytes.
    pub data_blob: Vec<u8>,
    /// Element segment references.
    pub elem_blob: Vec<u32>,
    /// Call stacks (see [`InterleavedLayout::stack_index`]).
    pub stack: Vec<u64>,
    /// Result words, `ret_words` per VM.
    pub ret: Vec<u64>,
    /// Control state per VM.
    pub vms: Vec<VmControl>,
    /// Frame limit per VM.
    pub max_depth: u32,
}

/// Element types whose all-zero bit pattern is their default value, so that a buffer of them
/// can come from the allocator already zeroed: pages no VM touches are never made resident
/// (a fleet's call stacks are mostly untouched).
///
/// # Safety
/// The all-zero bit pattern must be a valid value of the type.
unsafe trait ZeroIsDefault: Copy + Default {}
// SAFETY: integers and a `repr(C)` struct of integers are valid when zeroed.
unsafe impl ZeroIsDefault for u8 {}
// SAFETY: as above.
unsafe impl ZeroIsDefault for u32 {}
// SAFETY: as above.
unsafe impl ZeroIsDefault for u64 {}
// SAFETY: as above.
unsafe impl ZeroIsDefault for VmControl {}

fn zeroed_vec<T: ZeroIsDefault>(n: u64, what: &str) -> Result<Vec<T>, VmmError> {
    let n = usize::try_from(n).map_err(|_| VmmError::Limit(format!("{what} too large")))?;
    let oom = || VmmError::OutOfMemory {
        bytes: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
    };
    let layout = Layout::array::<T>(n).map_err(|_| oom())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(oom());
    }
    // SAFETY: allocated by the global allocator with `Layout::array::<T>(n)`, which is the
    // allocation of a `Vec<T>` of capacity `n`; zeroed memory holds `n` valid `T`s.
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// The runs of VM `vm`'s bytes `[offset, offset + len)` that are contiguous in the memory
/// buffer, as `(buffer index, position in the range, length)`: one run without interleaving,
/// one per cell with it.
fn runs(
    layout: InterleavedLayout,
    vm: u32,
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let at = offset + done as u64;
        let n = match layout.interleave as usize {
            0 => len - done,
            cell => (cell - (at % cell as u64) as usize).min(len - done),
        };
        let run = (layout.cell_addr(vm, at), done, n);
        done += n;
        Some(run)
    })
}

impl FleetBuffers {
    /// Allocates zeroed buffers for `layout`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layout: InterleavedLayout,
        num_tables: u32,
        table_words: u32,
        num_segments: u32,
        ret_words: u32,
        max_depth: u32,
        data_blob: Vec<u8>,
        elem_blob: Vec<u32>,
    ) -> Result<Self, VmmError> {
        let n = layout.num_vms as u64;
        let mem_len = usize::try_from(layout.mem_bytes())
            .map_err(|_| VmmError::Limit("fleet memory too large".into()))?;
        Ok(FleetBuffers {
            layout,
            mem: ZeroedBytes::new(mem_len)?,
            mem_pages: zeroed_vec(n, "memory sizes")?,
            globals: zeroed_vec(n * layout.num_globals as u64, "globals")?,
            tables: zeroed_vec(n * table_words as u64, "tables")?,
            table_sizes: zeroed_vec(n * num_tables.max(1) as u64, "table sizes")?,
            dropped: zeroed_vec(n * num_segments.max(1) as u64, "segment flags")?,
            data_blob: if data_blob.is_empty() {
                vec![0]
            } else {
                data_blob
            },
            elem_blob: if elem_blob.is_empty() {
                vec![0]
            } else {
                elem_blob
            },
            stack: zeroed_vec(n * layout.stack_words as u64, "call stacks")?,
            ret: zeroed_vec(n * ret_words as u64, "result words")?,
            vms: zeroed_vec(n, "VM states")?,
            max_depth,
        })
    }

    /// The kernel's view of these buffers. Valid while `self` is neither moved nor resized.
    pub fn abi(&mut self) -> FleetAbi {
        FleetAbi {
            mem: self.mem.as_mut_ptr(),
            mem_pages: self.mem_pages.as_mut_ptr(),
            globals: self.globals.as_mut_ptr(),
            tables: self.tables.as_mut_ptr(),
            table_sizes: self.table_sizes.as_mut_ptr(),
            dropped: self.dropped.as_mut_ptr(),
            data_blob: self.data_blob.as_ptr(),
            elem_blob: self.elem_blob.as_ptr(),
            stack: self.stack.as_mut_ptr(),
            ret: self.ret.as_mut_ptr(),
            vms: self.vms.as_mut_ptr(),
            mem_stride: self.layout.mem_stride(),
            num_vms: self.layout.num_vms,
            max_pages: self.layout.max_pages,
            stack_words: self.layout.stack_words,
            max_depth: self.max_depth,
        }
    }

    /// Reads `len` bytes of VM `vm`'s memory at `offset` (no bounds check against its size).
    pub fn read_memory(&self, vm: u32, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.read_memory_into(vm, offset, &mut out);
        out
    }

    /// Copies VM `vm`'s memory at `offset` into `out` (no bounds check against its size).
    pub fn read_memory_into(&self, vm: u32, offset: u64, out: &mut [u8]) {
        let mem = self.mem.as_slice();
        for (addr, at, n) in runs(self.layout, vm, offset, out.len()) {
            out[at..at + n].copy_from_slice(&mem[addr..addr + n]);
        }
    }

    /// Writes `bytes` into VM `vm`'s memory at `offset`.
    pub fn write_memory(&mut self, vm: u32, offset: u64, bytes: &[u8]) {
        let mem = self.mem.as_mut_slice();
        for (addr, at, n) in runs(self.layout, vm, offset, bytes.len()) {
            mem[addr..addr + n].copy_from_slice(&bytes[at..at + n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads and writes by runs agree with the layout's byte-by-byte addresses.
    #[test]
    fn memory_runs_follow_the_layout() {
        for interleave in [0, 4, 8] {
            let layout = InterleavedLayout {
                num_vms: 3,
                interleave,
                max_pages: 1,
                stack_words: 8,
                num_globals: 1,
            };
            let mut b = FleetBuffers::new(layout, 1, 1, 1, 1, 1, Vec::new(), Vec::new()).unwrap();
            let bytes: Vec<u8> = (0..37u8).collect();
            b.write_memory(1, 5, &bytes);
            for (i, v) in bytes.iter().enumerate() {
                assert_eq!(b.mem.as_slice()[layout.cell_addr(1, 5 + i as u64)], *v);
            }
            assert_eq!(b.read_memory(1, 5, 37), bytes);
            assert_eq!(b.read_memory(1, 3, 4), vec![0, 0, 0, 1]);
            assert!(b.read_memory(0, 0, 64).iter().all(|&x| x == 0));
            assert!(b.read_memory(2, 0, 64).iter().all(|&x| x == 0));
            assert!(b.read_memory(1, 0, 0).is_empty());
        }
    }
}
