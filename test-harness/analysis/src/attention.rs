//! The summary when nothing is deadlocked.

use mqd_model::diagnosis::RankFacts;
use mqd_model::{Finding, RankSet, Wait};
use mqd_scale::shared::{clean_finding, dumped_and_failed, no_deadlock_finding, summary_failed};
use std::collections::BTreeMap;

/// "No deadlock" or "nothing waits", when nothing is deadlocked.
pub(crate) fn summary_finding(
    waits: &[Wait],
    facts: &BTreeMap<i32, RankFacts>,
    deadlocked: &RankSet,
    seen_all: bool,
    running: &RankSet,
) -> Option<Finding> {
    if !deadlocked.is_empty() {
        return None;
    }
    if !waits.is_empty() {
        return no_deadlock_finding(waits, facts, seen_all, running);
    }
    let (dumped, failed) = dumped_and_failed(facts);
    let failed = summary_failed(&dumped, &failed, running)?;
    let in_transit = facts.values().any(|f| f.transit > 0);
    Some(clean_finding(dumped, failed, in_transit, seen_all, running))
}
