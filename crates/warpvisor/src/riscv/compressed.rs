//! The RV64C compressed instructions, each expanded to the base instruction it stands for
//! (The RISC-V Instruction Set Manual, volume I, "C" chapter, RV64 column).

use super::decode::{AluOp, BranchOp, LoadOp, Op, Reg, StoreOp};

/// Bits `hi..=lo` of `c`, shifted down.
fn bits(c: u16, hi: u32, lo: u32) -> u32 {
    (c as u32 >> lo) & ((1 << (hi - lo + 1)) - 1)
}

/// Bit `b` of `c` moved to position `to`.
fn bit(c: u16, b: u32, to: u32) -> u32 {
    ((c as u32 >> b) & 1) << to
}

/// Sign-extends the low `width` bits of `v`.
fn sext(v: u32, width: u32) -> i64 {
    let shift = 64 - width;
    ((v as i64) << shift) >> shift
}

/// A 3-bit register field naming x8–x15.
fn creg(c: u16, lo: u32) -> Reg {
    (bits(c, lo + 2, lo) + 8) as Reg
}

fn full_reg(c: u16, lo: u32) -> Reg {
    bits(c, lo + 4, lo) as Reg
}

/// The 6-bit immediate of CI instructions: bit 12 and bits 6..2, sign-extended.
fn ci_imm(c: u16) -> i64 {
    sext(bit(c, 12, 5) | bits(c, 6, 2), 6)
}

/// The 6-bit shift amount of c.slli/c.srli/c.srai.
fn ci_shamt(c: u16) -> i64 {
    (bit(c, 12, 5) | bits(c, 6, 2)) as i64
}

/// The offset of the CL/CS-format word loads and stores (`c.lw`, `c.sw`): uimm[5:3|2|6].
fn word_offset(c: u16) -> i64 {
    (bits(c, 12, 10) << 3 | bit(c, 6, 2) | bit(c, 5, 6)) as i64
}

/// The offset of the CL/CS-format doubleword loads and stores (`c.ld`, `c.sd`, `c.fld`,
/// `c.fsd`): uimm[5:3|7:6].
fn double_offset(c: u16) -> i64 {
    (bits(c, 12, 10) << 3 | bits(c, 6, 5) << 6) as i64
}

/// Expands one 16-bit instruction.
pub fn expand(c: u16) -> Op {
    let illegal = Op::Illegal { bits: c as u32 };
    let funct3 = bits(c, 15, 13);
    match (c & 3, funct3) {
        // Quadrant 0.
        (0, 0) => {
            let imm = bits(c, 12, 11) << 4 | bits(c, 10, 7) << 6 | bit(c, 6, 2) | bit(c, 5, 3);
            if imm == 0 {
                return illegal;
            }
            Op::AluImm {
                op: AluOp::Add,
                word: false,
                rd: creg(c, 2),
                rs1: 2,
                imm: imm as i64,
            }
        }
        (0, 1) => Op::FloatLoad {
            double: true,
            rd: creg(c, 2),
            rs1: creg(c, 7),
            offset: double_offset(c),
        },
        (0, 2) => Op::Load {
            op: LoadOp::W,
            rd: creg(c, 2),
            rs1: creg(c, 7),
            offset: word_offset(c),
        },
        (0, 3) => Op::Load {
            op: LoadOp::D,
            rd: creg(c, 2),
            rs1: creg(c, 7),
            offset: double_offset(c),
        },
        (0, 5) => Op::FloatStore {
            double: true,
            rs1: creg(c, 7),
            rs2: creg(c, 2),
            offset: double_offset(c),
        },
        (0, 6) => Op::Store {
            op: StoreOp::W,
            rs1: creg(c, 7),
            rs2: creg(c, 2),
            offset: word_offset(c),
        },
        (0, 7) => Op::Store {
            op: StoreOp::D,
            rs1: creg(c, 7),
            rs2: creg(c, 2),
            offset: double_offset(c),
        },
        // Quadrant 1.
        (1, 0) => {
            let rd = full_reg(c, 7);
            Op::AluImm {
                op: AluOp::Add,
                word: false,
                rd,
                rs1: rd,
                imm: ci_imm(c),
            }
        }
        (1, 1) => {
            let rd = full_reg(c, 7);
            if rd == 0 {
                return illegal;
            }
            Op::AluImm {
                op: AluOp::Add,
                word: true,
                rd,
                rs1: rd,
                imm: ci_imm(c),
            }
        }
        (1, 2) => Op::AluImm {
            op: AluOp::Add,
            word: false,
            rd: full_reg(c, 7),
            rs1: 0,
            imm: ci_imm(c),
        },
        (1, 3) => {
            let rd = full_reg(c, 7);
            if rd == 2 {
                let imm =
                    bit(c, 12, 9) | bit(c, 6, 4) | bit(c, 5, 6) | bits(c, 4, 3) << 7 | bit(c, 2, 5);
                if imm == 0 {
                    return illegal;
                }
                Op::AluImm {
                    op: AluOp::Add,
                    word: false,
                    rd: 2,
                    rs1: 2,
                    imm: sext(imm, 10),
                }
            } else {
                let imm = bit(c, 12, 17) | bits(c, 6, 2) << 12;
                if imm == 0 {
                    return illegal;
                }
                Op::Lui {
                    rd,
                    imm: sext(imm, 18),
                }
            }
        }
        (1, 4) => {
            let rd = creg(c, 7);
            match bits(c, 11, 10) {
                0 | 1 => Op::AluImm {
                    op: if bits(c, 11, 10) == 0 {
                        AluOp::Srl
                    } else {
                        AluOp::Sra
                    },
                    word: false,
                    rd,
                    rs1: rd,
                    imm: ci_shamt(c),
                },
                2 => Op::AluImm {
                    op: AluOp::And,
                    word: false,
                    rd,
                    rs1: rd,
                    imm: ci_imm(c),
                },
                _ => {
                    let word = bit(c, 12, 0) == 1;
                    let op = match (word, bits(c, 6, 5)) {
                        (false, 0) => AluOp::Sub,
                        (false, 1) => AluOp::Xor,
                        (false, 2) => AluOp::Or,
                        (false, 3) => AluOp::And,
                        (true, 0) => AluOp::Sub,
                        (true, 1) => AluOp::Add,
                        _ => return illegal,
                    };
                    Op::Alu {
                        op,
                        word,
                        rd,
                        rs1: rd,
                        rs2: creg(c, 2),
                    }
                }
            }
        }
        (1, 5) => {
            let imm = bit(c, 12, 11)
                | bit(c, 11, 4)
                | bits(c, 10, 9) << 8
                | bit(c, 8, 10)
                | bit(c, 7, 6)
                | bit(c, 6, 7)
                | bits(c, 5, 3) << 1
                | bit(c, 2, 5);
            Op::Jal {
                rd: 0,
                offset: sext(imm, 12),
            }
        }
        (1, 6 | 7) => {
            let imm = bit(c, 12, 8)
                | bits(c, 11, 10) << 3
                | bits(c, 6, 5) << 6
                | bits(c, 4, 3) << 1
                | bit(c, 2, 5);
            Op::Branch {
                op: if funct3 == 6 {
                    BranchOp::Eq
                } else {
                    BranchOp::Ne
                },
                rs1: creg(c, 7),
                rs2: 0,
                offset: sext(imm, 9),
            }
        }
        // Quadrant 2.
        (2, 0) => {
            let rd = full_reg(c, 7);
            Op::AluImm {
                op: AluOp::Sll,
                word: false,
                rd,
                rs1: rd,
                imm: ci_shamt(c),
            }
        }
        (2, 1) => Op::FloatLoad {
            double: true,
            rd: full_reg(c, 7),
            rs1: 2,
            offset: (bit(c, 12, 5) | bits(c, 6, 5) << 3 | bits(c, 4, 2) << 6) as i64,
        },
        (2, 2) | (2, 3) => {
            let rd = full_reg(c, 7);
            if rd == 0 {
                return illegal;
            }
            let (op, offset) = if funct3 == 2 {
                (
                    LoadOp::W,
                    bit(c, 12, 5) | bits(c, 6, 4) << 2 | bits(c, 3, 2) << 6,
                )
            } else {
                (
                    LoadOp::D,
                    bit(c, 12, 5) | bits(c, 6, 5) << 3 | bits(c, 4, 2) << 6,
                )
            };
            Op::Load {
                op,
                rd,
                rs1: 2,
                offset: offset as i64,
            }
        }
        (2, 4) => {
            let (rs1, rs2) = (full_reg(c, 7), full_reg(c, 2));
            match (bit(c, 12, 0), rs1, rs2) {
                (0, 0, 0) => illegal,
                (0, _, 0) => Op::Jalr {
                    rd: 0,
                    rs1,
                    offset: 0,
                },
                (0, _, _) => Op::Alu {
                    op: AluOp::Add,
                    word: false,
                    rd: rs1,
                    rs1: 0,
                    rs2,
                },
                (_, 0, 0) => Op::Ebreak,
                (_, _, 0) => Op::Jalr {
                    rd: 1,
                    rs1,
                    offset: 0,
                },
                _ => Op::Alu {
                    op: AluOp::Add,
                    word: false,
                    rd: rs1,
                    rs1,
                    rs2,
                },
            }
        }
        (2, 5) => Op::FloatStore {
            double: true,
            rs1: 2,
            rs2: full_reg(c, 2),
            offset: (bits(c, 12, 10) << 3 | bits(c, 9, 7) << 6) as i64,
        },
        (2, 6) => Op::Store {
            op: StoreOp::W,
            rs1: 2,
            rs2: full_reg(c, 2),
            offset: (bits(c, 12, 9) << 2 | bits(c, 8, 7) << 6) as i64,
        },
        (2, 7) => Op::Store {
            op: StoreOp::D,
            rs1: 2,
            rs2: full_reg(c, 2),
            offset: (bits(c, 12, 10) << 3 | bits(c, 9, 7) << 6) as i64,
        },
        _ => illegal,
    }
}
