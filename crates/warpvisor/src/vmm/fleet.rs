//! A fleet of VMs running one [`Program`]: instantiation, invocation, hypercall service.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmparser::ValType;

use super::abi::{status, VmControl, FRAME_HEADER, NO_FRAME, NULL_REF};
use super::buffers::FleetBuffers;
use super::{Outcome, Program, TrapKind, Value, VmMemory, VmmError};
use crate::frontend::{ConstExpr, SegmentMode};
use crate::layout::{InterleavedLayout, PAGE};

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
}

/// Services calls to imported functions (hypercalls).
pub trait HostFunctions {
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

/// N VMs running one program.
pub struct Fleet {
    program: Arc<Program>,
    buffers: FleetBuffers,
    imports: Imports,
    initial_pages: u32,
    table_initial: Vec<u32>,
    /// Highest memory size (bytes) any VM reached: what a reset must clear.
    dirty_bytes: u64,
    /// How the host stopped a VM while servicing it (not visible to the kernel).
    host_stops: Vec<Option<HostStop>>,
    /// When each parked VM's hypercall is to be made again (`HostStop::Wait`).
    parked_until: Vec<Option<Instant>>,
    /// Fuel each VM starts an invocation with.
    fuel: u32,
    /// Wall-clock limit of one invocation.
    timeout: Option<Duration>,
    /// Where the time went so far.
    stats: FleetStats,
}

/// Where a fleet's time went, summed over its invocations.
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetStats {
    /// Kernel launches.
    pub launches: u64,
    /// Time the kernels ran.
    pub execute: Duration,
    /// Time spent moving fleet state between host and device.
    pub transfer: Duration,
    /// Hypercalls serviced.
    pub hypercalls: u64,
    /// Time spent servicing them on the host.
    pub hypercall_service: Duration,
    /// Time spent (re)instantiating VMs: clearing memories, segments, globals, tables.
    pub instantiate: Duration,
    /// Calls that went through the trampoline: continuation calls and hypercalls.
    pub slow_calls: u64,
    /// `call_indirect`s that reached a function.
    pub indirect_calls: u64,
    /// Live values saved in continuation frames (each restored once when the call returns).
    pub saved_words: u64,
}

impl FleetStats {
    /// What happened between `earlier` (a snapshot of the same fleet) and `self`.
    pub fn since(&self, earlier: &FleetStats) -> FleetStats {
        FleetStats {
            launches: self.launches.saturating_sub(earlier.launches),
            execute: self.execute.saturating_sub(earlier.execute),
            transfer: self.transfer.saturating_sub(earlier.transfer),
            hypercalls: self.hypercalls.saturating_sub(earlier.hypercalls),
            hypercall_service: self
                .hypercall_service
                .saturating_sub(earlier.hypercall_service),
            instantiate: self.instantiate.saturating_sub(earlier.instantiate),
            slow_calls: self.slow_calls.saturating_sub(earlier.slow_calls),
            indirect_calls: self.indirect_calls.saturating_sub(earlier.indirect_calls),
            saved_words: self.saved_words.saturating_sub(earlier.saved_words),
        }
    }
}

fn eval(expr: &ConstExpr, globals: &[Value], ty: ValType) -> Value {
    match *expr {
        ConstExpr::I32(v) => Value::I32(v),
        ConstExpr::I64(v) => Value::I64(v),
        ConstExpr::F32(b) => Value::F32(b),
        ConstExpr::F64(b) => Value::F64(b),
        ConstExpr::RefNull => Value::zero(ty),
        ConstExpr::RefFunc(f) => Value::FuncRef(Some(f)),
        ConstExpr::GlobalGet(g) => globals.get(g as usize).copied().unwrap_or(Value::zero(ty)),
    }
}

/// The initial value of every global: imported ones from `imported` (in import order), the
/// others from their initializers, which may read earlier globals.
fn initial_globals(m: &crate::frontend::Module<'_>, imported: &[Value]) -> Vec<Value> {
    let mut globals: Vec<Value> = Vec::new();
    let mut imported = imported.iter();
    for g in &m.globals {
        let v = match &g.init {
            Some(e) => eval(e, &globals, g.ty),
            None => imported.next().copied().unwrap_or(Value::zero(g.ty)),
        };
        globals.push(v);
    }
    globals
}

impl Fleet {
    /// Allocates a fleet for `program` and instantiates every VM.
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
        let layout = InterleavedLayout {
            num_vms: config.num_vms,
            interleave: program.options.interleave,
            max_pages: max_pages as u32,
            stack_words: config
                .stack_words
                .max(FRAME_HEADER + program.layout.ret_words),
            num_globals: m.globals.len().max(1) as u32,
        };
        let per_vm_stack = layout.stack_words as u64 * 8;
        let per_vm = layout.mem_stride()
            + per_vm_stack
            + layout.num_globals as u64 * 8
            + program.layout.table_words as u64 * 4
            + program.layout.ret_words as u64 * 8
            + 64;
        for k in &program.kernels {
            k.check_capacity(
                config.num_vms as u64,
                per_vm,
                layout.mem_stride().max(per_vm_stack),
            )?;
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
        // Global values (imported ones first), then the element blob they may feed.
        let globals = initial_globals(m, &imports.globals);
        let mut elem_blob = Vec::new();
        for seg in &m.elems {
            for item in &seg.items {
                let v = eval(item, &globals, ValType::Ref(seg.element));
                elem_blob.push(v.to_word() as u32);
            }
        }
        let data_blob: Vec<u8> = m
            .datas
            .iter()
            .flat_map(|d| d.bytes.iter().copied())
            .collect();
        let buffers = FleetBuffers::new(
            layout,
            m.tables.len() as u32,
            program.layout.table_words,
            (m.datas.len() + m.elems.len()) as u32,
            program.layout.ret_words,
            config.max_call_depth,
            data_blob,
            elem_blob,
        )?;
        let mut fleet = Fleet {
            host_stops: vec![None; config.num_vms as usize],
            parked_until: vec![None; config.num_vms as usize],
            fuel: config.fuel,
            timeout: config.timeout,
            stats: FleetStats::default(),
            program,
            buffers,
            imports,
            initial_pages: mem_initial as u32,
            table_initial,
            dirty_bytes: 0,
        };
        fleet.instantiate(&globals)?;
        Ok(fleet)
    }

    /// The program this fleet runs.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// The fleet's buffers (memory read-back, tests).
    pub fn buffers(&self) -> &FleetBuffers {
        &self.buffers
    }

    /// Number of VMs.
    pub fn num_vms(&self) -> u32 {
        self.buffers.layout.num_vms
    }

    /// Puts every VM back in its freshly instantiated state.
    pub fn reset(&mut self) -> Result<(), VmmError> {
        let globals = initial_globals(&self.program.module, &self.imports.globals);
        self.instantiate(&globals)
    }

    fn instantiate(&mut self, globals: &[Value]) -> Result<(), VmmError> {
        let start = Instant::now();
        let result = self.instantiate_untimed(globals);
        self.stats.instantiate += start.elapsed();
        result
    }

    fn instantiate_untimed(&mut self, globals: &[Value]) -> Result<(), VmmError> {
        let program = self.program.clone();
        let m = &program.module;
        let n = self.num_vms();
        let layout = self.buffers.layout;
        // Clear what earlier runs wrote.
        if self.dirty_bytes > 0 {
            let mem = self.buffers.mem.as_mut_slice();
            if layout.interleave == 0 {
                for vm in 0..n {
                    let start = layout.cell_addr(vm, 0);
                    mem[start..start + self.dirty_bytes as usize].fill(0);
                }
            } else {
                let end = (self.dirty_bytes * n as u64) as usize;
                let end = end.min(mem.len());
                mem[..end].fill(0);
            }
        }
        self.dirty_bytes = self.initial_pages as u64 * PAGE;
        let b = &mut self.buffers;
        b.mem_pages.fill(self.initial_pages);
        for vm in 0..n {
            for (g, v) in globals.iter().enumerate() {
                b.globals[layout.global_index(vm, g as u32)] = v.to_word();
            }
        }
        b.tables.fill(NULL_REF);
        let nt = m.tables.len().max(1);
        for vm in 0..n as usize {
            for (t, init) in self.table_initial.iter().enumerate() {
                b.table_sizes[vm * nt + t] = *init;
            }
        }
        b.dropped.fill(0);
        b.vms.fill(VmControl::default());
        self.host_stops.fill(None);
        self.parked_until.fill(None);

        // Element segments, then data segments, in order; the first failure traps.
        let nseg = (m.datas.len() + m.elems.len()).max(1);
        let words = program.layout.table_words as usize;
        for (i, seg) in m.elems.iter().enumerate() {
            let flag = m.datas.len() + i;
            match seg.mode {
                SegmentMode::Passive => continue,
                SegmentMode::Declared => {}
                SegmentMode::Active { target, offset } => {
                    let off = eval(&offset, globals, ValType::I32).to_word() as u32 as u64;
                    let len = seg.items.len() as u64;
                    let t = target as usize;
                    if off + len > self.table_initial[t] as u64 {
                        return Err(VmmError::InstantiationTrap(TrapKind::TableOutOfBounds));
                    }
                    let base = program.layout.elem_base[i] as usize;
                    let tbase = program.layout.table_base[t] as usize;
                    for vm in 0..n as usize {
                        for k in 0..len as usize {
                            b.tables[vm * words + tbase + off as usize + k] = b.elem_blob[base + k];
                        }
                    }
                }
            }
            for vm in 0..n as usize {
                b.dropped[vm * nseg + flag] = 1;
            }
        }
        for (i, seg) in m.datas.iter().enumerate() {
            if let SegmentMode::Active { offset, .. } = seg.mode {
                let off = eval(&offset, globals, ValType::I32).to_word() as u32 as u64;
                if off + seg.bytes.len() as u64 > self.initial_pages as u64 * PAGE {
                    return Err(VmmError::InstantiationTrap(TrapKind::MemoryOutOfBounds));
                }
                for vm in 0..n {
                    b.write_memory(vm, off, &seg.bytes);
                }
                for vm in 0..n as usize {
                    b.dropped[vm * nseg + i] = 1;
                }
            }
        }
        if let Some(start) = m.start {
            let outcomes = self.run_function(start, &vec![Vec::new(); n as usize])?;
            if let Some(Outcome::Trapped(kind)) = outcomes
                .into_iter()
                .find(|o| matches!(o, Outcome::Trapped(_)))
            {
                return Err(VmmError::InstantiationTrap(kind));
            }
        }
        Ok(())
    }

    /// Invokes export `name` on the first `args.len()` VMs, VM i with `args[i]`.
    pub fn invoke(&mut self, name: &str, args: &[Vec<Value>]) -> Result<Vec<Outcome>, VmmError> {
        let func = match self.program.module.export(name) {
            Some(crate::frontend::ExportKind::Func(f)) => f,
            _ => return Err(VmmError::NoSuchExport(name.to_string())),
        };
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

    /// Reads global export `name` of VM `vm`.
    pub fn global(&self, vm: u32, name: &str) -> Option<Value> {
        match self.program.module.export(name)? {
            crate::frontend::ExportKind::Global(g) => {
                let ty = self.program.module.globals.get(g as usize)?.ty;
                let w = self.buffers.globals[self.buffers.layout.global_index(vm, g)];
                Some(Value::from_word(ty, w))
            }
            _ => None,
        }
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

    fn run_function(&mut self, func: u32, args: &[Vec<Value>]) -> Result<Vec<Outcome>, VmmError> {
        let layout = self.buffers.layout;
        let n = layout.num_vms;
        if FRAME_HEADER as usize + args.first().map_or(0, Vec::len) > layout.stack_words as usize {
            return Err(VmmError::Limit(
                "call stack too small for the arguments".into(),
            ));
        }
        for vm in 0..n {
            let b = &mut self.buffers;
            let ctl = &mut b.vms[vm as usize];
            *ctl = VmControl::default();
            self.host_stops[vm as usize] = None;
            self.parked_until[vm as usize] = None;
            match args.get(vm as usize) {
                None => ctl.status = status::DONE,
                Some(a) => {
                    ctl.depth = 1;
                    ctl.fuel = self.fuel;
                    b.stack[layout.stack_index(vm, 0)] = NO_FRAME;
                    b.stack[layout.stack_index(vm, 1)] = func as u64;
                    b.stack[layout.stack_index(vm, 2)] = 0;
                    for (i, v) in a.iter().enumerate() {
                        b.stack[layout.stack_index(vm, FRAME_HEADER + i as u32)] = v.to_word();
                    }
                }
            }
        }
        let deadline = self.timeout.map(|t| Instant::now() + t);
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.stop_unfinished(HostStop::Trap(TrapKind::Timeout));
                break;
            }
            match self.next_partition() {
                Some(p) => {
                    let times = self.program.kernels[p].launch(&mut self.buffers)?;
                    self.stats.launches += 1;
                    self.stats.execute += times.execute;
                    self.stats.transfer += times.transfer;
                }
                None => {
                    let start = Instant::now();
                    let (serviced, wake) = self.service_hypercalls();
                    self.stats.hypercall_service += start.elapsed();
                    self.stats.hypercalls += serviced;
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
        for ctl in &self.buffers.vms {
            self.stats.slow_calls += ctl.slow_calls;
            self.stats.indirect_calls += ctl.indirect_calls;
            self.stats.saved_words += ctl.saved_words;
        }
        let max_pages = self.buffers.mem_pages.iter().copied().max().unwrap_or(0) as u64;
        self.dirty_bytes = self.dirty_bytes.max(max_pages * PAGE);
        let results = self.program.module.func_type(func).results().to_vec();
        let rw = self.program.layout.ret_words as usize;
        Ok((0..args.len())
            .map(|vm| {
                let ctl = self.buffers.vms[vm];
                match self.host_stops[vm] {
                    Some(HostStop::Trap(kind)) => return Outcome::Trapped(kind),
                    Some(HostStop::Exit(code)) => return Outcome::Exited(code),
                    Some(HostStop::Wait(_)) | None => {}
                }
                match ctl.status {
                    status::DONE => Outcome::Returned(
                        results
                            .iter()
                            .enumerate()
                            .map(|(k, t)| Value::from_word(*t, self.buffers.ret[vm * rw + k]))
                            .collect(),
                    ),
                    status::TRAPPED => Outcome::Trapped(TrapKind::from_code(ctl.trap)),
                    _ => Outcome::Trapped(TrapKind::HostError),
                }
            })
            .collect())
    }

    /// Chooses the partition that most waiting VMs need next, marks exactly those VMs running
    /// and the other waiting ones `ELSEWHERE`; `None` when no VM waits for a kernel.
    fn next_partition(&mut self) -> Option<usize> {
        let layout = self.buffers.layout;
        let single = self.program.kernels.len() == 1;
        let mut wanted: Vec<Option<usize>> = vec![None; layout.num_vms as usize];
        let mut counts = vec![0usize; self.program.kernels.len()];
        for (vm, ctl) in self.buffers.vms.iter().enumerate() {
            if ctl.status != status::RUNNING && ctl.status != status::ELSEWHERE {
                continue;
            }
            let p = if single {
                0
            } else {
                let fid = self.buffers.stack[layout.stack_index(vm as u32, ctl.fp + 1)] as usize;
                match self.program.partition_of.get(fid) {
                    Some(&p) if (p as usize) < counts.len() => p as usize,
                    _ => 0, // an import or an unknown id: any partition handles or traps it
                }
            };
            wanted[vm] = Some(p);
            counts[p] += 1;
        }
        let (best, &n) = counts.iter().enumerate().max_by_key(|(_, c)| **c)?;
        if n == 0 {
            return None;
        }
        for (ctl, w) in self.buffers.vms.iter_mut().zip(&wanted) {
            if let Some(p) = w {
                ctl.status = if *p == best {
                    status::RUNNING
                } else {
                    status::ELSEWHERE
                };
            }
        }
        Some(best)
    }

    /// Stops every VM that has not finished with `stop`.
    fn stop_unfinished(&mut self, stop: HostStop) {
        for (vm, ctl) in self.buffers.vms.iter_mut().enumerate() {
            if matches!(
                ctl.status,
                status::RUNNING | status::ELSEWHERE | status::HYPERCALL
            ) {
                ctl.status = status::TRAPPED;
                self.host_stops[vm] = Some(stop);
            }
        }
    }

    /// Where the fleet's time went so far.
    pub fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Services every VM stopped at a hypercall but those parked until later; returns how
    /// many calls completed, and when the first parked VM is due.
    fn service_hypercalls(&mut self) -> (u64, Option<Instant>) {
        let layout = self.buffers.layout;
        let program = self.program.clone();
        let rw = program.layout.ret_words as usize;
        let mut serviced = 0;
        let mut wake: Option<Instant> = None;
        let now = Instant::now();
        for vm in 0..layout.num_vms {
            let ctl = self.buffers.vms[vm as usize];
            if ctl.status != status::HYPERCALL {
                continue;
            }
            if let Some(t) = self.parked_until[vm as usize] {
                if t > now {
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                    continue;
                }
                self.parked_until[vm as usize] = None;
            }
            let import = ctl.hypercall;
            let ty = program.module.func_type(import).clone();
            let args: Vec<Value> = ty
                .params()
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let w = self.buffers.stack
                        [layout.stack_index(vm, ctl.fp + FRAME_HEADER + i as u32)];
                    Value::from_word(*t, w)
                })
                .collect();
            let result = {
                let host = &mut self.imports.host;
                let mut memory = VmMemory::new(&mut self.buffers, vm);
                // A host function's own failure is its VM's trap, not the host's.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    host.call(&mut memory, import, &args)
                }))
                .unwrap_or(Err(HostStop::Trap(TrapKind::HostError)))
            };
            if let Err(HostStop::Wait(t)) = result {
                self.parked_until[vm as usize] = Some(t);
                wake = Some(wake.map_or(t, |w| w.min(t)));
                continue;
            }
            serviced += 1;
            let b = &mut self.buffers;
            let ctl = &mut b.vms[vm as usize];
            match result {
                Ok(values)
                    if values.len() == ty.results().len()
                        && values.iter().zip(ty.results()).all(|(v, t)| v.has_type(*t)) =>
                {
                    for (k, v) in values.iter().enumerate() {
                        b.ret[vm as usize * rw + k] = v.to_word();
                    }
                    let caller = b.stack[layout.stack_index(vm, ctl.fp)];
                    ctl.depth -= 1;
                    if caller == NO_FRAME {
                        ctl.status = status::DONE;
                    } else {
                        ctl.fp = caller as u32;
                        ctl.status = status::RUNNING;
                    }
                }
                Ok(_) => {
                    ctl.status = status::TRAPPED;
                    self.host_stops[vm as usize] = Some(HostStop::Trap(TrapKind::HostError));
                }
                Err(stop) => {
                    // The kernel sees a stopped VM either way.
                    ctl.status = status::TRAPPED;
                    self.host_stops[vm as usize] = Some(stop);
                }
            }
        }
        (serviced, wake)
    }
}
