//! A fleet's storage for the `cpu` backend: one zeroed host allocation per buffer, which the
//! kernel reads and writes in place. "Transfers" are copies between the VMM's host-side
//! values and these buffers, counted like any backend's.
//!
//! With contiguous memories (interleave 0) the fleet also keeps a dirty-page map
//! (`wv_fleet.dirty`): one byte per 4 KiB of the memory buffer, set by the kernel's stores and
//! by every host write, cleared by the reset entry, which restores only the marked pages.

use std::any::Any;
use std::ops::Range;

use crate::abi::{FleetAbi, FleetBuffer, FleetShape, DIRTY_PAGE_SHIFT};
use crate::backend::{check_ranges, BackendError, DeviceFleet, Traffic, ZeroedBytes};

/// The buffers of one fleet in host memory.
pub struct CpuFleet {
    shape: FleetShape,
    buffers: Vec<ZeroedBytes>,
    /// The dirty-page map, when memories are contiguous.
    dirty: Option<ZeroedBytes>,
    traffic: Traffic,
}

/// Marks the pages of the memory buffer's bytes `[start, end)` in the dirty-page map `map`.
///
/// # Safety
/// `map` must be a fleet's dirty-page map (see [`CpuFleet::dirty_map`]) and `end` at most the
/// length of its memory buffer.
pub(crate) unsafe fn mark_dirty(map: *mut u8, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let first = start >> DIRTY_PAGE_SHIFT;
    let last = (end - 1) >> DIRTY_PAGE_SHIFT;
    // SAFETY: pages `first..=last` lie in the map (the caller's contract); the bytes are plain
    // flags that only this VM's worker or the VMM touches at a time.
    unsafe { std::ptr::write_bytes(map.add(first as usize), 1, (last - first + 1) as usize) };
}

impl CpuFleet {
    /// Allocates every buffer of `shape`, zeroed (untouched pages never become resident), and
    /// copies in the segment blobs.
    pub fn new(
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
    ) -> Result<Self, BackendError> {
        let mut buffers = Vec::with_capacity(FleetBuffer::ALL.len());
        for &b in FleetBuffer::ALL {
            let bytes = usize::try_from(shape.bytes(b)).map_err(|_| BackendError::OutOfMemory {
                bytes: shape.bytes(b),
            })?;
            buffers.push(ZeroedBytes::new(bytes)?);
        }
        let dirty = if shape.layout.interleave == 0 {
            let pages = shape.len(FleetBuffer::Mem) >> DIRTY_PAGE_SHIFT;
            let bytes = usize::try_from(pages.max(1))
                .map_err(|_| BackendError::OutOfMemory { bytes: pages })?;
            Some(ZeroedBytes::new(bytes)?)
        } else {
            None
        };
        let mut fleet = CpuFleet {
            shape: *shape,
            buffers,
            dirty,
            traffic: Traffic::default(),
        };
        fleet.fill(FleetBuffer::DataBlob, data_blob)?;
        let elems: Vec<u8> = elem_blob.iter().flat_map(|r| r.to_le_bytes()).collect();
        fleet.fill(FleetBuffer::ElemBlob, &elems)?;
        Ok(fleet)
    }

    /// Copies `bytes` to the start of `buffer` (not counted as traffic: it is creation).
    fn fill(&mut self, buffer: FleetBuffer, bytes: &[u8]) -> Result<(), BackendError> {
        let dst = self.buffers[Self::slot(buffer)].as_mut_slice();
        dst.get_mut(..bytes.len())
            .ok_or_else(|| {
                BackendError::Launch(format!("the {} blob does not fit", buffer.name()))
            })?
            .copy_from_slice(bytes);
        Ok(())
    }

    fn slot(buffer: FleetBuffer) -> usize {
        FleetBuffer::ALL
            .iter()
            .position(|b| *b == buffer)
            .unwrap_or(0)
    }

    /// The dirty-page map's address (null with interleaved memories). Valid while `self`
    /// lives.
    pub fn dirty_map(&mut self) -> *mut u8 {
        self.dirty
            .as_mut()
            .map_or(std::ptr::null_mut(), ZeroedBytes::as_mut_ptr)
    }

    /// The kernel's view of the buffers. Valid while `self` lives.
    pub fn abi(&mut self) -> FleetAbi {
        let bases: Vec<*mut u8> = self.buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
        FleetAbi::new(|b| bases[Self::slot(b)], &self.shape.scalars())
    }
}

impl DeviceFleet for CpuFleet {
    fn shape(&self) -> &FleetShape {
        &self.shape
    }

    fn read(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        check_ranges(&self.shape, buffer, ranges, out.len())?;
        let src = self.buffers[Self::slot(buffer)].as_slice();
        let mut at = 0;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            out[at..at + n].copy_from_slice(&src[r.start as usize..r.end as usize]);
            at += n;
        }
        self.traffic.from_device += out.len() as u64;
        self.traffic.transfers += 1;
        Ok(())
    }

    fn write(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError> {
        check_ranges(&self.shape, buffer, ranges, data.len())?;
        let dst = self.buffers[Self::slot(buffer)].as_mut_slice();
        let mut at = 0;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            dst[r.start as usize..r.end as usize].copy_from_slice(&data[at..at + n]);
            at += n;
        }
        if buffer == FleetBuffer::Mem {
            let map = self.dirty_map();
            if !map.is_null() {
                for r in ranges {
                    // SAFETY: `check_ranges` put every range inside the memory buffer.
                    unsafe { mark_dirty(map, r.start, r.end) };
                }
            }
        }
        self.traffic.to_device += data.len() as u64;
        self.traffic.transfers += 1;
        Ok(())
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
