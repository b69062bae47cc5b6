//! Zeroed host allocations that report failure instead of aborting.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use super::BackendError;

/// Buffers at least this large are reserved from the OS directly (Unix): address space only,
/// pages appear when first touched.
const RESERVE_FROM: usize = 1 << 20;

/// A zero-filled byte buffer that reports allocation failure instead of aborting. Large
/// buffers are reserved without committing memory (`MAP_NORESERVE` on Unix), so a fleet of
/// 4,096 VMs that may each grow to 16 MiB costs only the pages its VMs touch — the kernel's
/// default overcommit policy would refuse such a reservation from the ordinary allocator.
pub struct ZeroedBytes {
    ptr: *mut u8,
    len: usize,
    /// Whether the bytes come from `mmap` (else from the global allocator).
    mapped: bool,
}

/// Alignment of every allocation: what `cudaMalloc` guarantees (256 bytes), so that device
/// buffers start on a memory-transaction boundary as on a GPU (mapped ones start on a page).
const ALIGN: usize = 256;

// The buffer is plain bytes owned by this value.
unsafe impl Send for ZeroedBytes {}
unsafe impl Sync for ZeroedBytes {}

impl ZeroedBytes {
    /// Allocates `len` zero bytes.
    pub fn new(len: usize) -> Result<Self, BackendError> {
        let oom = || BackendError::OutOfMemory { bytes: len as u64 };
        if len == 0 {
            return Ok(ZeroedBytes {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
                mapped: false,
            });
        }
        #[cfg(unix)]
        if len >= RESERVE_FROM {
            // SAFETY: an anonymous private mapping at an address of the kernel's choice; the
            // result is checked before use.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(oom());
            }
            return Ok(ZeroedBytes {
                ptr: ptr.cast(),
                len,
                mapped: true,
            });
        }
        let layout = Layout::from_size_align(len, ALIGN).map_err(|_| oom())?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(oom());
        }
        Ok(ZeroedBytes {
            ptr,
            len,
            mapped: false,
        })
    }

    /// Reserves `len` bytes of address space that no one may touch yet (`PROT_NONE`): a
    /// guarded memory buffer, whose owner makes parts accessible with `mprotect`. Never
    /// view it through [`ZeroedBytes::as_slice`]; use the raw pointer.
    #[cfg(unix)]
    pub fn reserve_inaccessible(len: usize) -> Result<Self, BackendError> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choice; the
        // result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(BackendError::OutOfMemory { bytes: len as u64 });
        }
        Ok(ZeroedBytes {
            ptr: ptr.cast(),
            len: len.max(1),
            mapped: true,
        })
    }

    /// How many bytes (of a reservation too, which has no slice view).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (never: an empty buffer still holds a byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    /// The first byte, for a kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for ZeroedBytes {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        #[cfg(unix)]
        if self.mapped {
            // SAFETY: mapped with this address and length in `new`, unmapped once.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
            return;
        }
        if let Ok(layout) = Layout::from_size_align(self.len, ALIGN) {
            // SAFETY: allocated with this layout in `new`.
            unsafe { dealloc(self.ptr, layout) };
        }
    }
}
