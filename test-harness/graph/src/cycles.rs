//! Graph algorithms on wait-for graphs keyed by COMM_WORLD rank: strongly connected
//! components (Tarjan) and elementary cycles (Johnson), both iterative so that a ring of
//! 100,000 ranks does not recurse 100,000 deep.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Strongly connected components (Tarjan, iterative), each sorted, in order of their
/// lowest rank.
pub fn strongly_connected<V>(adj: &BTreeMap<i32, BTreeMap<i32, V>>) -> Vec<Vec<i32>> {
    let nodes: Vec<i32> = adj.keys().copied().collect();
    let pos: HashMap<i32, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| adj[n].keys().filter_map(|t| pos.get(t).copied()).collect())
        .collect();
    let n = nodes.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(top) = call.last_mut() {
            let v = top.0;
            if top.1 < succ[v].len() {
                let w = succ[v][top.1];
                top.1 += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(nodes[w]);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out.sort();
    out
}

/// Elementary cycles of `adj` over `nodes` (Johnson's algorithm, iterative), each
/// starting at its lowest rank; at most `cap` (the flag says more exist). Each round
/// searches only the strongly connected component of the least vertex left, so the work is
/// linear in the graph per cycle found.
pub fn elementary_cycles(
    nodes: &[i32],
    adj: &BTreeMap<i32, Vec<i32>>,
    cap: usize,
) -> (Vec<Vec<i32>>, bool) {
    let all: BTreeSet<i32> = nodes.iter().copied().collect();
    let mut found = Vec::new();
    let mut from = i32::MIN;
    loop {
        // The component with the least vertex, among vertices >= from.
        let sub: BTreeMap<i32, BTreeMap<i32, ()>> = all
            .range(from..)
            .map(|&v| {
                let next = adj
                    .get(&v)
                    .into_iter()
                    .flatten()
                    .filter(|&&w| w >= from && all.contains(&w))
                    .map(|&w| (w, ()))
                    .collect();
                (v, next)
            })
            .collect();
        let Some(component) = strongly_connected(&sub)
            .into_iter()
            .find(|c| c.len() > 1 || sub[&c[0]].contains_key(&c[0]))
        else {
            return (found, false);
        };
        let s = component[0];
        let members: HashSet<i32> = component.iter().copied().collect();
        let succ = |v: i32| -> Vec<i32> {
            sub[&v]
                .keys()
                .copied()
                .filter(|w| members.contains(w))
                .collect()
        };
        let mut blocked: HashSet<i32> = HashSet::new();
        let mut b: HashMap<i32, HashSet<i32>> = HashMap::new();
        // (vertex, its successors, next successor index, found a cycle below)
        let mut call: Vec<(i32, Vec<i32>, usize, bool)> = vec![(s, succ(s), 0, false)];
        let mut path = vec![s];
        blocked.insert(s);
        while let Some(top) = call.last_mut() {
            if top.2 < top.1.len() {
                let w = top.1[top.2];
                top.2 += 1;
                if w == s {
                    if found.len() == cap {
                        return (found, true);
                    }
                    found.push(path.clone());
                    top.3 = true;
                } else if !blocked.contains(&w) {
                    blocked.insert(w);
                    path.push(w);
                    let next = succ(w);
                    call.push((w, next, 0, false));
                }
            } else {
                let (v, next, _, got) = call.pop().expect("non-empty");
                path.pop();
                if got {
                    let mut work = vec![v];
                    while let Some(x) = work.pop() {
                        if blocked.remove(&x)
                            && let Some(waiting) = b.remove(&x)
                        {
                            work.extend(waiting);
                        }
                    }
                } else {
                    for w in next {
                        b.entry(w).or_default().insert(v);
                    }
                }
                if let Some(parent) = call.last_mut() {
                    parent.3 |= got;
                }
            }
        }
        let Some(next) = s.checked_add(1) else {
            return (found, false);
        };
        from = next;
    }
}

/// The one simple cycle of AND-edges that the strongly connected set `scc` (`members`
/// as a set) is, when it is one: no OR-edge inside it (`and` says which edges are
/// AND-waits) and exactly one elementary cycle.
pub fn single_cycle<V>(
    scc: &[i32],
    members: &mqd_model::RankSet,
    adj: &BTreeMap<i32, BTreeMap<i32, V>>,
    and: impl Fn(&V) -> bool,
) -> Option<Vec<i32>> {
    let inside = |t: &i32| members.contains_i32(*t);
    let knotted = scc
        .iter()
        .any(|r| adj[r].iter().any(|(t, e)| !and(e) && inside(t)));
    if knotted {
        return None;
    }
    let next: BTreeMap<i32, Vec<i32>> = scc
        .iter()
        .map(|&r| {
            let next = adj[&r]
                .iter()
                .filter(|(t, e)| and(e) && inside(t))
                .map(|(t, _)| *t)
                .collect();
            (r, next)
        })
        .collect();
    match elementary_cycles(scc, &next, 2) {
        (mut cycles, false) if cycles.len() == 1 => cycles.pop(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adj(edges: &[(i32, i32)]) -> BTreeMap<i32, Vec<i32>> {
        let mut out: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &(a, b) in edges {
            out.entry(a).or_default().push(b);
            out.entry(b).or_default();
        }
        out
    }

    fn cycles(edges: &[(i32, i32)]) -> Vec<Vec<i32>> {
        let a = adj(edges);
        let nodes: Vec<i32> = a.keys().copied().collect();
        elementary_cycles(&nodes, &a, 100).0
    }

    #[test]
    fn johnson_finds_every_elementary_cycle_once() {
        assert_eq!(
            cycles(&[(0, 1), (1, 2), (2, 3), (3, 0)]),
            [vec![0, 1, 2, 3]]
        );
        assert_eq!(cycles(&[(0, 1), (1, 0)]), [vec![0, 1]]);
        assert!(cycles(&[(0, 1), (1, 2)]).is_empty());
        assert_eq!(cycles(&[(0, 0)]), [vec![0]]);
        let mut both = cycles(&[(0, 1), (1, 0), (2, 3), (3, 2), (0, 0)]);
        both.sort();
        assert_eq!(both, [vec![0], vec![0, 1], vec![2, 3]]);
        // Bidirectional ring of 4: two long cycles and four 2-cycles.
        let mut ring = Vec::new();
        for r in 0..4 {
            ring.push((r, (r + 1) % 4));
            ring.push((r, (r + 3) % 4));
        }
        assert_eq!(cycles(&ring).len(), 6);
        // The cap.
        let a = adj(&ring);
        let nodes: Vec<i32> = a.keys().copied().collect();
        let (some, more) = elementary_cycles(&nodes, &a, 3);
        assert_eq!(some.len(), 3);
        assert!(more);
    }

    #[test]
    fn big_ring_is_one_cycle_without_deep_recursion() {
        let n = 100_000;
        let edges: Vec<(i32, i32)> = (0..n).map(|r| (r, (r + 1) % n)).collect();
        let c = cycles(&edges);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n as usize);
        let mut m: BTreeMap<i32, BTreeMap<i32, ()>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a).or_default().insert(b, ());
        }
        assert_eq!(strongly_connected(&m).len(), 1);
    }

    #[test]
    fn tarjan_separates_components() {
        let mut m: BTreeMap<i32, BTreeMap<i32, ()>> = BTreeMap::new();
        for (a, b) in [(0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (4, 4)] {
            m.entry(a).or_default().insert(b, ());
            m.entry(b).or_default();
        }
        assert_eq!(strongly_connected(&m), [vec![0, 1], vec![2, 3], vec![4]]);
    }
}
