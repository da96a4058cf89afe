//! Hangs inside a process that its OpenMP runtime explains: every thread of a rank
//! waits for another thread of it, and the runtime's states say on what (threads at a
//! barrier that others cannot reach because they wait for a lock). One snapshot cannot
//! prove such a hang (a lock released a moment ago has a waiter that has not noticed),
//! so the finding is possible, never a deadlock.

use mqd_model::{Finding, JobDump, RankSet};
use mqd_scale::shared::openmp_findings;

/// The findings for `self_blocked` ranks (every thread waits for another of its process)
/// with OpenMP states; ranks whose states agree make one finding.
pub(crate) fn waits_within(job: &JobDump, self_blocked: &RankSet) -> Vec<Finding> {
    let ranks: Vec<(RankSet, &mqd_model::RankDump)> = job
        .ranks
        .iter()
        .filter_map(|r| Some((RankSet::single(u32::try_from(r.rank).ok()?), r)))
        .collect();
    openmp_findings(ranks.iter().map(|(set, r)| (set, *r)), self_blocked)
}
