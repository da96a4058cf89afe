//! What the recorder shows of ranks in `MPI_Intercomm_create`: the members of both groups
//! that have not entered it, which it cannot complete without, and the messages its local
//! leader exchanges with the remote leader.
//!
//! In the MPIs the recorder serves, the two leaders exchange messages on the peer
//! communicator, then each group agrees the new context id by a reduction over its
//! members and the leaders swap the results: every member of either group returns only
//! after every member of both entered the call. Open MPI's leaders use the call's tag on
//! the peer communicator, where a receive or a synchronous send of the program's with
//! that tag may meet them.

use crate::behind::members_behind;
use mqd_model::call_comms::ANY_TAG;
use mqd_model::{CallArguments, RankDump, RankSet};
use std::collections::BTreeMap;

const CREATE: &str = "MPI_Intercomm_create";

/// The calls of `dump`'s threads in `MPI_Intercomm_create`.
fn creating(dump: &RankDump) -> impl Iterator<Item = &CallArguments> {
    dump.threads
        .iter()
        .filter_map(|t| t.call.as_ref())
        .filter(|a| a.called.as_deref().unwrap_or(&a.function) == CREATE)
}

/// The one call of `calls`, where there is exactly one.
fn only<'a>(mut calls: impl Iterator<Item = &'a CallArguments>) -> Option<&'a CallArguments> {
    calls.next().filter(|_| calls.next().is_none())
}

/// The local leader of a call in `MPI_Intercomm_create` (an `MPI_COMM_WORLD` rank), where
/// its local communicator's members and its `local_leader` argument are known.
fn local_leader(args: &CallArguments) -> Option<i32> {
    let root = usize::try_from(args.root?).ok()?;
    args.members.as_ref()?.get(root).copied()
}

/// Whether rank `dump` may, from inside `MPI_Intercomm_create`, exchange with rank `to` a
/// message with `tag` (`None`: any), which a receive or a send of `to`'s may meet: it is
/// the local leader (or not known not to be), its remote leader is `to` (or not known),
/// and the call's tag is `tag` (or either is not known).
pub fn leader_may_meet(dump: &RankDump, to: i32, tag: Option<i64>) -> bool {
    creating(dump).any(|a| {
        let leads = local_leader(a).is_none_or(|l| l == dump.rank);
        let tags = match (a.tag, tag) {
            (Some(ours), Some(theirs)) => theirs == ANY_TAG || ours == theirs,
            _ => true,
        };
        leads && a.remote_leader.is_none_or(|r| r == to) && tags
    })
}

/// The members of the remote group that rank `at`'s `MPI_Intercomm_create` (`args`, its
/// thread's call) cannot complete without and that have not entered it, by the counts:
/// its local leader's record names the remote leader, whose own call (on its group,
/// naming this leader back) says which of its group's collectives this one is. Empty
/// where any of that is not known.
pub fn remote_behind(singles: &BTreeMap<u32, &RankDump>, at: u32, args: &CallArguments) -> RankSet {
    let found = || {
        let leader = local_leader(args)?;
        let same_group = |a: &&CallArguments| {
            a.members == args.members && a.lineage.zip(args.lineage).is_none_or(|(x, y)| x == y)
        };
        let remote = if leader == at as i32 {
            args.remote_leader?
        } else {
            let ours = singles.get(&u32::try_from(leader).ok()?)?;
            only(creating(ours).filter(same_group))?.remote_leader?
        };
        let theirs = singles.get(&u32::try_from(remote).ok()?)?;
        let call = only(creating(theirs).filter(|a| a.remote_leader == Some(leader)))?;
        Some(members_behind(singles, remote as u32, call))
    };
    found().unwrap_or_default()
}

/// Every member of either group that rank `at`'s `MPI_Intercomm_create` cannot complete
/// without and that has not entered it (its own group's by [`members_behind`], the
/// remote group's by [`remote_behind`]).
pub fn pair_behind(singles: &BTreeMap<u32, &RankDump>, at: u32, args: &CallArguments) -> RankSet {
    let mut set = members_behind(singles, at, args);
    set.union_with(&remote_behind(singles, at, args));
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{CommCount, ThreadStack, Traffic};

    /// Ranks 0-3 split into the even and the odd ranks (`half`, handle 5 in each), which
    /// the ranks in `creating` bridge by `MPI_Intercomm_create` (leaders 0 and 1, tag
    /// 12); the others entered no collective on their half.
    fn job(creating: &[i32]) -> Vec<RankDump> {
        (0..4)
            .map(|r| {
                let members = vec![r % 2, r % 2 + 2];
                let inside = creating.contains(&r);
                let mut d = RankDump::unread(r, None, None);
                d.traffic = Some(Traffic {
                    rank: r,
                    collectives_complete: true,
                    comms: vec![CommCount {
                        handle: 5,
                        lineage: 40 + u64::from(r as u32 % 2),
                        members: Some(members.clone()),
                        size: 2,
                        entered: u64::from(inside),
                        last: None,
                        sources: None,
                    }],
                    ..Traffic::default()
                });
                let call = inside.then(|| CallArguments {
                    function: CREATE.into(),
                    called: Some(CREATE.into()),
                    comm: Some(5),
                    members: Some(members),
                    lineage: Some(40 + u64::from(r as u32 % 2)),
                    root: Some(0),
                    tag: Some(12),
                    collective: Some(1),
                    remote_leader: (r < 2).then_some(1 - r),
                    ..CallArguments::default()
                });
                d.threads = vec![ThreadStack::named(0, &["main"], call)];
                d
            })
            .collect()
    }

    fn singles(dumps: &[RankDump]) -> BTreeMap<u32, &RankDump> {
        dumps.iter().map(|d| (d.rank as u32, d)).collect()
    }

    fn args(d: &RankDump) -> &CallArguments {
        d.threads[0].call.as_ref().unwrap()
    }

    #[test]
    fn every_member_of_both_groups_waits_for_the_one_not_in_it() {
        let dumps = job(&[0, 1, 2]);
        let s = singles(&dumps);
        // Rank 1 by its own group; ranks 0 and 2 through their leader's record of rank
        // 1, whose group rank 3 has not entered.
        for at in 0..3 {
            assert_eq!(
                pair_behind(&s, at, args(&dumps[at as usize])),
                RankSet::single(3),
                "{at}"
            );
        }
        assert!(remote_behind(&s, 1, args(&dumps[1])).is_empty());
        // Everyone in it: nobody behind.
        let all = job(&[0, 1, 2, 3]);
        let s = singles(&all);
        assert!((0..4).all(|at| pair_behind(&s, at, args(&all[at as usize])).is_empty()));
    }

    #[test]
    fn the_remote_group_is_known_only_through_both_leaders_records() {
        // The remote leader's call names another leader back, or the local leader's
        // record has no remote leader: the remote group is not known.
        let mut dumps = job(&[0, 1, 2]);
        dumps[1].threads[0].call.as_mut().unwrap().remote_leader = Some(2);
        let s = singles(&dumps);
        assert!(pair_behind(&s, 0, args(&dumps[0])).is_empty());
        assert!(pair_behind(&s, 2, args(&dumps[2])).is_empty());
        let mut dumps = job(&[0, 1, 2]);
        dumps[0].threads[0].call.as_mut().unwrap().remote_leader = None;
        let s = singles(&dumps);
        assert!(pair_behind(&s, 2, args(&dumps[2])).is_empty());
        // The remote leader's counts incomplete: nothing proven of its group.
        let mut dumps = job(&[0, 1, 2]);
        dumps[3].traffic.as_mut().unwrap().collectives_complete = false;
        let s = singles(&dumps);
        assert!(pair_behind(&s, 0, args(&dumps[0])).is_empty());
    }

    #[test]
    fn a_leader_may_meet_its_remote_leaders_messages_of_its_tag() {
        let dumps = job(&[0, 1, 2]);
        // Rank 0 leads, its remote leader rank 1: a receive of rank 1's of tag 12 or
        // any tag may take its message; of another tag, or at another rank, not.
        assert!(leader_may_meet(&dumps[0], 1, Some(12)));
        assert!(leader_may_meet(&dumps[0], 1, None));
        assert!(leader_may_meet(&dumps[0], 1, Some(ANY_TAG)));
        assert!(!leader_may_meet(&dumps[0], 1, Some(1)));
        assert!(!leader_may_meet(&dumps[0], 3, Some(12)));
        // Rank 2 does not lead; rank 3 is in no such call.
        assert!(!leader_may_meet(&dumps[2], 1, Some(12)));
        assert!(!leader_may_meet(&dumps[3], 1, Some(12)));
        // A leader whose remote leader is not known may meet anyone.
        let mut unknown = dumps[0].clone();
        unknown.threads[0].call.as_mut().unwrap().remote_leader = None;
        assert!(leader_may_meet(&unknown, 3, Some(12)));
    }
}
