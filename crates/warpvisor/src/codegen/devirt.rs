//! `call_indirect`s made direct. Two kinds of sites qualify:
//!
//! - a site whose slot is a constant (`i32.const k` just before it) of a table nothing can
//!   change after instantiation — not imported, not exported, never the target of `table.set`,
//!   `table.fill`, `table.grow`, `table.copy` or `table.init` — becomes a plain `call` of the
//!   function the active element segments leave in slot `k`, when its type is the site's
//!   (otherwise the site keeps the generic path, which traps exactly as before);
//! - with a call profile (`profile/mod.rs`), a site's hot targets are called directly behind a
//!   guard (`callee == F`) after the usual table check, as VectorVisor's profile-guided
//!   devirtualisation does: the C compiler can then inline them, and a continuation skips the
//!   table of callee kinds.

use wasmparser::Operator;

use super::ModuleContext;
use crate::frontend::{ConstExpr, ExportKind, Module, SegmentMode};
use crate::profile::SiteCount;

/// Most targets of one site called directly.
pub const MAX_HOT_TARGETS: usize = 2;
/// Least share of a site's calls (in percent) that makes a target hot.
pub const HOT_SHARE_PERCENT: u64 = 10;

/// The function in every slot of the tables that never change after instantiation.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConstantSlots {
    /// Per table: `None` when it may change, else each slot's function (`None`: null, or a
    /// reference only known at instantiation).
    tables: Vec<Option<Vec<Option<u32>>>>,
}

impl ConstantSlots {
    /// The constant tables of `module`.
    pub fn of(module: &Module<'_>) -> Self {
        let mut fixed: Vec<bool> = module.tables.iter().map(|t| t.import.is_none()).collect();
        for e in &module.exports {
            if let ExportKind::Table(t) = e.kind {
                if let Some(x) = fixed.get_mut(t as usize) {
                    *x = false;
                }
            }
        }
        for body in &module.bodies {
            for op in &body.ops {
                let changed = match op {
                    Operator::TableSet { table }
                    | Operator::TableFill { table }
                    | Operator::TableGrow { table }
                    | Operator::TableInit { table, .. } => *table,
                    Operator::TableCopy { dst_table, .. } => *dst_table,
                    _ => continue,
                };
                if let Some(x) = fixed.get_mut(changed as usize) {
                    *x = false;
                }
            }
        }
        let mut tables: Vec<Option<Vec<Option<u32>>>> = module
            .tables
            .iter()
            .zip(&fixed)
            .map(|(t, &fixed)| {
                // Tables past this size are never fully constant-folded: such a module is
                // unusual and the slots would only cost memory here.
                (fixed && t.initial <= 1 << 20).then(|| vec![None; t.initial as usize])
            })
            .collect();
        for seg in &module.elems {
            let SegmentMode::Active { target, offset } = &seg.mode else {
                continue;
            };
            let Some(Some(slots)) = tables.get_mut(*target as usize) else {
                continue;
            };
            let ConstExpr::I32(at) = offset else {
                // An offset only instantiation knows: the table's slots are unknown.
                tables[*target as usize] = None;
                continue;
            };
            let at = *at as u32 as usize;
            if at
                .checked_add(seg.items.len())
                .is_none_or(|end| end > slots.len())
            {
                continue; // instantiation traps: nothing runs
            }
            for (k, item) in seg.items.iter().enumerate() {
                slots[at + k] = match item {
                    ConstExpr::RefFunc(f) => Some(*f),
                    _ => None,
                };
            }
        }
        ConstantSlots { tables }
    }

    /// The function always in slot `index` of `table`, if the table never changes.
    pub fn target(&self, table: u32, index: u32) -> Option<u32> {
        self.tables
            .get(table as usize)?
            .as_ref()?
            .get(index as usize)
            .copied()
            .flatten()
    }
}

/// The slot a `call_indirect` at operator `op_index` of a body with operators `ops` calls
/// when it is a constant: the operator before it pushes it.
pub(crate) fn constant_index(ops: &[Operator<'_>], op_index: usize) -> Option<u32> {
    match ops.get(op_index.checked_sub(1)?)? {
        Operator::I32Const { value } => Some(*value as u32),
        _ => None,
    }
}

/// The hot targets of a profiled `call_indirect` site of canonical signature `sig` that can
/// be called as plain C functions (fastcalls of that signature), most called first.
pub(crate) fn hot_targets(ctx: &ModuleContext<'_, '_>, site: &SiteCount, sig: u32) -> Vec<u32> {
    site.targets
        .iter()
        .filter(|t| t.calls.saturating_mul(100) >= site.calls.saturating_mul(HOT_SHARE_PERCENT))
        .map(|t| t.func)
        .filter(|&f| {
            (f as usize) < ctx.module.funcs.len()
                && (f as usize) >= ctx.module.imported_funcs
                && !ctx.graph.yields[f as usize]
                && ctx.sigs.of_func(ctx.module, f) == sig
        })
        .take(MAX_HOT_TARGETS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(wat: &str) -> ConstantSlots {
        let bin = wat::parse_str(wat).unwrap();
        ConstantSlots::of(&crate::frontend::load(&bin).unwrap())
    }

    #[test]
    fn later_segments_win_and_changing_tables_have_no_constant_slots() {
        let s = slots(
            r#"(module (table 4 funcref)
                 (elem (i32.const 0) $a $b) (elem (i32.const 1) $a)
                 (func $a) (func $b))"#,
        );
        assert_eq!(
            (
                s.target(0, 0),
                s.target(0, 1),
                s.target(0, 2),
                s.target(0, 9)
            ),
            (Some(0), Some(0), None, None)
        );
        for changing in [
            r#"(module (table (export "t") 2 funcref) (elem (i32.const 0) $a) (func $a))"#,
            r#"(module (table 2 funcref) (elem (i32.const 0) $a)
                 (func $a (table.set (i32.const 0) (ref.null func))))"#,
            r#"(module (table 2 funcref) (elem (i32.const 0) $a)
                 (func $a (drop (table.grow (ref.null func) (i32.const 1)))))"#,
            r#"(module (table 2 funcref) (elem (i32.const 0) $a) (elem $e func $a)
                 (func $a (table.init $e (i32.const 0) (i32.const 0) (i32.const 1))))"#,
        ] {
            assert_eq!(slots(changing).target(0, 0), None, "{changing}");
        }
    }
}
