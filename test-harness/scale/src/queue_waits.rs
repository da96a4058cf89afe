//! The waits the queues of a job whose ranks are each a class of their own make, in the
//! order a reader of one rank's queues expects: the messages nobody takes (waiting unexpected at their
//! destinations, then sends without a copy there), then the receives nobody's message
//! takes. What the attention findings are made from.

use crate::queues::Peer;
use crate::view::Job;
use mqd_graph::Atom;
use mqd_model::diagnosis::Subject;
use mqd_model::{FindingKind, Wait};

/// The queues' waits of `view`, every class one rank.
pub(super) fn queue_waits(view: &Job<'_>) -> Vec<Wait> {
    let m = &view.matching;
    let mut waits = Vec::new();
    for (mi, ranks, q) in view.queues() {
        let Some(r) = ranks.first() else { continue };
        for (j, u) in q.unexpected.iter().enumerate() {
            if m.unexpected_taken[mi][j].contains(r) {
                continue;
            }
            let paired = m.unexpected_paired[mi][j].contains(r);
            // A message its sender has gone on from waits for nothing.
            let every_send = |s: u32| {
                view.queues_at(Peer::Abs(s))
                    .iter()
                    .any(|(_, _, q)| q.lists_every_send)
            };
            let sender = u.peer.at(r, view.n);
            if !paired && (u.sender_free || sender.is_some_and(every_send)) {
                continue;
            }
            waits.push(view.unexpected_wait(mi, j));
        }
    }
    for (mi, ranks, q) in view.queues() {
        let Some(r) = ranks.first() else { continue };
        let mut sends: Vec<Wait> = (0..q.sends.len())
            .filter(|&i| !m.send_paired[mi][i].contains(r) && !m.send_taken[mi][i].contains(r))
            .map(|i| view.message_wait(mi, i))
            .chain(q.unresolved.sends.iter().cloned())
            .collect();
        sends.sort_by_key(|w| w.evidence.first().map(|e| e.op));
        waits.extend(sends);
    }
    for (mi, ranks, q) in view.queues() {
        let Some(r) = ranks.first() else { continue };
        let mut receives: Vec<&Wait> = (0..q.receives.len())
            .filter(|&i| !m.receive_taken[mi][i].contains(r))
            .map(|i| &q.receives[i].wait)
            .chain(&q.unresolved.receives)
            .collect();
        receives.sort_by_key(|w| w.evidence.first().map(|e| e.op));
        waits.extend(receives.into_iter().cloned());
    }
    waits
}

/// The messages waiting unexpected from senders nobody can name (each rank a class of
/// its own).
pub(super) fn unknown_senders(view: &Job<'_>) -> Vec<Atom> {
    let mut atoms = Vec::new();
    for (_, ranks, q) in view.queues() {
        let Some(r) = ranks.first() else { continue };
        for w in &q.unresolved.messages {
            atoms.push(Atom::new(
                FindingKind::UnknownPeer,
                r as i32,
                Subject::UnknownSender {
                    sender_local: w.local_rank,
                    comm: w.comm.clone(),
                },
                w.evidence.clone(),
            ));
        }
    }
    atoms
}
