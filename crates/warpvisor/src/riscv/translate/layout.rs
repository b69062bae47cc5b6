//! Where a guest function's blocks sit in the WebAssembly function's structure: an order of
//! the blocks and the loops over it.
//!
//! [`plan`] finds the natural loops of the function's control flow (back edges to a block that
//! dominates their source) and orders the blocks so that every loop's blocks are contiguous
//! (as LLVM's WebAssembly back end sorts blocks): GCC places loop latches and rarely taken
//! blocks out of line, far from their loop, and in address order they would not nest. Each
//! contiguous loop becomes a WebAssembly `loop` whose start is its header. A region (and the
//! function itself, the root) is a sequence of items: blocks of its own and the regions
//! directly inside it. A branch to the first block of an enclosing region is a `br` to that
//! loop; a branch to a later item of an enclosing region is a `br` out of that item's
//! `block`; anything else (into the middle of a loop from outside it, an irreducible edge)
//! goes through the dispatch tables, which every region has at its start, so that any block
//! can be reached from the function's entry.

use std::collections::BTreeSet;

/// The blocks in layout order and the loop regions over that order (in positions).
#[derive(Debug)]
pub struct Layout {
    /// Block indices (address order) in layout order.
    pub order: Vec<usize>,
    /// The regions, in positions of `order`.
    pub root: Region,
}

/// Orders the blocks of a function whose block `b` may continue at the blocks `succs[b]`
/// (block 0 is the entry), and finds its loops.
pub fn plan(succs: &[Vec<usize>]) -> Layout {
    let n = succs.len();
    if n == 0 {
        return Layout {
            order: Vec::new(),
            root: Region::build(0, &[]),
        };
    }
    let graph = Graph::new(succs);
    let idom = graph.dominators();
    let dominates = |h: usize, mut u: usize| loop {
        if u == h {
            return true;
        }
        if u == n || idom[u] == u {
            return false;
        }
        u = idom[u];
    };
    // Natural loops: a back edge u → h (h dominates u) makes h and everything that reaches u
    // without passing h one loop; loops with one header are one loop.
    let mut loops: Vec<(usize, Vec<bool>)> = Vec::new();
    for (u, out) in succs.iter().enumerate() {
        for &h in out {
            if !dominates(h, u) {
                continue;
            }
            let at = match loops.iter().position(|(x, _)| *x == h) {
                Some(i) => i,
                None => {
                    let mut body = vec![false; n];
                    body[h] = true;
                    loops.push((h, body));
                    loops.len() - 1
                }
            };
            let body = &mut loops[at].1;
            let mut work = vec![u];
            while let Some(x) = work.pop() {
                if !body[x] {
                    body[x] = true;
                    work.extend(graph.preds[x].iter().copied().filter(|&p| p < n));
                }
            }
        }
    }
    let order = graph.order(&loops, &dominates);

    let mut pos = vec![0; n];
    for (p, &b) in order.iter().enumerate() {
        pos[b] = p;
    }
    // Loops whose blocks came out contiguous, starting at their header, become regions.
    let mut spans = Vec::new();
    for (h, body) in &loops {
        let size = body.iter().filter(|&&x| x).count();
        let (first, last) = (pos[*h], pos[*h] + size - 1);
        if (0..n).all(|b| !body[b] || (first..=last).contains(&pos[b])) {
            spans.push((last, first));
        }
    }
    Layout {
        root: Region::build(n, &spans),
        order,
    }
}

/// A function's blocks as a graph with a virtual root (index `n`) before block 0 and before
/// every block that block 0 does not reach (those are entered only through dispatch).
struct Graph<'a> {
    succs: &'a [Vec<usize>],
    root_succs: Vec<usize>,
    preds: Vec<Vec<usize>>,
    /// The blocks (and the root last) in reverse post-order.
    rpo: Vec<usize>,
}

impl<'a> Graph<'a> {
    fn new(succs: &'a [Vec<usize>]) -> Self {
        let n = succs.len();
        let mut seen = vec![false; n + 1];
        let mut post = Vec::with_capacity(n + 1);
        let mut root_succs = Vec::new();
        for start in 0..n {
            if seen[start] {
                continue;
            }
            root_succs.push(start);
            // Iterative depth-first search: (block, next successor to visit).
            let mut stack = vec![(start, 0usize)];
            seen[start] = true;
            while let Some((b, i)) = stack.pop() {
                match succs[b].get(i) {
                    Some(&s) => {
                        stack.push((b, i + 1));
                        if !seen[s] {
                            seen[s] = true;
                            stack.push((s, 0));
                        }
                    }
                    None => post.push(b),
                }
            }
        }
        post.push(n);
        post.reverse();
        let mut preds = vec![Vec::new(); n];
        for (b, ss) in succs.iter().enumerate() {
            for &s in ss {
                preds[s].push(b);
            }
        }
        for &s in &root_succs {
            preds[s].push(n);
        }
        Graph {
            succs,
            root_succs,
            preds,
            rpo: post,
        }
    }

    fn successors(&self, b: usize) -> &[usize] {
        if b == self.succs.len() {
            &self.root_succs
        } else {
            &self.succs[b]
        }
    }

    /// Immediate dominators (Cooper, Harvey and Kennedy's iteration); the root's is itself.
    fn dominators(&self) -> Vec<usize> {
        let n = self.succs.len();
        let mut number = vec![0; n + 1];
        for (i, &b) in self.rpo.iter().enumerate() {
            number[b] = i;
        }
        const UNSET: usize = usize::MAX;
        let mut idom = vec![UNSET; n + 1];
        idom[n] = n;
        let mut changed = true;
        while changed {
            changed = false;
            for &b in &self.rpo[1..] {
                let mut new = UNSET;
                for &p in &self.preds[b] {
                    if idom[p] == UNSET {
                        continue;
                    }
                    new = if new == UNSET {
                        p
                    } else {
                        let (mut x, mut y) = (p, new);
                        while x != y {
                            while number[x] > number[y] {
                                x = idom[x];
                            }
                            while number[y] > number[x] {
                                y = idom[y];
                            }
                        }
                        x
                    };
                }
                if new != UNSET && idom[b] != new {
                    idom[b] = new;
                    changed = true;
                }
            }
        }
        idom
    }

    /// A topological order of the forward edges in which every loop's blocks are placed
    /// together: a block outside the innermost loop being placed waits until that loop is
    /// done. Among the blocks ready, the fall-through successor of the last one placed comes
    /// first, then the lowest address. Irreducible control flow (a loop entered other than at
    /// its header) breaks a loop up; its edges then go through dispatch.
    fn order(
        &self,
        loops: &[(usize, Vec<bool>)],
        dominates: &dyn Fn(usize, usize) -> bool,
    ) -> Vec<usize> {
        let n = self.succs.len();
        let forward = |p: usize, s: usize| p == n || !dominates(s, p);
        let mut waiting = vec![0usize; n];
        for b in 0..=n {
            for &s in self.successors(b) {
                if forward(b, s) {
                    waiting[s] += 1;
                }
            }
        }
        let mut placed = vec![false; n];
        let mut order = Vec::with_capacity(n);
        let mut ready: BTreeSet<usize> = BTreeSet::new();
        for &s in &self.root_succs {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.insert(s);
            }
        }
        // Active loops, innermost last: (index into loops, blocks left, blocks set aside).
        let mut active: Vec<(usize, usize, Vec<usize>)> = Vec::new();
        while order.len() < n {
            let allowed = |b: usize, active: &[(usize, usize, Vec<usize>)]| {
                active.last().is_none_or(|(l, _, _)| loops[*l].1[b])
            };
            let preferred = order
                .last()
                .map(|&last: &usize| last + 1)
                .filter(|b| ready.contains(b) && allowed(*b, &active));
            let pick = preferred.or_else(|| {
                let mut pick = None;
                for b in ready.iter().copied().collect::<Vec<_>>() {
                    if allowed(b, &active) {
                        pick = Some(b);
                        break;
                    }
                    ready.remove(&b);
                    if let Some(top) = active.last_mut() {
                        top.2.push(b);
                    }
                }
                pick
            });
            let b = match pick {
                Some(b) => b,
                None => {
                    // Irreducible flow (a cycle entered at two places): place a block of the
                    // innermost loop that a placed block reaches, so the loop stays whole;
                    // the cycle's other entry goes through dispatch.
                    let in_scope = |b: usize| active.last().is_none_or(|(l, _, _)| loops[*l].1[b]);
                    let reached = |b: usize| self.preds[b].iter().any(|&p| p == n || placed[p]);
                    if let Some(b) = (0..n).find(|&b| !placed[b] && in_scope(b) && reached(b)) {
                        b
                    } else if let Some((_, _, aside)) = active.pop() {
                        // The innermost loop cannot be finished in one piece: set it loose.
                        ready.extend(aside);
                        continue;
                    } else {
                        match (0..n).find(|&b| !placed[b]) {
                            Some(b) => b,
                            None => break,
                        }
                    }
                }
            };
            ready.remove(&b);
            placed[b] = true;
            order.push(b);
            if let Some(l) = loops.iter().position(|(h, _)| *h == b) {
                let size = loops[l].1.iter().filter(|&&x| x).count();
                active.push((l, size, Vec::new()));
            }
            for (l, left, _) in active.iter_mut() {
                if loops[*l].1[b] {
                    *left = left.saturating_sub(1);
                }
            }
            while active.last().is_some_and(|(_, left, _)| *left == 0) {
                if let Some((_, _, aside)) = active.pop() {
                    ready.extend(aside);
                }
            }
            for &s in self.successors(b) {
                if forward(b, s) && !placed[s] {
                    waiting[s] = waiting[s].saturating_sub(1);
                    if waiting[s] == 0 {
                        ready.insert(s);
                    }
                }
            }
        }
        order
    }
}

/// A loop region: the blocks `first..=last` (indices into the function's blocks), with the
/// regions directly inside it. The root spans the whole function.
#[derive(Debug, PartialEq, Eq)]
pub struct Region {
    /// Its first block: the loop's start.
    pub first: usize,
    /// Its last block.
    pub last: usize,
    /// The regions directly inside it, in order.
    pub children: Vec<Region>,
}

/// One item of a region: a block of its own or a region inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A block (its index).
    Block(usize),
    /// The region among the children with this index.
    Child(usize),
}

impl Region {
    /// The regions over `blocks` positions made by backward branches from position `from` to
    /// position `to` (`to <= from`), under the root: each spans `to..=from`, merged with the
    /// others until they nest.
    pub fn build(blocks: usize, back_edges: &[(usize, usize)]) -> Region {
        let mut spans: Vec<(usize, usize)> =
            back_edges.iter().map(|&(from, to)| (to, from)).collect();
        // Merge crossing spans (and spans with one start) until the family nests.
        loop {
            spans.sort_unstable();
            spans.dedup();
            let mut merged = false;
            'pairs: for i in 0..spans.len() {
                for j in i + 1..spans.len() {
                    let (a, b) = (spans[i], spans[j]);
                    let crossing = b.0 <= a.1 && a.1 < b.1;
                    if crossing || a.0 == b.0 {
                        spans[i] = (a.0, a.1.max(b.1));
                        spans.remove(j);
                        merged = true;
                        break 'pairs;
                    }
                }
            }
            if !merged {
                break;
            }
        }
        // Outermost first: by start, then the longer one.
        spans.sort_unstable_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
        let mut root = Region {
            first: 0,
            last: blocks.saturating_sub(1),
            children: Vec::new(),
        };
        for (first, last) in spans {
            root.insert(Region {
                first,
                last,
                children: Vec::new(),
            });
        }
        root
    }

    /// Places `r` (which nests inside `self`, and comes after every region placed so far in
    /// start order) under the innermost region holding it.
    fn insert(&mut self, r: Region) {
        match self.children.last_mut() {
            Some(c) if c.first <= r.first && r.last <= c.last => c.insert(r),
            _ => self.children.push(r),
        }
    }

    /// Its items in order.
    pub fn items(&self) -> Vec<Item> {
        let mut items = Vec::new();
        let mut k = self.first;
        let mut child = 0;
        while k <= self.last {
            match self.children.get(child) {
                Some(c) if c.first == k => {
                    items.push(Item::Child(child));
                    k = c.last + 1;
                    child += 1;
                }
                _ => {
                    items.push(Item::Block(k));
                    k += 1;
                }
            }
        }
        items
    }

    /// The first block of `item`.
    pub fn first_block(&self, item: Item) -> usize {
        match item {
            Item::Block(k) => k,
            Item::Child(c) => self.children[c].first,
        }
    }

    /// The index among `items` of the item holding block `k` (which lies in this region).
    pub fn item_holding(&self, items: &[Item], k: usize) -> usize {
        items
            .iter()
            .rposition(|&it| self.first_block(it) <= k)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(r: &Region) -> Vec<(usize, usize)> {
        let mut out = vec![(r.first, r.last)];
        for c in &r.children {
            out.extend(spans(c));
        }
        out
    }

    #[test]
    fn nested_loops_nest_and_crossing_ones_merge() {
        // An inner loop 2..=3 inside an outer loop 1..=5, and a separate loop 7..=7.
        let r = Region::build(9, &[(3, 2), (5, 1), (7, 7)]);
        assert_eq!(spans(&r), vec![(0, 8), (1, 5), (2, 3), (7, 7)]);
        assert_eq!(
            r.items(),
            vec![
                Item::Block(0),
                Item::Child(0),
                Item::Block(6),
                Item::Child(1),
                Item::Block(8)
            ]
        );
        assert_eq!(
            r.children[0].items(),
            vec![
                Item::Block(1),
                Item::Child(0),
                Item::Block(4),
                Item::Block(5)
            ]
        );
        // 1..=3 and 2..=5 cross: one region 1..=5; two loops on block 4 become one.
        let r = Region::build(6, &[(3, 1), (5, 2), (4, 4), (4, 4)]);
        assert_eq!(spans(&r), vec![(0, 5), (1, 5), (4, 4)]);
        // Regions sharing their first block merge.
        let r = Region::build(4, &[(1, 0), (3, 0)]);
        assert_eq!(spans(&r), vec![(0, 3), (0, 3)]);
        assert_eq!(r.items(), vec![Item::Child(0)]);
    }

    /// The loops' spans in positions, outermost first.
    fn loop_spans(l: &Layout) -> Vec<(usize, usize)> {
        spans(&l.root)[1..].to_vec()
    }

    #[test]
    fn a_loop_entered_in_its_middle_starts_at_its_header() {
        // GCC's rotated loop: 0 jumps to 2; 1 falls into 2; 2 loops back to 1 or leaves to 3.
        // 2 dominates 1, so 2 is the header and comes before 1.
        let l = plan(&[vec![2], vec![2], vec![1, 3], vec![]]);
        assert_eq!(l.order, vec![0, 2, 1, 3]);
        assert_eq!(loop_spans(&l), vec![(1, 2)]);
    }

    #[test]
    fn an_out_of_line_latch_joins_its_loop() {
        // 1 branches to the latch 3 (placed after the exit 2 by the compiler), 3 back to 1.
        let l = plan(&[vec![1], vec![2, 3], vec![], vec![1]]);
        assert_eq!(l.order, vec![0, 1, 3, 2]);
        assert_eq!(loop_spans(&l), vec![(1, 2)]);
    }

    #[test]
    fn irreducible_flow_is_placed_and_keeps_the_loop_around_it_whole() {
        // 1 and 2 enter each other from 0: no loop, every block placed once.
        let l = plan(&[vec![1, 2], vec![2, 3], vec![1, 3], vec![]]);
        let mut sorted = l.order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
        assert!(loop_spans(&l).is_empty());
        // A natural loop 1..=4 with the irreducible pair 2 ↔ 3 inside stays one region.
        let l = plan(&[
            vec![1],
            vec![2, 3],
            vec![3, 4],
            vec![2, 4],
            vec![1, 5],
            vec![],
        ]);
        assert_eq!(l.order[0], 0);
        assert_eq!(l.order[5], 5);
        assert_eq!(loop_spans(&l), vec![(1, 4)]);
    }

    #[test]
    fn blocks_no_branch_reaches_are_placed_too() {
        // Block 2 is entered only through dispatch (a return point after a call that never
        // returned normally, say): it still gets a place, and its own loop.
        let l = plan(&[vec![], vec![1], vec![2]]);
        let mut sorted = l.order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2]);
        assert_eq!(loop_spans(&l).len(), 2);
    }

    #[test]
    fn the_item_holding_a_block() {
        let r = Region::build(9, &[(3, 2), (5, 1), (7, 7)]);
        let items = r.items();
        assert_eq!(r.item_holding(&items, 0), 0);
        assert_eq!(r.item_holding(&items, 4), 1);
        assert_eq!(r.item_holding(&items, 6), 2);
        assert_eq!(r.item_holding(&items, 7), 3);
        assert_eq!(r.item_holding(&items, 8), 4);
    }
}
