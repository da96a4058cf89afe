//! Ranks whose queues could not all be read, each as its own dump says.

use mqd_graph::Atom;
use mqd_model::diagnosis::Subject;
use mqd_model::{ClassJob, Communicator, FindingKind, QueueKind};

/// An atom per class whose first member's queues could not all be read.
pub(super) fn unreadable(job: &ClassJob) -> Vec<Atom> {
    let mut atoms = Vec::new();
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
