//! What a summary of a job nothing deadlocks says, and whether every rank was seen.

use mqd_model::diagnosis::{Doubt, RankFacts, Subject};
use mqd_model::{Certainty, Finding, FindingKind, RankSet, Wait};
use std::collections::BTreeMap;

/// Every rank seen and every wait followed: no doubt says a rank was missed or a peer
/// is unknown (the verdict says what else is open).
pub fn seen_all(doubts: &[Doubt]) -> bool {
    !doubts.iter().any(|d| {
        matches!(
            d,
            Doubt::Missing { .. }
                | Doubt::Failed { .. }
                | Doubt::NoWorldRank { .. }
                | Doubt::Unreadable { .. }
                | Doubt::UnknownPeers { .. }
        )
    })
}

/// The failed ranks a summary of a job nothing deadlocks names (those the stacks show
/// running are no caveat: they block nobody); `None` when no queue was seen and failed
/// ranks may still run: the other findings say what is known.
pub fn summary_failed(dumped: &RankSet, failed: &RankSet, running: &RankSet) -> Option<RankSet> {
    let failed = failed.difference(running);
    (!dumped.is_empty() || failed.is_empty()).then_some(failed)
}

/// Nothing waits: every dumped rank is clean.
pub fn clean_finding(
    dumped: RankSet,
    failed: RankSet,
    in_transit: bool,
    seen_all: bool,
    running: &RankSet,
) -> Finding {
    Finding::unproven_by_operations(
        FindingKind::Clean,
        Certainty::Definite,
        dumped,
        Subject::Clean {
            in_transit,
            failed,
            seen_all,
            running: running.clone(),
        },
    )
}

/// The ranks of `facts` read, and those that could not be.
pub fn dumped_and_failed(facts: &BTreeMap<i32, RankFacts>) -> (RankSet, RankSet) {
    let (mut dumped, mut failed) = (RankSet::new(), RankSet::new());
    for (&r, f) in facts {
        let Ok(r) = u32::try_from(r) else { continue };
        let set = if f.error.is_some() {
            &mut failed
        } else {
            &mut dumped
        };
        set.insert(r);
    }
    (dumped, failed)
}

/// "No deadlock": the queues' `waits` (not empty) deadlock nobody; `facts` are each
/// rank's. `None` where no queue was seen and failed ranks may still run.
pub fn no_deadlock_finding(
    waits: &[Wait],
    facts: &BTreeMap<i32, RankFacts>,
    seen_all: bool,
    running: &RankSet,
) -> Option<Finding> {
    let (dumped, failed) = dumped_and_failed(facts);
    let failed = summary_failed(&dumped, &failed, running)?;
    let from = RankSet::from_i32s(waits.iter().map(|w| &w.from));
    let running = from.intersection(running);
    Some(Finding::unproven_by_operations(
        FindingKind::NoDeadlock,
        Certainty::Definite,
        from,
        Subject::NoDeadlock {
            waits: waits.len(),
            failed,
            seen_all,
            running,
        },
    ))
}

/// The summary of a job nothing deadlocks: "no deadlock" where the queues show `waits`,
/// else "nothing waits".
pub fn summary_finding(
    waits: &[Wait],
    facts: &BTreeMap<i32, RankFacts>,
    seen_all: bool,
    running: &RankSet,
) -> Option<Finding> {
    if !waits.is_empty() {
        return no_deadlock_finding(waits, facts, seen_all, running);
    }
    let (dumped, failed) = dumped_and_failed(facts);
    let failed = summary_failed(&dumped, &failed, running)?;
    let in_transit = facts.values().any(|f| f.transit > 0);
    Some(clean_finding(dumped, failed, in_transit, seen_all, running))
}
