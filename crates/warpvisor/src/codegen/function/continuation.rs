//! Continuations: yield points, frames, the resume dispatch, and the assembled function.
//!
//! Resume points are numbered in the order they appear, so the points inside one loop are
//! consecutive. Resuming enters every loop through its header, so the control-flow graph
//! stays reducible for the device compilers: the function's `switch` sends a point to its
//! outermost loop, each loop header on to the next loop inward or to the point itself. A
//! header names its own points and its inner loops — an inner loop with many points as one
//! range test — so the dispatch grows with the number of loops and points, not with their
//! product.

use std::collections::HashMap;
use std::fmt::Write;

use wasmparser::ValType;

use super::{
    assign_results, c_call, sanitize_comment, slot_suffix, suffix_c_type, FunctionEmitter,
};
use crate::codegen::{c_type, dead_return, zero_value};

/// How [`FunctionEmitter::yield_call`] first calls its callee as a C function.
pub(crate) struct NativeCall {
    /// The callee and the arguments before the WebAssembly ones, on the callee's frame `nfp`:
    /// `wv_b3(WV_CTX_ARGS, nfp, depth + 1, 0` for a continuation (resume point 0: a call),
    /// `wv_cn5(WV_CTX_ARGS, nfp, depth + 1, callee` for a `call_indirect`.
    pub head: String,
    /// A C condition under which the call is made (else the trampoline runs the callee).
    pub guard: Option<String>,
}

/// An inner loop with at most this many resume points gets one `case` per point at the header
/// around it; one with more, a single range test.
const CASES_PER_LOOP: u32 = 4;

/// What the resume dispatch of one loop (or of the function body) sends where.
#[derive(Debug)]
enum ResumeEntry {
    /// A resume point directly inside.
    Point(u32),
    /// An inner loop and the range of resume points inside it.
    Loop { label: u32, first: u32, last: u32 },
}

/// The resume points of one open loop (label 0: the function body), in order.
#[derive(Debug)]
pub(super) struct LoopResumes {
    label: u32,
    entries: Vec<ResumeEntry>,
}

impl LoopResumes {
    pub(super) fn new(label: u32) -> Self {
        LoopResumes {
            label,
            entries: Vec::new(),
        }
    }

    fn range(&self) -> Option<(u32, u32)> {
        let first = match self.entries.first()? {
            ResumeEntry::Point(k) => *k,
            ResumeEntry::Loop { first, .. } => *first,
        };
        let last = match self.entries.last()? {
            ResumeEntry::Point(k) => *k,
            ResumeEntry::Loop { last, .. } => *last,
        };
        Some((first, last))
    }

    /// `case` labels with their jumps, and range tests for the default branch.
    fn dispatch(&self) -> (Vec<String>, String) {
        let mut cases = Vec::new();
        let mut ranges = String::new();
        for e in &self.entries {
            match *e {
                ResumeEntry::Point(k) => cases.push(format!("case {k}: goto wv_resume_{k};")),
                ResumeEntry::Loop { label, first, last } if last - first < CASES_PER_LOOP => {
                    cases.extend((first..=last).map(|k| format!("case {k}: goto L{label}_top;")))
                }
                ResumeEntry::Loop { label, first, last } => {
                    let _ = write!(
                        ranges,
                        " if (resume - {first}u <= {}u) goto L{label}_top;",
                        last - first
                    );
                }
            }
        }
        (cases, ranges)
    }
}

impl FunctionEmitter<'_, '_> {
    /// At the `end` of a loop: its header's dispatch, and its points for the loop around it.
    pub(super) fn close_loop(&mut self) {
        if self.loops.len() < 2 {
            return; // the function body's entry stays
        }
        let Some(lp) = self.loops.pop() else { return };
        let Some((first, last)) = lp.range() else {
            return;
        };
        let (cases, ranges) = lp.dispatch();
        let mut code = String::from("  if (resume) switch (resume) {");
        for c in &cases {
            code.push(' ');
            code.push_str(c);
        }
        if !ranges.is_empty() {
            let _ = write!(code, " default:{ranges} break;");
        }
        code.push_str(" }\n");
        self.dispatch.insert(lp.label, code);
        if let Some(outer) = self.loops.last_mut() {
            outer.entries.push(ResumeEntry::Loop {
                label: lp.label,
                first,
                last,
            });
        }
    }

    /// A call that may go through the trampoline, with its arguments `args` already popped:
    /// save live state, push the callee's frame, return; resume here when the callee returns.
    /// With `native`, the callee (a continuation of this kernel) is first called as a C
    /// function (when its guard holds), its arguments and results in C: when it returns, the
    /// caller goes on with its locals intact — no frame written, nothing saved, no trip through
    /// the trampoline; only when it yields (a hypercall, a function of another partition, a
    /// trap) does the caller write the callee's frame header, save its own live state and
    /// return too, to be resumed here by the trampoline like any other yield point.
    pub(super) fn yield_call(
        &mut self,
        fid: &str,
        native: Option<NativeCall>,
        args: &[String],
        params: &[ValType],
        results: &[ValType],
        comment: &str,
    ) -> Result<(), crate::codegen::CodegenError> {
        let base = self.stack.len();
        self.resume_points += 1;
        let k = self.resume_points;
        if let Some(lp) = self.loops.last_mut() {
            lp.entries.push(ResumeEntry::Point(k));
        }
        let mut save = String::new();
        let mut restore = String::new();
        let mut word = 0usize;
        for pos in 0..base {
            let ty = self.stack[pos];
            let s = self.slot(pos, ty);
            let sfx = slot_suffix(ty);
            let _ = write!(save, "WV_STK(fp + {}) = wv_enc_{sfx}({s}); ", 3 + word);
            let _ = write!(restore, "{s} = wv_dec_{sfx}(WV_STK(fp + {})); ", 3 + word);
            word += 1;
        }
        let live: Vec<u32> = match &self.liveness {
            Some(lv) => lv.live_locals_after(self.op_index).collect(),
            None => (0..self.locals.len() as u32).collect(),
        };
        for l in live {
            let Some(&ty) = self.locals.get(l as usize) else {
                continue;
            };
            let sfx = slot_suffix(ty);
            let _ = write!(save, "WV_STK(fp + {}) = wv_enc_{sfx}(l{l}); ", 3 + word);
            let _ = write!(restore, "l{l} = wv_dec_{sfx}(WV_STK(fp + {})); ", 3 + word);
            word += 1;
        }
        self.saved_words = self.saved_words.max(word);
        let mut pass = String::new();
        for (i, (a, ty)) in args.iter().zip(params).enumerate() {
            let _ = write!(
                pass,
                "WV_STK(nfp + {}) = wv_enc_{}({a}); ",
                3 + i,
                slot_suffix(*ty)
            );
        }
        let save = if save.is_empty() {
            String::new()
        } else {
            format!("{save}WV_SAVED({word}); ")
        };
        let push = format!(
            "WV_STK(fp + 2) = {k}; WV_PUSH_FRAME(nfp, @FRAME@, {fid}, {});",
            args.len()
        );
        let mut slots = Vec::new();
        let mut fetch = String::new();
        for (i, ty) in results.iter().enumerate() {
            let d = self.push(*ty);
            let _ = write!(fetch, "{d} = wv_dec_{}(WV_RET({i})); ", slot_suffix(*ty));
            slots.push(d);
        }
        fetch.push_str("msz = WV_MEM_BYTES();");
        let is_native = native.is_some();
        if let Some(NativeCall { head, guard }) = native {
            let call = assign_results(&c_call(head, args), &slots, results);
            let yielded = format!(
                "if (WV_YIELDED()) {{ WV_YIELDED_FRAME(nfp, {fid}); WV_STK(fp + 2) = {k}; {save}goto wv_unwind; }}"
            );
            let native_call = format!(
                "WV_NATIVE_DEPTH(); nfp = fp + @FRAME@; {call} {yielded} msz = WV_MEM_BYTES(); goto wv_returned_{k};"
            );
            match guard {
                None => {
                    self.line(&format!("{comment} /* yield point {k}, called natively */"));
                    self.line(&native_call);
                }
                Some(guard) => {
                    self.line(&format!(
                        "{comment} /* yield point {k}, called natively when {guard} */"
                    ));
                    self.line(&format!("if ({guard}) {{ {native_call} }}"));
                    if !save.is_empty() {
                        self.line(save.trim_end());
                    }
                    self.line(&push);
                    self.line(&format!("{pass}WV_ENTER(nfp); goto wv_unwind;"));
                }
            }
        } else {
            self.line(&format!("{comment} /* yield point {k} */"));
            if !save.is_empty() {
                self.line(save.trim_end());
            }
            self.line(&push);
            self.line(&format!("{pass}WV_ENTER(nfp); goto wv_unwind;"));
        }
        self.body
            .push_str(&format!("wv_resume_{k}:; resume = 0;\n"));
        if !restore.is_empty() {
            self.line(restore.trim_end());
        }
        self.line(&fetch);
        if is_native {
            self.body.push_str(&format!("wv_returned_{k}:;\n"));
        }
        Ok(())
    }

    /// Assembles declarations, the resume switch and the body.
    pub(super) fn finish(self) -> String {
        let m = self.ctx.module;
        let ty = m.func_type(self.func);
        let params = ty.params();
        let name = sanitize_comment(&m.func_display_name(self.func));
        let mut out = String::new();
        let sig = format!(
            "({}) -> ({})",
            params
                .iter()
                .map(|t| slot_suffix(*t))
                .collect::<Vec<_>>()
                .join(", "),
            self.results
                .iter()
                .map(|t| slot_suffix(*t))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let frame_words = 3 + self.saved_words.max(params.len());
        if self.cps {
            let _ = writeln!(
                out,
                "/* func {} \"{name}\" {sig}: continuation, frame of {frame_words} words */",
                self.func
            );
            let _ = writeln!(
                out,
                "{} {{",
                super::continuation_signature(self.ctx, self.func)
            );
        } else {
            let _ = writeln!(out, "/* func {} \"{name}\" {sig}: fastcall */", self.func);
            let _ = writeln!(out, "{} {{", super::fastcall_signature(self.ctx, self.func));
        }
        out.push_str("  WV_CTX_VIEW();\n");
        out.push_str("  WV_GLOBAL wv_vm *v = &f->vms[vm];\n");
        out.push_str("  uint64_t msz = WV_MEM_BYTES();\n");
        out.push_str("  WV_MEM_VIEW();\n");
        if self.ctx.blocks.is_some() {
            out.push_str("  WV_TRACE_LOCALS();\n");
        }
        if self.cps {
            out.push_str("  uint32_t nfp = 0;\n");
        }
        if self.uses_callee {
            out.push_str("  uint32_t callee = 0;\n");
        }
        for (i, t) in self.locals.iter().enumerate().skip(params.len()) {
            let _ = writeln!(out, "  {} l{i} = {};", c_type(*t), zero_value(*t));
        }
        for (pos, sfx) in &self.slots {
            let _ = writeln!(out, "  {} s{pos}_{sfx};", suffix_c_type(sfx));
        }
        if self.cps {
            out.push_str("  switch (resume) {\n    case 0: break;\n");
            let (cases, ranges) = match self.loops.first() {
                Some(body) => body.dispatch(),
                None => (Vec::new(), String::new()),
            };
            for c in cases {
                let _ = writeln!(out, "    {c}");
            }
            let _ = writeln!(
                out,
                "    default:{ranges} WV_TRAP(WV_TRAP_UNREACHABLE);\n  }}"
            );
            let _ = writeln!(
                out,
                "  if ((uint64_t)fp + {frame_words} > f->stack_words) WV_TRAP(WV_TRAP_STACK_OVERFLOW);"
            );
        }
        out.push_str("  WV_FUEL();\n");
        if !self.cps && self.ctx.graph.recursive[self.func as usize] {
            // Direct calls: a recursive fastcall is the only way down the native stack.
            out.push_str("  WV_STACK_CHECK();\n");
        }
        fill_in(
            &mut out,
            &self.body,
            &frame_words.to_string(),
            &self.dispatch,
        );
        out.push_str("wv_unwind:\n");
        out.push_str(&dead_return(&self.results));
        out.push_str("}\n");
        out
    }
}

/// Appends `body` to `out` with its markers filled in, in one pass: `@FRAME@` becomes `frame`,
/// `@RESUME<label>@` the dispatch of that loop (nothing when it has no resume points).
fn fill_in(out: &mut String, body: &str, frame: &str, dispatch: &HashMap<u32, String>) {
    out.reserve(body.len());
    let mut rest = body;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix("FRAME@") {
            out.push_str(frame);
            rest = after;
        } else if let Some((label, after)) = tail
            .strip_prefix("RESUME")
            .and_then(|t| t.split_once('@'))
            .and_then(|(n, after)| Some((n.parse::<u32>().ok()?, after)))
        {
            if let Some(code) = dispatch.get(&label) {
                out.push_str(code);
            }
            rest = after;
        } else {
            out.push('@');
            rest = tail;
        }
    }
    out.push_str(rest);
}
