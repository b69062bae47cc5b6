//! The guarded native stack floor of direct calls with guard regions.
//!
//! With direct calls a VM recurses on its worker's native stack down to a floor
//! ([`direct::stack_floor`](super::direct::stack_floor)). Kernels without guard regions check
//! the stack pointer against the floor in every recursive function (`WV_STACK_CHECK`); that
//! check is what kept GCC from inlining recursive functions into themselves as it does
//! wasm2c's. With guard regions the stack is guarded instead, as wasmtime guards its stacks:
//! for the launch, [`STACK_GUARD_BYTES`] some way below the floor are made inaccessible,
//! kernels probe every page of a large frame (`-fstack-clash-protection`), and the fault
//! handler (`guard.rs`) turns a fault there into the running VM's `stack_overflow`, on an
//! alternate signal stack since the thread's own is exhausted. The host's import service runs
//! on the same stack: between floor and guard lie [`HOST_CALL_STACK_BYTES`] for it, and the
//! kernel lets a VM call the host only above the floor (`wv_call_host`). Recursion that makes
//! no host call may use that room too. A launch from inside a host call (a nested launch on
//! the same worker) keeps the guard already in place.

use std::cell::{Cell, RefCell};

use super::direct;
use crate::backend::BackendError;

/// Inaccessible bytes of the guard: larger than any frame step a kernel takes without probing
/// (its compiler probes every 4 KiB of a larger frame).
pub const STACK_GUARD_BYTES: usize = 64 << 10;

/// Room for the host's import service (WASI's functions, the Rust runtime, the C library)
/// between the floor and the guard: a host call starts above the floor.
pub const HOST_CALL_STACK_BYTES: u64 = 512 << 10;

/// Bytes of the alternate signal stack each worker gets for the fault handler.
const ALT_STACK_BYTES: usize = 64 << 10;

const SYSTEM_PAGE: u64 = 4096;

thread_local! {
    /// The guard in place on this thread's stack, `[low, high)`; (0, 0) when none.
    static GUARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// This thread's alternate signal stack, once made.
    static ALT_STACK: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// The guard in place on the calling thread's stack, `[low, high)`; (0, 0) when none.
pub(super) fn active_guard() -> (usize, usize) {
    GUARD.with(Cell::get)
}

/// Runs `body(floor)` with the native stack guarded [`HOST_CALL_STACK_BYTES`] below `floor`,
/// the floor of VMs launched from here with `budget` bytes of stack. A nested launch gets its
/// floor above the guard already in place. Fails where the stack cannot be guarded (a thread
/// that is not a worker), since the kernel does not check the floor itself.
pub(super) fn with_guarded_floor<R>(
    budget: u64,
    body: impl FnOnce(u64) -> R,
) -> Result<R, BackendError> {
    let (_, high) = active_guard();
    if high != 0 {
        return Ok(body(high as u64 + HOST_CALL_STACK_BYTES));
    }
    let low_end = direct::worker_stack_low().ok_or_else(|| {
        BackendError::Launch(
            "a kernel with guard regions and direct calls must run on a worker thread".into(),
        )
    })?;
    ensure_alt_stack()?;
    let floor = direct::stack_floor(budget);
    let here = 0u8;
    if floor + SYSTEM_PAGE > std::ptr::addr_of!(here) as u64 {
        // A launch started deep in an unguarded one: no room below it for VMs and a guard.
        return Err(BackendError::Launch(format!(
            "no native stack left for a guarded launch above the floor {floor:#x}"
        )));
    }
    let high = (floor.saturating_sub(HOST_CALL_STACK_BYTES)) & !(SYSTEM_PAGE - 1);
    let low = high.saturating_sub(STACK_GUARD_BYTES as u64);
    if low < low_end as u64 + SYSTEM_PAGE {
        return Err(BackendError::Launch(format!(
            "no room for a stack guard below the floor {floor:#x} on this worker"
        )));
    }
    let _guard = Protected::new(low as usize, STACK_GUARD_BYTES)?;
    Ok(body(high + HOST_CALL_STACK_BYTES))
}

/// Pages made inaccessible until dropped.
struct Protected {
    addr: usize,
    len: usize,
}

impl Protected {
    /// Protects `[addr, addr + len)` and publishes it as this thread's guard.
    fn new(addr: usize, len: usize) -> Result<Self, BackendError> {
        // SAFETY: `[addr, addr + len)` lies in this thread's stack below every live frame
        // (below the floor); nothing uses it until the guard is dropped.
        let rc = unsafe { libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) };
        if rc != 0 {
            return Err(BackendError::Launch(format!(
                "cannot guard the native stack: {}",
                std::io::Error::last_os_error()
            )));
        }
        GUARD.with(|g| g.set((addr, addr + len)));
        Ok(Protected { addr, len })
    }
}

impl Drop for Protected {
    /// Withdraws the guard, on the way out of a launch and on unwinding alike.
    fn drop(&mut self) {
        GUARD.with(|g| g.set((0, 0)));
        // SAFETY: the pages were this thread's stack, protected by `new`. Failing to give them
        // back would leave a smaller stack, which later guards and checks still bound.
        unsafe {
            libc::mprotect(
                self.addr as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
            );
        }
    }
}

/// An alternate signal stack registered for the thread that made it.
struct AltStack {
    base: *mut libc::c_void,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: disable this thread's alternate stack before unmapping the memory it used.
        unsafe {
            let mut off: libc::stack_t = std::mem::zeroed();
            off.ss_flags = libc::SS_DISABLE;
            libc::sigaltstack(&off, std::ptr::null_mut());
            libc::munmap(self.base, ALT_STACK_BYTES);
        }
    }
}

/// Gives the calling thread an alternate signal stack, once: the fault handler of a stack
/// overflow cannot run on the exhausted stack.
fn ensure_alt_stack() -> Result<(), BackendError> {
    ALT_STACK.with(|cell| {
        if cell.borrow().is_some() {
            return Ok(());
        }
        // SAFETY: a fresh anonymous private mapping, registered as this thread's alternate
        // signal stack; `AltStack` disables and unmaps it when the thread ends.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                ALT_STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(alt_stack_error());
            }
            let stack = libc::stack_t {
                ss_sp: base,
                ss_flags: 0,
                ss_size: ALT_STACK_BYTES,
            };
            if libc::sigaltstack(&stack, std::ptr::null_mut()) != 0 {
                let error = alt_stack_error();
                libc::munmap(base, ALT_STACK_BYTES);
                return Err(error);
            }
            *cell.borrow_mut() = Some(AltStack { base });
        }
        Ok(())
    })
}

fn alt_stack_error() -> BackendError {
    BackendError::Launch(format!(
        "cannot give a worker an alternate signal stack: {}",
        std::io::Error::last_os_error()
    ))
}
