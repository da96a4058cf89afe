//! The class analysis's findings: what the queues show by kind, the collective's wait,
//! a clean job, and the findings compared by kind, certainty and ranks.

use super::diagnosis::{ClassDiagnosis, FindingRanks};
use super::stacks::{CollComm, Instance};
use super::view::QueueFacts;
use mqd_graph::summary::{clean_finding, seen_all, summary_failed};
use mqd_model::diagnosis::Doubt;
use mqd_model::places::{self, OpenMpStates, instance_names, main_thread, place};
use mqd_model::{
    CallClass, Certainty, ClassJob, CommKey, Finding, FindingKind, Location, RankSet, Subject,
};
use std::collections::BTreeMap;

/// The findings of the queues, by kind: dumps that failed,
/// operations in transit, mismatches, ranks waited for that have nothing pending or
/// were not dumped, and the summary of waits that deadlock nobody.
/// `read`: the ranks whose queues were read; `failed`: those whose were not.
pub(super) fn queue_findings_of(
    job: &ClassJob,
    (read, failed): (&RankSet, &RankSet),
    facts: &QueueFacts,
    possibly_deadlocked: &RankSet,
    running: &RankSet,
) -> Vec<FindingRanks> {
    let definite = |kind: FindingKind, ranks: RankSet| FindingRanks {
        kind,
        certainty: Certainty::Definite,
        ranks,
    };
    let mut out = vec![
        definite(FindingKind::DumpFailed, failed.clone()),
        definite(FindingKind::InTransit, facts.in_transit.clone()),
    ];
    let mut mismatched: BTreeMap<FindingKind, RankSet> = BTreeMap::new();
    for m in &facts.mismatched {
        mismatched.entry(m.kind).or_default().union_with(&m.members);
    }
    for (kind, ranks) in mismatched {
        out.push(definite(kind, ranks));
    }
    // Ranks waited for that do nothing the queues show: idle if dumped, else not dumped
    // (unless only receives from any source name them).
    let dumped = read;
    let active = facts.waiting.union(&facts.transit);
    // A receive from any source names every other rank.
    let any_named = match facts.any_waiting.len() {
        0 => RankSet::new(),
        1 => RankSet::full(job.size).difference(&facts.any_waiting),
        _ => RankSet::full(job.size),
    };
    let named = facts.waited.union(&any_named);
    let unreadable = &facts.unreadable;
    let idle_targets = named
        .intersection(dumped)
        .difference(&active)
        .difference(unreadable);
    // Queues not all read say nothing of what a rank does, whoever names it.
    let undumped = facts
        .waited
        .difference(dumped)
        .union(&named.intersection(unreadable));
    out.push(definite(FindingKind::UnreadableQueues, unreadable.clone()));
    out.push(definite(FindingKind::UnknownPeer, facts.unresolved.clone()));
    out.push(definite(FindingKind::IdleTarget, idle_targets));
    out.push(definite(FindingKind::UndumpedTarget, undumped));
    let said = summary_failed(dumped, failed, running).is_some();
    let summary = said && possibly_deadlocked.is_empty() && !facts.waiting.is_empty();
    if summary {
        out.push(definite(FindingKind::NoDeadlock, facts.waiting.clone()));
    }
    out.retain(|f| !f.ranks.is_empty());
    out
}

/// The collectives' mismatches and waits: per communicator, the ranks in different
/// instances at once, and each instance (by the name a reader sees) that members outside
/// it hold, unless they are all in other instances (the mismatch says that).
pub(super) fn collective_waits(
    job: &ClassJob,
    comms: &[CollComm],
    instances: &BTreeMap<Instance, RankSet>,
    finalized: &RankSet,
) -> Vec<Finding> {
    // By communicator and members.
    let mut order: Vec<usize> = (0..comms.len()).collect();
    order.sort_by(|&a, &b| comms[a].cmp(&comms[b]));
    let mut out = Vec::new();
    for ci in order {
        let (key, members) = &comms[ci];
        let on: BTreeMap<places::Instance, RankSet> = instances
            .iter()
            .filter(|(i, _)| i.0 == ci)
            .map(|((_, call, root, bytes), ranks)| ((call.clone(), *root, *bytes), ranks.clone()))
            .collect();
        let calls = instance_names(&on);
        if calls.len() > 1 {
            out.push(collective_mismatch(job, &calls, Some(key.clone())));
        }
        let members = RankSet::from_i32s(members.iter());
        for (call, ranks) in &calls {
            let absent = members.difference(ranks);
            let elsewhere = calls
                .iter()
                .filter(|(other, _)| *other != call)
                .fold(RankSet::new(), |all, (_, set)| all.union(set));
            if absent.is_empty() || absent.is_subset(&elsewhere) {
                continue;
            }
            out.push(collective_wait(job, key, call, ranks, &absent, finalized));
        }
    }
    out
}

/// Ranks in collectives on communicators not known (`unnamed`, by call): what each
/// call waits for if its ranks share one, and where the other ranks are (the places of
/// their first members; those in another such call, in it).
pub(super) fn collectives_somewhere(
    job: &ClassJob,
    unnamed: &BTreeMap<String, RankSet>,
) -> Vec<Finding> {
    let mut elsewhere: BTreeMap<String, RankSet> = BTreeMap::new();
    for c in &job.classes {
        let Some(thread) = main_thread(&c.first) else {
            continue;
        };
        let mut ranks = c.ranks.clone();
        unnamed.values().for_each(|s| ranks = ranks.difference(s));
        if !ranks.is_empty() {
            let at = place(&thread.location_in(c.first.executable.as_deref()));
            elsewhere.entry(at).or_default().union_with(&ranks);
        }
    }
    let mut out = Vec::new();
    if unnamed.len() > 1 {
        out.push(collective_mismatch(job, unnamed, None));
    }
    for (call, ranks) in unnamed {
        if elsewhere.is_empty() && unnamed.len() > 1 {
            // Every rank is in one collective or another: the mismatch says it.
            continue;
        }
        let mut others: Vec<(RankSet, String)> = elsewhere
            .iter()
            .map(|(p, s)| (s.clone(), p.clone()))
            .chain(
                unnamed
                    .iter()
                    .filter(|(other, _)| *other != call)
                    .map(|(other, s)| (s.clone(), format!("in {other}"))),
            )
            .collect();
        others.sort();
        out.push(Finding::unproven_by_operations(
            FindingKind::CollectiveWait,
            Certainty::Definite,
            ranks.clone(),
            Subject::Collective {
                call: call.clone(),
                others,
                comm: None,
            },
        ));
    }
    out
}

/// Ranks `ranks` in collective `call` on `comm`, and where each class of the `absent`
/// members is (one place per class: its members are where its first is; ranks that
/// finalized are said so).
/// Ranks in different collectives at once (`calls`, by the names a reader sees), on
/// `comm` when the calls say so; each call with the line it was made at.
fn collective_mismatch(
    job: &ClassJob,
    calls: &BTreeMap<String, RankSet>,
    comm: Option<CommKey>,
) -> Finding {
    let mut ranks = RankSet::new();
    calls.values().for_each(|set| ranks.union_with(set));
    let firsts = || job.classes.iter().map(|c| &c.first);
    let classes = || job.classes.iter().map(|c| (&c.ranks, &c.first));
    let counted: Vec<Option<u64>> = match comm {
        Some(_) => calls
            .values()
            .map(|set| places::counted(classes(), set))
            .collect(),
        None => Vec::new(),
    };
    Finding::unproven_by_operations(
        FindingKind::CollectiveMismatch,
        if places::at_one_point(&counted) {
            Certainty::Definite
        } else {
            Certainty::Possible
        },
        ranks,
        Subject::CollectiveMismatch {
            calls: calls.clone().into_iter().collect(),
            comm,
            at: calls
                .iter()
                .map(|(call, ranks)| places::line_of_call(firsts(), ranks, call))
                .collect(),
            counted,
        },
    )
}

fn collective_wait(
    job: &ClassJob,
    comm: &CommKey,
    call: &str,
    ranks: &RankSet,
    absent: &RankSet,
    finalized: &RankSet,
) -> Finding {
    let mut places: BTreeMap<String, RankSet> = BTreeMap::new();
    let gone = absent.intersection(finalized);
    if !gone.is_empty() {
        places.insert("finalized (MPI_Finalize returned)".into(), gone.clone());
    }
    let mut seen = gone;
    for c in &job.classes {
        let outside = c.ranks.intersection(absent).difference(finalized);
        let Some(thread) = main_thread(&c.first).filter(|_| !outside.is_empty()) else {
            continue;
        };
        let at = place(&thread.location_in(c.first.executable.as_deref()));
        seen.union_with(&outside);
        places.entry(at).or_default().union_with(&outside);
    }
    let unseen = absent.difference(&seen);
    if !unseen.is_empty() {
        places
            .entry("not seen".into())
            .or_default()
            .union_with(&unseen);
    }
    let mut others: Vec<(RankSet, String)> = places.into_iter().map(|(p, s)| (s, p)).collect();
    others.sort();
    Finding::unproven_by_operations(
        FindingKind::CollectiveWait,
        Certainty::Definite,
        ranks.clone(),
        Subject::Collective {
            call: call.to_owned(),
            others,
            comm: Some(comm.clone()),
        },
    )
}

/// Nothing held and no queue holding a wait: every rank whose queues were read (`read`;
/// `failed`: the others) is clean (the summary of such a job), with
/// messages in transit or not.
pub(super) fn clean(
    (read, failed): (&RankSet, &RankSet),
    doubts: &[Doubt],
    possibly_deadlocked: &RankSet,
    running: &RankSet,
    in_transit: bool,
) -> Option<Finding> {
    if !possibly_deadlocked.is_empty() {
        return None;
    }
    let failed = summary_failed(read, failed, running)?;
    Some(clean_finding(
        read.clone(),
        failed,
        in_transit,
        seen_all(doubts),
        running,
    ))
}

/// Ranks blocked in point-to-point or wait calls whose queues could not be read and
/// whose calls' peers and communicators were not read either: the stacks prove them
/// blocked, but not on whom (a deadlock is possible). Said with the calls, the ranks
/// `running` and those in `MPI_Finalize`.
pub(super) fn blocked_without_queues(job: &ClassJob, running: &RankSet) -> Option<Finding> {
    let mut calls: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut finalized = RankSet::new();
    for c in &job.classes {
        let Some(thread) = main_thread(&c.first) else {
            continue;
        };
        let (call, class) = match thread.location_in(c.first.executable.as_deref()) {
            Location::InMpi { call, class } => (call, class),
            _ => continue,
        };
        if class == CallClass::Finalize {
            finalized.union_with(&c.ranks);
            continue;
        }
        let waits_for_messages = matches!(
            class,
            CallClass::BlockingReceive
                | CallClass::BlockingSend
                | CallClass::SendReceive
                | CallClass::Wait
        );
        // Whom a call waits for is known where its arguments were read.
        let read = c.first.threads.iter().any(|t| {
            t.call.as_ref().is_some_and(|a| {
                a.peer.is_some()
                    && (a.comm_address.is_some()
                        || a.context_id.is_some()
                        || a.predefined.is_some())
            })
        });
        if c.first.outcome.is_err() && waits_for_messages && !read {
            calls.entry(call).or_default().union_with(&c.ranks);
        }
    }
    if calls.is_empty() {
        return None;
    }
    let mut ranks = RankSet::new();
    calls.values().for_each(|set| ranks.union_with(set));
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

/// Ranks held by their own threads whose OpenMP runtime says on what (a barrier others
/// cannot reach, a lock): possible (a lock released a moment ago has a waiter that has
/// not noticed), one finding per set of states.
pub(super) fn openmp_waits(job: &ClassJob, self_blocked: &RankSet) -> Vec<Finding> {
    openmp_findings(
        job.classes.iter().map(|c| (&c.ranks, &c.first)),
        self_blocked,
    )
}

/// The OpenMP findings of ranks, each set of `members` with one of them (its first):
/// those `self_blocked`, one finding per set of states.
pub fn openmp_findings<'a>(
    members: impl IntoIterator<Item = (&'a RankSet, &'a mqd_model::RankDump)>,
    self_blocked: &RankSet,
) -> Vec<Finding> {
    let mut groups: BTreeMap<(OpenMpStates, bool), RankSet> = BTreeMap::new();
    for (ranks, first) in members {
        if !ranks.is_subset(self_blocked) {
            continue;
        }
        if let Some(key) = places::states_of(first) {
            groups.entry(key).or_default().union_with(ranks);
        }
    }
    groups
        .into_iter()
        .map(|((states, one_lock), ranks)| {
            Finding::unproven_by_operations(
                FindingKind::OpenMpWait,
                Certainty::Possible,
                ranks,
                Subject::OpenMpWait { states, one_lock },
            )
        })
        .collect()
}

/// Whether the class analysis gives a finding like `f` in full, word for word (its
/// others it gives by kind and ranks, [`FindingRanks`]): the collectives' waits and
/// mismatches, a clean
/// job, ranks blocked without queues, OpenMP waits, and what blocked calls' arguments
/// show against each other.
pub fn in_full(f: &Finding) -> bool {
    matches!(
        f.kind,
        FindingKind::CollectiveWait
            | FindingKind::CollectiveMismatch
            | FindingKind::Clean
            | FindingKind::BlockedWithoutQueues
            | FindingKind::OpenMpWait
    ) || matches!(
        f.subject,
        Subject::CallMismatch { .. } | Subject::RootMismatch { .. }
    )
}

/// Whether the class analysis gives finding `f` word for word only where every rank is a class of its own (beside those [`in_full`] gives for any job):
/// the deadlocks, the ranks blocked behind them, the messages in transit, the receives
/// a message would match but for one thing, the ranks waited for that show nothing,
/// the peers nobody can name, what could not be read, waits on finalized ranks, the
/// summary of waits that deadlock nobody.
pub fn in_full_for_ranks(f: &Finding) -> bool {
    f.kind.is_deadlock()
        || matches!(
            f.kind,
            FindingKind::BlockedByDeadlock
                | FindingKind::InTransit
                | FindingKind::TagMismatch
                | FindingKind::SourceMismatch
                | FindingKind::CommunicatorMismatch
                | FindingKind::IdleTarget
                | FindingKind::UndumpedTarget
                | FindingKind::UnknownPeer
                | FindingKind::UnreadableQueues
                | FindingKind::DumpFailed
                | FindingKind::NoDeadlock
                | FindingKind::WaitsOnFinalized
        )
}

/// Findings as the class analysis is held to them: by kind and certainty, the union
/// of their ranks.
pub fn finding_ranks_of<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
) -> BTreeMap<(FindingKind, Certainty), RankSet> {
    let mut out: BTreeMap<(FindingKind, Certainty), RankSet> = BTreeMap::new();
    for f in findings {
        out.entry((f.kind, f.certainty))
            .or_default()
            .union_with(&f.ranks);
    }
    out.retain(|_, ranks| !ranks.is_empty());
    out
}

impl ClassDiagnosis {
    /// Its findings as [`finding_ranks_of`] gives them of a diagnosis: the deadlock
    /// parts, the queues' findings and the collective's and summary's; `None` when the
    /// deadlock parts were not worked out.
    pub fn finding_ranks(&self) -> Option<BTreeMap<(FindingKind, Certainty), RankSet>> {
        let mut out = finding_ranks_of(&self.findings);
        for p in self.deadlocks.as_ref()?.iter().chain(&self.queue_findings) {
            out.entry((p.kind, p.certainty))
                .or_default()
                .union_with(&p.ranks);
        }
        out.retain(|_, ranks| !ranks.is_empty());
        Some(out)
    }
}

/// Fills each finding's communicators from its evidence, in order of first appearance.
pub fn name_communicators<'a>(
    findings: impl IntoIterator<Item = &'a mut Finding>,
    comm_of: impl Fn(&mqd_model::Evidence) -> Option<CommKey>,
) {
    for f in findings {
        let mut comms: Vec<CommKey> = Vec::new();
        for key in f.evidence.iter().filter_map(&comm_of) {
            if !comms.contains(&key) {
                comms.push(key);
            }
        }
        f.communicators = comms;
    }
}
