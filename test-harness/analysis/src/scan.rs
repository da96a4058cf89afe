//! From the queues of every rank to messages, receives and [`Wait`]s.
//!
//! A pending send, and a message waiting unexpected at its destination, make the sender
//! wait for the receiver (a send and its unexpected copy at the destination are one
//! message); a posted receive with a specific source makes the receiver wait for that
//! source; an `MPI_ANY_SOURCE` receive waits for any member of its communicator. A message
//! that a posted receive at its destination takes is in transit and waits for nothing; so
//! are operations in status "matched". Completed operations wait for nothing.

use mqd_graph::Atom;
use mqd_model::diagnosis::{RankFacts, Subject};
use mqd_model::{
    CommKey, Evidence, FindingKind, JobDump, OpRef, OperationStatus, Peer, Queue, QueueKind,
    RankSet, SenderState, Wait, WaitKind, WaitTarget,
};
use mqd_scale::shared::{
    CollectiveOp, collective_ops_on, is_complete, peer_group, unexpected_sender, unreadable_queues,
    world_of,
};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A message between two ranks: a pending send, its copy waiting unexpected at the
/// destination, or both.
#[derive(Debug, Clone)]
pub(crate) struct Msg {
    pub sender: Option<i32>,
    pub dest: Option<i32>,
    pub comm: CommKey,
    pub sender_local: i64,
    pub dest_local: i64,
    pub tag: i64,
    pub count: i64,
    pub send: Option<Evidence>,
    pub unexpected: Option<Evidence>,
    /// The library says the sender did not wait for this message (an eager standard
    /// send): it is no evidence that the sender is blocked.
    pub sender_free: bool,
    /// The library says the sender waits for this message (a synchronous send).
    pub sender_waits: bool,
    /// The requests of its send and its unexpected copy, when the library names them.
    pub requests: Vec<u64>,
    /// The peer is in the remote group of an intercommunicator.
    pub remote: bool,
    pub consumed: bool,
}

impl Msg {
    pub fn evidence(&self) -> Vec<Evidence> {
        self.send.iter().chain(&self.unexpected).cloned().collect()
    }
}

/// A posted receive.
#[derive(Debug, Clone)]
pub(crate) struct Recv {
    pub rank: i32,
    pub comm: CommKey,
    pub local: i64,
    pub source_local: i64,
    pub source: Option<i32>,
    pub any: Option<RankSet>,
    pub tag: Option<i64>,
    pub count: i64,
    pub evidence: Evidence,
    pub request: Option<u64>,
    pub remote: bool,
    pub consumed: bool,
}

impl Recv {
    pub fn takes_tag(&self, tag: i64) -> bool {
        self.tag.is_none_or(|t| t == tag)
    }
}

/// Everything the findings are made from.
pub(crate) struct Scan {
    pub facts: BTreeMap<i32, RankFacts>,
    pub msgs: Vec<Msg>,
    pub recvs: Vec<Recv>,
    pub waits: Vec<Wait>,
    pub atoms: Vec<Atom>,
    pub failed_atoms: Vec<Atom>,
    /// Operations of collectives' own algorithms: not the program's point-to-point
    /// operations, but a sign of the collective a rank is in.
    pub collective_ops: Vec<CollectiveOp>,
}

fn resolved(rank: Option<i32>) -> Peer {
    rank.map_or(Peer::Unresolved, Peer::World)
}

fn transit_atom(rank: i32, evidence: Evidence) -> Atom {
    Atom::new(
        FindingKind::InTransit,
        rank,
        Subject::Matched,
        vec![evidence],
    )
}

pub(crate) fn scan(job: &JobDump) -> Scan {
    let mut facts: BTreeMap<i32, RankFacts> = BTreeMap::new();
    let mut unexpected: Vec<Msg> = Vec::new();
    let mut sends: Vec<Msg> = Vec::new();
    // Sized once: growing by doubling would hold two copies of 100,000s of receives.
    let posted: usize = job
        .ranks
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .flatten()
        .map(|c| c.pending_receives.ops().len())
        .sum();
    let mut recvs: Vec<Recv> = Vec::with_capacity(posted);
    let mut atoms: Vec<Atom> = Vec::new();
    let mut failed_atoms: Vec<Atom> = Vec::new();
    let mut collective_ops: Vec<CollectiveOp> = Vec::new();
    let mut lists_every_send: HashSet<i32> = HashSet::new();
    for (process, r) in job.ranks.iter().enumerate() {
        if r.duplicate {
            continue;
        }
        let rank = r.rank;
        let comms = match &r.outcome {
            Err(e) => {
                failed_atoms.push(Atom::new(
                    FindingKind::DumpFailed,
                    rank,
                    Subject::DumpFailed {
                        pid: r.pid,
                        error: e.clone(),
                    },
                    Vec::new(),
                ));
                if rank >= 0 {
                    facts.insert(
                        rank,
                        RankFacts {
                            pid: r.pid,
                            error: Some(e.clone()),
                            ..RankFacts::default()
                        },
                    );
                }
                continue;
            }
            Ok(comms) => comms,
        };
        if rank < 0 {
            failed_atoms.push(Atom::new(
                FindingKind::DumpFailed,
                rank,
                Subject::NoWorldRank { pid: r.pid },
                Vec::new(),
            ));
            continue;
        }
        let mut fact = RankFacts {
            pid: r.pid,
            ..RankFacts::default()
        };
        if let Some(subject) = unreadable_queues(comms) {
            fact.unreadable = true;
            failed_atoms.push(Atom::new(
                FindingKind::UnreadableQueues,
                rank,
                subject,
                Vec::new(),
            ));
        }
        let sends_read = comms
            .iter()
            .all(|c| matches!(c.pending_sends, Queue::Operations(_)));
        if r.lists_blocking_sends == Some(true) && sends_read {
            lists_every_send.insert(rank);
        }
        for (communicator, c) in comms.iter().enumerate() {
            let key = CommKey::of(c);
            let group = peer_group(c);
            let at = |queue, index| OpRef {
                process,
                communicator,
                queue,
                index,
            };
            // A collective's own messages: no point-to-point wait of the program.
            collective_ops.extend(collective_ops_on(c, rank, (process, communicator)));
            for (i, op) in c.pending_sends.ops().iter().enumerate() {
                if is_complete(op) || op.collective {
                    continue;
                }
                let dest = world_of(c, op.desired_local_rank, op.desired_global_rank);
                let evidence = Evidence {
                    op: at(QueueKind::PendingSends, i),
                    peer: resolved(dest),
                };
                if op.status == OperationStatus::Matched {
                    fact.transit += 1;
                    atoms.push(transit_atom(rank, evidence));
                    continue;
                }
                sends.push(Msg {
                    sender: Some(rank),
                    dest,
                    comm: key.clone(),
                    sender_local: c.local_rank,
                    dest_local: op.desired_local_rank,
                    tag: op.desired_tag,
                    count: op.desired_length,
                    send: Some(evidence),
                    unexpected: None,
                    sender_free: false,
                    sender_waits: false,
                    requests: op.request.into_iter().collect(),
                    remote: op.remote_group,
                    consumed: false,
                });
            }
            for (i, op) in c.unexpected_messages.ops().iter().enumerate() {
                if op.collective {
                    continue;
                }
                let sender = unexpected_sender(c, op);
                unexpected.push(Msg {
                    sender,
                    dest: Some(rank),
                    comm: key.clone(),
                    sender_local: op.desired_local_rank,
                    dest_local: c.local_rank,
                    tag: op.desired_tag,
                    count: op.desired_length,
                    send: None,
                    unexpected: Some(Evidence {
                        op: at(QueueKind::UnexpectedMessages, i),
                        peer: resolved(sender),
                    }),
                    sender_free: op.sender == Some(SenderState::GoneOn),
                    sender_waits: op.sender == Some(SenderState::Waits),
                    requests: op.request.into_iter().collect(),
                    remote: op.remote_group,
                    consumed: false,
                });
            }
            for (i, op) in c.pending_receives.ops().iter().enumerate() {
                if is_complete(op) || op.collective {
                    continue;
                }
                let any = (op.desired_local_rank < 0).then(|| group.clone()).flatten();
                let source = world_of(c, op.desired_local_rank, op.desired_global_rank);
                let peer = if op.desired_local_rank < 0 {
                    any.clone().map_or(Peer::AnyUnresolved, Peer::AnyOf)
                } else {
                    resolved(source)
                };
                let evidence = Evidence {
                    op: at(QueueKind::PendingReceives, i),
                    peer,
                };
                if op.status == OperationStatus::Matched {
                    fact.transit += 1;
                    atoms.push(transit_atom(rank, evidence));
                    continue;
                }
                recvs.push(Recv {
                    rank,
                    comm: key.clone(),
                    local: c.local_rank,
                    source_local: op.desired_local_rank.max(-1),
                    source,
                    any,
                    tag: (!op.tag_wild).then_some(op.desired_tag),
                    count: op.desired_length,
                    evidence,
                    request: op.request,
                    remote: op.remote_group,
                    consumed: false,
                });
            }
        }
        facts.insert(rank, fact);
    }

    let mut msgs = pair_copies(unexpected, sends);
    // A message its sender does not list, where every pending send is listed: the send
    // completed (eagerly), its sender has gone on.
    for m in &mut msgs {
        if m.send.is_none() && m.sender.is_some_and(|s| lists_every_send.contains(&s)) {
            m.sender_free = true;
        }
    }
    let mut s = Scan {
        facts,
        msgs,
        recvs,
        waits: Vec::new(),
        atoms,
        failed_atoms,
        collective_ops,
    };
    deliver(&mut s);
    s.waits = waits(&mut s);
    s
}

/// A send and its copy waiting unexpected at the destination are one message.
fn pair_copies(unexpected: Vec<Msg>, sends: Vec<Msg>) -> Vec<Msg> {
    let mut copies: HashMap<(i32, CommKey, i64, i64), Vec<usize>> = HashMap::new();
    for (i, m) in unexpected.iter().enumerate().rev() {
        if let Some(d) = m.dest {
            copies
                .entry((d, m.comm.clone(), m.sender_local, m.tag))
                .or_default()
                .push(i);
        }
    }
    let mut msgs = unexpected;
    for s in sends {
        let copy = s.dest.and_then(|d| {
            copies
                .get_mut(&(d, s.comm.clone(), s.sender_local, s.tag))
                .and_then(Vec::pop)
        });
        match copy {
            Some(i) => {
                msgs[i].send = s.send;
                msgs[i].sender = msgs[i].sender.or(s.sender);
                msgs[i].count = s.count;
                msgs[i].requests.extend(s.requests);
            }
            None => msgs.push(s),
        }
    }
    msgs
}

/// A message that a posted receive at its destination takes is in transit.
fn deliver(s: &mut Scan) {
    let mut at: HashMap<(i32, CommKey), Vec<usize>> = HashMap::new();
    for (i, m) in s.msgs.iter().enumerate() {
        if let Some(d) = m.dest {
            at.entry((d, m.comm.clone())).or_default().push(i);
        }
    }
    for recv in s.recvs.iter_mut() {
        let Some(candidates) = at.get(&(recv.rank, recv.comm.clone())) else {
            continue;
        };
        let found = candidates.iter().copied().find(|&i| {
            let m = &s.msgs[i];
            !m.consumed
                && (recv.source_local < 0 || m.sender_local == recv.source_local)
                && recv.takes_tag(m.tag)
        });
        if let Some(i) = found {
            s.msgs[i].consumed = true;
            recv.consumed = true;
            let m = &s.msgs[i];
            let mut evidence = m.evidence();
            evidence.push(recv.evidence.clone());
            for r in [Some(recv.rank), m.sender].into_iter().flatten() {
                if let Some(f) = s.facts.get_mut(&r) {
                    f.transit += 1;
                }
            }
            s.atoms.push(Atom::new(
                FindingKind::InTransit,
                recv.rank,
                Subject::Delivered {
                    from: m.sender,
                    to: recv.rank,
                    comm: m.comm.clone(),
                    tag: m.tag,
                },
                evidence,
            ));
        }
    }
}

/// The waits of the messages and receives nobody takes.
fn waits(s: &mut Scan) -> Vec<Wait> {
    // At most one per message and receive, sized once (see `scan`).
    let mut waits = Vec::with_capacity(s.msgs.len() + s.recvs.len());
    for m in s
        .msgs
        .iter()
        .filter(|m| !m.consumed && (!m.sender_free || m.send.is_some()))
    {
        let Some(sender) = m.sender else {
            if let Some(d) = m.dest {
                s.atoms.push(Atom::new(
                    FindingKind::UnknownPeer,
                    d,
                    Subject::UnknownSender {
                        sender_local: m.sender_local,
                        comm: m.comm.clone(),
                    },
                    m.evidence(),
                ));
            }
            continue;
        };
        if let Some(f) = s.facts.get_mut(&sender)
            && m.send.is_some()
        {
            f.sends += 1;
        }
        waits.push(Wait {
            call: None,
            from: sender,
            target: match m.dest {
                Some(d) => WaitTarget::Rank(d),
                None => WaitTarget::UnknownRank {
                    local: m.dest_local,
                },
            },
            kind: if m.send.is_some() {
                WaitKind::Send
            } else {
                WaitKind::Unexpected
            },
            comm: m.comm.clone(),
            local_rank: m.sender_local,
            peer_local: m.dest_local,
            tag: Some(m.tag),
            count: m.count,
            evidence: m.evidence(),
            // Whether its sender is blocked in it is for the stacks to say.
            blocked: false,
            requests: m.requests.clone(),
            remote_peer: m.remote,
        });
    }
    for r in s.recvs.iter().filter(|r| !r.consumed) {
        if let Some(f) = s.facts.get_mut(&r.rank) {
            f.receives += 1;
        }
        let target = if r.source_local < 0 {
            r.any
                .clone()
                .map_or(WaitTarget::AnyUnknown, WaitTarget::AnyOf)
        } else {
            r.source.map_or(
                WaitTarget::UnknownRank {
                    local: r.source_local,
                },
                WaitTarget::Rank,
            )
        };
        waits.push(Wait {
            call: None,
            from: r.rank,
            target,
            kind: WaitKind::Receive,
            comm: r.comm.clone(),
            local_rank: r.local,
            peer_local: r.source_local,
            tag: r.tag,
            count: r.count,
            evidence: vec![r.evidence.clone()],
            // MPI_Recv and MPI_Irecv look the same in a queue.
            blocked: false,
            requests: r.request.into_iter().collect(),
            remote_peer: r.remote,
        });
    }
    waits
}
