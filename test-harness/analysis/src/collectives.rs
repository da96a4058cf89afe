//! Collectives as wait-for nodes: ranks in a blocking collective on a communicator wait
//! for the members that are not in it. The communicator comes from the call's arguments
//! (its object, matched to the rank's communicators; or MPICH's `MPI_COMM_WORLD`
//! handle); without them, findings say "if they share its communicator" and the
//! verdict stays undetermined.
//!
//! These waits are never proven: a member outside the collective may already have left
//! it while its last messages are on their way, so they make deadlocks possible, not
//! certain.

use mqd_model::{Certainty, CommKey, Finding, FindingKind, Location, RankSet, Subject, Wait};
use mqd_scale::shared::{Instance, collective_waits, instance_names, place};
use std::collections::{BTreeMap, HashMap};

/// A communicator collectives run on, the same in every member.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Members {
    /// Its identity.
    pub key: CommKey,
    /// Its members, COMM_WORLD ranks in local rank order.
    pub members: mqd_model::CommGroup,
}

/// A thread in a blocking collective (or `MPI_Init`, `MPI_Finalize`, over the job).
#[derive(Debug, Clone)]
pub(crate) struct CollThread {
    pub rank: i32,
    pub tid: i32,
    /// The call, as its stack names it.
    pub call: String,
    /// Its root, for a rooted collective, when its arguments say.
    pub root: Option<i64>,
    /// Its message's size in bytes, when its arguments say: members whose sizes differ
    /// are in no one instance (an erroneous program that hangs).
    pub bytes: Option<u64>,
    /// Its communicator, when its arguments (or the collective's own messages in the
    /// rank's queues) say it.
    pub comm: Option<Members>,
}

/// What the collectives show.
#[derive(Default)]
pub(crate) struct Collectives {
    pub findings: Vec<Finding>,
    /// What each thread in a collective waits for: the members of its communicator not
    /// in the same collective (none: it completes); `None` when its communicator is
    /// unknown.
    pub by_thread: HashMap<(i32, i32), Option<Vec<Wait>>>,
    /// Ranks in collectives whose communicator is unknown.
    pub unknown: RankSet,
}

/// The same collective: its call (large-count bindings are the call), root and size.
fn instance(t: &CollThread) -> Instance {
    let name =
        mqd_model::calls::canonical(&t.call).map_or_else(|| t.call.clone(), |c| c.name.to_owned());
    (name, t.root, t.bytes)
}

/// The findings and waits of the threads in blocking collectives; `finalized` ranks
/// never come.
pub(crate) fn collectives(
    threads: &[CollThread],
    locations: &BTreeMap<i32, Location>,
    finalized: &RankSet,
) -> Collectives {
    let mut known: BTreeMap<&Members, BTreeMap<Instance, RankSet>> = BTreeMap::new();
    let mut unknown: BTreeMap<String, RankSet> = BTreeMap::new();
    for t in threads {
        match &t.comm {
            Some(c) => {
                known
                    .entry(c)
                    .or_default()
                    .entry(instance(t))
                    .or_default()
                    .insert(t.rank as u32);
            }
            None => {
                unknown
                    .entry(t.call.clone())
                    .or_default()
                    .insert(t.rank as u32);
            }
        }
    }
    let mut out = Collectives::default();
    for (comm, calls) in &known {
        on_communicator(comm, calls, locations, finalized, &mut out);
    }
    for t in threads {
        let waits = t.comm.as_ref().map(|c| {
            let outside = RankSet::from_i32s(c.members.iter()).difference(&known[c][&instance(t)]);
            collective_waits(t.rank, &c.key, &c.members, &outside)
        });
        out.by_thread.insert((t.rank, t.tid), waits);
    }
    if !unknown.is_empty() {
        for set in unknown.values() {
            out.unknown.union_with(set);
        }
        unnamed(&unknown, locations, &mut out);
    }
    out
}

fn finding(kind: FindingKind, ranks: RankSet, subject: Subject) -> Finding {
    let certainty = if kind == FindingKind::CollectiveMismatch {
        Certainty::Possible
    } else {
        Certainty::Definite
    };
    Finding::unproven_by_operations(kind, certainty, ranks, subject)
}

/// Ranks in different collectives at once, on `comm` when the calls say so.
fn mismatch(calls: &BTreeMap<String, RankSet>, comm: Option<CommKey>) -> Finding {
    let mut ranks = RankSet::new();
    for set in calls.values() {
        ranks.union_with(set);
    }
    finding(
        FindingKind::CollectiveMismatch,
        ranks,
        Subject::CollectiveMismatch {
            calls: calls.clone().into_iter().collect(),
            comm,
            at: Vec::new(),
        },
    )
}

/// The collectives on one known communicator.
fn on_communicator(
    comm: &Members,
    calls: &BTreeMap<Instance, RankSet>,
    locations: &BTreeMap<i32, Location>,
    finalized: &RankSet,
    out: &mut Collectives,
) {
    let calls = instance_names(calls);
    let members = RankSet::from_i32s(comm.members.iter());
    if calls.len() > 1 {
        out.findings.push(mismatch(&calls, Some(comm.key.clone())));
    }
    for (call, ranks) in &calls {
        let absent = members.difference(ranks);
        // Where the absent members are.
        let mut places: BTreeMap<String, RankSet> = BTreeMap::new();
        for m in absent.iter() {
            let where_ = if finalized.contains(m) {
                "finalized (MPI_Finalize returned)".to_owned()
            } else {
                locations
                    .get(&(m as i32))
                    .map_or_else(|| "not seen".to_owned(), place)
            };
            places.entry(where_).or_default().insert(m);
        }
        let mut others: Vec<(RankSet, String)> = places.into_iter().map(|(p, s)| (s, p)).collect();
        others.sort();
        let only_other_collectives = !absent.is_empty()
            && absent.iter().all(|m| {
                calls
                    .iter()
                    .any(|(other, set)| other != call && set.contains(m))
            });
        // Everyone is in one collective or another: the mismatch finding says it.
        if !only_other_collectives && !absent.is_empty() {
            out.findings.push(finding(
                FindingKind::CollectiveWait,
                ranks.clone(),
                Subject::Collective {
                    call: call.clone(),
                    others,
                    comm: Some(comm.key.clone()),
                },
            ));
        }
    }
}

/// Collectives whose communicator is unknown: where the others are, "if they share its
/// communicator".
fn unnamed(
    collectives: &BTreeMap<String, RankSet>,
    locations: &BTreeMap<i32, Location>,
    out: &mut Collectives,
) {
    let mut elsewhere: BTreeMap<String, RankSet> = BTreeMap::new();
    for (&rank, location) in locations {
        let Ok(r) = u32::try_from(rank) else { continue };
        if collectives.values().any(|s| s.contains(r)) {
            continue;
        }
        elsewhere.entry(place(location)).or_default().insert(r);
    }
    if collectives.len() > 1 {
        out.findings.push(mismatch(collectives, None));
    }
    for (call, ranks) in collectives {
        if elsewhere.is_empty() && collectives.len() > 1 {
            // Every rank is in one collective or another: the mismatch finding says it.
            continue;
        }
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
        out.findings.push(finding(
            FindingKind::CollectiveWait,
            ranks.clone(),
            Subject::Collective {
                call: call.clone(),
                others,
                comm: None,
            },
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{
        CallArguments, Communicator, JobDump, Queue, RankDump, ThreadStack, WaitKind, WaitTarget,
    };
    use mqd_scale::shared::COMM_WORLD_HANDLE;

    const WORLD_AT: u64 = 0x1000;

    /// A rank whose main thread is in `call` (or computing when `None`), with COMM_WORLD
    /// of `n` ranks at `WORLD_AT` when `queues`.
    fn rank(r: i32, n: i32, call: Option<&str>, queues: bool) -> RankDump {
        let frames = match call {
            Some(c) => vec!["poll", c, "main"],
            None => vec!["solve", "main"],
        };
        RankDump {
            mpi: mqd_model::MpiState::default(),
            rank: r,
            pid: Some(100 + r),
            host: None,
            executable: None,
            message: None,
            lists_blocking_sends: None,
            signal: None,
            duplicate: false,
            threads: vec![ThreadStack::named(
                100 + r,
                &frames,
                call.map(|c| CallArguments {
                    function: c.into(),
                    comm: Some(COMM_WORLD_HANDLE),
                    comm_address: Some(WORLD_AT),
                    context_id: Some(0),
                    // A rooted collective's instance needs its root.
                    root: (c == "MPI_Bcast").then_some(0),
                    ..CallArguments::default()
                }),
            )],
            outcome: if queues {
                Ok(vec![Communicator {
                    context: None,
                    unique_id: WORLD_AT,
                    local_rank: i64::from(r),
                    size: i64::from(n),
                    name: "MPI_COMM_WORLD".into(),
                    group: Some((0..n).collect()),
                    group_error: None,
                    pending_receives: Queue::Operations(Vec::new()),
                    unexpected_messages: Queue::Operations(Vec::new()),
                    pending_sends: Queue::Operations(Vec::new()),
                }])
            } else {
                Err("no queues".into())
            },
            notes: Vec::new(),
        }
    }

    fn job(ranks: Vec<RankDump>, size: Option<u32>) -> JobDump {
        JobDump {
            job_size: size,
            ..JobDump::of_ranks(ranks)
        }
    }

    fn run(job: &JobDump) -> Collectives {
        let s = crate::scan::scan(job);
        crate::plan::plans(job, &s).collectives
    }

    /// Every thread's waits, by waiting rank.
    fn waits(c: &Collectives) -> Vec<Wait> {
        let mut all: Vec<Wait> = c.by_thread.values().flatten().flatten().cloned().collect();
        all.sort_by_key(|w| (w.from, w.target.clone()));
        all
    }

    #[test]
    fn members_outside_the_collective_are_waited_for() {
        let j = job(
            (0..4)
                .map(|r| rank(r, 4, (r < 3).then_some("MPI_Allreduce"), true))
                .collect(),
            None,
        );
        let c = run(&j);
        assert!(c.unknown.is_empty());
        let edges: Vec<(i32, WaitTarget)> = waits(&c)
            .iter()
            .map(|w| (w.from, w.target.clone()))
            .collect();
        assert_eq!(
            edges,
            (0..3).map(|r| (r, WaitTarget::Rank(3))).collect::<Vec<_>>()
        );
        assert!(
            waits(&c)
                .iter()
                .all(|w| !w.blocked && w.kind == WaitKind::Collective)
        );
        let Subject::Collective { comm, others, .. } = &c.findings[0].subject else {
            panic!("{:?}", c.findings);
        };
        assert_eq!(comm.as_ref().map(|k| &*k.name), Some("MPI_COMM_WORLD"));
        assert_eq!(others[0].1, "not in MPI (in solve)");
    }

    #[test]
    fn a_rooted_collective_whose_root_is_unknown_is_no_known_instance() {
        let mut j = job(
            (0..4)
                .map(|r| rank(r, 4, Some("MPI_Bcast"), true))
                .collect(),
            None,
        );
        for r in &mut j.ranks {
            r.threads[0].call.as_mut().unwrap().root = None;
        }
        let c = run(&j);
        assert_eq!(
            c.unknown,
            RankSet::full(4),
            "the same call, maybe not the same instance"
        );
        assert!(waits(&c).is_empty());
    }

    #[test]
    fn members_of_one_collective_with_different_sizes_are_a_mismatch() {
        let mut j = job(
            (0..4)
                .map(|r| rank(r, 4, Some("MPI_Allreduce"), true))
                .collect(),
            None,
        );
        for r in &mut j.ranks {
            r.threads[0].call.as_mut().unwrap().bytes = Some(if r.rank == 0 { 8 } else { 4 });
        }
        let c = run(&j);
        let kinds: Vec<FindingKind> = c.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::CollectiveMismatch]);
        let Subject::CollectiveMismatch { calls, .. } = &c.findings[0].subject else {
            panic!("{:?}", c.findings);
        };
        let names: Vec<&str> = calls.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            names,
            ["MPI_Allreduce (4 bytes)", "MPI_Allreduce (8 bytes)"]
        );
    }

    #[test]
    fn different_collectives_on_one_communicator_are_a_mismatch() {
        let j = job(
            (0..4)
                .map(|r| {
                    let call = if r == 0 { "MPI_Barrier" } else { "MPI_Bcast" };
                    rank(r, 4, Some(call), true)
                })
                .collect(),
            None,
        );
        let c = run(&j);
        let kinds: Vec<FindingKind> = c.findings.iter().map(|f| f.kind).collect();
        // Everyone is in a collective: the mismatch says it all.
        assert_eq!(kinds, [FindingKind::CollectiveMismatch]);
        assert_eq!(c.findings[0].certainty, Certainty::Possible);
        // Rank 0 waits for 1-3, and each of them for rank 0.
        assert_eq!(waits(&c).len(), 6);
    }

    #[test]
    fn without_queues_only_comm_world_is_known_by_its_handle() {
        // The job's size says who COMM_WORLD's members are.
        let j = job(
            (0..3)
                .map(|r| rank(r, 3, (r < 2).then_some("MPI_Allreduce"), false))
                .collect(),
            Some(3),
        );
        let c = run(&j);
        assert!(c.unknown.is_empty());
        assert_eq!(waits(&c).len(), 2);
        // Without the size, the communicator's members are unknown.
        let j = job(
            (0..3)
                .map(|r| rank(r, 3, (r < 2).then_some("MPI_Allreduce"), false))
                .collect(),
            None,
        );
        let c = run(&j);
        assert_eq!(c.unknown, RankSet::from_i32s([0, 1]));
        assert!(waits(&c).is_empty());
        let Subject::Collective { comm: None, .. } = &c.findings[0].subject else {
            panic!("{:?}", c.findings);
        };
    }
}
