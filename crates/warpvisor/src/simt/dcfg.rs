//! The dynamic control-flow graph (threadfuser.md §III): each function's edges as the traced
//! jobs took them, with immediate post-dominators recomputed on it. Paths no job ran — an
//! error return, a failed check — then do not move a branch's reconvergence point to where
//! they would have joined. What a GPU compiler sees is the static graph; the dynamic one
//! shows how much of the divergence such paths cost.

use super::blocks::{BlockEnd, BlockTable};
use super::trace::Trace;
use super::SimtError;
use crate::analysis::post_dominators;

/// The block table of `trace` with every executed jump block's successors replaced by the
/// ones the jobs took (blocks no job ran keep theirs) and post-dominators recomputed.
pub fn observed(trace: &Trace) -> Result<BlockTable, SimtError> {
    let table = &trace.header.blocks;
    let n = table.ids.len();
    // Per global id: the successors seen (local indices), and whether it ran.
    let mut seen: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut ran = vec![false; n];
    let skip: Vec<usize> = (0..n as u32)
        .map(|id| {
            table
                .block(id)
                .map_or(0, |b| b.mem.iter().map(|m| m.words()).sum())
        })
        .collect();
    for (job, t) in trace.jobs.iter().enumerate() {
        let words = &t.words;
        let mut at = 0usize;
        let mut prev: Option<u32> = None;
        while at < words.len() {
            let id = words[at];
            let Some((f, b)) = table.locate(id) else {
                return Err(SimtError::Mismatch {
                    job,
                    why: format!("{id} is no block id"),
                });
            };
            ran[id as usize] = true;
            if let Some(p) = prev {
                if let (Some((pf, _)), Some(pb)) = (table.locate(p), table.block(p)) {
                    if pb.end == BlockEnd::Jump && pf == f {
                        let list = &mut seen[p as usize];
                        if !list.contains(&b) {
                            list.push(b);
                        }
                    }
                }
            }
            prev = Some(id);
            at += 1 + skip[id as usize];
        }
    }
    let mut out = table.clone();
    for fb in out.funcs.iter_mut().flatten() {
        for (k, block) in fb.blocks.iter_mut().enumerate() {
            let id = fb.first_id as usize + k;
            if ran[id] && block.end == BlockEnd::Jump && !seen[id].is_empty() {
                let mut succ = seen[id].clone();
                succ.sort_unstable();
                block.succ = succ;
            }
        }
        let graph: Vec<Vec<usize>> = fb
            .blocks
            .iter()
            .map(|b| b.succ.iter().map(|&s| s as usize).collect())
            .collect();
        fb.ipdom = post_dominators(&graph, fb.blocks.len())
            .into_iter()
            .map(|d| d as u32)
            .collect();
    }
    Ok(out)
}
