//! Synchronous imports on CUDA (`--calls direct`): the host serves a VM's import while the
//! kernel runs (the protocol: `backend/host_calls.rs`), the way GPU C libraries make remote
//! procedure calls to the host.
//!
//! The fleet's mailbox — the control blocks and the result words — lives in mapped page-locked
//! host memory ([`MappedBuffer`]), which the kernel reaches over the bus and the host polls
//! directly; everything else, VM memory included, stays in device memory at device speed. The
//! host reaches a calling VM's memory by copies on a stream of its own ([`ServiceView`]), which
//! run beside the kernel: the copies are issued outside cudarc's per-buffer event tracking,
//! which would otherwise order them after the running kernel that waits for them.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaStream};

use super::driver_error;
use crate::abi::{FleetBuffer, FleetShape};
use crate::backend::host_calls::{serve_until_done, Mailbox};
use crate::backend::{
    check_ranges, dirty_marks, BackendError, DeviceFleet, ImportService, Traffic,
};

/// Why the device of `context` cannot serve imports while a kernel runs, if it cannot.
pub(super) fn sync_imports_unsupported(context: &CudaContext) -> Option<String> {
    let has = |a: CUdevice_attribute| context.attribute(a).is_ok_and(|v| v > 0);
    if !has(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) {
        return Some("it cannot map page-locked host memory".into());
    }
    if !has(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) {
        return Some("it lacks unified addressing".into());
    }
    if !has(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT) {
        return Some("it cannot copy while a kernel runs (no copy engine)".into());
    }
    None
}

/// Page-locked host memory mapped into the device's address space, zeroed: the host reads and
/// writes it through `host`, kernels through `device`. Freed on drop.
pub(super) struct MappedBuffer {
    /// The context it was allocated in, kept alive and made current to free it.
    context: Arc<CudaContext>,
    host: *mut u8,
    device: sys::CUdeviceptr,
    len: usize,
}

// SAFETY: plain memory owned by this value; CUDA allows freeing it from any thread.
unsafe impl Send for MappedBuffer {}

impl MappedBuffer {
    /// `len` bytes (at least one) in `context`.
    pub(super) fn new(context: &Arc<CudaContext>, len: usize) -> Result<Self, BackendError> {
        context
            .bind_to_thread()
            .map_err(|e| driver_error("binding the CUDA context", e))?;
        let bytes = len.max(1);
        // SAFETY: a plain allocation; checked below before any use.
        let host = unsafe {
            cudarc::driver::result::malloc_host(
                bytes,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        }
        .map_err(|e| match e.0 {
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => BackendError::OutOfMemory {
                bytes: bytes as u64,
            },
            _ => driver_error(
                &format!("allocating {bytes} bytes of mapped host memory"),
                e,
            ),
        })?
        .cast::<u8>();
        let mut buffer = MappedBuffer {
            context: context.clone(),
            host,
            device: 0,
            len: bytes,
        };
        // SAFETY: `host` is a live mapped allocation of this context.
        let rc = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut buffer.device, host.cast(), 0) };
        if rc != CUresult::CUDA_SUCCESS {
            return Err(driver_error("mapping host memory for the device", rc));
        }
        // SAFETY: the allocation holds `bytes` bytes that nothing else uses yet.
        unsafe { host.write_bytes(0, bytes) };
        Ok(buffer)
    }

    /// The address kernels use.
    pub(super) fn device(&self) -> &sys::CUdeviceptr {
        &self.device
    }

    /// The host's pointer.
    pub(super) fn host(&self) -> *mut u8 {
        self.host
    }

    /// Its bytes, for the fleet's transfers between launches (no kernel touches them then).
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the allocation holds `len` bytes, owned by `self`; no launch runs while the
        // fleet reads it.
        unsafe { std::slice::from_raw_parts(self.host, self.len) }
    }

    /// Its bytes, to write between launches.
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }
}

impl Drop for MappedBuffer {
    fn drop(&mut self) {
        // Freed in its own context, whichever thread drops the fleet.
        let _ = self.context.bind_to_thread();
        // SAFETY: allocated by `malloc_host`; the fleet's launches have all been waited for.
        let _ = unsafe { cudarc::driver::result::free_host(self.host.cast()) };
    }
}

/// `ranges` cut into pieces of at most [`SERVICE_STAGING`] bytes: (offset, length).
fn pieces(ranges: &[Range<u64>]) -> impl Iterator<Item = (u64, usize)> + '_ {
    ranges.iter().flat_map(|r| {
        (r.start..r.end)
            .step_by(SERVICE_STAGING)
            .map(move |from| (from, (r.end - from).min(SERVICE_STAGING as u64) as usize))
    })
}

/// What serves one launch's imports: the VMM's service, the fleet's mailbox, and its memory
/// as the service reaches it.
pub(super) struct ImportServing<'i> {
    imports: &'i dyn ImportService,
    mailbox: Mailbox,
    view: ServiceView,
}

impl<'i> ImportServing<'i> {
    pub(super) fn new(imports: &'i dyn ImportService, mailbox: Mailbox, view: ServiceView) -> Self {
        ImportServing {
            imports,
            mailbox,
            view,
        }
    }

    /// Serves the VMs' imports until the launch queued last on `stream` (the entry `entry`)
    /// completes.
    pub(super) fn serve_until_done(
        &mut self,
        stream: &CudaStream,
        entry: &str,
    ) -> Result<(), BackendError> {
        let finished = || {
            // SAFETY: the stream is live.
            match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
                CUresult::CUDA_SUCCESS => Ok(true),
                CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                e => Err(driver_error(&format!("running {entry}"), e)),
            }
        };
        let vms = self.mailbox.vms;
        let (imports, view) = (self.imports, &mut self.view);
        // SAFETY: the mailbox is the launching fleet's mapped control blocks and result words,
        // which its kernel touches as `serve_until_done` requires (`wv_call_host`).
        unsafe {
            serve_until_done(finished, &self.mailbox, |vm, import, words| {
                let pages = std::ptr::addr_of!((*vms.add(vm as usize)).mem_pages).read();
                view.serve(imports, vm, pages, import, words)
            })
        }
    }

    /// What the service copied.
    pub(super) fn traffic(&self) -> Traffic {
        self.view.traffic
    }
}

/// A running fleet's VM memory and dirty-page map as the import service sees them: copies on
/// the service stream, which does not wait for the running kernel.
pub(super) struct ServiceView {
    pub(super) stream: Arc<CudaStream>,
    pub(super) shape: FleetShape,
    /// Device addresses of the `Mem` and `Dirty` buffers.
    pub(super) mem: sys::CUdeviceptr,
    pub(super) dirty: sys::CUdeviceptr,
    /// The fleet's page-locked staging bytes ([`SERVICE_STAGING`] of them): a copy runs beside
    /// a kernel only from or to page-locked memory — from pageable memory the driver may hold
    /// it back behind the kernel, which here waits for it.
    pub(super) staging: *mut u8,
    pub(super) traffic: Traffic,
}

// SAFETY: the staging bytes belong to the fleet, which outlives the launch this view serves,
// and only this view touches them meanwhile.
unsafe impl Send for ServiceView {}

/// Page-locked bytes a fleet with synchronous imports keeps for the copies that serve them;
/// larger copies go through in pieces.
pub(super) const SERVICE_STAGING: usize = 1 << 20;

impl ServiceView {
    fn base(&self, buffer: FleetBuffer) -> Result<sys::CUdeviceptr, BackendError> {
        match buffer {
            FleetBuffer::Mem => Ok(self.mem),
            FleetBuffer::Dirty => Ok(self.dirty),
            other => Err(BackendError::Launch(format!(
                "an import reached the {} buffer while the kernel ran",
                other.name()
            ))),
        }
    }

    fn synchronize(&self, what: &str) -> Result<(), BackendError> {
        // SAFETY: the stream is live.
        unsafe { cudarc::driver::result::stream::synchronize(self.stream.cu_stream()) }
            .map_err(|e| driver_error(what, e))
    }

    /// Runs VM `vm`'s call of `import` through `imports` on its `pages` pages of memory;
    /// `false` when the VM must stop, also when the service panicked.
    pub(super) fn serve(
        &mut self,
        imports: &dyn ImportService,
        vm: u32,
        pages: u32,
        import: u32,
        words: &mut [u64],
    ) -> bool {
        let layout = self.shape.layout;
        let size = pages as u64 * crate::layout::PAGE;
        let mut memory = crate::vmm::VmMemory::in_fleet(self, layout, vm, size);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            imports.serve(&mut memory, import, words)
        }))
        .unwrap_or(false)
    }
}

impl DeviceFleet for ServiceView {
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
        let base = self.base(buffer)?;
        let what = "reading a VM's memory during a launch";
        let mut at = 0;
        for (from, n) in pieces(ranges) {
            // SAFETY: the staging bytes are this view's alone (see the type) and hold
            // SERVICE_STAGING >= n bytes; the range lies in the buffer (checked), in the cells
            // of the calling VM, which waits; the copy is waited for before they are read.
            let queued = unsafe {
                let stage = std::slice::from_raw_parts_mut(self.staging, n);
                cudarc::driver::result::memcpy_dtoh_async(
                    stage,
                    base + from,
                    self.stream.cu_stream(),
                )
            };
            self.synchronize(what)?;
            queued.map_err(|e| driver_error(what, e))?;
            // SAFETY: as above; the copy has finished.
            unsafe { std::ptr::copy_nonoverlapping(self.staging, out[at..at + n].as_mut_ptr(), n) };
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
        let base = self.base(buffer)?;
        let what = "writing a VM's memory during a launch";
        let mut at = 0;
        for (to, n) in pieces(ranges) {
            // SAFETY: as in `read`; the staging bytes are not reused before the copy finishes.
            let queued = unsafe {
                std::ptr::copy_nonoverlapping(data[at..at + n].as_ptr(), self.staging, n);
                let stage = std::slice::from_raw_parts(self.staging, n);
                cudarc::driver::result::memcpy_htod_async(base + to, stage, self.stream.cu_stream())
            };
            self.synchronize(what)?;
            queued.map_err(|e| driver_error(what, e))?;
            at += n;
        }
        // Host writes into a VM's memory mark its dirty pages, as the kernel's stores do.
        if let Some((marks, ones)) = dirty_marks(&self.shape, buffer, ranges) {
            self.write(FleetBuffer::Dirty, &marks, &ones)?;
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
