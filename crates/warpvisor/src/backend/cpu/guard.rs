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
//! it, so the handler itself returns normally. Every other fault goes to the handler that was
//! installed before (wasmtime's, when wasmtime runs in the same process) or to the default
//! action.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::abi::codes::{status, trap_code};
use crate::abi::{HostLaunch, VmControl};
use crate::backend::BackendError;
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

/// Whether the handler is installed (or why the system refused).
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// The handler that was installed before ours: its function and `sa_flags` (what [`chain`]
/// needs), updated when another library takes the signal back (see [`chain`]). Two words,
/// not one atomic pair: a fault racing the rare update could pair one handler with the other's
/// flags, which matters only if exactly one of them takes `SA_SIGINFO`.
static PREVIOUS_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREVIOUS_FLAGS: AtomicI32 = AtomicI32::new(0);

/// Installs the fault handler once per process; an error when the system refused.
///
/// Backends call it when they are made, before any kernel is built: an OpenCL runtime's
/// compiler in this process (LLVM, in PoCL) registers handlers for SIGSEGV, SIGILL, SIGFPE
/// and others while it builds, and the first of those signals to reach it (wasmtime's
/// `unreachable` is a SIGILL) makes it put back, for all of them, the handlers it found. Found
/// ours, it puts ours back; registered before ours, it would put back the handler ours had
/// replaced and so remove ours (a differential seed's guard faults on PoCL then went to
/// wasmtime, which crashed the process).
pub(crate) fn install() -> Result<(), BackendError> {
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: sigaction with a valid action; `on_fault` has the SA_SIGINFO signature.
        unsafe { put_on_top() }.map_err(|e| e.to_string())
    });
    installed
        .as_ref()
        .map(|_| ())
        .map_err(|e| BackendError::Launch(format!("cannot install the guard-fault handler: {e}")))
}

/// Installs [`on_fault`] for `SIGSEGV`, keeping the handler it replaces as the one to chain to.
///
/// # Safety
/// Changes the process's signal disposition (async-signal-safe: only `sigaction` and atomics).
unsafe fn put_on_top() -> std::io::Result<()> {
    // SAFETY: zeroed sigactions are valid values to fill; the previous one is read back.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &action, &mut previous) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if previous.sa_sigaction != action.sa_sigaction {
            PREVIOUS_FLAGS.store(previous.sa_flags, Ordering::Release);
            PREVIOUS_HANDLER.store(previous.sa_sigaction, Ordering::Release);
        }
    }
    Ok(())
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

/// The `SIGSEGV` handler.
extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo and ucontext for an SA_SIGINFO handler; the
    // scope outlives the launch it describes (see `with_scope`).
    unsafe {
        if take_as_trap(info, context) {
            return;
        }
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if crate::backend::opencl::take_guard_fault(info, context) {
            return;
        }
        chain(signal, info, context);
    }
}

/// Stack an overflowed VM's resumption (`wv_fault_unwind` and the jump) may use below its
/// entry shim's frame.
const SHIM_CLEARANCE: u64 = 1024;

/// Records the trap and redirects the thread when the fault is a guarded VM's.
///
/// # Safety
/// `info` and `context` must be the handler's arguments.
unsafe fn take_as_trap(info: *mut libc::siginfo_t, context: *mut libc::c_void) -> bool {
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

/// Passes a fault that is not a guarded VM's to the handler installed before ours.
///
/// That handler may take the signal away from ours: LLVM's (see [`install`]), if it was
/// registered before ours, puts back the handler it found and lets the fault happen again.
/// Ours is then put back on top, with what LLVM left as the one to chain to, so that later
/// guard faults still reach it.
///
/// # Safety
/// The arguments must be the handler's.
unsafe fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let handler = PREVIOUS_HANDLER.load(Ordering::Acquire);
    let flags = PREVIOUS_FLAGS.load(Ordering::Acquire);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Returning re-executes the faulting instruction under the default action.
        return restore_default(signal);
    }
    // SAFETY: the previous handler was installed for this signal with these flags.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(signal, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(signal);
        }
        let mut now: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, ptr::null(), &mut now) == 0
            && now.sa_sigaction != on_fault as *const () as usize
            && now.sa_sigaction != libc::SIG_DFL
        {
            let _ = put_on_top();
        }
    }
}

/// Puts the default action back for `signal`.
fn restore_default(signal: libc::c_int) {
    // SAFETY: a zeroed sigaction with SIG_DFL is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &action, ptr::null_mut());
    }
}
