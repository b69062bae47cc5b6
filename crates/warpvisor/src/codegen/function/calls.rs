//! Calls: `call` and `call_indirect` as plain C calls of fastcalls, as continuation calls
//! (`continuation.rs`), through the signature's dispatch function, or — for a constant slot or
//! a profiled hot target (`codegen/devirt.rs`) — directly; and the counters of a counting
//! kernel (`warpvisor profile`).

use std::fmt::Write;

use wasmparser::ValType;

use super::continuation::NativeCall;
use super::{
    assign_results, c_call, sanitize_comment, FunctionEmitter, KIND_FASTCALL, KIND_NATIVE,
};
use crate::codegen::{devirt, CodegenError};

impl FunctionEmitter<'_, '_> {
    pub(super) fn call_args(&mut self, params: &[ValType]) -> Vec<String> {
        let mut args = Vec::new();
        for _ in params {
            // Types are known from the signature; positions from the stack.
            if let Ok(a) = self.pop() {
                args.push(a);
            }
        }
        args.reverse();
        args
    }

    /// A plain C call: `head` is the callee and its leading arguments (`wv_f3(WV_CTX_ARGS`),
    /// `args` the rest; pushes the results.
    pub(super) fn plain_call(
        &mut self,
        head: String,
        args: &[String],
        results: &[ValType],
    ) -> String {
        let slots: Vec<String> = results.iter().map(|ty| self.push(*ty)).collect();
        assign_results(&c_call(head, args), &slots, results)
    }

    /// The module-wide number of the call site being translated, in a counting kernel.
    fn counted_site(&self) -> Option<u32> {
        let sites = self.ctx.counted_sites?;
        let site = sites.site_at(self.func, self.op_index)?;
        Some(sites.id(self.func, site))
    }

    pub(super) fn call(&mut self, callee: u32) -> Result<(), CodegenError> {
        let ty = self.ctx.module.func_type(callee).clone();
        let name = self.ctx.module.func_display_name(callee);
        let comment = format!("/* call {} */", sanitize_comment(&name));
        if let Some(id) = self.counted_site() {
            self.line(&format!("WV_PROFILE_CALL({id}u);"));
        }
        if !self.ctx.graph.yields[callee as usize] {
            let args = self.call_args(ty.params());
            let code = self.plain_call(format!("wv_f{callee}(WV_CTX_ARGS"), &args, ty.results());
            self.line(&format!("{code} WV_AFTER_CALL(); {comment}"));
            return Ok(());
        }
        if !self.cps {
            return Err(self.internal("fastcall calls a yielding function"));
        }
        let args = self.call_args(ty.params());
        let native = self.native.callees[callee as usize].then(|| NativeCall {
            head: format!("wv_b{callee}(WV_CTX_ARGS, nfp, depth + 1, 0"),
            guard: None,
        });
        self.yield_call(
            &callee.to_string(),
            native,
            &args,
            ty.params(),
            ty.results(),
            &comment,
        )
    }

    /// The function a `call_indirect` of canonical signature `sig` on `table` always calls
    /// (`devirt.rs`: a constant slot of a table that never changes, holding a function of that
    /// signature), and the slot.
    fn constant_target(&self, table: u32, sig: u32) -> Option<(u32, u32)> {
        let ops = &self.ctx.module.body(self.func)?.ops;
        let slot = devirt::constant_index(ops, self.op_index)?;
        let target = self.ctx.constant_slots.target(table, slot)?;
        (self.ctx.sigs.of_func(self.ctx.module, target) == sig).then_some((target, slot))
    }

    /// Guarded direct calls of a profiled site's hot targets (`devirt.rs`), each a C `if`
    /// whose body is `then` after the call: `if (callee == F) { ... }`.
    fn hot_calls(&mut self, sig: u32, args: &[String], results: &[ValType], then: &str) -> String {
        let Some(site) = self
            .ctx
            .profile
            .and_then(|p| p.at(self.func, self.op_index))
        else {
            return String::new();
        };
        let base = self.stack.len();
        let mut code = String::new();
        for t in devirt::hot_targets(self.ctx, site, sig) {
            let call = self.plain_call(format!("wv_f{t}(WV_CTX_ARGS"), args, results);
            self.stack.truncate(base); // the generic call pushes the same result slots
            let name = sanitize_comment(&self.ctx.module.func_display_name(t));
            let _ = write!(
                code,
                "if (callee == {t}u) {{ {call} {then} }} /* profiled target {name} */ else "
            );
        }
        code
    }

    pub(super) fn call_indirect(
        &mut self,
        type_index: u32,
        table: u32,
    ) -> Result<(), CodegenError> {
        let ty = self.ctx.module.types[type_index as usize].clone();
        let sig = self.ctx.sigs.of_type[type_index as usize];
        if let Some((target, slot)) = self.constant_target(table, sig) {
            self.pop()?;
            self.line(&format!(
                "/* call_indirect (type {type_index}): slot {slot} of table {table} never changes */"
            ));
            return self.call(target);
        }
        let index = self.pop()?;
        self.uses_callee = true;
        self.line(&format!(
            "WV_CHECK(wv_table_func(f, vm, {table}, {index}, {sig}, &callee)); /* call_indirect (type {type_index}) */"
        ));
        if let Some(id) = self.counted_site() {
            self.line(&format!("wv_profile_indirect({id}u, callee);"));
        }
        if self.cps {
            // A fastcall target is called as the fastcalls' own call sites call it, a native
            // continuation as `yield_call` calls one; the rest go through the trampoline.
            let args = self.call_args(ty.params());
            let base = self.stack.len();
            let joined = self.resume_points + 1;
            let jump = format!("WV_AFTER_CALL(); goto wv_called_{joined};");
            let hot = self.hot_calls(sig, &args, ty.results(), &jump);
            if !hot.is_empty() {
                self.line(&format!("{hot}{{ }}"));
            }
            let fast = self.native.fast_sigs.contains(&sig);
            if fast {
                let code = self.plain_call(
                    format!("wv_ci{sig}(WV_CTX_ARGS, callee"),
                    &args,
                    ty.results(),
                );
                self.stack.truncate(base); // yield_call pushes the same result slots again
                self.line(&format!(
                    "if (wv_callee_kind[callee] == {KIND_FASTCALL}) {{ {code} WV_AFTER_CALL(); goto wv_called_{joined}; }} /* a fastcall */"
                ));
            }
            let native = self.native.native_sigs.contains(&sig).then(|| NativeCall {
                head: format!("wv_cn{sig}(WV_CTX_ARGS, nfp, depth + 1, callee"),
                guard: Some(format!("wv_callee_kind[callee] == {KIND_NATIVE}")),
            });
            self.yield_call(
                "callee",
                native,
                &args,
                ty.params(),
                ty.results(),
                "/* call_indirect */",
            )?;
            if fast || !hot.is_empty() {
                self.body.push_str(&format!("wv_called_{joined}:;\n"));
            }
            return Ok(());
        }
        // The signature's dispatch function (`kernel::indirect_dispatch`) calls the target.
        let args = self.call_args(ty.params());
        let hot = self.hot_calls(sig, &args, ty.results(), "");
        let code = self.plain_call(
            format!("wv_ci{sig}(WV_CTX_ARGS, callee"),
            &args,
            ty.results(),
        );
        let code = match hot.is_empty() {
            true => code,
            false => format!("{hot}{{ {code} }}"),
        };
        self.line(&format!("{code} WV_AFTER_CALL(); /* call_indirect */"));
        Ok(())
    }
}
