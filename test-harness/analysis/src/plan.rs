//! What each rank waits for, thread by thread, from its stacks and its queues.
//!
//! Every thread of a rank is one of: *free* (outside MPI, computing or waiting for
//! something outside the job, or in an MPI call that returns: it may still call MPI),
//! *waiting for its process* (a lock, a condition variable, a join, an OpenMP barrier,
//! without time limit: it goes on only if another thread of its process does), *a thread
//! of the MPI library* (progress, transports: it runs no code of the program), *blocked*
//! in an MPI call that waits for other processes, or *unknown* (an MPI call the table does
//! not know, an entry point without a name, a stack that could not be followed). A rank
//! goes on if any of its threads that may call MPI does (its thread level says which).
//!
//! From them, two plans of the wait-for graph, each rank a set of alternatives (one per
//! thread that could move it):
//! - **the proof** (`must`): only what a blocked call certainly needs before it returns,
//!   whatever messages are still on their way: a synchronous (or rendezvous) message its
//!   sender is blocked in, seen waiting unexpected at its destination, needs the
//!   destination to post a receive; a receive from a rank that MPI says has finalized
//!   needs a message that will never come. A rank with a thread that might still call MPI,
//!   or one whose place is unknown, is in no proof. Receives and collectives certainly need
//!   nothing: their last message may be on its way.
//! - **the worst reading** (`may`): everything a blocked call may need (a receive its
//!   source, a send its destination unless a receive there takes it, a wait each of its
//!   requests' peers, a collective every member of its communicator not in it), a thread
//!   whose place is unknown anything, a rank without stacks every pending operation it has.
//!   Only ranks whose stacks show them certainly free are left out.

use crate::collectives::{self, CollThread, Collectives, Members};
use crate::scan::Scan;
use mqd_graph::Plan;
use mqd_model::{
    CallArguments, CallClass, CommKey, Evidence, JobDump, Location, MpiPhase, OperationStatus,
    QueueKind, RankDump, RankSet, ThreadLevel, ThreadStack, Wait, WaitKind, WaitTarget,
};
use mqd_scale::shared::{
    ANY_SOURCE, ANY_TAG, Comm, PROC_NULL, collective_message, comm_of, messages_comm, rooted,
};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Both plans, and what the stacks and MPI's own state say of each rank.
pub(crate) struct Plans {
    pub must: Plan,
    pub may: Plan,
    /// Ranks the stacks show certainly going on (a thread that may call MPI runs).
    pub running: RankSet,
    /// Ranks without a stack: whether they are blocked in a call their queues do not
    /// show is unknown.
    pub no_stacks: RankSet,
    /// Ranks not certainly going on with a thread whose place is unknown, and that place.
    pub unknown_places: BTreeMap<i32, String>,
    /// Ranks with stacks whose every thread is accounted for: free, waiting for its
    /// process, MPI's own, or blocked in a call whose waits are all known (its peers and
    /// communicator read from its arguments). Queues could add only operations that
    /// block nothing (non-blocking ones), so a rank without queues is seen whole.
    pub accounted: RankSet,
    /// Ranks that MPI says have returned from `MPI_Finalize`.
    pub finalized: RankSet,
    /// Ranks whose every thread waits for another thread of its process.
    pub self_blocked: RankSet,
    /// Ranks not certainly going on with a thread polling (`MPI_Test`, `MPI_Iprobe`), and
    /// its call: such a loop may wait for any rank, and only its end would show it does
    /// not.
    pub polling: BTreeMap<i32, String>,
    /// Ranks a hold can prove: every thread blocked in an MPI call whose waits are within
    /// the job (not a connection to another), waiting for another thread of its process,
    /// or MPI's own, and one blocked at least.
    pub holdable: RankSet,
    /// The calls of the holdable ranks' blocked threads, by name.
    pub blocked_calls: BTreeMap<i32, Vec<String>>,
    /// What each holdable rank's waits do not say (the first unknown argument, or the
    /// call), when something.
    pub unknown_waits: BTreeMap<i32, String>,
    /// The job's size: its process table's, else the largest COMM_WORLD a rank reports.
    pub job_size: Option<u32>,
    /// The collectives' findings.
    pub collectives: Collectives,
}

/// What a thread is, for the plans.
#[derive(Debug, Clone)]
enum Kind<'a> {
    Free,
    /// In a call that tests for completion and returns at once, maybe in a loop.
    Polls(String),
    WaitsForProcess,
    MpiThread,
    Unknown(String),
    Blocked {
        call: String,
        class: CallClass,
        args: Option<&'a CallArguments>,
    },
}

fn kind_of<'a>(t: &'a ThreadStack, program: Option<&str>) -> Kind<'a> {
    match t.location_in(program) {
        Location::Outside { waits: Some(_), .. } => Kind::WaitsForProcess,
        Location::Outside { .. } => Kind::Free,
        Location::MpiThread => Kind::MpiThread,
        Location::Unknown => Kind::Unknown("a stack that could not be followed".into()),
        Location::InMpi { call, class } => match class.blocks() {
            None => Kind::Unknown(call),
            Some(false) if mqd_model::calls::polls(&call) => Kind::Polls(call),
            Some(false) => Kind::Free,
            Some(true) => Kind::Blocked {
                call,
                class,
                args: t.call.as_ref(),
            },
        },
    }
}

/// A receive posted by a thread blocked in a receive call (not in any queue on ch3's
/// debug queues): its source and tag (`None`: any).
struct CallReceive {
    source_local: i64,
    tag: Option<i64>,
}

/// What one blocked thread needs: in the worst reading (its waits, and whether it may
/// need something unknown), and certainly (its waits that hold whatever is in flight).
#[derive(Default)]
struct Need {
    may: Vec<Wait>,
    unknown: bool,
    must: Vec<Wait>,
    /// It returns without anyone: its operation is complete or on its way.
    proceeds: bool,
}

impl Need {
    fn unknown() -> Need {
        Need {
            unknown: true,
            ..Need::default()
        }
    }

    fn proceeds() -> Need {
        Need {
            proceeds: true,
            ..Need::default()
        }
    }

    /// Both: each must happen (a send and a receive, every request of a wait).
    fn and(mut self, other: Need) -> Need {
        if other.proceeds {
            return self;
        }
        if self.proceeds {
            return other;
        }
        self.may.extend(other.may);
        self.must.extend(other.must);
        self.unknown |= other.unknown;
        self
    }
}

/// A wait of `rank` on communicator `comm`, before its target is known.
fn wait(rank: i32, comm: &Comm<'_>, kind: WaitKind, peer_local: i64, tag: Option<i64>) -> Wait {
    mqd_scale::shared::wait(
        rank,
        (comm.key.clone(), comm.local_rank, comm.inter),
        kind,
        peer_local,
        tag,
    )
}

/// Indexes of the scan, by where operations wait.
struct Index<'s> {
    scan: &'s Scan,
    /// Messages by destination and communicator.
    to: HashMap<(i32, &'s CommKey), Vec<usize>>,
    /// Posted receives by rank and communicator.
    posted: HashMap<(i32, &'s CommKey), Vec<usize>>,
    /// A request's operation: a receive, a message, or one that goes on by itself.
    requests: HashMap<(i32, u64), Request>,
    /// Receives posted by threads blocked in receive calls, by rank and communicator.
    called: HashMap<(i32, CommKey), Vec<CallReceive>>,
    finalized: RankSet,
}

#[derive(Debug, Clone, Copy)]
enum Request {
    Receive(usize),
    Message(usize),
    Proceeds,
}

impl<'s> Index<'s> {
    fn new(job: &JobDump, scan: &'s Scan, finalized: RankSet) -> Index<'s> {
        let mut to: HashMap<(i32, &CommKey), Vec<usize>> = HashMap::new();
        let mut requests = HashMap::new();
        for (i, m) in scan.msgs.iter().enumerate() {
            if let Some(d) = m.dest {
                to.entry((d, &m.comm)).or_default().push(i);
            }
            if let Some(s) = m.sender {
                for &r in &m.requests {
                    requests.insert((s, r), Request::Message(i));
                }
            }
        }
        let mut posted: HashMap<(i32, &CommKey), Vec<usize>> = HashMap::new();
        for (i, r) in scan.recvs.iter().enumerate() {
            posted.entry((r.rank, &r.comm)).or_default().push(i);
            if let Some(req) = r.request {
                requests.insert((r.rank, req), Request::Receive(i));
            }
        }
        // Requests whose operations need nobody: complete, or matched and on their way.
        for r in job.ranks.iter().filter(|r| r.rank >= 0 && !r.duplicate) {
            for c in r.communicators() {
                for q in [QueueKind::PendingReceives, QueueKind::PendingSends] {
                    for op in c.queue(q).ops() {
                        let done = matches!(
                            op.status,
                            OperationStatus::Complete | OperationStatus::Matched
                        );
                        if let (true, Some(req)) = (done, op.request) {
                            requests.insert((r.rank, req), Request::Proceeds);
                        }
                    }
                }
            }
        }
        Index {
            scan,
            to,
            posted,
            requests,
            called: HashMap::new(),
            finalized,
        }
    }

    /// A message on its way to `rank` that a receive from `source` (local, or any) with
    /// `tag` (any when `None`) on `comm` takes.
    fn message_for(&self, rank: i32, comm: &CommKey, source: i64, tag: Option<i64>) -> bool {
        self.to.get(&(rank, comm)).is_some_and(|ms| {
            ms.iter().any(|&i| {
                let m = &self.scan.msgs[i];
                !m.consumed
                    && (source < 0 || m.sender_local == source)
                    && tag.is_none_or(|t| t == m.tag)
            })
        })
    }

    /// A receive posted at `dest` (listed, or by a thread blocked in a receive call)
    /// that a message from `sender_local` with `tag` on `comm` would be taken by.
    fn receive_at(&self, dest: i32, comm: &CommKey, sender_local: i64, tag: i64) -> bool {
        let listed = self.posted.get(&(dest, comm)).is_some_and(|rs| {
            rs.iter().any(|&i| {
                let r = &self.scan.recvs[i];
                !r.consumed
                    && (r.source_local < 0 || r.source_local == sender_local)
                    && r.takes_tag(tag)
            })
        });
        listed
            || self.called.get(&(dest, comm.clone())).is_some_and(|rs| {
                rs.iter().any(|r| {
                    (r.source_local < 0 || r.source_local == sender_local)
                        && r.tag.is_none_or(|t| t == tag)
                })
            })
    }

    /// The listed receive of `rank` a receive call from `source` with `tag` is, when one
    /// is pending: its evidence, and whether a message already takes it.
    fn listed_receive(
        &self,
        rank: i32,
        comm: &CommKey,
        source: i64,
        tag: Option<i64>,
    ) -> Option<(&Evidence, bool)> {
        self.posted.get(&(rank, comm)).and_then(|rs| {
            rs.iter().find_map(|&i| {
                let r = &self.scan.recvs[i];
                let same_source = r.source_local == source.max(-1);
                let same_tag = r.tag == tag;
                (same_source && same_tag).then_some((&r.evidence, r.consumed))
            })
        })
    }
}

/// The needs of a thread of `r` blocked in a receive from `source` with `tag` on `comm`.
fn receive_need(
    index: &Index<'_>,
    r: &RankDump,
    comm: &Comm<'_>,
    source: Option<i64>,
    tag: Option<i64>,
) -> Need {
    let Some(source) = source else {
        return Need::unknown();
    };
    if source == PROC_NULL {
        return Need::proceeds();
    }
    // `tag` unknown: no message can be said to be the one it takes.
    let known_tag = tag.is_some();
    let tag = tag.filter(|&t| t != ANY_TAG);
    let listed = index.listed_receive(r.rank, &comm.key, source, tag);
    if listed.is_some_and(|(_, consumed)| consumed) {
        return Need::proceeds();
    }
    // A message on its way (a send its sender lists) takes it.
    if known_tag && index.message_for(r.rank, &comm.key, source, tag) {
        return Need::proceeds();
    }
    let mut w = wait(r.rank, comm, WaitKind::Receive, source.max(-1), tag);
    w.evidence = listed.map(|(e, _)| vec![e.clone()]).unwrap_or_default();
    let target = if source == ANY_SOURCE {
        comm.any_source().map(WaitTarget::AnyOf)
    } else {
        comm.world(source).map(WaitTarget::Rank)
    };
    let Some(target) = target else {
        return Need {
            may: vec![w],
            unknown: true,
            ..Need::default()
        };
    };
    w.target = target.clone();
    // Certain only from ranks that finalized: nothing of theirs is still on its way.
    let certain = match &target {
        WaitTarget::Rank(t) => index.finalized.contains_i32(*t),
        WaitTarget::AnyOf(set) => !set.is_empty() && set.is_subset(&index.finalized),
        _ => false,
    };
    let must = certain
        .then(|| Wait {
            blocked: true,
            ..w.clone()
        })
        .into_iter()
        .collect();
    Need {
        may: vec![w],
        unknown: false,
        must,
        proceeds: false,
    }
}

/// The needs of a thread of `r` blocked in a send to `dest` with `tag` on `comm`
/// (`synchronous`: `MPI_Ssend`, which returns only once a receive matched it).
///
/// Certain when a message of this sender, communicator and tag waits unexpected at the
/// destination: no receive there took it, and the message the call sends comes after it
/// (MPI matches messages of one sender, communicator and tag in order), so the call
/// returns only after the destination posts a receive, whatever is still on its way;
/// for a standard send, only when the library says that the message waits at its sender
/// (synchronous, or rendezvous: an eager one lets the call return).
fn send_need(
    index: &Index<'_>,
    r: &RankDump,
    comm: &Comm<'_>,
    dest: Option<i64>,
    tag: Option<i64>,
    synchronous: bool,
) -> Need {
    let (Some(dest), Some(tag)) = (dest, tag) else {
        return Need::unknown();
    };
    if dest == PROC_NULL {
        return Need::proceeds();
    }
    let Some(to) = comm.world(dest) else {
        let w = wait(r.rank, comm, WaitKind::Send, dest, Some(tag));
        return Need {
            may: vec![w],
            unknown: true,
            ..Need::default()
        };
    };
    if index.receive_at(to, &comm.key, comm.local_rank, tag) {
        return Need::proceeds();
    }
    let mut w = wait(r.rank, comm, WaitKind::Send, dest, Some(tag));
    w.target = WaitTarget::Rank(to);
    // The message seen waiting at its destination, its sender waiting for the match.
    let seen = index.to.get(&(to, &comm.key)).and_then(|ms| {
        ms.iter().map(|&i| &index.scan.msgs[i]).find(|m| {
            m.sender == Some(r.rank)
                && m.sender_local == comm.local_rank
                && m.tag == tag
                && m.unexpected.is_some()
                && !m.consumed
        })
    });
    let mut must = Vec::new();
    if let Some(m) = seen {
        w.evidence = m.evidence();
        w.requests.clone_from(&m.requests);
        if synchronous || m.sender_waits || index.finalized.contains_i32(to) {
            // Seen at the destination only, or listed by its sender too.
            if m.send.is_none() {
                w.kind = WaitKind::Unexpected;
            }
            must.push(Wait {
                blocked: true,
                ..w.clone()
            });
        }
    } else if index.finalized.contains_i32(to) {
        must.push(Wait {
            blocked: true,
            ..w.clone()
        });
    }
    Need {
        may: vec![w],
        unknown: false,
        must,
        proceeds: false,
    }
}

/// The needs of a thread of `r` waiting for `requests` (all of them, or any).
fn requests_need(index: &Index<'_>, r: &RankDump, requests: &[Option<u64>], all: bool) -> Need {
    if requests.is_empty() {
        return Need::unknown();
    }
    let mut items: Vec<Need> = Vec::new();
    for request in requests {
        let item = match request.and_then(|a| index.requests.get(&(r.rank, a)).copied()) {
            None => Need::unknown(),
            Some(Request::Proceeds) => Need::proceeds(),
            Some(Request::Receive(i)) => {
                let recv = &index.scan.recvs[i];
                if recv.consumed {
                    Need::proceeds()
                } else {
                    let mut w = Wait {
                        call: None,
                        from: r.rank,
                        target: match (&recv.any, recv.source) {
                            (Some(set), _) if recv.source_local < 0 => {
                                WaitTarget::AnyOf(set.clone())
                            }
                            (_, Some(s)) => WaitTarget::Rank(s),
                            _ => WaitTarget::UnknownRank {
                                local: recv.source_local,
                            },
                        },
                        kind: WaitKind::Receive,
                        comm: recv.comm.clone(),
                        local_rank: recv.local,
                        peer_local: recv.source_local,
                        tag: recv.tag,
                        count: recv.count,
                        evidence: vec![recv.evidence.clone()],
                        blocked: false,
                        requests: recv.request.into_iter().collect(),
                        remote_peer: recv.remote,
                    };
                    let known = !matches!(w.target, WaitTarget::UnknownRank { .. });
                    let certain = match &w.target {
                        WaitTarget::Rank(t) => index.finalized.contains_i32(*t),
                        WaitTarget::AnyOf(set) => set.is_subset(&index.finalized),
                        _ => false,
                    };
                    let must = certain
                        .then(|| {
                            w.blocked = true;
                            w.clone()
                        })
                        .into_iter()
                        .collect();
                    w.blocked = false;
                    Need {
                        may: vec![w],
                        unknown: !known,
                        must,
                        proceeds: false,
                    }
                }
            }
            Some(Request::Message(i)) => {
                let m = &index.scan.msgs[i];
                match (m.consumed, m.dest) {
                    (true, _) => Need::proceeds(),
                    (false, None) => Need::unknown(),
                    (false, Some(d)) => {
                        let w = Wait {
                            call: None,
                            from: r.rank,
                            target: WaitTarget::Rank(d),
                            kind: if m.send.is_some() {
                                WaitKind::Send
                            } else {
                                WaitKind::Unexpected
                            },
                            comm: m.comm.clone(),
                            local_rank: m.sender_local,
                            peer_local: m.dest_local,
                            tag: Some(m.tag),
                            count: m.count,
                            evidence: m.evidence(),
                            blocked: false,
                            requests: m.requests.clone(),
                            remote_peer: m.remote,
                        };
                        let certain = (m.unexpected.is_some() && m.sender_waits)
                            || index.finalized.contains_i32(d);
                        let must = certain
                            .then(|| Wait {
                                blocked: true,
                                ..w.clone()
                            })
                            .into_iter()
                            .collect();
                        Need {
                            may: vec![w],
                            unknown: false,
                            must,
                            proceeds: false,
                        }
                    }
                }
            }
        };
        items.push(item);
    }
    if all {
        return items
            .into_iter()
            .fold(Need::proceeds(), |acc, item| acc.and(item));
    }
    // Any one request completing returns the call.
    if items.iter().any(|i| i.proceeds) {
        return Need::proceeds();
    }
    let known: Vec<&Need> = items.iter().filter(|i| !i.unknown).collect();
    let certain = items.iter().all(|i| !i.must.is_empty());
    let union = |waits: &mut dyn Iterator<Item = &Wait>| -> Option<(RankSet, Vec<Evidence>)> {
        let mut set = RankSet::new();
        let mut evidence = Vec::new();
        for w in waits {
            set.union_with(&w.targets()?);
            evidence.extend(w.evidence.iter().cloned());
        }
        Some((set, evidence))
    };
    let first = items.iter().flat_map(|i| &i.may).next().cloned();
    let Some(first) = first else {
        return Need::unknown();
    };
    let may = union(&mut known.iter().flat_map(|i| i.may.iter())).filter(|(s, _)| !s.is_empty());
    let Some((set, evidence)) = may else {
        return Need::unknown();
    };
    let any = Wait {
        target: WaitTarget::AnyOf(set),
        evidence,
        ..first
    };
    let must = if certain {
        vec![Wait {
            blocked: true,
            ..any.clone()
        }]
    } else {
        Vec::new()
    };
    Need {
        may: vec![any],
        // Pessimistic: a request not followed may be held forever too.
        unknown: false,
        must,
        proceeds: false,
    }
}

/// Everything of the plans, from the scan of the queues.
pub(crate) fn plans(job: &JobDump, scan: &Scan) -> Plans {
    let ranked: Vec<&RankDump> = job
        .ranks
        .iter()
        .filter(|r| r.rank >= 0 && !r.duplicate)
        .collect();
    let job_size = job.job_size.or_else(|| {
        ranked
            .iter()
            .flat_map(|r| r.communicators())
            .filter(|c| c.name == "MPI_COMM_WORLD")
            .filter_map(|c| u32::try_from(c.size).ok())
            .max()
    });
    let finalized = RankSet::from_i32s(
        ranked
            .iter()
            .filter(|r| r.mpi.phase == Some(MpiPhase::Finalized))
            .map(|r| &r.rank),
    );
    let mut index = Index::new(job, scan, finalized.clone());
    let program = |r: &RankDump| r.executable.clone();

    // Receives posted by threads in receive calls, for sends that look for them.
    for r in &ranked {
        for t in &r.threads {
            if let Kind::Blocked {
                class: CallClass::BlockingReceive | CallClass::SendReceive,
                args: Some(args),
                call,
            } = kind_of(t, program(r).as_deref())
                && !call.contains("Mrecv")
                && let Some(comm) = comm_of(r, args, job_size)
            {
                let (source, tag) = if call.contains("Sendrecv") {
                    (args.recv_peer, args.recv_tag)
                } else {
                    (args.peer, args.tag)
                };
                // A receive from MPI_PROC_NULL takes no message.
                if let Some(source) = source.filter(|&s| s != PROC_NULL) {
                    index
                        .called
                        .entry((r.rank, comm.key.clone()))
                        .or_default()
                        .push(CallReceive {
                            source_local: source.max(-1),
                            tag: tag.filter(|&t| t != ANY_TAG),
                        });
                }
            }
        }
    }

    // Threads in collectives, for the collectives' own analysis.
    let mut in_collectives: Vec<CollThread> = Vec::new();
    let internal_comm = |r: &RankDump| -> Option<Members> {
        let ops = scan.collective_ops.iter().filter(|o| o.rank == r.rank);
        let (key, members) = messages_comm(r, ops.map(|o| o.unique_id))?;
        Some(Members { key, members })
    };
    for r in &ranked {
        for t in &r.threads {
            if let Kind::Blocked {
                class: class @ (CallClass::Collective | CallClass::Init | CallClass::Finalize),
                call,
                args,
            } = kind_of(t, program(r).as_deref())
            {
                let comm = match class {
                    // A rooted collective whose root is not known may be another
                    // instance than its members': which one it is, is unknown.
                    CallClass::Collective
                        if rooted(&call) && args.and_then(|a| a.root).is_none() =>
                    {
                        None
                    }
                    CallClass::Collective => args
                        .and_then(|a| comm_of(r, a, job_size))
                        .and_then(|c| {
                            Some(Members {
                                members: c.members?,
                                key: c.key,
                            })
                        })
                        .or_else(|| internal_comm(r)),
                    // Init and Finalize wait for the whole job.
                    _ => job_size.and_then(|n| {
                        let n = i32::try_from(n).ok()?;
                        Some(Members {
                            key: CommKey::named("(the job)", i64::from(n)),
                            members: (0..n).collect(),
                        })
                    }),
                };
                in_collectives.push(CollThread {
                    rank: r.rank,
                    tid: t.tid,
                    call,
                    root: args.and_then(|a| a.root),
                    bytes: args.and_then(|a| a.bytes),
                    comm,
                });
            }
        }
    }
    let locations = crate::locations::locations(job);
    let collectives = collectives::collectives(&in_collectives, &locations, &finalized);

    let mut plans = Plans {
        must: Plan::default(),
        may: Plan::default(),
        running: RankSet::new(),
        no_stacks: RankSet::new(),
        unknown_places: BTreeMap::new(),
        accounted: RankSet::new(),
        finalized: finalized.clone(),
        self_blocked: RankSet::new(),
        polling: BTreeMap::new(),
        holdable: RankSet::new(),
        blocked_calls: BTreeMap::new(),
        unknown_waits: BTreeMap::new(),
        job_size,
        collectives,
    };
    let queue_waits: HashMap<i32, Vec<&Wait>> = {
        let mut by: HashMap<i32, Vec<&Wait>> = HashMap::new();
        for w in &scan.waits {
            by.entry(w.from).or_default().push(w);
        }
        by
    };
    let dumped: HashSet<i32> = ranked.iter().map(|r| r.rank).collect();
    for r in &ranked {
        let rank = r.rank;
        if finalized.contains_i32(rank) {
            plans.must.sink(rank);
            plans.may.sink(rank);
            continue;
        }
        if r.threads.is_empty() {
            // No stack: any pending operation may be a blocking call, and any rank may
            // be in a call its queues do not show.
            plans.no_stacks.insert(rank as u32);
            if r.outcome.is_ok() {
                let mut waits: Vec<Wait> = queue_waits
                    .get(&rank)
                    .map(|ws| ws.iter().map(|w| (*w).clone()).collect())
                    .unwrap_or_default();
                // A collective's own messages: the rank is in a collective with that peer.
                for op in scan.collective_ops.iter().filter(|o| o.rank == rank) {
                    waits.push(collective_message(op));
                }
                plans.may.add(rank, (waits, false));
            }
            continue;
        }
        let program = program(r);
        let kinds: Vec<(&ThreadStack, Kind)> = r
            .threads
            .iter()
            .map(|t| (t, kind_of(t, program.as_deref())))
            .collect();
        let free = kinds.iter().any(|(_, k)| matches!(k, Kind::Free));
        let in_mpi = kinds
            .iter()
            .any(|(_, k)| matches!(k, Kind::Blocked { .. } | Kind::Unknown(_) | Kind::Polls(_)));
        let unknown = kinds.iter().find_map(|(_, k)| match k {
            Kind::Unknown(what) => Some(what.clone()),
            _ => None,
        });
        let polling = kinds.iter().find_map(|(_, k)| match k {
            Kind::Polls(call) => Some(call.clone()),
            _ => None,
        });
        let level = r.mpi.thread_level;
        // Certainly goes on: a free thread that can call MPI now.
        let certainly_free = free && (!in_mpi || level == Some(ThreadLevel::Multiple));
        // May go on: a free thread that might call MPI now, a place unknown, or a loop
        // that polls, which may end.
        let maybe_free = unknown.is_some()
            || polling.is_some()
            || (free && (level.is_none_or(|l| l == ThreadLevel::Multiple) || !in_mpi));
        if certainly_free {
            plans.running.insert(rank as u32);
            continue;
        }
        if let Some(what) = &unknown {
            plans.unknown_places.insert(rank, what.clone());
        }
        let blocked: Vec<(&ThreadStack, String, CallClass, Option<&CallArguments>)> = kinds
            .iter()
            .filter_map(|(t, k)| match k {
                Kind::Blocked { call, class, args } => Some((*t, call.clone(), *class, *args)),
                _ => None,
            })
            .collect();
        if let Some(call) = &polling {
            // In the worst reading it polls for ever for what any other rank might give.
            plans.polling.insert(rank, call.clone());
            plans.may.add(rank, polls_for_anyone(rank, call, job_size));
        }
        if blocked.is_empty() && unknown.is_none() && polling.is_none() && !free {
            // Every thread waits for another of its process (or is MPI's own).
            plans.self_blocked.insert(rank as u32);
            plans.must.sink(rank);
            plans.may.sink(rank);
            continue;
        }
        let holdable = !free
            && unknown.is_none()
            && polling.is_none()
            && !blocked.is_empty()
            && blocked
                .iter()
                .all(|(_, _, class, _)| *class != CallClass::Connect);
        if holdable {
            plans.holdable.insert(rank as u32);
            plans
                .blocked_calls
                .insert(rank, blocked.iter().map(|(_, c, _, _)| c.clone()).collect());
        }
        let mut must = Vec::new();
        let mut known = unknown.is_none();
        for (t, call, class, args) in blocked {
            let mut need = thread_need(
                &index,
                r,
                t,
                &call,
                class,
                args,
                job_size,
                &plans.collectives,
            );
            for w in need.may.iter_mut().chain(need.must.iter_mut()) {
                w.call.get_or_insert_with(|| call.clone());
            }
            if need.proceeds {
                // This thread returns: the rank goes on.
                plans.may.add(rank, (Vec::new(), false));
                must.push((Vec::new(), false));
                continue;
            }
            known &= !need.unknown;
            if need.unknown && holdable {
                let what = args
                    .and_then(|a| a.unknown.iter().next())
                    .map(|(arg, why)| format!("{call}'s {arg}: {why}"))
                    .unwrap_or_else(|| match args {
                        None => format!("{call}'s arguments could not be read"),
                        Some(_) => format!("whom {call} waits for is not known"),
                    });
                plans.unknown_waits.entry(rank).or_insert(what);
            }
            must.push((need.must, false));
            plans.may.add(rank, (need.may, need.unknown));
        }
        if known {
            plans.accounted.insert(rank as u32);
        }
        if unknown.is_some() {
            plans.may.add(rank, (Vec::new(), true));
        }
        if !maybe_free {
            for alternative in must {
                plans.must.add(rank, alternative);
            }
        }
    }
    // Ranks not dumped with a stack, that others may wait for: anything may hold them.
    for w in &plans.may.waits {
        if let Some(targets) = w.targets() {
            for t in &targets {
                let t = t as i32;
                if !dumped.contains(&t) {
                    plans.no_stacks.insert(t as u32);
                }
            }
        }
    }
    plans
}

/// The worst reading of a thread of `rank` polling in `call`: it waits, like a receive
/// from any source, for any other rank of the job (anything, when the job's size is not
/// known).
fn polls_for_anyone(rank: i32, call: &str, job_size: Option<u32>) -> (Vec<Wait>, bool) {
    let Some(n) = job_size.filter(|&n| n > 0) else {
        return (Vec::new(), true);
    };
    let mut others = RankSet::full(n);
    if let Ok(me) = u32::try_from(rank) {
        others.remove(me);
    }
    let world = Comm {
        key: CommKey::named("MPI_COMM_WORLD", i64::from(n)),
        local_rank: i64::from(rank),
        members: None,
        dumped: None,
        inter: false,
    };
    let mut wait = wait(rank, &world, WaitKind::Receive, -1, None);
    wait.target = WaitTarget::AnyOf(others);
    wait.call = Some(call.to_owned());
    (vec![wait], false)
}

/// What one blocked thread of `r` needs, by the class of its call and its arguments.
#[allow(clippy::too_many_arguments)]
fn thread_need(
    index: &Index<'_>,
    r: &RankDump,
    t: &ThreadStack,
    call: &str,
    class: CallClass,
    args: Option<&CallArguments>,
    job_size: Option<u32>,
    collectives: &Collectives,
) -> Need {
    match class {
        CallClass::Collective | CallClass::Init | CallClass::Finalize => {
            match collectives.by_thread.get(&(r.rank, t.tid)) {
                Some(Some(waits)) if waits.is_empty() => Need::proceeds(),
                Some(Some(waits)) => {
                    // The collective's own messages pending on its communicator show it.
                    let evidence: Vec<Evidence> = index
                        .scan
                        .collective_ops
                        .iter()
                        .filter(|o| o.rank == r.rank && o.comm == waits[0].comm)
                        .map(|o| o.evidence.clone())
                        .collect();
                    Need {
                        may: waits
                            .iter()
                            .map(|w| Wait {
                                evidence: evidence
                                    .iter()
                                    .filter(|e| match (&e.peer, &w.target) {
                                        (mqd_model::Peer::World(p), WaitTarget::Rank(t)) => p == t,
                                        _ => false,
                                    })
                                    .cloned()
                                    .collect(),
                                ..w.clone()
                            })
                            .collect(),
                        ..Need::default()
                    }
                }
                _ => Need::unknown(),
            }
        }
        CallClass::BlockingReceive if call.contains("Mrecv") => Need::unknown(),
        CallClass::BlockingReceive | CallClass::BlockingSend | CallClass::SendReceive => {
            let Some(args) = args else {
                return Need::unknown();
            };
            let Some(comm) = comm_of(r, args, job_size) else {
                return Need::unknown();
            };
            let synchronous =
                mqd_model::calls::canonical(call).is_some_and(|c| c.name == "MPI_Ssend");
            match class {
                CallClass::BlockingReceive => receive_need(index, r, &comm, args.peer, args.tag),
                CallClass::BlockingSend => {
                    send_need(index, r, &comm, args.peer, args.tag, synchronous)
                }
                _ => send_need(index, r, &comm, args.peer, args.tag, false).and(receive_need(
                    index,
                    r,
                    &comm,
                    args.recv_peer,
                    args.recv_tag,
                )),
            }
        }
        CallClass::Wait => match args {
            Some(args) => {
                let all = matches!(call, "MPI_Wait" | "MPI_Waitall");
                requests_need(index, r, &args.requests, all)
            }
            None => Need::unknown(),
        },
        _ => Need::unknown(),
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnose::diagnose;
    use mqd_model::{
        CallArguments, Communicator, ContextIds, Doubt, JobDump, MpiPhase, MpiState, Operation,
        Queue, RankDump, ThreadLevel, ThreadStack, Verdict,
    };

    const WORLD: u64 = 0x1000;

    fn comm(unique_id: u64, name: &str, context: i64, rank: i32, n: i32) -> Communicator {
        Communicator {
            unique_id,
            name: name.into(),
            size: i64::from(n),
            local_rank: i64::from(rank),
            context: Some(ContextIds {
                context_id: context,
                recv_context_id: context,
            }),
            group: Some((0..n).collect()),
            group_error: None,
            pending_receives: Queue::Operations(Vec::new()),
            unexpected_messages: Queue::Operations(Vec::new()),
            pending_sends: Queue::Operations(Vec::new()),
        }
    }

    fn op(peer: i64, tag: i64) -> Operation {
        Operation::pending(peer, tag)
    }

    fn thread(tid: i32, frames: &[&str], call: Option<CallArguments>) -> ThreadStack {
        ThreadStack::named(tid, frames, call)
    }

    /// Blocked in `call` on COMM_WORLD with `peer` and `tag`.
    fn blocked(tid: i32, call: &str, peer: i64, tag: i64) -> ThreadStack {
        thread(
            tid,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("P{call}"),
                comm_address: Some(WORLD),
                peer: Some(peer),
                tag: Some(tag),
                ..CallArguments::default()
            }),
        )
    }

    fn rank(r: i32, n: i32, threads: Vec<ThreadStack>) -> RankDump {
        RankDump {
            pid: Some(100 + r),
            threads,
            outcome: Ok(vec![comm(WORLD, "MPI_COMM_WORLD", 0, r, n)]),
            ..RankDump::unread(r, Some(100 + r), None)
        }
    }

    fn job(ranks: Vec<RankDump>) -> JobDump {
        JobDump::of_ranks(ranks)
    }

    /// Ranks 0 and 1 blocked in MPI_Recv from each other (receives ch3's debug queues
    /// never list: the waits come from the calls).
    fn recv_pair() -> JobDump {
        job((0..2)
            .map(|r| {
                rank(
                    r,
                    2,
                    vec![blocked(100 + r, "MPI_Recv", i64::from(1 - r), 7)],
                )
            })
            .collect())
    }

    #[test]
    fn unlisted_blocking_receives_wait_as_their_calls_say() {
        let d = diagnose(&recv_pair());
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert_eq!(d.possibly_deadlocked.to_string(), "0,1");
        assert!(
            d.waits
                .iter()
                .all(|w| w.call.as_deref() == Some("MPI_Recv"))
        );
        // A message on its way to rank 0 (its sender lists it) frees it, and so rank 1.
        let mut j = recv_pair();
        if let Ok(comms) = &mut j.ranks[1].outcome {
            comms[0].pending_sends = Queue::Operations(vec![op(0, 7)]);
        }
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
    }

    #[test]
    fn an_unknown_call_leaves_its_rank_unknown() {
        let j = job(vec![
            rank(
                0,
                2,
                vec![thread(100, &["poll", "MPI_Frobnicate", "main"], None)],
            ),
            rank(1, 2, vec![thread(101, &["solve", "main"], None)]),
        ]);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert!(
            d.doubts.iter().any(
                |x| matches!(x, Doubt::UnknownPlaces { example, .. } if example == "MPI_Frobnicate")
            ),
            "{:?}",
            d.doubts
        );
    }

    #[test]
    fn communicators_are_told_apart_by_their_context_ids() {
        // Two duplicates of COMM_WORLD, both unnamed and of size 2: rank 1's message on
        // the first waits unexpected at rank 0, which receives on the second.
        let dups = |r: i32| {
            let mut a = comm(0x2000, "", 48, r, 2);
            let mut b = comm(0x3000, "", 64, r, 2);
            if r == 0 {
                let mut m = op(1, 5);
                m.system_buffer = true;
                a.unexpected_messages = Queue::Operations(vec![m]);
                b.pending_receives = Queue::Operations(vec![op(1, 5)]);
            }
            vec![comm(WORLD, "MPI_COMM_WORLD", 0, r, 2), a, b]
        };
        let mut j = job((0..2).map(|r| rank(r, 2, Vec::new())).collect());
        for r in &mut j.ranks {
            r.outcome = Ok(dups(r.rank));
        }
        let d = diagnose(&j);
        let kinds: Vec<_> = d.findings.iter().map(|f| f.kind).collect();
        assert!(
            kinds.contains(&mqd_model::FindingKind::CommunicatorMismatch),
            "{kinds:?}"
        );
        assert!(
            !kinds.contains(&mqd_model::FindingKind::InTransit),
            "{kinds:?}"
        );
    }

    #[test]
    fn only_threads_that_may_call_mpi_move_their_rank() {
        // Main threads in MPI_Recv on each other; each rank has a worker computing.
        let with_worker = |level: Option<ThreadLevel>| {
            let mut j = recv_pair();
            for r in &mut j.ranks {
                r.threads.push(thread(
                    900 + r.rank,
                    &["compute", "worker", "start_thread"],
                    None,
                ));
                r.mpi = MpiState {
                    phase: Some(MpiPhase::Initialized),
                    thread_level: level,
                };
            }
            j
        };
        // MPI_THREAD_MULTIPLE: the workers may send: no deadlock.
        let d = diagnose(&with_worker(Some(ThreadLevel::Multiple)));
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
        // FUNNELED: they may not; unknown: they may or may not.
        for level in [Some(ThreadLevel::Funneled), None] {
            let d = diagnose(&with_worker(level));
            assert_eq!(d.verdict, Verdict::Undetermined, "{level:?}");
            assert_eq!(d.possibly_deadlocked.to_string(), "0,1", "{level:?}");
        }
        // A main thread waiting for its own workers, which are blocked in MPI: not
        // running.
        let mut j = recv_pair();
        for r in &mut j.ranks {
            let worker = r.threads.remove(0);
            r.threads = vec![
                thread(
                    r.pid.unwrap_or(0),
                    &["futex_wait", "___pthread_cond_wait", "main"],
                    None,
                ),
                worker,
            ];
        }
        let d = diagnose(&j);
        assert_eq!(d.possibly_deadlocked.to_string(), "0,1");
        assert!(
            d.findings
                .iter()
                .all(|f| !matches!(f.subject, mqd_model::Subject::NoDeadlock { .. }))
        );
    }

    #[test]
    fn a_receive_from_a_finalized_rank_never_completes() {
        let mut j = job(vec![
            rank(0, 2, vec![blocked(100, "MPI_Recv", 1, 7)]),
            rank(1, 2, vec![thread(101, &["nanosleep", "main"], None)]),
        ]);
        j.ranks[1].mpi.phase = Some(MpiPhase::Finalized);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        assert_eq!(d.deadlocked.to_string(), "0");
        // Inside MPI_Finalize, not past it: its messages may be on their way.
        j.ranks[1].mpi.phase = Some(MpiPhase::Initialized);
        j.ranks[1].threads = vec![thread(101, &["poll", "MPI_Finalize", "main"], None)];
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
    }

    #[test]
    fn a_collectives_own_messages_show_the_collective() {
        // No stacks: rank 0 lists a collective's receive from rank 1.
        let mut j = job((0..2).map(|r| rank(r, 2, Vec::new())).collect());
        if let Ok(comms) = &mut j.ranks[0].outcome {
            let mut internal = op(1, -10);
            internal.collective = true;
            comms[0].pending_receives = Queue::Operations(vec![internal]);
        }
        let d = diagnose(&j);
        assert!(
            d.waits
                .iter()
                .any(|w| w.kind == mqd_model::WaitKind::Collective && w.from == 0),
            "{:?}",
            d.waits
        );
        // It is no point-to-point receive.
        assert!(
            d.waits
                .iter()
                .all(|w| w.kind != mqd_model::WaitKind::Receive)
        );
    }

    /// A stock MPI's rank (no queues): one thread as given.
    fn stock(r: i32, thread: ThreadStack) -> RankDump {
        RankDump {
            threads: vec![thread],
            ..RankDump::unread(r, Some(100 + r), None)
        }
    }

    /// Ranks 0 and 1 in MPI_Barrier on their columns {0, 2} and {1, 3} (one split: one
    /// context id), their members read from the library's objects; ranks 2 and 3 as
    /// `other` says.
    fn columns(other: impl Fn(i32) -> ThreadStack) -> JobDump {
        let barrier = |r: i32| {
            let members = vec![r, r + 2];
            thread(
                100 + r,
                &["poll", "MPI_Barrier", "main"],
                Some(CallArguments {
                    function: "MPI_Barrier (the caller's call)".into(),
                    comm: Some(0x8400_0001),
                    context_id: Some(480),
                    members: Some(members),
                    bytes: Some(0),
                    ..CallArguments::default()
                }),
            )
        };
        let mut j = job(vec![
            stock(0, barrier(0)),
            stock(1, barrier(1)),
            stock(2, other(2)),
            stock(3, other(3)),
        ]);
        j.job_size = Some(4);
        j
    }

    #[test]
    fn a_collective_on_a_communicator_known_by_its_members_waits_for_those_not_in_it() {
        let d = diagnose(&columns(|r| {
            thread(100 + r, &["nanosleep", "compute", "main"], None)
        }));
        let mut waits: Vec<(i32, String)> = d
            .waits
            .iter()
            .map(|w| (w.from, format!("{:?}", w.target)))
            .collect();
        waits.sort();
        assert_eq!(
            waits,
            vec![(0, "Rank(2)".to_owned()), (1, "Rank(3)".to_owned())],
            "{:?}",
            d.waits
        );
        // The two columns share a context id and are still two communicators.
        assert_ne!(d.waits[0].comm, d.waits[1].comm);
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.findings);
        // Their other members waiting for them on COMM_WORLD: a possible deadlock.
        let d = diagnose(&columns(|r| {
            thread(
                100 + r,
                &["poll", "MPI_Recv", "main"],
                Some(CallArguments {
                    function: "MPI_Recv (the caller's call)".into(),
                    comm: Some(mqd_scale::shared::COMM_WORLD_HANDLE),
                    peer: Some(i64::from(r - 2)),
                    tag: Some(1),
                    bytes: Some(4),
                    ..CallArguments::default()
                }),
            )
        }));
        assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
        assert_eq!(d.possibly_deadlocked.to_string(), "0-3");
        // A member list without this rank names nothing.
        let mut j = columns(|r| thread(100 + r, &["nanosleep", "compute", "main"], None));
        if let Some(call) = &mut j.ranks[0].threads[0].call {
            call.members = Some(vec![1, 3]);
        }
        assert_eq!(diagnose(&j).verdict, Verdict::Undetermined);
    }
}
