//! Which registers are live after each instruction of a kernel: a split point saves only
//! those (Ocelot keeps "values live across a barrier" per thread), so a barrier costs what
//! the thread carries across it, not every register the kernel declares.

use std::collections::{BTreeSet, HashMap};

use crate::ptx::ast::{Instruction, Operand, Statement};

/// Instructions that write no register.
const NO_DESTINATION: &[&str] = &[
    "st",
    "red",
    "bra",
    "brx",
    "ret",
    "exit",
    "bar",
    "barrier",
    "membar",
    "fence",
    "trap",
    "prefetch",
    "prefetchu",
    "nanosleep",
    "pmevent",
];

/// Registers an instruction writes and reads.
fn defs_uses(i: &Instruction, is_register: &dyn Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let mut defs = Vec::new();
    let mut uses = Vec::new();
    fn collect(op: &Operand, out: &mut Vec<String>, is_register: &dyn Fn(&str) -> bool) {
        match op {
            Operand::Reg(r) | Operand::NotReg(r) if is_register(r) => out.push(r.clone()),
            Operand::Pair(a, b) => {
                for r in [a, b] {
                    if is_register(r) {
                        out.push(r.clone());
                    }
                }
            }
            Operand::Address(Some(base), _) => collect(base, out, is_register),
            Operand::Vector(v) | Operand::List(v) => {
                for o in v {
                    collect(o, out, is_register);
                }
            }
            _ => {}
        }
    }
    let has_dest = !NO_DESTINATION.contains(&i.opcode.as_str());
    for (k, op) in i.operands.iter().enumerate() {
        if k == 0 && has_dest && !matches!(op, Operand::Address(..)) {
            collect(op, &mut defs, is_register);
        } else {
            collect(op, &mut uses, is_register);
        }
    }
    if let Some(g) = &i.guard {
        uses.push(g.reg.clone());
        // A guarded write may not happen: the old value stays live through it.
        uses.append(&mut defs.clone());
    }
    // Carry-in instructions read the previous value of nothing we track; setp's combining
    // predicate is already among the uses.
    (defs, uses)
}

/// Live registers after each statement of `body` (empty for labels).
pub fn live_after(body: &[Statement], is_register: &dyn Fn(&str) -> bool) -> Vec<BTreeSet<String>> {
    let n = body.len();
    let labels: HashMap<&str, usize> = body
        .iter()
        .enumerate()
        .filter_map(|(k, s)| match s {
            Statement::Label(l) => Some((l.as_str(), k)),
            _ => None,
        })
        .collect();
    let tables: HashMap<&str, &Vec<String>> = body
        .iter()
        .filter_map(|s| match s {
            Statement::BranchTargets(name, t) => Some((name.as_str(), t)),
            _ => None,
        })
        .collect();
    // Successors and def/use per statement.
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut du: Vec<(Vec<String>, Vec<String>)> = vec![(Vec::new(), Vec::new()); n];
    for (k, s) in body.iter().enumerate() {
        let next = if k + 1 < n { vec![k + 1] } else { Vec::new() };
        succ[k] = match s {
            Statement::Instr(i) => {
                du[k] = defs_uses(i, is_register);
                let target = |l: &str| labels.get(l).copied();
                let jumps: Vec<usize> =
                    match (i.opcode.as_str(), i.operands.first(), i.operands.get(1)) {
                        ("bra", Some(Operand::Symbol(l)), _) => target(l).into_iter().collect(),
                        ("brx", _, Some(Operand::Symbol(t))) => tables
                            .get(t.as_str())
                            .map(|ls| ls.iter().filter_map(|l| target(l)).collect())
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    };
                let ends = matches!(i.opcode.as_str(), "bra" | "brx" | "ret" | "exit" | "trap");
                if ends && i.guard.is_none() {
                    jumps
                } else {
                    jumps.into_iter().chain(next).collect()
                }
            }
            _ => next,
        };
    }
    let mut live_in: Vec<BTreeSet<String>> = vec![BTreeSet::new(); n];
    let mut live_out: Vec<BTreeSet<String>> = vec![BTreeSet::new(); n];
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..n).rev() {
            let mut out = BTreeSet::new();
            for &s in &succ[k] {
                out.extend(live_in[s].iter().cloned());
            }
            let mut inn = out.clone();
            for d in &du[k].0 {
                inn.remove(d);
            }
            inn.extend(du[k].1.iter().cloned());
            if inn != live_in[k] || out != live_out[k] {
                live_in[k] = inn;
                live_out[k] = out;
                changed = true;
            }
        }
    }
    live_out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::parser::parse;

    #[test]
    fn only_values_used_after_a_barrier_are_live_across_it() {
        let m = parse(
            ".version 8.8\n.target sm_70\n.address_size 64\n.entry k()\n{\n\
             .reg .b32 %r<4>;\n\
             mov.u32 %r1, 1;\n mov.u32 %r2, 2;\n bar.sync 0;\n add.u32 %r3, %r1, %r1;\n\
             $L: add.u32 %r3, %r3, %r1;\n bra $L;\n}",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let body = m.functions[0].body.clone().unwrap_or_default();
        let live = live_after(&body, &|_| true);
        // After bar.sync (statement 2): r1 only (r2 is dead, r3 is written before it is read).
        assert_eq!(
            live[2].iter().cloned().collect::<Vec<_>>(),
            vec!["r1".to_string()]
        );
    }
}
