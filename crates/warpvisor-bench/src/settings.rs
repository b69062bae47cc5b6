//! What one run of the suite measures, and how hard.

use std::path::PathBuf;
use std::time::Duration;

use warpvisor::codegen::{CallMode, DirtyPages, MemoryChecks};

use crate::platform::Platform;

/// Settings of one run of the suite.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--quick`: small fleets, short passes.
    pub quick: bool,
    /// Seed of the request generator.
    pub seed: u64,
    /// VMs in each warpvisor fleet: the batch size.
    pub vms: u32,
    /// Batches of requests per pass: each benchmark serves `vms * batches` distinct requests.
    pub batches: u32,
    /// Each platform serves the request set again until this much time has passed (at least
    /// once), after an untimed warm-up.
    pub min_time: Duration,
    /// Rounds of timed passes: the platforms of a benchmark take turns, each serving passes for
    /// `min_time / rounds` a round (at least one pass), so that a machine whose speed drifts
    /// during a run slows every platform alike (`harness::interleaved`).
    pub rounds: u32,
    /// Worker threads of native-x86, wasmtime and the cpu backend.
    pub workers: usize,
    /// Benchmarks to run (names; empty: all ten).
    pub benchmarks: Vec<String>,
    /// Platforms to run (empty: every available one).
    pub platforms: Vec<Platform>,
    /// Memory interleave of every warpvisor backend (default: 0 on CPUs, 8 on GPUs).
    pub interleave: Option<u32>,
    /// Device compiler optimisation level, 0-3.
    pub opt_level: u8,
    /// Kernel partition size in operators (default: `Dialect::default_partition_ops`).
    pub partition_ops: Option<u32>,
    /// How `warpvisor-cpu`'s kernels make calls (device backends use continuations).
    pub cpu_calls: CallMode,
    /// How `warpvisor-cpu`'s kernels check memory accesses (default: guard regions where they
    /// apply, `MemoryChecks::default_for`).
    pub memory_checks: Option<MemoryChecks>,
    /// How `warpvisor-cpu`'s resets find the pages VMs wrote.
    pub dirty_pages: DirtyPages,
    /// Run the microbenchmarks.
    pub micro: bool,
    /// Run only the microbenchmarks (not the ten benchmarks).
    pub micro_only: bool,
    /// VMs of the microbenchmarks' fleets.
    pub micro_vms: u32,
    /// Read `bench-NAME.wasm` from here instead of the modules built into the runner.
    pub guests: Option<PathBuf>,
    /// Also run one batch of each benchmark on `cpu` in both call modes
    /// ([`crate::call_modes`]): on in the full run, off with `--quick`.
    pub compare_calls: bool,
    /// Build the warpvisor kernels of each benchmark with its call profile, recorded on `cpu`
    /// from one batch of requests of the next seed (`Suite::profile`).
    pub profiled: bool,
}

impl Settings {
    /// The full suite: fleets of 64 VMs, four batches, passes of at least 3 s.
    pub fn full() -> Self {
        Settings {
            quick: false,
            seed: 1,
            vms: 64,
            batches: 4,
            min_time: Duration::from_secs(3),
            rounds: 4,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            benchmarks: Vec::new(),
            platforms: Vec::new(),
            interleave: None,
            opt_level: 2,
            partition_ops: None,
            cpu_calls: CallMode::Direct,
            memory_checks: None,
            dirty_pages: DirtyPages::Auto,
            micro: true,
            micro_only: false,
            micro_vms: 64,
            guests: None,
            compare_calls: true,
            profiled: false,
        }
    }

    /// `--quick`: fleets of 16 VMs, two batches, passes of at least 0.3 s.
    pub fn quick() -> Self {
        Settings {
            quick: true,
            vms: 16,
            batches: 2,
            min_time: Duration::from_millis(300),
            rounds: 1,
            micro_vms: 16,
            compare_calls: false,
            ..Settings::full()
        }
    }

    /// Requests of each benchmark.
    pub fn requests(&self) -> usize {
        self.vms as usize * self.batches as usize
    }

    /// Whether `p` runs: those asked for (all by default), and always `native-x86`, which every
    /// reply is validated against.
    pub fn wants(&self, p: Platform) -> bool {
        p == Platform::Native || self.platforms.is_empty() || self.platforms.contains(&p)
    }
}
