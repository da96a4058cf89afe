//! Deadlocks: the greatest set of blocked ranks each of which waits for something only
//! deadlocked ranks could give (an AND-wait into the set, or an OR-wait whose every
//! member is in it; ranks that are not blocked are assumed to progress), and inside it the
//! strongly connected sets, each one finding (a simple cycle of AND-waits, or a knot:
//! several cycles, or OR-waits holding the set together), and the ranks
//! blocked behind them.

use crate::atoms::{self, Atom};
use crate::cycles::{single_cycle, strongly_connected};
use crate::plan::{Plan, RankPlan};
use mqd_model::diagnosis::{CycleFacts, KnotMember, KnotWait, RankFacts, Subject, UniformCycle};
use mqd_model::{
    Certainty, Evidence, Finding, FindingKind, RankSet, Relation, Wait, WaitKind, WaitTarget,
};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Most wait-for edges a knot [`Finding`] lists; larger knots list their AND-edges only.
pub const MAX_KNOT_EDGES: usize = 4096;

/// Most distinct waits a knot lists per member (the rest are counted).
const MAX_KNOT_WAITS: usize = 8;

/// What a wait that is not known (a peer, a communicator, a call the arguments do not
/// say) needs, for a rank to be held by it.
pub enum Unknown {
    /// Anything: the worst reading holds the rank.
    Holds,
    /// Any rank of this set (the whole job) may free it: it holds only while every one of
    /// them is held too.
    FreedByAnyOf(RankSet),
}

impl Unknown {
    fn holds_in(&self, d: &RankSet) -> bool {
        match self {
            Unknown::Holds => true,
            Unknown::FreedByAnyOf(all) => !all.is_empty() && all.is_subset(d),
        }
    }
}

/// The waits from one rank to another inside the deadlocked set.
#[derive(Debug, Clone, Default)]
struct Edge {
    /// Indices of the waits.
    waits: Vec<usize>,
    /// One of them is an AND-wait (to that rank alone).
    and: bool,
    /// One of them is an AND-wait on strong evidence (a listed send or a receive).
    strong: bool,
}

/// from -> to -> the waits between them.
type Adj = BTreeMap<i32, BTreeMap<i32, Edge>>;

/// The evidence of the waits `indices` (each wait once, each operation once).
pub fn evidence_of(waits: &[Wait], indices: impl IntoIterator<Item = usize>) -> Vec<Evidence> {
    let mut seen_waits: HashSet<usize> = HashSet::new();
    let mut seen: HashSet<&Evidence> = HashSet::new();
    let mut out = Vec::new();
    for i in indices {
        if !seen_waits.insert(i) {
            continue;
        }
        for e in &waits[i].evidence {
            if seen.insert(e) {
                out.push(e.clone());
            }
        }
    }
    out
}

/// The deadlock part of the analysis: from the waits and what each rank looked like.
pub struct Graph<'a> {
    waits: &'a [Wait],
    facts: &'a BTreeMap<i32, RankFacts>,
    /// Waits of each rank (indices).
    of: BTreeMap<i32, Vec<usize>>,
    /// Each rank's alternatives (one per thread that could move it) and whether it never
    /// acts; without, every wait of a rank holds it alone.
    plan: Option<&'a BTreeMap<i32, RankPlan>>,
}

impl<'a> Graph<'a> {
    /// The graph of `waits`, each holding its rank alone.
    pub fn new(waits: &'a [Wait], facts: &'a BTreeMap<i32, RankFacts>) -> Graph<'a> {
        let mut of: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, w) in waits.iter().enumerate() {
            of.entry(w.from).or_default().push(i);
        }
        Graph {
            waits,
            facts,
            of,
            plan: None,
        }
    }

    /// The graph of a plan: a rank is held only when each of its alternatives is.
    pub fn of_plan(plan: &'a Plan, facts: &'a BTreeMap<i32, RankFacts>) -> Graph<'a> {
        Graph {
            plan: Some(&plan.ranks),
            ..Graph::new(&plan.waits, facts)
        }
    }

    /// Ranks that never act (finalized, or held by their own threads).
    fn sinks(&self) -> RankSet {
        RankSet::from_i32s(
            self.plan
                .into_iter()
                .flatten()
                .filter(|(_, p)| p.sink)
                .map(|(r, _)| r),
        )
    }

    fn dumped(&self, rank: i32) -> bool {
        self.facts.get(&rank).is_some_and(|f| f.error.is_none())
    }

    fn within(&self, w: &Wait, d: &RankSet) -> bool {
        match &w.target {
            // A message a rank sent itself proves nothing unless the send is listed.
            WaitTarget::Rank(t) if *t == w.from && w.is_weak() => false,
            WaitTarget::Rank(t) => d.contains_i32(*t),
            WaitTarget::AnyOf(set) => !set.is_empty() && set.is_subset(d),
            _ => false,
        }
    }

    /// The greatest set of blocked ranks each of which waits for something only
    /// deadlocked ranks could give: on classes of ranks, by rank-set arithmetic, and rank
    /// by rank only where the classes do not settle.
    fn deadlocked(&self) -> RankSet {
        self.deadlocked_by_classes()
            .unwrap_or_else(|| self.deadlocked_per_rank())
    }

    /// [`Graph::deadlocked`] on the classes of the plan (`None` without one, or unsettled).
    pub fn deadlocked_by_classes(&self) -> Option<RankSet> {
        crate::rank_plans::of_plans(self.plan?, self.waits).deadlocked()
    }

    /// [`Graph::deadlocked`] rank by rank: a worklist of the ranks a removal affects.
    pub fn deadlocked_per_rank(&self) -> RankSet {
        let start = match self.plan {
            Some(plan) => RankSet::from_i32s(plan.keys()),
            None => RankSet::from_i32s(self.of.keys().filter(|&&r| self.dumped(r))),
        };
        self.stuck_within(start, &Unknown::Holds)
    }

    /// The greatest subset of `start` each rank of which waits for something only ranks
    /// of the subset could give; what a wait that is not known needs, `unknown` says.
    pub fn stuck_within(&self, start: RankSet, unknown: &Unknown) -> RankSet {
        let mut d = start;
        // Who depends on whom, to re-check only the ranks a removal affects.
        let mut dependents: HashMap<u32, Vec<i32>> = HashMap::new();
        for (&r, ws) in &self.of {
            for &i in ws {
                if let Some(targets) = self.waits[i].targets() {
                    for t in &targets {
                        dependents.entry(t).or_default().push(r);
                    }
                }
            }
        }
        // A wait not known may be freed by any rank: a removal re-checks its waiter.
        let unknown_waiters: Vec<i32> = match (unknown, self.plan) {
            (Unknown::FreedByAnyOf(_), Some(plan)) => plan
                .iter()
                .filter(|(_, p)| p.alternatives.iter().any(|a| a.unknown))
                .map(|(&r, _)| r)
                .collect(),
            _ => Vec::new(),
        };
        let mut unknown_freed = false;
        let mut work: Vec<i32> = d.iter().map(|r| r as i32).collect();
        while let Some(r) = work.pop() {
            if !d.contains_i32(r) {
                continue;
            }
            let stuck = match self.plan.and_then(|p| p.get(&r)) {
                Some(p) => {
                    p.sink
                        || (!p.alternatives.is_empty()
                            && p.alternatives.iter().all(|a| {
                                (a.unknown && unknown.holds_in(&d))
                                    || a.waits.iter().any(|&i| self.within(&self.waits[i], &d))
                            }))
                }
                None if self.plan.is_some() => false,
                None => self.of[&r].iter().any(|&i| self.within(&self.waits[i], &d)),
            };
            if !stuck {
                d.remove(r as u32);
                if let Some(deps) = dependents.get(&(r as u32)) {
                    work.extend(deps.iter().copied().filter(|&x| d.contains_i32(x)));
                }
                // The first removal frees every unknown wait for good: re-checked once.
                if !unknown_freed {
                    unknown_freed = true;
                    work.extend(
                        unknown_waiters
                            .iter()
                            .copied()
                            .filter(|&x| d.contains_i32(x)),
                    );
                }
            }
        }
        d
    }

    /// Edges inside `d`.
    fn edges(&self, d: &RankSet) -> Adj {
        let mut adj: Adj = BTreeMap::new();
        for r in d {
            let r = r as i32;
            let out = adj.entry(r).or_default();
            for &i in self.of.get(&r).into_iter().flatten() {
                let w = &self.waits[i];
                if !self.within(w, d) {
                    continue;
                }
                match &w.target {
                    WaitTarget::Rank(t) => {
                        let e = out.entry(*t).or_default();
                        e.waits.push(i);
                        e.and = true;
                        e.strong |= !w.is_weak();
                    }
                    WaitTarget::AnyOf(set) => {
                        for t in set {
                            out.entry(t as i32).or_default().waits.push(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        adj
    }

    /// The deadlock findings, and the deadlocked ranks.
    pub fn findings(&self) -> (Vec<Finding>, RankSet) {
        let d = self.deadlocked();
        let sinks = self.sinks();
        if d.difference(&sinks).is_empty() {
            return (Vec::new(), RankSet::new());
        }
        let adj = self.edges(&d);
        let sccs = strongly_connected(&adj);
        let mut out = Vec::new();
        let mut on_cycle = RankSet::new();
        for scc in sccs {
            let nontrivial =
                scc.len() > 1 || adj.get(&scc[0]).is_some_and(|o| o.contains_key(&scc[0]));
            if !nontrivial {
                continue;
            }
            let members = RankSet::from_i32s(&scc);
            on_cycle.union_with(&members);
            // One finding per strongly connected set: the cycle when it is one simple
            // cycle of AND-waits, else the set with what each member waits for.
            if let Some(cycle) = single_cycle(&scc, &members, &adj, |e| e.and) {
                out.push(self.cycle_finding(&cycle, &adj));
                continue;
            }
            out.push(self.knot_finding(&scc, &members, &adj));
        }
        // Ranks that never act are no part of a deadlock: what holds on them is said
        // apart (finalized ranks, ranks held by their own threads).
        on_cycle.union_with(&sinks);
        out.extend(atoms::merge(self.behind(&d, &on_cycle, &adj)));
        (out, d.difference(&sinks))
    }

    /// The ranks blocked behind a deadlock without being on a cycle or knot.
    fn behind(&self, d: &RankSet, on_cycle: &RankSet, adj: &Adj) -> Vec<Atom> {
        let mut atoms = Vec::new();
        for r in &d.difference(on_cycle) {
            let r = r as i32;
            if adj.get(&r).is_none_or(BTreeMap::is_empty) {
                continue;
            }
            let mut targets = RankSet::new();
            let mut edges = Vec::new();
            let mut indices = Vec::new();
            for (&t, e) in &adj[&r] {
                targets.insert(t as u32);
                edges.push((r, t));
                indices.extend(e.waits.iter().copied());
            }
            let weak_only = indices.iter().all(|&i| self.waits[i].is_weak());
            atoms.push(Atom {
                kind: FindingKind::BlockedByDeadlock,
                ranks: RankSet::from_i32s([r]),
                subject: Subject::BehindDeadlock { targets, weak_only },
                evidence: evidence_of(self.waits, indices),
                edges,
            });
        }
        atoms
    }

    /// The waits of edge `from -> to`, AND-waits first.
    fn edge_waits(&self, adj: &Adj, from: i32, to: i32) -> Vec<&'a Wait> {
        let mut ws: Vec<&Wait> = adj
            .get(&from)
            .and_then(|o| o.get(&to))
            .map(|e| e.waits.iter().map(|&i| &self.waits[i]).collect())
            .unwrap_or_default();
        // AND-waits first, the strongest evidence first: a listed send, a receive, a
        // message waiting unexpected.
        ws.sort_by_key(|w| {
            (
                !matches!(w.target, WaitTarget::Rank(_)),
                match w.kind {
                    WaitKind::Send => 0,
                    WaitKind::Receive => 1,
                    WaitKind::Unexpected => 2,
                    WaitKind::Collective => 3,
                },
            )
        });
        ws
    }

    /// Ranks of `cycle` whose facts satisfy `has`.
    fn cycle_ranks(&self, cycle: &[i32], has: impl Fn(&RankFacts) -> bool) -> RankSet {
        cycle
            .iter()
            .filter(|r| self.facts.get(r).is_some_and(&has))
            .map(|&r| r as u32)
            .collect()
    }

    fn cycle_finding(&self, cycle: &[i32], adj: &Adj) -> Finding {
        let n = cycle.len();
        let hops: Vec<(i32, i32)> = (0..n).map(|i| (cycle[i], cycle[(i + 1) % n])).collect();
        let per_edge: Vec<Vec<&Wait>> = hops
            .iter()
            .map(|&(a, b)| {
                self.edge_waits(adj, a, b)
                    .into_iter()
                    .filter(|w| matches!(w.target, WaitTarget::Rank(_)))
                    .collect()
            })
            .collect();
        let mut evidence = Vec::new();
        let mut seen: HashSet<&Evidence> = HashSet::new();
        for ws in &per_edge {
            for w in ws {
                for e in &w.evidence {
                    if seen.insert(e) {
                        evidence.push(e.clone());
                    }
                }
            }
        }
        // One description that fits every hop?
        let primary: Vec<&Wait> = per_edge.iter().map(|ws| ws[0]).collect();
        let uniform = |f: &dyn Fn(&Wait) -> bool| primary.iter().all(|w| f(w));
        let first = primary[0];
        let same_class = uniform(&|w| w.kind.is_message() == first.kind.is_message());
        let same_comm = uniform(&|w| w.comm == first.comm);
        let rel = first.relation();
        let same_rel = uniform(&|w| w.relation() == rel);
        let same_tag = uniform(&|w| w.tag == first.tag);
        // A collective's wait is no send or receive: such cycles are told hop by hop.
        let collective = primary.iter().any(|w| w.kind == WaitKind::Collective);
        let same_call = uniform(&|w| w.call.is_some() && w.call == first.call);
        let uniform = (same_class && same_comm && !collective).then(|| UniformCycle {
            call: same_call.then(|| first.call.clone()).flatten(),
            messages: first.kind.is_message(),
            comm: first.comm.clone(),
            relation: (same_rel && rel != Relation::Absolute).then_some(rel),
            tag: same_tag.then_some(first.tag),
            unlisted: primary.iter().all(|w| w.kind == WaitKind::Unexpected),
            unseen: self.cycle_ranks(cycle, |f| f.error.is_some() || f.unreadable),
            other_side: if first.kind.is_message() {
                self.cycle_ranks(cycle, |f| f.receives > 0)
            } else {
                self.cycle_ranks(cycle, |f| f.sends > 0)
            },
        });
        // Ranks whose only part in the cycle is a message waiting elsewhere.
        let unsure: RankSet = hops
            .iter()
            .zip(&per_edge)
            .filter(|((a, _), ws)| {
                // A rank whose stack shows it in the call is no question.
                ws.iter()
                    .all(|w| w.kind == WaitKind::Unexpected && !w.blocked && w.call.is_none())
                    && self
                        .facts
                        .get(a)
                        .is_some_and(|f| f.receives == 0 && f.sends == 0)
            })
            .map(|((a, _), _)| *a as u32)
            .collect();
        Finding {
            certainty: Certainty::Definite,
            kind: FindingKind::DeadlockCycle,
            ranks: RankSet::from_i32s(cycle),
            subject: Subject::Cycle(CycleFacts {
                in_calls: primary.iter().all(|w| w.call.is_some()),
                hops: hops
                    .iter()
                    .zip(&primary)
                    .map(|(&(a, b), w)| (a, b, w.summary()))
                    .collect(),
                uniform,
                unsure,
            }),
            communicators: Vec::new(),
            evidence,
            cycle: Some(cycle.to_vec()),
            edges: hops,
        }
    }

    fn knot_finding(&self, scc: &[i32], members: &RankSet, adj: &Adj) -> Finding {
        let mut edges = Vec::new();
        // An any-source wait is an edge to every member: list them for small knots only.
        let count: usize = scc
            .iter()
            .map(|r| adj[r].keys().filter(|t| members.contains_i32(**t)).count())
            .sum();
        let all_edges = count <= MAX_KNOT_EDGES;
        if !all_edges {
            for &r in scc {
                for (&t, e) in &adj[&r] {
                    if e.and && members.contains_i32(t) {
                        edges.push((r, t));
                    }
                }
            }
        }
        let incoming: RankSet = self
            .waits
            .iter()
            .filter(|w| w.kind.is_message())
            .filter_map(|w| match w.target {
                WaitTarget::Rank(t) => u32::try_from(t).ok(),
                _ => None,
            })
            .collect();
        let mut indices: Vec<usize> = Vec::new();
        let mut knot = Vec::new();
        for &r in scc {
            // Each wait once (an any-source wait is an edge to every member).
            let mut mine: Vec<(i32, usize)> = Vec::new();
            let mut seen: HashSet<usize> = HashSet::new();
            for (&t, e) in &adj[&r] {
                if !members.contains_i32(t) {
                    continue;
                }
                if all_edges {
                    edges.push((r, t));
                }
                for &i in &e.waits {
                    if seen.insert(i) {
                        mine.push((t, i));
                    }
                }
            }
            let mut waits_for: Vec<KnotWait> = Vec::new();
            let mut distinct: HashSet<KnotWait> = HashSet::new();
            let mut any_source = false;
            let mut polling = None;
            for (t, i) in mine {
                let w = &self.waits[i];
                if let Some(call) = w.call.as_ref().filter(|c| mqd_model::calls::polls(c)) {
                    polling.get_or_insert_with(|| call.clone());
                }
                let target = match &w.target {
                    WaitTarget::AnyOf(set) => {
                        any_source = true;
                        KnotWait::AnyOf {
                            ranks: set.clone(),
                            comm: w.comm.clone(),
                            tag: w.tag,
                        }
                    }
                    _ => KnotWait::Rank {
                        rank: t,
                        wait: w.summary(),
                    },
                };
                if waits_for.len() < MAX_KNOT_WAITS {
                    if distinct.insert(target.clone()) {
                        waits_for.push(target);
                    }
                } else {
                    distinct.insert(target);
                }
                indices.push(i);
            }
            knot.push(KnotMember {
                rank: r,
                more: distinct.len() - waits_for.len(),
                waits_for,
                nobody_sends: any_source && !incoming.contains_i32(r) && polling.is_none(),
                polling,
            });
        }
        Finding {
            certainty: Certainty::Definite,
            kind: FindingKind::DeadlockKnot,
            ranks: members.clone(),
            subject: Subject::Knot {
                members: knot,
                in_calls: indices.iter().all(|&i| self.waits[i].call.is_some()),
            },
            communicators: Vec::new(),
            evidence: evidence_of(self.waits, indices),
            cycle: None,
            edges,
        }
    }
}

/// What self-cycles (a rank waiting for itself) must share to be one finding.
type SelfCycleKey = (
    Certainty,
    mqd_model::diagnosis::WaitSummary,
    Option<(bool, bool)>,
);

fn self_cycle_key(f: &Finding) -> Option<SelfCycleKey> {
    match (&f.subject, f.cycle.as_deref()) {
        (Subject::Cycle(c), Some([_])) => Some((
            f.certainty,
            c.hops.first()?.2.clone(),
            c.uniform
                .as_ref()
                .map(|u| (u.other_side.is_empty(), u.unlisted)),
        )),
        _ => None,
    }
}

/// Self-cycles of several ranks that follow one pattern are one finding ("ranks 0-63
/// each wait for themselves"), in the place of the first.
fn merge_self_cycles(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::with_capacity(findings.len());
    let mut at: HashMap<SelfCycleKey, usize> = HashMap::new();
    for f in findings {
        let Some(key) = self_cycle_key(&f) else {
            out.push(f);
            continue;
        };
        match at.get(&key) {
            Some(&i) => {
                let merged = &mut out[i];
                merged.ranks.union_with(&f.ranks);
                merged.evidence.extend(f.evidence);
                merged.edges.extend(f.edges);
            }
            None => {
                at.insert(key, out.len());
                out.push(f);
            }
        }
    }
    out
}

/// The deadlock findings of the two plans: proven ones (from what blocked ranks certainly
/// need) first, then possible ones (the worst reading) among ranks not proven
/// deadlocked; with the proven and the possibly deadlocked ranks. Proofs from a dump that
/// is not one snapshot of its job are possible only.
pub fn proven_and_possible(
    must: &Plan,
    may: &Plan,
    facts: &BTreeMap<i32, RankFacts>,
    one_snapshot: bool,
) -> (Vec<Finding>, RankSet, RankSet) {
    let (mut findings, mut deadlocked) = Graph::of_plan(must, facts).findings();
    if !one_snapshot {
        for f in &mut findings {
            f.certainty = Certainty::Possible;
        }
        deadlocked = RankSet::new();
    }
    let (possible, mut possibly_deadlocked) = Graph::of_plan(may, facts).findings();
    findings.extend(
        possible
            .into_iter()
            .filter(|f| !f.ranks.is_subset(&deadlocked))
            .map(|mut f| {
                f.certainty = Certainty::Possible;
                f
            }),
    );
    possibly_deadlocked.union_with(&deadlocked);
    (merge_self_cycles(findings), deadlocked, possibly_deadlocked)
}
