//! One PTX instruction → C. Operand reads convert a register to the instruction's type (PTX
//! registers are untyped bits: `.b32` may hold a float); writes convert back. Anything not
//! translated is an error naming the instruction and its line.

use std::fmt::Write;

use super::{c_name, c_type, KernelEmitter, Place};
use crate::ptx::ast::{Instruction, Operand, Scalar, Space};
use crate::ptx::PtxError;

type R<T> = Result<T, PtxError>;

fn unsupported<T>(i: &Instruction, why: &str) -> R<T> {
    Err(PtxError::Unsupported {
        line: i.line,
        what: format!("`{}` {why}", i.text()),
    })
}

fn int_literal(v: i64, t: Scalar) -> String {
    if (-1_000_000..=1_000_000).contains(&v) {
        format!("({})({v})", c_type(t))
    } else {
        format!("({})0x{:x}ull", c_type(t), v as u64)
    }
}

impl KernelEmitter<'_> {
    fn reg(&self, i: &Instruction, name: &str) -> R<(String, Scalar)> {
        match self.registers.get(name) {
            Some(r) => Ok(r.clone()),
            None => unsupported(i, &format!("uses undeclared register %{name}")),
        }
    }

    /// A special register as a C expression and its type.
    fn special(&self, name: &str) -> Option<(String, Scalar)> {
        let axis = |n: &str| match n.rsplit('.').next() {
            Some("y") => 1,
            Some("z") => 2,
            _ => 0,
        };
        let u32t = Scalar::U(32);
        let e = match name.split('.').next()? {
            "tid" => format!("wvp_tid_{}", ["x", "y", "z"][axis(name)]),
            "ntid" => format!("wvp_launch_->block[{}]", axis(name)),
            "ctaid" => format!("wvp_cta_->ctaid[{}]", axis(name)),
            "nctaid" => format!("wvp_launch_->grid[{}]", axis(name)),
            "laneid" => "wvp_lane(wvp_t)".into(),
            "warpid" => "(wvp_t / 32)".into(),
            "nwarpid" => "((wvp_cta_->nthreads + 31) / 32)".into(),
            "smid" => "0u".into(),
            "nsmid" => "1u".into(),
            "lanemask_eq" => "(1u << wvp_lane(wvp_t))".into(),
            "lanemask_lt" => "((1u << wvp_lane(wvp_t)) - 1u)".into(),
            "lanemask_le" => "((2u << wvp_lane(wvp_t)) - 1u)".into(),
            "lanemask_gt" => "(~((2u << wvp_lane(wvp_t)) - 1u))".into(),
            "lanemask_ge" => "(~((1u << wvp_lane(wvp_t)) - 1u))".into(),
            "clock" => "(uint32_t)wvp_clock()".into(),
            "clock64" | "globaltimer" => return Some(("wvp_clock()".into(), Scalar::U(64))),
            _ => return None,
        };
        Some((e, u32t))
    }

    /// The value of a symbol used as an operand: the address of a variable in its space.
    fn symbol_value(&self, i: &Instruction, name: &str) -> R<String> {
        match self.places.get(name) {
            Some(Place::Shared(o)) | Some(Place::Param(o)) => Ok(format!("(uint64_t){o}")),
            Some(Place::Local(o)) => Ok(format!("(uint64_t)(uintptr_t)(wvp_local + {o})")),
            Some(Place::Global(sym)) => Ok(format!("(uint64_t)(uintptr_t){sym}")),
            Some(Place::Ret(_)) | Some(Place::CallSite(_)) => {
                unsupported(i, &format!("takes the address of parameter `{name}`"))
            }
            None => unsupported(i, &format!("refers to unknown symbol `{name}`")),
        }
    }

    /// Reads `op` as a C expression of type `t`.
    pub(super) fn read(&self, i: &Instruction, op: &Operand, t: Scalar) -> R<String> {
        let ct = c_type(t);
        Ok(match op {
            Operand::Reg(name) => {
                let (expr, rt) = match self.special(name) {
                    Some(s) if !self.registers.contains_key(name) => s,
                    _ => self.reg(i, name)?,
                };
                match (t.is_float(), rt.is_float()) {
                    (true, true) if t.bits() == rt.bits() => expr,
                    (true, true) => format!("({ct}){expr}"),
                    (true, false) if t.bits() == 32 => format!("wvp_f32_of((uint32_t){expr})"),
                    (true, false) => format!("wvp_f64_of((uint64_t){expr})"),
                    (false, true) if rt.bits() == 32 => format!("({ct})wvp_bits_f32({expr})"),
                    (false, true) => format!("({ct})wvp_bits_f64({expr})"),
                    (false, false) if c_type(rt) == ct => expr,
                    (false, false) => format!("({ct}){expr}"),
                }
            }
            Operand::NotReg(name) => {
                let (expr, _) = self.reg(i, name)?;
                format!("!{expr}")
            }
            Operand::Int(v) if t.is_float() => format!("({ct}){v}"),
            Operand::Int(v) => int_literal(*v, t),
            Operand::Float32(b) => match t {
                Scalar::F(32) => format!("wvp_f32_of(0x{b:08x}u)"),
                Scalar::F(_) => format!("(double)wvp_f32_of(0x{b:08x}u)"),
                _ => format!("({ct})0x{b:08x}u"),
            },
            Operand::Float64(b) => match t {
                Scalar::F(64) => format!("wvp_f64_of(0x{b:016x}ull)"),
                Scalar::F(_) => format!("(float)wvp_f64_of(0x{b:016x}ull)"),
                _ => format!("({ct})0x{b:016x}ull"),
            },
            Operand::Symbol(name) => format!("({ct}){}", self.symbol_value(i, name)?),
            _ => return unsupported(i, "has an operand of a form not supported here"),
        })
    }

    /// `dst = value;` where `value` is a C expression of type `t`.
    pub(super) fn write(
        &self,
        i: &Instruction,
        dst: &Operand,
        t: Scalar,
        value: &str,
    ) -> R<String> {
        let name = match dst {
            Operand::Reg(n) => n,
            Operand::Symbol(s) if s == "_" => return Ok(format!("(void)({value});")),
            _ => return unsupported(i, "writes to something that is not a register"),
        };
        let (c, rt) = self.reg(i, name)?;
        let rc = c_type(rt);
        Ok(match (t.is_float(), rt.is_float()) {
            (true, true) if t.bits() == rt.bits() => format!("{c} = {value};"),
            (true, true) => format!("{c} = ({rc})({value});"),
            (true, false) if t.bits() == 32 => format!("{c} = ({rc})wvp_bits_f32({value});"),
            (true, false) => format!("{c} = ({rc})wvp_bits_f64({value});"),
            (false, true) if rt.bits() == 32 => format!("{c} = wvp_f32_of((uint32_t)({value}));"),
            (false, true) => format!("{c} = wvp_f64_of((uint64_t)({value}));"),
            (false, false) if rt == Scalar::Pred => format!("{c} = ({value}) != 0;"),
            (false, false) => format!("{c} = ({rc})({value});"),
        })
    }

    /// A pointer (`uint8_t *`) to the memory `addr` names in `space`.
    /// Accesses through a register are checked against the memory the launch may touch
    /// (`wvp_global`, `wvp_shared_at`, ...): an access outside faults the CTA instead of
    /// reaching host memory.
    pub(super) fn pointer(
        &self,
        i: &Instruction,
        addr: &Operand,
        space: Space,
        width: u32,
    ) -> R<String> {
        let Operand::Address(base, offset) = addr else {
            return unsupported(i, "expects an address `[...]`");
        };
        let (mut value, space) = match base.as_deref() {
            None => ("0".to_string(), space),
            Some(Operand::Reg(r)) => (
                self.read(i, &Operand::Reg(r.clone()), Scalar::U(64))?,
                space,
            ),
            // A variable by name: its offset in its own space, or a module variable's address.
            Some(Operand::Symbol(s)) => match (self.places.get(s.as_str()), space) {
                (Some(Place::Shared(o)), Space::Shared | Space::Generic) => {
                    (format!("{o}"), Space::Shared)
                }
                (Some(Place::Local(o)), Space::Local | Space::Generic) => {
                    (format!("{o}"), Space::Local)
                }
                (Some(Place::Param(o)), Space::Param) if self.is_entry() => {
                    (format!("{o}"), Space::Param)
                }
                // A device function's arguments and results, and call-site variables: fixed
                // offsets into blocks of known size, checked here rather than at run time.
                (Some(Place::Param(o)), Space::Param) => {
                    return self.block_pointer(
                        i,
                        "wvp_args",
                        o + *offset as u64,
                        width,
                        self.function_param_bytes(),
                    )
                }
                (Some(Place::Ret(o)), Space::Param) => {
                    return self.block_pointer(
                        i,
                        "wvp_ret",
                        o + *offset as u64,
                        width,
                        self.function_ret_bytes(),
                    )
                }
                (Some(Place::CallSite(c)), Space::Param) => {
                    let size = self
                        .call_sites
                        .iter()
                        .find(|x| &x.0 == c)
                        .map_or(0, |x| x.1);
                    return self.block_pointer(i, c, *offset as u64, width, size);
                }
                (Some(Place::Global(sym)), Space::Global | Space::Const | Space::Generic) => {
                    (format!("(uint64_t)(uintptr_t){sym}"), Space::Global)
                }
                (Some(_), _) => {
                    return unsupported(i, &format!("accesses `{s}` in the wrong state space"))
                }
                (None, _) => return unsupported(i, &format!("refers to unknown symbol `{s}`")),
            },
            Some(_) => return unsupported(i, "has an address of a form not supported"),
        };
        if space == Space::Param && !self.is_entry() {
            return unsupported(
                i,
                "(parameter addresses in registers inside device functions are not supported)",
            );
        }
        let through_register = matches!(base.as_deref(), Some(Operand::Reg(_)));
        if *offset != 0 {
            value = format!("{value} + {offset}");
        }
        Ok(match space {
            Space::Shared => format!("wvp_shared_at(wvp_cta_, {value}, {width}, {})", i.line),
            // A local address in a register may point into a caller's frame or the kernel's
            // depot (device functions get pointers to their callers' locals).
            Space::Local if through_register => format!(
                "wvp_local_ptr(wvp_cta_, wvp_t, {value}, {width}, {})",
                i.line
            ),
            Space::Local => {
                format!(
                    "wvp_local_at(wvp_cta_, wvp_local, wvp_local_bytes, {value}, {width}, {})",
                    i.line
                )
            }
            Space::Param => format!(
                "wvp_param_at(wvp_launch_, wvp_cta_, {value}, {width}, {})",
                i.line
            ),
            // SIMT emulation counts the sectors of global traffic (constant memory has its
            // own cache on a GPU).
            Space::Global | Space::Generic if self.simt.is_some() => {
                let site = self.simt.as_ref().map_or(0, |p| p.borrow_mut().site());
                format!(
                    "wvp_simt_global(wvp_launch_, wvp_cta_, {value}, {width}, {}, {site})",
                    i.line
                )
            }
            Space::Global | Space::Const | Space::Generic => {
                format!(
                    "wvp_global(wvp_launch_, wvp_cta_, {value}, {width}, {})",
                    i.line
                )
            }
        })
    }

    /// `base + offset` into a block of `size` bytes, refused when the access does not fit.
    fn block_pointer(
        &self,
        i: &Instruction,
        base: &str,
        offset: u64,
        width: u32,
        size: u64,
    ) -> R<String> {
        if offset + width as u64 > size {
            return unsupported(
                i,
                &format!("accesses {width} bytes at offset {offset} of a {size}-byte parameter"),
            );
        }
        Ok(format!("({base} + {offset})"))
    }

    fn function_param_bytes(&self) -> u64 {
        self.callees
            .get(&self.function.name)
            .map_or(0, |c| c.param_bytes)
    }

    fn function_ret_bytes(&self) -> u64 {
        self.callees
            .get(&self.function.name)
            .map_or(0, |c| c.ret_bytes)
    }

    /// The instruction's value type: its last type modifier.
    pub(super) fn ty(&self, i: &Instruction) -> R<Scalar> {
        match i.types().last() {
            Some(Scalar::F(16)) => unsupported(i, "(half precision is not supported)"),
            Some(t) => Ok(*t),
            None => unsupported(i, "has no type"),
        }
    }

    /// Emits `i` (with its guard) into `out`.
    pub(super) fn instruction(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let mut text = String::new();
        self.body(i, &mut text)?;
        let comment = format!("/* {} */", i.source().replace("*/", "* /"));
        match &i.guard {
            Some(g) => {
                let (p, _) = self.reg(i, &g.reg)?;
                let cond = if g.negated { format!("!{p}") } else { p };
                // SIMT emulation: lanes whose guard is false issue the instruction without
                // executing it (nvprof's "non-predicated" efficiency leaves them out).
                let off = if self.simt.is_some() && !super::simt::transfers_control(i) {
                    " else wvp_cta_->simt->guarded_off++;"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "        if ({cond}) {{ {} }}{off} {comment}",
                    text.trim_end()
                );
            }
            None => {
                let _ = writeln!(out, "        {} {comment}", text.trim_end());
            }
        }
        Ok(())
    }

    /// A split point: save the registers live across it, record `resume`, stop this thread; the returned label
    /// is where it continues.
    pub(super) fn split_point(&mut self, prepare: &str, out: &mut String) -> u32 {
        self.splits += 1;
        let r = self.splits;
        // In a copy of the body for threads that all resumed at one split point, a register
        // restored there and not written since already holds its value in its slot.
        let unchanged = |n: &String| {
            self.segment.as_ref().is_some_and(|seg| {
                seg.clean.contains(n) && (seg.resume == r || !self.uniform.contains(n))
            })
        };
        let save: String = self
            .live_across
            .iter()
            .filter(|n| !unchanged(n))
            .map(|n| {
                if self.uniform.contains(n) {
                    format!("wvp_uo.s{r}_{n} = {n}; ")
                } else {
                    format!("wvp_s->{n} = {n}; ")
                }
            })
            .collect();
        self.saved.push(self.live_across.clone());
        let track = if self.track_stops {
            format!(" wvp_stops |= 1u << {r};")
        } else {
            String::new()
        };
        let p = &self.prefix;
        let _ = write!(
            out,
            "{save}{prepare}{track} goto {p}wvp_next_thread; {p}wvp_resume_{r}:;"
        );
        if let Some(plan) = &self.simt {
            // SIMT emulation: what follows a split point is a block of its own.
            plan.borrow_mut().start_block(r);
        }
        r
    }

    fn body(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let ops = &i.operands;
        let arg = |n: usize| -> R<&Operand> {
            ops.get(n).ok_or_else(|| PtxError::Unsupported {
                line: i.line,
                what: format!("`{}` lacks operand {}", i.text(), n + 1),
            })
        };
        match i.opcode.as_str() {
            "ld" | "ldu" => self.load(i, out),
            "st" => self.store(i, out),
            "mov" => self.mov(i, out),
            "cvta" => self.cvta(i, out),
            "cvt" => self.cvt(i, out),
            "setp" | "set" => self.setp(i, out),
            "selp" => {
                let t = self.ty(i)?;
                let v = format!(
                    "{} ? {} : {}",
                    self.read(i, arg(3)?, Scalar::Pred)?,
                    self.read(i, arg(1)?, t)?,
                    self.read(i, arg(2)?, t)?
                );
                out.push_str(&self.write(i, arg(0)?, t, &v)?);
                Ok(())
            }
            "bra" => {
                let Operand::Symbol(l) = arg(0)? else {
                    return unsupported(i, "branches to something that is not a label");
                };
                let _ = write!(out, "{}", self.jump(l));
                Ok(())
            }
            "brx" => self.brx(i, out),
            "ret" if !self.is_entry() => {
                out.push_str("goto wvp_return;");
                Ok(())
            }
            "exit" if !self.is_entry() => {
                unsupported(i, "inside a device function is not supported")
            }
            "ret" | "exit" => {
                let _ = write!(out, "goto {}wvp_exit;", self.prefix);
                Ok(())
            }
            "call" => self.call(i, out),
            "trap" => {
                out.push_str("return WVP_CTA_TRAP;");
                Ok(())
            }
            "bar" | "barrier" if i.has("sync") || i.modifiers.is_empty() || i.has("aligned") => {
                if ops.len() > 1 {
                    return unsupported(
                        i,
                        "with a thread count (named partial barriers) is not supported",
                    );
                }
                if i.has("warp") {
                    let mask = self.read(i, arg(0)?, Scalar::U(32))?;
                    let r = self.splits + 1;
                    let prepare = format!(
                        "wvp_warp_arrive(wvp_cta_, wvp_t, {r}, WVP_WARP_SYNC, 0, 0, 0, {mask});"
                    );
                    self.split_point(&prepare, out);
                } else {
                    let r = self.splits + 1;
                    // In the copy run after this same barrier, the thread's record already
                    // says it waits here.
                    let prepare = if self.segment.as_ref().is_some_and(|s| s.resume == r) {
                        "wvp_arrived++;".to_string()
                    } else {
                        format!(
                            "wvp_th[wvp_t].resume = {r}; wvp_th[wvp_t].wait = WVP_AT_BARRIER; wvp_arrived++;"
                        )
                    };
                    self.split_point(&prepare, out);
                }
                Ok(())
            }
            "membar" | "fence" => {
                out.push_str("__atomic_thread_fence(__ATOMIC_SEQ_CST);");
                Ok(())
            }
            "nanosleep" | "prefetch" | "prefetchu" | "pmevent" => {
                out.push(';');
                Ok(())
            }
            "shfl" => self.shfl(i, out),
            "vote" => self.vote(i, out),
            "activemask" => {
                // Fused threads run one at a time, so the lanes that would be converged here
                // are not known: those that have not exited. The SIMT emulation knows them.
                let v = if self.simt.is_some() {
                    "wvp_simt_active(wvp_cta_, wvp_t)"
                } else {
                    "wvp_active_mask(wvp_cta_, wvp_t)"
                };
                out.push_str(&self.write(i, arg(0)?, Scalar::B(32), v)?);
                Ok(())
            }
            "atom" | "red" => self.atom(i, out),
            _ => self.arith(i, out),
        }
    }

    /// The C of a jump to `label`: a `goto`, or in a SIMT translation the block's resume id
    /// and a stop (`simt_kernel.rs`).
    fn jump(&self, label: &str) -> String {
        if self.simt.is_some() {
            format!("{{ {} }}", self.simt_jump(label))
        } else {
            format!("goto {}L_{};", self.prefix, c_name(label))
        }
    }

    fn brx(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let idx = self.read(i, &i.operands[0], Scalar::U(32))?;
        let Some(Operand::Symbol(table)) = i.operands.get(1) else {
            return unsupported(i, "needs a .branchtargets table");
        };
        let Some(targets) = self.tables.get(table) else {
            return unsupported(i, &format!("names unknown table `{table}`"));
        };
        let _ = write!(out, "switch ({idx}) {{");
        for (n, l) in targets.iter().enumerate() {
            let _ = write!(out, " case {n}: {}", self.jump(l));
        }
        out.push_str(" default: return WVP_CTA_TRAP; }");
        Ok(())
    }

    fn load(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        let space = i.space();
        let lanes = match &i.operands[0] {
            Operand::Vector(v) => v.len() as u32,
            _ => 1,
        };
        let ptr = self.pointer(i, &i.operands[1], space, lanes * t.bytes())?;
        let n = t.name();
        let volatile = i.has("volatile") || i.has("relaxed") || i.has("acquire");
        let load = |p: &str| {
            if volatile && !t.is_float() {
                format!("__atomic_load_n(({} *){p}, __ATOMIC_ACQUIRE)", c_type(t))
            } else {
                format!("wvp_ld_{}({p})", mem_name(&n))
            }
        };
        match &i.operands[0] {
            Operand::Vector(dsts) => {
                for (k, d) in dsts.iter().enumerate() {
                    let p = format!("{ptr} + {}", k as u32 * t.bytes());
                    out.push_str(&self.write(i, d, t, &load(&p))?);
                    out.push(' ');
                }
            }
            d => out.push_str(&self.write(i, d, t, &load(&ptr))?),
        }
        Ok(())
    }

    fn store(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        let lanes = match &i.operands[1] {
            Operand::Vector(v) => v.len() as u32,
            _ => 1,
        };
        let ptr = self.pointer(i, &i.operands[0], i.space(), lanes * t.bytes())?;
        let n = mem_name(&t.name());
        let volatile = i.has("volatile") || i.has("relaxed") || i.has("release");
        match &i.operands[1] {
            Operand::Vector(srcs) => {
                for (k, s) in srcs.iter().enumerate() {
                    let v = self.read(i, s, t)?;
                    let _ = write!(out, "wvp_st_{n}({ptr} + {}, {v}); ", k as u32 * t.bytes());
                }
            }
            s => {
                let v = self.read(i, s, t)?;
                if volatile && !t.is_float() {
                    let _ = write!(
                        out,
                        "__atomic_store_n(({} *){ptr}, {v}, __ATOMIC_RELEASE);",
                        c_type(t)
                    );
                } else {
                    let _ = write!(out, "wvp_st_{n}({ptr}, {v});");
                }
            }
        }
        Ok(())
    }

    fn mov(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        match (&i.operands[0], &i.operands[1]) {
            // Pack {lo, hi} into a wider register.
            (d, Operand::Vector(parts)) => {
                let part = Scalar::B(t.bits() / parts.len() as u32);
                let mut e = Vec::new();
                for (k, p) in parts.iter().enumerate() {
                    e.push(format!(
                        "((uint64_t){} << {})",
                        self.read(i, p, part)?,
                        k as u32 * part.bits()
                    ));
                }
                out.push_str(&self.write(i, d, Scalar::U(t.bits()), &e.join(" | "))?);
            }
            // Unpack a wide register into {lo, hi}.
            (Operand::Vector(parts), s) => {
                let part = Scalar::B(t.bits() / parts.len() as u32);
                let v = self.read(i, s, Scalar::U(t.bits()))?;
                for (k, p) in parts.iter().enumerate() {
                    let e = format!("({v} >> {})", k as u32 * part.bits());
                    out.push_str(&self.write(i, p, part, &e)?);
                    out.push(' ');
                }
            }
            (d, s) => {
                let v = self.read(i, s, t)?;
                out.push_str(&self.write(i, d, t, &v)?);
            }
        }
        Ok(())
    }

    fn cvta(&mut self, i: &Instruction, out: &mut String) -> R<()> {
        let t = self.ty(i)?;
        let a = self.read(i, &i.operands[1], Scalar::U(64))?;
        let to = i.has("to");
        let v = match (i.space(), to) {
            (Space::Shared, false) => {
                format!("(uint64_t)(uintptr_t)(wvp_shared + (uint32_t)({a}))")
            }
            (Space::Shared, true) => format!("({a}) - (uint64_t)(uintptr_t)wvp_shared"),
            // Local addresses are host addresses (see `pointer`): one window for the
            // kernel's depot and every device function's frame, as a pointer passed down a
            // call needs.
            (Space::Local, _) => a,
            (Space::Param, false) => format!("(uint64_t)(uintptr_t)(wvp_launch_->params + ({a}))"),
            (Space::Param, true) => format!("({a}) - (uint64_t)(uintptr_t)wvp_launch_->params"),
            _ => a,
        };
        out.push_str(&self.write(i, &i.operands[0], Scalar::U(t.bits()), &v)?);
        Ok(())
    }
}

/// The prelude's name for a memory access of type `n` (`b32` is `u32`).
fn mem_name(n: &str) -> String {
    n.replacen('b', "u", 1)
}
