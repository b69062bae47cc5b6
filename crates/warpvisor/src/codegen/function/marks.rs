//! Dirty-page marks shared by the stores of a basic block (guard regions on `cpu`).
//!
//! Every store marks the 4 KiB page it starts in (`WV_DIRTY`), so that a reset restores only
//! what a VM wrote. Stores through the same base value — `local.get $fp` with the local not
//! set in between, as compiled Rust addresses its stack frame — mostly land within a few
//! hundred bytes of each other. The first such store of a basic block marks the pages 2 KiB
//! below and above its address (`WV_STORE_SPAN`); a later store of the block through the same
//! base at an offset less than 2 KiB away is covered and marks nothing (`WV_STORE_MARKED`).
//! A mark made earlier in the block has run whenever the later store runs, because the block
//! has no entry in between: every operator that is not straight-line code (control flow,
//! calls, bulk memory) forgets the block's marks. A span costs two marks, so a store makes one
//! only when a later store of its block may use the same base ([`StoreMarks::plan`] looks
//! ahead once over the function, and also notes where blocks end).

use std::collections::{HashMap, HashSet};

use wasmparser::Operator;

use crate::layout::GUARD_BYTES;

/// Bytes a span mark covers on either side of its store's address: it marks the pages of
/// `ea - REACH` and `ea + REACH - 1`, two pages at most REACH * 2 = 4 KiB apart, so every
/// page holding an address of `[ea - REACH, ea + REACH)`.
const REACH: u64 = 2048;

/// How one store marks its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StoreMark {
    /// The store's own mark (`WV_STORE`).
    Own,
    /// Marks the pages within 2 KiB of its address (`WV_STORE_SPAN`).
    Span,
    /// An earlier span of the block covers it (`WV_STORE_MARKED`).
    Covered,
}

impl StoreMark {
    /// The prelude macro storing with this kind of mark.
    pub(super) fn macro_name(self) -> &'static str {
        match self {
            StoreMark::Own => "WV_STORE",
            StoreMark::Span => "WV_STORE_SPAN",
            StoreMark::Covered => "WV_STORE_MARKED",
        }
    }
}

/// The base values the current basic block's stores have marked spans for.
pub(super) struct StoreMarks {
    enabled: bool,
    /// How many times each local has been set so far: a base is a local at a version.
    versions: Vec<u32>,
    /// Operand-stack positions holding a local's value, with the local and its version.
    origins: HashMap<usize, (u32, u32)>,
    /// Spans marked in this block: base → the static offset the span starts at.
    spans: HashMap<(u32, u32), u64>,
    /// For each store (by operator index): the locals that a later `local.get` of its block
    /// reads, unchanged since the store, with a store after that get.
    reused: HashMap<usize, Vec<u32>>,
    /// For each operator (by index): whether it ends the basic block.
    ends_block: Vec<bool>,
}

/// Whether `op` keeps the basic block going (straight-line code, given whether it has a
/// numeric template).
fn keeps_block(op: &Operator<'_>, straight_line: bool) -> bool {
    use Operator as O;
    straight_line
        || matches!(
            op,
            O::Nop
                | O::Drop
                | O::Select
                | O::TypedSelect { .. }
                | O::LocalGet { .. }
                | O::LocalSet { .. }
                | O::LocalTee { .. }
                | O::GlobalGet { .. }
                | O::GlobalSet { .. }
        )
}

impl StoreMarks {
    /// Marks for a function with `locals` locals; `enabled` only with guard regions, where a
    /// span's far page always lies in the VM's own slice of the dirty-page map.
    pub(super) fn new(locals: usize, enabled: bool) -> Self {
        StoreMarks {
            enabled,
            versions: vec![0; locals],
            origins: HashMap::new(),
            spans: HashMap::new(),
            reused: HashMap::new(),
            ends_block: Vec::new(),
        }
    }

    /// Looks ahead over the function's operators once: where basic blocks end, and for every
    /// store the locals a later store of its block may use as base (a heuristic only: a span
    /// is sound whatever it says). `straight_line(op)`: whether `op` has a numeric template.
    pub(super) fn plan(
        &mut self,
        ops: &[Operator<'_>],
        straight_line: impl Fn(&Operator<'_>) -> bool,
    ) {
        if !self.enabled {
            return;
        }
        self.ends_block = ops
            .iter()
            .map(|op| !keeps_block(op, straight_line(op)))
            .collect();
        let mut gets: HashSet<u32> = HashSet::new();
        let mut store_after = false;
        for (i, op) in ops.iter().enumerate().rev() {
            if self.ends_block[i] {
                gets.clear();
                store_after = false;
                continue;
            }
            match op {
                Operator::LocalGet { local_index } if store_after => {
                    gets.insert(*local_index);
                }
                Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                    gets.remove(local_index);
                }
                _ if store_offset(op).is_some() => {
                    if !gets.is_empty() {
                        self.reused.insert(i, gets.iter().copied().collect());
                    }
                    store_after = true;
                }
                _ => {}
            }
        }
    }

    /// Operator number `index` is about to be emitted: anything but straight-line code ends
    /// the block (as [`StoreMarks::plan`] found).
    pub(super) fn before(&mut self, index: usize) {
        if self.ends_block.get(index).copied().unwrap_or(true) {
            self.origins.clear();
            self.spans.clear();
        }
    }

    /// A value was pushed at stack position `pos`.
    pub(super) fn pushed(&mut self, pos: usize) {
        self.origins.remove(&pos);
    }

    /// `local.get local` pushed its value at `pos`.
    pub(super) fn local_get(&mut self, pos: usize, local: u32) {
        if !self.enabled {
            return;
        }
        if let Some(&v) = self.versions.get(local as usize) {
            self.origins.insert(pos, (local, v));
        }
    }

    /// `local.set` or `local.tee` of `local`.
    pub(super) fn local_set(&mut self, local: u32) {
        if let Some(v) = self.versions.get_mut(local as usize) {
            *v = v.wrapping_add(1);
        }
    }

    /// How store operator number `index`, whose address is at stack position `addr`, with
    /// static offset `offset`, marks.
    pub(super) fn store(&mut self, index: usize, addr: usize, offset: u64) -> StoreMark {
        let Some(&base) = self.origins.get(&addr).filter(|_| self.enabled) else {
            return StoreMark::Own;
        };
        if let Some(&lo) = self.spans.get(&base) {
            if offset.abs_diff(lo) < REACH {
                return StoreMark::Covered;
            }
        }
        // ea + REACH stays below 4 GiB + GUARD_BYTES: inside the VM's slice of the map.
        let reused = self.reused.get(&index).is_some_and(|l| l.contains(&base.0));
        if !reused || offset + REACH + 8 > GUARD_BYTES {
            return StoreMark::Own;
        }
        self.spans.insert(base, offset);
        StoreMark::Span
    }
}

/// The static offset of a store operator.
pub(super) fn store_offset(op: &Operator<'_>) -> Option<u64> {
    use Operator as O;
    match op {
        O::I32Store { memarg }
        | O::I64Store { memarg }
        | O::F32Store { memarg }
        | O::F64Store { memarg }
        | O::I32Store8 { memarg }
        | O::I32Store16 { memarg }
        | O::I64Store8 { memarg }
        | O::I64Store16 { memarg }
        | O::I64Store32 { memarg } => Some(memarg.offset),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_finds_later_stores_through_the_same_local_in_the_block() {
        use wasmparser::{MemArg, MemArgTarget};
        let memarg = MemArg {
            align: 2,
            max_align: 2,
            offset: 0,
            target: MemArgTarget::Memory(0),
            ordering: None,
        };
        let ops = [
            Operator::LocalGet { local_index: 0 },
            Operator::I32Const { value: 1 },
            Operator::I32Store { memarg },
            Operator::LocalGet { local_index: 0 },
            Operator::I32Const { value: 2 },
            Operator::I32Store { memarg },
            Operator::LocalGet { local_index: 1 },
            Operator::I32Const { value: 3 },
            Operator::I32Store { memarg },
            Operator::End,
            Operator::LocalGet { local_index: 1 },
            Operator::I32Const { value: 4 },
            Operator::I32Store { memarg },
        ];
        let mut m = StoreMarks::new(2, true);
        m.plan(&ops, |op| crate::codegen::numeric::template(op).is_some());
        assert_eq!(m.reused.get(&2).map(|l| l.contains(&0)), Some(true));
        assert!(m.reused.get(&5).is_none_or(|l| !l.contains(&0)));
        assert!(
            !m.reused.contains_key(&8),
            "the block ends before the next get"
        );
    }

    #[test]
    fn a_span_covers_stores_through_the_same_local_until_it_is_set_or_the_block_ends() {
        let mut m = StoreMarks::new(2, true);
        // Every store (index 0 here) has a later store through local 1 in its block.
        m.reused.insert(0, vec![1]);
        m.local_get(0, 1);
        assert_eq!(m.store(0, 0, 16), StoreMark::Span);
        m.local_get(0, 1);
        assert_eq!(m.store(0, 0, 24), StoreMark::Covered);
        assert_eq!(m.store(0, 0, 16 + 2047), StoreMark::Covered);
        assert_eq!(m.store(0, 0, 8), StoreMark::Covered, "below, within reach");
        m.local_get(0, 1);
        assert_eq!(
            m.store(0, 0, 16 + 2048),
            StoreMark::Span,
            "beyond the reach"
        );
        // Setting the local makes its value another base.
        m.local_set(1);
        m.local_get(0, 1);
        assert_eq!(m.store(0, 0, 9), StoreMark::Span);
        // A value computed at that position has no base.
        m.pushed(0);
        assert_eq!(m.store(0, 0, 9), StoreMark::Own);
        // The block ends at control flow.
        m.local_get(0, 1);
        m.before(0);
        m.local_get(0, 1);
        assert_eq!(m.store(0, 0, 9), StoreMark::Span);
        // Offsets near the guard's end mark on their own; disabled marks are always own.
        assert_eq!(m.store(0, 0, GUARD_BYTES - 100), StoreMark::Own);
        // Without a later store through the same local, a store marks on its own.
        m.reused.clear();
        m.local_set(1);
        m.local_get(0, 1);
        assert_eq!(m.store(0, 0, 9), StoreMark::Own);
        let mut off = StoreMarks::new(1, false);
        off.local_get(0, 0);
        assert_eq!(off.store(0, 0, 0), StoreMark::Own);
    }
}
