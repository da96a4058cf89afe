//! What could not be read of a job: ranks not dumped, processes without a COMM_WORLD
//! rank, ranks whose queues could not all be read, each as its own dump says.

use mqd_graph::Atom;
use mqd_model::diagnosis::Subject;
use mqd_model::{ClassJob, Communicator, FindingKind, QueueKind, RankSet};

/// The atoms of ranks and processes that could not be dumped, ranks first (by rank),
/// then processes without a rank; then an atom per class whose first member's queues
/// could not all be read.
pub(super) fn failures(job: &ClassJob) -> Vec<Atom> {
    let dump_failed = |ranks: RankSet, pid: Option<i32>, error: &str| {
        let subject = Subject::DumpFailed {
            pid,
            error: error.to_owned(),
        };
        Atom::of_ranks(FindingKind::DumpFailed, ranks, subject, Vec::new())
    };
    let mut failed: Vec<Atom> = job
        .failed
        .iter()
        .map(|f| dump_failed(f.ranks.clone(), f.pid, &f.why))
        .collect();
    for c in &job.classes {
        if let Err(error) = &c.first.outcome {
            let pid = if c.ranks.len() == 1 {
                c.first.pid
            } else {
                None
            };
            failed.push(dump_failed(c.ranks.clone(), pid, error));
        }
    }
    failed.sort_by_key(|a| a.ranks.first());
    let mut atoms = failed;
    for p in &job.unranked {
        atoms.push(match &p.error {
            Some(error) => dump_failed(RankSet::new(), p.pid, error),
            None => Atom::new(
                FindingKind::DumpFailed,
                -1,
                Subject::NoWorldRank { pid: p.pid },
                Vec::new(),
            ),
        });
    }
    for c in &job.classes {
        let Ok(comms) = &c.first.outcome else {
            continue;
        };
        if let Some(subject) = unreadable_queues(comms) {
            atoms.push(Atom::of_ranks(
                FindingKind::UnreadableQueues,
                c.ranks.clone(),
                subject,
                Vec::new(),
            ));
        }
    }
    atoms
}

/// What a rank with communicators `comms` could not read of its queues: how many, and
/// the first error; `None` when it read them all.
pub fn unreadable_queues(comms: &[Communicator]) -> Option<Subject> {
    let mut errors = comms
        .iter()
        .flat_map(|c| QueueKind::ALL.map(|q| c.queue(q).error()))
        .flatten();
    let first = errors.next()?;
    Some(Subject::UnreadableQueues {
        queues: 1 + errors.count(),
        error: first.text.clone(),
    })
}
