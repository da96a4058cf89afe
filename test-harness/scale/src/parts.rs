//! Inside a deadlocked set of classes: which ranks are on cycles, which in knots, which
//! blocked behind them, as the per-rank analysis splits its deadlocked set. Where every
//! deadlocked rank waits, in the set, for exactly one neighbour at a fixed distance (a
//! ring, rings of pairs, a pipeline into a ring: a function on ranks), its cycles are
//! what that function maps onto itself, found by rank-set images whatever the number of
//! ranks; otherwise the set's wait-for graph is built rank by rank from the rules, up to
//! [`MAX_EXPLICIT`] ranks, and its strongly connected sets found as the per-rank graph's.

use mqd_analysis::shared::{Classes, Rule};
use mqd_analysis::shared::{MAX_ROUNDS, single_cycle, strongly_connected};
use mqd_model::{FindingKind, RankSet};
use std::collections::BTreeMap;

/// Most deadlocked ranks whose graph is built rank by rank.
pub const MAX_EXPLICIT: usize = 1 << 16;

/// Ranks of a deadlocked set, by their part in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// `DeadlockCycle`, `DeadlockKnot` or `BlockedByDeadlock`.
    pub kind: FindingKind,
    /// The ranks.
    pub ranks: RankSet,
}

/// One edge of the explicit graph: whether it is an AND-wait, and whether it rests
/// on strong evidence (not only a message seen waiting unexpected).
#[derive(Debug, Clone, Copy, Default)]
struct Edge {
    and: bool,
    strong: bool,
}

/// The parts of `d` (this plan's deadlocked set, sinks included): cycles and knots
/// (one part each), and the ranks blocked behind them, without the cycles, knots
/// and ranks behind that are all in `known` (found already); `None` when `d` is
/// neither a function on ranks nor small enough to build rank by rank.
pub(crate) fn parts(classes: &Classes, d: &RankSet, known: &RankSet) -> Option<Vec<Part>> {
    let mut sinks = RankSet::new();
    classes
        .classes
        .iter()
        .filter(|c| c.sink)
        .for_each(|c| sinks.union_with(&c.ranks.intersection(d)));
    if d.difference(&sinks).is_empty() {
        return Some(Vec::new());
    }
    functional_parts(classes, d, &sinks, known)
        .or_else(|| (d.len() <= MAX_EXPLICIT).then(|| explicit_parts(classes, d, &sinks, known)))
}

/// The targets of rank `r`'s rules inside `d` (`weak`: those on weak evidence only).
fn targets(
    classes: &Classes,
    (rules, weak): (&[Rule], &[Rule]),
    r: u32,
    d: &RankSet,
    out: &mut BTreeMap<i32, Edge>,
) {
    let n = u64::from(classes.n);
    for &rule in rules {
        let strong = !weak.contains(&rule);
        let mut and = |t: u32| {
            let e = out.entry(t as i32).or_default();
            e.and = true;
            e.strong |= strong;
        };
        match rule {
            Rule::Never => {}
            Rule::Offset(k) => {
                let t = ((u64::from(r) + u64::from(k)) % n) as u32;
                if d.contains(t) {
                    and(t);
                }
            }
            Rule::Fixed(t) if d.contains(t) => and(t),
            Rule::Fixed(_) => {}
            Rule::AllOf(i) if classes.sets[i].is_subset(d) => {
                for t in &classes.sets[i] {
                    out.entry(t as i32).or_default().strong = true;
                }
            }
            Rule::AllOf(_) => {}
            Rule::AnyIn(i) => {
                for t in &classes.sets[i].intersection(d) {
                    and(t);
                }
            }
        }
    }
}

/// The parts of `d` built rank by rank: the per-rank graph's strongly connected sets.
fn explicit_parts(classes: &Classes, d: &RankSet, sinks: &RankSet, known: &RankSet) -> Vec<Part> {
    let mut adj: BTreeMap<i32, BTreeMap<i32, Edge>> = BTreeMap::new();
    for r in d {
        adj.entry(r as i32).or_default();
    }
    for c in classes.classes.iter().filter(|c| !c.sink) {
        let rules: Vec<Rule> = c
            .alternatives
            .iter()
            .flat_map(|a| a.rules.iter().copied())
            .collect();
        // Weak only when no alternative holds the same rule on strong evidence.
        let weak: Vec<Rule> = rules
            .iter()
            .copied()
            .filter(|r| {
                c.alternatives
                    .iter()
                    .all(|a| !a.rules.contains(r) || a.weak.contains(r))
            })
            .collect();
        for r in &c.ranks.intersection(d) {
            let edges = adj.entry(r as i32).or_default();
            targets(classes, (&rules, &weak), r, d, edges);
        }
    }
    let mut parts = Vec::new();
    let mut on_cycle = RankSet::new();
    for scc in strongly_connected(&adj) {
        let nontrivial = scc.len() > 1 || adj[&scc[0]].contains_key(&scc[0]);
        if !nontrivial {
            continue;
        }
        let members = RankSet::from_i32s(&scc);
        on_cycle.union_with(&members);
        let kind = match single_cycle(&scc, &members, &adj, |e| e.and) {
            Some(_) => FindingKind::DeadlockCycle,
            None => FindingKind::DeadlockKnot,
        };
        if !members.is_subset(known) {
            parts.push(Part {
                kind,
                ranks: members,
            });
        }
    }
    on_cycle.union_with(sinks);
    // Behind: by whether only weak evidence holds them, as the per-rank findings
    // group them.
    let mut behind = [RankSet::new(), RankSet::new()];
    for r in &d.difference(&on_cycle) {
        let edges = &adj[&(r as i32)];
        if !edges.is_empty() {
            behind[usize::from(edges.values().all(|e| !e.strong))].insert(r);
        }
    }
    parts.extend(behind_parts(behind, known));
    parts
}

/// The parts of `d` when each of its ranks that is no sink waits, inside `d`, for one
/// rank at a fixed distance and for nothing else: the ranks on cycles are those the
/// map reaches again and again, by rank-set images; every cycle is simple.
fn functional_parts(
    classes: &Classes,
    d: &RankSet,
    sinks: &RankSet,
    known: &RankSet,
) -> Option<Vec<Part>> {
    let mut steps: Vec<(RankSet, u32)> = Vec::new();
    let mut weak = RankSet::new();
    let mut covered = sinks.clone();
    for c in classes.classes.iter().filter(|c| !c.sink) {
        let ranks = c.ranks.intersection(d);
        if ranks.is_empty() {
            continue;
        }
        // One rule, to a neighbour, held by `d` for every rank of the class.
        let [a] = &c.alternatives[..] else {
            return None;
        };
        let ([Rule::Offset(k)], false) = (&a.rules[..], a.unknown) else {
            return None;
        };
        if !ranks.is_subset(&d.rotated(*k, classes.n)) {
            return None;
        }
        if a.weak.contains(&Rule::Offset(*k)) {
            weak.union_with(&ranks);
        }
        covered.union_with(&ranks);
        steps.push((ranks, *k));
    }
    if *d != covered {
        return None;
    }
    let image = |t: &RankSet| {
        let mut out = RankSet::new();
        for (ranks, k) in &steps {
            let from = t.intersection(ranks);
            out.union_with(&from.rotated((classes.n - k % classes.n) % classes.n, classes.n));
        }
        out
    };
    // Ranks on cycles: those some path of any length reaches, images of images.
    let on_cycles = |from: RankSet| -> Option<RankSet> {
        let mut t = from;
        for _ in 0..MAX_ROUNDS {
            let next = image(&t).intersection(&t);
            if next == t {
                return Some(t);
            }
            t = next;
        }
        None
    };
    let cycles = on_cycles(d.difference(sinks))?;
    // Cycles all of whose ranks are known are the ones the map keeps inside them.
    let known_cycles = on_cycles(cycles.intersection(known))?;
    let mut parts = Vec::new();
    let new_cycles = cycles.difference(&known_cycles);
    if !new_cycles.is_empty() {
        parts.push(Part {
            kind: FindingKind::DeadlockCycle,
            ranks: new_cycles,
        });
    }
    let behind = d.difference(&cycles).difference(sinks);
    let behind = [behind.difference(&weak), behind.intersection(&weak)];
    parts.extend(behind_parts(behind, known));
    Some(parts)
}

/// The ranks blocked behind a deadlock, by whether strong evidence holds them or only
/// weak: each group whole, unless all of it is `known`.
fn behind_parts(behind: [RankSet; 2], known: &RankSet) -> impl Iterator<Item = Part> + '_ {
    behind
        .into_iter()
        .filter(move |ranks| !ranks.is_empty() && !ranks.is_subset(known))
        .map(|ranks| Part {
            kind: FindingKind::BlockedByDeadlock,
            ranks,
        })
}
