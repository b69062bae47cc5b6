//! The process's fault handler, its place among other libraries' handlers, and the fence
//! between an in-process compiler's builds and execution that faults.
//!
//! Guarded execution (`MemoryChecks::Guard`) turns a VM's access outside its memory into a
//! `SIGSEGV` that [`on_fault`] takes as that VM's trap (`cpu/guard.rs`, `opencl/guard.rs`);
//! on PoCL it also opens, on first touch, pages a VM grew into. Every other fault goes to the
//! handler installed before ours (wasmtime's, when wasmtime runs in the same process) or to the
//! default action.
//!
//! Two other handlers share the process:
//! - wasmtime installs its own once, when its first engine is made, and chains to the one it
//!   found: either order works.
//! - PoCL's compiler, LLVM, registers a one-shot handler (`SA_RESETHAND`) for SIGSEGV, SIGILL,
//!   SIGFPE, SIGBUS and others while it builds (`RemoveFileOnSignal`, for its temporary
//!   files). When a signal reaches it, the kernel resets that signal to the default action,
//!   and LLVM puts back the handlers it found, deletes the temporary files of any build in
//!   progress ("unable to rename temporary") and lets the fault happen again. A second
//!   thread faulting in that window dies (CI: guard-faulting `cpu` fleets on two workers
//!   beside a PoCL build crashed the test process); a build in progress fails.
//!
//! Hence the rules: ours is installed when a backend is made; a build by an in-process
//! compiler ([`while_compiling`]) runs while no execution that faults by design runs
//! ([`while_faulting`]), and puts ours back on top of the four fault signals afterwards,
//! *over* LLVM's one-shot handler, never chaining to it (it saved ours, and calling it would
//! unregister it, so that the next build registers it on top again). LLVM, registered once
//! and never reached, then never registers again.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use crate::backend::BackendError;

/// The synchronous fault signals ours sits on top of while an in-process compiler may have
/// registered for them; only `SIGSEGV` is ever taken, the others are passed on.
const FAULT_SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

/// A handler installed before ours for one signal: its function and `sa_flags` (what
/// [`chain`] needs). Two words, not one atomic pair: a fault racing the rare update could
/// pair one handler with the other's flags, which matters only if exactly one of them takes
/// `SA_SIGINFO`.
struct Previous {
    handler: AtomicUsize,
    flags: AtomicI32,
}

/// The handler ours chains to, per signal of [`FAULT_SIGNALS`].
static PREVIOUS: [Previous; FAULT_SIGNALS.len()] = [const {
    Previous {
        handler: AtomicUsize::new(libc::SIG_DFL),
        flags: AtomicI32::new(0),
    }
}; FAULT_SIGNALS.len()];

/// The handler ours chains to for `signal`, if it is one of [`FAULT_SIGNALS`].
fn previous(signal: libc::c_int) -> Option<&'static Previous> {
    let i = FAULT_SIGNALS.iter().position(|&s| s == signal)?;
    Some(&PREVIOUS[i])
}

/// Whether the handler is installed (or why the system refused).
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Shared by execution that faults by design, exclusive to an in-process compiler's build.
static COMPILER_FENCE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this thread holds [`COMPILER_FENCE`] shared (a nested launch must not wait
    /// for it again behind a waiting build: that build waits for the outer launch).
    static FAULTING: Cell<bool> = const { Cell::new(false) };
}

/// Installs the fault handler for `SIGSEGV` once per process; an error when the system
/// refused. Backends call it when they are made, before any kernel is built.
pub(crate) fn install() -> Result<(), BackendError> {
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: installs `on_fault`, whose signature is SA_SIGINFO's.
        unsafe { put_on_top(libc::SIGSEGV, Displaced::Record) }.map_err(|e| e.to_string())
    });
    installed
        .as_ref()
        .map(|_| ())
        .map_err(|e| BackendError::Launch(format!("cannot install the guard-fault handler: {e}")))
}

/// Runs `body`, which may fault by design (a guarded launch, the host copying through guarded
/// memory), while no in-process compiler builds.
pub(crate) fn while_faulting<R>(body: impl FnOnce() -> R) -> R {
    if FAULTING.get() {
        return body();
    }
    let _shared = COMPILER_FENCE
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    FAULTING.set(true);
    let _unmark = Unmark;
    body()
}

/// [`while_faulting`] when `faults`, else `body` as it is.
pub(crate) fn while_faulting_if<R>(faults: bool, body: impl FnOnce() -> R) -> R {
    if faults {
        while_faulting(body)
    } else {
        body()
    }
}

/// Clears [`FAULTING`] when the shared hold ends, panicking or not.
struct Unmark;

impl Drop for Unmark {
    fn drop(&mut self) {
        FAULTING.set(false);
    }
}

/// Runs `build` (an OpenCL runtime building with its in-process compiler) while nothing faults
/// by design, then puts ours back on top of whatever the build registered.
pub(crate) fn while_compiling<R>(build: impl FnOnce() -> R) -> R {
    // From inside faulting execution the fence would wait for this thread itself.
    let _exclusive = (!FAULTING.get()).then(|| {
        COMPILER_FENCE
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    });
    if INSTALLED.get().is_some_and(Result::is_ok) {
        // Ours on top first, so that a one-shot handler the build registers saved ours.
        put_on_top_of_all(Displaced::Record);
        let built = build();
        put_on_top_of_all(Displaced::SkipOneShot);
        built
    } else {
        build()
    }
}

/// What [`put_on_top`] makes of the handler it displaces.
#[derive(Clone, Copy, PartialEq)]
enum Displaced {
    /// Chain to it.
    Record,
    /// Chain to it unless it is one-shot (`SA_RESETHAND`): such a handler was registered by
    /// the build just made, over ours, and passes faults back to ours by itself.
    SkipOneShot,
}

/// [`put_on_top`] for every fault signal (a refusal leaves that signal as it was).
fn put_on_top_of_all(displaced: Displaced) {
    for signal in FAULT_SIGNALS {
        // SAFETY: installs `on_fault`, whose signature is SA_SIGINFO's.
        let _ = unsafe { put_on_top(signal, displaced) };
    }
}

/// Installs [`on_fault`] for `signal`, keeping the handler it replaces as the one to chain to
/// (as `displaced` says).
///
/// # Safety
/// Changes the process's signal disposition (async-signal-safe: only `sigaction` and atomics).
unsafe fn put_on_top(signal: libc::c_int, displaced: Displaced) -> std::io::Result<()> {
    let Some(slot) = previous(signal) else {
        return Ok(());
    };
    // SAFETY: zeroed sigactions are valid values to fill; the previous one is read back.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, &action, &mut previous) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let one_shot = previous.sa_flags & libc::SA_RESETHAND as libc::c_int != 0;
        if previous.sa_sigaction != action.sa_sigaction
            && !(one_shot && displaced == Displaced::SkipOneShot)
        {
            slot.flags.store(previous.sa_flags, Ordering::Release);
            slot.handler.store(previous.sa_sigaction, Ordering::Release);
        }
    }
    Ok(())
}

/// The handler: a `SIGSEGV` of guarded execution is taken; every other fault is chained.
extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo and ucontext for an SA_SIGINFO handler.
    unsafe {
        if signal == libc::SIGSEGV {
            if super::cpu::guard::take_as_trap(info, context) {
                return;
            }
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            if super::opencl::take_guard_fault(info, context) {
                return;
            }
        }
        chain(signal, info, context);
    }
}

/// Passes a fault that is not a guarded VM's to the handler installed before ours.
///
/// That handler may take the signal away from ours (LLVM's, if it was registered before
/// ours: it puts back the handler it found). Ours is then put back on top, with what it left
/// as the one to chain to.
///
/// # Safety
/// The arguments must be the handler's.
unsafe fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(slot) = previous(signal) else {
        return restore_default(signal);
    };
    let handler = slot.handler.load(Ordering::Acquire);
    let flags = slot.flags.load(Ordering::Acquire);
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
            let _ = put_on_top(signal, Displaced::Record);
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
