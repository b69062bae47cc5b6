//! Serving WASI jobs continuously on one fleet: VMs start idle, each takes a job when one is
//! waiting, and a VM whose job ended takes the next at the next hypercall round while the
//! others run on — no VM waits for a whole batch to finish (VectorVisor's request slots).
//! The fleet's supervised run ([`Fleet::run_supervised_idle`]) does the scheduling; this
//! module connects it to a [`JobFeed`] and to the VMs' WASI state.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::program::{JobResult, TRAP_EXIT_CODE};
use super::{WasiJob, WasiState};
use crate::vmm::{Fleet, FleetStats, Outcome, Supervised, Supervisor, TrapKind, VmmError};

/// Where a continuously served fleet gets its jobs and sends their results.
pub trait JobFeed {
    /// A job for idle VM `vm`, if one is waiting now.
    fn job_for(&mut self, vm: u32) -> Option<WasiJob>;
    /// VM `vm`'s job ended with `result`.
    fn finished(&mut self, vm: u32, result: JobResult);
    /// VMs whose jobs must stop now (`timeout`), e.g. past their deadline.
    fn overdue(&mut self) -> Vec<u32>;
    /// No VM can run before `until` (`None`: none has work); `idle_vms` VMs have no job.
    /// Returns once a job may be waiting, or at `until`. `false` ends serving; it is only
    /// honoured once every VM is idle (the others finish their jobs first).
    fn wait(&mut self, until: Option<Instant>, idle_vms: usize) -> bool;
    /// A round begins, with the fleet's counters so far (device time as it grows); the jobs
    /// handed out since the last call started together.
    fn round_begins(&mut self, _now: &FleetStats) {}
}

/// Serves `feed`'s jobs on `fleet` (built with continuations) until the feed ends serving.
pub(super) fn serve(
    fleet: &mut Fleet,
    state: &Arc<Mutex<WasiState>>,
    feed: &mut dyn JobFeed,
) -> Result<(), VmmError> {
    let n = fleet.num_vms() as usize;
    let mut supervisor = JobSupervisor {
        state: state.clone(),
        feed,
        busy: vec![false; n],
    };
    fleet.run_supervised_idle("_start", &mut supervisor)
}

struct JobSupervisor<'a> {
    state: Arc<Mutex<WasiState>>,
    feed: &'a mut dyn JobFeed,
    /// VMs running a job.
    busy: Vec<bool>,
}

impl JobSupervisor<'_> {
    fn state(&self) -> MutexGuard<'_, WasiState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Supervisor for JobSupervisor<'_> {
    fn round(&mut self, fleet: &mut Supervised<'_>) {
        self.feed.round_begins(&fleet.stats());
        for (vm, outcome) in fleet.ended().to_vec() {
            let Some(busy) = self.busy.get_mut(vm as usize) else {
                continue;
            };
            if !std::mem::take(busy) {
                continue;
            }
            let out = self.state().take_output(vm as usize);
            let (exit_code, trap) = match outcome {
                Outcome::Returned(_) => (0, None),
                Outcome::Exited(c) => (c, None),
                Outcome::Trapped(k) => (TRAP_EXIT_CODE, Some(k)),
            };
            self.feed.finished(
                vm,
                JobResult {
                    exit_code,
                    stdout: out.stdout,
                    stderr: out.stderr,
                    trap,
                },
            );
        }
        for vm in self.feed.overdue() {
            if self.busy.get(vm as usize) == Some(&true) {
                fleet.stop(vm, TrapKind::Timeout);
            }
        }
        for vm in 0..self.busy.len() {
            if self.busy[vm] {
                continue;
            }
            let Some(job) = self.feed.job_for(vm as u32) else {
                break;
            };
            self.state().set_job(vm, &job);
            self.busy[vm] = true;
            fleet.restart(vm as u32);
        }
    }

    fn idle(&mut self, until: Option<Instant>) -> bool {
        let idle = self.busy.iter().filter(|b| !**b).count();
        // The fleet stops VMs still running when this returns false: only when none is.
        self.feed.wait(until, idle) || idle < self.busy.len()
    }

    fn waits_when_all_ended(&self) -> bool {
        true
    }
}
