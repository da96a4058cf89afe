use super::*;
use crate::diagnose::diagnose;
use crate::plan::{ANY_SOURCE, COMM_WORLD_HANDLE, PROC_NULL};
use mqd_model::{
    ClassJob, Communicator, Finding, FindingKind, JobDump, LibraryInfo, RankClass, RankDump,
    ThreadStack,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// What a generated rank does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Does {
    Computes,
    ReceivesFromRight(u32),
    ReceivesFrom(u32),
    ReceivesFromAny,
    ReceivesFromNobody,
    InCollective(&'static str),
    WaitsForItsThreads,
    InUnknownCall,
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
        1 => Just(Does::WaitsForItsThreads),
        1 => Just(Does::InUnknownCall),
        1 => (0..n).prop_map(Does::InSend),
        2 => (1..3u32, 7..9i64).prop_map(|(k, tag)| Does::SendsRight(k, tag)),
        2 => (1..3u32, 0..3u32).prop_map(|(to, from)| Does::Exchanges(to, from)),
        1 => Just(Does::WithoutStack),
        1 => Just(Does::Failed),
        1 => Just(Does::Missing),
    ]
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

fn dump(r: u32, n: u32, what: Does) -> RankDump {
    let thread = match what {
        Does::Computes => ThreadStack::named(1, &["compute", "main"], None),
        Does::ReceivesFromRight(k) => ThreadStack::named(
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
        Does::WaitsForItsThreads => ThreadStack::named(1, &["pthread_cond_wait", "main"], None),
        Does::InUnknownCall => ThreadStack::named(1, &["MPI_Frobnicate", "main"], None),
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
    let world = Communicator {
        unique_id: 0x1000,
        name: "MPI_COMM_WORLD".into(),
        size: i64::from(n),
        local_rank: i64::from(r),
        context: None,
        group: Some((0..n as i32).collect()),
        group_error: None,
        pending_receives: Queue::NoInformation,
        unexpected_messages: Queue::NoInformation,
        pending_sends: Queue::NoInformation,
    };
    RankDump {
        threads: if what == Does::WithoutStack {
            Vec::new()
        } else {
            vec![thread]
        },
        outcome: Ok(vec![world]),
        ..RankDump::unread(r as i32, Some(1000 + r as i32), Some("/bin/app".into()))
    }
}

/// The job rank by rank, and as classes of the ranks that do the same.
fn jobs(plan: &[Does]) -> (JobDump, ClassJob) {
    let n = plan.len() as u32;
    let mut ranks = Vec::new();
    let mut by_state: BTreeMap<Does, (RankSet, Vec<RankDump>)> = BTreeMap::new();
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
                let (members, dumps) = by_state.entry(what).or_default();
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
        classes,
        failed: if failed.is_empty() {
            Vec::new()
        } else {
            vec![(failed, "not attached".into())]
        },
        unranked: 0,
        separate: None,
    };
    (job, classes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// Where the classes follow every rank, they reach the per-rank verdict, doubts and
    /// worst-reading set; where they do not, they never conclude.
    #[test]
    fn classes_reach_the_per_rank_verdict(plan in (2..24u32).prop_flat_map(|n| {
        prop::collection::vec(does(n), n as usize)
    })) {
        let (job, classes) = jobs(&plan);
        let per_rank = diagnose(&job);
        let by_classes = diagnose_classes(&classes);
        if by_classes.not_followed.is_empty() {
            prop_assert_eq!(by_classes.verdict, per_rank.verdict);
            prop_assert_eq!(&by_classes.doubts, &per_rank.doubts);
            prop_assert_eq!(&by_classes.possibly_deadlocked, &per_rank.possibly_deadlocked);
            // The collective's and the summary's findings, word for word.
            let kinds = [FindingKind::CollectiveWait, FindingKind::Clean];
            let same_kinds: Vec<&Finding> =
                per_rank.findings.iter().filter(|f| kinds.contains(&f.kind)).collect();
            prop_assert_eq!(same_kinds, by_classes.findings.iter().collect::<Vec<_>>());
            // The deadlocks' findings are about ranks the classes find possibly
            // deadlocked; the others of those are in calls the doubts name as unknown.
            let mut held = RankSet::new();
            per_rank
                .findings
                .iter()
                .filter(|f| f.kind.is_deadlock() || f.kind == FindingKind::BlockedByDeadlock)
                .for_each(|f| held.union_with(&f.ranks));
            prop_assert!(held.is_subset(&by_classes.possibly_deadlocked));
            let mut unknown = RankSet::new();
            for d in &by_classes.doubts {
                if let Doubt::UnknownPlaces { ranks, .. } = d {
                    unknown.union_with(ranks);
                }
            }
            prop_assert!(by_classes.possibly_deadlocked.difference(&held).is_subset(&unknown));
        } else {
            // Undetermined, whatever the per-rank analysis concludes, with the ranks named.
            prop_assert_eq!(by_classes.verdict, Verdict::Undetermined);
            let named = by_classes
                .doubts
                .iter()
                .any(|d| matches!(d, Doubt::NotFollowed { .. }));
            prop_assert!(named);
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
        classes: vec![
            class(plan_ranks, Does::InCollective("MPI_Allreduce")),
            class(
                deviants.iter().copied().collect(),
                Does::ReceivesFromRight(1),
            ),
        ],
        failed: Vec::new(),
        unranked: 0,
        separate: None,
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
        classes: vec![ring(RankSet::full(n))],
        failed: Vec::new(),
        unranked: 0,
        separate: None,
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
