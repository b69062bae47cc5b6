//! `warpvisor ptx`: CUDA kernels (PTX) on the CPU. `run` launches one kernel with buffers
//! from files or patterns and writes chosen buffers back; `translate` writes the C.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};

use super::{errln, read_limited};
use warpvisor::ptx::{Arg, DeviceBuffer, Dim3, PtxModule, PtxRuntime};

/// Largest PTX file read.
const MAX_PTX_FILE: u64 = 256 << 20;
/// Largest buffer `--arg buf:BYTES` allocates.
const MAX_BUFFER: u64 = 16 << 30;

/// `warpvisor ptx ...`
#[derive(Subcommand)]
pub enum PtxCommand {
    /// Run one kernel of a PTX module on the CPU.
    Run(PtxRunArgs),
    /// Translate a PTX module and write the C it becomes.
    Translate(PtxTranslateArgs),
}

/// Arguments of `warpvisor ptx run`.
#[derive(Args)]
pub struct PtxRunArgs {
    /// The PTX module.
    module: PathBuf,
    /// The kernel (`.entry`) to launch.
    #[arg(long)]
    kernel: String,
    /// Grid extents: X[,Y[,Z]].
    #[arg(long, value_parser = parse_dim3)]
    grid: Dim3,
    /// Block extents: X[,Y[,Z]].
    #[arg(long, value_parser = parse_dim3)]
    block: Dim3,
    /// Bytes of dynamic shared memory per block.
    #[arg(long, default_value_t = 0)]
    shared: u32,
    /// One per kernel parameter, in order: `i32:V`, `u32:V`, `i64:V`, `u64:V`, `f32:V`,
    /// `f64:V`; a buffer `buf:BYTES` (zeroed), `buf:BYTES:PATTERN` (`iota-u32`, `iota-f32`,
    /// `byte=N`), or `file:PATH` (the file's bytes).
    #[arg(long = "arg", value_name = "SPEC")]
    args: Vec<String>,
    /// After the launch, write buffer argument N (0-based) to PATH: `N=PATH` (repeatable).
    #[arg(long = "save", value_name = "N=PATH")]
    save: Vec<String>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Emulate SIMT execution (warps in lockstep, reconverging at immediate
    /// post-dominators) and report SIMT efficiency and 32-byte sectors per global memory
    /// instruction. Much slower than the default fused execution.
    #[arg(long)]
    simt: bool,
    /// With --simt, also write the counts as JSON to PATH.
    #[arg(long, value_name = "PATH", requires = "simt")]
    simt_json: Option<PathBuf>,
}

/// Arguments of `warpvisor ptx translate`.
#[derive(Args)]
pub struct PtxTranslateArgs {
    /// The PTX module.
    module: PathBuf,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the SIMT emulation's translation instead of the fused one.
    #[arg(long)]
    simt: bool,
}

fn parse_dim3(s: &str) -> Result<Dim3, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{s}` is not X[,Y[,Z]]"));
    }
    let mut v = [1u32; 3];
    for (k, p) in parts.iter().enumerate() {
        v[k] = p
            .trim()
            .parse()
            .map_err(|_| format!("`{p}` is not a positive integer"))?;
        if v[k] == 0 {
            return Err("extents must be at least 1".into());
        }
    }
    Ok(Dim3::new(v[0], v[1], v[2]))
}

/// A parsed `--arg`.
enum ArgSpec {
    Scalar(ScalarArg),
    Buffer(Vec<u8>),
}

#[derive(Clone, Copy)]
enum ScalarArg {
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

fn parse_arg(spec: &str) -> anyhow::Result<ArgSpec> {
    let (kind, rest) = spec.split_once(':').ok_or_else(|| {
        anyhow!("--arg `{spec}`: expected KIND:VALUE (e.g. i32:7, buf:4096, file:in.bin)")
    })?;
    let bad = |what: &str| anyhow!("--arg `{spec}`: {what}");
    Ok(match kind {
        "i32" => ArgSpec::Scalar(ScalarArg::I32(rest.parse().map_err(|_| bad("not an i32"))?)),
        "u32" => ArgSpec::Scalar(ScalarArg::U32(rest.parse().map_err(|_| bad("not a u32"))?)),
        "i64" => ArgSpec::Scalar(ScalarArg::I64(rest.parse().map_err(|_| bad("not an i64"))?)),
        "u64" => ArgSpec::Scalar(ScalarArg::U64(rest.parse().map_err(|_| bad("not a u64"))?)),
        "f32" => ArgSpec::Scalar(ScalarArg::F32(rest.parse().map_err(|_| bad("not an f32"))?)),
        "f64" => ArgSpec::Scalar(ScalarArg::F64(rest.parse().map_err(|_| bad("not an f64"))?)),
        "file" => ArgSpec::Buffer(read_limited(
            std::path::Path::new(rest),
            MAX_BUFFER,
            "buffer file",
        )?),
        "buf" => {
            let (size, pattern) = match rest.split_once(':') {
                Some((s, p)) => (s, Some(p)),
                None => (rest, None),
            };
            let bytes: u64 = size
                .parse()
                .map_err(|_| bad("the size is not a byte count"))?;
            if bytes > MAX_BUFFER {
                bail!("--arg `{spec}`: {bytes} bytes is more than the limit of {MAX_BUFFER}");
            }
            let n = bytes as usize;
            let mut data = Vec::new();
            data.try_reserve_exact(n)
                .map_err(|_| bad("cannot allocate that many bytes"))?;
            match pattern {
                None => data.resize(n, 0),
                Some("iota-u32") => {
                    data.extend((0..n.div_ceil(4) as u32).flat_map(|i| i.to_le_bytes()));
                    data.truncate(n);
                }
                Some("iota-f32") => {
                    data.extend((0..n.div_ceil(4)).flat_map(|i| (i as f32).to_le_bytes()));
                    data.truncate(n);
                }
                Some(p) if p.starts_with("byte=") => {
                    let b: u8 = p[5..]
                        .parse()
                        .map_err(|_| bad("byte=N needs N in 0..=255"))?;
                    data.resize(n, b);
                }
                Some(p) => {
                    return Err(bad(&format!(
                        "unknown pattern `{p}` (iota-u32, iota-f32, byte=N)"
                    )))
                }
            }
            ArgSpec::Buffer(data)
        }
        other => bail!(
            "--arg `{spec}`: unknown kind `{other}` (i32, u32, i64, u64, f32, f64, buf, file)"
        ),
    })
}

/// Runs `warpvisor ptx`; returns the exit code.
pub fn run(cmd: PtxCommand) -> anyhow::Result<i32> {
    match cmd {
        PtxCommand::Run(a) => run_kernel(a),
        PtxCommand::Translate(a) => translate(a),
    }
}

fn load_module(path: &std::path::Path) -> anyhow::Result<PtxModule> {
    let bytes = read_limited(path, MAX_PTX_FILE, "PTX file")?;
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))?;
    PtxModule::parse(&text).with_context(|| format!("reading {}", path.display()))
}

fn translate(args: PtxTranslateArgs) -> anyhow::Result<i32> {
    let module = load_module(&args.module)?;
    let emit = if args.simt {
        warpvisor::ptx::emit::emit_simt
    } else {
        warpvisor::ptx::emit::emit
    };
    let source = emit(&module).with_context(|| format!("translating {}", args.module.display()))?;
    match args.output {
        Some(p) => {
            std::fs::write(&p, source.code).with_context(|| format!("writing {}", p.display()))?
        }
        None => super::stdout().write_all(source.code.as_bytes())?,
    }
    Ok(0)
}

fn run_kernel(args: PtxRunArgs) -> anyhow::Result<i32> {
    let module = load_module(&args.module)?;
    let specs: Vec<ArgSpec> = args
        .args
        .iter()
        .map(|s| parse_arg(s))
        .collect::<Result<_, _>>()?;
    let mut saves = Vec::new();
    for s in &args.save {
        let (n, path) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--save `{s}`: expected N=PATH"))?;
        let n: usize = n
            .parse()
            .map_err(|_| anyhow!("--save `{s}`: N is not an argument index"))?;
        match specs.get(n) {
            Some(ArgSpec::Buffer(_)) => saves.push((n, PathBuf::from(path))),
            Some(ArgSpec::Scalar(_)) => bail!("--save `{s}`: argument {n} is not a buffer"),
            None => bail!("--save `{s}`: there are only {} arguments", specs.len()),
        }
    }
    let runtime = match args.workers {
        Some(w) if w == 0 || w > super::MAX_WORKERS as usize => {
            bail!("--workers must be 1 to {}", super::MAX_WORKERS)
        }
        Some(w) => PtxRuntime::with_workers(w)?,
        None => PtxRuntime::new()?,
    };
    let start = Instant::now();
    let program = if args.simt {
        runtime.load_simt(&module, None)?
    } else {
        runtime.load(&module)?
    };
    let compiled = start.elapsed();
    let mut buffers: Vec<Option<DeviceBuffer>> = Vec::new();
    for s in &specs {
        buffers.push(match s {
            ArgSpec::Buffer(data) => Some(runtime.buffer_from(data)?),
            ArgSpec::Scalar(_) => None,
        });
    }
    let kernel_args: Vec<Arg> = specs
        .iter()
        .zip(&buffers)
        .map(|(s, b)| match (s, b) {
            (_, Some(b)) => Arg::Buffer(b),
            (ArgSpec::Scalar(ScalarArg::I32(v)), _) => Arg::I32(*v),
            (ArgSpec::Scalar(ScalarArg::U32(v)), _) => Arg::U32(*v),
            (ArgSpec::Scalar(ScalarArg::I64(v)), _) => Arg::I64(*v),
            (ArgSpec::Scalar(ScalarArg::U64(v)), _) => Arg::U64(*v),
            (ArgSpec::Scalar(ScalarArg::F32(v)), _) => Arg::F32(*v),
            (ArgSpec::Scalar(ScalarArg::F64(v)), _) => Arg::F64(*v),
            (ArgSpec::Buffer(_), None) => Arg::U64(0),
        })
        .collect();
    let launched = Instant::now();
    program.launch(
        &args.kernel,
        args.grid,
        args.block,
        args.shared,
        &kernel_args,
    )?;
    let ran = launched.elapsed();
    for (n, path) in saves {
        if let Some(Some(b)) = buffers.get(n) {
            std::fs::write(&path, b.read())
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    errln!(
        "{}: grid {}x{}x{}, block {}x{}x{} on {} workers: {:.3} ms (translate + compile {:.3} s)",
        args.kernel,
        args.grid.x,
        args.grid.y,
        args.grid.z,
        args.block.x,
        args.block.y,
        args.block.z,
        runtime.workers(),
        ran.as_secs_f64() * 1e3,
        compiled.as_secs_f64()
    );
    if let Some(c) = program.simt_counts(&args.kernel) {
        errln!(
            "SIMT: efficiency {:.1}% ({} warp instructions, {} lane instructions, {} divergences); \
             {} global memory instructions, {:.2} sectors each",
            c.efficiency() * 100.0,
            c.warp_instructions,
            c.lane_instructions,
            c.divergences,
            c.memory_instructions,
            c.sectors_per_memory_instruction()
        );
        if c.guarded_off > 0 {
            errln!(
                "SIMT: {} lane instructions issued with their guard false; executing efficiency {:.1}%",
                c.guarded_off,
                c.executing_efficiency() * 100.0
            );
        }
        if let Some(path) = &args.simt_json {
            let json = serde_json::json!({
                "kernel": args.kernel,
                "executing_efficiency": c.executing_efficiency(),
                "counts": c,
                "efficiency": c.efficiency(),
                "sectors_per_memory_instruction": c.sectors_per_memory_instruction(),
            });
            std::fs::write(path, serde_json::to_string_pretty(&json)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(0)
}
