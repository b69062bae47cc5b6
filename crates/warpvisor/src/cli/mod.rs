//! Command-line front end: argument parsing and the subcommands.

mod compile;
mod devices;
mod progress;
mod run;
mod wasi_suite;
mod wast;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use std::sync::Arc;
use std::time::Duration;

use warpvisor::backend::cpu::CpuBackend;
use warpvisor::backend::cuda::CudaBackend;
use warpvisor::backend::opencl::OpenClBackend;
use warpvisor::backend::select::{self, BackendKind};
use warpvisor::backend::wasmtime::{WasmtimeBackend, WasmtimeConfig};
use warpvisor::backend::Backend;
use warpvisor::codegen::{Dialect, KernelOptions};
use warpvisor::runner::Executor;
use warpvisor::vmm::FleetConfig;

/// Run many copies of one WebAssembly program as VMs in one data-parallel kernel.
#[derive(Parser)]
#[command(name = "warpvisor", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an exported function on a fleet of VMs.
    Run(run::RunArgs),
    /// Run WebAssembly spec-test scripts (.wast).
    Wast(wast::WastArgs),
    /// Translate a module and write the kernel source.
    Compile(compile::CompileArgs),
    /// List the backends and their devices.
    Devices,
    /// Run the WASI test suite (a folder of `*.wasm` tests with `.json` specifications).
    WasiSuite(wasi_suite::WasiSuiteArgs),
}

/// Settings shared by the commands that build kernels and fleets.
#[derive(Args, Clone)]
pub struct FleetArgs {
    /// Backend: auto (a CUDA GPU, else an OpenCL GPU, else cpu when a C compiler is found,
    /// else wasmtime; `warpvisor devices` shows the pick), cpu, opencl, cuda or wasmtime.
    #[arg(long, default_value = "auto", value_parser = ["auto", "cpu", "opencl", "cuda", "wasmtime"])]
    pub backend: String,
    /// Device index of the opencl or cuda backend (see `warpvisor devices`); default: the
    /// first GPU, else the first device.
    #[arg(long)]
    pub device: Option<usize>,
    /// Device compiler optimisation level 0-3 (cpu: -O<n>; opencl: 0 adds -cl-opt-disable;
    /// cuda: 0 compiles with -G, without device optimisation).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub opt_level: u8,
    /// Bytes per memory cell: 0 (contiguous per VM), 4 or 8.
    #[arg(long, default_value_t = 0, value_parser = parse_interleave)]
    pub interleave: u32,
    /// Most 64 KiB pages a VM's memory may grow to.
    #[arg(long = "max-memory", default_value_t = 256, value_name = "PAGES")]
    pub max_memory: u32,
    /// Call-stack words (8 bytes each) per VM for continuation frames.
    #[arg(long, default_value_t = 1 << 16, value_name = "WORDS")]
    pub stack_words: u32,
    /// Most nested continuation calls per VM; deeper recursion traps with stack_overflow.
    #[arg(long, default_value_t = 10_000)]
    pub max_call_depth: u32,
    /// Most elements a table may grow to.
    #[arg(long, default_value_t = 10_000)]
    pub max_table_elements: u32,
    /// Split the kernel into partitions of at most this many WebAssembly operators (0: one
    /// kernel). Default: none for cpu, 10000 for opencl, 2000 for cuda: device compilers slow
    /// down with kernel size, and every call between partitions costs a launch.
    #[arg(long)]
    pub partition_ops: Option<u32>,
    /// Stop every VM that runs more than this many function calls and loop iterations, with
    /// the trap `out_of_fuel` (the others complete). On wasmtime this is wasmtime's fuel, about
    /// one unit per operator. Default: no limit.
    #[arg(long)]
    pub fuel: Option<u32>,
    /// Stop VMs still running after this many seconds with the trap `timeout` (the others
    /// complete). Fleets check between kernel launches and hypercalls (use --fuel for guests
    /// that loop without system calls); wasmtime interrupts any instance. Default: no limit.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Worker threads of the cpu and wasmtime backends (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
}

impl FleetArgs {
    /// The backend to use, with the reason when `auto` chose it.
    pub fn resolve(&self) -> (BackendKind, Option<String>) {
        match BackendKind::from_name(&self.backend) {
            Some(k) => (k, None),
            None => {
                let (k, why) = select::auto();
                (k, Some(why))
            }
        }
    }

    /// Kernel options for a kernel backend.
    pub fn kernel_for(&self, kind: BackendKind) -> KernelOptions {
        let dialect = kind.dialect().unwrap_or(Dialect::C);
        KernelOptions {
            dialect,
            interleave: self.interleave,
            max_table_elements: self.max_table_elements,
            opt_level: self.opt_level,
            meter_fuel: self.fuel.is_some(),
            partition_ops: self
                .partition_ops
                .unwrap_or(dialect.default_partition_ops()),
        }
    }

    /// Fleet settings for `num_vms` VMs.
    pub fn fleet(&self, num_vms: u32) -> FleetConfig {
        FleetConfig {
            num_vms,
            max_memory_pages: self.max_memory,
            stack_words: self.stack_words,
            max_call_depth: self.max_call_depth,
            fuel: self.fuel.unwrap_or(u32::MAX),
            timeout: self.timeout,
        }
    }

    /// A kernel backend of kind `kind` (not wasmtime).
    fn kernel_backend(&self, kind: BackendKind) -> anyhow::Result<Arc<dyn Backend>> {
        Ok(match kind {
            BackendKind::OpenCl => Arc::new(OpenClBackend::new(self.device)?),
            BackendKind::Cuda => Arc::new(CudaBackend::new(self.device)?),
            BackendKind::Cpu => Arc::new(CpuBackend::new(self.workers)?),
            BackendKind::Wasmtime => anyhow::bail!(
                "this command needs a kernel backend (cpu, opencl or cuda), not wasmtime"
            ),
        })
    }

    /// The selected kernel backend, for commands that only run kernels (`wast`): `auto`
    /// never picks wasmtime here.
    pub fn backend(&self) -> anyhow::Result<Arc<dyn Backend>> {
        let kind = match self.resolve().0 {
            BackendKind::Wasmtime if self.backend == "auto" => BackendKind::Cpu,
            k => k,
        };
        self.kernel_backend(kind)
    }

    /// The selected backend, ready to run programs, with the reason when `auto` chose it.
    pub fn executor(&self) -> anyhow::Result<(Executor, Option<String>)> {
        let (kind, why) = self.resolve();
        let executor = match kind {
            BackendKind::Wasmtime => Executor::Wasmtime(WasmtimeBackend::new(WasmtimeConfig {
                workers: self.workers.unwrap_or(0),
                fuel: self.fuel.map(u64::from),
                timeout: self.timeout,
            })?),
            k => Executor::Fleet {
                backend: self.kernel_backend(k)?,
                kernel: self.kernel_for(k),
            },
        };
        Ok((executor, why))
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("the timeout must be positive, not `{s}`"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

fn parse_interleave(s: &str) -> Result<u32, String> {
    match s {
        "0" => Ok(0),
        "4" => Ok(4),
        "8" => Ok(8),
        _ => Err(format!("interleave must be 0, 4 or 8, not `{s}`")),
    }
}

/// Reads a file, naming it in the error.
pub fn read_file(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
}

fn find_compile_error(e: &anyhow::Error) -> Option<&warpvisor::backend::BackendError> {
    e.chain().find_map(|c| {
        c.downcast_ref::<warpvisor::backend::BackendError>()
            .or_else(|| match c.downcast_ref::<warpvisor::vmm::VmmError>() {
                Some(warpvisor::vmm::VmmError::Backend(b)) => Some(b),
                _ => None,
            })
            .filter(|b| matches!(b, warpvisor::backend::BackendError::Compile { .. }))
    })
}

/// Parses the command line, runs the command, and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return 0;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                eprint!("{e}");
                return 1;
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("{first} (see warpvisor --help)");
            return 1;
        }
    };
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Wast(a) => wast::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Devices => devices::run(),
        Command::WasiSuite(a) => wasi_suite::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A device compiler's log is shown whole; everything else is one line.
            if let Some(warpvisor::backend::BackendError::Compile { compiler, log }) =
                find_compile_error(&e)
            {
                eprintln!("error: kernel compilation failed ({compiler}); build log:\n{log}");
                return 1;
            }
            let msg = format!("{e:#}");
            eprintln!("error: {}", msg.replace('\n', " "));
            1
        }
    }
}
