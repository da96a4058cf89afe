//! The analysis as a user reads it: every finding with the words `mqd` prints for it,
//! every rank set with its summary and lines, and the JSON `mqd --json` writes.

use mqd::render::{groups, json, text, words};
use mqd_model::document::AggregatedDoc;
use mqd_model::{Certainty, Diagnosis, Finding, FindingKind, Group, JobDump, Persistence, RankSet};
use serde_json::Value;
use std::ops::Deref;

/// A finding with its words.
#[derive(Debug, Clone)]
pub struct Seen {
    pub kind: FindingKind,
    pub certainty: Certainty,
    pub ranks: RankSet,
    pub text: String,
    pub evidence: Vec<String>,
    pub cycle: Option<Vec<i32>>,
    pub edges: Vec<(i32, i32)>,
}

fn seen(job: &JobDump, f: &Finding, text: String) -> Seen {
    Seen {
        kind: f.kind,
        certainty: f.certainty,
        ranks: f.ranks.clone(),
        text,
        evidence: words::evidence_lines(job, &f.evidence),
        cycle: f.cycle.clone(),
        edges: f.edges.clone(),
    }
}

/// A job's diagnosis with its words.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub job: JobDump,
    pub diagnosis: Diagnosis,
    pub findings: Vec<Seen>,
}

impl Deref for Rendered {
    type Target = Diagnosis;
    fn deref(&self) -> &Diagnosis {
        &self.diagnosis
    }
}

/// Diagnoses `job` and words the findings, holding its ranks merged into classes to the
/// same conclusions.
pub fn diagnose(job: &JobDump) -> Rendered {
    let diagnosis = mqd_analysis::diagnose(job);
    // Every rank of the tests' jobs is followed: nothing is undetermined for want of it.
    let not_followed: Vec<_> = diagnosis
        .doubts
        .iter()
        .filter(|d| matches!(d, mqd_model::Doubt::NotFollowed { .. }))
        .collect();
    assert!(not_followed.is_empty(), "{not_followed:?}");
    let merged = mqd_remote::classes_of(job).expect("a job in memory is classes");
    merged_as_rank_by_rank(&merged, &diagnosis);
    let findings = diagnosis
        .findings
        .iter()
        .map(|f| seen(job, f, words::finding_text(f)))
        .collect();
    Rendered {
        job: job.clone(),
        diagnosis,
        findings,
    }
}

/// The analysis of `classes` (ranks merged as agents and relays merge them) follows
/// every class and reaches the conclusions of its ranks each a class of its own
/// (`ranks`): the verdict, doubts, proven and worst-reading sets, every finding's kind,
/// certainty and ranks, and the collective's and clean findings word for word.
fn merged_as_rank_by_rank(classes: &mqd_model::ClassJob, ranks: &Diagnosis) {
    let d = mqd_scale::diagnose_classes(classes);
    assert!(
        d.not_followed.is_empty(),
        "the analysis of {} classes does not follow {:?}
rank by rank {ranks:#?}",
        classes.classes.len(),
        d.not_followed
    );
    assert_eq!(
        d.verdict, ranks.verdict,
        "classes {d:#?}
rank by rank {ranks:#?}"
    );
    assert_eq!(d.doubts, ranks.doubts);
    assert_eq!(d.deadlocked, ranks.deadlocked);
    assert_eq!(d.possibly_deadlocked, ranks.possibly_deadlocked);
    // Every finding's kind, certainty and ranks: on cycles, in knots and blocked behind,
    // proven and possible; the queues' findings; the collective's and the summary's.
    assert_eq!(
        d.finding_ranks(),
        Some(mqd_scale::finding_ranks_of(&ranks.findings)),
        "classes {d:#?}
rank by rank {:#?}",
        ranks.findings
    );
    // The collectives', the summary's and the calls' findings, word for word.
    assert_eq!(in_full(&ranks.findings), in_full(&d.findings));
}

/// The findings the class analysis gives in full, by kind (in their order within it).
fn in_full(findings: &[Finding]) -> Vec<&Finding> {
    let mut out: Vec<&Finding> = findings.iter().filter(|f| mqd_scale::in_full(f)).collect();
    out.sort_by_key(|f| f.kind);
    out
}

impl Rendered {
    /// The diagnosis as the text view prints it.
    pub fn to_text(&self) -> String {
        text::diagnosis_text(&self.job, &self.diagnosis)
    }

    /// The `diagnosis` member of the JSON document.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json::diagnosis_doc(&self.job, &self.diagnosis)).unwrap()
    }

    /// The findings of one kind.
    pub fn of_kind(&self, kind: FindingKind) -> impl Iterator<Item = &Seen> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

/// The verdict `mqd` prints for `job`.
pub fn verdict(job: &JobDump) -> String {
    diagnose(job).to_text()
}

/// What persisted over a watch, with its words.
#[derive(Debug, Clone)]
pub struct Watched {
    pub jobs: Vec<JobDump>,
    pub persistence: Persistence,
    pub findings: Vec<Seen>,
    pub new: Vec<Seen>,
    pub dissolved: Vec<Seen>,
}

impl Deref for Watched {
    type Target = Persistence;
    fn deref(&self) -> &Persistence {
        &self.persistence
    }
}

impl Watched {
    pub fn to_text(&self) -> String {
        text::persistence_text(&self.jobs, &self.persistence)
    }

    pub fn to_json(&self) -> Value {
        let last = self.jobs.len().saturating_sub(1);
        let diagnosis = diagnose(&self.jobs[last]).diagnosis;
        let answer = json::WatchAnswer {
            at: last,
            dump: &self.jobs[last],
            diagnosis: &diagnosis,
        };
        let doc =
            json::watch_document(&self.jobs, &self.persistence, &answer, self.jobs.len(), 1.0);
        serde_json::to_value(doc.persistent).unwrap()
    }
}

/// [`mqd_analysis::persistent`] over diagnosed samples.
pub fn persistent(samples: &[Rendered]) -> Watched {
    let diagnoses: Vec<Diagnosis> = samples.iter().map(|s| s.diagnosis.clone()).collect();
    let jobs: Vec<JobDump> = samples.iter().map(|s| s.job.clone()).collect();
    let p = mqd_analysis::persistent(&diagnoses);
    let last = jobs.last().cloned();
    let findings = match &last {
        Some(last) => p
            .findings
            .iter()
            .map(|f| seen(last, f, text::persisted_text(&p, f)))
            .collect(),
        None => Vec::new(),
    };
    let words = |list: &[mqd_model::diagnosis::Dissolved]| -> Vec<Seen> {
        list.iter()
            .map(|d| {
                seen(
                    &jobs[d.sample],
                    &d.finding,
                    text::dissolved_text(d.sample, &d.finding),
                )
            })
            .collect()
    };
    let new = words(&p.new);
    let dissolved = words(&p.dissolved);
    Watched {
        jobs,
        persistence: p,
        findings,
        new,
        dissolved,
    }
}

/// [`persistent`] over dumps: diagnoses each first.
pub fn persistent_dumps(samples: &[JobDump]) -> Watched {
    let diagnosed: Vec<Rendered> = samples.iter().map(diagnose).collect();
    persistent(&diagnosed)
}

/// A rank set with its words.
#[derive(Debug, Clone)]
pub struct SeenGroup {
    pub group: Group,
    pub ranks: RankSet,
    pub summary: String,
    pub lines: Vec<String>,
}

/// The rank sets of `job`, with their words.
pub fn aggregate(job: &JobDump) -> Vec<SeenGroup> {
    mqd_analysis::aggregate(job)
        .into_iter()
        .map(|group| {
            let (lines, summary) = groups::state_lines(&group.form);
            SeenGroup {
                ranks: group.ranks.clone(),
                group,
                summary,
                lines,
            }
        })
        .collect()
}

/// The aggregated text view.
pub fn aggregate_text(seen: &[SeenGroup]) -> String {
    let groups: Vec<Group> = seen.iter().map(|g| g.group.clone()).collect();
    groups::groups_text(&groups, 0)
}

/// The `aggregated` member of the JSON document.
pub fn aggregate_json(seen: &[SeenGroup]) -> Value {
    let doc = AggregatedDoc {
        groups: seen.iter().map(|g| json::group_doc(&g.group)).collect(),
    };
    serde_json::to_value(doc).unwrap()
}
