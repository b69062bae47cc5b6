//! Command-line front end: argument parsing and the subcommands.

mod compile;
mod devices;
mod run;
mod wasi_suite;
mod wast;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use warpvisor::codegen::{Dialect, KernelOptions};
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
    /// Backend that runs the fleet.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "opencl"])]
    pub backend: String,
    /// OpenCL device index (see `warpvisor devices`); default: the first GPU, else the first device.
    #[arg(long)]
    pub device: Option<usize>,
    /// Device compiler optimisation level 0-3 (opencl: 0 adds -cl-opt-disable).
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
    /// kernel). Default: 0 for cpu, 2000 for opencl, whose compile time grows steeply with size.
    #[arg(long)]
    pub partition_ops: Option<u32>,
    /// Stop every VM that runs more than this many function calls and loop iterations, with
    /// the trap `out_of_fuel` (the others complete). Default: no limit.
    #[arg(long)]
    pub fuel: Option<u32>,
    /// Worker threads of the cpu backend (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
}

impl FleetArgs {
    /// Kernel options from the flags.
    pub fn kernel(&self) -> KernelOptions {
        KernelOptions {
            dialect: if self.backend == "opencl" {
                Dialect::OpenCl
            } else {
                Dialect::C
            },
            interleave: self.interleave,
            max_table_elements: self.max_table_elements,
            opt_level: self.opt_level,
            meter_fuel: self.fuel.is_some(),
            partition_ops: self.partition_ops.unwrap_or(if self.backend == "opencl" {
                2000
            } else {
                0
            }),
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
        }
    }

    /// The selected backend.
    pub fn backend(&self) -> anyhow::Result<std::sync::Arc<dyn warpvisor::backend::Backend>> {
        Ok(match self.backend.as_str() {
            "opencl" => {
                std::sync::Arc::new(warpvisor::backend::opencl::OpenClBackend::new(self.device)?)
            }
            _ => std::sync::Arc::new(warpvisor::backend::cpu::CpuBackend::new(self.workers)?),
        })
    }
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
