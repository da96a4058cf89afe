//! What the class analysis concludes: the verdict and its reasons, the deadlocked sets
//! and their parts, the classes of the worst reading by what they wait for.

use mqd_model::diagnosis::{Doubt, RankFacts, Verdict};
use mqd_model::{Certainty, Finding, FindingKind, RankSet, Wait};
use std::collections::BTreeMap;

/// What the class analysis concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassDiagnosis {
    /// The verdict.
    pub verdict: Verdict,
    /// Why it is not "no deadlock".
    pub doubts: Vec<Doubt>,
    /// Ranks proven deadlocked.
    pub deadlocked: RankSet,
    /// Ranks deadlocked in the worst reading.
    pub possibly_deadlocked: RankSet,
    /// Ranks their stacks show running.
    pub running: RankSet,
    /// Ranks in a state this analysis does not follow, each set with why.
    pub not_followed: Vec<(RankSet, String)>,
    /// The findings it gives in full, in their order: for any job the collectives' waits, a clean job, ranks blocked without queues,
    /// OpenMP waits and what blocked calls' arguments show ([`crate::in_full`]); where
    /// every rank is a class of its own also the deadlocks, messages in transit,
    /// mismatches, ranks waited for, queues not read, waits on finalized ranks and the
    /// summary ([`crate::in_full_for_ranks`]). Only where every class is followed.
    pub findings: Vec<Finding>,
    /// The ranks of the worst reading, by what they wait for: a ring of a million
    /// ranks each waiting for its right neighbour is one entry.
    pub held: Vec<HeldClass>,
    /// The deadlocked sets' parts, proven ones first, as the deadlock findings of its
    /// ranks each a class of one split them: ranks on cycles, in knots, blocked behind. `None`
    /// when they were not worked out (a set of more than 65,536 ranks whose waits are
    /// not each one neighbour's).
    pub deadlocks: Option<Vec<FindingRanks>>,
    /// What it finds of the queues, by kind: messages in transit,
    /// receives a message would match but for its tag, source or communicator, ranks
    /// waited for that have nothing pending, the summary of waits that deadlock nobody.
    pub queue_findings: Vec<FindingRanks>,
    /// The wait-for graph of the ranks that are classes of one: each wait with its
    /// operations and call, those proven marked blocked.
    pub waits: Vec<Wait>,
    /// What each rank showed, where every rank is a class of its own (else empty): its
    /// pid, why it could not be dumped, what its queues hold.
    pub facts: BTreeMap<i32, RankFacts>,
    /// What a hold of the job builds on, where every rank is a class of its own and
    /// followed.
    pub hold: Option<HoldBasis>,
}

/// What a hold builds on: the worst reading rank by rank, and the ranks a window of
/// watching can prove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldBasis {
    /// The worst reading, rank by rank.
    pub may: mqd_graph::Plan,
    /// Ranks a hold can prove: every thread blocked in an MPI call whose waits are within
    /// the job, waiting for another thread of its process, or MPI's own, one blocked at
    /// least.
    pub holdable: RankSet,
    /// The calls of the holdable ranks' blocked threads, by name.
    pub blocked_calls: BTreeMap<i32, Vec<String>>,
    /// What each holdable rank's waits do not say (the first unknown argument, or the
    /// call), when something.
    pub unknown_waits: BTreeMap<i32, String>,
    /// Ranks with a thread polling, and its call.
    pub polling: BTreeMap<i32, String>,
    /// Ranks MPI says returned from `MPI_Finalize`.
    pub finalized: RankSet,
    /// The waits the queues show, before any call is read (for the summary of a job
    /// nothing deadlocks).
    pub queue_waits: Vec<Wait>,
    /// What each rank showed.
    pub facts: BTreeMap<i32, RankFacts>,
    /// Ranks their stacks show running.
    pub running: RankSet,
    /// The job's size, where something says it (a hold proves a set that must be the
    /// whole job only then).
    pub size: Option<u32>,
}

/// The verdict: "deadlock" where one is proven, "no deadlock" where nothing is in doubt.
pub fn verdict(deadlocked: &RankSet, doubts: &[Doubt]) -> Verdict {
    if !deadlocked.is_empty() {
        Verdict::Deadlock
    } else if doubts.is_empty() {
        Verdict::NoDeadlock
    } else {
        Verdict::Undetermined
    }
}

/// The ranks of a finding of the class analysis (of a deadlocked set: by their part in
/// it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingRanks {
    /// Its kind: of a deadlocked set, `DeadlockCycle` (one or more simple cycles),
    /// `DeadlockKnot` (one strongly connected set that is no simple cycle) or
    /// `BlockedByDeadlock`.
    pub kind: FindingKind,
    /// Proven, or only in the worst reading.
    pub certainty: Certainty,
    /// The ranks.
    pub ranks: RankSet,
}

/// Ranks of the worst reading that wait for the same, each relative to itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldClass {
    /// The ranks.
    pub ranks: RankSet,
    /// Each blocked call (its name, or the queue's operation) and what holds it.
    pub waits: Vec<(String, HeldBy)>,
}

/// What a blocked call of a [`HeldClass`] waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeldBy {
    /// Each rank's `k`-th right neighbour, around the job.
    Neighbour(u32),
    /// Any one of each rank's `k`-th right neighbours, for each `k` of the set (the
    /// requests of an `MPI_Waitany` or `MPI_Waitsome`).
    AnyNeighbour(RankSet),
    /// This rank.
    Rank(u32),
    /// Any rank (a receive from any source).
    AnyRank,
    /// Any one of these ranks (a receive from any source of a communicator, a wait for
    /// any of requests to them).
    AnyOf(RankSet),
    /// One of these ranks: the members not in the collective, the destinations of a
    /// rank's messages.
    Outside(RankSet),
}

/// The set `AllOf` rules of any-source receives name: every rank of the job.
pub(crate) const WORLD: usize = 0;
