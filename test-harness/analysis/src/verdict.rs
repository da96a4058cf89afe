//! The verdict: "deadlock" only when blocked ranks are proven to wait for each other,
//! "no deadlock" only when every rank of the job was seen, every wait followed, and
//! even the worst reading of the queues (every pending operation a blocking call)
//! deadlocks nobody; otherwise "undetermined", with each reason.

use mqd_model::diagnosis::{Doubt, RankFacts};
use mqd_model::{Finding, FindingKind, JobDump, RankSet, Snapshot, Wait};
use std::collections::BTreeMap;

/// The ranks the job has: its process table's size, else the largest COMM_WORLD a
/// dumped rank reports, and any rank a wait names.
fn job_ranks(job: &JobDump, waits: &[Wait]) -> RankSet {
    let world = job
        .ranks
        .iter()
        .flat_map(|r| r.communicators())
        .filter(|c| c.name == "MPI_COMM_WORLD")
        .map(|c| c.size)
        .max();
    let size = job
        .job_size
        .or_else(|| world.and_then(|s| u32::try_from(s).ok()))
        .unwrap_or(0);
    let mut ranks = RankSet::full(size);
    for w in waits {
        if let Some(t) = w.targets() {
            ranks.union_with(&t);
        }
    }
    ranks
}

/// What the queues leave open and the stacks tell.
pub(crate) struct Unseen<'a> {
    /// Ranks that would be deadlocked if their pending operations were blocking calls.
    pub unproven: RankSet,
    /// Ranks the stacks show running: whatever their queues, they block nobody now.
    pub running: &'a RankSet,
    /// Ranks whose stacks account for every thread: queues would add nothing that
    /// blocks.
    pub accounted: &'a RankSet,
    /// Ranks in collectives whose communicator is unknown.
    pub unknown_communicators: RankSet,
    /// Ranks without stacks.
    pub no_stacks: RankSet,
    /// Ranks not certainly running with a thread whose place is unknown.
    pub unknown_places: &'a BTreeMap<i32, String>,
    /// Ranks held by their own threads.
    pub self_blocked: RankSet,
    /// Ranks with a thread polling, and its call.
    pub polling: &'a BTreeMap<i32, String>,
}

/// Why "no deadlock" cannot be said of `job`.
pub(crate) fn doubts(
    job: &JobDump,
    facts: &BTreeMap<i32, RankFacts>,
    waits: &[Wait],
    findings: &[Finding],
    unseen: Unseen,
) -> Vec<Doubt> {
    let Unseen {
        unproven,
        running,
        accounted,
        unknown_communicators,
        no_stacks,
        unknown_places,
        self_blocked,
        polling,
    } = unseen;
    let seen = RankSet::from_i32s(facts.keys());
    let missing = job_ranks(job, waits).difference(&seen);
    let ranks_where = |f: &dyn Fn(&RankFacts) -> bool| -> RankSet {
        RankSet::from_i32s(facts.iter().filter(|(_, x)| f(x)).map(|(r, _)| r))
    };
    // A rank running outside MPI holds nobody up, whatever its queues; one whose every
    // blocked call's waits are known is seen whole without them.
    let failed = ranks_where(&|f| f.error.is_some())
        .difference(running)
        .difference(accounted);
    let unreadable = ranks_where(&|f| f.unreadable);
    let mut unknown = RankSet::new();
    for f in findings
        .iter()
        .filter(|f| f.kind == FindingKind::UnknownPeer)
    {
        unknown.union_with(&f.ranks);
    }
    let no_rank = job
        .ranks
        .iter()
        .filter(|r| r.rank < 0 && !r.duplicate)
        .count();
    let mut doubts = Vec::new();
    if !missing.is_empty() {
        doubts.push(Doubt::Missing {
            ranks: missing.clone(),
        });
    }
    if !failed.is_empty() {
        doubts.push(Doubt::Failed {
            ranks: failed.clone(),
        });
    }
    if no_rank > 0 {
        doubts.push(Doubt::NoWorldRank { processes: no_rank });
    }
    if !unreadable.is_empty() {
        doubts.push(Doubt::Unreadable { ranks: unreadable });
    }
    if !unknown.is_empty() {
        doubts.push(Doubt::UnknownPeers { ranks: unknown });
    }
    let mut mismatched = RankSet::new();
    for f in findings
        .iter()
        .filter(|f| f.kind == FindingKind::CollectiveMismatch)
    {
        mismatched.union_with(&f.ranks);
    }
    // The mismatch doubt says why those are not proven, the polling doubt why these.
    let unproven = unproven.difference(&mismatched);
    let polled = unproven.intersection(&RankSet::from_i32s(polling.keys()));
    let unproven = unproven.difference(&polled);
    if let Some(call) = polled.iter().next().and_then(|r| polling.get(&(r as i32))) {
        doubts.push(Doubt::Polling {
            ranks: polled.clone(),
            call: call.clone(),
        });
    }
    if !unproven.is_empty() {
        doubts.push(Doubt::Unproven { ranks: unproven });
    }
    if !mismatched.is_empty() {
        doubts.push(Doubt::Collectives {
            ranks: mismatched.clone(),
        });
    }
    let unknown_communicators = unknown_communicators.difference(&mismatched);
    if !unknown_communicators.is_empty() {
        doubts.push(Doubt::UnknownCommunicators {
            ranks: unknown_communicators,
        });
    }
    // Without a stack, a rank may be in a call no queue shows; ranks not dumped at all
    // are already missing or failed.
    let no_stacks = no_stacks.difference(&missing).difference(&failed);
    if !no_stacks.is_empty() {
        doubts.push(Doubt::NoStacks { ranks: no_stacks });
    }
    if let Some(example) = unknown_places.values().next() {
        doubts.push(Doubt::UnknownPlaces {
            ranks: RankSet::from_i32s(unknown_places.keys()),
            example: example.clone(),
        });
    }
    if !self_blocked.is_empty() {
        doubts.push(Doubt::SelfBlocked {
            ranks: self_blocked,
        });
    }
    if let Snapshot::Separate { why } = &job.snapshot {
        doubts.push(Doubt::Snapshot { why: why.clone() });
    }
    doubts
}
