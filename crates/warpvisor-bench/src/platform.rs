//! The platforms a benchmark runs on: the `native-x86` and `wasmtime` baselines, and warpvisor
//! on each kernel backend.

use std::sync::Arc;

use serde::Serialize;
use warpvisor::backend::cpu::CpuBackend;
use warpvisor::backend::cuda::CudaBackend;
use warpvisor::backend::opencl::OpenClBackend;
use warpvisor::backend::select::{self, BackendKind};
use warpvisor::backend::Backend;
use warpvisor::codegen::{CallMode, Dialect, KernelOptions, MemoryChecks};

use crate::settings::Settings;

/// Where a benchmark runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// The benchmark compiled for this machine, one worker per core.
    Native,
    /// The WebAssembly module in wasmtime, one instance per request, one worker per core.
    Wasmtime,
    /// warpvisor's `cpu` backend.
    Cpu,
    /// warpvisor's `opencl` backend.
    OpenCl,
    /// warpvisor's `cuda` backend.
    Cuda,
}

impl Platform {
    /// Every platform, in report order.
    pub const ALL: [Platform; 5] = [
        Platform::Native,
        Platform::Wasmtime,
        Platform::Cpu,
        Platform::OpenCl,
        Platform::Cuda,
    ];

    /// The name reports use (`native-x86`, `warpvisor-cpu`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Platform::Native => "native-x86",
            Platform::Wasmtime => "wasmtime",
            Platform::Cpu => "warpvisor-cpu",
            Platform::OpenCl => "warpvisor-opencl",
            Platform::Cuda => "warpvisor-cuda",
        }
    }

    /// The platform of a report name, or of a backend name (`cpu`, `opencl`, `cuda`).
    pub fn from_name(name: &str) -> Option<Platform> {
        Platform::ALL
            .into_iter()
            .find(|p| p.key() == name || p.backend().is_some_and(|k| k.name() == name))
            .or((name == "native").then_some(Platform::Native))
    }

    /// The warpvisor backend this platform runs on, if it is one.
    pub fn backend(self) -> Option<BackendKind> {
        match self {
            Platform::Cpu => Some(BackendKind::Cpu),
            Platform::OpenCl => Some(BackendKind::OpenCl),
            Platform::Cuda => Some(BackendKind::Cuda),
            Platform::Native | Platform::Wasmtime => None,
        }
    }
}

/// One value per platform; serialised as an object with every platform's key, `null` where
/// a platform has no value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerPlatform<T> {
    /// `native-x86`.
    #[serde(rename = "native-x86")]
    pub native: Option<T>,
    /// `wasmtime`.
    pub wasmtime: Option<T>,
    /// `warpvisor-cpu`.
    #[serde(rename = "warpvisor-cpu")]
    pub cpu: Option<T>,
    /// `warpvisor-opencl`.
    #[serde(rename = "warpvisor-opencl")]
    pub opencl: Option<T>,
    /// `warpvisor-cuda`.
    #[serde(rename = "warpvisor-cuda")]
    pub cuda: Option<T>,
}

impl<T> Default for PerPlatform<T> {
    fn default() -> Self {
        PerPlatform {
            native: None,
            wasmtime: None,
            cpu: None,
            opencl: None,
            cuda: None,
        }
    }
}

impl<T> PerPlatform<T> {
    fn slot(&mut self, p: Platform) -> &mut Option<T> {
        match p {
            Platform::Native => &mut self.native,
            Platform::Wasmtime => &mut self.wasmtime,
            Platform::Cpu => &mut self.cpu,
            Platform::OpenCl => &mut self.opencl,
            Platform::Cuda => &mut self.cuda,
        }
    }

    /// The value of `p`.
    pub fn get(&self, p: Platform) -> Option<&T> {
        match p {
            Platform::Native => self.native.as_ref(),
            Platform::Wasmtime => self.wasmtime.as_ref(),
            Platform::Cpu => self.cpu.as_ref(),
            Platform::OpenCl => self.opencl.as_ref(),
            Platform::Cuda => self.cuda.as_ref(),
        }
    }

    /// Sets the value of `p`.
    pub fn set(&mut self, p: Platform, value: T) {
        *self.slot(p) = Some(value);
    }
}

/// Whether a platform can run here, and on what.
#[derive(Debug, Clone, Serialize)]
pub struct Availability {
    /// The platform's report name.
    pub platform: &'static str,
    /// Whether the suite runs it.
    pub available: bool,
    /// Its device, or why it does not run.
    pub detail: String,
}

/// A warpvisor backend ready to build kernels, with the options its kernels get.
#[derive(Clone)]
pub struct KernelPlatform {
    /// The platform.
    pub platform: Platform,
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// How its kernels are built.
    pub kernel: KernelOptions,
}

/// Opens every platform `settings` asks for: the kernel backends that work here, and what
/// each platform runs on or why it does not.
pub fn open(settings: &Settings) -> (Vec<KernelPlatform>, Vec<Availability>) {
    let mut kernels = Vec::new();
    let mut availability = Vec::new();
    for p in Platform::ALL {
        let mut note = |available: bool, detail: String| {
            availability.push(Availability {
                platform: p.key(),
                available,
                detail,
            })
        };
        if !settings.wants(p) {
            note(false, "not selected (--platforms)".into());
            continue;
        }
        let Some(kind) = p.backend() else {
            let detail = match p {
                Platform::Native => format!(
                    "{} build of the benchmarks, {} workers",
                    std::env::consts::ARCH,
                    settings.workers
                ),
                _ => format!(
                    "{}, {} workers",
                    warpvisor::backend::wasmtime::WasmtimeBackend::version(),
                    settings.workers
                ),
            };
            note(true, detail);
            continue;
        };
        match open_backend(kind, settings) {
            Ok((backend, gpu, device)) => {
                note(true, device);
                kernels.push(KernelPlatform {
                    platform: p,
                    kernel: kernel_options(kind, gpu, settings),
                    backend,
                });
            }
            Err(why) => note(false, why),
        }
    }
    (kernels, availability)
}

/// The backend of `kind`, whether it runs on a GPU, and its device; or why it cannot run.
fn open_backend(
    kind: BackendKind,
    settings: &Settings,
) -> Result<(Arc<dyn Backend>, bool, String), String> {
    let probe = select::probe(kind);
    let devices = probe.state?;
    let device = devices.first().cloned().unwrap_or_default();
    let backend: Arc<dyn Backend> = match kind {
        BackendKind::Cpu => {
            Arc::new(CpuBackend::new(Some(settings.workers)).map_err(|e| e.to_string())?)
        }
        BackendKind::OpenCl => {
            let b = OpenClBackend::new(None).map_err(|e| e.to_string())?;
            let d = b.device();
            let device = format!(
                "{} ({}), {} compute units",
                d.name, d.platform, d.compute_units
            );
            let gpu = d.gpu;
            return Ok((Arc::new(b), gpu, device));
        }
        BackendKind::Cuda => Arc::new(CudaBackend::new(None).map_err(|e| e.to_string())?),
        BackendKind::Wasmtime => return Err("wasmtime is a baseline, not a kernel backend".into()),
    };
    Ok((backend, probe.has_gpu, device))
}

/// Kernel options of `kind`: interleave 8 on GPUs and 0 (contiguous, the right layout for
/// CPUs) elsewhere unless `--interleave` says otherwise; warpvisor's partition defaults.
fn kernel_options(kind: BackendKind, gpu: bool, settings: &Settings) -> KernelOptions {
    let dialect = kind.dialect().unwrap_or(Dialect::C);
    let mut options = KernelOptions {
        dialect,
        interleave: settings.interleave.unwrap_or(if gpu { 8 } else { 0 }),
        opt_level: settings.opt_level,
        partition_ops: settings
            .partition_ops
            .unwrap_or(dialect.default_partition_ops()),
        calls: if dialect == Dialect::C {
            settings.cpu_calls
        } else {
            CallMode::Continuations
        },
        dirty_pages: settings.dirty_pages,
        ..KernelOptions::default()
    };
    options.memory_checks = match settings.memory_checks {
        // `--memory-checks` where a mode can be chosen (guard regions exist on cpu and PoCL).
        Some(m) if dialect != Dialect::Cuda => m,
        // What the backend offers by default, settled with it (guard regions on PoCL).
        _ if dialect == Dialect::OpenCl => MemoryChecks::Auto,
        _ => MemoryChecks::default_for(&options),
    };
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serialise_with_every_key() {
        for p in Platform::ALL {
            assert_eq!(Platform::from_name(p.key()), Some(p));
        }
        assert_eq!(Platform::from_name("opencl"), Some(Platform::OpenCl));
        assert_eq!(Platform::from_name("native"), Some(Platform::Native));
        assert_eq!(Platform::from_name("gpu"), None);
        let mut v = PerPlatform::default();
        v.set(Platform::Cpu, 2.5);
        assert_eq!(v.get(Platform::Cpu), Some(&2.5));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"native-x86":null,"wasmtime":null,"warpvisor-cpu":2.5,"warpvisor-opencl":null,"warpvisor-cuda":null}"#
        );
    }
}
