//! Each WebAssembly operator as one SASS-like instruction, for Accel-Sim traces
//! ([`super::accel_sim`]): an opcode from NVIDIA's Volta set that does the same kind of work,
//! and registers from the operand stack (the stack slot an operator reads or writes is the
//! register its C code uses, `sN`) and the locals.
//!
//! One operator is one instruction (ThreadFuser splits x86 instructions into RISC ones; a
//! WebAssembly operator already is one). Integer division, which SASS spells as a sequence,
//! stays one `IMAD`.

use serde::{Deserialize, Serialize};
use wasmparser::{BlockType, Operator};

use crate::codegen::numeric;
use crate::frontend::Module;

/// Registers the operand stack maps to (`R1`...).
const STACK_REGS: u32 = 120;
/// Registers the locals map to (after the stack's).
const LOCAL_REGS: u32 = 120;

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SassInstr {
    /// Opcode; memory operators as `LD`/`ST` plus their width suffix (`LD.U8`, `ST.64`): the
    /// writer makes them global (`LDG.E`) or local (`LDL`) by the region they touch.
    #[serde(rename = "o")]
    pub opcode: String,
    /// Destination registers.
    #[serde(rename = "d", default, skip_serializing_if = "Vec::is_empty")]
    pub dst: Vec<u8>,
    /// Source registers.
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    pub src: Vec<u8>,
}

impl SassInstr {
    /// Whether it accesses memory (one of its block's [`super::MemOp`]s, in order).
    pub fn is_memory(&self) -> bool {
        self.opcode.starts_with("LD") || self.opcode.starts_with("ST")
    }
}

fn stack_reg(slot: u32) -> u8 {
    (1 + slot % STACK_REGS) as u8
}

fn local_reg(local: u32) -> u8 {
    (1 + STACK_REGS + local % LOCAL_REGS) as u8
}

/// The instruction of every operator of function `func` that is one (structure markers are
/// not), in order.
pub fn function_code(module: &Module<'_>, func: u32, ops: &[Operator<'_>]) -> Vec<SassInstr> {
    let mut out = Vec::with_capacity(ops.len());
    // Operand-stack height, and per open construct its height below its parameters with its
    // parameter and result counts.
    let mut h: u32 = 0;
    let mut ctrl: Vec<(u32, u32, u32)> = Vec::new();
    let block_arity = |bt: &BlockType| -> (u32, u32) {
        match bt {
            BlockType::Empty => (0, 0),
            BlockType::Type(_) => (0, 1),
            BlockType::FuncType(t) => module.types.get(*t as usize).map_or((0, 0), |f| {
                (f.params().len() as u32, f.results().len() as u32)
            }),
        }
    };
    let _ = func;
    for op in ops {
        use Operator as O;
        // (opcode, values popped, values pushed, locals read, local written)
        let (opcode, pops, pushes, local_src, local_dst): (
            &str,
            u32,
            u32,
            Option<u32>,
            Option<u32>,
        ) = match op {
            O::Block { blockty } | O::Loop { blockty } => {
                let (p, r) = block_arity(blockty);
                ctrl.push((h.saturating_sub(p), p, r));
                continue;
            }
            O::If { blockty } => {
                let (p, r) = block_arity(blockty);
                h = h.saturating_sub(1);
                ctrl.push((h.saturating_sub(p), p, r));
                out.push(SassInstr {
                    opcode: "BRA".into(),
                    dst: vec![],
                    src: vec![stack_reg(h)],
                });
                continue;
            }
            O::Else => {
                if let Some(&(base, p, _)) = ctrl.last() {
                    h = base + p;
                }
                continue;
            }
            O::End => {
                if let Some((base, _, r)) = ctrl.pop() {
                    h = base + r;
                }
                continue;
            }
            O::Nop => continue,
            O::Br { .. } | O::Unreachable => ("BRA", 0, 0, None, None),
            O::BrIf { .. } | O::BrTable { .. } => ("BRA", 1, 0, None, None),
            O::Return => ("RET.REL.NODEC", 0, 0, None, None),
            O::Call { function_index } => {
                let ty = module.func_type(*function_index);
                (
                    "CALL.REL.NOINC",
                    ty.params().len() as u32,
                    ty.results().len() as u32,
                    None,
                    None,
                )
            }
            O::CallIndirect { type_index, .. } => {
                let (p, r) = module.types.get(*type_index as usize).map_or((0, 0), |f| {
                    (f.params().len() as u32, f.results().len() as u32)
                });
                ("CALL.REL.NOINC", p + 1, r, None, None)
            }
            O::LocalGet { local_index } => ("MOV", 0, 1, Some(*local_index), None),
            O::LocalSet { local_index } => ("MOV", 1, 0, None, Some(*local_index)),
            O::LocalTee { local_index } => ("MOV", 1, 1, None, Some(*local_index)),
            O::GlobalGet { .. } => ("MOV", 0, 1, None, None),
            O::GlobalSet { .. } => ("MOV", 1, 0, None, None),
            O::Drop => ("NOP", 1, 0, None, None),
            O::Select | O::TypedSelect { .. } => ("SEL", 3, 1, None, None),
            O::MemorySize { .. } => ("MOV", 0, 1, None, None),
            O::MemoryGrow { .. } => ("MOV", 1, 1, None, None),
            O::MemoryFill { .. } | O::MemoryCopy { .. } | O::MemoryInit { .. } => {
                ("ST.128", 3, 0, None, None)
            }
            O::RefNull { .. } | O::RefFunc { .. } | O::TableSize { .. } => {
                ("MOV", 0, 1, None, None)
            }
            O::RefIsNull | O::TableGet { .. } => ("MOV", 1, 1, None, None),
            O::TableSet { .. } => ("MOV", 2, 0, None, None),
            O::TableGrow { .. } => ("MOV", 2, 1, None, None),
            O::TableFill { .. } | O::TableCopy { .. } | O::TableInit { .. } => {
                ("MOV", 3, 0, None, None)
            }
            other => match numeric::template(other) {
                Some(t) => (
                    numeric_opcode(other),
                    t.inputs.len() as u32,
                    u32::from(t.output.is_some()),
                    None,
                    None,
                ),
                None => ("NOP", 0, 0, None, None),
            },
        };
        let base = h.saturating_sub(pops);
        let mut src: Vec<u8> = (base..h).map(stack_reg).collect();
        if let Some(l) = local_src {
            src.push(local_reg(l));
        }
        let mut dst: Vec<u8> = (base..base + pushes).map(stack_reg).collect();
        if let Some(l) = local_dst {
            dst.push(local_reg(l));
        }
        h = base + pushes;
        out.push(SassInstr {
            opcode: opcode.to_string(),
            dst,
            src,
        });
    }
    out
}

/// The SASS opcode doing the work of numeric or memory operator `op`.
fn numeric_opcode(op: &Operator<'_>) -> &'static str {
    use super::MemOp;
    if let Some(m) = MemOp::of(op) {
        let signed = matches!(
            op,
            Operator::I32Load8S { .. }
                | Operator::I64Load8S { .. }
                | Operator::I32Load16S { .. }
                | Operator::I64Load16S { .. }
        );
        return match (m, signed) {
            (MemOp::Load { width: 1 }, false) => "LD.U8",
            (MemOp::Load { width: 1 }, true) => "LD.S8",
            (MemOp::Load { width: 2 }, false) => "LD.U16",
            (MemOp::Load { width: 2 }, true) => "LD.S16",
            (MemOp::Load { width: 8 }, _) => "LD.64",
            (MemOp::Load { .. }, _) => "LD",
            (MemOp::Store { width: 1 }, _) => "ST.U8",
            (MemOp::Store { width: 2 }, _) => "ST.U16",
            (MemOp::Store { width: 8 }, _) => "ST.64",
            (MemOp::Store { .. }, _) => "ST",
            _ => "ST.128",
        };
    }
    let name = format!("{op:?}");
    let name = name.split([' ', '{', '(']).next().unwrap_or("");
    let float = name.starts_with("F32");
    let double = name.starts_with("F64");
    let has = |s: &str| name.contains(s);
    if name.ends_with("Const") || has("Reinterpret") || has("Wrap") || has("Extend32") {
        return "MOV";
    }
    if has("Convert") {
        return "I2F";
    }
    if has("Trunc") && (name.starts_with('I')) {
        return "F2I";
    }
    if has("Promote") || has("Demote") {
        return "F2F";
    }
    if float || double {
        return match () {
            _ if has("Add") || has("Sub") => {
                if double {
                    "DADD"
                } else {
                    "FADD"
                }
            }
            _ if has("Mul") => {
                if double {
                    "DMUL"
                } else {
                    "FMUL"
                }
            }
            _ if has("Div") || has("Sqrt") => "MUFU",
            _ if has("Min") || has("Max") => "FMNMX",
            _ if has("Ceil") || has("Floor") || has("Trunc") || has("Nearest") => "FRND",
            _ if has("Abs") || has("Neg") || has("Copysign") => "LOP3",
            _ => {
                if double {
                    "DSETP"
                } else {
                    "FSETP"
                }
            }
        };
    }
    match () {
        _ if has("Add") || has("Sub") => "IADD3",
        _ if has("Mul") || has("Div") || has("Rem") => "IMAD",
        _ if has("And") || has("Or") || has("Xor") => "LOP3",
        _ if has("Sh") || has("Rot") || has("Extend") => "SHF",
        _ if has("Clz") || has("Ctz") => "FLO",
        _ if has("Popcnt") => "POPC",
        _ => "ISETP",
    }
}
