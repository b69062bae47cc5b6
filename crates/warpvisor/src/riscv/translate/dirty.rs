//! Which registers a function's locals hold newer values of than the register globals.
//!
//! A function keeps registers in locals and must store them into the register globals before
//! anything else may read them (a call, leaving the function). A register is *dirty* from an
//! instruction that writes it until it is stored or reloaded; only dirty registers need
//! storing. The sets are bit masks over the translator's 64 register numbers, computed per
//! block as a forward union over the control flow: a block may also be entered through the
//! dispatch, so every block's entry set includes what any jump through the dispatch carries.

use std::collections::BTreeMap;

use super::function::Registers;
use crate::riscv::decode::{Inst, Op};
use crate::riscv::program::written;

/// The bit of register `r`.
pub fn bit(r: u8) -> u64 {
    1u64 << (r & 63)
}

/// The mask of a set of registers.
pub fn mask<'r>(regs: impl IntoIterator<Item = &'r u8>) -> u64 {
    regs.into_iter().fold(0, |m, &r| m | bit(r))
}

/// The dirty set after `inst`, given the set before it. A call to a leaf (`leaves`, by start
/// address) stores the registers the leaf uses and reloads those it writes; any other call
/// stores every dirty register and reloads them all.
pub fn after(inst: &Inst, before: u64, leaves: &BTreeMap<u64, Registers>) -> u64 {
    let written = written(&inst.op).filter(|&r| r != 0).map_or(0, bit);
    match inst.op {
        Op::Jal { rd, offset } if rd != 0 => {
            match leaves.get(&inst.addr.wrapping_add(offset as u64)) {
                Some(leaf) => (before | written) & !mask(&leaf.used),
                None => 0,
            }
        }
        Op::Jalr { rd, .. } if rd != 0 => 0,
        _ => before | written,
    }
}

/// The dirty set at each block's start. `insts` are the function's instructions, `blocks`
/// each block's range of them (in address order), `index` each block's start address; a
/// branch carries the set it sees to its target's block (a block may branch out from its
/// middle), the end of a block that falls through carries its set to the next block.
/// `dispatched` is what jumps through the dispatch carry (every block may be entered that
/// way). Block 0 is entered with nothing dirty (the function reloads every register first).
pub fn entry_states(
    insts: &[Inst],
    blocks: &[std::ops::Range<usize>],
    index: &BTreeMap<u64, usize>,
    leaves: &BTreeMap<u64, Registers>,
    dispatched: u64,
) -> Vec<u64> {
    let mut entry = vec![dispatched; blocks.len()];
    let mut work: Vec<usize> = (0..blocks.len()).collect();
    while let Some(b) = work.pop() {
        let mut state = entry[b];
        let mut reach = |to: usize, state: u64, work: &mut Vec<usize>| {
            if entry[to] | state != entry[to] {
                entry[to] |= state;
                work.push(to);
            }
        };
        let mut falls = true;
        for inst in &insts[blocks[b].clone()] {
            if let Op::Branch { offset, .. } | Op::Jal { rd: 0, offset } = inst.op {
                if let Some(&to) = index.get(&inst.addr.wrapping_add(offset as u64)) {
                    reach(to, state, &mut work);
                }
            }
            state = after(inst, state, leaves);
            falls = !matches!(inst.op, Op::Jal { rd: 0, .. } | Op::Jalr { rd: 0, .. });
        }
        if falls && b + 1 < blocks.len() {
            reach(b + 1, state, &mut work);
        }
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::riscv::decode::{AluOp, Inst};

    fn inst(addr: u64, op: Op) -> Inst {
        Inst { addr, len: 4, op }
    }

    #[test]
    fn writes_make_dirty_and_calls_clean() {
        let leaves = BTreeMap::new();
        let add = |rd| Op::AluImm {
            op: AluOp::Add,
            word: false,
            rd,
            rs1: 0,
            imm: 1,
        };
        // Block 0: x5 = 1, then a call (everything stored and reloaded), then x6 = 1.
        // Block 1 (after block 0): x7 = 1.
        let insts = vec![
            inst(0, add(5)),
            inst(4, Op::Jal { rd: 1, offset: 100 }),
            inst(8, add(6)),
            inst(12, add(7)),
        ];
        let index: BTreeMap<u64, usize> = [(0, 0), (12, 1)].into_iter().collect();
        let states = entry_states(&insts, &[0..3, 3..4], &index, &leaves, 0);
        assert_eq!(states, vec![0, bit(6)]);
        // What the dispatch carries reaches every block.
        let states = entry_states(&insts, &[0..3, 3..4], &index, &leaves, bit(9));
        assert_eq!(states, vec![bit(9), bit(6) | bit(9)]);
        // A branch out of a block's middle carries what is dirty there, not at the block's end:
        // x5 = 1; branch to block 1; call; ... block 1 must see x5.
        let branchy = vec![
            inst(0, add(5)),
            inst(
                4,
                Op::Branch {
                    op: crate::riscv::decode::BranchOp::Eq,
                    rs1: 0,
                    rs2: 0,
                    offset: 8,
                },
            ),
            inst(8, Op::Jal { rd: 1, offset: 100 }),
            inst(12, add(7)),
        ];
        let states = entry_states(&branchy, &[0..3, 3..4], &index, &leaves, 0);
        assert_eq!(states, vec![0, bit(5)]);
        // A leaf using x5 takes only x5 out of the dirty set.
        let mut leaves = BTreeMap::new();
        leaves.insert(
            104,
            Registers {
                used: [5u8].into_iter().collect(),
                dirty: Default::default(),
            },
        );
        let s = insts[..2].iter().fold(bit(8), |s, i| after(i, s, &leaves));
        assert_eq!(s, bit(8) | bit(1));
    }
}
