//! The bugs blocked calls show by their arguments, where no queue does (an MPI without
//! message queues) or beside what the queues show: a receive from a rank that is blocked
//! sending to it with another tag or on another communicator, a receive from a rank that
//! sends to it nothing while another rank does (a source mismatch), a receive from a rank
//! blocked in another call (nothing of it is under way to match), and a rooted collective
//! whose members name different roots. Each finding names both sides with the lines of
//! the program that made the calls.

use crate::locations::{call_line, ranked};
use mqd_model::diagnosis::{CallSide, PeerName, Subject};
use mqd_model::{
    CallClass, Certainty, CommKey, Finding, FindingKind, JobDump, Location, RankDump, RankSet,
    Relation, ThreadStack,
};
use mqd_scale::shared::blocked_place;
use mqd_scale::shared::{ANY_SOURCE, ANY_TAG, PROC_NULL, comm_of, rooted};
use std::collections::BTreeMap;

/// One point-to-point half of a blocked call: a send, or a receive.
#[derive(Debug, Clone)]
struct Half {
    rank: i32,
    call: String,
    send: bool,
    comm: CommKey,
    /// Its rank in `comm` and `comm`'s size.
    local: i64,
    size: i64,
    /// The peer's COMM_WORLD rank (`None`: any source, or not known).
    peer: Option<i32>,
    /// Its tag (`None`: any).
    tag: Option<i64>,
    at: Option<String>,
}

/// The canonical name of a call (`MPI_Recv` for `PMPI_Recv`).
fn canonical(call: &str) -> String {
    mqd_model::calls::canonical(call)
        .map_or(call, |c| c.name)
        .to_owned()
}

/// The point-to-point halves of a thread blocked in `call` with `args`.
fn halves(r: &RankDump, t: &ThreadStack, job_size: Option<u32>) -> Vec<Half> {
    let Location::InMpi { call, class } = t.location_in(r.executable.as_deref()) else {
        return Vec::new();
    };
    let (Some(args), true) = (
        t.call.as_ref(),
        matches!(
            class,
            CallClass::BlockingSend | CallClass::BlockingReceive | CallClass::SendReceive
        ),
    ) else {
        return Vec::new();
    };
    let Some(comm) = comm_of(r, args, job_size) else {
        return Vec::new();
    };
    let name = canonical(&call);
    let at = call_line(t);
    // A peer or tag that is not known: nothing can be said of the half.
    let half = |send: bool, peer: Option<i64>, tag: Option<i64>| -> Option<Half> {
        let (peer, tag) = (peer?, tag?);
        if peer == PROC_NULL {
            return None;
        }
        Some(Half {
            rank: r.rank,
            call: name.clone(),
            send,
            comm: comm.key.clone(),
            local: comm.local_rank,
            size: comm.key.size,
            peer: if peer == ANY_SOURCE {
                None
            } else {
                Some(comm.world(peer)?)
            },
            // A receive of any tag takes every tag.
            tag: (send || tag != ANY_TAG).then_some(tag),
            at: at.clone(),
        })
    };
    match class {
        CallClass::BlockingSend => half(true, args.peer, args.tag).into_iter().collect(),
        CallClass::BlockingReceive if !name.contains("Mrecv") => {
            half(false, args.peer, args.tag).into_iter().collect()
        }
        CallClass::SendReceive => half(true, args.peer, args.tag)
            .into_iter()
            .chain(half(false, args.recv_peer, args.recv_tag))
            .collect(),
        _ => Vec::new(),
    }
}

/// The ranks a job shows blocked in MPI calls that send no point-to-point message (a
/// collective, `MPI_Finalize`, one-sided synchronisation), with the call and line of the
/// first. A rank blocked in a send or a receive is a hop of a cycle or knot, which those
/// findings say; one in a wait may be waiting for the very message a receive expects.
fn blocked_places(job: &JobDump) -> BTreeMap<i32, (String, Option<String>)> {
    ranked(job)
        .filter_map(|r| Some((r.rank, blocked_place(r)?)))
        .collect()
}

/// A finding being grouped: its kind and both sides but their ranks.
type Key = (FindingKind, CallSide, CallSide, PeerName);

/// A group of pairs: its key, the receivers, the ranks they wait for, the pairs.
type Group = (Key, RankSet, RankSet, Vec<(i32, i32)>);

fn side(h: &Half) -> CallSide {
    CallSide {
        ranks: RankSet::new(),
        call: h.call.clone(),
        tag: h.tag,
        comm: Some(h.comm.clone()),
        at: h.at.clone(),
    }
}

/// The peer of a receive, relative to its rank where a pattern fits.
fn source_name(r: &Half) -> PeerName {
    match r.peer {
        None => PeerName::AnySource,
        Some(p) => match Relation::of(r.local, i64::from(p), r.size) {
            Relation::Absolute => PeerName::World(p),
            rel if r.comm.name.as_ref() == "MPI_COMM_WORLD" => PeerName::Relative(rel),
            _ => PeerName::World(p),
        },
    }
}

/// The findings of the blocked calls of `job` (the job's size `job_size`); `queued`:
/// receiving ranks the queues' own mismatch findings already name.
pub(crate) fn call_findings(
    job: &JobDump,
    job_size: Option<u32>,
    queued: &RankSet,
) -> Vec<Finding> {
    let mut all: Vec<Half> = Vec::new();
    for r in ranked(job) {
        for t in &r.threads {
            all.extend(halves(r, t, job_size));
        }
    }
    let places = blocked_places(job);
    let sends: Vec<&Half> = all.iter().filter(|h| h.send).collect();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut add = |kind: FindingKind, recv: &Half, other: CallSide, other_rank: i32| {
        let key: Key = (kind, side(recv), other, source_name(recv));
        let id = format!("{key:?}");
        let entry = groups
            .entry(id)
            .or_insert_with(|| (key, RankSet::new(), RankSet::new(), Vec::new()));
        entry.1.insert(recv.rank as u32);
        entry.2.insert(other_rank as u32);
        entry.3.push((recv.rank, other_rank));
    };
    for recv in all.iter().filter(|h| !h.send) {
        if queued.contains_i32(recv.rank) {
            continue;
        }
        let takes = |s: &Half| recv.tag.is_none_or(|t| Some(t) == s.tag);
        let to_me: Vec<&&Half> = sends.iter().filter(|s| s.peer == Some(recv.rank)).collect();
        let Some(source) = recv.peer else {
            continue;
        };
        let from_source: Vec<&&Half> = to_me.iter().copied().filter(|s| s.rank == source).collect();
        if from_source.iter().any(|s| s.comm == recv.comm && takes(s)) {
            // A send that matches: no mismatch.
            continue;
        }
        if let Some(s) = from_source.iter().find(|s| s.comm == recv.comm) {
            add(FindingKind::TagMismatch, recv, side(s), s.rank);
            continue;
        }
        if let Some(s) = from_source.iter().find(|s| takes(s)) {
            add(FindingKind::CommunicatorMismatch, recv, side(s), s.rank);
            continue;
        }
        if !from_source.is_empty() {
            continue;
        }
        if let Some(s) = to_me
            .iter()
            .find(|s| s.comm == recv.comm && takes(s) && s.rank != source)
        {
            add(FindingKind::SourceMismatch, recv, side(s), s.rank);
            continue;
        }
        // The source is blocked elsewhere, sending nothing to this rank.
        let sends_to_me = all.iter().any(|h| h.rank == source && h.send);
        if let (Some((call, at)), false) = (places.get(&source), sends_to_me) {
            let other = CallSide {
                ranks: RankSet::new(),
                call: call.clone(),
                tag: None,
                comm: None,
                at: at.clone(),
            };
            add(FindingKind::UnmatchedReceive, recv, other, source);
        }
    }
    let mut out: Vec<Finding> = groups
        .into_values()
        .map(
            |((kind, mut receive, mut other, source), receivers, others, edges)| {
                receive.ranks = receivers.clone();
                other.ranks = others.clone();
                Finding {
                    kind,
                    certainty: Certainty::Definite,
                    ranks: receivers.union(&others),
                    subject: Subject::CallMismatch {
                        receive,
                        other,
                        source,
                    },
                    communicators: Vec::new(),
                    evidence: Vec::new(),
                    cycle: None,
                    edges,
                }
            },
        )
        .collect();
    out.extend(root_mismatches(job, job_size));
    out
}

/// Ranks in one rooted collective on one communicator that name different roots.
fn root_mismatches(job: &JobDump, job_size: Option<u32>) -> Vec<Finding> {
    type Roots = BTreeMap<i64, (RankSet, Option<String>)>;
    let mut by: BTreeMap<String, (String, Option<CommKey>, Roots)> = BTreeMap::new();
    for r in ranked(job) {
        for t in &r.threads {
            let Location::InMpi {
                call,
                class: CallClass::Collective,
            } = t.location_in(r.executable.as_deref())
            else {
                continue;
            };
            let Some(args) = t.call.as_ref() else {
                continue;
            };
            let (Some(root), true) = (args.root, rooted(&call)) else {
                continue;
            };
            let Some(comm) = comm_of(r, args, job_size).map(|c| c.key) else {
                continue;
            };
            let name = canonical(&call);
            let entry = by
                .entry(format!("{name} {comm:?}"))
                .or_insert_with(|| (name, Some(comm), BTreeMap::new()));
            let root_entry = entry
                .2
                .entry(root)
                .or_insert_with(|| (RankSet::new(), call_line(t)));
            root_entry.0.insert(r.rank as u32);
        }
    }
    by.into_values()
        .filter(|(_, _, roots)| roots.len() > 1)
        .map(|(call, comm, roots)| {
            let mut ranks = RankSet::new();
            for (set, _) in roots.values() {
                ranks.union_with(set);
            }
            Finding::unproven_by_operations(
                FindingKind::RootMismatch,
                Certainty::Definite,
                ranks,
                Subject::RootMismatch {
                    call,
                    comm,
                    roots: roots
                        .into_iter()
                        .map(|(root, (set, at))| (root, set, at))
                        .collect(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::diagnose;
    use mqd_model::{CallArguments, Frame};
    use mqd_scale::shared::COMM_WORLD_HANDLE;

    /// A thread blocked in `call` on `comm` (a handle) with `peer`, `tag` and `root`, made
    /// at `line` of prog.c.
    fn blocked(
        call: &str,
        comm: i64,
        peer: Option<i64>,
        tag: Option<i64>,
        line: u32,
    ) -> ThreadStack {
        let mut t = ThreadStack::named(
            1,
            &["poll", call, "main"],
            Some(CallArguments {
                function: call.into(),
                comm: Some(comm),
                peer,
                tag,
                ..CallArguments::default()
            }),
        );
        t.frames[2] = Frame {
            function: Some("main".into()),
            file: Some("/src/prog.c".into()),
            line: Some(line),
            ..Frame::default()
        };
        t
    }

    fn job(threads: Vec<ThreadStack>) -> JobDump {
        crate::test_jobs::of_threads(threads)
    }

    fn only(j: &JobDump, kind: FindingKind) -> Finding {
        let d = diagnose(j);
        let mut of: Vec<Finding> = d.of_kind(kind).cloned().collect();
        assert_eq!(of.len(), 1, "{kind:?}: {:?}", d.findings);
        of.remove(0)
    }

    #[test]
    fn a_receive_and_the_send_its_peer_is_blocked_in_mismatch_by_tag_or_communicator() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(1), 23),
            blocked("MPI_Recv", w, Some(0), Some(2), 27),
        ]);
        let f = only(&j, FindingKind::TagMismatch);
        let Subject::CallMismatch { receive, other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_eq!((receive.tag, other.tag), (Some(2), Some(1)));
        assert_eq!(receive.at.as_deref(), Some("prog.c:27"));
        assert_eq!(other.at.as_deref(), Some("prog.c:23"));
        assert_eq!(f.ranks.to_string(), "0,1");
        // Any tag takes it: no mismatch.
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(1), 23),
            blocked("MPI_Recv", w, Some(0), Some(ANY_TAG), 27),
        ]);
        assert!(
            diagnose(&j)
                .of_kind(FindingKind::TagMismatch)
                .next()
                .is_none()
        );
        // The same tag on a duplicate of COMM_WORLD (known by its members and context).
        let mut send = blocked("MPI_Ssend", 0x8400_0001, Some(1), Some(1), 23);
        if let Some(c) = &mut send.call {
            c.context_id = Some(16);
            c.members = Some(vec![0, 1]);
        }
        let j = job(vec![send, blocked("MPI_Recv", w, Some(0), Some(1), 27)]);
        let f = only(&j, FindingKind::CommunicatorMismatch);
        let Subject::CallMismatch { receive, other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_ne!(receive.comm, other.comm);
    }

    #[test]
    fn a_receive_from_one_rank_while_another_sends_is_a_source_mismatch() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Ssend", w, Some(1), Some(5), 10),
            blocked("MPI_Recv", w, Some(2), Some(5), 12),
            blocked("MPI_Barrier", w, None, None, 14),
        ]);
        let f = only(&j, FindingKind::SourceMismatch);
        assert_eq!(f.edges, [(1, 0)]);
    }

    #[test]
    fn a_receive_from_a_rank_in_a_collective_is_unmatched() {
        let w = COMM_WORLD_HANDLE;
        let j = job(vec![
            blocked("MPI_Barrier", w, None, None, 31),
            blocked("MPI_Recv", w, Some(0), Some(3), 27),
        ]);
        let f = only(&j, FindingKind::UnmatchedReceive);
        let Subject::CallMismatch { other, .. } = &f.subject else {
            panic!("{f:?}")
        };
        assert_eq!(other.call, "MPI_Barrier");
        assert_eq!(other.at.as_deref(), Some("prog.c:31"));
        // A rank blocked in a receive is a hop of a cycle, not an unmatched send.
        let j = job(vec![
            blocked("MPI_Recv", w, Some(1), Some(3), 27),
            blocked("MPI_Recv", w, Some(0), Some(3), 27),
        ]);
        assert!(
            diagnose(&j)
                .of_kind(FindingKind::UnmatchedReceive)
                .next()
                .is_none()
        );
    }

    #[test]
    fn a_rooted_collective_with_two_roots_is_a_root_mismatch() {
        let w = COMM_WORLD_HANDLE;
        let root = |r: i64, line: u32| {
            let mut t = blocked("MPI_Bcast", w, None, None, line);
            if let Some(c) = &mut t.call {
                c.root = Some(r);
            }
            t
        };
        let j = job(vec![root(0, 40), root(0, 40), root(1, 41)]);
        let f = only(&j, FindingKind::RootMismatch);
        let Subject::RootMismatch { roots, .. } = &f.subject else {
            panic!("{f:?}")
        };
        let said: Vec<(i64, String)> = roots.iter().map(|(r, s, _)| (*r, s.to_string())).collect();
        assert_eq!(said, [(0, "0,1".to_owned()), (1, "2".to_owned())]);
    }
}
