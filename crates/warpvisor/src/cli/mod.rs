//! Command-line front end: argument parsing and the subcommands.

mod compile;
mod devices;
mod profile;
mod progress;
mod ptx;
mod riscv;
mod run;
mod serve;
mod simt;
mod wasi_suite;
mod wast;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use warpvisor::backend::cpu::CpuBackend;
use warpvisor::backend::cuda::CudaBackend;
use warpvisor::backend::opencl::OpenClBackend;
use warpvisor::backend::select::{self, BackendKind};
use warpvisor::backend::wasmtime::{WasmtimeBackend, WasmtimeConfig};
use warpvisor::backend::Backend;
use warpvisor::codegen::{CallMode, Dialect, DirtyPages, KernelOptions, MemoryChecks};
use warpvisor::runner::Executor;
use warpvisor::vmm::FleetConfig;

/// Writes a line on standard error, ignoring failure (`eprintln!` panics when standard error
/// is a closed pipe).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use errln;

/// The largest module or script file read: the 1 GiB wasmparser allows a module
/// (`wasmparser::limits::MAX_WASM_MODULE_SIZE`, which that crate keeps private).
pub const MAX_MODULE_FILE_SIZE: u64 = 1 << 30;
/// The largest jobs file read.
pub const MAX_JOBS_FILE_SIZE: u64 = 1 << 30;
/// Most VMs in a fleet (`--vms`): far more than any device runs at once, and few enough that
/// the host's per-VM bookkeeping stays small.
pub const MAX_VMS: u32 = 1 << 20;
/// Most 64 KiB pages of a 32-bit memory (4 GiB): `--max-memory` above it means nothing.
pub const MAX_MEMORY_PAGES: u32 = 65536;
/// Most call-stack words per VM (`--stack-words`): 128 MiB of frames.
pub const MAX_STACK_WORDS: u32 = 1 << 24;
/// Most elements of a table (`--max-table-elements`): wasmparser's limit on a module's tables
/// (`MAX_WASM_TABLE_ENTRIES`).
pub const MAX_TABLE_ELEMENTS: u32 = 10_000_000;
/// Most worker threads (`--workers`).
pub const MAX_WORKERS: u64 = 1024;
/// Longest `--timeout`: a year.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

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
    /// CUDA kernels on the CPU: run or translate PTX.
    #[command(subcommand)]
    Ptx(ptx::PtxCommand),
    /// Serve a WASI program over HTTP: one request per job, batched onto a resident fleet.
    Serve(serve::ServeArgs),
    /// Record a call profile: run jobs on a kernel that counts every call site's calls and
    /// every call_indirect's targets, for `run --profile` and `compile --profile`.
    Profile(profile::ProfileArgs),
    /// Predict SIMT behaviour: trace a fleet's VMs, replay them in warps.
    #[command(subcommand)]
    Simt(simt::SimtCommand),
    /// RISC-V Linux executables: translate one into a WebAssembly module (`run`, `serve` and
    /// `simt` also accept executables and translate them first).
    #[command(subcommand)]
    Riscv(riscv::RiscvCommand),
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
    /// Bytes per memory cell: 0 (contiguous per VM), 4 or 8. Default 0 (`run --analyze` on
    /// a GPU backend: the interleave the analysis recommends).
    #[arg(long, value_parser = parse_interleave)]
    pub interleave: Option<u32>,
    /// Most 64 KiB pages a VM's memory may grow to, at most 65536 (4 GiB).
    #[arg(long = "max-memory", default_value_t = 256, value_name = "PAGES",
          value_parser = clap::value_parser!(u32).range(0..=MAX_MEMORY_PAGES as i64))]
    pub max_memory: u32,
    /// Call-stack words (8 bytes each) per VM for continuation frames, at most 16777216; with
    /// direct calls, 64 bytes of native stack each (within the worker's 56 MiB).
    #[arg(long, default_value_t = 1 << 16, value_name = "WORDS",
          value_parser = clap::value_parser!(u32).range(0..=MAX_STACK_WORDS as i64))]
    pub stack_words: u32,
    /// Most nested continuation calls per VM; deeper recursion traps with stack_overflow.
    #[arg(long, default_value_t = 10_000)]
    pub max_call_depth: u32,
    /// Most elements a table may grow to, at most 10000000.
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(0..=MAX_TABLE_ELEMENTS as i64))]
    pub max_table_elements: u32,
    /// Split the kernel into partitions of at most this many WebAssembly operators (0: one
    /// kernel). Default: none for cpu and opencl, 2000 for cuda: a device compiler may slow down
    /// with kernel size, and every call between partitions costs a launch.
    #[arg(long)]
    pub partition_ops: Option<u32>,
    /// Stop every VM that runs more than this many function calls and loop iterations, with
    /// the trap `out_of_fuel` (the others complete). On wasmtime this is wasmtime's fuel, about
    /// one unit per operator. Default: no limit.
    #[arg(long)]
    pub fuel: Option<u32>,
    /// Stop VMs still running after this many seconds with the trap `timeout` (the others
    /// complete). Fleets check between kernel launches and hypercalls (use --fuel for guests
    /// that loop without system calls); wasmtime interrupts any instance. At most a year.
    /// Default: no limit.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// How kernels make calls that may leave the device: `direct` (imports served while the
    /// kernel waits: on cpu, with native recursion within --stack-words × 64 bytes of stack;
    /// on opencl devices with fine-grained SVM and cuda devices that map host memory,
    /// recursion still through continuations) or
    /// `continuations` (every device). Default: direct on cpu, continuations elsewhere.
    #[arg(long, value_name = "MODE", value_parser = parse_calls)]
    pub calls: Option<CallMode>,
    /// How kernels keep memory accesses inside each VM's memory: `guard` (guard regions, as
    /// wasmtime: 4 GiB + 32 MiB of address space reserved per VM, accesses without checks, a
    /// fault becomes the VM's trap; x86-64 Linux with --interleave 0: cpu with direct calls,
    /// opencl with continuations on a CPU device computing in host memory such as PoCL),
    /// `explicit` (a check per access; every backend) or `auto` (the default: guard regions
    /// where they apply — on opencl above --opt-level 0 — explicit checks elsewhere).
    #[arg(long, value_name = "MODE", value_parser = parse_memory_checks)]
    pub memory_checks: Option<MemoryChecks>,
    /// How a reset learns the pages each VM wrote: `auto` (by the MMU where it can be asked —
    /// cpu with guard regions, or an OpenCL CPU device such as PoCL with continuations and
    /// --interleave 0, on Linux 6.7 or later with asynchronous userfaultfd write protection —
    /// so stores carry no marks; else marks) or `marks` (every store marks its page).
    #[arg(long, value_name = "MODE", value_parser = parse_dirty_pages, default_value = "auto")]
    pub dirty_pages: DirtyPages,
    /// Worker threads of the cpu and wasmtime backends, 1 to 1024 (default: one per core).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_WORKERS))]
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
        let mut options = KernelOptions {
            dialect,
            interleave: self.interleave.unwrap_or(0),
            max_table_elements: self.max_table_elements,
            opt_level: self.opt_level,
            meter_fuel: self.fuel.is_some(),
            calls: self.calls.unwrap_or(if dialect == Dialect::C {
                CallMode::Direct
            } else {
                CallMode::Continuations
            }),
            partition_ops: self
                .partition_ops
                .unwrap_or(dialect.default_partition_ops()),
            memory_checks: MemoryChecks::Explicit,
            trace: false,
            parking_imports: Vec::new(),
            count_calls: false,
            profile: None,
            dirty_pages: self.dirty_pages,
        };
        // `auto` is settled with the backend (`Program::compile`).
        options.memory_checks = self.memory_checks.unwrap_or(MemoryChecks::Auto);
        options
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

fn parse_calls(s: &str) -> Result<CallMode, String> {
    CallMode::from_name(s)
        .ok_or_else(|| format!("`{s}` is not a call mode: use `direct` or `continuations`"))
}

fn parse_memory_checks(s: &str) -> Result<MemoryChecks, String> {
    MemoryChecks::from_name(s)
        .ok_or_else(|| format!("`{s}` is not a memory-check mode: use `guard` or `explicit`"))
}

fn parse_dirty_pages(s: &str) -> Result<DirtyPages, String> {
    DirtyPages::from_name(s)
        .ok_or_else(|| format!("`{s}` is not a dirty-page mode: use `auto` or `marks`"))
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("the timeout must be positive, not `{s}`"));
    }
    if secs > MAX_TIMEOUT.as_secs_f64() {
        return Err(format!(
            "the timeout must be at most {} seconds (a year), not `{s}`",
            MAX_TIMEOUT.as_secs()
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

pub(crate) fn parse_interleave(s: &str) -> Result<u32, String> {
    match s {
        "0" => Ok(0),
        "4" => Ok(4),
        "8" => Ok(8),
        _ => Err(format!("interleave must be 0, 4 or 8, not `{s}`")),
    }
}

/// Reads a module file of at most [`MAX_MODULE_FILE_SIZE`] bytes (a RISC-V executable is
/// translated into one), naming it in the error.
pub fn read_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    riscv::module_bytes(
        read_limited(path, MAX_MODULE_FILE_SIZE, "module file")?,
        path,
    )
}

/// Reads at most `limit` bytes of `path` (`what` names it in the error): a larger file, or an
/// endless one such as `/dev/zero`, is an error once `limit + 1` bytes are read.
pub fn read_limited(path: &Path, limit: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    read_open_limited(file, path, limit, what)
}

/// [`read_limited`] of a file already open.
pub fn read_open_limited(
    file: std::fs::File,
    path: &Path,
    limit: u64,
    what: &str,
) -> anyhow::Result<Vec<u8>> {
    let too_large = || {
        anyhow::anyhow!(
            "{what} {} is larger than the limit of {limit} bytes",
            path.display()
        )
    };
    // A regular file's size is known without reading it: too large is an error before any
    // reading, and the buffer is allocated once (not grown by doubling and copying).
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if size.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size.map_or(0, |n| n as usize + 1));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Standard output was closed by its reader (`warpvisor ... | head`): the command stops
/// quietly instead of panicking like `print!` does.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct OutputClosed;

/// A writer whose broken-pipe errors carry [`OutputClosed`], so that [`main`] tells a reader
/// that went away from a real failure.
pub struct Output<W>(W);

impl<W: Write> Write for Output<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(closed)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(closed)
    }
}

fn closed(e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::io::Error::new(std::io::ErrorKind::BrokenPipe, OutputClosed)
    } else {
        e
    }
}

/// Standard output (line-buffered) for the commands' results: write with `writeln!(...)?`
/// and flush at the end, never `print!`.
pub fn stdout() -> Output<std::io::Stdout> {
    Output(std::io::stdout())
}

/// Whether `e` is standard output closing under us (see [`OutputClosed`]).
fn is_output_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<OutputClosed>()
            || c.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<OutputClosed>())
    })
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
                // A reader that stops early (`| head`) is no error.
                let mut out = stdout();
                let _ = write!(out, "{e}").and_then(|()| out.flush());
                return 0;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = write!(std::io::stderr(), "{e}");
                return 1;
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            errln!("{first} (see warpvisor --help)");
            return 1;
        }
    };
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Wast(a) => wast::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Devices => devices::run(),
        Command::WasiSuite(a) => wasi_suite::run(a),
        Command::Ptx(c) => ptx::run(c),
        Command::Serve(a) => serve::run(a),
        Command::Simt(c) => simt::run(c),
        Command::Profile(a) => profile::run(a),
        Command::Riscv(c) => riscv::run(c),
    };
    match result {
        Ok(code) => code,
        // The reader went away (`| head`): what it read is all it wanted.
        Err(e) if is_output_closed(&e) => 0,
        Err(e) => {
            // A device compiler's log is shown whole; everything else is one line.
            if let Some(warpvisor::backend::BackendError::Compile { compiler, log }) =
                find_compile_error(&e)
            {
                errln!("error: kernel compilation failed ({compiler}); build log:\n{log}");
                return 1;
            }
            let msg = format!("{e:#}");
            errln!("error: {}", msg.replace('\n', " "));
            1
        }
    }
}
