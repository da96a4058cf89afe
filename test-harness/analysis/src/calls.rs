//! What the stacks prove: a rank whose main thread is in a blocking MPI call cannot go on
//! until one of its pending operations completes. Its waits of the kind that call waits
//! for become proven: one of them exactly, several as one wait for any of their peers
//! (a rank in `MPI_Recv` with three receives pending is stuck only if all three are; the
//! queues do not say which one the call is).

use mqd_model::{CallClass, JobDump, Location, RankSet, Wait, WaitKind, WaitTarget};
use std::collections::BTreeMap;

/// Where the main thread of each rank is (its thread whose id is its pid, else its
/// first thread), for the ranks with stacks.
pub(crate) fn locations(job: &JobDump) -> BTreeMap<i32, Location> {
    job.ranks
        .iter()
        .filter(|r| r.rank >= 0 && !r.duplicate)
        .filter_map(|r| {
            let main = r
                .threads
                .iter()
                .find(|t| Some(t.tid) == r.pid)
                .or(r.threads.first())?;
            Some((r.rank, main.location_in(r.executable.as_deref())))
        })
        .collect()
}

/// The ranks whose stacks show them not blocked in MPI: outside it (computing), or in a
/// call that returns at once. Their pending operations block nobody now.
pub(crate) fn running(locations: &BTreeMap<i32, Location>) -> RankSet {
    RankSet::from_i32s(
        locations
            .iter()
            .filter(|(_, l)| match l {
                Location::Outside { .. } => true,
                Location::InMpi { class, .. } => !class.blocks(),
            })
            .map(|(r, _)| r),
    )
}

/// Whether a blocking call of `class` waits for a wait of `kind`.
fn waits_for(class: CallClass, kind: WaitKind) -> bool {
    match class {
        CallClass::BlockingReceive => kind == WaitKind::Receive,
        CallClass::BlockingSend => kind.is_message(),
        CallClass::SendReceive | CallClass::Wait => true,
        _ => false,
    }
}

/// The waits the stacks prove, beside those `waits` already mark blocked.
pub(crate) fn proven_by_stacks(waits: &[Wait], locations: &BTreeMap<i32, Location>) -> Vec<Wait> {
    let mut out = Vec::new();
    for (&rank, location) in locations {
        let Location::InMpi { class, .. } = location else {
            continue;
        };
        let candidates: Vec<&Wait> = waits
            .iter()
            .filter(|w| w.from == rank && !w.blocked && waits_for(*class, w.kind))
            .collect();
        match candidates.as_slice() {
            [] => {}
            [only] => out.push(Wait {
                blocked: true,
                ..(*only).clone()
            }),
            several => {
                // Stuck only if every candidate is: one wait for any of their peers.
                let mut peers = RankSet::new();
                for w in several {
                    match w.targets() {
                        Some(t) => peers.union_with(&t),
                        // A candidate that cannot be followed: nothing is proven.
                        None => {
                            peers = RankSet::new();
                            break;
                        }
                    }
                }
                if peers.is_empty() {
                    continue;
                }
                let first = several[0];
                out.push(Wait {
                    target: WaitTarget::AnyOf(peers),
                    evidence: several.iter().flat_map(|w| w.evidence.clone()).collect(),
                    blocked: true,
                    requests: several.iter().flat_map(|w| w.requests.clone()).collect(),
                    ..first.clone()
                });
            }
        }
    }
    out
}

/// Findings on collectives: ranks in a blocking collective while others are elsewhere,
/// and ranks in different collectives at once. Without the calls' communicators (their
/// arguments) they say "if they share the communicator".
pub(crate) fn collective_findings(locations: &BTreeMap<i32, Location>) -> Vec<mqd_model::Finding> {
    use mqd_model::{Certainty, Finding, FindingKind, Subject};
    let mut collectives: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut elsewhere: BTreeMap<String, RankSet> = BTreeMap::new();
    for (&rank, location) in locations {
        let Ok(r) = u32::try_from(rank) else { continue };
        match location {
            Location::InMpi {
                call,
                class: CallClass::Collective,
            } => {
                collectives.entry(call.clone()).or_default().insert(r);
            }
            Location::InMpi { call, .. } => {
                elsewhere.entry(format!("in {call}")).or_default().insert(r);
            }
            Location::Outside { function } => {
                let place = match function {
                    Some(f) => format!("not in MPI (in {f})"),
                    None => "not in MPI".into(),
                };
                elsewhere.entry(place).or_default().insert(r);
            }
        }
    }
    let finding = |kind, ranks, subject| {
        let certainty = if kind == FindingKind::CollectiveMismatch {
            Certainty::Possible
        } else {
            Certainty::Definite
        };
        Finding::unproven_by_operations(kind, certainty, ranks, subject)
    };
    let mut out = Vec::new();
    if collectives.len() > 1 {
        let mut ranks = RankSet::new();
        for set in collectives.values() {
            ranks.union_with(set);
        }
        out.push(finding(
            FindingKind::CollectiveMismatch,
            ranks,
            Subject::CollectiveMismatch {
                calls: collectives.clone().into_iter().collect(),
            },
        ));
    }
    for (call, ranks) in &collectives {
        // Ranks in another collective are elsewhere too.
        let mut others: Vec<(RankSet, String)> = elsewhere
            .iter()
            .map(|(p, s)| (s.clone(), p.clone()))
            .chain(
                collectives
                    .iter()
                    .filter(|(other, _)| *other != call)
                    .map(|(other, s)| (s.clone(), format!("in {other}"))),
            )
            .collect();
        others.sort();
        if elsewhere.is_empty() && collectives.len() > 1 {
            // Every rank is in one collective or another: the mismatch finding says it.
            continue;
        }
        out.push(finding(
            FindingKind::CollectiveWait,
            ranks.clone(),
            Subject::Collective {
                call: call.clone(),
                others,
            },
        ));
    }
    out
}

/// The ranks in blocking collectives.
pub(crate) fn in_collectives(locations: &BTreeMap<i32, Location>) -> RankSet {
    RankSet::from_i32s(
        locations
            .iter()
            .filter(|(_, l)| {
                matches!(
                    l,
                    Location::InMpi {
                        class: CallClass::Collective,
                        ..
                    }
                )
            })
            .map(|(r, _)| r),
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
) -> Option<mqd_model::Finding> {
    use mqd_model::{Certainty, Finding, FindingKind, Subject};
    let mut calls: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut finalized = RankSet::new();
    for r in job.ranks.iter().filter(|r| r.rank >= 0 && !r.duplicate) {
        match locations.get(&r.rank) {
            Some(Location::InMpi {
                class: CallClass::Finalize,
                ..
            }) => {
                finalized.insert(r.rank as u32);
            }
            Some(Location::InMpi { call, class })
                if r.outcome.is_err() && waits_for_messages(*class) =>
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

/// Ranks in or past `MPI_Finalize` (in it, their stacks say; past it, they have no
/// communicator left) that others wait for in point-to-point: those waits never end.
/// Definite when every waiter is blocked in an MPI call, else possible.
pub(crate) fn finalize_findings(
    job: &JobDump,
    waits: &[Wait],
    locations: &BTreeMap<i32, Location>,
) -> Vec<mqd_model::Finding> {
    use mqd_model::{Certainty, Finding, FindingKind, Subject};
    let mut finalized: RankSet = RankSet::from_i32s(
        locations
            .iter()
            .filter(|(_, l)| {
                matches!(
                    l,
                    Location::InMpi {
                        class: CallClass::Finalize,
                        ..
                    }
                )
            })
            .map(|(r, _)| r),
    );
    // Only with stacks: without them an empty process may not have called MPI_Init yet.
    if !locations.is_empty() {
        for r in &job.ranks {
            if r.rank >= 0 && !r.duplicate && r.outcome.as_ref().is_ok_and(Vec::is_empty) {
                finalized.insert(r.rank as u32);
            }
        }
    }
    if finalized.is_empty() {
        return Vec::new();
    }
    let mut waited = RankSet::new();
    let mut waiters = RankSet::new();
    let mut edges = Vec::new();
    let mut evidence = Vec::new();
    for w in waits {
        if let WaitTarget::Rank(t) = w.target
            && finalized.contains_i32(t)
            && !finalized.contains_i32(w.from)
        {
            waited.insert(t as u32);
            waiters.insert(w.from as u32);
            edges.push((w.from, t));
            evidence.extend(w.evidence.iter().cloned());
        }
    }
    if waiters.is_empty() {
        return Vec::new();
    }
    let blocked = waiters.iter().all(|r| {
        matches!(locations.get(&(r as i32)), Some(Location::InMpi { class, .. }) if class.blocks())
    });
    edges.sort_unstable();
    edges.dedup();
    vec![Finding {
        kind: FindingKind::WaitsOnFinalized,
        certainty: if blocked {
            Certainty::Definite
        } else {
            Certainty::Possible
        },
        ranks: waited,
        subject: Subject::Finalized { waiters, blocked },
        communicators: Vec::new(),
        evidence,
        cycle: None,
        edges,
    }]
}
