//! Direct calls on the `cpu` backend (`CallMode::Direct`): the kernel calls the host for an
//! import from the worker thread running the VM, through [`HostCalls`] (C `wv_host`), and
//! recurses on that worker's native stack, whose floor this module sets: a VM gets as many
//! bytes of it as its continuation stack would have had (`--stack-words` × 8), and never the
//! host's reserve at the bottom of a worker's stack.

use std::cell::Cell;
use std::ffi::c_void;

use crate::abi::{FleetAbi, HostServices};
use crate::backend::{ImportService, RunningFleet};
use crate::layout::InterleavedLayout;

/// Native stack of each worker thread. Direct calls recurse on it; virtual memory, committed
/// only as deep as a VM recurses.
pub const WORKER_STACK_BYTES: usize = 64 << 20;

/// Native stack bytes a VM may use per word of its continuation stack (`stack_words`). A
/// continuation frame keeps only the values live across a call; a native C frame also holds
/// spilled temporaries, saved registers and the return address, and at `-O0` every local has
/// its own slot: rust-recurse's 1,820-deep chain, which wasmtime runs in its 512 KiB, needed more
/// than 8 bytes per word at `-O0`. The default (65,536 words) gives 4 MiB.
pub const NATIVE_BYTES_PER_STACK_WORD: u64 = 64;

/// Stack kept below the deepest VM frame for the host's import service (WASI's functions,
/// the Rust runtime) and the C library.
const HOST_RESERVE_BYTES: u64 = 8 << 20;

thread_local! {
    /// The lowest address of this worker's stack (0 on other threads).
    static STACK_LOW: Cell<usize> = const { Cell::new(0) };
}

/// Notes where the calling worker's stack ends: called first thing on each worker.
pub(super) fn note_worker_stack() {
    let here = 0u8;
    let top = std::ptr::addr_of!(here) as usize;
    STACK_LOW.with(|low| low.set(top.saturating_sub(WORKER_STACK_BYTES)));
}

/// The lowest address of the calling worker's stack; `None` off the workers.
pub(super) fn worker_stack_low() -> Option<usize> {
    Some(STACK_LOW.with(Cell::get)).filter(|&low| low != 0)
}

/// The native stack floor for VMs launched from here with `budget` bytes of stack: `budget`
/// below this frame, but never into the host's reserve at the bottom of a worker's stack
/// (a launch from inside a host call starts deep already). Off the workers, VMs get little.
pub(super) fn stack_floor(budget: u64) -> u64 {
    let here = 0u8;
    let sp = std::ptr::addr_of!(here) as u64;
    let low = STACK_LOW.with(Cell::get) as u64;
    let budget = if low == 0 {
        budget.min(256 << 10)
    } else {
        budget
    };
    sp.saturating_sub(budget).max(low + HOST_RESERVE_BYTES)
}

/// `wv_host`: the import service the kernel calls.
#[repr(C)]
pub struct HostCalls {
    call: unsafe extern "C" fn(*const c_void, u32, u32, *mut u64, u32) -> u32,
    ctx: *const c_void,
    trace: unsafe extern "C" fn(*const c_void, u32, *const u32, u32),
}

/// What [`serve_import`] needs: the service and where the running VMs' memories are.
struct DirectContext<'a> {
    imports: &'a dyn ImportService,
    fleet: RunningFleet,
    num_vms: u32,
}

/// Runs `body` with the host services of a launch of `fleet`: `imports` behind a `wv_host`
/// (each worker sets its own stack floor), marking what they write in the dirty-page map
/// `dirty` (null: none).
pub(super) fn with_services<R>(
    fleet: &FleetAbi,
    layout: InterleavedLayout,
    dirty: *mut u8,
    imports: &dyn ImportService,
    body: impl FnOnce(HostServices) -> R,
) -> R {
    let context = DirectContext {
        imports,
        fleet: RunningFleet {
            vms: fleet.vms,
            mem: fleet.mem,
            dirty,
            layout,
        },
        num_vms: fleet.num_vms,
    };
    let calls = HostCalls {
        call: serve_import,
        ctx: (&context as *const DirectContext<'_>).cast(),
        trace: take_trace,
    };
    body(HostServices {
        host: &calls as *const HostCalls as u64,
        stack_floor: 0,
        unwind: 0,
        running: 0,
    })
}

/// `wv_host.call`: serves VM `vm`'s call of import `import` on the calling worker. Nonzero
/// stops the VM. Never unwinds into the kernel.
unsafe extern "C" fn serve_import(
    ctx: *const c_void,
    vm: u32,
    import: u32,
    words: *mut u64,
    nwords: u32,
) -> u32 {
    // The host's own faults are never a VM's (guard regions).
    let served = super::guard::outside_scope(|| {
        // SAFETY: `ctx` is the `DirectContext` of `with_services`, alive for the launch.
        let cx = unsafe { &*ctx.cast::<DirectContext<'_>>() };
        if vm >= cx.num_vms || words.is_null() {
            return false;
        }
        // SAFETY: VM `vm`'s worker is waiting in this call, so its control block and memory
        // cells are this call's alone; `words` is the caller's array of `nwords` words.
        unsafe {
            let words = std::slice::from_raw_parts_mut(words, nwords as usize);
            cx.fleet.serve(cx.imports, vm, import, words)
        }
    });
    u32::from(!served)
}

/// `wv_host.trace`: VM `vm`'s next `n` trace words, from the calling worker.
unsafe extern "C" fn take_trace(ctx: *const c_void, vm: u32, words: *const u32, n: u32) {
    let _ = super::guard::outside_scope(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if words.is_null() {
                return;
            }
            // SAFETY: `ctx` is the `DirectContext` of `with_services`, alive for the launch;
            // `words` is the VM's trace buffer of `n` words in its worker's context.
            unsafe {
                let cx = &*ctx.cast::<DirectContext<'_>>();
                cx.imports
                    .trace(vm, std::slice::from_raw_parts(words, n as usize));
            }
        }))
    });
}
