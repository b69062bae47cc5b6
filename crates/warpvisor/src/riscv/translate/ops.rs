//! One line of WAT per RISC-V instruction (everything but control flow, which
//! `function.rs` owns), and the register moves around calls.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::riscv::decode::{AluOp, AmoOp, CsrOp, Inst, LoadOp, Op, StoreOp};

/// The register numbering the translator uses: 0–31 the integer registers, 32–63 the
/// floating-point ones (raw bits; singles NaN-boxed as RISC-V keeps them).
pub const F: u8 = 32;

/// The local holding register `r` in a function.
pub fn local(r: u8) -> String {
    if r < F {
        format!("$x{r}")
    } else {
        format!("$f{}", r - F)
    }
}

/// The global holding register `r` between functions.
pub fn global(r: u8) -> String {
    if r < F {
        format!("$r{r}")
    } else {
        format!("$fr{}", r - F)
    }
}

/// Reads register `r` (`x0` is the constant 0).
pub fn get(r: u8) -> String {
    if r == 0 {
        "(i64.const 0)".into()
    } else {
        format!("(local.get {})", local(r))
    }
}

/// Writes `value` to register `r` (a write to `x0` still evaluates `value`: a load may trap).
pub fn set(r: u8, value: &str) -> String {
    if r == 0 {
        format!("(drop {value})")
    } else {
        format!("(local.set {} {value})", local(r))
    }
}

/// Computes the address `offset(rs1)`, less [`LOWEST`], into `$t` (64 bits) and faults unless
/// the address lies in `LOWEST..4 GiB`: below is Linux's unmapped zero page (a null pointer
/// faults, as under Linux, whose `mmap_min_addr` it is), beyond is where no WebAssembly memory
/// reaches. One unsigned comparison tests both; the fault is a store to the last byte of the
/// 32-bit space, beyond every memory the translation declares, which is the memory trap every
/// backend gives. A branch, not a `select` on the address: it stays off the access's
/// dependency chain and the C compiler cannot turn it back into a conditional move (a store is
/// not speculated). The access adds `LOWEST` back as its static offset ([`AT_A`]). Loads and
/// stores share such checks through [`Access`]; atomics check each access.
fn check(rs1: u8, offset: i64) -> String {
    format!(
        "(local.set $t (i64.add {} (i64.const {}))) (if (i64.ge_u (local.get $t) (i64.const {:#x})) {FAULT})",
        get(rs1),
        offset - LOWEST,
        (1u64 << 32) - LOWEST as u64
    )
}

/// The fault of an address outside `LOWEST..4 GiB`: a store to the 32-bit space's last byte,
/// beyond every memory a translation declares (the memory trap), then `unreachable`, which
/// that store never reaches: it tells the C compiler that past the check the address is in
/// range, so the access needs no zero-extension of its 32-bit address.
const FAULT: &str = "(then (i32.store8 (i32.const -1) (i32.const 0)) unreachable)";

/// The lowest address a program may access: what Linux's `vm.mmap_min_addr` keeps unmapped
/// (the runtime's own tables live below it, out of the program's reach).
const LOWEST: i64 = 0x1_0000;

/// The memory offset of an access through `$a`, the address [`check`] left in `$t` wrapped.
const AT_A: &str = "offset=0x10000 (local.get $a)";

/// A load or store in a group of accesses through one base register within a block, with no
/// write to the register, system call or branch between them (`function.rs` forms them): the
/// group's first access checks, once, that every access of the group lies in `LOWEST..4 GiB`
/// (the offsets span less than 4 KiB) and leaves the base less `lo` and [`LOWEST`] in
/// `$g<base>`; each access adds its own offset back statically. Faulting at the group's first
/// access rather than at the faulting one changes nothing a program can observe: nothing it
/// does in between leaves the VM.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    /// The group's lowest offset.
    pub lo: i64,
    /// The group's highest offset.
    pub hi: i64,
    /// Whether this access is the group's first.
    pub first: bool,
}

impl Access {
    /// The check and memory argument of an access at `offset(rs1)` in `group` (without one,
    /// a group of its own).
    fn of(group: Option<Access>, rs1: u8, offset: i64) -> (String, String) {
        let alone = Access {
            lo: offset,
            hi: offset,
            first: true,
        };
        group.unwrap_or(alone).address(rs1, offset)
    }

    /// The group's check (at its first access) and this access's memory argument.
    fn address(&self, rs1: u8, offset: i64) -> (String, String) {
        let g = format!("$g{rs1}");
        let check = if self.first {
            format!(
                "(local.set {g} (i64.add {} (i64.const {}))) (if (i64.ge_u (local.get {g}) (i64.const {:#x})) {FAULT}) ",
                get(rs1),
                self.lo - LOWEST,
                (1i64 << 32) - LOWEST - (self.hi - self.lo)
            )
        } else {
            String::new()
        };
        let memarg = format!(
            "offset={:#x} (i32.wrap_i64 (local.get {g}))",
            LOWEST + offset - self.lo
        );
        (check, memarg)
    }
}

/// The local of a group whose base register is `r`.
pub fn group_local(r: u8) -> String {
    format!("$g{r}")
}

/// The function being emitted: its range and its registers.
pub struct Emitter<'a> {
    /// Its first address.
    pub start: u64,
    /// The address after its last instruction.
    pub end: u64,
    /// The registers it reads or writes.
    pub used: &'a BTreeSet<u8>,
    /// The registers it writes.
    pub dirty: &'a BTreeSet<u8>,
    /// What the program observes of the floating-point environment.
    pub fenv: super::float::FloatEnv,
}

impl Emitter<'_> {
    /// Stores the registers the function writes into the register globals.
    pub fn spill(&self) -> String {
        store(self.dirty.iter())
    }

    /// Stores the registers of the dirty set `now` (see `dirty.rs`) into the register globals.
    pub fn spill_dirty(&self, now: u64) -> String {
        store(
            self.dirty
                .iter()
                .filter(|&&r| now & super::dirty::bit(r) != 0),
        )
    }

    /// Loads the registers the function uses from the register globals.
    pub fn reload(&self) -> String {
        load(self.used.iter())
    }

    /// Whether the address `expr` lies in this function.
    pub fn in_range(&self, expr: &str) -> String {
        format!(
            "(i64.lt_u (i64.sub {expr} (i64.const {:#x})) (i64.const {:#x}))",
            self.start,
            self.end - self.start
        )
    }

    /// A call through `callee` (an expression returning the next address) that is expected to
    /// come back at `ret`, with the registers of `now` dirty; anywhere else goes through the
    /// dispatch table.
    pub fn call(&self, callee: &str, ret: u64, now: u64) -> String {
        format!(
            "{}    (local.set $next {callee})\n{}    (if (i64.ne (local.get $next) (i64.const {ret:#x})) (then (local.set $pc (local.get $next)) (br $dispatch)))\n",
            self.spill_dirty(now),
            self.reload()
        )
    }

    /// A call to a leaf function (see `function::is_leaf`) with registers `leaf`: only the
    /// registers it uses are stored first and only those it writes are reloaded.
    pub fn call_leaf(
        &self,
        callee: &str,
        ret: u64,
        leaf: &super::function::Registers,
        now: u64,
    ) -> String {
        format!(
            "{}    (local.set $next {callee})\n{}    (if (i64.ne (local.get $next) (i64.const {ret:#x})) (then (local.set $pc (local.get $next)) (br $dispatch)))\n",
            store(
                self.dirty
                    .intersection(&leaf.used)
                    .filter(|&&r| now & super::dirty::bit(r) != 0)
            ),
            load(self.used.intersection(&leaf.dirty))
        )
    }

    /// A non-control-flow instruction; `access`: its place in a group of accesses, for loads
    /// and stores (without it, the access checks itself).
    pub fn op(&self, inst: &Inst, access: Option<Access>) -> String {
        let pc = inst.addr;
        let line = match inst.op {
            Op::Lui { rd, imm } => set(rd, &format!("(i64.const {imm})")),
            Op::Auipc { rd, imm } => {
                set(rd, &format!("(i64.const {:#x})", pc.wrapping_add(imm as u64)))
            }
            Op::Load {
                op,
                rd,
                rs1,
                offset,
            } => {
                let load = match op {
                    LoadOp::B => "i64.load8_s",
                    LoadOp::H => "i64.load16_s",
                    LoadOp::W => "i64.load32_s",
                    LoadOp::D => "i64.load",
                    LoadOp::Bu => "i64.load8_u",
                    LoadOp::Hu => "i64.load16_u",
                    LoadOp::Wu => "i64.load32_u",
                };
                let (check, mem) = Access::of(access, rs1, offset);
                format!("{check}{}", set(rd, &format!("({load} {mem})")))
            }
            Op::Store {
                op,
                rs1,
                rs2,
                offset,
            } => {
                let store = match op {
                    StoreOp::B => "i64.store8",
                    StoreOp::H => "i64.store16",
                    StoreOp::W => "i64.store32",
                    StoreOp::D => "i64.store",
                };
                let (check, mem) = Access::of(access, rs1, offset);
                format!("{check}({store} {mem} {})", get(rs2))
            }
            Op::AluImm {
                op,
                word,
                rd,
                rs1,
                imm,
            } => set(rd, &alu(op, word, &get(rs1), &format!("(i64.const {imm})"))),
            Op::Alu {
                op,
                word,
                rd,
                rs1,
                rs2,
            } => set(rd, &alu(op, word, &get(rs1), &get(rs2))),
            Op::Fence | Op::FenceI => "(nop)".into(),
            Op::Ecall => "(local.set $x10 (call $syscall (local.get $x17) (local.get $x10) (local.get $x11) (local.get $x12) (local.get $x13) (local.get $x14) (local.get $x15)))".into(),
            Op::Ebreak => format!("(call $ebreak (i64.const {pc:#x})) unreachable"),
            Op::Csr {
                op,
                rd,
                src,
                imm,
                csr,
            } => {
                let value = if imm {
                    format!("(i64.const {src})")
                } else {
                    get(src)
                };
                // csrrw with rd = x0 does not read; csrrs/csrrc with a zero source do not write.
                let reads = !(op == CsrOp::Rw && rd == 0);
                let writes = op == CsrOp::Rw || src != 0;
                let mut s = String::new();
                if reads {
                    let _ = write!(s, "(local.set $t2 (call $csr_read (i32.const {csr}) (i64.const {pc:#x}))) ");
                }
                if writes {
                    let new = match op {
                        CsrOp::Rw => value,
                        CsrOp::Rs => format!("(i64.or (local.get $t2) {value})"),
                        CsrOp::Rc => format!(
                            "(i64.and (local.get $t2) (i64.xor {value} (i64.const -1)))"
                        ),
                    };
                    let _ = write!(s, "(call $csr_write (i32.const {csr}) {new} (i64.const {pc:#x})) ");
                }
                if reads {
                    s.push_str(&set(rd, "(local.get $t2)"));
                }
                s
            }
            Op::LoadReserved { double, rd, rs1 } => format!(
                "{} (local.set $a (i32.wrap_i64 (local.get $t))) (global.set $resv (i64.extend_i32_u (local.get $a))) {}",
                check(rs1, 0),
                set(
                    rd,
                    if double {
                        "(i64.load offset=0x10000 (local.get $a))"
                    } else {
                        "(i64.load32_s offset=0x10000 (local.get $a))"
                    }
                )
            ),
            Op::StoreConditional {
                double,
                rd,
                rs1,
                rs2,
            } => format!(
                "{} (local.set $a (i32.wrap_i64 (local.get $t))) (if (i64.eq (global.get $resv) (i64.extend_i32_u (local.get $a))) (then ({} {AT_A} {}) {}) (else {})) (global.set $resv (i64.const -1))",
                check(rs1, 0),
                if double { "i64.store" } else { "i64.store32" },
                get(rs2),
                set(rd, "(i64.const 0)"),
                set(rd, "(i64.const 1)")
            ),
            Op::Amo {
                op,
                double,
                rd,
                rs1,
                rs2,
            } => amo(op, double, rd, rs1, rs2),
            Op::FloatLoad {
                double,
                rd,
                rs1,
                offset,
            } => {
                let (check, mem) = Access::of(access, rs1, offset);
                let value = if double {
                    format!("(i64.load {mem})")
                } else {
                    format!("(i64.or (i64.load32_u {mem}) (i64.const {}))", super::float::NAN_BOX)
                };
                format!("{check}{}", set(F + rd, &value))
            }
            Op::FloatStore {
                double,
                rs1,
                rs2,
                offset,
            } => {
                let (check, mem) = Access::of(access, rs1, offset);
                format!(
                    "{check}({} {mem} {})",
                    if double { "i64.store" } else { "i64.store32" },
                    get(F + rs2)
                )
            }
            Op::Float { mnemonic, bits } => super::float::op(mnemonic, bits, pc, self.fenv)
                .unwrap_or_else(|| format!("(call $unsupported (i64.const {pc:#x})) unreachable")),
            Op::Illegal { .. } => format!("(call $illegal (i64.const {pc:#x})) unreachable"),
            Op::Jal { .. } | Op::Jalr { .. } | Op::Branch { .. } => {
                unreachable!("control flow is emitted by function.rs")
            }
        };
        format!("    {line}\n")
    }
}

/// Stores registers `regs` from their locals into their globals (one line).
fn store<'r>(regs: impl Iterator<Item = &'r u8>) -> String {
    line(regs.map(|&r| format!(" (global.set {} (local.get {}))", global(r), local(r))))
}

/// Loads registers `regs` from their globals into their locals (one line).
fn load<'r>(regs: impl Iterator<Item = &'r u8>) -> String {
    line(regs.map(|&r| format!(" (local.set {} (global.get {}))", local(r), global(r))))
}

/// `moves` as one indented line, or nothing.
fn line(moves: impl Iterator<Item = String>) -> String {
    let s: String = moves.collect();
    if s.is_empty() {
        s
    } else {
        format!("   {s}\n")
    }
}

/// An integer operation on `a` and `b` (both i64 expressions).
fn alu(op: AluOp, word: bool, a: &str, b: &str) -> String {
    if word {
        let (x, y) = (format!("(i32.wrap_i64 {a})"), format!("(i32.wrap_i64 {b})"));
        let w = |ins: &str| format!("(i64.extend_i32_s ({ins} {x} {y}))");
        return match op {
            AluOp::Add => w("i32.add"),
            AluOp::Sub => w("i32.sub"),
            AluOp::Sll => w("i32.shl"),
            AluOp::Srl => w("i32.shr_u"),
            AluOp::Sra => w("i32.shr_s"),
            AluOp::Mul => w("i32.mul"),
            AluOp::Div => format!("(call $divw {a} {b})"),
            AluOp::Divu => format!("(call $divuw {a} {b})"),
            AluOp::Rem => format!("(call $remw {a} {b})"),
            AluOp::Remu => format!("(call $remuw {a} {b})"),
            // The decoder gives no other W operation.
            _ => "(block (result i64) (call $illegal (i64.const 0)) (i64.const 0))".into(),
        };
    }
    let i = |ins: &str| format!("({ins} {a} {b})");
    match op {
        AluOp::Add => i("i64.add"),
        AluOp::Sub => i("i64.sub"),
        AluOp::Sll => i("i64.shl"),
        AluOp::Slt => format!("(i64.extend_i32_u {})", i("i64.lt_s")),
        AluOp::Sltu => format!("(i64.extend_i32_u {})", i("i64.lt_u")),
        AluOp::Xor => i("i64.xor"),
        AluOp::Srl => i("i64.shr_u"),
        AluOp::Sra => i("i64.shr_s"),
        AluOp::Or => i("i64.or"),
        AluOp::And => i("i64.and"),
        AluOp::Mul => i("i64.mul"),
        AluOp::Mulh => i("call $mulh"),
        AluOp::Mulhsu => i("call $mulhsu"),
        AluOp::Mulhu => i("call $mulhu"),
        AluOp::Div => i("call $div"),
        AluOp::Divu => i("call $divu"),
        AluOp::Rem => i("call $rem"),
        AluOp::Remu => i("call $remu"),
    }
}

/// An atomic read-modify-write (one hart: a load, the operation, a store).
fn amo(op: AmoOp, double: bool, rd: u8, rs1: u8, rs2: u8) -> String {
    let (ty, old, src) = if double {
        ("i64", "(local.get $t2)", get(rs2))
    } else {
        (
            "i32",
            "(local.get $w)",
            format!("(i32.wrap_i64 {})", get(rs2)),
        )
    };
    let pick = |cmp: &str| format!("(select {old} {src} ({ty}.{cmp} {old} {src}))");
    let new = match op {
        AmoOp::Swap => src.clone(),
        AmoOp::Add => format!("({ty}.add {old} {src})"),
        AmoOp::Xor => format!("({ty}.xor {old} {src})"),
        AmoOp::And => format!("({ty}.and {old} {src})"),
        AmoOp::Or => format!("({ty}.or {old} {src})"),
        AmoOp::Min => pick("lt_s"),
        AmoOp::Max => pick("gt_s"),
        AmoOp::Minu => pick("lt_u"),
        AmoOp::Maxu => pick("gt_u"),
    };
    let (load, result) = if double {
        (
            format!("(local.set $t2 (i64.load {AT_A}))"),
            old.to_string(),
        )
    } else {
        (
            format!("(local.set $w (i32.load {AT_A}))"),
            format!("(i64.extend_i32_s {old})"),
        )
    };
    format!(
        "{} (local.set $a (i32.wrap_i64 (local.get $t))) {load} ({ty}.store {AT_A} {new}) {}",
        check(rs1, 0),
        set(rd, &result)
    )
}
