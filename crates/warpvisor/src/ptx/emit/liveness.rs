//! Which registers are live after each instruction of a kernel: a split point saves only
//! those (Ocelot keeps "values live across a barrier" per thread), so a barrier costs what
//! the thread carries across it, not every register the kernel declares.

use std::collections::HashMap;

use crate::ptx::ast::{Instruction, Operand, Statement};

/// Instructions that write no register.
const NO_DESTINATION: &[&str] = &[
    "st",
    "red",
    "bra",
    "brx",
    "ret",
    "exit",
    "bar",
    "barrier",
    "membar",
    "fence",
    "trap",
    "prefetch",
    "prefetchu",
    "nanosleep",
    "pmevent",
];

/// Registers an instruction writes and reads.
fn defs_uses(i: &Instruction, is_register: &dyn Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let mut defs = Vec::new();
    let mut uses = Vec::new();
    fn collect(op: &Operand, out: &mut Vec<String>, is_register: &dyn Fn(&str) -> bool) {
        match op {
            Operand::Reg(r) | Operand::NotReg(r) if is_register(r) => out.push(r.clone()),
            Operand::Pair(a, b) => {
                for r in [a, b] {
                    if is_register(r) {
                        out.push(r.clone());
                    }
                }
            }
            Operand::Address(Some(base), _) => collect(base, out, is_register),
            Operand::Vector(v) | Operand::List(v) => {
                for o in v {
                    collect(o, out, is_register);
                }
            }
            _ => {}
        }
    }
    let has_dest = !NO_DESTINATION.contains(&i.opcode.as_str());
    for (k, op) in i.operands.iter().enumerate() {
        if k == 0 && has_dest && !matches!(op, Operand::Address(..)) {
            collect(op, &mut defs, is_register);
        } else {
            collect(op, &mut uses, is_register);
        }
    }
    if let Some(g) = &i.guard {
        uses.push(g.reg.clone());
        // A guarded write may not happen: the old value stays live through it.
        uses.append(&mut defs.clone());
    }
    // Carry-in instructions read the previous value of nothing we track; setp's combining
    // predicate is already among the uses.
    (defs, uses)
}

/// Which registers are live after any statement of one body: block-level dataflow over
/// bitsets, then a backward walk inside the block for the statement asked about (only split
/// points ask, so a 50,000-line kernel costs one pass, not a set per statement).
pub struct Liveness {
    /// Register names by index, and the index of each name.
    names: Vec<String>,
    index: HashMap<String, u32>,
    /// Defs and uses of each statement, as register indices.
    du: Vec<(Vec<u32>, Vec<u32>)>,
    /// The block each statement is in, and each block's statements `start..end`.
    block_of: Vec<usize>,
    blocks: Vec<(usize, usize)>,
    /// Each block's successors (block indices; none for a block that ends the kernel).
    succ: Vec<Vec<usize>>,
    /// Live registers at each block's start and end.
    live_in: Vec<BitSet>,
    live_out: Vec<BitSet>,
}

/// A set of register indices.
#[derive(Clone, PartialEq, Eq)]
struct BitSet(Vec<u64>);

impl BitSet {
    fn new(n: usize) -> Self {
        BitSet(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, r: u32) {
        self.0[r as usize / 64] |= 1 << (r % 64);
    }
    fn remove(&mut self, r: u32) {
        self.0[r as usize / 64] &= !(1 << (r % 64));
    }
    /// `self |= other`.
    fn union(&mut self, other: &BitSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
    fn contains(&self, r: u32) -> bool {
        self.0[r as usize / 64] >> (r % 64) & 1 == 1
    }
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits >> b & 1 == 1)
                .map(move |b| (w * 64 + b) as u32)
        })
    }
}

impl Liveness {
    /// Analyses `body`; `is_register` says which operand names are registers.
    pub fn new(body: &[Statement], is_register: &dyn Fn(&str) -> bool) -> Self {
        let n = body.len();
        let labels: HashMap<&str, usize> = body
            .iter()
            .enumerate()
            .filter_map(|(k, s)| match s {
                Statement::Label(l) => Some((l.as_str(), k)),
                _ => None,
            })
            .collect();
        let tables: HashMap<&str, &Vec<String>> = body
            .iter()
            .filter_map(|s| match s {
                Statement::BranchTargets(name, t) => Some((name.as_str(), t)),
                _ => None,
            })
            .collect();
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut names = Vec::new();
        let mut id = |r: String| -> u32 {
            *index.entry(r).or_insert_with_key(|r| {
                names.push(r.clone());
                (names.len() - 1) as u32
            })
        };
        // Def/use per statement; jumps (other than falling through) and whether it falls through.
        let mut du = Vec::with_capacity(n);
        let mut jumps: Vec<(Vec<usize>, bool)> = Vec::with_capacity(n);
        for s in body {
            match s {
                Statement::Instr(i) => {
                    let (d, u) = defs_uses(i, is_register);
                    du.push((
                        d.into_iter().map(&mut id).collect(),
                        u.into_iter().map(&mut id).collect(),
                    ));
                    let target = |l: &str| labels.get(l).copied();
                    let to: Vec<usize> =
                        match (i.opcode.as_str(), i.operands.first(), i.operands.get(1)) {
                            ("bra", Some(Operand::Symbol(l)), _) => target(l).into_iter().collect(),
                            ("brx", _, Some(Operand::Symbol(t))) => tables
                                .get(t.as_str())
                                .map(|ls| ls.iter().filter_map(|l| target(l)).collect())
                                .unwrap_or_default(),
                            _ => Vec::new(),
                        };
                    let ends = matches!(i.opcode.as_str(), "bra" | "brx" | "ret" | "exit" | "trap");
                    jumps.push((to, !(ends && i.guard.is_none())));
                }
                _ => {
                    du.push((Vec::new(), Vec::new()));
                    jumps.push((Vec::new(), true));
                }
            }
        }
        // Basic blocks: a label starts one, a statement that may jump ends one.
        let mut blocks = Vec::new();
        let mut block_of = vec![0; n];
        let mut start = 0;
        for k in 0..n {
            if k > start && matches!(body[k], Statement::Label(_)) {
                blocks.push((start, k));
                start = k;
            }
            block_of[k] = blocks.len();
            let (to, falls) = &jumps[k];
            if !to.is_empty() || !falls {
                blocks.push((start, k + 1));
                start = k + 1;
            }
        }
        if start < n {
            blocks.push((start, n));
        }
        let regs = names.len();
        let succ: Vec<Vec<usize>> = blocks
            .iter()
            .map(|&(_, end)| {
                let (to, falls) = &jumps[end - 1];
                let mut s: Vec<usize> = to.iter().map(|&k| block_of[k]).collect();
                if *falls && end < n {
                    s.push(block_of[end]);
                }
                s
            })
            .collect();
        // gen: read before written in the block; kill: written.
        let (mut gen, mut kill) = (Vec::new(), Vec::new());
        for &(a, b) in &blocks {
            let (mut g, mut k) = (BitSet::new(regs), BitSet::new(regs));
            for (d, u) in du[a..b].iter().rev() {
                for &r in d {
                    g.remove(r);
                    k.insert(r);
                }
                for &r in u {
                    g.insert(r);
                }
            }
            gen.push(g);
            kill.push(k);
        }
        let mut live_in = gen.clone();
        let mut live_out = vec![BitSet::new(regs); blocks.len()];
        let mut changed = true;
        while changed {
            changed = false;
            for b in (0..blocks.len()).rev() {
                let mut out = BitSet::new(regs);
                for &s in &succ[b] {
                    out.union(&live_in[s]);
                }
                if out != live_out[b] {
                    let mut inn = out.clone();
                    for (w, k) in inn.0.iter_mut().zip(&kill[b].0) {
                        *w &= !k;
                    }
                    inn.union(&gen[b]);
                    live_in[b] = inn;
                    live_out[b] = out;
                    changed = true;
                }
            }
        }
        Liveness {
            names,
            index,
            du,
            block_of,
            blocks,
            succ,
            live_in,
            live_out,
        }
    }

    /// The basic blocks, as statement ranges `start..end`.
    pub fn blocks(&self) -> &[(usize, usize)] {
        &self.blocks
    }

    /// The successors of block `b` (none where the kernel ends).
    pub fn successors(&self, b: usize) -> &[usize] {
        &self.succ[b]
    }

    /// Whether register `r` is live where block `b` starts.
    pub fn live_into(&self, b: usize, r: &str) -> bool {
        self.index
            .get(r)
            .is_some_and(|&i| self.live_in[b].contains(i))
    }

    /// The registers a thread may write from statement `k` (included) until it reaches a
    /// statement for which `stops` holds (included) or the end: what a thread resuming after
    /// split point `k` may change before its next one.
    pub fn written_from(&self, k: usize, stops: &dyn Fn(usize) -> bool) -> Vec<&str> {
        let mut written = BitSet::new(self.names.len());
        let mut seen = vec![false; self.blocks.len()];
        // The first entry starts at the split point itself, which does not stop it.
        let mut work = vec![(self.block_of[k], k + 1)];
        for &r in &self.du[k].0 {
            written.insert(r);
        }
        while let Some((b, from)) = work.pop() {
            let end = self.blocks[b].1;
            let mut stopped = false;
            for m in from..end {
                for &r in &self.du[m].0 {
                    written.insert(r);
                }
                if stops(m) {
                    stopped = true;
                    break;
                }
            }
            if stopped {
                continue;
            }
            for &s in &self.succ[b] {
                if !seen[s] {
                    seen[s] = true;
                    work.push((s, self.blocks[s].0));
                }
            }
        }
        written
            .iter()
            .map(|r| self.names[r as usize].as_str())
            .collect()
    }

    /// The registers statement `k` writes and reads (a guarded write also reads its
    /// destination, as its old value may stay).
    pub fn defs_uses(&self, k: usize) -> (Vec<&str>, Vec<&str>) {
        let name = |r: &u32| self.names[*r as usize].as_str();
        let (d, u) = &self.du[k];
        (d.iter().map(name).collect(), u.iter().map(name).collect())
    }

    /// The registers live after statement `k`.
    pub fn live_after(&self, k: usize) -> Vec<&str> {
        let b = self.block_of[k];
        let mut live = self.live_out[b].clone();
        for (d, u) in self.du[k + 1..self.blocks[b].1].iter().rev() {
            for &r in d {
                live.remove(r);
            }
            for &r in u {
                live.insert(r);
            }
        }
        live.iter()
            .map(|r| self.names[r as usize].as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::parser::parse;

    #[test]
    fn only_values_used_after_a_barrier_are_live_across_it() {
        let m = parse(
            ".version 8.8\n.target sm_70\n.address_size 64\n.entry k()\n{\n\
             .reg .b32 %r<4>;\n\
             mov.u32 %r1, 1;\n mov.u32 %r2, 2;\n bar.sync 0;\n add.u32 %r3, %r1, %r1;\n\
             $L: add.u32 %r3, %r3, %r1;\n bra $L;\n}",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let body = m.functions[0].body.clone().unwrap_or_default();
        let live = Liveness::new(&body, &|_| true);
        // After bar.sync (statement 2): r1 only (r2 is dead, r3 is written before it is read).
        assert_eq!(live.live_after(2), vec!["r1"]);
        // In the loop, after its first add: r1 and r3 (the loop reads both again).
        let mut l = live.live_after(4);
        l.sort();
        assert_eq!(l, vec!["r1", "r3"]);
    }
}
