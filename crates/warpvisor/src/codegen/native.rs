//! Which calls of a continuation kernel skip the trampoline.
//!
//! A continuation calls a callee as a C function when the device can finish the call without
//! leaving the kernel: a fastcall always, and a continuation of the same kernel that lies on no
//! call cycle (the chain of such calls is then no deeper than the call graph, so devices without
//! recursion compile it). Only when such a callee yields does the caller save its live values
//! and return to the trampoline (`function/continuation.rs`, `yield_call`). A `call_indirect`
//! decides at run time from the target's kind in the kernel's `wv_callee_kind` table: a fastcall
//! goes through the signature's `wv_ciS`, a native continuation through `wv_cnS`, anything else
//! (recursive continuations, imports, functions of other partitions) through the trampoline.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::function::c_signature;
use super::{dead_return, KernelOptions, ModuleContext};
use crate::analysis::CallGraph;

/// `wv_callee_kind` of a function the trampoline must run.
const KIND_TRAMPOLINE: u8 = 0;
/// `wv_callee_kind` of a fastcall of this kernel.
pub(super) const KIND_FASTCALL: u8 = 1;
/// `wv_callee_kind` of a continuation of this kernel on no call cycle.
pub(super) const KIND_NATIVE: u8 = 2;

/// How the continuations of one kernel (or partition) reach callees without the trampoline.
#[derive(Debug, Default)]
pub(crate) struct NativeCalls {
    /// Per function: a continuation of this kernel on no call cycle, called as a C function.
    pub callees: Vec<bool>,
    /// Signatures that continuations of this kernel `call_indirect` and that have fastcall
    /// targets: their sites call `wv_ciS` for such a target.
    pub fast_sigs: BTreeSet<u32>,
    /// Signatures that continuations of this kernel `call_indirect` and that have targets among
    /// [`Self::callees`]: their sites call `wv_cnS` for such a target.
    pub native_sigs: BTreeSet<u32>,
}

impl NativeCalls {
    /// The plan for the kernel holding `bodies` (none with direct calls: nothing yields there
    /// but what parks, and that must leave the kernel).
    pub(super) fn plan(
        ctx: &ModuleContext<'_, '_>,
        options: &KernelOptions,
        bodies: &BTreeSet<u32>,
    ) -> Self {
        let graph = ctx.graph;
        let imported = ctx.module.imported_funcs;
        let mut plan = NativeCalls {
            callees: vec![false; ctx.module.funcs.len()],
            ..Default::default()
        };
        if options.native_calls() {
            return plan;
        }
        for &f in bodies {
            let f = f as usize;
            plan.callees[f] = f >= imported && graph.yields[f] && !graph.recursive[f];
        }
        for &f in bodies.iter().filter(|&&f| graph.yields[f as usize]) {
            for &sig in &graph.indirect[f as usize] {
                let targets = graph.indirect_targets(sig);
                if targets.iter().any(|&t| !graph.yields[t as usize]) {
                    plan.fast_sigs.insert(sig);
                }
                if targets.iter().any(|&t| plan.callees[t as usize]) {
                    plan.native_sigs.insert(sig);
                }
            }
        }
        plan
    }

    /// `wv_callee_kind`: for each function, how a continuation's `call_indirect` reaches it
    /// (`fastcalls`: the kernel's fastcalls).
    pub(super) fn kind_table(&self, graph: &CallGraph, fastcalls: &BTreeSet<u32>) -> String {
        let kinds: Vec<String> = (0..self.callees.len())
            .map(|f| {
                let kind = if self.callees[f] {
                    KIND_NATIVE
                } else if !graph.yields[f] && fastcalls.contains(&(f as u32)) {
                    KIND_FASTCALL
                } else {
                    KIND_TRAMPOLINE
                };
                kind.to_string()
            })
            .collect();
        let kinds = if kinds.is_empty() {
            "0".to_string()
        } else {
            kinds.join(", ")
        };
        format!(
            "/* How a continuation's call_indirect reaches each function: 0 through the trampoline, \
             {KIND_FASTCALL} a fastcall (wv_ciS), {KIND_NATIVE} a continuation called as a C function (wv_cnS). */\n\
             WV_CONST uint8_t wv_callee_kind[] = {{{kinds}}};\n"
        )
    }

    /// `wv_cnS`: calls the continuation `callee` of signature `sig` as a C function on frame
    /// `fp` at `depth` — a `switch` over this kernel's native targets of `sig`.
    pub(super) fn dispatch(&self, ctx: &ModuleContext<'_, '_>, sig: u32) -> String {
        let ty = &ctx.sigs.distinct[sig as usize];
        let args: String = (0..ty.params().len()).map(|i| format!(", l{i}")).collect();
        let ret = if ty.results().is_empty() {
            ""
        } else {
            "return "
        };
        let mut out = format!(
            "/* call_indirect of signature {sig} to a continuation of this kernel */\n{} {{\n  switch (callee) {{\n",
            native_dispatch_signature(ctx, sig)
        );
        for &t in ctx.graph.indirect_targets(sig) {
            if self.callees[t as usize] {
                let _ = write!(
                    out,
                    "    case {t}u: {ret}wv_b{t}(WV_CTX_ARGS, fp, depth, 0{args});"
                );
                out.push_str(if ret.is_empty() { " return;\n" } else { "\n" });
            }
        }
        out.push_str("  }\n");
        out.push_str(&dead_return(ty.results()));
        out.push_str("}\n");
        out
    }
}

/// `WV_FUNC RET wv_cnS(WV_CTX_PARAMS, uint32_t fp, uint32_t depth, uint32_t callee, T0 l0, ...)`.
pub(super) fn native_dispatch_signature(ctx: &ModuleContext<'_, '_>, sig: u32) -> String {
    c_signature(
        &ctx.sigs.distinct[sig as usize],
        &format!("wv_cn{sig}(WV_CTX_PARAMS, uint32_t fp, uint32_t depth, uint32_t callee"),
    )
}
