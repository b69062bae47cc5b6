//! Splitting a big program into several kernels (partitions), because device compilers take
//! time that grows faster than linearly with kernel size.
//!
//! A partition holds a set of *dispatchable* functions — continuations, and the fastcalls the
//! trampoline can start — plus every fastcall they reach (fastcalls are duplicated where
//! several partitions need them). A slow call to a function of another partition stops the
//! VM (`WV_ELSEWHERE`) until the VMM launches that partition: a kernel launch per crossing.
//! So the planner keeps callers with their callees, hot call sites first, in the manner of
//! Pettis–Hansen procedure placement:
//!
//! 1. each slow-call edge (a continuation calling a dispatchable function, directly or
//!    through `call_indirect`) weighs `8^d`, `d` the loop nesting of its call site, times how
//!    often its caller is estimated to run (the same weights summed down the call graph from
//!    the functions nothing calls, [`call_frequencies`]);
//! 2. starting from one cluster per function, edges are taken heaviest first, and the
//!    clusters at their ends merge when the merged code — continuations plus the fastcalls
//!    they inline, each counted once — fits the operator budget;
//! 3. clusters are packed, in order of their first function, into partitions up to the budget;
//! 4. each partition then copies in its hot callees (edges of weight at least 8), nearest and
//!    heaviest first, up to as much code again as the larger of the budget and its own size.
//!    This is what keeps a giant function (one that alone exceeds the budget, as link-time
//!    optimisation makes them) from crossing kernels at every call in its loops. (Half as much
//!    again, the earlier limit, could not hold Blur-JPEG's 10,142-operator decoder function
//!    together with the 8,397-operator callee it called ~3,000 times per request: 6,883
//!    launches for one request, 1,295 with this limit — at the price of more code to compile,
//!    `docs/opencl.md`.)

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use wasmparser::Operator;

use super::{devirt, CodegenError, ModuleContext};
use crate::analysis::CallGraph;
use crate::frontend::{ExportKind, Module};
use crate::limits;

/// Deepest loop nesting that still raises an edge's weight.
const MAX_DEPTH: u32 = 6;
/// Weight of an edge run about once per loop iteration: lighter ones are not worth copying a
/// callee for.
const IN_LOOP: u64 = 8;
/// Most caller–target pairs that `call_indirect`s spread their weight over.
const MAX_INDIRECT_EDGES: usize = 1 << 20;

/// One kernel of a partitioned program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Partition {
    /// The functions this partition is the home of: a VM waiting to run one is launched here.
    pub home: Vec<u32>,
    /// Every function its trampoline starts: its home functions and copies of hot callees.
    pub starts: Vec<u32>,
}

/// Functions the trampoline may be asked to start: continuations, and fastcalls that are
/// exported, referenced by tables, or the start function.
pub(crate) fn dispatchable(module: &Module<'_>, graph: &CallGraph) -> Vec<bool> {
    let mut d = graph.yields.clone();
    for (f, r) in graph.referenceable.iter().enumerate() {
        d[f] |= *r;
    }
    for e in &module.exports {
        if let ExportKind::Func(f) = e.kind {
            d[f as usize] = true;
        }
    }
    if let Some(s) = module.start {
        d[s as usize] = true;
    }
    for x in d.iter_mut().take(module.imported_funcs) {
        *x = false; // imports are hypercalls in every partition
    }
    d
}

/// The fastcalls reachable from `roots` without going through the trampoline.
pub(crate) fn fastcall_closure(
    graph: &CallGraph,
    roots: impl IntoIterator<Item = u32>,
) -> BTreeSet<u32> {
    let mut seen = BTreeSet::new();
    // Each signature's targets are looked at once.
    let mut sigs_seen = BTreeSet::new();
    let mut work: Vec<u32> = roots.into_iter().collect();
    while let Some(f) = work.pop() {
        let indirect = graph.indirect[f as usize]
            .iter()
            .filter(|&&s| sigs_seen.insert(s))
            .flat_map(|&s| graph.indirect_targets(s));
        for &c in graph.callees[f as usize].iter().chain(indirect) {
            if !graph.yields[c as usize] && seen.insert(c) {
                work.push(c);
            }
        }
    }
    seen
}

/// What is left of [`limits::MAX_PLAN_WORK`]: the planner gathers and compares the fastcalls
/// of many functions, and a module can make each of them reach most of the others.
struct Work(usize);

impl Work {
    /// Counts `n` functions looked at.
    fn spend(&mut self, n: usize) -> Result<(), CodegenError> {
        self.0 = self.0.checked_sub(n).ok_or_else(|| {
            CodegenError::Limit(format!(
                "planning the kernel partitions means looking at functions more than {} \
                 times, the translator limit MAX_PLAN_WORK (many callers that each reach most \
                 of the module); use one kernel (--partition-ops 0)",
                limits::MAX_PLAN_WORK
            ))
        })?;
        Ok(())
    }

    /// `roots` and their fastcall closure.
    fn code(
        &mut self,
        graph: &CallGraph,
        roots: impl IntoIterator<Item = u32> + Clone,
    ) -> Result<BTreeSet<u32>, CodegenError> {
        let mut c = fastcall_closure(graph, roots.clone());
        c.extend(roots);
        self.spend(c.len())?;
        Ok(c)
    }

    /// What `code` adds to `kernel`: its functions that `kernel` does not hold yet.
    fn extra(
        &mut self,
        module: &Module<'_>,
        kernel: &BTreeSet<u32>,
        code: &BTreeSet<u32>,
    ) -> Result<usize, CodegenError> {
        self.spend(code.len())?;
        Ok(code
            .iter()
            .filter(|g| !kernel.contains(g))
            .map(|&g| cost(module, g))
            .sum())
    }
}

fn cost(module: &Module<'_>, f: u32) -> usize {
    module.body(f).map_or(0, |b| b.ops.len())
}

/// Groups the dispatchable functions into partitions of at most `budget` operators (each
/// counted with the fastcalls it needs; a function bigger than the budget gets a partition of
/// its own); `budget == 0` keeps one partition.
pub(crate) fn plan(
    ctx: &ModuleContext<'_, '_>,
    dispatchable: &[bool],
    budget: u32,
) -> Result<Vec<Partition>, CodegenError> {
    plan_within(ctx, dispatchable, budget, limits::MAX_PLAN_WORK)
}

/// [`plan`], looking at functions at most `work` times.
fn plan_within(
    ctx: &ModuleContext<'_, '_>,
    dispatchable: &[bool],
    budget: u32,
    work: usize,
) -> Result<Vec<Partition>, CodegenError> {
    let module = ctx.module;
    let starts: Vec<u32> = (0..module.funcs.len() as u32)
        .filter(|&f| dispatchable[f as usize])
        .collect();
    if budget == 0 {
        return Ok(vec![Partition {
            home: starts.clone(),
            starts,
        }]);
    }
    let mut work = Work(work);
    let budget = budget as usize;
    let mut slot_of = vec![usize::MAX; module.funcs.len()];
    for (i, &f) in starts.iter().enumerate() {
        slot_of[f as usize] = i;
    }
    let edges = slow_call_edges(ctx, &slot_of);
    let clusters = cluster(ctx, &starts, &edges, budget, &mut work)?;
    // Callers' hot callees, by function: (callee, weight). Profiled, an edge is hot when it
    // ran at least once per job.
    let hot_weight = ctx.profile.map_or(IN_LOOP, |p| p.jobs);
    let mut hot: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    for &(a, b, w) in &edges {
        if w >= hot_weight {
            hot.entry(starts[a]).or_default().push((starts[b], w));
        }
    }
    pack(module, clusters, budget, &mut work)?
        .into_iter()
        .map(|mut home| {
            home.sort_unstable();
            let starts = with_hot_callees(ctx, &home, &hot, budget, &mut work)?;
            Ok(Partition { home, starts })
        })
        .collect()
}

/// A cluster: its members, and the code they bring.
type Cluster = (Vec<u32>, BTreeSet<u32>);

/// Code a set of functions brings into a kernel: every function counted once.
fn size(module: &Module<'_>, code: &BTreeSet<u32>) -> usize {
    code.iter().map(|&g| cost(module, g)).sum()
}

/// Clusters of `starts` (members, and the code they bring), merged along `edges` heaviest
/// first while the merged code fits `budget`.
fn cluster(
    ctx: &ModuleContext<'_, '_>,
    starts: &[u32],
    edges: &[(usize, usize, u64)],
    budget: usize,
    work: &mut Work,
) -> Result<Vec<Cluster>, CodegenError> {
    let module = ctx.module;
    // Union-find over starts; each root holds its cluster's members and code.
    let mut parent: Vec<usize> = (0..starts.len()).collect();
    let mut members: Vec<Vec<u32>> = starts.iter().map(|&f| vec![f]).collect();
    let mut bodies: Vec<BTreeSet<u32>> = starts
        .iter()
        .map(|&f| work.code(ctx.graph, [f]))
        .collect::<Result<_, _>>()?;
    let mut sizes: Vec<usize> = bodies.iter().map(|b| size(module, b)).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for &(a, b, _) in edges {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        // When even the sum is over twice the budget, the union is over it too.
        if ra == rb || sizes[ra] + sizes[rb] > budget * 2 {
            continue;
        }
        let more = work.extra(module, &bodies[ra], &bodies[rb])?;
        if sizes[ra] + more > budget {
            continue;
        }
        // The smaller set moves into the larger.
        if bodies[ra].len() < bodies[rb].len() {
            bodies.swap(ra, rb);
        }
        let moved = std::mem::take(&mut bodies[rb]);
        bodies[ra].extend(moved);
        let moved = std::mem::take(&mut members[rb]);
        members[ra].extend(moved);
        sizes[ra] += more;
        parent[rb] = ra;
    }
    Ok((0..starts.len())
        .filter(|&i| parent[i] == i)
        .map(|i| {
            let mut m = std::mem::take(&mut members[i]);
            m.sort_unstable();
            (m, std::mem::take(&mut bodies[i]))
        })
        .collect())
}

/// Packs clusters, in order of their first function, into groups of at most `budget` code.
fn pack(
    module: &Module<'_>,
    mut clusters: Vec<Cluster>,
    budget: usize,
    work: &mut Work,
) -> Result<Vec<Vec<u32>>, CodegenError> {
    clusters.sort_by_key(|(m, _)| m[0]);
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let (mut members, mut code, mut code_size) = (Vec::new(), BTreeSet::new(), 0usize);
    for (m, b) in clusters {
        let more = work.extra(module, &code, &b)?;
        if !members.is_empty() && code_size + more > budget {
            groups.push(std::mem::take(&mut members));
            code.clear();
            code_size = size(module, &b);
        } else {
            code_size += more;
        }
        members.extend(m);
        code.extend(b);
    }
    if !members.is_empty() || groups.is_empty() {
        groups.push(members);
    }
    Ok(groups)
}

/// `home` plus copies of its hot callees — direct callees first, heaviest call first, then the
/// hot callees of those copies, and so on — while the code stays within twice the larger of
/// `budget` and `home`'s own code. (Static weights
/// compare call sites within one caller well and across call chains badly, so distance in the
/// call chain decides first; a profile's counts compare everywhere, so then only they do.)
fn with_hot_callees(
    ctx: &ModuleContext<'_, '_>,
    home: &[u32],
    hot: &BTreeMap<u32, Vec<(u32, u64)>>,
    budget: usize,
    work: &mut Work,
) -> Result<Vec<u32>, CodegenError> {
    let module = ctx.module;
    let mut starts: BTreeSet<u32> = home.iter().copied().collect();
    let mut code = work.code(ctx.graph, home.iter().copied())?;
    let mut total = size(module, &code);
    let limit = budget.max(total) * 2;
    use std::cmp::Reverse;
    // (distance in the call chain, weight, callee): nearest first, then heaviest.
    let mut queue: BinaryHeap<(Reverse<u32>, u64, Reverse<u32>)> = home
        .iter()
        .flat_map(|f| hot.get(f).into_iter().flatten())
        .map(|&(callee, w)| (Reverse(1), w, Reverse(callee)))
        .collect();
    // Profiled weights are counts: every copy is one step away.
    let step = u32::from(ctx.profile.is_none());
    while let Some((Reverse(distance), _, Reverse(callee))) = queue.pop() {
        if starts.contains(&callee) {
            continue;
        }
        let brings = work.code(ctx.graph, [callee])?;
        let more = work.extra(module, &code, &brings)?;
        if total + more > limit {
            continue;
        }
        total += more;
        code.extend(brings);
        starts.insert(callee);
        for &(next, w) in hot.get(&callee).into_iter().flatten() {
            queue.push((Reverse(distance + step), w, Reverse(next)));
        }
    }
    Ok(starts.into_iter().collect())
}

/// The slow-call edges between dispatchable functions as `(caller slot, callee slot, weight)`,
/// heaviest first (ties in a fixed order, so that plans are reproducible). With a call profile
/// an edge weighs the calls it made in the profiling run (a `call_indirect`, on the targets it
/// reached); without, the estimate below.
///
/// A `call_indirect` weighs on every possible target of its signature. The call sites of one
/// caller are summed per signature before they are spread over the targets, and when callers
/// times targets passes [`MAX_INDIRECT_EDGES`], the signatures with the most targets are left
/// out (a call with that many possible targets favours none of them).
fn slow_call_edges(ctx: &ModuleContext<'_, '_>, slot_of: &[usize]) -> Vec<(usize, usize, u64)> {
    let module = ctx.module;
    let mut weights: BTreeMap<(usize, usize), u64> = Default::default();
    // (caller slot, signature) → summed weight of its call_indirect sites.
    let mut indirect: BTreeMap<(usize, u32), u64> = Default::default();
    for (i, body) in module.bodies.iter().enumerate() {
        let f = module.imported_funcs + i;
        // Only continuations make slow calls: fastcalls call their callees as plain C.
        if !ctx.graph.yields[f] || slot_of[f] == usize::MAX {
            continue;
        }
        let mut loops: Vec<bool> = Vec::new();
        let mut depth = 0u32;
        let from = slot_of[f];
        let mut add = |to: usize, w: u64| {
            if to != usize::MAX && to != from {
                // Profiled counts come from a file: they may add up past u64.
                let e = weights.entry((from, to)).or_default();
                *e = e.saturating_add(w);
            }
        };
        for (i, op) in body.ops.iter().enumerate() {
            if !matches!(op, Operator::Call { .. } | Operator::CallIndirect { .. }) {
                match op {
                    Operator::Block { .. } | Operator::If { .. } => loops.push(false),
                    Operator::Loop { .. } => {
                        loops.push(true);
                        depth += 1;
                    }
                    Operator::End => depth -= u32::from(loops.pop() == Some(true)),
                    _ => {}
                }
                continue;
            }
            // What the call site did in the profiling run (`None`: there is no profile).
            let site = ctx.profile.map(|p| p.at(f as u32, i));
            let w = match site {
                Some(site) => site.map_or(0, |s| s.calls),
                None => 8u64.pow(depth.min(MAX_DEPTH)),
            };
            // A call_indirect of a slot that never changes is a call (`devirt.rs`).
            let constant = match op {
                Operator::CallIndirect { table_index, .. } => devirt::constant_index(&body.ops, i)
                    .and_then(|k| ctx.constant_slots.target(*table_index, k)),
                _ => None,
            };
            match op {
                Operator::Call { function_index } if ctx.graph.yields[*function_index as usize] => {
                    add(slot_of[*function_index as usize], w);
                }
                Operator::CallIndirect { .. } if constant.is_some() => {
                    if let Some(t) = constant.filter(|&t| ctx.graph.yields[t as usize]) {
                        add(slot_of[t as usize], w);
                    }
                }
                Operator::CallIndirect { type_index, .. } => match site {
                    Some(site) => {
                        for t in site.iter().flat_map(|s| &s.targets) {
                            if let Some(&to) = slot_of.get(t.func as usize) {
                                add(to, t.calls);
                            }
                        }
                    }
                    None => {
                        let sig = ctx.sigs.of_type[*type_index as usize];
                        let e = indirect.entry((from, sig)).or_default();
                        *e = e.saturating_add(w);
                    }
                },
                _ => {}
            }
        }
    }
    // The largest fan-out that keeps the spread within MAX_INDIRECT_EDGES.
    let mut fan_outs: Vec<usize> = indirect
        .keys()
        .map(|&(_, sig)| ctx.graph.indirect_targets(sig).len())
        .collect();
    fan_outs.sort_unstable();
    let mut spread = 0usize;
    let mut max_fan_out = usize::MAX;
    for n in fan_outs {
        spread += n;
        if spread > MAX_INDIRECT_EDGES {
            max_fan_out = n.saturating_sub(1);
            break;
        }
    }
    for ((from, sig), w) in indirect {
        let targets = ctx.graph.indirect_targets(sig);
        if targets.len() > max_fan_out {
            continue;
        }
        for &t in targets {
            let to = slot_of[t as usize];
            if to != usize::MAX && to != from {
                *weights.entry((from, to)).or_default() += w;
            }
        }
    }
    // Profiled weights are counts already.
    let freq = match ctx.profile {
        Some(_) => vec![1; slot_of.len()],
        None => call_frequencies(slot_of.len(), &weights),
    };
    let mut edges: Vec<(usize, usize, u64)> = weights
        .into_iter()
        .map(|((a, b), w)| (a, b, freq[a].saturating_mul(w)))
        .collect();
    edges.sort_by(|x, y| y.2.cmp(&x.2).then((x.0, x.1).cmp(&(y.0, y.1))));
    edges
}

/// Most times a function is estimated to run per run of the program: a ceiling that keeps
/// products of loop weights along deep call chains ordered without overflowing.
const MAX_FREQUENCY: u64 = 1 << 40;

/// How often each slot's function runs, estimated from the call sites' loop weights: a
/// function nothing calls runs once, and every other the sum over its callers of the caller's
/// frequency times the call's weight (calls back up a cycle, recursion, are left out). A
/// callee called once per run of a function that itself runs in a loop is as hot as a call in
/// that loop, and weighing edges by this copies such callees to their callers (Bill-PDF, one
/// request: 2,692 launches before, 1,816 after).
fn call_frequencies(slots: usize, weights: &BTreeMap<(usize, usize), u64>) -> Vec<u64> {
    let mut out: Vec<Vec<(usize, u64)>> = vec![Vec::new(); slots];
    let mut called = vec![false; slots];
    for (&(a, b), &w) in weights {
        out[a].push((b, w));
        called[b] = true;
    }
    // Reverse postorder of a depth-first walk from the functions nothing calls (then from any
    // left, which only cycles reach): every edge that is not a back edge goes forward in it.
    let mut order = Vec::with_capacity(slots);
    let mut seen = vec![false; slots];
    let roots = (0..slots).filter(|&s| !called[s]).chain(0..slots);
    let mut is_root = vec![false; slots];
    for root in roots {
        if seen[root] {
            continue;
        }
        is_root[root] = true;
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some((f, next)) = stack.last_mut() {
            let f = *f;
            if let Some(&(g, _)) = out[f].get(*next) {
                *next += 1;
                if !seen[g] {
                    seen[g] = true;
                    stack.push((g, 0));
                }
            } else {
                order.push(f);
                stack.pop();
            }
        }
    }
    order.reverse();
    let mut rank = vec![0usize; slots];
    for (i, &f) in order.iter().enumerate() {
        rank[f] = i;
    }
    let mut freq: Vec<u64> = is_root.iter().map(|&r| u64::from(r)).collect();
    for &f in &order {
        for &(g, w) in &out[f] {
            if rank[g] > rank[f] {
                freq[g] = freq[g]
                    .saturating_add(freq[f].saturating_mul(w))
                    .min(MAX_FREQUENCY);
            }
        }
    }
    freq
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Signatures;
    use crate::profile::{CallProfile, ProfileIndex, SiteCount, TargetCount};

    /// The plan of `wat` with the budget `budget` picks from its functions' sizes.
    fn plan_wat(wat: &str, budget: impl Fn(&[usize]) -> u32) -> Vec<Partition> {
        plan_wat_within(wat, budget, limits::MAX_PLAN_WORK, None).unwrap()
    }

    fn plan_wat_within(
        wat: &str,
        budget: impl Fn(&[usize]) -> u32,
        work: usize,
        profile: Option<&CallProfile>,
    ) -> Result<Vec<Partition>, CodegenError> {
        let binary = wat::parse_str(wat).unwrap();
        let module = crate::frontend::load(&binary).unwrap();
        let sigs = Signatures::new(&module);
        let graph = CallGraph::new(&module, &sigs);
        let index = profile.map(|p| ProfileIndex::new(&module, p));
        let ctx = ModuleContext {
            module: &module,
            sigs: &sigs,
            graph: &graph,
            blocks: None,
            counted_sites: None,
            profile: index.as_ref(),
            constant_slots: &Default::default(),
        };
        let sizes: Vec<usize> = (0..module.funcs.len() as u32)
            .map(|f| cost(&module, f))
            .collect();
        plan_within(&ctx, &dispatchable(&module, &graph), budget(&sizes), work)
    }

    /// Ten continuations that each reach the same 20 fastcalls: gathering their code takes
    /// 10 × 21 looks, so a limit of 100 stops the planner with an error naming the limit.
    #[test]
    fn planning_stops_at_its_work_limit() {
        let leaves: String = (0..20)
            .map(|i| format!("(func $l{i} (result i32) (i32.const {i}))"))
            .collect();
        let hub_body: String = (0..20).map(|i| format!("(drop (call $l{i}))")).collect();
        let callers: String = (0..10)
            .map(|i| format!("(func $c{i} (export \"c{i}\") (call $hub) (call $c{i}))"))
            .collect();
        let wat = format!("(module {leaves} (func $hub {hub_body}) {callers})");
        let e = plan_wat_within(&wat, |_| 1_000, 100, None).expect_err("over the limit");
        assert!(e.to_string().contains("MAX_PLAN_WORK"), "{e}");
        assert!(plan_wat_within(&wat, |_| 1_000, 10_000, None).is_ok());
    }

    /// Three recursive (hence continuation) functions of 40-odd operators each: `$hot` calls
    /// `$leaf` in a loop, `$cold` calls it once. With room for two per partition, the loop's
    /// caller and callee share one.
    #[test]
    fn hot_callers_share_a_partition_with_their_callees() {
        let body = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(10);
        let wat = format!(
            r#"(module
              (func $cold (export "cold") (param i32) (result i32)
                {body}
                (if (result i32) (local.get 0) (then (call $cold (i32.const 0))) (else (call $leaf (i32.const 1)))))
              (func $leaf (param i32) (result i32)
                {body}
                (if (result i32) (local.get 0) (then (call $leaf (i32.const 0))) (else (i32.const 7))))
              (func $hot (export "hot") (param i32) (result i32) (local i32)
                {body}
                (loop $l (local.set 1 (call $leaf (local.get 0)))
                  (br_if $l (i32.eqz (local.get 1))))
                (if (result i32) (local.get 0) (then (call $hot (i32.const 0))) (else (local.get 1)))))"#
        );
        let parts = plan_wat(&wat, |size| {
            let budget = size[1] + size[2] + 1;
            assert!(budget < size[0] + size[1] + size[2]);
            budget as u32
        });
        let homes: Vec<Vec<u32>> = parts.into_iter().map(|p| p.home).collect();
        assert_eq!(homes, vec![vec![0], vec![1, 2]]);
        // Index order alone would have paired $cold with $leaf.
        let one = plan_wat(&wat, |_| 0);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].home, vec![0, 1, 2]);
    }

    /// `$main` calls `$mid` in a loop, `$mid` calls `$leaf` once per run: that call is as hot
    /// as the loop, so `$main` and `$mid`'s partition takes a copy of `$leaf`, which does not
    /// fit in it as a home. (With weights by loop nesting alone, the call weighed 1 and was not
    /// copied.)
    #[test]
    fn callees_of_functions_called_in_loops_are_hot() {
        let body = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(10);
        let big = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(30);
        let wat = format!(
            r#"(module
              (func $main (export "main") (param i32) (result i32) (local i32)
                (loop $l (local.set 1 (call $mid (local.get 0)))
                  (br_if $l (i32.eqz (local.get 1))))
                (if (result i32) (local.get 0) (then (call $main (i32.const 0))) (else (local.get 1))))
              (func $mid (param i32) (result i32)
                {big}
                (drop (call $leaf (local.get 0)))
                (if (result i32) (local.get 0) (then (call $mid (i32.const 0))) (else (i32.const 1))))
              (func $leaf (param i32) (result i32)
                {body}
                (if (result i32) (local.get 0) (then (call $leaf (i32.const 0))) (else (i32.const 7)))))"#
        );
        let parts = plan_wat(&wat, |size| {
            let budget = size[0] + size[1] + 1;
            assert!(budget < size[0] + size[1] + size[2]);
            budget as u32
        });
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts[0].home, vec![0, 1]);
        assert_eq!(parts[0].starts, vec![0, 1, 2], "the leaf is copied in");
        assert_eq!(parts[1].home, vec![2]);
    }

    /// Estimated run counts: a root runs once, a call in a loop eight times per run of its
    /// caller, a function reached two ways sums both, and a call back up a cycle adds nothing.
    #[test]
    fn call_frequencies_multiply_down_the_call_graph() {
        // 0 → 1 (in a loop, 8), 1 → 2 (once), 0 → 2 (once), 2 → 1 (back up: a cycle).
        let weights: BTreeMap<(usize, usize), u64> =
            [((0, 1), 8), ((1, 2), 1), ((0, 2), 1), ((2, 1), 64)]
                .into_iter()
                .collect();
        assert_eq!(call_frequencies(3, &weights), vec![1, 8, 9]);
        // Only a cycle: its first function counts as the root; products saturate.
        let cycle: BTreeMap<(usize, usize), u64> =
            [((0, 1), u64::MAX), ((1, 0), 2)].into_iter().collect();
        assert_eq!(call_frequencies(2, &cycle), vec![1, MAX_FREQUENCY]);
    }

    /// A giant whose loop calls a callee almost its own size: the copy fits within twice the
    /// giant's code, as it did not within one and a half times.
    #[test]
    fn giants_take_copies_of_large_hot_callees() {
        let giant = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(60);
        let large = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(45);
        let wat = format!(
            r#"(module
              (func $giant (export "giant") (param i32) (result i32) (local i32)
                {giant}
                (loop $l (local.set 1 (call $large (local.get 0)))
                  (br_if $l (i32.eqz (local.get 1))))
                (if (result i32) (local.get 0) (then (call $giant (i32.const 0))) (else (local.get 1))))
              (func $large (export "large") (param i32) (result i32)
                {large}
                (if (result i32) (local.get 0) (then (call $large (i32.const 0))) (else (i32.const 7)))))"#
        );
        let parts = plan_wat(&wat, |size| {
            assert!(size[1] * 2 > size[0] && size[1] < size[0]);
            size[1] as u32
        });
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts[0].starts, vec![0, 1], "the large callee is copied in");
        assert_eq!(parts[1].home, vec![1]);
    }

    /// A function bigger than the budget keeps its partition, and takes in a copy of the
    /// callee it calls in a loop; the callee's home stays elsewhere.
    #[test]
    fn giants_take_copies_of_their_hot_callees() {
        let body = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(10);
        let giant = "(drop (i32.add (i32.const 1) (i32.const 2)))".repeat(60);
        let wat = format!(
            r#"(module
              (func $giant (export "giant") (param i32) (result i32) (local i32)
                {giant}
                (loop $l (local.set 1 (call $leaf (local.get 0)))
                  (br_if $l (i32.eqz (local.get 1))))
                (if (result i32) (local.get 0) (then (call $giant (i32.const 0))) (else (local.get 1))))
              (func $leaf (param i32) (result i32)
                {body}
                (if (result i32) (local.get 0) (then (call $leaf (i32.const 0))) (else (i32.const 7))))
              (func $other (export "other") (param i32) (result i32)
                {body}
                (if (result i32) (local.get 0) (then (call $other (i32.const 0))) (else (call $leaf (i32.const 1))))))"#
        );
        let parts = plan_wat(&wat, |size| {
            let budget = size[1] + size[2] + 1;
            assert!(size[0] > budget);
            budget as u32
        });
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts[0].home, vec![0]);
        assert_eq!(
            parts[0].starts,
            vec![0, 1],
            "the giant's loop callee is copied in"
        );
        assert_eq!(parts[1].home, vec![1, 2]);
        assert_eq!(parts[1].starts, vec![1, 2]);
    }

    /// Three recursive continuations of one type that `main` reaches through one
    /// `call_indirect` in a loop, and room to copy only one of them into `main`'s partition:
    /// without a profile the estimate spreads the call evenly and the first is copied; with a
    /// profile that says the third took every call, the third is.
    #[test]
    fn a_profile_decides_which_callee_is_copied_next_to_its_caller() {
        let target = |name: &str| {
            format!(
                "(func ${name} (type $t) (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 0))
                   (else (i32.add (call ${name} (i32.sub (local.get 0) (i32.const 1)))
                                  (i32.add (i32.const 1) (i32.const 2))))))"
            )
        };
        let wat = format!(
            r#"(module (type $t (func (param i32) (result i32)))
              (table 3 funcref) (elem (i32.const 0) $a $b $c)
              {} {} {}
              (func $main (export "main") (param $i i32) (result i32) (local $acc i32)
                (loop $l
                  (local.set $acc (call_indirect (type $t) (local.get $acc) (local.get $i)))
                  (br_if $l (local.tee $i (i32.sub (local.get $i) (i32.const 1)))))
                (local.get $acc)))"#,
            target("a"),
            target("b"),
            target("c")
        );
        // Budget: a target alone; main's partition may then hold main and one copy.
        let budget = |sizes: &[usize]| sizes[0] as u32 + 1;
        let main_starts = |plan: &[Partition]| {
            plan.iter()
                .find(|p| p.home.contains(&3))
                .map(|p| p.starts.clone())
                .unwrap()
        };
        let binary = wat::parse_str(&wat).unwrap();
        let starts = main_starts(&plan_wat(&wat, budget));
        assert!(starts.contains(&0) && !starts.contains(&2), "{starts:?}");
        let profile = CallProfile {
            format: crate::profile::FORMAT.into(),
            module: crate::profile::module_hash(&binary),
            jobs: 1,
            sites: vec![SiteCount {
                func: 3,
                site: 0,
                calls: 1000,
                targets: vec![TargetCount {
                    func: 2,
                    calls: 1000,
                }],
                other: 0,
            }],
        };
        let plan = plan_wat_within(&wat, budget, limits::MAX_PLAN_WORK, Some(&profile)).unwrap();
        let starts = main_starts(&plan);
        assert!(starts.contains(&2) && !starts.contains(&0), "{starts:?}");
        // Counts from a file may add up past u64: they saturate.
        let mut huge = profile;
        huge.sites[0].calls = u64::MAX;
        huge.sites[0].targets = vec![
            TargetCount {
                func: 2,
                calls: u64::MAX
            };
            2
        ];
        plan_wat_within(&wat, budget, limits::MAX_PLAN_WORK, Some(&huge)).unwrap();
    }
}
