//! Translation of one function body into C.
//!
//! The operand stack becomes C variables named by depth and type (`s3_i32`), locals become
//! `l0`, `l1`, ...; structured control flow becomes labels and `goto`s. A *fastcall* is a plain
//! C function. A function that can yield is written in continuation-passing style: its frame
//! lives on the VM's call stack, every call to a yielding function saves the live values,
//! pushes the callee's frame and returns to the trampoline, and a `switch` on the frame's
//! resume point jumps back after the call ([`continuation`]).
//!
//! Translation is linear in the size of the body: nothing per operator looks at the whole
//! control stack or the text written so far, indentation stops growing past [`MAX_INDENT`]
//! levels, and the text of one function is capped at
//! [`limits::MAX_FUNCTION_SOURCE_BYTES`].

mod calls;
mod continuation;
mod marks;
mod trace;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

use wasmparser::{BlockType, Operator, ValType};

use super::native::{NativeCalls, KIND_FASTCALL, KIND_NATIVE};
use super::numeric;
use super::{c_type, slot_suffix, tuple_name, CodegenError, ModuleContext};
use crate::analysis::Liveness;
use crate::limits;
use continuation::LoopResumes;
use marks::{store_offset, StoreMarks};

/// Deepest nesting that still indents: deeper code lines up at this depth, so that the text
/// of deeply nested code stays linear in its size.
const MAX_INDENT: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CtrlKind {
    Function,
    Block,
    Loop,
    If,
}

#[derive(Debug, Clone)]
struct Ctrl {
    kind: CtrlKind,
    label: u32,
    /// Operand stack height below the construct's parameters.
    height: usize,
    params: Vec<ValType>,
    results: Vec<ValType>,
    /// The rest of the construct cannot be reached.
    unreachable: bool,
    had_else: bool,
    /// The whole construct lies in unreachable code: nothing of it is emitted.
    dead: bool,
}

/// Emits the C function(s) for function `func`.
pub(super) struct FunctionEmitter<'m, 'a> {
    ctx: &'m ModuleContext<'m, 'a>,
    func: u32,
    cps: bool,
    /// The callees this function's calls reach as C functions first ([`Self::yield_call`]):
    /// the continuations of its kernel on no call cycle, and which `call_indirect`s may reach
    /// fastcalls and such continuations (`native.rs`).
    native: &'m NativeCalls,
    results: Vec<ValType>,
    locals: Vec<ValType>,
    stack: Vec<ValType>,
    ctrl: Vec<Ctrl>,
    body: String,
    slots: BTreeSet<(usize, &'static str)>,
    next_label: u32,
    resume_points: u32,
    saved_words: usize,
    liveness: Option<Liveness>,
    op_index: usize,
    uses_callee: bool,
    /// Resume points of the open loops, innermost last; the first is the function body's.
    loops: Vec<LoopResumes>,
    /// The resume dispatch of each closed loop that has resume points, by loop label.
    dispatch: HashMap<u32, String>,
    /// Dirty-page marks the stores of the current basic block share.
    marks: StoreMarks,
    /// A traced kernel's next record slot in the current block (`trace`).
    trace_slot: usize,
}

impl<'m, 'a> FunctionEmitter<'m, 'a> {
    /// The emitter of function `func`; `guard`: the kernel has guard regions (stores may
    /// share their dirty-page marks, see [`marks`]).
    pub(super) fn new(
        ctx: &'m ModuleContext<'m, 'a>,
        func: u32,
        guard: bool,
        native: &'m NativeCalls,
    ) -> Self {
        let ty = ctx.module.func_type(func);
        let mut locals: Vec<ValType> = ty.params().to_vec();
        if let Some(body) = ctx.module.body(func) {
            locals.extend(&body.locals);
        }
        let locals_len = locals.len();
        FunctionEmitter {
            ctx,
            func,
            cps: ctx.graph.yields[func as usize],
            native,
            results: ty.results().to_vec(),
            locals,
            stack: Vec::new(),
            ctrl: Vec::new(),
            body: String::new(),
            slots: BTreeSet::new(),
            next_label: 0,
            resume_points: 0,
            saved_words: ty.params().len(),
            liveness: None,
            op_index: 0,
            uses_callee: false,
            loops: vec![LoopResumes::new(0)],
            dispatch: HashMap::new(),
            marks: StoreMarks::new(locals_len, guard),
            trace_slot: 1,
        }
    }

    /// Translates the body and returns the complete C definition.
    pub(super) fn emit(mut self) -> Result<String, CodegenError> {
        let body = self
            .ctx
            .module
            .body(self.func)
            .ok_or_else(|| CodegenError::Internal {
                function: self.ctx.module.func_display_name(self.func),
                message: "no body".into(),
            })?;
        if self.cps {
            // Over the limit, every local counts as live: bigger frames, same behaviour.
            self.liveness = Liveness::within_limit(&body.ops, self.locals.len());
        }
        self.ctrl.push(Ctrl {
            kind: CtrlKind::Function,
            label: 0,
            height: 0,
            params: vec![],
            results: self.results.clone(),
            unreachable: false,
            had_else: false,
            dead: false,
        });
        self.next_label = 1;
        self.marks
            .plan(&body.ops, |op| numeric::template(op).is_some());
        for (i, op) in body.ops.iter().enumerate() {
            self.op_index = i;
            self.operator(op)?;
            self.check_size(0)?;
        }
        Ok(self.finish())
    }

    /// Fails once the function's C, with `extra` bytes more, would pass
    /// [`limits::MAX_FUNCTION_SOURCE_BYTES`].
    fn check_size(&self, extra: usize) -> Result<(), CodegenError> {
        if self.body.len() + extra <= limits::MAX_FUNCTION_SOURCE_BYTES {
            return Ok(());
        }
        Err(CodegenError::Limit(format!(
            "function {} ({}) needs more than {} bytes of C ({} bytes by its operator {}), \
             over the translator limit MAX_FUNCTION_SOURCE_BYTES",
            sanitize_comment(&self.ctx.module.func_display_name(self.func)),
            self.func,
            limits::MAX_FUNCTION_SOURCE_BYTES,
            self.body.len() + extra,
            self.op_index
        )))
    }

    fn internal(&self, message: impl Into<String>) -> CodegenError {
        CodegenError::Internal {
            function: self.ctx.module.func_display_name(self.func),
            message: message.into(),
        }
    }

    fn line(&mut self, text: &str) {
        let depth = self.ctrl.len().min(MAX_INDENT);
        for _ in 0..depth {
            self.body.push_str("  ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }

    fn slot(&mut self, pos: usize, ty: ValType) -> String {
        let suffix = slot_suffix(ty);
        self.slots.insert((pos, suffix));
        format!("s{pos}_{suffix}")
    }

    fn push(&mut self, ty: ValType) -> String {
        let pos = self.stack.len();
        self.marks.pushed(pos);
        self.stack.push(ty);
        self.slot(pos, ty)
    }

    fn pop(&mut self) -> Result<String, CodegenError> {
        let ty = self
            .stack
            .pop()
            .ok_or_else(|| self.internal("operand stack underflow"))?;
        let pos = self.stack.len();
        Ok(self.slot(pos, ty))
    }

    fn top_slots(&mut self, n: usize) -> Vec<String> {
        let base = self.stack.len() - n;
        (base..self.stack.len())
            .map(|p| {
                let ty = self.stack[p];
                self.slot(p, ty)
            })
            .collect()
    }

    fn block_type(&self, bt: &BlockType) -> (Vec<ValType>, Vec<ValType>) {
        match bt {
            BlockType::Empty => (vec![], vec![]),
            BlockType::Type(t) => (vec![], vec![*t]),
            BlockType::FuncType(i) => {
                let ft = &self.ctx.module.types[*i as usize];
                (ft.params().to_vec(), ft.results().to_vec())
            }
        }
    }

    fn open(&mut self, kind: CtrlKind, bt: &BlockType, dead: bool) -> u32 {
        let (params, results) = self.block_type(bt);
        let label = self.next_label;
        self.next_label += 1;
        let height = self.stack.len().saturating_sub(params.len());
        self.ctrl.push(Ctrl {
            kind,
            label,
            height,
            params,
            results,
            unreachable: dead,
            had_else: false,
            dead,
        });
        label
    }

    fn set_unreachable(&mut self) {
        if let Some(c) = self.ctrl.last_mut() {
            c.unreachable = true;
            let h = c.height;
            self.stack.truncate(h);
        }
    }

    /// Copies the values a branch to `depth` carries into the target's slots and jumps.
    fn branch_code(&mut self, depth: u32) -> Result<String, CodegenError> {
        let idx = self
            .ctrl
            .len()
            .checked_sub(1 + depth as usize)
            .ok_or_else(|| self.internal("branch depth out of range"))?;
        let target = self.ctrl[idx].clone();
        if target.kind == CtrlKind::Function {
            return self.return_code();
        }
        let carried = if target.kind == CtrlKind::Loop {
            &target.params
        } else {
            &target.results
        };
        let n = carried.len();
        let mut code = String::new();
        let src_base = self.stack.len() - n;
        for k in 0..n {
            let (src, dst) = (src_base + k, target.height + k);
            if src != dst {
                let ty = self.stack[src];
                let d = self.slot(dst, ty);
                let s = self.slot(src, ty);
                let _ = write!(code, "{d} = {s}; ");
            }
        }
        let label = if target.kind == CtrlKind::Loop {
            format!("L{}_top", target.label)
        } else {
            format!("L{}_end", target.label)
        };
        let _ = write!(code, "goto {label};");
        Ok(code)
    }

    /// Returns the top values as the function's results.
    fn return_code(&mut self) -> Result<String, CodegenError> {
        let n = self.results.len();
        if self.stack.len() < n {
            return Err(self.internal("missing results at return"));
        }
        let values = self.top_slots(n);
        let mut code = String::new();
        match n {
            0 => code.push_str("return;"),
            1 => {
                let _ = write!(code, "return {};", values[0]);
            }
            _ => {
                let _ = write!(code, "{{ {} r_; ", tuple_name(&self.results));
                for (k, v) in values.iter().enumerate() {
                    let _ = write!(code, "r_.v{k} = {v}; ");
                }
                code.push_str("return r_; }");
            }
        }
        Ok(code)
    }

    fn operator(&mut self, op: &Operator<'_>) -> Result<(), CodegenError> {
        use Operator as O;
        let dead = self.ctrl.last().is_some_and(|c| c.unreachable);
        if dead {
            match op {
                O::Block { blockty } | O::Loop { blockty } | O::If { blockty } => {
                    self.open(CtrlKind::Block, blockty, true);
                    return Ok(());
                }
                O::Else | O::End => {}
                _ => return Ok(()),
            }
        }
        self.marks.before(self.op_index);
        self.trace(op);
        match op {
            O::Nop => {}
            O::Unreachable => {
                self.line("WV_TRAP(WV_TRAP_UNREACHABLE); /* unreachable */");
                self.set_unreachable();
            }
            O::Block { blockty } => {
                self.open(CtrlKind::Block, blockty, false);
            }
            O::Loop { blockty } => {
                let label = self.open(CtrlKind::Loop, blockty, false);
                // `@RESUME{label}@` becomes the resume dispatch of this loop, if it has one.
                self.body
                    .push_str(&format!("L{label}_top:; /* loop */\n@RESUME{label}@"));
                self.loops.push(LoopResumes::new(label));
                self.line("WV_FUEL();");
            }
            O::If { blockty } => {
                let cond = self.pop()?;
                let label = self.open(CtrlKind::If, blockty, false);
                self.line(&format!("if (!{cond}) goto L{label}_else; /* if */"));
            }
            O::Else => {
                let (dead, unreachable, label) = match self.ctrl.last() {
                    Some(c) => (c.dead, c.unreachable, c.label),
                    None => return Err(self.internal("else")),
                };
                if dead {
                    return Ok(());
                }
                if !unreachable {
                    self.line(&format!("goto L{label}_end;"));
                }
                self.body.push_str(&format!("L{label}_else:; /* else */\n"));
                if let Some(top) = self.ctrl.last_mut() {
                    top.unreachable = false;
                    top.had_else = true;
                    self.stack.truncate(top.height);
                    self.stack.extend(&top.params);
                }
            }
            O::End => self.end()?,
            O::Br { relative_depth } => {
                let code = self.branch_code(*relative_depth)?;
                self.line(&format!("{code} /* br {relative_depth} */"));
                self.set_unreachable();
            }
            O::BrIf { relative_depth } => {
                let cond = self.pop()?;
                let code = self.branch_code(*relative_depth)?;
                self.line(&format!(
                    "if ({cond}) {{ {code} }} /* br_if {relative_depth} */"
                ));
            }
            O::BrTable { targets } => self.br_table(targets)?,
            O::Return => {
                let code = self.return_code()?;
                self.line(&format!("{code} /* return */"));
                self.set_unreachable();
            }
            O::Drop => {
                self.pop()?;
            }
            O::Select | O::TypedSelect { .. } | O::TypedSelectMulti { .. } => {
                let c = self.pop()?;
                let ty = *self
                    .stack
                    .last()
                    .ok_or_else(|| self.internal("select operand"))?;
                let b = self.pop()?;
                let a = self.pop()?;
                let d = self.push(ty);
                self.line(&format!("{d} = {c} ? {a} : {b}; /* select */"));
            }
            O::LocalGet { local_index } => {
                let ty = self.local_type(*local_index)?;
                let d = self.push(ty);
                self.marks.local_get(self.stack.len() - 1, *local_index);
                self.line(&format!("{d} = l{local_index}; /* local.get */"));
            }
            O::LocalSet { local_index } => {
                self.marks.local_set(*local_index);
                let s = self.pop()?;
                self.line(&format!("l{local_index} = {s}; /* local.set */"));
            }
            O::LocalTee { local_index } => {
                self.marks.local_set(*local_index);
                let top = self.top_slots(1).remove(0);
                self.line(&format!("l{local_index} = {top}; /* local.tee */"));
            }
            O::GlobalGet { global_index } => {
                let ty = self.global_type(*global_index)?;
                let d = self.push(ty);
                let sfx = slot_suffix(ty);
                self.line(&format!(
                    "{d} = wv_dec_{sfx}(WV_G({global_index})); /* global.get */"
                ));
            }
            O::GlobalSet { global_index } => {
                let ty = self.global_type(*global_index)?;
                let s = self.pop()?;
                let sfx = slot_suffix(ty);
                self.line(&format!(
                    "WV_G_SET({global_index}, wv_enc_{sfx}({s})); /* global.set */"
                ));
            }
            O::Call { function_index } => self.call(*function_index)?,
            O::CallIndirect {
                type_index,
                table_index,
            } => self.call_indirect(*type_index, *table_index)?,
            O::RefNull { .. } => {
                let d = self.push(ValType::FUNCREF);
                self.line(&format!("{d} = WV_NULL_REF; /* ref.null */"));
            }
            O::RefIsNull => {
                let s = self.pop()?;
                let d = self.push(ValType::I32);
                self.line(&format!("{d} = {s} == WV_NULL_REF; /* ref.is_null */"));
            }
            O::RefFunc { function_index } => {
                let d = self.push(ValType::FUNCREF);
                self.line(&format!("{d} = {function_index}u; /* ref.func */"));
            }
            O::TableGet { table } => {
                let i = self.pop()?;
                let d = self.push(ValType::FUNCREF);
                self.line(&format!(
                    "WV_CHECK(wv_table_get(f, vm, {table}, {i}, &{d})); /* table.get */"
                ));
            }
            O::TableSet { table } => {
                let r = self.pop()?;
                let i = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_table_set(f, vm, {table}, {i}, {r})); /* table.set */"
                ));
            }
            O::TableSize { table } => {
                let d = self.push(ValType::I32);
                self.line(&format!("{d} = WV_TABLE_SIZE({table}); /* table.size */"));
            }
            O::TableGrow { table } => {
                let n = self.pop()?;
                let r = self.pop()?;
                let d = self.push(ValType::I32);
                self.line(&format!(
                    "{d} = wv_table_grow(f, vm, {table}, {r}, {n}); /* table.grow */"
                ));
            }
            O::TableFill { table } => {
                let n = self.pop()?;
                let r = self.pop()?;
                let i = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_table_fill(f, vm, {table}, {i}, {r}, {n})); /* table.fill */"
                ));
            }
            O::TableCopy {
                dst_table,
                src_table,
            } => {
                let n = self.pop()?;
                let s = self.pop()?;
                let d = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_table_copy(f, vm, {dst_table}, {src_table}, {d}, {s}, {n})); /* table.copy */"
                ));
            }
            O::TableInit { elem_index, table } => {
                let n = self.pop()?;
                let s = self.pop()?;
                let d = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_table_init(f, vm, {table}, {elem_index}, {d}, {s}, {n})); /* table.init */"
                ));
            }
            O::ElemDrop { elem_index } => {
                self.line(&format!(
                    "WV_DROPPED(WV_NUM_DATAS + {elem_index}) = 1; /* elem.drop */"
                ));
            }
            O::MemoryInit { data_index, .. } => {
                let n = self.pop()?;
                let s = self.pop()?;
                let d = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_memory_init(f, vm, {data_index}, {d}, {s}, {n})); /* memory.init */"
                ));
            }
            O::DataDrop { data_index } => {
                self.line(&format!("WV_DROPPED({data_index}) = 1; /* data.drop */"));
            }
            O::MemoryCopy { .. } => {
                let n = self.pop()?;
                let s = self.pop()?;
                let d = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_memory_copy(f, vm, {d}, {s}, {n})); /* memory.copy */"
                ));
            }
            O::MemoryFill { .. } => {
                let n = self.pop()?;
                let val = self.pop()?;
                let d = self.pop()?;
                self.line(&format!(
                    "WV_CHECK(wv_memory_fill(f, vm, {d}, {val}, {n})); /* memory.fill */"
                ));
            }
            other => {
                let tpl = numeric::template(other).ok_or_else(|| CodegenError::Unsupported {
                    function: self.ctx.module.func_display_name(self.func),
                    operator: format!("{other:?}"),
                })?;
                let mut text = tpl.text.clone();
                if let Some(offset) = store_offset(other) {
                    let addr = self.stack.len().saturating_sub(2);
                    let mark = self.marks.store(self.op_index, addr, offset);
                    text = text.replacen("WV_STORE(", &format!("{}(", mark.macro_name()), 1);
                }
                let mut operands = Vec::new();
                for _ in tpl.inputs {
                    operands.push(self.pop()?);
                }
                operands.reverse();
                for (k, o) in operands.iter().enumerate() {
                    text = text.replace(&format!("${k}"), o);
                }
                if let Some(out) = tpl.output {
                    let d = self.push(out);
                    text = text.replace("$d", &d);
                }
                let name = operator_name(other);
                self.line(&format!("{text} /* {name} */"));
            }
        }
        Ok(())
    }

    /// A `switch` with one case per target; the targets that branch to the same depth share
    /// one copy of the branch's code.
    fn br_table(&mut self, targets: &wasmparser::BrTable<'_>) -> Result<(), CodegenError> {
        let index = self.pop()?;
        // (depth, its cases, whether it is the default), depths in order of first use.
        let mut groups: Vec<(u32, Vec<u32>, bool)> = Vec::new();
        let mut group_of: HashMap<u32, usize> = HashMap::new();
        for (k, depth) in targets.targets().enumerate() {
            let depth = depth.map_err(|e| self.internal(e.to_string()))?;
            let g = *group_of.entry(depth).or_insert_with(|| {
                groups.push((depth, Vec::new(), false));
                groups.len() - 1
            });
            groups[g].1.push(k as u32);
        }
        match group_of.get(&targets.default()) {
            Some(&g) => groups[g].2 = true,
            None => groups.push((targets.default(), Vec::new(), true)),
        }
        let mut code = format!("switch ({index}) {{ /* br_table */\n");
        for (depth, cases, default) in &groups {
            let b = self.branch_code(*depth)?;
            let mut labels: Vec<String> = cases.iter().map(|k| format!("case {k}u:")).collect();
            if *default {
                labels.push("default:".into());
            }
            if let Some((last, rest)) = labels.split_last() {
                for l in rest {
                    let _ = writeln!(code, "  {l}");
                }
                let _ = writeln!(code, "  {last} {b}");
            }
            self.check_size(code.len())?;
        }
        code.push('}');
        for l in code.lines().map(str::to_string).collect::<Vec<_>>() {
            self.line(&l);
        }
        self.set_unreachable();
        Ok(())
    }

    fn local_type(&self, index: u32) -> Result<ValType, CodegenError> {
        self.locals
            .get(index as usize)
            .copied()
            .ok_or_else(|| self.internal("local index"))
    }

    fn global_type(&self, index: u32) -> Result<ValType, CodegenError> {
        self.ctx
            .module
            .globals
            .get(index as usize)
            .map(|g| g.ty)
            .ok_or_else(|| self.internal("global index"))
    }

    fn end(&mut self) -> Result<(), CodegenError> {
        let c = self
            .ctrl
            .pop()
            .ok_or_else(|| self.internal("unbalanced end"))?;
        if c.dead {
            return Ok(());
        }
        if c.kind == CtrlKind::Function {
            if !c.unreachable {
                self.stack.truncate(c.height + c.results.len());
                let code = self.return_code()?;
                self.line(&code);
            }
            return Ok(());
        }
        if c.kind == CtrlKind::If && !c.had_else {
            self.body.push_str(&format!("L{}_else:;\n", c.label));
        }
        if c.kind == CtrlKind::Loop {
            self.close_loop();
        } else {
            self.body
                .push_str(&format!("L{}_end:; /* end */\n", c.label));
        }
        self.stack.truncate(c.height);
        self.stack.extend(&c.results);
        Ok(())
    }
}

/// `WV_FUNC RET wv_fN(wv_fleet *f, uint32_t vm, T0 l0, ...)` for fastcall `func`.
pub(super) fn fastcall_signature(ctx: &ModuleContext<'_, '_>, func: u32) -> String {
    c_signature(
        ctx.module.func_type(func),
        &format!("wv_f{func}(WV_CTX_PARAMS"),
    )
}

/// `WV_FUNC RET wv_bN(WV_CTX_PARAMS, uint32_t fp, uint32_t depth, uint32_t resume, T0 l0, ...)`:
/// a continuation's body, on frame `fp` at `depth` frames, resuming at point `resume` (0: a
/// call, with its arguments in `l0...`).
pub(super) fn continuation_signature(ctx: &ModuleContext<'_, '_>, func: u32) -> String {
    c_signature(
        ctx.module.func_type(func),
        &format!("wv_b{func}(WV_CTX_PARAMS, uint32_t fp, uint32_t depth, uint32_t resume"),
    )
}

/// `head, a0, a1...)`: a C call whose callee and leading arguments are `head`.
pub(super) fn c_call(head: String, args: &[String]) -> String {
    let mut call = head;
    for a in args {
        call.push_str(", ");
        call.push_str(a);
    }
    call.push(')');
    call
}

/// `call;`, or the C call `call` whose results go to the operand slots `slots`.
pub(super) fn assign_results(call: &str, slots: &[String], results: &[ValType]) -> String {
    match slots {
        [] => format!("{call};"),
        [d] => format!("{d} = {call};"),
        _ => {
            let mut code = format!("{{ {} r_ = {call}; ", tuple_name(results));
            for (k, d) in slots.iter().enumerate() {
                let _ = write!(code, "{d} = r_.v{k}; ");
            }
            code.push('}');
            code
        }
    }
}

/// `WV_FUNC RET head, T0 l0, ...)`: a C function of WebAssembly type `ty` whose name and
/// leading parameters are `head`.
pub(super) fn c_signature(ty: &wasmparser::FuncType, head: &str) -> String {
    let ret = match ty.results().len() {
        0 => "void".to_string(),
        1 => c_type(ty.results()[0]).to_string(),
        _ => tuple_name(ty.results()),
    };
    let mut s = format!("WV_FUNC {ret} {head}");
    for (i, p) in ty.params().iter().enumerate() {
        let _ = write!(s, ", {} l{i}", c_type(*p));
    }
    s.push(')');
    s
}

fn suffix_c_type(sfx: &str) -> &'static str {
    match sfx {
        "i32" => "uint32_t",
        "i64" => "uint64_t",
        "f32" => "float",
        "f64" => "double",
        _ => "uint32_t",
    }
}

/// Makes a name safe inside a C comment.
pub(super) fn sanitize_comment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect::<String>()
        .replace("*/", "*?")
        .replace("/*", "?*")
        // `@` marks the places `finish` fills in.
        .replace('@', "?")
}

/// The operator's WebAssembly text name, for comments.
fn operator_name(op: &Operator<'_>) -> String {
    let dbg = format!("{op:?}");
    let head = dbg.split([' ', '{', '(']).next().unwrap_or("");
    // CamelCase → snake.dot form: I32Add → i32.add
    let mut out = String::new();
    for (i, ch) in head.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push(if out.len() == 3 && out.starts_with(['i', 'f']) {
                '.'
            } else {
                '_'
            });
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}
