//! The JSON documents (schema `mqd/1`, defined in [`mqd_model::document`]): the
//! analysis's facts with their words.

use super::groups::state_lines;
use super::text::{diagnosis_text, dissolved_text, persisted_text};
use super::words::{evidence_lines, finding_text};
use mqd_model::aggregate::{QueueForm, RankForm};
use mqd_model::diagnosis::PeerName;
use mqd_model::document::{
    AggregatedDoc, CommFormDoc, DiagnosisDoc, FindingDoc, GroupDoc, JobDocument, OpFormDoc,
    PeerDoc, PersistenceDoc, QueueFormDoc, WaitDoc, WatchDocument,
};
use mqd_model::{
    Diagnosis, Finding, Group, JobDump, OperationStatus, Persistence, QueueKind, SCHEMA, Wait,
    WaitTarget,
};
use std::borrow::Cow;

/// The document of a dumped job: the dump, its rank sets and its diagnosis.
pub fn job_document<'a>(
    job: &'a JobDump,
    groups: &[Group],
    diagnosis: &Diagnosis,
) -> JobDocument<'a> {
    JobDocument {
        schema: Cow::Borrowed(SCHEMA),
        job: Cow::Borrowed(job),
        aggregated: AggregatedDoc {
            groups: groups.iter().map(group_doc).collect(),
        },
        diagnosis: diagnosis_doc(job, diagnosis),
        verdict: diagnosis_text(job, diagnosis),
    }
}

fn peer_doc(peer: &PeerName) -> PeerDoc {
    let relation = |r: &str| PeerDoc {
        relation: r.into(),
        world_rank: None,
        local_rank: None,
    };
    match peer {
        PeerName::AnySource => relation("any"),
        PeerName::Relative(r) => relation(r.name()),
        PeerName::World(w) => PeerDoc {
            world_rank: Some(i64::from(*w)),
            ..relation("absolute")
        },
        PeerName::Local(l) => PeerDoc {
            local_rank: Some(*l),
            ..relation("absolute")
        },
    }
}

fn queue_doc(q: &QueueForm) -> QueueFormDoc {
    match q {
        QueueForm::Ops(ops) => QueueFormDoc {
            available: true,
            error: None,
            operations: ops
                .iter()
                .map(|(op, n)| OpFormDoc {
                    peer: peer_doc(&op.peer),
                    tag: op.tag,
                    tag_wild: op.tag.is_none(),
                    count: op.count,
                    status: op.status.map(OperationStatus::from_code),
                    times: *n,
                })
                .collect(),
        },
        QueueForm::NoInformation => QueueFormDoc {
            available: false,
            error: None,
            operations: Vec::new(),
        },
        QueueForm::Error(e) => QueueFormDoc {
            available: false,
            error: Some(e.clone()),
            operations: Vec::new(),
        },
    }
}

/// A rank set with its words and its normalised communicators.
pub fn group_doc(g: &Group) -> GroupDoc {
    let (lines, summary) = state_lines(&g.form);
    let (error, communicators) = match &g.form {
        RankForm::Failed(e) => (Some(e.clone()), Vec::new()),
        RankForm::Display(comms) => (
            None,
            comms
                .iter()
                .map(|c| CommFormDoc {
                    name: c.key.name.clone(),
                    size: c.key.size,
                    pending_receives: queue_doc(c.queue(QueueKind::PendingReceives)),
                    unexpected_messages: queue_doc(c.queue(QueueKind::UnexpectedMessages)),
                    pending_sends: queue_doc(c.queue(QueueKind::PendingSends)),
                })
                .collect(),
        ),
    };
    GroupDoc {
        ranks: g.ranks.clone(),
        rank_list: g.ranks.to_vec(),
        unranked_pids: g.unranked.clone(),
        summary,
        lines,
        error,
        communicators,
    }
}

/// A finding with its words; `text` overrides its paragraph (a watch's prefixes).
pub fn finding_doc(job: &JobDump, f: &Finding, text: Option<String>) -> FindingDoc {
    FindingDoc {
        kind: f.kind,
        ranks: f.ranks.clone(),
        rank_list: f.ranks.to_vec(),
        text: text.unwrap_or_else(|| finding_text(f)),
        evidence: evidence_lines(job, &f.evidence),
        cycle: f.cycle.clone(),
        edges: f.edges.iter().map(|&(a, b)| [a, b]).collect(),
        communicators: f.communicators.clone(),
        operations: f.evidence.iter().map(|e| e.op).collect(),
        subject: f.subject.clone(),
    }
}

/// A wait with its words.
pub fn wait_doc(job: &JobDump, w: &Wait) -> WaitDoc {
    let (to, to_any, to_unknown_local_rank) = match &w.target {
        WaitTarget::Rank(t) => (Some(*t), None, None),
        WaitTarget::AnyOf(set) => (None, Some(set.to_string()), None),
        WaitTarget::AnyUnknown => (None, Some("unknown".into()), None),
        WaitTarget::UnknownRank { local } => (None, None, Some(*local)),
    };
    WaitDoc {
        from: w.from,
        to,
        to_any,
        to_unknown_local_rank,
        kind: w.kind,
        communicator: w.comm.clone(),
        local_rank: w.local_rank,
        peer_local_rank: w.peer_local,
        relation: if w.peer_local < 0 {
            "any".into()
        } else {
            w.relation().name().into()
        },
        tag: w.tag,
        count: w.count,
        evidence: evidence_lines(job, &w.evidence),
        operations: w.evidence.iter().map(|e| e.op).collect(),
    }
}

/// `diagnosis` of a job document.
pub fn diagnosis_doc(job: &JobDump, d: &Diagnosis) -> DiagnosisDoc {
    DiagnosisDoc {
        deadlock: d.has_deadlock(),
        deadlocked: d.deadlocked.clone(),
        findings: d
            .findings
            .iter()
            .map(|f| finding_doc(job, f, None))
            .collect(),
        waits: d.waits.iter().map(|w| wait_doc(job, w)).collect(),
    }
}

/// The document of a watch over `samples` (oldest first).
pub fn watch_document(
    samples: &[JobDump],
    p: &Persistence,
    interval_seconds: f64,
) -> WatchDocument {
    let empty;
    let last = match samples.last() {
        Some(last) => last,
        None => {
            empty = JobDump {
                dll: mqd_model::LibraryInfo {
                    path: String::new(),
                    version: String::new(),
                },
                acquired_by: mqd_model::Acquisition::Attach,
                starter_pid: None,
                abort_message: None,
                ranks: Vec::new(),
            };
            &empty
        }
    };
    WatchDocument {
        schema: SCHEMA.into(),
        samples: p.samples,
        interval_seconds,
        persistent: PersistenceDoc {
            samples: p.samples,
            deadlock: p.has_deadlock(),
            deadlocked: p.deadlocked.clone(),
            findings: p
                .findings
                .iter()
                .map(|f| finding_doc(last, f, Some(persisted_text(p, f))))
                .collect(),
            dissolved: p
                .dissolved
                .iter()
                .map(|d| {
                    let dump = samples.get(d.sample).unwrap_or(last);
                    finding_doc(dump, &d.finding, Some(dissolved_text(d.sample, &d.finding)))
                })
                .collect(),
            waits: p.waits.iter().map(|w| wait_doc(last, w)).collect(),
        },
    }
}
