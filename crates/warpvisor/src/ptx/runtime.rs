//! Running translated PTX: the C object built by the `cpu` backend's compiler (and kept in its
//! kernel cache), device memory as host allocations the runtime keeps a table of, and
//! launches that spread CTAs over a pool of worker threads (one CTA per worker at a time).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::emit::{emit, emit_simt, CSource, KernelInfo};
use super::simt::{SimtCounts, SimtRecord, SimtState};
use super::{PtxError, PtxModule};
use crate::backend::cpu::{CCompiler, WorkerPool};
use crate::backend::ZeroedBytes;
use crate::codegen::KernelOptions;

/// A grid or block shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `(x, 1, 1)`.
    pub fn x(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }

    fn count(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// A device buffer: the kernel gets its address.
    Buffer(&'a DeviceBuffer),
    /// `int`.
    I32(i32),
    /// `unsigned`.
    U32(u32),
    /// `long long`.
    I64(i64),
    /// `unsigned long long` (also a raw device address).
    U64(u64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

impl Arg<'_> {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Arg::Buffer(b) => b.address().to_le_bytes().to_vec(),
            Arg::I32(v) => v.to_le_bytes().to_vec(),
            Arg::U32(v) => v.to_le_bytes().to_vec(),
            Arg::I64(v) => v.to_le_bytes().to_vec(),
            Arg::U64(v) => v.to_le_bytes().to_vec(),
            Arg::F32(v) => v.to_le_bytes().to_vec(),
            Arg::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// The device's limits (those of an H100, so that programs tuned for one launch unchanged).
pub mod limits {
    /// Threads per block.
    pub const MAX_THREADS_PER_BLOCK: u64 = 1024;
    /// Block extents.
    pub const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
    /// Grid extents.
    pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];
    /// Shared memory per block, static and dynamic together.
    pub const MAX_SHARED_PER_BLOCK: u64 = 227 * 1024;
    /// Parameter bytes per launch.
    pub const MAX_PARAM_BYTES: u64 = 32764;
}

/// The allocations kernels may touch: start address → end.
type RangeTable = Arc<Mutex<BTreeMap<u64, u64>>>;

/// Device memory: a zeroed host allocation registered with its runtime, so that kernels may
/// touch it (and nothing else). Not `Sync`: a launch writes it while it runs. The host's copies
/// touch only their byte ranges, through raw pointers (`read_at`, `write_at`).
pub struct DeviceBuffer {
    /// Owns the allocation at `address`.
    _bytes: ZeroedBytes,
    address: u64,
    len: usize,
    table: RangeTable,
}

// SAFETY: the buffer owns its allocation; moving it to another thread moves that ownership.
unsafe impl Send for DeviceBuffer {}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({} bytes at 0x{:x})",
            self.len, self.address
        )
    }
}

impl DeviceBuffer {
    /// Its device address (what a kernel receives).
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of its bytes.
    pub fn read(&self) -> Vec<u8> {
        self.read_at(0, self.len).unwrap_or_default()
    }

    /// `len` bytes from `offset`, or `None` when the range is not inside the buffer.
    pub fn read_at(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        offset.checked_add(len).filter(|&e| e <= self.len)?;
        let mut out = vec![0u8; len];
        // SAFETY: the range lies inside the allocation, which `self` owns. Only the range is
        // copied, through raw pointers — no reference over the allocation is made, since a
        // launch (asynchronous in the CUDA driver) may be writing other bytes of it meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.address as *const u8).add(offset),
                out.as_mut_ptr(),
                len,
            )
        };
        Some(out)
    }

    /// Overwrites `data.len()` bytes from `offset`; `false` when they do not fit.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> bool {
        if offset.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: as in `read_at`: the range lies inside the allocation and only it is written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.address as *mut u8).add(offset),
                data.len(),
            )
        };
        true
    }

    /// Overwrites its first `data.len()` bytes.
    pub fn write(&self, data: &[u8]) -> Result<(), PtxError> {
        if self.write_at(0, data) {
            return Ok(());
        }
        Err(PtxError::BadArguments {
            kernel: String::new(),
            message: format!("{} bytes do not fit a {}-byte buffer", data.len(), self.len),
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Ok(mut t) = self.table.lock() {
            t.remove(&self.address);
        }
    }
}

/// Translates, compiles and runs PTX modules on this machine's cores.
pub struct PtxRuntime {
    compiler: CCompiler,
    pool: Arc<WorkerPool>,
    table: RangeTable,
}

impl PtxRuntime {
    /// A runtime with one worker per core.
    pub fn new() -> Result<Self, PtxError> {
        Self::with_workers(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// A runtime with `workers` worker threads.
    pub fn with_workers(workers: usize) -> Result<Self, PtxError> {
        let pool = WorkerPool::new(workers.max(1)).map_err(crate::backend::BackendError::Launch)?;
        Ok(PtxRuntime {
            compiler: CCompiler::detect()?,
            pool: Arc::new(pool),
            table: Arc::new(Mutex::new(BTreeMap::new())),
        })
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.pool.workers()
    }

    /// A zeroed buffer of `len` bytes (at least one byte is allocated).
    pub fn buffer(&self, len: usize) -> Result<DeviceBuffer, PtxError> {
        let mut bytes = ZeroedBytes::new(len.max(1))?;
        let address = bytes.as_mut_ptr() as u64;
        if let Ok(mut t) = self.table.lock() {
            t.insert(address, address + len as u64);
        }
        Ok(DeviceBuffer {
            _bytes: bytes,
            address,
            len,
            table: self.table.clone(),
        })
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from(&self, data: &[u8]) -> Result<DeviceBuffer, PtxError> {
        let b = self.buffer(data.len())?;
        b.write(data)?;
        Ok(b)
    }

    /// Translates `module` to C and compiles it (or reuses the cached object), at the level
    /// [`auto_opt_level`] picks for its size.
    pub fn load(&self, module: &PtxModule) -> Result<PtxProgram, PtxError> {
        self.load_with(module, None)
    }

    /// [`load`](Self::load) with the C compiler at `-O{level}` (0-3), or at the automatic
    /// level for `None`.
    pub fn load_with(&self, module: &PtxModule, level: Option<u8>) -> Result<PtxProgram, PtxError> {
        self.load_translation(emit(module)?, level)
    }

    /// [`load_with`](Self::load_with) for SIMT emulation: warps run in lockstep under a
    /// reconvergence stack and each kernel's [`SimtCounts`] are kept
    /// ([`PtxProgram::simt_counts`]). Far slower than the fused translation.
    pub fn load_simt(&self, module: &PtxModule, level: Option<u8>) -> Result<PtxProgram, PtxError> {
        self.load_translation(emit_simt(module)?, level)
    }

    fn load_translation(&self, source: CSource, level: Option<u8>) -> Result<PtxProgram, PtxError> {
        let options = KernelOptions {
            opt_level: level
                .unwrap_or_else(|| auto_opt_level(source.code.len()))
                .min(3),
            ..KernelOptions::default()
        };
        let code = if host_has_fma() {
            std::borrow::Cow::Owned(format!("#define WVP_HOST_FMA 1\n{}", source.code))
        } else {
            std::borrow::Cow::Borrowed(source.code.as_str())
        };
        let library = self.compiler.build(&code, &options)?;
        let mut kernels = Vec::new();
        for k in &source.kernels {
            let sym = |s: String| -> Result<*const u8, PtxError> {
                let mut name = s.into_bytes();
                name.push(0);
                // SAFETY: the symbol is one the emitter wrote into this object.
                unsafe { library.get::<*const u8>(&name).map(|p| *p) }.map_err(|e| {
                    crate::backend::BackendError::Launch(format!(
                        "translated PTX lacks a symbol: {e}"
                    ))
                    .into()
                })
            };
            let cta = sym(format!("wvp_cta_{}", k.index))?;
            let spill = sym(format!("wvp_spill_bytes_{}", k.index))?;
            // SAFETY: `wvp_cta_N` has this signature; `wvp_spill_bytes_N` is a const u64.
            let (cta, spill_bytes) = unsafe {
                (
                    std::mem::transmute::<*const u8, CtaFn>(cta),
                    *(spill as *const u64),
                )
            };
            kernels.push(LoadedKernel {
                info: k.clone(),
                cta,
                spill_bytes,
                frame_stack: source.has_device_functions,
            });
        }
        let mut globals = Vec::new();
        for g in &source.globals {
            let mut name = g.symbol.clone().into_bytes();
            name.push(0);
            // SAFETY: as above.
            let p = unsafe { library.get::<*const u8>(&name).map(|p| *p as u64) }.map_err(|e| {
                PtxError::from(crate::backend::BackendError::Launch(format!(
                    "translated PTX lacks a symbol: {e}"
                )))
            })?;
            globals.push((g.name.clone(), p, g.bytes));
        }
        let simt = source
            .kernels
            .iter()
            .filter(|k| k.simt_sites.is_some())
            .map(|k| (k.name.clone(), SimtCounts::default()))
            .collect();
        Ok(PtxProgram {
            _library: library,
            simt: Mutex::new(simt),
            source,
            opt_level: options.opt_level,
            kernels,
            globals,
            pool: self.pool.clone(),
            table: self.table.clone(),
        })
    }
}

/// Translations larger than this compile at -O0 unless a level is asked for: GCC's time at
/// -O1 and -O2 grows steeply with function size (warpvisor's own CUDA kernel of a WASI test
/// program in C, 1 MB of C: 1.1 s at -O0, 6.3 s at -O1, 22 s at -O2; of `c-sort.wasm`, 10 MB:
/// 26 s at -O0, over 2 minutes at -O1 or -O2), while CUDA programs' kernels (every one in the
/// corpus and the benchmarks) are far below it.
pub const AUTO_OPTIMIZE_BELOW_BYTES: usize = 256 << 10;

/// The C compiler level for a translation of `c_bytes` bytes: 2 up to
/// [`AUTO_OPTIMIZE_BELOW_BYTES`], 0 above.
pub fn auto_opt_level(c_bytes: usize) -> u8 {
    if c_bytes <= AUTO_OPTIMIZE_BELOW_BYTES {
        2
    } else {
        0
    }
}

/// Bytes of the stack device functions' `.local` frames live on, per worker (one thread of
/// a CTA is in a call at a time): deeper recursion is a launch error.
pub const FRAME_STACK_BYTES: u64 = 1 << 20;

/// `int wvp_cta_N(const wvp_launch *, wvp_cta *)`.
type CtaFn = unsafe extern "C" fn(*const LaunchRecord, *mut CtaRecord) -> i32;

/// `WVP_HIT_SLOTS` (prelude.h).
const HIT_SLOTS: usize = 8;

/// `wvp_range` (prelude.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct RangeRecord {
    lo: u64,
    hi: u64,
}

/// `wvp_launch` (prelude.h; the C side asserts the size).
#[repr(C)]
struct LaunchRecord {
    grid: [u32; 3],
    block: [u32; 3],
    params: *mut u8,
    param_bytes: u64,
    ranges: *const RangeRecord,
    nranges: u64,
}

/// `wvp_thread` (prelude.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ThreadRecord {
    resume: u32,
    wait: u32,
    op: u32,
    mask: u32,
    a: u64,
    b: u32,
    c: u32,
    result: u64,
    pred: u32,
    _pad: u32,
}

/// `wvp_cta` (prelude.h).
#[repr(C)]
struct CtaRecord {
    ctaid: [u32; 3],
    nthreads: u32,
    thread: *mut ThreadRecord,
    spill: *mut u8,
    shared: *mut u8,
    local: *mut u8,
    shared_bytes: u64,
    local_bytes: u64,
    fault: u64,
    hit: [RangeRecord; HIT_SLOTS],
    frames: *mut u8,
    frames_bytes: u64,
    frame_top: u64,
    fault_line: u32,
    fault_thread: u32,
    sink: [u64; 4],
    simt: *mut SimtRecord,
    at_barrier: u32,
    at_warp_op: u32,
    exited: u32,
    runnable: u32,
}

const _: () = assert!(std::mem::size_of::<ThreadRecord>() == 48);
const _: () = assert!(std::mem::size_of::<CtaRecord>() == 288);
const _: () = assert!(std::mem::size_of::<LaunchRecord>() == 56);

struct LoadedKernel {
    info: KernelInfo,
    cta: CtaFn,
    spill_bytes: u64,
    /// Whether CTAs need the device functions' frame stack.
    frame_stack: bool,
}

/// A compiled PTX module, ready to launch its kernels.
pub struct PtxProgram {
    _library: libloading::Library,
    source: CSource,
    opt_level: u8,
    kernels: Vec<LoadedKernel>,
    globals: Vec<(String, u64, u64)>,
    pool: Arc<WorkerPool>,
    table: RangeTable,
    /// SIMT emulation: each kernel's counts so far (empty for fused translations).
    simt: Mutex<BTreeMap<String, SimtCounts>>,
}

/// How a CTA ended, for the first failing one.
#[derive(Clone, Copy)]
struct CtaFailure {
    code: i32,
    cta: [u32; 3],
    address: u64,
    /// The faulting access's PTX line and thread (flat index), for `-3`.
    line: u32,
    thread: u32,
}

impl PtxProgram {
    /// The C compiler's optimisation level the module was built at.
    pub fn opt_level(&self) -> u8 {
        self.opt_level
    }

    /// For a module loaded with [`PtxRuntime::load_simt`], what `kernel` executed over its
    /// launches so far; `None` for other modules or unknown kernels.
    pub fn simt_counts(&self, kernel: &str) -> Option<SimtCounts> {
        self.simt.lock().ok()?.get(kernel).copied()
    }

    /// The C the module was translated to.
    pub fn c_source(&self) -> &str {
        &self.source.code
    }

    /// The kernels' names, in module order.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.kernels.iter().map(|k| k.info.name.as_str()).collect()
    }

    /// A module variable (`.global`/`.const`): its device address and size.
    pub fn global(&self, name: &str) -> Option<(u64, u64)> {
        self.globals
            .iter()
            .find(|g| g.0 == name)
            .map(|g| (g.1, g.2))
    }

    /// Parameters of `kernel` as (offset, size) in its parameter buffer, and the buffer's size.
    pub fn param_layout(&self, kernel: &str) -> Option<(Vec<(u64, u64)>, u64)> {
        self.kernels
            .iter()
            .find(|k| k.info.name == kernel)
            .map(|k| {
                (
                    k.info.params.iter().map(|p| (p.offset, p.size)).collect(),
                    k.info.param_bytes,
                )
            })
    }

    /// Parameter sizes of `kernel`, in order.
    pub fn param_sizes(&self, kernel: &str) -> Option<Vec<u64>> {
        self.kernels
            .iter()
            .find(|k| k.info.name == kernel)
            .map(|k| k.info.params.iter().map(|p| p.size).collect())
    }

    /// Runs `kernel` over `grid` CTAs of `block` threads with `dynamic_shared` bytes of
    /// dynamic shared memory; returns when every CTA has finished.
    pub fn launch(
        &self,
        kernel: &str,
        grid: Dim3,
        block: Dim3,
        dynamic_shared: u32,
        args: &[Arg],
    ) -> Result<(), PtxError> {
        let k = self
            .kernels
            .iter()
            .find(|k| k.info.name == kernel)
            .ok_or_else(|| PtxError::NoSuchKernel(kernel.to_string()))?;
        let bad_args = |message: String| PtxError::BadArguments {
            kernel: kernel.to_string(),
            message,
        };
        if args.len() != k.info.params.len() {
            return Err(bad_args(format!(
                "takes {} parameters, {} given",
                k.info.params.len(),
                args.len()
            )));
        }
        let mut params = vec![0u8; k.info.param_bytes.max(1) as usize];
        for (n, (a, slot)) in args.iter().zip(&k.info.params).enumerate() {
            let bytes = a.bytes();
            if bytes.len() as u64 != slot.size {
                return Err(bad_args(format!(
                    "parameter {n} is {} bytes, the argument {} bytes",
                    slot.size,
                    bytes.len()
                )));
            }
            params[slot.offset as usize..][..bytes.len()].copy_from_slice(&bytes);
        }
        self.run(k, grid, block, dynamic_shared, params)
    }

    /// Launches with a ready parameter buffer (the driver API's `kernelParams` packed).
    pub fn launch_raw(
        &self,
        kernel: &str,
        grid: Dim3,
        block: Dim3,
        dynamic_shared: u32,
        params: Vec<u8>,
    ) -> Result<(), PtxError> {
        let k = self
            .kernels
            .iter()
            .find(|k| k.info.name == kernel)
            .ok_or_else(|| PtxError::NoSuchKernel(kernel.to_string()))?;
        self.run(k, grid, block, dynamic_shared, params)
    }

    /// Checks a launch of `kernel` without running it: what `cuLaunchKernel` refuses at once
    /// (bad dimensions, too much shared memory, parameters of the wrong size), before a driver
    /// queues the launch to run asynchronously.
    pub fn check_launch(
        &self,
        kernel: &str,
        grid: Dim3,
        block: Dim3,
        dynamic_shared: u32,
        param_bytes: usize,
    ) -> Result<(), PtxError> {
        let k = self
            .kernels
            .iter()
            .find(|k| k.info.name == kernel)
            .ok_or_else(|| PtxError::NoSuchKernel(kernel.to_string()))?;
        validate(k, grid, block, dynamic_shared, param_bytes)
    }

    fn run(
        &self,
        k: &LoadedKernel,
        grid: Dim3,
        block: Dim3,
        dynamic_shared: u32,
        mut params: Vec<u8>,
    ) -> Result<(), PtxError> {
        validate(k, grid, block, dynamic_shared, params.len())?;
        let kernel = &k.info.name;
        let threads = block.count();
        let shared = k.info.static_shared + dynamic_shared as u64;
        // What the kernel may touch: the runtime's buffers and the module's variables.
        let mut ranges: Vec<RangeRecord> = match self.table.lock() {
            Ok(t) => t.iter().map(|(&lo, &hi)| RangeRecord { lo, hi }).collect(),
            Err(_) => Vec::new(),
        };
        ranges.extend(self.globals.iter().map(|g| RangeRecord {
            lo: g.1,
            hi: g.1 + g.2,
        }));
        ranges.sort_by_key(|r| r.lo);
        let record = LaunchRecord {
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            params: params.as_mut_ptr(),
            param_bytes: params.len() as u64,
            ranges: ranges.as_ptr(),
            nranges: ranges.len() as u64,
        };
        let ctas = grid.count();
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let failure: Mutex<Option<CtaFailure>> = Mutex::new(None);
        let workers = (self.pool.workers() as u64).min(ctas) as usize;
        let record_addr = &record as *const LaunchRecord as usize;
        let job = |_: usize| {
            // SAFETY: `record` outlives the launch (run waits for every worker).
            let record = unsafe { &*(record_addr as *const LaunchRecord) };
            let mut simt = k.info.simt_sites.map(|s| SimtState::new(threads as u32, s));
            let shape = (threads as u32, shared, ctas);
            if let Err(f) = run_ctas(k, record, shape, (&next, &stop), simt.as_mut()) {
                if let Ok(mut slot) = failure.lock() {
                    slot.get_or_insert(f);
                }
            }
            // Only SIMT translations take the lock: fused launches never touch the counts.
            if let Some(state) = simt {
                if let Some(t) = self
                    .simt
                    .lock()
                    .ok()
                    .as_mut()
                    .and_then(|m| m.get_mut(kernel))
                {
                    t.add(&state.counts());
                }
            }
        };
        self.pool
            .run(workers, &job)
            .map_err(|e| PtxError::Backend(crate::backend::BackendError::Launch(e)))?;
        let failed = failure.into_inner().ok().flatten();
        match failed {
            None => Ok(()),
            Some(f) => Err(match f.code {
                -1 => PtxError::Deadlock {
                    kernel: kernel.clone(),
                    cta: f.cta,
                },
                -3 => PtxError::IllegalAddress {
                    kernel: kernel.clone(),
                    address: f.address,
                    cta: f.cta,
                    thread: unflatten(f.thread, block),
                    line: f.line as usize,
                },
                -4 => PtxError::StackOverflow {
                    kernel: kernel.clone(),
                    cta: f.cta,
                },
                _ => PtxError::Trap {
                    kernel: kernel.clone(),
                    cta: f.cta,
                },
            }),
        }
    }
}

/// What a launch of `k` with these dimensions, dynamic shared memory and parameter bytes
/// breaks of the device's limits, if anything.
fn validate(
    k: &LoadedKernel,
    grid: Dim3,
    block: Dim3,
    dynamic_shared: u32,
    param_bytes: usize,
) -> Result<(), PtxError> {
    let kernel = &k.info.name;
    let bad = |message: String| PtxError::BadLaunch {
        kernel: kernel.clone(),
        message,
    };
    let threads = block.count();
    if threads == 0 || grid.count() == 0 {
        return Err(bad(format!("empty grid {grid:?} or block {block:?}")));
    }
    if threads > limits::MAX_THREADS_PER_BLOCK {
        return Err(bad(format!(
            "{threads} threads per block (at most {})",
            limits::MAX_THREADS_PER_BLOCK
        )));
    }
    for (d, (v, max)) in [
        (block.x, limits::MAX_BLOCK[0]),
        (block.y, limits::MAX_BLOCK[1]),
        (block.z, limits::MAX_BLOCK[2]),
    ]
    .into_iter()
    .enumerate()
    {
        if v > max {
            return Err(bad(format!("block dimension {d} is {v} (at most {max})")));
        }
    }
    for (d, (v, max)) in [
        (grid.x, limits::MAX_GRID[0]),
        (grid.y, limits::MAX_GRID[1]),
        (grid.z, limits::MAX_GRID[2]),
    ]
    .into_iter()
    .enumerate()
    {
        if v > max {
            return Err(bad(format!("grid dimension {d} is {v} (at most {max})")));
        }
    }
    let shared = k.info.static_shared + dynamic_shared as u64;
    if shared > limits::MAX_SHARED_PER_BLOCK {
        return Err(bad(format!(
            "{shared} bytes of shared memory (at most {})",
            limits::MAX_SHARED_PER_BLOCK
        )));
    }
    if param_bytes as u64 > limits::MAX_PARAM_BYTES || (param_bytes as u64) < k.info.param_bytes {
        return Err(PtxError::BadArguments {
            kernel: kernel.clone(),
            message: format!(
                "{} parameter bytes, the kernel takes {}",
                param_bytes, k.info.param_bytes
            ),
        });
    }
    Ok(())
}

/// One worker's share of a launch: CTAs taken from `next` until none is left or one fails.
/// `simt`: the worker's emulation state, for SIMT translations.
fn run_ctas(
    k: &LoadedKernel,
    record: &LaunchRecord,
    (threads, shared, ctas): (u32, u64, u64),
    (next, stop): (&AtomicU64, &AtomicBool),
    mut simt: Option<&mut SimtState>,
) -> Result<(), CtaFailure> {
    let n = threads as usize;
    let mut states = vec![ThreadRecord::default(); n];
    // 16-byte alignment for the spill slots, shared and local memory.
    let words = |bytes: u64| vec![0u128; bytes.div_ceil(16) as usize];
    let mut spill = words(k.spill_bytes * threads as u64);
    let mut shared_mem = words(shared.max(1));
    let mut local = words((k.info.local_bytes * threads as u64).max(1));
    // A module without device functions never calls: no frame stack to allocate per launch.
    let frame_bytes = if k.frame_stack { FRAME_STACK_BYTES } else { 0 };
    let mut frames = words(frame_bytes);
    loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        if c >= ctas || stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (gx, gy) = (record.grid[0] as u64, record.grid[1] as u64);
        let ctaid = [(c % gx) as u32, (c / gx % gy) as u32, (c / gx / gy) as u32];
        states.fill(ThreadRecord::default());
        shared_mem.fill(0);
        let mut cta = CtaRecord {
            ctaid,
            nthreads: threads,
            thread: states.as_mut_ptr(),
            spill: spill.as_mut_ptr() as *mut u8,
            shared: shared_mem.as_mut_ptr() as *mut u8,
            local: local.as_mut_ptr() as *mut u8,
            shared_bytes: shared,
            local_bytes: k.info.local_bytes,
            fault: 0,
            hit: [RangeRecord { lo: 0, hi: 0 }; HIT_SLOTS],
            frames: frames.as_mut_ptr() as *mut u8,
            frames_bytes: frame_bytes,
            frame_top: 0,
            fault_line: 0,
            fault_thread: 0,
            sink: [0; 4],
            simt: simt
                .as_deref_mut()
                .map_or(std::ptr::null_mut(), SimtState::record),
            at_barrier: 0,
            at_warp_op: 0,
            exited: 0,
            runnable: 0,
        };
        // SAFETY: the records point at buffers sized for this kernel and block; the kernel's
        // memory accesses are checked against them and the launch's ranges.
        let code = unsafe { (k.cta)(record, &mut cta) };
        if code != 0 {
            stop.store(true, Ordering::Relaxed);
            return Err(CtaFailure {
                code,
                cta: ctaid,
                address: cta.fault.saturating_sub(1),
                line: cta.fault_line,
                thread: cta.fault_thread,
            });
        }
    }
}

/// Whether this machine executes FMA instructions (see `WVP_HOST_FMA` in prelude.h).
fn host_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A thread's `%tid` from its flat index in a block of `block` threads.
fn unflatten(t: u32, block: Dim3) -> [u32; 3] {
    let (x, y) = (block.x.max(1), block.y.max(1));
    [t % x, t / x % y, t / x / y]
}
