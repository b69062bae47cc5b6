//! Call graph and yield analysis.
//!
//! A function *yields* (is compiled in continuation-passing style) when it can reach a
//! hypercall: it is an import, it is recursive (directly, mutually, or through a table), or it
//! calls — directly or through `call_indirect` — a function that yields. All others are
//! *fastcalls*: plain C functions.

use std::collections::HashMap;

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
        let mut ids: HashMap<&FuncType, u32> = HashMap::new();
        let of_type = module
            .types
            .iter()
            .map(|t| {
                *ids.entry(t).or_insert_with(|| {
                    distinct.push(t.clone());
                    distinct.len() as u32 - 1
                })
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
///
/// Indirect calls go through one node per canonical signature — a function calls the
/// signatures it uses with `call_indirect`, a signature calls its possible targets — so the
/// graph stays as large as the module: a module whose every function calls through a table of
/// all of them has `2n` edges here, not `n²`.
#[derive(Debug, Clone)]
pub struct CallGraph {
    /// Direct callees of each function, deduplicated.
    pub callees: Vec<Vec<u32>>,
    /// Canonical signatures each function calls through `call_indirect`, deduplicated.
    pub indirect: Vec<Vec<u32>>,
    /// Functions whose reference can be taken (element segments, `ref.func`): the possible
    /// `call_indirect` targets.
    pub referenceable: Vec<bool>,
    /// Possible `call_indirect` targets by canonical signature: referenceable functions of
    /// that signature, in index order.
    pub targets_by_sig: Vec<Vec<u32>>,
    /// Whether each function can yield.
    pub yields: Vec<bool>,
    /// Whether each function lies on a call cycle (directly, mutually, or through a table):
    /// the functions whose depth is unbounded, so direct calls check the stack on entry.
    pub recursive: Vec<bool>,
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
        let mut targets_by_sig: Vec<Vec<u32>> = vec![Vec::new(); sigs.distinct.len()];
        for f in 0..n as u32 {
            if referenceable[f as usize] {
                targets_by_sig[sigs.of_func(module, f) as usize].push(f);
            }
        }
        let mut callees: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut indirect: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, body) in module.bodies.iter().enumerate() {
            let f = module.imported_funcs + i;
            for op in &body.ops {
                match op {
                    Operator::Call { function_index } => callees[f].push(*function_index),
                    Operator::CallIndirect { type_index, .. } => {
                        indirect[f].push(sigs.of_type[*type_index as usize])
                    }
                    _ => {}
                }
            }
            for list in [&mut callees[f], &mut indirect[f]] {
                list.sort_unstable();
                list.dedup();
            }
        }
        let edges = call_edges(&callees, &indirect, &targets_by_sig);
        let mut yields = vec![false; edges.len()];
        for y in yields.iter_mut().take(module.imported_funcs) {
            *y = true;
        }
        let mut recursive = vec![false; n];
        for scc in strongly_connected(&edges) {
            let cyclic = scc.len() > 1 || edges[scc[0] as usize].contains(&scc[0]);
            if cyclic {
                for f in scc {
                    yields[f as usize] = true;
                    if let Some(r) = recursive.get_mut(f as usize) {
                        *r = true;
                    }
                }
            }
        }
        reach_callers(&edges, &mut yields);
        yields.truncate(n);
        CallGraph {
            callees,
            indirect,
            referenceable,
            targets_by_sig,
            yields,
            recursive,
        }
    }

    /// The graph for direct calls: imports are served while the kernel waits and recursion is
    /// native, so only the imports in `parking` (which may park their VM until the host wakes
    /// it) yield, with every function that can reach one of them; all others are plain C
    /// functions.
    pub fn with_direct_calls(mut self, parking: &[u32]) -> Self {
        self.yields = self.reaching(parking.iter().copied());
        self
    }

    /// The graph for synchronous imports on a device without a call stack (direct calls on
    /// OpenCL): imports are served while the kernel waits, so only the imports in `parking`,
    /// the functions on call cycles (which the device cannot recurse into) and every function
    /// that can reach one of them yield.
    pub fn with_synchronous_imports(mut self, parking: &[u32]) -> Self {
        let recursive = (0..self.recursive.len() as u32).filter(|&f| self.recursive[f as usize]);
        self.yields = self.reaching(parking.iter().copied().chain(recursive));
        self
    }

    /// Which functions are among `seeds` or can reach one of them (calls through a table
    /// included).
    fn reaching(&self, seeds: impl Iterator<Item = u32>) -> Vec<bool> {
        let n = self.yields.len();
        let edges = call_edges(&self.callees, &self.indirect, &self.targets_by_sig);
        let mut marked = vec![false; edges.len()];
        for f in seeds.filter(|&f| (f as usize) < n) {
            marked[f as usize] = true;
        }
        reach_callers(&edges, &mut marked);
        marked.truncate(n);
        marked
    }

    /// Possible targets of a `call_indirect` with canonical signature `sig`.
    pub fn indirect_targets(&self, sig: u32) -> &[u32] {
        self.targets_by_sig
            .get(sig as usize)
            .map_or(&[], Vec::as_slice)
    }
}

/// The call graph's edges. Nodes: the functions, then one per canonical signature; a function
/// calls its callees and the signatures it uses with `call_indirect`, a signature its targets.
fn call_edges(
    callees: &[Vec<u32>],
    indirect: &[Vec<u32>],
    targets_by_sig: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = callees.len() as u32;
    callees
        .iter()
        .zip(indirect)
        .map(|(direct, sigs)| {
            let mut out = direct.clone();
            out.extend(sigs.iter().map(|&s| n + s));
            out
        })
        .chain(targets_by_sig.iter().cloned())
        .collect()
}

/// Marks every node that can reach a marked one: walks the reversed edges once.
fn reach_callers(edges: &[Vec<u32>], marked: &mut [bool]) {
    let mut callers: Vec<Vec<u32>> = vec![Vec::new(); edges.len()];
    for (from, out) in edges.iter().enumerate() {
        for &to in out {
            callers[to as usize].push(from as u32);
        }
    }
    let mut work: Vec<u32> = (0..edges.len() as u32)
        .filter(|&v| marked[v as usize])
        .collect();
    while let Some(v) = work.pop() {
        for &c in &callers[v as usize] {
            if !marked[c as usize] {
                marked[c as usize] = true;
                work.push(c);
            }
        }
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
    use super::{strongly_connected, CallGraph, Signatures};

    fn graph(wat: &str) -> CallGraph {
        let bytes = wat::parse_str(wat).unwrap();
        let m = crate::frontend::load(&bytes).unwrap();
        CallGraph::new(&m, &Signatures::new(&m))
    }

    #[test]
    fn recursion_through_a_table_yields() {
        // $a calls through the table, which holds $b, which calls $a; $c has another type.
        let g = graph(
            r#"(module (type $t (func)) (table 2 funcref) (elem (i32.const 0) $b $c)
              (func $a (call_indirect (type $t) (i32.const 0)))
              (func $b (call $a))
              (func $c (param i32))
              (func $d (call $c (i32.const 1))))"#,
        );
        assert_eq!(g.yields, vec![true, true, false, false]);
        assert_eq!(g.indirect[0], vec![0]);
        assert_eq!(g.indirect_targets(0), &[1]);
    }

    /// Imports 0 (parks) and 1 (does not); $a calls 0 through the table ($b), $c calls
    /// import 1 and recurses, $d calls $a, $e calls $c.
    const PARKING: &str = r#"(module (import "m" "park" (func)) (import "m" "plain" (func))
        (type $t (func)) (table 1 funcref) (elem (i32.const 0) $b)
        (func $a (call_indirect (type $t) (i32.const 0)))
        (func $b (call 0))
        (func $c (call 1) (call $c))
        (func $d (call $a))
        (func $e (call $c)))"#;

    #[test]
    fn with_direct_calls_only_what_reaches_a_parking_import_yields() {
        let g = graph(PARKING);
        let direct = g.clone().with_direct_calls(&[0]);
        assert_eq!(
            direct.yields,
            vec![true, false, true, true, false, true, false]
        );
        assert!(direct.recursive[4], "recursion is still known");
        // Nothing parks: nothing yields.
        assert!(g.with_direct_calls(&[]).yields.iter().all(|y| !y));
    }

    #[test]
    fn with_synchronous_imports_recursion_and_parking_imports_yield() {
        let g = graph(PARKING);
        let sync = g.clone().with_synchronous_imports(&[0]);
        // The plain import is served in the kernel; $c still yields (it recurses), and so
        // does $e, which calls it; $a, $b and $d reach the parking import.
        assert_eq!(sync.yields, vec![true, false, true, true, true, true, true]);
        let none = g.with_synchronous_imports(&[]);
        assert_eq!(
            none.yields,
            vec![false, false, false, false, true, false, true]
        );
    }

    #[test]
    fn a_long_chain_to_an_import_yields_throughout() {
        // Function i calls i + 1; the last calls the import.
        let n = 3_000;
        let funcs: String = (1..=n)
            .map(|i| format!("(func (call {}))", if i == n { 0 } else { i + 1 }))
            .collect();
        let g = graph(&format!(r#"(module (import "m" "g" (func)) {funcs})"#));
        assert!(g.yields.iter().all(|&y| y));
    }

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
