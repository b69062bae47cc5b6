//! A fleet's storage on a device ([`DeviceFleet`]): created once by a backend, kept there
//! across launches. Between launches the VMM moves only what it needs through it — control
//! blocks, a hypercall's argument and result words, the bytes a host function reads or writes —
//! each as one gathered transfer of byte ranges.

use std::any::Any;
use std::ops::Range;

use super::BackendError;
use crate::abi::{FleetBuffer, FleetShape, DIRTY_PAGE_SHIFT};

/// Bytes moved between the host and a fleet's storage, and the transfers that moved them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes written to the device.
    pub to_device: u64,
    /// Bytes read from the device.
    pub from_device: u64,
    /// Gathered transfers (each [`DeviceFleet::read`] or [`DeviceFleet::write`] is one).
    pub transfers: u64,
}

impl Traffic {
    /// Bytes both ways.
    pub fn bytes(&self) -> u64 {
        self.to_device + self.from_device
    }

    /// What moved between `earlier` (a snapshot of the same fleet) and `self`.
    pub fn since(&self, earlier: &Traffic) -> Traffic {
        Traffic {
            to_device: self.to_device.saturating_sub(earlier.to_device),
            from_device: self.from_device.saturating_sub(earlier.from_device),
            transfers: self.transfers.saturating_sub(earlier.transfers),
        }
    }
}

/// Proof that the caller is warpvisor's own VMM. It cannot be made outside this crate, so no
/// embedder can obtain a fleet's storage and write control blocks the kernel trusts (a VM's
/// memory size, its frame pointer): only [`crate::vmm::Fleet`] creates storage.
pub struct VmmOnly(pub(crate) ());

/// A fleet's buffers on a backend's device.
pub trait DeviceFleet: Send {
    /// The sizes of the buffers.
    fn shape(&self) -> &FleetShape;

    /// Copies the byte ranges `ranges` of `buffer` into `out`, one after another, as one
    /// gathered transfer. `out` is exactly as long as the ranges together.
    fn read(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        out: &mut [u8],
    ) -> Result<(), BackendError>;

    /// Writes `data` over the byte ranges `ranges` of `buffer`, one after another, as one
    /// gathered transfer.
    fn write(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError>;

    /// Bytes moved so far.
    fn traffic(&self) -> Traffic;

    /// The concrete storage, for the backend's own kernels.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Copies `ranges` of `src` into `out`, one after another (the ranges checked by
/// [`check_ranges`]).
pub(crate) fn gather(src: &[u8], ranges: &[Range<u64>], out: &mut [u8]) {
    let mut at = 0;
    for r in ranges {
        let n = (r.end - r.start) as usize;
        out[at..at + n].copy_from_slice(&src[r.start as usize..r.end as usize]);
        at += n;
    }
}

/// Writes `data` over `ranges` of `dst`, one after another (the ranges checked by
/// [`check_ranges`]).
pub(crate) fn scatter(dst: &mut [u8], ranges: &[Range<u64>], data: &[u8]) {
    let mut at = 0;
    for r in ranges {
        let n = (r.end - r.start) as usize;
        dst[r.start as usize..r.end as usize].copy_from_slice(&data[at..at + n]);
        at += n;
    }
}

/// Checks that `ranges` lie in `buffer` and add up to `len` bytes.
pub(crate) fn check_ranges(
    shape: &FleetShape,
    buffer: FleetBuffer,
    ranges: &[Range<u64>],
    len: usize,
) -> Result<(), BackendError> {
    let size = shape.bytes(buffer);
    let mut total = 0u64;
    for r in ranges {
        if r.start > r.end || r.end > size {
            return Err(BackendError::Launch(format!(
                "bytes {}..{} lie outside the fleet's {} buffer of {size} bytes",
                r.start,
                r.end,
                buffer.name()
            )));
        }
        total += r.end - r.start;
    }
    if total != len as u64 {
        return Err(BackendError::Launch(format!(
            "{len} host bytes for {total} bytes of the fleet's {} buffer",
            buffer.name()
        )));
    }
    Ok(())
}

/// Reads `ranges` of guarded memories (`stride` bytes per VM at `base`) into `out`: the bytes
/// below each VM's size (`pages(vm)` pages) are copied, those beyond it read as zeros (what
/// they hold: a reset cleared them, or no one wrote them) without being touched.
///
/// # Safety
/// `base` is a guarded memory buffer the ranges lie in (`check_ranges`), each VM's memory
/// readable below its size (or opened by the fault handler when touched).
pub(crate) unsafe fn read_guarded(
    base: *const u8,
    stride: u64,
    pages: impl Fn(u32) -> u32,
    ranges: &[Range<u64>],
    out: &mut [u8],
) -> Result<(), BackendError> {
    guarded_pieces(ranges, stride, pages, |piece, at, open| {
        let n = (piece.end - piece.start) as usize;
        let dst = &mut out[at..at + n];
        // SAFETY: the first `open` bytes of the piece lie below its VM's size, in the buffer
        // (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.add(piece.start as usize),
                dst.as_mut_ptr(),
                open as usize,
            )
        };
        dst[open as usize..].fill(0);
        Ok(())
    })
}

/// Writes `data` over `ranges` of guarded memories (`stride` bytes per VM at `base`), all of
/// which must lie below their VM's size (`pages(vm)` pages): a write past it is an error.
///
/// # Safety
/// As [`read_guarded`], writable below each VM's size.
pub(crate) unsafe fn write_guarded(
    base: *mut u8,
    stride: u64,
    pages: impl Fn(u32) -> u32,
    ranges: &[Range<u64>],
    data: &[u8],
) -> Result<(), BackendError> {
    guarded_pieces(ranges, stride, pages, |piece, at, open| {
        let n = piece.end - piece.start;
        if open < n {
            return Err(BackendError::Launch(format!(
                "a write of {n} bytes at byte {} of the memory buffer reaches past its VM's \
                 memory",
                piece.start
            )));
        }
        // SAFETY: the whole piece lies below its VM's size, in the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data[at..].as_ptr(),
                base.add(piece.start as usize),
                n as usize,
            )
        };
        Ok(())
    })
}

/// Splits `ranges` of a guarded memory buffer (`stride` bytes per VM) at VM boundaries and
/// calls `each` with every piece, its offset in the caller's bytes and how many of its bytes
/// lie below its VM's current size (`pages(vm)` pages; the rest is inaccessible).
fn guarded_pieces(
    ranges: &[Range<u64>],
    stride: u64,
    pages: impl Fn(u32) -> u32,
    mut each: impl FnMut(Range<u64>, usize, u64) -> Result<(), BackendError>,
) -> Result<(), BackendError> {
    let mut at = 0usize;
    for r in ranges {
        let mut start = r.start;
        while start < r.end {
            let vm = start / stride.max(1);
            let vm_end = ((vm + 1) * stride).min(r.end);
            let open_end = vm * stride + ((pages(vm as u32) as u64) << 16);
            let open = open_end.clamp(start, vm_end) - start;
            each(start..vm_end, at, open)?;
            at += (vm_end - start) as usize;
            start = vm_end;
        }
    }
    Ok(())
}

/// `ranges` with each range that starts where the one before it ends merged into it: fewer,
/// larger copies, and the same bytes in the same packed order (so it serves reads and writes).
pub fn merge_adjacent(ranges: impl IntoIterator<Item = Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in ranges.into_iter().filter(|r| r.start < r.end) {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// The entries of the dirty-page map ([`FleetBuffer::Dirty`]) that a host write of `ranges` of
/// `buffer` must set, in ascending order and merged: the pages it writes when `buffer` is the
/// memory of a fleet with contiguous memories, else none. Every backend marks them with the
/// write itself, so that a reset restores what the host wrote into a VM as well.
pub(crate) fn dirty_entries(
    shape: &FleetShape,
    buffer: FleetBuffer,
    ranges: &[Range<u64>],
) -> Vec<Range<u64>> {
    if buffer != FleetBuffer::Mem || shape.layout.interleave != 0 {
        return Vec::new();
    }
    let mut pages: Vec<Range<u64>> = ranges
        .iter()
        .filter(|r| r.start < r.end)
        .map(|r| (r.start >> DIRTY_PAGE_SHIFT)..((r.end - 1) >> DIRTY_PAGE_SHIFT) + 1)
        .collect();
    pages.sort_by_key(|p| p.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(pages.len());
    for p in pages {
        match out.last_mut() {
            Some(last) if p.start <= last.end => last.end = last.end.max(p.end),
            _ => out.push(p),
        }
    }
    out
}

/// What a backend writes into the dirty-page map alongside a host write of `ranges` of
/// `buffer`: [`dirty_entries`] and as many `1` bytes, or `None` when nothing is to be marked.
pub(crate) fn dirty_marks(
    shape: &FleetShape,
    buffer: FleetBuffer,
    ranges: &[Range<u64>],
) -> Option<(Vec<Range<u64>>, Vec<u8>)> {
    let marks = dirty_entries(shape, buffer, ranges);
    let n: u64 = marks.iter().map(|r| r.end - r.start).sum();
    (n > 0).then(|| (marks, vec![1u8; n as usize]))
}

/// The concrete fleet type `T` behind `fleet`, or an error naming the backend that was
/// expected (a fleet of one backend launched by another's kernel).
pub(crate) fn downcast<'a, T: 'static>(
    fleet: &'a mut dyn DeviceFleet,
    backend: &str,
) -> Result<&'a mut T, BackendError> {
    fleet.as_any_mut().downcast_mut::<T>().ok_or_else(|| {
        BackendError::Launch(format!(
            "this fleet's storage was not created by the {backend} backend"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_writes_of_contiguous_memories_mark_their_pages() {
        let layout = crate::layout::InterleavedLayout {
            num_vms: 2,
            interleave: 0,
            max_pages: 1,
            stack_words: 16,
            num_globals: 1,
            guard_regions: false,
        };
        let shape = FleetShape {
            layout,
            num_tables: 1,
            table_words: 1,
            num_segments: 1,
            ret_words: 1,
            max_depth: 1,
            data_bytes: 1,
            elem_refs: 1,
        };
        // Bytes 4095..4097 cross a page; 9000..9001 and 8192..8193 share page 2.
        let marks = dirty_entries(
            &shape,
            FleetBuffer::Mem,
            &[9000..9001, 4095..4097, 8192..8193],
        );
        assert_eq!(marks, vec![0..3]);
        assert!(dirty_entries(&shape, FleetBuffer::Ret, std::slice::from_ref(&(0..8))).is_empty());
        assert!(dirty_entries(&shape, FleetBuffer::Mem, std::slice::from_ref(&(5..5))).is_empty());
    }

    #[test]
    fn merging_keeps_the_packed_order_and_drops_empty_ranges() {
        assert_eq!(
            merge_adjacent([0..8, 8..16, 16..16, 20..24, 24..30, 2..4]),
            vec![0..16, 20..30, 2..4]
        );
    }
}
