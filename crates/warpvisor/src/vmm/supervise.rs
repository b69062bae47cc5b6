//! Supervised runs: a fleet whose VMs live across many requests, for servers
//! (`warpvisor serve` with resident handlers). Between launches a [`Supervisor`] is told which
//! VMs ended and may restart, stop, wake and refuel VMs; when nothing is left to run it idles
//! the fleet until it has work. A restart puts only that VM back to the instantiation image
//! (the reset kernel restores VMs marked `RESET`), so the others run on undisturbed.

use std::time::Instant;

use super::fleet::Parked;
use super::host::HostStop;
use super::{Fleet, Outcome, TrapKind, VmmError};
use crate::abi::{status, VmControl};

/// Decides, between launches, what happens to a supervised fleet's VMs.
pub trait Supervisor {
    /// Called between launches: `fleet` lists the VMs that ended since the last round and
    /// takes this round's orders, applied when the round returns.
    fn round(&mut self, fleet: &mut Supervised<'_>);

    /// Nothing can run and no hypercall is due before `until` (`None`: none is due at all).
    /// Returns once there may be work (or at `until`); `false` ends the run, stopping the VMs
    /// still alive.
    fn idle(&mut self, until: Option<Instant>) -> bool;

    /// When each VM's current work must be done (indexed by VM; shorter or `None`: no
    /// deadline). With direct calls a VM making a host call during a launch at or after its
    /// deadline is stopped there with `timeout`, as [`Supervised::stop`] would between
    /// launches. Asked before every launch. Default: none.
    fn deadlines(&self) -> Vec<Option<Instant>> {
        Vec::new()
    }

    /// Whether the run goes on once every VM has ended and none was restarted, waiting in
    /// [`Supervisor::idle`] for work to restart them with. Default: the run ends.
    fn waits_when_all_ended(&self) -> bool {
        false
    }
}

/// The supervisor's view of a fleet during one round.
pub struct Supervised<'a> {
    fleet: &'a Fleet,
    ended: Vec<(u32, Outcome)>,
    restart: Vec<u32>,
    stop: Vec<(u32, TrapKind)>,
    wake: Vec<u32>,
    refuel: Vec<u32>,
}

impl Supervised<'_> {
    /// VMs that ended since the last round, and how.
    pub fn ended(&self) -> &[(u32, Outcome)] {
        &self.ended
    }

    /// Number of VMs in the fleet.
    pub fn num_vms(&self) -> u32 {
        self.fleet.num_vms()
    }

    /// The fleet's counters so far.
    pub fn stats(&self) -> super::FleetStats {
        self.fleet.stats()
    }

    /// Whether some VM is running or ready to run (a launch follows this round).
    pub fn busy(&self) -> bool {
        self.fleet.storage.controls.iter().any(|c| {
            matches!(
                c.status,
                status::RUNNING | status::ELSEWHERE | status::ENTRY | status::RESUME
            )
        })
    }

    /// Puts `vm` back to its freshly instantiated state and starts the run's function on it
    /// again (with full fuel).
    pub fn restart(&mut self, vm: u32) {
        if vm < self.num_vms() {
            self.restart.push(vm);
        }
    }

    /// Stops `vm` (if it has not ended) with trap `kind`: reported as ended next round.
    pub fn stop(&mut self, vm: u32, kind: TrapKind) {
        if vm < self.num_vms() {
            self.stop.push((vm, kind));
        }
    }

    /// Makes `vm`'s parked hypercall ([`HostStop::Park`]) due again.
    pub fn wake(&mut self, vm: u32) {
        if vm < self.num_vms() {
            self.wake.push(vm);
        }
    }

    /// Gives `vm` the fleet's full fuel again (a request's worth).
    pub fn refuel(&mut self, vm: u32) {
        if vm < self.num_vms() {
            self.refuel.push(vm);
        }
    }
}

impl Fleet {
    /// Runs export `name` (no parameters, no results) on every VM under `supervisor` until it
    /// ends the run, or until no VM is alive and it restarted none. Parked hypercalls
    /// ([`HostStop::Park`]) wait for the supervisor to wake them: with direct calls only the
    /// kernel's parking imports (`KernelOptions::parking_imports`) leave the kernel to park;
    /// any other import that parks traps its VM with `host_error`, as nothing could wake a VM
    /// waiting on its worker.
    pub fn run_supervised(
        &mut self,
        name: &str,
        supervisor: &mut dyn Supervisor,
    ) -> Result<(), VmmError> {
        self.run_supervised_from(name, supervisor, true)
    }

    /// [`Fleet::run_supervised`] with every VM idle at first: each starts `name` only when the
    /// supervisor restarts it (the VMs of a fleet that takes jobs as they come).
    pub fn run_supervised_idle(
        &mut self,
        name: &str,
        supervisor: &mut dyn Supervisor,
    ) -> Result<(), VmmError> {
        self.run_supervised_from(name, supervisor, false)
    }

    fn run_supervised_from(
        &mut self,
        name: &str,
        supervisor: &mut dyn Supervisor,
        start_all: bool,
    ) -> Result<(), VmmError> {
        let func = match self.program.module.export(name) {
            Some(crate::frontend::ExportKind::Func(f)) => f,
            _ => return Err(VmmError::NoSuchExport(name.to_string())),
        };
        let ty = self.program.module.func_type(func);
        if !ty.params().is_empty() || !ty.results().is_empty() {
            return Err(VmmError::Limit(format!(
                "a supervised run needs `{name}` to take and return nothing"
            )));
        }
        self.supervised = true;
        let result = self.supervise(func, supervisor, start_all);
        self.supervised = false;
        result
    }

    fn supervise(
        &mut self,
        func: u32,
        supervisor: &mut dyn Supervisor,
        start_all: bool,
    ) -> Result<(), VmmError> {
        let n = self.num_vms() as usize;
        let direct = self.program.options.calls == crate::codegen::CallMode::Direct;
        self.host_stops.fill(None);
        self.parked.fill(Parked::No);
        if start_all {
            for vm in 0..n {
                self.enter(vm, func);
            }
        }
        // Whether each VM's ending was told to the supervisor (an idle VM has nothing to tell).
        let mut told = vec![!start_all; n];
        loop {
            let ended: Vec<(u32, Outcome)> = (0..n)
                .filter(|&vm| !told[vm])
                .filter_map(|vm| Some((vm as u32, self.ending(vm, Vec::new)?)))
                .collect();
            for (vm, _) in &ended {
                told[*vm as usize] = true;
            }
            let mut orders = Supervised {
                fleet: self,
                ended,
                restart: Vec::new(),
                stop: Vec::new(),
                wake: Vec::new(),
                refuel: Vec::new(),
            };
            supervisor.round(&mut orders);
            let Supervised {
                restart,
                stop,
                wake,
                refuel,
                ..
            } = orders;
            self.apply_orders(func, &restart, &stop, &wake, &refuel)?;
            for vm in restart {
                told[vm as usize] = false;
            }
            match self.next_partition() {
                Some(p) => {
                    // Only direct host calls look at them.
                    let deadlines = if direct {
                        supervisor.deadlines()
                    } else {
                        Vec::new()
                    };
                    self.launch(p, None, &deadlines)?
                }
                None => {
                    let (serviced, wake) = self.service_round()?;
                    if serviced > 0 {
                        continue;
                    }
                    // VMs that ended in the last launch are told first.
                    if (0..n).any(|vm| !told[vm] && self.ending(vm, Vec::new).is_some()) {
                        continue;
                    }
                    if told.iter().all(|t| *t) && !supervisor.waits_when_all_ended() {
                        // Every VM ended and was told; the supervisor restarted none.
                        return Ok(());
                    }
                    if !supervisor.idle(wake) {
                        self.stop_unfinished(HostStop::Trap(TrapKind::HostError));
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Hands VM `vm` `func` to start, with full fuel and no arguments.
    fn enter(&mut self, vm: usize, func: u32) {
        if let Some(ctl) = self.storage.controls.get_mut(vm) {
            *ctl = VmControl {
                mem_pages: ctl.mem_pages,
                status: status::ENTRY,
                func,
                fuel: self.fuel,
                ..VmControl::default()
            };
            self.storage.mark_dirty();
        }
    }

    fn apply_orders(
        &mut self,
        func: u32,
        restart: &[u32],
        stop: &[(u32, TrapKind)],
        wake: &[u32],
        refuel: &[u32],
    ) -> Result<(), VmmError> {
        for &(vm, kind) in stop {
            let v = vm as usize;
            if self.ending(v, Vec::new).is_none() {
                self.storage.controls[v].status = status::TRAPPED;
                self.host_stops[v] = Some(HostStop::Trap(kind));
                self.parked[v] = Parked::No;
                self.storage.mark_dirty();
            }
        }
        for &vm in wake {
            if self.parked[vm as usize] == Parked::UntilWoken {
                self.parked[vm as usize] = Parked::No;
            }
        }
        for &vm in refuel {
            self.storage.controls[vm as usize].fuel = self.fuel;
            self.storage.mark_dirty();
        }
        if !restart.is_empty() {
            let start = Instant::now();
            let moved = self.storage.transfer;
            let reset = self.reset_vms(restart);
            let transfer = self.storage.transfer.saturating_sub(moved);
            self.stats.instantiate += start.elapsed().saturating_sub(transfer);
            reset?;
            for &vm in restart {
                self.enter(vm as usize, func);
            }
        }
        Ok(())
    }
}
