//! A collective's own messages in a rank's queues (MPICH's collective context: the
//! communicator's plus one): no point-to-point operation of the program, but the sign of
//! a collective the rank is in, of its communicator and of its peers.

use mqd_model::peers::{is_complete, unexpected_sender, world_of};
use mqd_model::{CommGroup, CommKey, Communicator, Evidence, OpRef, Peer, QueueKind, RankDump};

/// One message of a collective's own algorithm.
#[derive(Debug, Clone)]
pub struct CollectiveOp {
    /// The rank that lists it.
    pub rank: i32,
    /// Its communicator.
    pub comm: CommKey,
    /// The communicator's unique id in its rank.
    pub unique_id: u64,
    /// The peer, when its COMM_WORLD rank is known.
    pub peer: Option<i32>,
    /// The operation.
    pub evidence: Evidence,
}

/// The collective messages not complete on `c`, communicator `communicator` of rank
/// `rank`, process `process`, queue by queue.
pub fn collective_ops_on(
    c: &Communicator,
    rank: i32,
    (process, communicator): (usize, usize),
) -> impl Iterator<Item = CollectiveOp> + '_ {
    QueueKind::ALL.into_iter().flat_map(move |queue| {
        let ops = c.queue(queue).ops().iter().enumerate();
        ops.filter(|(_, op)| op.collective && !is_complete(op))
            .map(move |(index, op)| {
                let peer = match queue {
                    QueueKind::UnexpectedMessages => unexpected_sender(c, op),
                    _ => world_of(c, op.desired_local_rank, op.desired_global_rank),
                };
                CollectiveOp {
                    rank,
                    comm: CommKey::of(c),
                    unique_id: c.unique_id,
                    peer,
                    evidence: Evidence {
                        op: OpRef {
                            process,
                            communicator,
                            queue,
                            index,
                        },
                        peer: peer.map_or(Peer::Unresolved, Peer::World),
                    },
                }
            })
    })
}

/// Every collective message `r` lists (process `process`), by communicator.
pub(crate) fn collective_ops(r: &RankDump, process: usize) -> Vec<CollectiveOp> {
    let comms = r.communicators().iter().enumerate();
    comms
        .flat_map(|(i, c)| collective_ops_on(c, r.rank, (process, i)))
        .collect()
}

/// The communicator of `r` that collective messages on communicators `ids` (unique ids,
/// in `r`'s order) are on, where they are on one alone, with its members.
pub fn messages_comm(
    r: &RankDump,
    ids: impl IntoIterator<Item = u64>,
) -> Option<(CommKey, CommGroup)> {
    let mut ids: Vec<u64> = ids.into_iter().collect();
    ids.dedup();
    let [id] = ids[..] else { return None };
    let c = r.communicators().iter().find(|c| c.unique_id == id)?;
    Some((CommKey::of(c), c.group.clone()?))
}
