//! Hypercall service: every VM stopped at an import gets its call run on the host. The
//! arguments of all of them come up in one gathered read, the results go down in one gathered
//! write, and the kernel pops the import's frame itself (`RESUME`).

use std::time::Instant;

use super::host::HostStop;
use super::{Fleet, TrapKind, Value, VmMemory, VmmError};
use crate::abi::status;
use crate::layout::PAGE;

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
            if let Some(t) = self.parked_until[vm] {
                if t > now {
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                    continue;
                }
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
            self.parked_until[v] = None;
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
                let host = &mut self.imports.host;
                let mut memory = VmMemory::in_fleet(self.storage.device(), layout, vm, size);
                // A host function's own failure is its VM's trap, not the host's.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    host.call(&mut memory, import, &args)
                }))
                .unwrap_or(Err(HostStop::Trap(TrapKind::HostError)))
            };
            if let Err(HostStop::Wait(t)) = result {
                self.parked_until[v] = Some(t);
                wake = Some(wake.map_or(t, |w| w.min(t)));
                continue;
            }
            serviced += 1;
            let ctl = &mut self.storage.controls[v];
            match result {
                Ok(values)
                    if values.len() == ty.results().len()
                        && values.iter().zip(ty.results()).all(|(v, t)| v.has_type(*t)) =>
                {
                    results.push((vm, values.iter().map(|v| v.to_word()).collect()));
                    ctl.status = status::RESUME;
                }
                Ok(_) => {
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
