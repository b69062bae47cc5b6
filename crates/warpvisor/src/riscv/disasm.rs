//! Instructions as text, in the form `objdump -M no-aliases,numeric` prints base instructions
//! (compressed ones appear as the base instruction they expand to). The translator writes it
//! beside each instruction's WebAssembly; the decoder's tests compare it with objdump's.

use super::decode::{AluOp, AmoOp, BranchOp, CsrOp, Inst, LoadOp, Op, StoreOp};

/// The base mnemonic of an operation.
pub fn mnemonic(op: &Op) -> String {
    let alu = |op: AluOp| match op {
        AluOp::Add => "add",
        AluOp::Sub => "sub",
        AluOp::Sll => "sll",
        AluOp::Slt => "slt",
        AluOp::Sltu => "sltu",
        AluOp::Xor => "xor",
        AluOp::Srl => "srl",
        AluOp::Sra => "sra",
        AluOp::Or => "or",
        AluOp::And => "and",
        AluOp::Mul => "mul",
        AluOp::Mulh => "mulh",
        AluOp::Mulhsu => "mulhsu",
        AluOp::Mulhu => "mulhu",
        AluOp::Div => "div",
        AluOp::Divu => "divu",
        AluOp::Rem => "rem",
        AluOp::Remu => "remu",
    };
    let wd = |double: bool| if double { "d" } else { "w" };
    match *op {
        Op::Lui { .. } => "lui".into(),
        Op::Auipc { .. } => "auipc".into(),
        Op::Jal { .. } => "jal".into(),
        Op::Jalr { .. } => "jalr".into(),
        Op::Branch { op, .. } => match op {
            BranchOp::Eq => "beq",
            BranchOp::Ne => "bne",
            BranchOp::Lt => "blt",
            BranchOp::Ge => "bge",
            BranchOp::Ltu => "bltu",
            BranchOp::Geu => "bgeu",
        }
        .into(),
        Op::Load { op, .. } => match op {
            LoadOp::B => "lb",
            LoadOp::H => "lh",
            LoadOp::W => "lw",
            LoadOp::D => "ld",
            LoadOp::Bu => "lbu",
            LoadOp::Hu => "lhu",
            LoadOp::Wu => "lwu",
        }
        .into(),
        Op::Store { op, .. } => match op {
            StoreOp::B => "sb",
            StoreOp::H => "sh",
            StoreOp::W => "sw",
            StoreOp::D => "sd",
        }
        .into(),
        Op::AluImm { op, word, .. } => {
            let base = match op {
                AluOp::Sll => "slli",
                AluOp::Srl => "srli",
                AluOp::Sra => "srai",
                AluOp::Slt => "slti",
                AluOp::Sltu => "sltiu",
                AluOp::Xor => "xori",
                AluOp::Or => "ori",
                AluOp::And => "andi",
                _ => "addi",
            };
            format!("{base}{}", if word { "w" } else { "" })
        }
        Op::Alu { op, word, .. } => format!("{}{}", alu(op), if word { "w" } else { "" }),
        Op::Fence => "fence".into(),
        Op::FenceI => "fence.i".into(),
        Op::Ecall => "ecall".into(),
        Op::Ebreak => "ebreak".into(),
        Op::Csr { op, imm, .. } => format!(
            "csrr{}{}",
            match op {
                CsrOp::Rw => "w",
                CsrOp::Rs => "s",
                CsrOp::Rc => "c",
            },
            if imm { "i" } else { "" }
        ),
        Op::LoadReserved { double, .. } => format!("lr.{}", wd(double)),
        Op::StoreConditional { double, .. } => format!("sc.{}", wd(double)),
        Op::Amo { op, double, .. } => format!(
            "amo{}.{}",
            match op {
                AmoOp::Swap => "swap",
                AmoOp::Add => "add",
                AmoOp::Xor => "xor",
                AmoOp::And => "and",
                AmoOp::Or => "or",
                AmoOp::Min => "min",
                AmoOp::Max => "max",
                AmoOp::Minu => "minu",
                AmoOp::Maxu => "maxu",
            },
            wd(double)
        ),
        Op::FloatLoad { double, .. } => if double { "fld" } else { "flw" }.into(),
        Op::FloatStore { double, .. } => if double { "fsd" } else { "fsw" }.into(),
        Op::Float { mnemonic, .. } => mnemonic.into(),
        Op::Illegal { .. } => "illegal".into(),
    }
}

/// The instruction with its operands, or only its mnemonic where objdump's operand syntax is
/// not reproduced (CSRs, fences, floating point).
pub fn text(inst: &Inst) -> String {
    let m = mnemonic(&inst.op);
    let target = |offset: i64| format!("{:x}", inst.addr.wrapping_add(offset as u64));
    let hex = |imm: i64| format!("{:#x}", imm);
    match inst.op {
        Op::Lui { rd, imm } | Op::Auipc { rd, imm } => {
            format!("{m} x{rd},{:#x}", (imm as u64 >> 12) & 0xf_ffff)
        }
        Op::Jal { rd, offset } => format!("{m} x{rd},{}", target(offset)),
        Op::Jalr { rd, rs1, offset } => format!("{m} x{rd},{offset}(x{rs1})"),
        Op::Branch {
            rs1, rs2, offset, ..
        } => format!("{m} x{rs1},x{rs2},{}", target(offset)),
        Op::Load {
            rd, rs1, offset, ..
        } => format!("{m} x{rd},{offset}(x{rs1})"),
        Op::Store {
            rs1, rs2, offset, ..
        } => format!("{m} x{rs2},{offset}(x{rs1})"),
        Op::AluImm {
            op, rd, rs1, imm, ..
        } => match op {
            AluOp::Sll | AluOp::Srl | AluOp::Sra => format!("{m} x{rd},x{rs1},{}", hex(imm)),
            _ => format!("{m} x{rd},x{rs1},{imm}"),
        },
        Op::Alu { rd, rs1, rs2, .. } => format!("{m} x{rd},x{rs1},x{rs2}"),
        Op::LoadReserved { rd, rs1, .. } => format!("{m} x{rd},(x{rs1})"),
        Op::StoreConditional { rd, rs1, rs2, .. } | Op::Amo { rd, rs1, rs2, .. } => {
            format!("{m} x{rd},x{rs2},(x{rs1})")
        }
        Op::FloatLoad {
            rd, rs1, offset, ..
        } => format!("{m} f{rd},{offset}(x{rs1})"),
        Op::FloatStore {
            rs1, rs2, offset, ..
        } => format!("{m} f{rs2},{offset}(x{rs1})"),
        Op::Illegal { bits } => format!("{m} {bits:#x}"),
        _ => m,
    }
}
