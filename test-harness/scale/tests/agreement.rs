//! The analysis on random jobs: held to what their ranks truly do (never a deadlock of a
//! rank that may move, never "no deadlock" where ranks are stuck for good), and its
//! ranks merged into classes as agents merge them held to the same ranks each a class of
//! its own; and jobs of a million ranks.

use mqd_model::diagnosis::{Doubt, Verdict};
use mqd_model::{
    Acquisition, CallArguments, ClassJob, Communicator, ContextIds, Diagnosis, FailedRanks,
    Finding, FindingKind, JobDump, LibraryInfo, MpiPhase, MpiState, Operation, Queue, RankClass,
    RankDump, SenderState, ThreadStack,
};
use mqd_model::{RankSet, Snapshot};
use mqd_scale::shared::{ANY_SOURCE, COMM_WORLD_HANDLE, PROC_NULL};
use mqd_scale::{HeldBy, HeldClass, diagnose_classes, finding_ranks_of, in_full};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// The findings the class analysis gives in full, by kind (in their order within it).
fn in_full_of(findings: &[Finding]) -> Vec<&Finding> {
    let mut out: Vec<&Finding> = findings.iter().filter(|f| in_full(f)).collect();
    out.sort_by_key(|f| f.kind);
    out
}

/// What a generated rank does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Does {
    Computes,
    ReceivesFromRight(u32),
    ReceivesFrom(u32),
    ReceivesFromAny,
    ReceivesFromNobody,
    InCollective(&'static str),
    /// In `MPI_Bcast` from this root.
    Bcasts(i64),
    /// In this collective, its communicator (or for `MPI_Bcast`, its root) not read.
    InCollectiveSomewhere(&'static str),
    /// Receives from its right neighbour on a communicator of the ranks of its parity.
    ReceivesOnHalf,
    /// Receives from its right neighbour in its row, a communicator of one split's rows
    /// of four (the last row what is left).
    ReceivesOnRow,
    /// Receives from any source of its row.
    ReceivesAnyOnRow,
    /// Receives from any source of the ranks of its parity.
    ReceivesAnyOnHalf,
    /// In this collective on a duplicate of `MPI_COMM_WORLD`.
    InCollectiveOnDup(&'static str),
    WaitsForItsThreads,
    InUnknownCall,
    Polls,
    /// Receives from its k-th right neighbour; its queues could not be read.
    UnreadReceivesFromRight(u32),
    /// In `MPI_Recv`, neither its queues nor its call's arguments read.
    UnreadBlocked,
    Finalized,
    InFinalize,
    InInit,
    InSend(u32),
    SendsRight(u32, i64),
    Exchanges(u32, u32),
    WithoutStack,
    Failed,
    Missing,
}

fn does(n: u32) -> impl Strategy<Value = Does> {
    prop_oneof![
        2 => Just(Does::Computes),
        4 => (1..3u32).prop_map(Does::ReceivesFromRight),
        2 => (0..n).prop_map(Does::ReceivesFrom),
        1 => Just(Does::ReceivesFromAny),
        1 => Just(Does::ReceivesFromNobody),
        3 => Just(Does::InCollective("MPI_Allreduce")),
        1 => Just(Does::InCollective("MPI_Barrier")),
        1 => Just(Does::InCollectiveOnDup("MPI_Barrier")),
        1 => Just(Does::ReceivesOnHalf),
        2 => Just(Does::ReceivesOnRow),
        1 => Just(Does::ReceivesAnyOnRow),
        1 => Just(Does::ReceivesAnyOnHalf),
        1 => (0..2i64).prop_map(Does::Bcasts),
        1 => prop_oneof![Just("MPI_Barrier"), Just("MPI_Allreduce"), Just("MPI_Bcast")]
            .prop_map(Does::InCollectiveSomewhere),
        1 => Just(Does::WaitsForItsThreads),
        1 => Just(Does::InUnknownCall),
        1 => Just(Does::Polls),
        1 => Just(Does::Finalized),
        1 => (1..3u32).prop_map(Does::UnreadReceivesFromRight),
        1 => Just(Does::UnreadBlocked),
        1 => Just(Does::InFinalize),
        1 => Just(Does::InInit),
        1 => (0..n).prop_map(Does::InSend),
        2 => (1..3u32, 7..9i64).prop_map(|(k, tag)| Does::SendsRight(k, tag)),
        2 => (1..3u32, 0..3u32).prop_map(|(to, from)| Does::Exchanges(to, from)),
        1 => Just(Does::WithoutStack),
        1 => Just(Does::Failed),
        1 => Just(Does::Missing),
    ]
}

/// The address of a duplicate of `MPI_COMM_WORLD`'s object.
const DUP: u64 = 0x4000;
/// The address of a communicator of the ranks of one parity.
const HALF: u64 = 0x5000;

/// The address of a communicator of one row of four.
const ROW: u64 = 0x6000;

/// The ranks of `r`'s row of four among `n`, in order.
fn row(r: u32, n: u32) -> Vec<i32> {
    (r - r % 4..(r - r % 4 + 4).min(n))
        .map(|m| m as i32)
        .collect()
}

/// A communicator of `world`'s job (its address, name and context id) whose `members`
/// hold this rank as local rank `local`, its queues as `world`'s.
fn split(
    world: &Communicator,
    (at, name, context): (u64, &str, i64),
    members: Vec<i32>,
    local: u32,
) -> Communicator {
    Communicator {
        unique_id: at,
        name: name.into(),
        size: members.len() as i64,
        local_rank: i64::from(local),
        context: Some(ContextIds {
            context_id: context,
            recv_context_id: context,
        }),
        group: Some(members.into()),
        ..world.clone()
    }
}

/// A thread in `MPI_Recv` from local rank `peer` of the communicator at `comm`.
fn receives_on(comm: u64, peer: i64) -> ThreadStack {
    ThreadStack::named(
        1,
        &["poll", "MPI_Recv", "main"],
        Some(CallArguments {
            function: "PMPI_Recv".into(),
            comm_address: Some(comm),
            peer: Some(peer),
            tag: Some(7),
            ..CallArguments::default()
        }),
    )
}

/// The ranks of `r`'s parity among `n`, in order.
fn half(r: u32, n: u32) -> Vec<i32> {
    (r % 2..n).step_by(2).map(|m| m as i32).collect()
}

fn world_args(function: &str, peer: Option<i64>) -> CallArguments {
    CallArguments {
        function: format!("P{function}"),
        comm: Some(COMM_WORLD_HANDLE),
        predefined: Some("MPI_COMM_WORLD".into()),
        peer,
        tag: Some(7),
        ..CallArguments::default()
    }
}

/// Rank `r`'s `MPI_COMM_WORLD` of `n` with its posted receives, unexpected messages and
/// pending sends.
fn world(r: u32, n: u32, [receives, unexpected, sends]: [Queue; 3]) -> Communicator {
    Communicator {
        unique_id: 0x1000,
        name: "MPI_COMM_WORLD".into(),
        size: i64::from(n),
        local_rank: i64::from(r),
        context: None,
        group: Some((0..n as i32).collect()),
        group_error: None,
        pending_receives: receives,
        unexpected_messages: unexpected,
        pending_sends: sends,
    }
}

fn dump(r: u32, n: u32, what: Does) -> RankDump {
    let thread = match what {
        Does::Computes => ThreadStack::named(1, &["compute", "main"], None),
        Does::ReceivesFromRight(k) | Does::UnreadReceivesFromRight(k) => ThreadStack::named(
            1,
            &["poll", "MPI_Recv", "main"],
            Some(world_args("MPI_Recv", Some(i64::from((r + k) % n)))),
        ),
        Does::ReceivesFrom(p) => ThreadStack::named(
            1,
            &["poll", "MPI_Recv", "main"],
            Some(world_args("MPI_Recv", Some(i64::from(p)))),
        ),
        Does::ReceivesFromAny => ThreadStack::named(
            1,
            &["poll", "MPI_Recv", "main"],
            Some(world_args("MPI_Recv", Some(ANY_SOURCE))),
        ),
        Does::ReceivesFromNobody => ThreadStack::named(
            1,
            &["poll", "MPI_Recv", "main"],
            Some(world_args("MPI_Recv", Some(PROC_NULL))),
        ),
        Does::InCollective(call) => {
            ThreadStack::named(1, &["poll", call, "main"], Some(world_args(call, None)))
        }
        Does::InCollectiveSomewhere("MPI_Bcast") => ThreadStack::named(
            1,
            &["poll", "MPI_Bcast", "main"],
            Some(world_args("MPI_Bcast", None)),
        ),
        Does::InCollectiveSomewhere(call) => ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("P{call}"),
                ..CallArguments::default()
            }),
        ),
        Does::Bcasts(root) => ThreadStack::named(
            1,
            &["poll", "MPI_Bcast", "main"],
            Some(CallArguments {
                root: Some(root),
                ..world_args("MPI_Bcast", None)
            }),
        ),
        Does::ReceivesOnHalf => receives_on(HALF, (i64::from(r / 2) + 1) % half(r, n).len() as i64),
        Does::ReceivesOnRow => receives_on(ROW, (i64::from(r % 4) + 1) % row(r, n).len() as i64),
        Does::ReceivesAnyOnRow => receives_on(ROW, ANY_SOURCE),
        Does::ReceivesAnyOnHalf => receives_on(HALF, ANY_SOURCE),
        Does::InCollectiveOnDup(call) => ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("P{call}"),
                comm_address: Some(DUP),
                ..CallArguments::default()
            }),
        ),
        Does::WaitsForItsThreads => ThreadStack::named(1, &["pthread_cond_wait", "main"], None),
        Does::InUnknownCall => ThreadStack::named(1, &["MPI_Frobnicate", "main"], None),
        Does::Polls => ThreadStack::named(1, &["MPI_Test", "main"], None),
        // MPI_Finalize returned; the program computes on.
        Does::Finalized => ThreadStack::named(1, &["compute", "main"], None),
        Does::InFinalize => ThreadStack::named(1, &["poll", "MPI_Finalize", "main"], None),
        Does::InInit => ThreadStack::named(1, &["poll", "MPI_Init", "main"], None),
        Does::UnreadBlocked => ThreadStack::named(1, &["poll", "MPI_Recv", "main"], None),
        Does::InSend(p) => ThreadStack::named(
            1,
            &["poll", "MPI_Send", "main"],
            Some(world_args("MPI_Send", Some(i64::from(p)))),
        ),
        // Tag 8: no receive of these jobs takes it.
        Does::SendsRight(k, tag) => ThreadStack::named(
            1,
            &["poll", "MPI_Ssend", "main"],
            Some(CallArguments {
                tag: Some(tag),
                ..world_args("MPI_Ssend", Some(i64::from((r + k) % n)))
            }),
        ),
        // To its k-th right neighbour, from its j-th left one (0: any source).
        Does::Exchanges(k, j) => ThreadStack::named(
            1,
            &["poll", "MPI_Sendrecv", "main"],
            Some(CallArguments {
                recv_peer: Some(match j {
                    0 => ANY_SOURCE,
                    j => i64::from((r + n - j % n) % n),
                }),
                recv_tag: Some(7),
                ..world_args("MPI_Sendrecv", Some(i64::from((r + k) % n)))
            }),
        ),
        Does::WithoutStack => ThreadStack::named(0, &[], None),
        Does::Failed | Does::Missing => unreachable!("no dump"),
    };
    let world = world(
        r,
        n,
        [
            Queue::NoInformation,
            Queue::NoInformation,
            Queue::NoInformation,
        ],
    );
    RankDump {
        threads: if what == Does::WithoutStack {
            Vec::new()
        } else {
            vec![thread]
        },
        outcome: match what {
            Does::UnreadReceivesFromRight(_) | Does::UnreadBlocked => {
                Err("the MPI keeps no message queues".into())
            }
            Does::InCollectiveOnDup(_) => Ok(vec![
                world.clone(),
                Communicator {
                    unique_id: DUP,
                    name: "dup".into(),
                    context: Some(ContextIds {
                        context_id: 5,
                        recv_context_id: 5,
                    }),
                    ..world
                },
            ]),
            Does::ReceivesOnRow | Does::ReceivesAnyOnRow => {
                let row = split(&world, (ROW, "row", 11), row(r, n), r % 4);
                Ok(vec![world, row])
            }
            Does::ReceivesOnHalf | Does::ReceivesAnyOnHalf => {
                let half = split(&world, (HALF, "half", 9), half(r, n), r / 2);
                Ok(vec![world, half])
            }
            _ => Ok(vec![world]),
        },
        mpi: MpiState {
            phase: (what == Does::Finalized).then_some(MpiPhase::Finalized),
            thread_level: None,
        },
        ..RankDump::unread(r as i32, Some(1000 + r as i32), Some("/bin/app".into()))
    }
}

/// The job rank by rank, and as classes of the ranks that do the same.
fn jobs(plan: &[Does]) -> (JobDump, ClassJob) {
    let n = plan.len() as u32;
    let mut ranks = Vec::new();
    // As agents merge ranks: those whose numbers are each the same function of the
    // rank (a row's members and local rank by the column and the row's length; the
    // ranks of one parity have local ranks no such function gives).
    let mut by_state: BTreeMap<(Does, u32, u32), (RankSet, Vec<RankDump>)> = BTreeMap::new();
    let mut failed = RankSet::new();
    for (r, &what) in plan.iter().enumerate() {
        let r = r as u32;
        match what {
            Does::Missing => {}
            Does::Failed => {
                failed.insert(r);
                let mut d = RankDump::unread(r as i32, Some(1000 + r as i32), None);
                d.outcome = Err("not attached".into());
                ranks.push(d);
            }
            _ => {
                ranks.push(dump(r, n, what));
                let part = match what {
                    Does::ReceivesOnRow | Does::ReceivesAnyOnRow => (r % 4, row(r, n).len() as u32),
                    Does::ReceivesOnHalf => (r, 0),
                    // Its members' group is one set whatever their local ranks.
                    Does::ReceivesAnyOnHalf => (r % 2, 0),
                    _ => (0, 0),
                };
                let (members, dumps) = by_state.entry((what, part.0, part.1)).or_default();
                members.insert(r);
                dumps.push(dump(r, n, what));
            }
        }
    }
    let mut job = JobDump::of_ranks(ranks);
    job.job_size = Some(n);
    let classes = by_state
        .into_values()
        .map(|(ranks, mut members)| {
            let last = (members.len() > 1).then(|| members.pop().expect("two"));
            RankClass {
                ranks,
                first: members.swap_remove(0),
                last,
            }
        })
        .collect();
    let classes = ClassJob {
        dll: LibraryInfo::default(),
        size: n,
        size_known: true,
        classes,
        failed: if failed.is_empty() {
            Vec::new()
        } else {
            vec![FailedRanks {
                pid: None,
                ranks: failed,
                why: "not attached".into(),
            }]
        },
        unranked: Vec::new(),
        snapshot: Snapshot::One,
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
    };
    (job, classes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// The ranks each a class of their own are never confidently wrong about what the
    /// generated ranks do; merged into classes, where they follow every class, they
    /// reach the same verdict, doubts and worst-reading set; where they do not, they
    /// never conclude.
    #[test]
    fn classes_reach_the_verdict_of_their_ranks(plan in (2..24u32).prop_flat_map(|n| {
        prop::collection::vec(does(n), n as usize)
    })) {
        let (job, classes) = jobs(&plan);
        let ranks = mqd_scale::diagnose_ranks(&job);
        let stuck = stuck(&plan);
        prop_assert!(ranks.deadlocked.is_subset(&stuck), "{} not stuck in {plan:?}", ranks.deadlocked);
        if ranks.verdict == Verdict::NoDeadlock {
            prop_assert!(stuck.is_empty(), "{stuck} stuck in {plan:?}");
        }
        prop_assert!(stuck.is_subset(&ranks.possibly_deadlocked) || ranks.verdict == Verdict::Undetermined);
        let by_classes = diagnose_classes(&classes);
        if by_classes.not_followed.is_empty() {
            prop_assert_eq!(by_classes.verdict, ranks.verdict);
            prop_assert_eq!(&by_classes.doubts, &ranks.doubts);
            prop_assert_eq!(&by_classes.possibly_deadlocked, &ranks.possibly_deadlocked);
            prop_assert_eq!(
                by_classes.finding_ranks(),
                Some(finding_ranks_of(&ranks.findings))
            );
            // The collectives', the summary's and the calls' findings, word for word.
            prop_assert_eq!(in_full_of(&ranks.findings), in_full_of(&by_classes.findings));
            // The deadlocks' findings are about ranks possibly deadlocked; the others of
            // those are in calls, or on communicators, the doubts name as unknown, in
            // collectives that do not match, or in calls whose wait is not known (their
            // arguments unread).
            let mut held = RankSet::new();
            ranks
                .findings
                .iter()
                .filter(|f| f.kind.is_deadlock() || f.kind == FindingKind::BlockedByDeadlock)
                .for_each(|f| held.union_with(&f.ranks));
            prop_assert!(held.is_subset(&by_classes.possibly_deadlocked));
            let mut unknown = RankSet::new();
            for d in &by_classes.doubts {
                if let Doubt::UnknownPlaces { ranks, .. }
                | Doubt::UnknownCommunicators { ranks }
                | Doubt::Collectives { ranks } = d
                {
                    unknown.union_with(ranks);
                }
            }
            for (r, d) in plan.iter().enumerate() {
                if matches!(d, Does::UnreadBlocked) {
                    unknown.insert(r as u32);
                }
            }
            prop_assert!(by_classes.possibly_deadlocked.difference(&held).is_subset(&unknown));
        } else {
            // Undetermined, whatever its ranks each a class of their own conclude, with
            // the ranks named.
            prop_assert_eq!(by_classes.verdict, Verdict::Undetermined);
            let named = by_classes
                .doubts
                .iter()
                .any(|d| matches!(d, Doubt::NotFollowed { .. }));
            prop_assert!(named);
        }
    }
}

/// The ranks of `plan` stuck for good, as the program truly runs: the greatest set of
/// ranks blocked in calls that only ranks of the set could complete (a rank outside it
/// may do anything MPI allows it later, unless it finalized; a standard send and a
/// broadcast's root may return before their peers take part; a call whose arguments
/// are not known may return).
fn stuck(plan: &[Does]) -> RankSet {
    let n = plan.len() as u32;
    let finalizing = |q: u32| matches!(plan[q as usize], Does::Finalized | Does::InFinalize);
    // Whether `q` sends to `r` with tag 7 on COMM_WORLD in the call it is blocked in.
    let sends_to = |q: u32, r: u32| match plan[q as usize] {
        Does::InSend(p) => p == r,
        Does::Exchanges(k, _) | Does::SendsRight(k, 7) => (q + k) % n == r,
        _ => false,
    };
    // Whether `q` receives from `r` with tag 7 on COMM_WORLD in its call.
    let receives_from = |q: u32, r: u32| match plan[q as usize] {
        Does::ReceivesFromRight(k) | Does::UnreadReceivesFromRight(k) => (q + k) % n == r,
        Does::ReceivesFrom(p) => p == r,
        Does::ReceivesFromAny | Does::Exchanges(_, 0) => true,
        Does::Exchanges(_, j) => (q + n - j % n) % n == r,
        _ => false,
    };
    let free = |q: u32, set: &RankSet| !set.contains(q) && !finalizing(q);
    // Whether rank `r`'s call can complete while `set` is stuck.
    let completes = |r: u32, set: &RankSet| -> bool {
        let receive = |from: Vec<u32>| from.into_iter().any(|q| free(q, set) || sends_to(q, r));
        let collective =
            |same: &dyn Fn(Does) -> bool| (0..n).all(|q| same(plan[q as usize]) || free(q, set));
        match plan[r as usize] {
            Does::ReceivesFromRight(k) | Does::UnreadReceivesFromRight(k) => {
                receive(vec![(r + k) % n])
            }
            Does::ReceivesFrom(p) => receive(vec![p]),
            Does::ReceivesFromAny | Does::Exchanges(_, 0) => receive((0..n).collect()),
            Does::Exchanges(_, j) => receive(vec![(r + n - j % n) % n]),
            // Nobody sends on these communicators in the call it is in.
            Does::ReceivesOnHalf => {
                let h = half(r, n);
                free(h[(r as usize / 2 + 1) % h.len()] as u32, set)
            }
            Does::ReceivesOnRow => {
                let w = row(r, n);
                free(w[(r as usize % 4 + 1) % w.len()] as u32, set)
            }
            Does::ReceivesAnyOnRow => row(r, n).into_iter().any(|q| free(q as u32, set)),
            Does::ReceivesAnyOnHalf => half(r, n).into_iter().any(|q| free(q as u32, set)),
            Does::SendsRight(k, _) => {
                let q = (r + k) % n;
                free(q, set) || (plan[r as usize] == Does::SendsRight(k, 7) && receives_from(q, r))
            }
            Does::InCollective(c) => collective(&|d| d == Does::InCollective(c)),
            Does::InCollectiveOnDup(c) => collective(&|d| d == Does::InCollectiveOnDup(c)),
            Does::Bcasts(root) => i64::from(r) == root || collective(&|d| d == Does::Bcasts(root)),
            // MPI_Finalize is collective over the job.
            Does::InFinalize => collective(&|d| matches!(d, Does::InFinalize | Does::Finalized)),
            // Free to go on, or what it waits for is not known.
            _ => true,
        }
    };
    let mut set: RankSet = (0..n).collect();
    loop {
        let moves: Vec<u32> = set.iter().filter(|&r| completes(r, &set)).collect();
        if moves.is_empty() {
            return set;
        }
        for r in moves {
            set.remove(r);
        }
    }
}

#[test]
fn a_million_ranks_in_one_collective_but_three_is_two_classes_of_rules() {
    let n = 1_000_000u32;
    let deviants = [17u32, 500_000, 999_999];
    let mut plan_ranks = RankSet::full(n);
    for d in deviants {
        plan_ranks.remove(d);
    }
    let class = |ranks: RankSet, what: Does| {
        let first = ranks.first().expect("a member");
        let last = ranks.last().expect("a member");
        RankClass {
            first: dump(first, n, what),
            last: (first != last).then(|| dump(last, n, what)),
            ranks,
        }
    };
    let job = ClassJob {
        dll: LibraryInfo::default(),
        size: n,
        size_known: true,
        classes: vec![
            class(plan_ranks, Does::InCollective("MPI_Allreduce")),
            class(
                deviants.iter().copied().collect(),
                Does::ReceivesFromRight(1),
            ),
        ],
        failed: Vec::new(),
        unranked: Vec::new(),
        snapshot: Snapshot::One,
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
    };
    let d = diagnose_classes(&job);
    // The deviants wait for their right neighbours, in the collective, which waits for
    // them: everyone may be deadlocked; nothing proves it (receives and collectives
    // may still have messages on their way).
    assert_eq!(d.possibly_deadlocked, RankSet::full(n));
    assert_eq!(d.verdict, Verdict::Undetermined);
    assert_eq!(
        d.doubts,
        vec![Doubt::Unproven {
            ranks: RankSet::full(n)
        }]
    );
    // One deviant computing instead: it may still join, but the other two never will
    // (each waits for a neighbour in the collective): all but it may be deadlocked.
    let mut computing = job.clone();
    computing.classes[1].ranks.remove(500_000);
    computing
        .classes
        .push(class(RankSet::single(500_000), Does::Computes));
    let d = diagnose_classes(&computing);
    let mut all_but = RankSet::full(n);
    all_but.remove(500_000);
    assert_eq!(d.possibly_deadlocked, all_but);
    assert_eq!(d.running, RankSet::single(500_000));
    // All three computing: the collective waits for running ranks; nothing holds.
    let mut running = job.clone();
    running.classes[1] = class(deviants.iter().copied().collect(), Does::Computes);
    let d = diagnose_classes(&running);
    assert_eq!(d.possibly_deadlocked, RankSet::new());
    assert_eq!(d.verdict, Verdict::NoDeadlock);
}

#[test]
fn a_ring_of_a_million_ranks_is_one_class_held_by_its_right_neighbour() {
    let n = 1_000_000u32;
    let ring = |ranks: RankSet| RankClass {
        first: dump(
            ranks.first().expect("a member"),
            n,
            Does::ReceivesFromRight(1),
        ),
        last: Some(dump(
            ranks.last().expect("a member"),
            n,
            Does::ReceivesFromRight(1),
        )),
        ranks,
    };
    let job = ClassJob {
        dll: LibraryInfo::default(),
        size: n,
        size_known: true,
        classes: vec![ring(RankSet::full(n))],
        failed: Vec::new(),
        unranked: Vec::new(),
        snapshot: Snapshot::One,
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
    };
    let d = diagnose_classes(&job);
    assert_eq!(d.possibly_deadlocked, RankSet::full(n));
    assert_eq!(
        d.held,
        vec![HeldClass {
            ranks: RankSet::full(n),
            waits: vec![("MPI_Recv".into(), HeldBy::Neighbour(1))],
        }]
    );
    // One rank computing makes it a chain of 999,999 ranks, each waiting for the next
    // to the one computing: it drains at once (by pointer jumping), nothing is held.
    let mut chain = RankSet::full(n);
    chain.remove(500_000);
    let mut broken = job.clone();
    broken.classes = vec![
        ring(chain),
        RankClass {
            first: dump(500_000, n, Does::Computes),
            last: None,
            ranks: RankSet::single(500_000),
        },
    ];
    let d = diagnose_classes(&broken);
    assert_eq!(d.possibly_deadlocked, RankSet::new());
    assert_eq!(d.running, RankSet::single(500_000));
    assert_eq!(d.verdict, Verdict::NoDeadlock);
}

/// A peer of a generated queue state: relative to the rank, or one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Named {
    Right(u32),
    Rank(u32),
    Any,
}

impl Named {
    fn of(self, r: u32, n: u32) -> i64 {
        match self {
            Named::Right(k) => i64::from((r + k) % n),
            Named::Rank(p) => i64::from(p),
            Named::Any => -1,
        }
    }
}

/// What a rank of a generated queue job does: its one thread (or none) and what its
/// queues on `MPI_COMM_WORLD` list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Queued {
    /// 0: no stack, 1: computing, 2: `MPI_Ssend`, 3: `MPI_Send`, 4: `MPI_Recv`, 5:
    /// `MPI_Waitall` for every listed send and receive of its own, 6: `MPI_Waitany` for
    /// them (with tag 2, and for a request not read and one its queues do not hold), 7:
    /// computing after `MPI_Finalize` returned, 8: `MPI_Ssend` to its right neighbour in
    /// its row ([`PAIR`]).
    thread: (u8, Named, i64),
    receives: Vec<(Named, Option<i64>)>,
    /// Sender, tag and what the library says of it (0: nothing, 1: waits, 2: gone on).
    unexpected: Vec<(Named, i64, u8)>,
    sends: Vec<(Named, i64)>,
    lists_sends: bool,
    /// On `MPI_COMM_SELF`: receives (0), messages waiting (1), sends (2), by tag; 3: its
    /// pending sends could not be read; 4: a receive on a communicator whose group is not
    /// known, from its local rank 1, whose COMM_WORLD rank is not known either; on that
    /// communicator, its peers known by their COMM_WORLD ranks: 5: a receive from its
    /// left neighbour, 6: a send to its right one; and by their local ranks only, as
    /// MPICH 4's debugger queues list a duplicate of COMM_WORLD: 7: a message from its
    /// left neighbour, 9: the same whose sender went on, 8: a send to its right one.
    on_self: Vec<(u8, i64)>,
    /// On its row of a split into rows of [`PAIR`]: a receive from its right neighbour
    /// (0), a message from its left one whose sender waits (1), a send to its right one
    /// (2), by tag.
    on_row: Vec<(u8, i64)>,
}

impl Queued {
    fn on_rows(&self) -> bool {
        self.thread.0 == 8 || !self.on_row.is_empty()
    }
}

/// The width of the rows of the queue jobs' split (the last row what is left).
const PAIR: u32 = 2;

/// The ranks of `r`'s row of the queue jobs' split among `n`, in order.
fn pair(r: u32, n: u32) -> Vec<i32> {
    (r - r % PAIR..(r - r % PAIR + PAIR).min(n))
        .map(|m| m as i32)
        .collect()
}

fn named(n: u32, any: bool) -> impl Strategy<Value = Named> {
    prop_oneof![
        3 => (0..n).prop_map(Named::Right),
        2 => (0..n).prop_map(Named::Rank),
        if any { 1 } else { 0 } => Just(Named::Any),
    ]
}

fn queued(n: u32) -> impl Strategy<Value = Queued> {
    // A synchronous send to the k-th right neighbour, its message waiting there (and
    // listed by its sender, or not): a ring of such is a proven deadlock.
    let ring = (1..n, 1..3i64, 0..2u8, any::<bool>(), any::<bool>()).prop_map(
        move |(k, tag, sender, listed, lists_sends)| Queued {
            thread: (2, Named::Right(k), tag),
            receives: Vec::new(),
            unexpected: vec![(Named::Right(n - k), tag, sender)],
            sends: if listed {
                vec![(Named::Right(k), tag)]
            } else {
                Vec::new()
            },
            lists_sends,
            on_self: Vec::new(),
            on_row: Vec::new(),
        },
    );
    // The same around each row: a split's rows of synchronous sends.
    let row_ring =
        (1..3i64, any::<bool>(), any::<bool>()).prop_map(|(tag, listed, lists_sends)| Queued {
            thread: (8, Named::Right(0), tag),
            receives: Vec::new(),
            unexpected: Vec::new(),
            sends: Vec::new(),
            lists_sends,
            on_self: Vec::new(),
            on_row: if listed {
                vec![(1, tag), (2, tag)]
            } else {
                vec![(1, tag)]
            },
        });
    prop_oneof![3 => any_queued(n), 1 => ring, 1 => row_ring]
}

fn any_queued(n: u32) -> impl Strategy<Value = Queued> {
    (
        (0..8u8, named(n, false), 1..3i64),
        prop::collection::vec((named(n, true), prop::option::of(1..3i64)), 0..3),
        prop::collection::vec((named(n, false), 1..3i64, 0..3u8), 0..3),
        prop::collection::vec((named(n, false), 1..3i64), 0..3),
        any::<bool>(),
        prop::collection::vec((0..10u8, 1..3i64), 0..2),
        prop::collection::vec((0..3u8, 1..3i64), 0..3),
    )
        .prop_map(
            |(thread, receives, unexpected, sends, lists_sends, on_self, on_row)| Queued {
                thread,
                receives,
                unexpected,
                sends,
                lists_sends,
                on_self,
                on_row,
            },
        )
}

fn queued_dump(r: u32, n: u32, what: &Queued) -> RankDump {
    let (kind, peer, tag) = what.thread;
    let call = [
        "",
        "",
        "MPI_Ssend",
        "MPI_Send",
        "MPI_Recv",
        "MPI_Waitall",
        "MPI_Waitany",
        "",
        "MPI_Ssend",
    ][usize::from(kind)];
    let row = pair(r, n);
    let (local, size) = (i64::from(r % PAIR), row.len() as i64);
    let (right, left) = ((local + 1) % size, (local + size - 1) % size);
    // Requests: each rank's own addresses, receives from 0x100, sends from 0x200.
    let base = 0x10_000 * u64::from(r + 1);
    let threads = match kind {
        0 => Vec::new(),
        1 | 7 => vec![ThreadStack::named(1, &["solve", "main"], None)],
        5 | 6 => {
            let unknown = if tag == 2 {
                vec![None, Some(base + 0x300)]
            } else {
                Vec::new()
            };
            let requests = (0..what.receives.len() as u64)
                .map(|i| Some(base + 0x100 + i))
                .chain((0..what.sends.len() as u64).map(|i| Some(base + 0x200 + i)))
                .chain(unknown)
                .collect();
            vec![ThreadStack::named(
                1,
                &["poll", call, "main"],
                Some(CallArguments {
                    requests,
                    ..world_args(call, None)
                }),
            )]
        }
        8 => vec![ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("P{call}"),
                comm_address: Some(ROW),
                peer: Some(right),
                tag: Some(tag),
                ..CallArguments::default()
            }),
        )],
        _ => vec![ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                tag: Some(tag),
                ..world_args(call, Some(peer.of(r, n)))
            }),
        )],
    };
    // Operations on the row with its local rank `l`.
    let on_row = |queue: u8, l: i64| {
        Queue::Operations(
            what.on_row
                .iter()
                .filter(|&&(q, _)| q == queue)
                .map(|&(_, tag)| Operation {
                    desired_local_rank: l,
                    sender: (queue == 1).then_some(SenderState::Waits),
                    ..Operation::pending(i64::from(row[l as usize]), tag)
                })
                .collect(),
        )
    };
    let row_comm = Communicator {
        unique_id: ROW,
        name: "row".into(),
        size,
        local_rank: local,
        context: Some(ContextIds {
            context_id: 11,
            recv_context_id: 11,
        }),
        group: Some(row.clone().into()),
        group_error: None,
        pending_receives: on_row(0, right),
        unexpected_messages: on_row(1, left),
        pending_sends: on_row(2, right),
    };
    let receives = what
        .receives
        .iter()
        .enumerate()
        .map(|(i, &(from, tag))| Operation {
            tag_wild: tag.is_none(),
            request: Some(base + 0x100 + i as u64),
            ..Operation::pending(from.of(r, n), tag.unwrap_or(-1))
        })
        .collect();
    let unexpected = what
        .unexpected
        .iter()
        .map(|&(from, tag, sender)| Operation {
            sender: [None, Some(SenderState::Waits), Some(SenderState::GoneOn)]
                [usize::from(sender)],
            ..Operation::pending(from.of(r, n), tag)
        })
        .collect();
    let sends = what
        .sends
        .iter()
        .enumerate()
        .map(|(i, &(to, tag))| Operation {
            request: Some(base + 0x200 + i as u64),
            ..Operation::pending(to.of(r, n), tag)
        })
        .collect();
    let world = world(r, n, [receives, unexpected, sends].map(Queue::Operations));
    let on_self = |queue: u8| {
        Queue::Operations(
            what.on_self
                .iter()
                .filter(|&&(q, _)| q == queue)
                .map(|&(_, tag)| Operation {
                    desired_local_rank: 0,
                    ..Operation::pending(i64::from(r), tag)
                })
                .collect(),
        )
    };
    let unread = what.on_self.iter().any(|&(q, _)| q == 3);
    let itself = Communicator {
        unique_id: 0x2000,
        name: "MPI_COMM_SELF".into(),
        size: 1,
        local_rank: 0,
        context: None,
        group: Some(vec![r as i32].into()),
        group_error: None,
        pending_receives: on_self(0),
        unexpected_messages: on_self(1),
        pending_sends: if unread {
            Queue::Error(mqd_model::MqsError {
                code: 103,
                text: "cannot read the send queue".into(),
                message: None,
            })
        } else {
            on_self(2)
        },
    };
    let unknown = Communicator {
        unique_id: 0x3000,
        name: String::new(),
        size: i64::from(n),
        local_rank: i64::from(r),
        context: None,
        group: None,
        group_error: None,
        pending_receives: Queue::Operations(
            what.on_self
                .iter()
                .filter(|&&(q, _)| q == 4 || q == 5)
                .map(|&(q, tag)| match q {
                    4 => Operation {
                        desired_global_rank: -1,
                        ..Operation::pending(1, tag)
                    },
                    _ => Operation::pending(Named::Right(n - 1).of(r, n), tag),
                })
                .collect(),
        ),
        unexpected_messages: Queue::Operations(
            what.on_self
                .iter()
                .filter(|&&(q, _)| q == 7 || q == 9)
                .map(|&(q, tag)| Operation {
                    desired_global_rank: -1,
                    sender: (q == 9).then_some(SenderState::GoneOn),
                    ..Operation::pending(Named::Right(n - 1).of(r, n), tag)
                })
                .collect(),
        ),
        pending_sends: Queue::Operations(
            what.on_self
                .iter()
                .filter(|&&(q, _)| q == 6 || q == 8)
                .map(|&(q, tag)| Operation {
                    desired_global_rank: if q == 8 { -1 } else { Named::Right(1).of(r, n) },
                    ..Operation::pending(Named::Right(1).of(r, n), tag)
                })
                .collect(),
        ),
    };
    let mut comms = vec![world, itself, unknown];
    if what.on_rows() {
        comms.push(row_comm);
    }
    RankDump {
        threads,
        outcome: Ok(comms),
        lists_blocking_sends: what.lists_sends.then_some(true),
        mpi: MpiState {
            phase: (kind == 7).then_some(MpiPhase::Finalized),
            thread_level: None,
        },
        ..RankDump::unread(r as i32, Some(1000 + r as i32), Some("/bin/app".into()))
    }
}

/// A job whose rank `r` is in state `states[of[r]]`, per rank and as classes (one per
/// state).
fn queued_jobs(states: &[Queued], of: &[usize]) -> (JobDump, ClassJob) {
    let n = of.len() as u32;
    let ranks = (0..n).map(|r| queued_dump(r, n, &states[of[r as usize]]));
    let mut job = JobDump::of_ranks(ranks.collect());
    job.job_size = Some(n);
    // As agents merge ranks: on rows, those of one column of rows of one length.
    let mut members: BTreeMap<(usize, u32, usize), RankSet> = BTreeMap::new();
    for (r, &s) in of.iter().enumerate() {
        let r = r as u32;
        let part = if states[s].on_rows() {
            (r % PAIR, pair(r, n).len())
        } else {
            (0, 0)
        };
        members.entry((s, part.0, part.1)).or_default().insert(r);
    }
    let classes = members
        .into_iter()
        .map(|((s, _, _), ranks)| {
            let first = ranks.first().expect("a member");
            let last = ranks.last().filter(|&l| l != first);
            RankClass {
                first: queued_dump(first, n, &states[s]),
                last: last.map(|l| queued_dump(l, n, &states[s])),
                ranks,
            }
        })
        .collect();
    let classes = ClassJob {
        dll: LibraryInfo::default(),
        size: n,
        size_known: true,
        classes,
        failed: Vec::new(),
        unranked: Vec::new(),
        snapshot: Snapshot::One,
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
    };
    (job, classes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Queues matched by class reach the verdict, doubts, proven and worst-reading sets
    /// and clean finding of their ranks each a class of its own; what they do not follow
    /// they never conclude.
    #[test]
    fn queues_by_classes_reach_the_verdict_of_their_ranks(
        (states, of) in (2..9u32).prop_flat_map(|n| {
            (
                prop::collection::vec(queued(n), 1..4),
                prop::collection::vec(0..3usize, n as usize),
            )
        })
    ) {
        let of: Vec<usize> = of.iter().map(|&s| s % states.len()).collect();
        let (job, classes) = queued_jobs(&states, &of);
        let ranks = mqd_scale::diagnose_ranks(&job);
        let by_classes = diagnose_classes(&classes);
        if by_classes.not_followed.is_empty() {
            prop_assert_eq!(by_classes.verdict, ranks.verdict);
            prop_assert_eq!(&by_classes.doubts, &ranks.doubts);
            prop_assert_eq!(&by_classes.deadlocked, &ranks.deadlocked);
            prop_assert_eq!(&by_classes.possibly_deadlocked, &ranks.possibly_deadlocked);
            // Ranks on cycles, in knots and blocked behind, proven and possible.
            prop_assert_eq!(
                by_classes.finding_ranks(),
                Some(finding_ranks_of(&ranks.findings))
            );
            prop_assert_eq!(in_full_of(&ranks.findings), in_full_of(&by_classes.findings));
        } else {
            prop_assert_eq!(by_classes.verdict, Verdict::Undetermined);
        }
    }
}

/// The diagnosis of `job`'s ranks each a class of its own, every rank followed.
fn followed(job: &JobDump) -> Diagnosis {
    let d = mqd_scale::diagnose_ranks(job);
    let not_followed = d
        .doubts
        .iter()
        .any(|d| matches!(d, Doubt::NotFollowed { .. }));
    assert!(!not_followed, "{:?}", d.doubts);
    d
}

/// The diagnosis of the job's ranks each a class of its own and its classes', which
/// follow every class and reach the same verdict.
fn followed_alike(job: &JobDump, classes: &ClassJob) -> (Diagnosis, mqd_scale::ClassDiagnosis) {
    let ranks = followed(job);
    let by_classes = diagnose_classes(classes);
    assert!(
        by_classes.not_followed.is_empty(),
        "{:?}",
        by_classes.not_followed
    );
    assert_eq!(by_classes.verdict, ranks.verdict);
    (ranks, by_classes)
}

/// A split's rows, each a ring of synchronous sends whose messages wait at their
/// destinations: one class per column of rows of one length, each followed, and the
/// deadlock proven as rank by rank.
#[test]
fn a_splits_rows_of_synchronous_sends_are_proven_by_their_columns() {
    for (n, listed) in [(8, true), (9, false)] {
        let ring = Queued {
            thread: (8, Named::Right(0), 1),
            receives: Vec::new(),
            unexpected: Vec::new(),
            sends: Vec::new(),
            lists_sends: true,
            on_self: Vec::new(),
            on_row: if listed {
                vec![(1, 1), (2, 1)]
            } else {
                vec![(1, 1)]
            },
        };
        let (job, classes) = queued_jobs(&[ring], &vec![0; n]);
        // Two columns of full rows, and the last row's one rank at 9.
        assert_eq!(classes.classes.len(), if n == 8 { 2 } else { 3 });
        let (ranks, by_classes) = followed_alike(&job, &classes);
        assert_eq!(by_classes.verdict, Verdict::Deadlock);
        // The full rows (a rank alone in its row sends to itself).
        assert_eq!(by_classes.deadlocked, RankSet::full(8));
        assert_eq!(by_classes.deadlocked, ranks.deadlocked);
        assert_eq!(
            by_classes.finding_ranks(),
            Some(finding_ranks_of(&ranks.findings))
        );
    }
}

/// Receives from any source of a split's row (members at the same distances from each
/// member of a column) and of the ranks of one parity (the same ranks for each member):
/// followed by classes, held while every member of the communicator is, as rank by rank;
/// a computing member frees its row or its parity, not the others.
#[test]
fn receives_from_any_source_of_a_split_are_followed_by_classes() {
    for (does, n, computing, free) in [
        (Does::ReceivesAnyOnRow, 12, 5, RankSet::from_i32s(4..8)),
        (
            Does::ReceivesAnyOnHalf,
            8,
            2,
            RankSet::from_i32s([0, 2, 4, 6]),
        ),
    ] {
        let mut plan = vec![does; n];
        let (job, classes) = jobs(&plan);
        let (ranks, by_classes) = followed_alike(&job, &classes);
        assert_eq!(
            by_classes.possibly_deadlocked,
            RankSet::full(n as u32),
            "{does:?}"
        );
        assert_eq!(by_classes.possibly_deadlocked, ranks.possibly_deadlocked);
        assert_eq!(
            by_classes.finding_ranks(),
            Some(finding_ranks_of(&ranks.findings))
        );
        // What each class waits for: the others of its row, at distances from each
        // member; the ranks of its parity.
        let by: Vec<&HeldBy> = by_classes
            .held
            .iter()
            .flat_map(|h| h.waits.iter().map(|(_, by)| by))
            .collect();
        let n32 = n as u32;
        let expected: Vec<HeldBy> = match does {
            Does::ReceivesAnyOnRow => (0..4u32)
                .map(|c| HeldBy::AnyNeighbour((0..4).map(|m| (m + n32 - c) % n32).collect()))
                .collect(),
            _ => vec![
                HeldBy::AnyOf(RankSet::from_i32s([0, 2, 4, 6])),
                HeldBy::AnyOf(RankSet::from_i32s([1, 3, 5, 7])),
            ],
        };
        for e in &expected {
            assert!(by.contains(&e), "{does:?}: {e:?} in {by:?}");
        }
        plan[computing] = Does::Computes;
        let (job, classes) = jobs(&plan);
        let (ranks, by_classes) = followed_alike(&job, &classes);
        let held = RankSet::full(n as u32).difference(&free);
        assert_eq!(by_classes.possibly_deadlocked, held, "{does:?}");
        assert_eq!(ranks.possibly_deadlocked, held, "{does:?}");
    }
}

/// Every rank in `MPI_Waitany` over receives from both its neighbours, nothing sent: one
/// class, held while both neighbours are, followed and possibly deadlocked as rank by
/// rank. With one rank computing instead, whose sends may free its neighbours, nobody is
/// held: the chain of "any one of" unwinds from it both ways.
#[test]
fn waits_for_any_of_the_neighbours_are_followed_by_classes() {
    let n = 7;
    let waitany = Queued {
        thread: (6, Named::Right(0), 1),
        receives: vec![(Named::Right(1), Some(1)), (Named::Right(n - 1), Some(1))],
        unexpected: Vec::new(),
        sends: Vec::new(),
        lists_sends: true,
        on_self: Vec::new(),
        on_row: Vec::new(),
    };
    let computes = Queued {
        thread: (1, Named::Right(0), 1),
        receives: Vec::new(),
        ..waitany.clone()
    };
    let (job, classes) = queued_jobs(std::slice::from_ref(&waitany), &vec![0; n as usize]);
    assert_eq!(classes.classes.len(), 1);
    let (ranks, by_classes) = followed_alike(&job, &classes);
    assert_eq!(by_classes.possibly_deadlocked, RankSet::full(n));
    assert_eq!(by_classes.possibly_deadlocked, ranks.possibly_deadlocked);
    assert_eq!(
        by_classes.finding_ranks(),
        Some(finding_ranks_of(&ranks.findings))
    );
    let held: Vec<_> = by_classes.held.iter().flat_map(|h| &h.waits).collect();
    assert_eq!(
        held,
        [&(
            "MPI_Waitany".to_owned(),
            HeldBy::AnyNeighbour([1, n - 1].into_iter().collect())
        )]
    );
    // Rank 3 computes: ranks 2 and 4 may be freed by it, then 1 and 5, and so on.
    let mut of = vec![0; n as usize];
    of[3] = 1;
    let (job, classes) = queued_jobs(&[waitany.clone(), computes.clone()], &of);
    let (ranks, by_classes) = followed_alike(&job, &classes);
    assert_eq!(by_classes.possibly_deadlocked, RankSet::new());
    assert_eq!(ranks.possibly_deadlocked, RankSet::new());
    // Past the rounds classes take, rank by rank: 3,000 ranks freed two by two.
    let n = 3000;
    let waitany = Queued {
        receives: vec![(Named::Right(1), Some(1)), (Named::Right(n - 1), Some(1))],
        ..waitany
    };
    let mut of = vec![0; n as usize];
    of[0] = 1;
    let (_, classes) = queued_jobs(&[waitany, computes], &of);
    let by_classes = diagnose_classes(&classes);
    assert!(
        by_classes.not_followed.is_empty(),
        "{:?}",
        by_classes.not_followed
    );
    assert_eq!(by_classes.possibly_deadlocked, RankSet::new());
    assert_eq!(by_classes.verdict, Verdict::NoDeadlock);
}

/// Receives around rows of four (stacks only): followed by columns, possibly deadlocked
/// as rank by rank; a column whose rows would begin elsewhere is not followed.
#[test]
fn a_splits_rows_of_receives_are_followed_by_their_columns() {
    let (job, classes) = jobs(&[Does::ReceivesOnRow; 18]);
    assert_eq!(classes.classes.len(), 6);
    let (ranks, by_classes) = followed_alike(&job, &classes);
    assert_eq!(by_classes.possibly_deadlocked, RankSet::full(18));
    assert_eq!(by_classes.possibly_deadlocked, ranks.possibly_deadlocked);
    // Ranks 0 and 4 hold rows beginning at themselves; a class of ranks 1 and 4 (as no
    // agent merges them) would hold rows that begin neither at one rank nor at one
    // distance from its members.
    let mut mixed = classes.clone();
    mixed.classes[0].last = Some(dump(5, 18, Does::ReceivesOnRow));
    let d = diagnose_classes(&mixed);
    assert_eq!(d.verdict, Verdict::Undetermined);
    assert!(!d.not_followed.is_empty());
}

/// What ranks each a class of their own wait for where it is not known: the requests of
/// `MPI_Waitall` and `MPI_Waitany` that were not read or that no queue holds, and the
/// queues of a communicator whose members are not known but whose peers the library
/// resolved. The analysis follows them as "may wait".
#[test]
fn what_is_not_known_of_a_rank_is_followed_as_may_wait() {
    let n = 4;
    let state = |thread, receives, on_self| Queued {
        thread,
        receives,
        unexpected: Vec::new(),
        sends: Vec::new(),
        lists_sends: true,
        on_self,
        on_row: Vec::new(),
    };
    let of_state = |state: Queued| -> Diagnosis {
        let (job, _) = queued_jobs(&[state], &[0; 4]);
        followed(&job)
    };
    // All of, or any of, a receive from the right neighbour and two requests not known:
    // a ring of receives may hold them, nothing proves it.
    for (call, receives) in [(5, 1), (6, 1), (5, 0), (6, 0)] {
        let receives = vec![(Named::Right(1), Some(1)); receives];
        let d = of_state(state((call, Named::Right(1), 2), receives.clone(), vec![]));
        assert_eq!(d.verdict, Verdict::Undetermined, "{call} {receives:?}");
        assert_eq!(
            d.possibly_deadlocked,
            RankSet::full(n),
            "{call} {receives:?}"
        );
        assert!(d.deadlocked.is_empty());
    }
    // Ranks without stacks, each with a receive from its left neighbour on a
    // communicator whose group is not known: they may wait around the ring. With a send
    // to the right neighbour each receive is taken: nothing waits.
    let d = of_state(state((0, Named::Right(1), 1), vec![], vec![(5, 1)]));
    assert_eq!(d.possibly_deadlocked, RankSet::full(n));
    assert_eq!(d.verdict, Verdict::Undetermined);
    let d = of_state(state((0, Named::Right(1), 1), vec![], vec![(5, 1), (6, 1)]));
    assert!(d.possibly_deadlocked.is_empty(), "{d:?}");
    // A ring of receives from the right neighbour whose rank 0 receives from a peer not
    // read, or sends to one no rank of the job: each may wait for anything.
    for (call, peer) in [(4, None), (3, Some(7))] {
        let (mut job, _) = queued_jobs(&[state((4, Named::Right(1), 1), vec![], vec![])], &[0; 4]);
        let args = job.ranks[0].threads[0].call.as_mut().expect("its call");
        args.peer = peer;
        if call == 3 {
            args.function = "PMPI_Send".into();
            job.ranks[0].threads[0].frames[1].function = Some("MPI_Send".into());
        }
        let d = followed(&job);
        assert_eq!(d.possibly_deadlocked, RankSet::full(n), "{call} {peer:?}");
        assert_eq!(d.verdict, Verdict::Undetermined);
    }
    // MPICH 4's ring on a duplicate of COMM_WORLD, its peers by their local ranks only:
    // each rank sends to its right neighbour and holds its left one's message. Nobody can
    // name those peers, so nothing is proven or ruled out; merged into one class too.
    for gone_on in [false, true] {
        let message = if gone_on { 9 } else { 7 };
        let ring = state((0, Named::Right(1), 1), vec![], vec![(8, 1), (message, 1)]);
        let d = of_state(ring.clone());
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert!(
            d.doubts
                .contains(&mqd_model::diagnosis::Doubt::UnknownPeers {
                    ranks: RankSet::full(n)
                }),
            "{:?}",
            d.doubts
        );
        let unknown: Vec<&mqd_model::Finding> = d
            .findings
            .iter()
            .filter(|f| f.kind == mqd_model::FindingKind::UnknownPeer)
            .collect();
        // A send each, and a message each unless its sender went on.
        assert_eq!(unknown.len(), if gone_on { 1 } else { 2 }, "{unknown:?}");
        let (_, classes) = queued_jobs(&[ring], &[0; 4]);
        let merged = diagnose_classes(&classes);
        assert!(merged.not_followed.is_empty(), "{:?}", merged.not_followed);
        assert_eq!((merged.verdict, &merged.doubts), (d.verdict, &d.doubts));
    }
}

/// An intercommunicator between the job's halves, each rank with a receive posted from
/// its partner in the other half (the library resolves it to a COMM_WORLD rank): ranks
/// each a class of one follow it as rank by rank; a pending synchronous send each way
/// whose message waits at its destination proves a cycle of the pair.
#[test]
fn queues_on_an_intercommunicator_are_followed_rank_by_rank() {
    let n = 4;
    let partner = |r: u32| (r + 2) % n;
    let inter = |r: u32, receives: Vec<Operation>, unexpected, sends| Communicator {
        unique_id: 0x7000,
        name: "inter".into(),
        size: 2,
        local_rank: i64::from(r % 2),
        context: Some(ContextIds {
            context_id: 20,
            recv_context_id: 21,
        }),
        group: Some(vec![(r - r % 2) as i32, (r - r % 2 + 1) as i32].into()),
        group_error: None,
        pending_receives: Queue::Operations(receives),
        unexpected_messages: Queue::Operations(unexpected),
        pending_sends: Queue::Operations(sends),
    };
    // Its peer by its local rank in the remote group and its COMM_WORLD rank.
    let remote = |r: u32, tag| Operation {
        desired_local_rank: i64::from(partner(r) % 2),
        desired_global_rank: i64::from(partner(r)),
        remote_group: true,
        ..Operation::pending(0, tag)
    };
    let with_inter = |comm: &dyn Fn(u32) -> Communicator| {
        let (mut job, _) = jobs(&[Does::WithoutStack; 4]);
        for (r, rank) in job.ranks.iter_mut().enumerate() {
            if let Ok(comms) = &mut rank.outcome {
                comms.push(comm(r as u32));
            }
        }
        job
    };
    // Receives across the halves: pairs that may wait for each other, nothing proven.
    let job = with_inter(&|r| inter(r, vec![remote(r, 3)], vec![], vec![]));
    let d = followed(&job);
    assert_eq!(d.verdict, Verdict::Undetermined);
    assert_eq!(d.possibly_deadlocked, RankSet::full(n));
    assert!(d.deadlocked.is_empty());
    // As MPICH's ch3 library gives it: no context ids, only peers said to be remote.
    let job = with_inter(&|r| Communicator {
        context: None,
        ..inter(r, vec![remote(r, 3)], vec![], vec![])
    });
    let without = followed(&job);
    assert_eq!(
        (
            without.verdict,
            &without.doubts,
            &without.possibly_deadlocked
        ),
        (d.verdict, &d.doubts, &d.possibly_deadlocked)
    );
    assert_eq!(without.waits.len(), d.waits.len());
    // A message of another tag from the partner waits unexpected at each rank: the same
    // pairs, and a tag mismatch that names each peer by its COMM_WORLD rank (local ranks
    // of the two groups are no positions of one ring).
    let job = with_inter(&|r| {
        let mut message = remote(r, 5);
        message.sender = Some(SenderState::Waits);
        inter(r, vec![remote(r, 3)], vec![message], vec![])
    });
    let d = followed(&job);
    assert_eq!(
        (d.verdict, &d.possibly_deadlocked),
        (Verdict::Undetermined, &RankSet::full(n))
    );
    // Each rank waits for its partner only.
    let mut waits: Vec<(i32, String)> = d
        .waits
        .iter()
        .map(|w| (w.from, format!("{:?}", w.target)))
        .collect();
    waits.sort();
    waits.dedup();
    let partners: Vec<(i32, String)> = (0..n)
        .map(|r| (r as i32, format!("Rank({})", partner(r))))
        .collect();
    assert_eq!(waits, partners);
    // A mismatch each: the pairs' peers differ by COMM_WORLD rank.
    let kinds: Vec<FindingKind> = d.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            [FindingKind::DeadlockCycle; 2].as_slice(),
            &[FindingKind::TagMismatch; 4]
        ]
        .concat()
    );
    let mismatches = d
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::TagMismatch);
    for f in mismatches {
        let mqd_model::Subject::Mismatch { receive, message } = &f.subject else {
            panic!("{f:?}");
        };
        assert!(
            matches!(
                receive.source_relative,
                mqd_model::diagnosis::PeerName::World(_)
            ) && matches!(
                message.sender_relative,
                mqd_model::diagnosis::PeerName::World(_)
            ),
            "{f:?}"
        );
    }
}

/// A ring of receives from the left neighbour with tag 2, whose left neighbour's message
/// waits there with tag 1, one class of eight; and the same from rank 0 for all: their
/// tag mismatch is worded for the class as for each rank (the same neighbour of each,
/// or rank 0 for all, never the first member's neighbour for all).
#[test]
fn a_class_of_many_has_its_tag_mismatch_worded() {
    use mqd_model::diagnosis::{PeerName, Subject};
    let n = 8;
    for from in [Named::Right(n - 1), Named::Rank(0)] {
        let state = Queued {
            thread: (4, from, 2),
            receives: vec![(from, Some(2))],
            unexpected: vec![(from, 1, 0)],
            sends: Vec::new(),
            lists_sends: true,
            on_self: Vec::new(),
            on_row: Vec::new(),
        };
        let (job, classes) = queued_jobs(&[state], &vec![0; n as usize]);
        assert_eq!(classes.classes.len(), 1);
        let (ranks, by_classes) = followed_alike(&job, &classes);
        let mismatch = |findings: &[Finding]| -> Vec<(RankSet, PeerName, PeerName)> {
            (findings.iter())
                .filter(|f| f.kind == FindingKind::TagMismatch)
                .filter_map(|f| match &f.subject {
                    Subject::Mismatch { receive, message } => Some((
                        f.ranks.clone(),
                        receive.source_relative.clone(),
                        message.sender_relative.clone(),
                    )),
                    _ => None,
                })
                .collect()
        };
        let worded = mismatch(&by_classes.findings);
        let left = PeerName::Relative(mqd_model::Relation::Left);
        match from {
            // Every rank's left neighbour: one finding of every rank, as rank by rank.
            Named::Right(_) => {
                assert_eq!(worded, [(RankSet::full(n), left.clone(), left)]);
                assert_eq!(worded, mismatch(&ranks.findings));
            }
            // Rank 0 for all (itself too), never "their left neighbour" (rank 1's).
            _ => {
                let zero = PeerName::World(0);
                assert_eq!(worded, [(RankSet::full(n), zero.clone(), zero)]);
            }
        }
    }
}
