//! The diagnosis of a job of classes ([`ClassJob`]): what each class's ranks wait for is
//! read once from its first and last members, written as rules over rank sets, and the
//! proof's and the worst reading's deadlocked sets are computed by rank-set arithmetic
//! ([`Classes`]). Nothing costs a node per rank: a ring of a million ranks is one class
//! and one rule.
//!
//! It follows the states a hang at scale mostly shows, as the per-rank analysis reads
//! them: threads running, waiting for their own process, in a blocking receive, send or
//! `MPI_Sendrecv` (a peer its members name alike: the same rank, or the same distance
//! around the job), in one blocking collective on `MPI_COMM_WORLD` (waiting for the
//! members not in it), ranks without stacks, and the queues ([`queues`]): posted
//! receives, unexpected messages and pending sends, matched as the per-rank scan matches
//! them. Calls and queues on communicators whose members are the job's ranks in order
//! are followed (`MPI_COMM_WORLD`, its duplicates). Any other state (request waits,
//! other communicators, finalized ranks...) is not guessed at: its ranks are named in a
//! doubt, and the verdict is undetermined. Where it follows every class, it reaches the
//! per-rank analysis's verdict, doubts, sets, collective and clean findings (checked on
//! random jobs by a property test, and on every in-process diagnosis test of `mqd`).

mod queues;

use crate::classes::{ClassAlternative, ClassPlan, Classes, Rule};
use crate::collectives::place;
use crate::locations::main_thread;
use crate::plan::{ANY_TAG, call_comm, is_world, rooted};
use mqd_model::diagnosis::{Doubt, Verdict};
use mqd_model::{
    CallArguments, CallClass, Certainty, ClassJob, ClassPeer, CommKey, Finding, FindingKind,
    Location, RankDump, RankSet, Subject, ThreadLevel, ThreadStack,
};
use queues::{ClassQueues, Matching, Peer, image, reaching, refine, same_rank};
use std::collections::BTreeMap;

/// What the class analysis concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassDiagnosis {
    /// The verdict.
    pub verdict: Verdict,
    /// Why it is not "no deadlock", as the per-rank analysis says it.
    pub doubts: Vec<Doubt>,
    /// Ranks proven deadlocked.
    pub deadlocked: RankSet,
    /// Ranks deadlocked in the worst reading.
    pub possibly_deadlocked: RankSet,
    /// Ranks their stacks show running.
    pub running: RankSet,
    /// Ranks in a state this analysis does not follow, each set with why.
    pub not_followed: Vec<(RankSet, String)>,
    /// What the per-rank analysis finds of the collective and of a job with nothing
    /// held, computed by class: the ranks in the collective on `MPI_COMM_WORLD` and
    /// where the others are; that nothing waits. Only where every class is followed.
    pub findings: Vec<Finding>,
    /// The ranks of the worst reading, by what they wait for: a ring of a million
    /// ranks each waiting for its right neighbour is one entry.
    pub held: Vec<HeldClass>,
    /// The deadlocked sets' parts, proven ones first, as the per-rank analysis's
    /// deadlock findings split them: ranks on cycles, in knots, blocked behind. `None`
    /// when they were not worked out (a set of more than 65,536 ranks whose waits are
    /// not each one neighbour's).
    pub deadlocks: Option<Vec<FindingRanks>>,
    /// What the per-rank analysis finds of the queues, by kind: messages in transit,
    /// receives a message would match but for its tag, source or communicator, ranks
    /// waited for that have nothing pending, the summary of waits that deadlock nobody.
    pub queue_findings: Vec<FindingRanks>,
}

/// The ranks of a finding of the class analysis (of a deadlocked set: by their part in
/// it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingRanks {
    /// Its kind: of a deadlocked set, `DeadlockCycle` (one or more simple cycles),
    /// `DeadlockKnot` (one strongly connected set that is no simple cycle) or
    /// `BlockedByDeadlock`.
    pub kind: FindingKind,
    /// Proven, or only in the worst reading.
    pub certainty: Certainty,
    /// The ranks.
    pub ranks: RankSet,
}

/// Ranks of the worst reading that wait for the same, each relative to itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldClass {
    /// The ranks.
    pub ranks: RankSet,
    /// Each blocked call (its name, or the queue's operation) and what holds it.
    pub waits: Vec<(String, HeldBy)>,
}

/// What a blocked call of a [`HeldClass`] waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeldBy {
    /// Each rank's `k`-th right neighbour, around the job.
    Neighbour(u32),
    /// This rank.
    Rank(u32),
    /// Any rank (a receive from any source).
    AnyRank,
    /// One of these ranks: the members not in the collective, the destinations of a
    /// rank's messages.
    Outside(RankSet),
}

/// The set `AllOf` rules of any-source receives name: every rank of the job.
const WORLD: usize = 0;

/// A blocked thread of a class's first member, as the rule it becomes.
enum Need {
    /// Returns: the rank goes on.
    Proceeds,
    /// In a blocking point-to-point call.
    PointToPoint(PointToPoint),
    /// In this collective on `MPI_COMM_WORLD`.
    Collective(String, Option<i64>, Option<u64>),
    /// In `MPI_Wait` or `MPI_Waitall` (thread `tid`): every request's operation.
    Wait(usize),
    /// Not followed here (why).
    Other(String),
}

/// What a request a thread waits for is, in its class's queues.
#[derive(Debug, Clone, Copy)]
enum Request {
    /// An operation complete or matched: it returns.
    Done,
    /// The class's receive at this index.
    Receive(usize),
    /// The class's send at this index.
    Send(usize),
}

/// The requests thread `tid` of a class's first and last members waits for, as the
/// class's operations: the same operation in both, or not followed.
fn requests_of(
    first: &RankDump,
    last: Option<&RankDump>,
    tid: usize,
    q: &ClassQueues,
) -> Result<Vec<Request>, String> {
    let of = |r: &RankDump| -> Vec<Option<u64>> {
        r.threads
            .get(tid)
            .and_then(|t| t.call.as_ref())
            .map(|c| c.requests.clone())
            .unwrap_or_default()
    };
    let unknown = || String::from("waits for requests not known");
    let (a, b) = (of(first), last.map(of));
    if a.is_empty() || b.as_ref().is_some_and(|b| b.len() != a.len()) {
        return Err(unknown());
    }
    let mut out = Vec::new();
    for (k, request) in a.iter().enumerate() {
        let r0 = request.ok_or_else(unknown)?;
        let r1 = match &b {
            Some(b) => Some(b[k].ok_or_else(unknown)?),
            None => None,
        };
        // As the per-rank index: done first, then receives, then sends.
        let done = (q.done.0.contains(&r0), r1.map(|r| q.done.1.contains(&r)));
        let same = |op: &queues::ClassOp| op.request == (Some(r0), r1);
        out.push(match done {
            (true, None | Some(true)) => Request::Done,
            (true, Some(false)) | (false, Some(true)) => return Err(unknown()),
            _ => match q.receives.iter().position(same) {
                Some(r) => Request::Receive(r),
                None => match q.sends.iter().position(same) {
                    Some(i) => Request::Send(i),
                    None => return Err("waits for requests not in their own queues".into()),
                },
            },
        });
    }
    Ok(out)
}

/// A blocking point-to-point call's peers, with their tags.
#[derive(Clone, Copy)]
struct PointToPoint {
    /// Its communicator (an index into the job's table).
    comm: usize,
    /// The receive's source, its tag (`None`: any or not known) and whether the tag is
    /// known.
    receive: Option<(Peer, Option<i64>, bool)>,
    /// The send's destination, and its tag.
    send: Option<(Peer, i64)>,
    /// `MPI_Ssend`: it returns only once a receive matched it.
    synchronous: bool,
}

/// What one class's ranks do.
enum State {
    Running,
    /// No stack: it may be anywhere; its pending operations are what it may wait for.
    NoStacks,
    SelfBlocked,
    Waiting {
        needs: Vec<Need>,
        /// The call of each need.
        calls: Vec<String>,
        unknown: Option<String>,
        /// A thread that might call MPI now, or a place unknown: in no proof.
        maybe_free: bool,
    },
    NotFollowed(String),
}

fn kind(t: &ThreadStack, program: Option<&str>) -> Result<Option<(String, CallClass)>, String> {
    match t.location_in(program) {
        Location::Outside { waits: Some(_), .. } | Location::MpiThread => Ok(None),
        Location::Outside { .. } => Err(String::new()),
        Location::Unknown => Err("a stack that could not be followed".into()),
        Location::InMpi { call, class } => match class.blocks() {
            None => Err(call),
            Some(false) => Err(String::new()),
            Some(true) => Ok(Some((call, class))),
        },
    }
}

/// Which peer of a point-to-point call a rule is made of.
#[derive(Clone, Copy)]
enum Side {
    /// The source of a receive (any source allowed).
    Source,
    /// The destination of a send.
    Destination,
    /// The source of `MPI_Sendrecv`'s receive.
    SendrecvSource,
}

/// The communicator of thread `tid`'s call in a class's first and last members: an
/// index into `comms`, where its members are the job's ranks in order and it is the
/// same in both.
fn comm_index(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    comms: &mut Vec<CommKey>,
) -> Result<usize, String> {
    let of = |r: &RankDump| {
        let args = r.threads.get(tid)?.call.as_ref()?;
        call_comm(r, args, n)
    };
    let other = || String::from("calls on communicators other than the job's ranks in order");
    let (key, in_order) = of(first).ok_or_else(other)?;
    if !in_order || last.is_some_and(|l| of(l) != Some((key.clone(), true))) {
        return Err(other());
    }
    Ok(match comms.iter().position(|k| *k == key) {
        Some(i) => i,
        None => {
            comms.push(key);
            comms.len() - 1
        }
    })
}

/// The peer a blocking point-to-point call waits for, as every member of the class
/// names it: `Ok(None)` when it needs nobody (`MPI_PROC_NULL`).
fn peer_rule(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    side: Side,
) -> Result<Option<Peer>, String> {
    let peer_of = |r: &RankDump| -> Option<(i64, i64)> {
        let args: &CallArguments = r.threads.get(tid)?.call.as_ref()?;
        let peer = match side {
            Side::Source | Side::Destination => args.peer?,
            Side::SendrecvSource => args.recv_peer?,
        };
        (!args.function.contains("Mrecv")).then_some((peer, r.rank.into()))
    };
    let unknown = || String::from("calls whose communicator or peer is not known");
    let first = peer_of(first).ok_or_else(unknown)?;
    let last = match last {
        Some(last) => Some(peer_of(last).ok_or_else(unknown)?),
        None => None,
    };
    match ClassPeer::of(first, last, n) {
        Some(ClassPeer::Null) => Ok(None),
        Some(ClassPeer::Any) if matches!(side, Side::Destination) => {
            Err("sends to MPI_ANY_SOURCE".into())
        }
        _ => Peer::of(first, last, n).map(Some),
    }
}

/// The tag of a class's call, the same in its first and last members.
fn tag_of(
    first: &RankDump,
    last: Option<&RankDump>,
    tid: usize,
    pick: fn(&CallArguments) -> Option<i64>,
) -> Result<Option<i64>, String> {
    let tag = |r: &RankDump| r.threads.get(tid)?.call.as_ref().and_then(pick);
    let t0 = tag(first);
    match last.map(tag) {
        Some(t1) if t1 != t0 => Err("calls whose tags differ across the class".into()),
        _ => Ok(t0),
    }
}

/// What a blocking point-to-point call needs: its receive's source and its send's
/// destination (`MPI_PROC_NULL` needs nobody).
fn point_to_point(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    (call, class): (&str, CallClass),
    comms: &mut Vec<CommKey>,
) -> Need {
    let (receive, send) = match class {
        CallClass::BlockingReceive => (Some(Side::Source), None),
        CallClass::BlockingSend => (None, Some(Side::Destination)),
        _ => (Some(Side::SendrecvSource), Some(Side::Destination)),
    };
    let comm = match comm_index(first, last, n, tid, comms) {
        Ok(c) => c,
        Err(why) => return Need::Other(why),
    };
    let mut p2p = PointToPoint {
        comm,
        receive: None,
        send: None,
        synchronous: mqd_model::calls::canonical(call).is_some_and(|c| c.name == "MPI_Ssend"),
    };
    if let Some(side) = receive {
        let pick = match side {
            Side::SendrecvSource => |a: &CallArguments| a.recv_tag,
            _ => |a: &CallArguments| a.tag,
        };
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, pick),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(peer), Ok(tag)) => {
                p2p.receive = peer.map(|p| (p, tag.filter(|&t| t != ANY_TAG), tag.is_some()));
            }
        }
    }
    if let Some(side) = send {
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, |a| a.tag),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(None), _) => {}
            (Ok(Some(_)), Ok(None)) => return Need::Other("sends whose tag is not known".into()),
            (Ok(Some(peer)), Ok(Some(tag))) => p2p.send = Some((peer, tag)),
        }
    }
    match p2p {
        PointToPoint {
            receive: None,
            send: None,
            ..
        } => Need::Proceeds,
        _ => Need::PointToPoint(p2p),
    }
}

fn state_of(first: &RankDump, last: Option<&RankDump>, n: u32, comms: &mut Vec<CommKey>) -> State {
    if first.outcome.is_err() {
        return State::NotFollowed("ranks whose queues could not be read".into());
    }
    if first.mpi.phase == Some(mqd_model::MpiPhase::Finalized) {
        return State::NotFollowed("ranks that finalized".into());
    }
    if first.threads.is_empty() {
        return State::NoStacks;
    }
    let program = first.executable.as_deref();
    let mut free = false;
    let mut unknown = None;
    let mut blocked = Vec::new();
    for (i, t) in first.threads.iter().enumerate() {
        match kind(t, program) {
            Ok(None) => {}
            Ok(Some(call)) => blocked.push((i, call)),
            Err(what) if what.is_empty() => free = true,
            Err(what) => {
                unknown.get_or_insert(what);
            }
        }
    }
    let in_mpi = !blocked.is_empty() || unknown.is_some();
    let level = first.mpi.thread_level;
    if free && (!in_mpi || level == Some(ThreadLevel::Multiple)) {
        return State::Running;
    }
    if blocked.is_empty() && unknown.is_none() && !free {
        return State::SelfBlocked;
    }
    let maybe_free = unknown.is_some()
        || (free && (level.is_none_or(|l| l == ThreadLevel::Multiple) || !in_mpi));
    let calls = blocked.iter().map(|(_, (call, _))| call.clone()).collect();
    let needs = blocked
        .into_iter()
        .map(|(i, (call, class))| {
            let args = first.threads[i].call.as_ref();
            match class {
                CallClass::BlockingReceive | CallClass::BlockingSend | CallClass::SendReceive => {
                    point_to_point(first, last, n, i, (&call, class), comms)
                }
                CallClass::Wait if matches!(call.as_str(), "MPI_Wait" | "MPI_Waitall") => {
                    Need::Wait(i)
                }
                CallClass::Collective => match args {
                    Some(a) if is_world(a) && !(rooted(&call) && a.root.is_none()) => {
                        let name = mqd_model::calls::canonical(&call)
                            .map_or_else(|| call.clone(), |c| c.name.to_owned());
                        Need::Collective(name, a.root, a.bytes)
                    }
                    _ => Need::Other("collectives on other communicators".into()),
                },
                _ => Need::Other(format!("ranks in {call}")),
            }
        })
        .collect();
    State::Waiting {
        needs,
        calls,
        unknown,
        maybe_free,
    }
}

/// The rule a peer is for the deadlock sets.
fn rule(peer: Peer) -> Rule {
    match peer {
        Peer::Off(k) => Rule::Offset(k),
        Peer::Abs(p) => Rule::Fixed(p),
        Peer::Any => Rule::AllOf(WORLD),
    }
}

/// The job's classes as the queues' matching sees them.
struct Job<'a> {
    n: u32,
    /// Each class's ranks and queues (`None`: not followed).
    classes: Vec<(&'a RankSet, Option<ClassQueues>)>,
    /// Index of each followed class in the matching.
    matched: Vec<Option<usize>>,
    matching: Matching,
    /// Receives posted by threads in their calls: ranks, communicator, source, tag.
    called: Vec<(&'a RankSet, usize, Peer, Option<i64>)>,
}

impl Job<'_> {
    fn queues(&self) -> impl Iterator<Item = (usize, &RankSet, &ClassQueues)> {
        self.classes
            .iter()
            .enumerate()
            .filter_map(|(ci, (ranks, q))| Some((self.matched[ci]?, *ranks, q.as_ref()?)))
    }

    /// Members of `members` (of class index `mi` in the matching) whose receive from
    /// `source` with `tag` on `comm` proceeds: a listed receive of theirs a message
    /// takes, or (the tag known) a message to them it takes.
    fn receive_proceeds(
        &self,
        mi: Option<usize>,
        q: Option<&ClassQueues>,
        members: &RankSet,
        comm: usize,
        (source, tag, known): (Peer, Option<i64>, bool),
    ) -> RankSet {
        let n = self.n;
        let mut done = RankSet::new();
        let (Some(mi), Some(q)) = (mi, q) else {
            return done;
        };
        let m = &self.matching;
        // The first listed receive with the call's source and tag is the call's own.
        let mut left = members.clone();
        for (r, recv) in q.receives.iter().enumerate() {
            if recv.comm == comm && recv.tag == tag {
                let same = same_rank(recv.peer, source, &left, n);
                done.union_with(&same.intersection(&m.receive_taken[mi][r]));
                left = left.difference(&same);
            }
        }
        if !known {
            return done;
        }
        let takes = |t: Option<i64>| tag.is_none_or(|x| Some(x) == t);
        for (j, u) in q.unexpected.iter().enumerate() {
            if u.comm == comm && takes(u.tag) {
                let from = match source {
                    Peer::Any => members.clone(),
                    _ => same_rank(u.peer, source, members, n),
                };
                done.union_with(&from.difference(&m.unexpected_taken[mi][j]));
            }
        }
        for (qi, ranks, sq) in self.queues() {
            for (i, s) in sq.sends.iter().enumerate() {
                if s.comm != comm || !takes(s.tag) {
                    continue;
                }
                let open = ranks
                    .difference(&m.send_paired[qi][i])
                    .difference(&m.send_taken[qi][i]);
                let to = match source {
                    Peer::Any => image(&open, s.peer, n).intersection(members),
                    _ => reaching(members, source, &open, s.peer, n),
                };
                done.union_with(&to);
            }
        }
        done
    }

    /// Members of `members` whose send to `dest` with `tag` on `comm` a receive at the
    /// destination takes (listed and not taken, or posted by a thread in its call).
    fn send_taken(&self, members: &RankSet, comm: usize, (dest, tag): (Peer, i64)) -> RankSet {
        let n = self.n;
        let mut done = RankSet::new();
        for (qi, ranks, q) in self.queues() {
            for (r, recv) in q.receives.iter().enumerate() {
                if recv.comm == comm && recv.tag.is_none_or(|t| t == tag) {
                    let open = ranks.difference(&self.matching.receive_taken[qi][r]);
                    done.union_with(&reaching(members, dest, &open, recv.peer, n));
                }
            }
        }
        for &(ranks, c, source, t) in &self.called {
            if c == comm && t.is_none_or(|t| t == tag) {
                done.union_with(&reaching(members, dest, ranks, source, n));
            }
        }
        done
    }

    /// Members of `members` whose send to `dest` with `tag` is proven to wait: its
    /// message waits unexpected at the destination, not taken, and the send is
    /// synchronous or the library says its sender waits. And those of them whose
    /// sender does not list that message (weak evidence: it holds nothing at the rank
    /// itself).
    fn send_proven(
        &self,
        members: &RankSet,
        comm: usize,
        (dest, tag): (Peer, i64),
        synchronous: bool,
    ) -> (RankSet, RankSet) {
        let mut left = members.clone();
        let mut proven = RankSet::new();
        let mut weak = RankSet::new();
        for (qi, ranks, q) in self.queues() {
            for (j, u) in q.unexpected.iter().enumerate() {
                if u.comm != comm || u.tag != Some(tag) {
                    continue;
                }
                let open = ranks.difference(&self.matching.unexpected_taken[qi][j]);
                // The first such message at the destination is the one its sender sees.
                let hit = reaching(&left, dest, &open, u.peer, self.n);
                if synchronous || u.sender_waits {
                    let paired = &self.matching.unexpected_paired[qi][j];
                    let listed = reaching(&hit, dest, paired, Peer::Any, self.n);
                    weak.union_with(&hit.difference(&listed));
                    proven.union_with(&hit);
                }
                left = left.difference(&hit);
            }
        }
        (proven, weak)
    }

    /// For each request of a wait of class `mi`'s `members`: the rule of its
    /// operation's peer, the members for which it is done (taken, or complete), and
    /// those for which its wait is proven (a send whose message waits unexpected at its
    /// destination, whose library says the sender waits).
    fn request_sets(
        &self,
        mi: usize,
        q: &ClassQueues,
        members: &RankSet,
        items: &[Request],
    ) -> Vec<(Rule, RankSet, RankSet)> {
        let m = &self.matching;
        items
            .iter()
            .map(|item| match *item {
                Request::Done => (Rule::Never, members.clone(), RankSet::new()),
                Request::Receive(r) => (
                    rule(q.receives[r].peer),
                    members.intersection(&m.receive_taken[mi][r]),
                    RankSet::new(),
                ),
                Request::Send(i) => {
                    let taken = members.intersection(&m.send_taken[mi][i]);
                    let mut proven = RankSet::new();
                    for (_, _, ci, j, senders) in m.pairs.iter().filter(|p| (p.0, p.1) == (mi, i)) {
                        if self.classes_queues(*ci).unexpected[*j].sender_waits {
                            proven.union_with(senders);
                        }
                    }
                    (
                        rule(q.sends[i].peer),
                        taken.clone(),
                        proven.difference(&taken),
                    )
                }
            })
            .collect()
    }

    /// The waits of the members of class `ci` without stacks, by piece: each pending
    /// operation of theirs no receive takes, each message of theirs waiting unexpected
    /// that none takes (unless its sender went on), each posted receive that takes none.
    fn queue_rules(&self, ci: usize, sets: &mut Vec<RankSet>) -> Vec<(RankSet, ClassAlternative)> {
        let n = self.n;
        let (members, q) = (&self.classes[ci].0, self.classes[ci].1.as_ref());
        let (Some(mi), Some(q)) = (self.matched[ci], q) else {
            return vec![((*members).clone(), ClassAlternative::default())];
        };
        let m = &self.matching;
        // (members, rule, whether it rests on weak evidence only)
        let mut conditions: Vec<(RankSet, Rule, bool)> = Vec::new();
        for (i, s) in q.sends.iter().enumerate() {
            conditions.push((
                members.difference(&m.send_taken[mi][i]),
                rule(s.peer),
                false,
            ));
        }
        for (r, recv) in q.receives.iter().enumerate() {
            let open = members.difference(&m.receive_taken[mi][r]);
            conditions.push((open, rule(recv.peer), false));
        }
        if !q.lists_every_send {
            for (di, ranks, dq) in self.queues() {
                for (j, u) in dq.unexpected.iter().enumerate() {
                    if u.sender_free {
                        continue;
                    }
                    let open = ranks
                        .difference(&m.unexpected_taken[di][j])
                        .difference(&m.unexpected_paired[di][j]);
                    let senders = image(&open, u.peer, n).intersection(members);
                    if senders.is_empty() {
                        continue;
                    }
                    // A message waiting at its own sender holds nothing (weak).
                    let held = match u.peer {
                        Peer::Off(k) if k % n == 0 => Rule::Never,
                        Peer::Off(k) => Rule::Offset(n - k % n),
                        Peer::Abs(p) => {
                            let to = open.difference(&RankSet::single(p));
                            match (to.first(), to.len()) {
                                (None, _) => Rule::Never,
                                (Some(t), 1) => Rule::Fixed(t),
                                _ => {
                                    sets.push(to);
                                    Rule::AnyIn(sets.len() - 1)
                                }
                            }
                        }
                        Peer::Any => Rule::Never,
                    };
                    conditions.push((senders, held, true));
                }
            }
        }
        let by: Vec<RankSet> = conditions.iter().map(|(s, ..)| s.clone()).collect();
        refine(vec![(*members).clone()], &by)
            .into_iter()
            .map(|piece| {
                let at = piece.first().unwrap_or(0);
                let here = || conditions.iter().filter(|(s, ..)| s.contains(at));
                let mut rules: Vec<Rule> = here().map(|&(_, r, _)| r).collect();
                rules.sort_unstable();
                rules.dedup();
                let strong: Vec<Rule> = here().filter(|c| !c.2).map(|&(_, r, _)| r).collect();
                let mut weak: Vec<Rule> = here()
                    .filter(|c| c.2 && !strong.contains(&c.1))
                    .map(|&(_, r, _)| r)
                    .collect();
                weak.sort_unstable();
                weak.dedup();
                let alternative = ClassAlternative {
                    rules,
                    unknown: false,
                    weak,
                };
                (piece, alternative)
            })
            .collect()
    }

    /// What the queues hold, as the per-rank scan's waits and facts say it.
    fn queue_facts(&self) -> QueueFacts {
        let n = self.n;
        let m = &self.matching;
        let mut f = QueueFacts::default();
        let every_send: Vec<&RankSet> = self
            .classes
            .iter()
            .filter(|(_, q)| q.as_ref().is_some_and(|q| q.lists_every_send))
            .map(|(r, _)| *r)
            .collect();
        // A wait of `from` for `peer(from)`, not counting a rank waiting for itself.
        let waits_for = |from: &RankSet, peer: Peer, f: &mut QueueFacts| {
            if from.is_empty() {
                return;
            }
            f.waiting.union_with(from);
            match peer {
                Peer::Any => f.any_waiting.union_with(from),
                Peer::Off(k) if k % n == 0 => {}
                Peer::Off(_) => f.waited.union_with(&image(from, peer, n)),
                Peer::Abs(p) if !from.difference(&RankSet::single(p)).is_empty() => {
                    f.waited.insert(p);
                }
                Peer::Abs(_) => {}
            }
        };
        for (mi, ranks, q) in self.queues() {
            if q.transit {
                f.in_transit.union_with(ranks);
                f.transit.union_with(ranks);
            }
            for (i, s) in q.sends.iter().enumerate() {
                waits_for(&ranks.difference(&m.send_taken[mi][i]), s.peer, &mut f);
                f.transit.union_with(&m.send_taken[mi][i]);
            }
            for (r, recv) in q.receives.iter().enumerate() {
                let taken = &m.receive_taken[mi][r];
                f.in_transit.union_with(taken);
                f.transit.union_with(taken);
                waits_for(&ranks.difference(taken), recv.peer, &mut f);
            }
            for (j, u) in q.unexpected.iter().enumerate() {
                // A message taken: its sender's transit too.
                f.transit
                    .union_with(&image(&m.unexpected_taken[mi][j], u.peer, n));
                if u.sender_free {
                    continue;
                }
                // An unpaired message nobody takes: its sender waits for its destination.
                let open = ranks
                    .difference(&m.unexpected_taken[mi][j])
                    .difference(&m.unexpected_paired[mi][j]);
                let mut senders = image(&open, u.peer, n);
                every_send
                    .iter()
                    .for_each(|r| senders = senders.difference(r));
                if senders.is_empty() {
                    continue;
                }
                // The destinations of the senders that wait.
                let back = match u.peer {
                    Peer::Off(k) => Peer::Off((n - k % n) % n),
                    _ => Peer::Any,
                };
                let at = match u.peer {
                    Peer::Off(_) => image(&senders, back, n),
                    _ => open.clone(),
                };
                f.waiting.union_with(&senders);
                let to_others = match u.peer {
                    Peer::Off(k) if k % n == 0 => RankSet::new(),
                    Peer::Abs(p) => at.difference(&RankSet::single(p)),
                    _ => at,
                };
                f.waited.union_with(&to_others);
            }
        }
        f.mismatched = self.mismatches();
        f
    }

    /// Ranks with a receive nobody's message takes that a message waiting for it would
    /// match but for its tag, its source or its communicator, by kind: as the per-rank
    /// scan examines them, the messages to the rank in its order (waiting unexpected,
    /// then sends by their senders' ranks), the first four that mismatch. Worked out for
    /// the first member of each piece of the class to which the same messages come.
    fn mismatches(&self) -> BTreeMap<FindingKind, RankSet> {
        const PER_RECEIVE: usize = 4;
        let n = self.n;
        let m = &self.matching;
        let mut out: BTreeMap<FindingKind, RankSet> = BTreeMap::new();
        for (ci, c_ranks, c) in self.queues() {
            for (r, recv) in c.receives.iter().enumerate() {
                let open = c_ranks.difference(&m.receive_taken[ci][r]);
                if open.is_empty() {
                    continue;
                }
                let mut by: Vec<RankSet> = Vec::new();
                for (j, u) in c.unexpected.iter().enumerate() {
                    by.push(m.unexpected_taken[ci][j].clone());
                    by.extend(recv.peer.meets(u.peer, n));
                }
                let mut sends: Vec<(usize, usize, RankSet)> = Vec::new();
                for (qi, q_ranks, q) in self.queues() {
                    for (i, s) in q.sends.iter().enumerate() {
                        let senders = q_ranks
                            .difference(&m.send_paired[qi][i])
                            .difference(&m.send_taken[qi][i]);
                        let reach = image(&senders, s.peer, n).intersection(&open);
                        if reach.is_empty() {
                            continue;
                        }
                        by.push(reach);
                        if let Peer::Off(k) = s.peer {
                            by.push(RankSet::full(k.min(n)));
                            by.extend(recv.peer.meets(Peer::Off((n - k % n) % n), n));
                        }
                        sends.push((qi, i, senders));
                    }
                }
                for piece in refine(vec![open], &by) {
                    let Some(d) = piece.first() else { continue };
                    let source = recv.peer.at(d, n);
                    // (sender, tag, communicator), in the scan's order.
                    let mut candidates: Vec<(u32, Option<i64>, usize)> = c
                        .unexpected
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| !m.unexpected_taken[ci][*j].contains(d))
                        .filter_map(|(_, u)| Some((u.peer.at(d, n)?, u.tag, u.comm)))
                        .collect();
                    let mut coming: Vec<(u32, usize, Option<i64>, usize)> = Vec::new();
                    for &(qi, i, ref senders) in &sends {
                        let s = &self.classes_queues(qi).sends[i];
                        match s.peer {
                            Peer::Off(k) => {
                                let from = ((u64::from(d) + u64::from(n) - u64::from(k % n))
                                    % u64::from(n))
                                    as u32;
                                if senders.contains(from) {
                                    coming.push((from, i, s.tag, s.comm));
                                }
                            }
                            Peer::Abs(to) if to == d => {
                                // Only the source can read otherwise than the rest: the
                                // first five and it decide the first four mismatches.
                                let own = source.filter(|&x| senders.contains(x));
                                for from in senders.iter().take(PER_RECEIVE + 1).chain(own) {
                                    coming.push((from, i, s.tag, s.comm));
                                }
                            }
                            _ => {}
                        }
                    }
                    coming.sort_unstable();
                    coming.dedup();
                    candidates.extend(
                        coming
                            .into_iter()
                            .map(|(from, _, tag, comm)| (from, tag, comm)),
                    );
                    let takes = |tag: Option<i64>| recv.tag.is_none_or(|t| Some(t) == tag);
                    let mut found = 0;
                    for (from, tag, comm) in candidates {
                        if found >= PER_RECEIVE {
                            break;
                        }
                        let source_ok = source.is_none_or(|s| s == from);
                        let kind = if comm == recv.comm {
                            match (source_ok, takes(tag)) {
                                (true, false) => FindingKind::TagMismatch,
                                (false, true) => FindingKind::SourceMismatch,
                                _ => continue,
                            }
                        } else if source_ok
                            && takes(tag)
                            && (source.is_some() || recv.tag.is_some())
                        {
                            FindingKind::CommunicatorMismatch
                        } else {
                            continue;
                        };
                        found += 1;
                        out.entry(kind).or_default().union_with(&piece);
                    }
                }
            }
        }
        out
    }

    /// The queues of the class at index `mi` of the matching.
    fn classes_queues(&self, mi: usize) -> &ClassQueues {
        self.queues()
            .find(|&(i, _, _)| i == mi)
            .map(|(_, _, q)| q)
            .expect("a class of the matching")
    }
}

/// The queues' waits and facts, by rank set.
#[derive(Default)]
struct QueueFacts {
    /// Ranks a wait of the queues starts at.
    waiting: RankSet,
    /// Ranks with a receive from any source nobody's message takes.
    any_waiting: RankSet,
    /// Ranks a wait names (a rank waiting for itself not counted), any source apart.
    waited: RankSet,
    /// Ranks with an operation in transit (matched, or a message a receive takes).
    in_transit: RankSet,
    /// Ranks with something in transit, its senders' too.
    transit: RankSet,
    /// Receives that match a message but for one thing, by kind.
    mismatched: BTreeMap<FindingKind, RankSet>,
}

/// The diagnosis of `job`.
pub fn diagnose_classes(job: &ClassJob) -> ClassDiagnosis {
    let n = job.size;
    let mut not_followed: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut comms: Vec<CommKey> = Vec::new();
    let mut states: Vec<State> = job
        .classes
        .iter()
        .map(|c| state_of(&c.first, c.last.as_ref(), n, &mut comms))
        .collect();
    // Every class's queues, read once; a class whose queues are not followed is not.
    let mut queue_of: Vec<Option<ClassQueues>> = Vec::new();
    for (c, state) in job.classes.iter().zip(&mut states) {
        let read = match state {
            State::NotFollowed(_) => Err(String::new()),
            _ => queues::read(&c.first, c.last.as_ref(), n, &mut comms),
        };
        match read {
            Ok(q) => queue_of.push(Some(q)),
            Err(why) => {
                if !why.is_empty() {
                    *state = State::NotFollowed(why);
                }
                queue_of.push(None);
            }
        }
    }
    let mut matched = Vec::new();
    let mut inputs = Vec::new();
    for (c, q) in job.classes.iter().zip(&queue_of) {
        matched.push(q.as_ref().map(|q| {
            inputs.push((&c.ranks, q));
            inputs.len() - 1
        }));
    }
    let matching = match queues::matching(&inputs, n) {
        Ok(m) => m,
        Err(why) => {
            // The matching is the whole job's: no class's queues are followed.
            for (q, state) in queue_of.iter().zip(&mut states) {
                if q.as_ref().is_some_and(|q| !q.is_empty()) {
                    *state = State::NotFollowed(why.clone());
                }
            }
            inputs.clear();
            matched.iter_mut().for_each(|m| *m = None);
            Matching::default()
        }
    };
    let mut running = RankSet::new();
    let mut no_stacks = RankSet::new();
    let mut self_blocked = RankSet::new();
    let mut unknown_places: Vec<(RankSet, String)> = Vec::new();
    let mut waiting = Vec::new();
    let mut without_stacks = Vec::new();
    for (ci, (c, state)) in job.classes.iter().zip(states).enumerate() {
        match state {
            State::Running => running.union_with(&c.ranks),
            State::NoStacks => {
                no_stacks.union_with(&c.ranks);
                without_stacks.push(ci);
            }
            State::SelfBlocked => self_blocked.union_with(&c.ranks),
            State::NotFollowed(why) => not_followed.entry(why).or_default().union_with(&c.ranks),
            State::Waiting {
                needs,
                calls,
                unknown,
                maybe_free,
            } => {
                if let Some(why) = needs.iter().find_map(|need| match need {
                    Need::Other(why) => Some(why.clone()),
                    _ => None,
                }) {
                    not_followed.entry(why).or_default().union_with(&c.ranks);
                    continue;
                }
                if let Some(what) = &unknown {
                    unknown_places.push((c.ranks.clone(), what.clone()));
                }
                waiting.push((ci, needs, unknown.is_some(), calls, maybe_free));
            }
        }
    }
    // Each collective instance on MPI_COMM_WORLD: its ranks, and who is not in it.
    let mut instances: BTreeMap<(String, Option<i64>, Option<u64>), RankSet> = BTreeMap::new();
    for (ci, needs, ..) in &waiting {
        for need in needs {
            if let Need::Collective(name, root, bytes) = need {
                instances
                    .entry((name.clone(), *root, *bytes))
                    .or_default()
                    .union_with(&job.classes[*ci].ranks);
            }
        }
    }
    if instances.len() > 1 {
        let mut ranks = RankSet::new();
        instances.values().for_each(|r| ranks.union_with(r));
        not_followed
            .entry("ranks in different collectives on MPI_COMM_WORLD".into())
            .or_default()
            .union_with(&ranks);
        waiting.retain(|(ci, ..)| !job.classes[*ci].ranks.intersects(&ranks));
    }
    // Receives posted by threads in their calls: the sends they would take go on.
    let called = waiting
        .iter()
        .flat_map(|(ci, needs, ..)| {
            needs.iter().filter_map(|need| match need {
                Need::PointToPoint(PointToPoint {
                    comm,
                    receive: Some((source, tag, _)),
                    ..
                }) => Some((&job.classes[*ci].ranks, *comm, *source, *tag)),
                _ => None,
            })
        })
        .collect();
    let view = Job {
        n,
        classes: job
            .classes
            .iter()
            .zip(queue_of)
            .map(|(c, q)| (&c.ranks, q))
            .collect(),
        matched,
        matching,
        called,
    };
    let world = RankSet::full(n);
    let mut may = Classes {
        n,
        sets: vec![world.clone()],
        classes: Vec::new(),
    };
    let mut must = may.clone();
    // Sinks: ranks held by their own threads never act again.
    for plan in [&mut may, &mut must] {
        plan.classes.push(ClassPlan {
            ranks: self_blocked.clone(),
            sink: true,
            alternatives: Vec::new(),
        });
    }
    // What each plan's ranks wait for, in words' terms (by plan index).
    let mut waits_of: Vec<(usize, Vec<(String, HeldBy)>)> = Vec::new();
    let held_by = |rule: Rule, sets: &[RankSet]| -> Option<HeldBy> {
        Some(match rule {
            Rule::Offset(k) => HeldBy::Neighbour(k),
            Rule::Fixed(p) => HeldBy::Rank(p),
            Rule::AllOf(_) => HeldBy::AnyRank,
            Rule::AnyIn(set) => HeldBy::Outside(sets[set].clone()),
            Rule::Never => return None,
        })
    };
    for ci in without_stacks {
        for (ranks, alternative) in view.queue_rules(ci, &mut may.sets) {
            let waits = alternative
                .rules
                .iter()
                .filter_map(|&r| Some(("a pending operation".to_owned(), held_by(r, &may.sets)?)))
                .collect();
            waits_of.push((may.classes.len(), waits));
            may.classes.push(ClassPlan {
                ranks,
                sink: false,
                alternatives: vec![alternative],
            });
        }
    }
    let mut outside_of: BTreeMap<(String, Option<i64>, Option<u64>), Option<usize>> =
        BTreeMap::new();
    for (ci, needs, unknown, calls, maybe_free) in &waiting {
        let c = &job.classes[*ci];
        let (mi, q) = (view.matched[*ci], view.classes[*ci].1.as_ref());
        // A wait's requests: each operation, the members for which it is done, and
        // those for which it is proven to wait (a synchronous message seen at its
        // destination).
        let mut requests: Vec<Vec<(Rule, RankSet, RankSet)>> = Vec::new();
        let mut failed = None;
        for need in needs {
            let Need::Wait(tid) = need else {
                requests.push(Vec::new());
                continue;
            };
            let found = match (mi, q) {
                (Some(mi), Some(q)) => requests_of(&c.first, c.last.as_ref(), *tid, q)
                    .map(|items| view.request_sets(mi, q, &c.ranks, &items)),
                _ => Err("waits for requests not in their own queues".into()),
            };
            match found {
                Ok(items) => requests.push(items),
                Err(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        if let Some(why) = failed {
            not_followed.entry(why).or_default().union_with(&c.ranks);
            continue;
        }
        // Per need: members whose receive goes on, whose send a receive takes, whose
        // send is proven to wait.
        let mut sets: Vec<[RankSet; 5]> = Vec::new();
        for need in needs {
            let mut three: [RankSet; 5] = Default::default();
            if let Need::PointToPoint(p) = need {
                if let Some(receive) = p.receive {
                    three[0] = view.receive_proceeds(mi, q, &c.ranks, p.comm, receive);
                }
                if let Some(send) = p.send {
                    three[1] = view.send_taken(&c.ranks, p.comm, send);
                    let (proven, weak) = view.send_proven(&c.ranks, p.comm, send, p.synchronous);
                    three[2] = proven.difference(&three[1]);
                    let to_itself = match send.0 {
                        Peer::Off(0) => c.ranks.clone(),
                        Peer::Abs(d) => c.ranks.intersection(&RankSet::single(d)),
                        _ => RankSet::new(),
                    };
                    three[3] = weak;
                    three[4] = to_itself;
                }
            }
            sets.push(three);
        }
        let mut by = sets.concat();
        for (_, done, proven) in requests.iter().flatten() {
            by.push(done.clone());
            by.push(proven.clone());
        }
        let pieces = refine(vec![c.ranks.clone()], &by);
        for ranks in pieces {
            let at = ranks.first().unwrap_or(0);
            let mut proof = Vec::new();
            let mut alternatives: Vec<ClassAlternative> = needs
                .iter()
                .zip(&sets)
                .zip(&requests)
                .map(
                    |((need, [received, taken, proven, weak, to_itself]), items)| {
                        let mut rules = Vec::new();
                        let mut certain = Vec::new();
                        let mut weakly = Vec::new();
                        match need {
                            Need::Proceeds => {}
                            Need::Wait(_) => {
                                // Every request's operation, those not done.
                                for (held, done, proven) in items {
                                    if !done.contains(at) {
                                        rules.push(*held);
                                        if proven.contains(at) {
                                            certain.push(*held);
                                        }
                                    }
                                }
                            }
                            Need::PointToPoint(p) => {
                                let receive = p.receive.filter(|_| !received.contains(at));
                                let send = p.send.filter(|_| !taken.contains(at));
                                // A call goes on only when both its halves do.
                                if receive.is_some() || send.is_some() {
                                    // Proven by a message its sender does not list: weak
                                    // evidence, which of a send to itself holds nothing.
                                    let sent = send.map(|(peer, _)| {
                                        let proof = proven.contains(at);
                                        let weak = proof && weak.contains(at);
                                        let held = if weak && to_itself.contains(at) {
                                            Rule::Never
                                        } else {
                                            rule(peer)
                                        };
                                        (held, proof, weak)
                                    });
                                    let received = receive.map(|(peer, ..)| rule(peer));
                                    rules.extend(received);
                                    rules.extend(sent.map(|(held, ..)| held));
                                    if let Some((held, _, true)) = sent
                                        && received != Some(held)
                                    {
                                        weakly.push(held);
                                    }
                                    certain.extend(sent.filter(|s| s.1).map(|(h, ..)| h));
                                }
                            }
                            Need::Collective(name, root, bytes) => {
                                // One set per instance, whatever the number of its classes.
                                let key = (name.clone(), *root, *bytes);
                                let index = *outside_of.entry(key.clone()).or_insert_with(|| {
                                    let outside = world.difference(&instances[&key]);
                                    (!outside.is_empty()).then(|| {
                                        may.sets.push(outside);
                                        may.sets.len() - 1
                                    })
                                });
                                rules.extend(index.map(Rule::AnyIn));
                            }
                            Need::Other(_) => unreachable!("not followed"),
                        }
                        proof.push(ClassAlternative {
                            weak: weakly.clone(),
                            rules: certain,
                            unknown: false,
                        });
                        ClassAlternative {
                            rules,
                            unknown: false,
                            weak: weakly,
                        }
                    },
                )
                .collect();
            let waits = calls
                .iter()
                .zip(&alternatives)
                .flat_map(|(call, a)| {
                    a.rules
                        .iter()
                        .filter_map(|&rule| Some((call.clone(), held_by(rule, &may.sets)?)))
                })
                .collect();
            if *unknown {
                alternatives.push(ClassAlternative {
                    unknown: true,
                    ..ClassAlternative::default()
                });
            }
            waits_of.push((may.classes.len(), waits));
            may.classes.push(ClassPlan {
                ranks: ranks.clone(),
                sink: false,
                alternatives,
            });
            if !maybe_free {
                must.classes.push(ClassPlan {
                    ranks,
                    sink: false,
                    alternatives: proof,
                });
            }
        }
    }
    // Ranks held by their own threads are said apart.
    let apart = |d: RankSet| {
        if d.is_subset(&self_blocked) {
            RankSet::new()
        } else {
            d.difference(&self_blocked)
        }
    };
    let settled = |plan: &Classes, not_followed: &mut BTreeMap<String, RankSet>| {
        plan.deadlocked().map(apart).unwrap_or_else(|| {
            let mut ranks = RankSet::new();
            plan.classes.iter().for_each(|c| ranks.union_with(&c.ranks));
            not_followed
                .entry("waits that did not settle by classes".into())
                .or_default()
                .union_with(&ranks.difference(&self_blocked));
            RankSet::new()
        })
    };
    let may_set = may.deadlocked();
    let must_set = must.deadlocked();
    let mut possibly_deadlocked = settled(&may, &mut not_followed);
    let mut deadlocked = settled(&must, &mut not_followed);
    // A proof needs every class followed; in separate moments it is possible only.
    if !not_followed.is_empty() {
        deadlocked = RankSet::new();
    }
    let proven_parts = must_set
        .filter(|_| not_followed.is_empty())
        .map(|d| must.parts(&d, &RankSet::new()));
    if job.separate.is_some() {
        deadlocked = RankSet::new();
    }
    possibly_deadlocked.union_with(&deadlocked);
    let possible_parts = may_set.map(|d| may.parts(&d, &deadlocked));
    let deadlocks = match (proven_parts.unwrap_or(Some(Vec::new())), possible_parts) {
        (Some(proven), Some(Some(possible))) => {
            let proven_certainty = if job.separate.is_some() {
                Certainty::Possible
            } else {
                Certainty::Definite
            };
            let mut parts: Vec<FindingRanks> = proven
                .into_iter()
                .map(|p| FindingRanks {
                    kind: p.kind,
                    certainty: proven_certainty,
                    ranks: p.ranks,
                })
                .collect();
            // The worst reading's parts not already proven.
            parts.extend(possible.into_iter().map(|p| FindingRanks {
                kind: p.kind,
                certainty: Certainty::Possible,
                ranks: p.ranks,
            }));
            Some(parts)
        }
        _ => None,
    };
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let missing = world.difference(&job.dumped()).difference(&failed);
    let mut doubts = Vec::new();
    if !missing.is_empty() {
        doubts.push(Doubt::Missing { ranks: missing });
    }
    if !failed.is_empty() {
        doubts.push(Doubt::Failed { ranks: failed });
    }
    if job.unranked > 0 {
        doubts.push(Doubt::NoWorldRank {
            processes: job.unranked,
        });
    }
    let unproven = possibly_deadlocked.difference(&deadlocked);
    if !unproven.is_empty() {
        doubts.push(Doubt::Unproven { ranks: unproven });
    }
    if !no_stacks.is_empty() {
        doubts.push(Doubt::NoStacks { ranks: no_stacks });
    }
    if let Some((_, example)) = unknown_places.first() {
        let mut ranks = RankSet::new();
        unknown_places.iter().for_each(|(r, _)| ranks.union_with(r));
        doubts.push(Doubt::UnknownPlaces {
            ranks,
            example: example.clone(),
        });
    }
    if !self_blocked.is_empty() {
        doubts.push(Doubt::SelfBlocked {
            ranks: self_blocked,
        });
    }
    if let Some(why) = &job.separate {
        doubts.push(Doubt::Snapshot { why: why.clone() });
    }
    let not_followed: Vec<(RankSet, String)> =
        not_followed.into_iter().map(|(why, r)| (r, why)).collect();
    for (ranks, why) in &not_followed {
        doubts.push(Doubt::NotFollowed {
            ranks: ranks.clone(),
            why: why.clone(),
        });
    }
    // The worst reading's ranks, grouped by what they wait for.
    let mut held: BTreeMap<Vec<(String, HeldBy)>, RankSet> = BTreeMap::new();
    for (plan, waits) in waits_of {
        let ranks = may.classes[plan].ranks.intersection(&possibly_deadlocked);
        if !ranks.is_empty() && !waits.is_empty() {
            held.entry(waits).or_default().union_with(&ranks);
        }
    }
    let held = held
        .into_iter()
        .map(|(waits, ranks)| HeldClass { ranks, waits })
        .collect();
    let mut queue_findings = Vec::new();
    let findings = if not_followed.is_empty() {
        let mut findings: Vec<Finding> = instances
            .iter()
            .filter_map(|((call, _, _), ranks)| collective_wait(job, call, ranks))
            .collect();
        let facts = view.queue_facts();
        if facts.waiting.is_empty() {
            findings.extend(clean(
                job,
                &doubts,
                &possibly_deadlocked,
                &running,
                !facts.transit.is_empty(),
            ));
        }
        queue_findings = queue_findings_of(job, &facts, &possibly_deadlocked, &running);
        findings
    } else {
        Vec::new()
    };
    ClassDiagnosis {
        verdict: if !deadlocked.is_empty() {
            Verdict::Deadlock
        } else if doubts.is_empty() {
            Verdict::NoDeadlock
        } else {
            Verdict::Undetermined
        },
        doubts,
        deadlocked,
        possibly_deadlocked,
        running,
        not_followed,
        findings,
        held,
        deadlocks,
        queue_findings,
    }
}

/// The per-rank analysis's findings of the queues, by kind: dumps that failed,
/// operations in transit, mismatches, ranks waited for that have nothing pending or
/// were not dumped, and the summary of waits that deadlock nobody.
fn queue_findings_of(
    job: &ClassJob,
    facts: &QueueFacts,
    possibly_deadlocked: &RankSet,
    running: &RankSet,
) -> Vec<FindingRanks> {
    let definite = |kind: FindingKind, ranks: RankSet| FindingRanks {
        kind,
        certainty: Certainty::Definite,
        ranks,
    };
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let mut out = vec![
        definite(FindingKind::DumpFailed, failed.clone()),
        definite(FindingKind::InTransit, facts.in_transit.clone()),
    ];
    for (kind, ranks) in &facts.mismatched {
        out.push(definite(*kind, ranks.clone()));
    }
    // Ranks waited for that do nothing the queues show: idle if dumped, else not dumped
    // (unless only receives from any source name them).
    let dumped = job.dumped();
    let active = facts.waiting.union(&facts.transit);
    // A receive from any source names every other rank.
    let any_named = match facts.any_waiting.len() {
        0 => RankSet::new(),
        1 => RankSet::full(job.size).difference(&facts.any_waiting),
        _ => RankSet::full(job.size),
    };
    let named = facts.waited.union(&any_named);
    let idle_targets = named.intersection(&dumped).difference(&active);
    let undumped = facts.waited.difference(&dumped);
    out.push(definite(FindingKind::IdleTarget, idle_targets));
    out.push(definite(FindingKind::UndumpedTarget, undumped));
    let undumped_failed = failed.difference(running);
    // As the per-rank summary: none when no queue was seen and failed ranks may run.
    let seen = !dumped.is_empty() || undumped_failed.is_empty();
    let summary = seen && possibly_deadlocked.is_empty() && !facts.waiting.is_empty();
    if summary {
        out.push(definite(FindingKind::NoDeadlock, facts.waiting.clone()));
    }
    out.retain(|f| !f.ranks.is_empty());
    out
}

/// Ranks `ranks` in collective `call` on `MPI_COMM_WORLD`, and where each class of the
/// others is (one place per class: its members are where its first is).
fn collective_wait(job: &ClassJob, call: &str, ranks: &RankSet) -> Option<Finding> {
    let absent = RankSet::full(job.size).difference(ranks);
    if absent.is_empty() {
        return None;
    }
    let mut places: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut seen = RankSet::new();
    for c in &job.classes {
        let outside = c.ranks.intersection(&absent);
        let Some(thread) = main_thread(&c.first).filter(|_| !outside.is_empty()) else {
            continue;
        };
        let at = place(&thread.location_in(c.first.executable.as_deref()));
        seen.union_with(&outside);
        places.entry(at).or_default().union_with(&outside);
    }
    let unseen = absent.difference(&seen);
    if !unseen.is_empty() {
        places
            .entry("not seen".into())
            .or_default()
            .union_with(&unseen);
    }
    let mut others: Vec<(RankSet, String)> = places.into_iter().map(|(p, s)| (s, p)).collect();
    others.sort();
    let world = job
        .classes
        .iter()
        .flat_map(|c| c.first.communicators())
        .find(|c| c.name == "MPI_COMM_WORLD");
    let comm = world.map_or_else(
        || CommKey::named("MPI_COMM_WORLD", job.size.into()),
        CommKey::of,
    );
    Some(Finding::unproven_by_operations(
        FindingKind::CollectiveWait,
        Certainty::Definite,
        ranks.clone(),
        Subject::Collective {
            call: call.to_owned(),
            others,
            comm: Some(comm),
        },
    ))
}

/// Nothing held and no queue holding a wait: every dumped rank is clean (the per-rank
/// analysis's summary of such a job), with messages in transit or not.
fn clean(
    job: &ClassJob,
    doubts: &[Doubt],
    possibly_deadlocked: &RankSet,
    running: &RankSet,
    in_transit: bool,
) -> Option<Finding> {
    if !possibly_deadlocked.is_empty() {
        return None;
    }
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let failed = failed.difference(running);
    let dumped = job.dumped();
    if dumped.is_empty() && !failed.is_empty() {
        return None;
    }
    let seen_all = crate::verdict::seen_all(doubts);
    Some(Finding::unproven_by_operations(
        FindingKind::Clean,
        Certainty::Definite,
        dumped,
        Subject::Clean {
            in_transit,
            failed,
            seen_all,
            running: running.clone(),
        },
    ))
}

#[cfg(test)]
mod tests;

/// Findings as the class analysis is held to them: by kind and certainty, the union
/// of their ranks.
pub fn finding_ranks_of<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
) -> BTreeMap<(FindingKind, Certainty), RankSet> {
    let mut out: BTreeMap<(FindingKind, Certainty), RankSet> = BTreeMap::new();
    for f in findings {
        out.entry((f.kind, f.certainty))
            .or_default()
            .union_with(&f.ranks);
    }
    out.retain(|_, ranks| !ranks.is_empty());
    out
}

impl ClassDiagnosis {
    /// Its findings as [`finding_ranks_of`] gives the per-rank analysis's: the deadlock
    /// parts, the queues' findings and the collective's and summary's; `None` when the
    /// deadlock parts were not worked out.
    pub fn finding_ranks(&self) -> Option<BTreeMap<(FindingKind, Certainty), RankSet>> {
        let mut out = finding_ranks_of(&self.findings);
        for p in self.deadlocks.as_ref()?.iter().chain(&self.queue_findings) {
            out.entry((p.kind, p.certainty))
                .or_default()
                .union_with(&p.ranks);
        }
        out.retain(|_, ranks| !ranks.is_empty());
        Some(out)
    }
}
