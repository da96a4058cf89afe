//! Findings from the calls ranks are in: ranks blocked in MPI whose queues could not be
//! read; ranks others wait for that finalized.

use crate::locations::ranked;
use crate::plan::Plans;
use mqd_model::{CallClass, Certainty, Finding, FindingKind, JobDump, Location, RankSet, Subject};
use std::collections::BTreeMap;

/// Whether a blocking call of `class` waits for point-to-point messages or requests.
fn waits_for_messages(class: CallClass) -> bool {
    matches!(
        class,
        CallClass::BlockingReceive
            | CallClass::BlockingSend
            | CallClass::SendReceive
            | CallClass::Wait
    )
}

/// Ranks blocked in point-to-point or wait calls whose queues could not be read (an MPI
/// without debugger support): the stacks prove them blocked, but not on whom. A deadlock
/// is possible; when no rank of the job runs, one is likely unless messages are still in
/// flight.
pub(crate) fn blocked_without_queues(
    job: &JobDump,
    locations: &BTreeMap<i32, Location>,
    running: &RankSet,
) -> Option<Finding> {
    let mut calls: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut finalized = RankSet::new();
    for r in ranked(job) {
        match locations.get(&r.rank) {
            Some(Location::InMpi {
                class: CallClass::Finalize,
                ..
            }) => {
                finalized.insert(r.rank as u32);
            }
            // Whom a call waits for is known where its arguments were read.
            Some(Location::InMpi { call, class })
                if r.outcome.is_err()
                    && waits_for_messages(*class)
                    && !r.threads.iter().any(|t| {
                        t.call.as_ref().is_some_and(|c| {
                            c.peer.is_some()
                                && (c.comm_address.is_some()
                                    || c.context_id.is_some()
                                    || c.predefined.is_some())
                        })
                    }) =>
            {
                calls.entry(call.clone()).or_default().insert(r.rank as u32);
            }
            _ => {}
        }
    }
    if calls.is_empty() {
        return None;
    }
    let mut ranks = RankSet::new();
    for set in calls.values() {
        ranks.union_with(set);
    }
    Some(Finding::unproven_by_operations(
        FindingKind::BlockedWithoutQueues,
        Certainty::Possible,
        ranks,
        Subject::BlockedWithoutQueues {
            calls: calls.into_iter().collect(),
            running: running.clone(),
            finalized,
        },
    ))
}

/// Ranks that finalized (MPI says so) or are in `MPI_Finalize` that others wait for in
/// point-to-point: a message from them never comes. Definite when the waits that name
/// them are proven (the waiters are blocked on them and they finalized), else possible.
pub(crate) fn finalize_findings(
    plans: &Plans,
    locations: &BTreeMap<i32, Location>,
    deadlocked: &RankSet,
) -> Vec<Finding> {
    let mut finalizing = plans.finalized.clone();
    for (&r, l) in locations {
        if let (
            Location::InMpi {
                class: CallClass::Finalize,
                ..
            },
            Ok(r),
        ) = (l, u32::try_from(r))
        {
            finalizing.insert(r);
        }
    }
    if finalizing.is_empty() {
        return Vec::new();
    }
    mqd_graph::waits_on_finalized(&plans.may.waits, &finalizing, &plans.finalized, deadlocked)
        .into_iter()
        .collect()
}
