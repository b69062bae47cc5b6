//! A fleet's storage for the `opencl` backend: one device buffer per [`FleetBuffer`], created
//! and zeroed once when the fleet is made and kept for the fleet's life. A launch only sets
//! the kernel's arguments and runs it. Between launches the VMM's gathered transfers move
//! byte ranges, in one of two ways:
//!
//! - On a CPU device working in host memory (PoCL), a buffer the host touches is mapped once
//!   (the mapping is the buffer itself: no copy) and stays mapped until the next launch, which
//!   unmaps it first; each transfer is then plain memcpys with no round trip to the runtime.
//!   A blocking round trip costs about 10 µs on PoCL, and a launch's transfers (control
//!   blocks, hypercall words, a host function's accesses of each VM's memory) are dozens.
//!   The control blocks, which the host reads after every launch, are mapped within the
//!   launch's own wait.
//! - Elsewhere, each range is a read or write command, all queued without blocking and waited
//!   for once per transfer.

use std::any::Any;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use opencl3::command_queue::CommandQueue;
use opencl3::error_codes::{
    ClError, CL_INVALID_BUFFER_SIZE, CL_MAP_FAILURE, CL_MEM_OBJECT_ALLOCATION_FAILURE,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES,
};
use opencl3::kernel::Kernel as ClKernel;
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR,
};
use opencl3::types::{cl_mem, cl_uint, CL_BLOCKING, CL_NON_BLOCKING};

use super::guard::GuardedMemory;
use super::host_calls::SvmStorage;
use super::watched::{SizeBefore, WatchedMemory};
use super::Shared;
use crate::abi::fleet::controls_as_bytes_mut;
use crate::abi::{status, FleetBuffer, FleetShape, KernelParam, ScalarArg, VmControl};
use crate::backend::{
    check_ranges, dirty_marks, read_guarded, signals, write_guarded, BackendError, DeviceFleet,
    Traffic,
};

/// The buffers of one fleet on an OpenCL device, in [`FleetBuffer::ALL`]'s order.
pub(super) struct ClFleet {
    /// The context the buffers belong to and the queue every transfer and launch uses.
    shared: Arc<Shared>,
    shape: FleetShape,
    buffers: Vec<Buffer<u8>>,
    /// The shared memory the buffers use, for a kernel whose imports the host serves while it
    /// runs (`host_calls.rs`); declared after the buffers, so freed after them.
    svm: Option<SvmStorage>,
    /// The memory buffer's storage when the MMU finds the pages VMs write (`watched.rs`);
    /// declared after the buffers, so freed after them.
    watched: Option<WatchedMemory>,
    /// With guard regions (`guard.rs`): the memories, which no buffer holds (the kernel gets
    /// their address), and the control blocks' storage; after the watch, which may cover
    /// the memories.
    guarded: Option<GuardedMemory>,
    /// Where each buffer is mapped into the host while the host works on it (CPU devices in
    /// host memory only), until the next launch.
    mapped: Vec<Option<NonNull<u8>>>,
    traffic: Traffic,
}

// SAFETY: the mapping pointers refer to this fleet's own buffers and are used only through
// `&mut self`; the buffers themselves may move between threads.
unsafe impl Send for ClFleet {}

impl ClFleet {
    /// Creates every buffer of `shape` in `shared`'s context, zeroes it on the device (no host
    /// copy of a possibly huge memory buffer is made), and writes the data segments' bytes and
    /// the element segments' references (little-endian `u32`) into their blobs. With
    /// `shared_memory` every buffer is made over fine-grained SVM the host may touch while a
    /// kernel runs (synchronous imports); with `watch_writes` (a kernel whose stores do not
    /// mark dirty pages, `watched.rs`) the memory buffer over host memory the MMU watches.
    pub(super) fn new(
        shared: Arc<Shared>,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        shared_memory: bool,
        watch_writes: bool,
    ) -> Result<Self, BackendError> {
        let elems: Vec<u8> = elem_blob.iter().flat_map(|r| r.to_le_bytes()).collect();
        let blobs = [
            (FleetBuffer::DataBlob, data_blob),
            (FleetBuffer::ElemBlob, elems.as_slice()),
        ];
        for (b, bytes) in blobs {
            if bytes.len() as u64 > shape.bytes(b) {
                return Err(BackendError::Launch(format!(
                    "the {} blob of {} bytes does not fit its buffer of {} bytes",
                    b.name(),
                    bytes.len(),
                    shape.bytes(b)
                )));
            }
        }
        let svm = match shared_memory {
            true => Some(SvmStorage::new(&shared.context, shape)?),
            false => None,
        };
        let guarded = match shape.layout.guard_regions {
            true => Some(GuardedMemory::new(
                shape.layout.num_vms,
                shape.layout.mem_stride(),
                shape.bytes(FleetBuffer::Vms),
            )?),
            false => None,
        };
        let watched = match (watch_writes, &guarded) {
            (false, _) => None,
            // SAFETY: the reservation outlives the watch (declared after it in the fleet).
            (true, Some(g)) => Some(unsafe {
                WatchedMemory::over(
                    g.base().as_ptr(),
                    shape.bytes(FleetBuffer::Mem),
                    shape.layout.num_vms,
                )
            }?),
            (true, None) => Some(WatchedMemory::new(
                shape.bytes(FleetBuffer::Mem),
                shape.layout.num_vms,
            )?),
        };
        let mut buffers = Vec::with_capacity(FleetBuffer::ALL.len());
        for &b in FleetBuffer::ALL {
            let bytes = match (&guarded, b) {
                // The kernel computes in the reservation (`mem_host`): a placeholder.
                (Some(_), FleetBuffer::Mem) => 1,
                _ => shape.bytes(b),
            };
            let len = usize::try_from(bytes).map_err(|_| BackendError::OutOfMemory { bytes })?;
            let (flags, host) = match (&svm, &watched, &guarded) {
                (Some(svm), _, _) => (
                    CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                    svm.block(b).as_ptr().cast(),
                ),
                (None, _, Some(g)) if b == FleetBuffer::Vms => {
                    (CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, g.controls().cast())
                }
                (None, Some(w), None) if b == FleetBuffer::Mem => {
                    (CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, w.base().cast())
                }
                _ => (CL_MEM_READ_WRITE, std::ptr::null_mut()),
            };
            // SAFETY: either no host pointer (the runtime allocates the buffer), an SVM block
            // of at least `len` bytes that outlives the buffer (OpenCL 2.0: the buffer then
            // uses the shared memory as its storage), or the watched mapping of at least
            // `len` bytes, which also outlives it (a CPU device computes in it).
            let buffer = unsafe { Buffer::<u8>::create(&shared.context, flags, len, host) }
                .map_err(|e| cl_error(e, bytes, || format!("creating the {} buffer", b.name())))?;
            buffers.push(buffer);
        }
        if let Some(storage) = &svm {
            // Zeroed when allocated; the blobs are written in place.
            for (b, bytes) in blobs {
                // SAFETY: the block holds the buffer, which `bytes` fits (checked above), and
                // no kernel runs on it yet.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        storage.block(b).as_ptr(),
                        bytes.len(),
                    )
                };
            }
        } else {
            // A watched memory is a fresh mapping: zeros already, and filling it would make
            // every page written.
            let fresh = (watched.is_some() || guarded.is_some()).then_some(FleetBuffer::Mem);
            zero_on_device(&shared, shape, &mut buffers, &blobs, fresh)?;
        }
        let mut fleet = ClFleet {
            shared,
            shape: *shape,
            mapped: vec![None; buffers.len()],
            buffers,
            svm,
            watched,
            guarded,
            traffic: Traffic::default(),
        };
        if let Some(g) = &fleet.guarded {
            // The fault handler reads sizes and fault points where the host put the control
            // blocks: the device must compute in them, not in a copy.
            let controls = g.controls();
            if fleet.host_view(FleetBuffer::Vms)?.as_ptr() != controls {
                return Err(BackendError::Launch(
                    "the device keeps a copy of host memory it was given, so guard faults \
                     cannot be told apart; run with --memory-checks explicit"
                        .into(),
                ));
            }
        } else if let Some(w) = &fleet.watched {
            // The watch sees the device's stores only if the device computes in the mapping
            // itself, not in a copy it synchronises at maps: a mapping of the buffer must be
            // the host pointer it was made over.
            let base = w.base();
            if fleet.host_view(FleetBuffer::Mem)?.as_ptr() != base {
                return Err(BackendError::Launch(
                    "the device keeps a copy of host memory it was given, so the MMU cannot \
                     find the pages VMs write; run with --dirty-pages marks"
                        .into(),
                ));
            }
        }
        Ok(fleet)
    }

    /// Before a reset launch of a watched fleet: puts the pages each resetting VM wrote (below
    /// its size now) into the dirty-page map, which the reset kernel restores and clears.
    /// Returns the resetting VMs and their sizes (none without a watch or guard regions).
    pub(super) fn collect_written_pages(&mut self) -> Result<Vec<SizeBefore>, BackendError> {
        if self.watched.is_none() && self.guarded.is_none() {
            return Ok(Vec::new());
        }
        let resetting: Vec<SizeBefore> = self
            .controls()?
            .iter()
            .enumerate()
            .filter(|(_, c)| c.status == status::RESET)
            .map(|(vm, c)| (vm as u32, c.mem_pages.min(self.shape.layout.max_pages)))
            .collect();
        if self.watched.is_none() {
            return Ok(resetting);
        }
        let dirty = self.host_view(FleetBuffer::Dirty)?.as_ptr();
        let stride = self.shape.layout.mem_stride();
        if let Some(w) = self.watched.as_mut() {
            // SAFETY: `dirty` maps the whole dirty-page map until the next launch; sizes are
            // at most the maximum, which the stride holds.
            unsafe { w.collect(stride, &resetting, dirty)? };
        }
        Ok(resetting)
    }

    /// After a reset launch of a watched fleet: protects what the reset restored of each VM
    /// in `resetting` and was not protected yet — its memory up to the larger of its size
    /// before the reset and now. Not at a VM's first instantiation (size 0 before), as on
    /// `cpu`: a fleet that runs one batch would pay for protecting memory it never resets
    /// again.
    pub(super) fn watch_new_pages(&mut self, resetting: &[SizeBefore]) -> Result<(), BackendError> {
        if self.watched.is_none() || resetting.is_empty() {
            return Ok(());
        }
        let controls = self.controls()?;
        let max = self.shape.layout.max_pages;
        let sizes: Vec<SizeBefore> = resetting
            .iter()
            .filter(|&&(_, was)| was > 0)
            .map(|&(vm, was)| {
                let now = controls.get(vm as usize).map_or(0, |c| c.mem_pages);
                (vm, now.max(was).min(max))
            })
            .collect();
        let stride = self.shape.layout.mem_stride();
        if let Some(w) = self.watched.as_mut() {
            // SAFETY: sizes are at most the maximum, which the stride holds.
            unsafe { w.protect(stride, &sizes)? };
        }
        Ok(())
    }

    /// After a reset launch of a guarded fleet: makes inaccessible again the pages each VM of
    /// `resetting` had above its size now (the reset only changes sizes; the device cannot
    /// take access away), on the host's one thread, as `cpu` does.
    pub(super) fn close_shrunk_memories(
        &mut self,
        resetting: &[SizeBefore],
    ) -> Result<(), BackendError> {
        if let Some(g) = &self.guarded {
            for &(vm, was) in resetting {
                g.close(vm, g.pages(vm), was)?;
            }
        }
        Ok(())
    }

    /// Whether the fleet computes in guarded memories (its launches fault by design).
    pub(super) fn guarded(&self) -> bool {
        self.guarded.is_some()
    }

    /// `read` of guarded memories ([`read_guarded`]; the fault handler opens the pages below
    /// a VM's size that it never touched as the copy reaches them, so the copy keeps an
    /// in-process compiler's builds waiting, `backend/signals.rs`).
    fn read_guarded(
        g: &GuardedMemory,
        ranges: &[Range<u64>],
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        let base = g.base().as_ptr() as *const u8;
        // SAFETY: the reservation holds the ranges (`check_ranges`); below each VM's size it
        // is readable or opened on first touch.
        signals::while_faulting(|| unsafe {
            read_guarded(base, g.stride(), |vm| g.pages(vm), ranges, out)
        })
    }

    /// `write` into guarded memories ([`write_guarded`]; as `read_guarded`, it may fault).
    fn write_guarded(
        g: &GuardedMemory,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError> {
        // SAFETY: as in `read_guarded`.
        signals::while_faulting(|| unsafe {
            write_guarded(
                g.base().as_ptr(),
                g.stride(),
                |vm| g.pages(vm),
                ranges,
                data,
            )
        })
    }

    /// Every VM's control block, read through the host's view of the buffer.
    fn controls(&mut self) -> Result<Vec<VmControl>, BackendError> {
        let n = self.shape.layout.num_vms as usize;
        let bytes = self.shape.bytes(FleetBuffer::Vms) as usize;
        let vms = self.host_view(FleetBuffer::Vms)?;
        let mut controls = vec![VmControl::default(); n];
        let out = controls_as_bytes_mut(&mut controls);
        let len = out.len().min(bytes);
        // SAFETY: the view maps the whole buffer of `bytes` bytes until the next launch.
        unsafe { std::ptr::copy_nonoverlapping(vms.as_ptr(), out.as_mut_ptr(), len) };
        Ok(controls)
    }

    /// The shared memory of a fleet made for synchronous imports.
    pub(super) fn shared_memory(&self) -> Option<&SvmStorage> {
        self.svm.as_ref()
    }

    /// Whether this fleet lives in `shared`'s context (a kernel can only run on buffers of
    /// its own context; every kernel of one backend shares one).
    pub(super) fn belongs_to(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    /// Unmaps every buffer the host mapped since the last launch. The unmaps are queued, not
    /// waited for: the in-order queue completes them before the kernel queued next starts, as
    /// OpenCL requires of a mapped buffer, and the wait for that kernel covers them.
    pub(super) fn unmap_all(&mut self, queue: &CommandQueue) -> Result<(), BackendError> {
        for ((&b, buffer), mapped) in FleetBuffer::ALL
            .iter()
            .zip(&self.buffers)
            .zip(self.mapped.iter_mut())
        {
            if let Some(host) = *mapped {
                // SAFETY: `host` is this buffer's mapping; nothing uses it after this.
                unsafe { queue.enqueue_unmap_mem_object(buffer.get(), host.as_ptr().cast(), &[]) }
                    .map_err(|e| transfer_error(e, "unmapping", b))?;
                *mapped = None;
            }
        }
        Ok(())
    }

    /// Queues maps of `buffers` behind the launch just queued, without waiting (CPU devices in
    /// host memory only; elsewhere nothing). The host reads every control block after every
    /// launch, so mapping them here spares that read a round trip of its own: the launch's
    /// wait covers the map (and its cost, a command of about a microsecond on PoCL, counts as
    /// execution). On PoCL this took Scrypt's transfer share from 13-26% to under 1%. A map
    /// that cannot be queued here is made when the host first touches the buffer, and fails
    /// there if it must. The mappings count once [`ClFleet::maps_done`] is told the wait
    /// succeeded.
    pub(super) fn map_after_launch(
        &mut self,
        queue: &CommandQueue,
        buffers: &[FleetBuffer],
    ) -> PendingMaps {
        let mut pending = PendingMaps(Vec::new());
        if !self.shared.host_resident {
            return pending;
        }
        for &b in buffers {
            let i = slot(b);
            if self.mapped[i].is_some() || (b == FleetBuffer::Mem && self.guarded.is_some()) {
                continue;
            }
            let mut host: cl_mem = std::ptr::null_mut();
            // SAFETY: the mapping covers exactly the buffer; `host` is used only after the
            // wait for the queue (`maps_done`). It lasts until `unmap_all`.
            let queued = unsafe {
                queue.enqueue_map_buffer(
                    &self.buffers[i],
                    CL_NON_BLOCKING,
                    CL_MAP_READ | CL_MAP_WRITE,
                    0,
                    self.shape.bytes(b) as usize,
                    &mut host,
                    &[],
                )
            };
            match (queued, NonNull::new(host.cast::<u8>())) {
                (Ok(_), Some(host)) => pending.0.push((i, host)),
                _ => break,
            }
        }
        pending
    }

    /// Records the maps [`ClFleet::map_after_launch`] queued, once the queue was waited for.
    pub(super) fn maps_done(&mut self, pending: PendingMaps) {
        for (i, host) in pending.0 {
            self.mapped[i] = Some(host);
        }
    }

    /// The host address of `buffer`, mapping the whole buffer for reading and writing first
    /// if it is not mapped (one blocking round trip, then none until the next launch).
    fn host_view(&mut self, buffer: FleetBuffer) -> Result<NonNull<u8>, BackendError> {
        if let (FleetBuffer::Mem, Some(g)) = (buffer, &self.guarded) {
            return Ok(g.base());
        }
        let i = slot(buffer);
        if let Some(host) = self.mapped[i] {
            return Ok(host);
        }
        let queue = self.shared.lock_queue();
        let mut host: cl_mem = std::ptr::null_mut();
        // SAFETY: the mapping covers exactly the buffer; a blocking map returns once `host`
        // points at it. It lasts until `unmap_all` (before every launch, and on drop).
        unsafe {
            queue.enqueue_map_buffer(
                &self.buffers[i],
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                self.shape.bytes(buffer) as usize,
                &mut host,
                &[],
            )
        }
        .map_err(|e| transfer_error(e, "mapping", buffer))?;
        let host = NonNull::new(host.cast::<u8>())
            .ok_or_else(|| transfer_error(ClError(CL_MAP_FAILURE), "mapping", buffer))?;
        self.mapped[i] = Some(host);
        Ok(host)
    }

    /// Writes `data` over `ranges` of `buffer` (checked by the caller).
    fn put(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError> {
        if self.shared.host_resident {
            let host = self.host_view(buffer)?;
            // SAFETY: `host` maps the whole buffer, and the ranges lie in it.
            unsafe { copy_in(host, ranges, data) };
        } else {
            let queue = self.shared.lock_queue();
            write_ranges(&queue, &mut self.buffers[slot(buffer)], ranges, data)
                .map_err(|e| transfer_error(e, "writing", buffer))?;
        }
        Ok(())
    }

    /// Sets `kernel`'s arguments to this fleet: its entry parameters in order, each buffer
    /// then each scalar. The caller holds the queue's lock, which keeps launches (and their
    /// arguments, which belong to the kernel object) apart.
    pub(super) fn set_args(&self, kernel: &ClKernel, entry: &str) -> Result<(), BackendError> {
        let names = crate::abi::c::param_names();
        let mut scalars = self.shape.scalars();
        if let Some(g) = &self.guarded {
            scalars.mem_host = g.base().as_ptr() as u64;
        }
        for (i, param) in scalars.params().iter().enumerate() {
            let index = i as cl_uint;
            // SAFETY: the entries' parameters are these, in this order and with these types
            // (`abi::c::entry_points`): `__global` pointers get buffers, `uint32_t` and
            // `uint64_t` get values of those sizes.
            let set = unsafe {
                match param {
                    KernelParam::Buffer(b) => kernel.set_arg(index, &self.buffers[slot(*b)].get()),
                    KernelParam::Scalar(ScalarArg::U32(v)) => kernel.set_arg(index, v),
                    KernelParam::Scalar(ScalarArg::U64(v)) => kernel.set_arg(index, v),
                }
            };
            set.map_err(|e| {
                BackendError::Launch(format!(
                    "setting parameter {i} ({}) of {entry}: {e}",
                    names.get(i).copied().unwrap_or("?")
                ))
            })?;
        }
        Ok(())
    }
}

impl DeviceFleet for ClFleet {
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
        if let (FleetBuffer::Mem, Some(g)) = (buffer, &self.guarded) {
            Self::read_guarded(g, ranges, out)?;
        } else if !out.is_empty() {
            if self.shared.host_resident {
                let host = self.host_view(buffer)?;
                // SAFETY: `host` maps the whole buffer, and the ranges lie in it.
                unsafe { copy_out(host, ranges, out) };
            } else {
                let queue = self.shared.lock_queue();
                read_ranges(&queue, &self.buffers[slot(buffer)], ranges, out)
                    .map_err(|e| transfer_error(e, "reading", buffer))?;
            }
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
        if !data.is_empty() {
            match (buffer, &self.guarded) {
                (FleetBuffer::Mem, Some(g)) => Self::write_guarded(g, ranges, data)?,
                _ => self.put(buffer, ranges, data)?,
            }
            // Host writes into a VM's memory mark its dirty pages, as the kernel's stores do.
            if let Some((marks, ones)) = dirty_marks(&self.shape, buffer, ranges) {
                self.put(FleetBuffer::Dirty, &marks, &ones)?;
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

/// Zeroes `buffers` on the device (no host copy of a possibly huge memory buffer is made) and
/// writes the `blobs` into theirs, waiting once for all of it.
fn zero_on_device(
    shared: &Shared,
    shape: &FleetShape,
    buffers: &mut [Buffer<u8>],
    blobs: &[(FleetBuffer, &[u8])],
    fresh: Option<FleetBuffer>,
) -> Result<(), BackendError> {
    let total = FleetBuffer::ALL
        .iter()
        .map(|&b| shape.bytes(b))
        .sum::<u64>();
    let queue = shared.lock_queue();
    enqueue_and_wait(&queue, || {
        for (&b, buffer) in FleetBuffer::ALL.iter().zip(buffers.iter_mut()) {
            if Some(b) == fresh {
                continue;
            }
            // Fits `usize`: the buffer was created with this size.
            let len = shape.bytes(b) as usize;
            // A one-byte pattern: PoCL fills it as a memset (5 ms for 256 MiB, wider patterns
            // took twice as long).
            // SAFETY: the fill covers exactly the buffer; the runtime copies the pattern
            // before the call returns.
            unsafe { queue.enqueue_fill_buffer(buffer, &[0u8], 0, len, &[]) }?;
        }
        for &(b, bytes) in blobs {
            if !bytes.is_empty() {
                // SAFETY: `bytes` fits the buffer (checked by the caller) and outlives the
                // wait that follows.
                unsafe {
                    queue.enqueue_write_buffer(
                        &mut buffers[slot(b)],
                        CL_NON_BLOCKING,
                        0,
                        bytes,
                        &[],
                    )
                }?;
            }
        }
        Ok(())
    })
    .map_err(|e| {
        cl_error(e, total, || {
            "zeroing the fleet's buffers and writing its segments".into()
        })
    })
}

/// Maps queued but not yet waited for: (buffer slot, host address).
pub(super) struct PendingMaps(Vec<(usize, NonNull<u8>)>);

impl Drop for ClFleet {
    fn drop(&mut self) {
        if self.mapped.iter().any(Option::is_some) {
            let shared = self.shared.clone();
            let queue = shared.lock_queue();
            // A drop cannot report errors; the buffers are released either way.
            let _ = self.unmap_all(&queue);
            let _ = queue.finish();
        }
    }
}

/// Reads `ranges` of `device` into `out`, one after another: a read command per range, queued
/// without blocking and waited for together.
fn read_ranges(
    queue: &CommandQueue,
    device: &Buffer<u8>,
    ranges: &[Range<u64>],
    out: &mut [u8],
) -> Result<(), ClError> {
    enqueue_and_wait(queue, || {
        let mut rest = out;
        for r in ranges.iter().filter(|r| r.start < r.end) {
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut((r.end - r.start) as usize);
            rest = tail;
            // SAFETY: the range lies in the buffer (`check_ranges`) and `chunk` is as long;
            // `out` outlives the wait that follows.
            unsafe {
                queue.enqueue_read_buffer(device, CL_NON_BLOCKING, r.start as usize, chunk, &[])
            }?;
        }
        Ok(())
    })
}

/// Writes `data` over `ranges` of `device`: a write command per range, queued without
/// blocking and waited for together.
fn write_ranges(
    queue: &CommandQueue,
    device: &mut Buffer<u8>,
    ranges: &[Range<u64>],
    data: &[u8],
) -> Result<(), ClError> {
    enqueue_and_wait(queue, || {
        let mut at = 0;
        for r in ranges.iter().filter(|r| r.start < r.end) {
            let n = (r.end - r.start) as usize;
            // SAFETY: the range lies in the buffer (`check_ranges`) and the chunk is as long;
            // `data` outlives the wait that follows.
            unsafe {
                queue.enqueue_write_buffer(
                    device,
                    CL_NON_BLOCKING,
                    r.start as usize,
                    &data[at..at + n],
                    &[],
                )
            }?;
            at += n;
        }
        Ok(())
    })
}

/// Copies `ranges` of the mapped buffer at `host` into `out`, one after another.
///
/// # Safety
///
/// `host` maps the whole buffer and every range lies in it.
unsafe fn copy_out(host: NonNull<u8>, ranges: &[Range<u64>], out: &mut [u8]) {
    let mut at = 0;
    for r in ranges {
        let n = (r.end - r.start) as usize;
        // SAFETY: the range lies in the mapped buffer (the caller's promise).
        let src = unsafe { std::slice::from_raw_parts(host.as_ptr().add(r.start as usize), n) };
        out[at..at + n].copy_from_slice(src);
        at += n;
    }
}

/// Copies `data` over `ranges` of the mapped buffer at `host`, one after another.
///
/// # Safety
///
/// `host` maps the whole buffer, every range lies in it, and nothing else refers to it.
unsafe fn copy_in(host: NonNull<u8>, ranges: &[Range<u64>], data: &[u8]) {
    let mut at = 0;
    for r in ranges {
        let n = (r.end - r.start) as usize;
        // SAFETY: the range lies in the mapped buffer, which only this call touches.
        let dst = unsafe { std::slice::from_raw_parts_mut(host.as_ptr().add(r.start as usize), n) };
        dst.copy_from_slice(&data[at..at + n]);
        at += n;
    }
}

/// Where `buffer` is in [`ClFleet::buffers`].
pub(super) fn slot(buffer: FleetBuffer) -> usize {
    FleetBuffer::ALL
        .iter()
        .position(|b| *b == buffer)
        .unwrap_or(0)
}

/// Runs `enqueue`, which queues commands that read or write host memory without blocking, then
/// waits for the queue — also when `enqueue` fails partway, so that no queued command outlives
/// the host memory it copies. The first error is returned.
fn enqueue_and_wait(
    queue: &CommandQueue,
    enqueue: impl FnOnce() -> Result<(), ClError>,
) -> Result<(), ClError> {
    let queued = enqueue();
    let waited = queue.finish();
    queued.and(waited)
}

/// A failed transfer (`doing` is "reading" or "writing") of `buffer`.
fn transfer_error(e: ClError, doing: &str, buffer: FleetBuffer) -> BackendError {
    BackendError::Launch(format!("{doing} the fleet's {} buffer: {e}", buffer.name()))
}

/// A failure creating a fleet: allocation failures (which runtimes may report only when a
/// buffer is first used) as [`BackendError::OutOfMemory`] of `bytes`, anything else with what
/// was being done.
fn cl_error(e: ClError, bytes: u64, what: impl FnOnce() -> String) -> BackendError {
    match e.0 {
        CL_MEM_OBJECT_ALLOCATION_FAILURE
        | CL_OUT_OF_RESOURCES
        | CL_OUT_OF_HOST_MEMORY
        | CL_INVALID_BUFFER_SIZE => BackendError::OutOfMemory { bytes },
        _ => BackendError::Launch(format!("{}: {e}", what())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::opencl::OpenClBackend;
    use crate::layout::InterleavedLayout;

    fn shape() -> FleetShape {
        FleetShape {
            layout: InterleavedLayout {
                num_vms: 5,
                interleave: 4,
                max_pages: 1,
                stack_words: 16,
                num_globals: 2,
                guard_regions: false,
            },
            num_tables: 1,
            table_words: 4,
            num_segments: 2,
            ret_words: 3,
            max_depth: 4,
            data_bytes: 7,
            elem_refs: 3,
        }
    }

    /// A fleet on the first OpenCL device, or `None` (and a note) where there is none.
    fn fleet() -> Option<ClFleet> {
        fleet_in(false)
    }

    /// [`fleet`], with its buffers over fine-grained SVM when `shared_memory`.
    fn fleet_in(shared_memory: bool) -> Option<ClFleet> {
        let backend = match OpenClBackend::new(None) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        Some(
            ClFleet::new(
                backend.shared.clone(),
                &shape(),
                b"segment",
                &[1, 0x0203_0405, 7],
                shared_memory,
                false,
            )
            .unwrap(),
        )
    }

    /// Every fourth 4-byte cell of the first `n * 16` bytes, as interleaved memory is gathered.
    fn cells(n: u64) -> Vec<Range<u64>> {
        (0..n).map(|i| i * 16 + 4..i * 16 + 8).collect()
    }

    #[test]
    fn a_new_fleet_is_zero_but_for_its_segments() {
        for shared_memory in [false, true] {
            let Some(f) = fleet_in(shared_memory) else {
                return;
            };
            zero_but_for_segments(f, shared_memory);
        }
    }

    fn zero_but_for_segments(mut f: ClFleet, shared_memory: bool) {
        assert_eq!(f.shared_memory().is_some(), shared_memory);
        for &b in FleetBuffer::ALL {
            let bytes = f.shape().bytes(b);
            let mut out = vec![0xffu8; bytes as usize];
            f.read(b, std::slice::from_ref(&(0..bytes)), &mut out)
                .unwrap();
            let expected: Vec<u8> = match b {
                FleetBuffer::DataBlob => b"segment".to_vec(),
                FleetBuffer::ElemBlob => [1u32, 0x0203_0405, 7]
                    .iter()
                    .flat_map(|r| r.to_le_bytes())
                    .collect(),
                _ => vec![0; bytes as usize],
            };
            assert_eq!(out, expected, "{}", b.name());
        }
        assert_eq!(f.traffic().transfers, FleetBuffer::ALL.len() as u64);
    }

    #[test]
    fn commands_and_mappings_see_each_others_bytes() {
        for shared_memory in [false, true] {
            let Some(f) = fleet_in(shared_memory) else {
                return;
            };
            commands_and_mappings_agree(f, shared_memory);
        }
    }

    fn commands_and_mappings_agree(mut f: ClFleet, shared_memory: bool) {
        let shared = f.shared.clone();
        for n in [1, 3, 300] {
            let ranges = cells(n);
            let data: Vec<u8> = (0..4 * n).map(|i| (i * 7 + n) as u8).collect();
            {
                let queue = shared.lock_queue();
                f.unmap_all(&queue).unwrap();
                write_ranges(
                    &queue,
                    &mut f.buffers[slot(FleetBuffer::Mem)],
                    &ranges,
                    &data,
                )
                .unwrap();
                if n != 3 {
                    // Mapped ahead, as after a launch (else on the first access below).
                    let maps = f.map_after_launch(&queue, &[FleetBuffer::Mem]);
                    queue.finish().unwrap();
                    f.maps_done(maps);
                }
            }
            // Through the fleet: a mapping on CPU devices, commands elsewhere.
            let mut out = vec![0u8; data.len()];
            f.read(FleetBuffer::Mem, &ranges, &mut out).unwrap();
            assert_eq!(out, data, "{n} ranges written by commands");
            let data: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
            f.write(FleetBuffer::Mem, &ranges, &data).unwrap();
            let queue = shared.lock_queue();
            f.unmap_all(&queue).unwrap();
            let mut out = vec![0u8; data.len()];
            read_ranges(
                &queue,
                &f.buffers[slot(FleetBuffer::Mem)],
                &ranges,
                &mut out,
            )
            .unwrap();
            assert_eq!(out, data, "{n} ranges written through the fleet");
            // The bytes between the ranges were left alone.
            let mut gaps = vec![0xffu8; 4 * n as usize];
            let between: Vec<Range<u64>> = ranges.iter().map(|r| r.end..r.end + 4).collect();
            read_ranges(
                &queue,
                &f.buffers[slot(FleetBuffer::Mem)],
                &between,
                &mut gaps,
            )
            .unwrap();
            assert!(gaps.iter().all(|&b| b == 0), "{n} ranges");
            if let Some(svm) = f.shared_memory() {
                // The shared memory is the buffer's storage: the host sees the same bytes.
                for (r, chunk) in ranges.iter().zip(data.chunks(4)) {
                    // SAFETY: the range lies in the memory block; no kernel runs.
                    let seen = unsafe {
                        std::slice::from_raw_parts(
                            svm.block(FleetBuffer::Mem).as_ptr().add(r.start as usize),
                            4,
                        )
                    };
                    assert_eq!(seen, chunk, "{n} ranges, shared memory {shared_memory}");
                }
            }
        }
    }

    #[test]
    fn transfers_count_one_per_call_and_refuse_ranges_outside_the_buffer() {
        let Some(mut f) = fleet() else { return };
        let ranges = cells(40);
        f.write(FleetBuffer::Mem, &ranges, &[9u8; 160]).unwrap();
        let mut out = [0u8; 160];
        f.read(FleetBuffer::Mem, &ranges, &mut out).unwrap();
        assert_eq!(out, [9u8; 160]);
        let t = f.traffic();
        assert_eq!((t.to_device, t.from_device, t.transfers), (160, 160, 2));
        let size = f.shape().bytes(FleetBuffer::Vms);
        let mut out = [0u8; 8];
        assert!(f
            .read(
                FleetBuffer::Vms,
                std::slice::from_ref(&(size - 4..size + 4)),
                &mut out
            )
            .is_err());
        assert!(f
            .write(FleetBuffer::Vms, std::slice::from_ref(&(0..4)), &out)
            .is_err());
        assert_eq!(f.traffic().transfers, 2);
    }
}
