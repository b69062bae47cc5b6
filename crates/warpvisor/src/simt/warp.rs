//! One warp replayed in lockstep (see [`super::replay`]): its lanes, the SIMT stack, the
//! step over one block, the relaunch after hypercalls.

use std::collections::BTreeMap;

use super::blocks::{BlockEnd, BlockTable, FunctionBlocks, MemOp};
use super::memory::{LaneAccess, SectorCounter};
use super::replay::{CallModel, Counts, MemCounts, WidthResult};
use super::trace::{Region, Trace};
use super::SimtError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LaneState {
    Active,
    /// Stopped at a hypercall (or between invocations); resumes at `block` of its function.
    Parked {
        block: u32,
    },
    /// Back at the kernel's trampoline after a call or return that goes through it
    /// ([`CallModel::Continuations`]); resumes at `block` of its function in the next round.
    Trampoline {
        block: u32,
    },
    Done,
}

struct Lane<'t> {
    job: usize,
    vm: u32,
    words: &'t [u32],
    pos: usize,
    func: u32,
    /// The callers: (function, block the call returns to, whether the return goes through
    /// the trampoline).
    frames: Vec<(u32, u32, bool)>,
    state: LaneState,
}

impl Lane<'_> {
    fn peek(&self) -> Option<u32> {
        self.words.get(self.pos).copied()
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    func: u32,
    pc: u32,
    rpc: u32,
    mask: u64,
    /// The global id of the divergent branch that made the lanes outside this entry wait
    /// ([`NO_ORIGIN`]: none; [`RELAUNCH`]: lanes resumed at different places).
    origin: u32,
}

/// No divergence made this entry.
const NO_ORIGIN: u32 = u32::MAX;
/// Lanes resumed after hypercalls at different places.
pub const RELAUNCH: u32 = u32::MAX - 1;

/// Where a lane goes after a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Next {
    Block(u32),
    Call(u32),
}

pub(super) struct Warp<'t, 'r> {
    trace: &'t Trace,
    /// The control flow replayed (the trace's, or the one its runs showed).
    blocks: &'t BlockTable,
    lanes: Vec<Lane<'t>>,
    stack: Vec<Entry>,
    sectors: &'r mut SectorCounter,
    result: &'r mut WidthResult,
    counts: Counts,
    /// Lanes that can run (neither parked nor done).
    active: u64,
    /// The lanes of the current step (reused).
    step_lanes: Vec<usize>,
    /// Where the current step's lanes go (reused).
    step_next: Vec<(Next, u64)>,
    /// This warp's memory counts per region (added to the result when it ends).
    mem_counts: [MemCounts; 3],
    /// The current memory instruction's accesses, per region (reused).
    accesses: [Vec<LaneAccess>; 3],
    /// Whether to count sectors (else the records are only skipped).
    pub(super) with_memory: bool,
    /// How calls run.
    pub(super) calls: CallModel,
    /// Every block the warp issues, in order, when asked (`accel_sim`).
    record: Option<Vec<IssuedBlock>>,
}

/// One block a warp issued: its global id, the lanes that ran it, and for each of its memory
/// operators the address each of those lanes accessed (`None`: the lane trapped before).
#[derive(Debug, Clone)]
pub struct IssuedBlock {
    /// Global block id.
    pub id: u32,
    /// Active lanes.
    pub mask: u64,
    /// Per memory operator, per active lane in lane order: the VM and the first address.
    pub addresses: Vec<Vec<Option<(u32, u32)>>>,
}

/// Replays the warp of jobs `jobs` and returns every block it issued, in order, with the
/// warp's instruction counts.
pub fn issued_blocks(
    trace: &Trace,
    jobs: &[usize],
) -> Result<(Vec<IssuedBlock>, Counts), SimtError> {
    let width = jobs.len().max(1) as u32;
    if width > 64 {
        return Err(SimtError::Limit(format!(
            "a warp of {width} lanes: at most 64"
        )));
    }
    let mut part = WidthResult::empty(width, trace);
    let mut sectors = SectorCounter::new(trace.header.vms, trace.header.max_pages);
    let mut warp = Warp::new(trace, &trace.header.blocks, jobs, &mut sectors, &mut part)?;
    warp.record = Some(Vec::new());
    let counts = warp.run()?;
    Ok((warp.record.take().unwrap_or_default(), counts))
}

impl<'t, 'r> Warp<'t, 'r> {
    pub(super) fn new(
        trace: &'t Trace,
        blocks: &'t BlockTable,
        jobs: &[usize],
        sectors: &'r mut SectorCounter,
        result: &'r mut WidthResult,
    ) -> Result<Self, SimtError> {
        let vms = trace.header.vms.max(1);
        let mut lanes = Vec::with_capacity(jobs.len());
        for &job in jobs {
            let words = trace.jobs[job].words.as_slice();
            let mut lane = Lane {
                job,
                vm: (job as u64 % vms as u64) as u32,
                words,
                pos: 0,
                func: 0,
                frames: Vec::new(),
                state: LaneState::Done,
            };
            if let Some(id) = lane.peek() {
                let (f, b) = locate(blocks, job, id)?;
                lane.func = f;
                lane.state = LaneState::Parked { block: b };
            }
            lanes.push(lane);
        }
        Ok(Warp {
            trace,
            blocks,
            lanes,
            stack: Vec::new(),
            sectors,
            result,
            counts: Counts::default(),
            active: 0,
            step_lanes: Vec::new(),
            step_next: Vec::new(),
            mem_counts: Default::default(),
            accesses: Default::default(),
            with_memory: true,
            calls: CallModel::Continuations,
            record: None,
        })
    }

    fn function(&self, f: u32, job: usize) -> Result<&'t FunctionBlocks, SimtError> {
        self.blocks
            .function(f)
            .ok_or_else(|| mismatch(job, format!("function {f} has no body")))
    }

    /// Sets lane `i`'s state, keeping the active mask.
    fn set_state(&mut self, i: usize, state: LaneState) {
        if state == LaneState::Active {
            self.active |= 1 << i;
        } else {
            self.active &= !(1 << i);
        }
        self.lanes[i].state = state;
    }

    /// The warp has nothing left to run: starts the trampoline's next round for the lanes
    /// waiting there, else relaunches the kernel for every parked lane (a launch). Lanes at
    /// the same place share an entry (with native calls, with entries for their callers
    /// below it). `false` when no lane is left.
    fn relaunch(&mut self) -> Result<bool, SimtError> {
        let mut resumed: Vec<(usize, u32)> = Vec::new();
        // The trampoline's next round comes first: lanes parked at hypercalls wait for the
        // kernel to end and the host to answer.
        let round = self
            .lanes
            .iter()
            .any(|l| matches!(l.state, LaneState::Trampoline { .. }));
        for i in 0..self.lanes.len() {
            let lane = &self.lanes[i];
            let block = match lane.state {
                LaneState::Trampoline { block } => block,
                LaneState::Parked { block } if !round => block,
                _ => continue,
            };
            if lane.peek().is_none() {
                self.set_state(i, LaneState::Done);
                continue;
            }
            resumed.push((i, block));
            self.set_state(i, LaneState::Active);
        }
        if resumed.is_empty() {
            return Ok(false);
        }
        if !round {
            self.result.launches += 1;
        }
        self.resume_level(&resumed, 0)?;
        Ok(true)
    }

    /// The place of a resumed lane at call depth `depth`: its function there and the block
    /// it goes on at (the return block of its call, or where it resumes at its own depth).
    fn place(&self, lane: usize, resume: u32, depth: usize) -> (u32, u32) {
        let l = &self.lanes[lane];
        match l.frames.get(depth) {
            Some(&(f, ret, _)) if self.calls == CallModel::Direct => (f, ret),
            // With continuations the trampoline runs only the top frame.
            _ => (l.func, resume),
        }
    }

    /// Pushes the entries that resume `lanes` (lane, resume block) from call depth `depth`
    /// up. On a GPU the relaunched kernel's trampoline runs each VM's top frame; lanes in one
    /// function at different blocks diverge there and meet again where those blocks' paths
    /// meet (their common post-dominator), and a lane deeper in a call gets back to its call's
    /// return block first.
    fn resume_level(&mut self, lanes: &[(usize, u32)], depth: usize) -> Result<(), SimtError> {
        let job = self.lanes[lanes[0].0].job;
        // By function at this depth, then by block.
        let mut by_func: BTreeMap<u32, BTreeMap<u32, Vec<(usize, u32)>>> = BTreeMap::new();
        for &(i, resume) in lanes {
            let (f, b) = self.place(i, resume, depth);
            by_func
                .entry(f)
                .or_default()
                .entry(b)
                .or_default()
                .push((i, resume));
        }
        for (f, blocks) in by_func.into_iter().rev() {
            let fb = self.function(f, job)?;
            let exit = fb.exit();
            let meet = blocks
                .keys()
                .copied()
                .reduce(|a, b| common_post_dominator(fb, a, b))
                .unwrap_or(exit);
            let all = blocks
                .values()
                .flatten()
                .fold(0u64, |m, &(i, _)| m | 1 << i);
            self.stack.push(Entry {
                func: f,
                pc: meet,
                rpc: exit,
                mask: all,
                origin: NO_ORIGIN,
            });
            for (b, group) in blocks.into_iter().rev() {
                let mask = group.iter().fold(0u64, |m, &(i, _)| m | 1 << i);
                if b != meet {
                    self.stack.push(Entry {
                        func: f,
                        pc: b,
                        rpc: meet,
                        mask,
                        origin: RELAUNCH,
                    });
                }
                let deeper: Vec<(usize, u32)> = group
                    .into_iter()
                    .filter(|&(i, _)| {
                        self.calls == CallModel::Direct && self.lanes[i].frames.len() > depth
                    })
                    .collect();
                if !deeper.is_empty() {
                    self.resume_level(&deeper, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn run(&mut self) -> Result<Counts, SimtError> {
        loop {
            let Some(&top) = self.stack.last() else {
                if self.relaunch()? {
                    continue;
                }
                for (region, m) in Region::ALL.iter().zip(self.mem_counts) {
                    if m.instructions > 0 {
                        let c = self.result.memory.entry(*region).or_default();
                        c.instructions += m.instructions;
                        c.accesses += m.accesses;
                        for (total, add) in c.sectors.iter_mut().zip(m.sectors) {
                            *total += add;
                        }
                    }
                }
                return Ok(self.counts);
            };
            let mask = top.mask & self.active;
            if mask == 0 || top.pc == top.rpc {
                self.stack.pop();
                continue;
            }
            self.step(top, mask)?;
        }
    }

    /// Runs the top entry's block for the lanes of `mask` and moves the stack on.
    fn step(&mut self, top: Entry, mask: u64) -> Result<(), SimtError> {
        let first_job = self.lanes[mask.trailing_zeros() as usize].job;
        let fb = self.function(top.func, first_job)?;
        let Some(block) = fb.blocks.get(top.pc as usize) else {
            return Err(mismatch(
                first_job,
                format!(
                    "lanes left function {} before reaching block {}",
                    top.func, top.rpc
                ),
            ));
        };
        let id = fb.first_id + top.pc;
        let active = u64::from(mask.count_ones());
        let issued = Counts {
            thread: block.instructions as u64 * active,
            lockstep: block.instructions as u64,
        };
        self.counts.add(issued);
        if let Some(c) = self.result.per_function.get_mut(top.func as usize) {
            c.add(issued);
        }
        if let Some(c) = self.result.per_block.get_mut(id as usize) {
            c.add(issued);
        }
        // Idle lane slots: lanes waiting in other entries wait for this entry's divergence;
        // the rest finished, wait at a hypercall, or do not exist (a short last warp).
        let waiting = u64::from((self.active & !mask).count_ones());
        let idle = u64::from(self.result.width) - active;
        let instructions = block.instructions as u64;
        if waiting > 0 {
            *self.result.divergence.entry(top.origin).or_default() += waiting * instructions;
        }
        self.result.idle_elsewhere += (idle - waiting.min(idle)) * instructions;
        let mut lanes = std::mem::take(&mut self.step_lanes);
        lanes.clear();
        let mut bits = mask;
        while bits != 0 {
            lanes.push(bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
        for &i in &lanes {
            let lane = &mut self.lanes[i];
            if lane.peek() != Some(id) {
                return Err(mismatch(
                    lane.job,
                    format!(
                        "expected block {id} (function {} block {}), found {:?} at word {}",
                        top.func,
                        top.pc,
                        lane.peek(),
                        lane.pos
                    ),
                ));
            }
            lane.pos += 1;
        }
        if let Some(r) = &mut self.record {
            r.push(IssuedBlock {
                id,
                mask,
                addresses: Vec::with_capacity(block.mem.len()),
            });
        }
        self.memory(&block.mem, &lanes);
        // Where each lane goes (few places: a small sorted list).
        let mut next = std::mem::take(&mut self.step_next);
        next.clear();
        for &i in &lanes {
            let to = self.advance(i, top.func, top.pc, block.end, &block.succ, fb)?;
            if let Some(to) = to {
                match next.binary_search_by_key(&to, |e| e.0) {
                    Ok(k) => next[k].1 |= 1 << i,
                    Err(k) => next.insert(k, (to, 1 << i)),
                }
            }
        }
        self.step_lanes = lanes;
        let result = self.move_on(top, id, fb, &next, first_job);
        self.step_next = next;
        result
    }

    /// Moves the stack on after the top entry's block: the lanes go to `next` (sorted;
    /// calls after jumps).
    fn move_on(
        &mut self,
        top: Entry,
        id: u32,
        fb: &FunctionBlocks,
        next: &[(Next, u64)],
        first_job: usize,
    ) -> Result<(), SimtError> {
        let calls = next
            .iter()
            .filter(|(n, _)| matches!(n, Next::Call(_)))
            .count();
        let jumps = next.len() - calls;
        if calls > 0 {
            if let Some(entry) = self.stack.last_mut() {
                entry.pc = top.pc + 1;
            }
            // Lanes calling different functions diverge at the call.
            let origin = if calls > 1 { id } else { top.origin };
            for &(n, m) in next.iter().rev() {
                if let Next::Call(g) = n {
                    let exit = self.function(g, first_job)?.exit();
                    self.stack.push(Entry {
                        func: g,
                        pc: 0,
                        rpc: exit,
                        mask: m,
                        origin,
                    });
                }
            }
        } else if jumps == 1 {
            if let (Some(entry), Some(&(Next::Block(t), _))) = (self.stack.last_mut(), next.first())
            {
                entry.pc = t;
            }
        } else if jumps > 1 {
            let r = fb.ipdom[top.pc as usize];
            if let Some(entry) = self.stack.last_mut() {
                entry.pc = r;
            }
            for &(n, m) in next.iter().rev() {
                if let Next::Block(t) = n {
                    if t != r {
                        self.stack.push(Entry {
                            func: top.func,
                            pc: t,
                            rpc: r,
                            mask: m,
                            origin: id,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Consumes lane `i`'s records of the block's accesses and counts the warp's sectors.
    fn memory(&mut self, mem: &[MemOp], lanes: &[usize]) {
        if !self.with_memory {
            let words: usize = mem.iter().map(|m| m.words()).sum();
            for &i in lanes {
                let lane = &mut self.lanes[i];
                lane.pos = (lane.pos + words).min(lane.words.len());
            }
            return;
        }
        for op in mem {
            for v in &mut self.accesses {
                v.clear();
            }
            let mut recorded = self
                .record
                .as_ref()
                .map(|_| Vec::with_capacity(lanes.len()));
            for &i in lanes {
                let lane = &mut self.lanes[i];
                let n = op.words();
                let Some(w) = lane.words.get(lane.pos..lane.pos + n) else {
                    // The VM trapped before this access: nothing more of it.
                    lane.pos = lane.words.len();
                    if let Some(r) = &mut recorded {
                        r.push(None);
                    }
                    continue;
                };
                lane.pos += n;
                let vm = lane.vm;
                if let Some(r) = &mut recorded {
                    r.push(Some((vm, w[0])));
                }
                let regions = &self.trace.header.regions;
                let accesses = &mut self.accesses;
                let mut push = |addr: u32, len: u32| {
                    accesses[regions.region(addr) as usize].push(LaneAccess { vm, addr, len });
                };
                match *op {
                    MemOp::Load { width } | MemOp::Store { width } => push(w[0], width),
                    MemOp::Fill | MemOp::Init => push(w[0], w[1]),
                    MemOp::Copy => {
                        push(w[0], w[2]);
                        push(w[1], w[2]);
                    }
                }
            }
            if let (Some(r), Some(last)) =
                (recorded, self.record.as_mut().and_then(|v| v.last_mut()))
            {
                last.addresses.push(r);
            }
            for (region, list) in Region::ALL.iter().zip(&self.accesses) {
                if list.is_empty() {
                    continue;
                }
                let s = self.sectors.count(list);
                let c = &mut self.mem_counts[*region as usize];
                c.instructions += 1;
                c.accesses += list.len() as u64;
                for (total, add) in c.sectors.iter_mut().zip(s) {
                    *total += add;
                }
            }
        }
    }

    /// Moves lane `i` past block `pc` of `func`: where it goes, or `None` when it parked or
    /// finished.
    fn advance(
        &mut self,
        i: usize,
        func: u32,
        pc: u32,
        end: BlockEnd,
        succ: &[u32],
        fb: &FunctionBlocks,
    ) -> Result<Option<Next>, SimtError> {
        let continuations = self.calls == CallModel::Continuations;
        let route = route(
            self.blocks,
            &mut self.lanes[i],
            (func, pc),
            end,
            succ,
            fb,
            continuations,
        )?;
        Ok(match route {
            Route::Go(next) => Some(next),
            Route::Stop(state) => {
                self.set_state(i, state);
                None
            }
        })
    }
}

/// Where a lane goes after a block.
enum Route {
    /// On, with the warp.
    Go(Next),
    /// Parked or done.
    Stop(LaneState),
}

/// With continuations, a VM that leaves for the trampoline (a call through it, a hypercall)
/// from inside continuations called as C functions saves each of their frames on the way out:
/// from then on each returns through the trampoline, which runs the caller next round.
fn unwind_native_calls(lane: &mut Lane<'_>, continuations: bool) {
    if continuations {
        for frame in &mut lane.frames {
            frame.2 = true;
        }
    }
}

/// Moves `lane` past block `pc` of `func` (ending as `end`, with successors `succ`); with
/// `continuations`, the calls and returns of functions that yield go through the trampoline.
fn route(
    blocks: &BlockTable,
    lane: &mut Lane<'_>,
    (func, pc): (u32, u32),
    end: BlockEnd,
    succ: &[u32],
    fb: &FunctionBlocks,
    continuations: bool,
) -> Result<Route, SimtError> {
    let exit = fb.exit();
    let Some(next_id) = lane.peek() else {
        // Finished (or trapped) here.
        return Ok(Route::Stop(LaneState::Done));
    };
    let (g, gb) = locate(blocks, lane.job, next_id)?;
    match end {
        BlockEnd::Exit => match lane.frames.pop() {
            Some((caller, ret, true)) => {
                // The frame returns to the trampoline, which resumes the caller next round.
                lane.func = caller;
                Ok(Route::Stop(LaneState::Trampoline { block: ret }))
            }
            Some((caller, _, false)) => {
                lane.func = caller;
                Ok(Route::Go(Next::Block(exit)))
            }
            None => {
                // Another invocation of the same VM: it starts as a new launch would.
                lane.func = g;
                Ok(Route::Stop(LaneState::Parked { block: gb }))
            }
        },
        BlockEnd::Call { .. } | BlockEnd::CallIndirect if gb == 0 && (g, gb) != (func, pc + 1) => {
            if let BlockEnd::Call { callee } = end {
                if callee != g {
                    return Err(mismatch(
                        lane.job,
                        format!("call of function {callee} entered function {g}"),
                    ));
                }
            }
            // In a function that yields, a call (direct or indirect) of a recursive function
            // that yields pushes a frame for the trampoline (codegen's `yield_call`); other
            // callees are called as C functions and return to their caller directly
            // (`codegen/native.rs`).
            let through_trampoline = continuations
                && fb.yields
                && blocks.function(g).is_some_and(|c| c.yields && c.recursive);
            lane.frames.push((func, pc + 1, through_trampoline));
            lane.func = g;
            if through_trampoline {
                unwind_native_calls(lane, continuations);
                return Ok(Route::Stop(LaneState::Trampoline { block: 0 }));
            }
            Ok(Route::Go(Next::Call(g)))
        }
        BlockEnd::Call { .. } | BlockEnd::CallIndirect => {
            // An import: the VM left the kernel for the host and resumes after the call.
            let defined = match end {
                BlockEnd::Call { callee } => blocks.function(callee).is_some(),
                _ => false,
            };
            if defined || (g, gb) != (func, pc + 1) {
                return Err(mismatch(
                    lane.job,
                    format!(
                        "after the call in block {pc} of function {func}: block {gb} of \
                         function {g}"
                    ),
                ));
            }
            unwind_native_calls(lane, continuations);
            Ok(Route::Stop(LaneState::Parked { block: pc + 1 }))
        }
        BlockEnd::Jump => {
            if g != func || !succ.contains(&gb) {
                return Err(mismatch(
                    lane.job,
                    format!("block {pc} of function {func} went to block {gb} of function {g}"),
                ));
            }
            Ok(Route::Go(Next::Block(gb)))
        }
    }
}

/// The first block on every path from `a` and from `b` to the exit of `fb`: where lanes at
/// the two blocks meet (the exit when they do not before it).
fn common_post_dominator(fb: &FunctionBlocks, a: u32, b: u32) -> u32 {
    let exit = fb.exit();
    let chain = |mut x: u32| {
        let mut out = vec![x];
        while x != exit {
            x = fb.ipdom.get(x as usize).copied().unwrap_or(exit);
            out.push(x);
        }
        out
    };
    let from_a = chain(a);
    chain(b)
        .into_iter()
        .find(|x| from_a.contains(x))
        .unwrap_or(exit)
}

fn locate(blocks: &BlockTable, job: usize, id: u32) -> Result<(u32, u32), SimtError> {
    blocks
        .locate(id)
        .ok_or_else(|| mismatch(job, format!("{id} is no block id")))
}

fn mismatch(job: usize, why: String) -> SimtError {
    SimtError::Mismatch { job, why }
}
