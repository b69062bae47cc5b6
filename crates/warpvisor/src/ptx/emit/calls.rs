//! Device functions (`.func`) and `call`: each function becomes a C function of the thread
//! that calls it. A call never splits, so while a callee runs no other thread of the CTA
//! does: callee frames (`.local` depots) live on one stack per CTA (`wvp_cta.frames`), and
//! recursion is C recursion bounded by that stack. Barriers and warp operations inside a
//! device function are rejected (they would need the callee's frame per thread).

use std::collections::HashMap;
use std::fmt::Write;

use super::{align_up, c_name, KernelEmitter, ParamSlot};
use crate::ptx::ast::{Function, Instruction, Operand, PtxModule};
use crate::ptx::PtxError;

/// Frame-stack bytes a call takes besides its `.local` depot: with the 1 MiB frame stack,
/// recursion goes at most 4,096 calls deep (a GPU's default stack is 1 KiB per thread).
const FRAME_OVERHEAD: u64 = 256;

/// What a caller needs to know about a device function.
#[derive(Debug, Clone)]
pub struct Callee {
    /// Its C function is `wvp_fn_{index}`.
    pub index: usize,
    /// PTX name (for comments).
    pub name: String,
    /// Parameters in the argument block.
    pub params: Vec<ParamSlot>,
    /// Size of the argument block.
    pub param_bytes: u64,
    /// Return values in the result block.
    pub returns: Vec<ParamSlot>,
    /// Size of the result block.
    pub ret_bytes: u64,
    /// Whether it has a body (a declaration alone cannot be called).
    pub defined: bool,
}

fn layout(params: &[crate::ptx::ast::Param]) -> (Vec<ParamSlot>, u64) {
    let mut slots = Vec::new();
    let mut bytes = 0;
    for p in params {
        let offset = align_up(bytes, p.align as u64);
        slots.push(ParamSlot {
            offset,
            size: p.bytes(),
        });
        bytes = offset + p.bytes();
    }
    (slots, bytes)
}

/// Every device function of `module`, by name.
pub fn callees(module: &PtxModule) -> HashMap<String, Callee> {
    let mut out: HashMap<String, Callee> = HashMap::new();
    for f in module.functions.iter().filter(|f| !f.is_entry) {
        let (params, param_bytes) = layout(&f.params);
        let (returns, ret_bytes) = layout(&f.returns);
        let index = out.get(&f.name).map_or(out.len(), |c| c.index);
        let defined = f.body.is_some() || out.get(&f.name).is_some_and(|c| c.defined);
        out.insert(
            f.name.clone(),
            Callee {
                index,
                name: f.name.clone(),
                params,
                param_bytes,
                returns,
                ret_bytes,
                defined,
            },
        );
    }
    out
}

impl Callee {
    /// The C declaration.
    pub fn prototype(&self) -> String {
        format!(
            "static int wvp_fn_{}(const wvp_launch *wvp_launch_, wvp_cta *wvp_cta_, uint32_t wvp_t, uint8_t *wvp_args, uint8_t *wvp_ret) /* {} */",
            self.index, self.name
        )
    }
}

/// Instructions that stop a thread (split points): not allowed in a device function.
pub(super) fn splits(i: &Instruction) -> bool {
    matches!(i.opcode.as_str(), "bar" | "barrier" | "shfl" | "vote")
}

impl KernelEmitter<'_> {
    /// Whether this is a kernel (not a device function).
    pub(super) fn is_entry(&self) -> bool {
        self.function.is_entry
    }

    /// A device function's C definition.
    pub(super) fn emit_function(mut self, code: &mut String) -> Result<(), PtxError> {
        let f: &Function = self.function;
        for s in f.body.iter().flatten() {
            if let crate::ptx::ast::Statement::Instr(i) = s {
                if splits(i) {
                    return Err(PtxError::Unsupported {
                        line: i.line,
                        what: format!(
                            "`{}` inside device function `{}` (barriers and warp operations must be in the kernel)",
                            i.text(),
                            f.name
                        ),
                    });
                }
            }
        }
        let live = self.liveness();
        let body = self.translate_body(&live)?;
        let Some(callee) = self.callees.get(&f.name) else {
            return Ok(());
        };
        let _ = writeln!(
            code,
            "\n/* ---- device function `{}` (PTX line {}) ---- */",
            f.name, f.line
        );
        let _ = writeln!(code, "{} {{", callee.prototype());
        self.declarations(code);
        let depot = self.local_bytes;
        // Every call takes FRAME_OVERHEAD bytes besides its depot, so that the frame stack
        // bounds recursion depth (and with it the host stack the C recursion uses).
        let frame = depot + FRAME_OVERHEAD;
        let _ = writeln!(
            code,
            "    uint8_t *wvp_shared = wvp_cta_->shared;\n    \
             const int wvp_flat = wvp_launch_->block[1] == 1 && wvp_launch_->block[2] == 1;\n    \
             uint32_t wvp_tid_x = wvp_flat ? wvp_t : wvp_t % wvp_launch_->block[0];\n    \
             uint32_t wvp_tid_y = wvp_flat ? 0 : wvp_t / wvp_launch_->block[0] % wvp_launch_->block[1];\n    \
             uint32_t wvp_tid_z = wvp_flat ? 0 : wvp_t / wvp_launch_->block[0] / wvp_launch_->block[1];\n    \
             const uint64_t wvp_local_bytes = {depot}, wvp_frame_bytes = {frame};\n    \
             if (wvp_cta_->frame_top + wvp_frame_bytes > wvp_cta_->frames_bytes) return WVP_CTA_STACK;\n    \
             uint8_t *wvp_local = wvp_cta_->frames + wvp_cta_->frame_top;\n    \
             wvp_cta_->frame_top += wvp_frame_bytes;\n    \
             (void)wvp_shared; (void)wvp_tid_x; (void)wvp_tid_y; (void)wvp_tid_z; (void)wvp_args; (void)wvp_ret; (void)wvp_local;"
        );
        code.push_str(&body);
        let _ = writeln!(
            code,
            "    wvp_return:\n    wvp_cta_->frame_top -= wvp_frame_bytes;\n    return 0;\n}}"
        );
        Ok(())
    }

    /// `call[.uni] (ret), f, (a, b);` or `call f, (a);`: copy the call site's arguments into
    /// the callee's argument block, call, and leave its results in the call site's arrays.
    pub(super) fn call(&mut self, i: &Instruction, out: &mut String) -> Result<(), PtxError> {
        let bad = |why: &str| PtxError::Unsupported {
            line: i.line,
            what: format!("`{}` {why}", i.text()),
        };
        let (rets, target, args) = i
            .call_parts()
            .ok_or_else(|| bad("(indirect calls through a register are not supported)"))?;
        let callee = self
            .callees
            .get(target)
            .ok_or_else(|| bad(&format!("calls unknown function `{target}`")))?;
        if !callee.defined {
            return Err(bad(&format!("calls `{target}`, which has no body")));
        }
        if args.len() != callee.params.len() || rets.len() != callee.returns.len() {
            return Err(bad(&format!("does not match the parameters of `{target}`")));
        }
        let site = |op: &Operand| match op {
            Operand::Symbol(s) => match self.places.get(s) {
                Some(super::Place::CallSite(c)) => Ok(c.clone()),
                _ => Err(bad(&format!(
                    "passes `{s}`, which is not a .param variable of the caller"
                ))),
            },
            _ => Err(bad("passes something that is not a .param variable")),
        };
        let _ = write!(
            out,
            "{{ uint8_t wvp_a[{}] __attribute__((aligned(16)));",
            callee.param_bytes.max(1)
        );
        for (a, slot) in args.iter().zip(&callee.params) {
            let _ = write!(
                out,
                " memcpy(wvp_a + {}, {}, {});",
                slot.offset,
                site(a)?,
                slot.size
            );
        }
        let _ = write!(
            out,
            " uint8_t wvp_r[{}] __attribute__((aligned(16)));",
            callee.ret_bytes.max(1)
        );
        let _ = write!(
            out,
            " int wvp_c = wvp_fn_{}(wvp_launch_, wvp_cta_, wvp_t, wvp_a, wvp_r); if (wvp_c) return wvp_c;",
            callee.index
        );
        for (r, slot) in rets.iter().zip(&callee.returns) {
            let _ = write!(
                out,
                " memcpy({}, wvp_r + {}, {});",
                site(r)?,
                slot.offset,
                slot.size
            );
        }
        out.push_str(" }");
        let _ = c_name;
        Ok(())
    }
}
