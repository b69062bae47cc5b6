//! Which backends this machine has, and the one `--backend auto` picks: a CUDA GPU, else an
//! OpenCL GPU, else `cpu` (when a C compiler is found), else `wasmtime`.

use super::{cpu, cuda, opencl, wasmtime};

/// A backend by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Host C kernel on worker threads.
    Cpu,
    /// OpenCL C kernel.
    OpenCl,
    /// CUDA C++ kernel.
    Cuda,
    /// Ordinary wasmtime instances.
    Wasmtime,
}

impl BackendKind {
    /// Every backend, in the order `devices` lists them.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Cuda,
        BackendKind::OpenCl,
        BackendKind::Cpu,
        BackendKind::Wasmtime,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::OpenCl => "opencl",
            BackendKind::Cuda => "cuda",
            BackendKind::Wasmtime => "wasmtime",
        }
    }

    /// The kernel language of a kernel backend (`None` for wasmtime).
    pub fn dialect(self) -> Option<crate::codegen::Dialect> {
        use crate::codegen::Dialect;
        match self {
            BackendKind::Cpu => Some(Dialect::C),
            BackendKind::OpenCl => Some(Dialect::OpenCl),
            BackendKind::Cuda => Some(Dialect::Cuda),
            BackendKind::Wasmtime => None,
        }
    }

    /// The backend of a command-line name.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// What one backend offers here.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The backend.
    pub kind: BackendKind,
    /// Whether it has a GPU to run on (what `auto` looks for first).
    pub has_gpu: bool,
    /// Its devices, one line each, or why it is unavailable.
    pub state: Result<Vec<String>, String>,
}

/// Probes one backend; never panics, whatever is (not) installed.
pub fn probe(kind: BackendKind) -> Probe {
    let (has_gpu, state) = match kind {
        BackendKind::Cuda => match cuda::devices() {
            // warpvisor's CPU driver is not a GPU: `auto` does not pick it over `cpu`.
            Ok(ds) => (
                !ds.is_empty() && !cuda::driver_is_cpu(),
                Ok(ds
                    .iter()
                    .map(|d| {
                        format!(
                            "[{}] {} (compute capability {}.{}) — {} SMs, {} MiB; synchronous imports (--calls direct): {}",
                            d.index,
                            d.name,
                            d.compute_capability.0,
                            d.compute_capability.1,
                            d.multiprocessors,
                            d.global_memory >> 20,
                            d.sync_imports_unsupported
                                .as_deref()
                                .map_or("yes".to_string(), |why| format!("no, {why}"))
                        )
                    })
                    .collect()),
            ),
            Err(e) => (false, Err(reason(e))),
        },
        BackendKind::OpenCl => match opencl::devices() {
            Ok(ds) => (
                ds.iter().any(|(d, _)| d.gpu),
                Ok(ds
                    .iter()
                    .map(|(d, _)| {
                        format!(
                            "[{}] {} ({}; {}) — {} compute units, {} MiB global memory, {} MiB largest allocation, driver {}; synchronous imports (--calls direct): {}",
                            d.index,
                            d.name,
                            d.platform,
                            if d.gpu { "GPU" } else { "not a GPU" },
                            d.compute_units,
                            d.global_memory >> 20,
                            d.max_allocation >> 20,
                            d.driver,
                            d.sync_imports_unsupported
                                .as_deref()
                                .map_or("yes".to_string(), |why| format!("no, {why}"))
                        )
                    })
                    .collect()),
            ),
            Err(e) => (false, Err(reason(e))),
        },
        BackendKind::Cpu => match cpu::CCompiler::detect() {
            Ok(c) => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                (
                    false,
                    Ok(vec![format!(
                        "host C compiler {} ({}), {cores} worker threads; dirty pages found by {}",
                        c.path(),
                        c.identity(),
                        match cpu::write_watch_available() {
                            true => "the MMU (userfaultfd write protection)",
                            false => "marks at every store",
                        }
                    )]),
                )
            }
            Err(e) => (false, Err(reason(e))),
        },
        BackendKind::Wasmtime => (
            false,
            Ok(vec![format!(
                "{}, one instance per job",
                wasmtime::WasmtimeBackend::version()
            )]),
        ),
    };
    Probe {
        kind,
        has_gpu,
        state,
    }
}

fn reason(e: super::BackendError) -> String {
    match e {
        super::BackendError::Unavailable { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// The backend `auto` picks among `probes`, and why.
pub fn pick_auto(probes: &[Probe]) -> (BackendKind, String) {
    let find = |k: BackendKind| probes.iter().find(|p| p.kind == k);
    if let Some(p) = find(BackendKind::Cuda).filter(|p| p.has_gpu) {
        return (p.kind, "a CUDA GPU is present".into());
    }
    if let Some(p) = find(BackendKind::OpenCl).filter(|p| p.has_gpu) {
        return (p.kind, "an OpenCL GPU is present (no CUDA GPU)".into());
    }
    if let Some(p) = find(BackendKind::Cpu).filter(|p| p.state.is_ok()) {
        return (
            p.kind,
            "no GPU found; the host C compiler is available".into(),
        );
    }
    (
        BackendKind::Wasmtime,
        "no GPU and no C compiler found; wasmtime is built in".into(),
    )
}

/// Probes what `auto` needs, in its order of preference, and picks.
pub fn auto() -> (BackendKind, String) {
    let mut probes = Vec::new();
    for kind in [BackendKind::Cuda, BackendKind::OpenCl, BackendKind::Cpu] {
        let p = probe(kind);
        let done = p.has_gpu || (kind == BackendKind::Cpu && p.state.is_ok());
        probes.push(p);
        if done {
            break;
        }
    }
    pick_auto(&probes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(kind: BackendKind, has_gpu: bool, ok: bool) -> Probe {
        Probe {
            kind,
            has_gpu,
            state: if ok { Ok(vec![]) } else { Err("absent".into()) },
        }
    }

    #[test]
    fn auto_prefers_cuda_then_opencl_gpu_then_cpu_then_wasmtime() {
        use BackendKind::*;
        let all = [
            p(Cuda, true, true),
            p(OpenCl, true, true),
            p(Cpu, false, true),
        ];
        assert_eq!(pick_auto(&all).0, Cuda);
        let no_cuda = [
            p(Cuda, false, false),
            p(OpenCl, true, true),
            p(Cpu, false, true),
        ];
        assert_eq!(pick_auto(&no_cuda).0, OpenCl);
        // PoCL: OpenCL works, but on the CPU; the C backend is the better CPU path.
        let pocl = [
            p(Cuda, false, false),
            p(OpenCl, false, true),
            p(Cpu, false, true),
        ];
        assert_eq!(pick_auto(&pocl).0, Cpu);
        let bare = [
            p(Cuda, false, false),
            p(OpenCl, false, false),
            p(Cpu, false, false),
        ];
        assert_eq!(pick_auto(&bare).0, Wasmtime);
        assert_eq!(BackendKind::from_name("opencl"), Some(OpenCl));
        assert_eq!(BackendKind::from_name("gpu"), None);
    }
}
