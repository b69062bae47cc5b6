//! `cuda-on-cpu`: CUDA kernels (PTX) on the CPU through `warpvisor::ptx` — launch overhead,
//! barrier cost, worker scaling — and the same kernels in OpenCL C on PoCL, side by side.
//! `--quick` shrinks every size; `--json FILE` also writes the numbers as JSON.

use std::io::Write;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1));
    let report = warpvisor_bench::cuda_on_cpu::run(quick, &|line| {
        let _ = writeln!(std::io::stderr(), "{line}");
    });
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    print!("{}", warpvisor_bench::cuda_on_cpu::markdown(&report));
    if !report.errors.is_empty() {
        anyhow::bail!("{} measurements failed", report.errors.len());
    }
    Ok(())
}
