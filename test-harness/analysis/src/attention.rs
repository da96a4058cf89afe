//! The summary when nothing is deadlocked.

use mqd_model::diagnosis::RankFacts;
use mqd_model::{Finding, RankSet, Wait};
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
    mqd_scale::shared::summary_finding(waits, facts, seen_all, running)
}
