//! Immediate post-dominators: where the paths leaving a branch meet again. The reconvergence
//! point of SIMT hardware (a warp's lanes that diverge at a branch run together again at its
//! immediate post-dominator), used by the PTX SIMT emulation and by `warpvisor simt`.

/// Immediate post-dominators of nodes `0..n` of a graph with a virtual exit node `n`
/// (Cooper, Harvey and Kennedy's iterative algorithm on the reversed graph). Nodes that
/// cannot reach the exit get `n`.
pub fn post_dominators(successors: &[Vec<usize>], n: usize) -> Vec<usize> {
    // Reverse graph: the exit's "successors" are the nodes that reach it directly.
    let mut preds_rev: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (a, succ) in successors.iter().enumerate() {
        for &b in succ {
            preds_rev[b].push(a);
        }
    }
    // Postorder of the reverse graph from the exit (iterative DFS).
    let mut order = vec![usize::MAX; n + 1];
    let mut postorder = Vec::with_capacity(n + 1);
    let mut seen = vec![false; n + 1];
    let mut stack = vec![(n, 0usize)];
    seen[n] = true;
    while let Some((v, i)) = stack.pop() {
        if let Some(&w) = preds_rev[v].get(i) {
            stack.push((v, i + 1));
            if !seen[w] {
                seen[w] = true;
                stack.push((w, 0));
            }
        } else {
            order[v] = postorder.len();
            postorder.push(v);
        }
    }
    let mut idom = vec![usize::MAX; n + 1];
    idom[n] = n;
    let mut changed = true;
    while changed {
        changed = false;
        for &v in postorder.iter().rev().skip(1) {
            // In the reverse graph a node's predecessors are its forward successors.
            let mut new = usize::MAX;
            for &s in &successors[v] {
                if idom[s] == usize::MAX {
                    continue;
                }
                new = if new == usize::MAX {
                    s
                } else {
                    intersect(&idom, &order, s, new)
                };
            }
            if new != usize::MAX && idom[v] != new {
                idom[v] = new;
                changed = true;
            }
        }
    }
    (0..n)
        .map(|v| if idom[v] == usize::MAX { n } else { idom[v] })
        .collect()
}

fn intersect(idom: &[usize], order: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while order[a] < order[b] {
            a = idom[a];
        }
        while order[b] < order[a] {
            b = idom[b];
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::post_dominators;

    #[test]
    fn a_diamond_reconverges_at_its_join() {
        // 0 -> {1, 2} -> 3 -> exit
        let g = vec![vec![1, 2], vec![3], vec![3], vec![4]];
        assert_eq!(post_dominators(&g, 4), vec![3, 3, 3, 4]);
    }

    #[test]
    fn a_loop_reconverges_after_its_exit() {
        // 0 -> 1 (header) -> {2 (body), 3 (after)}; 2 -> 1; 3 -> exit
        let g = vec![vec![1], vec![2, 3], vec![1], vec![4]];
        assert_eq!(post_dominators(&g, 4), vec![1, 3, 1, 4]);
    }

    #[test]
    fn a_return_inside_a_branch_reconverges_only_at_the_exit() {
        // 0 -> {1 (returns), 2}; 2 -> 3 -> exit
        let g = vec![vec![1, 2], vec![4], vec![3], vec![4]];
        assert_eq!(post_dominators(&g, 4), vec![4, 4, 3, 4]);
    }

    #[test]
    fn an_endless_loop_has_no_reconvergence_point() {
        // 0 -> {1, 2}; 1 -> 1 forever; 2 -> exit. Every path from 0 that ends passes 2 (the
        // lanes in the loop never arrive anywhere); the loop itself never reconverges.
        let g = vec![vec![1, 2], vec![1], vec![3]];
        assert_eq!(post_dominators(&g, 3), vec![2, 3, 3]);
    }
}
