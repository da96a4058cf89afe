//! What the stacks prove: a rank whose main thread is in a blocking MPI call cannot go on
//! until one of its pending operations completes. Its waits of the kind that call waits
//! for become proven: one of them exactly, several as one wait for any of their peers
//! (a rank in `MPI_Recv` with three receives pending is stuck only if all three are; the
//! queues do not say which one the call is).

use mqd_model::{
    CallArguments, CallClass, JobDump, Location, RankDump, RankSet, ThreadStack, Wait, WaitKind,
    WaitTarget,
};
use std::collections::BTreeMap;

/// The main thread of a rank: the thread whose id is its pid, else its first.
fn main_thread(r: &RankDump) -> Option<&ThreadStack> {
    r.threads
        .iter()
        .find(|t| Some(t.tid) == r.pid)
        .or(r.threads.first())
}

/// The dumped ranks with a COMM_WORLD rank.
fn ranked(job: &JobDump) -> impl Iterator<Item = &RankDump> {
    job.ranks.iter().filter(|r| r.rank >= 0 && !r.duplicate)
}

/// Where the main thread of each rank is, for the ranks with stacks.
pub(crate) fn locations(job: &JobDump) -> BTreeMap<i32, Location> {
    ranked(job)
        .filter_map(|r| Some((r.rank, main_thread(r)?.location_in(r.executable.as_deref()))))
        .collect()
}

/// What the MPI call of each rank's main thread was given, where its frame says.
pub(crate) fn arguments(job: &JobDump) -> BTreeMap<i32, &CallArguments> {
    ranked(job)
        .filter_map(|r| Some((r.rank, main_thread(r)?.call.as_ref()?)))
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
                Location::Unknown => false,
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

/// MPICH's `MPI_ANY_SOURCE` and `MPI_ANY_TAG`, as the call's arguments hold them.
const ANY_SOURCE: i64 = -2;
const ANY_TAG: i64 = -1;

/// Whether wait `w` is the operation of a call given `args`: same communicator, peer
/// and tag where the arguments say them.
fn is_the_call(w: &Wait, args: &CallArguments, class: CallClass, job: &JobDump) -> bool {
    if let Some(address) = args.comm_address {
        let same = w.evidence.iter().any(|e| {
            e.op.resolve(job)
                .is_some_and(|(_, comm, _)| comm.unique_id == address)
        });
        if !same {
            return false;
        }
    }
    // A send-receive's peer and tag are its send's: its receive may differ.
    if class == CallClass::SendReceive {
        return true;
    }
    if let Some(peer) = args.peer {
        let peer = if peer == ANY_SOURCE { -1 } else { peer };
        if w.peer_local != peer {
            return false;
        }
    }
    if let Some(tag) = args.tag {
        let tag = (tag != ANY_TAG).then_some(tag);
        if w.tag != tag {
            return false;
        }
    }
    true
}

/// The request objects a wait call was given, when every handle was followed (one that
/// was not could be any pending operation).
fn followed_requests(args: &CallArguments) -> Option<Vec<u64>> {
    if args.requests.is_empty() {
        return None;
    }
    args.requests.iter().copied().collect()
}

/// The waits the stacks prove, beside those `waits` already mark blocked. Where the
/// call's arguments are known, only the operations they name.
pub(crate) fn proven_by_stacks(
    job: &JobDump,
    waits: &[Wait],
    locations: &BTreeMap<i32, Location>,
    arguments: &BTreeMap<i32, &CallArguments>,
) -> Vec<Wait> {
    let mut out = Vec::new();
    for (&rank, location) in locations {
        let Location::InMpi { class, call } = location else {
            continue;
        };
        let mut candidates: Vec<&Wait> = waits
            .iter()
            .filter(|w| w.from == rank && !w.blocked && waits_for(*class, w.kind))
            .collect();
        if let Some(args) = arguments.get(&rank) {
            // None named: the call's operation is no longer pending (matched, its data
            // on the way) and proves nothing.
            candidates.retain(|w| is_the_call(w, args, *class, job));
            if let Some(requests) = followed_requests(args) {
                candidates.retain(|w| w.requests.iter().any(|r| requests.contains(r)));
                if call == "MPI_Waitall" {
                    // Every request must complete: each one holds the rank.
                    out.extend(candidates.iter().map(|w| Wait {
                        blocked: true,
                        ..(*w).clone()
                    }));
                    continue;
                }
            }
        }
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
    waits_for(class, WaitKind::Receive) || waits_for(class, WaitKind::Send)
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
