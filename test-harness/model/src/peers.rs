//! Resolving the peers of operations to COMM_WORLD ranks.

use crate::{Communicator, Operation, OperationStatus, RankSet};

/// COMM_WORLD rank of a peer given by the library (`global`) or, on COMM_WORLD, its
/// local rank.
pub fn world_of(comm: &Communicator, local: i64, global: i64) -> Option<i32> {
    if global >= 0 {
        return i32::try_from(global).ok();
    }
    if local >= 0 && comm.name == "MPI_COMM_WORLD" {
        return i32::try_from(local).ok();
    }
    None
}

/// The COMM_WORLD ranks a receive from any source on `comm` may come from: the group,
/// unless it is missing or does not map the peers the library resolved (as on an
/// intercommunicator, whose peers are in the remote group).
pub fn peer_group(comm: &Communicator) -> Option<RankSet> {
    let group = comm.group.as_ref()?;
    group_maps_peers(comm).then(|| RankSet::from_i32s(group.iter()))
}

/// Whether [`peer_group`] has a group for `comm`, without building it (a rank's
/// `MPI_COMM_WORLD` of a million ranks is checked in constant time).
pub fn group_maps_peers(comm: &Communicator) -> bool {
    let Some(group) = comm.group.as_ref() else {
        return false;
    };
    let len = group.len();
    let in_order = u32::try_from(len).is_ok_and(|n| group.is_in_order(n));
    if len as i64 != comm.size || (!in_order && group.iter().any(|r| r < 0)) {
        return false;
    }
    let queues = [
        &comm.pending_receives,
        &comm.unexpected_messages,
        &comm.pending_sends,
    ];
    queues.iter().flat_map(|q| q.ops()).all(|op| {
        op.desired_local_rank < 0
            || op.desired_global_rank < 0
            || usize::try_from(op.desired_local_rank)
                .ok()
                .and_then(|l| group.get(l))
                .is_some_and(|w| i64::from(w) == op.desired_global_rank)
    })
}

/// The sender of an unexpected message: the library may give its COMM_WORLD rank as
/// the desired or the actual one.
pub fn unexpected_sender(comm: &Communicator, op: &Operation) -> Option<i32> {
    let global = op.desired_global_rank.max(op.actual_global_rank);
    world_of(comm, op.desired_local_rank, global)
}

/// Whether an operation is complete: it waits for nothing.
pub fn is_complete(op: &Operation) -> bool {
    op.status == OperationStatus::Complete
}
