//! Inside a deadlocked set of classes: which ranks are on cycles, which in knots, which
//! blocked behind them, as a job's ranks each a class of one split the set. Where every
//! deadlocked rank waits, in the set, for exactly one neighbour at a fixed distance (a
//! ring, rings of pairs, a pipeline into a ring: a function on ranks), its cycles are
//! what that function maps onto itself, found by rank-set images whatever the number of
//! ranks. Otherwise the set's core (the ranks some rank of it reaches again and again,
//! by rank-set images: every cycle is in it) is built rank by rank from the rules, up to
//! [`MAX_EXPLICIT`] ranks, its strongly connected sets found as the per-rank graph's,
//! and the ranks behind them told by class.

use crate::{ClassPlan, Classes, MAX_ROUNDS, Rule, single_cycle, strongly_connected};
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
pub fn parts(classes: &Classes, d: &RankSet, known: &RankSet) -> Option<Vec<Part>> {
    let mut sinks = RankSet::new();
    classes
        .classes
        .iter()
        .filter(|c| c.sink)
        .for_each(|c| sinks.union_with(&c.ranks.intersection(d)));
    if d.difference(&sinks).is_empty() {
        return Some(Vec::new());
    }
    if let Some(parts) = functional_parts(classes, d, &sinks, known) {
        return Some(parts);
    }
    // Only ranks some rank of the set waits for, again and again, can be on a cycle:
    // the core, found by rank-set images, is all the graph built rank by rank needs.
    let core = core(classes, d, &sinks).filter(|c| c.len() <= MAX_EXPLICIT)?;
    Some(explicit_parts(classes, d, &core, &sinks, known))
}

/// Each class's rules (of every alternative) and those of them on weak evidence only.
fn rules_of(c: &ClassPlan) -> (Vec<Rule>, Vec<Rule>) {
    let rules: Vec<Rule> = c
        .alternatives
        .iter()
        .flat_map(|a| a.rules.iter().copied())
        .collect();
    // Weak only when no alternative holds the same rule on strong evidence.
    let weak = rules
        .iter()
        .copied()
        .filter(|r| {
            c.alternatives
                .iter()
                .all(|a| !a.rules.contains(r) || a.weak.contains(r))
        })
        .collect();
    (rules, weak)
}

/// The members of `ranks` whose `rule` names a rank of `d` (an edge inside `d`), and
/// the ranks of `d` it names from them.
fn edge_into(classes: &Classes, rule: Rule, ranks: &RankSet, d: &RankSet) -> (RankSet, RankSet) {
    let n = classes.n;
    let all = |to: RankSet| match ranks.is_empty() || to.is_empty() {
        true => (RankSet::new(), RankSet::new()),
        false => (ranks.clone(), to),
    };
    match rule {
        Rule::Never => (RankSet::new(), RankSet::new()),
        Rule::Offset(k) => {
            let from = ranks.intersection(&d.rotated(k, n));
            let to = from.rotated((n - k % n) % n, n);
            (from, to)
        }
        Rule::Fixed(t) if d.contains(t) => all(RankSet::single(t)),
        Rule::Fixed(_) => (RankSet::new(), RankSet::new()),
        Rule::AllOf(i) if classes.sets[i].is_subset(d) => all(classes.sets[i].clone()),
        // Each rank to every other: a rank alone reaches the others only.
        Rule::AllOthers(i) if classes.sets[i].is_subset(d) => match ranks.len() {
            1 => all(classes.sets[i].difference(ranks)),
            _ => all(classes.sets[i].clone()),
        },
        Rule::AllOf(_) | Rule::AllOthers(_) => (RankSet::new(), RankSet::new()),
        Rule::AnyIn(i) => all(classes.sets[i].intersection(d)),
        // Members all of whose neighbours at the offsets are in `d`, and those neighbours.
        Rule::AllAround(i) => {
            let offsets = &classes.sets[i];
            let mut from = ranks.clone();
            for k in offsets {
                from = from.intersection(&d.rotated(k, n));
            }
            let mut to = RankSet::new();
            for k in offsets.iter().filter(|_| !from.is_empty()) {
                to.union_with(&from.rotated((n - k % n) % n, n));
            }
            (from, to)
        }
    }
}

/// The ranks of `d` that some rank of the set reaches by paths of any length: those
/// with a predecessor in it, again and again (`None` if that does not settle).
fn core(classes: &Classes, d: &RankSet, sinks: &RankSet) -> Option<RankSet> {
    let plans: Vec<(&RankSet, Vec<Rule>)> = classes
        .classes
        .iter()
        .filter(|c| !c.sink)
        .map(|c| (&c.ranks, rules_of(c).0))
        .collect();
    let mut t = d.difference(sinks);
    for _ in 0..MAX_ROUNDS {
        let mut reached = RankSet::new();
        for (ranks, rules) in &plans {
            let from = ranks.intersection(&t);
            for &rule in rules {
                reached.union_with(&edge_into(classes, rule, &from, d).1.intersection(&t));
            }
        }
        let next = t.intersection(&reached);
        if next == t {
            return Some(t);
        }
        t = next;
    }
    None
}

/// The targets in `keep` of rank `r`'s edges inside `d` (`weak`: rules on weak
/// evidence only).
fn targets(
    classes: &Classes,
    (rules, weak): (&[Rule], &[Rule]),
    r: u32,
    (d, keep): (&RankSet, &RankSet),
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
                if keep.contains(t) {
                    and(t);
                }
            }
            Rule::Fixed(t) if keep.contains(t) => and(t),
            Rule::Fixed(_) => {}
            // An edge to each member when all of them are in `d`.
            Rule::AllOf(i) if classes.sets[i].is_subset(d) => {
                for t in &classes.sets[i].intersection(keep) {
                    out.entry(t as i32).or_default().strong = true;
                }
            }
            Rule::AllOthers(i) if classes.sets[i].is_subset(d) => {
                for t in classes.sets[i]
                    .intersection(keep)
                    .iter()
                    .filter(|&t| t != r)
                {
                    out.entry(t as i32).or_default().strong = true;
                }
            }
            Rule::AllOf(_) | Rule::AllOthers(_) => {}
            Rule::AnyIn(i) => {
                for t in &classes.sets[i].intersection(keep) {
                    and(t);
                }
            }
            // As `AllOf` of the rank's neighbours at the offsets.
            Rule::AllAround(i) => {
                let around: Vec<u32> = classes.sets[i]
                    .iter()
                    .map(|k| ((u64::from(r) + u64::from(k)) % n) as u32)
                    .collect();
                if around.iter().all(|&t| d.contains(t)) {
                    for t in around.into_iter().filter(|&t| keep.contains(t)) {
                        out.entry(t as i32).or_default().strong = true;
                    }
                }
            }
        }
    }
}

/// The parts of `d` with its core (`core`) built rank by rank: the per-rank graph's
/// strongly connected sets are all in the core; the ranks behind them by class.
fn explicit_parts(
    classes: &Classes,
    d: &RankSet,
    core: &RankSet,
    sinks: &RankSet,
    known: &RankSet,
) -> Vec<Part> {
    let mut adj: BTreeMap<i32, BTreeMap<i32, Edge>> = BTreeMap::new();
    for r in core {
        adj.entry(r as i32).or_default();
    }
    for c in classes.classes.iter().filter(|c| !c.sink) {
        let (rules, weak) = rules_of(c);
        for r in &c.ranks.intersection(core) {
            let edges = adj.entry(r as i32).or_default();
            targets(classes, (&rules, &weak), r, (d, core), edges);
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
    // Behind: ranks with an edge inside `d`, by whether only weak evidence holds them,
    // as the per-rank findings group them.
    let mut with_edge = RankSet::new();
    let mut strong = RankSet::new();
    for c in classes.classes.iter().filter(|c| !c.sink) {
        let ranks = c.ranks.intersection(d).difference(&on_cycle);
        let (rules, weak) = rules_of(c);
        for rule in rules {
            let from = edge_into(classes, rule, &ranks, d).0;
            with_edge.union_with(&from);
            if !weak.contains(&rule) {
                strong.union_with(&from);
            }
        }
    }
    let behind = [strong.clone(), with_edge.difference(&strong)];
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
