//! What a class's threads wait for, read from its first and last members' stacks and
//! call arguments: each blocked thread as a need (a point-to-point call's peers as every
//! member names them, a collective instance, the requests of a wait), or why it is not
//! followed.

use super::queues::{ClassOp, ClassQueues, Peer};
use mqd_analysis::shared::{ANY_TAG, call_comm, is_world, rooted};
use mqd_model::{
    CallArguments, CallClass, ClassPeer, CommKey, Location, RankDump, ThreadLevel, ThreadStack,
};

/// A blocked thread of a class's first member, as the rule it becomes.
pub(super) enum Need {
    /// Returns: the rank goes on.
    Proceeds,
    /// In a blocking point-to-point call.
    PointToPoint(PointToPoint),
    /// In this collective on `MPI_COMM_WORLD`.
    Collective(String, Option<i64>, Option<u64>),
    /// In `MPI_Wait` or `MPI_Waitall` (thread `tid`): every request's operation.
    Wait(usize),
    /// Not followed here (why).
    Other(String),
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
}

/// The requests thread `tid` of a class's first and last members waits for, as the
/// class's operations: the same operation in both, or not followed.
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
    if a.is_empty() || b.as_ref().is_some_and(|b| b.len() != a.len()) {
        return Err(unknown());
    }
    let mut out = Vec::new();
    for (k, request) in a.iter().enumerate() {
        let r0 = request.ok_or_else(unknown)?;
        let r1 = match &b {
            Some(b) => Some(b[k].ok_or_else(unknown)?),
            None => None,
        };
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
                    None => return Err("waits for requests not in their own queues".into()),
                },
            },
        });
    }
    Ok(out)
}

/// A blocking point-to-point call's peers, with their tags.
#[derive(Clone, Copy)]
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
}

/// What one class's ranks do.
pub(super) enum State {
    Running,
    /// No stack: it may be anywhere; its pending operations are what it may wait for.
    NoStacks,
    SelfBlocked,
    Waiting {
        needs: Vec<Need>,
        /// The call of each need.
        calls: Vec<String>,
        unknown: Option<String>,
        /// A thread that might call MPI now, or a place unknown: in no proof.
        maybe_free: bool,
    },
    NotFollowed(String),
}

fn kind(t: &ThreadStack, program: Option<&str>) -> Result<Option<(String, CallClass)>, String> {
    match t.location_in(program) {
        Location::Outside { waits: Some(_), .. } | Location::MpiThread => Ok(None),
        Location::Outside { .. } => Err(String::new()),
        Location::Unknown => Err("a stack that could not be followed".into()),
        Location::InMpi { call, class } => match class.blocks() {
            None => Err(call),
            // A loop that polls may wait for anyone: not followed by classes.
            Some(false) if mqd_model::calls::polls(&call) => Err(format!("{call} (polling)")),
            Some(false) => Err(String::new()),
            Some(true) => Ok(Some((call, class))),
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

/// The communicator of thread `tid`'s call in a class's first and last members: an
/// index into `comms`, where its members are the job's ranks in order and it is the
/// same in both.
fn comm_index(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    comms: &mut Vec<CommKey>,
) -> Result<usize, String> {
    let of = |r: &RankDump| {
        let args = r.threads.get(tid)?.call.as_ref()?;
        call_comm(r, args, n)
    };
    let other = || String::from("calls on communicators other than the job's ranks in order");
    let (key, in_order) = of(first).ok_or_else(other)?;
    if !in_order || last.is_some_and(|l| of(l) != Some((key.clone(), true))) {
        return Err(other());
    }
    Ok(match comms.iter().position(|k| *k == key) {
        Some(i) => i,
        None => {
            comms.push(key);
            comms.len() - 1
        }
    })
}

/// The peer a blocking point-to-point call waits for, as every member of the class
/// names it: `Ok(None)` when it needs nobody (`MPI_PROC_NULL`).
fn peer_rule(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    side: Side,
) -> Result<Option<Peer>, String> {
    let peer_of = |r: &RankDump| -> Option<(i64, i64)> {
        let args: &CallArguments = r.threads.get(tid)?.call.as_ref()?;
        let peer = match side {
            Side::Source | Side::Destination => args.peer?,
            Side::SendrecvSource => args.recv_peer?,
        };
        (!args.function.contains("Mrecv")).then_some((peer, r.rank.into()))
    };
    let unknown = || String::from("calls whose communicator or peer is not known");
    let first = peer_of(first).ok_or_else(unknown)?;
    let last = match last {
        Some(last) => Some(peer_of(last).ok_or_else(unknown)?),
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
    comms: &mut Vec<CommKey>,
) -> Need {
    let (receive, send) = match class {
        CallClass::BlockingReceive => (Some(Side::Source), None),
        CallClass::BlockingSend => (None, Some(Side::Destination)),
        _ => (Some(Side::SendrecvSource), Some(Side::Destination)),
    };
    let comm = match comm_index(first, last, n, tid, comms) {
        Ok(c) => c,
        Err(why) => return Need::Other(why),
    };
    let mut p2p = PointToPoint {
        comm,
        receive: None,
        send: None,
        synchronous: mqd_model::calls::canonical(call).is_some_and(|c| c.name == "MPI_Ssend"),
    };
    if let Some(side) = receive {
        let pick = match side {
            Side::SendrecvSource => |a: &CallArguments| a.recv_tag,
            _ => |a: &CallArguments| a.tag,
        };
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, pick),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(peer), Ok(tag)) => {
                p2p.receive = peer.map(|p| (p, tag.filter(|&t| t != ANY_TAG), tag.is_some()));
            }
        }
    }
    if let Some(side) = send {
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, |a| a.tag),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(None), _) => {}
            (Ok(Some(_)), Ok(None)) => return Need::Other("sends whose tag is not known".into()),
            (Ok(Some(peer)), Ok(Some(tag))) => p2p.send = Some((peer, tag)),
        }
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

pub(super) fn state_of(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    comms: &mut Vec<CommKey>,
) -> State {
    if first.outcome.is_err() {
        return State::NotFollowed("ranks whose queues could not be read".into());
    }
    if first.mpi.phase == Some(mqd_model::MpiPhase::Finalized) {
        return State::NotFollowed("ranks that finalized".into());
    }
    if first.threads.is_empty() {
        return State::NoStacks;
    }
    let program = first.executable.as_deref();
    let mut free = false;
    let mut unknown = None;
    let mut blocked = Vec::new();
    for (i, t) in first.threads.iter().enumerate() {
        match kind(t, program) {
            Ok(None) => {}
            Ok(Some(call)) => blocked.push((i, call)),
            Err(what) if what.is_empty() => free = true,
            Err(what) => {
                unknown.get_or_insert(what);
            }
        }
    }
    let in_mpi = !blocked.is_empty() || unknown.is_some();
    let level = first.mpi.thread_level;
    if free && (!in_mpi || level == Some(ThreadLevel::Multiple)) {
        return State::Running;
    }
    if blocked.is_empty() && unknown.is_none() && !free {
        return State::SelfBlocked;
    }
    let maybe_free = unknown.is_some()
        || (free && (level.is_none_or(|l| l == ThreadLevel::Multiple) || !in_mpi));
    let calls = blocked.iter().map(|(_, (call, _))| call.clone()).collect();
    let needs = blocked
        .into_iter()
        .map(|(i, (call, class))| {
            let args = first.threads[i].call.as_ref();
            match class {
                CallClass::BlockingReceive | CallClass::BlockingSend | CallClass::SendReceive => {
                    point_to_point(first, last, n, i, (&call, class), comms)
                }
                CallClass::Wait if matches!(call.as_str(), "MPI_Wait" | "MPI_Waitall") => {
                    Need::Wait(i)
                }
                CallClass::Collective => match args {
                    Some(a) if is_world(a) && !(rooted(&call) && a.root.is_none()) => {
                        let name = mqd_model::calls::canonical(&call)
                            .map_or_else(|| call.clone(), |c| c.name.to_owned());
                        Need::Collective(name, a.root, a.bytes)
                    }
                    _ => Need::Other("collectives on other communicators".into()),
                },
                _ => Need::Other(format!("ranks in {call}")),
            }
        })
        .collect();
    State::Waiting {
        needs,
        calls,
        unknown,
        maybe_free,
    }
}
