//! Guard regions on an OpenCL CPU device (PoCL, `MemoryChecks::Guard`): the memory reservation
//! a guarded fleet computes in, and the part of the `SIGSEGV` handler that serves it.
//!
//! The device's threads are the OpenCL runtime's, not ours, so nothing is published per
//! thread as `cpu` does (`backend/cpu/guard.rs`); instead every guarded fleet registers its
//! reservation and its VMs' control blocks process-wide. A fault in a registered reservation
//! is either
//! - below the VM's current size: a page the VM (or the host, serving it) touches for the
//!   first time since it grew — the device cannot change page protection, so `memory.grow` and
//!   the reset only change the size, and the handler opens the pages up to it and lets the
//!   access run again; or
//! - beyond it: the VM's `memory_out_of_bounds`. The handler resumes the thread at the fault
//!   point around the trampoline running that VM (`wv_trampoline_guarded` in the prelude: a
//!   setjmp of the kernel's own, `wv_fault_point`, whose record is published in the VM's
//!   control block as `unwind`), as if that call returned a second time; the VM then traps.
//!   A fault whose thread does not run under that fault point is not taken.
//!
//! The reservation is [`GUARD_STRIDE`](crate::layout::GUARD_STRIDE) bytes per VM, far more
//! than one device buffer may hold: kernels reach it through the `mem_host` parameter.

use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::abi::VmControl;
use crate::backend::write_watch::Mapping;
use crate::backend::{BackendError, ZeroedBytes};

/// Bytes per host page.
const HOST_PAGE: usize = 4096;

/// Guarded fleets the handler serves at once; a fleet past that is refused (with a clear
/// error naming `--memory-checks explicit`).
const MAX_FLEETS: usize = 1024;

/// How far below its fault point a faulting thread's stack pointer may be: the kernel's frames
/// between the trampoline and the faulting access.
const MAX_KERNEL_STACK: u64 = 64 << 20;

/// What the handler knows of one guarded fleet.
struct Registered {
    /// First byte of the memory reservation and one past its last.
    mem: usize,
    end: usize,
    /// Bytes per VM.
    stride: usize,
    /// The VMs' control blocks (the host memory the device computes in).
    vms: *const VmControl,
    num_vms: usize,
}

/// Every registered fleet (null: a free slot).
static FLEETS: [AtomicPtr<Registered>; MAX_FLEETS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_FLEETS];

/// Handlers reading [`FLEETS`] now: a fleet going away waits for none to be left before its
/// entry is freed.
static READERS: AtomicUsize = AtomicUsize::new(0);

/// The memory and control blocks of a guarded fleet, registered with the fault handler while
/// this value lives.
pub(super) struct GuardedMemory {
    /// The VMs' memories: `num_vms` × stride bytes, inaccessible until touched below a size.
    _reservation: ZeroedBytes,
    /// Its first byte.
    base: NonNull<u8>,
    /// The control blocks' storage: the device computes in it (the `vms` buffer is made over
    /// it), so the handler and the host read sizes and fault points here.
    controls: Mapping,
    /// Bytes per VM and VMs.
    stride: u64,
    num_vms: u32,
    slot: usize,
}

// SAFETY: the reservation and mapping are owned plain memory; the registry entry points into
// them and is removed before they go.
unsafe impl Send for GuardedMemory {}

impl GuardedMemory {
    /// Reserves memories of `stride` bytes for `num_vms` VMs and `control_bytes` of control
    /// blocks, and registers them with the fault handler.
    pub(super) fn new(num_vms: u32, stride: u64, control_bytes: u64) -> Result<Self, BackendError> {
        crate::backend::signals::install()?;
        let bytes = stride.saturating_mul(num_vms as u64);
        let len = usize::try_from(bytes).map_err(|_| BackendError::OutOfMemory { bytes })?;
        let mut reservation = ZeroedBytes::reserve_inaccessible(len)?;
        let base =
            NonNull::new(reservation.as_mut_ptr()).ok_or(BackendError::OutOfMemory { bytes })?;
        let controls = usize::try_from(control_bytes.div_ceil(HOST_PAGE as u64))
            .ok()
            .and_then(|p| Mapping::new(p).ok())
            .ok_or(BackendError::OutOfMemory {
                bytes: control_bytes,
            })?;
        let mem = base.as_ptr() as usize;
        let entry = Box::into_raw(Box::new(Registered {
            mem,
            end: mem + len,
            stride: stride as usize,
            vms: controls.page(0).cast(),
            num_vms: num_vms as usize,
        }));
        let slot = FLEETS.iter().position(|s| {
            s.compare_exchange(ptr::null_mut(), entry, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        let Some(slot) = slot else {
            // SAFETY: never published.
            drop(unsafe { Box::from_raw(entry) });
            return Err(BackendError::Launch(format!(
                "more than {MAX_FLEETS} OpenCL fleets with guard regions at once; run with \
                 --memory-checks explicit"
            )));
        };
        Ok(GuardedMemory {
            _reservation: reservation,
            base,
            controls,
            stride,
            num_vms,
            slot,
        })
    }

    /// Where the VMs' memories start.
    pub(super) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Where the control blocks live.
    pub(super) fn controls(&self) -> *mut u8 {
        self.controls.page(0)
    }

    /// Bytes per VM.
    pub(super) fn stride(&self) -> u64 {
        self.stride
    }

    /// VM `vm`'s memory size in pages as the device left it (0 for no such VM).
    pub(super) fn pages(&self, vm: u32) -> u32 {
        if vm >= self.num_vms {
            return 0;
        }
        // SAFETY: the mapping holds `num_vms` control blocks; the device writes them only
        // while a launch runs, and the host reads them between launches.
        unsafe {
            let v = self.controls.page(0).cast::<VmControl>().add(vm as usize);
            ptr::addr_of!((*v).mem_pages).read_volatile()
        }
    }

    /// Makes pages `[from, to)` of VM `vm`'s memory inaccessible again (a reset shrank it).
    pub(super) fn close(&self, vm: u32, from: u32, to: u32) -> Result<(), BackendError> {
        if to <= from {
            return Ok(());
        }
        let start = vm as u64 * self.stride + ((from as u64) << 16);
        let len = ((to - from) as u64) << 16;
        // SAFETY: the range lies in this VM's part of the reservation (sizes fit the stride),
        // and no launch runs while the host resets.
        unsafe {
            crate::backend::cpu::guard::close(self.base.as_ptr().add(start as usize), len as usize)
        }
        .map_err(|e| {
            BackendError::Launch(format!(
                "cannot close VM {vm}'s memory above {from} pages: {e}"
            ))
        })
    }
}

impl Drop for GuardedMemory {
    fn drop(&mut self) {
        let entry = FLEETS[self.slot].swap(ptr::null_mut(), Ordering::AcqRel);
        while READERS.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        if !entry.is_null() {
            // SAFETY: made by `Box::into_raw` in `new`, unpublished, no handler reads it.
            drop(unsafe { Box::from_raw(entry) });
        }
    }
}

/// Serves a fault in a guarded OpenCL fleet's memory: opens pages below the VM's size, or
/// resumes the VM's thread at its fault point. False when the fault is not one of these.
///
/// # Safety
/// `info` and `context` must be a `SIGSEGV` handler's arguments.
pub(crate) unsafe fn take_fault(info: *mut libc::siginfo_t, context: *mut libc::c_void) -> bool {
    if info.is_null() || context.is_null() {
        return false;
    }
    // SAFETY: the handler's siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    READERS.fetch_add(1, Ordering::AcqRel);
    let mut taken = false;
    for slot in &FLEETS {
        let entry = slot.load(Ordering::Acquire);
        if entry.is_null() {
            continue;
        }
        // SAFETY: a published entry stays alive while READERS counts this handler.
        let fleet = unsafe { &*entry };
        if addr >= fleet.mem && addr < fleet.end {
            // SAFETY: the caller's contract.
            taken = unsafe { serve(fleet, addr, context) };
            break;
        }
    }
    READERS.fetch_sub(1, Ordering::AcqRel);
    taken
}

/// [`take_fault`] for a fault at `addr` in `fleet`'s reservation.
///
/// # Safety
/// As [`take_fault`]; `addr` lies in the reservation.
unsafe fn serve(fleet: &Registered, addr: usize, context: *mut libc::c_void) -> bool {
    let vm = (addr - fleet.mem) / fleet.stride;
    if vm >= fleet.num_vms {
        return false;
    }
    let offset = (addr - fleet.mem) % fleet.stride;
    // SAFETY: `vm` is one of the fleet's VMs; its thread (or the host serving it) is the only
    // writer of its block now.
    let (pages, point) = unsafe {
        let v = fleet.vms.add(vm);
        (
            ptr::addr_of!((*v).mem_pages).read_volatile(),
            ptr::addr_of!((*v).unwind).read_volatile(),
        )
    };
    let size = (pages as usize) << 16;
    if offset < size.min(fleet.stride) {
        let page = offset & !(HOST_PAGE - 1);
        let start = fleet.mem + vm * fleet.stride + page;
        // SAFETY: the VM's own pages below its size, in the registered reservation.
        let opened = unsafe {
            libc::mprotect(
                start as *mut libc::c_void,
                size - page,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        return opened == 0;
    }
    if point == 0 {
        return false;
    }
    resume_at_fault_point(context, point)
}

/// Makes the interrupted thread return 1 from the `wv_fault_point` call that wrote the record
/// `point` (rbx, rbp, r12-r15, stack pointer after the return, return address), as longjmp
/// does, if its stack is the one that call lives on.
fn resume_at_fault_point(context: *mut libc::c_void, point: u64) -> bool {
    let uc = context.cast::<libc::ucontext_t>();
    // SAFETY: `context` is the handler's ucontext; `point` is the record of a trampoline that
    // runs now (its VM's `unwind` is cleared when the trampoline leaves), on some thread's
    // live stack — checked below to be this thread's.
    unsafe {
        let record = point as *const u64;
        let word = |i: usize| record.add(i).read_volatile();
        let regs = &mut (*uc).uc_mcontext.gregs;
        let sp = regs[libc::REG_RSP as usize] as u64;
        let point_sp = word(6);
        if sp > point_sp || point_sp - sp > MAX_KERNEL_STACK {
            return false;
        }
        for (i, reg) in [
            libc::REG_RBX,
            libc::REG_RBP,
            libc::REG_R12,
            libc::REG_R13,
            libc::REG_R14,
            libc::REG_R15,
        ]
        .into_iter()
        .enumerate()
        {
            regs[reg as usize] = word(i) as i64;
        }
        regs[libc::REG_RSP as usize] = point_sp as i64;
        regs[libc::REG_RIP as usize] = word(7) as i64;
        regs[libc::REG_RAX as usize] = 1;
    }
    true
}
