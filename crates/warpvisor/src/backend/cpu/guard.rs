//! Guard regions (`MemoryChecks::Guard`): the fault handler that turns a VM's access outside
//! its memory into that VM's `memory_out_of_bounds` trap, and the reservation that makes such
//! an access fault.
//!
//! A guarded fleet's memory buffer is one `PROT_NONE` reservation of
//! [`GUARD_STRIDE`](crate::layout::GUARD_STRIDE) bytes per VM; the kernel makes a VM's current
//! size readable and writable (`wv_guard_resize` in the prelude, on reset and `memory.grow`).
//! While a worker runs a guarded kernel it publishes a [`GuardScope`] in a thread-local: the
//! fleet's memory range and the worker's launch argument, whose `unwind` is the running VM's
//! unwind point. The `SIGSEGV` handler acts only when the faulting thread has a scope and the
//! address lies in that range; it records the trap in the VM's control block and resumes the
//! thread at the kernel's `wv_fault_unwind(point)`, as if the faulting instruction had called
//! it, so the handler itself returns normally. The handler, and what it does with every other
//! fault, is `backend/signals.rs`.

use std::cell::Cell;
use std::ptr;

use crate::abi::codes::{status, trap_code};
use crate::abi::{HostLaunch, VmControl};
use crate::vmm::TrapKind;

/// `void wv_fault_unwind(uint64_t point)`: the kernel's resumption after a guard fault.
pub type FaultUnwindFn = unsafe extern "C" fn(u64) -> !;

/// What the fault handler needs about the launch running on this thread.
pub(super) struct GuardScope {
    /// First byte of the fleet's memory reservation.
    mem: usize,
    /// One past its last byte.
    end: usize,
    /// Bytes per VM.
    stride: usize,
    /// This worker's launch argument (its `services.unwind` is the running VM's unwind point).
    launch: *const HostLaunch,
    /// The kernel's `wv_fault_unwind`.
    unwind: FaultUnwindFn,
}

thread_local! {
    /// The guarded launch this thread is running, if any (null otherwise, and while it serves
    /// a host call).
    static SCOPE: Cell<*const GuardScope> = const { Cell::new(ptr::null()) };
}

/// Runs `body` with `launch` (this worker's launch argument over a guarded memory buffer of
/// `num_vms` × `stride` bytes at `mem`) published to the fault handler.
pub(super) fn with_scope<R>(
    launch: *const HostLaunch,
    mem: *mut u8,
    num_vms: u32,
    stride: u64,
    unwind: FaultUnwindFn,
    body: impl FnOnce() -> R,
) -> R {
    let scope = GuardScope {
        mem: mem as usize,
        end: (mem as usize).saturating_add((num_vms as u64 * stride) as usize),
        stride: stride as usize,
        launch,
        unwind,
    };
    let previous = SCOPE.with(|s| s.replace(&scope));
    let result = body();
    SCOPE.with(|s| s.set(previous));
    result
}

/// Makes `[addr, addr + len)` of a guarded reservation inaccessible again.
///
/// # Safety
/// The range must lie in a guarded fleet's memory reservation, unused by any running launch.
pub(crate) unsafe fn close(addr: *mut u8, len: usize) -> std::io::Result<()> {
    // SAFETY: the caller's contract; PROT_NONE only takes access away.
    match unsafe { libc::mprotect(addr.cast(), len, libc::PROT_NONE) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Runs `body` (a host call from inside a guarded launch) with no scope published: a fault in
/// the host's own code is never taken for a VM's.
pub(super) fn outside_scope<R>(body: impl FnOnce() -> R) -> R {
    let previous = SCOPE.with(|s| s.replace(ptr::null()));
    let result = body();
    SCOPE.with(|s| s.set(previous));
    result
}

/// Stack an overflowed VM's resumption (`wv_fault_unwind` and the jump) may use below its
/// entry shim's frame.
const SHIM_CLEARANCE: u64 = 1024;

/// Records the trap and redirects the thread when the fault is a guarded VM's.
///
/// # Safety
/// `info` and `context` must be the handler's arguments.
pub(crate) unsafe fn take_as_trap(info: *mut libc::siginfo_t, context: *mut libc::c_void) -> bool {
    let scope = SCOPE.with(Cell::get);
    if scope.is_null() || info.is_null() || context.is_null() {
        return false;
    }
    // SAFETY: a non-null scope is the one `with_scope` published on this thread, alive.
    let scope = unsafe { &*scope };
    // SAFETY: `info` is the handler's siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: the launch argument is this worker's, alive during the launch.
    let launch = unsafe { &*scope.launch };
    let point = launch.services.unwind;
    let (guard_low, guard_high) = super::stack::active_guard();
    let (vm, kind, resume_sp) = if addr >= guard_low && addr < guard_high && point != 0 {
        // The running VM's recursion reached the guard below its stack floor. Its stack
        // pointer is in the guard, so it resumes just below its entry shim's frame: every
        // frame there is dead once the shim's unwind point is taken. The point is the shim's
        // `__builtin_setjmp` buffer, whose third word is the shim's stack pointer (GCC and
        // Clang on x86-64: frame pointer, resume address, stack pointer).
        // SAFETY: `point` addresses the running shim's buffer, on this thread's live stack.
        let shim_sp = unsafe { (point as *const u64).add(2).read() };
        let sp = shim_sp.saturating_sub(SHIM_CLEARANCE);
        if sp <= guard_high as u64 + SHIM_CLEARANCE {
            return false;
        }
        (
            launch.services.running as usize,
            TrapKind::StackOverflow,
            Some(sp),
        )
    } else if addr >= scope.mem && addr < scope.end && scope.stride != 0 {
        let vm = (addr - scope.mem) / scope.stride;
        (vm, TrapKind::MemoryOutOfBounds, None)
    } else {
        return false;
    };
    if point == 0 || vm >= launch.fleet.num_vms as usize {
        return false;
    }
    // SAFETY: `vm` is a VM of the fleet, whose control blocks `vms` points to; this worker
    // runs it, so no one else writes its block now.
    unsafe {
        let v: *mut VmControl = launch.fleet.vms.add(vm);
        ptr::addr_of_mut!((*v).status).write_volatile(status::TRAPPED);
        ptr::addr_of_mut!((*v).trap).write_volatile(trap_code(kind).unwrap_or(0));
    }
    redirect(context, scope.unwind, point, resume_sp);
    true
}

/// Makes the interrupted thread continue in `unwind(point)` as if it had called it: below the
/// red zone (or at `sp`, when the thread's stack pointer is in a guard), with the stack
/// aligned as at a call.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn redirect(context: *mut libc::c_void, unwind: FaultUnwindFn, point: u64, sp: Option<u64>) {
    let uc = context.cast::<libc::ucontext_t>();
    // SAFETY: `context` is the handler's ucontext; the registers are plain integers.
    unsafe {
        let regs = &mut (*uc).uc_mcontext.gregs;
        let sp = sp.unwrap_or(regs[libc::REG_RSP as usize] as u64 - 128 - 64);
        let sp = (sp & !15) - 8;
        regs[libc::REG_RSP as usize] = sp as i64;
        regs[libc::REG_RDI as usize] = point as i64;
        regs[libc::REG_RIP as usize] = unwind as usize as i64;
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn redirect(_: *mut libc::c_void, _: FaultUnwindFn, _: u64, _: Option<u64>) {
    // Kernels refuse guard regions elsewhere (MemoryChecks::guard_unsupported).
    std::process::abort();
}
