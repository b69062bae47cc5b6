//! Which registers hold one value for every thread of a CTA (a divergence analysis). A
//! split point saves such a register once for the CTA instead of once per thread, so the
//! fused loop carries only what differs between threads across a barrier: in a shared-memory
//! reduction the stride, the block size and the output pointer stay in the CTA's slot and
//! only the thread's own index and address go to its spill slot.
//!
//! A register is *divergent* when one of its definitions
//! - reads something that differs between threads (`%tid`, `%laneid`, `%clock`, a `.local`
//!   variable's address, memory other than parameters and constants, atomics, warp
//!   operations, call results, the carry flag), or a divergent register or guard; or
//! - lies between a branch on a divergent condition and that branch's immediate
//!   post-dominator, and the register is live where the paths meet (threads that took
//!   different sides bring different values there).
//!
//! Everything else is uniform, computed optimistically to a fixpoint. Threads stopped at the
//! same split point are at the same dynamic instance of it (barriers and warp operations are
//! reached in the same order by every thread that reaches them), so a uniform register saved
//! there is the same for all of them.

use std::collections::HashSet;

use super::liveness::Liveness;
use crate::analysis::post_dominators;
use crate::ptx::ast::{Instruction, Operand, Statement};

/// Special registers that are the same in every thread of a CTA.
const UNIFORM_SPECIALS: &[&str] = &["ntid", "ctaid", "nctaid"];

/// Opcodes whose results may differ between threads whatever their operands.
const THREAD_DEPENDENT: &[&str] = &[
    "atom",
    "shfl",
    "vote",
    "call",
    "activemask",
    "match",
    "redux",
    "addc",
    "subc",
    "madc",
];

/// The registers of one kernel body that may differ between threads.
pub struct Divergence {
    divergent: HashSet<String>,
}

impl Divergence {
    /// Analyses `body`. `is_register` tells registers from special registers; `per_thread`
    /// tells which symbols have a different address in each thread (`.local` variables).
    pub fn new(
        body: &[Statement],
        live: &Liveness,
        is_register: &dyn Fn(&str) -> bool,
        per_thread: &dyn Fn(&str) -> bool,
    ) -> Self {
        let blocks = live.blocks();
        let exit = blocks.len();
        let graph: Vec<Vec<usize>> = (0..exit)
            .map(|b| match live.successors(b) {
                [] => vec![exit],
                s => s.to_vec(),
            })
            .collect();
        let ipdom = post_dominators(&graph, exit);
        let mut divergent: HashSet<String> = HashSet::new();
        loop {
            let before = divergent.len();
            // Data: definitions from thread-dependent sources or divergent operands.
            for (k, s) in body.iter().enumerate() {
                let Statement::Instr(i) = s else { continue };
                let (defs, uses) = live.defs_uses(k);
                if defs.is_empty() {
                    continue;
                }
                if reads_per_thread(i, is_register, per_thread)
                    || uses.iter().any(|u| divergent.contains(*u))
                {
                    divergent.extend(defs.iter().map(|d| d.to_string()));
                }
            }
            // Control: definitions between a divergent branch and where its paths meet.
            for (b, &(_, end)) in blocks.iter().enumerate() {
                let Some(Statement::Instr(i)) = body.get(end - 1) else {
                    continue;
                };
                if !branches_on_divergent(i, &divergent) {
                    continue;
                }
                let join = ipdom[b];
                if join >= exit {
                    continue; // the paths meet only where threads end: nothing is carried
                }
                let mut seen = vec![false; exit];
                let mut stack: Vec<usize> = live.successors(b).to_vec();
                while let Some(r) = stack.pop() {
                    if r == join || seen[r] {
                        continue;
                    }
                    seen[r] = true;
                    let (a, e) = blocks[r];
                    for k in a..e {
                        for d in live.defs_uses(k).0 {
                            if live.live_into(join, d) {
                                divergent.insert(d.to_string());
                            }
                        }
                    }
                    stack.extend_from_slice(live.successors(r));
                }
            }
            if divergent.len() == before {
                return Divergence { divergent };
            }
        }
    }

    /// Whether register `r` (PTX name) holds the same value in every thread.
    pub fn is_uniform(&self, r: &str) -> bool {
        !self.divergent.contains(r)
    }
}

/// Whether `i` reads something that differs between threads, registers aside.
fn reads_per_thread(
    i: &Instruction,
    is_register: &dyn Fn(&str) -> bool,
    per_thread: &dyn Fn(&str) -> bool,
) -> bool {
    if THREAD_DEPENDENT.contains(&i.opcode.as_str()) || i.has("cc") {
        return true;
    }
    // Loads: kernel parameters and constants are the same for every thread.
    if matches!(i.opcode.as_str(), "ld" | "ldu") && !(i.has("param") || i.has("const")) {
        return true;
    }
    fn operand(o: &Operand, reg: &dyn Fn(&str) -> bool, local: &dyn Fn(&str) -> bool) -> bool {
        match o {
            Operand::Reg(r) | Operand::NotReg(r) if !reg(r) => {
                let stem = r.split('.').next().unwrap_or(r);
                !UNIFORM_SPECIALS.contains(&stem)
            }
            Operand::Symbol(s) => local(s),
            Operand::Address(Some(base), _) => operand(base, reg, local),
            Operand::Vector(v) | Operand::List(v) => v.iter().any(|o| operand(o, reg, local)),
            _ => false,
        }
    }
    i.operands
        .iter()
        .any(|o| operand(o, is_register, per_thread))
}

/// Whether `i` is a conditional branch on a divergent predicate or index.
fn branches_on_divergent(i: &Instruction, divergent: &HashSet<String>) -> bool {
    match i.opcode.as_str() {
        "bra" => i.guard.as_ref().is_some_and(|g| divergent.contains(&g.reg)),
        "brx" => {
            i.guard.as_ref().is_some_and(|g| divergent.contains(&g.reg))
                || matches!(i.operands.first(), Some(Operand::Reg(r)) if divergent.contains(r))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::parser::parse;

    fn analyse(body: &str) -> Divergence {
        let src = format!(
            ".version 8.8\n.target sm_70\n.address_size 64\n.entry k(.param .u32 n)\n{{\n\
             .reg .pred %p<4>;\n.reg .b32 %r<9>;\n{body}\n}}"
        );
        let m = parse(&src).unwrap_or_else(|e| panic!("{e}"));
        let body = m.functions[0].body.clone().unwrap_or_default();
        let is_reg = |r: &str| r.starts_with('r') || r.starts_with('p');
        let live = Liveness::new(&body, &is_reg);
        Divergence::new(&body, &live, &is_reg, &|_| false)
    }

    #[test]
    fn a_loop_counter_driven_by_the_block_size_is_uniform_the_thread_index_is_not() {
        // The shared-memory reduction's loop: k = ntid / 2; while (k) { if (tid < k) ...; k >>= 1 }
        let d = analyse(
            "mov.u32 %r1, %ntid.x;\n mov.u32 %r2, %tid.x;\n shr.u32 %r3, %r1, 1;\n\
             $L1: setp.ge.u32 %p1, %r2, %r3;\n @%p1 bra $L2;\n add.u32 %r4, %r2, %r3;\n\
             $L2: bar.sync 0;\n shr.u32 %r3, %r3, 1;\n setp.ne.s32 %p2, %r3, 0;\n\
             @%p2 bra $L1;\n ret;",
        );
        for r in ["r1", "r3", "p2"] {
            assert!(d.is_uniform(r), "{r} should be uniform");
        }
        for r in ["r2", "p1", "r4"] {
            assert!(!d.is_uniform(r), "{r} should be divergent");
        }
    }

    #[test]
    fn values_chosen_by_a_divergent_branch_are_divergent_where_the_paths_meet() {
        // if (tid < 5) r3 = 1; else r3 = 2; bar.sync; use r3 — and r5 set only on one side
        // but not used after the join stays uniform.
        let d = analyse(
            "mov.u32 %r2, %tid.x;\n setp.lt.u32 %p1, %r2, 5;\n @%p1 bra $A;\n\
             mov.u32 %r3, 2;\n mov.u32 %r5, 7;\n bra $J;\n $A: mov.u32 %r3, 1;\n\
             $J: bar.sync 0;\n add.u32 %r4, %r3, 1;\n ret;",
        );
        assert!(!d.is_uniform("r3"));
        assert!(!d.is_uniform("r4"));
        assert!(d.is_uniform("r5"));
    }

    #[test]
    fn a_counter_of_a_loop_with_a_divergent_trip_count_is_divergent_after_it() {
        // for (i = 0; i < tid; i++); bar.sync; use i
        let d = analyse(
            "mov.u32 %r2, %tid.x;\n mov.u32 %r3, 0;\n $L: add.u32 %r3, %r3, 1;\n\
             setp.lt.u32 %p1, %r3, %r2;\n @%p1 bra $L;\n bar.sync 0;\n add.u32 %r4, %r3, 1;\n ret;",
        );
        assert!(!d.is_uniform("r3"));
        assert!(!d.is_uniform("r4"));
    }

    #[test]
    fn loads_other_than_parameters_are_divergent() {
        let d = analyse(
            "ld.param.u32 %r1, [n];\n ld.shared.u32 %r2, [%r1];\n mov.u32 %r3, %laneid;\n\
             mov.u32 %r4, %ctaid.x;\n ret;",
        );
        assert!(d.is_uniform("r1"));
        assert!(!d.is_uniform("r2"));
        assert!(!d.is_uniform("r3"));
        assert!(d.is_uniform("r4"));
    }
}
