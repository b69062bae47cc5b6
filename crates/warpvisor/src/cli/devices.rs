//! `warpvisor devices`: every backend with its devices, or why it is unavailable.

use warpvisor::backend::{cpu::CpuBackend, opencl};

pub fn run() -> anyhow::Result<i32> {
    match CpuBackend::new(None) {
        Ok(_) => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            println!("cpu: available — host C compiler, {cores} worker threads");
        }
        Err(e) => println!("cpu: unavailable — {e}"),
    }
    match opencl::devices() {
        Ok(devices) => {
            println!("opencl: available");
            for (d, _) in devices {
                println!(
                    "  [{}] {} ({}; {}) — {} compute units, {} MiB global memory, {} MiB largest allocation, driver {}",
                    d.index,
                    d.name,
                    d.platform,
                    if d.gpu { "GPU" } else { "not a GPU" },
                    d.compute_units,
                    d.global_memory >> 20,
                    d.max_allocation >> 20,
                    d.driver
                );
            }
        }
        Err(e) => println!("opencl: unavailable — {e}"),
    }
    Ok(0)
}
