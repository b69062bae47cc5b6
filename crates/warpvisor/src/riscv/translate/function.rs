//! One guest function as one WebAssembly function `(param $pc i64) (result i64)`: it starts at
//! the block `$pc` names, keeps the registers it uses in locals (loaded from the register
//! globals on entry and after calls, stored back before calls and when it leaves), and
//! returns the address where execution goes on — normally its caller's return address.
//!
//! Blocks are dispatched by a `br_table` over the function's halfword offsets inside a
//! `loop`: forward jumps branch straight to their block's label, a block that branches back to
//! its own start runs in a `loop` of its own, other backward jumps and unknown targets go
//! through the table. A call is a direct WebAssembly call; when the callee returns
//! somewhere other than the return address (a tail call, `longjmp`), that address is run from
//! here until control comes back into this function.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::ops::{get, local, set, Emitter};
use crate::riscv::decode::{BranchOp, Op};
use crate::riscv::disasm;
use crate::riscv::program::{read, written, Function};

/// What a function's code needs to know about the rest of the program.
pub struct Context<'a> {
    /// Every block leader.
    pub leaders: &'a BTreeSet<u64>,
    /// The WebAssembly name of the function starting at each address.
    pub starts: &'a BTreeMap<u64, String>,
}

/// Emits `f` as WAT into `out`.
pub fn emit(f: &Function, ctx: &Context, out: &mut String) {
    let (mut used, mut dirty) = (BTreeSet::new(), BTreeSet::new());
    for inst in &f.insts {
        for r in read(&inst.op) {
            used.insert(r);
        }
        if let Some(r) = written(&inst.op) {
            used.insert(r);
            dirty.insert(r);
        }
    }
    used.remove(&0);
    dirty.remove(&0);
    let blocks: Vec<u64> = f
        .insts
        .iter()
        .map(|i| i.addr)
        .filter(|a| *a == f.start || ctx.leaders.contains(a))
        .collect();
    let index: BTreeMap<u64, usize> = blocks.iter().enumerate().map(|(i, a)| (*a, i)).collect();
    let e = Emitter {
        start: f.start,
        end: f.end,
        used: &used,
        dirty: &dirty,
    };

    let _ = writeln!(out, "  ;; {} ({:#x}..{:#x})", f.name, f.start, f.end);
    let _ = write!(out, "  (func {} (param $pc i64) (result i64)\n    (local $t i64) (local $t2 i64) (local $a i32) (local $w i32)", func_name(f.start));
    for r in &used {
        let _ = write!(out, " (local {} i64)", local(*r));
    }
    out.push('\n');
    out.push_str(&e.reload());
    out.push_str("    (loop $dispatch\n");
    for k in (0..blocks.len()).rev() {
        let _ = writeln!(out, "    (block $L{k}");
    }
    out.push_str("    (block $bad\n");
    // The table: one entry per halfword of the function.
    let size = f.end - f.start;
    let _ = write!(out, "      (br_table");
    let mut targets = vec!["$bad".to_string(); (size / 2) as usize];
    for (k, a) in blocks.iter().enumerate() {
        targets[((a - f.start) / 2) as usize] = format!("$L{k}");
    }
    for (n, t) in targets.iter().enumerate() {
        if n % 16 == 0 {
            out.push_str("\n        ");
        } else {
            out.push(' ');
        }
        out.push_str(t);
    }
    let _ = writeln!(
        out,
        " $bad\n        (select (i32.wrap_i64 (i64.shr_u (local.tee $t (i64.sub (local.get $pc) (i64.const {:#x}))) (i64.const 1))) (i32.const -1) (i64.lt_u (local.get $t) (i64.const {size:#x})))))",
        f.start
    );
    // Not a block of this function: inside it, a jump into the middle of a block; outside, an
    // address to run until control returns here.
    let _ = writeln!(
        out,
        "    (if {} (then (call $bad_jump (local.get $pc))))\n{}    (local.set $pc (call $run_at (local.get $pc)))\n{}    (br $dispatch)",
        e.in_range("(local.get $pc)"),
        e.spill(),
        e.reload()
    );
    // Blocks that branch back to their own start (tight loops) run inside a `loop`, so that
    // the branch is a plain `br_if` instead of a trip through the dispatch table.
    let mut self_loop = vec![false; blocks.len()];
    let mut current = 0usize;
    for inst in &f.insts {
        if blocks.get(current + 1) == Some(&inst.addr) {
            current += 1;
        }
        if let Op::Branch { offset, .. } | Op::Jal { rd: 0, offset } = inst.op {
            if inst.addr.wrapping_add(offset as u64) == blocks[current] {
                self_loop[current] = true;
            }
        }
    }
    let mut block = 0usize;
    for inst in &f.insts {
        if blocks.get(block) == Some(&inst.addr) {
            if block > 0 && self_loop[block - 1] {
                let _ = writeln!(out, "    ) ;; loop $C{}", block - 1);
            }
            let _ = writeln!(out, "    ) ;; $L{block}: {:#x}", inst.addr);
            if self_loop[block] {
                let _ = writeln!(out, "    (loop $C{block}");
            }
            block += 1;
        }
        // The block this instruction is in, and the label that restarts it if it loops.
        let here = block - 1;
        let restart = (self_loop[here]).then(|| (blocks[here], format!("$C{here}")));
        let _ = writeln!(out, "    ;; {:x}: {}", inst.addr, disasm::text(inst));
        // Where a jump to `target` goes: a later block's label, the table, or out.
        let jump = |target: u64| -> String {
            if let Some((start, label)) = &restart {
                if *start == target {
                    return format!("(br {label})");
                }
            }
            match index.get(&target) {
                Some(&j) if j >= block => format!("(br $L{j})"),
                Some(_) => format!("(local.set $pc (i64.const {target:#x})) (br $dispatch)"),
                None if (f.start..f.end).contains(&target) => {
                    format!("(call $bad_jump (i64.const {target:#x})) unreachable")
                }
                None => format!("{}(return (i64.const {target:#x}))", e.spill()),
            }
        };
        let next = inst.addr + inst.len as u64;
        match inst.op {
            Op::Jal { rd: 0, offset } => {
                let _ = writeln!(out, "    {}", jump(inst.addr.wrapping_add(offset as u64)));
            }
            Op::Jal { rd, offset } => {
                let target = inst.addr.wrapping_add(offset as u64);
                let callee = match ctx.starts.get(&target) {
                    Some(name) => format!("(call {name} (i64.const {target:#x}))"),
                    None => format!("(call $run_at (i64.const {target:#x}))"),
                };
                let _ = writeln!(out, "    {}", set(rd, &format!("(i64.const {next:#x})")));
                out.push_str(&e.call(&callee, next));
            }
            Op::Jalr { rd, rs1, offset } => {
                let _ = writeln!(
                    out,
                    "    (local.set $t (i64.and (i64.add {} (i64.const {offset})) (i64.const -2)))",
                    get(rs1)
                );
                if rd != 0 {
                    let _ = writeln!(out, "    {}", set(rd, &format!("(i64.const {next:#x})")));
                    out.push_str(&e.call("(call $run_at (local.get $t))", next));
                } else if rs1 == 1 || rs1 == 5 {
                    // A return (the link registers, as RISC-V's return-address hints read
                    // them): always leave, so the WebAssembly stack unwinds with the guest's.
                    let _ = writeln!(out, "{}    (return (local.get $t))", e.spill());
                } else {
                    let _ = writeln!(
                        out,
                        "    (if {} (then (local.set $pc (local.get $t)) (br $dispatch)))\n{}    (return (local.get $t))",
                        e.in_range("(local.get $t)"),
                        e.spill()
                    );
                }
            }
            Op::Branch {
                op,
                rs1,
                rs2,
                offset,
            } => {
                let cmp = match op {
                    BranchOp::Eq => "i64.eq",
                    BranchOp::Ne => "i64.ne",
                    BranchOp::Lt => "i64.lt_s",
                    BranchOp::Ge => "i64.ge_s",
                    BranchOp::Ltu => "i64.lt_u",
                    BranchOp::Geu => "i64.ge_u",
                };
                let cond = format!("({cmp} {} {})", get(rs1), get(rs2));
                let target = inst.addr.wrapping_add(offset as u64);
                match index.get(&target) {
                    Some(&j) if j >= block => {
                        let _ = writeln!(out, "    (br_if $L{j} {cond})");
                    }
                    _ if restart.as_ref().is_some_and(|(start, _)| *start == target) => {
                        let _ = writeln!(out, "    (br_if $C{here} {cond})");
                    }
                    _ => {
                        let _ = writeln!(out, "    (if {cond} (then {}))", jump(target));
                    }
                }
            }
            _ => out.push_str(&e.op(inst)),
        }
    }
    if self_loop.last() == Some(&true) {
        let _ = writeln!(out, "    ) ;; loop $C{}", blocks.len() - 1);
    }
    // Falling off the end runs on at the next function.
    let _ = writeln!(
        out,
        "{}    (return (i64.const {:#x})))\n    unreachable)",
        e.spill(),
        f.end
    );
}

/// The WebAssembly name of the function starting at `addr`.
pub fn func_name(addr: u64) -> String {
    format!("$f_{addr:x}")
}
