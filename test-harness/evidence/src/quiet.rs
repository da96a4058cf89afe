//! What the recorder's counts prove of a receive: that nothing its source sent is on
//! its way to it, so only a message the source has yet to send can match it.

use mqd_model::{RankClass, RankDump, Traffic};
use std::collections::BTreeMap;

/// Messages `t` sent to and received from `peer` with `tag`, on the communicators of
/// `lineage` (`None`: on any).
pub(crate) fn tally(t: &Traffic, peer: i32, tag: i32, lineage: Option<u64>) -> (u64, u64) {
    t.counts
        .iter()
        .filter(|c| c.peer == peer && c.tag == tag && lineage.is_none_or(|l| c.lineage == l))
        .fold((0, 0), |(s, r), c| (s + c.sent, r + c.received))
}

/// The lineage of the receiver's communicator `handle` where the sender has that
/// communicator too: then the sender counted what it sent there apart.
fn shared_lineage(sender: &Traffic, receiver: &Traffic, handle: Option<i64>) -> Option<u64> {
    let comm = receiver.comms.iter().find(|c| Some(c.handle) == handle)?;
    sender
        .comms
        .iter()
        .any(|c| c.same(comm))
        .then_some(comm.lineage)
}

/// Whether the counts of `from` and `to` (taken at one moment) prove that no message
/// from `from` to `to` that a receive with `tag` (`None`: any tag) on `to`'s
/// communicator `comm` could take is on its way: every such message `from` sent, `to`
/// has received (on that communicator where both name it alike, else on any). Unknown
/// counts prove nothing.
pub fn nothing_on_its_way(
    from: &RankDump,
    to: &RankDump,
    tag: Option<i64>,
    comm: Option<i64>,
) -> bool {
    let (Some(sender), Some(receiver)) = (&from.traffic, &to.traffic) else {
        return false;
    };
    if !sender.sends_complete
        || from.rank < 0
        || to.rank < 0
        || sender.rank != from.rank
        || receiver.rank != to.rank
    {
        return false;
    }
    let lineage = shared_lineage(sender, receiver, comm);
    sender
        .counts
        .iter()
        .filter(|c| c.peer == to.rank && tag.is_none_or(|t| i64::from(c.tag) == t))
        .all(|c| {
            let (sent, _) = tally(sender, to.rank, c.tag, lineage);
            let (_, received) = tally(receiver, from.rank, c.tag, lineage);
            sent == received
        })
}

/// The dumps of classes of one rank, by rank: whose counts a proof may read.
pub fn singles(classes: &[RankClass]) -> BTreeMap<u32, &RankDump> {
    classes
        .iter()
        .filter(|c| c.last.is_none() && c.ranks.len() == 1)
        .filter_map(|c| Some((c.ranks.first()?, &c.first)))
        .collect()
}

/// Whether the counts prove that the receive rank `at` waits in on its communicator
/// `comm`, from `source` (`None`: any rank of the job's `n`) with `tag` (`None`: any),
/// has nothing on its way to it: it can be matched only by a message its source has yet
/// to send.
pub fn receive_quiet(
    singles: &BTreeMap<u32, &RankDump>,
    at: u32,
    (source, tag, comm): (Option<u32>, Option<i64>, Option<i64>),
    n: u32,
) -> bool {
    let Some(to) = singles.get(&at) else {
        return false;
    };
    // Nor will its source send one from inside the call it is in.
    let quiet = |s: u32| {
        singles.get(&s).is_some_and(|from| {
            nothing_on_its_way(from, to, tag, comm)
                && !crate::pairing::leader_may_meet(from, to.rank, tag)
        })
    };
    match source {
        Some(s) => quiet(s),
        None => (0..n).all(quiet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::TrafficCount;

    fn rank(rank: i32, complete: bool, counts: &[(i32, i32, u64, u64)]) -> RankDump {
        let mut d = RankDump::unread(rank, None, None);
        d.traffic = Some(Traffic {
            rank,
            sends_complete: complete,
            counts: counts
                .iter()
                .map(|&(peer, tag, sent, received)| TrafficCount {
                    peer,
                    tag,
                    lineage: 1,
                    sent,
                    received,
                })
                .collect(),
            ..Traffic::default()
        });
        d
    }

    #[test]
    fn a_leader_in_mpi_intercomm_create_may_still_send_its_remote_leader_one() {
        // Rank 0 sent rank 1 nothing, but leads an MPI_Intercomm_create whose remote
        // leader is rank 1, with tag 12 (Open MPI sends it on the peer communicator).
        let mut leader = rank(0, true, &[]);
        let create = mqd_model::CallArguments {
            function: "MPI_Intercomm_create".into(),
            members: Some(vec![0, 2]),
            root: Some(0),
            tag: Some(12),
            remote_leader: Some(1),
            ..Default::default()
        };
        leader.threads = vec![mqd_model::ThreadStack::named(0, &["main"], Some(create))];
        let remote = rank(1, true, &[]);
        let singles: BTreeMap<u32, &RankDump> = [(0, &leader), (1, &remote)].into();
        assert!(!receive_quiet(&singles, 1, (Some(0), Some(12), None), 4));
        assert!(!receive_quiet(&singles, 1, (Some(0), None, None), 4));
        assert!(receive_quiet(&singles, 1, (Some(0), Some(3), None), 4));
    }

    #[test]
    fn a_message_is_on_its_way_until_its_receiver_counts_it() {
        // Rank 0 sent rank 1 three messages of tag 7 and one of tag 9.
        let from = rank(0, true, &[(1, 7, 3, 0), (1, 9, 1, 0)]);
        let all = rank(1, true, &[(0, 7, 0, 3), (0, 9, 0, 1)]);
        let short = rank(1, true, &[(0, 7, 0, 3)]);
        assert!(nothing_on_its_way(&from, &all, Some(7), None));
        assert!(nothing_on_its_way(&from, &all, None, None));
        // The tag-9 message is on its way: a receive of tag 7 cannot take it, one of
        // any tag can.
        assert!(nothing_on_its_way(&from, &short, Some(7), None));
        assert!(!nothing_on_its_way(&from, &short, None, None));
        assert!(!nothing_on_its_way(&from, &short, Some(9), None));
        // Nothing sent at all: nothing on its way.
        let silent = rank(0, true, &[]);
        assert!(nothing_on_its_way(&silent, &short, None, None));
    }

    #[test]
    fn counts_that_may_miss_a_send_or_are_not_read_prove_nothing() {
        let incomplete = rank(0, false, &[]);
        let to = rank(1, true, &[]);
        assert!(!nothing_on_its_way(&incomplete, &to, None, None));
        let unread = RankDump::unread(0, None, None);
        assert!(!nothing_on_its_way(&unread, &to, None, None));
        // The records of another rank than the dump's.
        let mut other = rank(0, true, &[]);
        other.rank = 2;
        assert!(!nothing_on_its_way(&other, &to, None, None));
        assert!(!nothing_on_its_way(
            &rank(0, true, &[]),
            &RankDump::unread(1, None, None),
            None,
            None
        ));
    }

    #[test]
    fn counts_kept_by_communicator_prove_a_receive_on_another() {
        use mqd_model::CommCount;
        // Rank 0 sent rank 1 one message of tag 1 on a duplicate of the world (lineage
        // 10), which rank 1 did not receive; rank 1 receives with tag 1 on another
        // duplicate (lineage 20, its handle 7).
        let dup = |handle, lineage| CommCount {
            handle,
            lineage,
            members: None,
            size: 2,
            entered: 1,
            last: None,
            sources: None,
        };
        let count = |peer, lineage, sent, received| TrafficCount {
            peer,
            tag: 1,
            lineage,
            sent,
            received,
        };
        let mut from = rank(0, true, &[]);
        let t = from.traffic.as_mut().unwrap();
        t.counts = vec![count(1, 10, 1, 0)];
        t.comms = vec![dup(3, 10), dup(4, 20)];
        let mut to = rank(1, true, &[]);
        let t = to.traffic.as_mut().unwrap();
        t.counts = vec![count(0, 10, 0, 0)];
        t.comms = vec![dup(6, 10), dup(7, 20)];
        assert!(nothing_on_its_way(&from, &to, Some(1), Some(7)));
        // On the first duplicate the message is on its way.
        assert!(!nothing_on_its_way(&from, &to, Some(1), Some(6)));
        // A communicator the sender does not name alike: counted on any.
        from.traffic.as_mut().unwrap().comms.pop();
        assert!(!nothing_on_its_way(&from, &to, Some(1), Some(7)));
    }
}
