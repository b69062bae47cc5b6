//! PTX module → C for the host: one function per kernel that runs one CTA with its threads
//! fused (Ocelot's thread fusion), module variables as C arrays, and the runtime in
//! `prelude.h`. Each PTX instruction becomes one C line (a few for vectors), preceded by the
//! instruction as a comment where it is not obvious.
//!
//! A kernel's body runs for one thread at a time between *split points* (`bar.sync`, warp
//! operations, the end). At a split point the thread saves its registers in its spill slot,
//! records where it stopped, and the next thread runs; the dispatch `switch` at the top of the
//! thread loop brings a resumed thread back to the instruction after its split point.

mod arith;
mod calls;
mod liveness;
mod ops;
mod rounds;
mod simt;
mod simt_kernel;
mod uniform;

use calls::Callee;
use simt::SimtPlan;

use std::cell::RefCell;

use std::collections::HashMap;
use std::fmt::Write;

use super::ast::{Function, PtxModule, Scalar, Space, Statement, Variable};
use super::PtxError;

/// The runtime every translated module starts with.
pub const PRELUDE: &str = include_str!("../prelude.h");
/// The SIMT emulation's scheduler, added to translations made by [`emit_simt`].
pub const SIMT_RUNTIME: &str = include_str!("../simt.h");

/// A translated module: C source and what the host needs to launch each kernel.
#[derive(Debug, Clone)]
pub struct CSource {
    /// The C translation unit.
    pub code: String,
    /// The kernels, in module order.
    pub kernels: Vec<KernelInfo>,
    /// Module variables (`.global`, `.const`) the host can look up by name.
    pub globals: Vec<GlobalInfo>,
    /// Whether the module has device functions (`.func` with a body): only then do CTAs
    /// need a frame stack.
    pub has_device_functions: bool,
}

/// How to launch one kernel.
#[derive(Debug, Clone)]
pub struct KernelInfo {
    /// The PTX name.
    pub name: String,
    /// Its CTA entry point in the C (`wvp_cta_N`); `wvp_spill_bytes_N` is the size of one
    /// thread's register set.
    pub index: usize,
    /// Parameters: offset and size in the parameter buffer, in order.
    pub params: Vec<ParamSlot>,
    /// Size of the parameter buffer.
    pub param_bytes: u64,
    /// Static shared memory per CTA (dynamic shared memory starts here, 16-aligned).
    pub static_shared: u64,
    /// Local memory per thread (`.local` variables).
    pub local_bytes: u64,
    /// In SIMT translations, the most global memory instructions of one basic block
    /// (`wvp_simt_max_sites_N`); `None` otherwise.
    pub simt_sites: Option<u32>,
}

/// One kernel parameter's place in the parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSlot {
    /// Byte offset.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A module variable: its C symbol (`wvp_gN`) and size.
#[derive(Debug, Clone)]
pub struct GlobalInfo {
    /// PTX name.
    pub name: String,
    /// C symbol exported by the object.
    pub symbol: String,
    /// Size in bytes.
    pub bytes: u64,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// Translates every kernel of `module` for fused execution (the fast mode).
pub fn emit(module: &PtxModule) -> Result<CSource, PtxError> {
    emit_mode(module, false)
}

/// Translates every kernel of `module` for SIMT emulation: warps in lockstep under a
/// reconvergence stack, counting active lanes and memory sectors (`simt.h`), with device
/// functions linked into their callers as subroutines ([`subroutines`](super::subroutines)), so that their
/// instructions count and their branches diverge the warp.
pub fn emit_simt(module: &PtxModule) -> Result<CSource, PtxError> {
    emit_mode(module, true)
}

fn emit_mode(module: &PtxModule, simt: bool) -> Result<CSource, PtxError> {
    // The emulation steps a callee's blocks in its caller's warp: calls are linked first.
    let linked;
    let module = if simt {
        linked = super::subroutines::link_subroutines(module)?;
        &linked
    } else {
        module
    };
    let mut code = String::from(PRELUDE);
    if simt {
        code.push_str(SIMT_RUNTIME);
    }
    let mut globals = Vec::new();
    let mut symbols = HashMap::new();
    code.push_str("\n/* ---- module variables ---- */\n");
    for (i, v) in module.variables.iter().enumerate() {
        if matches!(v.space, Space::Global | Space::Const) {
            let symbol = format!("wvp_g{i}");
            let bytes = v.bytes().max(1);
            let init: Vec<String> = v.init.iter().map(|b| b.to_string()).collect();
            let _ = writeln!(
                code,
                "/* .{} {} (line {}) */\nWVP_EXPORT uint8_t {symbol}[{bytes}] __attribute__((aligned({}))) = {{{}}};",
                if v.space == Space::Global { "global" } else { "const" },
                v.name,
                v.line,
                v.align.max(1),
                if init.is_empty() { "0".into() } else { init.join(", ") }
            );
            globals.push(GlobalInfo {
                name: v.name.clone(),
                symbol: symbol.clone(),
                bytes,
            });
            symbols.insert(v.name.clone(), symbol);
        }
    }
    // Device functions: prototypes first (calls may come before bodies, or recurse).
    let callees = calls::callees(module);
    code.push_str("\n/* ---- device functions ---- */\n");
    // In a fixed order: the C is the kernel cache's key, so it must not change between runs.
    let mut prototypes: Vec<&Callee> = callees.values().collect();
    prototypes.sort_by_key(|c| c.index);
    for c in prototypes {
        let _ = writeln!(code, "{};", c.prototype());
    }
    let mut kernels = Vec::new();
    for f in &module.functions {
        if f.body.is_none() {
            continue;
        }
        let index = if f.is_entry {
            kernels.len()
        } else {
            callees[&f.name].index
        };
        let mut emitter = KernelEmitter::new(module, f, index, &symbols, &callees)?;
        if simt && f.is_entry {
            emitter.simt = Some(RefCell::new(SimtPlan::new()));
            emitter.keep_registers_in_slots();
        }
        if f.is_entry {
            kernels.push(emitter.emit(&mut code)?);
        } else {
            emitter.emit_function(&mut code)?;
        }
    }
    Ok(CSource {
        code,
        kernels,
        globals,
        has_device_functions: !callees.is_empty(),
    })
}

/// Where a named variable lives, for the kernel being translated.
#[derive(Debug, Clone)]
enum Place {
    /// Offset in the CTA's shared memory.
    Shared(u64),
    /// Offset in the thread's local depot.
    Local(u64),
    /// Offset in the parameter buffer (a kernel's launch parameters, or a device function's
    /// argument block `wvp_args`).
    Param(u64),
    /// Offset in a device function's return block (`wvp_ret`).
    Ret(u64),
    /// A call site's parameter or return variable: a C array of the calling function.
    CallSite(String),
    /// A module variable's C symbol.
    Global(String),
}

/// Translates one kernel.
struct KernelEmitter<'a> {
    function: &'a Function,
    index: usize,
    /// Register name → (C name, type).
    registers: HashMap<String, (String, Scalar)>,
    places: HashMap<String, Place>,
    params: Vec<ParamSlot>,
    param_bytes: u64,
    static_shared: u64,
    local_bytes: u64,
    /// Split points so far (resume ids 1..).
    splits: u32,
    /// Whether a carry-flag instruction occurs (declares `wvp_cc`).
    uses_carry: bool,
    /// `.branchtargets` tables by name.
    tables: HashMap<String, Vec<String>>,
    /// C names of the registers live across the instruction being translated.
    live_across: Vec<String>,
    /// For each split point (resume id - 1), the registers it saved.
    saved: Vec<Vec<String>>,
    /// C names of the registers that hold one value for every thread of the CTA
    /// (`uniform.rs`): split points save them in the CTA's slot, not the thread's.
    uniform: std::collections::HashSet<String>,
    /// The statement index of each split point (resume id - 1).
    split_at: Vec<usize>,
    /// Prefix of the C labels of the body being written: empty for the general body,
    /// `C{r}_` for its copy run after a barrier that every thread reached at split point r.
    prefix: String,
    /// While writing such a copy: its split point and what need not be saved.
    segment: Option<Segment>,
    /// Whether split points record their id in `wvp_stops` (kernels that have copies).
    track_stops: bool,
    /// Every device function, by PTX name.
    callees: &'a HashMap<String, Callee>,
    /// Call-site variables (`.param` in a body): C name and size.
    call_sites: Vec<(String, u64)>,
    /// SIMT emulation: the kernel's blocks as they are emitted (a cell: operand translation
    /// numbers memory sites through `&self`).
    simt: Option<RefCell<SimtPlan>>,
    /// When every register lives in the thread's slot (`wvp_s->r1`) rather than in a C local
    /// saved and restored around split points (`keep_registers_in_slots`): the slot's fields.
    slot_fields: Option<Vec<(String, Scalar)>>,
}

const C_KEYWORDS: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "asm", "typeof",
];

/// The C spelling of a PTX name (registers, labels): `$` becomes `S`, and names that could
/// clash with C or the runtime get a prefix.
pub(crate) fn c_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                'S'
            }
        })
        .collect();
    if C_KEYWORDS.contains(&s.as_str())
        || s.starts_with("wvp")
        || s.starts_with(|c: char| c.is_ascii_digit())
    {
        format!("r_{s}")
    } else {
        s
    }
}

/// The C type holding a PTX scalar.
pub(crate) fn c_type(t: Scalar) -> &'static str {
    match t {
        Scalar::B(8) | Scalar::U(8) => "uint8_t",
        Scalar::S(8) => "int8_t",
        Scalar::B(16) | Scalar::U(16) => "uint16_t",
        Scalar::S(16) => "int16_t",
        Scalar::B(32) | Scalar::U(32) | Scalar::Pred => "uint32_t",
        Scalar::S(32) => "int32_t",
        Scalar::S(64) => "int64_t",
        Scalar::F(32) => "float",
        Scalar::F(64) => "double",
        _ => "uint64_t",
    }
}

impl<'a> KernelEmitter<'a> {
    fn new(
        module: &PtxModule,
        function: &'a Function,
        index: usize,
        symbols: &HashMap<String, String>,
        callees: &'a HashMap<String, Callee>,
    ) -> Result<Self, PtxError> {
        let mut registers = HashMap::new();
        for r in &function.registers {
            if r.ty == Scalar::F(16) {
                return Err(PtxError::Unsupported {
                    line: function.line,
                    what: format!("register %{} of type .f16", r.name),
                });
            }
            registers.insert(r.name.clone(), (c_name(&r.name), r.ty));
        }
        let mut places = HashMap::new();
        for (name, sym) in symbols {
            places.insert(name.clone(), Place::Global(sym.clone()));
        }
        let mut params = Vec::new();
        let mut param_bytes = 0;
        for p in &function.params {
            let offset = align_up(param_bytes, p.align as u64);
            params.push(ParamSlot {
                offset,
                size: p.bytes(),
            });
            param_bytes = offset + p.bytes();
            places.insert(p.name.clone(), Place::Param(offset));
        }
        let mut ret_bytes = 0;
        for p in &function.returns {
            let offset = align_up(ret_bytes, p.align as u64);
            ret_bytes = offset + p.bytes();
            places.insert(p.name.clone(), Place::Ret(offset));
        }
        let mut call_sites = Vec::new();
        // Shared memory: the module's static variables, then the kernel's; unsized (extern)
        // arrays all start where dynamic shared memory does.
        let mut shared = 0u64;
        let mut dynamic = Vec::new();
        let mut local = 0u64;
        let vars: Vec<&Variable> = module.variables.iter().chain(&function.variables).collect();
        for v in vars {
            match (v.space, v.count) {
                (Space::Shared, None) => dynamic.push(v.name.clone()),
                (Space::Shared, Some(_)) => {
                    shared = align_up(shared, v.align as u64);
                    places.insert(v.name.clone(), Place::Shared(shared));
                    shared += v.bytes();
                }
                (Space::Local, _) => {
                    local = align_up(local, v.align as u64);
                    places.insert(v.name.clone(), Place::Local(local));
                    local += v.bytes();
                }
                (Space::Param, _) => {
                    // A call site's argument or result: the calling function's own bytes.
                    let c = format!("wvp_cp_{}", c_name(&v.name));
                    places.insert(v.name.clone(), Place::CallSite(c.clone()));
                    call_sites.push((c, v.bytes().max(1)));
                }
                _ => {}
            }
        }
        let static_shared = align_up(shared, 16);
        for d in dynamic {
            places.insert(d, Place::Shared(static_shared));
        }
        let mut tables = HashMap::new();
        let mut labels = std::collections::HashSet::new();
        for s in function.body.iter().flatten() {
            match s {
                Statement::BranchTargets(name, targets) => {
                    tables.insert(name.clone(), targets.clone());
                }
                Statement::Label(l) => {
                    labels.insert(l.clone());
                }
                Statement::Instr(_) => {}
            }
        }
        // Every branch target must exist (C would report a missing label without its line).
        for s in function.body.iter().flatten() {
            let Statement::Instr(i) = s else { continue };
            let targets: Vec<&String> = match (i.opcode.as_str(), i.operands.first()) {
                ("bra", Some(super::ast::Operand::Symbol(l))) => vec![l],
                _ => Vec::new(),
            };
            let table_targets = tables.values().flatten();
            for l in targets.into_iter().chain(
                if i.opcode == "brx" {
                    Some(table_targets)
                } else {
                    None
                }
                .into_iter()
                .flatten(),
            ) {
                if !labels.contains(l) {
                    return Err(PtxError::Unsupported {
                        line: i.line,
                        what: format!("`{}` branches to undefined label `{l}`", i.text()),
                    });
                }
            }
        }
        Ok(KernelEmitter {
            function,
            index,
            registers,
            places,
            params,
            param_bytes,
            static_shared,
            local_bytes: align_up(local, 16),
            splits: 0,
            uses_carry: false,
            tables,
            live_across: Vec::new(),
            saved: Vec::new(),
            uniform: Default::default(),
            split_at: Vec::new(),
            prefix: String::new(),
            segment: None,
            track_stops: false,
            callees,
            call_sites,
            simt: None,
            slot_fields: None,
        })
    }

    /// Every register becomes a field of the thread's slot, used in place: nothing is saved
    /// or restored at split points. The SIMT emulation stops a thread at every basic block,
    /// so saving the live registers at each would write code quadratic in the kernel's size
    /// (warpvisor's fleet kernels with their subroutines: tens of thousands of blocks).
    fn keep_registers_in_slots(&mut self) {
        self.slot_fields = Some(self.sorted_registers());
        for (c, _) in self.registers.values_mut() {
            *c = format!("wvp_s->{c}");
        }
    }

    /// The liveness of a body's registers (what its split points save).
    fn liveness(&self) -> liveness::Liveness {
        // Registers kept in their slots need none (and big kernels would pay for it).
        let statements: &[Statement] = match self.slot_fields {
            Some(_) => &[],
            None => self.function.body.as_deref().unwrap_or_default(),
        };
        liveness::Liveness::new(statements, &|r| self.registers.contains_key(r))
    }

    /// The body's statements as C, one line per instruction.
    fn translate_body(&mut self, live: &liveness::Liveness) -> Result<String, PtxError> {
        let f = self.function;
        let mut body = String::new();
        let statements = f.body.as_deref().unwrap_or_default();
        self.splits = 0;
        self.saved.clear();
        self.split_at.clear();
        for (k, s) in statements.iter().enumerate() {
            match s {
                // SIMT emulation: every block starts with a stop; jumps go by resume id
                // (`simt_kernel.rs`), not to C labels.
                Statement::Label(l) if self.simt.is_some() => {
                    let _ = writeln!(body, "/* {l}: */");
                    self.live_across = self.live_c_names(live, k, &[]);
                    self.block_stop(Some(l), &mut body);
                }
                Statement::Label(l) => {
                    let _ = writeln!(body, "{}L_{}:;", self.prefix, c_name(l));
                }
                Statement::BranchTargets(..) => {}
                Statement::Instr(i) => {
                    // What a split point here must keep: live afterwards and not (re)written
                    // by the instruction itself once the thread resumes.
                    self.live_across.clear();
                    if calls::splits(i) {
                        let written: Vec<&str> = match (&i.guard, i.operands.first()) {
                            (None, Some(super::ast::Operand::Reg(d))) => vec![d],
                            (None, Some(super::ast::Operand::Pair(d, p))) => vec![d, p],
                            _ => Vec::new(),
                        };
                        self.live_across = self.live_c_names(live, k, &written);
                    }
                    if let Some(plan) = &self.simt {
                        plan.borrow_mut().instruction(i, &self.tables);
                    }
                    self.instruction(i, &mut body)?;
                    if calls::splits(i) {
                        self.split_at.push(k);
                    }
                    // SIMT emulation: a block also ends after a jump or a predicated split
                    // point (where lanes may part), unless a label starts the next one.
                    let ends_block =
                        simt::transfers_control(i) || (calls::splits(i) && i.guard.is_some());
                    let label_next = matches!(statements.get(k + 1), Some(Statement::Label(_)));
                    if self.simt.is_some() && ends_block && !label_next {
                        self.live_across = self.live_c_names(live, k, &[]);
                        self.block_stop(None, &mut body);
                    }
                }
            }
        }
        Ok(body)
    }

    /// C names of the registers live after statement `k`, less `written`, in a stable order.
    fn live_c_names(&self, live: &liveness::Liveness, k: usize, written: &[&str]) -> Vec<String> {
        if self.slot_fields.is_some() {
            return Vec::new();
        }
        let mut across: Vec<String> = live
            .live_after(k)
            .into_iter()
            .filter(|r| !written.contains(r))
            .filter_map(|r| self.registers.get(r).map(|(c, _)| c.clone()))
            .collect();
        across.sort_by_key(|r| natural(r));
        across
    }

    /// SIMT emulation: ends the block here; the thread stops and resumes at the next one.
    fn block_stop(&mut self, label: Option<&str>, out: &mut String) {
        let r = self.splits + 1;
        out.push_str("        ");
        self.split_point(&format!("wvp_th[wvp_t].resume = {r};"), out);
        let resume_label = out.len() - format!("wvp_resume_{r}:;").len();
        out.push_str(" /* block */\n");
        if let Some(plan) = &self.simt {
            let mut plan = plan.borrow_mut();
            plan.block_starts.push((r, resume_label));
            if let Some(l) = label {
                plan.label(l, r);
            }
        }
    }

    /// The registers and call-site arrays every function body declares.
    fn declarations(&self, code: &mut String) {
        // Registers kept in their slots are fields of `wvp_s`, not locals.
        let locals = match self.slot_fields {
            Some(_) => Vec::new(),
            None => self.sorted_registers(),
        };
        for (name, ty) in locals {
            let _ = writeln!(code, "    {} {name};", c_type(ty));
        }
        for (name, bytes) in &self.call_sites {
            let _ = writeln!(
                code,
                "    uint8_t {name}[{bytes}] __attribute__((aligned(16)));"
            );
        }
        if self.uses_carry {
            let _ = writeln!(code, "    uint32_t wvp_cc = 0;");
        }
    }

    fn sorted_registers(&self) -> Vec<(String, Scalar)> {
        let mut regs: Vec<(String, Scalar)> = self.registers.values().cloned().collect();
        regs.sort_by_key(|r| natural(&r.0));
        regs
    }

    fn emit(mut self, code: &mut String) -> Result<KernelInfo, PtxError> {
        let f = self.function;
        let k = self.index;
        let live = self.liveness();
        // Fused kernels keep uniform registers once per CTA (the SIMT emulation runs warps
        // apart, so threads stopped at one split point may be at different instances of it).
        let splits = self.split_count();
        if self.simt.is_none() && splits > 0 {
            self.uniform = self.uniform_registers(&live);
        }
        self.plan_barrier_rounds(splits);
        let body = self.translate_body(&live)?;
        // A thread's spill slot holds only the registers some split point saves (a few of
        // the kernel's registers, typically): slots stay small and close together.
        let saved: std::collections::HashSet<&String> = self.saved.iter().flatten().collect();
        let regs: Vec<(String, Scalar)> = match &self.slot_fields {
            Some(fields) => fields.clone(),
            None => self
                .sorted_registers()
                .into_iter()
                .filter(|(name, _)| saved.contains(name) && !self.uniform.contains(name))
                .collect(),
        };
        // Uniform registers: one slot per split point for the whole CTA, read from the copy
        // made when the last round ended (`wvp_ui`) and written to the next (`wvp_uo`).
        let types: HashMap<&String, Scalar> =
            self.registers.values().map(|(c, t)| (c, *t)).collect();
        let types = &types;
        let uniform_slots: Vec<(usize, String, Scalar)> = self
            .saved
            .iter()
            .enumerate()
            .flat_map(|(r, names)| {
                names
                    .iter()
                    .filter(|n| self.uniform.contains(*n))
                    .map(move |n| (r + 1, n.clone(), types[n]))
            })
            .collect();
        let _ = writeln!(
            code,
            "\n/* ---- kernel `{}` (PTX line {}) ---- */",
            f.name, f.line
        );
        let _ = writeln!(code, "typedef struct {{");
        for (name, ty) in &regs {
            let _ = writeln!(code, "    {} {name};", c_type(*ty));
        }
        if regs.is_empty() {
            let _ = writeln!(code, "    uint32_t unused;");
        }
        let _ = writeln!(code, "}} wvp_regs_{k};");
        let _ = writeln!(
            code,
            "WVP_EXPORT const uint64_t wvp_spill_bytes_{k} = sizeof(wvp_regs_{k});"
        );
        if !uniform_slots.is_empty() {
            let _ = writeln!(code, "typedef struct {{");
            for (r, name, ty) in &uniform_slots {
                let _ = writeln!(code, "    {} s{r}_{name};", c_type(*ty));
            }
            let _ = writeln!(code, "}} wvp_uregs_{k};");
        }
        // SIMT emulation: the blocks go to chunk functions the thread loop calls.
        let chunks = self.simt.as_ref().map(|plan| {
            plan.borrow().tables(k, code);
            self.write_simt_chunks(&body, code)
        });
        let _ = writeln!(
            code,
            "WVP_EXPORT int wvp_cta_{k}(const wvp_launch *wvp_launch_, wvp_cta *wvp_cta_) {{"
        );
        self.declarations(code);
        let end_round = if uniform_slots.is_empty() {
            ""
        } else {
            let _ = writeln!(code, "    wvp_uregs_{k} wvp_ui = {{0}}, wvp_uo = {{0}};");
            "wvp_ui = wvp_uo; "
        };
        // Fused: every running thread in turn. SIMT emulation: the lanes its scheduler picks.
        let (begin, thread_loop, release) = match &self.simt {
            Some(_) => (
                format!(
                    "wvp_simt_begin(wvp_cta_, wvp_simt_instrs_{k}, wvp_simt_sites_{k}, wvp_simt_ipdom_{k}, wvp_simt_calls_{k}, {});\n    ",
                    self.simt_blocks()
                ),
                "for (uint32_t wvp_t = wvp_simt_next(wvp_cta_); wvp_t != WVP_SIMT_NONE; wvp_t = wvp_simt_next(wvp_cta_))",
                "wvp_simt_release",
            ),
            None => (
                String::new(),
                "for (uint32_t wvp_t = 0; wvp_t < wvp_n; wvp_t++)",
                "wvp_release",
            ),
        };
        let copies = self.barrier_rounds(&live)?;
        let stops = if self.track_stops {
            "\n    uint32_t wvp_stops = 0; /* the split points reached since the last barrier */"
        } else {
            ""
        };
        let _ = writeln!(
            code,
            "    uint8_t *wvp_shared = wvp_cta_->shared;\n    \
             /* 1-D blocks (the common case) need no divisions for %tid. */\n    \
             const int wvp_flat = wvp_launch_->block[1] == 1 && wvp_launch_->block[2] == 1;\n    \
             /* The CTA's records stay put while it runs; counts of this round's barrier\n    \
             arrivals and exits stay in registers until the round ends. */\n    \
             wvp_thread *const wvp_th = wvp_cta_->thread;\n    \
             wvp_regs_{k} *const wvp_spill = (wvp_regs_{k} *)wvp_cta_->spill;\n    \
             const uint32_t wvp_n = wvp_cta_->nthreads;\n    \
             uint32_t wvp_arrived = 0, wvp_gone = 0;{stops}\n    \
             (void)wvp_n;\n    \
             {begin}for (;;) {{\n    \
             const uint32_t wvp_runnable = wvp_cta_->runnable;\n{copies}    \
             {thread_loop} {{\n        \
             if (wvp_th[wvp_t].wait > wvp_runnable) continue;"
        );
        let epilogue = match chunks {
            Some(call) => {
                code.push_str(&call);
                String::new()
            }
            None => {
                code.push_str(&self.thread_prologue());
                let _ = writeln!(
                    code,
                    "        switch (wvp_th[wvp_t].resume) {{\n        case 0: break;"
                );
                for r in 1..=self.saved.len() as u32 {
                    let _ = writeln!(
                        code,
                        "        case {r}: {}goto wvp_resume_{r};",
                        self.restore(r)
                    );
                }
                let _ = writeln!(code, "        default: return WVP_CTA_TRAP;\n        }}");
                code.push_str(&body);
                thread_epilogue("")
            }
        };
        let _ = writeln!(
            code,
            "    {}    }}\n    \
             wvp_round_end:\n    \
             wvp_cta_->at_barrier += wvp_arrived; wvp_cta_->exited += wvp_gone; wvp_arrived = wvp_gone = 0; {end_round}\n    \
             int wvp_r = {release}(wvp_cta_);\n    \
             if (wvp_r <= 0) return wvp_r;\n    }}\n}}",
            epilogue
        );
        Ok(KernelInfo {
            name: f.name.clone(),
            index: k,
            params: self.params,
            param_bytes: self.param_bytes,
            static_shared: self.static_shared,
            local_bytes: self.local_bytes,
            simt_sites: self.simt.as_ref().map(|p| p.borrow().max_sites()),
        })
    }

    /// How many split points the body has.
    fn split_count(&self) -> usize {
        self.function
            .body
            .iter()
            .flatten()
            .filter(|s| matches!(s, Statement::Instr(i) if calls::splits(i)))
            .count()
    }

    /// C names of the kernel's registers that hold one value for every thread of the CTA.
    fn uniform_registers(&self, live: &liveness::Liveness) -> std::collections::HashSet<String> {
        let statements = self.function.body.as_deref().unwrap_or_default();
        let per_thread = |name: &str| {
            matches!(
                self.places.get(name),
                Some(Place::Local(_) | Place::CallSite(_) | Place::Ret(_))
            )
        };
        let divergence = uniform::Divergence::new(
            statements,
            live,
            &|r| self.registers.contains_key(r),
            &per_thread,
        );
        self.registers
            .iter()
            .filter(|(name, _)| divergence.is_uniform(name))
            .map(|(_, (c, _))| c.clone())
            .collect()
    }

    /// What each thread of a round sets up before it resumes: its spill slot, its local
    /// depot, its index.
    fn thread_prologue(&self) -> String {
        format!(
            "        wvp_regs_{k} *wvp_s = wvp_spill + wvp_t;\n        \
             uint8_t *wvp_local = wvp_cta_->local + (size_t)wvp_t * {};\n        \
             const uint64_t wvp_local_bytes = wvp_cta_->local_bytes;\n        \
             uint32_t wvp_tid_x = wvp_flat ? wvp_t : wvp_t % wvp_launch_->block[0];\n        \
             uint32_t wvp_tid_y = wvp_flat ? 0 : wvp_t / wvp_launch_->block[0] % wvp_launch_->block[1];\n        \
             uint32_t wvp_tid_z = wvp_flat ? 0 : wvp_t / wvp_launch_->block[0] / wvp_launch_->block[1];\n        \
             (void)wvp_s; (void)wvp_local; (void)wvp_local_bytes; (void)wvp_tid_x; (void)wvp_tid_y; (void)wvp_tid_z;\n",
            self.local_bytes,
            k = self.index
        )
    }

    /// The C that reloads what split point `r` saved (its uniform registers from the CTA's
    /// slot, the rest from the thread's).
    fn restore(&self, r: u32) -> String {
        self.saved[r as usize - 1]
            .iter()
            .map(|n| {
                if self.uniform.contains(n) {
                    format!("{n} = wvp_ui.s{r}_{n}; ")
                } else {
                    format!("{n} = wvp_s->{n}; ")
                }
            })
            .collect()
    }

    /// SIMT emulation: the number of blocks (resume points and the start).
    fn simt_blocks(&self) -> usize {
        self.simt.as_ref().map_or(0, |p| p.borrow().blocks.len())
    }
}

/// A copy of a kernel's body for a round in which every thread resumes at one barrier.
#[derive(Debug, Clone)]
struct Segment {
    /// The split point every thread resumes at.
    resume: u32,
    /// C names of the registers restored there and written nowhere the threads can go
    /// before their next split point: their slots already hold them.
    clean: std::collections::HashSet<String>,
}

/// The end of a thread's turn in a round (labels with `prefix`): exit, or a fault that stops
/// the CTA naming the thread.
fn thread_epilogue(prefix: &str) -> String {
    format!(
        "{prefix}wvp_exit:\n        wvp_th[wvp_t].wait = WVP_EXITED; wvp_gone++;\n    \
         {prefix}wvp_next_thread:\n        if (wvp_cta_->fault) {{ wvp_cta_->fault_thread = wvp_t; return WVP_CTA_FAULT; }}\n"
    )
}

/// Sort key that puts `r2` before `r10`: the name without its trailing digits, their value,
/// then the name itself, so that no two names tie (`sub0_r5`, whose first digits are not its
/// last, sorts by its own and not the map's order: the C is the kernel cache's key).
fn natural(name: &str) -> (String, u64, String) {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (stem, number) = name.split_at(name.len() - digits);
    (
        stem.to_string(),
        number.parse().unwrap_or(0),
        name.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use crate::ptx::parser::parse;

    #[test]
    fn a_module_translates_to_the_same_c_every_time() {
        // The C is the kernel cache's key: device functions (declared from a map) must come
        // out in one order, or every process compiles the module again.
        let m =
            parse(include_str!("../../../tests/ptx/calls.ptx")).unwrap_or_else(|e| panic!("{e}"));
        let first = super::emit(&m).unwrap_or_else(|e| panic!("{e}")).code;
        for n in 0..8 {
            let again = super::emit(&m).unwrap_or_else(|e| panic!("{e}")).code;
            assert!(again == first, "translation {n} differs from the first");
        }
    }
}
