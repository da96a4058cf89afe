//! The findings of receives that a message to their rank would match but for its tag,
//! its source or its communicator, each with the receive and the message that show it.

use crate::queues::{Peer, Taken};
use crate::view::{Job, Mismatch};
use mqd_graph::Atom;
use mqd_model::diagnosis::{MismatchMessage, MismatchReceive, PeerName, Subject};
use mqd_model::{Relation, Wait, WaitTarget};

/// The atoms of `mismatched`, each of its members alike (its subject and evidence the
/// first member's).
pub(super) fn atoms(view: &Job<'_>, mismatched: &[Mismatch]) -> Vec<Atom> {
    mismatched
        .iter()
        .map(|m| {
            let receive = &view.classes_queues(m.class).receives[m.receive].wait;
            let (message, unexpected) = match m.message {
                Taken::Unexpected(j) => (view.unexpected_wait(m.class, j), true),
                Taken::Send { class, send, .. } => (view.message_wait(class, send), false),
            };
            let mut atom = Atom::of_ranks(
                m.kind,
                m.members.clone(),
                subject(receive, &message, unexpected),
                receive
                    .evidence
                    .iter()
                    .chain(&message.evidence)
                    .cloned()
                    .collect(),
            );
            if message.from >= 0 {
                atom.edges = vec![(receive.from, message.from), (message.from, receive.from)];
            }
            atom
        })
        .collect()
}

/// The atoms of `mismatched` that words can say of every member alike (classes of many):
/// a member alone that is its class's first (its own waits), or several whose receive's
/// source and message's sender are each the same rank for all or the same neighbour of
/// each (a distance the words have no name for, or a message still a pending send at
/// another class, is said by kind only, as the queues' findings say it).
pub(super) fn worded_atoms(view: &Job<'_>, mismatched: &[Mismatch]) -> Vec<Atom> {
    let mut out = Vec::new();
    for (m, mut atom) in mismatched.iter().zip(atoms(view, mismatched)) {
        let class = view.class_ranks(m.class);
        if m.members.len() == 1 && m.members.first() == class.first() {
            out.push(atom);
            continue;
        }
        let q = view.classes_queues(m.class);
        let sender = match m.message {
            Taken::Unexpected(j) => q.unexpected[j].peer,
            Taken::Send { .. } => continue,
        };
        let Subject::Mismatch { receive, message } = &mut atom.subject else {
            continue;
        };
        let several = m.members.len() > 1;
        if several
            && alike(
                q.receives[m.receive].peer,
                &receive.source,
                &mut receive.source_relative,
            )
            && alike(sender, &message.sender, &mut message.sender_relative)
        {
            // The first member's hops are no other member's.
            atom.edges.clear();
            out.push(atom);
        }
    }
    out
}

/// Whether a peer `relative` (of the first member) names what every member of a class
/// names by `peer`: the same rank for all (then said by `absolute`), or the same
/// neighbour of each.
fn alike(peer: Peer, absolute: &PeerName, relative: &mut PeerName) -> bool {
    match peer {
        Peer::Any => true,
        Peer::Abs(_) => {
            *relative = absolute.clone();
            true
        }
        Peer::Off(_) => matches!(relative, PeerName::Relative(_)),
    }
}

/// What a mismatch of `receive` and `message` is: each side's communicator, tag and
/// peer, by COMM_WORLD rank where known and relative to the receiver where it reads so.
fn subject(receive: &Wait, message: &Wait, unexpected: bool) -> Subject {
    let by_rank =
        |world: Option<i32>, local: i64| world.map_or(PeerName::Local(local), PeerName::World);
    let source = match receive.target {
        _ if receive.peer_local < 0 => PeerName::AnySource,
        WaitTarget::Rank(r) => PeerName::World(r),
        _ => PeerName::Local(receive.peer_local),
    };
    let source_relative = match (&source, receive.relation()) {
        (PeerName::AnySource, _) | (_, Relation::Absolute) => source.clone(),
        (_, r) => PeerName::Relative(r),
    };
    let sender_rank = (message.from >= 0).then_some(message.from);
    let sender = by_rank(sender_rank, message.local_rank);
    // Local ranks of an intercommunicator's two groups are no positions of one ring.
    let same_comm = message.comm == receive.comm && !message.remote_peer;
    let sender_relative =
        match Relation::of(receive.local_rank, message.local_rank, receive.comm.size) {
            r if same_comm && r != Relation::Absolute => PeerName::Relative(r),
            _ => sender.clone(),
        };
    Subject::Mismatch {
        receive: MismatchReceive {
            comm: receive.comm.clone(),
            tag: receive.tag,
            source,
            source_relative,
        },
        message: MismatchMessage {
            comm: message.comm.clone(),
            tag: message.tag.unwrap_or_default(),
            sender,
            sender_relative,
            unexpected,
            dest: match message.target {
                WaitTarget::Rank(d) => Some(d),
                _ => None,
            },
            sender_rank,
        },
    }
}
