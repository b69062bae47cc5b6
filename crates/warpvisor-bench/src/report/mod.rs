//! What a run of the suite found, as data: serialised to JSON as is, rendered as Markdown
//! tables ([`markdown`]) and as a bar chart ([`chart`]).

pub mod chart;
pub mod markdown;

use serde::Serialize;

use crate::call_modes::CallModes;
use crate::micro::MicroResults;
use crate::platform::{Availability, PerPlatform};

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// warpvisor's version.
    pub warpvisor: &'static str,
    /// When the run started, seconds since the Unix epoch.
    pub started_unix: u64,
    /// The machine it ran on.
    pub machine: Machine,
    /// The settings it ran with.
    pub settings: SettingsReport,
    /// Every platform, and whether it ran.
    pub platforms: Vec<Availability>,
    /// One entry per benchmark.
    pub benchmarks: Vec<BenchmarkResult>,
    /// The microbenchmarks: the slow-call cost always, memcopy and transfers unless
    /// `--no-micro`.
    pub microbenchmarks: Option<MicroResults>,
    /// Wall time of the whole run, kernel builds included.
    pub total_seconds: f64,
}

impl Report {
    /// Whether every benchmark was validated on every platform that ran it.
    pub fn all_validated(&self) -> bool {
        self.benchmarks.iter().all(|b| b.validated)
    }
}

/// The machine a report comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Hardware threads.
    pub cores: usize,
    /// Main memory, GiB.
    pub memory_gib: f64,
    /// Operating system and architecture.
    pub os: String,
}

/// The settings that shaped the numbers.
#[derive(Debug, Clone, Serialize)]
pub struct SettingsReport {
    /// `--quick`.
    pub quick: bool,
    /// Seed of the request generator.
    pub seed: u64,
    /// VMs per warpvisor fleet (the batch size).
    pub vms: u32,
    /// Distinct requests per benchmark.
    pub requests: usize,
    /// Minimum timed seconds per platform and benchmark.
    pub min_seconds: f64,
    /// Rounds in which the platforms took turns at their timed passes.
    pub rounds: u32,
    /// Worker threads of the CPU baselines and the cpu backend.
    pub workers: usize,
    /// Device compiler optimisation level.
    pub opt_level: u8,
    /// Memory interleave of each warpvisor backend that ran.
    pub interleave: PerPlatform<u32>,
    /// Kernel partition size of each warpvisor backend that ran (0: one kernel).
    pub partition_ops: PerPlatform<u32>,
    /// How each warpvisor backend's kernels make calls (`direct`, `continuations`).
    pub calls: PerPlatform<&'static str>,
    /// How each warpvisor backend's resets find written pages (`mmu`, `marks`).
    pub dirty_pages: PerPlatform<&'static str>,
    /// How each warpvisor backend's kernels keep accesses in bounds (`guard`, `explicit`), as
    /// the backend settles `auto`.
    pub memory_checks: PerPlatform<&'static str>,
}

/// One benchmark on every platform.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkResult {
    /// Short name (`scrypt`).
    pub name: &'static str,
    /// The paper's name (`Scrypt`).
    pub title: &'static str,
    /// What one request does.
    pub summary: &'static str,
    /// Whether every platform that ran replied exactly as the native build did, with no
    /// error. Numbers are only reported for platforms whose replies matched.
    pub validated: bool,
    /// Distinct requests.
    pub requests: usize,
    /// Mean request size, bytes.
    pub request_bytes: f64,
    /// Mean reply size, bytes.
    pub reply_bytes: f64,
    /// Requests per second.
    pub throughput: PerPlatform<f64>,
    /// Throughput over native-x86's.
    pub ratio_to_native: PerPlatform<f64>,
    /// Throughput over wasmtime's.
    pub ratio_to_wasmtime: PerPlatform<f64>,
    /// Mean latency of a batch, milliseconds (a batch is one request on the CPU baselines,
    /// a fleet's worth of requests on warpvisor).
    pub batch_latency_ms: PerPlatform<f64>,
    /// Each platform's run in detail.
    pub runs: Vec<PlatformRun>,
    /// One batch on `warpvisor-cpu` with direct calls and with continuations
    /// (`--compare-calls`).
    pub call_modes: Option<CallModes>,
    /// Why that comparison failed (the benchmark then counts as not validated).
    pub call_modes_error: Option<String>,
}

/// How one platform's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Replies identical to the native build's.
    Validated,
    /// Replies differ: no number is reported.
    Mismatch,
    /// The platform failed (build or run): no number is reported.
    Error,
}

/// One platform's run of one benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct PlatformRun {
    /// The platform's report name.
    pub platform: &'static str,
    /// How it ended.
    pub status: RunStatus,
    /// The first difference or the error, when not validated.
    pub detail: Option<String>,
    /// Compiling the module (wasmtime) or building its kernels (warpvisor, cache included).
    pub build_seconds: f64,
    /// The untimed warm-up (on warpvisor, the first batch: lazy device compilers finish here).
    pub warmup_seconds: f64,
    /// Requests served in the timed passes.
    pub requests: usize,
    /// Time of the timed passes.
    pub seconds: f64,
    /// Requests per second.
    pub throughput: f64,
    /// Requests per batch.
    pub batch_size: usize,
    /// Batch latencies, milliseconds.
    pub batch_latency_ms: Latency,
    /// Where warpvisor's time went (warpvisor only).
    pub phases: Option<Phases>,
}

/// A latency distribution, milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// The distribution of `samples`.
    pub fn of(samples: &[std::time::Duration]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Latency {
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
            p50: ms[ms.len() / 2],
            max: ms[ms.len() - 1],
        }
    }
}

/// Where a warpvisor run's timed passes spent their time, what crossed between host and
/// device, and what its VMs did. The phases do not overlap; with `other_seconds` they add up
/// to the timed passes' wall time.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Phases {
    /// Creating the fleet's storage on the device (zeroed), once, before the warm-up: part of
    /// `build_seconds`, not of the timed passes.
    pub allocate_seconds: f64,
    /// Kernels running on the device.
    pub execute_seconds: f64,
    /// Host–device transfers of fleet state.
    pub transfer_seconds: f64,
    /// Hypercall service on the host (WASI calls, copies between VM memory and the host).
    pub hypercall_seconds: f64,
    /// Re-instantiating VMs between batches.
    pub instantiate_seconds: f64,
    /// The fleet's bookkeeping between launches: choosing partitions, preparing entries,
    /// collecting outcomes.
    pub schedule_seconds: f64,
    /// The host's work around the fleet: staging each batch's jobs (stdin, arguments) and
    /// collecting replies (exit codes, captured output).
    pub host_seconds: f64,
    /// The rest: the harness's own loop and whatever no phase measures.
    pub other_seconds: f64,
    /// Kernel launches.
    pub launches: u64,
    /// Hypercalls serviced.
    pub hypercalls: u64,
    /// Bytes written to the device.
    pub bytes_to_device: u64,
    /// Bytes read from the device.
    pub bytes_from_device: u64,
    /// Gathered transfers between host and device.
    pub transfers: u64,
    /// Bytes moved per kernel launch, both ways.
    pub bytes_per_launch: u64,
    /// Calls through the trampoline (continuation calls, hypercalls): each one saves a
    /// frame on the VM's call stack and restores it on return.
    pub slow_calls: u64,
    /// `call_indirect`s executed.
    pub indirect_calls: u64,
    /// Live values saved in (and restored from) continuation frames.
    pub saved_words: u64,
    /// Continuation save/restore time, estimated as `slow_calls` times the backend's
    /// measured cost of one slow call over a plain call (the `slow_call` microbenchmark);
    /// part of `execute_seconds`.
    pub continuations_estimate_seconds: Option<f64>,
}
