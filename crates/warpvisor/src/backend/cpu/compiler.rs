//! The system C compiler and the on-disk cache of compiled kernels.
//!
//! A cache entry is keyed by the SHA-256 of everything that shaped the object: warpvisor's
//! version, the compiler's identity and flags, and the kernel source (which embeds the layout
//! settings). Each entry also records those settings in a manifest that is checked on reuse.

use std::path::Path;
use std::process::Command;

use crate::backend::cache::{self, cache_dir};
use crate::backend::environment;
use crate::backend::BackendError;
use crate::codegen::{CallMode, KernelOptions, MemoryChecks};

/// Flags that keep WebAssembly float semantics exact and the C well-defined.
const FLAGS: &[&str] = &[
    "-std=gnu11",
    "-fPIC",
    "-shared",
    "-fwrapv",
    "-fno-strict-aliasing",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fno-math-errno",
    // Keep `x - 0.0`, `x * 1.0` and friends: they must quiet a signalling NaN.
    "-fsignaling-nans",
    "-w",
];

/// GCC's scheduling before register allocation, aware of register pressure.
const SCHEDULE_FIRST: &[&str] = &["-fschedule-insns", "-fsched-pressure"];

/// The system C compiler.
pub struct CCompiler {
    path: String,
    identity: String,
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackendError {
    let context = context.into();
    move |source| BackendError::Io { context, source }
}

impl CCompiler {
    /// Finds the C compiler (`$CC`, else `cc`) and records its version.
    pub fn detect() -> Result<Self, BackendError> {
        let path = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = environment::output(Command::new(&path).arg("--version")).map_err(|e| {
            BackendError::Unavailable {
                backend: "cpu",
                reason: format!("no C compiler `{path}` ({e}); install gcc or set CC"),
            }
        })?;
        let identity = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        Ok(CCompiler { path, identity })
    }

    /// The compiler's command.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The first line of its `--version`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether it is clang (which takes GCC's flags but a few).
    fn is_clang(&self) -> bool {
        self.identity.contains("clang")
    }

    /// The flags a kernel built with `options` is compiled with (a shared object: `-shared
    /// -fPIC` among them). Other C that must be compared with kernels fairly (wasm2c's, in the
    /// benchmarks) uses the same.
    pub fn flags(&self, options: &KernelOptions) -> Vec<String> {
        let mut f: Vec<String> = FLAGS.iter().map(|s| s.to_string()).collect();
        f.push(format!("-O{}", options.opt_level.min(3)));
        if options.opt_level > 0 && !self.is_clang() {
            // Scheduling before register allocation, aware of register pressure (GCC only:
            // clang refuses the flags): translated WebAssembly keeps many values live
            // (unrolled hashes, image loops), and GCC's x86 default of scheduling only after
            // allocation leaves spills in their way. Execution 2-16% shorter on eight of the
            // ten benchmarks, none slower beyond noise; builds about 7% longer
            // (docs/benchmarks.md).
            f.extend(SCHEDULE_FIRST.iter().map(|s| s.to_string()));
        }
        if super::watches_writes(options) {
            // Stores carry no dirty-page marks: the fleet's write watch finds the pages.
            f.push("-DWV_DIRTY_BY_MMU=1".into());
        }
        if let Some(level) = host_isa_level() {
            f.push(format!("-march={level}"));
            f.push("-mtune=generic".into());
        }
        if options.calls == CallMode::Direct {
            // A WebAssembly call is a call: a tail call turned into a jump would let endless
            // recursion loop forever instead of exhausting the stack (and trapping).
            f.push("-fno-optimize-sibling-calls".into());
            if options.memory_checks == MemoryChecks::Guard {
                // The native stack's floor is a guard of 64 KiB (cpu/stack.rs): no frame may
                // step over it without touching it.
                f.push("-fstack-clash-protection".into());
            }
        }
        f
    }

    fn key(&self, code: &str, flags: &[String]) -> String {
        let flags = flags.join(" ");
        cache::key(&[
            env!("CARGO_PKG_VERSION").as_bytes(),
            self.identity.as_bytes(),
            flags.as_bytes(),
            code.as_bytes(),
        ])
    }

    /// Compiles `source` (or reuses the cached object) and loads it.
    pub fn build(
        &self,
        code: &str,
        options: &KernelOptions,
    ) -> Result<libloading::Library, BackendError> {
        let dir = cache_dir();
        std::fs::create_dir_all(&dir)
            .map_err(io(format!("creating kernel cache {}", dir.display())))?;
        let flags = self.flags(options);
        let key = self.key(code, &flags);
        let object = dir.join(format!("{key}.so"));
        let manifest = dir.join(format!("{key}.json"));
        let expected = serde_json::json!({
            "warpvisor": env!("CARGO_PKG_VERSION"),
            "compiler": self.identity,
            "flags": flags,
            "options": options,
        })
        .to_string();
        let cached =
            object.exists() && std::fs::read_to_string(&manifest).is_ok_and(|m| m == expected);
        if !cached {
            self.compile(&dir, &key, code, &object, &flags)?;
            write_atomically(&manifest, expected.as_bytes())?;
        }
        // SAFETY: the object is our generated kernel: its initializers do nothing.
        unsafe { libloading::Library::new(&object) }
            .map_err(|e| BackendError::Launch(format!("loading {}: {e}", object.display())))
    }

    fn compile(
        &self,
        dir: &Path,
        key: &str,
        code: &str,
        object: &Path,
        flags: &[String],
    ) -> Result<(), BackendError> {
        let unique = format!(
            "{key}.{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], "");
        let c_file = dir.join(format!("{unique}.c"));
        let tmp_obj = dir.join(format!("{unique}.so.tmp"));
        std::fs::write(&c_file, code).map_err(io("writing kernel source"))?;
        let run = |extra: &[&str]| {
            environment::output(
                Command::new(&self.path)
                    .args(flags)
                    .args(extra)
                    .arg("-o")
                    .arg(&tmp_obj)
                    .arg(&c_file)
                    .arg("-lm"),
            )
            .map_err(io(format!("running {}", self.path)))
        };
        let mut out = run(&[])?;
        // GCC 12's value-range propagation crashes on some generated functions (seen on
        // random modules); the same code without that pass (and without scheduling first,
        // the other pass these kernels add) compiles.
        if String::from_utf8_lossy(&out.stderr).contains("internal compiler error") {
            out = run(&[
                "-fno-tree-vrp",
                "-fno-schedule-insns",
                "-fno-sched-pressure",
            ])?;
        }
        let _ = std::fs::remove_file(&c_file);
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp_obj);
            return Err(BackendError::Compile {
                compiler: self.identity.clone(),
                log: String::from_utf8_lossy(&out.stderr)
                    .chars()
                    .take(4000)
                    .collect(),
            });
        }
        std::fs::rename(&tmp_obj, object).map_err(io("storing compiled kernel"))
    }
}

/// The highest x86-64 micro-architecture level this CPU implements (`x86-64-v2`: SSE4.1/4.2,
/// POPCNT; `x86-64-v3`: AVX2, BMI1/2, LZCNT, FMA, MOVBE), or `None` for the baseline. Kernels
/// are built for it, as wasmtime's Cranelift compiles for the host's features: `f32.floor` is
/// then one `roundss` instead of a call into libm, `i32.clz` one `lzcnt`, variable shifts
/// need no `cl`. The level is spelled out in the flags, and so in the kernel cache's key: an
/// object never reaches a machine without the level.
fn host_isa_level() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let v2 = has!("sse3")
            && has!("ssse3")
            && has!("sse4.1")
            && has!("sse4.2")
            && has!("popcnt")
            && has!("cmpxchg16b");
        let v3 = v2
            && has!("avx")
            && has!("avx2")
            && has!("bmi1")
            && has!("bmi2")
            && has!("f16c")
            && has!("fma")
            && has!("lzcnt")
            && has!("movbe")
            && has!("xsave");
        if v3 {
            return Some("x86-64-v3");
        }
        if v2 {
            return Some("x86-64-v2");
        }
    }
    None
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), BackendError> {
    crate::backend::cache::write_atomically(path, bytes).map_err(io("writing kernel manifest"))
}
