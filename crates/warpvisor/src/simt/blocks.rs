//! The basic blocks of a module, found from WebAssembly's structured control flow: the unit a
//! traced VM records and the nodes of each function's control-flow graph.
//!
//! A block starts at a function's first operator and after every operator that transfers
//! control or can be jumped to: `loop` (its header is a branch target), `if`, `else`, `end`
//! (a join), `br`, `br_if`, `br_table`, `return`, `unreachable` and calls (the block after a
//! call is where the callee returns). The kernel emitter asks [`FunctionBlocks::block_at`]
//! where to record a block, so the trace and the analyzer's graph use the same ids.

use serde::{Deserialize, Serialize};
use wasmparser::Operator;

use super::sass::SassInstr;
use super::SimtError;
use crate::analysis::post_dominators;
use crate::frontend::Module;

/// What a traced memory operator records, per execution, after its block's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemOp {
    /// A load of `width` bytes: one word, the effective address.
    Load {
        /// Bytes read.
        width: u32,
    },
    /// A store of `width` bytes: one word, the effective address.
    Store {
        /// Bytes written.
        width: u32,
    },
    /// `memory.fill`: the destination and the length.
    Fill,
    /// `memory.copy`: the destination, the source and the length.
    Copy,
    /// `memory.init`: the destination and the length.
    Init,
}

impl MemOp {
    /// Trace words one execution records.
    pub fn words(self) -> usize {
        match self {
            MemOp::Load { .. } | MemOp::Store { .. } => 1,
            MemOp::Fill | MemOp::Init => 2,
            MemOp::Copy => 3,
        }
    }

    /// The memory operator `op` is, if it is one.
    pub fn of(op: &Operator<'_>) -> Option<MemOp> {
        use Operator as O;
        let load = |width| Some(MemOp::Load { width });
        let store = |width| Some(MemOp::Store { width });
        match op {
            O::I32Load8S { .. } | O::I32Load8U { .. } | O::I64Load8S { .. } => load(1),
            O::I64Load8U { .. } => load(1),
            O::I32Load16S { .. } | O::I32Load16U { .. } | O::I64Load16S { .. } => load(2),
            O::I64Load16U { .. } => load(2),
            O::I32Load { .. } | O::F32Load { .. } | O::I64Load32S { .. } => load(4),
            O::I64Load32U { .. } => load(4),
            O::I64Load { .. } | O::F64Load { .. } => load(8),
            O::I32Store8 { .. } | O::I64Store8 { .. } => store(1),
            O::I32Store16 { .. } | O::I64Store16 { .. } => store(2),
            O::I32Store { .. } | O::F32Store { .. } | O::I64Store32 { .. } => store(4),
            O::I64Store { .. } | O::F64Store { .. } => store(8),
            O::MemoryFill { .. } => Some(MemOp::Fill),
            O::MemoryCopy { .. } => Some(MemOp::Copy),
            O::MemoryInit { .. } => Some(MemOp::Init),
            _ => None,
        }
    }
}

/// How control leaves a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockEnd {
    /// To one of its successors in the function.
    Jump,
    /// A call of function `callee` (an import: a hypercall); the next block is the return.
    Call {
        /// The function called.
        callee: u32,
    },
    /// `call_indirect`: the callee is whichever entry block the trace shows next.
    CallIndirect,
    /// Out of the function (`return`, its final `end`, `unreachable`).
    Exit,
}

/// One basic block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasicBlock {
    /// Index of its first operator in the function body.
    pub first_op: u32,
    /// Operators that do work (structure markers — `block`, `loop`, `end`, `else`, `nop` —
    /// are not instructions).
    pub instructions: u32,
    /// Its memory operators in order.
    pub mem: Vec<MemOp>,
    /// Successors within the function; [`FunctionBlocks::exit`] is the virtual exit (none
    /// after `unreachable`: the lane traps).
    pub succ: Vec<u32>,
    /// How control leaves it.
    pub end: BlockEnd,
    /// Its instructions as SASS-like instructions (`simt accel-sim`), one per instruction.
    #[serde(default)]
    pub code: Vec<SassInstr>,
}

/// The control-flow graph of one function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionBlocks {
    /// Global id of its block 0 (ids of a function's blocks are consecutive).
    pub first_id: u32,
    /// Its blocks, in operator order; block 0 is the entry.
    pub blocks: Vec<BasicBlock>,
    /// Immediate post-dominator of each block (the exit: `blocks.len()`).
    pub ipdom: Vec<u32>,
    /// Whether the GPU backends compile it in continuation-passing style (it can reach an
    /// import): its calls, direct or indirect, of such functions that lie on a call cycle
    /// ([`FunctionBlocks::recursive`]) go through the kernel's trampoline; it calls the others
    /// as C functions.
    #[serde(default)]
    pub yields: bool,
    /// Whether it lies on a call cycle: a continuation that does is always called through the
    /// trampoline (devices without recursion could not compile the call otherwise).
    #[serde(default)]
    pub recursive: bool,
}

impl FunctionBlocks {
    /// The virtual exit node.
    pub fn exit(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// The global id of the block that starts at operator `op`, if one does.
    pub fn block_at(&self, op: u32) -> Option<u32> {
        self.local_at(op).map(|k| self.first_id + k as u32)
    }

    /// The index in this function of the block that starts at operator `op`, if one does.
    pub fn local_at(&self, op: u32) -> Option<usize> {
        self.blocks.binary_search_by_key(&op, |b| b.first_op).ok()
    }
}

/// Every defined function's blocks, with global ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockTable {
    /// Per function index; `None` for imports.
    pub funcs: Vec<Option<FunctionBlocks>>,
    /// `(function, local block)` of each global id.
    pub ids: Vec<(u32, u32)>,
}

impl BlockTable {
    /// The blocks of every function of `module`.
    pub fn of(module: &Module<'_>) -> Result<BlockTable, SimtError> {
        let mut funcs = Vec::with_capacity(module.funcs.len());
        let mut ids = Vec::new();
        let sigs = crate::analysis::Signatures::new(module);
        let graph = crate::analysis::CallGraph::new(module, &sigs);
        for f in 0..module.funcs.len() as u32 {
            let Some(body) = module.body(f) else {
                funcs.push(None);
                continue;
            };
            let first_id = ids.len() as u32;
            let mut fb = function_blocks(&body.ops, first_id).map_err(|why| SimtError::Module {
                function: module.func_display_name(f),
                why,
            })?;
            let mut code = super::sass::function_code(module, f, &body.ops).into_iter();
            let n = fb.blocks.len();
            for k in 0..n {
                let start = fb.blocks[k].first_op as usize;
                let end = fb
                    .blocks
                    .get(k + 1)
                    .map_or(body.ops.len(), |b| b.first_op as usize);
                let count = body.ops[start..end]
                    .iter()
                    .filter(|op| !is_marker(op))
                    .count();
                fb.blocks[k].code = code.by_ref().take(count).collect();
            }
            fb.yields = graph.yields.get(f as usize).copied().unwrap_or(false);
            fb.recursive = graph.recursive.get(f as usize).copied().unwrap_or(false);
            ids.extend((0..fb.blocks.len() as u32).map(|b| (f, b)));
            funcs.push(Some(fb));
        }
        if ids.len() > u32::MAX as usize / 2 {
            return Err(SimtError::Limit(format!(
                "{} basic blocks: more than a trace can name",
                ids.len()
            )));
        }
        Ok(BlockTable { funcs, ids })
    }

    /// Checks that the table is consistent (a trace file's header is user input): ids and
    /// blocks agree, successors and post-dominators name blocks of their function (or its
    /// exit), callees exist.
    pub fn validate(&self) -> Result<(), String> {
        if self.ids.len() > u32::MAX as usize / 2 {
            return Err("too many blocks".into());
        }
        for (gid, &(f, b)) in self.ids.iter().enumerate() {
            let fb = self
                .function(f)
                .ok_or_else(|| format!("block {gid} names function {f}, which has no blocks"))?;
            if b as usize >= fb.blocks.len() || fb.first_id as u64 + b as u64 != gid as u64 {
                return Err(format!("block {gid} is not block {b} of function {f}"));
            }
        }
        for (f, fb) in self.funcs.iter().enumerate() {
            let Some(fb) = fb else { continue };
            let exit = fb.exit();
            if fb.ipdom.len() != fb.blocks.len()
                || fb.first_id as usize + fb.blocks.len() > self.ids.len()
            {
                return Err(format!("function {f}: blocks and post-dominators disagree"));
            }
            for (k, b) in fb.blocks.iter().enumerate() {
                if b.succ.iter().any(|&s| s > exit) || fb.ipdom[k] > exit {
                    return Err(format!("function {f} block {k}: a successor out of range"));
                }
                if let BlockEnd::Call { callee } = b.end {
                    if callee as usize >= self.funcs.len() {
                        return Err(format!("function {f} block {k}: calls no function"));
                    }
                }
            }
        }
        Ok(())
    }

    /// The blocks of function `func`, if it has a body.
    pub fn function(&self, func: u32) -> Option<&FunctionBlocks> {
        self.funcs.get(func as usize).and_then(Option::as_ref)
    }

    /// `(function, local block)` of global id `id`.
    pub fn locate(&self, id: u32) -> Option<(u32, u32)> {
        self.ids.get(id as usize).copied()
    }

    /// The block behind global id `id`.
    pub fn block(&self, id: u32) -> Option<&BasicBlock> {
        let (f, b) = self.locate(id)?;
        self.function(f)?.blocks.get(b as usize)
    }
}

/// Whether `op` ends a block (the next operator starts one).
fn ends_block(op: &Operator<'_>) -> bool {
    use Operator as O;
    matches!(
        op,
        O::Loop { .. }
            | O::If { .. }
            | O::Else
            | O::End
            | O::Br { .. }
            | O::BrIf { .. }
            | O::BrTable { .. }
            | O::Return
            | O::Unreachable
            | O::Call { .. }
            | O::CallIndirect { .. }
            | O::ReturnCall { .. }
            | O::ReturnCallIndirect { .. }
    )
}

/// Operators that are structure, not work.
/// Whether `op` only marks structure (`block`, `loop`, `end`, `else`, `nop`): not an
/// instruction.
pub(super) fn is_marker(op: &Operator<'_>) -> bool {
    use Operator as O;
    matches!(
        op,
        O::Block { .. } | O::Loop { .. } | O::End | O::Else | O::Nop
    )
}

/// An open construct while matching `end`s.
struct Open {
    is_loop: bool,
    start: usize,
    else_at: Option<usize>,
}

/// For each `block`/`loop`/`if` (by its operator index): the index of its `else`, if any, and
/// of its `end`.
fn match_ends(ops: &[Operator<'_>]) -> Result<Vec<(Option<usize>, usize, bool)>, String> {
    use Operator as O;
    let mut out = vec![(None, usize::MAX, false); ops.len()];
    let mut open: Vec<Open> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op {
            O::Block { .. } | O::If { .. } | O::Loop { .. } => open.push(Open {
                is_loop: matches!(op, O::Loop { .. }),
                start: i,
                else_at: None,
            }),
            O::Else => match open.last_mut() {
                Some(o) => o.else_at = Some(i),
                None => return Err(format!("`else` at operator {i} outside an `if`")),
            },
            O::End => {
                // The function body's own `end` closes nothing here.
                if let Some(o) = open.pop() {
                    out[o.start] = (o.else_at, i, o.is_loop);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The blocks of one body, ids from `first_id`.
fn function_blocks(ops: &[Operator<'_>], first_id: u32) -> Result<FunctionBlocks, String> {
    use Operator as O;
    let n_ops = ops.len();
    let ends = match_ends(ops)?;
    // Leaders.
    let mut leader = vec![false; n_ops];
    if n_ops > 0 {
        leader[0] = true;
    }
    for (i, op) in ops.iter().enumerate() {
        if ends_block(op) && i + 1 < n_ops {
            leader[i + 1] = true;
        }
    }
    let starts: Vec<usize> = (0..n_ops).filter(|&i| leader[i]).collect();
    let mut block_of_op = vec![0u32; n_ops];
    for (b, &s) in starts.iter().enumerate() {
        let e = starts.get(b + 1).copied().unwrap_or(n_ops);
        block_of_op[s..e].fill(b as u32);
    }
    let exit = starts.len() as u32;
    // The block an operator index starts (past the end: the exit).
    let at = |i: usize| -> u32 {
        if i >= n_ops {
            exit
        } else {
            block_of_op[i]
        }
    };
    // Branch targets: the control stack of (construct start) while walking.
    let mut blocks = Vec::with_capacity(starts.len());
    let mut stack: Vec<usize> = Vec::new();
    let mut b = 0usize;
    let mut current = BasicBlock {
        first_op: 0,
        instructions: 0,
        mem: Vec::new(),
        succ: Vec::new(),
        end: BlockEnd::Jump,
        code: Vec::new(),
    };
    // Where a branch to relative depth `d` goes.
    let target = |stack: &[usize], d: u32| -> Result<u32, String> {
        let Some(k) = stack.len().checked_sub(1 + d as usize) else {
            return Ok(exit); // the function's own label: a return
        };
        let start = stack[k];
        let (_, end, is_loop) = ends[start];
        Ok(if is_loop { at(start + 1) } else { at(end + 1) })
    };
    for (i, op) in ops.iter().enumerate() {
        if i > 0 && leader[i] {
            blocks.push(std::mem::replace(
                &mut current,
                BasicBlock {
                    first_op: i as u32,
                    instructions: 0,
                    mem: Vec::new(),
                    succ: Vec::new(),
                    end: BlockEnd::Jump,
                    code: Vec::new(),
                },
            ));
            b += 1;
        }
        if !is_marker(op) {
            current.instructions += 1;
        }
        if let Some(m) = MemOp::of(op) {
            current.mem.push(m);
        }
        let last = i + 1 >= n_ops || leader[i + 1];
        match op {
            O::Block { .. } | O::Loop { .. } | O::If { .. } => stack.push(i),
            O::End => {
                stack.pop();
            }
            _ => {}
        }
        if !last {
            continue;
        }
        let next = at(i + 1);
        let (succ, end) = match op {
            O::Br { relative_depth } => (vec![target(&stack, *relative_depth)?], BlockEnd::Jump),
            O::BrIf { relative_depth } => {
                (vec![target(&stack, *relative_depth)?, next], BlockEnd::Jump)
            }
            O::BrTable { targets } => {
                let mut t = vec![target(&stack, targets.default())?];
                for d in targets.targets() {
                    t.push(target(&stack, d.map_err(|e| e.to_string())?)?);
                }
                (t, BlockEnd::Jump)
            }
            O::If { .. } => {
                let (else_at, end, _) = ends[i];
                let other = match else_at {
                    Some(e) => at(e + 1),
                    None => at(end + 1),
                };
                (vec![next, other], BlockEnd::Jump)
            }
            O::Else => {
                // The `if` is the innermost open construct: its `end` is the join.
                let start = *stack.last().ok_or("`else` outside an `if`")?;
                (vec![at(ends[start].1 + 1)], BlockEnd::Jump)
            }
            O::Return | O::ReturnCall { .. } | O::ReturnCallIndirect { .. } => {
                (vec![exit], BlockEnd::Exit)
            }
            // A trap: the lane ends here. No edge to the exit, so that a branch to a panic
            // (Rust's bounds checks) does not move its reconvergence point to the function's
            // end — as a GPU compiler treats a noreturn trap.
            O::Unreachable => (vec![], BlockEnd::Exit),
            O::End if i + 1 >= n_ops => (vec![exit], BlockEnd::Exit),
            O::Call { function_index } => (
                vec![next],
                BlockEnd::Call {
                    callee: *function_index,
                },
            ),
            O::CallIndirect { .. } => (vec![next], BlockEnd::CallIndirect),
            _ => (vec![next], BlockEnd::Jump),
        };
        let mut succ = succ;
        succ.sort_unstable();
        succ.dedup();
        current.succ = succ;
        current.end = end;
    }
    if n_ops > 0 {
        blocks.push(current);
    }
    debug_assert_eq!(blocks.len(), starts.len());
    let _ = b;
    let graph: Vec<Vec<usize>> = blocks
        .iter()
        .map(|bb| bb.succ.iter().map(|&s| s as usize).collect())
        .collect();
    let ipdom = post_dominators(&graph, blocks.len())
        .into_iter()
        .map(|d| d as u32)
        .collect();
    Ok(FunctionBlocks {
        first_id,
        blocks,
        ipdom,
        yields: false,
        recursive: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(wat: &str) -> BlockTable {
        let bytes = wat::parse_str(wat).unwrap();
        let module = crate::frontend::load(&bytes).unwrap();
        BlockTable::of(&module).unwrap()
    }

    #[test]
    fn an_if_else_is_a_diamond_joined_after_its_end() {
        let t = table(
            r#"(module (func (param i32) (result i32)
                 local.get 0
                 if (result i32) i32.const 1 else i32.const 2 end
                 i32.const 3 i32.add))"#,
        );
        let f = t.function(0).unwrap();
        // 0: local.get, if | 1: i32.const 1, else | 2: i32.const 2, end | 3: rest, end
        assert_eq!(f.blocks.len(), 4);
        assert_eq!(f.blocks[0].succ, vec![1, 2]);
        assert_eq!(f.blocks[1].succ, vec![3]);
        assert_eq!(f.blocks[2].succ, vec![3]);
        assert_eq!(f.blocks[3].succ, vec![4]);
        assert_eq!(f.ipdom[0], 3);
        assert_eq!(f.blocks[0].instructions, 2);
        assert_eq!(f.blocks[3].instructions, 2);
    }

    #[test]
    fn a_loop_header_is_the_target_of_its_back_edge() {
        let t = table(
            r#"(module (memory 1) (func (param i32)
                 loop
                   local.get 0 i32.load drop
                   local.get 0 i32.const 1 i32.sub local.tee 0
                   br_if 0
                 end))"#,
        );
        let f = t.function(0).unwrap();
        // 0: loop | 1: body, br_if | 2: the loop's end | 3: the function's end
        assert_eq!(f.blocks.len(), 4);
        assert_eq!(f.blocks[1].succ, vec![1, 2]);
        assert_eq!(f.blocks[1].mem, vec![MemOp::Load { width: 4 }]);
        assert_eq!(f.ipdom[1], 2);
        assert_eq!(f.block_at(1), Some(1));
        assert_eq!(f.block_at(2), None);
        assert_eq!(f.block_at(9), Some(2));
        assert_eq!(f.block_at(10), Some(3));
        assert_eq!(f.blocks[3].end, BlockEnd::Exit);
    }

    #[test]
    fn a_call_ends_its_block_and_the_return_starts_the_next() {
        let t = table(r#"(module (func $g) (func call $g call $g))"#);
        let f = t.function(1).unwrap();
        assert_eq!(f.blocks.len(), 3);
        assert_eq!(f.blocks[0].end, BlockEnd::Call { callee: 0 });
        assert_eq!(f.blocks[2].end, BlockEnd::Exit);
        assert_eq!(f.first_id, 1);
        assert_eq!(t.locate(3), Some((1, 2)));
    }
}
