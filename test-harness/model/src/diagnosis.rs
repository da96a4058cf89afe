//! What the analysis concludes about a dump: who waits for whom ([`Wait`]), and
//! [`Finding`]s, each naming its kind, ranks, communicators, the facts its wording needs
//! ([`Subject`]) and the operations that prove it ([`Evidence`], by reference into the
//! [`JobDump`]). Nothing here is worded for people: renderers do that.

use crate::dump::{JobDump, Operation, QueueKind, RankDump};
use crate::rank_set::RankSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A communicator as the analysis identifies it across ranks: by what MPI matches
/// messages by, its context ids, and (for an intracommunicator) its members, since the
/// communicators one split makes share one context id. Without context ids (a library
/// that does not say them), by name and size. The name is for words only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommKey {
    /// Its name (`MPI_COMM_WORLD`, "ring", possibly empty); shared, since every
    /// operation's wait and evidence names its communicator.
    pub name: std::sync::Arc<str>,
    /// Its size (local group).
    pub size: i64,
    /// Its context ids, smaller first, the same on both sides of an intercommunicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<(i64, i64)>,
    /// A hash of its members (COMM_WORLD ranks in local rank order) for an
    /// intracommunicator whose group is known; 0 otherwise. Not in documents: the
    /// communicator's own fields say what it is.
    #[serde(skip)]
    pub members: u64,
    /// The COMM_WORLD ranks it holds, where they are what names it (a program's own
    /// communicator read from an MPI library without debug information).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_ranks: Option<RankSet>,
    /// The hang recorder's lineage of it, where neither context ids nor a name say it
    /// (0: none): alike in every member.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lineage: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// FNV-1a over the members: stable across runs and processes, never 0.
fn members_hash(group: impl IntoIterator<Item = i32>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for r in group {
        for b in r.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h.max(1)
}

/// What makes two keys the same communicator.
#[derive(PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Identity<'a> {
    Context((i64, i64), u64),
    Lineage(u64, u64),
    Named(&'a str, i64),
}

impl CommKey {
    /// The key of a communicator of the dump.
    pub fn of(c: &crate::dump::Communicator) -> CommKey {
        let context = c.context.map(crate::dump::ContextIds::identity);
        let intra = c.context.is_some_and(|x| x.context_id == x.recv_context_id);
        let members = match (&c.group, intra) {
            (Some(group), true) => members_hash(group.iter()),
            _ => 0,
        };
        CommKey {
            name: c.name.as_str().into(),
            size: c.size,
            context,
            members,
            of_ranks: None,
            lineage: 0,
        }
    }

    /// The key of an intracommunicator known by the hang recorder's lineage and its
    /// members (COMM_WORLD ranks in local rank order) alone, unnamed.
    pub fn of_lineage(lineage: u64, members: &[i32]) -> CommKey {
        CommKey {
            name: "".into(),
            size: members.len() as i64,
            context: None,
            members: members_hash(members.iter().copied()),
            of_ranks: Some(RankSet::from_i32s(members)),
            lineage,
        }
    }

    /// The key of an intercommunicator known by the hang recorder's lineage alone (the
    /// same on both sides: its local group here is the remote group there), unnamed;
    /// `size`: its local group's.
    pub fn of_inter_lineage(lineage: u64, size: usize) -> CommKey {
        CommKey {
            name: "".into(),
            size: size as i64,
            context: None,
            members: 0,
            of_ranks: None,
            lineage,
        }
    }

    /// The key of an intracommunicator known by its context id and its members
    /// (COMM_WORLD ranks in local rank order) alone, unnamed.
    pub fn of_members(context_id: i64, members: &[i32]) -> CommKey {
        CommKey {
            name: "".into(),
            size: members.len() as i64,
            context: Some((context_id, context_id)),
            members: members_hash(members.iter().copied()),
            of_ranks: Some(RankSet::from_i32s(members)),
            lineage: 0,
        }
    }

    /// The key of the instance of this communicator whose members are `members` (one
    /// row of a split, where this is another): the same name, size and context ids.
    pub fn with_members(&self, members: &[i32]) -> CommKey {
        CommKey {
            members: if self.members == 0 {
                0
            } else {
                members_hash(members.iter().copied())
            },
            of_ranks: self.of_ranks.as_ref().map(|_| RankSet::from_i32s(members)),
            ..self.clone()
        }
    }

    /// This key with its members replaced by its shape, `group` less its first member:
    /// the instances of one split (its rows) have one such key. A key without members
    /// (a group not known, an intercommunicator) stays as it is.
    pub fn shaped(mut self, group: &crate::comm_group::CommGroup) -> CommKey {
        if self.members != 0 {
            let first = group.get(0).unwrap_or(0);
            self.members = members_hash(group.iter().map(|m| m.wrapping_sub(first)));
        }
        self
    }

    /// A key by name and size alone (a communicator known only by its handle).
    pub fn named(name: &str, size: i64) -> CommKey {
        CommKey {
            name: name.into(),
            size,
            context: None,
            members: 0,
            of_ranks: None,
            lineage: 0,
        }
    }

    fn identity(&self) -> Identity<'_> {
        match self.context {
            Some(context) => Identity::Context(context, self.members),
            None if self.lineage != 0 => Identity::Lineage(self.lineage, self.members),
            None => Identity::Named(&self.name, self.size),
        }
    }
}

impl PartialEq for CommKey {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for CommKey {}

impl std::hash::Hash for CommKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl PartialOrd for CommKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CommKey {
    /// By identity, as equality is.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.identity().cmp(&other.identity())
    }
}

/// Where a peer sits relative to a rank, in the communicator's local ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// The rank itself.
    Itself,
    /// Local rank + 1 (mod size).
    Right,
    /// Local rank - 1 (mod size).
    Left,
    /// The other rank of a communicator of two.
    Other,
    /// No relative pattern fits.
    Absolute,
}

impl Relation {
    /// The relation of local rank `peer` to local rank `own` in a communicator of `size`.
    pub fn of(own: i64, peer: i64, size: i64) -> Relation {
        if own < 0 || peer < 0 || size <= 0 || own >= size || peer >= size {
            Relation::Absolute
        } else if peer == own {
            Relation::Itself
        } else if size == 2 {
            Relation::Other
        } else if (own + 1) % size == peer {
            Relation::Right
        } else if (own + size - 1) % size == peer {
            Relation::Left
        } else {
            Relation::Absolute
        }
    }

    /// "right", "left", "itself", "other", "absolute" (the JSON spelling).
    pub fn name(self) -> &'static str {
        match self {
            Relation::Itself => "itself",
            Relation::Right => "right",
            Relation::Left => "left",
            Relation::Other => "other",
            Relation::Absolute => "absolute",
        }
    }
}

/// Where an operation sits in a [`JobDump`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpRef {
    /// Index of the process in [`JobDump::ranks`].
    pub process: usize,
    /// Index of the communicator in the process's list.
    pub communicator: usize,
    /// The queue.
    pub queue: QueueKind,
    /// Index of the operation in the queue.
    pub index: usize,
}

impl OpRef {
    /// The process, communicator and operation it points at, if it points into `job`.
    pub fn resolve<'a>(
        &self,
        job: &'a JobDump,
    ) -> Option<(&'a RankDump, &'a crate::dump::Communicator, &'a Operation)> {
        let rank = job.ranks.get(self.process)?;
        let comm = rank.communicators().get(self.communicator)?;
        let op = comm.queue(self.queue).ops().get(self.index)?;
        Some((rank, comm, op))
    }
}

/// An operation's peer as the analysis resolved it to COMM_WORLD.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Peer {
    /// This COMM_WORLD rank.
    World(i32),
    /// A rank of the communicator whose COMM_WORLD rank is unknown (see the operation).
    Unresolved,
    /// Any source, among these COMM_WORLD ranks.
    AnyOf(RankSet),
    /// Any source of a communicator whose group is unknown.
    AnyUnresolved,
}

/// One operation that proves a wait or a finding, with its peer resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Evidence {
    /// The operation.
    pub op: OpRef,
    /// Its peer (destination of a send, sender of an unexpected message, source of a
    /// receive).
    pub peer: Peer,
}

/// What makes a rank wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A pending send (possibly also seen as an unexpected message at the destination).
    Send,
    /// A message seen only as unexpected at its destination (ch3/ch4 list no blocking
    /// sends; an eager sender may have moved on).
    Unexpected,
    /// A posted receive.
    Receive,
    /// A blocking collective (its stacks say) waiting for a member of its communicator
    /// that is not in it. Never proven: that member may have left the collective already
    /// while its last messages are on their way.
    Collective,
}

impl WaitKind {
    /// "send", "unexpected", "receive", "collective".
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Send => "send",
            WaitKind::Unexpected => "unexpected",
            WaitKind::Receive => "receive",
            WaitKind::Collective => "collective",
        }
    }

    /// A message (send or unexpected) rather than a receive.
    pub fn is_message(self) -> bool {
        matches!(self, WaitKind::Send | WaitKind::Unexpected)
    }
}

/// Whom a rank waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitTarget {
    /// One COMM_WORLD rank (an AND-edge).
    Rank(i32),
    /// Any of these COMM_WORLD ranks (an `MPI_ANY_SOURCE` receive: OR-edges).
    AnyOf(RankSet),
    /// Any member of a communicator whose group is unknown.
    AnyUnknown,
    /// A peer known only by its local rank in the communicator.
    UnknownRank {
        /// The peer's rank in the communicator.
        local: i64,
    },
}

/// One "rank waits for ..." fact, with the operations that prove it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The waiting COMM_WORLD rank.
    pub from: i32,
    /// Whom it waits for.
    pub target: WaitTarget,
    /// Why.
    pub kind: WaitKind,
    /// The communicator.
    pub comm: CommKey,
    /// The waiting rank's rank in the communicator.
    pub local_rank: i64,
    /// The peer's rank in the communicator (-1: any source).
    pub peer_local: i64,
    /// The tag (`None`: any tag).
    pub tag: Option<i64>,
    /// The operation's count.
    pub count: i64,
    /// The operations involved.
    pub evidence: Vec<Evidence>,
    /// Something proves the waiting rank is blocked in this wait (a synchronous send
    /// its library does not list among non-blocking sends); otherwise the operation may
    /// be non-blocking and its rank busy elsewhere.
    pub blocked: bool,
    /// The MPI requests of its operations, when the library names them: across the
    /// samples of a watch, the same requests are the same wait.
    pub requests: Vec<u64>,
    /// The peer is in the remote group of an intercommunicator.
    pub remote_peer: bool,
    /// The MPI call the waiting thread is blocked in, when its stack says: the wait is
    /// the call's, not only a pending operation's.
    pub call: Option<String>,
}

impl Wait {
    /// Weak evidence: a message seen only waiting unexpected at its destination (its
    /// sender is blocked only if the send was synchronous or rendezvous).
    pub fn is_weak(&self) -> bool {
        self.kind == WaitKind::Unexpected
    }

    /// The relation of the peer to the waiting rank.
    pub fn relation(&self) -> Relation {
        if self.remote_peer {
            Relation::Absolute
        } else {
            Relation::of(self.local_rank, self.peer_local, self.comm.size)
        }
    }

    /// Its kind, communicator and tag: what a short description needs.
    pub fn summary(&self) -> WaitSummary {
        WaitSummary {
            kind: self.kind,
            comm: self.comm.clone(),
            tag: self.tag,
            beyond: self.kind == WaitKind::Collective && self.remote_peer,
        }
    }

    /// The ranks it could be satisfied by, when they are known.
    pub fn targets(&self) -> Option<RankSet> {
        match &self.target {
            WaitTarget::Rank(t) => Some(RankSet::from_i32s([*t])),
            WaitTarget::AnyOf(set) => Some(set.clone()),
            _ => None,
        }
    }
}

/// A wait in short: "a send on \"ring\", tag 5".
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WaitSummary {
    /// What kind of wait.
    pub kind: WaitKind,
    /// On which communicator.
    pub comm: CommKey,
    /// With which tag (`None`: any).
    pub tag: Option<i64>,
    /// A collective over the communicator's group and a remote one
    /// (`MPI_Intercomm_create`), whose member is waited for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beyond: bool,
}

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// An elementary cycle of AND-waits among blocked ranks: a deadlock.
    DeadlockCycle,
    /// A strongly connected set of blocked ranks that is not one simple cycle (several
    /// cycles, or OR-waits of any-source receives holding it together): a deadlock.
    DeadlockKnot,
    /// Ranks blocked waiting for deadlocked ranks (not on a cycle themselves).
    BlockedByDeadlock,
    /// A posted receive would take a waiting message but for the tag.
    TagMismatch,
    /// A posted receive would take a waiting message but for the source.
    SourceMismatch,
    /// A posted receive would take a waiting message but for the communicator.
    CommunicatorMismatch,
    /// Ranks blocked in a receive from a rank that is blocked in another call, sending
    /// nothing to them (their stacks say).
    UnmatchedReceive,
    /// Ranks in the same rooted collective on one communicator, naming different roots.
    RootMismatch,
    /// Ranks others wait for that have no pending point-to-point communication.
    IdleTarget,
    /// Ranks others wait for that are not in the dump, or could not be dumped.
    UndumpedTarget,
    /// Waits whose peer's COMM_WORLD rank is unknown.
    UnknownPeer,
    /// Messages matched by a posted receive, or operations in status "matched".
    InTransit,
    /// Processes that could not be dumped.
    DumpFailed,
    /// Dumped processes some of whose queues could not be read.
    UnreadableQueues,
    /// Ranks in a blocking collective while others are elsewhere (their stacks say).
    CollectiveWait,
    /// Ranks in different blocking collectives at once (their stacks say).
    CollectiveMismatch,
    /// Ranks in `MPI_Finalize` that others wait for in point-to-point (their stacks say):
    /// those waits never end.
    WaitsOnFinalized,
    /// Ranks blocked in point-to-point calls (their stacks say) whose queues cannot be
    /// read: who they wait for is unknown.
    BlockedWithoutQueues,
    /// Blocked ranks that wait only for each other, some of their waits unknown (a peer
    /// or communicator the calls' arguments do not say): deadlocked once the hold proved
    /// that none of them moves.
    DeadlockClosed,
    /// The proof of a hold: ranks that stayed in their blocked calls through a window,
    /// doing nothing, as what they wait for can only come from each other.
    Held,
    /// Ranks of a possible deadlock that moved during a hold (a call returned): it was
    /// traffic.
    Dissolved,
    /// Ranks whose every thread waits for another thread of its process, the OpenMP
    /// runtime saying on what (a barrier, a lock, tasks): a hang inside the process if it
    /// lasts.
    #[serde(rename = "openmp_wait")]
    OpenMpWait,
    /// Ranks wait, but none is deadlocked.
    NoDeadlock,
    /// Nothing waits on anything.
    Clean,
}

impl FindingKind {
    /// The JSON spelling: "deadlock_cycle", "deadlock_knot", "blocked_by_deadlock",
    /// "tag_mismatch", "source_mismatch", "communicator_mismatch", "unmatched_receive",
    /// "root_mismatch", "idle_target",
    /// "undumped_target", "unknown_peer", "in_transit", "dump_failed", "unreadable_queues",
    /// "collective_wait", "collective_mismatch", "waits_on_finalized",
    /// "blocked_without_queues", "deadlock_closed", "held", "dissolved", "openmp_wait",
    /// "no_deadlock", "clean".
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::DeadlockCycle => "deadlock_cycle",
            FindingKind::DeadlockKnot => "deadlock_knot",
            FindingKind::BlockedByDeadlock => "blocked_by_deadlock",
            FindingKind::TagMismatch => "tag_mismatch",
            FindingKind::SourceMismatch => "source_mismatch",
            FindingKind::CommunicatorMismatch => "communicator_mismatch",
            FindingKind::UnmatchedReceive => "unmatched_receive",
            FindingKind::RootMismatch => "root_mismatch",
            FindingKind::IdleTarget => "idle_target",
            FindingKind::UndumpedTarget => "undumped_target",
            FindingKind::UnknownPeer => "unknown_peer",
            FindingKind::InTransit => "in_transit",
            FindingKind::DumpFailed => "dump_failed",
            FindingKind::UnreadableQueues => "unreadable_queues",
            FindingKind::CollectiveWait => "collective_wait",
            FindingKind::CollectiveMismatch => "collective_mismatch",
            FindingKind::WaitsOnFinalized => "waits_on_finalized",
            FindingKind::BlockedWithoutQueues => "blocked_without_queues",
            FindingKind::DeadlockClosed => "deadlock_closed",
            FindingKind::Held => "held",
            FindingKind::Dissolved => "dissolved",
            FindingKind::OpenMpWait => "openmp_wait",
            FindingKind::NoDeadlock => "no_deadlock",
            FindingKind::Clean => "clean",
        }
    }

    /// A deadlock (cycle, knot, or closed set).
    pub fn is_deadlock(self) -> bool {
        matches!(
            self,
            FindingKind::DeadlockCycle | FindingKind::DeadlockKnot | FindingKind::DeadlockClosed
        )
    }

    /// A deadlock, or ranks blocked behind one: what a deadlocked set is made of.
    pub fn is_deadlock_part(self) -> bool {
        self.is_deadlock() || self == FindingKind::BlockedByDeadlock
    }
}

/// A peer as a finding names it: relative to the rank when a pattern fits, else by rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerName {
    /// `MPI_ANY_SOURCE`.
    AnySource,
    /// A neighbour, itself, or the other rank of two.
    Relative(Relation),
    /// A COMM_WORLD rank.
    World(i32),
    /// A rank of the communicator whose COMM_WORLD rank is unknown.
    Local(i64),
}

/// The receive side of a mismatch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MismatchReceive {
    /// The communicator it is posted on.
    pub comm: CommKey,
    /// The tag it takes (`None`: any).
    pub tag: Option<i64>,
    /// Its source, by rank (`AnySource`, `World` or `Local`).
    pub source: PeerName,
    /// Its source relative to the receiving rank where a pattern fits, else as `source`.
    pub source_relative: PeerName,
}

/// The message side of a mismatch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MismatchMessage {
    /// The communicator it was sent on.
    pub comm: CommKey,
    /// Its tag.
    pub tag: i64,
    /// Its sender, by rank (`World` or `Local`).
    pub sender: PeerName,
    /// Its sender relative to the receiving rank where a pattern fits (same
    /// communicator), else as `sender`.
    pub sender_relative: PeerName,
    /// It waits unexpected at its destination (else it is still a pending send).
    pub unexpected: bool,
    /// Its destination, when known.
    pub dest: Option<i32>,
    /// Its sender's COMM_WORLD rank, when known.
    pub sender_rank: Option<i32>,
}

/// One side of a mismatch that blocked calls show: ranks in the same call, at the same
/// place of the program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallSide {
    /// The ranks.
    pub ranks: RankSet,
    /// The call (`MPI_Recv`).
    pub call: String,
    /// Its tag (`None`: any tag, or not known).
    pub tag: Option<i64>,
    /// Its communicator, when known.
    pub comm: Option<CommKey>,
    /// Where the program makes it ("ring.c:27"), when its line table says.
    pub at: Option<String>,
}

/// What one rank of a knot waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnotWait {
    /// A message from any of these ranks.
    AnyOf {
        /// The candidates.
        ranks: RankSet,
        /// On which communicator.
        comm: CommKey,
        /// With which tag.
        tag: Option<i64>,
    },
    /// One rank.
    Rank {
        /// The rank waited for.
        rank: i32,
        /// The wait.
        wait: WaitSummary,
    },
}

/// One rank of a knot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KnotMember {
    /// The rank.
    pub rank: i32,
    /// What it waits for, each once (the first few).
    pub waits_for: Vec<KnotWait>,
    /// How many more distinct waits it has.
    pub more: usize,
    /// It waits in an any-source receive and no message is on its way to it.
    pub nobody_sends: bool,
    /// It waits only in the worst reading of a loop polling in this call (`MPI_Test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling: Option<String>,
}

/// The facts of a deadlock cycle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CycleFacts {
    /// Each hop `(from, to)`, with the strongest wait that makes it.
    pub hops: Vec<(i32, i32, WaitSummary)>,
    /// When one description fits every hop: its facts.
    pub uniform: Option<UniformCycle>,
    /// Ranks on the cycle whose only part in it is a message waiting at another rank.
    pub unsure: RankSet,
    /// Every hop is a call its rank's stack shows it blocked in.
    #[serde(default)]
    pub in_calls: bool,
}

/// A cycle whose every hop is the same kind of wait on the same communicator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UniformCycle {
    /// Sends (or messages) rather than receives.
    pub messages: bool,
    /// The communicator.
    pub comm: CommKey,
    /// The relation of each hop's peer, when every hop has the same one.
    pub relation: Option<Relation>,
    /// The tag, when every hop has the same one (`Some(None)`: any tag).
    pub tag: Option<Option<i64>>,
    /// Every hop is seen only as a message waiting unexpected at its destination.
    pub unlisted: bool,
    /// For message cycles, ranks of the cycle that have receives posted; for receive
    /// cycles, ranks that have sends pending.
    pub other_side: RankSet,
    /// The call every rank of the cycle is blocked in, when their stacks say one.
    #[serde(default)]
    pub call: Option<String>,
    /// Ranks of the cycle whose queues could not be read: what they have posted is not
    /// seen.
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub unseen: RankSet,
}

/// The facts a finding's wording needs. A finding about several ranks carries the
/// subject of its first rank; what its ranks share is the same in every rank's subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// A process could not be dumped.
    DumpFailed {
        /// Its pid (to name it when its rank is unknown).
        pid: Option<i32>,
        /// Why.
        error: String,
    },
    /// Ranks in a blocking collective, and where the others are.
    Collective {
        /// The collective (`MPI_Allreduce`).
        call: String,
        /// Where each other set of ranks is ("not in MPI (in solve)", "in MPI_Finalize").
        others: Vec<(RankSet, String)>,
        /// Its communicator, when the call's arguments say it: then `others` are the
        /// members not in the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<CommKey>,
    },
    /// Ranks that others wait for in point-to-point are in `MPI_Finalize`.
    Finalized {
        /// Who waits for them.
        waiters: RankSet,
        /// The waiters are all blocked in MPI calls (their stacks say): they hang.
        blocked: bool,
    },
    /// Ranks blocked in point-to-point calls without queues, by call.
    BlockedWithoutQueues {
        /// Each call and its ranks.
        calls: Vec<(String, RankSet)>,
        /// Ranks of the job the stacks show running (outside MPI, or in calls that
        /// return): the blocked ranks may wait for them.
        running: RankSet,
        /// Ranks in `MPI_Finalize`: a wait for them never ends.
        finalized: RankSet,
    },
    /// The OpenMP threads of ranks that wait for each other: each state's name (as
    /// `omp-tools.h` has it) with its threads' numbers in their teams, and whether the
    /// threads waiting for a lock all wait for the same one.
    #[serde(rename = "openmp_wait")]
    OpenMpWait {
        /// Each state and its threads.
        states: Vec<(String, Vec<i64>)>,
        /// The lock waiters wait for one lock (one wait id).
        one_lock: bool,
    },
    /// Blocked ranks waiting only for each other, some waits unknown.
    Closed {
        /// Each call and the ranks blocked in it.
        calls: Vec<(String, RankSet)>,
        /// Where the program makes each call, in the order of `calls`, when its line
        /// table says.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        at: Vec<Option<String>>,
        /// Ranks whose waits are not all known, and what is not (the first unknown
        /// argument, or the call).
        unknown: Vec<(RankSet, String)>,
        /// Ranks of the set that never act again (past or in `MPI_Finalize`).
        finalized: RankSet,
    },
    /// What a hold proved, and what the proof rests on.
    Held {
        /// Milliseconds the ranks were watched.
        window_ms: u64,
        /// The most memory any of them touched meanwhile, in kB, where measured.
        touched_kb: Option<u64>,
        /// Their message queues were read before and after, and did not change.
        queues: bool,
    },
    /// Ranks that moved during a hold.
    Dissolved {
        /// How each set of ranks moved.
        moved: Vec<(RankSet, crate::hold::Moved)>,
        /// Milliseconds they were watched.
        window_ms: u64,
    },
    /// Receives and the calls of the ranks they wait for, which cannot match them (the
    /// finding's kind says why).
    CallMismatch {
        /// The receives.
        receive: CallSide,
        /// The calls of the ranks they receive from (or, for a source mismatch, of the
        /// ranks that send to them).
        other: CallSide,
        /// Whom the receivers wait for, relative to them where a pattern fits.
        source: PeerName,
    },
    /// One rooted collective with different roots.
    RootMismatch {
        /// The collective.
        call: String,
        /// Its communicator, when known.
        comm: Option<CommKey>,
        /// Each root named, with the ranks that name it and where they call.
        roots: Vec<(i64, RankSet, Option<String>)>,
    },
    /// Ranks in different blocking collectives.
    CollectiveMismatch {
        /// Each collective with its ranks.
        calls: Vec<(String, RankSet)>,
        /// Their communicator, when the calls' arguments say they share it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<CommKey>,
        /// Where the program makes each call ("solver.c:88"), in the order of `calls`,
        /// when its line table says.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        at: Vec<Option<String>>,
        /// Which collective on the communicator each call is in its ranks' order (1 for
        /// the first), in the order of `calls`, where the hang recorder counted them
        /// (the same count for all of a call's ranks).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        counted: Vec<Option<u64>>,
    },
    /// Queues of a dumped process that could not be read.
    UnreadableQueues {
        /// How many queues.
        queues: usize,
        /// The first error.
        error: String,
    },
    /// A process was dumped but its COMM_WORLD rank is unknown.
    NoWorldRank {
        /// Its pid.
        pid: Option<i32>,
    },
    /// An operation in status "matched".
    Matched,
    /// A message a posted receive at its destination takes.
    Delivered {
        /// Its sender.
        from: Option<i32>,
        /// Its destination.
        to: i32,
        /// The communicator.
        comm: CommKey,
        /// The message's tag.
        tag: i64,
    },
    /// An unexpected message from a sender whose COMM_WORLD rank is unknown.
    UnknownSender {
        /// The sender's rank in the communicator.
        sender_local: i64,
        /// The communicator.
        comm: CommKey,
    },
    /// A posted receive that would take a waiting message but for one thing (the
    /// finding's kind says which).
    Mismatch {
        /// The receive.
        receive: MismatchReceive,
        /// The message.
        message: MismatchMessage,
    },
    /// A rank others wait for with no pending point-to-point communication.
    IdleTarget {
        /// Who waits for it.
        waiters: RankSet,
        /// They wait only in receives from any source.
        any_source_only: bool,
    },
    /// A rank others wait for that is not in the dump (`error: None`) or could not be
    /// dumped.
    UndumpedTarget {
        /// Who waits for it.
        waiters: RankSet,
        /// Why it could not be dumped.
        error: Option<String>,
    },
    /// A receive from any member of a communicator whose group is unknown.
    UnfollowableAnySource {
        /// The communicator.
        comm: CommKey,
        /// The tag.
        tag: Option<i64>,
    },
    /// A wait for a peer whose COMM_WORLD rank is unknown.
    UnfollowableRank {
        /// The peer's rank in the communicator.
        local: i64,
        /// The wait.
        wait: WaitSummary,
    },
    /// A rank waiting for deadlocked ranks.
    BehindDeadlock {
        /// The deadlocked ranks it waits for.
        targets: RankSet,
        /// Only messages waiting unexpected at those ranks make it wait.
        weak_only: bool,
    },
    /// An elementary cycle.
    Cycle(CycleFacts),
    /// A knot.
    Knot {
        /// Its ranks, in order, with what each waits for.
        members: Vec<KnotMember>,
        /// Every wait of it is a call its rank's stack shows it blocked in.
        #[serde(default)]
        in_calls: bool,
    },
    /// Ranks wait, but none is deadlocked.
    NoDeadlock {
        /// How many operations wait.
        waits: usize,
        /// Ranks that could not be dumped.
        failed: RankSet,
        /// Every rank of the job was dumped and every wait followed: no deadlock at
        /// all, not only among the ranks seen.
        seen_all: bool,
        /// Waiting ranks whose stacks show them running (not blocked in MPI).
        running: RankSet,
    },
    /// Nothing waits.
    Clean {
        /// Messages are in transit.
        in_transit: bool,
        /// Ranks that could not be dumped.
        failed: RankSet,
        /// Every rank of the job was dumped: nothing waits anywhere.
        seen_all: bool,
        /// Ranks the stacks show running (not blocked in MPI).
        running: RankSet,
    },
    /// A watch that took no sample.
    NoSample,
    /// A watch over which no cycle or knot persisted.
    NothingPersisted {
        /// Waits that persisted.
        waits: usize,
        /// Samples taken.
        samples: usize,
        /// Every sample saw every rank and followed every wait.
        seen_all: bool,
    },
}

/// How far the dump proves a deadlock finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// Every wait it rests on is proven blocking (or the finding is no deadlock).
    Definite,
    /// It rests on pending operations that may be non-blocking (`MPI_Irecv` and
    /// `MPI_Recv` look the same in a queue): a deadlock only if the ranks are blocked in
    /// them.
    Possible,
}

/// One conclusion, with its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// For deadlock findings, whether the waits are proven blocking.
    pub certainty: Certainty,
    /// The ranks it is about.
    pub ranks: RankSet,
    /// The facts its wording needs.
    pub subject: Subject,
    /// The communicators its operations are on.
    pub communicators: Vec<CommKey>,
    /// The operations that prove it.
    pub evidence: Vec<Evidence>,
    /// For a cycle, its ranks in order (the first is not repeated at the end).
    pub cycle: Option<Vec<i32>>,
    /// The wait-for edges (waiting rank, rank waited for) it is about.
    pub edges: Vec<(i32, i32)>,
}

impl Finding {
    /// A finding that rests on no operation (a summary, or what the stacks show).
    pub fn unproven_by_operations(
        kind: FindingKind,
        certainty: Certainty,
        ranks: RankSet,
        subject: Subject,
    ) -> Finding {
        Finding {
            kind,
            certainty,
            ranks,
            subject,
            communicators: Vec::new(),
            evidence: Vec::new(),
            cycle: None,
            edges: Vec::new(),
        }
    }
}

/// What one rank looked like, as far as the diagnosis needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RankFacts {
    /// Its pid.
    pub pid: Option<i32>,
    /// Why it could not be dumped.
    pub error: Option<String>,
    /// Pending posted receives not matched by a waiting message.
    pub receives: usize,
    /// Pending sends not matched by a posted receive.
    pub sends: usize,
    /// Operations in transit.
    pub transit: usize,
    /// Some of its queues could not be read: its waits are not all known.
    pub unreadable: bool,
}

/// The answer to "does this job hang in point-to-point communication?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Blocked ranks wait for each other: proven by the dump.
    Deadlock,
    /// Every rank of the job was dumped, every wait followed, and even if every pending
    /// operation blocked its rank, none would be deadlocked.
    NoDeadlock,
    /// Neither can be said: the [`Doubt`]s say why.
    Undetermined,
}

impl Verdict {
    /// "deadlock", "no_deadlock", "undetermined" (the JSON spelling).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Deadlock => "deadlock",
            Verdict::NoDeadlock => "no_deadlock",
            Verdict::Undetermined => "undetermined",
        }
    }
}

/// Why a verdict cannot be "no deadlock" (or a deadlock stays unproven).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Doubt {
    /// Ranks of the job that are not in the dump at all.
    Missing {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks that could not be dumped.
    Failed {
        /// The ranks.
        ranks: RankSet,
    },
    /// Processes whose COMM_WORLD rank is unknown.
    NoWorldRank {
        /// How many.
        processes: usize,
    },
    /// Ranks some of whose queues could not be read.
    Unreadable {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks with waits the analysis cannot follow (a peer's COMM_WORLD rank unknown).
    UnknownPeers {
        /// The waiting ranks.
        ranks: RankSet,
    },
    /// Ranks that would be deadlocked if their pending operations were blocking calls;
    /// nothing proves they are.
    Unproven {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks deadlocked unless the MPI buffers their standard-mode sends: each such send
    /// is one no receive of its destination can take (the recorder's counts), and every
    /// other wait of theirs is proven. A program that relies on buffering is unsafe (the
    /// standard promises none); an MPI that buffers the messages lets them return.
    Buffering {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks polling (`MPI_Test`, `MPI_Iprobe`) for what only ranks inside MPI could
    /// give: a loop that only polls waits for ever, and its end cannot be seen from
    /// outside.
    Polling {
        /// The ranks.
        ranks: RankSet,
        /// The first one's call.
        call: String,
    },
    /// Ranks in different blocking collectives: deadlocked if they share a communicator,
    /// which the stacks do not say.
    Collectives {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks that wait for each other in the last samples of a watch only: too recent to
    /// tell a deadlock from traffic.
    Recent {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks in collectives whose communicator is unknown (the call's arguments could
    /// not be read): whom they wait for is unknown.
    UnknownCommunicators {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks without a stack (not asked for, or not unwound): any of them may be blocked
    /// in a call its queues do not show (a collective, a blocking receive ch3 never
    /// lists).
    NoStacks {
        /// The ranks.
        ranks: RankSet,
    },
    /// Ranks with a thread whose place is unknown: an MPI call the table does not know, an
    /// entry into the MPI library without a name, a stack that could not be followed.
    UnknownPlaces {
        /// The ranks.
        ranks: RankSet,
        /// Where the first of them is (the call, as its frame names it).
        example: String,
    },
    /// Ranks whose every thread waits for another thread of its process (a lock, a
    /// condition variable, a join): held by their own threads, outside MPI.
    SelfBlocked {
        /// The ranks.
        ranks: RankSet,
    },
    /// The processes were not seen at one moment (cores, or a cut that did not hold across
    /// hosts): what one showed and what another showed may never have coexisted.
    Snapshot {
        /// Why.
        why: String,
    },
    /// Ranks that stayed in their calls through a hold but worked meanwhile (moved data,
    /// wrote a file): no deadlock can be proven of them while they work.
    Busy {
        /// The ranks.
        ranks: RankSet,
        /// What the first of them did.
        busy: crate::hold::Busy,
        /// Milliseconds they were watched.
        window_ms: u64,
    },
    /// Ranks that might be deadlocked but could not be held (why).
    Unheld {
        /// The ranks.
        ranks: RankSet,
        /// Why.
        why: String,
    },
    /// Ranks in a state the analysis does not follow: what they wait for is not known,
    /// and nothing is concluded of the others that rests on them.
    NotFollowed {
        /// The ranks.
        ranks: RankSet,
        /// Their state, in short.
        why: String,
    },
}

/// The diagnosis of one dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The conclusions, most serious first; never empty.
    pub findings: Vec<Finding>,
    /// The wait-for graph.
    pub waits: Vec<Wait>,
    /// The ranks proven deadlocked (on a cycle or knot, or blocked behind one).
    pub deadlocked: RankSet,
    /// The ranks that would be deadlocked if their pending operations were blocking
    /// (includes `deadlocked`).
    pub possibly_deadlocked: RankSet,
    /// What each dumped (or failed) rank looked like.
    pub facts: BTreeMap<i32, RankFacts>,
    /// The answer.
    pub verdict: Verdict,
    /// Why the answer is not "no deadlock", when it is undetermined (also listed beside
    /// a proven deadlock: what else could not be seen).
    pub doubts: Vec<Doubt>,
    /// What a hold of the job showed, when one was made.
    pub hold: Option<HoldReport>,
}

/// A hold as the analysis judged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldReport {
    /// How long the ranks were watched, in milliseconds.
    pub window_ms: u64,
    /// The ranks watched.
    pub watched: RankSet,
    /// Ranks that stayed and did nothing.
    pub quiet: RankSet,
    /// Ranks that moved, by how.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<(RankSet, crate::hold::Moved)>,
    /// Ranks that stayed but worked, by what they did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy: Vec<(RankSet, crate::hold::Busy)>,
    /// Ranks that could not be watched.
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub unwatched: RankSet,
    /// The ranks the hold proved deadlocked.
    pub proven: RankSet,
}

impl Diagnosis {
    /// Whether a deadlock is proven.
    pub fn has_deadlock(&self) -> bool {
        self.verdict == Verdict::Deadlock
    }

    /// The findings of one kind.
    pub fn of_kind(&self, kind: FindingKind) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

/// A deadlock seen in some samples of a watch but not all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dissolved {
    /// Index of the sample it was first seen in (0 is the first).
    pub sample: usize,
    /// The finding, with evidence into that sample's dump.
    pub finding: Finding,
}

/// What persisted across the samples of a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persistence {
    /// Number of samples.
    pub samples: usize,
    /// The waits present in every sample (the same requests, when the library names
    /// them), as the last sample shows them.
    pub waits: Vec<Wait>,
    /// Deadlock findings on the persistent waits (cycles and knots that persisted, and the
    /// ranks blocked behind them), or one summary finding when none did. Evidence refers
    /// to the last sample.
    pub findings: Vec<Finding>,
    /// Deadlocks in the last sample that an earlier sample did not have: too recent to
    /// call persistent or traffic.
    pub new: Vec<Dissolved>,
    /// Deadlocks seen in some sample that the last sample no longer has: traffic.
    pub dissolved: Vec<Dissolved>,
    /// The ranks proven deadlocked in every sample.
    pub deadlocked: RankSet,
    /// The ranks that would be deadlocked in every sample if their pending operations
    /// were blocking.
    pub possibly_deadlocked: RankSet,
    /// The answer over the whole watch.
    pub verdict: Verdict,
    /// Why it is not "no deadlock": what some sample could not see, and what persisted
    /// or appeared without proof.
    pub doubts: Vec<Doubt>,
}

impl Persistence {
    /// Whether a proven deadlock persisted.
    pub fn has_deadlock(&self) -> bool {
        self.verdict == Verdict::Deadlock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations() {
        assert_eq!(Relation::of(3, 0, 4), Relation::Right);
        assert_eq!(Relation::of(0, 3, 4), Relation::Left);
        assert_eq!(Relation::of(0, 1, 2), Relation::Other);
        assert_eq!(Relation::of(2, 2, 4), Relation::Itself);
        assert_eq!(Relation::of(0, 2, 4), Relation::Absolute);
        assert_eq!(Relation::of(0, -1, 4), Relation::Absolute);
    }
}
