//! What the recorder's counts and request table prove of a synchronous send: that no
//! receive its destination started can take it, so it completes only when the
//! destination starts one, which a destination blocked for good never does.

use crate::quiet::tally;
use mqd_model::call_comms::{ANY_SOURCE, ANY_TAG};
use mqd_model::{CallArguments, CallClass, CommCount, RankDump, Traffic};
use std::collections::BTreeMap;

/// A rank's counts where they are of the rank they are read with.
fn of_rank(dump: &RankDump) -> Option<&Traffic> {
    let t = dump.traffic.as_ref()?;
    (t.rank >= 0 && t.rank == dump.rank).then_some(t)
}

/// Whether a receive call of `to` (its arguments `args`) may take a message from
/// `source` with `tag` on `comm`: unless its communicator, source or tag says it cannot.
fn call_may_take(
    to: &Traffic,
    args: &CallArguments,
    source: i32,
    tag: i32,
    comm: &CommCount,
) -> bool {
    let sendrecv = args.recv_peer.is_some() || args.recv_tag.is_some();
    let (peer, t) = if sendrecv {
        (args.recv_peer, args.recv_tag)
    } else {
        (args.peer, args.tag)
    };
    let Some(own) = args
        .comm
        .and_then(|h| to.comms.iter().find(|c| c.handle == h))
    else {
        return true;
    };
    if !own.same(comm) {
        return false;
    }
    let from = peer
        .filter(|&p| p != ANY_SOURCE)
        .and_then(|p| own.world_rank(usize::try_from(p).ok()?));
    from.is_none_or(|f| f == source) && t.is_none_or(|t| t == ANY_TAG || t == i64::from(tag))
}

/// Whether rank `at`'s synchronous send of `args` (its thread's call) to `MPI_COMM_WORLD`
/// rank `dest` is proven to wait for `dest` to start a receive: its message is not yet
/// received (the counts of its communicator, which both name alike), no receive request
/// `dest` started may take it, and no thread of `dest` is in a call that may.
/// `singles`: the dumps whose counts may be read, by rank.
pub fn send_unmatched(
    singles: &BTreeMap<u32, &RankDump>,
    at: u32,
    dest: u32,
    args: &CallArguments,
) -> bool {
    let (Some(from), Some(to)) = (singles.get(&at), singles.get(&dest)) else {
        return false;
    };
    let (Some(sender), Some(receiver)) = (of_rank(from), of_rank(to)) else {
        return false;
    };
    if !sender.sends_complete || !receiver.requests_complete {
        return false;
    }
    let (Some(handle), Some(tag)) = (args.comm, args.tag.and_then(|t| i32::try_from(t).ok()))
    else {
        return false;
    };
    let Some(comm) = sender.comms.iter().find(|c| c.handle == handle) else {
        return false;
    };
    if !receiver.comms.iter().any(|c| c.same(comm)) {
        return false;
    }
    let (source, lineage) = (from.rank, comm.lineage);
    // Messages on one communicator arrive in order: fewer received than sent, the last
    // one (this send's) is not received.
    let (sent, _) = tally(sender, to.rank, tag, Some(lineage));
    let (_, received) = tally(receiver, source, tag, Some(lineage));
    if received >= sent {
        return false;
    }
    if receiver
        .posted
        .iter()
        .any(|p| p.may_take(source, tag, lineage))
        || crate::pairing::leader_may_meet(to, source, Some(i64::from(tag)))
    {
        return false;
    }
    // A thread of the destination in a receive or probe that may take it.
    !to.threads.iter().filter_map(|t| t.call.as_ref()).any(|a| {
        let name = a.called.as_deref().unwrap_or(&a.function);
        let receiving = matches!(
            CallClass::of(name),
            CallClass::BlockingReceive | CallClass::SendReceive
        ) || name.to_ascii_lowercase().contains("probe");
        receiving && call_may_take(receiver, a, source, tag, comm)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{PostedReceive, ThreadStack, TrafficCount};

    fn world(handle: i64) -> CommCount {
        CommCount {
            handle,
            lineage: 1,
            members: None,
            size: 2,
            entered: 0,
            last: None,
            sources: None,
        }
    }

    fn call(function: &str, handle: i64, peer: i64, tag: i64) -> CallArguments {
        CallArguments {
            function: function.into(),
            called: Some(function.into()),
            comm: Some(handle),
            peer: Some(peer),
            tag: Some(tag),
            ..CallArguments::default()
        }
    }

    /// Rank `rank` of two, in `call` on its world (handle 10 + rank), having sent its
    /// peer `sent` messages of tag 1 and received `received` from it.
    fn rank(rank: i32, args: CallArguments, sent: u64, received: u64) -> RankDump {
        let mut d = RankDump::unread(rank, None, None);
        d.threads = vec![ThreadStack::named(1, &["main"], Some(args))];
        d.traffic = Some(Traffic {
            rank,
            sends_complete: true,
            requests_complete: true,
            counts: vec![TrafficCount {
                peer: 1 - rank,
                tag: 1,
                lineage: 1,
                sent,
                received,
            }],
            comms: vec![world(10 + i64::from(rank))],
            ..Traffic::default()
        });
        d
    }

    fn proven(a: &RankDump, b: &RankDump) -> bool {
        let singles: BTreeMap<u32, &RankDump> = [(0, a), (1, b)].into_iter().collect();
        let args = a.threads[0].call.as_ref().unwrap();
        send_unmatched(&singles, 0, 1, args)
    }

    #[test]
    fn a_synchronous_send_no_receive_can_take_waits_for_its_destination() {
        // Head to head: each in MPI_Ssend to the other, nothing received.
        let a = rank(0, call("MPI_Ssend", 10, 1, 1), 1, 0);
        let b = rank(1, call("MPI_Ssend", 11, 0, 1), 1, 0);
        assert!(proven(&a, &b));
        // The destination posted a receive from any source with tag 1: it takes it.
        let mut posted = b.clone();
        posted.traffic.as_mut().unwrap().posted = vec![PostedReceive {
            lineage: 1,
            source: None,
            tag: Some(1),
        }];
        assert!(!proven(&a, &posted));
        // One of another tag cannot.
        posted.traffic.as_mut().unwrap().posted[0].tag = Some(2);
        assert!(proven(&a, &posted));
        // The destination is in a receive from it: it takes it.
        let receiving = rank(1, call("MPI_Recv", 11, 0, ANY_TAG), 0, 0);
        assert!(!proven(&a, &receiving));
        // Already received (the send is about to return).
        let received = rank(1, call("MPI_Ssend", 11, 0, 1), 1, 1);
        assert!(!proven(&a, &received));
        // Requests not all kept: nothing proven.
        let mut unkept = b.clone();
        unkept.traffic.as_mut().unwrap().requests_complete = false;
        assert!(!proven(&a, &unkept));
    }
}
