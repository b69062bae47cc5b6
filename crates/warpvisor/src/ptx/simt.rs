//! SIMT emulation's results and the per-worker state its scheduler (`simt.h`) runs on.
//!
//! A module loaded with [`PtxRuntime::load_simt`](super::PtxRuntime::load_simt) runs each
//! warp in lockstep under a reconvergence stack (reconverging at immediate post-dominators)
//! and counts, per kernel, what a GPU would issue: [`SimtCounts`].

use serde::Serialize;

/// What a SIMT-emulated kernel executed, summed over its launches' CTAs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SimtCounts {
    /// PTX instructions issued, once per warp.
    pub warp_instructions: u64,
    /// The same instructions once per active lane (lanes converged with the warp).
    pub lane_instructions: u64,
    /// Global memory instructions issued by a warp with at least one lane accessing memory
    /// (loads, stores, atomics; constant, shared, local and parameter memory excluded).
    pub memory_instructions: u64,
    /// The distinct 32-byte sectors those instructions touched, per warp instruction.
    pub sectors: u64,
    /// Times a warp's lanes went different ways at a block's end.
    pub divergences: u64,
    /// Basic blocks run by a warp.
    pub warp_blocks: u64,
    /// Of `lane_instructions`, those (not jumps) whose guard predicate was false in their
    /// lane: issued with the warp, not executed.
    pub guarded_off: u64,
}

impl SimtCounts {
    /// SIMT efficiency: active lanes per issued warp instruction over the warp width (32),
    /// averaged over instructions (ThreadFuser's Eq. 1 with instructions as the weight).
    /// 1.0 when nothing ran.
    pub fn efficiency(&self) -> f64 {
        if self.warp_instructions == 0 {
            1.0
        } else {
            self.lane_instructions as f64 / (self.warp_instructions as f64 * 32.0)
        }
    }

    /// SIMT efficiency counting only lanes that execute an instruction (a guarded one's
    /// lanes whose guard is false left out): nvprof's non-predicated warp execution efficiency.
    pub fn executing_efficiency(&self) -> f64 {
        if self.warp_instructions == 0 {
            1.0
        } else {
            (self.lane_instructions - self.guarded_off) as f64
                / (self.warp_instructions as f64 * 32.0)
        }
    }

    /// Average 32-byte sectors per global memory instruction (4 for 32 lanes reading
    /// consecutive 4-byte words; 32 when every lane touches its own sector).
    pub fn sectors_per_memory_instruction(&self) -> f64 {
        if self.memory_instructions == 0 {
            0.0
        } else {
            self.sectors as f64 / self.memory_instructions as f64
        }
    }

    /// `self + other`.
    pub fn add(&mut self, other: &SimtCounts) {
        self.warp_instructions += other.warp_instructions;
        self.lane_instructions += other.lane_instructions;
        self.memory_instructions += other.memory_instructions;
        self.sectors += other.sectors;
        self.divergences += other.divergences;
        self.warp_blocks += other.warp_blocks;
        self.guarded_off += other.guarded_off;
    }

    /// `self - earlier` (counts of the launches since `earlier` was read).
    pub fn since(&self, earlier: &SimtCounts) -> SimtCounts {
        SimtCounts {
            warp_instructions: self.warp_instructions - earlier.warp_instructions,
            lane_instructions: self.lane_instructions - earlier.lane_instructions,
            memory_instructions: self.memory_instructions - earlier.memory_instructions,
            sectors: self.sectors - earlier.sectors,
            divergences: self.divergences - earlier.divergences,
            warp_blocks: self.warp_blocks - earlier.warp_blocks,
            guarded_off: self.guarded_off - earlier.guarded_off,
        }
    }
}

/// `WVP_SIMT_DEPTH` (simt.h): reconvergence stack entries per warp.
const STACK_DEPTH: usize = 1024;
/// `WVP_SIMT_SECTORS` (simt.h).
const SECTORS_PER_SITE: usize = 64;
/// `sizeof(wvp_simt_warp)` (simt.h asserts it).
const WARP_BYTES: usize = 16 + 16 * STACK_DEPTH;

/// `struct wvp_simt` (simt.h; both sides check the size).
#[repr(C)]
pub(super) struct SimtRecord {
    warp_instrs: u64,
    lane_instrs: u64,
    mem_instrs: u64,
    sectors: u64,
    divergences: u64,
    steps: u64,
    guarded_off: u64,
    warps: *mut u8,
    site_sectors: *mut u64,
    site_count: *mut u32,
    instrs: *const u32,
    sites: *const u32,
    ipdom: *const u32,
    calls: *const u32,
    nblocks: u32,
    max_sites: u32,
    warp: u32,
    block: u32,
    mask: u32,
    pending: u32,
    error: i32,
    unused: u32,
}

const _: () = assert!(std::mem::size_of::<SimtRecord>() == 144);

/// One worker's SIMT emulation state for a launch: the record the kernel sees and the
/// buffers it points into (owned here, so the pointers stay valid while `self` lives).
pub(super) struct SimtState {
    record: Box<SimtRecord>,
    _warps: Vec<u128>,
    _site_sectors: Vec<u64>,
    _site_count: Vec<u32>,
}

impl SimtState {
    /// State for CTAs of `threads` threads of a kernel whose blocks hold at most `max_sites`
    /// global memory instructions.
    pub fn new(threads: u32, max_sites: u32) -> Self {
        let warps = threads.div_ceil(32) as usize;
        let mut warp_words = vec![0u128; (warps * WARP_BYTES).div_ceil(16)];
        let sites = max_sites as usize;
        let mut site_sectors = vec![0u64; (sites * SECTORS_PER_SITE).max(1)];
        let mut site_count = vec![0u32; sites.max(1)];
        let record = Box::new(SimtRecord {
            warp_instrs: 0,
            lane_instrs: 0,
            mem_instrs: 0,
            sectors: 0,
            divergences: 0,
            steps: 0,
            guarded_off: 0,
            warps: warp_words.as_mut_ptr() as *mut u8,
            site_sectors: site_sectors.as_mut_ptr(),
            site_count: site_count.as_mut_ptr(),
            instrs: std::ptr::null(),
            sites: std::ptr::null(),
            ipdom: std::ptr::null(),
            calls: std::ptr::null(),
            nblocks: 0,
            max_sites,
            warp: 0,
            block: 0,
            mask: 0,
            pending: 0,
            error: 0,
            unused: 0,
        });
        SimtState {
            record,
            _warps: warp_words,
            _site_sectors: site_sectors,
            _site_count: site_count,
        }
    }

    /// The record for `wvp_cta.simt`.
    pub fn record(&mut self) -> *mut SimtRecord {
        &mut *self.record
    }

    /// What the CTAs run on this state counted.
    pub fn counts(&self) -> SimtCounts {
        let r = &self.record;
        SimtCounts {
            warp_instructions: r.warp_instrs,
            lane_instructions: r.lane_instrs,
            memory_instructions: r.mem_instrs,
            sectors: r.sectors,
            divergences: r.divergences,
            warp_blocks: r.steps,
            guarded_off: r.guarded_off,
        }
    }
}
