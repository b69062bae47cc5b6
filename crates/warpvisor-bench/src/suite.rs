//! One benchmark on every platform: generate its requests, serve them natively, on wasmtime
//! and on each warpvisor backend, check every reply against the native build's, and only then
//! report numbers.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use warpvisor::backend::cpu::CpuBackend;
use warpvisor::backend::wasmtime::{WasiProgram, WasiSetup, WasmtimeBackend, WasmtimeConfig};
use warpvisor::backend::Backend;
use warpvisor::codegen::KernelOptions;
use warpvisor::profile::record::{counting_program, profile_wasi};
use warpvisor::profile::CallProfile;
use warpvisor::vmm::{FleetConfig, Program};
use warpvisor::wasi::program::{WasiFleet, WasiRunConfig};
use warpvisor::wasi::WasiJob;
use warpvisor_workloads::Workload;

use crate::harness::{self, FleetServer, FleetTime, Served, Server, ThreadServer};
use crate::platform::{KernelPlatform, PerPlatform, Platform};
use crate::report::{BenchmarkResult, Latency, Phases, PlatformRun, RunStatus};
use crate::settings::Settings;
use crate::{call_modes, guests, validation};

/// The platforms of one run of the suite, opened once and reused by every benchmark.
pub struct Suite<'s> {
    settings: &'s Settings,
    kernels: &'s [KernelPlatform],
    wasmtime: Option<WasmtimeBackend>,
}

/// What one platform's run produced before validation.
struct Outcome {
    served: Served,
    build_seconds: f64,
    phases: Option<Phases>,
}

impl<'s> Suite<'s> {
    /// A suite over `kernels` (the warpvisor backends that opened) and the baselines that
    /// `settings` asks for.
    pub fn new(settings: &'s Settings, kernels: &'s [KernelPlatform]) -> Result<Self, String> {
        let wasmtime = if settings.wants(Platform::Wasmtime) {
            Some(
                WasmtimeBackend::new(WasmtimeConfig {
                    workers: settings.workers,
                    fuel: None,
                    timeout: None,
                })
                .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        Ok(Suite {
            settings,
            kernels,
            wasmtime,
        })
    }

    /// Runs benchmark `w` on every platform; `progress` hears one line per platform.
    pub fn run(&self, w: &Workload, progress: &dyn Fn(&str)) -> BenchmarkResult {
        let requests = w.requests(self.settings.seed, self.settings.requests());
        let mut result = BenchmarkResult {
            name: w.name,
            title: w.title,
            summary: w.summary,
            validated: true,
            requests: requests.len(),
            request_bytes: mean_len(requests.iter().map(Vec::len)),
            reply_bytes: 0.0,
            throughput: PerPlatform::default(),
            ratio_to_native: PerPlatform::default(),
            ratio_to_wasmtime: PerPlatform::default(),
            batch_latency_ms: PerPlatform::default(),
            runs: Vec::new(),
            call_modes: None,
            call_modes_error: None,
        };
        // The native build is the reference, so it always runs.
        let workers = self.settings.workers;
        let native_run = w.run;
        let native_serve = move |r: &[u8]| validation::native_reply(native_run(r));
        let wasm = guests::module(w.name, self.settings.guests.as_deref());
        let start = Instant::now();
        let wasmtime = self
            .wasmtime
            .as_ref()
            .map(|wt| module(&wasm).and_then(|m| self.wasmtime_program(wt, w, m)));
        let wasmtime_build = start.elapsed().as_secs_f64();
        let wasmtime_serve = match &wasmtime {
            Some(Ok(program)) => Some(Ok(|r: &[u8]| program.run(&job(r)))),
            Some(Err(e)) => Some(Err(e.clone())),
            None => None,
        };
        let profile = match self.settings.profiled && !self.kernels.is_empty() {
            true => {
                progress(&format!("  {}: recording a call profile on cpu", w.name));
                module(&wasm).and_then(|m| self.profile(w, m)).map(Some)
            }
            false => Ok(None),
        };
        let jobs: Vec<WasiJob> = requests.iter().map(|r| job(r)).collect();
        let mut fleets = Vec::new();
        for k in self.kernels {
            progress(&format!(
                "  {}: building kernels and running on {}",
                w.name,
                k.platform.key()
            ));
            let built = module(&wasm).and_then(|m| {
                let mut k = k.clone();
                k.kernel.profile = profile.clone()?;
                self.warpvisor_fleet(&k, w, m)
            });
            fleets.push((k.platform, built));
        }
        // Declared after everything its servers borrow.
        let mut entrants = vec![Entrant::ready(
            Platform::Native,
            0.0,
            ThreadServer::new(&requests, workers, &native_serve),
        )];
        match &wasmtime_serve {
            Some(Ok(serve)) => entrants.push(Entrant::ready(
                Platform::Wasmtime,
                wasmtime_build,
                ThreadServer::new(&requests, workers, serve),
            )),
            Some(Err(e)) => entrants.push(Entrant::failed(Platform::Wasmtime, e.clone())),
            None => {}
        }
        for (p, built) in fleets.iter_mut() {
            entrants.push(match built {
                Ok(b) => match FleetServer::new(&mut b.fleet, &jobs) {
                    Ok(server) => Entrant {
                        allocate_seconds: b.allocate_seconds,
                        ..Entrant::ready(*p, b.build_seconds, server)
                    },
                    Err(e) => Entrant::failed(*p, e.to_string()),
                },
                Err(e) => Entrant::failed(*p, e.clone()),
            });
        }
        // Every platform that got ready takes its turns at the timed passes.
        let mut servers: Vec<&mut dyn Server> = entrants
            .iter_mut()
            .filter_map(|e| e.server.as_mut().ok().map(|s| &mut **s as &mut dyn Server))
            .collect();
        let mut served =
            harness::interleaved(&mut servers, self.settings.min_time, self.settings.rounds)
                .into_iter();
        let outcomes: Vec<(Platform, Result<Outcome, String>)> = entrants
            .iter()
            .map(|e| (e.platform, e.outcome(&mut served)))
            .collect();
        let reference = match outcomes.first() {
            Some((Platform::Native, Ok(o))) => o.served.replies.clone(),
            _ => Vec::new(),
        };
        result.reply_bytes = mean_len(reference.iter().map(|r| r.stdout.len()));
        let reference_ok = validation::check_reference(&reference);
        for (p, o) in outcomes {
            let run = match o {
                Ok(o) => {
                    let verdict = reference_ok
                        .clone()
                        .and_then(|()| validation::compare(&reference, &o.served.replies));
                    platform_run(p, &o, verdict)
                }
                Err(e) => failed_run(p, e),
            };
            progress(&describe(w.name, &run));
            if run.status == RunStatus::Validated {
                result.throughput.set(p, run.throughput);
                result.batch_latency_ms.set(p, run.batch_latency_ms.mean);
            } else {
                result.validated = false;
            }
            result.runs.push(run);
        }
        let cpu = self.kernels.iter().find(|k| k.platform == Platform::Cpu);
        if let Some(cpu) = cpu.filter(|_| self.settings.compare_calls) {
            progress(&format!(
                "  {}: one batch on cpu in both call modes",
                w.name
            ));
            let vms = self.settings.vms;
            let batch: Vec<WasiJob> = requests.iter().take(vms as usize).map(|r| job(r)).collect();
            let measured = module(&wasm).and_then(|m| {
                call_modes::measure(
                    cpu.backend.as_ref(),
                    &cpu.kernel,
                    w,
                    m,
                    vms,
                    &batch,
                    &reference,
                )
            });
            match measured {
                Ok(c) => result.call_modes = Some(c),
                Err(e) => {
                    progress(&format!("  {}: call modes FAILED: {e}", w.name));
                    result.validated = false;
                    result.call_modes_error = Some(e);
                }
            }
        }
        for p in Platform::ALL {
            if let Some(&t) = result.throughput.get(p) {
                if let Some(&n) = result.throughput.get(Platform::Native) {
                    result.ratio_to_native.set(p, t / n);
                }
                if let Some(&m) = result.throughput.get(Platform::Wasmtime) {
                    result.ratio_to_wasmtime.set(p, t / m);
                }
            }
        }
        result
    }

    /// Benchmark `w`'s module compiled by wasmtime.
    fn wasmtime_program<'b>(
        &self,
        wt: &'b WasmtimeBackend,
        w: &Workload,
        wasm: &[u8],
    ) -> Result<WasiProgram<'b>, String> {
        let setup = WasiSetup {
            program_name: w.name.to_string(),
            max_memory_pages: w.memory_pages,
            ..WasiSetup::default()
        };
        wt.prepare_wasi(wasm, &setup).map_err(|e| e.to_string())
    }

    /// Benchmark `w`'s call profile: one batch of requests of the next seed (inputs the timed
    /// passes do not see) on a counting kernel on `cpu`.
    fn profile(&self, w: &Workload, wasm: &[u8]) -> Result<CallProfile, String> {
        let backend = CpuBackend::new(Some(self.settings.workers)).map_err(|e| e.to_string())?;
        let program =
            counting_program(wasm, &backend, self.settings.opt_level).map_err(|e| e.to_string())?;
        let vms = self.settings.vms.max(1);
        let requests = w.requests(self.settings.seed.wrapping_add(1), vms as usize);
        let jobs: Vec<WasiJob> = requests.iter().map(|r| job(r)).collect();
        let config = wasi_config(w, vms);
        let (_, profile) =
            profile_wasi(wasm, program, &config, &jobs).map_err(|e| e.to_string())?;
        Ok(profile)
    }

    /// A fleet of benchmark `w` on kernel platform `k`, built.
    fn warpvisor_fleet(
        &self,
        k: &KernelPlatform,
        w: &Workload,
        wasm: &[u8],
    ) -> Result<BuiltFleet, String> {
        let start = Instant::now();
        let fleet = fleet(w, wasm, &k.kernel, k.backend.as_ref(), self.settings.vms)?;
        Ok(BuiltFleet {
            build_seconds: start.elapsed().as_secs_f64(),
            allocate_seconds: fleet.stats().allocate.as_secs_f64(),
            fleet,
        })
    }
}

/// One platform of a benchmark: ready for its timed passes, or why it is not.
struct Entrant<'a> {
    platform: Platform,
    /// Preparing it: compiling the module, building kernels (cached builds are quick).
    build_seconds: f64,
    /// Creating a fleet's storage (warpvisor platforms).
    allocate_seconds: f64,
    server: Result<Box<dyn Server + 'a>, String>,
}

impl<'a> Entrant<'a> {
    fn ready(platform: Platform, build_seconds: f64, server: impl Server + 'a) -> Self {
        Entrant {
            platform,
            build_seconds,
            allocate_seconds: 0.0,
            server: Ok(Box::new(server)),
        }
    }

    fn failed(platform: Platform, error: String) -> Self {
        Entrant {
            platform,
            build_seconds: 0.0,
            allocate_seconds: 0.0,
            server: Err(error),
        }
    }

    /// Its outcome, taking its timed passes from `served` (the ready entrants' results, in
    /// order) if it was ready.
    fn outcome(
        &self,
        served: &mut impl Iterator<Item = Result<Served, String>>,
    ) -> Result<Outcome, String> {
        let server = self.server.as_ref().map_err(Clone::clone)?;
        let served = served
            .next()
            .unwrap_or_else(|| Err(format!("{} did not run", self.platform.key())))?;
        let phases = server
            .spent()
            .map(|spent| phases(&spent, self.allocate_seconds, served.wall.as_secs_f64()));
        Ok(Outcome {
            served,
            build_seconds: self.build_seconds,
            phases,
        })
    }
}

/// A warpvisor fleet ready for a benchmark's passes.
struct BuiltFleet {
    fleet: WasiFleet,
    /// Translating and building its kernels (cached builds are quick).
    build_seconds: f64,
    /// Creating its storage.
    allocate_seconds: f64,
}

/// A fleet of `vms` VMs of benchmark `w`'s module, its kernels built with `options`.
pub(crate) fn fleet(
    w: &Workload,
    wasm: &[u8],
    options: &KernelOptions,
    backend: &dyn Backend,
    vms: u32,
) -> Result<WasiFleet, String> {
    let program = Program::compile(wasm, options, backend).map_err(|e| format!("{e:#}"))?;
    WasiFleet::new(Arc::new(program), &wasi_config(w, vms)).map_err(|e| e.to_string())
}

/// How a fleet of `vms` VMs runs benchmark `w`'s program.
fn wasi_config(w: &Workload, vms: u32) -> WasiRunConfig {
    WasiRunConfig {
        fleet: FleetConfig {
            num_vms: vms,
            max_memory_pages: w.memory_pages,
            ..FleetConfig::default()
        },
        program_name: w.name.to_string(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    }
}

/// The benchmark's module, or why there is none, for one more platform.
fn module<'a>(wasm: &'a Result<Cow<'static, [u8]>, String>) -> Result<&'a [u8], String> {
    wasm.as_deref().map_err(Clone::clone)
}

/// A WASI job whose stdin is the request.
fn job(request: &[u8]) -> WasiJob {
    WasiJob {
        stdin: request.to_vec().into(),
        ..WasiJob::default()
    }
}

fn mean_len(lens: impl ExactSizeIterator<Item = usize>) -> f64 {
    let n = lens.len().max(1) as f64;
    lens.sum::<usize>() as f64 / n
}

/// The phases of `spent`, over `wall` seconds of timed passes; `allocate` seconds created the
/// fleet's storage before them.
fn phases(spent: &FleetTime, allocate: f64, wall: f64) -> Phases {
    let stats = &spent.fleet;
    let execute = stats.execute.as_secs_f64();
    let transfer = stats.transfer.as_secs_f64();
    let hypercall = stats.hypercall_service.as_secs_f64();
    let instantiate = stats.instantiate.as_secs_f64();
    let schedule = stats.schedule.as_secs_f64();
    let host = spent.host.as_secs_f64();
    Phases {
        allocate_seconds: allocate,
        execute_seconds: execute,
        transfer_seconds: transfer,
        hypercall_seconds: hypercall,
        instantiate_seconds: instantiate,
        schedule_seconds: schedule,
        host_seconds: host,
        other_seconds: (wall - execute - transfer - hypercall - instantiate - schedule - host)
            .max(0.0),
        launches: stats.launches,
        hypercalls: stats.hypercalls,
        bytes_to_device: stats.bytes_to_device,
        bytes_from_device: stats.bytes_from_device,
        transfers: stats.transfers,
        bytes_per_launch: stats.bytes_per_launch(),
        slow_calls: stats.slow_calls,
        indirect_calls: stats.indirect_calls,
        saved_words: stats.saved_words,
        continuations_estimate_seconds: None,
    }
}

fn platform_run(p: Platform, o: &Outcome, verdict: Result<(), String>) -> PlatformRun {
    let (status, detail) = match verdict {
        Ok(()) => (RunStatus::Validated, None),
        Err(e) => (RunStatus::Mismatch, Some(e)),
    };
    PlatformRun {
        platform: p.key(),
        status,
        detail,
        build_seconds: o.build_seconds,
        warmup_seconds: o.served.warmup.as_secs_f64(),
        requests: o.served.requests,
        seconds: o.served.wall.as_secs_f64(),
        throughput: o.served.throughput(),
        batch_size: o.served.batch_size,
        batch_latency_ms: Latency::of(&o.served.latencies),
        phases: o.phases,
    }
}

fn failed_run(p: Platform, error: String) -> PlatformRun {
    PlatformRun {
        platform: p.key(),
        status: RunStatus::Error,
        detail: Some(error),
        build_seconds: 0.0,
        warmup_seconds: 0.0,
        requests: 0,
        seconds: 0.0,
        throughput: 0.0,
        batch_size: 0,
        batch_latency_ms: Latency::default(),
        phases: None,
    }
}

/// One progress line: the platform's throughput, or why it has none.
fn describe(name: &str, run: &PlatformRun) -> String {
    match run.status {
        RunStatus::Validated => format!(
            "  {name}: {:<17} {:>10.1} req/s  (build {:.1} s, warm-up {:.1} s, {} requests in {:.1} s)",
            run.platform, run.throughput, run.build_seconds, run.warmup_seconds, run.requests, run.seconds
        ),
        RunStatus::Mismatch => format!(
            "  {name}: {:<17} NOT VALIDATED: {}",
            run.platform,
            run.detail.as_deref().unwrap_or("")
        ),
        RunStatus::Error => format!(
            "  {name}: {:<17} FAILED: {}",
            run.platform,
            run.detail.as_deref().unwrap_or("")
        ),
    }
}
