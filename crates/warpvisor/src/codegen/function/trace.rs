//! Tracing (`KernelOptions::trace`): the records a traced kernel makes before an operator —
//! the basic block it starts and the addresses of memory accesses (`simt::blocks`).

use wasmparser::{Operator, ValType};

use super::marks::store_offset;
use super::FunctionEmitter;
use crate::simt::MemOp;

impl FunctionEmitter<'_, '_> {
    /// A traced kernel's records before operator `op` (`simt::blocks`): the block it starts,
    /// and the effective address (or the bulk operator's operands) of a memory access.
    pub(super) fn trace(&mut self, op: &Operator<'_>) {
        let Some(blocks) = self.ctx.blocks else {
            return;
        };
        let Some(fb) = blocks.function(self.func) else {
            return;
        };
        if let Some(local) = fb.local_at(self.op_index as u32) {
            let words: usize = fb.blocks[local].mem.iter().map(|m| m.words()).sum();
            let id = fb.first_id + local as u32;
            self.line(&format!("WV_TRACE_BLOCK({id}u, {words}u);"));
            self.trace_slot = 1;
        }
        let Some(mem) = MemOp::of(op) else {
            return;
        };
        let k = self.trace_slot;
        self.trace_slot += mem.words();
        let line = match mem {
            MemOp::Load { .. } => format!(
                "WV_TRACE_EA({k}, {}, {}u);",
                self.slot_below_top(0),
                memarg_offset(op)
            ),
            MemOp::Store { .. } => format!(
                "WV_TRACE_EA({k}, {}, {}u);",
                self.slot_below_top(1),
                memarg_offset(op)
            ),
            // memory.fill (d, value, n) and memory.init (d, s, n): d and n.
            MemOp::Fill | MemOp::Init => format!(
                "WV_TRACE_AT({k}, {}); WV_TRACE_AT({}, {});",
                self.slot_below_top(2),
                k + 1,
                self.slot_below_top(0)
            ),
            MemOp::Copy => format!(
                "WV_TRACE_AT({k}, {}); WV_TRACE_AT({}, {}); WV_TRACE_AT({}, {});",
                self.slot_below_top(2),
                k + 1,
                self.slot_below_top(1),
                k + 2,
                self.slot_below_top(0)
            ),
        };
        self.line(&line);
    }

    /// The slot `k` places below the operand stack's top.
    fn slot_below_top(&mut self, k: usize) -> String {
        let pos = self.stack.len().saturating_sub(1 + k);
        let ty = self.stack.get(pos).copied().unwrap_or(ValType::I32);
        self.slot(pos, ty)
    }
}

/// The static offset of a memory operator (0 for others).
fn memarg_offset(op: &Operator<'_>) -> u64 {
    use Operator as O;
    match op {
        O::I32Load { memarg }
        | O::I64Load { memarg }
        | O::F32Load { memarg }
        | O::F64Load { memarg }
        | O::I32Load8S { memarg }
        | O::I32Load8U { memarg }
        | O::I32Load16S { memarg }
        | O::I32Load16U { memarg }
        | O::I64Load8S { memarg }
        | O::I64Load8U { memarg }
        | O::I64Load16S { memarg }
        | O::I64Load16U { memarg }
        | O::I64Load32S { memarg }
        | O::I64Load32U { memarg } => memarg.offset,
        _ => store_offset(op).unwrap_or(0),
    }
}
