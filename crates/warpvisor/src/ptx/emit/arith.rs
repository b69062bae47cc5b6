//! Value instructions: integer and float arithmetic, comparisons, conversions, atomics and
//! warp operations.

use std::fmt::Write;

use super::{c_type, KernelEmitter};
use crate::ptx::ast::{Instruction, Operand, Scalar, Space};
use crate::ptx::PtxError;

type R<T> = Result<T, PtxError>;

fn unsupported<T>(i: &Instruction, why: &str) -> R<T> {
    Err(PtxError::Unsupported {
        line: i.line,
        what: format!("`{}` {why}", i.text()),
    })
}

/// `u32` for `b32`/`u32`, `s32` for `s32`: the prelude's helper suffix.
fn int_suffix(t: Scalar) -> String {
    match t {
        Scalar::S(b) => format!("s{b}"),
        t => format!("u{}", t.bits()),
    }
}

fn rounding(i: &Instruction) -> Option<&'static str> {
    if i.has("rz") {
        Some("FE_TOWARDZERO")
    } else if i.has("rm") {
        Some("FE_DOWNWARD")
    } else if i.has("rp") {
        Some("FE_UPWARD")
    } else {
        None
    }
}

fn fsuf(t: Scalar) -> &'static str {
    if t.bits() == 32 {
        "f32"
    } else {
        "f64"
    }
}

impl KernelEmitter<'_> {
    fn operand<'i>(&self, i: &'i Instruction, n: usize) -> R<&'i Operand> {
        i.operands.get(n).ok_or_else(|| PtxError::Unsupported {
            line: i.line,
            what: format!("`{}` lacks operand {}", i.text(), n + 1),
        })
    }

    fn src(&self, i: &Instruction, n: usize, t: Scalar) -> R<String> {
        let v = self.read(i, self.operand(i, n)?, t)?;
        Ok(if i.has("ftz") && t == Scalar::F(32) {
            format!("wvp_ftz_f32({v})")
        } else {
            v
        })
    }

    /// Writes a float result with `.sat` and `.ftz` applied.
    fn float_result(&self, i: &Instruction, t: Scalar, v: String) -> R<String> {
        let mut v = v;
        if i.has("sat") {
            v = format!("wvp_sat_{}({v})", fsuf(t));
        }
        if i.has("ftz") && t == Scalar::F(32) {
            v = format!("wvp_ftz_f32({v})");
        }
        self.write(i, self.operand(i, 0)?, t, &v)
    }

    pub(super) fn arith(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = match i.opcode.as_str() {
            "popc" | "clz" | "bfind" | "brev" | "bfe" | "bfi" | "prmt" | "shf" | "testp" => {
                *i.types().last().ok_or_else(|| PtxError::Unsupported {
                    line: i.line,
                    what: format!("`{}` has no type", i.text()),
                })?
            }
            _ => *i.types().last().unwrap_or(&Scalar::B(32)),
        };
        if t == Scalar::F(16) {
            return unsupported(i, "(half precision is not supported)");
        }
        let ct = c_type(t);
        let f = t.is_float();
        let v: String = match (i.opcode.as_str(), f) {
            ("add" | "sub" | "mul", true) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let op = match i.opcode.as_str() {
                    "add" => "+",
                    "sub" => "-",
                    _ => "*",
                };
                let v = match rounding(i) {
                    Some(m) => format!("wvp_{}_rnd_{}({a}, {b}, 0, {m})", i.opcode, fsuf(t)),
                    None => format!("{a} {op} {b}"),
                };
                return self.push(out, self.float_result(i, t, v)?);
            }
            ("fma" | "mad", true) => {
                let (a, b, c) = (self.src(i, 1, t)?, self.src(i, 2, t)?, self.src(i, 3, t)?);
                let v = match rounding(i) {
                    Some(m) => format!("wvp_fma_rnd_{}({a}, {b}, {c}, {m})", fsuf(t)),
                    None if t.bits() == 32 => format!("fmaf({a}, {b}, {c})"),
                    None => format!("fma({a}, {b}, {c})"),
                };
                return self.push(out, self.float_result(i, t, v)?);
            }
            ("div", true) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let v = match rounding(i) {
                    Some(m) => format!("wvp_div_rnd_{}({a}, {b}, 0, {m})", fsuf(t)),
                    None => format!("{a} / {b}"),
                };
                return self.push(out, self.float_result(i, t, v)?);
            }
            (
                "sqrt" | "rcp" | "rsqrt" | "ex2" | "lg2" | "sin" | "cos" | "tanh" | "abs" | "neg",
                true,
            ) => {
                let a = self.src(i, 1, t)?;
                let s = if t.bits() == 32 { "f" } else { "" };
                let v = match (i.opcode.as_str(), rounding(i)) {
                    ("sqrt", Some(m)) => format!("wvp_sqrt_rnd_{}({a}, 0, 0, {m})", fsuf(t)),
                    ("sqrt", None) => format!("sqrt{s}({a})"),
                    ("rcp", Some(m)) => format!("wvp_div_rnd_{}(1, {a}, 0, {m})", fsuf(t)),
                    ("rcp", None) => format!("({ct})1 / {a}"),
                    ("rsqrt", _) => format!("wvp_rsqrt_{}({a})", fsuf(t)),
                    ("ex2", _) => format!("exp2{s}({a})"),
                    ("lg2", _) => format!("log2{s}({a})"),
                    ("sin", _) => format!("sin{s}({a})"),
                    ("cos", _) => format!("cos{s}({a})"),
                    ("tanh", _) => format!("tanh{s}({a})"),
                    ("abs", _) => format!("fabs{s}({a})"),
                    _ => format!("-{a}"),
                };
                return self.push(out, self.float_result(i, t, v)?);
            }
            ("min" | "max", true) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let s = if t.bits() == 32 { "f" } else { "" };
                let fun = if i.opcode == "min" { "fmin" } else { "fmax" };
                return self.push(out, self.float_result(i, t, format!("{fun}{s}({a}, {b})"))?);
            }
            ("copysign", true) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let s = if t.bits() == 32 { "f" } else { "" };
                format!("copysign{s}({b}, {a})")
            }
            ("testp", true) => {
                let a = self.src(i, 1, t)?;
                let test = match i.modifiers.first().map(String::as_str) {
                    Some("finite") => format!("isfinite({a})"),
                    Some("infinite") => format!("isinf({a})"),
                    Some("number") => format!("!isnan({a})"),
                    Some("notanumber") => format!("isnan({a})"),
                    Some("normal") => format!("wvp_testp_normal({a})"),
                    Some("subnormal") => format!("wvp_testp_subnormal({a})"),
                    _ => return unsupported(i, "tests an unknown class"),
                };
                return self.push(
                    out,
                    self.write(i, self.operand(i, 0)?, Scalar::Pred, &test)?,
                );
            }
            ("add" | "sub", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let op = if i.opcode == "add" { "+" } else { "-" };
                if i.has("sat") {
                    format!("wvp_{}_sat_s32({a}, {b})", i.opcode)
                } else if i.has("cc") || i.opcode.ends_with('c') {
                    return self.carry(i, out, t);
                } else {
                    format!("{a} {op} {b}")
                }
            }
            ("addc" | "subc", false) => return self.carry(i, out, t),
            ("mul" | "mad", false) => return self.multiply(i, out, t),
            ("mul24" | "mad24", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let wide = if t.is_signed() { "int64_t" } else { "uint64_t" };
                let (a, b) = if t.is_signed() {
                    (
                        format!("((int32_t)((uint32_t){a} << 8) >> 8)"),
                        format!("((int32_t)((uint32_t){b} << 8) >> 8)"),
                    )
                } else {
                    (format!("({a} & 0xffffff)"), format!("({b} & 0xffffff)"))
                };
                let p = format!("(({wide}){a} * ({wide}){b})");
                let p = if i.has("hi") {
                    format!("({ct})({p} >> 16)")
                } else {
                    format!("({ct}){p}")
                };
                if i.opcode == "mad24" {
                    format!("{p} + {}", self.src(i, 3, t)?)
                } else {
                    p
                }
            }
            ("div" | "rem", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                format!("wvp_{}_{}({a}, {b})", i.opcode, int_suffix(t))
            }
            ("min" | "max", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let op = if i.opcode == "min" { "<" } else { ">" };
                format!("({a} {op} {b} ? {a} : {b})")
            }
            ("abs", false) => {
                let a = self.src(i, 1, t)?;
                format!("({a} < 0 ? -{a} : {a})")
            }
            ("neg", false) => format!("-{}", self.src(i, 1, t)?),
            ("and" | "or" | "xor", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let op = match i.opcode.as_str() {
                    "and" => "&",
                    "or" => "|",
                    _ => "^",
                };
                format!("{a} {op} {b}")
            }
            ("not", false) if t == Scalar::Pred => format!("!{}", self.src(i, 1, t)?),
            ("not", false) => format!("~{}", self.src(i, 1, t)?),
            ("cnot", false) => format!("({} == 0)", self.src(i, 1, t)?),
            ("shl" | "shr", false) => {
                let a = self.src(i, 1, t)?;
                let s = self.src(i, 2, Scalar::U(32))?;
                match (i.opcode.as_str(), t) {
                    ("shl", _) => format!("wvp_shl_{}({a}, {s})", t.bits()),
                    (_, Scalar::S(b)) => format!("wvp_shr_s{b}({a}, {s})"),
                    _ => format!("wvp_shr_u{}({a}, {s})", t.bits()),
                }
            }
            ("popc", false) => format!("wvp_popc_64((uint64_t){})", self.src(i, 1, t)?),
            ("clz", false) => format!("wvp_clz_{}({})", t.bits(), self.src(i, 1, t)?),
            ("brev", false) => format!("wvp_brev_{}({})", t.bits(), self.src(i, 1, t)?),
            ("bfind", false) => {
                let a = self.src(i, 1, t)?;
                let pos = if t.is_signed() {
                    format!("wvp_bfind_s64((int64_t){a})")
                } else {
                    format!("wvp_bfind_u64((uint64_t){a})")
                };
                let v = if i.has("shiftamt") {
                    format!(
                        "({pos} == 0xffffffffu ? 0xffffffffu : {} - {pos})",
                        t.bits() - 1
                    )
                } else {
                    pos
                };
                return self.push(out, self.write(i, self.operand(i, 0)?, Scalar::U(32), &v)?);
            }
            ("bfe", false) => {
                let a = self.src(i, 1, t)?;
                let (p, l) = (
                    self.src(i, 2, Scalar::U(32))?,
                    self.src(i, 3, Scalar::U(32))?,
                );
                format!(
                    "({ct})wvp_bfe((uint64_t){a}, {p}, {l}, {}, {})",
                    t.bits(),
                    t.is_signed() as u8
                )
            }
            ("bfi", false) => {
                let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
                let (p, l) = (
                    self.src(i, 3, Scalar::U(32))?,
                    self.src(i, 4, Scalar::U(32))?,
                );
                format!(
                    "({ct})wvp_bfi((uint64_t){a}, (uint64_t){b}, {p}, {l}, {})",
                    t.bits()
                )
            }
            ("prmt", false) => {
                if i.modifiers
                    .iter()
                    .any(|m| matches!(m.as_str(), "f4e" | "b4e" | "rc8" | "ecl" | "ecr" | "rc16"))
                {
                    return unsupported(i, "(only the default prmt mode is supported)");
                }
                let (a, b, c) = (self.src(i, 1, t)?, self.src(i, 2, t)?, self.src(i, 3, t)?);
                format!("wvp_prmt({a}, {b}, {c})")
            }
            ("shf", false) => {
                let (a, b, c) = (
                    self.src(i, 1, t)?,
                    self.src(i, 2, t)?,
                    self.src(i, 3, Scalar::U(32))?,
                );
                let dir = if i.has("l") { "l" } else { "r" };
                format!("wvp_shf_{dir}({a}, {b}, {c}, {})", i.has("clamp") as u8)
            }
            ("slct", _) => {
                let dt = *i.types().first().unwrap_or(&t);
                let (a, b) = (self.src(i, 1, dt)?, self.src(i, 2, dt)?);
                let c = self.src(i, 3, t)?;
                return self.push(
                    out,
                    self.write(i, self.operand(i, 0)?, dt, &format!("{c} >= 0 ? {a} : {b}"))?,
                );
            }
            _ => return unsupported(i, "is not supported"),
        };
        let w = self.write(i, self.operand(i, 0)?, t, &v)?;
        self.push(out, w)
    }

    fn push(&self, out: &mut String, s: String) -> R<()> {
        out.push_str(&s);
        Ok(())
    }

    /// `add.cc`, `addc`, `sub.cc`, `subc`: the carry lives in `wvp_cc`.
    fn carry(&mut self, i: &Instruction, out: &mut String, t: Scalar) -> R<()> {
        self.uses_carry = true;
        let (a, b) = (
            self.src(i, 1, Scalar::U(t.bits()))?,
            self.src(i, 2, Scalar::U(t.bits()))?,
        );
        let wide = if t.bits() == 64 {
            "unsigned __int128"
        } else {
            "uint64_t"
        };
        let bits = t.bits();
        let with_carry = i.opcode.ends_with('c');
        let sets = i.has("cc");
        let cin = if with_carry { "wvp_cc" } else { "0" };
        let expr = if i.opcode.starts_with("add") {
            format!("({wide}){a} + ({wide}){b} + {cin}")
        } else {
            format!("({wide}){a} - ({wide}){b} - {cin}")
        };
        let _ = write!(out, "{{ {wide} wvp_w = {expr}; ");
        out.push_str(&self.write(i, self.operand(i, 0)?, Scalar::U(bits), "wvp_w")?);
        if sets {
            let _ = write!(out, " wvp_cc = (uint32_t)(wvp_w >> {bits}) & 1;");
        }
        out.push_str(" }");
        Ok(())
    }

    /// Integer `mul`/`mad` with `.lo`, `.hi` or `.wide`.
    fn multiply(&mut self, i: &Instruction, out: &mut String, t: Scalar) -> R<()> {
        let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
        let ct = c_type(t);
        let bits = t.bits();
        let (v, rt) = if i.has("wide") {
            let wt = if t.is_signed() {
                Scalar::S(bits * 2)
            } else {
                Scalar::U(bits * 2)
            };
            let wc = c_type(wt);
            (format!("({wc}){a} * ({wc}){b}"), wt)
        } else if i.has("hi") {
            (format!("wvp_mulhi_{}({a}, {b})", int_suffix(t)), t)
        } else {
            (format!("({ct})({a} * {b})"), t)
        };
        let v = if i.opcode == "mad" {
            let c = self.src(i, 3, rt)?;
            if i.has("sat") {
                format!("wvp_add_sat_s32({v}, {c})")
            } else {
                format!("{v} + {c}")
            }
        } else {
            v
        };
        out.push_str(&self.write(i, self.operand(i, 0)?, rt, &v)?);
        Ok(())
    }

    /// `setp.cmp[.bool].type p[|q], a, b[, c]` and `set.cmp.dtype.stype d, a, b`.
    pub(super) fn setp(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        let cmp = i.modifiers.first().map(String::as_str).unwrap_or("");
        let (a, b) = (self.src(i, 1, t)?, self.src(i, 2, t)?);
        let ord = format!("(!isnan({a}) && !isnan({b}))");
        let unord = format!("(isnan({a}) || isnan({b}))");
        let c = match (cmp, t.is_float()) {
            ("eq", _) => format!("{a} == {b}"),
            ("ne", false) => format!("{a} != {b}"),
            ("ne", true) => format!("({ord} && {a} != {b})"),
            ("lt" | "lo", _) => format!("{a} < {b}"),
            ("le" | "ls", _) => format!("{a} <= {b}"),
            ("gt" | "hi", _) => format!("{a} > {b}"),
            ("ge" | "hs", _) => format!("{a} >= {b}"),
            ("equ", true) => format!("({unord} || {a} == {b})"),
            ("neu", true) => format!("!({a} == {b})"),
            ("ltu", true) => format!("!({a} >= {b})"),
            ("leu", true) => format!("!({a} > {b})"),
            ("gtu", true) => format!("!({a} <= {b})"),
            ("geu", true) => format!("!({a} < {b})"),
            ("num", true) => ord,
            ("nan", true) => unord,
            _ => return unsupported(i, "compares in an unknown way"),
        };
        let comb = i
            .modifiers
            .iter()
            .find(|m| matches!(m.as_str(), "and" | "or" | "xor"));
        let c = match comb {
            Some(op) => {
                let p = self.read(i, self.operand(i, 3)?, Scalar::Pred)?;
                let op = match op.as_str() {
                    "and" => "&&",
                    "or" => "||",
                    _ => "!=",
                };
                format!("(({c}) != 0) {op} (({p}) != 0)")
            }
            None => c,
        };
        if i.opcode == "set" {
            let dt = *i.types().first().unwrap_or(&t);
            let v = if dt.is_float() {
                format!("({c}) ? ({})1 : 0", c_type(dt))
            } else {
                format!("({c}) ? ({})-1 : 0", c_type(dt))
            };
            out.push_str(&self.write(i, self.operand(i, 0)?, dt, &v)?);
            return Ok(());
        }
        match self.operand(i, 0)? {
            Operand::Pair(p, q) => {
                let _ = write!(out, "{{ uint32_t wvp_c = ({c}) != 0; ");
                out.push_str(&self.write(i, &Operand::Reg(p.clone()), Scalar::Pred, "wvp_c")?);
                out.push(' ');
                out.push_str(&self.write(i, &Operand::Reg(q.clone()), Scalar::Pred, "!wvp_c")?);
                out.push_str(" }");
            }
            d => out.push_str(&self.write(i, d, Scalar::Pred, &c)?),
        }
        Ok(())
    }

    /// `cvt[.rnd][.ftz][.sat].dtype.atype d, a`.
    pub(super) fn cvt(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let types = i.types();
        let (Some(&dt), Some(&st)) = (types.first(), types.get(1)) else {
            return unsupported(i, "needs two types");
        };
        if dt == Scalar::F(16) || st == Scalar::F(16) {
            return unsupported(i, "(half precision is not supported)");
        }
        let a = self.src(i, 1, st)?;
        let v = match (dt.is_float(), st.is_float()) {
            (false, false) => {
                if i.has("sat") {
                    let (lo, hi) = int_range(dt);
                    format!("((__int128){a} < (__int128){lo} ? (__int128){lo} : (__int128){a} > (__int128){hi} ? (__int128){hi} : (__int128){a})")
                } else {
                    format!("({}){a}", c_type(dt))
                }
            }
            (false, true) => {
                let s = if st.bits() == 32 { "f" } else { "" };
                let r = if i.has("rni") {
                    format!("rint{s}({a})")
                } else if i.has("rmi") {
                    format!("floor{s}({a})")
                } else if i.has("rpi") {
                    format!("ceil{s}({a})")
                } else {
                    format!("trunc{s}({a})")
                };
                format!("wvp_f2i_{}((double){r})", int_suffix(dt))
            }
            (true, false) => match rounding(i) {
                Some(m) if st.bits() == 64 || dt.bits() == 32 => {
                    let sign = if st.is_signed() { "s64" } else { "u64" };
                    let wide = if st.is_signed() {
                        "(int64_t)"
                    } else {
                        "(uint64_t)"
                    };
                    format!("wvp_{}_of_{sign}_rnd({wide}{a}, {m})", fsuf(dt))
                }
                _ => format!("({}){a}", c_type(dt)),
            },
            (true, true) => {
                let s = if dt.bits() == 32 { "f" } else { "" };
                if i.has("rni") {
                    format!("rint{s}({a})")
                } else if i.has("rzi") {
                    format!("trunc{s}({a})")
                } else if i.has("rmi") {
                    format!("floor{s}({a})")
                } else if i.has("rpi") {
                    format!("ceil{s}({a})")
                } else if let (Some(m), 32, 64) = (rounding(i), dt.bits(), st.bits()) {
                    format!("wvp_f32_of_f64_rnd({a}, {m})")
                } else {
                    format!("({}){a}", c_type(dt))
                }
            }
        };
        let w = if dt.is_float() {
            self.float_result(i, dt, v)?
        } else {
            self.write(i, self.operand(i, 0)?, dt, &v)?
        };
        out.push_str(&w);
        Ok(())
    }

    /// `atom.space.op.type d, [a], b[, c]` and `red.space.op.type [a], b`.
    pub(super) fn atom(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        let red = i.opcode == "red";
        let (addr_at, val_at) = if red { (0, 1) } else { (1, 2) };
        let space = match i.space() {
            Space::Shared => Space::Shared,
            _ => Space::Generic,
        };
        let p = self.pointer(i, self.operand(i, addr_at)?, space, t.bytes())?;
        let b = self.src(i, val_at, t)?;
        let op = i
            .modifiers
            .iter()
            .find(|m| {
                matches!(
                    m.as_str(),
                    "add" | "min" | "max" | "inc" | "dec" | "and" | "or" | "xor" | "exch" | "cas"
                )
            })
            .map(String::as_str)
            .unwrap_or("");
        let ct = c_type(t);
        let v = match (op, t) {
            ("add", Scalar::F(bits)) => format!("wvp_atom_add_f{bits}({p}, {b})"),
            ("add", _) => format!("__atomic_fetch_add(({ct} *){p}, {b}, __ATOMIC_SEQ_CST)"),
            ("and" | "or" | "xor", _) => {
                format!("__atomic_fetch_{op}(({ct} *){p}, {b}, __ATOMIC_SEQ_CST)")
            }
            ("exch", _) => format!("__atomic_exchange_n(({ct} *){p}, {b}, __ATOMIC_SEQ_CST)"),
            ("min" | "max", Scalar::F(_)) => {
                return unsupported(i, "(float min/max atomics are not supported)")
            }
            ("min" | "max", _) => format!("wvp_atom_{op}_{}({p}, {b})", int_suffix(t)),
            ("inc" | "dec", Scalar::U(32) | Scalar::B(32)) => {
                format!("wvp_atom_{op}_u32({p}, {b})")
            }
            ("cas", _) if !t.is_float() => {
                let c = self.src(i, val_at + 1, t)?;
                format!(
                    "wvp_atom_cas_{}({p}, (uint{}_t){b}, (uint{}_t){c})",
                    t.bits(),
                    t.bits(),
                    t.bits()
                )
            }
            _ => return unsupported(i, "is not supported"),
        };
        if red {
            let _ = write!(out, "(void){v};");
        } else {
            out.push_str(&self.write(i, self.operand(i, 0)?, t, &v)?);
        }
        Ok(())
    }

    /// `shfl.sync.mode.b32 d[|p], a, b, c, membermask`: a split point; the warp's lanes
    /// exchange at the round's end.
    pub(super) fn shfl(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let mode = if i.has("up") {
            "WVP_SHFL_UP"
        } else if i.has("down") {
            "WVP_SHFL_DOWN"
        } else if i.has("bfly") {
            "WVP_SHFL_BFLY"
        } else if i.has("idx") {
            "WVP_SHFL_IDX"
        } else {
            return unsupported(i, "has an unknown mode");
        };
        if !i.has("sync") {
            return unsupported(i, "(shfl without .sync is not supported; use shfl.sync)");
        }
        let a = self.src(i, 1, Scalar::U(32))?;
        let b = self.src(i, 2, Scalar::U(32))?;
        let c = self.src(i, 3, Scalar::U(32))?;
        let m = self.src(i, 4, Scalar::U(32))?;
        let r = self.splits + 1;
        let prepare = format!("wvp_warp_arrive(wvp_cta_, wvp_t, {r}, {mode}, {a}, {b}, {c}, {m});");
        self.split_point(&prepare, out);
        let res = "(uint32_t)wvp_th[wvp_t].result";
        match self.operand(i, 0)? {
            Operand::Pair(d, p) => {
                out.push(' ');
                out.push_str(&self.write(i, &Operand::Reg(d.clone()), Scalar::B(32), res)?);
                out.push(' ');
                out.push_str(&self.write(
                    i,
                    &Operand::Reg(p.clone()),
                    Scalar::Pred,
                    "wvp_th[wvp_t].pred",
                )?);
            }
            d => {
                out.push(' ');
                out.push_str(&self.write(i, d, Scalar::B(32), res)?);
            }
        }
        Ok(())
    }

    /// `vote.sync.{all,any,uni}.pred d, a, mask` and `vote.sync.ballot.b32 d, a, mask`.
    pub(super) fn vote(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let mode = if i.has("all") {
            "WVP_VOTE_ALL"
        } else if i.has("any") {
            "WVP_VOTE_ANY"
        } else if i.has("uni") {
            "WVP_VOTE_UNI"
        } else if i.has("ballot") {
            "WVP_VOTE_BALLOT"
        } else {
            return unsupported(i, "has an unknown mode");
        };
        if !i.has("sync") {
            return unsupported(i, "(vote without .sync is not supported; use vote.sync)");
        }
        let a = self.read(i, self.operand(i, 1)?, Scalar::Pred)?;
        let m = self.src(i, 2, Scalar::U(32))?;
        let r = self.splits + 1;
        let prepare =
            format!("wvp_warp_arrive(wvp_cta_, wvp_t, {r}, {mode}, ({a}) != 0, 0, 0, {m});");
        self.split_point(&prepare, out);
        out.push(' ');
        let w = if mode == "WVP_VOTE_BALLOT" {
            self.write(
                i,
                self.operand(i, 0)?,
                Scalar::B(32),
                "(uint32_t)wvp_th[wvp_t].result",
            )?
        } else {
            self.write(i, self.operand(i, 0)?, Scalar::Pred, "wvp_th[wvp_t].pred")?
        };
        out.push_str(&w);
        Ok(())
    }
}

fn int_range(t: Scalar) -> (String, String) {
    let b = t.bits();
    if t.is_signed() {
        (
            format!("(-{}ll - 1)", (1u64 << (b - 1)) - 1),
            format!("{}ll", (1u64 << (b - 1)) - 1),
        )
    } else if b == 64 {
        ("0".into(), "18446744073709551615ull".into())
    } else {
        ("0".into(), format!("{}ull", (1u64 << b) - 1))
    }
}
