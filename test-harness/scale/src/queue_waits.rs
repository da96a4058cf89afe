//! The waits the queues of a job whose ranks are each a class of their own make, in the
//! per-rank scan's order: the messages nobody takes (waiting unexpected at their
//! destinations, then sends without a copy there), then the receives nobody's message
//! takes. What the attention findings are made from.

use crate::queues::Peer;
use crate::view::Job;
use mqd_model::Wait;

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
        for i in 0..q.sends.len() {
            if !m.send_paired[mi][i].contains(r) && !m.send_taken[mi][i].contains(r) {
                waits.push(view.message_wait(mi, i));
            }
        }
    }
    for (mi, ranks, q) in view.queues() {
        let Some(r) = ranks.first() else { continue };
        let mut receives: Vec<&Wait> = (0..q.receives.len())
            .filter(|&i| !m.receive_taken[mi][i].contains(r))
            .map(|i| &q.receives[i].wait)
            .chain(&q.unresolved_waits)
            .collect();
        receives.sort_by_key(|w| w.evidence.first().map(|e| e.op));
        waits.extend(receives.into_iter().cloned());
    }
    waits
}
