//! What a summary of a job nothing deadlocks says, and whether every rank was seen.

use mqd_model::diagnosis::{Doubt, Subject};
use mqd_model::{Certainty, Finding, FindingKind, RankSet};

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
