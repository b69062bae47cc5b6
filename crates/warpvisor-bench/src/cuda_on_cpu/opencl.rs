//! The comparison's other side: the same kernels in OpenCL C (`cuda/bench.cl`) on the first
//! OpenCL device (PoCL here), buffers created once per run, kernel time only.

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};

use super::{bytes, median, Workload};

/// A built program and its queue.
pub struct PoclKernels {
    context: Context,
    queue: CommandQueue,
    program: Program,
}

impl PoclKernels {
    /// Builds `source` for the first OpenCL device.
    pub fn new(source: &str) -> Result<Self, String> {
        // Through warpvisor's enumeration: it keeps PoCL from taking over SIGFPE.
        let devices = warpvisor::backend::opencl::devices().map_err(|e| e.to_string())?;
        let device: Device = devices
            .into_iter()
            .next()
            .map(|(_, d)| d)
            .ok_or("no OpenCL device")?;
        let _ = CL_DEVICE_TYPE_ALL;
        let context = Context::from_device(&device).map_err(|e| format!("context: {e}"))?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0).map_err(|e| format!("queue: {e}"))?;
        let program = Program::create_and_build_from_source(&context, source, "")
            .map_err(|e| format!("building bench.cl: {e}"))?;
        Ok(PoclKernels {
            context,
            queue,
            program,
        })
    }

    /// Runs `w`: the median kernel time over `reps` runs, and the output.
    pub fn run(&self, w: &Workload, reps: usize) -> Result<(f64, Vec<u8>), String> {
        let kernel = Kernel::create(&self.program, w.kernel)
            .map_err(|e| format!("kernel {}: {e}", w.kernel))?;
        let buffer = |n: usize| {
            // SAFETY: no host pointer is given; the buffer is allocated by the driver.
            unsafe {
                Buffer::<u8>::create(
                    &self.context,
                    CL_MEM_READ_WRITE,
                    n.max(1),
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| format!("buffer: {e}"))
        };
        let mut inputs = Vec::new();
        for v in &w.inputs {
            let data = bytes(v);
            let mut b = buffer(data.len())?;
            // SAFETY: `data` outlives the blocking write.
            unsafe {
                self.queue
                    .enqueue_write_buffer(&mut b, CL_BLOCKING, 0, &data, &[])
            }
            .map_err(|e| format!("write: {e}"))?;
            inputs.push(b);
        }
        let out = buffer(w.output_floats * 4)?;
        let global = [
            (w.grid.x * w.block.x) as usize,
            (w.grid.y * w.block.y) as usize,
        ];
        let local = [w.block.x as usize, w.block.y as usize];
        let dims = if w.grid.y > 1 || w.block.y > 1 { 2 } else { 1 };
        let t = median(reps, || {
            let mut exec = ExecuteKernel::new(&kernel);
            // SAFETY: the arguments match bench.cl's parameters.
            unsafe {
                for b in &inputs {
                    exec.set_arg(b);
                }
                exec.set_arg(&out).set_arg(&w.n);
                if w.shared > 0 {
                    exec.set_arg_local_buffer(w.shared as usize);
                }
                exec.set_global_work_sizes(&global[..dims])
                    .set_local_work_sizes(&local[..dims])
                    .enqueue_nd_range(&self.queue)
            }
            .map_err(|e| format!("launch: {e}"))?;
            self.queue.finish().map_err(|e| format!("finish: {e}"))
        })?;
        let mut result = vec![0u8; w.output_floats * 4];
        // SAFETY: `result` is as large as the buffer; the read blocks.
        unsafe {
            self.queue
                .enqueue_read_buffer(&out, CL_NON_BLOCKING, 0, &mut result, &[])
        }
        .map_err(|e| format!("read: {e}"))?;
        self.queue.finish().map_err(|e| format!("finish: {e}"))?;
        Ok((t.as_secs_f64(), result))
    }
}
