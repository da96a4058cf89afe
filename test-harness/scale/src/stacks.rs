//! What a class's threads wait for, read from its first and last members' stacks and
//! call arguments: each blocked thread as a need (a point-to-point call's peers as every
//! member names them, a collective instance, the requests of a wait), or why it is not
//! followed.

use super::queues::{ClassOp, ClassQueues, Peer};
use crate::collective_ops::{collective_ops, messages_comm};
use crate::comms::{CommIndex, Start, shape_key, start_of};
use crate::waits;
use mqd_model::call_comms::{ANY_SOURCE, ANY_TAG, Comm, PROC_NULL, call_members, comm_of, rooted};
use mqd_model::peers::is_complete;
use mqd_model::{
    CallArguments, CallClass, ClassPeer, CommGroup, CommKey, Location, OpRef, QueueKind, RankDump,
    RankSet, ThreadLevel, ThreadStack, Wait, WaitKind, WaitTarget,
};

/// A blocked thread of a class's first member, as the rule it becomes.
pub(super) enum Need {
    /// Returns: the rank goes on.
    Proceeds,
    /// In a blocking point-to-point call.
    PointToPoint(PointToPoint),
    /// In this collective (its call, root and size) on the communicator at this index of
    /// the job's collective communicators.
    Collective(usize, String, Option<i64>, Option<u64>),
    /// In `MPI_Wait` or `MPI_Waitall` (thread `tid`): every request's operation.
    Wait(usize),
    /// In `MPI_Waitany` or `MPI_Waitsome` (thread `tid`): any request's operation.
    WaitAny(usize),
    /// In this collective (as its stack names it) on a communicator not known: it may
    /// wait for anything.
    CollectiveSomewhere(String),
    /// In a call whose wait is not known (a window's synchronisation, a connection, a
    /// buffer's flush, an `MPI_Mrecv`, a call whose arguments or communicator could not
    /// be read, for a class of one a peer not read or no rank of the job): it may wait
    /// for anything. For a class of one, the waits its arguments show.
    Unknown(Vec<Wait>),
    /// Not followed here (why).
    Other(String),
}

/// A communicator collectives run on, as every member of a class names it: its identity
/// and its members (COMM_WORLD ranks in local rank order).
pub(super) type CollComm = (CommKey, CommGroup);

/// A collective instance: its communicator (an index into the job's collective
/// communicators), call, root and size.
pub(super) type Instance = (usize, String, Option<i64>, Option<u64>);

/// The index of `comm` in `comms`, added when new.
fn coll_index(comms: &mut Vec<CollComm>, comm: CollComm) -> usize {
    match comms.iter().position(|c| *c == comm) {
        Some(i) => i,
        None => {
            comms.push(comm);
            comms.len() - 1
        }
    }
}

/// What a request a thread waits for is, in its class's queues.
#[derive(Debug, Clone, Copy)]
pub(super) enum Request {
    /// An operation complete or matched: it returns.
    Done,
    /// The class's receive at this index.
    Receive(usize),
    /// The class's send at this index.
    Send(usize),
    /// Not known (not read, or not in the class's queues): it may wait for anything.
    Unknown,
}

/// The requests thread `tid` of a class's first and last members waits for, as the
/// class's operations: the same operation in both (or not known in both), or not
/// followed.
pub(super) fn requests_of(
    first: &RankDump,
    last: Option<&RankDump>,
    tid: usize,
    q: &ClassQueues,
) -> Result<Vec<Request>, String> {
    let of = |r: &RankDump| -> Vec<Option<u64>> {
        r.threads
            .get(tid)
            .and_then(|t| t.call.as_ref())
            .map(|c| c.requests.clone())
            .unwrap_or_default()
    };
    let unknown = || String::from("waits for requests not known");
    let (a, b) = (of(first), last.map(of));
    if b.as_ref().is_some_and(|b| b.len() != a.len()) {
        return Err(unknown());
    }
    // No request read: the call waits for something not known.
    if a.is_empty() {
        return Ok(vec![Request::Unknown]);
    }
    let mut out = Vec::new();
    for (k, &r0) in a.iter().enumerate() {
        let r0 = match (r0, b.as_ref().map(|b| b[k])) {
            (None, None | Some(None)) => {
                out.push(Request::Unknown);
                continue;
            }
            // Members whose requests differ in being read are not alike.
            (Some(_), Some(None)) | (None, Some(Some(_))) => return Err(unknown()),
            (Some(r0), _) => r0,
        };
        let r1 = b.as_ref().and_then(|b| b[k]);
        // As the per-rank index: done first, then receives, then sends.
        let done = (q.done.0.contains(&r0), r1.map(|r| q.done.1.contains(&r)));
        let same = |op: &ClassOp| op.request == (Some(r0), r1);
        out.push(match done {
            (true, None | Some(true)) => Request::Done,
            (true, Some(false)) | (false, Some(true)) => return Err(unknown()),
            _ => match q.receives.iter().position(same) {
                Some(r) => Request::Receive(r),
                None => match q.sends.iter().position(same) {
                    Some(i) => Request::Send(i),
                    // Completed without a trace, or held somewhere the queues do not
                    // show: not known.
                    None => Request::Unknown,
                },
            },
        });
    }
    Ok(out)
}

/// A blocking point-to-point call's peers, with their tags.
#[derive(Clone)]
pub(super) struct PointToPoint {
    /// Its communicator (an index into the job's table).
    pub(super) comm: usize,
    /// The receive's source, its tag (`None`: any or not known) and whether the tag is
    /// known.
    pub(super) receive: Option<(Peer, Option<i64>, bool)>,
    /// The send's destination, and its tag.
    pub(super) send: Option<(Peer, i64)>,
    /// `MPI_Ssend`: it returns only once a receive matched it.
    pub(super) synchronous: bool,
    /// For a class of one rank: the waits of its receive and its send, without
    /// evidence.
    pub(super) waits: Box<(Option<Wait>, Option<Wait>)>,
    /// A receive from any source on a communicator other than the job's ranks in
    /// order: whom it may take a message from.
    pub(super) any_source: Option<AnySource>,
}

/// The ranks a receive from any source on a communicator other than the job's ranks in
/// order may take a message from: its members (the remote group of an
/// intercommunicator), as the class's members hold them.
#[derive(Clone)]
pub(super) enum AnySource {
    /// The same ranks for every member (a fixed group).
    Ranks(RankSet),
    /// The ranks at these distances from each member (a split's rows).
    Around(RankSet),
}

/// [`AnySource`] of a class's first and last members, whose communicator's groups are
/// `groups` (COMM_WORLD ranks): `Err` where they are neither the same ranks nor at the
/// same distances.
fn any_source(
    (first, last): (&RankDump, Option<&RankDump>),
    groups: &Groups,
    n: u32,
) -> Result<AnySource, String> {
    let ranks = |g: &CommGroup| RankSet::from_i32s(g.iter());
    let around = |g: &CommGroup, at: i32| -> RankSet {
        g.iter()
            .map(|m| (i64::from(m) - i64::from(at)).rem_euclid(i64::from(n)) as u32)
            .collect()
    };
    match (&groups.1, last) {
        (Some(g1), Some(_)) if ranks(g1) != ranks(&groups.0) => {
            let offsets = around(&groups.0, first.rank);
            match last.map(|l| around(g1, l.rank)) {
                Some(o) if o == offsets => Ok(AnySource::Around(offsets)),
                _ => Err(
                    "receives from any source on communicators whose members differ across the class"
                        .into(),
                ),
            }
        }
        _ => Ok(AnySource::Ranks(ranks(&groups.0))),
    }
}

/// What one class's ranks do.
pub(super) enum State {
    Running,
    /// MPI says `MPI_Finalize` returned: it never acts in MPI again.
    Finalized,
    /// No stack: it may be anywhere; its pending operations are what it may wait for.
    NoStacks,
    SelfBlocked,
    Waiting {
        needs: Vec<Need>,
        /// The call of each need.
        calls: Vec<String>,
        /// The thread of each need (an index into the first member's threads).
        threads: Vec<usize>,
        /// Every thread blocked in a call within the job, waiting for its own process or
        /// MPI's own: a hold can prove it.
        holdable: bool,
        unknown: Option<String>,
        /// A thread polling (its call): in the worst reading it polls for ever for what
        /// any other rank might give.
        polling: Option<String>,
        /// A thread that might call MPI now, a place unknown or a loop that polls: in no
        /// proof.
        maybe_free: bool,
    },
    NotFollowed(String),
}

/// What a thread of a class's first member is.
enum Kind {
    /// Outside MPI, or in a call that returns: it may call MPI.
    Free,
    /// Waiting for its own process, or a thread of the MPI library.
    Quiet,
    /// In a call that tests for completion and returns at once, maybe in a loop.
    Polls(String),
    /// A place not known (the call, or why).
    Unknown(String),
    /// In a blocking call.
    Blocked(String, CallClass),
}

fn kind(t: &ThreadStack, program: Option<&str>) -> Kind {
    match t.location_in(program) {
        Location::Outside { waits: Some(_), .. } | Location::MpiThread => Kind::Quiet,
        Location::Outside { .. } => Kind::Free,
        Location::Unknown => Kind::Unknown("a stack that could not be followed".into()),
        Location::InMpi { call, class } => match class.blocks() {
            None => Kind::Unknown(call),
            Some(false) if mqd_model::calls::polls(&call) => Kind::Polls(call),
            Some(false) => Kind::Free,
            Some(true) => Kind::Blocked(call, class),
        },
    }
}

/// Which peer of a point-to-point call a rule is made of.
#[derive(Clone, Copy)]
enum Side {
    /// The source of a receive (any source allowed).
    Source,
    /// The destination of a send.
    Destination,
    /// The source of `MPI_Sendrecv`'s receive.
    SendrecvSource,
}

/// The communicator of thread `tid`'s call in a class's first and last members (the
/// class is `class`, of `members`): an index into `comms`, where every member holds it
/// alike ([`crate::comms`]); with its groups in the first and last members where its
/// members are not the job's ranks in order (to name its peers by their COMM_WORLD
/// ranks).
fn comm_index(
    (first, last): (&RankDump, Option<&RankDump>),
    n: u32,
    tid: usize,
    comms: &mut CommIndex,
    (class, members): (usize, &RankSet),
) -> Result<(usize, Option<Groups>), String> {
    fn of(r: &RankDump, tid: usize, n: u32) -> Option<Comm<'_>> {
        comm_of(r, r.threads.get(tid)?.call.as_ref()?, Some(n))
    }
    let unknown = || String::from("calls on communicators whose members are not known");
    let c0 = of(first, tid, n).ok_or_else(unknown)?;
    let c1 = match last {
        Some(l) => Some(of(l, tid, n).ok_or_else(unknown)?),
        None => None,
    };
    let key = shape_key(c0.key.clone(), c0.members.as_ref());
    let in_order = |c: &Comm<'_>| !c.inter && c.members.as_ref().is_some_and(|m| m.is_in_order(n));
    if c1
        .as_ref()
        .is_some_and(|c1| shape_key(c1.key.clone(), c1.members.as_ref()) != key)
    {
        return Err("calls on communicators that differ across the class".into());
    }
    if in_order(&c0) && c1.as_ref().is_none_or(in_order) {
        let start = c0.members.as_ref().map(|g| (g, Start::At(0)));
        return Ok((comms.index(key, start, (class, members)), None));
    }
    // Peers are named in the group its point-to-point calls reach: an
    // intercommunicator's remote group, kept for a class of one (a class's members hold
    // one instance each, which two groups do not say).
    let group = |c: &Comm<'_>| match c.inter {
        false => c.members.clone(),
        true if last.is_none() => c.remote.clone(),
        true => None,
    };
    let g0 = group(&c0).ok_or_else(unknown)?;
    let (g1, start) = match (&c1, last) {
        (Some(c1), Some(l)) => {
            let g1 = group(c1).ok_or_else(unknown)?;
            let start = start_of((&g0, first.rank), Some((&g1, l.rank)));
            (Some(g1), start)
        }
        _ => (None, start_of((&g0, first.rank), None)),
    };
    let start = start.ok_or("calls on communicators whose members differ across the class")?;
    let index = comms.index(key, Some((&g0, start)), (class, members));
    Ok((index, Some((g0, g1))))
}

/// A communicator's groups in a class's first and last members.
type Groups = (CommGroup, Option<CommGroup>);

/// The peer a blocking point-to-point call waits for, as every member of the class
/// names it: `Ok(None)` when it needs nobody (`MPI_PROC_NULL`). On a communicator whose
/// `members` are not the job's ranks in order (a class of one), its local rank named by
/// its COMM_WORLD rank.
fn peer_rule(
    first: &RankDump,
    last: Option<&RankDump>,
    (n, groups): (u32, Option<&Groups>),
    tid: usize,
    side: Side,
) -> Result<Option<Peer>, String> {
    let peer_of = |r: &RankDump, members: Option<&CommGroup>| -> Option<(i64, i64)> {
        let args: &CallArguments = r.threads.get(tid)?.call.as_ref()?;
        let peer = match side {
            Side::Source | Side::Destination => args.peer?,
            Side::SendrecvSource => args.recv_peer?,
        };
        let peer = match members {
            Some(m) if peer >= 0 => i64::from(m.get(usize::try_from(peer).ok()?)?),
            _ => peer,
        };
        (!args.function.contains("Mrecv")).then_some((peer, r.rank.into()))
    };
    let unknown = || String::from("calls whose communicator or peer is not known");
    let first = peer_of(first, groups.map(|g| &g.0)).ok_or_else(unknown)?;
    let last = match last {
        Some(last) => {
            let members = groups.and_then(|g| g.1.as_ref().or(Some(&g.0)));
            Some(peer_of(last, members).ok_or_else(unknown)?)
        }
        None => None,
    };
    match ClassPeer::of(first, last, n) {
        Some(ClassPeer::Null) => Ok(None),
        Some(ClassPeer::Any) if matches!(side, Side::Destination) => {
            Err("sends to MPI_ANY_SOURCE".into())
        }
        _ => Peer::of(first, last, n).map(Some),
    }
}

/// The tag of a class's call, the same in its first and last members.
fn tag_of(
    first: &RankDump,
    last: Option<&RankDump>,
    tid: usize,
    pick: fn(&CallArguments) -> Option<i64>,
) -> Result<Option<i64>, String> {
    let tag = |r: &RankDump| r.threads.get(tid)?.call.as_ref().and_then(pick);
    let t0 = tag(first);
    match last.map(tag) {
        Some(t1) if t1 != t0 => Err("calls whose tags differ across the class".into()),
        _ => Ok(t0),
    }
}

/// What a blocking point-to-point call needs: its receive's source and its send's
/// destination (`MPI_PROC_NULL` needs nobody).
fn point_to_point(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    (call, class): (&str, CallClass),
    (comms, holder): (&mut CommIndex, (usize, &RankSet)),
) -> Need {
    let (receive, send) = match class {
        CallClass::BlockingReceive => (Some(Side::Source), None),
        CallClass::BlockingSend => (None, Some(Side::Destination)),
        _ => (Some(Side::SendrecvSource), Some(Side::Destination)),
    };
    if last.is_none()
        && let Some(need) = unknown_half(first, tid, n, class, holder.0)
    {
        return need;
    }
    let (comm, groups) = match comm_index((first, last), n, tid, comms, holder) {
        Ok(c) => c,
        Err(why) => return Need::Other(why),
    };
    let peers = (n, groups.as_ref());
    let mut p2p = PointToPoint {
        comm,
        receive: None,
        send: None,
        synchronous: mqd_model::calls::canonical(call).is_some_and(|c| c.name == "MPI_Ssend")
            || first.threads[tid]
                .call
                .as_ref()
                .is_some_and(|a| a.synchronous),
        waits: Box::new((None, None)),
        any_source: None,
    };
    if let Some(side) = receive {
        let pick = match side {
            Side::SendrecvSource => |a: &CallArguments| a.recv_tag,
            _ => |a: &CallArguments| a.tag,
        };
        match (
            peer_rule(first, last, peers, tid, side),
            tag_of(first, last, tid, pick),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(peer), Ok(tag)) => {
                p2p.receive = peer.map(|p| (p, tag.filter(|&t| t != ANY_TAG), tag.is_some()));
                if let (Some(Peer::Any), Some(groups)) = (peer, &groups) {
                    match any_source((first, last), groups, n) {
                        Ok(from) => p2p.any_source = Some(from),
                        Err(why) => return Need::Other(why),
                    }
                }
            }
        }
    }
    if let Some(side) = send {
        match (
            peer_rule(first, last, peers, tid, side),
            tag_of(first, last, tid, |a| a.tag),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(None), _) => {}
            (Ok(Some(_)), Ok(None)) => return Need::Other("sends whose tag is not known".into()),
            (Ok(Some(peer)), Ok(Some(tag))) => p2p.send = Some((peer, tag)),
        }
    }
    if last.is_none() {
        p2p.waits = Box::new(call_waits(
            first,
            tid,
            n,
            (receive.is_some(), send.is_some()),
        ));
    }
    match p2p {
        PointToPoint {
            receive: None,
            send: None,
            ..
        } => Need::Proceeds,
        _ => Need::PointToPoint(p2p),
    }
}

/// What the receive or the send of thread `tid` of rank `r` (a class of one, `class`)
/// needs where its peer is not known or is no rank of the job: it may wait for anything,
/// with the wait its arguments show (the receive's with the receive it posted); so does
/// an `MPI_Sendrecv` with either half so. `None` where its peers are known.
fn unknown_half(
    r: &RankDump,
    tid: usize,
    n: u32,
    class: CallClass,
    process: usize,
) -> Option<Need> {
    let args = r.threads.get(tid)?.call.as_ref()?;
    let comm = comm_of(r, args, Some(n))?;
    let known = |peer: i64, receives: bool| match peer {
        PROC_NULL => true,
        ANY_SOURCE if receives => comm.any_source().is_some(),
        _ => comm.world(peer).is_some(),
    };
    if class == CallClass::SendReceive {
        let source = args.recv_peer.is_some_and(|p| known(p, true));
        let dest = args
            .peer
            .is_some_and(|p| known(p, false) && (p == PROC_NULL || args.tag.is_some()));
        if source && dest {
            return None;
        }
        let (receive, send) = call_waits(r, tid, n, (true, true));
        return Some(Need::Unknown(receive.into_iter().chain(send).collect()));
    }
    let receives = class == CallClass::BlockingReceive;
    let tag = args.tag;
    // A peer, or a send's tag, not read: nothing is known of its wait.
    let Some(peer) = args.peer.filter(|_| receives || tag.is_some()) else {
        return Some(Need::Unknown(Vec::new()));
    };
    if known(peer, receives) {
        return None;
    }
    let (receive, send) = call_waits(r, tid, n, (receives, !receives));
    let mut wait = receive.or(send)?;
    if receives {
        // The receive it posted, as its queue lists it.
        let tag = tag.filter(|&t| t != ANY_TAG);
        let key = CommKey::of;
        wait.evidence = r
            .communicators()
            .iter()
            .enumerate()
            .filter(|(_, c)| key(c) == comm.key)
            .find_map(|(communicator, c)| {
                let (index, op) = c
                    .pending_receives
                    .ops()
                    .iter()
                    .enumerate()
                    .find(|(_, op)| {
                        !is_complete(op)
                            && op.desired_local_rank.max(-1) == peer.max(-1)
                            && (!op.tag_wild).then_some(op.desired_tag) == tag
                    })?;
                let at = OpRef {
                    process,
                    communicator,
                    queue: QueueKind::PendingReceives,
                    index,
                };
                let on = super::queues::WaitsOn::new(c);
                Some(super::queues::first_wait(&on, op, (r.rank, at)).evidence)
            })
            .unwrap_or_default();
    }
    Some(Need::Unknown(vec![wait]))
}

/// The waits of the receive and the send (as `halves` says the call has them) of thread
/// `tid` of a rank, from its call's arguments, without evidence.
fn call_waits(
    r: &RankDump,
    tid: usize,
    n: u32,
    (receives, sends): (bool, bool),
) -> (Option<Wait>, Option<Wait>) {
    let Some(args) = r.threads.get(tid).and_then(|t| t.call.as_ref()) else {
        return (None, None);
    };
    let Some(comm) = comm_of(r, args, Some(n)) else {
        return (None, None);
    };
    let key = || (comm.key.clone(), comm.local_rank, comm.inter);
    let receive = receives.then(|| {
        let (source, tag) = if args.function.contains("Sendrecv") {
            (args.recv_peer, args.recv_tag)
        } else {
            (args.peer, args.tag)
        };
        let source = source.unwrap_or(-1);
        let tag = tag.filter(|&t| t != ANY_TAG);
        let mut w = waits::wait(r.rank, key(), WaitKind::Receive, source.max(-1), tag);
        let target = if source == ANY_SOURCE {
            comm.any_source().map(WaitTarget::AnyOf)
        } else {
            comm.world(source).map(WaitTarget::Rank)
        };
        if let Some(target) = target {
            w.target = target;
        }
        w
    });
    let send = sends.then(|| {
        let dest = args.peer.unwrap_or(-1);
        let mut w = waits::wait(r.rank, key(), WaitKind::Send, dest, args.tag);
        if let Some(to) = comm.world(dest) {
            w.target = WaitTarget::Rank(to);
        }
        w
    });
    (receive, send)
}

pub(super) fn state_of(
    (first, last): (&RankDump, Option<&RankDump>),
    (n, size_known): (u32, bool),
    holder: (usize, &RankSet),
    comms: &mut CommIndex,
    coll_comms: &mut Vec<CollComm>,
) -> State {
    // In MPI_Finalize or past it: it starts no message or collective again.
    if first.mpi.phase >= Some(mqd_model::MpiPhase::Finalizing) {
        return State::Finalized;
    }
    if first.threads.is_empty() {
        return State::NoStacks;
    }
    let program = first.executable.as_deref();
    let mut free = false;
    let mut unknown = None;
    let mut polling = None;
    let mut blocked = Vec::new();
    for (i, t) in first.threads.iter().enumerate() {
        match kind(t, program) {
            Kind::Quiet => {}
            Kind::Blocked(call, class) => blocked.push((i, (call, class))),
            Kind::Free => free = true,
            Kind::Polls(call) => {
                polling.get_or_insert(call);
            }
            Kind::Unknown(what) => {
                unknown.get_or_insert(what);
            }
        }
    }
    let in_mpi = !blocked.is_empty() || unknown.is_some() || polling.is_some();
    let level = first.mpi.thread_level;
    if free && (!in_mpi || level == Some(ThreadLevel::Multiple)) {
        return State::Running;
    }
    if blocked.is_empty() && unknown.is_none() && polling.is_none() && !free {
        return State::SelfBlocked;
    }
    // A loop that polls may end: in no proof.
    let maybe_free = unknown.is_some()
        || polling.is_some()
        || (free && (level.is_none_or(|l| l == ThreadLevel::Multiple) || !in_mpi));
    let holdable = !free
        && unknown.is_none()
        && polling.is_none()
        && blocked
            .iter()
            .all(|(_, (_, class))| *class != CallClass::Connect);
    let calls = blocked.iter().map(|(_, (call, _))| call.clone()).collect();
    let threads = blocked.iter().map(|(i, _)| *i).collect();
    let needs = blocked
        .into_iter()
        .map(|(i, (call, class))| {
            let args = first.threads[i].call.as_ref();
            // A wait on a nonblocking collective's request waits as that collective; a
            // fence the recorder counted on its window (one that synchronises) is one.
            let (call, class) = match args.and_then(|a| a.waits_for.as_ref()) {
                Some(collective) if class == CallClass::Wait => {
                    (collective.clone(), CallClass::Collective)
                }
                _ if canonical_name(&call) == "MPI_Win_fence"
                    && args.is_some_and(|a| a.collective.is_some()) =>
                {
                    (call, CallClass::Collective)
                }
                _ => (call, class),
            };
            // A wait whose requests the recorder keeps waits as the receive or
            // synchronous send it names (its envelope: frames never give a wait one).
            let class = match args.and_then(|a| a.peer.zip(a.tag)) {
                Some(_) if class == CallClass::Wait && args.is_some_and(|a| a.synchronous) => {
                    CallClass::BlockingSend
                }
                Some(_) if class == CallClass::Wait => CallClass::BlockingReceive,
                _ => class,
            };
            match class {
                CallClass::BlockingReceive if call.contains("Mrecv") => Need::Unknown(Vec::new()),
                CallClass::BlockingReceive | CallClass::BlockingSend | CallClass::SendReceive => {
                    match alike((first, last), i, |r, a| comm_of(r, a, Some(n)).is_some()) {
                        Some(false) => Need::Unknown(Vec::new()),
                        Some(true) => {
                            point_to_point(first, last, n, i, (&call, class), (comms, holder))
                        }
                        None => {
                            Need::Other("calls whose communicator is known in some members".into())
                        }
                    }
                }
                CallClass::Wait => match alike((first, last), i, |_, a| !a.requests.is_empty()) {
                    Some(false) => Need::Unknown(Vec::new()),
                    Some(true) if matches!(call.as_str(), "MPI_Wait" | "MPI_Waitall") => {
                        Need::Wait(i)
                    }
                    Some(true) => Need::WaitAny(i),
                    None => Need::Other("waits whose requests are known in some members".into()),
                },
                CallClass::OneSided | CallClass::Connect | CallClass::BufferFlush => {
                    Need::Unknown(Vec::new())
                }
                // Over more than its communicator's members (an intercommunicator's two
                // groups) or fewer (a group's): their all being in it proves nothing.
                CallClass::Collective if beyond_its_comm(&call) => Need::CollectiveSomewhere(call),
                CallClass::Collective => match (
                    collective_comm(first, last, size_known.then_some(n), i, &call),
                    args,
                ) {
                    (CommOf::Known(comm), a) => Need::Collective(
                        coll_index(coll_comms, comm),
                        canonical_name(&call),
                        a.and_then(|a| a.root),
                        a.and_then(|a| a.bytes),
                    ),
                    (CommOf::Unknown, _) => Need::CollectiveSomewhere(call),
                    (CommOf::Differs, _) => Need::Other(
                        "collectives on communicators that differ across the class".into(),
                    ),
                },
                // Init and Finalize wait for the whole job.
                CallClass::Init | CallClass::Finalize => {
                    let job = (0..n as i32).collect();
                    Need::Collective(
                        coll_index(coll_comms, (CommKey::named("(the job)", n.into()), job)),
                        canonical_name(&call),
                        args.and_then(|a| a.root),
                        args.and_then(|a| a.bytes),
                    )
                }
                _ => Need::Other(format!("ranks in {call}")),
            }
        })
        .collect();
    State::Waiting {
        needs,
        calls,
        threads,
        holdable,
        unknown,
        polling,
        maybe_free,
    }
}

/// What a blocked call's waits do not say: the first argument not read, or the call.
pub(super) fn unknown_wait(call: &str, args: Option<&CallArguments>) -> String {
    match args {
        None => format!("{call}'s arguments could not be read"),
        Some(a) => match a.unknown.iter().next() {
            Some((arg, why)) => format!("{call}'s {arg}: {why}"),
            None => format!("whom {call} waits for is not known"),
        },
    }
}

/// Whether thread `tid`'s call arguments were read and pass `known`, in a class's first
/// and last members alike (`None`: they differ).
fn alike(
    (first, last): (&RankDump, Option<&RankDump>),
    tid: usize,
    known: impl Fn(&RankDump, &CallArguments) -> bool,
) -> Option<bool> {
    let of = |r: &RankDump| {
        let args = r.threads.get(tid).and_then(|t| t.call.as_ref());
        args.is_some_and(|a| known(r, a))
    };
    let a = of(first);
    last.map_or(Some(a), |l| (of(l) == a).then_some(a))
}

/// Whether collective `call` is over another group than its communicator argument's
/// members: `MPI_Intercomm_create` (and `_from_groups`) and `MPI_Intercomm_merge` wait
/// for the remote group too, `MPI_Comm_create_group` only for its group's members.
fn beyond_its_comm(call: &str) -> bool {
    matches!(
        canonical_name(call).as_str(),
        "MPI_Intercomm_create"
            | "MPI_Intercomm_create_from_groups"
            | "MPI_Intercomm_merge"
            | "MPI_Comm_create_group"
    )
}

/// A call by the name the standard gives it (large-count bindings are the call).
fn canonical_name(call: &str) -> String {
    mqd_model::calls::canonical(call).map_or_else(|| call.to_owned(), |c| c.name.to_owned())
}

/// The communicator and members of thread `tid`'s collective, the same in a class's
/// first and last members (`MPI_COMM_WORLD`'s by its handle where the job's size is
/// `world`).
fn collective_comm(
    first: &RankDump,
    last: Option<&RankDump>,
    world: Option<u32>,
    tid: usize,
    call: &str,
) -> CommOf {
    let of = |r: &RankDump| {
        let args = r.threads.get(tid)?.call.as_ref();
        // A rooted collective whose root is not known may be another instance than
        // its members'.
        if rooted(call) && args.and_then(|a| a.root).is_none() {
            return None;
        }
        // Else its own messages may say which.
        args.and_then(|a| call_members(r, a, world))
            .or_else(|| messages_comm(r, collective_ops(r, 0).iter().map(|o| o.unique_id)))
    };
    match (of(first), last.map(of)) {
        (Some(comm), None) => CommOf::Known(comm),
        (Some(comm), Some(Some(other))) if other == comm => CommOf::Known(comm),
        (None, None | Some(None)) => CommOf::Unknown,
        _ => CommOf::Differs,
    }
}

/// A class's collective communicator, as its first and last members name it.
enum CommOf {
    Known(CollComm),
    /// Neither says which (or which instance, for a rooted collective without root).
    Unknown,
    /// They name different ones.
    Differs,
}
