//! The queues of a job of classes, matched by rank sets. Each class's posted receives, unexpected messages and pending sends are read
//! once, from its first and last members, each peer relative to the member (the same
//! rank, or the same distance around the job). A send and its unexpected copy at its
//! destination are one message; a posted receive takes the first message to it that it
//! matches. What holds for one operation of a class is a rank set of its members: which
//! sends are paired, which messages and receives are taken.
//!
//! Only communicators whose members are the job's ranks in order are followed
//! (`MPI_COMM_WORLD` and its duplicates): their local ranks are COMM_WORLD ranks. Where
//! a match would depend on an order this reading does not keep across a class (many
//! senders of one class to one rank, peers that coincide for some members only), the
//! class is not followed rather than guessed at.

use crate::comms::{CommIndex, shape_key, start_of};
use mqd_model::peers::{group_maps_peers, is_complete, peer_group, unexpected_sender, world_of};
use mqd_model::{
    ClassPeer, CommGroup, CommKey, Communicator, Evidence, OpRef, Operation, OperationStatus,
    Queue, QueueKind, RankDump, RankSet, SenderState, Wait, WaitKind, WaitTarget,
};
use std::collections::HashMap;

/// A peer as every member of a class names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Peer {
    /// The member's `k`-th right neighbour, around the job.
    Off(u32),
    /// This rank, for every member.
    Abs(u32),
    /// Any rank (a receive from any source).
    Any,
}

impl Peer {
    /// The peer of a class's first member (`(peer, rank)`) and last member, world ranks.
    pub(super) fn of(first: (i64, i64), last: Option<(i64, i64)>, n: u32) -> Result<Peer, String> {
        let in_job = |p: i64| (0..i64::from(n)).contains(&p);
        match ClassPeer::of(first, last, n) {
            None => Err("operations whose peers differ across the class".into()),
            Some(ClassPeer::Any) => Ok(Peer::Any),
            Some(ClassPeer::Null) => Err("operations with MPI_PROC_NULL".into()),
            Some(ClassPeer::Rank(p)) if in_job(p) => Ok(Peer::Abs(p as u32)),
            Some(ClassPeer::Offset(k)) if in_job(first.0) && last.is_none_or(|l| in_job(l.0)) => {
                Ok(Peer::Off(k as u32))
            }
            Some(_) => Err(format!(
                "an operation with rank {}, not in the job",
                first.0
            )),
        }
    }

    /// The peer of member `r`, `None` for any.
    pub(super) fn at(self, r: u32, n: u32) -> Option<u32> {
        match self {
            Peer::Off(k) => Some(((u64::from(r) + u64::from(k)) % u64::from(n)) as u32),
            Peer::Abs(p) => Some(p),
            Peer::Any => None,
        }
    }

    /// The members where this peer is the rank another rule names: `Off(x)` and `Abs(p)`
    /// agree at one member only.
    pub(super) fn meets(self, other: Peer, n: u32) -> Option<RankSet> {
        match (self, other) {
            (Peer::Off(x), Peer::Abs(p)) | (Peer::Abs(p), Peer::Off(x)) => {
                let at = (u64::from(p) + u64::from(n) - u64::from(x) % u64::from(n)) % u64::from(n);
                Some(RankSet::single(at as u32))
            }
            _ => None,
        }
    }
}

/// The members of `members` for which `a` and `b` name the same rank (or both any).
pub(super) fn same_rank(a: Peer, b: Peer, members: &RankSet, n: u32) -> RankSet {
    match a.meets(b, n) {
        Some(at) => members.intersection(&at),
        None if a == b => members.clone(),
        None => RankSet::new(),
    }
}

/// `{s in members : to(s) in at, and back(to(s)) is s}` (`back` any: every such `s`).
pub(super) fn reaching(members: &RankSet, to: Peer, at: &RankSet, back: Peer, n: u32) -> RankSet {
    match to {
        Peer::Off(k) => {
            let reach = members.intersection(&at.rotated(k, n));
            match back {
                Peer::Any => reach,
                // The peer of s + k is s + k + j: s itself when k + j is 0 mod n.
                Peer::Off(j) if (u64::from(k) + u64::from(j)) % u64::from(n) == 0 => reach,
                Peer::Off(_) => RankSet::new(),
                Peer::Abs(p) => reach.intersection(&RankSet::single(p)),
            }
        }
        Peer::Abs(d) if at.contains(d) => match back {
            Peer::Any => members.clone(),
            Peer::Off(j) => {
                let s = (u64::from(d) + u64::from(j)) % u64::from(n);
                members.intersection(&RankSet::single(s as u32))
            }
            Peer::Abs(p) => members.intersection(&RankSet::single(p)),
        },
        _ => RankSet::new(),
    }
}

/// `{to(s) : s in set}`.
pub(super) fn image(set: &RankSet, to: Peer, n: u32) -> RankSet {
    match to {
        Peer::Off(k) => set.rotated((n - k % n) % n, n),
        Peer::Abs(p) if !set.is_empty() => RankSet::single(p),
        _ => RankSet::new(),
    }
}

/// One listed operation of a class.
#[derive(Debug, Clone)]
pub(super) struct ClassOp {
    /// Its communicator (an index into [`Queues::comms`]).
    pub comm: usize,
    /// Its peer: a send's destination, a message's sender, a receive's source.
    pub peer: Peer,
    /// Its tag (`None`: any, receives only).
    pub tag: Option<i64>,
    /// The library says its sender has gone on (an eager send).
    pub sender_free: bool,
    /// The library says its sender waits for it (a synchronous send).
    pub sender_waits: bool,
    /// Its request in the first member, and in the last.
    pub request: (Option<u64>, Option<u64>),
    /// The wait it makes in the first member, before matching: a send's sender for its
    /// destination, an unexpected message's sender for the member, a receive's member for
    /// its source (evidence pointing at the first member as process `class`).
    pub wait: Wait,
}

/// A class's listed operations.
#[derive(Debug, Clone, Default)]
pub(super) struct ClassQueues {
    pub receives: Vec<ClassOp>,
    pub unexpected: Vec<ClassOp>,
    pub sends: Vec<ClassOp>,
    /// Its members list every pending send (a message they do not list was sent).
    pub lists_every_send: bool,
    /// Operations its members list as matched: in transit.
    pub transit: bool,
    /// Those of its first member, each with its peer, by communicator, its sends
    /// before its receives.
    pub matched: Vec<Evidence>,
    /// The requests of operations complete or matched, in the first member and in the
    /// last: a wait for them returns.
    pub done: (Vec<u64>, Vec<u64>),
    /// A queue of its members could not be read (what the others list is followed).
    pub unreadable: bool,
    /// Its operations whose peers are no rank of the job, on communicators whose
    /// groups are not known.
    pub unresolved: Unresolved,
    /// The communicators whose members are not known of the unresolved receives, and of
    /// the operations followed by their peers' COMM_WORLD ranks (a class of one): a
    /// receive nobody can name may take such an operation by its local rank, so one
    /// communicator must not be both.
    pub unknown_groups: (Vec<CommKey>, Vec<CommKey>),
}

/// Operations of a class whose peers nobody can name, in its first member: nothing
/// pairs or takes them (a communicator's only such operations are followed this way).
#[derive(Debug, Clone, Default)]
pub(super) struct Unresolved {
    /// Posted receives: each waits for a peer nobody can name.
    pub receives: Vec<Wait>,
    /// Pending sends: each waits for a destination nobody can name.
    pub sends: Vec<Wait>,
    /// Messages waiting unexpected from a sender nobody can name, unless it went on:
    /// nobody is known to wait for them.
    pub messages: Vec<Wait>,
}

impl Unresolved {
    /// Whether it has a peer nobody can name.
    pub(super) fn any(&self) -> bool {
        !(self.receives.is_empty() && self.sends.is_empty() && self.messages.is_empty())
    }

    /// Whether it waits for a peer nobody can name.
    pub(super) fn waits(&self) -> bool {
        !(self.receives.is_empty() && self.sends.is_empty())
    }
}

impl ClassQueues {
    pub(super) fn is_empty(&self) -> bool {
        self.receives.is_empty() && self.unexpected.is_empty() && self.sends.is_empty()
    }
}

/// Why a class whose queues are on a communicator whose members are not known is not
/// followed.
pub(super) const UNKNOWN_MEMBERS: &str = "queues on communicators whose members are not known";

/// Operations of a communicator by queue (receives, unexpected, sends), each with its
/// index in its queue.
type Listed<'a> = [Vec<(usize, &'a Operation)>; 3];

/// The operations of `c` the scan follows: pending receives and sends not complete or
/// matched, and unexpected messages (a collective's own messages are no operation of the
/// program: `crate::collective_ops`). Whether it lists matched ones.
fn listed(c: &Communicator) -> (Listed<'_>, bool) {
    let open = |(_, op): &(usize, &Operation)| {
        !is_complete(op) && !op.collective && op.status != OperationStatus::Matched
    };
    let matched = c
        .pending_receives
        .ops()
        .iter()
        .chain(c.pending_sends.ops())
        .any(|op| !is_complete(op) && !op.collective && op.status == OperationStatus::Matched);
    (
        [
            c.pending_receives
                .ops()
                .iter()
                .enumerate()
                .filter(open)
                .collect(),
            c.unexpected_messages
                .ops()
                .iter()
                .enumerate()
                .filter(|(_, op)| !op.collective)
                .collect(),
            c.pending_sends
                .ops()
                .iter()
                .enumerate()
                .filter(open)
                .collect(),
        ],
        matched,
    )
}

/// The requests of `c`'s pending receives and sends that are complete or matched.
fn done_requests(c: &Communicator) -> impl Iterator<Item = u64> + '_ {
    c.pending_receives
        .ops()
        .iter()
        .chain(c.pending_sends.ops())
        .filter(|op| {
            matches!(
                op.status,
                OperationStatus::Complete | OperationStatus::Matched
            )
        })
        .filter_map(|op| op.request)
}

/// Whether `c` is an intercommunicator.
fn is_inter(c: &Communicator) -> bool {
    c.context.is_some_and(|x| x.context_id != x.recv_context_id)
}

/// Whether `c` is a communicator of rank `rank` alone (`MPI_COMM_SELF`).
fn is_itself(c: &Communicator, rank: i32) -> bool {
    let inter = c.context.is_some_and(|x| x.context_id != x.recv_context_id);
    !inter && c.size == 1 && c.group.as_ref().is_some_and(|g| g.to_vec() == [rank])
}

/// A communicator's key as every member of a class names it: by its shape, so that
/// the instances its members hold (a split's rows) are one ([`crate::comms`]).
fn class_key(c: &Communicator) -> CommKey {
    shape_key(CommKey::of(c), c.group.as_ref())
}

/// The group of `c` (of member `rank`) where its peers are followed: an
/// intracommunicator whose group maps them, or the member's own.
fn followed_group(c: &Communicator, rank: i32) -> Option<&CommGroup> {
    (!is_inter(c) && (group_maps_peers(c) || is_itself(c, rank)))
        .then_some(c.group.as_ref())
        .flatten()
}

/// Whether `c`'s members are the job's `n` ranks in order.
pub(super) fn world_like(c: &Communicator, n: u32) -> bool {
    let inter = c.context.is_some_and(|x| x.context_id != x.recv_context_id);
    !inter
        && c.size == i64::from(n)
        && c.group.as_ref().is_some_and(|g| g.is_in_order(n))
        && group_maps_peers(c)
}

/// The queues of a class from its first and last members, their communicators
/// registered in `comms`; the class is process `class` of its operations' evidence.
pub(super) fn read(
    (class, members, first, last): (usize, &RankSet, &RankDump, Option<&RankDump>),
    n: u32,
    comms: &mut CommIndex,
) -> Result<ClassQueues, String> {
    let mut out = ClassQueues::default();
    let every_send = |r: &RankDump| {
        r.lists_blocking_sends == Some(true)
            && r.communicators()
                .iter()
                .all(|c| matches!(c.pending_sends, Queue::Operations(_)))
    };
    out.lists_every_send = every_send(first);
    if last.is_some_and(|l| every_send(l) != out.lists_every_send) {
        return Err("ranks that list their sends differently".into());
    }
    let unreadable = |r: &RankDump| {
        r.communicators()
            .iter()
            .any(|c| QueueKind::ALL.iter().any(|&q| c.queue(q).error().is_some()))
    };
    out.unreadable = unreadable(first);
    if last.is_some_and(|l| unreadable(l) != out.unreadable) {
        return Err("ranks whose queues could be read differently".into());
    }
    for (communicator, c) in first.communicators().iter().enumerate() {
        let key = class_key(c);
        let on = WaitsOn::new(c);
        let (ops, matched) = listed(c);
        out.done.0.extend(done_requests(c));
        let other = match last {
            Some(l) => {
                let Some(lc) = l.communicators().iter().find(|x| class_key(x) == key) else {
                    if ops.iter().all(Vec::is_empty) {
                        continue;
                    }
                    return Err("communicators that differ across the class".into());
                };
                let (lops, lmatched) = listed(lc);
                out.done.1.extend(done_requests(lc));
                if lmatched != matched {
                    return Err("queues that differ across the class".into());
                }
                Some((lc, lops))
            }
            None => None,
        };
        out.transit |= matched;
        for (queue, list) in [
            (QueueKind::PendingSends, &c.pending_sends),
            (QueueKind::PendingReceives, &c.pending_receives),
        ] {
            for (index, op) in list.ops().iter().enumerate() {
                if is_complete(op) || op.collective || op.status != OperationStatus::Matched {
                    continue;
                }
                let at = OpRef {
                    process: class,
                    communicator,
                    queue,
                    index,
                };
                out.matched
                    .extend(first_wait(&on, op, (first.rank, at)).evidence);
            }
        }
        if ops.iter().all(Vec::is_empty)
            && other
                .as_ref()
                .is_none_or(|(_, o)| o.iter().all(Vec::is_empty))
        {
            continue;
        }
        let itself = is_itself(c, first.rank);
        let in_order = world_like(c, n);
        // Any intracommunicator whose group is known is followed where the class's
        // members hold it alike: its peers are named by their COMM_WORLD ranks.
        let start = match (followed_group(c, first.rank), &other, last) {
            (Some(g0), None, _) => start_of((g0, first.rank), None),
            (Some(g0), Some((lc, _)), Some(l)) => followed_group(lc, l.rank)
                .and_then(|g1| start_of((g0, first.rank), Some((g1, l.rank)))),
            _ => None,
        };
        if start.is_none() {
            // Operations whose peers are no rank of the job: nothing pairs or takes
            // them, and each receive and send waits for a peer nobody can name.
            let unresolved = |c: &Communicator, ops: &Listed<'_>| {
                !group_maps_peers(c)
                    && ops[0].iter().all(|(_, op)| {
                        op.desired_local_rank < 0
                            || world_of(c, op.desired_local_rank, op.desired_global_rank).is_none()
                    })
                    && ops[1]
                        .iter()
                        .all(|(_, op)| unexpected_sender(c, op).is_none())
                    && ops[2].iter().all(|(_, op)| {
                        world_of(c, op.desired_local_rank, op.desired_global_rank).is_none()
                    })
            };
            let alike = other.as_ref().is_none_or(|(lc, o)| {
                unresolved(lc, o) && (0..3).all(|q| o[q].len() == ops[q].len())
            });
            if unresolved(c, &ops) && alike {
                // A receive would take a message of its own communicator by its local
                // rank: not followed.
                let takes = |ops: &Listed<'_>| {
                    ops[0].iter().any(|(_, r)| {
                        ops[1].iter().any(|(_, u)| {
                            (r.desired_local_rank < 0
                                || r.desired_local_rank == u.desired_local_rank)
                                && (r.tag_wild || r.desired_tag == u.desired_tag)
                        })
                    })
                };
                if takes(&ops) || other.as_ref().is_some_and(|(_, o)| takes(o)) {
                    return Err("receives that may take messages from peers nobody can name".into());
                }
                out.unknown_groups.0.push(key.clone());
                for (queue, list) in ops.iter().enumerate() {
                    for &(index, op) in list {
                        let at = OpRef {
                            process: class,
                            communicator,
                            queue: QueueKind::ALL[queue],
                            index,
                        };
                        let wait = first_wait(&on, op, (first.rank, at));
                        let u = &mut out.unresolved;
                        match queue {
                            0 => u.receives.push(wait),
                            1 if op.sender != Some(SenderState::GoneOn) => u.messages.push(wait),
                            1 => {}
                            _ => u.sends.push(wait),
                        }
                    }
                }
                continue;
            }
            // A class of one follows the peers of an intracommunicator whose members
            // are not known, or of an intercommunicator, by their COMM_WORLD ranks as
            // the library resolved them.
            if last.is_some() {
                return Err(if followed_group(c, first.rank).is_some() {
                    "queues on communicators whose members differ across the class".into()
                } else {
                    UNKNOWN_MEMBERS.into()
                });
            }
            out.unknown_groups.1.push(key.clone());
        }
        // Any source on a communicator of one rank is a wait for itself only, on another
        // communicator for its members.
        if itself && ops[0].iter().any(|(_, op)| op.desired_local_rank < 0) {
            return Err("receives from any source on a communicator of one rank".into());
        }
        if !itself && !in_order && ops[0].iter().any(|(_, op)| op.desired_local_rank < 0) {
            return Err(
                "receives from any source on communicators other than the job's ranks in order"
                    .into(),
            );
        }
        let held = c.group.as_ref().zip(start);
        let comm = comms.index(key, held, (class, members));
        for (queue, list) in ops.iter().enumerate() {
            let last_list = other.as_ref().map(|(lc, o)| (*lc, &o[queue]));
            if last_list.is_some_and(|(_, l)| l.len() != list.len()) {
                return Err("queues whose lengths differ across the class".into());
            }
            for (i, &(index, op)) in list.iter().enumerate() {
                let peer_in = |c: &Communicator, op: &Operation| -> Option<i64> {
                    match queue {
                        0 if op.desired_local_rank < 0 => Some(-2),
                        1 => unexpected_sender(c, op).map(i64::from),
                        _ => world_of(c, op.desired_local_rank, op.desired_global_rank)
                            .map(i64::from),
                    }
                };
                let unknown = || String::from("operations whose peer is not known");
                let p0 = peer_in(c, op).ok_or_else(unknown)?;
                let mut request = (op.request, None);
                let p1 = match last_list {
                    Some((lc, l)) => {
                        let lop = l[i].1;
                        request.1 = lop.request;
                        let same = (lop.desired_tag, lop.tag_wild, lop.sender, lop.remote_group)
                            == (op.desired_tag, op.tag_wild, op.sender, op.remote_group);
                        if !same {
                            return Err("operations that differ across the class".into());
                        }
                        let rank = last.map_or(0, |l| i64::from(l.rank));
                        Some((peer_in(lc, lop).ok_or_else(unknown)?, rank))
                    }
                    None => None,
                };
                // Remote peers by COMM_WORLD rank only (ch3 says no context ids).
                if op.remote_group && start.is_some() {
                    return Err("remote operations on a communicator read by its group".into());
                }
                let peer = Peer::of((p0, i64::from(first.rank)), p1, n)?;
                let at = OpRef {
                    process: class,
                    communicator,
                    queue: QueueKind::ALL[queue],
                    index,
                };
                let class_op = ClassOp {
                    wait: first_wait(&on, op, (first.rank, at)),
                    comm,
                    peer,
                    tag: (queue != 0 || !op.tag_wild).then_some(op.desired_tag),
                    sender_free: queue == 1 && op.sender == Some(SenderState::GoneOn),
                    sender_waits: queue == 1 && op.sender == Some(SenderState::Waits),
                    request,
                };
                match queue {
                    0 => out.receives.push(class_op),
                    1 => out.unexpected.push(class_op),
                    _ => out.sends.push(class_op),
                }
            }
        }
    }
    Ok(out)
}

/// A communicator of a member with what the waits of its operations share, worked out
/// once: its key and, for receives from any source, its members (a queue of 100,000
/// receives checked them for each one).
pub(super) struct WaitsOn<'a> {
    c: &'a Communicator,
    key: CommKey,
    any: std::cell::OnceCell<Option<RankSet>>,
}

impl<'a> WaitsOn<'a> {
    pub(super) fn new(c: &'a Communicator) -> WaitsOn<'a> {
        WaitsOn {
            c,
            key: CommKey::of(c),
            any: std::cell::OnceCell::new(),
        }
    }
}

/// The wait operation `op` of `rank`'s communicator `c` (at `at`) makes, before
/// matching.
pub(super) fn first_wait(on: &WaitsOn<'_>, op: &Operation, (rank, at): (i32, OpRef)) -> Wait {
    let c = on.c;
    let resolved = |r: Option<i32>| r.map_or(mqd_model::Peer::Unresolved, mqd_model::Peer::World);
    let mut wait = Wait {
        call: None,
        from: rank,
        target: WaitTarget::AnyUnknown,
        kind: WaitKind::Receive,
        comm: on.key.clone(),
        local_rank: c.local_rank,
        peer_local: op.desired_local_rank,
        tag: Some(op.desired_tag),
        count: op.desired_length,
        evidence: Vec::new(),
        blocked: false,
        requests: op.request.into_iter().collect(),
        remote_peer: op.remote_group,
    };
    let peer = match at.queue {
        QueueKind::PendingReceives if op.desired_local_rank < 0 => {
            let any = on.any.get_or_init(|| peer_group(c)).clone();
            wait.peer_local = -1;
            wait.target = any
                .clone()
                .map_or(WaitTarget::AnyUnknown, WaitTarget::AnyOf);
            any.map_or(mqd_model::Peer::AnyUnresolved, mqd_model::Peer::AnyOf)
        }
        QueueKind::PendingReceives | QueueKind::PendingSends => {
            let peer = world_of(c, op.desired_local_rank, op.desired_global_rank);
            wait.target = peer.map_or(
                WaitTarget::UnknownRank {
                    local: op.desired_local_rank,
                },
                WaitTarget::Rank,
            );
            if at.queue == QueueKind::PendingSends {
                wait.kind = WaitKind::Send;
            }
            resolved(peer)
        }
        QueueKind::UnexpectedMessages => {
            // The sender waits for the member.
            let sender = unexpected_sender(c, op);
            wait.kind = WaitKind::Unexpected;
            wait.from = sender.unwrap_or(-1);
            wait.target = WaitTarget::Rank(rank);
            wait.local_rank = op.desired_local_rank;
            wait.peer_local = c.local_rank;
            resolved(sender)
        }
    };
    if at.queue == QueueKind::PendingReceives && op.tag_wild {
        wait.tag = None;
    }
    wait.evidence.push(Evidence { op: at, peer });
    wait
}

/// What holds for each operation of each class: the members for which it does.
#[derive(Debug, Clone, Default)]
pub(super) struct Matching {
    /// A pending send whose unexpected copy is at its destination.
    pub send_paired: Vec<Vec<RankSet>>,
    /// A pending send (or its copy) a posted receive takes.
    pub send_taken: Vec<Vec<RankSet>>,
    /// An unexpected message whose send its sender lists.
    pub unexpected_paired: Vec<Vec<RankSet>>,
    /// An unexpected message a posted receive takes.
    pub unexpected_taken: Vec<Vec<RankSet>>,
    /// A posted receive that takes a message.
    pub receive_taken: Vec<Vec<RankSet>>,
    /// Each pairing: sender class, send, destination class, message, senders.
    pub pairs: Vec<(usize, usize, usize, usize, RankSet)>,
    /// Each receive that takes a message, by destination class and receive.
    pub delivered: Vec<Delivery>,
    /// (class, send) of the sends that may reach each class.
    pub sends_to: ByClass,
}

/// A posted receive of a class that takes a message at some of its members.
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    /// The receive's class (its index in the matching) and the receive.
    pub class: usize,
    pub receive: usize,
    /// The message it takes.
    pub message: Taken,
    /// The members at which it does.
    pub members: RankSet,
}

/// The message a receive takes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Taken {
    /// A message waiting unexpected at the member: its index in the class's queue.
    Unexpected(usize),
    /// A pending send not paired with a copy: its class, its index, and the sender of
    /// the receive's first member.
    Send {
        class: usize,
        send: usize,
        from: u32,
    },
}

/// Splits each piece of `pieces` by each set of `by`.
pub(super) fn refine(mut pieces: Vec<RankSet>, by: &[RankSet]) -> Vec<RankSet> {
    for set in by.iter().filter(|s| !s.is_empty()) {
        pieces = pieces
            .into_iter()
            .flat_map(|p| [p.intersection(set), p.difference(set)])
            .filter(|p| !p.is_empty())
            .collect();
    }
    pieces
}

/// The senders `s` for which "the message at `to(s)` from `from`" names `s` itself
/// only at some senders: `None` where it does for all or none alike.
fn names_back(to: Peer, from: Peer, n: u32) -> Option<RankSet> {
    match (to, from) {
        (Peer::Off(_), Peer::Abs(p)) | (Peer::Abs(_), Peer::Abs(p)) => Some(RankSet::single(p)),
        (Peer::Abs(d), Peer::Off(k)) => Some(RankSet::single(
            ((u64::from(d) + u64::from(k)) % u64::from(n)) as u32,
        )),
        _ => None,
    }
}

/// The scan's pairing and delivery over `classes` (each a rank set and its queues).
pub(super) fn matching(classes: &[(&RankSet, &ClassQueues)], n: u32) -> Result<Matching, String> {
    let sized = |pick: fn(&ClassQueues) -> usize| -> Vec<Vec<RankSet>> {
        classes
            .iter()
            .map(|(_, q)| vec![RankSet::new(); pick(q)])
            .collect()
    };
    let mut m = Matching {
        send_paired: sized(|q| q.sends.len()),
        send_taken: sized(|q| q.sends.len()),
        unexpected_paired: sized(|q| q.unexpected.len()),
        unexpected_taken: sized(|q| q.unexpected.len()),
        receive_taken: sized(|q| q.receives.len()),
        pairs: Vec::new(),
        delivered: Vec::new(),
        sends_to: ByClass::default(),
    };
    // Pairing: a sender's a-th send to a destination with one communicator and tag is
    // the a-th such message waiting there (op order on both sides). Worked out for the
    // first sender of each piece of a class whose sends reach the same classes and whose
    // messages there name it alike.
    let mut pairs: Vec<(usize, usize, usize, usize, RankSet)> = Vec::new();
    // Each rank's class: an absolute destination's class is looked up, not searched.
    let mut class_at = vec![u32::MAX; n as usize];
    for (ci, (ranks, _)) in classes.iter().enumerate() {
        for r in ranks.iter().take_while(|&r| r < n) {
            class_at[r as usize] = ci as u32;
        }
    }
    let class_of = |d: u32| -> Option<usize> {
        match class_at.get(d as usize) {
            Some(&ci) => (ci != u32::MAX).then_some(ci as usize),
            // A rank past the job's size, if a class holds one.
            None => classes.iter().position(|(r, _)| r.contains(d)),
        }
    };
    for (qi, (q_ranks, q)) in classes.iter().enumerate() {
        let mut by: Vec<RankSet> = Vec::new();
        for s in &q.sends {
            let targets: Vec<usize> = match s.peer {
                Peer::Abs(d) => class_of(d).into_iter().collect(),
                _ => (0..classes.len()).collect(),
            };
            for (c_ranks, c) in targets.into_iter().map(|ci| classes[ci]) {
                let reach = reaching(q_ranks, s.peer, c_ranks, Peer::Any, n);
                if reach.is_empty() {
                    continue;
                }
                by.push(reach);
                for u in &c.unexpected {
                    if (u.comm, u.tag) == (s.comm, s.tag) {
                        by.extend(names_back(s.peer, u.peer, n));
                    }
                }
            }
        }
        for piece in refine(vec![(*q_ranks).clone()], &by) {
            let Some(s0) = piece.first() else { continue };
            let mut used: Vec<(u32, usize)> = Vec::new();
            for (i, s) in q.sends.iter().enumerate() {
                let Some(d) = s.peer.at(s0, n) else { continue };
                let Some(ci) = class_of(d) else {
                    continue;
                };
                let c = classes[ci].1;
                let copy = (0..c.unexpected.len()).find(|&j| {
                    let u = &c.unexpected[j];
                    (u.comm, u.tag) == (s.comm, s.tag)
                        && u.peer.at(d, n) == Some(s0)
                        && !used.contains(&(d, j))
                });
                if let Some(j) = copy {
                    used.push((d, j));
                    m.send_paired[qi][i].union_with(&piece);
                    m.unexpected_paired[ci][j].union_with(&image(&piece, s.peer, n));
                    pairs.push((qi, i, ci, j, piece.clone()));
                }
            }
        }
    }
    // Delivery, destination class by destination class and communicator; each class
    // looks only at the sends that can reach it and the pairs of its own messages.
    let mut sends_to = ByClass::new(classes.len());
    for (qi, (_, q)) in classes.iter().enumerate() {
        for (i, s) in q.sends.iter().enumerate() {
            match s.peer {
                // A send to no rank of the job reaches no class.
                Peer::Abs(d) => class_of(d)
                    .into_iter()
                    .for_each(|ci| sends_to.add(Some(ci), (qi, i))),
                _ => sends_to.add(None, (qi, i)),
            }
        }
    }
    let mut pairs_at: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (x, p) in pairs.iter().enumerate() {
        pairs_at.entry((p.2, p.3)).or_default().push(x);
    }
    for (ci, (c_ranks, c)) in classes.iter().enumerate() {
        let mut comms: Vec<usize> = c.receives.iter().map(|r| r.comm).collect();
        comms.sort_unstable();
        comms.dedup();
        let reaching = sends_to.of(ci);
        for comm in comms {
            let mine = Mine {
                sends: &reaching,
                pairs: &pairs,
                pairs_at: &pairs_at,
            };
            deliver(classes, &mut m, mine, (ci, c_ranks, c), comm, n);
        }
    }
    m.pairs = pairs;
    m.sends_to = sends_to;
    Ok(m)
}

/// Operations of every class (class, index) by the class they concern: an operation
/// naming one rank concerns that rank's class only, one naming a neighbour any class.
#[derive(Debug, Clone, Default)]
pub(super) struct ByClass {
    at: Vec<Vec<(usize, usize)>>,
    anywhere: Vec<(usize, usize)>,
}

impl ByClass {
    /// Nothing yet, for `classes` classes.
    pub(super) fn new(classes: usize) -> ByClass {
        ByClass {
            at: vec![Vec::new(); classes],
            anywhere: Vec::new(),
        }
    }

    /// `op` concerns class `at`, or (`None`) any class.
    pub(super) fn add(&mut self, at: Option<usize>, op: (usize, usize)) {
        match at {
            Some(ci) => self.at[ci].push(op),
            None => self.anywhere.push(op),
        }
    }

    /// The operations that may concern class `ci`, in class and index order.
    pub(super) fn of(&self, ci: usize) -> Vec<(usize, usize)> {
        let at = self.at.get(ci).map_or(&[][..], Vec::as_slice);
        let mut all: Vec<(usize, usize)> = at.iter().chain(&self.anywhere).copied().collect();
        all.sort_unstable();
        all
    }
}

/// What a class's delivery looks at: the sends that can reach it, and the pairs.
#[derive(Clone, Copy)]
struct Mine<'a> {
    sends: &'a [(usize, usize)],
    pairs: &'a [(usize, usize, usize, usize, RankSet)],
    /// The pairs of each message waiting unexpected (class, message).
    pairs_at: &'a HashMap<(usize, usize), Vec<usize>>,
}

/// The receives of class `ci` on `comm` take the messages to its members: piece by
/// piece of members to which the same messages come, the first message (in the scan's
/// order) each receive matches.
fn deliver(
    classes: &[(&RankSet, &ClassQueues)],
    m: &mut Matching,
    mine: Mine<'_>,
    (ci, c_ranks, c): (usize, &RankSet, &ClassQueues),
    comm: usize,
    n: u32,
) {
    let receives: Vec<usize> = (0..c.receives.len())
        .filter(|&r| c.receives[r].comm == comm)
        .collect();
    let unexpected: Vec<usize> = (0..c.unexpected.len())
        .filter(|&j| c.unexpected[j].comm == comm)
        .collect();
    // Unpaired sends that reach members of the class, with their senders.
    let mut sends: Vec<(usize, usize, RankSet)> = Vec::new();
    let mut pieces = vec![(*c_ranks).clone()];
    for &(qi, i) in mine.sends {
        let (q_ranks, q) = classes[qi];
        let s = &q.sends[i];
        let elsewhere = matches!(s.peer, Peer::Abs(d) if !c_ranks.contains(d));
        if s.comm != comm || elsewhere {
            continue;
        }
        let unpaired = q_ranks.difference(&m.send_paired[qi][i]);
        let reach = image(&unpaired, s.peer, n).intersection(c_ranks);
        if reach.is_empty() {
            continue;
        }
        pieces = refine(pieces, std::slice::from_ref(&reach));
        // The order of two senders' messages by rank turns where one wraps.
        if let Peer::Off(k) = s.peer {
            pieces = refine(pieces, &[RankSet::full(k.min(n))]);
        }
        sends.push((qi, i, unpaired));
    }
    // Where a receive's source is the rank a message's sender rule names only for some
    // members (a rank's many senders are one piece already: their destination).
    let senders: Vec<Peer> = unexpected
        .iter()
        .map(|&j| c.unexpected[j].peer)
        .chain(
            sends
                .iter()
                .filter_map(|&(qi, i, _)| match classes[qi].1.sends[i].peer {
                    Peer::Off(k) => Some(Peer::Off((n - k % n) % n)),
                    _ => None,
                }),
        )
        .collect();
    for &r in &receives {
        for &s in &senders {
            if let Some(at) = c.receives[r].peer.meets(s, n) {
                pieces = refine(pieces, &[at]);
            }
        }
    }
    for piece in pieces {
        let Some(d) = piece.first() else { continue };
        // Messages waiting unexpected at `d`, in its queue's order: their senders.
        let mut waiting: Vec<Option<u32>> = unexpected
            .iter()
            .map(|&j| c.unexpected[j].peer.at(d, n))
            .collect();
        // Sends to `d` by send: the senders not yet taken (one, or many to one rank).
        let mut coming: Vec<RankSet> = sends
            .iter()
            .map(|&(qi, i, ref unpaired)| match classes[qi].1.sends[i].peer {
                Peer::Off(k) => {
                    let s = (u64::from(d) + u64::from(n) - u64::from(k % n)) % u64::from(n);
                    unpaired.intersection(&RankSet::single(s as u32))
                }
                Peer::Abs(to) if to == d => unpaired.clone(),
                _ => RankSet::new(),
            })
            .collect();
        for &r in &receives {
            let recv = &c.receives[r];
            let source = recv.peer.at(d, n);
            let takes = |from: u32, tag: Option<i64>| {
                source.is_none_or(|src| src == from) && recv.tag.is_none_or(|t| Some(t) == tag)
            };
            let first_waiting = unexpected
                .iter()
                .zip(&waiting)
                .position(|(&j, from)| from.is_some_and(|from| takes(from, c.unexpected[j].tag)));
            if let Some(x) = first_waiting {
                waiting[x] = None;
                let j = unexpected[x];
                m.receive_taken[ci][r].union_with(&piece);
                m.unexpected_taken[ci][j].union_with(&piece);
                m.delivered.push(Delivery {
                    class: ci,
                    receive: r,
                    message: Taken::Unexpected(j),
                    members: piece.clone(),
                });
                let paired = mine.pairs_at.get(&(ci, j)).map_or(&[][..], Vec::as_slice);
                for &x in paired {
                    let (qi, i, _, _, senders) = &mine.pairs[x];
                    let s = &classes[*qi].1.sends[*i];
                    let reached = reaching(senders, s.peer, &piece, Peer::Any, n);
                    m.send_taken[*qi][*i].union_with(&reached);
                }
                continue;
            }
            // Unpaired sends come after, by their senders' ranks.
            let first_coming = sends
                .iter()
                .zip(&coming)
                .enumerate()
                .filter_map(|(x, (&(qi, i, _), from))| {
                    let tag = classes[qi].1.sends[i].tag;
                    let from = match source {
                        Some(src) => from.intersection(&RankSet::single(src)).first(),
                        None => from.first(),
                    }?;
                    takes(from, tag).then_some((from, x))
                })
                .min();
            if let Some((from, x)) = first_coming {
                coming[x].remove(from);
                let (qi, i, ref unpaired) = sends[x];
                m.receive_taken[ci][r].union_with(&piece);
                m.delivered.push(Delivery {
                    class: ci,
                    receive: r,
                    message: Taken::Send {
                        class: qi,
                        send: i,
                        from,
                    },
                    members: piece.clone(),
                });
                let s = &classes[qi].1.sends[i];
                let reached = match s.peer {
                    Peer::Abs(_) => RankSet::single(from),
                    _ => reaching(unpaired, s.peer, &piece, Peer::Any, n),
                };
                m.send_taken[qi][i].union_with(&reached);
            }
        }
    }
}
