//! Implementation limits: what warpvisor refuses rather than translates, in one place.
//!
//! *Engine limits* match wasmtime 48 — the oracle and fallback backend — so that a fleet
//! accepts a module exactly when wasmtime does; the front end ([`crate::frontend::load`])
//! checks them and reports [`crate::frontend::FrontendError::Limit`]. The limits wasmparser
//! enforces during validation (1,000,000 functions, 50,000 locals and 7,654,321 bytes per
//! function body, 1,000 parameters or results, ...) are the same in the wasmparser that
//! validates for warpvisor and in the one wasmtime 48 uses, so they need nothing here.
//!
//! *Translator limits* bound what one module can make the translator and the device compiler
//! do: the generated C grows linearly with the module, and these caps stop a small module
//! from asking for more C than a compiler can take; [`crate::codegen::emit`] checks them while
//! it writes and reports [`crate::codegen::CodegenError::Limit`], naming the limit and the
//! value, before any compiler runs.

/// Most non-default targets of one `br_table`: wasmtime 48's `MAX_BR_TABLE_TARGETS`
/// (wasmtime-internal-cranelift, 2^16 − 16, the same as V8's and SpiderMonkey's). Wasmtime
/// checks it in unreachable code too, and so does warpvisor.
pub const MAX_BR_TABLE_TARGETS: u32 = 65_520;

/// Most tables, imported and defined together: `MAX_WASM_TABLES` of wasmparser 0.254, the
/// validator of wasmtime 48 (the wasmparser that validates for warpvisor allows 100,000).
pub const MAX_TABLES: usize = 100;

/// Most bytes of C for one WebAssembly function. C compilers take time that grows faster
/// than linearly with the size of one function: GCC 12 at `-O2` needs 7 s for a function of
/// 0.7 MB made of 2,000 `if` blocks, 35 s for 1.4 MB, and more than 15 minutes for 7 MB. The
/// largest function of the benchmark programs makes 1.5 MB.
pub const MAX_FUNCTION_SOURCE_BYTES: usize = 4 << 20;

/// Most bytes of C in one kernel (one partition): what one compiler run is given. GCC 12 at
/// `-O2` holds about 100 bytes of memory per byte of kernel (1.4 GB and 86 s for the largest
/// benchmark program's 12 MB; 1.2 GB for 20,000 one-line functions in a table), so this keeps
/// one build under about 4 GB. Bigger programs build in partitions (`--partition-ops`).
pub const MAX_KERNEL_SOURCE_BYTES: usize = 32 << 20;

/// Most bytes of C over all partitions of a kernel: fastcalls are copied into every partition
/// that calls them, so the partitions together can be larger than one kernel would be (the
/// benchmark programs make at most 37 MB, in CUDA's 2,000-operator partitions).
pub const MAX_TOTAL_SOURCE_BYTES: usize = 256 << 20;

/// Most 64-bit words of local liveness per function (operators × ⌈locals / 64⌉): past it a
/// continuation saves every local at each yield point instead of only the live ones, which
/// costs frame space but no memory or time in the translator.
pub const MAX_LIVENESS_WORDS: usize = 1 << 22;

/// Most functions the partition planner may look at (each function a cluster brings, each
/// time clusters are compared or merged): bounds its time when many callers each reach most
/// of the module. The benchmark programs need fewer than 2^17.
pub const MAX_PLAN_WORK: usize = 1 << 26;
