//! One guest function as one WebAssembly function `(param $pc i64) (result i64)`: it starts at
//! the block `$pc` names, keeps the registers it uses in locals (loaded from the register
//! globals on entry and after calls, stored back before calls and when it leaves), and
//! returns the address where execution goes on — normally its caller's return address.
//!
//! Blocks sit in the nested loops of `layout.rs`: forward branches leave a `block` to their
//! target, backward branches restart the enclosing `loop` that begins at their target. `$pc`
//! holds a pending dispatch (on entry, after a call that came back elsewhere, for a jump that
//! the structure cannot express); each region begins with a `br_table` over its blocks that
//! passes it inward until the block is reached, where `$pc` is cleared (`NONE`). A call is a
//! direct WebAssembly call; when the callee returns somewhere other than the return address
//! (a tail call, `longjmp`), that address is run from here until control comes back into this
//! function.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use std::cell::Cell;

use super::dirty;
use super::layout::{plan, Item, Region};
use super::ops::{get, group_local, local, set, Access, Emitter};
use crate::riscv::decode::{BranchOp, Inst, Op};
use crate::riscv::disasm;
use crate::riscv::program::{read, written, Function};

/// What a function's code needs to know about the rest of the program.
pub struct Context<'a> {
    /// Every block leader.
    pub leaders: &'a BTreeSet<u64>,
    /// The WebAssembly name of the function starting at each address.
    pub starts: &'a BTreeMap<u64, String>,
    /// The registers of the leaf functions (by start address), which run no code but their
    /// own: a call to one needs to store only the registers it uses and reload only those it
    /// writes.
    pub leaves: &'a BTreeMap<u64, Registers>,
    /// What the program observes of the floating-point environment.
    pub fenv: super::float::FloatEnv,
}

/// The registers a function reads or writes (`used`) and writes (`dirty`), `x0` left out.
#[derive(Debug, Default)]
pub struct Registers {
    /// Read or written.
    pub used: BTreeSet<u8>,
    /// Written.
    pub dirty: BTreeSet<u8>,
}

impl Registers {
    /// The registers of `f`'s instructions.
    pub fn of(f: &Function) -> Registers {
        let mut regs = Registers::default();
        for inst in &f.insts {
            regs.used.extend(read(&inst.op));
            if let Some(r) = written(&inst.op) {
                regs.used.insert(r);
                regs.dirty.insert(r);
            }
        }
        regs.used.remove(&0);
        regs.dirty.remove(&0);
        regs
    }
}

/// Whether `f` is a leaf: it calls nothing (no linking jump), so the only code that runs
/// while it is called is its own — system calls and the runtime's helpers read no register
/// globals. (Where it returns or jumps out of itself, its caller's dispatch takes over, which
/// stores every register first.)
pub fn is_leaf(f: &Function) -> bool {
    f.insts.iter().all(|i| {
        !matches!(
            i.op,
            Op::Jal { rd, .. } | Op::Jalr { rd, .. } if rd != 0
        )
    })
}

/// `$pc` when no dispatch is pending: an odd address, which no instruction has.
const NONE: &str = "(i64.const 1)";

/// Emits `f` as WAT into `out`.
pub fn emit(f: &Function, ctx: &Context, out: &mut String) {
    let Registers { used, dirty } = Registers::of(f);
    let blocks: Vec<u64> = f
        .insts
        .iter()
        .map(|i| i.addr)
        .filter(|a| *a == f.start || ctx.leaders.contains(a))
        .collect();
    let index: BTreeMap<u64, usize> = blocks.iter().enumerate().map(|(i, a)| (*a, i)).collect();
    // Each block's instructions, and the blocks it may continue at.
    let mut insts_of = vec![0..0; blocks.len()];
    let mut succs = vec![Vec::new(); blocks.len()];
    for (i, inst) in f.insts.iter().enumerate() {
        let here = index.range(..=inst.addr).next_back().map_or(0, |(_, &k)| k);
        if insts_of[here].is_empty() {
            insts_of[here] = i..i;
        }
        insts_of[here].end = i + 1;
        if let Op::Branch { offset, .. } | Op::Jal { rd: 0, offset } = inst.op {
            if let Some(&to) = index.get(&inst.addr.wrapping_add(offset as u64)) {
                succs[here].push(to);
            }
        }
        let last = f
            .insts
            .get(i + 1)
            .is_none_or(|n| index.contains_key(&n.addr));
        if last && falls_through(&inst.op) && here + 1 < blocks.len() {
            succs[here].push(here + 1);
        }
    }
    for s in &mut succs {
        s.sort_unstable();
        s.dedup();
    }
    let layout = plan(&succs);
    let e = Emitter {
        start: f.start,
        end: f.end,
        used: &used,
        dirty: &dirty,
        fenv: ctx.fenv,
    };
    let _ = writeln!(out, "  ;; {} ({:#x}..{:#x})", f.name, f.start, f.end);
    let _ = write!(out, "  (func {} (param $pc i64) (result i64)\n    (local $t i64) (local $t2 i64) (local $next i64) (local $a i32) (local $w i32)", func_name(f.start));
    for r in &used {
        let _ = write!(out, " (local {} i64)", local(*r));
    }
    let bases: BTreeSet<u8> = f
        .insts
        .iter()
        .filter_map(|i| access_base(&i.op).map(|(r, _)| r))
        .collect();
    for r in &bases {
        let _ = write!(out, " (local {} i64)", group_local(*r));
    }
    out.push('\n');
    out.push_str(&e.reload());
    let mut pos = vec![0; blocks.len()];
    for (p, &b) in layout.order.iter().enumerate() {
        pos[b] = p;
    }
    // What jumps through the dispatch carry is known once the body is written: write it
    // again until that set is stable (once or twice).
    let mut dispatched = 0u64;
    loop {
        let entry = dirty::entry_states(&f.insts, &insts_of, &index, ctx.leaves, dispatched);
        let mut body = String::new();
        let mut w = Writer {
            f,
            e: &e,
            ctx,
            blocks: &blocks,
            index: &index,
            insts_of: &insts_of,
            order: &layout.order,
            pos: &pos,
            out: &mut body,
            path: Vec::new(),
            entry: &entry,
            now: Cell::new(0),
            dispatched: Cell::new(0),
        };
        w.region(&layout.root, true);
        let seen = w.dispatched.get();
        if seen & !dispatched == 0 {
            out.push_str(&body);
            break;
        }
        dispatched |= seen;
    }
    // Every block ends in a jump or a branch out of the loop above.
    out.push_str("    unreachable)\n");
}

/// The base register and offset of a load or store (atomics excepted).
fn access_base(op: &Op) -> Option<(u8, i64)> {
    match *op {
        Op::Load { rs1, offset, .. }
        | Op::Store { rs1, offset, .. }
        | Op::FloatLoad { rs1, offset, .. }
        | Op::FloatStore { rs1, offset, .. } => Some((rs1, offset)),
        _ => None,
    }
}

/// The groups of loads and stores of a block's instructions that share one address check
/// ([`Access`]): accesses through one base register with no write to it, no system call and
/// no control transfer between them.
fn access_groups(insts: &[Inst]) -> Vec<Option<Access>> {
    let mut groups: Vec<(i64, i64)> = Vec::new();
    let mut open: BTreeMap<u8, usize> = BTreeMap::new();
    let mut member: Vec<Option<(usize, bool)>> = Vec::with_capacity(insts.len());
    for inst in insts {
        match access_base(&inst.op) {
            Some((r, off)) => match open.get(&r) {
                Some(&g) => {
                    groups[g] = (groups[g].0.min(off), groups[g].1.max(off));
                    member.push(Some((g, false)));
                }
                None => {
                    groups.push((off, off));
                    open.insert(r, groups.len() - 1);
                    member.push(Some((groups.len() - 1, true)));
                }
            },
            None => member.push(None),
        }
        if matches!(
            inst.op,
            Op::Ecall | Op::Branch { .. } | Op::Jal { .. } | Op::Jalr { .. }
        ) {
            open.clear();
        }
        if let Some(r) = written(&inst.op) {
            open.remove(&r);
        }
    }
    member
        .into_iter()
        .map(|m| {
            m.map(|(g, first)| Access {
                lo: groups[g].0,
                hi: groups[g].1,
                first,
            })
        })
        .collect()
}

/// Whether execution may go on at the next instruction after `op`.
fn falls_through(op: &Op) -> bool {
    !matches!(op, Op::Jal { rd: 0, .. } | Op::Jalr { rd: 0, .. })
}

/// Walks the region tree, writing each region's loop, dispatch and items.
struct Writer<'a> {
    f: &'a Function,
    e: &'a Emitter<'a>,
    ctx: &'a Context<'a>,
    /// Block start addresses, in address order.
    blocks: &'a [u64],
    index: &'a BTreeMap<u64, usize>,
    /// Each block's instructions (indices into the function's).
    insts_of: &'a [std::ops::Range<usize>],
    /// Blocks in layout order, and each block's position in it.
    order: &'a [usize],
    pos: &'a [usize],
    out: &'a mut String,
    /// The regions enclosing the current place, outermost first, each with its items and the
    /// index of the item being written.
    path: Vec<(&'a Region, Vec<Item>, usize)>,
    /// The dirty registers at each block's start, and at the instruction being written.
    entry: &'a [u64],
    now: Cell<u64>,
    /// The union of the dirty sets that jumps through the dispatch carry.
    dispatched: Cell<u64>,
}

impl<'a> Writer<'a> {
    /// The address where the block at layout position `p` starts.
    fn addr(&self, p: usize) -> u64 {
        self.blocks[self.order[p]]
    }

    /// The address after the block at layout position `p`.
    fn end_addr(&self, p: usize) -> u64 {
        self.blocks
            .get(self.order[p] + 1)
            .copied()
            .unwrap_or(self.f.end)
    }

    /// The label naming a place by the address of the block at position `p`.
    fn name(&self, prefix: &str, p: usize) -> String {
        format!("${prefix}{:x}", self.addr(p))
    }

    /// Writes region `r`: a loop (the root's is `$dispatch`), its items' labels, the dispatch
    /// of a pending `$pc` among its items, then the items.
    fn region(&mut self, r: &'a Region, root: bool) {
        let items = r.items();
        // The root's names are fixed: a region inside may start at the same block.
        let (entry, pad, bad) = if root {
            ("$entry".to_string(), "$pad".to_string(), "$bad".to_string())
        } else {
            (
                self.name("E", r.first),
                self.name("D", r.first),
                self.name("X", r.first),
            )
        };
        let start = (r.first..=r.last)
            .map(|p| self.addr(p))
            .min()
            .unwrap_or(self.f.start);
        let end = (r.first..=r.last)
            .map(|p| self.end_addr(p))
            .max()
            .unwrap_or(self.f.end);
        if root {
            self.out.push_str("    (loop $dispatch\n");
        } else {
            let _ = writeln!(self.out, "    (loop {}", self.name("C", r.first));
        }
        for &it in items.iter().skip(1).rev() {
            let _ = writeln!(self.out, "    (block {}", self.name("B", r.first_block(it)));
        }
        let _ = writeln!(self.out, "    (block {entry}");
        if !root {
            // Entered by falling in or looping back: no dispatch pending.
            let _ = writeln!(
                self.out,
                "      (br_if {entry} (i64.eq (local.get $pc) {NONE}))"
            );
        }
        for j in (0..items.len()).rev() {
            let _ = writeln!(self.out, "      (block {pad}_{j}");
        }
        let _ = write!(self.out, "      (block {bad}\n      (br_table");
        let mut targets = vec![bad.clone(); ((end - start) / 2) as usize];
        for p in r.first..=r.last {
            let j = r.item_holding(&items, p);
            targets[((self.addr(p) - start) / 2) as usize] = format!("{pad}_{j}");
        }
        for (n, t) in targets.iter().enumerate() {
            self.out
                .push_str(if n % 16 == 0 { "\n        " } else { " " });
            self.out.push_str(t);
        }
        if root {
            let _ = writeln!(
                self.out,
                " {bad}\n        (select (i32.wrap_i64 (i64.shr_u (local.tee $t (i64.sub (local.get $pc) (i64.const {start:#x}))) (i64.const 1))) (i32.const -1) (i64.lt_u (local.get $t) (i64.const {:#x})))))",
                end - start
            );
            // Not a block of this function: inside it, a jump into the middle of a block;
            // outside, an address to run until control returns here.
            let _ = writeln!(
                self.out,
                "    (if {} (then (call $bad_jump (local.get $pc))))\n{}    (local.set $pc (call $run_at (local.get $pc)))\n{}    (br $dispatch)",
                self.e.in_range("(local.get $pc)"),
                self.e.spill(),
                self.e.reload()
            );
        } else {
            let _ = writeln!(
                self.out,
                " {bad}\n        (i32.wrap_i64 (i64.shr_u (i64.sub (local.get $pc) (i64.const {start:#x})) (i64.const 1)))))\n      unreachable"
            );
        }
        // One pad per item: a block of this region clears `$pc` (the dispatch ends there); a
        // region inside keeps it for its own dispatch.
        for (j, &it) in items.iter().enumerate() {
            let land = if j == 0 {
                entry.clone()
            } else {
                self.name("B", r.first_block(it))
            };
            let clear = match it {
                Item::Block(_) => format!("(local.set $pc {NONE}) "),
                Item::Child(_) => String::new(),
            };
            let _ = writeln!(
                self.out,
                "      ) ;; {pad}_{j}: {:#x}\n      {clear}(br {land})",
                self.addr(r.first_block(it))
            );
        }
        let _ = writeln!(self.out, "    ) ;; {entry}");
        self.path.push((r, items.clone(), 0));
        for (j, &it) in items.iter().enumerate() {
            if let Some(top) = self.path.last_mut() {
                top.2 = j;
            }
            if j > 0 {
                let _ = writeln!(self.out, "    ) ;; {}", self.name("B", r.first_block(it)));
            }
            match it {
                Item::Block(p) => self.block(p),
                Item::Child(c) => self.region(&r.children[c], false),
            }
        }
        self.path.pop();
        if root {
            self.out.push_str("    ) ;; loop $dispatch\n");
        } else {
            let _ = writeln!(self.out, "    ) ;; loop {}", self.name("C", r.first));
        }
    }

    /// Where a jump to `target` goes from the current place: the start of an enclosing loop,
    /// a later item's label, the dispatch, or out of the function.
    fn jump(&self, target: u64) -> String {
        let Some(&b) = self.index.get(&target) else {
            return if (self.f.start..self.f.end).contains(&target) {
                format!("(call $bad_jump (i64.const {target:#x})) unreachable")
            } else {
                format!(
                    "{}(return (i64.const {target:#x}))",
                    self.e.spill_dirty(self.now.get())
                )
            };
        };
        let t = self.pos[b];
        for (depth, (r, items, at)) in self.path.iter().enumerate() {
            if depth > 0 && r.first == t {
                return format!("(br {})", self.name("C", t));
            }
            if items[at + 1..].iter().any(|&it| r.first_block(it) == t) {
                return format!("(br {})", self.name("B", t));
            }
        }
        self.dispatched.set(self.dispatched.get() | self.now.get());
        format!("(local.set $pc (i64.const {target:#x})) (br $dispatch)")
    }

    /// Writes the instructions of the block at layout position `p`, and a jump to the next
    /// address where it falls through to a block placed elsewhere.
    fn block(&mut self, p: usize) {
        let e = self.e;
        let k = self.order[p];
        self.now.set(self.entry[k]);
        let insts = &self.f.insts[self.insts_of[k].clone()];
        let accesses = access_groups(insts);
        for (inst, access) in insts.iter().zip(accesses) {
            let _ = writeln!(self.out, "    ;; {:x}: {}", inst.addr, disasm::text(inst));
            let next = inst.addr + inst.len as u64;
            // Dirty before this instruction, and with its link register written.
            let now = self.now.get();
            let linked = now | written(&inst.op).filter(|&r| r != 0).map_or(0, dirty::bit);
            match inst.op {
                Op::Jal { rd: 0, offset } => {
                    let j = self.jump(inst.addr.wrapping_add(offset as u64));
                    let _ = writeln!(self.out, "    {j}");
                }
                Op::Jal { rd, offset } => {
                    let target = inst.addr.wrapping_add(offset as u64);
                    let callee = match self.ctx.starts.get(&target) {
                        Some(name) => format!("(call {name} (i64.const {target:#x}))"),
                        None => format!("(call $run_at (i64.const {target:#x}))"),
                    };
                    let _ = writeln!(
                        self.out,
                        "    {}",
                        set(rd, &format!("(i64.const {next:#x})"))
                    );
                    match self.ctx.leaves.get(&target) {
                        Some(leaf) => {
                            // A leaf that comes back elsewhere leaves through the dispatch with
                            // what it did not store still dirty.
                            let kept = dirty::after(inst, now, self.ctx.leaves);
                            self.dispatched.set(self.dispatched.get() | kept);
                            self.out.push_str(&e.call_leaf(&callee, next, leaf, linked))
                        }
                        None => self.out.push_str(&e.call(&callee, next, linked)),
                    }
                }
                Op::Jalr { rd, rs1, offset } => {
                    let _ = writeln!(
                        self.out,
                        "    (local.set $t (i64.and (i64.add {} (i64.const {offset})) (i64.const -2)))",
                        get(rs1)
                    );
                    if rd != 0 {
                        let _ = writeln!(
                            self.out,
                            "    {}",
                            set(rd, &format!("(i64.const {next:#x})"))
                        );
                        self.out
                            .push_str(&e.call("(call $run_at (local.get $t))", next, linked));
                    } else if rs1 == 1 || rs1 == 5 {
                        // A return (the link registers, as RISC-V's return-address hints read
                        // them): always leave, so the WebAssembly stack unwinds with the guest's.
                        let _ = writeln!(
                            self.out,
                            "{}    (return (local.get $t))",
                            e.spill_dirty(now)
                        );
                    } else {
                        self.dispatched.set(self.dispatched.get() | now);
                        let _ = writeln!(
                            self.out,
                            "    (if {} (then (local.set $pc (local.get $t)) (br $dispatch)))\n{}    (return (local.get $t))",
                            e.in_range("(local.get $t)"),
                            e.spill_dirty(now)
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
                    let j = self.jump(inst.addr.wrapping_add(offset as u64));
                    match j.strip_prefix("(br ") {
                        Some(label) => {
                            let _ = writeln!(
                                self.out,
                                "    (br_if {} {cond})",
                                label.trim_end_matches(')')
                            );
                        }
                        None => {
                            let _ = writeln!(self.out, "    (if {cond} (then {j}))");
                        }
                    }
                }
                _ => self.out.push_str(&e.op(inst, access)),
            }
            self.now.set(dirty::after(inst, now, self.ctx.leaves));
        }
        // Falling through to a block placed elsewhere (or off the function's end).
        let last = self.insts_of[k].clone().last().map(|i| &self.f.insts[i]);
        if let Some(inst) = last.filter(|i| falls_through(&i.op)) {
            let next = inst.addr + inst.len as u64;
            if p + 1 >= self.order.len() || self.addr(p + 1) != next {
                let j = self.jump(next);
                let _ = writeln!(self.out, "    {j}");
            }
        }
    }
}

/// The WebAssembly name of the function starting at `addr`.
pub fn func_name(addr: u64) -> String {
    format!("$f_{addr:x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::riscv::decode::LoadOp;

    fn ld(rd: u8, rs1: u8, offset: i64) -> Inst {
        Inst {
            addr: 0,
            len: 4,
            op: Op::Load {
                op: LoadOp::D,
                rd,
                rs1,
                offset,
            },
        }
    }

    /// (lo, hi, first) of each access, `None` for other instructions.
    fn groups(insts: &[Inst]) -> Vec<Option<(i64, i64, bool)>> {
        access_groups(insts)
            .into_iter()
            .map(|a| a.map(|a| (a.lo, a.hi, a.first)))
            .collect()
    }

    #[test]
    fn accesses_through_one_base_share_a_check_until_the_base_changes() {
        let ecall = Inst {
            addr: 0,
            len: 4,
            op: Op::Ecall,
        };
        let insts = [
            ld(5, 2, 8),
            ld(6, 2, -16),
            ld(2, 2, 0), // writes the base after its own access: the group ends after it
            ld(7, 2, 4),
            ld(8, 2, 12),
            ecall, // a system call ends every group
            ld(9, 2, 24),
        ];
        assert_eq!(
            groups(&insts),
            vec![
                Some((-16, 8, true)),
                Some((-16, 8, false)),
                Some((-16, 8, false)),
                Some((4, 12, true)),
                Some((4, 12, false)),
                None,
                Some((24, 24, true)),
            ]
        );
    }
}
