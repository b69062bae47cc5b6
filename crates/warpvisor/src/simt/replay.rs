//! Warp replay: the traced VMs grouped into warps, each warp run in lockstep over its lanes'
//! records under a SIMT stack (threadfuser.md §II–III).
//!
//! The stack's entries are `(function, pc, reconvergence pc, mask)`. The lanes of the top
//! entry all enter the same block; when they leave it for different successors, the entry
//! waits at the block's immediate post-dominator and one entry per other successor runs until
//! it gets there. A call pushes an entry per callee (lanes of a `call_indirect` may call
//! different functions) that reconverges at the callee's virtual exit, so divergence never
//! outlives a function. A call of an import is a **hypercall**: on a GPU the VM leaves the
//! kernel there, so the lane parks; when no lane of the warp can go on, the warp is
//! *relaunched* and the parked lanes resume, those at the same place (call stack and block)
//! together.
//!
//! SIMT efficiency is the paper's Eq. 1, `Σ active lanes per issued instruction /
//! (issued instructions × warp width)`, summed over every instruction of every warp
//! (instruction-weighted); the mean of each warp's own ratio is reported beside it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::blocks::BlockTable;
use super::memory::SectorCounter;
use super::trace::{Region, Trace};
use super::warp::Warp;
pub use super::warp::{issued_blocks, IssuedBlock, RELAUNCH};
use super::SimtError;

/// How warps are formed from jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Grouping {
    /// Consecutive jobs, as the GPU backends map VMs to threads.
    Consecutive,
    /// Jobs sorted by how much they did (trace length), then consecutive: what a scheduler
    /// that batched similar requests could reach.
    Similar,
}

/// Which control-flow graph gives the reconvergence points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cfg {
    /// Every edge of the code (what a GPU compiler sees): exact.
    Static,
    /// Only the edges the traced jobs took (the paper's dynamic CFG): paths no job ran, such
    /// as error returns, do not hold reconvergence back.
    Dynamic,
}

/// What to analyse.
#[derive(Debug, Clone)]
pub struct AnalysisConfig {
    /// Warp widths, each replayed separately (at most 64).
    pub widths: Vec<u32>,
    /// Warp formation.
    pub grouping: Grouping,
    /// Where lanes reconverge.
    pub cfg: Cfg,
    /// How calls run on the device.
    pub calls: CallModel,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            widths: vec![8, 16, 32],
            grouping: Grouping::Consecutive,
            cfg: Cfg::Static,
            calls: CallModel::Continuations,
        }
    }
}

/// How the device runs calls, which decides where a warp's lanes meet again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CallModel {
    /// As warpvisor's GPU backends compile a module: a function that can reach an import is
    /// in continuation-passing style, and its calls (direct or indirect) of such functions
    /// that lie on a call cycle, and their returns, go back to the kernel's trampoline, whose
    /// next round runs every lane's top frame — lanes meet there at every such call and
    /// return, as at a hypercall's relaunch (without leaving the kernel). Other calls are
    /// native.
    #[default]
    Continuations,
    /// Every call native, on a device call stack (ThreadFuser's model of CPU threads): a
    /// divergence inside a function lasts until its reconvergence point, across calls.
    Direct,
}

/// Instructions issued for a warp and executed by its lanes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Instructions the lanes executed (each lane's own count, summed).
    pub thread: u64,
    /// Instructions the warp issued (once for all its active lanes).
    pub lockstep: u64,
}

impl Counts {
    /// Eq. 1 at `width`: `thread / (lockstep × width)`; 1 when nothing ran.
    pub fn efficiency(&self, width: u32) -> f64 {
        if self.lockstep == 0 {
            return 1.0;
        }
        self.thread as f64 / (self.lockstep as f64 * width as f64)
    }

    pub(super) fn add(&mut self, other: Counts) {
        self.thread += other.thread;
        self.lockstep += other.lockstep;
    }
}

/// Memory instructions of one region and the sectors they touch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemCounts {
    /// Warp memory instructions with at least one lane in the region.
    pub instructions: u64,
    /// Lane accesses.
    pub accesses: u64,
    /// 32-byte sectors at each of `memory::INTERLEAVES`.
    pub sectors: [u64; 3],
}

/// The replay of every warp at one width.
#[derive(Debug, Clone, Serialize)]
pub struct WidthResult {
    /// Lanes per warp.
    pub width: u32,
    /// Every warp's instructions.
    pub counts: Counts,
    /// Mean of the warps' own efficiencies.
    pub warp_mean_efficiency: f64,
    /// Warps replayed.
    pub warps: u64,
    /// Per function (index = function index), excluding its callees.
    pub per_function: Vec<Counts>,
    /// Per global block id, when the trace has source lines to charge them to (else empty).
    pub per_block: Vec<Counts>,
    /// Per region: stack, data, heap (counted at the widest width analysed; empty at others).
    pub memory: BTreeMap<Region, MemCounts>,
    /// Launches per warp summed: 1 per warp, plus one per relaunch after hypercalls.
    pub launches: u64,
    /// Idle lane slots by the divergent branch (global block id; [`RELAUNCH`]: lanes that
    /// resumed at different places) that kept the idle lanes waiting.
    pub divergence: BTreeMap<u32, u64>,
    /// Idle lane slots of lanes that had finished, waited at a hypercall, or were missing
    /// from a short warp.
    pub idle_elsewhere: u64,
}

impl WidthResult {
    /// Nothing replayed yet, at `width`, for `trace`'s module (counts per block only where
    /// the trace has source lines).
    pub(super) fn empty(width: u32, trace: &Trace) -> WidthResult {
        let blocks = if trace.header.source.is_some() {
            trace.header.blocks.ids.len()
        } else {
            0
        };
        WidthResult {
            width,
            counts: Counts::default(),
            warp_mean_efficiency: 0.0,
            warps: 0,
            per_function: vec![Counts::default(); trace.header.functions.len()],
            per_block: vec![Counts::default(); blocks],
            memory: BTreeMap::new(),
            launches: 0,
            divergence: BTreeMap::new(),
            idle_elsewhere: 0,
        }
    }

    /// Eq. 1 over every instruction.
    pub fn efficiency(&self) -> f64 {
        self.counts.efficiency(self.width)
    }
}

/// Replays `trace` at every width of `config`.
pub fn analyze(trace: &Trace, config: &AnalysisConfig) -> Result<Vec<WidthResult>, SimtError> {
    let mut order: Vec<usize> = (0..trace.jobs.len()).collect();
    if config.grouping == Grouping::Similar {
        order.sort_by_key(|&j| (trace.jobs[j].words.len(), j));
    }
    let dynamic;
    let blocks = match config.cfg {
        Cfg::Static => &trace.header.blocks,
        Cfg::Dynamic => {
            dynamic = super::dcfg::observed(trace)?;
            &dynamic
        }
    };
    let widest = config.widths.iter().copied().max().unwrap_or(0);
    config
        .widths
        .iter()
        .map(|&w| {
            if !(1..=64).contains(&w) {
                return Err(SimtError::Limit(format!(
                    "warp width {w}: between 1 and 64 lanes"
                )));
            }
            // The memory analysis is reported at the widest width only.
            replay_width(trace, blocks, &order, w, w == widest, config.calls)
        })
        .collect()
}

fn replay_width(
    trace: &Trace,
    blocks: &BlockTable,
    order: &[usize],
    width: u32,
    with_memory: bool,
    calls: CallModel,
) -> Result<WidthResult, SimtError> {
    let warps: Vec<&[usize]> = order.chunks(width as usize).collect();
    // Warps are independent: replayed in parallel, each into its own partial result.
    let partials = crate::work_queue::map_indexed(
        warps.len(),
        crate::work_queue::default_workers(),
        |w| -> Result<(WidthResult, Counts), SimtError> {
            let mut part = WidthResult::empty(width, trace);
            let mut sectors = SectorCounter::new(trace.header.vms, trace.header.max_pages);
            let mut warp = Warp::new(trace, blocks, warps[w], &mut sectors, &mut part)?;
            warp.with_memory = with_memory;
            warp.calls = calls;
            let counts = warp.run()?;
            Ok((part, counts))
        },
    );
    let mut result = WidthResult::empty(width, trace);
    let mut sum_eff = 0.0;
    for partial in partials {
        let (part, counts) = partial?;
        if counts.lockstep > 0 {
            sum_eff += counts.efficiency(width);
            result.warps += 1;
        }
        result.counts.add(counts);
        result.launches += part.launches;
        result.idle_elsewhere += part.idle_elsewhere;
        for (origin, idle) in part.divergence {
            *result.divergence.entry(origin).or_default() += idle;
        }
        for (total, add) in result.per_function.iter_mut().zip(&part.per_function) {
            total.add(*add);
        }
        for (total, add) in result.per_block.iter_mut().zip(&part.per_block) {
            total.add(*add);
        }
        for (region, m) in part.memory {
            let c = result.memory.entry(region).or_default();
            c.instructions += m.instructions;
            c.accesses += m.accesses;
            for (total, add) in c.sectors.iter_mut().zip(m.sectors) {
                *total += add;
            }
        }
    }
    result.warp_mean_efficiency = if result.warps == 0 {
        1.0
    } else {
        sum_eff / result.warps as f64
    };
    Ok(result)
}
