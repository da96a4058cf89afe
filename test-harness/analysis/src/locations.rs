//! Where each rank's main thread is, for plans and the words of findings.

use mqd_model::{JobDump, Location, RankDump};
pub(crate) use mqd_scale::shared::{call_line, main_thread};
use std::collections::BTreeMap;

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

/// Where the first rank of `ranks` that is in `call` (a name, maybe with its root or
/// size after it) made it.
pub(crate) fn line_of_call(
    job: &JobDump,
    ranks: &mqd_model::RankSet,
    call: &str,
) -> Option<String> {
    let mut dumps: Vec<&RankDump> = ranked(job).collect();
    dumps.sort_by_key(|d| d.rank);
    mqd_scale::shared::line_of_call(dumps, ranks, call)
}
