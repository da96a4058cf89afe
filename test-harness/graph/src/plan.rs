//! A wait-for graph as plans: each rank a set of alternatives (one per thread that could
//! move it), each held by any one of its waits.

use mqd_model::Wait;
use std::collections::BTreeMap;

/// One way a rank may go on: a thread, with the waits (indices into [`Plan::waits`])
/// any one of which holds it, and whether it may also need something unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Alternative {
    /// Its waits.
    pub waits: Vec<usize>,
    /// It may need something unknown.
    pub unknown: bool,
}

/// One rank in a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankPlan {
    /// It never acts again in MPI (finalized, or every thread waits for another one).
    pub sink: bool,
    /// It goes on if any of these does.
    pub alternatives: Vec<Alternative>,
}

/// A wait-for graph with its alternatives, rank by rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every wait.
    pub waits: Vec<Wait>,
    /// Each rank's plan.
    pub ranks: BTreeMap<i32, RankPlan>,
}

impl Plan {
    /// Adds an alternative of `rank`: these waits, and whether it may need more.
    pub fn add(&mut self, rank: i32, (waits, unknown): (Vec<Wait>, bool)) {
        let start = self.waits.len();
        self.waits.extend(waits);
        let indices = (start..self.waits.len()).collect();
        self.ranks
            .entry(rank)
            .or_default()
            .alternatives
            .push(Alternative {
                waits: indices,
                unknown,
            });
    }

    /// Marks `rank` as never acting again.
    pub fn sink(&mut self, rank: i32) {
        self.ranks.entry(rank).or_default().sink = true;
    }
}

/// A plan's alternatives gathered in any order, made a [`Plan`] rank by rank.
#[derive(Debug, Default)]
pub struct ByRank {
    alternatives: BTreeMap<i32, RankPlan>,
    waits: BTreeMap<i32, Vec<Vec<Wait>>>,
}

impl ByRank {
    /// Adds an alternative of `rank`: these waits, and whether it may need more.
    pub fn add(&mut self, rank: i32, (waits, unknown): (Vec<Wait>, bool)) {
        self.alternatives
            .entry(rank)
            .or_default()
            .alternatives
            .push(Alternative {
                waits: Vec::new(),
                unknown,
            });
        self.waits.entry(rank).or_default().push(waits);
    }

    /// Marks `rank` as never acting again.
    pub fn sink(&mut self, rank: i32) {
        self.alternatives.entry(rank).or_default().sink = true;
    }

    /// The plan, its waits in the order of their ranks.
    pub fn plan(self) -> Plan {
        let mut plan = Plan::default();
        let mut waits = self.waits;
        for (rank, mut p) in self.alternatives {
            let mut of_rank = waits.remove(&rank).unwrap_or_default().into_iter();
            for a in &mut p.alternatives {
                let start = plan.waits.len();
                plan.waits.extend(of_rank.next().unwrap_or_default());
                a.waits = (start..plan.waits.len()).collect();
            }
            plan.ranks.insert(rank, p);
        }
        plan
    }
}

/// The graph of both plans: the worst reading's waits, those the proof holds marked
/// blocked (in one snapshot) with the proof's kind and evidence.
pub fn graph(may: &Plan, must: &Plan, one_snapshot: bool) -> Vec<Wait> {
    let mut graph = may.waits.clone();
    for proven in &must.waits {
        let same = graph.iter_mut().find(|w| {
            (w.from, &w.target, &w.comm, w.peer_local, w.tag)
                == (
                    proven.from,
                    &proven.target,
                    &proven.comm,
                    proven.peer_local,
                    proven.tag,
                )
        });
        match same {
            Some(w) => {
                w.blocked = one_snapshot;
                w.kind = proven.kind;
                if w.evidence.is_empty() {
                    w.evidence.clone_from(&proven.evidence);
                }
            }
            None => graph.push(Wait {
                blocked: one_snapshot,
                ..proven.clone()
            }),
        }
    }
    graph
}
