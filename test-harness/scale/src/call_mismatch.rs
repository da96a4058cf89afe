//! The bugs blocked calls show by their arguments, by class: a receive from a rank that is
//! blocked sending to it with another tag or on another communicator, a receive from a
//! rank that sends it nothing while another rank does (a source mismatch), a receive from
//! a rank blocked in another call, and a rooted collective whose members name different
//! roots. Each class's calls are read once (from its first and last members, peers as
//! every member names them); the pairs are made receiver by receiver in rank order, as
//! findings group them (both sides' calls, tags, communicators and lines, the source as
//! the receiver names it), so a class of one reads as one rank does.

use crate::comms::shape_key;
use crate::queues::Peer;
use mqd_model::call_comms::{ANY_SOURCE, ANY_TAG, PROC_NULL, comm_of, rooted};
use mqd_model::diagnosis::{CallSide, PeerName, Subject};
use mqd_model::places::call_line;
use mqd_model::{
    CallClass, Certainty, ClassJob, CommGroup, CommKey, Finding, FindingKind, Location, RankDump,
    RankSet, Relation, ThreadStack,
};
use std::collections::BTreeMap;

/// One point-to-point half of a blocked call of one rank: its call, whether it sends,
/// its communicator and size, its peer (COMM_WORLD; `None`: any source), its tag
/// (`None`: any) and its line.
#[derive(Clone, PartialEq)]
struct RankHalf {
    call: String,
    send: bool,
    comm: CommKey,
    /// Its communicator as every member of a class holds it ([`crate::comms`]).
    shape: CommKey,
    /// The communicator's members, where known.
    members: Option<CommGroup>,
    size: i64,
    peer: Option<i32>,
    tag: Option<i64>,
    at: Option<String>,
}

/// One half as every member of a class has it, its peer written for every member.
#[derive(Clone)]
struct Half {
    class: usize,
    call: String,
    send: bool,
    comm: CommKey,
    shape: CommKey,
    /// The first member's rank and its instance's members, where the class's instances
    /// move with the rank (a split's rows): `comm` is the first member's.
    moves: Option<(i32, CommGroup)>,
    size: i64,
    peer: Option<Peer>,
    tag: Option<i64>,
    at: Option<String>,
}

/// The canonical name of a call (`MPI_Recv` for `PMPI_Recv`).
fn canonical(call: &str) -> String {
    mqd_model::calls::canonical(call)
        .map_or(call, |c| c.name)
        .to_owned()
}

/// The point-to-point halves of thread `t` of `r` (a job of `n` ranks).
fn rank_halves(r: &RankDump, t: &ThreadStack, n: u32) -> Vec<RankHalf> {
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
    let Some(comm) = comm_of(r, args, Some(n)) else {
        return Vec::new();
    };
    let name = canonical(&call);
    let at = call_line(t);
    // A peer or tag that is not known: nothing can be said of the half.
    let half = |send: bool, peer: Option<i64>, tag: Option<i64>| -> Option<RankHalf> {
        let (peer, tag) = (peer?, tag?);
        if peer == PROC_NULL {
            return None;
        }
        Some(RankHalf {
            call: name.clone(),
            send,
            comm: comm.key.clone(),
            shape: shape_key(comm.key.clone(), comm.members.as_ref()),
            members: comm.members.clone(),
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

/// The halves of class `ci` of `job`, in its threads' order; why not, when its first and
/// last members' calls are not one call with a peer every member names alike.
fn class_halves(job: &ClassJob, ci: usize) -> Result<Vec<Half>, String> {
    let c = &job.classes[ci];
    let n = job.size;
    let mut out = Vec::new();
    for (i, t) in c.first.threads.iter().enumerate() {
        let first = rank_halves(&c.first, t, n);
        let last = c.last.as_ref().map(|l| {
            l.threads
                .get(i)
                .map_or_else(Vec::new, |t| rank_halves(l, t, n))
        });
        let differ = || String::from("calls whose arguments differ across the class");
        if last.as_ref().is_some_and(|l| l.len() != first.len()) {
            return Err(differ());
        }
        for (k, h) in first.into_iter().enumerate() {
            let other = last.as_ref().map(|l| &l[k]);
            let same = |o: &RankHalf| {
                (&o.call, o.send, &o.shape, o.size, o.tag, &o.at)
                    == (&h.call, h.send, &h.shape, h.size, h.tag, &h.at)
            };
            if other.is_some_and(|o| !same(o)) {
                return Err(differ());
            }
            let peer = match (h.peer, other.map(|o| o.peer)) {
                (None, None | Some(None)) => None,
                (Some(p0), None) => Some(Peer::of((p0.into(), c.first.rank.into()), None, n)?),
                (Some(p0), Some(Some(p1))) => {
                    let last_rank = c.last.as_ref().map_or(0, |l| l.rank);
                    Some(Peer::of(
                        (p0.into(), c.first.rank.into()),
                        Some((p1.into(), last_rank.into())),
                        n,
                    )?)
                }
                _ => return Err(differ()),
            };
            let moves = match (other, h.members) {
                (Some(o), Some(g)) if o.comm != h.comm => Some((c.first.rank, g)),
                _ => None,
            };
            out.push(Half {
                class: ci,
                call: h.call,
                send: h.send,
                comm: h.comm,
                shape: h.shape,
                moves,
                size: h.size,
                peer,
                tag: h.tag,
                at: h.at,
            });
        }
    }
    Ok(out)
}

/// Where a rank is blocked in an MPI call that sends no point-to-point message (a
/// collective, `MPI_Finalize`, one-sided synchronisation), every thread that is not MPI's
/// own there: the call and line of the first.
pub fn blocked_place(r: &RankDump) -> Option<(String, Option<String>)> {
    let program = r.executable.as_deref();
    let mut place = None;
    if r.threads.is_empty() {
        return None;
    }
    for t in &r.threads {
        match t.location_in(program) {
            Location::MpiThread => {}
            Location::InMpi {
                call,
                class:
                    CallClass::Collective
                    | CallClass::Finalize
                    | CallClass::Init
                    | CallClass::OneSided
                    | CallClass::Connect
                    | CallClass::BufferFlush,
            } => {
                place.get_or_insert((canonical(&call), call_line(t)));
            }
            _ => return None,
        }
    }
    place
}

/// The communicator of half `h` as member `r` of its class holds it.
fn comm_at(h: &Half, r: u32) -> CommKey {
    match &h.moves {
        Some((r0, group)) => {
            let by = i64::from(r) - i64::from(*r0);
            let members: Vec<i32> = group.iter().map(|m| (i64::from(m) + by) as i32).collect();
            h.comm.with_members(&members)
        }
        None => h.comm.clone(),
    }
}

/// Half `h` of member `r` of its class, as a finding names it.
fn side(h: &Half, r: u32) -> CallSide {
    CallSide {
        ranks: RankSet::new(),
        call: h.call.clone(),
        tag: h.tag,
        comm: Some(comm_at(h, r)),
        at: h.at.clone(),
    }
}

/// The source of receiver `r`'s half `h` (`source`), relative to it where a pattern fits.
fn source_name(h: &Half, r: u32, source: Option<u32>) -> PeerName {
    match source {
        None => PeerName::AnySource,
        Some(p) => match Relation::of(r.into(), p.into(), h.size) {
            Relation::Absolute => PeerName::World(p as i32),
            rel if h.comm.name.as_ref() == "MPI_COMM_WORLD" => PeerName::Relative(rel),
            _ => PeerName::World(p as i32),
        },
    }
}

/// A finding being grouped: its kind and both sides but their ranks.
type Key = (FindingKind, CallSide, CallSide, PeerName);

/// A group of pairs: its key, the receivers, the ranks they wait for, the pairs.
type Group = (Key, RankSet, RankSet, Vec<(i32, i32)>);

/// The findings of the blocked calls of `job`; `queued`: receiving ranks the queues' own
/// mismatch findings already name. When a class's calls cannot be read alike, that class
/// and why.
pub(super) fn call_findings(
    job: &ClassJob,
    queued: &RankSet,
) -> Result<Vec<Finding>, (usize, String)> {
    let n = job.size;
    let mut halves: Vec<Vec<Half>> = Vec::new();
    for ci in 0..job.classes.len() {
        halves.push(class_halves(job, ci).map_err(|why| (ci, why))?);
    }
    // Each rank's class.
    let mut class_of: Vec<u32> = vec![u32::MAX; n as usize];
    for (ci, c) in job.classes.iter().enumerate() {
        for r in c.ranks.iter().filter(|&r| r < n) {
            class_of[r as usize] = ci as u32;
        }
    }
    let class_at = |r: u32| -> Option<usize> {
        let ci = *class_of.get(r as usize)?;
        (ci != u32::MAX).then_some(ci as usize)
    };
    let places: Vec<Option<(String, Option<String>)>> = job
        .classes
        .iter()
        .map(|c| blocked_place(&c.first))
        .collect();
    let sends_any: Vec<bool> = halves.iter().map(|hs| hs.iter().any(|h| h.send)).collect();
    let all_sends: Vec<&Half> = halves.iter().flatten().filter(|h| h.send).collect();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut add =
        |kind: FindingKind, recv: &Half, a: u32, source: Option<u32>, other: CallSide, b: u32| {
            let key: Key = (kind, side(recv, a), other, source_name(recv, a, source));
            let entry = groups
                .entry(format!("{key:?}"))
                .or_insert_with(|| (key, RankSet::new(), RankSet::new(), Vec::new()));
            entry.1.insert(a);
            entry.2.insert(b);
            entry.3.push((a as i32, b as i32));
        };
    // Receivers in rank order, each thread's receive in its order.
    let receivers: Vec<(u32, usize)> = {
        let mut all: Vec<(u32, usize)> = Vec::new();
        for (ci, c) in job.classes.iter().enumerate() {
            if halves[ci].iter().any(|h| !h.send) {
                all.extend(c.ranks.iter().map(|r| (r, ci)));
            }
        }
        all.sort_unstable();
        all
    };
    for (a, ci) in receivers {
        if queued.contains(a) {
            continue;
        }
        for recv in halves[ci].iter().filter(|h| !h.send) {
            let Some(source) = recv.peer.and_then(|p| p.at(a, n)) else {
                continue;
            };
            let takes = |s: &Half| recv.tag.is_none_or(|t| Some(t) == s.tag);
            // The sends of the source's class to this rank, in its threads' order.
            let from_source: Vec<&Half> = class_at(source)
                .map(|sc| {
                    halves[sc]
                        .iter()
                        .filter(|s| s.send && s.peer.and_then(|p| p.at(source, n)) == Some(a))
                        .collect()
                })
                .unwrap_or_default();
            if from_source
                .iter()
                .any(|s| s.shape == recv.shape && takes(s))
            {
                continue;
            }
            if let Some(s) = from_source.iter().find(|s| s.shape == recv.shape) {
                add(
                    FindingKind::TagMismatch,
                    recv,
                    a,
                    Some(source),
                    side(s, source),
                    source,
                );
                continue;
            }
            if let Some(s) = from_source.iter().find(|s| takes(s)) {
                add(
                    FindingKind::CommunicatorMismatch,
                    recv,
                    a,
                    Some(source),
                    side(s, source),
                    source,
                );
                continue;
            }
            if !from_source.is_empty() {
                continue;
            }
            // Another rank sending to this one what it would take: the lowest.
            let other = all_sends
                .iter()
                .enumerate()
                .filter(|(_, s)| s.shape == recv.shape && takes(s))
                .filter_map(|(order, s)| {
                    let members = &job.classes[s.class].ranks;
                    let b = match s.peer? {
                        Peer::Off(k) => {
                            let b = ((u64::from(a) + u64::from(n) - u64::from(k) % u64::from(n))
                                % u64::from(n)) as u32;
                            members.contains(b).then_some(b)
                        }
                        Peer::Abs(d) if d == a => members.iter().find(|&b| b != source),
                        _ => None,
                    }?;
                    (b != source).then_some((b, order, *s))
                })
                .min_by_key(|(b, order, _)| (*b, *order));
            if let Some((b, _, s)) = other {
                add(
                    FindingKind::SourceMismatch,
                    recv,
                    a,
                    Some(source),
                    side(s, b),
                    b,
                );
                continue;
            }
            // The source is blocked elsewhere, sending nothing to this rank.
            if let Some(sc) = class_at(source)
                && !sends_any[sc]
                && let Some((call, at)) = &places[sc]
            {
                let other = CallSide {
                    ranks: RankSet::new(),
                    call: call.clone(),
                    tag: None,
                    comm: None,
                    at: at.clone(),
                };
                add(
                    FindingKind::UnmatchedReceive,
                    recv,
                    a,
                    Some(source),
                    other,
                    source,
                );
            }
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
    out.extend(root_mismatches(job));
    Ok(out)
}

/// Ranks in one rooted collective on one communicator that name different roots.
fn root_mismatches(job: &ClassJob) -> Vec<Finding> {
    type Roots = BTreeMap<i64, (RankSet, Option<String>)>;
    let mut by: BTreeMap<String, (String, Option<CommKey>, Roots)> = BTreeMap::new();
    for c in &job.classes {
        let r = &c.first;
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
            let Some(comm) = comm_of(r, args, Some(job.size)).map(|c| c.key) else {
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
            root_entry.0.union_with(&c.ranks);
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
