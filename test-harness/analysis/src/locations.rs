//! Where each rank's main thread is, for plans and the words of findings.

use mqd_model::{JobDump, Location, RankDump, ThreadStack};
use std::collections::BTreeMap;

/// The main thread of a rank: the thread whose id is its pid, else its first.
pub fn main_thread(r: &RankDump) -> Option<&ThreadStack> {
    r.threads
        .iter()
        .find(|t| Some(t.tid) == r.pid)
        .or(r.threads.first())
}

/// The dumped ranks with a COMM_WORLD rank.
pub(crate) fn ranked(job: &JobDump) -> impl Iterator<Item = &RankDump> {
    job.ranks.iter().filter(|r| r.rank >= 0 && !r.duplicate)
}

/// Where the main thread of each rank is, for the ranks with stacks.
pub(crate) fn locations(job: &JobDump) -> BTreeMap<i32, Location> {
    ranked(job)
        .filter_map(|r| Some((r.rank, main_thread(r)?.location_in(r.executable.as_deref()))))
        .collect()
}
