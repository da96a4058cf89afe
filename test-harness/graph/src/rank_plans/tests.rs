use super::*;
use crate::classes::MAX_ROUNDS;
use crate::deadlock::Graph;
use crate::plan::{Alternative, Plan};
use mqd_model::{CommKey, WaitKind};
use proptest::prelude::*;

fn wait(from: i32, target: WaitTarget, kind: WaitKind) -> Wait {
    Wait {
        from,
        target,
        kind,
        comm: CommKey::named("MPI_COMM_WORLD", 0),
        local_rank: i64::from(from),
        peer_local: -1,
        tag: None,
        count: 0,
        evidence: Vec::new(),
        blocked: false,
        requests: Vec::new(),
        remote_peer: false,
        call: None,
    }
}

/// How one wait of a generated rank names its target.
#[derive(Debug, Clone)]
enum Target {
    Right(u32),
    Fixed(u32),
    Itself { weak: bool },
    AnyOf(Vec<u32>),
    Unknown,
}

#[derive(Debug, Clone)]
struct GenRank {
    sink: bool,
    alternatives: Vec<(Vec<Target>, bool)>,
}

fn target(n: u32) -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (0..3u32).prop_map(Target::Right),
        2 => (0..n + 2).prop_map(Target::Fixed),
        1 => any::<bool>().prop_map(|weak| Target::Itself { weak }),
        2 => prop::collection::vec(0..n + 1, 0..4).prop_map(Target::AnyOf),
        1 => Just(Target::Unknown),
    ]
}

fn rank(n: u32) -> impl Strategy<Value = GenRank> {
    (
        prop::bool::weighted(0.05),
        prop::collection::vec(
            (
                prop::collection::vec(target(n), 0..3),
                prop::bool::weighted(0.1),
            ),
            0..3,
        ),
    )
        .prop_map(|(sink, alternatives)| GenRank { sink, alternatives })
}

/// A job of ranks with generated plans; ranks in `gaps` have none (not dumped, running).
fn job() -> impl Strategy<Value = (Vec<GenRank>, Vec<bool>)> {
    (1..40u32).prop_flat_map(|n| {
        (
            prop::collection::vec(rank(n), n as usize),
            prop::collection::vec(prop::bool::weighted(0.15), n as usize),
        )
    })
}

fn plan_of(ranks: &[GenRank], gaps: &[bool]) -> Plan {
    let n = ranks.len() as i32;
    let mut plan = Plan::default();
    for (r, g) in ranks.iter().enumerate() {
        let r = r as i32;
        if gaps[r as usize] {
            continue;
        }
        let entry = plan.ranks.entry(r).or_default();
        entry.sink = g.sink;
        for (targets, unknown) in &g.alternatives {
            let mut indices = Vec::new();
            for t in targets {
                let w = match t {
                    Target::Right(k) => {
                        wait(r, WaitTarget::Rank((r + *k as i32) % n), WaitKind::Receive)
                    }
                    Target::Fixed(t) => wait(r, WaitTarget::Rank(*t as i32), WaitKind::Send),
                    Target::Itself { weak } => wait(
                        r,
                        WaitTarget::Rank(r),
                        if *weak {
                            WaitKind::Unexpected
                        } else {
                            WaitKind::Send
                        },
                    ),
                    Target::AnyOf(set) => wait(
                        r,
                        WaitTarget::AnyOf(set.iter().copied().collect()),
                        WaitKind::Receive,
                    ),
                    Target::Unknown => wait(r, WaitTarget::AnyUnknown, WaitKind::Receive),
                };
                indices.push(plan.waits.len());
                plan.waits.push(w);
            }
            plan.ranks
                .get_mut(&r)
                .expect("entered")
                .alternatives
                .push(Alternative {
                    waits: indices,
                    unknown: *unknown,
                });
        }
    }
    plan
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// On any plan, the classes give exactly the set the per-rank worklist gives.
    #[test]
    fn classes_agree_with_the_per_rank_fixed_point((ranks, gaps) in job()) {
        let plan = plan_of(&ranks, &gaps);
        let facts = BTreeMap::new();
        let graph = Graph::of_plan(&plan, &facts);
        let per_rank = graph.deadlocked_per_rank();
        let classes = graph.deadlocked_by_classes();
        prop_assert_eq!(&classes, &Some(per_rank.clone()));
        // And the classes' own worklist, for plans they do not settle.
        let of_plans = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
        prop_assert_eq!(of_plans.deadlocked_by_ranks(usize::MAX), Some(per_rank));
    }
}

/// A ring of `n` ranks each receiving from its right neighbour, but for `free`, which
/// has no plan (its stack shows it computing).
fn ring(n: u32, free: Option<u32>) -> Plan {
    let ranks: Vec<GenRank> = (0..n)
        .map(|_| GenRank {
            sink: false,
            alternatives: vec![(vec![Target::Right(1)], false)],
        })
        .collect();
    let gaps: Vec<bool> = (0..n).map(|r| Some(r) == free).collect();
    plan_of(&ranks, &gaps)
}

#[test]
fn a_ring_of_a_million_is_one_class() {
    let n = 1_000_000;
    let plan = ring(n, None);
    let classes = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
    assert_eq!(classes.classes.len(), 1);
    assert_eq!(
        classes.classes[0].alternatives[0].rules,
        vec![Rule::Offset(1)]
    );
    assert_eq!(classes.deadlocked(), Some(RankSet::full(n)));
}

#[test]
fn a_broken_ring_is_a_chain_that_drains_or_is_handed_back() {
    // Short: the chain drains; nothing is deadlocked.
    let plan = ring(100, Some(40));
    let classes = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
    assert_eq!(classes.deadlocked(), Some(RankSet::new()));
    // Long, within one class: it goes at once, by pointer jumping.
    let plan = ring(1_000_000, Some(7));
    let classes = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
    assert_eq!(classes.classes.len(), 1);
    assert_eq!(classes.deadlocked(), Some(RankSet::new()));
    // Long, each step into another class (odd ranks also in an unknown call): more
    // rounds than allowed; the caller gets None and counts rank by rank.
    let n = 10 * MAX_ROUNDS as u32;
    let ranks: Vec<GenRank> = (0..n)
        .map(|r| GenRank {
            sink: false,
            alternatives: std::iter::once((vec![Target::Right(1)], false))
                .chain((r % 2 == 1).then(|| (Vec::new(), true)))
                .collect(),
        })
        .collect();
    let gaps: Vec<bool> = (0..n).map(|r| r == 7).collect();
    let plan = plan_of(&ranks, &gaps);
    let classes = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
    assert_eq!(classes.classes.len(), 2);
    assert_eq!(classes.deadlocked(), None);
    let facts = BTreeMap::new();
    let graph = Graph::of_plan(&plan, &facts);
    assert_eq!(graph.deadlocked_per_rank(), RankSet::new());
}

#[test]
fn every_rank_waiting_for_rank_zero_is_one_class() {
    let n = 1000;
    let ranks: Vec<GenRank> = (0..n)
        .map(|r| GenRank {
            sink: false,
            alternatives: vec![(
                vec![if r == 0 {
                    Target::AnyOf((1..n).collect())
                } else {
                    Target::Fixed(0)
                }],
                false,
            )],
        })
        .collect();
    let plan = plan_of(&ranks, &vec![false; n as usize]);
    let classes = crate::rank_plans::of_plans(&plan.ranks, &plan.waits);
    assert_eq!(classes.classes.len(), 2, "{:?}", classes.classes);
    assert_eq!(classes.deadlocked(), Some(RankSet::full(n)));
}
