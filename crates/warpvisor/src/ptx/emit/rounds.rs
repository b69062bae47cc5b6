//! Rounds after a barrier that every thread reached at the same split point: the common
//! case of `bar.sync` kernels (a reduction's loop, a tiled matrix product). For each such
//! barrier the kernel gets a copy of its body entered right after it, run by a loop over
//! the threads without the general loop's per-thread work: no wait-state check, no dispatch
//! on the resume point (the compiler sees straight-line code from the barrier on), uniform
//! registers reloaded from values that do not change during the loop, and registers that
//! the thread restored and did not change not saved again.
//!
//! Split points record their id in `wvp_stops`; when a barrier releases and exactly one
//! split point was reached since the last release (and no thread has exited), every thread
//! waits at that barrier and its copy runs the round.

use std::collections::HashSet;
use std::fmt::Write;

use super::{calls, liveness, thread_epilogue, KernelEmitter, Segment};
use crate::ptx::ast::{Instruction, Statement};
use crate::ptx::PtxError;

/// Kernels with more split points than this, or a longer body, run every round through the
/// general loop (the copies multiply the C the compiler has to build).
const MAX_SPLITS: usize = 8;
const MAX_STATEMENTS: usize = 2_000;

/// A barrier of the whole CTA (not `bar.warp.sync`, a warp operation).
fn is_cta_barrier(i: &Instruction) -> bool {
    matches!(i.opcode.as_str(), "bar" | "barrier") && !i.has("warp")
}

impl KernelEmitter<'_> {
    /// Decides, before the body is written, whether the kernel (with `splits` split points)
    /// gets barrier-round copies (its split points then record themselves in `wvp_stops`).
    pub(super) fn plan_barrier_rounds(&mut self, splits: usize) {
        let statements = self.function.body.as_deref().unwrap_or_default();
        let has_barrier = statements
            .iter()
            .any(|s| matches!(s, Statement::Instr(i) if is_cta_barrier(i)));
        self.track_stops = self.function.is_entry
            && self.simt.is_none()
            && has_barrier
            && splits <= MAX_SPLITS
            && statements.len() <= MAX_STATEMENTS;
    }

    /// The C that runs a round through the copy for its barrier where one applies (placed
    /// before the general thread loop; empty for kernels without copies).
    pub(super) fn barrier_rounds(&mut self, live: &liveness::Liveness) -> Result<String, PtxError> {
        if !self.track_stops {
            return Ok(String::new());
        }
        let f = self.function;
        let statements = f.body.as_deref().unwrap_or_default();
        let stops = |m: usize| matches!(&statements[m], Statement::Instr(i) if calls::splits(i));
        let (saved, split_at) = (self.saved.clone(), self.split_at.clone());
        let mut out = String::from(
            "    if (wvp_runnable == WVP_AT_BARRIER) {\n        \
             const uint32_t wvp_from = wvp_stops;\n        \
             wvp_stops = 0;\n        \
             if (wvp_cta_->exited == 0) switch (wvp_from) {\n",
        );
        for (n, &at) in split_at.iter().enumerate() {
            let Statement::Instr(i) = &statements[at] else {
                continue;
            };
            if !is_cta_barrier(i) {
                continue;
            }
            let r = n as u32 + 1;
            let written: HashSet<String> = live
                .written_from(at, &stops)
                .into_iter()
                .filter_map(|x| self.registers.get(x).map(|(c, _)| c.clone()))
                .collect();
            let clean = saved[n]
                .iter()
                .filter(|x| !written.contains(*x))
                .cloned()
                .collect();
            self.prefix = format!("C{r}_");
            self.segment = Some(Segment { resume: r, clean });
            let copy = self.translate_body(live);
            self.prefix.clear();
            self.segment = None;
            let copy = copy?;
            let _ = write!(
                out,
                "        case 1u << {r}: /* every thread resumes after `{}` (PTX line {}) */\n        \
                 for (uint32_t wvp_t = 0; wvp_t < wvp_n; wvp_t++) {{\n{}        \
                 {}goto C{r}_wvp_resume_{r};\n{copy}    {}    }}\n        \
                 goto wvp_round_end;\n",
                i.source(),
                i.line,
                self.thread_prologue(),
                self.restore(r),
                thread_epilogue(&format!("C{r}_")),
            );
        }
        out.push_str("        default: break;\n        }\n    }\n");
        // The copies saved what the body saved, split point by split point.
        debug_assert_eq!(self.saved, saved);
        self.saved = saved;
        self.split_at = split_at;
        Ok(out)
    }
}
