//! What the recorder's collective counts prove of a rank in a collective: the members it
//! cannot complete without that have not entered it. Every member calls the collectives
//! of a communicator in one order, so a member that has entered fewer than `k` of them is
//! not in the `k`-th: it must still call the ones before and then this one.

use mqd_model::{CallArguments, CommCount, RankDump, RankSet, Traffic};
use std::collections::BTreeMap;

/// The members (ranks of the communicator) that member `me` of a communicator of `size`
/// cannot return from collective `call` (the standard's name) without, rooted at `root`
/// where it has one; `None` where that is not known (neighbourhood collectives, whose
/// neighbours the records do not keep; a rooted one without its root).
///
/// By what the result needs: a reduction to all, a gather to all, an exchange, or a
/// barrier needs every member's part; a broadcast or scatter needs the root's, a
/// reduction or gather to a root needs every member's at the root only, and a scan
/// needs the members before `me`. A constructor (`MPI_Comm_dup`, `MPI_Comm_split`...)
/// needs every member in the MPIs the recorder serves: the MPICH family and Open MPI
/// agree a new communicator's context id by a reduction over the parent's members. A
/// window's creation, `MPI_Win_free` and a fence the recorder counted (one that
/// synchronises: see `mqd-job`) end in a barrier over the window's group in both, and
/// `MPI_Intercomm_create` needs its local group (the remote one: [`crate::pairing`]).
pub fn needed(call: &str, me: usize, root: Option<i64>, size: usize) -> Option<Vec<usize>> {
    // A nonblocking collective's result needs what its blocking form's does.
    if let Some(blocking) = blocking_form(call) {
        return needed(&blocking, me, root, size);
    }
    let others = || (0..size).filter(|&r| r != me).collect();
    let root = || usize::try_from(root?).ok().filter(|&r| r < size);
    Some(match call {
        "MPI_Barrier"
        | "MPI_Allreduce"
        | "MPI_Allgather"
        | "MPI_Allgatherv"
        | "MPI_Alltoall"
        | "MPI_Alltoallv"
        | "MPI_Alltoallw"
        | "MPI_Reduce_scatter"
        | "MPI_Reduce_scatter_block"
        | "MPI_Comm_dup"
        | "MPI_Comm_dup_with_info"
        | "MPI_Comm_split"
        | "MPI_Comm_split_type"
        | "MPI_Comm_create"
        | "MPI_Cart_create"
        | "MPI_Cart_sub"
        | "MPI_Graph_create"
        | "MPI_Dist_graph_create"
        | "MPI_Dist_graph_create_adjacent"
        | "MPI_Win_create"
        | "MPI_Win_allocate"
        | "MPI_Win_allocate_shared"
        | "MPI_Win_create_dynamic"
        | "MPI_Win_free"
        | "MPI_Win_fence"
        | "MPI_Intercomm_create" => others(),
        "MPI_Bcast" | "MPI_Scatter" | "MPI_Scatterv" => match root()? {
            r if r == me => Vec::new(),
            r => vec![r],
        },
        "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" => match root()? {
            r if r == me => others(),
            _ => Vec::new(),
        },
        "MPI_Scan" | "MPI_Exscan" => (0..me).collect(),
        _ => return None,
    })
}

/// Whether `call` is a neighbourhood collective, blocking or not.
fn neighbourhood(call: &str) -> bool {
    call.starts_with("MPI_Neighbor_") || call.starts_with("MPI_Ineighbor_")
}

/// The blocking form of a nonblocking collective (`MPI_Ibcast`: `MPI_Bcast`); not of a
/// nonblocking constructor (`MPI_Comm_idup` makes its communicator when it completes).
fn blocking_form(call: &str) -> Option<String> {
    let rest = call.strip_prefix("MPI_I")?;
    let blocking = format!(
        "MPI_{}{}",
        rest.get(..1)?.to_ascii_uppercase(),
        rest.get(1..)?
    );
    let data = !blocking.starts_with("MPI_Comm") && !blocking.contains("create");
    (data && needed(&blocking, 0, Some(0), 1).is_some()).then_some(blocking)
}

/// A rank's counts, where they prove a collective not entered: complete, and of the
/// rank they are read with.
fn counts(dump: &RankDump) -> Option<&Traffic> {
    let t = dump.traffic.as_ref()?;
    (t.collectives_complete && t.rank >= 0 && t.rank == dump.rank).then_some(t)
}

/// The members (`MPI_COMM_WORLD` ranks) that rank `at`, in the collective of `args` (its
/// thread's call, as the recorder kept it), cannot complete without and that have
/// entered fewer collectives on its communicator than this one is: they are not in it.
/// `singles`: the dumps of the ranks whose counts may be read, by rank. Empty where
/// nothing is proven.
pub fn members_behind(
    singles: &BTreeMap<u32, &RankDump>,
    at: u32,
    args: &CallArguments,
) -> RankSet {
    let mut behind = RankSet::new();
    let Some(mine) = singles.get(&at).and_then(|d| counts(d)) else {
        return behind;
    };
    let (Some(k), Some(handle)) = (args.collective, args.comm) else {
        return behind;
    };
    let Some(comm) = mine.comms.iter().find(|c| c.handle == handle) else {
        return behind;
    };
    let call = (args.waits_for.as_deref())
        .or(args.called.as_deref())
        .unwrap_or(&args.function);
    let call = mqd_model::calls::canonical(call).map_or(call, |c| c.name);
    let Some(me) = i32::try_from(at).ok().and_then(|w| comm.local_rank(w)) else {
        return behind;
    };
    // A neighbourhood collective needs what its sources send (the topology's, as kept).
    let needed: Vec<i32> = match (neighbourhood(call), &comm.sources) {
        (true, Some(sources)) => sources
            .iter()
            .copied()
            .filter(|&s| s != at as i32)
            .collect(),
        (true, None) => return behind,
        (false, _) => match needed(call, me, args.root, comm.size as usize) {
            Some(locals) => locals
                .into_iter()
                .filter_map(|m| comm.world_rank(m))
                .collect(),
            None => return behind,
        },
    };
    for world in needed {
        let entered = u32::try_from(world)
            .ok()
            .and_then(|w| singles.get(&w))
            .and_then(|d| counts(d))
            .and_then(|t| entered_on(t, comm));
        if entered.is_some_and(|n| n < k) {
            behind.insert(world as u32);
        }
    }
    behind
}

/// The collectives a rank entered on `comm` (another rank's record of it), where its
/// counts name the same communicator.
fn entered_on(t: &Traffic, comm: &CommCount) -> Option<u64> {
    t.comms.iter().find(|c| c.same(comm)).map(|c| c.entered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(handle: i64, size: u64, entered: u64) -> CommCount {
        CommCount {
            handle,
            lineage: 1,
            members: None,
            size,
            entered,
            last: None,
            sources: None,
        }
    }

    fn rank(rank: i32, complete: bool, comms: Vec<CommCount>) -> RankDump {
        let mut d = RankDump::unread(rank, None, None);
        d.traffic = Some(Traffic {
            rank,
            collectives_complete: complete,
            comms,
            ..Traffic::default()
        });
        d
    }

    fn call(name: &str, comm: i64, k: u64, root: Option<i64>) -> CallArguments {
        CallArguments {
            function: name.into(),
            called: Some(name.into()),
            comm: Some(comm),
            collective: Some(k),
            root,
            ..CallArguments::default()
        }
    }

    #[test]
    fn what_each_kind_of_collective_needs() {
        assert_eq!(needed("MPI_Allreduce", 1, None, 3), Some(vec![0, 2]));
        assert_eq!(needed("MPI_Comm_split", 0, None, 2), Some(vec![1]));
        assert_eq!(needed("MPI_Bcast", 1, Some(0), 4), Some(vec![0]));
        assert_eq!(needed("MPI_Bcast", 0, Some(0), 4), Some(vec![]));
        assert_eq!(needed("MPI_Reduce", 0, Some(0), 3), Some(vec![1, 2]));
        assert_eq!(needed("MPI_Gather", 2, Some(0), 3), Some(vec![]));
        assert_eq!(needed("MPI_Scan", 2, None, 4), Some(vec![0, 1]));
        // Not known: whom a neighbourhood collective needs, a root out of range.
        assert_eq!(needed("MPI_Neighbor_allgather", 0, None, 4), None);
        assert_eq!(needed("MPI_Bcast", 1, Some(9), 4), None);
        assert_eq!(needed("MPI_Bcast", 1, None, 4), None);
        // A nonblocking collective needs what its blocking form does; names that only
        // begin alike are none.
        assert_eq!(needed("MPI_Ibarrier", 1, None, 3), Some(vec![0, 2]));
        assert_eq!(needed("MPI_Ibcast", 1, Some(0), 4), Some(vec![0]));
        assert_eq!(needed("MPI_Iallreduce", 0, None, 2), Some(vec![1]));
        for other in [
            "MPI_Intercomm_create_from_groups",
            "MPI_Comm_idup",
            "MPI_Init",
            "MPI_Irecv",
        ] {
            assert_eq!(needed(other, 0, None, 2), None, "{other}");
        }
    }

    #[test]
    fn a_neighbourhood_collective_waits_for_its_sources_behind_only() {
        // A periodic ring of 4 (handle 9): ranks 0-2 in their first neighbourhood
        // collective on it, rank 3 in none. Each receives from its left and right.
        let ring = |r: i32, entered: u64| CommCount {
            handle: 9,
            lineage: 77,
            members: None,
            size: 4,
            entered,
            last: None,
            sources: Some(vec![(r + 3) % 4, (r + 1) % 4]),
        };
        let dumps: Vec<RankDump> = (0..4)
            .map(|r| rank(r, true, vec![ring(r, if r < 3 { 1 } else { 0 })]))
            .collect();
        let singles: BTreeMap<u32, &RankDump> = dumps.iter().map(|d| (d.rank as u32, d)).collect();
        let gather = call("MPI_Neighbor_allgather", 9, 1, None);
        assert_eq!(members_behind(&singles, 0, &gather), RankSet::single(3));
        assert_eq!(members_behind(&singles, 2, &gather), RankSet::single(3));
        // Rank 1 receives from 0 and 2 only, both in it.
        assert!(members_behind(&singles, 1, &gather).is_empty());
        // Without its topology's neighbours kept, nothing is proven.
        let mut unkept = dumps.clone();
        for d in &mut unkept {
            d.traffic.as_mut().unwrap().comms[0].sources = None;
        }
        let singles: BTreeMap<u32, &RankDump> = unkept.iter().map(|d| (d.rank as u32, d)).collect();
        assert!(members_behind(&singles, 0, &gather).is_empty());
    }

    #[test]
    fn a_wait_on_a_nonblocking_collective_waits_for_the_members_behind() {
        let dumps: Vec<RankDump> = (0..3)
            .map(|r| rank(r, true, vec![world(7, 3, if r < 2 { 2 } else { 1 })]))
            .collect();
        let singles: BTreeMap<u32, &RankDump> = dumps.iter().map(|d| (d.rank as u32, d)).collect();
        let mut wait = call("MPI_Wait", 7, 2, None);
        assert!(
            members_behind(&singles, 0, &wait).is_empty(),
            "a wait alone needs no one"
        );
        wait.waits_for = Some("MPI_Ibarrier".into());
        assert_eq!(members_behind(&singles, 0, &wait), RankSet::single(2));
    }

    #[test]
    fn a_member_that_entered_fewer_collectives_is_not_in_this_one() {
        // Ranks 0-2 in their 5th collective on the world (an allreduce); rank 3 entered
        // 4. Handles differ by rank (Open MPI's are addresses).
        let dumps: Vec<RankDump> = (0..4)
            .map(|r| {
                rank(
                    r,
                    true,
                    vec![world(100 + i64::from(r), 4, if r < 3 { 5 } else { 4 })],
                )
            })
            .collect();
        let singles: BTreeMap<u32, &RankDump> = dumps.iter().map(|d| (d.rank as u32, d)).collect();
        let behind = members_behind(&singles, 0, &call("MPI_Allreduce", 100, 5, None));
        assert_eq!(behind, RankSet::single(3));
        // A broadcast from rank 1 needs only rank 1, which is in it.
        let behind = members_behind(&singles, 0, &call("MPI_Bcast", 100, 5, Some(1)));
        assert!(behind.is_empty());
        // Rank 3 in its 4th, waiting for the others' 4th: they entered it.
        let behind = members_behind(&singles, 3, &call("MPI_Barrier", 103, 4, None));
        assert!(behind.is_empty());
    }

    #[test]
    fn counts_that_may_miss_a_collective_or_name_another_communicator_prove_nothing() {
        let of = |complete: bool, lineage: u64| {
            let mut c = world(200, 2, 0);
            c.lineage = lineage;
            rank(1, complete, vec![c])
        };
        let me = rank(0, true, vec![world(100, 2, 1)]);
        for (other, proven) in [
            (of(true, 1), true),
            // Its counts may miss a collective (a binding bypasses the recorder).
            (of(false, 1), false),
            // Another communicator of the same members (a duplicate of the world).
            (of(true, 77), false),
        ] {
            let singles: BTreeMap<u32, &RankDump> = [(0, &me), (1, &other)].into_iter().collect();
            let behind = members_behind(&singles, 0, &call("MPI_Barrier", 100, 1, None));
            assert_eq!(behind.contains(1), proven);
        }
        // Counts of another rank than the dump's.
        let mut other = of(true, 1);
        other.rank = 5;
        let singles: BTreeMap<u32, &RankDump> = [(0, &me), (1, &other)].into_iter().collect();
        assert!(members_behind(&singles, 0, &call("MPI_Barrier", 100, 1, None)).is_empty());
        // A call whose ordinal the recorder did not give.
        let known = of(true, 1);
        let singles: BTreeMap<u32, &RankDump> = [(0, &me), (1, &known)].into_iter().collect();
        let mut unordered = call("MPI_Barrier", 100, 1, None);
        unordered.collective = None;
        assert!(members_behind(&singles, 0, &unordered).is_empty());
    }
}
