//! The messages in transit, as the per-rank findings name them: the operations a
//! class's members list as matched, then each message a posted receive takes, receive by
//! receive (for a member alone, only its class's first: the words name its peers).

use crate::queues::Taken;
use crate::view::Job;
use mqd_graph::Atom;
use mqd_model::diagnosis::Subject;
use mqd_model::{FindingKind, Wait};
use std::collections::BTreeMap;

/// The atoms of the messages in transit, and how many each rank has (a message taken
/// counts at its receiver and at its sender).
pub(super) fn transit(view: &Job<'_>) -> (Vec<Atom>, BTreeMap<i32, usize>) {
    let mut atoms = Vec::new();
    let mut count: BTreeMap<i32, usize> = BTreeMap::new();
    for (_, ranks, q) in view.queues() {
        let Some(rank) = ranks.first() else { continue };
        let rank = rank as i32;
        for e in &q.matched {
            *count.entry(rank).or_default() += 1;
            atoms.push(Atom::of_ranks(
                FindingKind::InTransit,
                ranks.clone(),
                Subject::Matched,
                vec![e.clone()],
            ));
        }
    }
    let m = &view.matching;
    let mut delivered: Vec<_> = m.delivered.iter().collect();
    delivered.sort_by_key(|d| (d.class, d.receive));
    for d in delivered {
        // A member alone other than its class's first: the first's peers are not its.
        let first = view.class_ranks(d.class).first();
        if d.members.len() == 1 && d.members.first() != first {
            continue;
        }
        let receive = &view.classes_queues(d.class).receives[d.receive].wait;
        // The message's waits: its send, then its copy waiting unexpected.
        let parts: Vec<&Wait> = match d.message {
            Taken::Unexpected(j) => {
                let copy = &view.classes_queues(d.class).unexpected[j].wait;
                let send = m
                    .pairs
                    .iter()
                    .find(|p| (p.2, p.3) == (d.class, j))
                    .map(|&(qi, i, ..)| &view.classes_queues(qi).sends[i].wait);
                send.into_iter().chain([copy]).collect()
            }
            Taken::Send { class, send, .. } => vec![&view.classes_queues(class).sends[send].wait],
        };
        let Some(&message) = parts.last() else {
            continue;
        };
        let from = match d.message {
            Taken::Send { from, .. } => Some(from as i32),
            Taken::Unexpected(_) => parts.iter().map(|w| w.from).find(|&s| s >= 0),
        };
        let to = receive.from;
        for r in [Some(to), from].into_iter().flatten() {
            *count.entry(r).or_default() += 1;
        }
        let mut evidence: Vec<_> = parts.iter().flat_map(|w| w.evidence.clone()).collect();
        evidence.extend(receive.evidence.iter().cloned());
        atoms.push(Atom::of_ranks(
            FindingKind::InTransit,
            d.members.clone(),
            Subject::Delivered {
                from,
                to,
                comm: message.comm.clone(),
                tag: message.tag.unwrap_or_default(),
            },
            evidence,
        ));
    }
    (atoms, count)
}
