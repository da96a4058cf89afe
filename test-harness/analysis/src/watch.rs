//! Watch: only the waits present in every sample are kept and the deadlock analysis is
//! run again on them: a cycle that persists is a deadlock, one that dissolves was traffic.

use crate::deadlock::Graph;
use crate::diagnose;
use mqd_model::diagnosis::{Dissolved, Subject};
use mqd_model::{
    Certainty, CommKey, Diagnosis, Finding, FindingKind, JobDump, Persistence, RankSet, Wait,
    WaitTarget,
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
}

fn key(w: &Wait) -> WaitKey {
    WaitKey {
        from: w.from,
        target: w.target.clone(),
        message: w.kind.is_message(),
        comm: w.comm.clone(),
        tag: w.tag,
    }
}

fn summary(ranks: RankSet, subject: Subject) -> Finding {
    Finding {
        certainty: Certainty::Definite,
        kind: if matches!(subject, Subject::NoSample) {
            FindingKind::Clean
        } else {
            FindingKind::NoDeadlock
        },
        ranks,
        subject,
        communicators: Vec::new(),
        evidence: Vec::new(),
        cycle: None,
        edges: Vec::new(),
    }
}

/// The waits and deadlocks that persist across `samples` (oldest first): a cycle present
/// in every sample is a deadlock, one that dissolves is traffic. A job that finished (or
/// moved on) between samples gives no deadlock.
pub fn persistent(samples: &[Diagnosis]) -> Persistence {
    let Some(last) = samples.last() else {
        return Persistence {
            samples: 0,
            waits: Vec::new(),
            findings: vec![summary(RankSet::new(), Subject::NoSample)],
            dissolved: Vec::new(),
            deadlocked: RankSet::new(),
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
    let graph = Graph::new(&waits, &last.facts);
    let (mut findings, deadlocked) = graph.findings();
    let persisted: HashSet<(i32, i32)> = findings
        .iter()
        .filter(|f| f.kind.is_deadlock())
        .flat_map(|f| f.edges.iter().copied())
        .collect();
    let mut dissolved: Vec<Dissolved> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        for f in s.findings.iter().filter(|f| f.kind.is_deadlock()) {
            let lasted = match f.kind {
                FindingKind::DeadlockKnot => f.ranks.is_subset(&deadlocked),
                _ => !f.edges.is_empty() && f.edges.iter().all(|e| persisted.contains(e)),
            };
            let known = dissolved.iter().any(|d| {
                d.finding.kind == f.kind && d.finding.edges == f.edges && d.finding.ranks == f.ranks
            });
            if lasted || known {
                continue;
            }
            dissolved.push(Dissolved {
                sample: i,
                finding: f.clone(),
            });
        }
    }
    let comms = crate::communicators_of_waits(&waits);
    crate::name_communicators(&mut findings, |e| comms.get(e).map(|&c| c.clone()));
    if findings.is_empty() {
        findings.push(summary(
            RankSet::from_i32s(waits.iter().map(|w| &w.from)),
            Subject::NothingPersisted {
                waits: waits.len(),
                samples: samples.len(),
            },
        ));
    }
    Persistence {
        samples: samples.len(),
        waits,
        findings,
        dissolved,
        deadlocked,
    }
}

/// [`persistent`] over dumps: diagnoses each first.
pub fn persistent_dumps(samples: &[JobDump]) -> Persistence {
    let diagnoses: Vec<Diagnosis> = samples.iter().map(diagnose).collect();
    persistent(&diagnoses)
}
