//! A job's message queues as the MQD library reported them, rank by rank.
//!
//! Every type here serialises to the `ranks` part of the `mqd/3` document field for field;
//! an operation mirrors `mqs_pending_operation`, a communicator `mqs_communicator` plus its
//! group and three queues.

use crate::comm_group::CommGroup;
use serde::de::Deserializer;
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Version of the JSON document; it changes with any incompatible change.
pub const SCHEMA: &str = "mqd/3";

/// A whole dump: the library used, how the processes were found, and each process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDump {
    /// The MQD library that read the queues.
    pub dll: LibraryInfo,
    /// How the processes were found.
    pub acquired_by: Acquisition,
    /// The starter's pid, for a job found through its starter.
    pub starter_pid: Option<i32>,
    /// `MPIR_debug_abort_string` when the job is aborting.
    pub abort_message: Option<String>,
    /// How many ranks the job has, when the acquisition knows (its process table):
    /// ranks below it that are not in `ranks` were not seen.
    #[serde(default)]
    pub job_size: Option<u32>,
    /// Whether the processes were all stopped at one moment before any was read and let
    /// go only after every one was read: one consistent snapshot of the job.
    #[serde(default = "Snapshot::unrecorded")]
    pub snapshot: Snapshot,
    /// The processes, in rank order (processes of unknown rank last).
    pub ranks: Vec<RankDump>,
}

impl JobDump {
    /// The dump of `ranks` attached one by one at one moment, with no library named:
    /// what analyses of hand-made ranks start from.
    pub fn of_ranks(ranks: Vec<RankDump>) -> JobDump {
        JobDump {
            dll: LibraryInfo {
                path: String::new(),
                version: String::new(),
                note: None,
            },
            acquired_by: Acquisition::Attach,
            starter_pid: None,
            abort_message: None,
            job_size: None,
            snapshot: Snapshot::One,
            ranks,
        }
    }

    /// A stock MPI's job (no queues) of one rank per thread of `threads`, rank r with
    /// pid 100 + r, its size their number: what analyses of hand-made calls start from.
    pub fn of_threads(threads: Vec<crate::stack::ThreadStack>) -> JobDump {
        let n = threads.len();
        let ranks = threads
            .into_iter()
            .enumerate()
            .map(|(r, t)| RankDump {
                threads: vec![t],
                ..RankDump::unread(r as i32, Some(100 + r as i32), None)
            })
            .collect();
        JobDump {
            job_size: u32::try_from(n).ok(),
            ..JobDump::of_ranks(ranks)
        }
    }

    /// The job's size where something says it: the process table's, else the largest
    /// `MPI_COMM_WORLD` a rank reports (`None`: only the ranks seen suggest one).
    pub fn known_size(&self) -> Option<u32> {
        let world = self
            .ranks
            .iter()
            .flat_map(|r| r.communicators())
            .filter(|c| c.name == "MPI_COMM_WORLD")
            .filter_map(|c| u32::try_from(c.size).ok())
            .max();
        self.job_size.or(world)
    }

    /// How many ranks the job has: its process table's count, else the largest
    /// `MPI_COMM_WORLD` a rank reports, else one more than its highest rank.
    pub fn world_size(&self) -> u32 {
        self.known_size().unwrap_or_else(|| {
            let ranked = self.ranks.iter().filter_map(|r| u32::try_from(r.rank).ok());
            ranked.max().map_or(0, |r| r + 1)
        })
    }
}

/// Whether a dump is one consistent snapshot of its job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Snapshot {
    /// Every process was stopped before the first was read, and none was let go before
    /// the last was stopped: what each shows held at one moment.
    One,
    /// The processes were seen at different moments: a wait seen at one and its partner
    /// seen at another may never have coexisted.
    Separate {
        /// Why.
        why: String,
    },
}

impl Snapshot {
    /// Separate, for a document that does not say.
    pub fn unrecorded() -> Snapshot {
        Snapshot::Separate {
            why: "the document does not say that its processes were seen at one moment".into(),
        }
    }

    /// One consistent snapshot.
    pub fn is_one(&self) -> bool {
        matches!(self, Snapshot::One)
    }
}

/// What the MPI library itself records about a process, read by the message-queue
/// library where it knows how (ours does, for MPICH).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MpiState {
    /// Where the process is in MPI's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MpiPhase>,
    /// The thread level `MPI_Init_thread` provided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_level: Option<ThreadLevel>,
}

/// Where a process is in MPI's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MpiPhase {
    /// `MPI_Init` not called yet.
    NotInitialized,
    /// Inside `MPI_Init`.
    Initializing,
    /// Between `MPI_Init` and `MPI_Finalize`'s return.
    Initialized,
    /// In `MPI_Finalize` (the hang recorder says so): it starts no message or
    /// collective again.
    Finalizing,
    /// `MPI_Finalize` returned: the process takes no further part in MPI.
    Finalized,
}

/// `MPI_THREAD_SINGLE` ... `MPI_THREAD_MULTIPLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadLevel {
    /// One thread.
    Single,
    /// Only the main thread calls MPI.
    Funneled,
    /// Any thread, one at a time.
    Serialized,
    /// Any thread, at once.
    Multiple,
}

impl ThreadLevel {
    /// The level of MPI's value (`MPI_THREAD_SINGLE` 0 ... `MPI_THREAD_MULTIPLE` 3).
    pub fn from_mpi(value: i64) -> Option<ThreadLevel> {
        Some(match value {
            0 => ThreadLevel::Single,
            1 => ThreadLevel::Funneled,
            2 => ThreadLevel::Serialized,
            3 => ThreadLevel::Multiple,
            _ => return None,
        })
    }
}

/// An MQD library, as loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryInfo {
    /// Its path.
    pub path: String,
    /// Its `mqs_version_string`.
    pub version: String,
    /// Why this library rather than the one the job names, when that one is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How the processes of a dump were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Acquisition {
    /// Pids given by the user.
    Attach,
    /// The starter's `MPIR_proctable`.
    Mpir,
    /// The starter's `MPI2DD_info` tables.
    Mpi2dd,
    /// The starter's descendants that carry a launcher rank in their environment (a
    /// starter without MPIR symbols, as distributions ship `mpiexec`).
    Environment,
    /// Core files.
    Core,
}

/// One process of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankDump {
    /// COMM_WORLD rank; -1 when unknown.
    pub rank: i32,
    /// Process id (for a core, the pid it records).
    pub pid: Option<i32>,
    /// Host it runs on.
    pub host: Option<String>,
    /// Executable path.
    pub executable: Option<String>,
    /// The library's has-queues message for the process.
    pub message: Option<String>,
    /// The signal that killed it, for a core file.
    pub signal: Option<i32>,
    /// It repeats another entry of the dump (a pid or core given twice): listed, not
    /// analysed.
    pub duplicate: bool,
    /// The stack of each thread, when asked for.
    pub threads: Vec<crate::stack::ThreadStack>,
    /// Whether its send queues list blocking sends too (`Some(false)`: only
    /// non-blocking ones, so a synchronous message not listed at its sender comes from a
    /// blocking send); `None` when the library does not say.
    pub lists_blocking_sends: Option<bool>,
    /// What the MPI library records about the process (its phase, its thread level),
    /// when the message-queue library reads it.
    pub mpi: MpiState,
    /// Its communicators in the library's order, or why there are none.
    pub outcome: Result<Vec<Communicator>, String>,
    /// What could not be read beside its queues and stacks, each said once ("Python
    /// frames not read: ...").
    pub notes: Vec<String>,
    /// The messages the hang recorder counted, where it is loaded.
    pub traffic: Option<crate::traffic::Traffic>,
}

impl RankDump {
    /// A process of `rank` (-1: unknown) not read yet: nothing known but what is given.
    pub fn unread(rank: i32, pid: Option<i32>, executable: Option<String>) -> RankDump {
        RankDump {
            rank,
            pid,
            host: None,
            executable,
            message: None,
            lists_blocking_sends: None,
            signal: None,
            duplicate: false,
            threads: Vec::new(),
            mpi: MpiState::default(),
            outcome: Err(String::new()),
            notes: Vec::new(),
            traffic: None,
        }
    }

    /// The COMM_WORLD rank, when known.
    pub fn world_rank(&self) -> Option<u32> {
        u32::try_from(self.rank).ok()
    }

    /// The communicators; none when the process could not be dumped.
    pub fn communicators(&self) -> &[Communicator] {
        match &self.outcome {
            Ok(comms) => comms,
            Err(_) => &[],
        }
    }
}

impl Serialize for RankDump {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("RankDump", 14)?;
        out.serialize_field("rank", &self.rank)?;
        out.serialize_field("pid", &self.pid)?;
        out.serialize_field("host", &self.host)?;
        out.serialize_field("executable", &self.executable)?;
        out.serialize_field("message", &self.message)?;
        out.serialize_field("lists_blocking_sends", &self.lists_blocking_sends)?;
        out.serialize_field("signal", &self.signal)?;
        out.serialize_field("duplicate", &self.duplicate)?;
        // Each thread with where it is with respect to MPI (read back, it is recomputed).
        #[derive(Serialize)]
        struct Thread<'a> {
            #[serde(flatten)]
            stack: &'a crate::stack::ThreadStack,
            location: crate::stack::Location,
        }
        let threads: Vec<Thread> = self
            .threads
            .iter()
            .map(|t| Thread {
                stack: t,
                location: t.location_in(self.executable.as_deref()),
            })
            .collect();
        out.serialize_field("threads", &threads)?;
        out.serialize_field("mpi", &self.mpi)?;
        out.serialize_field("error", &self.outcome.as_ref().err())?;
        out.serialize_field("communicators", self.communicators())?;
        if !self.notes.is_empty() {
            out.serialize_field("notes", &self.notes)?;
        }
        if let Some(traffic) = &self.traffic {
            out.serialize_field("traffic", traffic)?;
        }
        out.end()
    }
}

/// [`RankDump`] as the document spells it.
#[derive(Deserialize)]
struct RankDumpFields {
    rank: i32,
    pid: Option<i32>,
    host: Option<String>,
    executable: Option<String>,
    message: Option<String>,
    #[serde(default)]
    lists_blocking_sends: Option<bool>,
    #[serde(default)]
    signal: Option<i32>,
    #[serde(default)]
    duplicate: bool,
    #[serde(default)]
    threads: Vec<crate::stack::ThreadStack>,
    #[serde(default)]
    mpi: MpiState,
    error: Option<String>,
    #[serde(default)]
    communicators: Vec<Communicator>,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default)]
    traffic: Option<crate::traffic::Traffic>,
}

impl<'de> Deserialize<'de> for RankDump {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = RankDumpFields::deserialize(d)?;
        Ok(RankDump {
            rank: f.rank,
            pid: f.pid,
            host: f.host,
            executable: f.executable,
            message: f.message,
            lists_blocking_sends: f.lists_blocking_sends,
            signal: f.signal,
            duplicate: f.duplicate,
            threads: f.threads,
            mpi: f.mpi,
            outcome: match f.error {
                Some(e) => Err(e),
                None => Ok(f.communicators),
            },
            notes: f.notes,
            traffic: f.traffic,
        })
    }
}

/// Groups held once however many ranks hold them: equal tables become one shared table
/// (a progression is three numbers and needs no sharing).
#[derive(Debug, Default)]
pub struct GroupTable {
    groups: std::collections::HashSet<std::sync::Arc<[i32]>>,
    /// The tables' addresses: a group that is one of them is not hashed again (a
    /// million ranks' table costs a million numbers to hash).
    held: std::collections::HashSet<usize>,
}

impl GroupTable {
    /// An empty table.
    pub fn new() -> GroupTable {
        GroupTable::default()
    }

    /// The shared copy of `group`.
    pub fn share(&mut self, group: &[i32]) -> CommGroup {
        // Looked up before it is made: a table already held is not allocated again
        // (a progression is never held, and is made without allocating).
        if let Some(shared) = self.groups.get(group) {
            return CommGroup::of_table(shared.clone());
        }
        let group = CommGroup::from(group);
        let Some(table) = group.table() else {
            return group;
        };
        self.held.insert(table.as_ptr() as usize);
        self.groups.insert(table.clone());
        group
    }

    /// Makes every group of `comms` the table's shared copy (a table not yet in the
    /// table becomes it, uncopied).
    pub fn share_all(&mut self, comms: &mut [Communicator]) {
        for c in comms {
            let Some(table) = c.group.as_ref().and_then(CommGroup::table) else {
                continue;
            };
            if self.held.contains(&(table.as_ptr() as usize)) {
                continue;
            }
            match self.groups.get(&**table) {
                Some(shared) => c.group = Some(CommGroup::of_table(shared.clone())),
                None => {
                    self.held.insert(table.as_ptr() as usize);
                    self.groups.insert(table.clone());
                }
            }
        }
    }
}

/// One communicator of a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Communicator {
    /// `mqs_communicator::unique_id`.
    pub unique_id: u64,
    /// Its name.
    pub name: String,
    /// Its size (local group).
    pub size: i64,
    /// This process's rank in it.
    pub local_rank: i64,
    /// Its context ids, as MPI identifies it in every member, when the library says them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextIds>,
    /// COMM_WORLD rank of each local rank, when the library exports and knows it. A
    /// progression or a shared table: the ranks of a job mostly hold the same groups,
    /// and a copy each is quadratic.
    pub group: Option<CommGroup>,
    /// Why `group` is missing, when `mqs_get_comm_group` failed (not for no information).
    pub group_error: Option<MqsError>,
    /// Class `mqs_pending_receives`.
    pub pending_receives: Queue,
    /// Class `mqs_unexpected_messages`.
    pub unexpected_messages: Queue,
    /// Class `mqs_pending_sends`.
    pub pending_sends: Queue,
}

/// The context ids of a communicator: what MPI matches messages by. An intracommunicator
/// has one, the same in every member; each side of an intercommunicator receives with
/// the id the other side sends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ContextIds {
    /// The id its messages are sent with.
    pub context_id: i64,
    /// The id its messages are received with.
    pub recv_context_id: i64,
}

impl ContextIds {
    /// The same for both sides of the communicator: the two ids, smaller first.
    pub fn identity(self) -> (i64, i64) {
        (
            self.context_id.min(self.recv_context_id),
            self.context_id.max(self.recv_context_id),
        )
    }
}

/// The three queues of a communicator, in the order `mqs_op_class` numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// Posted receives.
    PendingReceives,
    /// Messages that arrived before a receive was posted.
    UnexpectedMessages,
    /// Sends not yet matched.
    PendingSends,
}

impl QueueKind {
    /// All three, receives first.
    pub const ALL: [QueueKind; 3] = [
        QueueKind::PendingReceives,
        QueueKind::UnexpectedMessages,
        QueueKind::PendingSends,
    ];

    /// The document's key for it: "pending_receives", ...
    pub fn key(self) -> &'static str {
        match self {
            QueueKind::PendingReceives => "pending_receives",
            QueueKind::UnexpectedMessages => "unexpected_messages",
            QueueKind::PendingSends => "pending_sends",
        }
    }
}

impl Communicator {
    /// One of its queues.
    pub fn queue(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::PendingReceives => &self.pending_receives,
            QueueKind::UnexpectedMessages => &self.unexpected_messages,
            QueueKind::PendingSends => &self.pending_sends,
        }
    }
}

/// One queue of one communicator, as the library answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queue {
    /// The entries, in the library's order (possibly none).
    Operations(Vec<Operation>),
    /// `mqs_setup_operation_iterator` said `mqs_no_information`.
    NoInformation,
    /// The iterator failed (or exceeded the debugger's loop bound).
    Error(MqsError),
}

impl Queue {
    /// The entries; empty unless the queue is [`Queue::Operations`].
    pub fn ops(&self) -> &[Operation] {
        match self {
            Queue::Operations(ops) => ops,
            _ => &[],
        }
    }

    /// The error, if the queue could not be read.
    pub fn error(&self) -> Option<&MqsError> {
        match self {
            Queue::Error(e) => Some(e),
            _ => None,
        }
    }
}

impl Serialize for Queue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("Queue", 3)?;
        out.serialize_field("available", &matches!(self, Queue::Operations(_)))?;
        out.serialize_field("error", &self.error())?;
        out.serialize_field("operations", self.ops())?;
        out.end()
    }
}

#[derive(Deserialize)]
struct QueueFields {
    available: bool,
    error: Option<MqsError>,
    #[serde(default)]
    operations: Vec<Operation>,
}

impl<'de> Deserialize<'de> for Queue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = QueueFields::deserialize(d)?;
        Ok(match (f.available, f.error) {
            (true, _) => Queue::Operations(f.operations),
            (false, Some(e)) => Queue::Error(e),
            (false, None) => Queue::NoInformation,
        })
    }
}

/// A failed MQD call, with everything a user would be shown.
///
/// `code` is the library's result code (>= 100 for its own errors), or a negative code
/// for what the debugger itself refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqsError {
    /// The result code.
    pub code: i32,
    /// Its text (`mqs_dll_error_string` for the library's codes).
    pub text: String,
    /// The has-queues message, `%s` replaced by the target's name, when there was one.
    pub message: Option<String>,
}

impl fmt::Display for MqsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.text, self.code)?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MqsError {}

/// `mqs_pending_operation::status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationStatus {
    /// `mqs_st_pending`: not matched yet.
    Pending,
    /// `mqs_st_matched`: matched, data still moving.
    Matched,
    /// `mqs_st_complete`: done, request not yet waited for.
    Complete,
    /// A value the standard does not define.
    Other(i32),
}

impl OperationStatus {
    /// The C value.
    pub fn code(self) -> i32 {
        match self {
            OperationStatus::Pending => 0,
            OperationStatus::Matched => 1,
            OperationStatus::Complete => 2,
            OperationStatus::Other(n) => n,
        }
    }

    /// The status of a C value.
    pub fn from_code(code: i32) -> OperationStatus {
        match code {
            0 => OperationStatus::Pending,
            1 => OperationStatus::Matched,
            2 => OperationStatus::Complete,
            other => OperationStatus::Other(other),
        }
    }
}

/// "pending", "matched", "complete", or the undefined number itself.
impl Serialize for OperationStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OperationStatus::Pending => s.serialize_str("pending"),
            OperationStatus::Matched => s.serialize_str("matched"),
            OperationStatus::Complete => s.serialize_str("complete"),
            OperationStatus::Other(n) => s.serialize_i32(*n),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StatusText {
    Name(String),
    Number(i32),
}

impl<'de> Deserialize<'de> for OperationStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StatusText::deserialize(d)? {
            StatusText::Number(n) => Ok(OperationStatus::Other(n)),
            StatusText::Name(name) => match name.as_str() {
                "pending" => Ok(OperationStatus::Pending),
                "matched" => Ok(OperationStatus::Matched),
                "complete" => Ok(OperationStatus::Complete),
                other => Err(serde::de::Error::unknown_variant(
                    other,
                    &["pending", "matched", "complete"],
                )),
            },
        }
    }
}

/// What the library knows of the sender of an unexpected message (MPICH's CH3 records
/// whether the send was synchronous and whether its data was sent eagerly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SenderState {
    /// A synchronous send: the sender waits until a receive matches.
    Waits,
    /// A standard send whose data arrived eagerly: the sender has gone on.
    GoneOn,
}

/// One entry of a queue, field for field as `mqs_pending_operation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Completion state.
    pub status: OperationStatus,
    /// Peer rank in the communicator, -1 for any source.
    pub desired_local_rank: i64,
    /// Peer rank in COMM_WORLD, -1 when unknown or any.
    pub desired_global_rank: i64,
    /// An MPI_ANY_TAG receive.
    pub tag_wild: bool,
    /// Tag asked for (meaningless when `tag_wild`).
    pub desired_tag: i64,
    /// Length asked for.
    pub desired_length: i64,
    /// The data sits in a library buffer.
    pub system_buffer: bool,
    /// Address of the data in the target.
    pub buffer: u64,
    /// Matched peer rank in the communicator.
    pub actual_local_rank: i64,
    /// Matched peer rank in COMM_WORLD.
    pub actual_global_rank: i64,
    /// Matched tag.
    pub actual_tag: i64,
    /// Matched length.
    pub actual_length: i64,
    /// The non-empty `extra_text` lines, lossy UTF-8.
    pub extra_text: Vec<String>,
    /// For an unexpected message: whether its sender still waits for it, when the
    /// library says (decoded from its notes by the debugger).
    #[serde(default)]
    pub sender: Option<SenderState>,
    /// The MPI request behind it, when the library names it (our library's notes):
    /// the same request in two samples is the same operation, still pending.
    #[serde(default)]
    pub request: Option<u64>,
    /// Its peer's rank is in the remote group of an intercommunicator (the library's
    /// notes say so): no relation to this rank's own.
    #[serde(default)]
    pub remote_group: bool,
    /// A message of a collective operation's own algorithm on this communicator (the
    /// library's notes say so): not a point-to-point operation of the program.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub collective: bool,
}

impl Operation {
    /// A pending operation with `peer` (local and global rank alike) and `tag`, one
    /// element, nothing matched yet and no notes: what tests and fixtures build on.
    pub fn pending(peer: i64, tag: i64) -> Operation {
        Operation {
            status: OperationStatus::Pending,
            desired_local_rank: peer,
            desired_global_rank: peer,
            tag_wild: false,
            desired_tag: tag,
            desired_length: 1,
            system_buffer: false,
            buffer: 0,
            actual_local_rank: -1,
            actual_global_rank: -1,
            actual_tag: -1,
            actual_length: 0,
            extra_text: Vec::new(),
            sender: None,
            request: None,
            remote_group: false,
            collective: false,
        }
    }
}
