//! A fleet of VMs running one [`Program`]: creation, invocation, and the launch loop. The
//! fleet's storage lives on the backend's device ([`crate::backend::DeviceFleet`]); between
//! launches the host moves only control blocks and the words and bytes hypercalls need.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::host::{HostStop, Imports};
use super::hypercalls::DirectImports;
use super::instance::{element_blob, initial_globals};
use super::storage::FleetStorage;
use super::{FleetStats, Outcome, Program, TrapKind, Value, VmmError};
use crate::abi::codes::trap_kind;
use crate::abi::{status, FleetBuffer, FleetShape, PerVmArray, VmControl, FRAME_HEADER};
use crate::backend::{merge_adjacent, Traffic, VmmOnly};
use crate::codegen::MemoryChecks;
use crate::layout::{InterleavedLayout, GUARD_STRIDE};
use crate::simt::{JobTrace, TraceRecorder};

/// Address space one fleet with guard regions may reserve: half of x86-64's 47-bit user space
/// (16,256 VMs; 64 TiB of `PROT_NONE` reservation was granted here, 100 TiB refused).
const MAX_GUARDED_BYTES: u64 = 1 << 46;

/// Size settings of a fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetConfig {
    /// Number of VMs.
    pub num_vms: u32,
    /// Most pages a VM's memory may have (the module's maximum may lower it).
    pub max_memory_pages: u32,
    /// Call-stack words per VM (continuation frames).
    pub stack_words: u32,
    /// Most nested continuation frames per VM.
    pub max_call_depth: u32,
    /// Fuel of every VM per invocation, when the kernel meters fuel
    /// (`KernelOptions::meter_fuel`): function entries and loop iterations it may run.
    pub fuel: u32,
    /// Wall-clock limit of one invocation, checked between kernel launches: VMs still
    /// waiting for a launch or a hypercall then stop with `timeout`. A VM looping inside one
    /// launch without system calls is stopped by `fuel`, not by this.
    pub timeout: Option<Duration>,
}

/// Trace words kept per VM unless [`Fleet::set_trace_limit`] says otherwise (64 MiB).
pub const DEFAULT_TRACE_WORDS_PER_VM: usize = 16 << 20;

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            num_vms: 1,
            max_memory_pages: 256,
            stack_words: 1 << 16,
            max_call_depth: 10_000,
            fuel: u32::MAX,
            timeout: None,
        }
    }
}

/// Whether a VM stopped at a hypercall waits before the call is made again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    /// No: the call is made at the next hypercall service.
    No,
    /// Until this instant (`HostStop::Wait`).
    Until(Instant),
    /// Until the fleet's supervisor wakes it (`HostStop::Park`).
    UntilWoken,
}

/// N VMs running one program.
pub struct Fleet {
    pub(super) program: Arc<Program>,
    pub(super) storage: FleetStorage,
    pub(super) imports: Imports,
    pub(super) initial_pages: u32,
    pub(super) table_initial: Vec<u32>,
    /// How the host stopped a VM while servicing it (not visible to the kernel).
    pub(super) host_stops: Vec<Option<HostStop>>,
    /// Whether and until when each VM's hypercall waits (`HostStop::Wait`, `HostStop::Park`).
    pub(super) parked: Vec<Parked>,
    /// Whether a supervisor is running the fleet (it wakes VMs parked until woken).
    pub(super) supervised: bool,
    /// Fuel each VM starts an invocation with.
    pub(super) fuel: u32,
    /// Wall-clock limit of one invocation.
    timeout: Option<Duration>,
    /// Where the time went so far (transfers and bytes are added when asked).
    pub(super) stats: FleetStats,
    /// A traced kernel's records (`KernelOptions::trace`).
    trace: Option<TraceRecorder>,
}

impl Fleet {
    /// Allocates a fleet for `program` on its backend's device and instantiates every VM.
    pub fn new(
        program: Arc<Program>,
        config: FleetConfig,
        imports: Imports,
    ) -> Result<Fleet, VmmError> {
        let m = &program.module;
        if config.num_vms == 0 {
            return Err(VmmError::Limit("a fleet needs at least one VM".into()));
        }
        let (mem_initial, mem_max) = match (&m.memory, imports.memory) {
            (Some(_), Some(actual)) => actual,
            (Some(d), None) => (d.initial, d.maximum),
            (None, _) => (0, Some(0)),
        };
        let max_pages = mem_max.unwrap_or(65536).min(config.max_memory_pages as u64);
        if mem_initial > max_pages {
            return Err(VmmError::Limit(format!(
                "the module's memory starts at {mem_initial} pages, above the per-VM limit of {} pages (--max-memory)",
                config.max_memory_pages
            )));
        }
        let mut table_initial = Vec::new();
        let mut imported_tables = imports.tables.iter();
        for (i, t) in m.tables.iter().enumerate() {
            let initial = match (&t.import, imported_tables.next()) {
                (Some(_), Some((init, _))) => *init,
                _ => t.initial,
            };
            if initial > program.layout.table_caps[i] as u64 {
                return Err(VmmError::Limit(format!(
                    "table {i} is larger than its capacity"
                )));
            }
            table_initial.push(initial as u32);
        }
        let globals = initial_globals(m, &imports.globals);
        let elem_blob = element_blob(m, &globals);
        let data_blob: Vec<u8> = m
            .datas
            .iter()
            .flat_map(|d| d.bytes.iter().copied())
            .collect();
        let shape = FleetShape {
            layout: InterleavedLayout {
                num_vms: config.num_vms,
                interleave: program.options.interleave,
                max_pages: max_pages as u32,
                stack_words: config
                    .stack_words
                    .max(FRAME_HEADER + program.layout.ret_words),
                num_globals: m.globals.len().max(1) as u32,
                guard_regions: program.options.memory_checks == MemoryChecks::Guard,
            },
            num_tables: m.tables.len().max(1) as u32,
            table_words: program.layout.table_words,
            num_segments: (m.datas.len() + m.elems.len()).max(1) as u32,
            ret_words: program.layout.ret_words,
            max_depth: config.max_call_depth,
            data_bytes: data_blob.len() as u64,
            elem_refs: elem_blob.len() as u64,
        };
        let n = config.num_vms as u64;
        if shape.layout.guard_regions && n.saturating_mul(GUARD_STRIDE) > MAX_GUARDED_BYTES {
            return Err(VmmError::Limit(format!(
                "guard regions reserve {} MiB of address space per VM: {n} VMs need more than \
                 the {} TiB a fleet may reserve (at most {} VMs; --memory-checks explicit has \
                 no such limit)",
                GUARD_STRIDE >> 20,
                MAX_GUARDED_BYTES >> 40,
                MAX_GUARDED_BYTES / GUARD_STRIDE
            )));
        }
        // A guarded memory is host address space, not a device buffer (checked above).
        let device_bytes = || {
            FleetBuffer::ALL
                .iter()
                .filter(|&&b| !(shape.layout.guard_regions && b == FleetBuffer::Mem))
                .map(|&b| shape.bytes(b))
        };
        let total: u64 = device_bytes().sum();
        let largest = device_bytes().max().unwrap_or(0);
        let kernel = program
            .kernels
            .first()
            .ok_or_else(|| VmmError::Limit("the program has no kernel".into()))?
            .clone();
        for k in &program.kernels {
            k.check_capacity(n, total.div_ceil(n), largest.div_ceil(n))?;
        }
        let start = Instant::now();
        let device = kernel.create_fleet(&shape, &data_blob, &elem_blob, VmmOnly(()))?;
        let stats = FleetStats {
            allocate: start.elapsed(),
            ..FleetStats::default()
        };
        let mut fleet = Fleet {
            host_stops: vec![None; config.num_vms as usize],
            parked: vec![Parked::No; config.num_vms as usize],
            supervised: false,
            fuel: config.fuel,
            timeout: config.timeout,
            stats,
            storage: FleetStorage::new(device),
            program,
            imports,
            initial_pages: mem_initial as u32,
            table_initial,
            trace: None,
        };
        if fleet.program.options.trace {
            fleet.trace = Some(TraceRecorder::new(
                config.num_vms,
                DEFAULT_TRACE_WORDS_PER_VM,
            ));
        }
        fleet.instantiate(&globals)?;
        Ok(fleet)
    }

    /// Keeps at most `words` trace words of each VM from now on (a traced kernel; the VMs'
    /// records so far are dropped).
    pub fn set_trace_limit(&mut self, words: usize) {
        if let Some(t) = &mut self.trace {
            *t = TraceRecorder::new(self.storage.controls.len() as u32, words);
        }
    }

    /// Every VM's trace records since the last call, if the kernel traces.
    pub fn take_trace(&mut self) -> Option<Vec<JobTrace>> {
        self.trace.as_ref().map(TraceRecorder::take)
    }

    /// The program this fleet runs.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// Number of VMs.
    pub fn num_vms(&self) -> u32 {
        self.storage.shape().layout.num_vms
    }

    /// VM `vm`'s memory size in pages (as of the last launch).
    pub fn memory_pages(&self, vm: u32) -> Option<u32> {
        self.storage.controls.get(vm as usize).map(|c| c.mem_pages)
    }

    /// Reads `len` bytes of VM `vm`'s memory at `offset`, which must lie in the memory the VM
    /// may grow to (not necessarily in its current size).
    pub fn read_memory(&mut self, vm: u32, offset: u64, len: usize) -> Result<Vec<u8>, VmmError> {
        let layout = self.storage.shape().layout;
        let inside = offset
            .checked_add(len as u64)
            .is_some_and(|end| end <= layout.mem_stride());
        if vm >= layout.num_vms || !inside {
            return Err(VmmError::Limit(format!(
                "{len} bytes at {offset} of VM {vm} lie outside the fleet's memory"
            )));
        }
        let ranges = merge_adjacent(layout.memory_ranges(vm, offset, len as u64));
        self.storage.read_bytes(FleetBuffer::Mem, &ranges)
    }

    /// The current size of table `table` of VM `vm`.
    pub fn table_size(&mut self, vm: u32, table: u32) -> Result<u32, VmmError> {
        let shape = *self.storage.shape();
        if vm >= shape.layout.num_vms || table >= shape.num_tables {
            return Err(VmmError::Limit(format!("VM {vm} has no table {table}")));
        }
        let range = PerVmArray::TABLE_SIZES.bytes(&shape, vm, table as u64, 1);
        let b = self.storage.read_bytes(FleetBuffer::TableSizes, &[range])?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads global export `name` of VM `vm`.
    pub fn global(&mut self, vm: u32, name: &str) -> Result<Option<Value>, VmmError> {
        let Some(crate::frontend::ExportKind::Global(g)) = self.program.module.export(name) else {
            return Ok(None);
        };
        let Some(ty) = self.program.module.globals.get(g as usize).map(|g| g.ty) else {
            return Ok(None);
        };
        let shape = *self.storage.shape();
        if vm >= shape.layout.num_vms {
            return Ok(None);
        }
        let range = PerVmArray::GLOBALS.bytes(&shape, vm, g as u64, 1);
        let b = self.storage.read_bytes(FleetBuffer::Globals, &[range])?;
        let word = u64::from_le_bytes(b.try_into().unwrap_or_default());
        Ok(Some(Value::from_word(ty, word)))
    }

    /// Invokes export `name` on the first `args.len()` VMs, VM i with `args[i]`.
    pub fn invoke(&mut self, name: &str, args: &[Vec<Value>]) -> Result<Vec<Outcome>, VmmError> {
        let func = match self.program.module.export(name) {
            Some(crate::frontend::ExportKind::Func(f)) => f,
            _ => return Err(VmmError::NoSuchExport(name.to_string())),
        };
        let checks = Instant::now();
        let ty = self.program.module.func_type(func).clone();
        for a in args {
            let ok = a.len() == ty.params().len()
                && a.iter().zip(ty.params()).all(|(v, t)| v.has_type(*t));
            if !ok {
                return Err(VmmError::BadArguments {
                    name: name.to_string(),
                    expected: ty
                        .params()
                        .iter()
                        .map(|t| format!("{t}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    got: format!("{a:?}"),
                });
            }
        }
        if args.len() > self.num_vms() as usize {
            return Err(VmmError::Limit(format!(
                "{} argument sets for a fleet of {} VMs",
                args.len(),
                self.num_vms()
            )));
        }
        self.stats.schedule += checks.elapsed();
        self.run_function(func, args)
    }

    /// Invokes export `name` once per job, in batches of at most one job per VM; every batch
    /// after the first starts from freshly instantiated VMs.
    pub fn invoke_batched(
        &mut self,
        name: &str,
        jobs: &[Vec<Value>],
    ) -> Result<Vec<Outcome>, VmmError> {
        let mut outcomes = Vec::with_capacity(jobs.len());
        for (i, batch) in jobs.chunks(self.num_vms() as usize).enumerate() {
            if i > 0 {
                self.reset()?;
            }
            outcomes.extend(self.invoke(name, batch)?);
        }
        Ok(outcomes)
    }

    /// Invokes function `func` (any function index) on the first `args.len()` VMs. Arguments
    /// are not type-checked here: [`Fleet::invoke`] does that for exports.
    pub fn invoke_function(
        &mut self,
        func: u32,
        args: &[Vec<Value>],
    ) -> Result<Vec<Outcome>, VmmError> {
        self.run_function(func, args)
    }

    /// Hands `func` and each VM's arguments to the device (`ENTRY`), runs launches and
    /// hypercalls until no VM is left to run, and collects the outcomes.
    pub(super) fn run_function(
        &mut self,
        func: u32,
        args: &[Vec<Value>],
    ) -> Result<Vec<Outcome>, VmmError> {
        let shape = *self.storage.shape();
        let words = args.iter().map(Vec::len).max().unwrap_or(0);
        if words > shape.ret_words as usize
            || FRAME_HEADER as usize + words > shape.layout.stack_words as usize
        {
            return Err(VmmError::Limit(
                "call stack too small for the arguments".into(),
            ));
        }
        let schedule = Instant::now();
        for (vm, ctl) in self.storage.controls.iter_mut().enumerate() {
            *ctl = VmControl {
                mem_pages: ctl.mem_pages,
                ..VmControl::default()
            };
            match args.get(vm) {
                None => ctl.status = status::DONE,
                Some(_) => {
                    ctl.status = status::ENTRY;
                    ctl.func = func;
                    ctl.fuel = self.fuel;
                }
            }
        }
        self.storage.mark_dirty();
        self.host_stops.fill(None);
        self.parked.fill(Parked::No);
        let entries: Vec<(u32, Vec<u64>)> = args
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.is_empty())
            .map(|(vm, a)| (vm as u32, a.iter().map(|v| v.to_word()).collect()))
            .collect();
        let moved = self.storage.transfer;
        self.storage.write_results(&entries)?;
        let transfer = self.storage.transfer.saturating_sub(moved);
        self.stats.schedule += schedule.elapsed().saturating_sub(transfer);

        let deadline = self.timeout.map(|t| Instant::now() + t);
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.stop_unfinished(HostStop::Trap(TrapKind::Timeout));
                break;
            }
            let schedule = Instant::now();
            let next = self.next_partition();
            self.stats.schedule += schedule.elapsed();
            match next {
                Some(p) => self.launch(p, deadline, &[])?,
                None => {
                    let (serviced, wake) = self.service_round()?;
                    if serviced == 0 {
                        // Nothing to run and nothing served: only parked VMs are left, if any.
                        // Sleep until the first of them is due (or the deadline), then serve.
                        let Some(wake) = wake else { break };
                        let until = deadline.map_or(wake, |d| d.min(wake));
                        std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    }
                }
            }
        }
        self.collect(func, args.len())
    }

    /// Launches partition `p`'s kernel; direct host calls made at or after `deadline`, or
    /// after VM `vm`'s `vm_deadlines[vm]`, stop their VM with `timeout`.
    pub(super) fn launch(
        &mut self,
        p: usize,
        deadline: Option<Instant>,
        vm_deadlines: &[Option<Instant>],
    ) -> Result<(), VmmError> {
        self.storage.push_controls()?;
        let kernel = self.program.kernels[p].clone();
        let program = self.program.clone();
        let imports = DirectImports::new(
            &program.module,
            &mut *self.imports.host,
            &mut self.host_stops,
            deadline,
            vm_deadlines,
            self.trace.as_ref(),
        );
        let times = kernel.launch(self.storage.device(), &imports)?;
        self.stats.hypercalls += imports.served.into_inner();
        self.stats.launches += 1;
        self.stats.execute += times.execute;
        self.stats.transfer += times.transfer;
        self.storage.pull_controls()
    }

    /// Serves the hypercalls that are due ([`Fleet::service_hypercalls`]), timed.
    pub(super) fn service_round(&mut self) -> Result<(u64, Option<Instant>), VmmError> {
        let start = Instant::now();
        let moved = self.storage.transfer;
        let (serviced, wake) = self.service_hypercalls()?;
        let transfer = self.storage.transfer.saturating_sub(moved);
        self.stats.hypercall_service += start.elapsed().saturating_sub(transfer);
        self.stats.hypercalls += serviced;
        Ok((serviced, wake))
    }

    /// How VM `vm` ended, if it has (its results, when it returned, are `results`).
    pub(super) fn ending(
        &self,
        vm: usize,
        results: impl FnOnce() -> Vec<Value>,
    ) -> Option<Outcome> {
        match self.host_stops[vm] {
            Some(HostStop::Trap(kind)) => return Some(Outcome::Trapped(kind)),
            Some(HostStop::Exit(code)) => return Some(Outcome::Exited(code)),
            Some(HostStop::Wait(_) | HostStop::Park) | None => {}
        }
        let ctl = self.storage.controls[vm];
        match ctl.status {
            status::DONE => Some(Outcome::Returned(results())),
            status::TRAPPED => Some(Outcome::Trapped(trap_kind(ctl.trap))),
            status::RUNNING
            | status::ELSEWHERE
            | status::HYPERCALL
            | status::ENTRY
            | status::RESUME => None,
            _ => Some(Outcome::Trapped(TrapKind::HostError)),
        }
    }

    /// The outcomes of the first `count` VMs after a run of `func`.
    fn collect(&mut self, func: u32, count: usize) -> Result<Vec<Outcome>, VmmError> {
        let schedule = Instant::now();
        for ctl in &self.storage.controls {
            self.stats.slow_calls += ctl.slow_calls;
            self.stats.indirect_calls += ctl.indirect_calls;
            self.stats.saved_words += ctl.saved_words;
        }
        let results = self.program.module.func_type(func).results().to_vec();
        let done: Vec<(u32, u32)> = (0..count)
            .filter(|&vm| {
                self.host_stops[vm].is_none() && self.storage.controls[vm].status == status::DONE
            })
            .map(|vm| (vm as u32, results.len() as u32))
            .collect();
        let moved = self.storage.transfer;
        let mut words = self.storage.read_results(&done)?.into_iter();
        let outcomes = (0..count)
            .map(|vm| {
                let returned = || {
                    let w = words.next().unwrap_or_default();
                    results
                        .iter()
                        .zip(w)
                        .map(|(t, w)| Value::from_word(*t, w))
                        .collect()
                };
                // Every VM has ended once the launch loop is over.
                self.ending(vm, returned)
                    .unwrap_or(Outcome::Trapped(TrapKind::HostError))
            })
            .collect();
        let transfer = self.storage.transfer.saturating_sub(moved);
        self.stats.schedule += schedule.elapsed().saturating_sub(transfer);
        Ok(outcomes)
    }

    /// Chooses the partition that most waiting VMs need next and marks the running and
    /// waiting VMs for it (`RUNNING` or `ELSEWHERE`); VMs the host handed back (`ENTRY`,
    /// `RESUME`) are admitted by whichever partition runs. `None` when no VM waits for a
    /// kernel.
    pub(super) fn next_partition(&mut self) -> Option<usize> {
        let kernels = self.program.kernels.len();
        let mut wanted: Vec<Option<usize>> = vec![None; self.storage.controls.len()];
        let mut counts = vec![0usize; kernels];
        for (vm, ctl) in self.storage.controls.iter().enumerate() {
            if !matches!(
                ctl.status,
                status::RUNNING | status::ELSEWHERE | status::ENTRY | status::RESUME
            ) {
                continue;
            }
            let p = match self.program.partition_of.get(ctl.func as usize) {
                Some(&p) if kernels > 1 && (p as usize) < kernels => p as usize,
                _ => 0, // an import, no caller, or one kernel: any partition handles it
            };
            wanted[vm] = Some(p);
            counts[p] += 1;
        }
        let (best, &n) = counts.iter().enumerate().max_by_key(|(_, c)| **c)?;
        if n == 0 {
            return None;
        }
        let mut changed = false;
        for (ctl, w) in self.storage.controls.iter_mut().zip(&wanted) {
            if let (Some(p), status::RUNNING | status::ELSEWHERE) = (w, ctl.status) {
                let s = if *p == best {
                    status::RUNNING
                } else {
                    status::ELSEWHERE
                };
                changed |= s != ctl.status;
                ctl.status = s;
            }
        }
        if changed {
            self.storage.mark_dirty();
        }
        Some(best)
    }

    /// Stops every VM that has not finished with `stop`.
    pub(super) fn stop_unfinished(&mut self, stop: HostStop) {
        for (vm, ctl) in self.storage.controls.iter_mut().enumerate() {
            if matches!(
                ctl.status,
                status::RUNNING
                    | status::ELSEWHERE
                    | status::HYPERCALL
                    | status::ENTRY
                    | status::RESUME
            ) {
                ctl.status = status::TRAPPED;
                self.host_stops[vm] = Some(stop);
            }
        }
        self.storage.mark_dirty();
    }

    /// Where the fleet's time went so far, and what it moved.
    pub fn stats(&self) -> FleetStats {
        let traffic = self.storage.traffic();
        FleetStats {
            transfer: self.stats.transfer + self.storage.transfer,
            bytes_to_device: traffic.to_device,
            bytes_from_device: traffic.from_device,
            transfers: traffic.transfers,
            ..self.stats
        }
    }

    /// Bytes moved between host and device so far.
    pub fn traffic(&self) -> Traffic {
        self.storage.traffic()
    }
}
