//! The virtual machine monitor: a [`Program`] (a translated module loaded on a backend) and
//! the [`Fleet`] of VMs that runs it — instantiation, invocation, and hypercall service.

mod fleet;
mod host;
mod hypercalls;
mod instance;
mod stats;
mod storage;
mod supervise;
mod values;
mod view;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use fleet::{Fleet, FleetConfig};
pub use host::{HostFunctions, HostStop, Imports, NoHost};
pub use stats::FleetStats;
pub use supervise::{Supervised, Supervisor};
pub use values::{Outcome, TrapKind, Value};
pub use view::{MemoryError, OutOfBounds, VmMemory};

use crate::backend::{Backend, BackendError, Kernel};

use crate::codegen::{self, CodegenError, KernelLayout, KernelOptions, KernelSource};
use crate::frontend::{self, FrontendError, Module};

/// Errors of the VMM and of the pipeline stages it drives.
#[derive(Debug, thiserror::Error)]
pub enum VmmError {
    /// The module was rejected by the front end.
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    /// The module could not be translated.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// No export of that name.
    #[error("the module has no exported function `{0}`")]
    NoSuchExport(String),
    /// Arguments do not match the function's parameters.
    #[error("`{name}` takes ({expected}); got {got}")]
    BadArguments {
        /// Function name.
        name: String,
        /// Expected parameter types.
        expected: String,
        /// What was given.
        got: String,
    },
    /// An allocation failed.
    #[error("out of memory allocating {bytes} bytes for the fleet (try fewer VMs or a smaller --max-memory)")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u64,
    },
    /// A configured limit was exceeded.
    #[error("{0}")]
    Limit(String),
    /// The module imports something the host does not provide.
    #[error("unknown import `{module}`.`{name}`")]
    UnknownImport {
        /// Import module.
        module: String,
        /// Import name.
        name: String,
    },
    /// A `--dir` folder could not be opened.
    #[error("cannot open the directory {path} for the guest: {reason}")]
    Preopen {
        /// Host path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Instantiation trapped (segment out of bounds, or the start function trapped).
    #[error("instantiation trapped: {0}")]
    InstantiationTrap(TrapKind),
}

/// A translated module loaded on a backend: ready to instantiate fleets.
pub struct Program {
    /// The module (without bodies).
    pub module: Module<'static>,
    /// The device programs, one per kernel partition.
    pub(crate) kernels: Vec<Arc<dyn Kernel>>,
    /// For each function, the partition whose kernel starts it.
    pub partition_of: Vec<u32>,
    /// Layout facts of the kernel.
    pub layout: KernelLayout,
    /// Settings the kernel was built with.
    pub options: KernelOptions,
    /// How long translation and the device compiler took.
    pub compile_times: CompileTimes,
}

impl Program {
    /// How many kernel partitions the program has.
    pub fn partitions(&self) -> usize {
        self.kernels.len()
    }
}

/// How long it took to make a [`Program`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CompileTimes {
    /// Validation and translation to kernel source.
    pub translate: Duration,
    /// The device compiler (or the kernel cache).
    pub device_compile: Duration,
}

/// Told about each kernel partition as it finishes building: `(built, total)`.
pub type BuildProgress<'a> = &'a (dyn Fn(usize, usize) + Sync);

impl Program {
    /// Validates, translates and loads `wasm` (binary or text) on `backend`.
    pub fn compile(
        wasm: &[u8],
        options: &KernelOptions,
        backend: &dyn Backend,
    ) -> Result<Program, VmmError> {
        Self::compile_with_progress(wasm, options, backend, &|_, _| {})
    }

    /// [`Program::compile`], telling `progress` as each kernel partition is built.
    pub fn compile_with_progress(
        wasm: &[u8],
        options: &KernelOptions,
        backend: &dyn Backend,
        progress: BuildProgress<'_>,
    ) -> Result<Program, VmmError> {
        let start = Instant::now();
        // `--memory-checks auto` becomes what this backend offers by default, before the
        // kernel and the fleet layout are made from the options.
        let options = &backend.settle_memory_checks(options)?;
        let binary = frontend::to_binary(wasm)?;
        let module = frontend::load(&binary)?;
        let source = codegen::emit_cached(&binary, &module, options)?;
        let translate = start.elapsed();
        let mut program = Self::from_source_with_progress(
            module.into_shape(),
            &source,
            options,
            backend,
            progress,
        )?;
        program.compile_times.translate = translate;
        Ok(program)
    }

    /// Loads already generated kernel source.
    pub fn from_source(
        module: Module<'static>,
        source: &KernelSource,
        options: &KernelOptions,
        backend: &dyn Backend,
    ) -> Result<Program, VmmError> {
        Self::from_source_with_progress(module, source, options, backend, &|_, _| {})
    }

    fn from_source_with_progress(
        module: Module<'static>,
        source: &KernelSource,
        options: &KernelOptions,
        backend: &dyn Backend,
        progress: BuildProgress<'_>,
    ) -> Result<Program, VmmError> {
        let start = Instant::now();
        let total = source.partitions.len();
        let built = AtomicUsize::new(0);
        progress(0, total);
        // Partitions build in parallel, one per core: device compilers are slow, and a
        // compiler per partition at once (60 C compilers on Blur-JPEG's SIMT translation) ran
        // this machine out of memory.
        let kernels =
            crate::work_queue::map_indexed(total, crate::work_queue::default_workers(), |i| {
                let k = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    backend.load(&source.partitions[i], options)
                }))
                .unwrap_or_else(|_| {
                    Err(BackendError::Launch(format!(
                        "building partition {i} panicked"
                    )))
                });
                progress(built.fetch_add(1, Ordering::Relaxed) + 1, total);
                k
            })
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program {
            module,
            kernels,
            partition_of: source.partition_of.clone(),
            layout: source.layout.clone(),
            options: options.clone(),
            compile_times: CompileTimes {
                translate: Duration::ZERO,
                device_compile: start.elapsed(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::Program;
    use crate::backend::{Backend, BackendError, Kernel};
    use crate::codegen::KernelOptions;

    /// A backend whose compiler takes a while and counts how many builds run at once.
    #[derive(Default)]
    struct SlowCompiler {
        running: AtomicUsize,
        most: AtomicUsize,
        builds: AtomicUsize,
    }

    impl Backend for SlowCompiler {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn load(&self, _: &str, _: &KernelOptions) -> Result<Arc<dyn Kernel>, BackendError> {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.builds.fetch_add(1, Ordering::SeqCst);
            Err(BackendError::Launch("not a real compiler".into()))
        }
        fn copy_bandwidth(&self, _: usize) -> Result<f64, BackendError> {
            Ok(0.0)
        }
    }

    #[test]
    fn partitions_build_one_per_core_at_most() {
        // 40 functions, one partition each: a compiler per partition at once ran a 2-core
        // machine out of memory on a benchmark of 60 partitions.
        let mut wat = String::from("(module");
        for f in 0..40 {
            wat.push_str(&format!(
                " (func (export \"f{f}\") (result i32) (i32.add (i32.const {f}) (i32.const 1)))"
            ));
        }
        wat.push(')');
        let options = KernelOptions {
            partition_ops: 1,
            ..KernelOptions::default()
        };
        let backend = SlowCompiler::default();
        let r = Program::compile(wat.as_bytes(), &options, &backend);
        assert!(r.is_err(), "the fake compiler fails every build");
        let builds = backend.builds.load(Ordering::SeqCst);
        assert!(builds >= 10, "{builds} partitions");
        let most = backend.most.load(Ordering::SeqCst);
        assert!(
            most >= 1 && most <= crate::work_queue::default_workers(),
            "{most} at once"
        );
    }
}
