//! What a fleet's host provides: functions for the module's imports ([`HostFunctions`]) and
//! the values of its other imports ([`Imports`]).

use std::time::Instant;

use super::{TrapKind, Value, VmMemory};

/// Why a hypercall did not return to the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStop {
    /// The VM traps with this kind.
    Trap(TrapKind),
    /// The VM exits with this code (`proc_exit`).
    Exit(u32),
    /// The VM waits (a `poll_oneoff` on clocks): it stays parked at its hypercall, the rest of
    /// the fleet runs on, and the call is made again at or after this instant.
    Wait(Instant),
    /// The VM waits until the host wakes it: only in a supervised run
    /// ([`crate::vmm::Fleet::run_supervised`], whose [`crate::vmm::Supervisor`] wakes it and the
    /// call is made again); elsewhere, and with direct calls, nothing would wake it and the VM
    /// traps (`host_error`).
    Park,
}

/// Services calls to imported functions (hypercalls). With direct calls the kernel's worker
/// threads make the calls, one at a time: hence `Send`.
pub trait HostFunctions: Send {
    /// Runs import `import` (function index) with `args` for the VM whose memory `memory` is
    /// (`memory.vm()` is its index): the one VM a host function can see. A panic here traps
    /// that VM (`host_error`); the others carry on.
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop>;
}

/// A host that provides no functions: every hypercall traps.
pub struct NoHost;

impl HostFunctions for NoHost {
    fn call(&mut self, _: &mut VmMemory<'_>, _: u32, _: &[Value]) -> Result<Vec<Value>, HostStop> {
        Err(HostStop::Trap(TrapKind::HostError))
    }
}

/// What the host binds to the module's imports.
pub struct Imports {
    /// Values of the imported globals, in import order.
    pub globals: Vec<Value>,
    /// Actual limits of an imported memory (initial pages, maximum).
    pub memory: Option<(u64, Option<u64>)>,
    /// Actual limits of each imported table (initial elements, maximum), in import order.
    pub tables: Vec<(u64, Option<u64>)>,
    /// The imported functions.
    pub host: Box<dyn HostFunctions>,
}

impl Default for Imports {
    fn default() -> Self {
        Imports {
            globals: Vec::new(),
            memory: None,
            tables: Vec::new(),
            host: Box::new(NoHost),
        }
    }
}
