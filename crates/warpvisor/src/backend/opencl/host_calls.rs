//! Synchronous imports on OpenCL (`--calls direct`): the host serves a VM's import while the
//! kernel runs (the protocol: `backend/host_calls.rs`).
//!
//! A fleet of such a kernel lives in fine-grained shared virtual memory ([`SvmStorage`]: each
//! buffer is an SVM allocation that its OpenCL buffer uses as storage), which host and device
//! see coherently during a launch: the host polls the control blocks there, and runs each
//! import through the VMM's [`ImportService`] on the VM's shared memory
//! (`RunningFleet::serve`, as the cpu backend's direct calls do).
//!
//! Devices qualify with fine-grained buffer SVM, its atomics and OpenCL C 3.0
//! ([`sync_imports_unsupported`]); OpenCL 1.2 devices keep continuations.

use std::ptr::NonNull;

use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_SVM_ATOMICS, CL_DEVICE_SVM_FINE_GRAIN_BUFFER};
use opencl3::event::Event;
use opencl3::memory::{CL_MEM_READ_WRITE, CL_MEM_SVM_ATOMICS, CL_MEM_SVM_FINE_GRAIN_BUFFER};

use crate::abi::{FleetBuffer, FleetShape, VmControl};
use crate::backend::host_calls::{serve_until_done as serve_until_done_with, Mailbox};
use crate::backend::{BackendError, ImportService, RunningFleet};

/// Why `device` cannot serve imports while a kernel runs, if it cannot.
pub(super) fn sync_imports_unsupported(device: &Device) -> Option<String> {
    let svm = device.svm_mem_capability();
    let needed = CL_DEVICE_SVM_FINE_GRAIN_BUFFER | CL_DEVICE_SVM_ATOMICS;
    if svm & needed != needed {
        return Some(
            "it lacks fine-grained buffer SVM with atomics (an OpenCL 2.0 feature)".into(),
        );
    }
    let opencl_c_3 = device.opencl_c_all_versions().is_ok_and(|versions| {
        versions.iter().any(|v| v.version >> 22 >= 3) // CL_VERSION_MAJOR
    });
    if !opencl_c_3 {
        return Some("its compiler lacks OpenCL C 3.0".into());
    }
    None
}

/// A fleet's buffers as fine-grained SVM allocations, in [`FleetBuffer::ALL`]'s order; each
/// OpenCL buffer of the fleet is created over one of them. Freed on drop, which must come
/// after the buffers using them are released (`ClFleet` declares it after its buffers).
pub(super) struct SvmStorage {
    context: opencl3::types::cl_context,
    blocks: Vec<NonNull<u8>>,
}

// SAFETY: the blocks are plain shared memory owned by this value; the context handle is
// thread-safe in OpenCL.
unsafe impl Send for SvmStorage {}

impl SvmStorage {
    /// Allocates and zeroes one block of `len` bytes (at least one) for each buffer of `shape`.
    pub(super) fn new(context: &Context, shape: &FleetShape) -> Result<Self, BackendError> {
        let mut storage = SvmStorage {
            context: context.get(),
            blocks: Vec::with_capacity(FleetBuffer::ALL.len()),
        };
        for &b in FleetBuffer::ALL {
            let bytes = shape.bytes(b).max(1);
            let len = usize::try_from(bytes).map_err(|_| BackendError::OutOfMemory { bytes })?;
            // SAFETY: a plain allocation in this context; checked for null below.
            let block = unsafe {
                cl3::memory::svm_alloc(
                    storage.context,
                    CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS,
                    len,
                    0,
                )
            }
            .ok()
            .and_then(|p| NonNull::new(p.cast::<u8>()))
            .ok_or(BackendError::OutOfMemory { bytes })?;
            // SAFETY: the block holds `len` bytes and nothing else uses it yet.
            unsafe { block.as_ptr().write_bytes(0, len) };
            storage.blocks.push(block);
        }
        Ok(storage)
    }

    /// The block of `buffer`.
    pub(super) fn block(&self, buffer: FleetBuffer) -> NonNull<u8> {
        self.blocks[super::fleet::slot(buffer)]
    }
}

impl Drop for SvmStorage {
    fn drop(&mut self) {
        for block in &self.blocks {
            // SAFETY: allocated by `svm_alloc` in this context; the buffers over it are gone.
            let _ = unsafe { cl3::memory::svm_free(self.context, block.as_ptr().cast()) };
        }
    }
}

/// The work-group size of a launch serving imports on a CPU device (`host_resident`) of
/// `compute_units` cores, or `None` elsewhere: the VMs in one work-group fewer than there are
/// cores (at least one), so that the device's threads leave a core to the host thread that
/// answers the calls. A waiting VM spins on its thread; with every core spinning, the host ran
/// only when the scheduler preempted one of them, about 1 ms per import on PoCL
/// (docs/benchmarks.md, "Synchronous imports on PoCL").
pub(super) fn local_size_sharing_cores(
    host_resident: bool,
    compute_units: u32,
    max_work_group: usize,
    num_vms: usize,
) -> Option<usize> {
    if !host_resident {
        return None;
    }
    let groups = (compute_units as usize).saturating_sub(1).max(1);
    Some(num_vms.div_ceil(groups).clamp(1, max_work_group.max(1)))
}

/// Serves the imports of the launch `running` (of the fleet in `storage`, shaped `shape`)
/// until it completes ([`crate::backend::host_calls::serve_until_done`], with each VM's
/// memory reached directly in the shared memory buffer).
pub(super) fn serve_until_done(
    running: &Event,
    storage: &SvmStorage,
    shape: &FleetShape,
    imports: &dyn ImportService,
) -> Result<(), BackendError> {
    let fleet = RunningFleet {
        vms: storage.block(FleetBuffer::Vms).cast::<VmControl>().as_ptr(),
        mem: storage.block(FleetBuffer::Mem).as_ptr(),
        // Only contiguous memories have a dirty-page map (ARCHITECTURE.md, "How a VM runs").
        dirty: match shape.layout.interleave {
            0 => storage.block(FleetBuffer::Dirty).as_ptr(),
            _ => std::ptr::null_mut(),
        },
        layout: shape.layout,
    };
    let mailbox = Mailbox {
        vms: storage.block(FleetBuffer::Vms).cast::<VmControl>().as_ptr(),
        ret: storage.block(FleetBuffer::Ret).cast::<u64>().as_ptr(),
        shape: *shape,
    };
    let finished = || {
        let state = running
            .command_execution_status()
            .map_err(|e| BackendError::Launch(format!("waiting for wv_kernel: {e}")))?;
        if state.0 < 0 {
            return Err(BackendError::Launch(format!(
                "wv_kernel failed on the device (status {})",
                state.0
            )));
        }
        Ok(state.0 == opencl3::event::CL_COMPLETE)
    };
    // SAFETY: the blocks are the live fleet's, in memory the device shares coherently; a VM
    // that called waits for the answer, so its cells are the service's meanwhile.
    unsafe {
        serve_until_done_with(finished, &mailbox, |vm, import, words| {
            fleet.serve(imports, vm, import, words)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::local_size_sharing_cores as local;

    #[test]
    fn launches_serving_imports_leave_a_core_to_the_host() {
        // Two cores: one work-group, run by one of the device's threads.
        assert_eq!(local(true, 2, 4096, 64), Some(64));
        // Sixteen: fifteen work-groups (the last one short).
        assert_eq!(local(true, 16, 4096, 64), Some(5));
        assert_eq!(local(true, 16, 4096, 10), Some(1));
        // One core cannot spare one; the device's largest work-group caps the size.
        assert_eq!(local(true, 1, 4096, 64), Some(64));
        assert_eq!(local(true, 2, 4096, 10_000), Some(4096));
        // A device with memory of its own (a GPU) picks its own work-groups.
        assert_eq!(local(false, 2, 4096, 64), None);
    }
}
