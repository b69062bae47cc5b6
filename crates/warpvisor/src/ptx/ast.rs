//! The model of a PTX module: what the parser produces and the emitter reads. Instructions
//! stay close to the text (opcode, modifiers, operands) so that the emitter decides what each
//! modifier means in one place, and an unsupported one is reported with its line.

/// A parsed PTX module.
#[derive(Debug, Clone, Default)]
pub struct PtxModule {
    /// `.version` (e.g. `8.8`).
    pub version: String,
    /// `.target` items (e.g. `sm_70`).
    pub target: Vec<String>,
    /// `.address_size` (64 unless stated).
    pub address_size: u32,
    /// Module-scope variables (`.global`, `.const`, `.shared`).
    pub variables: Vec<Variable>,
    /// `.entry` kernels and `.func` functions, in source order.
    pub functions: Vec<Function>,
}

/// A state space of PTX memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Device memory shared by every thread (`.global`).
    Global,
    /// Read-only device memory (`.const`); warpvisor keeps it with the module's globals.
    Const,
    /// Per-CTA memory (`.shared`).
    Shared,
    /// Per-thread memory (`.local`).
    Local,
    /// Kernel and function parameters (`.param`).
    Param,
    /// A generic address: any of the above, by address.
    Generic,
}

impl Space {
    /// The space a modifier names, if it names one.
    pub fn from_modifier(m: &str) -> Option<Space> {
        Some(match m {
            "global" => Space::Global,
            "const" => Space::Const,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "param" => Space::Param,
            _ => return None,
        })
    }
}

/// A declared variable (module scope or inside a function body).
#[derive(Debug, Clone)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// Its state space.
    pub space: Space,
    /// Alignment in bytes.
    pub align: u32,
    /// Element type (`b8`, `u32`, `f32`, ...).
    pub ty: Scalar,
    /// Elements; `None` for an unsized array (`.extern .shared .b8 s[]`: dynamic shared memory).
    pub count: Option<u64>,
    /// Initial bytes (module scope), little endian; empty means zero.
    pub init: Vec<u8>,
    /// Source line.
    pub line: usize,
}

impl Variable {
    /// Size in bytes (0 for an unsized array).
    pub fn bytes(&self) -> u64 {
        self.count.unwrap_or(0) * self.ty.bytes() as u64
    }
}

/// A scalar PTX type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// Untyped bits (`.b8`…`.b64`), width in bits.
    B(u32),
    /// Unsigned (`.u8`…`.u64`).
    U(u32),
    /// Signed (`.s8`…`.s64`).
    S(u32),
    /// Float (`.f32`, `.f64`; `.f16` is rejected by the emitter).
    F(u32),
    /// Predicate (`.pred`).
    Pred,
}

impl Scalar {
    /// The type a modifier names, if it names one.
    pub fn from_modifier(m: &str) -> Option<Scalar> {
        let (kind, bits) = m.split_at(1.min(m.len()));
        if m == "pred" {
            return Some(Scalar::Pred);
        }
        let bits: u32 = bits.parse().ok()?;
        let ok_int = matches!(bits, 8 | 16 | 32 | 64);
        Some(match kind {
            "b" if ok_int => Scalar::B(bits),
            "u" if ok_int => Scalar::U(bits),
            "s" if ok_int => Scalar::S(bits),
            "f" if matches!(bits, 16 | 32 | 64) => Scalar::F(bits),
            _ => return None,
        })
    }

    /// Width in bits (predicates count as 1).
    pub fn bits(self) -> u32 {
        match self {
            Scalar::B(b) | Scalar::U(b) | Scalar::S(b) | Scalar::F(b) => b,
            Scalar::Pred => 1,
        }
    }

    /// Size in bytes in memory.
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    /// Whether this is a float type.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F(_))
    }

    /// Whether this is a signed integer type.
    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::S(_))
    }

    /// The PTX spelling (`u32`).
    pub fn name(self) -> String {
        match self {
            Scalar::B(b) => format!("b{b}"),
            Scalar::U(b) => format!("u{b}"),
            Scalar::S(b) => format!("s{b}"),
            Scalar::F(b) => format!("f{b}"),
            Scalar::Pred => "pred".into(),
        }
    }
}

/// A kernel (`.entry`) or device function (`.func`).
#[derive(Debug, Clone)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// Whether it is a kernel.
    pub is_entry: bool,
    /// Return parameters (`.func` only).
    pub returns: Vec<Param>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Registers declared in the body.
    pub registers: Vec<Register>,
    /// Variables declared in the body (`.local`, `.shared`, `.param`).
    pub variables: Vec<Variable>,
    /// The body; `None` for a declaration without one.
    pub body: Option<Vec<Statement>>,
    /// Source line of the header.
    pub line: usize,
}

/// A parameter: `.param .u64 name` or `.param .align 8 .b8 name[16]`.
#[derive(Debug, Clone)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Element type.
    pub ty: Scalar,
    /// Alignment in bytes.
    pub align: u32,
    /// Elements (1 unless an array).
    pub count: u64,
}

impl Param {
    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.count * self.ty.bytes() as u64
    }
}

/// A register (`%r5`); `.reg .b32 %r<6>` declares `%r0`…`%r5`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Register {
    /// Name without `%`.
    pub name: String,
    /// Type.
    pub ty: Scalar,
}

/// One statement of a body.
#[derive(Debug, Clone)]
pub enum Statement {
    /// `name:`
    Label(String),
    /// An instruction.
    Instr(Instruction),
    /// `name: .branchtargets a, b, c;` (the table of a `brx.idx`).
    BranchTargets(String, Vec<String>),
}

/// `@%p` or `@!%p` before an instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The predicate register (without `%`).
    pub reg: String,
    /// Whether the guard is negated.
    pub negated: bool,
}

/// An instruction as written: `@!%p1 ld.global.nc.v2.f32 {%f1, %f2}, [%rd4+8];`
#[derive(Debug, Clone)]
pub struct Instruction {
    /// Guard predicate.
    pub guard: Option<Guard>,
    /// The opcode (`ld`).
    pub opcode: String,
    /// Modifiers in order, without dots (`["global", "nc", "v2", "f32"]`).
    pub modifiers: Vec<String>,
    /// Operands.
    pub operands: Vec<Operand>,
    /// Source line.
    pub line: usize,
}

impl Instruction {
    /// Whether the modifier `m` is present.
    pub fn has(&self, m: &str) -> bool {
        self.modifiers.iter().any(|x| x == m)
    }

    /// The types among the modifiers, in order.
    pub fn types(&self) -> Vec<Scalar> {
        self.modifiers
            .iter()
            .filter_map(|m| Scalar::from_modifier(m))
            .collect()
    }

    /// The state space among the modifiers, `Generic` if none.
    pub fn space(&self) -> Space {
        self.modifiers
            .iter()
            .find_map(|m| Space::from_modifier(m))
            .unwrap_or(Space::Generic)
    }

    /// The whole instruction as PTX text (guard, opcode, modifiers, operands), for the
    /// comments of the generated C.
    pub fn source(&self) -> String {
        let mut s = match &self.guard {
            Some(g) => format!("@{}%{} ", if g.negated { "!" } else { "" }, g.reg),
            None => String::new(),
        };
        s.push_str(&self.text());
        let ops: Vec<String> = self.operands.iter().map(Operand::source).collect();
        if !ops.is_empty() {
            s.push(' ');
            s.push_str(&ops.join(", "));
        }
        s
    }

    /// A `call`'s parts: return variables, callee, argument variables; `None` for a call
    /// through a register (or an instruction that is not a call).
    pub fn call_parts(&self) -> Option<(Vec<Operand>, &str, Vec<Operand>)> {
        match self.operands.as_slice() {
            [Operand::List(r), Operand::Symbol(f), Operand::List(a)] => {
                Some((r.clone(), f.as_str(), a.clone()))
            }
            [Operand::List(r), Operand::Symbol(f)] => Some((r.clone(), f.as_str(), Vec::new())),
            [Operand::Symbol(f), Operand::List(a)] => Some((Vec::new(), f.as_str(), a.clone())),
            [Operand::Symbol(f)] => Some((Vec::new(), f.as_str(), Vec::new())),
            _ => None,
        }
    }

    /// The opcode with its modifiers (`ld.global.f32`), for messages.
    pub fn text(&self) -> String {
        let mut s = self.opcode.clone();
        for m in &self.modifiers {
            s.push('.');
            s.push_str(m);
        }
        s
    }
}

/// An operand.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// `%r1` (without `%`), or a special register such as `tid.x`.
    Reg(String),
    /// `!%p1` in a predicate position.
    NotReg(String),
    /// `%r1|%p2`: a value and a predicate destination.
    Pair(String, String),
    /// An integer immediate.
    Int(i64),
    /// A float immediate: `0f3F800000` (f32 bits) or `0d...` (f64 bits).
    Float32(u32),
    /// A float immediate, double.
    Float64(u64),
    /// A symbol: a variable, a parameter, a label or a function.
    Symbol(String),
    /// `[base+offset]`: base is a register, a symbol, or nothing (an absolute address).
    Address(Option<Box<Operand>>, i64),
    /// `{a, b, ...}`.
    Vector(Vec<Operand>),
    /// `(a, b, ...)` in a `call`.
    List(Vec<Operand>),
}

impl Operand {
    /// The operand as PTX text.
    pub fn source(&self) -> String {
        match self {
            Operand::Reg(r) => format!("%{r}"),
            Operand::NotReg(r) => format!("!%{r}"),
            Operand::Pair(a, b) => format!("%{a}|%{b}"),
            Operand::Int(v) => v.to_string(),
            Operand::Float32(b) => format!("0f{b:08X}"),
            Operand::Float64(b) => format!("0d{b:016X}"),
            Operand::Symbol(s) => s.clone(),
            Operand::Address(base, off) => match (base, off) {
                (Some(b), 0) => format!("[{}]", b.source()),
                (Some(b), o) => format!("[{}+{o}]", b.source()),
                (None, o) => format!("[{o}]"),
            },
            Operand::Vector(v) => format!(
                "{{{}}}",
                v.iter().map(Operand::source).collect::<Vec<_>>().join(", ")
            ),
            Operand::List(v) => format!(
                "({})",
                v.iter().map(Operand::source).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}
