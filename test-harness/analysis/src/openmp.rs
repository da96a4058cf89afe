//! Hangs inside a process that its OpenMP runtime explains: every thread of a rank
//! waits for another thread of it, and the runtime's states say on what (threads at a
//! barrier that others cannot reach because they wait for a lock). One snapshot cannot
//! prove such a hang (a lock released a moment ago has a waiter that has not noticed),
//! so the finding is possible, never a deadlock.

use mqd_model::{Certainty, Finding, FindingKind, JobDump, RankSet, Subject};
use mqd_scale::shared::{OpenMpStates, openmp_states};
use std::collections::BTreeMap;

/// The findings for `self_blocked` ranks (every thread waits for another of its process)
/// with OpenMP states; ranks whose states agree make one finding.
pub(crate) fn waits_within(job: &JobDump, self_blocked: &RankSet) -> Vec<Finding> {
    let mut groups: BTreeMap<(OpenMpStates, bool), RankSet> = BTreeMap::new();
    for r in &job.ranks {
        let Ok(rank) = u32::try_from(r.rank) else {
            continue;
        };
        if !self_blocked.contains(rank) {
            continue;
        }
        if let Some(key) = openmp_states(r) {
            groups.entry(key).or_default().insert(rank);
        }
    }
    groups
        .into_iter()
        .map(|((states, one_lock), ranks)| {
            Finding::unproven_by_operations(
                FindingKind::OpenMpWait,
                Certainty::Possible,
                ranks,
                Subject::OpenMpWait { states, one_lock },
            )
        })
        .collect()
}
