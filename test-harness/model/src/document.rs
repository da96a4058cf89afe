//! The JSON documents `mqd` prints (schema [`SCHEMA`](crate::dump::SCHEMA)): the dump,
//! and the analysis with the words a renderer chose for it beside its structured facts.
//!
//! A job document is `{"schema", "dll", "acquired_by", "starter_pid", "abort_message",
//! "ranks", "aggregated", "diagnosis", "verdict"}`; a watch document is `{"schema",
//! "samples", "interval_seconds", "persistent"}`.

use crate::diagnosis::{Certainty, CommKey, Doubt, FindingKind, OpRef, Subject, Verdict, WaitKind};
use crate::dump::{JobDump, OperationStatus};
use crate::rank_set::RankSet;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// What `mqd --json` prints for a dumped job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDocument<'a> {
    /// [`SCHEMA`](crate::dump::SCHEMA).
    pub schema: Cow<'a, str>,
    /// The dump.
    #[serde(flatten)]
    pub job: Cow<'a, JobDump>,
    /// Ranks that share a state.
    pub aggregated: AggregatedDoc,
    /// The diagnosis.
    pub diagnosis: DiagnosisDoc,
    /// The diagnosis as text.
    pub verdict: String,
    /// With `--stacks`: the stacks merged across ranks, outermost frame first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<crate::stack::StackNode>>,
}

/// `aggregated`: the rank sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregatedDoc {
    /// In order of their lowest rank.
    pub groups: Vec<GroupDoc>,
}

/// Ranks in the same state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDoc {
    /// Their COMM_WORLD ranks.
    pub ranks: RankSet,
    /// The same, listed.
    pub rank_list: Vec<u32>,
    /// Pids of processes in that state whose rank is unknown.
    pub unranked_pids: Vec<Option<i32>>,
    /// The state on one line.
    pub summary: String,
    /// One line per distinct operation.
    pub lines: Vec<String>,
    /// Why they could not be dumped.
    pub error: Option<String>,
    /// Their communicators with something queued, normalised.
    pub communicators: Vec<CommFormDoc>,
}

/// A normalised communicator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommFormDoc {
    /// Its name.
    pub name: String,
    /// Its size.
    pub size: i64,
    /// Posted receives.
    pub pending_receives: QueueFormDoc,
    /// Unexpected messages.
    pub unexpected_messages: QueueFormDoc,
    /// Pending sends.
    pub pending_sends: QueueFormDoc,
}

/// A normalised queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFormDoc {
    /// The library had information.
    pub available: bool,
    /// Why it could not be read.
    pub error: Option<String>,
    /// The distinct operations.
    pub operations: Vec<OpFormDoc>,
}

/// A normalised operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpFormDoc {
    /// Its peer.
    pub peer: PeerDoc,
    /// Its tag (null: any).
    pub tag: Option<i64>,
    /// Any tag.
    pub tag_wild: bool,
    /// Its count (or length).
    pub count: Option<i64>,
    /// Its status.
    pub status: Option<OperationStatus>,
    /// A message of a collective's own algorithm.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub collective: bool,
    /// How many times the rank has it.
    pub times: usize,
}

/// A normalised peer: `{"relation": "right"}`, `{"relation": "absolute", "world_rank": 3}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerDoc {
    /// "any", "itself", "right", "left", "other" or "absolute".
    pub relation: String,
    /// For an absolute peer of known COMM_WORLD rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_rank: Option<i64>,
    /// For an absolute peer known only by its rank in the communicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<i64>,
}

/// `diagnosis`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosisDoc {
    /// "deadlock", "no_deadlock" or "undetermined".
    pub verdict: Verdict,
    /// Why the verdict is not "no deadlock", each with its words.
    pub doubts: Vec<DoubtDoc>,
    /// A deadlock is proven (the verdict is "deadlock").
    pub deadlock: bool,
    /// The ranks proven deadlocked.
    pub deadlocked: RankSet,
    /// The ranks that would be deadlocked if their pending operations were blocking.
    pub possibly_deadlocked: RankSet,
    /// The findings, most serious first.
    pub findings: Vec<FindingDoc>,
    /// The wait-for graph.
    pub waits: Vec<WaitDoc>,
    /// What a hold of the job showed, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<crate::diagnosis::HoldReport>,
}

/// A reason for an undetermined verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoubtDoc {
    /// Its facts.
    pub doubt: Doubt,
    /// Its words.
    pub text: String,
}

/// A finding: its facts, and its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingDoc {
    /// What it is about.
    pub kind: FindingKind,
    /// "definite", or "possible" for a deadlock resting on operations that may be
    /// non-blocking.
    pub certainty: Certainty,
    /// Its ranks.
    pub ranks: RankSet,
    /// The same, listed.
    pub rank_list: Vec<u32>,
    /// The conclusion, one paragraph.
    pub text: String,
    /// The operations that prove it, one line each.
    pub evidence: Vec<String>,
    /// How many more operations prove it than `evidence` words (all are in
    /// `operations`).
    pub evidence_omitted: usize,
    /// For a cycle, its ranks in order.
    pub cycle: Option<Vec<i32>>,
    /// Wait-for edges `[from, to]`.
    pub edges: Vec<[i32; 2]>,
    /// The communicators it is about.
    pub communicators: Vec<CommKey>,
    /// The operations that prove it, by position in `ranks`.
    pub operations: Vec<OpRef>,
    /// The facts the text words.
    pub subject: Subject,
}

/// One wait of the wait-for graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitDoc {
    /// The waiting rank.
    pub from: i32,
    /// The rank it waits for, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<i32>,
    /// The ranks it waits for any of ("unknown" when the group is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_any: Option<String>,
    /// The peer's rank in the communicator, when its COMM_WORLD rank is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_unknown_local_rank: Option<i64>,
    /// Send, unexpected or receive.
    pub kind: WaitKind,
    /// The communicator.
    pub communicator: CommKey,
    /// The waiting rank's rank in it.
    pub local_rank: i64,
    /// The peer's rank in it (-1: any source).
    pub peer_local_rank: i64,
    /// The relation of the peer ("any" for any source).
    pub relation: String,
    /// The tag (null: any).
    pub tag: Option<i64>,
    /// The count.
    pub count: i64,
    /// The operations involved, by position in `ranks` (their words are there).
    pub operations: Vec<OpRef>,
    /// The MPI call the waiting thread is blocked in, when its stack says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// It certainly holds its rank, whatever messages are on their way (part of a proof).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub proven: bool,
}

/// What `mqd watch --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchDocument {
    /// [`SCHEMA`](crate::dump::SCHEMA).
    pub schema: String,
    /// Samples taken.
    pub samples: usize,
    /// Samples asked for (more than `samples` when the watch was interrupted).
    pub samples_requested: usize,
    /// Seconds between samples.
    pub interval_seconds: f64,
    /// What persisted.
    pub persistent: PersistenceDoc,
    /// The watch's answer: the hold of the latest sample since which the ranks it
    /// watched stayed, or the last sample's own diagnosis (as `mqd job` gives it).
    pub diagnosis: DiagnosisDoc,
    /// The sample (0 is the first) the diagnosis is of; the hold ran from it to the end.
    pub diagnosis_sample: usize,
    /// The diagnosis as text.
    pub verdict: String,
}

/// `persistent` of a watch document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistenceDoc {
    /// Samples taken.
    pub samples: usize,
    /// "deadlock", "no_deadlock" or "undetermined", over the whole watch.
    pub verdict: Verdict,
    /// Why the verdict is not "no deadlock".
    pub doubts: Vec<DoubtDoc>,
    /// A proven deadlock persisted.
    pub deadlock: bool,
    /// The ranks proven deadlocked in every sample.
    pub deadlocked: RankSet,
    /// The ranks possibly deadlocked in every sample.
    pub possibly_deadlocked: RankSet,
    /// Findings on what persisted (operations refer to the last sample).
    pub findings: Vec<FindingDoc>,
    /// Deadlocks the last sample has that an earlier one did not (operations refer to
    /// the sample they were first seen in).
    pub new: Vec<FindingDoc>,
    /// Deadlocks of some samples that dissolved (operations refer to their sample).
    pub dissolved: Vec<FindingDoc>,
    /// The waits present in every sample.
    pub waits: Vec<WaitDoc>,
}

/// What `mqd dump --stats` prints on stderr: the callbacks each process cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsDocument {
    /// The statistics.
    pub mqd_stats: Stats,
}

/// The library and each process's costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// The library's path.
    pub dll: String,
    /// Per process.
    pub processes: Vec<ProcessStats>,
    /// The files whose DWARF this run indexed (none when every type query was answered
    /// from the cache of earlier runs' answers).
    #[serde(default)]
    pub indexed_debug_files: Vec<String>,
}

/// What an OMPD library asked for one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenMpStats {
    /// Memory reads.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Symbol look-ups.
    pub symbols: u64,
    /// Microseconds from finding the runtime to the threads' view (a child started,
    /// the library loaded and run, its answers merged).
    pub microseconds: u64,
}

/// What the library asked of the debugger for one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// Its rank.
    pub rank: i32,
    /// Its pid.
    pub pid: i32,
    /// `fetch_data` calls.
    pub fetches: u64,
    /// Bytes fetched.
    pub fetch_bytes: u64,
    /// Failed fetches.
    pub failed_fetches: u64,
    /// Largest fetch.
    pub largest_fetch: u64,
    /// `find_symbol` calls.
    pub find_symbol_calls: u64,
    /// `find_type` calls.
    pub find_type_calls: u64,
    /// `field_offset` calls.
    pub field_offset_calls: u64,
    /// Allocations.
    pub mallocs: u64,
    /// Frees.
    pub frees: u64,
    /// What the OpenMP runtime's debugging library (OMPD) asked for this process, and
    /// how long reading its OpenMP threads took (absent where none was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<OpenMpStats>,
}
