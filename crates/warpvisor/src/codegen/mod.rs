//! Kernel code generation: analysed module → one C-dialect kernel source.
//!
//! The emitter writes the module's constants, includes the prelude (`prelude.h`, the runtime
//! every kernel shares), then one C function per WebAssembly function, entry shims for
//! functions the host or the trampoline can start, the trampoline itself, and the launch entry.
//! What differs between host C, OpenCL C and CUDA C++ lives in the dialect block
//! ([`dialect`]), not in the emitter.

mod dialect;
mod function;
mod numeric;

use std::fmt::Write;

pub use dialect::Dialect;

use wasmparser::ValType;

use crate::analysis::{CallGraph, Signatures};
use crate::frontend::Module;

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
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            dialect: Dialect::C,
            interleave: 0,
            max_table_elements: 10_000,
            opt_level: 2,
        }
    }
}

/// Per-module facts derived for the kernel and shared with the VMM.
#[derive(Debug, Clone)]
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

/// A generated kernel.
#[derive(Debug, Clone)]
pub struct KernelSource {
    /// The complete source.
    pub code: String,
    /// The layout facts the VMM needs.
    pub layout: KernelLayout,
    /// Functions the trampoline can start (imports, continuations, shims of fastcalls).
    pub dispatchable: Vec<bool>,
}

/// Everything the per-function emitter needs to know about the module.
pub(crate) struct ModuleContext<'m, 'a> {
    pub module: &'m Module<'a>,
    pub sigs: &'m Signatures,
    pub graph: &'m CallGraph,
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

fn const_array(out: &mut String, name: &str, values: &[u32]) {
    let mut v: Vec<String> = values.iter().map(|x| format!("{x}u")).collect();
    if v.is_empty() {
        v.push("0u".into()); // C has no empty arrays
    }
    let _ = writeln!(out, "WV_CONST uint32_t {name}[] = {{{}}};", v.join(", "));
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

/// Generates the kernel for `module`.
pub fn emit(module: &Module<'_>, options: &KernelOptions) -> Result<KernelSource, CodegenError> {
    if ![0, 4, 8].contains(&options.interleave) {
        return Err(CodegenError::Limit(format!(
            "interleave must be 0, 4 or 8, not {}",
            options.interleave
        )));
    }
    let sigs = Signatures::new(module);
    let graph = CallGraph::new(module, &sigs);
    let ctx = ModuleContext {
        module,
        sigs: &sigs,
        graph: &graph,
    };
    let layout = kernel_layout(module, options)?;
    let n = module.funcs.len();

    // Functions the trampoline may be asked to start.
    let mut dispatchable = graph.yields.clone();
    for (f, r) in graph.referenceable.iter().enumerate() {
        dispatchable[f] |= *r;
    }
    for e in &module.exports {
        if let crate::frontend::ExportKind::Func(f) = e.kind {
            dispatchable[f as usize] = true;
        }
    }
    if let Some(s) = module.start {
        dispatchable[s as usize] = true;
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* warpvisor kernel: {} functions ({} continuation, {} fastcall), interleave {} */",
        n,
        graph
            .yields
            .iter()
            .skip(module.imported_funcs)
            .filter(|y| **y)
            .count(),
        graph
            .yields
            .iter()
            .skip(module.imported_funcs)
            .filter(|y| !**y)
            .count(),
        options.interleave
    );
    out.push_str(options.dialect.header());
    let _ = writeln!(out, "#define WV_INTERLEAVE {}", options.interleave);
    let _ = writeln!(out, "#define WV_NUM_FUNCS {n}u");
    let _ = writeln!(
        out,
        "#define WV_NUM_GLOBALS {}u",
        module.globals.len().max(1)
    );
    let _ = writeln!(out, "#define WV_NUM_TABLES {}u", module.tables.len().max(1));
    let _ = writeln!(out, "#define WV_TABLE_WORDS {}u", layout.table_words);
    let _ = writeln!(out, "#define WV_NUM_DATAS {}u", module.datas.len());
    let _ = writeln!(
        out,
        "#define WV_NUM_SEGMENTS {}u",
        (module.datas.len() + module.elems.len()).max(1)
    );
    let _ = writeln!(out, "#define WV_RET_WORDS {}u", layout.ret_words);
    const_array(&mut out, "wv_table_base", &layout.table_base);
    const_array(&mut out, "wv_table_cap", &layout.table_caps);
    let data_len: Vec<u32> = module.datas.iter().map(|d| d.bytes.len() as u32).collect();
    const_array(&mut out, "wv_data_base", &layout.data_base);
    const_array(&mut out, "wv_data_len", &data_len);
    let elem_len: Vec<u32> = module.elems.iter().map(|e| e.items.len() as u32).collect();
    const_array(&mut out, "wv_elem_base", &layout.elem_base);
    const_array(&mut out, "wv_elem_len", &elem_len);
    let func_sig: Vec<u32> = (0..n as u32).map(|f| sigs.of_func(module, f)).collect();
    const_array(&mut out, "wv_func_sig", &func_sig);
    out.push_str(PRELUDE);

    // Result tuples of multi-value fastcalls.
    let mut tuples = std::collections::BTreeMap::new();
    for f in module.imported_funcs..n {
        let r = module.func_type(f as u32).results();
        if r.len() > 1 {
            tuples.insert(tuple_name(r), r.to_vec());
        }
    }
    for r in tuples.values() {
        let _ = write!(out, "typedef struct {{");
        for (k, t) in r.iter().enumerate() {
            let _ = write!(out, " {} v{k};", c_type(*t));
        }
        let _ = writeln!(out, " }} {};", tuple_name(r));
    }

    // Forward declarations, then bodies.
    out.push_str("\n/* ---- functions ---- */\n");
    for f in module.imported_funcs..n {
        let f = f as u32;
        if graph.yields[f as usize] {
            let _ = writeln!(out, "static void wv_k{f}(wv_fleet *f, uint32_t vm);");
        } else {
            let _ = writeln!(out, "{};", function::fastcall_signature(&ctx, f));
        }
    }
    for f in module.imported_funcs..n {
        out.push('\n');
        out.push_str(&function::FunctionEmitter::new(&ctx, f as u32).emit()?);
    }

    // Entry shims: start a fastcall from a frame on the call stack.
    out.push_str("\n/* ---- entry shims: fastcalls started by the trampoline ---- */\n");
    for (f, &d) in dispatchable.iter().enumerate().skip(module.imported_funcs) {
        if d && !graph.yields[f] {
            out.push_str(&entry_shim(&ctx, f as u32));
        }
    }

    // The trampoline.
    out.push_str(
        "\n/* ---- trampoline: runs a VM until it finishes, traps or makes a hypercall ---- */\n",
    );
    out.push_str("static void wv_trampoline(wv_fleet *f, uint32_t vm) {\n");
    out.push_str("  WV_GLOBAL wv_vm *v = &f->vms[vm];\n");
    out.push_str("  while (v->status == WV_RUNNING) {\n");
    out.push_str("    switch ((uint32_t)WV_STK(v->fp + 1)) {\n");
    for (f, &d) in dispatchable.iter().enumerate() {
        if f < module.imported_funcs {
            let _ = writeln!(
                out,
                "      case {f}: v->hypercall = {f}; v->status = WV_HYPERCALL; break; /* import {} */",
                function::sanitize_comment(&module.func_display_name(f as u32))
            );
        } else if graph.yields[f] {
            let _ = writeln!(out, "      case {f}: wv_k{f}(f, vm); break;");
        } else if d {
            let _ = writeln!(out, "      case {f}: wv_e{f}(f, vm); break;");
        }
    }
    out.push_str("      default: wv_trap(f, vm, WV_TRAP_UNREACHABLE); break;\n");
    out.push_str("    }\n  }\n}\n");
    out.push_str(options.dialect.entry());
    Ok(KernelSource {
        code: out,
        layout,
        dispatchable,
    })
}

fn entry_shim(ctx: &ModuleContext<'_, '_>, func: u32) -> String {
    let ty = ctx.module.func_type(func);
    let mut out = format!("static void wv_e{func}(wv_fleet *f, uint32_t vm) {{\n");
    out.push_str("  WV_GLOBAL wv_vm *v = &f->vms[vm];\n  uint32_t fp = v->fp;\n");
    let args: Vec<String> = ty
        .params()
        .iter()
        .enumerate()
        .map(|(i, t)| format!("wv_dec_{}(WV_STK(fp + {}))", slot_suffix(*t), 3 + i))
        .collect();
    let call = format!(
        "wv_f{func}(f, vm{}{})",
        if args.is_empty() { "" } else { ", " },
        args.join(", ")
    );
    match ty.results().len() {
        0 => {
            let _ = writeln!(out, "  {call};");
        }
        1 => {
            let _ = writeln!(out, "  {} r_ = {call};", c_type(ty.results()[0]));
        }
        _ => {
            let _ = writeln!(out, "  {} r_ = {call};", tuple_name(ty.results()));
        }
    }
    out.push_str("  if (v->status != WV_RUNNING) return;\n");
    match ty.results().len() {
        0 => {}
        1 => {
            let _ = writeln!(
                out,
                "  WV_RET(0) = wv_enc_{}(r_);",
                slot_suffix(ty.results()[0])
            );
        }
        _ => {
            for (k, t) in ty.results().iter().enumerate() {
                let _ = writeln!(out, "  WV_RET({k}) = wv_enc_{}(r_.v{k});", slot_suffix(*t));
            }
        }
    }
    out.push_str("  wv_pop_frame(f, vm, fp);\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(wat: &str) -> String {
        let bytes = wat::parse_str(wat).unwrap();
        let m = crate::frontend::load(&bytes).unwrap();
        emit(&m, &KernelOptions::default()).unwrap().code
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
        assert!(c.contains("static uint32_t wv_f0(wv_fleet *f, uint32_t vm, uint32_t l0)"));
        assert!(c.contains("/* func 1 \"rec\" (i32) -> (i32): continuation"));
        assert!(c.contains("static void wv_k1(wv_fleet *f, uint32_t vm)"));
        assert!(
            c.contains("WV_I32_DIV_S("),
            "trapping division uses the prelude helper"
        );
        assert!(c.contains("/* call rec */ /* yield point 1 */"));
        assert!(
            c.contains("case 1: wv_k1(f, vm); break;"),
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
