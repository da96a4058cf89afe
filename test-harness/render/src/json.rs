//! The JSON documents (schema `mqd/3`, defined in [`mqd_model::document`]): the
//! analysis's facts with their words.

use super::groups::state_lines;
use super::text::{TEXT_EVIDENCE_LINES, diagnosis_text, dissolved_text, persisted_text};
use super::verdict::doubt_text;
use super::words::{evidence_lines, finding_text};
use mqd_model::aggregate::{QueueForm, RankForm};
use mqd_model::diagnosis::{Doubt, PeerName};
use mqd_model::document::{
    AggregatedDoc, CommFormDoc, DiagnosisDoc, DoubtDoc, FindingDoc, GroupDoc, JobDocument,
    OpFormDoc, PeerDoc, PersistenceDoc, QueueFormDoc, WaitDoc, WatchDocument,
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
        stacks: None,
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
                    collective: op.collective,
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
                    name: c.key.name.to_string(),
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
        certainty: f.certainty,
        ranks: f.ranks.clone(),
        rank_list: f.ranks.to_vec(),
        text: text.unwrap_or_else(|| finding_text(f)),
        evidence_omitted: f.evidence.len().saturating_sub(TEXT_EVIDENCE_LINES),
        evidence: evidence_lines(
            job,
            &f.evidence[..f.evidence.len().min(TEXT_EVIDENCE_LINES)],
        ),
        cycle: f.cycle.clone(),
        edges: f.edges.iter().map(|&(a, b)| [a, b]).collect(),
        communicators: f.communicators.clone(),
        operations: f.evidence.iter().map(|e| e.op).collect(),
        subject: f.subject.clone(),
    }
}

/// A wait with its words.
pub fn wait_doc(w: &Wait) -> WaitDoc {
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
        operations: w.evidence.iter().map(|e| e.op).collect(),
        call: w.call.clone(),
        proven: w.blocked,
    }
}

fn doubt_docs(doubts: &[Doubt]) -> Vec<DoubtDoc> {
    doubts
        .iter()
        .map(|doubt| DoubtDoc {
            doubt: doubt.clone(),
            text: doubt_text(doubt),
        })
        .collect()
}

/// `diagnosis` of a job document.
pub fn diagnosis_doc(job: &JobDump, d: &Diagnosis) -> DiagnosisDoc {
    DiagnosisDoc {
        verdict: d.verdict,
        doubts: doubt_docs(&d.doubts),
        deadlock: d.has_deadlock(),
        deadlocked: d.deadlocked.clone(),
        possibly_deadlocked: d.possibly_deadlocked.clone(),
        findings: d
            .findings
            .iter()
            .map(|f| finding_doc(job, f, None))
            .collect(),
        waits: d.waits.iter().map(wait_doc).collect(),
        hold: d.hold.clone(),
    }
}

/// The watch's answer: the diagnosis of sample `at`, with its hold.
pub struct WatchAnswer<'a> {
    /// The sample the diagnosis is of.
    pub at: usize,
    /// Its dump.
    pub dump: &'a JobDump,
    /// Its diagnosis.
    pub diagnosis: &'a Diagnosis,
}

/// The document of a watch over `samples` (oldest first), answered by `answer`.
pub fn watch_document(
    samples: &[JobDump],
    p: &Persistence,
    answer: &WatchAnswer<'_>,
    samples_requested: usize,
    interval_seconds: f64,
) -> WatchDocument {
    let empty;
    let last = match samples.last() {
        Some(last) => last,
        None => {
            empty = JobDump {
                snapshot: mqd_model::Snapshot::One,
                dll: mqd_model::LibraryInfo {
                    path: String::new(),
                    version: String::new(),
                    note: None,
                },
                acquired_by: mqd_model::Acquisition::Attach,
                starter_pid: None,
                abort_message: None,
                job_size: None,
                ranks: Vec::new(),
            };
            &empty
        }
    };
    WatchDocument {
        schema: SCHEMA.into(),
        samples: p.samples,
        samples_requested,
        interval_seconds,
        persistent: PersistenceDoc {
            samples: p.samples,
            verdict: p.verdict,
            doubts: doubt_docs(&p.doubts),
            deadlock: p.has_deadlock(),
            deadlocked: p.deadlocked.clone(),
            possibly_deadlocked: p.possibly_deadlocked.clone(),
            findings: p
                .findings
                .iter()
                .map(|f| finding_doc(last, f, Some(persisted_text(p, f))))
                .collect(),
            new: p
                .new
                .iter()
                .map(|d| {
                    let dump = samples.get(d.sample).unwrap_or(last);
                    finding_doc(dump, &d.finding, Some(dissolved_text(d.sample, &d.finding)))
                })
                .collect(),
            dissolved: p
                .dissolved
                .iter()
                .map(|d| {
                    let dump = samples.get(d.sample).unwrap_or(last);
                    finding_doc(dump, &d.finding, Some(dissolved_text(d.sample, &d.finding)))
                })
                .collect(),
            waits: p.waits.iter().map(wait_doc).collect(),
        },
        diagnosis: diagnosis_doc(answer.dump, answer.diagnosis),
        diagnosis_sample: answer.at,
        verdict: diagnosis_text(answer.dump, answer.diagnosis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{
        Acquisition, Communicator, LibraryInfo, Operation, OperationStatus, Queue, RankDump,
        SenderState,
    };

    fn job() -> JobDump {
        let op = Operation {
            collective: false,
            status: OperationStatus::Complete,
            desired_local_rank: -1,
            desired_global_rank: -1,
            tag_wild: true,
            desired_tag: -1,
            desired_length: 3,
            system_buffer: false,
            buffer: 0x1000,
            actual_local_rank: 2,
            actual_global_rank: 5,
            actual_tag: 9,
            actual_length: 3,
            extra_text: vec!["posted receive".into()],
            sender: Some(SenderState::GoneOn),
            request: None,
            remote_group: false,
        };
        let comm = Communicator {
            context: None,
            unique_id: 0x10,
            local_rank: 0,
            size: 2,
            name: "c \"quoted\"".into(),
            group: Some(vec![4, 5].into()),
            group_error: None,
            pending_receives: Queue::Operations(vec![op]),
            unexpected_messages: Queue::NoInformation,
            pending_sends: Queue::Operations(Vec::new()),
        };
        let rank = |n, outcome| RankDump {
            mpi: mqd_model::MpiState::default(),
            rank: n,
            pid: Some(100 + n),
            host: Some("h".into()),
            executable: None,
            message: None,
            lists_blocking_sends: None,
            signal: None,
            duplicate: false,
            threads: Vec::new(),
            outcome,
            notes: Vec::new(),
            traffic: None,
        };
        JobDump {
            snapshot: mqd_model::Snapshot::One,
            dll: LibraryInfo {
                path: "/x.so".into(),
                version: "v".into(),
                note: None,
            },
            acquired_by: Acquisition::Attach,
            starter_pid: None,
            abort_message: None,
            job_size: None,
            ranks: vec![
                rank(0, Ok(vec![comm.clone(), comm])),
                rank(1, Err("gone".into())),
            ],
        }
    }

    #[test]
    fn streamed_json_is_the_document_and_reads_back() {
        let job = job();
        let groups = mqd_analysis::aggregate(&job);
        let diagnosis = mqd_analysis::diagnose(&job);
        let doc = job_document(&job, &groups, &diagnosis);
        let mut out = Vec::new();
        serde_json::to_writer(&mut out, &doc).unwrap();
        let streamed: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let whole = serde_json::to_value(&doc).unwrap();
        assert_eq!(streamed, whole);
        assert_eq!(whole["schema"], "mqd/3");
        assert_eq!(whole["ranks"][1]["error"], "gone");
        assert_eq!(whole["ranks"][1]["communicators"], serde_json::json!([]));
        let op = &whole["ranks"][0]["communicators"][1]["pending_receives"]["operations"][0];
        assert_eq!(op["actual_global_rank"], 5);
        assert_eq!(op["status"], "complete");
        assert_eq!(op["sender"], "gone_on");
        let none = &whole["ranks"][0]["communicators"][0]["unexpected_messages"];
        assert_eq!(none["available"], false);
        // The document reads back into the model it was written from.
        let back: JobDocument<'_> = serde_json::from_slice(&out).unwrap();
        assert_eq!(back.job.as_ref(), &job);
        assert_eq!(back.diagnosis, doc.diagnosis);
    }
}
