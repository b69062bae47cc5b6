//! The `cuda-on-cpu` benchmark (issue 15): CUDA kernels (PTX) run by `warpvisor::ptx` on the
//! CPU — empty-launch overhead, barrier cost as live values grow, scaling over workers — and
//! against the same algorithms in OpenCL C on PoCL, side by side in one process.
//!
//! The kernels are `cuda/bench.cu` (committed as NVRTC's `cuda/bench.ptx`) and `cuda/bench.cl`.

mod opencl;

use std::time::{Duration, Instant};

use serde::Serialize;
use warpvisor::ptx::{Arg, DeviceBuffer, Dim3, PtxModule, PtxProgram, PtxRuntime};

/// NVRTC's PTX for `cuda/bench.cu`.
pub const BENCH_PTX: &str = include_str!("../../cuda/bench.ptx");
/// `cuda/bench.cl`.
pub const BENCH_CL: &str = include_str!("../../cuda/bench.cl");

/// Everything the benchmark measured.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Median microseconds of an empty launch, by shape (`grid x block`).
    pub empty_launch_us: Vec<(String, f64)>,
    /// Nanoseconds per thread per barrier, by values live across it.
    pub barrier_ns: Vec<(u32, f64)>,
    /// Seconds per kernel run on 1 worker and on all, by kernel.
    pub scaling: Vec<Scaling>,
    /// warpvisor's PTX on the CPU against OpenCL C on PoCL, by kernel.
    pub versus_pocl: Vec<Versus>,
    /// What could not be measured, and why.
    pub errors: Vec<String>,
}

/// One kernel on one worker and on `workers`.
#[derive(Debug, Serialize)]
pub struct Scaling {
    /// Kernel and size.
    pub kernel: String,
    /// Worker threads of the second column.
    pub workers: usize,
    /// Seconds on one worker.
    pub one_s: f64,
    /// Seconds on `workers`.
    pub all_s: f64,
}

/// One kernel on warpvisor and on PoCL.
#[derive(Debug, Serialize)]
pub struct Versus {
    /// Kernel and size.
    pub kernel: String,
    /// Seconds per run, warpvisor (PTX → C).
    pub warpvisor_s: f64,
    /// Seconds per run, PoCL (OpenCL C).
    pub pocl_s: f64,
}

/// The median of `reps` timings of `f` (after one warm-up run).
fn median(reps: usize, mut f: impl FnMut() -> Result<(), String>) -> Result<Duration, String> {
    f()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed());
    }
    t.sort();
    Ok(t[t.len() / 2])
}

fn floats(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 1000) as f32 / 1000.0
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Buffers and launch shapes of the three compared kernels.
struct Workload {
    name: &'static str,
    kernel: &'static str,
    grid: Dim3,
    block: Dim3,
    shared: u32,
    inputs: Vec<Vec<f32>>,
    output_floats: usize,
    n: i32,
}

fn workloads(quick: bool) -> Vec<Workload> {
    let n_vec = if quick { 1 << 20 } else { 1 << 24 };
    let n_mat = if quick { 256 } else { 512 };
    let n_red = n_vec;
    vec![
        Workload {
            name: "vectorAdd",
            kernel: "vector_add",
            grid: Dim3::x((n_vec as u32).div_ceil(256)),
            block: Dim3::x(256),
            shared: 0,
            inputs: vec![floats(n_vec, 1), floats(n_vec, 2)],
            output_floats: n_vec,
            n: n_vec as i32,
        },
        Workload {
            name: "matrixMul",
            kernel: "matrix_mul",
            grid: Dim3::new(n_mat as u32 / 16, n_mat as u32 / 16, 1),
            block: Dim3::new(16, 16, 1),
            shared: 0,
            inputs: vec![floats(n_mat * n_mat, 3), floats(n_mat * n_mat, 4)],
            output_floats: n_mat * n_mat,
            n: n_mat as i32,
        },
        Workload {
            name: "reduction",
            kernel: "reduce",
            grid: Dim3::x((n_red as u32).div_ceil(512)),
            block: Dim3::x(256),
            shared: 256 * 4,
            inputs: vec![floats(n_red, 5)],
            output_floats: (n_red).div_ceil(512),
            n: n_red as i32,
        },
    ]
}

fn size_label(w: &Workload) -> String {
    match w.kernel {
        "matrix_mul" => format!("{} ({}x{})", w.name, w.n, w.n),
        _ => format!("{} (n = {})", w.name, w.n),
    }
}

/// Runs `w` once on `program`; returns the output.
fn run_ptx(
    rt: &PtxRuntime,
    program: &PtxProgram,
    w: &Workload,
    reps: usize,
) -> Result<(f64, Vec<u8>), String> {
    let inputs: Vec<DeviceBuffer> = w
        .inputs
        .iter()
        .map(|v| rt.buffer_from(&bytes(v)).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let out = rt.buffer(w.output_floats * 4).map_err(|e| e.to_string())?;
    let mut args: Vec<Arg> = inputs.iter().map(Arg::Buffer).collect();
    args.push(Arg::Buffer(&out));
    args.push(Arg::I32(w.n));
    let t = median(reps, || {
        program
            .launch(w.kernel, w.grid, w.block, w.shared, &args)
            .map_err(|e| e.to_string())
    })?;
    Ok((t.as_secs_f64(), out.read()))
}

/// Runs the whole benchmark; `quick` shrinks every size.
pub fn run(quick: bool, progress: &dyn Fn(&str)) -> Report {
    let mut report = Report::default();
    let module = match PtxModule::parse(BENCH_PTX) {
        Ok(m) => m,
        Err(e) => {
            report.errors.push(format!("bench.ptx: {e}"));
            return report;
        }
    };
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (rt_all, rt_one) = match (PtxRuntime::with_workers(all), PtxRuntime::with_workers(1)) {
        (Ok(a), Ok(o)) => (a, o),
        (Err(e), _) | (_, Err(e)) => {
            report.errors.push(format!("no PTX runtime: {e}"));
            return report;
        }
    };
    let (program, program_one) = match (rt_all.load(&module), rt_one.load(&module)) {
        (Ok(a), Ok(o)) => (a, o),
        (Err(e), _) | (_, Err(e)) => {
            report.errors.push(format!("bench.ptx does not load: {e}"));
            return report;
        }
    };
    let reps = if quick { 5 } else { 21 };
    // Empty launches.
    for (grid, block) in [(1u32, 1u32), (64, 256)] {
        let n = if quick { 200 } else { 2000 };
        match median(n, || {
            program
                .launch("empty", Dim3::x(grid), Dim3::x(block), 0, &[])
                .map_err(|e| e.to_string())
        }) {
            Ok(t) => {
                let us = t.as_secs_f64() * 1e6;
                progress(&format!("empty launch {grid}x{block}: {us:.1} us"));
                report
                    .empty_launch_us
                    .push((format!("{grid} x {block}"), us));
            }
            Err(e) => report.errors.push(format!("empty launch: {e}")),
        }
    }
    // Barriers: 2 per iteration per thread.
    let (blocks, threads, iters) = (all as u32 * 4, 256u32, if quick { 50 } else { 500 });
    for live in [1u32, 16, 64] {
        let result = rt_all
            .buffer((blocks * threads * 4) as usize)
            .map_err(|e| e.to_string())
            .and_then(|out| {
                median(reps.min(7), || {
                    program
                        .launch(
                            &format!("barrier_{live}"),
                            Dim3::x(blocks),
                            Dim3::x(threads),
                            threads * 4,
                            &[Arg::Buffer(&out), Arg::I32(iters)],
                        )
                        .map_err(|e| e.to_string())
                })
            });
        match result {
            Ok(t) => {
                let ns =
                    t.as_secs_f64() * 1e9 / (blocks as f64 * threads as f64 * iters as f64 * 2.0);
                progress(&format!(
                    "barrier with {live} live values: {ns:.2} ns per thread"
                ));
                report.barrier_ns.push((live, ns));
            }
            Err(e) => report.errors.push(format!("barrier_{live}: {e}")),
        }
    }
    let pocl = opencl::PoclKernels::new(BENCH_CL);
    if let Err(e) = &pocl {
        report.errors.push(format!("PoCL comparison: {e}"));
    }
    for w in workloads(quick) {
        let label = size_label(&w);
        let mine = run_ptx(&rt_all, &program, &w, reps);
        let one = run_ptx(&rt_one, &program_one, &w, reps.min(5));
        match (&mine, &one) {
            (Ok((all_s, _)), Ok((one_s, _))) => {
                progress(&format!(
                    "{label}: 1 worker {one_s:.4} s, {all} workers {all_s:.4} s"
                ));
                report.scaling.push(Scaling {
                    kernel: label.clone(),
                    workers: all,
                    one_s: *one_s,
                    all_s: *all_s,
                });
            }
            (Err(e), _) | (_, Err(e)) => {
                report.errors.push(format!("{label}: {e}"));
                continue;
            }
        }
        if let (Ok(p), Ok((mine_s, mine_out))) = (&pocl, &mine) {
            match p.run(&w, reps) {
                Ok((pocl_s, pocl_out)) => {
                    if let Err(e) = agree(&w, mine_out, &pocl_out) {
                        report.errors.push(format!("{label}: {e}"));
                    }
                    progress(&format!(
                        "{label}: warpvisor {mine_s:.4} s, PoCL {pocl_s:.4} s"
                    ));
                    report.versus_pocl.push(Versus {
                        kernel: label,
                        warpvisor_s: *mine_s,
                        pocl_s,
                    });
                }
                Err(e) => report.errors.push(format!("{label} on PoCL: {e}")),
            }
        }
    }
    report
}

/// Both outputs hold the same floats (a relative 1e-4: PoCL may contract multiply-adds).
fn agree(w: &Workload, a: &[u8], b: &[u8]) -> Result<(), String> {
    let fa: Vec<f32> = a
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let fb: Vec<f32> = b
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    match fa
        .iter()
        .zip(&fb)
        .position(|(x, y)| (x - y).abs() > 1e-4 * x.abs().max(y.abs()).max(1.0))
    {
        None if fa.len() == fb.len() => Ok(()),
        None => Err(format!("{}: outputs differ in length", w.name)),
        Some(i) => Err(format!(
            "{}: element {i} is {} here and {} on PoCL",
            w.name, fa[i], fb[i]
        )),
    }
}

/// The report as Markdown tables.
pub fn markdown(r: &Report) -> String {
    let mut s = String::from("| empty launch (grid x block) | median us |\n|---|---|\n");
    for (shape, us) in &r.empty_launch_us {
        s += &format!("| {shape} | {us:.1} |\n");
    }
    s += "\n| values live across the barrier | ns per thread per barrier |\n|---|---|\n";
    for (live, ns) in &r.barrier_ns {
        s += &format!("| {live} | {ns:.2} |\n");
    }
    s += "\n| kernel | 1 worker (s) | all workers (s) | speed-up |\n|---|---|---|---|\n";
    for x in &r.scaling {
        s += &format!(
            "| {} | {:.4} | {:.4} ({}) | {:.2}x |\n",
            x.kernel,
            x.one_s,
            x.all_s,
            x.workers,
            x.one_s / x.all_s
        );
    }
    s += "\n| kernel | warpvisor PTX (s) | PoCL OpenCL C (s) | warpvisor / PoCL time |\n|---|---|---|---|\n";
    for x in &r.versus_pocl {
        s += &format!(
            "| {} | {:.4} | {:.4} | {:.2} |\n",
            x.kernel,
            x.warpvisor_s,
            x.pocl_s,
            x.warpvisor_s / x.pocl_s
        );
    }
    for e in &r.errors {
        s += &format!("\nFAILED: {e}\n");
    }
    s
}
