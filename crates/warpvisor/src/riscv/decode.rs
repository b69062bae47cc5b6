//! The RV64IMAC (+ Zicsr, Zifencei, and the F/D encodings) decoder: one 16- or 32-bit
//! instruction word → [`Inst`]. Compressed instructions are expanded to the base instruction
//! they stand for (`compressed.rs`), so the translator sees one form of each operation.

use super::compressed;

/// An integer register number, 0–31 (`x0` reads as zero and ignores writes).
pub type Reg = u8;

/// A decoded instruction at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    /// Its virtual address.
    pub addr: u64,
    /// Its length in bytes: 2 (compressed) or 4.
    pub len: u8,
    /// What it does.
    pub op: Op,
}

/// Integer operations of `OP`/`OP-IMM` (and their 32-bit `W` forms), with the M extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AluOp {
    Add,
    Sub,
    Sll,
    Slt,
    Sltu,
    Xor,
    Srl,
    Sra,
    Or,
    And,
    Mul,
    Mulh,
    Mulhsu,
    Mulhu,
    Div,
    Divu,
    Rem,
    Remu,
}

/// A conditional branch's comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BranchOp {
    Eq,
    Ne,
    Lt,
    Ge,
    Ltu,
    Geu,
}

/// A load's width and extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum LoadOp {
    B,
    H,
    W,
    D,
    Bu,
    Hu,
    Wu,
}

/// A store's width in bytes' log2: `sb`, `sh`, `sw`, `sd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum StoreOp {
    B,
    H,
    W,
    D,
}

/// An atomic memory operation of the A extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AmoOp {
    Swap,
    Add,
    Xor,
    And,
    Or,
    Min,
    Max,
    Minu,
    Maxu,
}

/// A Zicsr operation: read-write, read-set, read-clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CsrOp {
    Rw,
    Rs,
    Rc,
}

/// A decoded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `lui rd, imm` (`imm` already shifted and sign-extended).
    Lui { rd: Reg, imm: i64 },
    /// `auipc rd, imm` (`imm` already shifted and sign-extended).
    Auipc { rd: Reg, imm: i64 },
    /// `jal rd, offset`.
    Jal { rd: Reg, offset: i64 },
    /// `jalr rd, offset(rs1)`.
    Jalr { rd: Reg, rs1: Reg, offset: i64 },
    /// A conditional branch to `addr + offset`.
    Branch {
        op: BranchOp,
        rs1: Reg,
        rs2: Reg,
        offset: i64,
    },
    /// A load.
    Load {
        op: LoadOp,
        rd: Reg,
        rs1: Reg,
        offset: i64,
    },
    /// A store of `rs2` to `offset(rs1)`.
    Store {
        op: StoreOp,
        rs1: Reg,
        rs2: Reg,
        offset: i64,
    },
    /// An operation with an immediate (`word`: the 32-bit `...IW` form). Shift amounts are in
    /// `imm`; `Sub` and the M operations never appear here.
    AluImm {
        op: AluOp,
        word: bool,
        rd: Reg,
        rs1: Reg,
        imm: i64,
    },
    /// A register-register operation (`word`: the 32-bit `...W` form).
    Alu {
        op: AluOp,
        word: bool,
        rd: Reg,
        rs1: Reg,
        rs2: Reg,
    },
    /// `fence` (memory ordering; a no-op on one hart).
    Fence,
    /// `fence.i` (a no-op: translated code never changes).
    FenceI,
    /// `ecall`: a Linux system call.
    Ecall,
    /// `ebreak`.
    Ebreak,
    /// A CSR access; `src` is a register, or the 5-bit immediate when `imm` is set.
    Csr {
        op: CsrOp,
        rd: Reg,
        src: u8,
        imm: bool,
        csr: u16,
    },
    /// `lr.w`/`lr.d` (`double`: 64-bit).
    LoadReserved { double: bool, rd: Reg, rs1: Reg },
    /// `sc.w`/`sc.d`.
    StoreConditional {
        double: bool,
        rd: Reg,
        rs1: Reg,
        rs2: Reg,
    },
    /// An AMO on the word or doubleword at `rs1`.
    Amo {
        op: AmoOp,
        double: bool,
        rd: Reg,
        rs1: Reg,
        rs2: Reg,
    },
    /// `flw`/`fld` into floating-point register `rd`.
    FloatLoad {
        double: bool,
        rd: Reg,
        rs1: Reg,
        offset: i64,
    },
    /// `fsw`/`fsd` of floating-point register `rs2`.
    FloatStore {
        double: bool,
        rs1: Reg,
        rs2: Reg,
        offset: i64,
    },
    /// Another instruction of the F or D extension: its mnemonic and its bits (the operands
    /// are read from them where the translator supports it).
    Float { mnemonic: &'static str, bits: u32 },
    /// Not a valid RV64GC instruction (the raw bits).
    Illegal { bits: u32 },
}

/// The length in bytes of the instruction whose first 16 bits are `low`: 2 or 4 (longer
/// encodings are not part of RV64GC and come back as 4-byte illegal instructions).
pub fn length(low: u16) -> u8 {
    if low & 3 == 3 {
        4
    } else {
        2
    }
}

/// Decodes the instruction at `addr` from `bytes` (at least its length). `None` when `bytes`
/// is shorter than the instruction.
pub fn decode(addr: u64, bytes: &[u8]) -> Option<Inst> {
    let low = u16::from_le_bytes([*bytes.first()?, *bytes.get(1)?]);
    if length(low) == 2 {
        return Some(Inst {
            addr,
            len: 2,
            op: compressed::expand(low),
        });
    }
    let word = u32::from_le_bytes([low as u8, (low >> 8) as u8, *bytes.get(2)?, *bytes.get(3)?]);
    Some(Inst {
        addr,
        len: 4,
        op: decode32(word),
    })
}

fn rd(w: u32) -> Reg {
    ((w >> 7) & 31) as Reg
}
fn rs1(w: u32) -> Reg {
    ((w >> 15) & 31) as Reg
}
fn rs2(w: u32) -> Reg {
    ((w >> 20) & 31) as Reg
}
fn funct3(w: u32) -> u32 {
    (w >> 12) & 7
}
fn funct7(w: u32) -> u32 {
    w >> 25
}
fn imm_i(w: u32) -> i64 {
    ((w as i32) >> 20) as i64
}
fn imm_s(w: u32) -> i64 {
    ((((w as i32) >> 25) << 5) | ((w >> 7) & 31) as i32) as i64
}
fn imm_b(w: u32) -> i64 {
    let v = (((w as i32) >> 31) << 12)
        | (((w >> 7) & 1) << 11) as i32
        | (((w >> 25) & 0x3f) << 5) as i32
        | (((w >> 8) & 0xf) << 1) as i32;
    v as i64
}
fn imm_u(w: u32) -> i64 {
    ((w & 0xffff_f000) as i32) as i64
}
fn imm_j(w: u32) -> i64 {
    let v = (((w as i32) >> 31) << 20)
        | (w & 0x000f_f000) as i32
        | (((w >> 20) & 1) << 11) as i32
        | (((w >> 21) & 0x3ff) << 1) as i32;
    v as i64
}

/// Decodes one 32-bit instruction word.
pub fn decode32(w: u32) -> Op {
    let illegal = Op::Illegal { bits: w };
    let (rd, rs1, rs2, f3, f7) = (rd(w), rs1(w), rs2(w), funct3(w), funct7(w));
    match w & 0x7f {
        0x37 => Op::Lui { rd, imm: imm_u(w) },
        0x17 => Op::Auipc { rd, imm: imm_u(w) },
        0x6f => Op::Jal {
            rd,
            offset: imm_j(w),
        },
        0x67 if f3 == 0 => Op::Jalr {
            rd,
            rs1,
            offset: imm_i(w),
        },
        0x63 => {
            let op = match f3 {
                0 => BranchOp::Eq,
                1 => BranchOp::Ne,
                4 => BranchOp::Lt,
                5 => BranchOp::Ge,
                6 => BranchOp::Ltu,
                7 => BranchOp::Geu,
                _ => return illegal,
            };
            Op::Branch {
                op,
                rs1,
                rs2,
                offset: imm_b(w),
            }
        }
        0x03 => {
            let op = match f3 {
                0 => LoadOp::B,
                1 => LoadOp::H,
                2 => LoadOp::W,
                3 => LoadOp::D,
                4 => LoadOp::Bu,
                5 => LoadOp::Hu,
                6 => LoadOp::Wu,
                _ => return illegal,
            };
            Op::Load {
                op,
                rd,
                rs1,
                offset: imm_i(w),
            }
        }
        0x23 => {
            let op = match f3 {
                0 => StoreOp::B,
                1 => StoreOp::H,
                2 => StoreOp::W,
                3 => StoreOp::D,
                _ => return illegal,
            };
            Op::Store {
                op,
                rs1,
                rs2,
                offset: imm_s(w),
            }
        }
        0x13 | 0x1b => {
            let word = w & 0x7f == 0x1b;
            let imm = imm_i(w);
            // Shift amounts: 6 bits (RV64), 5 in the W forms; the bits above select srl/sra.
            let shamt_bits = if word { 5 } else { 6 };
            let shamt = (w >> 20) as i64 & ((1 << shamt_bits) - 1);
            let high = w >> (20 + shamt_bits);
            let op = match (f3, word) {
                (0, _) => AluOp::Add,
                (1, _) if high == 0 => {
                    return Op::AluImm {
                        op: AluOp::Sll,
                        word,
                        rd,
                        rs1,
                        imm: shamt,
                    }
                }
                // srai: bits 31..26 are 0b010000 (sraiw: bits 31..25 are 0b0100000).
                (5, _) if high == 0 || high == if word { 0x20 } else { 0x10 } => {
                    let op = if high == 0 { AluOp::Srl } else { AluOp::Sra };
                    return Op::AluImm {
                        op,
                        word,
                        rd,
                        rs1,
                        imm: shamt,
                    };
                }
                (2, false) => AluOp::Slt,
                (3, false) => AluOp::Sltu,
                (4, false) => AluOp::Xor,
                (6, false) => AluOp::Or,
                (7, false) => AluOp::And,
                _ => return illegal,
            };
            Op::AluImm {
                op,
                word,
                rd,
                rs1,
                imm,
            }
        }
        0x33 | 0x3b => {
            let word = w & 0x7f == 0x3b;
            let op = match (f7, f3) {
                (0, 0) => AluOp::Add,
                (0x20, 0) => AluOp::Sub,
                (0, 1) => AluOp::Sll,
                (0, 2) if !word => AluOp::Slt,
                (0, 3) if !word => AluOp::Sltu,
                (0, 4) if !word => AluOp::Xor,
                (0, 5) => AluOp::Srl,
                (0x20, 5) => AluOp::Sra,
                (0, 6) if !word => AluOp::Or,
                (0, 7) if !word => AluOp::And,
                (1, 0) => AluOp::Mul,
                (1, 1) if !word => AluOp::Mulh,
                (1, 2) if !word => AluOp::Mulhsu,
                (1, 3) if !word => AluOp::Mulhu,
                (1, 4) => AluOp::Div,
                (1, 5) => AluOp::Divu,
                (1, 6) => AluOp::Rem,
                (1, 7) => AluOp::Remu,
                _ => return illegal,
            };
            Op::Alu {
                op,
                word,
                rd,
                rs1,
                rs2,
            }
        }
        0x0f => match f3 {
            0 => Op::Fence,
            1 => Op::FenceI,
            _ => illegal,
        },
        0x73 => match (f3, w >> 7) {
            (0, 0) => Op::Ecall,
            (0, 0x2000) => Op::Ebreak,
            (1..=3 | 5..=7, _) => Op::Csr {
                op: match f3 & 3 {
                    1 => CsrOp::Rw,
                    2 => CsrOp::Rs,
                    _ => CsrOp::Rc,
                },
                rd,
                src: rs1,
                imm: f3 >= 5,
                csr: (w >> 20) as u16,
            },
            _ => illegal,
        },
        0x2f if f3 == 2 || f3 == 3 => {
            let double = f3 == 3;
            let op = match f7 >> 2 {
                0x02 if rs2 == 0 => return Op::LoadReserved { double, rd, rs1 },
                0x03 => {
                    return Op::StoreConditional {
                        double,
                        rd,
                        rs1,
                        rs2,
                    }
                }
                0x01 => AmoOp::Swap,
                0x00 => AmoOp::Add,
                0x04 => AmoOp::Xor,
                0x0c => AmoOp::And,
                0x08 => AmoOp::Or,
                0x10 => AmoOp::Min,
                0x14 => AmoOp::Max,
                0x18 => AmoOp::Minu,
                0x1c => AmoOp::Maxu,
                _ => return illegal,
            };
            Op::Amo {
                op,
                double,
                rd,
                rs1,
                rs2,
            }
        }
        0x07 if f3 == 2 || f3 == 3 => Op::FloatLoad {
            double: f3 == 3,
            rd,
            rs1,
            offset: imm_i(w),
        },
        0x27 if f3 == 2 || f3 == 3 => Op::FloatStore {
            double: f3 == 3,
            rs1,
            rs2,
            offset: imm_s(w),
        },
        0x43 | 0x47 | 0x4b | 0x4f | 0x53 => match float_mnemonic(w) {
            Some(mnemonic) => Op::Float { mnemonic, bits: w },
            None => illegal,
        },
        _ => illegal,
    }
}

/// The mnemonic of an F/D-extension instruction (objdump's, without aliases), if `w` is one.
fn float_mnemonic(w: u32) -> Option<&'static str> {
    let f3 = funct3(w);
    let fmt = (w >> 25) & 3;
    let pick = |s: &'static str, d: &'static str| match fmt {
        0 => Some(s),
        1 => Some(d),
        _ => None,
    };
    match w & 0x7f {
        0x43 => pick("fmadd.s", "fmadd.d"),
        0x47 => pick("fmsub.s", "fmsub.d"),
        0x4b => pick("fnmsub.s", "fnmsub.d"),
        0x4f => pick("fnmadd.s", "fnmadd.d"),
        _ => {
            let f7 = funct7(w);
            let r2 = rs2(w);
            let s = f7 & 1 == 0;
            let sd = |a: &'static str, b: &'static str| Some(if s { a } else { b });
            // funct7 without its format bit.
            match f7 >> 1 {
                0x00 => sd("fadd.s", "fadd.d"),
                0x02 => sd("fsub.s", "fsub.d"),
                0x04 => sd("fmul.s", "fmul.d"),
                0x06 => sd("fdiv.s", "fdiv.d"),
                0x16 if r2 == 0 => sd("fsqrt.s", "fsqrt.d"),
                0x08 => match f3 {
                    0 => sd("fsgnj.s", "fsgnj.d"),
                    1 => sd("fsgnjn.s", "fsgnjn.d"),
                    2 => sd("fsgnjx.s", "fsgnjx.d"),
                    _ => None,
                },
                0x0a => match f3 {
                    0 => sd("fmin.s", "fmin.d"),
                    1 => sd("fmax.s", "fmax.d"),
                    _ => None,
                },
                0x28 => match f3 {
                    0 => sd("fle.s", "fle.d"),
                    1 => sd("flt.s", "flt.d"),
                    2 => sd("feq.s", "feq.d"),
                    _ => None,
                },
                0x10 if s && r2 == 1 => Some("fcvt.s.d"),
                0x10 if !s && r2 == 0 => Some("fcvt.d.s"),
                0x30 => [
                    sd("fcvt.w.s", "fcvt.w.d"),
                    sd("fcvt.wu.s", "fcvt.wu.d"),
                    sd("fcvt.l.s", "fcvt.l.d"),
                    sd("fcvt.lu.s", "fcvt.lu.d"),
                ]
                .get(r2 as usize)
                .copied()
                .flatten(),
                0x34 => [
                    sd("fcvt.s.w", "fcvt.d.w"),
                    sd("fcvt.s.wu", "fcvt.d.wu"),
                    sd("fcvt.s.l", "fcvt.d.l"),
                    sd("fcvt.s.lu", "fcvt.d.lu"),
                ]
                .get(r2 as usize)
                .copied()
                .flatten(),
                0x38 if r2 == 0 => match f3 {
                    0 => sd("fmv.x.w", "fmv.x.d"),
                    1 => sd("fclass.s", "fclass.d"),
                    _ => None,
                },
                0x3c if r2 == 0 && f3 == 0 => sd("fmv.w.x", "fmv.d.x"),
                _ => None,
            }
        }
    }
}
