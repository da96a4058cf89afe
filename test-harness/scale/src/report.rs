//! The class analysis's findings: what the queues show by kind, the collective's wait,
//! a clean job, and the comparison with the per-rank analysis's findings.

use super::diagnosis::{ClassDiagnosis, FindingRanks};
use super::view::QueueFacts;
use mqd_analysis::shared::{clean_finding, main_thread, place, seen_all, summary_failed};
use mqd_model::diagnosis::Doubt;
use mqd_model::{Certainty, ClassJob, CommKey, Finding, FindingKind, RankSet, Subject};
use std::collections::BTreeMap;

/// The per-rank analysis's findings of the queues, by kind: dumps that failed,
/// operations in transit, mismatches, ranks waited for that have nothing pending or
/// were not dumped, and the summary of waits that deadlock nobody.
pub(super) fn queue_findings_of(
    job: &ClassJob,
    facts: &QueueFacts,
    possibly_deadlocked: &RankSet,
    running: &RankSet,
) -> Vec<FindingRanks> {
    let definite = |kind: FindingKind, ranks: RankSet| FindingRanks {
        kind,
        certainty: Certainty::Definite,
        ranks,
    };
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let mut out = vec![
        definite(FindingKind::DumpFailed, failed.clone()),
        definite(FindingKind::InTransit, facts.in_transit.clone()),
    ];
    for (kind, ranks) in &facts.mismatched {
        out.push(definite(*kind, ranks.clone()));
    }
    // Ranks waited for that do nothing the queues show: idle if dumped, else not dumped
    // (unless only receives from any source name them).
    let dumped = job.dumped();
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
        .intersection(&dumped)
        .difference(&active)
        .difference(unreadable);
    // Queues not all read say nothing of what a rank does, whoever names it.
    let undumped = facts
        .waited
        .difference(&dumped)
        .union(&named.intersection(unreadable));
    out.push(definite(FindingKind::UnreadableQueues, unreadable.clone()));
    out.push(definite(FindingKind::UnknownPeer, facts.unresolved.clone()));
    out.push(definite(FindingKind::IdleTarget, idle_targets));
    out.push(definite(FindingKind::UndumpedTarget, undumped));
    let said = summary_failed(&dumped, &failed, running).is_some();
    let summary = said && possibly_deadlocked.is_empty() && !facts.waiting.is_empty();
    if summary {
        out.push(definite(FindingKind::NoDeadlock, facts.waiting.clone()));
    }
    out.retain(|f| !f.ranks.is_empty());
    out
}

/// Ranks `ranks` in collective `call` on `MPI_COMM_WORLD`, and where each class of the
/// others is (one place per class: its members are where its first is).
pub(super) fn collective_wait(job: &ClassJob, call: &str, ranks: &RankSet) -> Option<Finding> {
    let absent = RankSet::full(job.size).difference(ranks);
    if absent.is_empty() {
        return None;
    }
    let mut places: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut seen = RankSet::new();
    for c in &job.classes {
        let outside = c.ranks.intersection(&absent);
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
    let world = job
        .classes
        .iter()
        .flat_map(|c| c.first.communicators())
        .find(|c| c.name == "MPI_COMM_WORLD");
    let comm = world.map_or_else(
        || CommKey::named("MPI_COMM_WORLD", job.size.into()),
        CommKey::of,
    );
    Some(Finding::unproven_by_operations(
        FindingKind::CollectiveWait,
        Certainty::Definite,
        ranks.clone(),
        Subject::Collective {
            call: call.to_owned(),
            others,
            comm: Some(comm),
        },
    ))
}

/// Nothing held and no queue holding a wait: every dumped rank is clean (the per-rank
/// analysis's summary of such a job), with messages in transit or not.
pub(super) fn clean(
    job: &ClassJob,
    doubts: &[Doubt],
    possibly_deadlocked: &RankSet,
    running: &RankSet,
    in_transit: bool,
) -> Option<Finding> {
    if !possibly_deadlocked.is_empty() {
        return None;
    }
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let dumped = job.dumped();
    let failed = summary_failed(&dumped, &failed, running)?;
    Some(clean_finding(
        dumped,
        failed,
        in_transit,
        seen_all(doubts),
        running,
    ))
}

/// Findings as the class analysis is held to them: by kind and certainty, the union
/// of their ranks. What blocked calls' arguments show against each other (tag, source,
/// communicator and root mismatches, unmatched receives) is the per-rank analysis's
/// alone, and not held.
pub fn finding_ranks_of<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
) -> BTreeMap<(FindingKind, Certainty), RankSet> {
    let mut out: BTreeMap<(FindingKind, Certainty), RankSet> = BTreeMap::new();
    for f in findings.into_iter().filter(|f| {
        !matches!(
            f.subject,
            mqd_model::Subject::CallMismatch { .. } | mqd_model::Subject::RootMismatch { .. }
        )
    }) {
        out.entry((f.kind, f.certainty))
            .or_default()
            .union_with(&f.ranks);
    }
    out.retain(|_, ranks| !ranks.is_empty());
    out
}

impl ClassDiagnosis {
    /// Its findings as [`finding_ranks_of`] gives the per-rank analysis's: the deadlock
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
