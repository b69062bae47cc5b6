//! Call graph and yield analysis.
//!
//! A function *yields* (is compiled in continuation-passing style) when it can reach a
//! hypercall: it is an import, it is recursive (directly, mutually, or through a table), or it
//! calls — directly or through `call_indirect` — a function that yields. All others are
//! *fastcalls*: plain C functions.

use crate::frontend::{ConstExpr, Module};
use wasmparser::{FuncType, Operator};

/// Structural signature identities: two type indices with equal parameter and result lists
/// share an id, which is what `call_indirect` compares.
#[derive(Debug, Clone)]
pub struct Signatures {
    /// Canonical id for each type index.
    pub of_type: Vec<u32>,
    /// The distinct function types, by canonical id.
    pub distinct: Vec<FuncType>,
}

impl Signatures {
    /// Computes canonical ids for every type of `module`.
    pub fn new(module: &Module<'_>) -> Self {
        let mut distinct: Vec<FuncType> = Vec::new();
        let of_type = module
            .types
            .iter()
            .map(|t| match distinct.iter().position(|d| d == t) {
                Some(i) => i as u32,
                None => {
                    distinct.push(t.clone());
                    distinct.len() as u32 - 1
                }
            })
            .collect();
        Signatures { of_type, distinct }
    }

    /// Canonical signature of function `func`.
    pub fn of_func(&self, module: &Module<'_>, func: u32) -> u32 {
        self.of_type[module.funcs[func as usize].type_index as usize]
    }
}

/// The call graph with the yield classification.
#[derive(Debug, Clone)]
pub struct CallGraph {
    /// Callees of each function (direct and possible indirect targets), deduplicated.
    pub callees: Vec<Vec<u32>>,
    /// Functions whose reference can be taken (element segments, `ref.func`): the possible
    /// `call_indirect` targets.
    pub referenceable: Vec<bool>,
    /// Whether each function can yield.
    pub yields: Vec<bool>,
}

impl CallGraph {
    /// Builds the graph and classifies every function.
    pub fn new(module: &Module<'_>, sigs: &Signatures) -> Self {
        let n = module.funcs.len();
        let mut referenceable = vec![false; n];
        let mark = |r: &mut Vec<bool>, e: &ConstExpr| {
            if let ConstExpr::RefFunc(f) = e {
                if let Some(slot) = r.get_mut(*f as usize) {
                    *slot = true;
                }
            }
        };
        for seg in &module.elems {
            for item in &seg.items {
                mark(&mut referenceable, item);
            }
        }
        for g in &module.globals {
            if let Some(init) = &g.init {
                mark(&mut referenceable, init);
            }
        }
        for body in &module.bodies {
            for op in &body.ops {
                if let Operator::RefFunc { function_index } = op {
                    mark(&mut referenceable, &ConstExpr::RefFunc(*function_index));
                }
            }
        }
        // Possible targets of an indirect call, per canonical signature.
        let mut by_sig: Vec<Vec<u32>> = vec![Vec::new(); sigs.distinct.len()];
        for f in 0..n as u32 {
            if referenceable[f as usize] {
                by_sig[sigs.of_func(module, f) as usize].push(f);
            }
        }
        let mut callees: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, body) in module.bodies.iter().enumerate() {
            let f = module.imported_funcs + i;
            let out = &mut callees[f];
            for op in &body.ops {
                match op {
                    Operator::Call { function_index } => out.push(*function_index),
                    Operator::CallIndirect { type_index, .. } => {
                        out.extend(&by_sig[sigs.of_type[*type_index as usize] as usize])
                    }
                    _ => {}
                }
            }
            out.sort_unstable();
            out.dedup();
        }
        let mut yields = vec![false; n];
        for y in yields.iter_mut().take(module.imported_funcs) {
            *y = true;
        }
        for scc in strongly_connected(&callees) {
            let cyclic = scc.len() > 1 || callees[scc[0] as usize].contains(&scc[0]);
            if cyclic {
                for f in scc {
                    yields[f as usize] = true;
                }
            }
        }
        // Propagate to callers until nothing changes.
        let mut changed = true;
        while changed {
            changed = false;
            for f in 0..n {
                if !yields[f] && callees[f].iter().any(|&c| yields[c as usize]) {
                    yields[f] = true;
                    changed = true;
                }
            }
        }
        CallGraph {
            callees,
            referenceable,
            yields,
        }
    }

    /// Possible targets of a `call_indirect` with canonical signature `sig`.
    pub fn indirect_targets(&self, module: &Module<'_>, sigs: &Signatures, sig: u32) -> Vec<u32> {
        (0..module.funcs.len() as u32)
            .filter(|&f| self.referenceable[f as usize] && sigs.of_func(module, f) == sig)
            .collect()
    }
}

/// Tarjan's algorithm, iterative so that deep call graphs cannot overflow the host stack.
fn strongly_connected(edges: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let n = edges.len();
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut sccs = Vec::new();
    let mut next = 0u32;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // (node, next edge to look at)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == UNSEEN {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v as u32);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*edge) {
                *edge += 1;
                let w = w as usize;
                if index[w] == UNSEEN {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    scc.push(w);
                    if w as usize == v {
                        break;
                    }
                }
                sccs.push(scc);
            }
        }
    }
    sccs
}

#[cfg(test)]
mod tests {
    use super::strongly_connected;

    #[test]
    fn finds_cycles() {
        // 0 -> 1 -> 2 -> 0, 3 -> 3, 4 -> 0
        let edges = vec![vec![1], vec![2], vec![0], vec![3], vec![0]];
        let mut sccs: Vec<Vec<u32>> = strongly_connected(&edges)
            .into_iter()
            .map(|mut s| {
                s.sort();
                s
            })
            .collect();
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3], vec![4]]);
    }
}
