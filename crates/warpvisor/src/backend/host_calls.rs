//! Imports served while a device kernel runs (`--calls direct` on OpenCL and CUDA): the host
//! side of the remote procedure calls that GPU C libraries make to the host.
//!
//! A VM calling an import leaves its arguments in its result words, publishes `HOST_CALL` in
//! its status with a release store (`wv_call_host` in the prelude) and spins. The host polls
//! every VM's status with acquire loads until the launch completes, runs each call it finds
//! (every call found in one sweep is answered in that sweep), writes the results into the
//! result words and answers `RUNNING`, or `TRAPPED` when the VM must stop (the service
//! recorded why). The control blocks and result words — the [`Mailbox`] — live in memory
//! both sides see during a launch: fine-grained SVM on OpenCL (`opencl/host_calls.rs`),
//! mapped page-locked host memory on CUDA (`cuda/host_calls.rs`); each backend reaches the
//! VM's memory its own way, in the `serve` it passes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::abi::{status, FleetShape, PerVmArray, VmControl};
use crate::backend::BackendError;

/// How long the host sleeps between polls once no VM has called for a while: on a CPU device
/// the kernel's threads run on the same cores, which a spinning host would slow down.
const IDLE_POLL: Duration = Duration::from_micros(20);

/// Polls without sleeping (yielding the core between them) after the last call before the
/// host starts to sleep between polls: with a core of its own the host then answers within
/// microseconds (LZ4 on PoCL, 1,280 imports: 0.046 s of execution against 0.08–0.11 s with
/// 64 polls; docs/benchmarks.md).
const SPIN_POLLS: u32 = 5_000;

/// Where a running fleet's VMs leave their calls: every VM's control block and result words,
/// shared with the device while the kernel runs.
pub(crate) struct Mailbox {
    /// The fleet's `shape.layout.num_vms` control blocks.
    pub vms: *mut VmControl,
    /// The fleet's result words (`PerVmArray::RET`).
    pub ret: *mut u64,
    /// The fleet's shape.
    pub shape: FleetShape,
}

/// Serves the VMs' imports until `finished` says the launch has completed (or fails, which
/// ends the wait with its error). `serve(vm, import, words)` runs one call with its arguments
/// in `words`, leaves the results there and says whether the VM goes on; the VMs' imports never
/// end the wait (a failed one, a panic included, stops its VM).
///
/// # Safety
/// The mailbox's pointers are a live fleet's, shared with the running kernel, which touches
/// the status words only atomically and a calling VM's other words only before it publishes
/// its call and after the host answers it.
pub(crate) unsafe fn serve_until_done(
    mut finished: impl FnMut() -> Result<bool, BackendError>,
    mailbox: &Mailbox,
    mut serve: impl FnMut(u32, u32, &mut [u64]) -> bool,
) -> Result<(), BackendError> {
    let shape = &mailbox.shape;
    let ret_words = shape.ret_words as usize;
    let mut words = vec![0u64; ret_words];
    let mut idle = 0u32;
    loop {
        // Read before the sweep: a launch seen complete here had published every call that
        // the sweep below must answer (none: it completed), and one still running is swept.
        let done = finished()?;
        let mut found = 0u32;
        for vm in 0..shape.layout.num_vms {
            // SAFETY: `vms` holds `num_vms` control blocks; while a kernel runs their status
            // words are accessed only atomically, by it and by this loop.
            let (block, status_word) = unsafe {
                let block = mailbox.vms.add(vm as usize);
                (
                    block,
                    AtomicU32::from_ptr(std::ptr::addr_of_mut!((*block).status)),
                )
            };
            if status_word.load(Ordering::Acquire) != status::HOST_CALL {
                continue;
            }
            found += 1;
            // SAFETY: the VM waits for this answer, so its control block and result words are
            // the host's until the release store below.
            let keep_running = unsafe {
                let at = PerVmArray::RET.index(shape, vm, 0) as usize;
                let slot = mailbox.ret.add(at);
                std::ptr::copy_nonoverlapping(slot, words.as_mut_ptr(), ret_words);
                let import = std::ptr::addr_of!((*block).hypercall).read();
                let ok = serve(vm, import, &mut words);
                if ok {
                    std::ptr::copy_nonoverlapping(words.as_ptr(), slot, ret_words);
                } else {
                    std::ptr::addr_of_mut!((*block).trap).write(0); // the service recorded why
                }
                ok
            };
            let answer = if keep_running {
                status::RUNNING
            } else {
                status::TRAPPED
            };
            status_word.store(answer, Ordering::Release);
        }
        if done {
            return Ok(());
        }
        if found > 0 {
            idle = 0;
        } else if idle < SPIN_POLLS {
            idle += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(IDLE_POLL);
        }
    }
}
