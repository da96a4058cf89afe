//! The waits of the ranks that are classes of one: every rule the class analysis makes
//! for such a rank with the wait it stands for (its kind, communicator, tag, operations
//! and call), so that findings can name hops, evidence and calls as the rank's own.
//! Ranks of larger classes are said by their classes' rules instead.

use mqd_model::{CallArguments, CommKey, Evidence, RankSet, Wait, WaitKind, WaitTarget};

/// A wait of `rank` with this communicator (its key, the rank's local rank in it, and
/// whether it is an intercommunicator), before its target is known.
pub fn wait(
    rank: i32,
    (comm, local_rank, inter): (CommKey, i64, bool),
    kind: WaitKind,
    peer_local: i64,
    tag: Option<i64>,
) -> Wait {
    Wait {
        call: None,
        from: rank,
        target: WaitTarget::UnknownRank { local: peer_local },
        kind,
        comm,
        local_rank,
        peer_local,
        tag,
        count: 0,
        evidence: Vec::new(),
        blocked: false,
        requests: Vec::new(),
        remote_peer: inter,
    }
}

/// A pending send and its copy waiting unexpected at its destination: one message, as
/// the copy names it, with both operations.
pub(crate) fn paired(send: &Wait, copy: &Wait) -> Wait {
    let mut evidence = send.evidence.clone();
    evidence.extend(copy.evidence.iter().cloned());
    let mut requests = copy.requests.clone();
    requests.extend(send.requests.iter().copied());
    Wait {
        kind: WaitKind::Send,
        count: send.count,
        evidence,
        requests,
        ..copy.clone()
    }
}

/// The wait of a thread polling in `call` at `rank`: like a receive from any source, for
/// any other rank of the job of `n`.
pub(crate) fn polls_for_anyone(rank: u32, call: &str, n: u32) -> Wait {
    let world = (
        CommKey::named("MPI_COMM_WORLD", i64::from(n)),
        i64::from(rank),
        false,
    );
    let mut others = RankSet::full(n);
    others.remove(rank);
    let mut w = wait(rank as i32, world, WaitKind::Receive, -1, None);
    w.target = WaitTarget::AnyOf(others);
    w.call = Some(call.to_owned());
    w
}

/// The waits of a thread of `rank` in a collective on `comm` with these `members`
/// (COMM_WORLD ranks in local rank order), for each member `outside` it, in local rank
/// order.
pub fn collective(
    rank: i32,
    comm: &CommKey,
    members: &mqd_model::CommGroup,
    outside: &RankSet,
) -> Vec<Wait> {
    let local = |r: i32| members.iter().position(|m| m == r).map_or(-1, |i| i as i64);
    members
        .iter()
        .filter(|&m| outside.contains_i32(m))
        .map(|m| Wait {
            call: None,
            from: rank,
            target: WaitTarget::Rank(m),
            kind: WaitKind::Collective,
            comm: comm.clone(),
            local_rank: local(rank),
            peer_local: local(m),
            tag: None,
            count: 0,
            evidence: Vec::new(),
            blocked: false,
            requests: Vec::new(),
            remote_peer: false,
        })
        .collect()
}

/// The waits of `rank`'s `MPI_Intercomm_create` (`args`) for the members of both groups
/// in `outside`: those of its own group by their rank there, the remote group's as such.
pub fn pairing(rank: i32, args: &CallArguments, outside: &RankSet) -> Vec<Wait> {
    let members = args.members.clone().unwrap_or_default();
    let local = |r: i32| {
        members
            .iter()
            .position(|&m| m == r)
            .map_or(-1, |i| i as i64)
    };
    let comm = CommKey {
        of_ranks: Some(RankSet::from_i32s(members.iter().copied())),
        ..CommKey::named("", members.len() as i64)
    };
    outside
        .iter()
        .map(|m| {
            let peer = local(m as i32);
            let kind = WaitKind::Collective;
            let mut w = wait(rank, (comm.clone(), local(rank), false), kind, peer, None);
            w.target = WaitTarget::Rank(m as i32);
            w.remote_peer = peer < 0;
            w
        })
        .collect()
}

/// The wait a collective's own message makes of its rank, which has no stack: it is in a
/// collective with the message's peer (any member, when not known).
pub fn collective_message(op: &crate::collective_ops::CollectiveOp) -> Wait {
    Wait {
        call: None,
        from: op.rank,
        target: op.peer.map_or(WaitTarget::AnyUnknown, WaitTarget::Rank),
        kind: WaitKind::Collective,
        comm: op.comm.clone(),
        local_rank: -1,
        peer_local: -1,
        tag: None,
        count: 0,
        evidence: vec![op.evidence.clone()],
        blocked: false,
        requests: Vec::new(),
        remote_peer: false,
    }
}

/// One wait for any of `waits` (a call that returns when one of its requests does):
/// the first one's, its target every target, its evidence all of theirs.
pub(crate) fn any_of(waits: &[Wait]) -> Option<Wait> {
    let first = waits.first()?;
    let mut set = RankSet::new();
    let mut evidence: Vec<Evidence> = Vec::new();
    for w in waits {
        set.union_with(&w.targets()?);
        evidence.extend(w.evidence.iter().cloned());
    }
    Some(Wait {
        target: WaitTarget::AnyOf(set),
        evidence,
        ..first.clone()
    })
}

/// The order of a rank's queue waits: messages as their
/// destinations list them (a send its copy names first), then sends no copy names, then
/// receives, each in its queue's order.
pub(crate) fn scan_order(waits: &mut [Wait]) {
    use mqd_model::QueueKind;
    waits.sort_by_key(|w| {
        let copy = w
            .evidence
            .iter()
            .find(|e| e.op.queue == QueueKind::UnexpectedMessages);
        let first = w.evidence.first().map(|e| e.op);
        match (w.kind, copy) {
            (WaitKind::Receive, _) => (2, first),
            (_, Some(copy)) => (0, Some(copy.op)),
            _ => (1, first),
        }
    });
}
