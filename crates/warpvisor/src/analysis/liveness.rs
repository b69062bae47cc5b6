//! Liveness of locals, so that a continuation saves only the locals that are read again after
//! it resumes (the paper's "liveness-minimized" frames, §3.3.3).

use wasmparser::Operator;

/// Live locals after each operator of one function body.
#[derive(Debug, Clone)]
pub struct Liveness {
    words: usize,
    live_out: Vec<u64>,
}

impl Liveness {
    /// Computes liveness for a body of `ops` with `num_locals` locals (parameters included).
    pub fn new(ops: &[Operator<'_>], num_locals: usize) -> Self {
        let words = num_locals.div_ceil(64).max(1);
        let n = ops.len();
        let succs = successors(ops);
        let mut live_in = vec![0u64; n * words];
        let mut live_out = vec![0u64; n * words];
        let mut changed = true;
        let mut scratch = vec![0u64; words];
        while changed {
            changed = false;
            for i in (0..n).rev() {
                scratch.iter_mut().for_each(|w| *w = 0);
                for &s in &succs[i] {
                    if s < n {
                        for (w, x) in scratch.iter_mut().zip(&live_in[s * words..(s + 1) * words]) {
                            *w |= x;
                        }
                    }
                }
                live_out[i * words..(i + 1) * words].copy_from_slice(&scratch);
                match &ops[i] {
                    Operator::LocalGet { local_index } => {
                        let l = *local_index as usize;
                        scratch[l / 64] |= 1 << (l % 64);
                    }
                    Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                        let l = *local_index as usize;
                        scratch[l / 64] &= !(1 << (l % 64));
                    }
                    _ => {}
                }
                let dst = &mut live_in[i * words..(i + 1) * words];
                if dst != scratch.as_slice() {
                    dst.copy_from_slice(&scratch);
                    changed = true;
                }
            }
        }
        Liveness { words, live_out }
    }

    /// Liveness of a body of `ops` with `num_locals` locals, or `None` when it would take more
    /// than [`crate::limits::MAX_LIVENESS_WORDS`] words (then every local counts as live).
    pub fn within_limit(ops: &[Operator<'_>], num_locals: usize) -> Option<Self> {
        let words = num_locals.div_ceil(64).max(1);
        (ops.len().saturating_mul(words) <= crate::limits::MAX_LIVENESS_WORDS)
            .then(|| Self::new(ops, num_locals))
    }

    /// The locals live after operator `op`, in increasing order.
    pub fn live_locals_after(&self, op: usize) -> impl Iterator<Item = u32> + '_ {
        let words = self
            .live_out
            .get(op * self.words..(op + 1) * self.words)
            .unwrap_or(&[]);
        words.iter().enumerate().flat_map(|(i, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    (i * 64) as u32 + b
                })
            })
        })
    }

    /// Whether local `local` is live after operator `op`.
    pub fn live_after(&self, op: usize, local: u32) -> bool {
        let l = local as usize;
        self.live_out
            .get(op * self.words + l / 64)
            .is_some_and(|w| w & (1 << (l % 64)) != 0)
    }
}

/// Control-flow successors of every operator (index `ops.len()` stands for the function exit).
fn successors(ops: &[Operator<'_>]) -> Vec<Vec<usize>> {
    let n = ops.len();
    // Matching `else` and `end` of every block-opening operator.
    let mut end_of = vec![n; n];
    let mut else_of = vec![None; n];
    let mut open: Vec<usize> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op {
            Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => open.push(i),
            Operator::Else => {
                if let Some(&b) = open.last() {
                    else_of[b] = Some(i);
                }
            }
            Operator::End => {
                if let Some(b) = open.pop() {
                    end_of[b] = i;
                }
            }
            _ => {}
        }
    }
    // Label stack: (opening op, is loop) — the function body is an implicit block.
    let mut labels: Vec<(Option<usize>, bool)> = vec![(None, false)];
    let target = |labels: &[(Option<usize>, bool)], depth: u32| -> usize {
        let idx = labels.len().saturating_sub(1 + depth as usize);
        match labels.get(idx) {
            Some((Some(b), true)) => *b + 1,
            Some((Some(b), false)) => end_of[*b],
            _ => n,
        }
    };
    let mut succ = Vec::with_capacity(n);
    let mut if_stack: Vec<usize> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let s = match op {
            Operator::Block { .. } => {
                labels.push((Some(i), false));
                vec![i + 1]
            }
            Operator::Loop { .. } => {
                labels.push((Some(i), true));
                vec![i + 1]
            }
            Operator::If { .. } => {
                labels.push((Some(i), false));
                if_stack.push(i);
                let alt = else_of[i].map_or(end_of[i], |e| e + 1);
                vec![i + 1, alt]
            }
            Operator::Else => {
                let b = if_stack.last().copied().unwrap_or(i);
                vec![end_of[b]]
            }
            Operator::End => {
                if let Some((Some(b), _)) = labels.pop() {
                    if matches!(ops[b], Operator::If { .. }) {
                        if_stack.pop();
                    }
                }
                vec![i + 1]
            }
            Operator::Br { relative_depth } => vec![target(&labels, *relative_depth)],
            Operator::BrIf { relative_depth } => vec![i + 1, target(&labels, *relative_depth)],
            Operator::BrTable { targets } => {
                let mut v: Vec<usize> = targets
                    .targets()
                    .filter_map(Result::ok)
                    .map(|d| target(&labels, d))
                    .collect();
                v.push(target(&labels, targets.default()));
                v
            }
            Operator::Return | Operator::Unreachable => vec![],
            _ => vec![i + 1],
        };
        succ.push(s);
    }
    succ
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(wat: &str) -> Vec<Operator<'static>> {
        let bytes: &'static [u8] = Box::leak(wat::parse_str(wat).unwrap().into_boxed_slice());
        let m = crate::frontend::load(bytes).unwrap();
        m.bodies[1].ops.clone()
    }

    #[test]
    fn local_dead_after_last_read_and_live_around_loop() {
        // local 0 read only before the call; local 1 read in the loop after it.
        let o = ops(r#"(module (func $g) (func (param i32 i32) (result i32)
            local.get 0 drop
            call $g
            (loop $l (local.get 1) (br_if $l))
            i32.const 0))"#);
        let call = o
            .iter()
            .position(|op| matches!(op, Operator::Call { .. }))
            .unwrap();
        let l = Liveness::new(&o, 2);
        assert!(!l.live_after(call, 0));
        assert!(l.live_after(call, 1));
        assert_eq!(l.live_locals_after(call).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn no_liveness_past_the_limit() {
        let o = ops("(module (func) (func (local i32) (local.set 0 (i32.const 1))))");
        assert!(Liveness::within_limit(&o, 64).is_some());
        let locals = crate::limits::MAX_LIVENESS_WORDS / o.len() * 64 + 64;
        assert!(Liveness::within_limit(&o, locals).is_none());
    }
}
