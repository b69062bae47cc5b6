//! A fleet's storage for the `cuda` backend: one device allocation per [`FleetBuffer`], made
//! and zeroed once when the fleet is created and kept for the fleet's life, all on the
//! backend's one stream. A launch passes the allocations as the entry's parameters; between
//! launches the VMM's gathered transfers become one asynchronous copy per byte range, queued
//! on the stream and waited for once per transfer.
//!
//! A fleet of a kernel with synchronous imports keeps its mailbox — the control blocks and the
//! result words — in mapped page-locked host memory instead (`host_calls.rs`), which the host
//! reads and writes directly.
//!
//! Copies go through a page-locked (pinned) staging buffer: only from pinned memory does the
//! driver copy asynchronously (from pageable memory every `cuMemcpy*Async` blocks, through a
//! bounce buffer of the driver's), so a transfer of many ranges costs one round trip, not one
//! per range. The staging buffer grows on demand up to [`STAGING_MAX`]; a transfer larger than
//! that, or one made when pinned memory cannot be had, copies from or to the caller's pageable
//! bytes directly — slower, but correct.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUresult;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};

use super::host_calls::{ImportServing, MappedBuffer, ServiceView, SERVICE_STAGING};
use super::{driver_error, BLOCK};
use crate::abi::{FleetBuffer, FleetShape, KernelParam, ScalarArg, VmControl};
use crate::backend::host_calls::Mailbox;
use crate::backend::{
    check_ranges, dirty_marks, gather, scatter, BackendError, DeviceFleet, ImportService, Traffic,
};

/// The smallest staging buffer worth pinning: pinning is a system call, so small transfers
/// share one buffer instead of growing it a few bytes at a time.
const STAGING_MIN: usize = 64 << 10;

/// The largest staging buffer kept pinned. Page-locked memory is taken from the whole
/// system; the transfers between launches (control blocks, a hypercall's words, what a host
/// function reads or writes) are far smaller than this.
const STAGING_MAX: usize = 64 << 20;

/// Where one buffer of a fleet lives.
enum Storage {
    /// Device memory.
    Device(CudaSlice<u8>),
    /// Mapped host memory: the mailbox of a fleet with synchronous imports.
    Mapped(MappedBuffer),
}

/// The buffers of one fleet on a CUDA device, in [`FleetBuffer::ALL`]'s order.
pub(super) struct CudaFleet {
    /// The stream every allocation, copy and launch of this fleet is queued on (the
    /// backend's): one stream keeps them in order without events.
    stream: Arc<CudaStream>,
    shape: FleetShape,
    buffers: Vec<Storage>,
    /// Device addresses of the memory buffer and its dirty-page map, for copies made while a
    /// kernel runs (outside cudarc's event tracking).
    mem_address: u64,
    dirty_address: u64,
    /// With synchronous imports, the page-locked bytes the import service copies through.
    service_staging: Option<MappedBuffer>,
    /// Pinned host bytes that gathered transfers are staged in; `None` until the first
    /// transfer, or after a failed attempt to grow it.
    staging: Option<PinnedHostSlice<u8>>,
    traffic: Traffic,
}

impl CudaFleet {
    /// Writes `data` over `ranges` of `buffer` (checked by the caller), through the staging
    /// buffer when there is one.
    fn put(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError> {
        let what = format!("writing the fleet's {} buffer", buffer.name());
        let device = match &mut self.buffers[slot(buffer)] {
            Storage::Device(d) => d,
            Storage::Mapped(m) => {
                scatter(m.bytes_mut(), ranges, data);
                return Ok(());
            }
        };
        let stream = &self.stream;
        match staging_bytes(&mut self.staging, stream.context(), data.len())? {
            Some(stage) => {
                stage.copy_from_slice(data);
                let queued = queue_writes(stream, device, ranges, stage);
                finish(stream, queued, &what)
            }
            None => {
                let queued = queue_writes(stream, device, ranges, data);
                finish(stream, queued, &what)
            }
        }
    }

    /// Allocates every buffer of `shape` on `stream`'s device, zeroed there (no host copy of
    /// a possibly huge memory buffer is made), and writes the data segments' bytes and the
    /// element segments' references (little-endian `u32`, as the kernel reads them) into
    /// their blobs. With `mapped_mailbox` (a kernel with synchronous imports) the control
    /// blocks and result words are mapped host memory.
    pub(super) fn new(
        stream: Arc<CudaStream>,
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
        mapped_mailbox: bool,
    ) -> Result<Self, BackendError> {
        let elems: Vec<u8> = elem_blob.iter().flat_map(|r| r.to_le_bytes()).collect();
        let blobs = [
            (FleetBuffer::DataBlob, data_blob),
            (FleetBuffer::ElemBlob, elems.as_slice()),
        ];
        // Checked before allocating anything: a blob that does not fit is a caller's error,
        // not a device's.
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
        let mut buffers = Vec::with_capacity(FleetBuffer::ALL.len());
        for &b in FleetBuffer::ALL {
            let bytes = shape.bytes(b);
            let len = usize::try_from(bytes).map_err(|_| BackendError::OutOfMemory { bytes })?;
            if mapped_mailbox && matches!(b, FleetBuffer::Vms | FleetBuffer::Ret) {
                buffers.push(Storage::Mapped(MappedBuffer::new(stream.context(), len)?));
                continue;
            }
            let buffer = stream
                .alloc_zeros::<u8>(len)
                .map_err(|e| alloc_error(e, bytes, b))?;
            buffers.push(Storage::Device(buffer));
        }
        let address = |b: FleetBuffer| match &buffers[slot(b)] {
            Storage::Device(d) => d.device_ptr(&stream).0,
            Storage::Mapped(m) => *m.device(),
        };
        let (mem_address, dirty_address) = (address(FleetBuffer::Mem), address(FleetBuffer::Dirty));
        let service_staging = match mapped_mailbox {
            true => Some(MappedBuffer::new(stream.context(), SERVICE_STAGING)?),
            false => None,
        };
        let mut fleet = CudaFleet {
            stream,
            shape: *shape,
            buffers,
            mem_address,
            dirty_address,
            service_staging,
            staging: None,
            traffic: Traffic::default(),
        };
        // Creation, not traffic: the blobs are not counted, as on every backend.
        for (b, bytes) in blobs {
            if bytes.is_empty() {
                continue;
            }
            let Storage::Device(blob) = &mut fleet.buffers[slot(b)] else {
                continue; // blobs are never mapped
            };
            let mut view = blob.try_slice_mut(..bytes.len()).ok_or_else(|| {
                BackendError::Launch(format!("the {} blob does not fit", b.name()))
            })?;
            fleet
                .stream
                .memcpy_htod(bytes, &mut view)
                .map_err(|e| driver_error(&format!("writing the {} blob", b.name()), e))?;
        }
        // The zeroing and the blob copies are asynchronous: wait for them here so that a
        // device error is reported by the creation that caused it.
        fleet
            .stream
            .synchronize()
            .map_err(|e| driver_error("zeroing the fleet's buffers", e))?;
        Ok(fleet)
    }

    /// Runs `function` (one of the kernel's entries, named `entry`) over every VM on `stream`,
    /// with this fleet's buffers and scalars as its parameters, and waits for it, serving the
    /// VMs' imports meanwhile through `serving`'s service on its stream if given (synchronous
    /// imports). Returns the time from the launch to its end.
    pub(super) fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        function: &CudaFunction,
        entry: &str,
        serving: Option<(&dyn ImportService, &Arc<CudaStream>)>,
    ) -> Result<Duration, BackendError> {
        // Buffers of another context are not addresses this kernel can use, and a launch on
        // another stream would not be ordered after this fleet's copies.
        if **stream != *self.stream {
            return Err(BackendError::Launch(
                "this fleet's storage belongs to another CUDA device or stream".into(),
            ));
        }
        let scalars = self.shape.scalars();
        if scalars.num_vms == 0 {
            // CUDA rejects an empty grid; there is nothing to run.
            return Ok(Duration::ZERO);
        }
        // The launch builder keeps pointers to its arguments until the launch: the scalar
        // values are read out of `params`, which lives until the end of this function.
        let params = scalars.params();
        let mut service = match serving {
            Some((imports, service_stream)) => Some(self.import_service(imports, service_stream)?),
            None => None,
        };
        // Each buffer is handed out once, mutably (the kernel writes it).
        let mut unused: Vec<Option<&mut Storage>> = self.buffers.iter_mut().map(Some).collect();
        let mut builder = stream.launch_builder(function);
        for param in &params {
            match param {
                KernelParam::Buffer(b) => {
                    let buffer =
                        unused
                            .get_mut(slot(*b))
                            .and_then(Option::take)
                            .ok_or_else(|| {
                                BackendError::Launch(format!(
                                    "the {} buffer appears twice among the entry parameters",
                                    b.name()
                                ))
                            })?;
                    match buffer {
                        Storage::Device(d) => builder.arg(d),
                        Storage::Mapped(m) => builder.arg(m.device()),
                    };
                }
                KernelParam::Scalar(ScalarArg::U32(v)) => {
                    builder.arg(v);
                }
                KernelParam::Scalar(ScalarArg::U64(v)) => {
                    builder.arg(v);
                }
            }
        }
        let cfg = LaunchConfig {
            grid_dim: (scalars.num_vms.div_ceil(BLOCK), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let start = Instant::now();
        // SAFETY: the arguments are the entry's parameters in order and type
        // (`FleetScalars::params`, from the same definition as the generated signature,
        // `abi::c::entry_points`); every buffer is as large as `self.shape` says, which is the
        // shape the kernel indexes by; the entry returns for threads at or past `num_vms`.
        let launched = unsafe { builder.launch(cfg) };
        let served = match (&launched, service.as_mut()) {
            (Ok(_), Some(service)) => service.serve_until_done(stream, entry),
            _ => Ok(()),
        };
        let finished = stream.synchronize();
        launched.map_err(|e| driver_error(&format!("launching {entry}"), e))?;
        finished.map_err(|e| driver_error(&format!("running {entry}"), e))?;
        served?;
        if let Some(service) = service {
            let t = service.traffic();
            self.traffic.from_device += t.from_device;
            self.traffic.to_device += t.to_device;
            self.traffic.transfers += t.transfers;
        }
        Ok(start.elapsed())
    }
}

impl CudaFleet {
    /// What serves the imports of a launch on this fleet through `imports`: its mapped
    /// mailbox, and its memory through copies on `stream`.
    fn import_service<'i>(
        &self,
        imports: &'i dyn ImportService,
        stream: &Arc<CudaStream>,
    ) -> Result<ImportServing<'i>, BackendError> {
        let (Storage::Mapped(vms), Storage::Mapped(ret), Some(staging)) = (
            &self.buffers[slot(FleetBuffer::Vms)],
            &self.buffers[slot(FleetBuffer::Ret)],
            &self.service_staging,
        ) else {
            return Err(BackendError::Launch(
                "a kernel with synchronous imports needs a fleet with a mapped mailbox".into(),
            ));
        };
        let mailbox = Mailbox {
            vms: vms.host().cast::<VmControl>(),
            ret: ret.host().cast::<u64>(),
            shape: self.shape,
        };
        let view = ServiceView {
            stream: stream.clone(),
            shape: self.shape,
            mem: self.mem_address,
            dirty: self.dirty_address,
            staging: staging.host(),
            traffic: Traffic::default(),
        };
        Ok(ImportServing::new(imports, mailbox, view))
    }
}

/// The index of `buffer` in [`FleetBuffer::ALL`] (every buffer is in it, so the fallback is
/// never taken).
fn slot(buffer: FleetBuffer) -> usize {
    FleetBuffer::ALL
        .iter()
        .position(|b| *b == buffer)
        .unwrap_or(0)
}

/// A failed allocation of `bytes` for `buffer`: out of memory when the driver says so.
fn alloc_error(e: DriverError, bytes: u64, buffer: FleetBuffer) -> BackendError {
    if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        BackendError::OutOfMemory { bytes }
    } else {
        driver_error(
            &format!("allocating {bytes} bytes for the {} buffer", buffer.name()),
            e,
        )
    }
}

/// `r` as host indices (it lies in a buffer that was allocated, so it fits).
fn host_range(r: &Range<u64>) -> Result<Range<usize>, BackendError> {
    match (usize::try_from(r.start), usize::try_from(r.end)) {
        (Ok(start), Ok(end)) => Ok(start..end),
        _ => Err(BackendError::Launch(format!(
            "bytes {}..{} are beyond this host's address space",
            r.start, r.end
        ))),
    }
}

/// The first `len` bytes of the pinned staging buffer in `staging`, grown (allocated again,
/// zeroed) when it is shorter; `None` when `len` is over [`STAGING_MAX`] or pinned memory
/// cannot be had, and the transfer is to use the caller's pageable bytes instead.
fn staging_bytes<'s>(
    staging: &'s mut Option<PinnedHostSlice<u8>>,
    context: &Arc<CudaContext>,
    len: usize,
) -> Result<Option<&'s mut [u8]>, BackendError> {
    if len > STAGING_MAX {
        return Ok(None);
    }
    if staging.as_ref().is_none_or(|s| s.len() < len) {
        // Freed first: the old buffer's copies have all been waited for.
        *staging = None;
        let size = len.next_power_of_two().clamp(STAGING_MIN, STAGING_MAX);
        // Flags 0, not `alloc_pinned`'s write-combined memory: the host reads what the device
        // copies into this buffer, and reads of write-combined memory are uncached.
        // SAFETY: the memory is uninitialised; it is zeroed below before any slice of it is
        // made.
        match unsafe { context.alloc_pinned_with_flags::<u8>(size, 0) } {
            Ok(mut fresh) => {
                let ptr = fresh
                    .as_mut_ptr()
                    .map_err(|e| driver_error("preparing the staging buffer", e))?;
                // SAFETY: `ptr` points to `size` bytes of host memory that `fresh` owns and
                // nothing else uses yet.
                unsafe { std::ptr::write_bytes(ptr, 0, size) };
                *staging = Some(fresh);
            }
            // Pinned memory is a limited system resource; without it transfers still work.
            Err(_) => return Ok(None),
        }
    }
    match staging.as_mut() {
        Some(s) => {
            // Waits on the buffer's own event, which nothing records (copies use it as a
            // plain slice and the stream is synchronised after each transfer): no wait.
            let bytes = s
                .as_mut_slice()
                .map_err(|e| driver_error("using the staging buffer", e))?;
            Ok(bytes.get_mut(..len))
        }
        None => Ok(None),
    }
}

/// Queues one device-to-host copy per range of `device` into `host`, packed one after
/// another. The copies are asynchronous when `host` is pinned: the caller must synchronise
/// the stream before `host` is read, reused or freed.
fn queue_reads(
    stream: &Arc<CudaStream>,
    device: &CudaSlice<u8>,
    ranges: &[Range<u64>],
    host: &mut [u8],
) -> Result<(), BackendError> {
    let mut at = 0;
    for r in ranges {
        let r = host_range(r)?;
        let n = r.len();
        if n == 0 {
            continue;
        }
        let view = device.try_slice(r.clone()).ok_or_else(|| {
            BackendError::Launch(format!("bytes {r:?} lie outside a device buffer"))
        })?;
        let dst = host.get_mut(at..at + n).ok_or_else(|| {
            BackendError::Launch("the host bytes are shorter than the ranges".into())
        })?;
        stream
            .memcpy_dtoh(&view, dst)
            .map_err(|e| driver_error(&format!("reading {n} bytes from the device"), e))?;
        at += n;
    }
    Ok(())
}

/// Queues one host-to-device copy per range of `device` from `host`, packed one after
/// another. As for [`queue_reads`], the caller synchronises before `host` is reused.
fn queue_writes(
    stream: &Arc<CudaStream>,
    device: &mut CudaSlice<u8>,
    ranges: &[Range<u64>],
    host: &[u8],
) -> Result<(), BackendError> {
    let mut at = 0;
    for r in ranges {
        let r = host_range(r)?;
        let n = r.len();
        if n == 0 {
            continue;
        }
        let mut view = device.try_slice_mut(r.clone()).ok_or_else(|| {
            BackendError::Launch(format!("bytes {r:?} lie outside a device buffer"))
        })?;
        let src = host.get(at..at + n).ok_or_else(|| {
            BackendError::Launch("the host bytes are shorter than the ranges".into())
        })?;
        stream
            .memcpy_htod(src, &mut view)
            .map_err(|e| driver_error(&format!("writing {n} bytes to the device"), e))?;
        at += n;
    }
    Ok(())
}

/// Waits for the copies `queued` says were queued — always, even when queueing failed part
/// way, since queued copies may still be using the host bytes — and reports the first error.
fn finish(
    stream: &CudaStream,
    queued: Result<(), BackendError>,
    what: &str,
) -> Result<(), BackendError> {
    let synced = stream.synchronize();
    queued?;
    synced.map_err(|e| driver_error(what, e))
}

impl DeviceFleet for CudaFleet {
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
        if !out.is_empty() {
            let what = format!("reading the fleet's {} buffer", buffer.name());
            let device = match &self.buffers[slot(buffer)] {
                Storage::Device(d) => d,
                Storage::Mapped(m) => {
                    gather(m.bytes(), ranges, out);
                    self.traffic.from_device += out.len() as u64;
                    self.traffic.transfers += 1;
                    return Ok(());
                }
            };
            let stream = &self.stream;
            match staging_bytes(&mut self.staging, stream.context(), out.len())? {
                Some(stage) => {
                    let queued = queue_reads(stream, device, ranges, stage);
                    finish(stream, queued, &what)?;
                    out.copy_from_slice(stage);
                }
                None => {
                    let queued = queue_reads(stream, device, ranges, out);
                    finish(stream, queued, &what)?;
                }
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
            self.put(buffer, ranges, data)?;
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
