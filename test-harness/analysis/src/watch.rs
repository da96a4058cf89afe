//! Watch: each sample judged whole; a deadlock every sample found persisted (proven only
//! if every sample proved it); one the last sample no longer has dissolved (traffic); one
//! the last sample has that did not persist is new, too recent to tell. "No deadlock" is
//! the last sample's, and needs every sample to have seen every rank. The waits present in
//! every sample (the same MPI requests, when the library names them) are listed.

use crate::diagnose::diagnose;
use mqd_model::diagnosis::{Dissolved, Doubt, Subject};
use mqd_model::{
    Certainty, CommKey, Diagnosis, Finding, FindingKind, JobDump, Persistence, RankSet, Verdict,
    Wait, WaitTarget,
};
use std::collections::HashSet;

/// Identity of a [`Wait`] across samples (a send and its unexpected copy are one message).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WaitKey {
    from: i32,
    target: WaitTarget,
    message: bool,
    comm: CommKey,
    tag: Option<i64>,
    requests: Vec<u64>,
}

fn key(w: &Wait) -> WaitKey {
    let mut requests = w.requests.clone();
    requests.sort_unstable();
    WaitKey {
        from: w.from,
        target: w.target.clone(),
        message: w.kind.is_message(),
        comm: w.comm.clone(),
        tag: w.tag,
        requests,
    }
}

fn summary(ranks: RankSet, subject: Subject) -> Finding {
    let kind = if matches!(subject, Subject::NoSample) {
        FindingKind::Clean
    } else {
        FindingKind::NoDeadlock
    };
    Finding::unproven_by_operations(kind, Certainty::Definite, ranks, subject)
}

/// Every sample's doubts but the unproven deadlocks (judged on what persisted), one per
/// kind, their ranks joined.
fn sample_doubts(samples: &[Diagnosis]) -> Vec<Doubt> {
    let mut out: Vec<Doubt> = Vec::new();
    for doubt in samples.iter().flat_map(|s| &s.doubts) {
        // What persisted is judged below (a send that relies on buffering included).
        if matches!(
            doubt,
            Doubt::Unproven { .. } | Doubt::Buffering { .. } | Doubt::Recent { .. }
        ) {
            continue;
        }
        let same = out
            .iter_mut()
            .find(|d| std::mem::discriminant(*d) == std::mem::discriminant(doubt));
        match (same, doubt) {
            (None, d) => out.push(d.clone()),
            (Some(Doubt::NoWorldRank { processes }), Doubt::NoWorldRank { processes: p }) => {
                *processes = (*processes).max(*p);
            }
            (
                Some(
                    Doubt::Missing { ranks }
                    | Doubt::Failed { ranks }
                    | Doubt::Unreadable { ranks }
                    | Doubt::UnknownPeers { ranks },
                ),
                Doubt::Missing { ranks: r }
                | Doubt::Failed { ranks: r }
                | Doubt::Unreadable { ranks: r }
                | Doubt::UnknownPeers { ranks: r },
            ) => ranks.union_with(r),
            _ => {}
        }
    }
    out
}

/// Whether a deadlock finding of some sample is among `deadlocks` (by its edges, or by
/// its ranks for a knot).
fn among(f: &Finding, edges: &HashSet<(i32, i32)>, ranks: &RankSet) -> bool {
    match f.kind {
        FindingKind::DeadlockKnot => f.ranks.is_subset(ranks),
        _ => !f.edges.is_empty() && f.edges.iter().all(|e| edges.contains(e)),
    }
}

fn deadlock_edges(findings: &[Finding]) -> HashSet<(i32, i32)> {
    findings
        .iter()
        .filter(|f| f.kind.is_deadlock())
        .flat_map(|f| f.edges.iter().copied())
        .collect()
}

/// The waits and deadlocks that persist across `samples` (oldest first).
///
/// Each sample is judged whole (stacks, queues, the proof and the worst reading); what
/// persisted is what every sample found: ranks proven deadlocked in every sample are
/// deadlocked, ranks possibly deadlocked in every sample possibly so. The findings are
/// the last sample's deadlocks that every sample had. "No deadlock" is the last sample's,
/// when no sample missed a rank.
pub fn persistent(samples: &[Diagnosis]) -> Persistence {
    let Some(last) = samples.last() else {
        return Persistence {
            samples: 0,
            waits: Vec::new(),
            findings: vec![summary(RankSet::new(), Subject::NoSample)],
            new: Vec::new(),
            dissolved: Vec::new(),
            deadlocked: RankSet::new(),
            possibly_deadlocked: RankSet::new(),
            verdict: Verdict::Undetermined,
            doubts: Vec::new(),
        };
    };
    let mut common: HashSet<WaitKey> = last.waits.iter().map(key).collect();
    for s in &samples[..samples.len() - 1] {
        let keys: HashSet<WaitKey> = s.waits.iter().map(key).collect();
        common.retain(|k| keys.contains(k));
    }
    let waits: Vec<Wait> = last
        .waits
        .iter()
        .filter(|w| common.contains(&key(w)))
        .cloned()
        .collect();
    let mut deadlocked = last.deadlocked.clone();
    let mut possibly_deadlocked = last.possibly_deadlocked.clone();
    for s in &samples[..samples.len() - 1] {
        deadlocked = deadlocked.intersection(&s.deadlocked);
        possibly_deadlocked = possibly_deadlocked.intersection(&s.possibly_deadlocked);
    }
    possibly_deadlocked.union_with(&deadlocked);
    let edges: Vec<HashSet<(i32, i32)>> = samples
        .iter()
        .map(|s| deadlock_edges(&s.findings))
        .collect();
    // Edges that waits present in every sample make.
    let held: HashSet<(i32, i32)> = waits
        .iter()
        .flat_map(|w| {
            let targets: Vec<u32> = w.targets().map(|t| t.iter().collect()).unwrap_or_default();
            targets.into_iter().map(move |t| (w.from, t as i32))
        })
        .collect();
    let everywhere = |f: &Finding| {
        f.edges.iter().all(|e| held.contains(e))
            && samples
                .iter()
                .zip(&edges)
                .all(|(s, e)| among(f, e, &s.possibly_deadlocked))
    };
    // The last sample's deadlocks that every sample had; proven only if proven throughout.
    let mut findings: Vec<Finding> = last
        .findings
        .iter()
        .filter(|f| f.kind.is_deadlock_part())
        .filter(|f| everywhere(f))
        .map(|f| {
            let mut f = f.clone();
            if !f.ranks.is_subset(&deadlocked) {
                f.certainty = Certainty::Possible;
            }
            f
        })
        .collect();
    let persisted = deadlock_edges(&findings);
    let in_last = &edges[edges.len() - 1];
    // New: the last sample's deadlocks that did not persist. Dissolved: earlier ones the
    // last sample no longer has.
    let unseen = |f: &&Finding| f.kind.is_deadlock() && !among(f, &persisted, &possibly_deadlocked);
    let new: Vec<Dissolved> = last
        .findings
        .iter()
        .filter(unseen)
        .map(|f| Dissolved {
            sample: samples.len() - 1,
            finding: f.clone(),
        })
        .collect();
    let mut dissolved: Vec<Dissolved> = Vec::new();
    for (i, s) in samples[..samples.len() - 1].iter().enumerate() {
        for f in s.findings.iter().filter(unseen) {
            let known = dissolved.iter().any(|d| {
                d.finding.kind == f.kind && d.finding.edges == f.edges && d.finding.ranks == f.ranks
            });
            if !known && !among(f, in_last, &last.possibly_deadlocked) {
                dissolved.push(Dissolved {
                    sample: i,
                    finding: f.clone(),
                });
            }
        }
    }
    let mut doubts = sample_doubts(samples);
    let unproven = possibly_deadlocked.difference(&deadlocked);
    if !unproven.is_empty() {
        doubts.push(Doubt::Unproven { ranks: unproven });
    }
    let mut recent = RankSet::new();
    for n in &new {
        recent.union_with(&n.finding.ranks);
    }
    let recent = recent.difference(&possibly_deadlocked);
    if !recent.is_empty() {
        doubts.push(Doubt::Recent { ranks: recent });
    }
    let seen_every_rank = !doubts.iter().any(|d| {
        matches!(
            d,
            Doubt::Missing { .. }
                | Doubt::Failed { .. }
                | Doubt::NoWorldRank { .. }
                | Doubt::Unreadable { .. }
        )
    });
    if findings.is_empty() {
        findings.push(summary(
            RankSet::from_i32s(waits.iter().map(|w| &w.from)),
            Subject::NothingPersisted {
                waits: waits.len(),
                samples: samples.len(),
                seen_all: doubts.is_empty(),
            },
        ));
    }
    let verdict = if !deadlocked.is_empty() {
        Verdict::Deadlock
    } else if last.verdict == Verdict::NoDeadlock && seen_every_rank {
        Verdict::NoDeadlock
    } else {
        Verdict::Undetermined
    };
    // The last sample's word on what it saw, when it is the answer.
    if verdict == Verdict::NoDeadlock {
        doubts.clear();
    }
    Persistence {
        samples: samples.len(),
        verdict,
        doubts,
        waits,
        findings,
        new,
        dissolved,
        deadlocked,
        possibly_deadlocked,
    }
}

/// [`persistent`] over dumps: diagnoses each first.
pub fn persistent_dumps(samples: &[JobDump]) -> Persistence {
    let diagnoses: Vec<Diagnosis> = samples.iter().map(diagnose).collect();
    persistent(&diagnoses)
}
