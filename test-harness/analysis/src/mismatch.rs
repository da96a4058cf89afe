//! Mismatches: a posted receive that would take a message waiting for its rank but for
//! the tag, the source or the communicator.

use crate::scan::{Msg, Recv, Scan};
use mqd_graph::Atom;
use mqd_model::diagnosis::{MismatchMessage, MismatchReceive, PeerName, Subject};
use mqd_model::{FindingKind, Relation};
use std::collections::HashMap;

/// Most mismatches examined per posted receive, and reported in all.
const MISMATCHES_PER_RECEIVE: usize = 4;
const MISMATCHES_TOTAL: usize = 256;

pub(crate) fn mismatches(s: &Scan) -> Vec<Atom> {
    let mut by_dest: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, m) in s.msgs.iter().enumerate() {
        if let (false, Some(d)) = (m.consumed, m.dest) {
            by_dest.entry(d).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for recv in s.recvs.iter().filter(|r| !r.consumed) {
        if out.len() >= MISMATCHES_TOTAL {
            break;
        }
        let Some(candidates) = by_dest.get(&recv.rank) else {
            continue;
        };
        let mut found = 0;
        for &i in candidates {
            if found >= MISMATCHES_PER_RECEIVE {
                break;
            }
            let m = &s.msgs[i];
            let kind = if m.comm == recv.comm {
                let source_ok = recv.source_local < 0 || m.sender_local == recv.source_local;
                match (source_ok, recv.takes_tag(m.tag)) {
                    (true, false) => FindingKind::TagMismatch,
                    (false, true) => FindingKind::SourceMismatch,
                    _ => continue,
                }
            } else {
                let source_ok = match (m.sender, recv.source_local) {
                    (Some(sender), l) if l < 0 => {
                        recv.tag.is_some()
                            && recv.any.as_ref().is_some_and(|g| g.contains_i32(sender))
                    }
                    (Some(sender), _) => recv.source == Some(sender),
                    (None, _) => false,
                };
                if source_ok && recv.takes_tag(m.tag) {
                    FindingKind::CommunicatorMismatch
                } else {
                    continue;
                }
            };
            found += 1;
            out.push(mismatch_atom(kind, recv, m));
        }
    }
    out
}

/// A rank named by COMM_WORLD rank when known, else by local rank.
fn by_rank(world: Option<i32>, local: i64) -> PeerName {
    world.map_or(PeerName::Local(local), PeerName::World)
}

fn mismatch_atom(kind: FindingKind, recv: &Recv, m: &Msg) -> Atom {
    let source = if recv.source_local < 0 {
        PeerName::AnySource
    } else {
        by_rank(recv.source, recv.source_local)
    };
    let source_relative = match (
        &source,
        Relation::of(recv.local, recv.source_local, recv.comm.size),
    ) {
        (PeerName::AnySource, _) | (_, Relation::Absolute) => source.clone(),
        (_, r) => PeerName::Relative(r),
    };
    let sender = by_rank(m.sender, m.sender_local);
    let sender_relative = match Relation::of(recv.local, m.sender_local, recv.comm.size) {
        r if m.comm == recv.comm && r != Relation::Absolute => PeerName::Relative(r),
        _ => sender.clone(),
    };
    let mut evidence = vec![recv.evidence.clone()];
    evidence.extend(m.evidence());
    Atom {
        kind,
        ranks: mqd_model::RankSet::from_i32s([recv.rank]),
        subject: Subject::Mismatch {
            receive: MismatchReceive {
                comm: recv.comm.clone(),
                tag: recv.tag,
                source,
                source_relative,
            },
            message: MismatchMessage {
                comm: m.comm.clone(),
                tag: m.tag,
                sender,
                sender_relative,
                unexpected: m.unexpected.is_some(),
                dest: m.dest,
                sender_rank: m.sender,
            },
        },
        evidence,
        edges: m
            .sender
            .map(|s| vec![(recv.rank, s), (s, recv.rank)])
            .unwrap_or_default(),
    }
}
