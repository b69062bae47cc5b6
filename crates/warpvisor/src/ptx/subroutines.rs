//! Device functions linked into the kernels that call them as subroutines, for the SIMT
//! emulation.
//!
//! The fused translation runs a `call` as a C call made by one thread, which the SIMT
//! emulation cannot step through: the callee's instructions would go uncounted and its
//! branches would never diverge a warp. A GPU runs a callee in its caller's warp: the call
//! pushes a reconvergence entry whose reconvergence point is the return address, the
//! callee's branches split the warp under the same stack, and the lanes meet again where the
//! call returns. The emulation does the same on a kernel body to which every device function
//! it reaches is appended once, renamed (`sub{N}_`):
//!
//! - `call (r), f, (a)` becomes moves of the addresses of the call site's variables into the
//!   copy's pointer registers, a move of the call site's number into the copy's return
//!   register, and `bra.wvp_call` to the copy's entry; the return site follows as a label;
//! - the callee's accesses to its formal parameters and return values (`ld.param [x]`,
//!   `st.param [r]`) become `.local` accesses through those pointers (call-site variables
//!   are thread-local memory here: `thread_call_sites`);
//! - `ret` becomes `brx.idx.wvp_ret` on the return register over the copy's return sites.
//!
//! The moves are marked [`ABI`] and not counted (a GPU passes arguments in registers, and the
//! caller's `st.param`/`ld.param` already count); [`CALL`] and [`RET`] tell the SIMT plan
//! (`emit/simt.rs`) where calls push an entry and where a function's exit is, so immediate
//! post-dominators are computed per function. Every function is emitted once per kernel
//! however often it is called, so the C stays as large as the PTX (copying the callee at
//! every call site made 117 MB of C for one partition of warpvisor's fleet kernel).
//!
//! One copy of a function's registers serves every call because no thread is in a function
//! twice at once: recursion is reported (`Unsupported`; warpvisor's own kernels have none,
//! their continuations return to the trampoline), as are calls through a register.

use std::collections::{HashMap, HashSet};

use super::ast::{
    Function, Guard, Instruction, Operand, PtxModule, Register, Scalar, Space, Statement,
};
use super::PtxError;

/// Marks a move of the calling convention: run, not counted.
pub const ABI: &str = "wvp_abi";
/// Marks the branch into a callee: its block's lanes reconverge at the return site after it.
pub const CALL: &str = "wvp_call";
/// Marks a callee's return: an edge to its function's exit.
pub const RET: &str = "wvp_ret";

/// `module` with every device function its kernels reach appended to each as a subroutine,
/// the calls rewritten to reach them, and its device functions dropped.
pub fn link_subroutines(module: &PtxModule) -> Result<PtxModule, PtxError> {
    let functions: HashMap<&str, &Function> = module
        .functions
        .iter()
        .filter(|f| !f.is_entry && f.body.is_some())
        .map(|f| (f.name.as_str(), f))
        .collect();
    refuse_marks(module)?;
    let root = unused_prefix(module);
    let mut out = module.clone();
    out.functions.retain(|f| f.is_entry);
    for kernel in out.functions.iter_mut() {
        let Some(body) = kernel.body.take() else {
            continue;
        };
        let order = reachable(&body, &functions)?;
        let mut linker = Linker {
            root: &root,
            copies: order
                .iter()
                .enumerate()
                .map(|(n, &f)| (f, Subroutine::new(&root, n)))
                .collect(),
            kernel,
            return_sites: 0,
        };
        let mut linked = Vec::with_capacity(body.len());
        let identity = Renaming::default();
        linker.rewrite(&body, &identity, &mut linked)?;
        // A body may end without `ret`: falling off its end must not enter a subroutine.
        if !order.is_empty() && !ends_in_jump(&linked) {
            linked.push(instruction(
                None,
                "ret",
                &[ABI],
                Vec::new(),
                linker.kernel.line,
            ));
        }
        for &name in &order {
            let callee = functions[name];
            let renaming = linker.rename(name, callee)?;
            linked.push(Statement::Label(linker.copies[name].entry.clone()));
            linker.rewrite(
                callee.body.as_deref().unwrap_or_default(),
                &renaming,
                &mut linked,
            )?;
            // Running off a function's end returns (as in the fused translation), rather
            // than falling into the next function.
            if !ends_in_jump(&linked) {
                let c = &linker.copies[name];
                let marks = [RET, ABI];
                linked.push(return_jump(
                    &c.return_register,
                    &c.table,
                    None,
                    &marks,
                    callee.line,
                ));
            }
        }
        for &name in &order {
            let c = &linker.copies[name];
            linked.push(Statement::BranchTargets(c.table.clone(), c.returns.clone()));
        }
        kernel.body = Some(thread_call_sites(kernel, linked));
    }
    Ok(out)
}

/// Whether the last statement jumps away unconditionally.
fn ends_in_jump(body: &[Statement]) -> bool {
    matches!(body.last(), Some(Statement::Instr(i))
        if i.guard.is_none() && matches!(i.opcode.as_str(), "ret" | "exit" | "trap" | "bra" | "brx"))
}

/// The marks are the linker's: PTX that carries them would be counted wrongly.
fn refuse_marks(module: &PtxModule) -> Result<(), PtxError> {
    for f in &module.functions {
        for s in f.body.iter().flatten() {
            if let Statement::Instr(i) = s {
                if [ABI, CALL, RET].iter().any(|m| i.has(m)) {
                    return Err(PtxError::Unsupported {
                        line: i.line,
                        what: format!("`{}`: modifiers `wvp_*` are reserved", i.text()),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The device functions a kernel body reaches, in the order a depth-first walk first meets
/// them (so translations are deterministic); recursion, calls through registers, calls of
/// functions without a body and mismatched parameters are errors.
fn reachable<'a>(
    body: &'a [Statement],
    functions: &HashMap<&'a str, &'a Function>,
) -> Result<Vec<&'a str>, PtxError> {
    /// One function being walked: its calls and how far the walk got.
    struct Frame<'a> {
        calls: Vec<(&'a Instruction, &'a str)>,
        next: usize,
    }
    let calls_of = |body: &'a [Statement]| -> Result<Vec<(&'a Instruction, &'a str)>, PtxError> {
        let mut calls = Vec::new();
        for s in body {
            let Statement::Instr(i) = s else { continue };
            if i.opcode != "call" {
                continue;
            }
            let unsupported = |why: String| PtxError::Unsupported {
                line: i.line,
                what: format!("`{}` {why} (SIMT emulation)", i.text()),
            };
            let (rets, target, args) = i
                .call_parts()
                .ok_or_else(|| unsupported("calls through a register".into()))?;
            let (&name, callee) = functions
                .get_key_value(target)
                .ok_or_else(|| unsupported(format!("calls `{target}`, which has no body")))?;
            if args.len() != callee.params.len() || rets.len() != callee.returns.len() {
                return Err(unsupported(format!(
                    "does not match the parameters of `{target}`"
                )));
            }
            calls.push((i, name));
        }
        Ok(calls)
    };
    let mut order = Vec::new();
    let mut done: HashSet<&str> = HashSet::new();
    let mut path: Vec<&str> = Vec::new();
    let mut stack = vec![Frame {
        calls: calls_of(body)?,
        next: 0,
    }];
    // An explicit stack: a hostile module's call chain may be deeper than the host's.
    while let Some(frame) = stack.last_mut() {
        let Some(&(call, name)) = frame.calls.get(frame.next) else {
            stack.pop();
            if let Some(finished) = path.pop() {
                done.insert(finished);
            }
            continue;
        };
        frame.next += 1;
        if path.contains(&name) {
            return Err(PtxError::Unsupported {
                line: call.line,
                what: format!(
                    "`{}` calls `{name}` recursively (SIMT emulation runs one copy of each function)",
                    call.text()
                ),
            });
        }
        if done.contains(name) {
            continue;
        }
        order.push(name);
        path.push(name);
        let callee = functions[name];
        stack.push(Frame {
            calls: calls_of(callee.body.as_deref().unwrap_or_default())?,
            next: 0,
        });
    }
    Ok(order)
}

/// Makes the kernel's call-site variables (`.param` in its body) thread-local memory: a
/// callee's blocks lie between a call's `st.param` and `ld.param`, and the emulation switches
/// lanes at every block's end, so each thread needs its own.
fn thread_call_sites(kernel: &mut Function, body: Vec<Statement>) -> Vec<Statement> {
    let mut call_sites = HashSet::new();
    for v in kernel
        .variables
        .iter_mut()
        .filter(|v| v.space == Space::Param)
    {
        v.space = Space::Local;
        call_sites.insert(v.name.clone());
    }
    let names_call_site = |op: &Operand| match op {
        Operand::Address(Some(base), _) => {
            matches!(base.as_ref(), Operand::Symbol(s) if call_sites.contains(s))
        }
        _ => false,
    };
    body.into_iter()
        .map(|s| match s {
            Statement::Instr(mut i) if i.has("param") && i.operands.iter().any(names_call_site) => {
                to_local(&mut i);
                Statement::Instr(i)
            }
            other => other,
        })
        .collect()
}

/// `ld.param`/`st.param` → `ld.local`/`st.local`.
fn to_local(i: &mut Instruction) {
    for m in i.modifiers.iter_mut().filter(|m| *m == "param") {
        *m = "local".into();
    }
}

/// A prefix no register, label or variable of the module starts with.
fn unused_prefix(module: &PtxModule) -> String {
    let mut names: Vec<&str> = module.variables.iter().map(|v| v.name.as_str()).collect();
    for f in &module.functions {
        names.extend(f.registers.iter().map(|r| r.name.as_str()));
        names.extend(f.variables.iter().map(|v| v.name.as_str()));
        names.extend(f.params.iter().chain(&f.returns).map(|p| p.name.as_str()));
        for s in f.body.iter().flatten() {
            if let Statement::Label(l) | Statement::BranchTargets(l, _) = s {
                names.push(l);
            }
        }
    }
    let mut root = String::from("sub");
    while names.iter().any(|n| n.starts_with(&root)) {
        root.push('_');
    }
    root
}

/// One function's copy in a kernel and the names of its calling convention.
struct Subroutine {
    /// Its registers, labels and variables are `{prefix}{name}`.
    prefix: String,
    /// The label of its first instruction.
    entry: String,
    /// Its return sites' table (`brx.idx`) and the return sites, by call number.
    table: String,
    returns: Vec<String>,
    /// Holds the running call's number.
    return_register: String,
    /// `{arg}{n}` / `{result}{n}`: the addresses of the running call's variables.
    arg: String,
    result: String,
}

impl Subroutine {
    fn new(root: &str, n: usize) -> Self {
        // `{root}{n}_` prefixes the function's own names; the rest cannot collide with them.
        Subroutine {
            prefix: format!("{root}{n}_"),
            entry: format!("{root}entry{n}"),
            table: format!("{root}returns{n}"),
            returns: Vec::new(),
            return_register: format!("{root}abi{n}_return"),
            arg: format!("{root}abi{n}_arg"),
            result: format!("{root}abi{n}_result"),
        }
    }
}

/// Rewrites the bodies of one kernel and its subroutines.
struct Linker<'a> {
    root: &'a str,
    copies: HashMap<&'a str, Subroutine>,
    /// The kernel: copies add their registers and variables to it.
    kernel: &'a mut Function,
    /// Return sites so far (each gets a label `{root}ret{n}`).
    return_sites: usize,
}

/// How one copy renames what its function names; the kernel's own body keeps its names.
#[derive(Default)]
struct Renaming {
    registers: HashMap<String, String>,
    symbols: HashMap<String, String>,
    /// Formal parameters and return values → the register holding the caller's variable's
    /// address.
    formals: HashMap<String, String>,
    /// A copy's return register and return sites' table (`None`: the kernel's own body).
    returns: Option<(String, String)>,
}

/// `@guard opcode.modifiers operands;` at source line `line`.
fn instruction(
    guard: Option<Guard>,
    opcode: &str,
    modifiers: &[&str],
    operands: Vec<Operand>,
    line: usize,
) -> Statement {
    Statement::Instr(Instruction {
        guard,
        opcode: opcode.into(),
        modifiers: modifiers.iter().map(|m| m.to_string()).collect(),
        operands,
        line,
    })
}

/// A subroutine's return: `brx.idx` on its return register over its return sites' table.
fn return_jump(
    register: &str,
    table: &str,
    guard: Option<Guard>,
    marks: &[&str],
    line: usize,
) -> Statement {
    let modifiers: Vec<&str> = std::iter::once("idx")
        .chain(marks.iter().copied())
        .collect();
    let operands = vec![
        Operand::Reg(register.to_string()),
        Operand::Symbol(table.to_string()),
    ];
    instruction(guard, "brx", &modifiers, operands, line)
}

impl Linker<'_> {
    /// The names of `callee`'s copy; its registers, its calling convention's registers and
    /// its variables are added to the kernel.
    fn rename(&mut self, name: &str, callee: &Function) -> Result<Renaming, PtxError> {
        let c = &self.copies[name];
        let mut r = Renaming {
            returns: Some((c.return_register.clone(), c.table.clone())),
            ..Renaming::default()
        };
        for reg in &callee.registers {
            let renamed = format!("{}{}", c.prefix, reg.name);
            r.registers.insert(reg.name.clone(), renamed.clone());
            self.kernel.registers.push(Register {
                name: renamed,
                ty: reg.ty,
            });
        }
        for s in callee.body.iter().flatten() {
            if let Statement::Label(l) | Statement::BranchTargets(l, _) = s {
                r.symbols.insert(l.clone(), format!("{}{l}", c.prefix));
            }
        }
        for v in &callee.variables {
            if v.space == Space::Shared {
                // One variable per CTA, whichever function declares it.
                if !self.kernel.variables.iter().any(|k| k.name == v.name) {
                    self.kernel.variables.push(v.clone());
                }
                continue;
            }
            let mut copy = v.clone();
            copy.name = format!("{}{}", c.prefix, v.name);
            r.symbols.insert(v.name.clone(), copy.name.clone());
            self.kernel.variables.push(copy);
        }
        let formals = callee.params.iter().map(|p| (p, &c.arg));
        let results = callee.returns.iter().map(|p| (p, &c.result));
        for (n, (p, base)) in formals.enumerate().chain(results.enumerate()) {
            r.formals.insert(p.name.clone(), format!("{base}{n}"));
        }
        let mut abi: Vec<Register> = (0..callee.params.len())
            .map(|n| format!("{}{n}", c.arg))
            .chain((0..callee.returns.len()).map(|n| format!("{}{n}", c.result)))
            .map(|name| Register {
                name,
                ty: Scalar::U(64),
            })
            .collect();
        abi.push(Register {
            name: c.return_register.clone(),
            ty: Scalar::U(32),
        });
        self.kernel.registers.extend(abi);
        Ok(r)
    }

    /// Appends `body`, renamed by `r`, to `out` with its calls and returns rewritten.
    fn rewrite(
        &mut self,
        body: &[Statement],
        r: &Renaming,
        out: &mut Vec<Statement>,
    ) -> Result<(), PtxError> {
        for s in body {
            match s {
                Statement::Label(l) => out.push(Statement::Label(r.symbol(l))),
                Statement::BranchTargets(l, targets) => out.push(Statement::BranchTargets(
                    r.symbol(l),
                    targets.iter().map(|t| r.symbol(t)).collect(),
                )),
                Statement::Instr(i) if i.opcode == "call" => {
                    let renamed = r.instruction(i)?;
                    self.call(&renamed, out)?;
                }
                Statement::Instr(i) => match (&r.returns, i.opcode.as_str()) {
                    (Some((register, table)), "ret") => {
                        let guard = r.instruction(i)?.guard;
                        out.push(return_jump(register, table, guard, &[RET], i.line));
                    }
                    _ => out.push(Statement::Instr(r.instruction(i)?)),
                },
            }
        }
        Ok(())
    }

    /// One call, its callee's names already resolved to the caller's copy.
    fn call(&mut self, call: &Instruction, out: &mut Vec<Statement>) -> Result<(), PtxError> {
        let (rets, target, args) = call.call_parts().ok_or_else(|| PtxError::Unsupported {
            line: call.line,
            what: "a call through a register (SIMT emulation)".into(),
        })?;
        let site = format!("{}ret{}", self.root, self.return_sites);
        self.return_sites += 1;
        let c = self
            .copies
            .get_mut(target)
            .ok_or_else(|| PtxError::Unsupported {
                line: call.line,
                what: format!("`{}` calls `{target}`, which has no body", call.text()),
            })?;
        let number = c.returns.len() as i64;
        c.returns.push(site.clone());
        let line = call.line;
        // A guarded call: lanes whose guard is false go straight to the return site.
        if let Some(g) = &call.guard {
            let skip = Guard {
                reg: g.reg.clone(),
                negated: !g.negated,
            };
            out.push(instruction(
                Some(skip),
                "bra",
                &[],
                vec![Operand::Symbol(site.clone())],
                line,
            ));
        }
        let pointers = args
            .iter()
            .enumerate()
            .map(|(n, a)| (format!("{}{n}", c.arg), a))
            .chain(
                rets.iter()
                    .enumerate()
                    .map(|(n, v)| (format!("{}{n}", c.result), v)),
            );
        for (register, variable) in pointers {
            let Operand::Symbol(_) = variable else {
                return Err(PtxError::Unsupported {
                    line,
                    what: format!(
                        "`{}` passes `{}`, which is not a .param variable",
                        call.text(),
                        variable.source()
                    ),
                });
            };
            out.push(instruction(
                None,
                "mov",
                &["u64", ABI],
                vec![Operand::Reg(register), variable.clone()],
                line,
            ));
        }
        out.push(instruction(
            None,
            "mov",
            &["u32", ABI],
            vec![
                Operand::Reg(c.return_register.clone()),
                Operand::Int(number),
            ],
            line,
        ));
        out.push(instruction(
            None,
            "bra",
            &[CALL],
            vec![Operand::Symbol(c.entry.clone())],
            line,
        ));
        out.push(Statement::Label(site));
        Ok(())
    }
}

impl Renaming {
    fn register(&self, reg: &str) -> String {
        self.registers
            .get(reg)
            .cloned()
            .unwrap_or_else(|| reg.to_string())
    }

    /// A label or variable of the function by its copy's name; module variables and
    /// functions keep theirs.
    fn symbol(&self, s: &str) -> String {
        self.symbols
            .get(s)
            .cloned()
            .unwrap_or_else(|| s.to_string())
    }

    fn operand(&self, i: &Instruction, op: &Operand) -> Result<Operand, PtxError> {
        Ok(match op {
            Operand::Reg(reg) => Operand::Reg(self.register(reg)),
            Operand::NotReg(reg) => Operand::NotReg(self.register(reg)),
            Operand::Pair(a, b) => Operand::Pair(self.register(a), self.register(b)),
            Operand::Symbol(s) if self.formals.contains_key(s) => {
                return Err(PtxError::Unsupported {
                    line: i.line,
                    what: format!(
                        "`{}` takes the address of parameter `{s}` (SIMT emulation)",
                        i.text()
                    ),
                })
            }
            Operand::Symbol(s) => Operand::Symbol(self.symbol(s)),
            Operand::Address(Some(base), offset) => match base.as_ref() {
                Operand::Symbol(s) if self.formals.contains_key(s) => Operand::Address(
                    Some(Box::new(Operand::Reg(self.formals[s].clone()))),
                    *offset,
                ),
                other => Operand::Address(Some(Box::new(self.operand(i, other)?)), *offset),
            },
            Operand::Vector(v) => Operand::Vector(
                v.iter()
                    .map(|o| self.operand(i, o))
                    .collect::<Result<_, _>>()?,
            ),
            Operand::List(v) => Operand::List(
                v.iter()
                    .map(|o| self.operand(i, o))
                    .collect::<Result<_, _>>()?,
            ),
            Operand::Address(None, _)
            | Operand::Int(_)
            | Operand::Float32(_)
            | Operand::Float64(_) => op.clone(),
        })
    }

    /// One instruction of a copy: names renamed, formal parameters reached through their
    /// pointers.
    fn instruction(&self, i: &Instruction) -> Result<Instruction, PtxError> {
        if let (Some(_), "bra", Some(Operand::Symbol(l))) =
            (&self.returns, i.opcode.as_str(), i.operands.first())
        {
            if !self.symbols.contains_key(l) {
                return Err(PtxError::Unsupported {
                    line: i.line,
                    what: format!("`{}` branches to undefined label `{l}`", i.text()),
                });
            }
        }
        let guard = i.guard.as_ref().map(|g| Guard {
            reg: self.register(&g.reg),
            negated: g.negated,
        });
        let formal = |op: &Operand| {
            matches!(op, Operand::Address(Some(b), _)
                if matches!(b.as_ref(), Operand::Symbol(s) if self.formals.contains_key(s)))
        };
        let mut out = Instruction {
            guard,
            opcode: i.opcode.clone(),
            modifiers: i.modifiers.clone(),
            operands: i
                .operands
                .iter()
                .map(|o| self.operand(i, o))
                .collect::<Result<_, _>>()?,
            line: i.line,
        };
        if i.opcode != "call" && i.operands.iter().any(formal) {
            to_local(&mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";

    fn link(body: &str) -> Result<Vec<Statement>, PtxError> {
        let m = PtxModule::parse(&format!("{HEADER}{body}")).map_err(|e| PtxError::Parse {
            line: 0,
            message: e.to_string(),
        })?;
        let linked = link_subroutines(&m)?;
        Ok(linked.functions[0].body.clone().unwrap_or_default())
    }

    fn text(body: &[Statement]) -> Vec<String> {
        body.iter()
            .map(|s| match s {
                Statement::Label(l) => format!("{l}:"),
                Statement::Instr(i) => i.source(),
                Statement::BranchTargets(l, t) => format!("{l}: {}", t.join(",")),
            })
            .collect()
    }

    #[test]
    fn the_linkers_marks_are_refused_in_input() {
        let e = link(".visible .entry k()\n{\nL:\nbra.wvp_call L;\n}\n").unwrap_err();
        assert!(e.to_string().contains("reserved"), "{e}");
    }

    #[test]
    fn a_function_branching_to_a_label_it_does_not_define_is_refused() {
        let e = link(
            ".func f()\n{\nbra OUTSIDE;\n}\n.visible .entry k()\n{\ncall.uni f;\nOUTSIDE:\nret;\n}\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("undefined label `OUTSIDE`"), "{e}");
    }

    #[test]
    fn a_guarded_call_skips_to_its_return_site_and_the_body_cannot_fall_into_a_callee() {
        let body = link(
            ".func f()\n{\nret;\n}\n.visible .entry k()\n{\n.reg .pred %p<2>;\n\
             setp.eq.u32 %p1, 1, 1;\n@%p1 call.uni f;\n}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text(&body),
            [
                "setp.eq.u32 %p1, 1, 1",
                "@!%p1 bra subret0",
                "mov.u32.wvp_abi %subabi0_return, 0",
                "bra.wvp_call subentry0",
                "subret0:",
                "ret.wvp_abi",
                "subentry0:",
                "brx.idx.wvp_ret %subabi0_return, subreturns0",
                "subreturns0: subret0",
            ]
        );
    }
}
