//! Hangs inside a process that its OpenMP runtime explains: every thread of a rank
//! waits for another thread of it, and the runtime's states say on what (threads at a
//! barrier that others cannot reach because they wait for a lock). One snapshot cannot
//! prove such a hang (a lock released a moment ago has a waiter that has not noticed),
//! so the finding is possible, never a deadlock.

use mqd_model::{Certainty, Finding, FindingKind, JobDump, RankSet, Subject};
use std::collections::BTreeMap;

/// Each state with the numbers of its threads.
type States = Vec<(String, Vec<i64>)>;

/// The findings for `self_blocked` ranks (every thread waits for another of its process)
/// with OpenMP states; ranks whose states agree make one finding.
pub(crate) fn waits_within(job: &JobDump, self_blocked: &RankSet) -> Vec<Finding> {
    let mut groups: BTreeMap<(States, bool), RankSet> = BTreeMap::new();
    for r in &job.ranks {
        let Ok(rank) = u32::try_from(r.rank) else {
            continue;
        };
        if !self_blocked.contains(rank) {
            continue;
        }
        let mut states: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut locks: Vec<u64> = Vec::new();
        for t in &r.threads {
            let Some(openmp) = &t.openmp else { continue };
            let Some(state) = &openmp.state else { continue };
            states
                .entry(state.clone())
                .or_default()
                .push(openmp.thread_num.unwrap_or(-1));
            if state == "wait_lock" || state == "wait_mutex" {
                locks.extend(openmp.wait_id);
            }
        }
        if states.is_empty() {
            continue;
        }
        locks.sort_unstable();
        locks.dedup();
        let mut states: States = states.into_iter().collect();
        for (_, nums) in &mut states {
            nums.sort_unstable();
        }
        states.sort_by_key(|(_, nums)| nums.first().copied());
        groups
            .entry((states, locks.len() == 1))
            .or_default()
            .insert(rank);
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
