//! The C layout of a SIMT translation: the kernel's blocks cut into chunk functions.
//!
//! The emulation stops a thread at every block, so no C local lives from one block to the
//! next (registers are fields of the thread's slot), and every jump is "set `resume`, stop"
//! (`wvp_b{k}_{label}` names the block a label starts). That lets the blocks be split into
//! functions of bounded size, each with its own resume switch, called by the kernel's thread
//! loop through a table from resume id to chunk. One C function per kernel made GCC's time
//! grow with the square of its size even at `-O0` (its C parser and CFG cleanup: a 64 MB
//! partition of Blur-JPEG took 10 minutes, a 6 MB one 7 seconds).

use std::fmt::Write;

use super::{c_name, KernelEmitter};

/// About this much C per chunk function (a few hundred blocks).
const CHUNK_BYTES: usize = 256 * 1024;

impl KernelEmitter<'_> {
    /// The jump to the block `label` starts, for `bra` and `brx` in a SIMT translation.
    pub(super) fn simt_jump(&self, label: &str) -> String {
        format!(
            "wvp_th[wvp_t].resume = {}; goto wvp_next_thread;",
            block_constant(self.index, label)
        )
    }

    /// Writes the chunk functions of SIMT kernel `k` whose blocks are `body`, and returns the
    /// kernel's thread loop body that calls them (after the thread's `wait` check).
    pub(super) fn write_simt_chunks(&self, body: &str, code: &mut String) -> String {
        let k = self.index;
        let Some(plan) = &self.simt else {
            return String::new();
        };
        let plan = plan.borrow();
        // The blocks' labels as constants, in resume order.
        let mut labels = plan.label_ids();
        labels.sort_by_key(|&(l, r)| (r, l.to_string()));
        if !labels.is_empty() {
            let _ = writeln!(code, "enum {{");
            for (l, r) in &labels {
                let _ = writeln!(code, "    {} = {r},", block_constant(k, l));
            }
            let _ = writeln!(code, "}};");
        }

        // Cut where a block starts (its resume label), once a chunk holds CHUNK_BYTES.
        let mut cuts = vec![(0u32, 0usize)];
        for &(r, at) in &plan.block_starts {
            if at - cuts[cuts.len() - 1].1 >= CHUNK_BYTES {
                cuts.push((r, at));
            }
        }
        let resumes = self.splits as usize + 1;
        let mut chunk_of = Vec::with_capacity(resumes);
        for (c, &(first, at)) in cuts.iter().enumerate() {
            let (last, end) = cuts
                .get(c + 1)
                .copied()
                .unwrap_or((resumes as u32, body.len()));
            chunk_of.extend(std::iter::repeat_n(c, (last - first) as usize));
            let _ = writeln!(
                code,
                "static int wvp_blocks_{k}_{c}(const wvp_launch *wvp_launch_, wvp_cta *wvp_cta_, uint32_t wvp_t, uint32_t *wvp_tally) {{"
            );
            self.chunk_prologue(code);
            let _ = writeln!(code, "        switch (wvp_th[wvp_t].resume) {{");
            if c == 0 {
                let _ = writeln!(code, "        case 0: break;");
            }
            for r in first.max(1)..last {
                let _ = writeln!(code, "        case {r}: goto wvp_resume_{r};");
            }
            let _ = writeln!(code, "        default: return WVP_CTA_TRAP;\n        }}");
            code.push_str(&body[at..end]);
            if c + 1 < cuts.len() {
                // The slice ends with a block's stop: nothing falls through to the exit.
                code.push('\n');
            }
            let _ = writeln!(
                code,
                "    wvp_exit: __attribute__((unused));\n        \
                 wvp_th[wvp_t].wait = WVP_EXITED; wvp_gone++;\n    \
                 wvp_next_thread: __attribute__((unused));\n        \
                 wvp_tally[0] += wvp_arrived; wvp_tally[1] += wvp_gone;\n        \
                 return 0;\n}}"
            );
        }
        let _ = writeln!(
            code,
            "static int (*const wvp_chunks_{k}[{}])(const wvp_launch *, wvp_cta *, uint32_t, uint32_t *) = {{{}}};",
            cuts.len(),
            (0..cuts.len())
                .map(|c| format!("wvp_blocks_{k}_{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            code,
            "static const uint32_t wvp_chunk_of_{k}[{resumes}] = {{{}}};",
            chunk_of
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        format!(
            "        uint32_t wvp_tally[2] = {{0, 0}};\n        \
             if (wvp_th[wvp_t].resume >= {resumes}) return WVP_CTA_TRAP;\n        \
             int wvp_rc = wvp_chunks_{k}[wvp_chunk_of_{k}[wvp_th[wvp_t].resume]](wvp_launch_, wvp_cta_, wvp_t, wvp_tally);\n        \
             if (wvp_rc) return wvp_rc;\n        \
             wvp_arrived += wvp_tally[0]; wvp_gone += wvp_tally[1];\n        \
             if (wvp_cta_->fault) {{ wvp_cta_->fault_thread = wvp_t; return WVP_CTA_FAULT; }}\n"
        )
    }

    /// What a chunk's blocks refer to: the CTA's records, the thread's slot and local memory.
    fn chunk_prologue(&self, code: &mut String) {
        let k = self.index;
        let _ = writeln!(
            code,
            "    uint8_t *wvp_shared = wvp_cta_->shared;\n    \
             const int wvp_flat = wvp_launch_->block[1] == 1 && wvp_launch_->block[2] == 1;\n    \
             wvp_thread *const wvp_th = wvp_cta_->thread;\n    \
             wvp_regs_{k} *const wvp_spill = (wvp_regs_{k} *)wvp_cta_->spill;\n    \
             uint32_t wvp_arrived = 0, wvp_gone = 0;\n    \
             (void)wvp_shared; (void)wvp_flat;"
        );
        self.declarations(code);
        code.push_str(&self.thread_prologue());
    }
}

/// The C constant holding the resume id of the block `label` starts in kernel `k`.
fn block_constant(k: usize, label: &str) -> String {
    format!("wvp_b{k}_{}", c_name(label))
}
