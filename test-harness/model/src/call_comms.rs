//! What a call's arguments name: MPICH's special values, the communicator a call runs
//! on (resolved against its rank's communicators), whether it is `MPI_COMM_WORLD`, and
//! whether a collective has a root.

use crate::peers::{peer_group, world_of};
use crate::{CallArguments, CommKey, Communicator, RankDump, RankSet};

/// MPICH's `MPI_ANY_SOURCE`, as calls' arguments hold it.
pub const ANY_SOURCE: i64 = -2;
/// MPICH's `MPI_PROC_NULL`, as calls' arguments hold it.
pub const PROC_NULL: i64 = -1;
/// MPICH's `MPI_ANY_TAG`, as calls' arguments hold it.
pub const ANY_TAG: i64 = -1;
/// MPICH's handle of `MPI_COMM_WORLD`.
pub const COMM_WORLD_HANDLE: i64 = 0x4400_0000;

/// Where a thread's call runs, resolved against its rank's communicators.
pub struct Comm<'a> {
    /// Its identity.
    pub key: CommKey,
    /// The rank's local rank in it.
    pub local_rank: i64,
    /// Its members, COMM_WORLD ranks in local rank order, when known.
    pub members: Option<crate::CommGroup>,
    /// The communicator of the dump, when the call's is one of them.
    pub dumped: Option<&'a Communicator>,
    /// It is an intercommunicator.
    pub inter: bool,
    /// An intercommunicator's remote group (COMM_WORLD ranks in its rank order), when
    /// known: whom its point-to-point calls name.
    pub remote: Option<crate::CommGroup>,
}

impl Comm<'_> {
    /// The COMM_WORLD rank of its local rank `local`.
    pub fn world(&self, local: i64) -> Option<i32> {
        if self.inter {
            return usize::try_from(local)
                .ok()
                .and_then(|l| self.remote.as_ref()?.get(l));
        }
        match &self.members {
            Some(m) => usize::try_from(local).ok().and_then(|l| m.get(l)),
            None => self.dumped.and_then(|c| world_of(c, local, -1)),
        }
    }

    /// The COMM_WORLD ranks a receive from any source on it may come from.
    pub fn any_source(&self) -> Option<RankSet> {
        if self.inter {
            return self.remote.as_ref().map(|m| RankSet::from_i32s(m.iter()));
        }
        match self.dumped {
            Some(c) => peer_group(c),
            None => self.members.as_ref().map(|m| RankSet::from_i32s(m.iter())),
        }
    }
}

/// The communicator a call's arguments name in `r`: by its object's address (the
/// library's unique id), its context id, or MPICH's `MPI_COMM_WORLD` handle.
pub fn comm_of<'a>(
    r: &'a RankDump,
    args: &CallArguments,
    job_size: Option<u32>,
) -> Option<Comm<'a>> {
    let comms = r.communicators();
    let found = args
        .comm_address
        .and_then(|a| comms.iter().find(|c| c.unique_id == a))
        .or_else(|| {
            let context = args.context_id?;
            let mut same = comms
                .iter()
                .filter(|c| c.context.is_some_and(|x| x.context_id == context));
            let first = same.next()?;
            same.next().is_none().then_some(first)
        })
        .or_else(|| {
            is_world(args)
                .then(|| comms.iter().find(|c| c.name == "MPI_COMM_WORLD"))
                .flatten()
        });
    if let Some(c) = found {
        let inter = c.context.is_some_and(|x| x.context_id != x.recv_context_id)
            || c.pending_receives
                .ops()
                .iter()
                .chain(c.pending_sends.ops())
                .any(|op| op.remote_group);
        // An intercommunicator's remote group, from the hang recorder's note of this
        // call's communicator, where its local group is the one the queues show.
        let remote = args
            .remote
            .as_deref()
            .filter(|_| inter)
            .filter(|_| {
                let local = args.members.as_deref();
                c.group.as_ref().zip(local).is_some_and(|(g, m)| {
                    g.len() == m.len() && g.iter().zip(m).all(|(a, &b)| a == b)
                })
            })
            .map(Into::into);
        return Some(Comm {
            key: CommKey::of(c),
            local_rank: c.local_rank,
            members: c.group.clone(),
            dumped: Some(c),
            inter,
            remote,
        });
    }
    // No queues to match it against: a program's own communicator by the members and
    // context id its object says (where this rank is among them), COMM_WORLD by its
    // handle.
    // Or by the lineage the hang recorder gave it, alike in every member.
    let key = match (&args.members, args.context_id, args.lineage) {
        (Some(members), Some(context), _) => Some(CommKey::of_members(context, members)),
        (Some(members), None, Some(lineage)) if args.remote.is_some() => {
            Some(CommKey::of_inter_lineage(lineage, members.len()))
        }
        (Some(members), None, Some(lineage)) if !is_world(args) => {
            Some(CommKey::of_lineage(lineage, members))
        }
        _ => None,
    };
    if let (Some(key), Some(members)) = (key, &args.members) {
        let local = members.iter().position(|&m| m == r.rank)?;
        return Some(Comm {
            key,
            local_rank: local as i64,
            members: Some(members.as_slice().into()),
            dumped: None,
            inter: args.remote.is_some(),
            remote: args.remote.as_deref().map(Into::into),
        });
    }
    let size = i32::try_from(job_size?).ok()?;
    is_world(args).then(|| Comm {
        key: CommKey::named("MPI_COMM_WORLD", i64::from(size)),
        local_rank: i64::from(r.rank),
        members: Some((0..size).collect()),
        dumped: None,
        inter: false,
        remote: None,
    })
}

/// The communicator a call of `r` names, and whether its members are the job's `n`
/// ranks in order (its local ranks are COMM_WORLD ranks).
pub fn call_comm(r: &RankDump, args: &CallArguments, n: u32) -> Option<(CommKey, bool)> {
    let c = comm_of(r, args, Some(n))?;
    let in_order = !c.inter && c.members.as_ref().is_some_and(|m| m.is_in_order(n));
    Some((c.key, in_order))
}

/// The communicator a collective call of `r` names and its members (COMM_WORLD ranks
/// in local rank order), when both are known (`MPI_COMM_WORLD`'s by its handle only
/// where the job's size `world` is).
pub fn call_members(
    r: &RankDump,
    args: &CallArguments,
    world: Option<u32>,
) -> Option<(CommKey, crate::CommGroup)> {
    let c = comm_of(r, args, world)?;
    // An intercommunicator's collectives involve both groups: its local one is not
    // who its collective waits for.
    (!c.inter).then_some(())?;
    Some((c.key, c.members?))
}

/// Whether a collective has a root (its instances differ by it).
pub fn rooted(call: &str) -> bool {
    let name = crate::calls::canonical(call).map_or(call, |c| c.name);
    matches!(
        name,
        "MPI_Bcast" | "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" | "MPI_Scatter" | "MPI_Scatterv"
    )
}

/// Whether a call's communicator is `MPI_COMM_WORLD`: as its ABI says, or MPICH's
/// handle where nothing says which ABI.
pub fn is_world(args: &CallArguments) -> bool {
    match args.predefined.as_deref() {
        Some(name) => name == "MPI_COMM_WORLD",
        None => args.comm == Some(COMM_WORLD_HANDLE),
    }
}
