//! Device functions inlined into the kernels that call them, for the SIMT emulation.
//!
//! The fused translation runs a `call` as a C call made by one thread, which the SIMT
//! emulation cannot step through: the callee's instructions would go uncounted and its
//! branches would never diverge a warp. A GPU runs a callee in the caller's warp, under the
//! same reconvergence stack, so the emulation runs a copy of the kernel in which every call
//! is replaced by the callee's body: its registers, labels, local depot and call-site
//! variables renamed with a prefix of their own, its formal parameters and return values
//! mapped to the caller's call-site variables (which the caller fills with `st.param` and
//! reads with `ld.param`, so those instructions keep their meaning), and each `ret` a branch
//! to the end of the copy. Call-site variables become thread-local memory
//! (`thread_call_sites`). Blocks and immediate post-dominators are then computed over the
//! whole kernel: a branch in a callee reconverges where a GPU's would, inside the callee or at
//! its return.
//!
//! Recursion cannot be inlined (the emulation reports it; warpvisor's own kernels have
//! none: their continuations return to the trampoline), nor can calls through a register.

use std::collections::{HashMap, HashSet};

use super::ast::{Function, Guard, Instruction, Operand, PtxModule, Space, Statement};
use super::PtxError;

/// The most statements a kernel may have once its calls are inlined, each copy's registers
/// and variables counted as statements too (a tree of calls doubling at every level must stop
/// early, however small its bodies): a bound on the C the emulation compiles (the largest measured, a PHash partition of warpvisor's fleet kernel,
/// made 1.4 million lines of C and an hour of the C compiler).
pub const MAX_INLINED_STATEMENTS: usize = 4_000_000;

/// `module` with every call in every kernel replaced by the callee's body, and its device
/// functions dropped (nothing calls them any more).
pub fn inline_calls(module: &PtxModule) -> Result<PtxModule, PtxError> {
    let functions: HashMap<&str, &Function> = module
        .functions
        .iter()
        .filter(|f| !f.is_entry && f.body.is_some())
        .map(|f| (f.name.as_str(), f))
        .collect();
    let root = unused_prefix(module);
    let mut out = module.clone();
    out.functions.retain(|f| f.is_entry);
    for kernel in out.functions.iter_mut() {
        let Some(body) = kernel.body.take() else {
            continue;
        };
        let mut inliner = Inliner {
            functions: &functions,
            root: &root,
            copies: 0,
            kernel,
            statements: 0,
        };
        let mut inlined = Vec::with_capacity(body.len());
        inliner.expand(&body, &mut inlined, &mut Vec::new())?;
        kernel.body = Some(thread_call_sites(kernel, inlined));
    }
    Ok(out)
}

/// Makes the kernel's call-site variables (`.param` in its body) thread-local memory.
///
/// A call's `st.param`, `call` and `ld.param` used to run without a split in between, so one
/// C array per variable served every thread. Inlined, a callee's blocks lie between them,
/// and the emulation switches lanes at every block's end: each thread needs its own.
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
                for m in i.modifiers.iter_mut().filter(|m| *m == "param") {
                    *m = "local".into();
                }
                Statement::Instr(i)
            }
            other => other,
        })
        .collect()
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
    let mut root = String::from("inl");
    while names.iter().any(|n| n.starts_with(&root)) {
        root.push('_');
    }
    root
}

/// Inlines the calls of one kernel.
struct Inliner<'a> {
    functions: &'a HashMap<&'a str, &'a Function>,
    /// Every copy's names start with `{root}{copy}_`.
    root: &'a str,
    copies: usize,
    /// The kernel: inlined copies add their registers and variables to it.
    kernel: &'a mut Function,
    statements: usize,
}

/// How one copy of a callee renames what it names.
struct Renaming {
    registers: HashMap<String, String>,
    symbols: HashMap<String, String>,
}

impl Renaming {
    fn register(&self, r: &str) -> String {
        self.registers
            .get(r)
            .cloned()
            .unwrap_or_else(|| r.to_string())
    }

    /// A label, variable or parameter of the callee by its copy's name; module variables and
    /// functions keep theirs.
    fn symbol(&self, s: &str) -> String {
        self.symbols
            .get(s)
            .cloned()
            .unwrap_or_else(|| s.to_string())
    }

    fn operand(&self, op: &Operand) -> Operand {
        match op {
            Operand::Reg(r) => Operand::Reg(self.register(r)),
            Operand::NotReg(r) => Operand::NotReg(self.register(r)),
            Operand::Pair(a, b) => Operand::Pair(self.register(a), self.register(b)),
            Operand::Symbol(s) => Operand::Symbol(self.symbol(s)),
            Operand::Address(base, offset) => {
                Operand::Address(base.as_ref().map(|b| Box::new(self.operand(b))), *offset)
            }
            Operand::Vector(v) => Operand::Vector(v.iter().map(|o| self.operand(o)).collect()),
            Operand::List(v) => Operand::List(v.iter().map(|o| self.operand(o)).collect()),
            Operand::Int(_) | Operand::Float32(_) | Operand::Float64(_) => op.clone(),
        }
    }

    fn guard(&self, g: &Option<Guard>) -> Option<Guard> {
        g.as_ref().map(|g| Guard {
            reg: self.register(&g.reg),
            negated: g.negated,
        })
    }
}

/// `@guard bra target;` at source line `line`.
fn branch(guard: Option<Guard>, target: &str, line: usize) -> Statement {
    Statement::Instr(Instruction {
        guard,
        opcode: "bra".into(),
        modifiers: Vec::new(),
        operands: vec![Operand::Symbol(target.to_string())],
        line,
    })
}

impl Inliner<'_> {
    /// Appends `body` to `out` with its calls inlined; `path` holds the callees being inlined.
    fn expand(
        &mut self,
        body: &[Statement],
        out: &mut Vec<Statement>,
        path: &mut Vec<String>,
    ) -> Result<(), PtxError> {
        for s in body {
            match s {
                Statement::Instr(i) if i.opcode == "call" => self.call(i, out, path)?,
                other => {
                    self.grow(1)?;
                    out.push(other.clone());
                }
            }
        }
        Ok(())
    }

    /// Counts `n` more statements against [`MAX_INLINED_STATEMENTS`].
    fn grow(&mut self, n: usize) -> Result<(), PtxError> {
        self.statements += n;
        if self.statements > MAX_INLINED_STATEMENTS {
            return Err(PtxError::Unsupported {
                line: self.kernel.line,
                what: format!(
                    "kernel `{}` with its device functions inlined exceeds {MAX_INLINED_STATEMENTS} statements (SIMT emulation)",
                    self.kernel.name
                ),
            });
        }
        Ok(())
    }

    /// Replaces one `call` with a renamed copy of its callee's body.
    fn call(
        &mut self,
        call: &Instruction,
        out: &mut Vec<Statement>,
        path: &mut Vec<String>,
    ) -> Result<(), PtxError> {
        let unsupported = |why: String| PtxError::Unsupported {
            line: call.line,
            what: format!(
                "`{}` {why} (SIMT emulation inlines every call)",
                call.text()
            ),
        };
        let (rets, target, args) = call
            .call_parts()
            .ok_or_else(|| unsupported("calls through a register".into()))?;
        let callee = *self
            .functions
            .get(target)
            .ok_or_else(|| unsupported(format!("calls `{target}`, which has no body")))?;
        if path.iter().any(|p| p == target) {
            return Err(unsupported(format!("calls `{target}` recursively")));
        }
        if args.len() != callee.params.len() || rets.len() != callee.returns.len() {
            return Err(unsupported(format!(
                "does not match the parameters of `{target}`"
            )));
        }
        // The copy's end label, registers and variables.
        self.grow(1 + callee.registers.len() + callee.variables.len())?;
        let prefix = format!("{}{}_", self.root, self.copies);
        self.copies += 1;
        let renaming = self.rename(callee, &prefix, &rets, &args, &unsupported)?;

        // A guarded call skips the copy when its guard is false.
        let end = format!("{prefix}return");
        if let Some(g) = &call.guard {
            let skip = Guard {
                reg: g.reg.clone(),
                negated: !g.negated,
            };
            out.push(branch(Some(skip), &end, call.line));
        }
        let copy: Vec<Statement> = callee
            .body
            .iter()
            .flatten()
            .map(|s| renaming.statement(s, &end))
            .collect();
        path.push(target.to_string());
        self.expand(&copy, out, path)?;
        path.pop();
        out.push(Statement::Label(end));
        Ok(())
    }

    /// The names of one copy of `callee`, its registers and variables added to the kernel.
    fn rename(
        &mut self,
        callee: &Function,
        prefix: &str,
        rets: &[Operand],
        args: &[Operand],
        unsupported: &dyn Fn(String) -> PtxError,
    ) -> Result<Renaming, PtxError> {
        let mut registers = HashMap::new();
        for r in &callee.registers {
            let name = format!("{prefix}{}", r.name);
            registers.insert(r.name.clone(), name.clone());
            self.kernel
                .registers
                .push(super::ast::Register { name, ty: r.ty });
        }
        let mut symbols = HashMap::new();
        for s in callee.body.iter().flatten() {
            if let Statement::Label(l) | Statement::BranchTargets(l, _) = s {
                symbols.insert(l.clone(), format!("{prefix}{l}"));
            }
        }
        for v in &callee.variables {
            if v.space == Space::Shared {
                // One variable per CTA however often its function is called.
                if !self.kernel.variables.iter().any(|k| k.name == v.name) {
                    self.kernel.variables.push(v.clone());
                }
                continue;
            }
            let mut copy = v.clone();
            copy.name = format!("{prefix}{}", v.name);
            symbols.insert(v.name.clone(), copy.name.clone());
            self.kernel.variables.push(copy);
        }
        // Formal parameters and return values are the call site's variables.
        for (formal, actual) in callee
            .params
            .iter()
            .zip(args)
            .chain(callee.returns.iter().zip(rets))
        {
            let Operand::Symbol(actual) = actual else {
                return Err(unsupported(format!(
                    "passes `{}`, which is not a .param variable",
                    actual.source()
                )));
            };
            symbols.insert(formal.name.clone(), actual.clone());
        }
        Ok(Renaming { registers, symbols })
    }
}

impl Renaming {
    /// One statement of a callee's copy; `ret` becomes a branch to `end`.
    fn statement(&self, s: &Statement, end: &str) -> Statement {
        match s {
            Statement::Label(l) => Statement::Label(self.symbol(l)),
            Statement::BranchTargets(l, targets) => Statement::BranchTargets(
                self.symbol(l),
                targets.iter().map(|t| self.symbol(t)).collect(),
            ),
            Statement::Instr(i) if i.opcode == "ret" => branch(self.guard(&i.guard), end, i.line),
            Statement::Instr(i) => Statement::Instr(Instruction {
                guard: self.guard(&i.guard),
                opcode: i.opcode.clone(),
                modifiers: i.modifiers.clone(),
                operands: i.operands.iter().map(|o| self.operand(o)).collect(),
                line: i.line,
            }),
        }
    }
}
