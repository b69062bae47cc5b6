//! The F and D extensions: one line of WAT per instruction, on registers that hold raw bits
//! (singles NaN-boxed). NaN results are RISC-V's canonical NaN. WebAssembly rounds to
//! nearest-even and has no exception flags: a module whose program can observe either (it
//! reads `fflags`/`fcsr`, or writes `frm`/`fcsr`, see [`FloatEnv`]) sends every rounding
//! operation through the runtime's exact emulation (`fenv.wat`), as does any instruction with
//! a static rounding mode other than nearest-even; other programs keep WebAssembly's
//! operators. Conversions to integers implement all five modes and raise their flags always.

use super::ops::{get, set, F};
use crate::riscv::decode::{CsrOp, Inst, Op};

/// What a program can observe of the floating-point environment, found in its code.
#[derive(Clone, Copy, Debug, Default)]
pub struct FloatEnv {
    /// Some instruction reads `fflags` or `fcsr`: the flags must be accumulated.
    pub flags: bool,
    /// Some instruction writes `frm` or `fcsr`: the dynamic rounding mode may change.
    pub modes: bool,
}

impl FloatEnv {
    /// The environment the instructions `insts` can observe.
    pub fn of<'i>(insts: impl IntoIterator<Item = &'i Inst>) -> FloatEnv {
        let mut env = FloatEnv::default();
        for inst in insts {
            if let Op::Csr {
                op, rd, src, csr, ..
            } = inst.op
            {
                // A read into x0 is no read the program can see.
                let reads = rd != 0;
                let writes = op == CsrOp::Rw || src != 0;
                env.flags |= reads && matches!(csr, 1 | 3);
                env.modes |= writes && matches!(csr, 2 | 3);
            }
        }
        env
    }

    /// Whether every rounding operation goes through the exact emulation.
    fn exact(self) -> bool {
        self.flags || self.modes
    }
}

/// Which registers a floating-point instruction reads and writes, in the translator's
/// numbering (integer 0–31, floating-point 32–63).
pub fn operands(mnemonic: &str, bits: u32) -> (Option<u8>, Vec<u8>) {
    let (rd, rs1, rs2, rs3) = fields(bits);
    let base = mnemonic.split('.').next().unwrap_or("");
    let int_dest = matches!(base, "feq" | "flt" | "fle" | "fclass")
        || mnemonic.starts_with("fmv.x.")
        || (base == "fcvt" && int_kind(mnemonic, 1).is_some());
    let int_source =
        mnemonic.ends_with(".x") || (base == "fcvt" && int_kind(mnemonic, 2).is_some());
    let dest = Some(if int_dest { rd } else { F + rd });
    let src1 = if int_source { rs1 } else { F + rs1 };
    let reads = match base {
        "fmadd" | "fmsub" | "fnmsub" | "fnmadd" => vec![F + rs1, F + rs2, F + rs3],
        "fsqrt" | "fclass" | "fcvt" | "fmv" => vec![src1],
        _ => vec![F + rs1, F + rs2],
    };
    (dest, reads)
}

fn fields(bits: u32) -> (u8, u8, u8, u8) {
    (
        ((bits >> 7) & 31) as u8,
        ((bits >> 15) & 31) as u8,
        ((bits >> 20) & 31) as u8,
        (bits >> 27) as u8,
    )
}

/// In `fcvt.A.B`, the integer kind of part `part` (1: A, 2: B): 0 w, 1 wu, 2 l, 3 lu.
fn int_kind(mnemonic: &str, part: usize) -> Option<u32> {
    match mnemonic.split('.').nth(part)? {
        "w" => Some(0),
        "wu" => Some(1),
        "l" => Some(2),
        "lu" => Some(3),
        _ => None,
    }
}

/// A register as an `f64` (`double`) or `f32` expression.
fn value(r: u8, double: bool) -> String {
    if double {
        format!("(f64.reinterpret_i64 {})", get(F + r))
    } else {
        format!("(call $fs {})", get(F + r))
    }
}

/// An `f64`/`f32` result as register bits, NaNs made canonical.
fn result(expr: &str, double: bool) -> String {
    if double {
        format!("(call $cd {expr})")
    } else {
        format!("(call $cs {expr})")
    }
}

/// The WAT of a floating-point instruction other than loads and stores; `None` where
/// it is not translated.
pub fn op(mnemonic: &str, bits: u32, pc: u64, env: FloatEnv) -> Option<String> {
    if let Some(line) = moves(mnemonic, bits) {
        return Some(line);
    }
    let (rd, rs1, rs2, rs3) = fields(bits);
    let rm = (bits >> 12) & 7;
    let double = mnemonic.ends_with(".d") || mnemonic.starts_with("fcvt.d.");
    let t = if double { "f64" } else { "f32" };
    let (a, b) = (value(rs1, double), value(rs2, double));
    let base = mnemonic.split('.').next().unwrap_or("");
    if base == "fcvt" {
        return Some(convert(mnemonic, rd, rs1, rm, pc, env));
    }
    let single = i32::from(!double);
    // The exact emulation: every mode and the flags.
    let emulated = |code: u32| {
        // Only the operands the instruction has: the other fields are part of its opcode.
        let operand = |r: u8, has: bool| {
            if has {
                get(F + r)
            } else {
                "(i64.const 0)".into()
            }
        };
        set(
            F + rd,
            &format!(
                "(call $fenv_op (i32.const {code}) {} {} {} (i32.const {single}) (i32.const {rm}) (i64.const {pc:#x}))",
                get(F + rs1),
                operand(rs2, code != 4),
                operand(rs3, code >= 5)
            ),
        )
    };
    let rounding = matches!(
        base,
        "fadd" | "fsub" | "fmul" | "fdiv" | "fsqrt" | "fmadd" | "fmsub" | "fnmsub" | "fnmadd"
    );
    if rounding && (env.exact() || !matches!(rm, 0 | 7)) {
        let code = match base {
            "fadd" => 0,
            "fsub" => 1,
            "fmul" => 2,
            "fdiv" => 3,
            "fsqrt" => 4,
            "fmadd" => 5,
            "fmsub" => 6,
            "fnmsub" => 7,
            _ => 8,
        };
        return Some(emulated(code));
    }
    // The invalid flag of comparisons and min/max, where flags are read.
    let nv = |quiet: bool| {
        if env.flags {
            format!(
                "(call $fenv_nv (i32.const {}) {} {} (i32.const {single})) ",
                i32::from(quiet),
                get(F + rs1),
                get(F + rs2)
            )
        } else {
            String::new()
        }
    };
    // Here arithmetic rounds to nearest-even: its rm is 0, or 7 with `frm` never written.
    let line = match base {
        "fadd" | "fsub" | "fmul" | "fdiv" => {
            let ins = &base[1..];
            set(F + rd, &result(&format!("({t}.{ins} {a} {b})"), double))
        }
        "fsqrt" => set(F + rd, &result(&format!("({t}.sqrt {a})"), double)),
        "fmin" | "fmax" => {
            let w = if double { "d" } else { "s" };
            format!(
                "{}{}",
                nv(true),
                set(
                    F + rd,
                    &format!("(call ${base}_{w} {} {})", get(F + rs1), get(F + rs2)),
                )
            )
        }
        "feq" | "flt" | "fle" => {
            let cmp = &base[1..];
            format!(
                "{}{}",
                nv(base == "feq"),
                set(rd, &format!("(i64.extend_i32_u ({t}.{cmp} {a} {b}))"))
            )
        }
        "fclass" => {
            let w = if double { "d" } else { "s" };
            set(rd, &format!("(call $fclass_{w} {})", get(F + rs1)))
        }
        "fmadd" | "fmsub" | "fnmsub" | "fnmadd" => {
            let neg = |x: String, yes: bool| if yes { format!("({t}.neg {x})") } else { x };
            let c = value(rs3, double);
            let (na, nc) = match base {
                "fmadd" => (false, false),
                "fmsub" => (false, true),
                "fnmsub" => (true, false),
                _ => (true, true),
            };
            let w = if double { "d" } else { "s" };
            set(
                F + rd,
                &result(
                    &format!("(call $fma_{w} {} {b} {})", neg(a, na), neg(c, nc)),
                    double,
                ),
            )
        }
        _ => return None,
    };
    Some(line)
}

/// `fcvt.A.B`: between the formats, integer → float (rounded to nearest-even: exact for the
/// 32-bit sources), float → integer (every rounding mode, RISC-V's saturation and NaN rules).
fn convert(mnemonic: &str, rd: u8, rs1: u8, rm: u32, pc: u64, env: FloatEnv) -> String {
    let parts: Vec<&str> = mnemonic.split('.').collect();
    let (to, from) = (parts.get(1).copied(), parts.get(2).copied());
    // To a float format: exact from a single or a 32-bit integer to a double; otherwise
    // rounded, through the exact emulation where the mode may not be nearest-even or the
    // flags are read.
    let exact = to == Some("d") && matches!(from, Some("s" | "w" | "wu"));
    if matches!(to, Some("s" | "d")) && !exact && (env.exact() || !matches!(rm, 0 | 7)) {
        let kind = match from {
            Some("d") => 4,
            _ => int_kind(mnemonic, 2).unwrap_or(2),
        };
        return set(
            F + rd,
            &format!(
                "(call $fenv_cvt (i32.const {kind}) {} (i32.const {}) (i32.const {rm}) (i64.const {pc:#x}))",
                if kind == 4 { get(F + rs1) } else { get(rs1) },
                i32::from(to == Some("s"))
            ),
        );
    }
    if (to, from) == (Some("d"), Some("s")) && env.flags {
        // Widening is exact; a signaling NaN is invalid.
        return format!(
            "(call $fenv_nv (i32.const 1) {0} {0} (i32.const 1)) {1}",
            get(F + rs1),
            convert(mnemonic, rd, rs1, rm, pc, FloatEnv::default())
        );
    }
    match (to, from) {
        (Some("s"), Some("d")) => set(
            F + rd,
            &result(&format!("(f32.demote_f64 {})", value(rs1, true)), false),
        ),
        (Some("d"), Some("s")) => set(
            F + rd,
            &result(&format!("(f64.promote_f32 {})", value(rs1, false)), true),
        ),
        (Some(f @ ("s" | "d")), Some(_)) => {
            let double = f == "d";
            let t = if double { "f64" } else { "f32" };
            let kind = int_kind(mnemonic, 2).unwrap_or(2);
            let src = get(rs1);
            let expr = match kind {
                0 => format!("({t}.convert_i32_s (i32.wrap_i64 {src}))"),
                1 => format!("({t}.convert_i32_u (i32.wrap_i64 {src}))"),
                2 => format!("({t}.convert_i64_s {src})"),
                _ => format!("({t}.convert_i64_u {src})"),
            };
            set(F + rd, &result(&expr, double))
        }
        (Some(_), Some(f)) => {
            let kind = int_kind(mnemonic, 1).unwrap_or(2);
            let x = if f == "d" {
                value(rs1, true)
            } else {
                format!("(f64.promote_f32 {})", value(rs1, false))
            };
            set(
                rd,
                &format!(
                    "(call $fcvt_int {x} (i32.const {kind}) (i32.const {rm}) (i64.const {pc:#x}))"
                ),
            )
        }
        _ => format!("(call $unsupported (i64.const {pc:#x})) unreachable"),
    }
}

/// The upper half of a NaN-boxed single.
pub const NAN_BOX: i64 = -0x1_0000_0000;

/// Moves between the register files and sign injection: bit operations, no rounding.
fn moves(mnemonic: &str, bits: u32) -> Option<String> {
    let (rd, rs1, rs2, _) = fields(bits);
    let sign = |op: &str, a: String, b: String, mask: i64| -> String {
        let s = match op {
            "fsgnj" => b,
            "fsgnjn" => format!("(i64.xor {b} (i64.const -1))"),
            _ => format!("(i64.xor {a} {b})"),
        };
        format!(
            "(i64.or (i64.and {a} (i64.const {})) (i64.and {s} (i64.const {mask})))",
            !mask
        )
    };
    Some(match mnemonic {
        "fmv.x.w" => set(
            rd,
            &format!("(i64.extend_i32_s (i32.wrap_i64 {}))", get(F + rs1)),
        ),
        "fmv.x.d" => set(rd, &get(F + rs1)),
        "fmv.w.x" => set(
            F + rd,
            &format!(
                "(i64.or (i64.and {} (i64.const 0xffffffff)) (i64.const {NAN_BOX}))",
                get(rs1)
            ),
        ),
        "fmv.d.x" => set(F + rd, &get(rs1)),
        "fsgnj.d" | "fsgnjn.d" | "fsgnjx.d" => set(
            F + rd,
            &sign(
                &mnemonic[..mnemonic.len() - 2],
                get(F + rs1),
                get(F + rs2),
                i64::MIN,
            ),
        ),
        "fsgnj.s" | "fsgnjn.s" | "fsgnjx.s" => set(
            F + rd,
            &format!(
                "(i64.or (i64.and {} (i64.const 0xffffffff)) (i64.const {NAN_BOX}))",
                sign(
                    &mnemonic[..mnemonic.len() - 2],
                    format!("(call $unbox {})", get(F + rs1)),
                    format!("(call $unbox {})", get(F + rs2)),
                    0x8000_0000,
                )
            ),
        ),
        _ => return None,
    })
}
