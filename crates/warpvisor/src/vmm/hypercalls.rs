//! Hypercall service, both ways a kernel makes one.
//!
//! - Continuations: every VM stopped at an import gets its call run on the host between
//!   launches ([`Fleet::service_hypercalls`]). The arguments of all of them come up in one
//!   gathered read, the results go down in one gathered write, and the kernel pops the
//!   import's frame itself (`RESUME`).
//! - Direct calls: the kernel calls [`DirectImports`] from the worker running the VM, which
//!   waits; host functions run one at a time, under a lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::fleet::Parked;
use super::host::{HostFunctions, HostStop};
use super::{Fleet, TrapKind, Value, VmMemory, VmmError};
use crate::abi::status;
use crate::backend::ImportService;
use crate::frontend::Module;
use crate::layout::PAGE;
use crate::simt::TraceRecorder;

/// Runs one host call with `args`; a host function's panic is its VM's `host_error`.
fn call_host(
    host: &mut dyn HostFunctions,
    memory: &mut VmMemory<'_>,
    import: u32,
    args: &[Value],
) -> Result<Vec<Value>, HostStop> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        host.call(memory, import, args)
    }))
    .unwrap_or(Err(HostStop::Trap(TrapKind::HostError)))
}

/// Results of the right number and types for `import`, as words; `None` otherwise.
fn result_words(module: &Module<'_>, import: u32, values: &[Value]) -> Option<Vec<u64>> {
    let ty = module.func_type(import);
    (values.len() == ty.results().len()
        && values.iter().zip(ty.results()).all(|(v, t)| v.has_type(*t)))
    .then(|| values.iter().map(|v| v.to_word()).collect())
}

/// What host calls share during a launch with direct calls.
struct DirectState<'a> {
    host: &'a mut dyn HostFunctions,
    /// Why each VM stopped, where the host stopped it.
    stops: &'a mut [Option<HostStop>],
}

/// The import service of one launch with direct calls: the fleet's host functions, called
/// from the workers one at a time.
pub(super) struct DirectImports<'a> {
    module: &'a Module<'static>,
    state: Mutex<DirectState<'a>>,
    deadline: Option<Instant>,
    /// Each VM's own deadline, where it has one (a supervised fleet's requests).
    vm_deadlines: &'a [Option<Instant>],
    /// Where a traced kernel's records go.
    trace: Option<&'a TraceRecorder>,
    /// Calls that returned to their VM.
    pub(super) served: AtomicU64,
}

impl<'a> DirectImports<'a> {
    /// A service running `host`'s functions, recording stops in `stops`; calls made at or
    /// after `deadline`, or after VM `vm`'s `vm_deadlines[vm]`, stop their VM with `timeout`.
    pub(super) fn new(
        module: &'a Module<'static>,
        host: &'a mut dyn HostFunctions,
        stops: &'a mut [Option<HostStop>],
        deadline: Option<Instant>,
        vm_deadlines: &'a [Option<Instant>],
        trace: Option<&'a TraceRecorder>,
    ) -> Self {
        DirectImports {
            module,
            state: Mutex::new(DirectState { host, stops }),
            deadline,
            vm_deadlines,
            trace,
            served: AtomicU64::new(0),
        }
    }

    fn stop(&self, vm: u32, why: HostStop) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = state.stops.get_mut(vm as usize) {
            *slot = Some(why);
        }
        false
    }
}

impl ImportService for DirectImports<'_> {
    fn trace(&self, vm: u32, words: &[u32]) {
        if let Some(t) = self.trace {
            t.record(vm, words);
        }
    }

    fn serve(&self, memory: &mut VmMemory<'_>, import: u32, words: &mut [u64]) -> bool {
        let vm = memory.vm();
        if import as usize >= self.module.imported_funcs {
            return self.stop(vm, HostStop::Trap(TrapKind::HostError));
        }
        let ty = self.module.func_type(import);
        let args: Vec<Value> = ty
            .params()
            .iter()
            .zip(words.iter())
            .map(|(t, w)| Value::from_word(*t, *w))
            .collect();
        let own = self.vm_deadlines.get(vm as usize).copied().flatten();
        let deadline = self.deadline.into_iter().chain(own).min();
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return self.stop(vm, HostStop::Trap(TrapKind::Timeout));
            }
            let result = {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                call_host(&mut *state.host, memory, import, &args)
            };
            let values = match result {
                Ok(values) => values,
                // The VM waits on its worker (the others run on); the call is made again.
                Err(HostStop::Wait(t)) => {
                    let until = deadline.map_or(t, |d| d.min(t));
                    std::thread::sleep(until.saturating_duration_since(now));
                    continue;
                }
                // Nothing wakes a VM that waits on its worker (imports that park are made
                // parking imports, `KernelOptions::parking_imports`, and leave the kernel).
                Err(HostStop::Park) => return self.stop(vm, HostStop::Trap(TrapKind::HostError)),
                Err(stop) => return self.stop(vm, stop),
            };
            return match result_words(self.module, import, &values) {
                Some(out) if out.len() <= words.len() => {
                    words[..out.len()].copy_from_slice(&out);
                    self.served.fetch_add(1, Ordering::Relaxed);
                    true
                }
                _ => self.stop(vm, HostStop::Trap(TrapKind::HostError)),
            };
        }
    }
}

impl Fleet {
    /// Services every VM stopped at a hypercall but those parked until later; returns how
    /// many calls completed, and when the first parked VM is due.
    pub(super) fn service_hypercalls(&mut self) -> Result<(u64, Option<Instant>), VmmError> {
        let program = self.program.clone();
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut due: Vec<(u32, u32)> = Vec::new();
        for (vm, ctl) in self.storage.controls.iter().enumerate() {
            if ctl.status != status::HYPERCALL {
                continue;
            }
            match self.parked[vm] {
                Parked::Until(t) if t > now => {
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                    continue;
                }
                Parked::UntilWoken => continue,
                _ => {}
            }
            let params = program.module.func_type(ctl.hypercall).params().len() as u32;
            due.push((vm as u32, params));
        }
        let args = self.storage.read_results(&due)?;
        let layout = self.storage.shape().layout;
        let mut serviced = 0;
        let mut results: Vec<(u32, Vec<u64>)> = Vec::new();
        for (&(vm, _), words) in due.iter().zip(args) {
            let v = vm as usize;
            self.parked[v] = Parked::No;
            let ctl = self.storage.controls[v];
            let import = ctl.hypercall;
            let ty = program.module.func_type(import);
            let args: Vec<Value> = ty
                .params()
                .iter()
                .zip(words)
                .map(|(t, w)| Value::from_word(*t, w))
                .collect();
            let size = ctl.mem_pages as u64 * PAGE;
            let result = {
                let mut memory = VmMemory::in_fleet(self.storage.device(), layout, vm, size);
                call_host(&mut *self.imports.host, &mut memory, import, &args)
            };
            match result {
                Err(HostStop::Wait(t)) => {
                    self.parked[v] = Parked::Until(t);
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                    continue;
                }
                // Only a supervisor wakes a VM parked this way.
                Err(HostStop::Park) if self.supervised => {
                    self.parked[v] = Parked::UntilWoken;
                    continue;
                }
                _ => {}
            }
            serviced += 1;
            let ctl = &mut self.storage.controls[v];
            match result.map(|values| result_words(&program.module, import, &values)) {
                Ok(Some(words)) => {
                    results.push((vm, words));
                    ctl.status = status::RESUME;
                }
                Ok(None) => {
                    ctl.status = status::TRAPPED;
                    self.host_stops[v] = Some(HostStop::Trap(TrapKind::HostError));
                }
                Err(HostStop::Park) => {
                    // Nothing would wake it: a run without a supervisor.
                    ctl.status = status::TRAPPED;
                    self.host_stops[v] = Some(HostStop::Trap(TrapKind::HostError));
                }
                Err(stop) => {
                    // The kernel sees a stopped VM either way.
                    ctl.status = status::TRAPPED;
                    self.host_stops[v] = Some(stop);
                }
            }
        }
        if serviced > 0 {
            self.storage.mark_dirty();
        }
        self.storage.write_results(&results)?;
        Ok((serviced, wake))
    }
}
