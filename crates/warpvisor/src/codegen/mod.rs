//! Kernel code generation: analysed module → one C-dialect kernel source.
//!
//! The emitter writes the module's constants, includes the prelude (`prelude.h`, the runtime
//! every kernel shares), then one C function per WebAssembly function, entry shims for
//! functions the host or the trampoline can start, the trampoline itself, and the launch entry.
//! What differs between host C, OpenCL C and CUDA C++ lives in the dialect block
//! (`dialect.rs`), not in the emitter.

mod cached;
mod devirt;
mod dialect;
mod function;
mod kernel;
mod native;
pub(crate) mod numeric;
mod partition;

pub use cached::emit_cached;
pub use dialect::Dialect;
pub use kernel::emit;

use wasmparser::ValType;

use crate::analysis::{CallGraph, Signatures};
use crate::frontend::Module;
use crate::profile::{CallSites, ProfileIndex};
use crate::simt::BlockTable;
use devirt::ConstantSlots;

/// The runtime shared by every kernel.
pub const PRELUDE: &str = include_str!("prelude.h");

/// Why a module could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// An operator the translator does not handle.
    #[error("unsupported operator {operator} in function {function}")]
    Unsupported {
        /// Function name.
        function: String,
        /// The operator.
        operator: String,
    },
    /// A configured limit is smaller than what the module needs.
    #[error("{0}")]
    Limit(String),
    /// A translator bug: the module validated but could not be translated.
    #[error("internal translator error in function {function}: {message}")]
    Internal {
        /// Function name.
        function: String,
        /// What went wrong.
        message: String,
    },
}

/// Settings that shape the generated code. Every field is part of the kernel's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KernelOptions {
    /// Kernel language.
    pub dialect: Dialect,
    /// Bytes per memory cell: 0 (contiguous per VM), 4 or 8.
    pub interleave: u32,
    /// Most elements a table may grow to.
    pub max_table_elements: u32,
    /// Device compiler optimisation level, 0 to 3 (OpenCL: 0 means `-cl-opt-disable`).
    pub opt_level: u8,
    /// Most WebAssembly operators per kernel partition (0: one kernel). Device compilers
    /// take time that grows faster than linearly with kernel size.
    pub partition_ops: u32,
    /// Meter fuel: every function entry and loop header costs one tick, and a VM out of fuel
    /// traps with `out_of_fuel` (see `FleetConfig::fuel`).
    pub meter_fuel: bool,
    /// How calls that may not finish on the device are made.
    pub calls: CallMode,
    /// How memory accesses are kept inside the VM's memory.
    #[serde(default)]
    pub memory_checks: MemoryChecks,
    /// Record every VM's basic blocks and memory addresses for `warpvisor simt` (direct
    /// calls only). Off, kernels hold no tracing code at all.
    #[serde(default)]
    pub trace: bool,
    /// Imports that may park their VM until the host wakes it (the guest API's
    /// `request_next`). With direct calls they leave the kernel as hypercalls do with
    /// continuations, and the functions that can reach them become continuations; every
    /// other import is still served while the kernel waits. Ignored with continuations, where
    /// every import leaves the kernel.
    #[serde(default)]
    pub parking_imports: Vec<crate::frontend::ImportName>,
    /// Count every call site's calls and every `call_indirect`'s targets for `warpvisor
    /// profile` (direct calls, host C only). Off, kernels hold no counting code at all.
    #[serde(default)]
    pub count_calls: bool,
    /// A call profile of the module (`warpvisor profile`, `--profile FILE`): hot
    /// `call_indirect` targets become guarded direct calls, and the partition planner weighs
    /// call edges by what ran.
    #[serde(default)]
    pub profile: Option<crate::profile::CallProfile>,
    /// How a reset learns which pages of a VM's memory were written (interleave 0).
    #[serde(default)]
    pub dirty_pages: DirtyPages,
}

/// How the pages a VM wrote are found, so that a reset restores only those.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum DirtyPages {
    /// By the MMU where the backend can ask it (`cpu` with guard regions, and OpenCL CPU
    /// devices computing in host memory at interleave 0 with continuations, on Linux 6.7 or
    /// later: asynchronous userfaultfd write protection), so stores carry no marks; elsewhere
    /// by marks.
    #[default]
    Auto,
    /// Every store marks its page in the fleet's dirty-page map (every device).
    Marks,
}

impl DirtyPages {
    /// The flag value: `auto` or `marks`.
    pub fn name(self) -> &'static str {
        match self {
            DirtyPages::Auto => "auto",
            DirtyPages::Marks => "marks",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(DirtyPages::Auto),
            "marks" => Some(DirtyPages::Marks),
            _ => None,
        }
    }
}

/// How a kernel keeps each memory access inside its VM's memory.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MemoryChecks {
    /// Every load and store compares `[ea, ea + width)` with the VM's memory size. Works on
    /// every device and layout.
    #[default]
    Explicit,
    /// Guard regions, as wasmtime does: each VM's memory is a reservation of
    /// [`GUARD_STRIDE`](crate::layout::GUARD_STRIDE) bytes of which only the current size is
    /// accessible, so an access outside it faults and the fault becomes that VM's
    /// `memory_out_of_bounds` trap; accesses carry no check (those with static offsets beyond
    /// the guard still do). Host C with contiguous memories and direct calls, and OpenCL C
    /// with contiguous memories and continuations on a CPU device computing in host memory
    /// (PoCL), on x86-64 Linux.
    Guard,
    /// Guard regions where the backend offers them by default, explicit checks elsewhere:
    /// settled by [`Program::compile`](crate::vmm::Program::compile) with the backend
    /// ([`Backend::guard_regions_unsupported`](crate::backend::Backend::guard_regions_unsupported))
    /// before anything is generated.
    Auto,
}

impl MemoryChecks {
    /// The flag value: `explicit` or `guard`.
    pub fn name(self) -> &'static str {
        match self {
            MemoryChecks::Explicit => "explicit",
            MemoryChecks::Guard => "guard",
            MemoryChecks::Auto => "auto",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "explicit" => Some(MemoryChecks::Explicit),
            "guard" => Some(MemoryChecks::Guard),
            "auto" => Some(MemoryChecks::Auto),
            _ => None,
        }
    }

    /// The default for `options` where no device is known: guard regions where they apply
    /// to host C (the `cpu` backend), explicit checks elsewhere.
    pub fn default_for(options: &KernelOptions) -> Self {
        match options.dialect == Dialect::C && MemoryChecks::guard_unsupported(options).is_none() {
            true => MemoryChecks::Guard,
            false => MemoryChecks::Explicit,
        }
    }

    /// Why `options` cannot use guard regions on this host, if they cannot, whatever the
    /// device (an OpenCL device must also compute in host memory on this CPU:
    /// `Backend::guard_regions_unsupported`).
    pub fn guard_unsupported(options: &KernelOptions) -> Option<String> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            return Some("guard regions need an x86-64 Linux host".into());
        }
        if options.interleave != 0 {
            return Some("guard regions need contiguous memories (--interleave 0)".into());
        }
        match options.dialect {
            Dialect::C if options.calls != CallMode::Direct => {
                Some("guard regions need direct calls on cpu (--calls direct)".into())
            }
            Dialect::C => None,
            Dialect::OpenCl if options.calls != CallMode::Continuations => {
                Some("guard regions need continuations on opencl (--calls continuations)".into())
            }
            Dialect::OpenCl => None,
            Dialect::Cuda => Some("guard regions need the cpu or opencl backend, not cuda".into()),
        }
    }

    /// `options` with [`MemoryChecks::Auto`] settled: guard regions where `by_default` (the
    /// backend offers them by default), explicit checks elsewhere. Guard regions asked for
    /// where they cannot work (`unsupported` says why) are an error naming why.
    pub fn settle(
        options: &KernelOptions,
        unsupported: Option<String>,
        by_default: bool,
    ) -> Result<KernelOptions, CodegenError> {
        let mut settled = options.clone();
        settled.memory_checks = match (options.memory_checks, unsupported) {
            (MemoryChecks::Auto, None) if by_default => MemoryChecks::Guard,
            (MemoryChecks::Auto, _) => MemoryChecks::Explicit,
            (MemoryChecks::Guard, Some(why)) => {
                return Err(CodegenError::Limit(format!(
                    "{why} (--memory-checks explicit works everywhere)"
                )))
            }
            (checks, _) => checks,
        };
        Ok(settled)
    }
}

/// How a kernel makes calls that the device may not be able to finish without the host:
/// calls that reach an import, and recursion.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CallMode {
    /// Every function that can reach an import or recurse is a continuation: its frames live
    /// in the VM's call stack, and an import stops the VM until the host has served it. Works
    /// on every device.
    #[default]
    Continuations,
    /// Calls finish on the device wherever it can. In host C (the `cpu` backend) every
    /// function is a plain C function: the kernel calls the host for an import and waits, and
    /// recursion uses the worker's native stack (a frame below its floor traps with
    /// `stack_overflow`). On OpenCL devices with fine-grained SVM and its atomics, and on
    /// CUDA devices that map host memory, the host serves imports while the kernel waits
    /// (`backend/host_calls.rs`); recursion stays continuations there.
    Direct,
}

impl CallMode {
    /// The flag value: `continuations` or `direct`.
    pub fn name(self) -> &'static str {
        match self {
            CallMode::Continuations => "continuations",
            CallMode::Direct => "direct",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "continuations" => Some(CallMode::Continuations),
            "direct" => Some(CallMode::Direct),
            _ => None,
        }
    }
}

impl KernelOptions {
    /// Whether the kernel's calls are C calls throughout (direct calls in host C): recursion
    /// on the native stack, traps and host stops unwinding by a jump to the entry shim.
    pub fn native_calls(&self) -> bool {
        self.calls == CallMode::Direct && self.dialect == Dialect::C
    }

    /// Whether the host serves imports while the kernel waits (direct calls on any dialect),
    /// so that only recursion and parking imports leave the kernel.
    pub fn synchronous_imports(&self) -> bool {
        self.calls == CallMode::Direct
    }
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            dialect: Dialect::C,
            interleave: 0,
            max_table_elements: 10_000,
            opt_level: 2,
            partition_ops: 0,
            meter_fuel: false,
            calls: CallMode::Continuations,
            memory_checks: MemoryChecks::Explicit,
            trace: false,
            parking_imports: Vec::new(),
            count_calls: false,
            profile: None,
            dirty_pages: DirtyPages::Auto,
        }
    }
}

/// Per-module facts derived for the kernel and shared with the VMM.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KernelLayout {
    /// Capacity (elements) of each table.
    pub table_caps: Vec<u32>,
    /// First element word of each table within a VM's table area.
    pub table_base: Vec<u32>,
    /// Table words per VM (at least 1).
    pub table_words: u32,
    /// First byte of each data segment in the data blob.
    pub data_base: Vec<u32>,
    /// First reference of each element segment in the element blob.
    pub elem_base: Vec<u32>,
    /// Result/argument words per VM (at least 1).
    pub ret_words: u32,
}

/// A generated kernel: one source per partition.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KernelSource {
    /// The complete source of each partition (one unless partitioning was asked for).
    pub partitions: Vec<String>,
    /// For each function, the partition whose trampoline starts it (`u32::MAX`: none).
    pub partition_of: Vec<u32>,
    /// The layout facts the VMM needs.
    pub layout: KernelLayout,
}

/// Everything the per-function emitter needs to know about the module.
pub(crate) struct ModuleContext<'m, 'a> {
    pub module: &'m Module<'a>,
    pub sigs: &'m Signatures,
    pub graph: &'m CallGraph,
    /// The basic blocks a traced kernel records (`KernelOptions::trace`).
    pub blocks: Option<&'m BlockTable>,
    /// The call sites a counting kernel counts (`KernelOptions::count_calls`).
    pub counted_sites: Option<&'m CallSites>,
    /// The call profile the kernel is built for (`KernelOptions::profile`).
    pub profile: Option<&'m ProfileIndex<'m>>,
    /// Table slots that never change after instantiation (`devirt.rs`).
    pub constant_slots: &'m ConstantSlots,
}

/// C type of a WebAssembly value type (references are 32-bit).
pub(crate) fn c_type(t: ValType) -> &'static str {
    match t {
        ValType::I32 => "uint32_t",
        ValType::I64 => "uint64_t",
        ValType::F32 => "float",
        ValType::F64 => "double",
        _ => "uint32_t",
    }
}

/// The C initial value of a local of type `t` (a reference's is null).
pub(crate) fn zero_value(t: ValType) -> &'static str {
    match t {
        ValType::Ref(_) => "WV_NULL_REF",
        _ => "0",
    }
}

/// Suffix naming a value type in slot names and helpers.
pub(crate) fn slot_suffix(t: ValType) -> &'static str {
    match t {
        ValType::I32 => "i32",
        ValType::I64 => "i64",
        ValType::F32 => "f32",
        ValType::F64 => "f64",
        _ => "ref",
    }
}

/// Name of the struct returning several results.
pub(crate) fn tuple_name(results: &[ValType]) -> String {
    let parts: Vec<&str> = results.iter().map(|t| slot_suffix(*t)).collect();
    format!("wv_tuple_{}", parts.join("_"))
}

/// The C line that ends a function returning `results` after a trap: a placeholder value the
/// caller never reads (the VM has stopped), so that every path returns.
pub(crate) fn dead_return(results: &[ValType]) -> String {
    match results.len() {
        0 => "  return;\n".to_string(),
        1 => "  return 0;\n".to_string(),
        _ => format!("  {{ {} r_ = {{0}}; return r_; }}\n", tuple_name(results)),
    }
}

/// Computes the layout facts of `module` under `options`.
pub fn kernel_layout(
    module: &Module<'_>,
    options: &KernelOptions,
) -> Result<KernelLayout, CodegenError> {
    let mut table_caps = Vec::new();
    let mut table_base = Vec::new();
    let mut words: u64 = 0;
    for (i, t) in module.tables.iter().enumerate() {
        let cap = t
            .maximum
            .unwrap_or(u64::MAX)
            .min(options.max_table_elements as u64)
            .max(t.initial.min(options.max_table_elements as u64));
        if t.initial > cap {
            return Err(CodegenError::Limit(format!(
                "table {i} starts with {} elements, more than the limit of {} (--max-table-elements)",
                t.initial, options.max_table_elements
            )));
        }
        table_caps.push(cap as u32);
        table_base.push(words as u32);
        words += cap;
    }
    if words > u32::MAX as u64 / 2 {
        return Err(CodegenError::Limit("tables too large".into()));
    }
    let mut data_base = Vec::new();
    let mut off = 0u64;
    for d in &module.datas {
        data_base.push(off as u32);
        off += d.bytes.len() as u64;
    }
    let mut elem_base = Vec::new();
    let mut off = 0u64;
    for e in &module.elems {
        elem_base.push(off as u32);
        off += e.items.len() as u64;
    }
    let ret_words = module
        .types
        .iter()
        .map(|t| t.params().len().max(t.results().len()))
        .max()
        .unwrap_or(0)
        .max(1) as u32;
    Ok(KernelLayout {
        table_caps,
        table_base,
        table_words: (words as u32).max(1),
        data_base,
        elem_base,
        ret_words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(wat: &str) -> String {
        let bytes = wat::parse_str(wat).unwrap();
        let m = crate::frontend::load(&bytes).unwrap();
        emit(&m, &KernelOptions::default())
            .unwrap()
            .partitions
            .remove(0)
    }

    #[test]
    fn recursion_makes_a_continuation_and_leaves_fastcalls_plain() {
        let c = kernel(
            r#"(module
              (func $leaf (param i32) (result i32) (i32.div_s (local.get 0) (i32.const 3)))
              (func $rec (export "rec") (param i32) (result i32)
                (if (result i32) (local.get 0)
                  (then (call $rec (i32.sub (local.get 0) (i32.const 1))))
                  (else (call $leaf (i32.const 9))))))"#,
        );
        assert!(
            c.contains("/* func 0 \"leaf\" (i32) -> (i32): fastcall */"),
            "{c}"
        );
        assert!(c.contains("WV_FUNC uint32_t wv_f0(WV_CTX_PARAMS, uint32_t l0)"));
        assert!(c.contains("/* func 1 \"rec\" (i32) -> (i32): continuation"));
        assert!(c.contains(
            "WV_FUNC uint32_t wv_b1(WV_CTX_PARAMS, uint32_t fp, uint32_t depth, uint32_t resume, uint32_t l0)"
        ));
        assert!(c.contains("WV_FUNC void wv_k1(WV_START_PARAMS)"), "{c}");
        assert!(
            c.contains("WV_I32_DIV_S("),
            "trapping division uses the prelude helper"
        );
        assert!(c.contains("/* call rec */ /* yield point 1 */"));
        assert!(
            c.contains("case 1: wv_k1(WV_START_ARGS); break;"),
            "trampoline dispatches the continuation"
        );
    }

    #[test]
    fn frames_save_only_live_locals() {
        // Local 1 is dead after the recursive call, local 2 is live.
        let c = kernel(
            r#"(module (func $f (export "f") (param i32) (result i32) (local i32 i32)
                 (local.set 1 (i32.const 5)) (local.set 2 (local.get 1))
                 (drop (call $f (local.get 1)))
                 (local.get 2)))"#,
        );
        assert!(c.contains("WV_STK(fp + 3) = wv_enc_i32(l2);"), "{c}");
        assert!(!c.contains("wv_enc_i32(l1)"), "dead local saved: {c}");
        assert!(!c.contains("wv_enc_i32(l0)"), "dead parameter saved: {c}");
    }

    #[test]
    fn native_calls_of_continuations_write_frames_only_when_the_callee_yields() {
        // $mid reaches an import, so it is a continuation; $top calls it natively.
        let c = kernel(
            r#"(module
                 (import "env" "tick" (func $tick (param i32)))
                 (func $mid (param i32) (result i32)
                   (call $tick (local.get 0)) (i32.add (local.get 0) (i32.const 1)))
                 (func $top (export "top") (param i32) (result i32) (local i32)
                   (local.set 1 (i32.const 7))
                   (i32.add (call $mid (local.get 0)) (local.get 1))))"#,
        );
        let call = c
            .lines()
            .find(|l| l.contains("wv_b1(WV_CTX_ARGS, nfp, depth + 1, 0, s0_i32)"))
            .unwrap_or_else(|| panic!("no native call of $mid: {c}"));
        // Arguments and result in C; the callee's frame header, the caller's resume point and
        // its live local written only on the yield path.
        let (before, after) = call.split_once("wv_b1(").unwrap();
        assert!(
            !before.contains("WV_STK"),
            "frame written before the call: {call}"
        );
        assert!(
            after.contains(
                "if (WV_YIELDED()) { WV_YIELDED_FRAME(nfp, 1); WV_STK(fp + 2) = 1; WV_STK(fp + 3) = wv_enc_i32(l1);"
            ),
            "{call}"
        );
        assert!(
            call.starts_with("  WV_NATIVE_DEPTH(); nfp = fp + "),
            "{call}"
        );
        assert!(
            call.contains("s0_i32 = wv_b1("),
            "result as the C return value: {call}"
        );
    }

    #[test]
    fn interleave_outside_0_4_8_is_rejected() {
        let bytes = wat::parse_str("(module)").unwrap();
        let m = crate::frontend::load(&bytes).unwrap();
        let o = KernelOptions {
            interleave: 2,
            ..KernelOptions::default()
        };
        assert!(matches!(emit(&m, &o), Err(CodegenError::Limit(_))));
    }
}
