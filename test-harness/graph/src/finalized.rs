//! Ranks others wait for in point-to-point that finalized or are finalizing: a message
//! from them never comes.

use mqd_model::{Certainty, Finding, FindingKind, RankSet, Subject, Wait, WaitKind, WaitTarget};

/// The finding of the point-to-point `waits` (the worst reading's) of ranks not
/// `finalizing` for ranks that are: definite when every waiter is in `deadlocked` (the
/// proof's) and every rank waited for `finalized` (MPI says so), else possible.
pub fn waits_on_finalized(
    waits: &[Wait],
    finalizing: &RankSet,
    finalized: &RankSet,
    deadlocked: &RankSet,
) -> Option<Finding> {
    let mut waited = RankSet::new();
    let mut waiters = RankSet::new();
    let mut edges = Vec::new();
    let mut evidence = Vec::new();
    for w in waits.iter().filter(|w| w.kind != WaitKind::Collective) {
        if let WaitTarget::Rank(t) = w.target
            && finalizing.contains_i32(t)
            && !finalizing.contains_i32(w.from)
        {
            waited.insert(t as u32);
            waiters.insert(w.from as u32);
            edges.push((w.from, t));
            evidence.extend(w.evidence.iter().cloned());
        }
    }
    if waiters.is_empty() {
        return None;
    }
    let blocked = waiters.is_subset(deadlocked) && waited.is_subset(finalized);
    edges.sort_unstable();
    edges.dedup();
    Some(Finding {
        kind: FindingKind::WaitsOnFinalized,
        certainty: if blocked {
            Certainty::Definite
        } else {
            Certainty::Possible
        },
        ranks: waited,
        subject: Subject::Finalized { waiters, blocked },
        communicators: Vec::new(),
        evidence,
        cycle: None,
        edges,
    })
}
