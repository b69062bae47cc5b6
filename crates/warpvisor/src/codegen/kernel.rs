//! Module-level emission: constants, prelude, function bodies, entry shims, and the trampoline,
//! once per partition ([`super::partition`] decides what each holds). When a VM's next frame
//! belongs to another partition, the trampoline stops it with `WV_ELSEWHERE` and the VMM
//! launches that partition.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::devirt::ConstantSlots;
use super::function::{
    c_signature, continuation_signature, fastcall_signature, sanitize_comment, FunctionEmitter,
};
use super::native::{native_dispatch_signature, NativeCalls};
use super::partition::{self, fastcall_closure};
use super::{
    c_type, dead_return, kernel_layout, slot_suffix, tuple_name, zero_value, CodegenError,
    KernelLayout, KernelOptions, KernelSource, MemoryChecks, ModuleContext, PRELUDE,
};
use crate::abi;
use crate::analysis::{CallGraph, Signatures};
use crate::frontend::Module;
use crate::limits;
use crate::profile::{CallSites, ProfileIndex, WORDS_PER_SITE};
use crate::simt::BlockTable;

/// Marks a function no partition starts.
pub const NO_PARTITION: u32 = u32::MAX;

fn const_array(out: &mut String, name: &str, values: &[u32]) {
    let mut v: Vec<String> = values.iter().map(|x| format!("{x}u")).collect();
    if v.is_empty() {
        v.push("0u".into()); // C has no empty arrays
    }
    let _ = writeln!(out, "WV_CONST uint32_t {name}[] = {{{}}};", v.join(", "));
}

/// Generates the kernel (or its partitions) for `module`.
pub fn emit(module: &Module<'_>, options: &KernelOptions) -> Result<KernelSource, CodegenError> {
    if ![0, 4, 8].contains(&options.interleave) {
        return Err(CodegenError::Limit(format!(
            "interleave must be 0, 4 or 8, not {}",
            options.interleave
        )));
    }
    let direct = options.native_calls();
    match options.memory_checks {
        MemoryChecks::Auto => {
            return Err(CodegenError::Limit(
                "memory checks `auto` are settled for a backend before a kernel is generated \
                 (MemoryChecks::settle)"
                    .into(),
            ))
        }
        MemoryChecks::Guard => {
            MemoryChecks::settle(options, MemoryChecks::guard_unsupported(options), true)?;
        }
        MemoryChecks::Explicit => {}
    }
    let sigs = Signatures::new(module);
    let mut graph = CallGraph::new(module, &sigs);
    if direct {
        graph = graph.with_direct_calls(&parking_imports(module, options));
    } else if options.synchronous_imports() {
        graph = graph.with_synchronous_imports(&parking_imports(module, options));
    }
    let blocks = match options.trace {
        false => None,
        true if !direct => {
            return Err(CodegenError::Limit(
                "tracing needs direct calls (--calls direct, the cpu backend)".into(),
            ))
        }
        true => Some(BlockTable::of(module).map_err(|e| CodegenError::Limit(e.to_string()))?),
    };
    if options.count_calls && !direct {
        return Err(CodegenError::Limit(
            "counting calls needs direct calls (--calls direct, the cpu backend)".into(),
        ));
    }
    let counted = options.count_calls.then(|| CallSites::of(module));
    let profile = options
        .profile
        .as_ref()
        .map(|p| ProfileIndex::new(module, p));
    let constant_slots = ConstantSlots::of(module);
    let ctx = ModuleContext {
        module,
        sigs: &sigs,
        graph: &graph,
        blocks: blocks.as_ref(),
        counted_sites: counted.as_ref(),
        profile: profile.as_ref(),
        constant_slots: &constant_slots,
    };
    let layout = kernel_layout(module, options)?;
    let dispatchable = partition::dispatchable(module, &graph);
    let plan = partition::plan(&ctx, &dispatchable, options.partition_ops)?;
    let mut partition_of = vec![NO_PARTITION; module.funcs.len()];
    for (p, part) in plan.iter().enumerate() {
        for &f in &part.home {
            partition_of[f as usize] = p as u32;
        }
    }
    let many = plan.len() > 1;
    let mut partitions = Vec::with_capacity(plan.len());
    let mut total = 0usize;
    for (p, part) in plan.iter().enumerate() {
        let code =
            emit_partition(&ctx, options, &layout, &part.starts, many).map_err(|e| match e {
                CodegenError::Limit(why) if many => {
                    CodegenError::Limit(format!("kernel partition {p}: {why}"))
                }
                e => e,
            })?;
        total += code.len();
        if total > limits::MAX_TOTAL_SOURCE_BYTES {
            return Err(CodegenError::Limit(format!(
                "the {} kernel partitions need more than {} bytes of C together, the translator \
                 limit MAX_TOTAL_SOURCE_BYTES",
                plan.len(),
                limits::MAX_TOTAL_SOURCE_BYTES
            )));
        }
        partitions.push(code);
    }
    Ok(KernelSource {
        partitions,
        partition_of,
        layout,
    })
}

/// The function indices of `options.parking_imports` in `module`.
fn parking_imports(module: &Module<'_>, options: &KernelOptions) -> Vec<u32> {
    (0..module.imported_funcs as u32)
        .filter(|&f| {
            module.funcs[f as usize]
                .import
                .as_ref()
                .is_some_and(|name| options.parking_imports.contains(name))
        })
        .collect()
}

fn emit_partition(
    ctx: &ModuleContext<'_, '_>,
    options: &KernelOptions,
    layout: &KernelLayout,
    members: &[u32],
    many_partitions: bool,
) -> Result<String, CodegenError> {
    let module = ctx.module;
    let graph = ctx.graph;
    let n = module.funcs.len();
    let mut fastcalls = fastcall_closure(graph, members.iter().copied());
    fastcalls.extend(members.iter().filter(|&&f| !graph.yields[f as usize]));
    let mut bodies: BTreeSet<u32> = fastcalls.clone();
    bodies.extend(members.iter().filter(|&&f| graph.yields[f as usize]));
    let native = NativeCalls::plan(ctx, options, &bodies);
    let mut dispatchers = indirect_dispatchers(ctx, &fastcalls);
    dispatchers.extend(&native.fast_sigs);

    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* warpvisor kernel: {} of {} functions ({} continuation, {} fastcall), interleave {} */",
        bodies.len(),
        n,
        bodies.iter().filter(|&&f| graph.yields[f as usize]).count(),
        fastcalls.len(),
        options.interleave
    );
    out.push_str(options.dialect.header());
    let _ = writeln!(out, "#define WV_INTERLEAVE {}", options.interleave);
    let _ = writeln!(
        out,
        "#define WV_METER_FUEL {}",
        u8::from(options.meter_fuel)
    );
    let _ = writeln!(
        out,
        "#define WV_DIRECT_CALLS {}",
        u8::from(options.native_calls())
    );
    let _ = writeln!(
        out,
        "#define WV_SYNC_IMPORTS {}",
        u8::from(options.synchronous_imports())
    );
    let _ = writeln!(
        out,
        "#define WV_GUARD_REGIONS {}",
        u8::from(options.memory_checks == MemoryChecks::Guard)
    );
    let _ = writeln!(out, "#define WV_TRACE {}", u8::from(options.trace));
    let _ = writeln!(
        out,
        "#define WV_TRACE_WORDS {}u",
        crate::simt::KERNEL_TRACE_WORDS
    );
    let _ = writeln!(
        out,
        "#define WV_PROFILE {}",
        u8::from(ctx.counted_sites.is_some())
    );
    if let Some(sites) = ctx.counted_sites {
        let _ = writeln!(out, "#define WV_PROFILE_SITES {}u", sites.total().max(1));
        let _ = writeln!(out, "#define WV_PROFILE_WORDS {}u", WORDS_PER_SITE);
    }
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
    let func_sig: Vec<u32> = (0..n as u32).map(|f| ctx.sigs.of_func(module, f)).collect();
    const_array(&mut out, "wv_func_sig", &func_sig);
    let func_params: Vec<u32> = (0..n as u32)
        .map(|f| module.func_type(f).params().len() as u32)
        .collect();
    const_array(&mut out, "wv_func_params", &func_params);
    out.push_str(&abi::c::declarations());
    out.push_str(PRELUDE);

    // Result tuples of multi-value fastcalls (funcref and externref share a C type).
    let mut tuples = std::collections::BTreeMap::new();
    let dispatch_results = dispatchers
        .iter()
        .map(|&s| ctx.sigs.distinct[s as usize].results());
    for r in bodies
        .iter()
        .map(|&f| module.func_type(f).results())
        .chain(dispatch_results)
    {
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

    out.push_str("\n/* ---- functions ---- */\n");
    for &f in &bodies {
        if graph.yields[f as usize] {
            let _ = writeln!(out, "{};", continuation_signature(ctx, f));
        } else {
            let _ = writeln!(out, "{};", fastcall_signature(ctx, f));
        }
    }
    for &s in &dispatchers {
        let _ = writeln!(out, "{};", dispatch_signature(ctx, s));
    }
    for &s in &native.native_sigs {
        let _ = writeln!(out, "{};", native_dispatch_signature(ctx, s));
    }
    if !native.fast_sigs.is_empty() || !native.native_sigs.is_empty() {
        out.push_str(&native.kind_table(graph, &fastcalls));
    }
    let guard = options.memory_checks == MemoryChecks::Guard;
    for (i, &f) in bodies.iter().enumerate() {
        out.push('\n');
        if (f as usize) < module.imported_funcs {
            out.push_str(&direct_import(ctx, f));
        } else {
            out.push_str(&FunctionEmitter::new(ctx, f, guard, &native).emit()?);
        }
        check_kernel_size(&out, || {
            format!("{} of its {} functions", i + 1, bodies.len())
        })?;
    }
    if !dispatchers.is_empty() {
        out.push_str(
            "\n/* ---- call_indirect from fastcalls: one dispatch per signature ---- */\n",
        );
    }
    for &s in &dispatchers {
        out.push_str(&indirect_dispatch(ctx, s));
        check_kernel_size(&out, || "its functions and call_indirect dispatch".into())?;
    }
    for &s in &native.native_sigs {
        out.push_str(&native.dispatch(ctx, s));
        check_kernel_size(&out, || "its functions and call_indirect dispatch".into())?;
    }

    out.push_str("\n/* ---- entry shims: what the trampoline starts or resumes on a VM's top frame ---- */\n");
    for &f in members {
        if (f as usize) >= module.imported_funcs {
            out.push_str(&entry_shim(ctx, f));
            check_kernel_size(&out, || "its functions and entry shims".into())?;
        }
    }

    out.push_str("\n/* ---- trampoline: runs a VM until it finishes, traps, makes a hypercall, or needs another partition ---- */\n");
    out.push_str("WV_FUNC WV_TRAMPOLINE_ATTRS void wv_trampoline(wv_fleet *f, uint32_t vm) {\n");
    out.push_str("  WV_GLOBAL wv_vm *v = &f->vms[vm];\n  WV_TRAMPOLINE_ENTER();\n");
    out.push_str("  while (v->status == WV_RUNNING) {\n");
    out.push_str("    uint32_t fid = (uint32_t)WV_STK(v->fp + 1);\n");
    out.push_str("    switch (fid) {\n");
    for f in 0..module.imported_funcs {
        let _ = writeln!(
            out,
            "      case {f}: wv_hypercall(f, vm, {f}, {}); break; /* import {} */",
            module.func_type(f as u32).params().len(),
            sanitize_comment(&module.func_display_name(f as u32))
        );
    }
    for &f in members {
        if graph.yields[f as usize] {
            let _ = writeln!(out, "      case {f}: wv_k{f}(WV_START_ARGS); break;");
        } else {
            let _ = writeln!(out, "      case {f}: wv_e{f}(WV_START_ARGS); break;");
        }
    }
    if many_partitions {
        out.push_str("      default:\n");
        out.push_str(
            "        if (fid < WV_NUM_FUNCS) { v->func = fid; v->status = WV_ELSEWHERE; } /* another partition */\n",
        );
        out.push_str("        else wv_trap(f, vm, WV_TRAP_UNREACHABLE);\n");
        out.push_str("        break;\n");
    } else {
        out.push_str("      default: wv_trap(f, vm, WV_TRAP_UNREACHABLE); break;\n");
    }
    out.push_str("    }\n  }\n  WV_TRAMPOLINE_LEAVE();\n}\n");
    out.push_str(&abi::c::entry_points(options.dialect));
    check_kernel_size(&out, || "all of it".into())?;
    Ok(out)
}

/// Fails once the kernel `out` is over [`limits::MAX_KERNEL_SOURCE_BYTES`]; `done` says how
/// much of it has been written.
fn check_kernel_size(out: &str, done: impl Fn() -> String) -> Result<(), CodegenError> {
    if out.len() <= limits::MAX_KERNEL_SOURCE_BYTES {
        return Ok(());
    }
    Err(CodegenError::Limit(format!(
        "the kernel needs more than {} bytes of C ({} bytes with {}), over the translator \
         limit MAX_KERNEL_SOURCE_BYTES; split it with --partition-ops",
        limits::MAX_KERNEL_SOURCE_BYTES,
        out.len(),
        done()
    )))
}

/// The canonical signatures the fastcalls in `fastcalls` call through `call_indirect`: each
/// gets one dispatch function ([`indirect_dispatch`]) that every such call site shares.
fn indirect_dispatchers(ctx: &ModuleContext<'_, '_>, fastcalls: &BTreeSet<u32>) -> BTreeSet<u32> {
    fastcalls
        .iter()
        .flat_map(|&f| ctx.graph.indirect[f as usize].iter().copied())
        .collect()
}

/// `(i32, i64) -> (f32)`
fn signature_text(ty: &wasmparser::FuncType) -> String {
    let list = |ts: &[wasmparser::ValType]| {
        ts.iter()
            .map(|t| slot_suffix(*t))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("({}) -> ({})", list(ty.params()), list(ty.results()))
}

/// `WV_FUNC RET wv_ciS(WV_CTX_PARAMS, uint32_t callee, T0 l0, ...)`: `WV_CTX_PARAMS` is the
/// VM context with direct calls, the fleet and the VM index elsewhere.
fn dispatch_signature(ctx: &ModuleContext<'_, '_>, sig: u32) -> String {
    c_signature(
        &ctx.sigs.distinct[sig as usize],
        &format!("wv_ci{sig}(WV_CTX_PARAMS, uint32_t callee"),
    )
}

/// The dispatch of `call_indirect`s of signature `sig` to fastcalls: a `switch` over the
/// possible targets that are fastcalls (all of them for a fastcall's call sites: a yielding
/// target makes its callers yield; continuations call it only for a target whose
/// `wv_callee_kind` says fastcall), written once per signature rather than at every call site.
fn indirect_dispatch(ctx: &ModuleContext<'_, '_>, sig: u32) -> String {
    let ty = &ctx.sigs.distinct[sig as usize];
    let args: String = (0..ty.params().len()).map(|i| format!(", l{i}")).collect();
    let mut out = format!(
        "/* call_indirect {} */\n{} {{\n  WV_CTX_VIEW();\n  switch (callee) {{\n",
        signature_text(ty),
        dispatch_signature(ctx, sig)
    );
    let ret = if ty.results().is_empty() {
        ""
    } else {
        "return "
    };
    for &t in ctx.graph.indirect_targets(sig) {
        if ctx.graph.yields[t as usize] {
            continue;
        }
        let _ = write!(out, "    case {t}u: {ret}wv_f{t}(WV_CTX_ARGS{args});");
        out.push_str(if ret.is_empty() { " return;\n" } else { "\n" });
    }
    out.push_str("  }\n  wv_trap(f, vm, WV_TRAP_BAD_SIGNATURE);\n");
    out.push_str(&dead_return(ty.results()));
    out.push_str("}\n");
    out
}

/// Import `import` as a plain C function, for direct calls: it hands the arguments to the
/// host in a word array, waits while the host runs the import, and returns its results (the
/// caller's `WV_AFTER_CALL` stops the VM if the host stopped it).
fn direct_import(ctx: &ModuleContext<'_, '_>, import: u32) -> String {
    let ty = ctx.module.func_type(import);
    let mut out = format!(
        "/* import {import} \"{}\" {}: the host serves it while this VM waits */\n{} {{\n",
        sanitize_comment(&ctx.module.func_display_name(import)),
        signature_text(ty),
        fastcall_signature(ctx, import)
    );
    out.push_str("  WV_CTX_VIEW();\n  uint64_t w_[WV_RET_WORDS] = {0};\n");
    for (i, t) in ty.params().iter().enumerate() {
        let _ = writeln!(out, "  w_[{i}] = wv_enc_{}(l{i});", slot_suffix(*t));
    }
    let _ = writeln!(out, "  wv_call_host(f, vm, {import}u, w_);");
    match ty.results() {
        [] => {}
        [t] => {
            let _ = writeln!(out, "  return wv_dec_{}(w_[0]);", slot_suffix(*t));
        }
        results => {
            let _ = write!(out, "  {{ {} r_;", tuple_name(results));
            for (k, t) in results.iter().enumerate() {
                let _ = write!(out, " r_.v{k} = wv_dec_{}(w_[{k}]);", slot_suffix(*t));
            }
            out.push_str(" return r_; }\n");
        }
    }
    out.push_str("}\n");
    out
}

/// The entry of function `func` from the trampoline, on the VM's top frame: `wv_eN` calls
/// fastcall `wv_fN` with the frame's arguments; `wv_kN` calls continuation body `wv_bN`
/// with them, or resumes it at the point its frame records. Either pops the frame and
/// leaves the results in the result words when the function returns.
fn entry_shim(ctx: &ModuleContext<'_, '_>, func: u32) -> String {
    let ty = ctx.module.func_type(func);
    let continuation = ctx.graph.yields[func as usize];
    let (entry, body) = if continuation { ('k', 'b') } else { ('e', 'f') };
    let mut out = format!(
        "WV_FUNC void wv_{entry}{func}(WV_START_PARAMS) {{\n  WV_START();\n  WV_FRAME_ENTER();\n  WV_UNWIND_POINT();\n"
    );
    let mut args: Vec<String> = ty
        .params()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let arg = format!("wv_dec_{}(WV_STK(fp + {}))", slot_suffix(*t), 3 + i);
            match continuation {
                // A resumed body restores its live locals itself.
                true => format!("resume ? {} : {arg}", zero_value(*t)),
                false => arg,
            }
        })
        .collect();
    if continuation {
        out.push_str("  const uint32_t resume = (uint32_t)WV_STK(fp + 2);\n");
        let frame = ["fp", "v->depth", "resume"].map(String::from);
        args.splice(0..0, frame);
    }
    let sep = if args.is_empty() { "" } else { ", " };
    let call = format!(
        "WV_OPAQUE(wv_{body}{func})(WV_CTX_ARGS{sep}{})",
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
    out.push_str("  WV_START_LEAVE();\n  if (WV_YIELDED()) return;\n");
    match ty.results() {
        [] => {}
        [t] => {
            let _ = writeln!(out, "  WV_RET(0) = wv_enc_{}(r_);", slot_suffix(*t));
        }
        results => {
            for (k, t) in results.iter().enumerate() {
                let _ = writeln!(out, "  WV_RET({k}) = wv_enc_{}(r_.v{k});", slot_suffix(*t));
            }
        }
    }
    out.push_str("  wv_pop_frame(f, vm, fp);\n}\n");
    out
}
