//! A fleet's storage for the `cpu` backend: one zeroed host allocation per buffer, which the
//! kernel reads and writes in place. "Transfers" are copies between the VMM's host-side
//! values and these buffers, counted like any backend's.
//!
//! With contiguous memories (interleave 0) its dirty-page map (`FleetBuffer::Dirty`, one byte
//! per 4 KiB of the memory buffer) is set by the kernel's stores and by every host write — or,
//! with a write watch (`backend/write_watch.rs`), from the MMU's record before each reset — and
//! cleared by the reset entry, which restores only the marked pages.

use std::any::Any;
use std::ops::Range;

use crate::abi::codes::status;
use crate::abi::fleet::controls_as_bytes_mut;
use crate::abi::{FleetAbi, FleetBuffer, FleetShape, VmControl, DIRTY_PAGE_SHIFT};
use crate::backend::{
    check_ranges, gather, read_guarded, scatter, write_guarded, BackendError, DeviceFleet, Traffic,
    ZeroedBytes,
};
use crate::layout::PAGE;

/// The buffers of one fleet in host memory.
pub struct CpuFleet {
    shape: FleetShape,
    buffers: Vec<ZeroedBytes>,
    traffic: Traffic,
    /// With a kernel whose stores do not mark (`watches_writes`): the MMU's record of what
    /// the VMs wrote.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    watch: Option<crate::backend::write_watch::FleetWatch>,
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
    /// copies in the segment blobs. `watch_writes`: the kernel's stores do not mark dirty
    /// pages, so the fleet watches its guarded memory for writes (`backend/write_watch.rs`).
    pub fn new(
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        watch_writes: bool,
    ) -> Result<Self, BackendError> {
        let mut buffers = Vec::with_capacity(FleetBuffer::ALL.len());
        for &b in FleetBuffer::ALL {
            let bytes = usize::try_from(shape.bytes(b)).map_err(|_| BackendError::OutOfMemory {
                bytes: shape.bytes(b),
            })?;
            buffers.push(if b == FleetBuffer::Mem && shape.layout.guard_regions {
                guarded_reservation(bytes)?
            } else {
                ZeroedBytes::new(bytes)?
            });
        }
        let mut fleet = CpuFleet {
            shape: *shape,
            buffers,
            traffic: Traffic::default(),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            watch: None,
        };
        if watch_writes {
            fleet.start_watching()?;
        }
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
        match self.shape.layout.interleave {
            0 => self.buffers[Self::slot(FleetBuffer::Dirty)].as_mut_ptr(),
            _ => std::ptr::null_mut(),
        }
    }

    /// The kernel's view of the buffers. Valid while `self` lives.
    pub fn abi(&mut self) -> FleetAbi {
        let bases: Vec<*mut u8> = self.buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
        FleetAbi::new(|b| bases[Self::slot(b)], &self.shape.scalars())
    }
}

/// The memory buffer of a guarded fleet: address space only, inaccessible until the kernel
/// opens each VM's current size.
fn guarded_reservation(bytes: usize) -> Result<ZeroedBytes, BackendError> {
    #[cfg(unix)]
    {
        ZeroedBytes::reserve_inaccessible(bytes)
    }
    #[cfg(not(unix))]
    {
        let _ = bytes;
        Err(BackendError::Launch(
            "guard regions need a Unix host".into(),
        ))
    }
}

impl CpuFleet {
    /// VM `vm`'s control block as the kernel left it.
    fn control(&self, vm: u32) -> VmControl {
        let vms = self.buffers[Self::slot(FleetBuffer::Vms)].as_slice();
        let block = self.shape.control_bytes(vm);
        let mut control = VmControl::default();
        if let Some(b) = vms.get(block.start as usize..block.end as usize) {
            controls_as_bytes_mut(std::slice::from_mut(&mut control)).copy_from_slice(b);
        }
        control
    }

    /// Each VM's memory size in pages, for [`CpuFleet::close_shrunk_memories`]; `None` unless
    /// the memories are guarded.
    pub(super) fn guarded_sizes(&self) -> Option<Vec<u32>> {
        self.shape.layout.guard_regions.then(|| {
            (0..self.shape.layout.num_vms)
                .map(|vm| self.control(vm).mem_pages)
                .collect()
        })
    }

    /// Makes inaccessible again what a reset took from guarded memories: the pages between
    /// each VM's size now and its size `before` the reset (which cleared them). The reset
    /// kernel leaves this to the host because taking access away costs a TLB shootdown:
    /// done here, one VM after another on one thread while the workers wait, no worker
    /// contends for the address space's lock or takes the interrupt (LZ4: a fifth of the
    /// `cpu` backend's time went to these calls made from both workers at once).
    pub(super) fn close_shrunk_memories(&mut self, before: &[u32]) -> Result<(), BackendError> {
        let stride = self.shape.layout.mem_stride();
        let base = self.buffers[Self::slot(FleetBuffer::Mem)].as_mut_ptr();
        for (vm, &was) in (0..self.shape.layout.num_vms).zip(before) {
            let now = self.control(vm).mem_pages;
            if now >= was {
                continue;
            }
            let from = vm as u64 * stride + now as u64 * PAGE;
            let len = (was - now) as u64 * PAGE;
            // SAFETY: [from, from + len) lies in VM `vm`'s reservation (below its size before
            // the reset, which is at most its maximum), inside the buffer; no launch runs.
            unsafe { super::guard::close(base.add(from as usize), len as usize) }.map_err(|e| {
                BackendError::Launch(format!(
                    "cannot take pages {now}..{was} of VM {vm}'s memory away again after its \
                     reset: {e}"
                ))
            })?;
        }
        Ok(())
    }

    /// Registers the guarded memory buffer with a write watch.
    fn start_watching(&mut self) -> Result<(), BackendError> {
        let refused = |why: String| {
            BackendError::Launch(format!(
                "cannot watch the fleet's memory for writes ({why}); run with --dirty-pages \
                 marks (DirtyPages::Marks)"
            ))
        };
        if !self.shape.layout.guard_regions || self.shape.layout.interleave != 0 {
            return Err(refused(
                "its memories are not guarded and contiguous".into(),
            ));
        }
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            let mem = &mut self.buffers[Self::slot(FleetBuffer::Mem)];
            let (base, len) = (mem.as_mut_ptr(), mem.len());
            let watch =
                crate::backend::write_watch::FleetWatch::new(base, len, self.shape.layout.num_vms)
                    .map_err(|e| refused(e.to_string()))?;
            self.watch = Some(watch);
            Ok(())
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        Err(refused("it needs Linux".into()))
    }

    /// Before a reset launch of a watched fleet: puts the pages each resetting VM wrote below
    /// its size `before` the reset ([`CpuFleet::guarded_sizes`]) into the dirty-page map,
    /// which the reset kernel restores and clears. Returns the VMs being reset (none without a
    /// watch).
    pub(super) fn collect_written_pages(
        &mut self,
        before: &[u32],
    ) -> Result<Vec<u32>, BackendError> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if self.watch.is_some() {
            let resetting: Vec<u32> = (0..self.shape.layout.num_vms)
                .filter(|&vm| self.control(vm).status == status::RESET)
                .collect();
            let (stride, max) = (self.shape.layout.mem_stride(), self.shape.layout.max_pages);
            let map = self.dirty_map();
            let base = self.buffers[Self::slot(FleetBuffer::Mem)].as_mut_ptr();
            let Some(watch) = self.watch.as_mut() else {
                return Ok(Vec::new());
            };
            for &vm in &resetting {
                let len = before.get(vm as usize).map_or(0, |&p| p.min(max)) as u64 * PAGE;
                let start = vm as u64 * stride;
                // SAFETY: the VM's first `len` bytes are its open memory (the kernel opened
                // its size, at most its maximum), inside the registered buffer; the map has a
                // byte per page of the buffer.
                unsafe {
                    watch.collect(
                        base.add(start as usize),
                        len,
                        map.add((start >> DIRTY_PAGE_SHIFT) as usize),
                    )
                }
                .map_err(|e| {
                    BackendError::Launch(format!("cannot read which pages VM {vm} wrote: {e}"))
                })?;
            }
            return Ok(resetting);
        }
        let _ = before;
        Ok(Vec::new())
    }

    /// After a reset launch of a watched fleet: protects what the reset restored of each VM
    /// in `resetting` and was not protected yet — its memory up to the larger of its size
    /// `before` the reset and now (pages it grew into). Not at a VM's first instantiation
    /// (size 0 before): a fleet that runs one batch would pay for protecting memory it never
    /// resets again (10,000 VMs: about 70 ms here); its second reset restores the pages the
    /// first wrote and protects them.
    pub(super) fn watch_new_pages(
        &mut self,
        resetting: &[u32],
        before: &[u32],
    ) -> Result<(), BackendError> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            let (stride, max) = (self.shape.layout.mem_stride(), self.shape.layout.max_pages);
            let to_protect: Vec<(u32, u32)> = resetting
                .iter()
                .filter_map(|&vm| {
                    let was = before.get(vm as usize).copied().unwrap_or(0);
                    (was > 0).then(|| (vm, self.control(vm).mem_pages.max(was).min(max)))
                })
                .collect();
            let base = self.buffers[Self::slot(FleetBuffer::Mem)].as_mut_ptr();
            let Some(watch) = self.watch.as_mut() else {
                return Ok(());
            };
            for (vm, pages) in to_protect {
                // SAFETY: the VM's first `pages` pages lie in its reservation, in the
                // registered buffer.
                unsafe {
                    watch.protect_up_to(
                        vm,
                        base.add((vm as u64 * stride) as usize),
                        pages as u64 * PAGE,
                    )
                }
                .map_err(|e| {
                    BackendError::Launch(format!("cannot watch VM {vm}'s memory for writes: {e}"))
                })?;
            }
        }
        let _ = (resetting, before);
        Ok(())
    }

    /// `read` of a guarded memory buffer ([`read_guarded`]).
    fn read_guarded(&mut self, ranges: &[Range<u64>], out: &mut [u8]) -> Result<(), BackendError> {
        let base = self.buffers[Self::slot(FleetBuffer::Mem)].as_mut_ptr() as *const u8;
        let stride = self.shape.layout.mem_stride();
        // SAFETY: the kernel opened each VM's current size of the guarded buffer, which the
        // ranges lie in (`check_ranges`).
        unsafe { read_guarded(base, stride, |vm| self.control(vm).mem_pages, ranges, out)? };
        self.traffic.from_device += out.len() as u64;
        self.traffic.transfers += 1;
        Ok(())
    }

    /// `write` into a guarded memory buffer ([`write_guarded`]).
    fn write_guarded(&mut self, ranges: &[Range<u64>], data: &[u8]) -> Result<(), BackendError> {
        let base = self.buffers[Self::slot(FleetBuffer::Mem)].as_mut_ptr();
        let stride = self.shape.layout.mem_stride();
        // SAFETY: as in `read_guarded`.
        unsafe { write_guarded(base, stride, |vm| self.control(vm).mem_pages, ranges, data) }
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
        if buffer == FleetBuffer::Mem && self.shape.layout.guard_regions {
            return self.read_guarded(ranges, out);
        }
        gather(self.buffers[Self::slot(buffer)].as_slice(), ranges, out);
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
        if buffer == FleetBuffer::Mem && self.shape.layout.guard_regions {
            self.write_guarded(ranges, data)?;
        } else {
            scatter(
                self.buffers[Self::slot(buffer)].as_mut_slice(),
                ranges,
                data,
            );
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
