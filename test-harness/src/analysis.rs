//! Why a job hangs: rank-set aggregation of a [`JobDump`], and a diagnosis from a
//! wait-for graph over COMM_WORLD ranks.
//!
//! **Aggregation** ([`aggregate`]): ranks whose queues look the same once every peer is
//! written relative to the rank ("right neighbour" = local rank + 1 mod size, "left
//! neighbour", "itself", "the other rank" of a pair, "any source", else the absolute
//! COMM_WORLD rank) are listed once under their [`RankSet`]:
//! `ranks 0-63: "ring" send to right neighbour tag 5 count 1000; unexpected from left
//! neighbour tag 5`. For each operation the relative or the absolute form is chosen,
//! whichever more ranks share ("every rank receives from rank 0" stays absolute).
//! Communicators are identified across ranks by name and size (their unique ids are
//! addresses in each process).
//!
//! **Diagnosis** ([`diagnose`]): the queues become [`Wait`]s from one COMM_WORLD rank to
//! others. A pending send, and a message waiting unexpected at its destination, make the
//! sender wait for the receiver (an AND-edge; a send and its unexpected copy at the
//! destination are one message); a posted receive with a specific source makes the
//! receiver wait for that source (AND); an `MPI_ANY_SOURCE` receive waits for any member of
//! its communicator (an OR-edge to every member of the communicator's group; when the
//! library does not report the group, the wait is reported as unfollowable). A send (or
//! unexpected message) that a posted receive at its destination matches is *in transit*
//! and waits for nothing; so are operations in status "matched". Completed operations
//! ("completed, not yet waited") wait for nothing.
//!
//! A rank is deadlocked when one of the things it waits for can only come from deadlocked
//! ranks: an AND-edge into the set, or an OR-edge whose every member is in the set (the
//! greatest such set of blocked ranks; ranks that are not blocked are assumed to progress).
//! Inside it the analysis reports elementary cycles of AND-edges ("ranks 0 -> 1 -> 2 -> 3 ->
//! 0 each blocked in a send to its right neighbour on \"ring\", tag 5; no receive is posted
//! on any of them"), knots (strongly connected sets held together by OR-edges) and the ranks
//! blocked behind them. It also reports mismatches (a posted receive that would take a
//! message waiting at its rank but for the tag, the source or the communicator), ranks that
//! others wait for but that have no pending point-to-point communication (computing, or
//! blocked outside point-to-point), ranks waited for that were not dumped, waits that cannot
//! be followed, and a clean bill when nothing waits. Every [`Finding`] carries the
//! operations that prove it.
//!
//! **Watch** ([`persistent`]): only the waits present in every sample are kept and the
//! deadlock analysis is run again on them: a cycle that persists is a deadlock, one that
//! dissolves was traffic.
//!
//! Limits: the queues do not say whether a rank is blocked *in* the call (a pending
//! `MPI_Isend` counts as a wait); ch3/ch4 list no blocking sends, so a blocked `MPI_Send`
//! shows only as its message at the destination, and an eager message sitting unexpected
//! does not prove that its sender still waits (the texts say so where it matters); the
//! remote group of an intercommunicator is not in the model.

use crate::ranks::RankSet;
use crate::report::JobDump;
use crate::session::{CommunicatorView, Operation, OperationStatus, Queue};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

// ======================================================================= communicators

/// A communicator as the analysis identifies it across ranks: by name and size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommKey {
    /// Its name (`MPI_COMM_WORLD`, "ring", possibly empty).
    pub name: String,
    /// Its size (local group).
    pub size: i64,
}

impl CommKey {
    fn of(c: &CommunicatorView) -> CommKey {
        CommKey {
            name: c.name.clone(),
            size: c.size,
        }
    }

    /// `"ring"`, or `an unnamed communicator of size 4`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("an unnamed communicator of size {}", self.size)
        } else {
            format!("{:?}", self.name)
        }
    }

    fn to_json(&self) -> Value {
        json!({ "name": self.name, "size": self.size })
    }
}

/// Where a peer sits relative to a rank, in the communicator's local ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

    /// "its right neighbour" ... ("" for [`Relation::Absolute`]).
    fn its(self) -> &'static str {
        match self {
            Relation::Itself => "itself",
            Relation::Right => "its right neighbour",
            Relation::Left => "its left neighbour",
            Relation::Other => "the other rank",
            Relation::Absolute => "",
        }
    }

    /// "their right neighbour" ... ("" for [`Relation::Absolute`]).
    fn their(self) -> &'static str {
        match self {
            Relation::Itself => "themselves",
            Relation::Right => "their right neighbour",
            Relation::Left => "their left neighbour",
            Relation::Other => "the other rank",
            Relation::Absolute => "",
        }
    }
}

/// The relation of local rank `peer` to local rank `own` in a communicator of `size`.
pub fn relation(own: i64, peer: i64, size: i64) -> Relation {
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

/// COMM_WORLD rank of a peer given by the library (`global`) or, on COMM_WORLD, its
/// local rank.
fn world_of(comm: &CommunicatorView, local: i64, global: i64) -> Option<i32> {
    if global >= 0 {
        return i32::try_from(global).ok();
    }
    if local >= 0 && comm.name == "MPI_COMM_WORLD" {
        return i32::try_from(local).ok();
    }
    None
}

/// The COMM_WORLD ranks a receive from any source on `comm` may come from: the group,
/// unless it is missing or does not map the peers the library resolved (as on an
/// intercommunicator, whose peers are in the remote group).
fn peer_group(comm: &CommunicatorView) -> Option<RankSet> {
    let group = comm.group.as_ref()?;
    if group.len() as i64 != comm.size || group.iter().any(|&r| r < 0) {
        return None;
    }
    let queues = [
        &comm.pending_receives,
        &comm.unexpected_messages,
        &comm.pending_sends,
    ];
    let consistent = queues.iter().flat_map(|q| q.ops()).all(|op| {
        op.desired_local_rank < 0
            || op.desired_global_rank < 0
            || usize::try_from(op.desired_local_rank)
                .ok()
                .and_then(|l| group.get(l))
                .is_some_and(|&w| i64::from(w) == op.desired_global_rank)
    });
    consistent.then(|| RankSet::from_i32s(group))
}

fn is_complete(op: &Operation) -> bool {
    op.status == OperationStatus::Complete
}

fn extra(op: &Operation) -> String {
    if op.extra_text.is_empty() {
        String::new()
    } else {
        format!(" [{}]", op.extra_text.join("; "))
    }
}

fn tag_words(tag: Option<i64>) -> String {
    match tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".into(),
    }
}

// ========================================================================= aggregation

/// A peer, normalised for aggregation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum PeerForm {
    Any,
    Relative(Relation),
    World(i64),
    Local(i64),
}

impl PeerForm {
    fn text(&self) -> String {
        match self {
            PeerForm::Any => "any source".into(),
            PeerForm::Relative(Relation::Right) => "right neighbour".into(),
            PeerForm::Relative(Relation::Left) => "left neighbour".into(),
            PeerForm::Relative(Relation::Other) => "the other rank".into(),
            PeerForm::Relative(_) => "itself".into(),
            PeerForm::World(w) => format!("rank {w}"),
            PeerForm::Local(l) => format!("local rank {l}"),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            PeerForm::Any => json!({ "relation": "any" }),
            PeerForm::Relative(r) => json!({ "relation": r.name() }),
            PeerForm::World(w) => json!({ "relation": "absolute", "world_rank": w }),
            PeerForm::Local(l) => json!({ "relation": "absolute", "local_rank": l }),
        }
    }
}

/// One operation, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct OpForm {
    peer: PeerForm,
    tag: Option<i64>,
    count: Option<i64>,
    status: Option<i32>,
}

const QUEUE_ORDER: [(usize, &str, &str); 3] = [
    (0, "receive from", "pending_receives"),
    (2, "send to", "pending_sends"),
    (1, "unexpected from", "unexpected_messages"),
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum QueueForm {
    Ops(Vec<(OpForm, usize)>),
    NoInformation,
    Error(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct CommForm {
    key: CommKey,
    /// receives, unexpected, sends.
    queues: [QueueForm; 3],
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum RankForm {
    Display(Vec<CommForm>),
    Failed(String),
}

/// Ranks in the same state, listed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Their COMM_WORLD ranks.
    pub ranks: RankSet,
    /// Processes in that state whose COMM_WORLD rank is unknown (their pids).
    pub unranked: Vec<Option<i32>>,
    /// The state on one line: `"ring" send to right neighbour tag 5 count 1000;
    /// unexpected from left neighbour tag 5` (shortened after six operations).
    pub summary: String,
    /// One line per distinct operation (or queue error), communicator first.
    pub lines: Vec<String>,
    form: RankForm,
}

impl Group {
    /// `ranks 0-63`, `rank 3`, with the unranked processes.
    pub fn who(&self) -> String {
        let mut who = if self.ranks.is_empty() {
            String::new()
        } else {
            self.ranks.describe()
        };
        if !self.unranked.is_empty() {
            let pids: Vec<String> = self
                .unranked
                .iter()
                .map(|p| p.map_or("?".into(), |p| p.to_string()))
                .collect();
            if !who.is_empty() {
                who.push_str(" and ");
            }
            let _ = write!(
                who,
                "{} of unknown rank (pid {})",
                if pids.len() == 1 {
                    "a process"
                } else {
                    "processes"
                },
                pids.join(", ")
            );
        }
        who
    }

    /// The group as JSON: `ranks` (text), `rank_list`, `unranked_pids`, `summary`, `lines`,
    /// and either `error` or the normalised `communicators`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "ranks": self.ranks.to_string(),
            "rank_list": self.ranks.to_vec(),
            "unranked_pids": self.unranked,
            "summary": self.summary,
            "lines": self.lines,
        });
        match &self.form {
            RankForm::Failed(e) => {
                out["error"] = json!(e);
                out["communicators"] = json!([]);
            }
            RankForm::Display(comms) => {
                out["error"] = Value::Null;
                out["communicators"] = comms
                    .iter()
                    .map(|c| {
                        let mut v = json!({ "name": c.key.name, "size": c.key.size });
                        for (i, _, key) in QUEUE_ORDER {
                            v[key] = match &c.queues[i] {
                                QueueForm::Ops(ops) => json!({
                                    "available": true, "error": null,
                                    "operations": ops.iter().map(|(op, n)| json!({
                                        "peer": op.peer.to_json(),
                                        "tag": op.tag,
                                        "tag_wild": op.tag.is_none(),
                                        "count": op.count,
                                        "status": op.status.map(status_name),
                                        "times": n,
                                    })).collect::<Vec<_>>(),
                                }),
                                QueueForm::NoInformation => {
                                    json!({ "available": false, "error": null, "operations": [] })
                                }
                                QueueForm::Error(e) => {
                                    json!({ "available": false, "error": e, "operations": [] })
                                }
                            };
                        }
                        v
                    })
                    .collect();
            }
        }
        out
    }
}

fn status_name(status: i32) -> Value {
    match status {
        0 => json!("pending"),
        1 => json!("matched"),
        2 => json!("complete"),
        n => json!(n),
    }
}

fn status_code(status: OperationStatus) -> i32 {
    match status {
        OperationStatus::Pending => 0,
        OperationStatus::Matched => 1,
        OperationStatus::Complete => 2,
        OperationStatus::Other(n) => n,
    }
}

/// The two normal forms of an operation: relative (when a pattern fits) and absolute.
fn op_forms(comm: &CommunicatorView, queue: usize, op: &Operation) -> (OpForm, OpForm) {
    let unexpected = queue == 1;
    let base = OpForm {
        peer: PeerForm::Any,
        tag: (!op.tag_wild).then_some(op.desired_tag),
        count: if unexpected && op.desired_length == 0 {
            None
        } else {
            Some(op.desired_length)
        },
        // An unexpected message's status says eager or rendezvous: not the rank's state.
        status: (!unexpected).then(|| status_code(op.status)),
    };
    if op.desired_local_rank < 0 {
        return (base.clone(), base);
    }
    let global = if unexpected {
        op.desired_global_rank.max(op.actual_global_rank)
    } else {
        op.desired_global_rank
    };
    let absolute = OpForm {
        peer: match world_of(comm, op.desired_local_rank, global) {
            Some(w) => PeerForm::World(i64::from(w)),
            None => PeerForm::Local(op.desired_local_rank),
        },
        ..base.clone()
    };
    let relative = match relation(comm.local_rank, op.desired_local_rank, comm.size) {
        Relation::Absolute => absolute.clone(),
        r => OpForm {
            peer: PeerForm::Relative(r),
            ..base
        },
    };
    (relative, absolute)
}

fn queue_of(c: &CommunicatorView, i: usize) -> &Queue {
    match i {
        0 => &c.pending_receives,
        1 => &c.unexpected_messages,
        _ => &c.pending_sends,
    }
}

fn op_line(verb: &str, op: &OpForm, times: usize) -> String {
    let mut line = format!("{verb} {}", op.peer.text());
    match op.tag {
        Some(t) => {
            let _ = write!(line, " tag {t}");
        }
        None => line.push_str(" tag any"),
    }
    if let Some(c) = op.count {
        // Unexpected messages have no count of their own: the library gives their length.
        let word = if verb.starts_with("unexpected") {
            "length"
        } else {
            "count"
        };
        let _ = write!(line, " {word} {c}");
    }
    match op.status {
        Some(1) => line.push_str(" (matched)"),
        Some(2) => line.push_str(" (complete, not yet waited)"),
        Some(0) | None => {}
        Some(n) => {
            let _ = write!(line, " (status {n})");
        }
    }
    if times > 1 {
        let _ = write!(line, " ({times} times)");
    }
    line
}

/// Lines of a state, and the one-line summary.
fn form_text(form: &RankForm) -> (Vec<String>, String) {
    const SHOWN: usize = 6;
    let comms = match form {
        RankForm::Failed(e) => {
            let line = format!("no message queues: {e}");
            return (vec![line.clone()], line);
        }
        RankForm::Display(comms) => comms,
    };
    let mut lines = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for c in comms {
        let label = c.key.label();
        let mut first = true;
        let mut add = |item: String, lines: &mut Vec<String>, parts: &mut Vec<String>| {
            lines.push(format!("{label} {item}"));
            parts.push(if first {
                format!("{label} {item}")
            } else {
                item
            });
            first = false;
        };
        for (i, verb, key) in QUEUE_ORDER {
            match &c.queues[i] {
                QueueForm::Ops(ops) => {
                    for (op, n) in ops {
                        add(op_line(verb, op, *n), &mut lines, &mut parts);
                    }
                }
                QueueForm::NoInformation => {
                    add(
                        format!("{}: no information", key.replace('_', " ")),
                        &mut lines,
                        &mut parts,
                    );
                }
                QueueForm::Error(e) => {
                    add(
                        format!("{}: error: {e}", key.replace('_', " ")),
                        &mut lines,
                        &mut parts,
                    );
                }
            }
        }
    }
    if lines.is_empty() {
        let line = "no pending operations".to_string();
        return (vec![line.clone()], line);
    }
    let mut summary = parts
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if parts.len() > SHOWN {
        let _ = write!(summary, "; and {} more", parts.len() - SHOWN);
    }
    (lines, summary)
}

/// Groups the ranks of `job` whose normalised states are equal, in order of their lowest
/// rank (processes of unknown rank last).
pub fn aggregate(job: &JobDump) -> Vec<Group> {
    // Pass 1: how many ranks share each form of each operation.
    type FormId = (CommKey, usize, OpForm);
    let mut counts: HashMap<FormId, usize> = HashMap::new();
    for r in &job.ranks {
        let Ok(d) = &r.outcome else { continue };
        let mut seen: HashSet<FormId> = HashSet::new();
        for c in &d.communicators {
            let key = CommKey::of(c);
            for q in 0..3 {
                for op in queue_of(c, q).ops() {
                    let (rel, abs) = op_forms(c, q, op);
                    seen.insert((key.clone(), q, rel));
                    seen.insert((key.clone(), q, abs));
                }
            }
        }
        for id in seen {
            *counts.entry(id).or_default() += 1;
        }
    }
    // Pass 2: each rank's state with the more widely shared form of each operation.
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<RankForm, usize> = HashMap::new();
    for r in &job.ranks {
        let form = match &r.outcome {
            Err(e) => RankForm::Failed(e.clone()),
            Ok(d) => {
                let mut comms = Vec::new();
                for c in &d.communicators {
                    let key = CommKey::of(c);
                    let queues: [QueueForm; 3] = std::array::from_fn(|q| match queue_of(c, q) {
                        Queue::NoInformation => QueueForm::NoInformation,
                        Queue::Error(e) => QueueForm::Error(e.text.clone()),
                        Queue::Operations(ops) => {
                            let mut forms: BTreeMap<OpForm, usize> = BTreeMap::new();
                            for op in ops {
                                let (rel, abs) = op_forms(c, q, op);
                                let n = |f: &OpForm| {
                                    counts
                                        .get(&(key.clone(), q, f.clone()))
                                        .copied()
                                        .unwrap_or(0)
                                };
                                let chosen = if n(&abs) > n(&rel) { abs } else { rel };
                                *forms.entry(chosen).or_default() += 1;
                            }
                            QueueForm::Ops(forms.into_iter().collect())
                        }
                    });
                    let empty = queues
                        .iter()
                        .all(|q| matches!(q, QueueForm::Ops(ops) if ops.is_empty()));
                    if !empty {
                        comms.push(CommForm { key, queues });
                    }
                }
                comms.sort();
                RankForm::Display(comms)
            }
        };
        let g = *index.entry(form.clone()).or_insert_with(|| {
            let (lines, summary) = form_text(&form);
            groups.push(Group {
                ranks: RankSet::new(),
                unranked: Vec::new(),
                summary,
                lines,
                form,
            });
            groups.len() - 1
        });
        match u32::try_from(r.rank) {
            Ok(rank) => {
                groups[g].ranks.insert(rank);
            }
            Err(_) => groups[g].unranked.push(r.pid),
        }
    }
    groups.sort_by(|a, b| {
        (a.ranks.is_empty(), a.ranks.first()).cmp(&(b.ranks.is_empty(), b.ranks.first()))
    });
    groups
}

/// The aggregated view as text: `ranks 0-63: <summary>`, followed by the full lines
/// (indented) when the summary had to be shortened.
pub fn aggregate_text(groups: &[Group]) -> String {
    let mut out = String::new();
    for g in groups {
        let _ = writeln!(out, "{}: {}", g.who(), g.summary);
        if g.summary.ends_with("more") && g.lines.len() > 6 {
            for line in &g.lines {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out
}

/// The aggregated view as JSON: `{"groups": [Group::to_json(), ...]}`.
pub fn aggregate_json(groups: &[Group]) -> Value {
    json!({ "groups": groups.iter().map(Group::to_json).collect::<Vec<_>>() })
}

// ============================================================================== waits

/// What makes a rank wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// A pending send (possibly also seen as an unexpected message at the destination).
    Send,
    /// A message seen only as unexpected at its destination (ch3/ch4 list no blocking
    /// sends; an eager sender may have moved on).
    Unexpected,
    /// A posted receive.
    Receive,
}

impl WaitKind {
    /// "send", "unexpected", "receive".
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Send => "send",
            WaitKind::Unexpected => "unexpected",
            WaitKind::Receive => "receive",
        }
    }

    fn is_message(self) -> bool {
        self != WaitKind::Receive
    }
}

/// Whom a rank waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// One line per operation involved ("rank 0 is blocked in a send to rank 1 on
    /// \"ring\", tag 5, count 1000 [...]").
    pub evidence: Vec<String>,
}

/// Identity of a [`Wait`] across samples (a send and its unexpected copy are one message).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitKey {
    /// The waiting rank.
    pub from: i32,
    /// Whom it waits for.
    pub target: WaitTarget,
    /// A message (send or unexpected) rather than a receive.
    pub message: bool,
    /// The communicator.
    pub comm: CommKey,
    /// The tag.
    pub tag: Option<i64>,
}

impl Wait {
    /// Its identity across samples.
    pub fn key(&self) -> WaitKey {
        WaitKey {
            from: self.from,
            target: self.target.clone(),
            message: self.kind.is_message(),
            comm: self.comm.clone(),
            tag: self.tag,
        }
    }

    /// Weak evidence: a message seen only waiting unexpected at its destination (its
    /// sender is blocked only if the send was synchronous or rendezvous).
    pub fn is_weak(&self) -> bool {
        self.kind == WaitKind::Unexpected
    }

    /// The relation of the peer to the waiting rank.
    pub fn relation(&self) -> Relation {
        relation(self.local_rank, self.peer_local, self.comm.size)
    }

    /// The wait as JSON.
    pub fn to_json(&self) -> Value {
        let (to, to_any, to_local) = match &self.target {
            WaitTarget::Rank(t) => (json!(t), Value::Null, Value::Null),
            WaitTarget::AnyOf(set) => (Value::Null, json!(set.to_string()), Value::Null),
            WaitTarget::AnyUnknown => (Value::Null, json!("unknown"), Value::Null),
            WaitTarget::UnknownRank { local } => (Value::Null, Value::Null, json!(local)),
        };
        json!({
            "from": self.from,
            "to": to,
            "to_any": to_any,
            "to_unknown_local_rank": to_local,
            "kind": self.kind.name(),
            "communicator": self.comm.to_json(),
            "local_rank": self.local_rank,
            "peer_local_rank": self.peer_local,
            "relation": if self.peer_local < 0 { "any" } else { self.relation().name() },
            "tag": self.tag,
            "count": self.count,
            "evidence": self.evidence,
        })
    }

    /// Short: "a send on \"ring\", tag 5".
    fn what(&self) -> String {
        let what = match self.kind {
            WaitKind::Send => "a send",
            WaitKind::Unexpected => "a message waiting unexpected",
            WaitKind::Receive => "a receive",
        };
        format!("{what} on {}, {}", self.comm.label(), tag_words(self.tag))
    }

    /// The targets it could be satisfied by, when they are known.
    fn targets(&self) -> Option<RankSet> {
        match &self.target {
            WaitTarget::Rank(t) => Some(RankSet::from_i32s(&[*t])),
            WaitTarget::AnyOf(set) => Some(set.clone()),
            _ => None,
        }
    }
}

// =========================================================================== findings

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// An elementary cycle of AND-waits among blocked ranks: a deadlock.
    DeadlockCycle,
    /// A strongly connected set of blocked ranks held together by OR-waits (any-source
    /// receives) whose every member is blocked: a deadlock.
    DeadlockKnot,
    /// Ranks blocked waiting for deadlocked ranks (not on a cycle themselves).
    BlockedByDeadlock,
    /// A posted receive would take a waiting message but for the tag.
    TagMismatch,
    /// A posted receive would take a waiting message but for the source.
    SourceMismatch,
    /// A posted receive would take a waiting message but for the communicator.
    CommunicatorMismatch,
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
    /// Ranks wait, but none is deadlocked.
    NoDeadlock,
    /// Nothing waits on anything.
    Clean,
}

impl FindingKind {
    /// The JSON spelling: "deadlock_cycle", "deadlock_knot", "blocked_by_deadlock",
    /// "tag_mismatch", "source_mismatch", "communicator_mismatch", "idle_target",
    /// "undumped_target", "unknown_peer", "in_transit", "dump_failed", "no_deadlock",
    /// "clean".
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::DeadlockCycle => "deadlock_cycle",
            FindingKind::DeadlockKnot => "deadlock_knot",
            FindingKind::BlockedByDeadlock => "blocked_by_deadlock",
            FindingKind::TagMismatch => "tag_mismatch",
            FindingKind::SourceMismatch => "source_mismatch",
            FindingKind::CommunicatorMismatch => "communicator_mismatch",
            FindingKind::IdleTarget => "idle_target",
            FindingKind::UndumpedTarget => "undumped_target",
            FindingKind::UnknownPeer => "unknown_peer",
            FindingKind::InTransit => "in_transit",
            FindingKind::DumpFailed => "dump_failed",
            FindingKind::NoDeadlock => "no_deadlock",
            FindingKind::Clean => "clean",
        }
    }

    /// A deadlock (cycle or knot).
    pub fn is_deadlock(self) -> bool {
        matches!(self, FindingKind::DeadlockCycle | FindingKind::DeadlockKnot)
    }
}

/// One conclusion, in plain words, with its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The ranks it is about.
    pub ranks: RankSet,
    /// The conclusion, one paragraph.
    pub text: String,
    /// The operations that prove it, one line each.
    pub evidence: Vec<String>,
    /// For a cycle, its ranks in order (the first is not repeated at the end).
    pub cycle: Option<Vec<i32>>,
    /// The wait-for edges (waiting rank, rank waited for) it is about (for a knot of more
    /// than [`MAX_KNOT_EDGES`] edges, only those of AND-waits).
    pub edges: Vec<(i32, i32)>,
}

impl Finding {
    fn new(kind: FindingKind, ranks: RankSet, text: String, evidence: Vec<String>) -> Finding {
        Finding {
            kind,
            ranks,
            text,
            evidence,
            cycle: None,
            edges: Vec::new(),
        }
    }

    /// The finding as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind.name(),
            "ranks": self.ranks.to_string(),
            "rank_list": self.ranks.to_vec(),
            "text": self.text,
            "evidence": self.evidence,
            "cycle": self.cycle,
            "edges": self.edges.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
        })
    }
}

/// What one rank looked like, as far as the diagnosis needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RankFacts {
    pid: Option<i32>,
    error: Option<String>,
    /// Pending posted receives not matched by a waiting message.
    receives: usize,
    /// Pending sends not matched by a posted receive.
    sends: usize,
    /// Operations in transit.
    transit: usize,
}

/// The diagnosis of one dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The conclusions, most serious first; never empty.
    pub findings: Vec<Finding>,
    /// The wait-for graph.
    pub waits: Vec<Wait>,
    /// The deadlocked ranks (on a cycle or knot, or blocked behind one).
    pub deadlocked: RankSet,
    facts: BTreeMap<i32, RankFacts>,
}

/// Longest evidence list [`Diagnosis::to_text`] prints per finding (JSON has all).
pub const TEXT_EVIDENCE_LINES: usize = 32;

impl Diagnosis {
    /// Whether some ranks are deadlocked.
    pub fn has_deadlock(&self) -> bool {
        self.findings.iter().any(|f| f.kind.is_deadlock())
    }

    /// The findings of one kind.
    pub fn of_kind(&self, kind: FindingKind) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }

    /// Each finding's text, then its evidence indented (at most [`TEXT_EVIDENCE_LINES`]).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let _ = writeln!(out, "{}", f.text);
            for line in f.evidence.iter().take(TEXT_EVIDENCE_LINES) {
                let _ = writeln!(out, "  {line}");
            }
            if f.evidence.len() > TEXT_EVIDENCE_LINES {
                let _ = writeln!(
                    out,
                    "  ... and {} more (see --json)",
                    f.evidence.len() - TEXT_EVIDENCE_LINES
                );
            }
        }
        out
    }

    /// `{"deadlock": bool, "deadlocked": "0-3", "findings": [...], "waits": [...]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "deadlock": self.has_deadlock(),
            "deadlocked": self.deadlocked.to_string(),
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "waits": self.waits.iter().map(Wait::to_json).collect::<Vec<_>>(),
        })
    }
}

/// A plain-words verdict on the job: [`diagnose`] as text.
pub fn verdict(job: &JobDump) -> String {
    diagnose(job).to_text()
}

// ============================================================================ scanning

/// A message between two ranks: a pending send, its copy waiting unexpected at the
/// destination, or both.
#[derive(Debug, Clone)]
struct Msg {
    sender: Option<i32>,
    dest: Option<i32>,
    comm: CommKey,
    sender_local: i64,
    dest_local: i64,
    tag: i64,
    count: i64,
    send: Option<String>,
    unexpected: Option<String>,
    /// The library says the sender did not wait for this message (an eager standard
    /// send): it is no evidence that the sender is blocked.
    sender_free: bool,
    consumed: bool,
}

impl Msg {
    fn evidence(&self) -> Vec<String> {
        self.send.iter().chain(&self.unexpected).cloned().collect()
    }

    /// "waits unexpected at rank 2" / "is a pending send at rank 1, not yet arrived".
    fn whereabouts(&self) -> String {
        match (&self.unexpected, self.dest, self.sender) {
            (Some(_), Some(d), _) => format!("waits unexpected at rank {d}"),
            (Some(_), None, _) => "waits unexpected".into(),
            (None, _, Some(s)) => format!("is a pending send at rank {s}, not yet arrived"),
            (None, _, None) => "is a pending send".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Recv {
    rank: i32,
    comm: CommKey,
    local: i64,
    source_local: i64,
    source: Option<i32>,
    any: Option<RankSet>,
    tag: Option<i64>,
    count: i64,
    evidence: String,
    consumed: bool,
}

impl Recv {
    fn takes_tag(&self, tag: i64) -> bool {
        self.tag.is_none_or(|t| t == tag)
    }

    fn source_text(&self) -> String {
        match (self.source_local, self.source) {
            (l, _) if l < 0 => "any source".into(),
            (_, Some(s)) => format!("rank {s}"),
            (l, None) => format!("local rank {l}"),
        }
    }
}

/// A per-rank conclusion, merged with others of the same pattern into one [`Finding`].
struct Atom {
    kind: FindingKind,
    rank: i32,
    /// "Tag mismatch: " etc.
    prefix: &'static str,
    /// Complete text for one rank ("rank 2 waits ...").
    single: String,
    /// Text after "ranks 0-3 " for several ("each wait ...").
    plural: String,
    evidence: Vec<String>,
    edges: Vec<(i32, i32)>,
}

fn merge_atoms(atoms: Vec<Atom>) -> Vec<Finding> {
    let mut order: Vec<(FindingKind, &'static str, String)> = Vec::new();
    let mut groups: HashMap<(FindingKind, &'static str, String), Vec<Atom>> = HashMap::new();
    for a in atoms {
        let key = (a.kind, a.prefix, a.plural.clone());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(a);
    }
    let mut out = Vec::new();
    for key in order {
        let atoms = groups.remove(&key).unwrap_or_default();
        let ranks = RankSet::from_i32s(atoms.iter().map(|a| &a.rank));
        let mut evidence: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut edges = Vec::new();
        for a in &atoms {
            for e in &a.evidence {
                if seen.insert(e.clone()) {
                    evidence.push(e.clone());
                }
            }
            edges.extend(a.edges.iter().copied());
        }
        edges.sort_unstable();
        edges.dedup();
        let text = if ranks.len() > 1 {
            format!("{}{} {}", key.1, ranks.describe(), key.2)
        } else {
            format!("{}{}", key.1, atoms[0].single)
        };
        out.push(Finding {
            kind: key.0,
            ranks,
            text,
            evidence,
            cycle: None,
            edges,
        });
    }
    out
}

/// The evidence lines of the waits `indices` (each wait once, each line once).
fn evidence_of(waits: &[Wait], indices: impl IntoIterator<Item = usize>) -> Vec<String> {
    let mut seen_waits: HashSet<usize> = HashSet::new();
    let mut seen_lines: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for i in indices {
        if !seen_waits.insert(i) {
            continue;
        }
        for line in &waits[i].evidence {
            if seen_lines.insert(line) {
                out.push(line.clone());
            }
        }
    }
    out
}

fn send_evidence(rank: i32, comm: &CommKey, op: &Operation, dest: Option<i32>) -> String {
    let to = match dest {
        Some(d) => format!("rank {d}"),
        None => format!(
            "local rank {} (COMM_WORLD rank unknown)",
            op.desired_local_rank
        ),
    };
    let how = match op.status {
        OperationStatus::Matched => "has a matched send (data moving)",
        _ => "is blocked in a send",
    };
    let status = match op.status {
        OperationStatus::Other(n) => format!(", status {n}"),
        _ => String::new(),
    };
    format!(
        "rank {rank} {how} to {to} on {}, tag {}, count {}{status}{}",
        comm.label(),
        op.desired_tag,
        op.desired_length,
        extra(op)
    )
}

fn unexpected_evidence(rank: i32, comm: &CommKey, op: &Operation, sender: Option<i32>) -> String {
    let from = match sender {
        Some(s) => format!("rank {s}"),
        None => format!(
            "local rank {} (COMM_WORLD rank unknown)",
            op.desired_local_rank
        ),
    };
    let count = if op.desired_length != 0 {
        format!(", length {}", op.desired_length)
    } else {
        String::new()
    };
    // Eager or rendezvous is in the library's notes, not in the status.
    let how = match op.status {
        OperationStatus::Matched => ", matched",
        _ => "",
    };
    format!(
        "rank {rank} holds an unexpected message from {from} on {}, tag {}{count}{how}{}",
        comm.label(),
        op.desired_tag,
        extra(op)
    )
}

fn receive_evidence(
    rank: i32,
    comm: &CommKey,
    op: &Operation,
    source: Option<i32>,
    any: Option<&RankSet>,
) -> String {
    let from = if op.desired_local_rank < 0 {
        match any {
            Some(set) => format!("any source ({})", set.describe()),
            None => "any source (members unknown)".into(),
        }
    } else {
        match source {
            Some(s) => format!("rank {s}"),
            None => format!(
                "local rank {} (COMM_WORLD rank unknown)",
                op.desired_local_rank
            ),
        }
    };
    let how = match op.status {
        OperationStatus::Matched => "has a matched receive (data moving)",
        _ => "is blocked in a receive",
    };
    format!(
        "rank {rank} {how} from {from} on {}, {}, count {}{}",
        comm.label(),
        tag_words((!op.tag_wild).then_some(op.desired_tag)),
        op.desired_length,
        extra(op)
    )
}

struct Scan {
    facts: BTreeMap<i32, RankFacts>,
    msgs: Vec<Msg>,
    recvs: Vec<Recv>,
    waits: Vec<Wait>,
    atoms: Vec<Atom>,
    failed_atoms: Vec<Atom>,
}

fn scan(job: &JobDump) -> Scan {
    let mut facts: BTreeMap<i32, RankFacts> = BTreeMap::new();
    let mut unexpected: Vec<Msg> = Vec::new();
    let mut sends: Vec<Msg> = Vec::new();
    let mut recvs: Vec<Recv> = Vec::new();
    let mut atoms: Vec<Atom> = Vec::new();
    let mut failed_atoms: Vec<Atom> = Vec::new();
    for r in &job.ranks {
        let rank = r.rank;
        let display = match &r.outcome {
            Err(e) => {
                let who = if rank >= 0 {
                    format!("rank {rank}")
                } else {
                    format!("process {}", r.pid.map_or("?".into(), |p| p.to_string()))
                };
                failed_atoms.push(Atom {
                    kind: FindingKind::DumpFailed,
                    rank,
                    prefix: "",
                    single: format!("{who} could not be dumped: {e}"),
                    plural: format!("could not be dumped: {e}"),
                    evidence: Vec::new(),
                    edges: Vec::new(),
                });
                if rank >= 0 {
                    facts.insert(
                        rank,
                        RankFacts {
                            pid: r.pid,
                            error: Some(e.clone()),
                            receives: 0,
                            sends: 0,
                            transit: 0,
                        },
                    );
                }
                continue;
            }
            Ok(d) => d,
        };
        if rank < 0 {
            failed_atoms.push(Atom {
                kind: FindingKind::DumpFailed,
                rank,
                prefix: "",
                single: format!(
                    "process {} has no known COMM_WORLD rank: it is left out of the analysis",
                    r.pid.map_or("?".into(), |p| p.to_string())
                ),
                plural: "have no known COMM_WORLD rank".into(),
                evidence: Vec::new(),
                edges: Vec::new(),
            });
            continue;
        }
        let mut fact = RankFacts {
            pid: r.pid,
            error: None,
            receives: 0,
            sends: 0,
            transit: 0,
        };
        for c in &display.communicators {
            let key = CommKey::of(c);
            let group = peer_group(c);
            for op in c.pending_sends.ops() {
                if is_complete(op) {
                    continue;
                }
                let dest = world_of(c, op.desired_local_rank, op.desired_global_rank);
                let evidence = send_evidence(rank, &key, op, dest);
                if op.status == OperationStatus::Matched {
                    fact.transit += 1;
                    atoms.push(transit_atom(rank, evidence));
                    continue;
                }
                sends.push(Msg {
                    sender: Some(rank),
                    dest,
                    comm: key.clone(),
                    sender_local: c.local_rank,
                    dest_local: op.desired_local_rank,
                    tag: op.desired_tag,
                    count: op.desired_length,
                    send: Some(evidence),
                    unexpected: None,
                    sender_free: false,
                    consumed: false,
                });
            }
            for op in c.unexpected_messages.ops() {
                let global = op.desired_global_rank.max(op.actual_global_rank);
                let sender = world_of(c, op.desired_local_rank, global);
                unexpected.push(Msg {
                    sender,
                    dest: Some(rank),
                    comm: key.clone(),
                    sender_local: op.desired_local_rank,
                    dest_local: c.local_rank,
                    tag: op.desired_tag,
                    count: op.desired_length,
                    send: None,
                    unexpected: Some(unexpected_evidence(rank, &key, op, sender)),
                    sender_free: op.extra_text.iter().any(|l| l.contains("its sender has gone on")),
                    consumed: false,
                });
            }
            for op in c.pending_receives.ops() {
                if is_complete(op) {
                    continue;
                }
                let any = (op.desired_local_rank < 0).then(|| group.clone()).flatten();
                let source = world_of(c, op.desired_local_rank, op.desired_global_rank);
                let evidence = receive_evidence(rank, &key, op, source, any.as_ref());
                if op.status == OperationStatus::Matched {
                    fact.transit += 1;
                    atoms.push(transit_atom(rank, evidence));
                    continue;
                }
                recvs.push(Recv {
                    rank,
                    comm: key.clone(),
                    local: c.local_rank,
                    source_local: op.desired_local_rank.max(-1),
                    source,
                    any,
                    tag: (!op.tag_wild).then_some(op.desired_tag),
                    count: op.desired_length,
                    evidence,
                    consumed: false,
                });
            }
        }
        facts.insert(rank, fact);
    }

    // A send and its copy waiting unexpected at the destination are one message.
    let mut copies: HashMap<(i32, CommKey, i64, i64), Vec<usize>> = HashMap::new();
    for (i, m) in unexpected.iter().enumerate().rev() {
        if let Some(d) = m.dest {
            copies
                .entry((d, m.comm.clone(), m.sender_local, m.tag))
                .or_default()
                .push(i);
        }
    }
    let mut msgs = unexpected;
    for s in sends {
        let copy = s.dest.and_then(|d| {
            copies
                .get_mut(&(d, s.comm.clone(), s.sender_local, s.tag))
                .and_then(Vec::pop)
        });
        match copy {
            Some(i) => {
                msgs[i].send = s.send;
                msgs[i].sender = msgs[i].sender.or(s.sender);
                msgs[i].count = s.count;
            }
            None => msgs.push(s),
        }
    }

    // A message that a posted receive at its destination takes is in transit.
    let mut at: HashMap<(i32, CommKey), Vec<usize>> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        if let Some(d) = m.dest {
            at.entry((d, m.comm.clone())).or_default().push(i);
        }
    }
    for recv in recvs.iter_mut() {
        let Some(candidates) = at.get(&(recv.rank, recv.comm.clone())) else {
            continue;
        };
        let found = candidates.iter().copied().find(|&i| {
            let m = &msgs[i];
            !m.consumed
                && (recv.source_local < 0 || m.sender_local == recv.source_local)
                && recv.takes_tag(m.tag)
        });
        if let Some(i) = found {
            msgs[i].consumed = true;
            recv.consumed = true;
            let m = &msgs[i];
            let mut evidence = m.evidence();
            evidence.push(recv.evidence.clone());
            let from = m
                .sender
                .map_or("an unknown rank".into(), |s| format!("rank {s}"));
            for r in [Some(recv.rank), m.sender].into_iter().flatten() {
                if let Some(f) = facts.get_mut(&r) {
                    f.transit += 1;
                }
            }
            atoms.push(Atom {
                kind: FindingKind::InTransit,
                rank: recv.rank,
                prefix: "In transit: ",
                single: format!(
                    "the message from {from} to rank {} on {}, tag {}, matches a receive posted there: it is being delivered (a persistent one means stalled progress)",
                    recv.rank,
                    m.comm.label(),
                    m.tag
                ),
                plural: format!(
                    "each have a message on {} matched by a posted receive: it is being delivered (a persistent one means stalled progress)",
                    m.comm.label()
                ),
                evidence,
                edges: Vec::new(),
            });
        }
    }

    let mut waits = Vec::new();
    for m in msgs.iter().filter(|m| !m.consumed && (!m.sender_free || m.send.is_some())) {
        let Some(sender) = m.sender else {
            if let Some(d) = m.dest {
                atoms.push(Atom {
                    kind: FindingKind::UnknownPeer,
                    rank: d,
                    prefix: "",
                    single: format!(
                        "rank {d} holds an unexpected message from local rank {} of {}, whose COMM_WORLD rank is unknown: its sender is left out of the wait-for graph",
                        m.sender_local,
                        m.comm.label()
                    ),
                    plural: format!(
                        "hold unexpected messages on {} whose senders' COMM_WORLD ranks are unknown: they are left out of the wait-for graph",
                        m.comm.label()
                    ),
                    evidence: m.evidence(),
                    edges: Vec::new(),
                });
            }
            continue;
        };
        if let Some(f) = facts.get_mut(&sender)
            && m.send.is_some()
        {
            f.sends += 1;
        }
        waits.push(Wait {
            from: sender,
            target: match m.dest {
                Some(d) => WaitTarget::Rank(d),
                None => WaitTarget::UnknownRank {
                    local: m.dest_local,
                },
            },
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
        });
    }
    for r in recvs.iter().filter(|r| !r.consumed) {
        if let Some(f) = facts.get_mut(&r.rank) {
            f.receives += 1;
        }
        let target = if r.source_local < 0 {
            r.any
                .clone()
                .map_or(WaitTarget::AnyUnknown, WaitTarget::AnyOf)
        } else {
            r.source.map_or(
                WaitTarget::UnknownRank {
                    local: r.source_local,
                },
                WaitTarget::Rank,
            )
        };
        waits.push(Wait {
            from: r.rank,
            target,
            kind: WaitKind::Receive,
            comm: r.comm.clone(),
            local_rank: r.local,
            peer_local: r.source_local,
            tag: r.tag,
            count: r.count,
            evidence: vec![r.evidence.clone()],
        });
    }
    Scan {
        facts,
        msgs,
        recvs,
        waits,
        atoms,
        failed_atoms,
    }
}

fn transit_atom(rank: i32, evidence: String) -> Atom {
    Atom {
        kind: FindingKind::InTransit,
        rank,
        prefix: "In transit: ",
        single: format!("rank {rank} has an operation in status \"matched\": its data is moving"),
        plural: "have operations in status \"matched\": their data is moving".into(),
        evidence: vec![evidence],
        edges: Vec::new(),
    }
}

// ========================================================================= mismatches

/// Most mismatches examined per posted receive, and reported in all.
const MISMATCHES_PER_RECEIVE: usize = 4;
const MISMATCHES_TOTAL: usize = 256;

fn mismatches(s: &Scan) -> Vec<Atom> {
    let mut by_dest: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, m) in s.msgs.iter().enumerate() {
        if let (false, Some(d)) = (m.consumed, m.dest) {
            by_dest.entry(d).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for recv in s.recvs.iter().filter(|r| !r.consumed) {
        if out.len() >= MISMATCHES_TOTAL {
            break;
        }
        let Some(candidates) = by_dest.get(&recv.rank) else {
            continue;
        };
        let mut found = 0;
        for &i in candidates {
            if found >= MISMATCHES_PER_RECEIVE {
                break;
            }
            let m = &s.msgs[i];
            let kind = if m.comm == recv.comm {
                let source_ok = recv.source_local < 0 || m.sender_local == recv.source_local;
                match (source_ok, recv.takes_tag(m.tag)) {
                    (true, false) => FindingKind::TagMismatch,
                    (false, true) => FindingKind::SourceMismatch,
                    _ => continue,
                }
            } else {
                let source_ok = match (m.sender, recv.source_local) {
                    (Some(sender), l) if l < 0 => {
                        recv.tag.is_some()
                            && recv.any.as_ref().is_some_and(|g| g.contains_i32(sender))
                    }
                    (Some(sender), _) => recv.source == Some(sender),
                    (None, _) => false,
                };
                if source_ok && recv.takes_tag(m.tag) {
                    FindingKind::CommunicatorMismatch
                } else {
                    continue;
                }
            };
            found += 1;
            out.push(mismatch_atom(kind, recv, m));
        }
    }
    out
}

/// "rank 1" and, for merging, the relation of the sender to the receiver.
fn sender_phrases(recv: &Recv, m: &Msg) -> (String, String) {
    let single = m.sender.map_or_else(
        || format!("local rank {}", m.sender_local),
        |s| format!("rank {s}"),
    );
    let plural = if m.comm == recv.comm {
        match relation(recv.local, m.sender_local, recv.comm.size) {
            Relation::Absolute => single.clone(),
            r => r.their().to_string(),
        }
    } else {
        single.clone()
    };
    (single, plural)
}

fn source_phrase_plural(recv: &Recv) -> String {
    if recv.source_local < 0 {
        return "any source".into();
    }
    match relation(recv.local, recv.source_local, recv.comm.size) {
        Relation::Absolute => recv.source_text(),
        r => r.their().to_string(),
    }
}

fn mismatch_atom(kind: FindingKind, recv: &Recv, m: &Msg) -> Atom {
    let (sender, sender_rel) = sender_phrases(recv, m);
    let t = recv.rank;
    let comm = recv.comm.label();
    let tag = tag_words(recv.tag);
    let where_single = m.whereabouts();
    let where_plural = if m.unexpected.is_some() {
        "waits unexpected at them".to_string()
    } else {
        "is still a pending send".to_string()
    };
    let (prefix, single, plural) = match kind {
        FindingKind::TagMismatch => (
            "Tag mismatch: ",
            format!(
                "rank {t} waits for {tag} from {} on {comm}; {sender}'s message with tag {} {where_single}",
                recv.source_text(),
                m.tag
            ),
            format!(
                "each wait for {tag} from {} on {comm}; the message from {sender_rel} has tag {} and {where_plural}",
                source_phrase_plural(recv),
                m.tag
            ),
        ),
        FindingKind::SourceMismatch => (
            "Source mismatch: ",
            format!(
                "rank {t} waits for {tag} from {} on {comm}; {sender}'s message with tag {} {where_single}",
                recv.source_text(),
                m.tag
            ),
            format!(
                "each wait for {tag} from {} on {comm}; a message with tag {} from {sender_rel} {where_plural}",
                source_phrase_plural(recv),
                m.tag
            ),
        ),
        _ => (
            "Communicator mismatch: ",
            format!(
                "rank {t} waits on {comm} for {tag} from {}; {sender}'s message with tag {} on {} {where_single}",
                recv.source_text(),
                m.tag,
                m.comm.label()
            ),
            format!(
                "each wait on {comm} for {tag} from {}; the message from {sender_rel} with tag {} was sent on {} and {where_plural}",
                source_phrase_plural(recv),
                m.tag,
                m.comm.label()
            ),
        ),
    };
    let mut evidence = vec![recv.evidence.clone()];
    evidence.extend(m.evidence());
    Atom {
        kind,
        rank: t,
        prefix,
        single,
        plural,
        evidence,
        edges: m.sender.map(|s| vec![(t, s), (s, t)]).unwrap_or_default(),
    }
}

// =========================================================================== deadlock

/// Most wait-for edges a knot [`Finding`] lists; larger knots list their AND-edges only.
pub const MAX_KNOT_EDGES: usize = 4096;

/// Most cycles listed per strongly connected set, and in all.
pub const MAX_CYCLES_PER_SET: usize = 16;
const MAX_CYCLES_TOTAL: usize = 64;

/// The waits from one rank to another inside the deadlocked set.
#[derive(Debug, Clone, Default)]
struct Edge {
    /// Indices of the waits.
    waits: Vec<usize>,
    /// One of them is an AND-wait (to that rank alone).
    and: bool,
    /// One of them is an AND-wait on strong evidence (a listed send or a receive).
    strong: bool,
}

/// from -> to -> the waits between them.
type Adj = BTreeMap<i32, BTreeMap<i32, Edge>>;

/// The deadlock part of the analysis: from the waits and what each rank looked like.
struct Graph<'a> {
    waits: &'a [Wait],
    facts: &'a BTreeMap<i32, RankFacts>,
    /// Waits of each rank (indices).
    of: BTreeMap<i32, Vec<usize>>,
}

impl<'a> Graph<'a> {
    fn new(waits: &'a [Wait], facts: &'a BTreeMap<i32, RankFacts>) -> Graph<'a> {
        let mut of: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, w) in waits.iter().enumerate() {
            of.entry(w.from).or_default().push(i);
        }
        Graph { waits, facts, of }
    }

    fn dumped(&self, rank: i32) -> bool {
        self.facts.get(&rank).is_some_and(|f| f.error.is_none())
    }

    fn within(&self, w: &Wait, d: &RankSet) -> bool {
        match &w.target {
            // A message a rank sent itself proves nothing unless the send is listed.
            WaitTarget::Rank(t) if *t == w.from && w.is_weak() => false,
            WaitTarget::Rank(t) => d.contains_i32(*t),
            WaitTarget::AnyOf(set) => !set.is_empty() && set.is_subset(d),
            _ => false,
        }
    }

    /// The greatest set of blocked ranks each of which waits for something only
    /// deadlocked ranks could give.
    fn deadlocked(&self) -> RankSet {
        let mut d = RankSet::from_i32s(self.of.keys().filter(|&&r| self.dumped(r)));
        // Who depends on whom, to re-check only the ranks a removal affects.
        let mut dependents: HashMap<u32, Vec<i32>> = HashMap::new();
        for (&r, ws) in &self.of {
            for &i in ws {
                if let Some(targets) = self.waits[i].targets() {
                    for t in &targets {
                        dependents.entry(t).or_default().push(r);
                    }
                }
            }
        }
        let mut work: Vec<i32> = d.iter().map(|r| r as i32).collect();
        while let Some(r) = work.pop() {
            if !d.contains_i32(r) {
                continue;
            }
            let stuck = self.of[&r].iter().any(|&i| self.within(&self.waits[i], &d));
            if !stuck {
                d.remove(r as u32);
                if let Some(deps) = dependents.get(&(r as u32)) {
                    work.extend(deps.iter().copied().filter(|&x| d.contains_i32(x)));
                }
            }
        }
        d
    }

    /// Edges inside `d`.
    fn edges(&self, d: &RankSet) -> Adj {
        let mut adj: Adj = BTreeMap::new();
        for r in d {
            let r = r as i32;
            let out = adj.entry(r).or_default();
            for &i in self.of.get(&r).into_iter().flatten() {
                let w = &self.waits[i];
                if !self.within(w, d) {
                    continue;
                }
                match &w.target {
                    WaitTarget::Rank(t) => {
                        let e = out.entry(*t).or_default();
                        e.waits.push(i);
                        e.and = true;
                        e.strong |= !w.is_weak();
                    }
                    WaitTarget::AnyOf(set) => {
                        for t in set {
                            out.entry(t as i32).or_default().waits.push(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        adj
    }

    fn findings(&self) -> (Vec<Finding>, RankSet) {
        let d = self.deadlocked();
        if d.is_empty() {
            return (Vec::new(), d);
        }
        let adj = self.edges(&d);
        let sccs = strongly_connected(&adj);
        let mut out = Vec::new();
        let mut on_cycle = RankSet::new();
        let mut total = 0;
        for scc in sccs {
            let nontrivial =
                scc.len() > 1 || adj.get(&scc[0]).is_some_and(|o| o.contains_key(&scc[0]));
            if !nontrivial {
                continue;
            }
            let members = RankSet::from_i32s(&scc);
            on_cycle.union_with(&members);
            // AND-edges inside the set: all of them, and those on strong evidence.
            let inside = |strong: bool| -> BTreeMap<i32, Vec<i32>> {
                scc.iter()
                    .map(|&r| {
                        let next = adj[&r]
                            .iter()
                            .filter(|(t, e)| {
                                e.and && (e.strong || !strong) && members.contains_i32(**t)
                            })
                            .map(|(t, _)| *t)
                            .collect();
                        (r, next)
                    })
                    .collect()
            };
            let budget = MAX_CYCLES_PER_SET.min(MAX_CYCLES_TOTAL.saturating_sub(total));
            // Cycles on strong evidence first; then those that need a message waiting
            // unexpected, when they involve ranks the first ones do not.
            let (mut cycles, mut more) = elementary_cycles(&scc, &inside(true), budget);
            let mut covered: RankSet = cycles.iter().flatten().map(|&r| r as u32).collect();
            if cycles.len() < budget {
                let (weak, weak_more) = elementary_cycles(&scc, &inside(false), 4 * budget);
                for c in weak {
                    let ranks: RankSet = c.iter().map(|&r| r as u32).collect();
                    if ranks.is_subset(&covered) {
                        continue;
                    }
                    if cycles.len() == budget {
                        more = true;
                        break;
                    }
                    covered.union_with(&ranks);
                    cycles.push(c);
                }
                more |= weak_more && !members.is_subset(&covered);
            }
            total += cycles.len();
            for c in &cycles {
                out.push(self.cycle_finding(c, &adj));
            }
            if more {
                out.push(Finding::new(
                    FindingKind::DeadlockCycle,
                    members.clone(),
                    format!(
                        "Deadlock: {} wait for each other in more cycles than the {} listed.",
                        members.describe(),
                        cycles.len()
                    ),
                    Vec::new(),
                ));
            }
            let knotted = scc.iter().any(|&r| {
                adj[&r]
                    .iter()
                    .any(|(t, e)| !e.and && members.contains_i32(*t))
            });
            if knotted {
                out.push(self.knot_finding(&scc, &members, &adj));
            }
        }
        let behind = d.difference(&on_cycle);
        let mut atoms = Vec::new();
        for r in &behind {
            let r = r as i32;
            let mut targets = RankSet::new();
            let mut edges = Vec::new();
            let mut indices = Vec::new();
            for (&t, e) in &adj[&r] {
                targets.insert(t as u32);
                edges.push((r, t));
                indices.extend(e.waits.iter().copied());
            }
            let weak_only = indices.iter().all(|&i| self.waits[i].is_weak());
            let evidence = evidence_of(self.waits, indices);
            let (single, plural) = if weak_only {
                (
                    format!(
                        "rank {r} may be blocked behind the deadlock: its messages wait unexpected at {}, deadlocked (if they were sent eagerly, rank {r} has moved on).",
                        targets.describe()
                    ),
                    "may be blocked behind the deadlock: their messages wait unexpected at deadlocked ranks (if they were sent eagerly, they have moved on).".to_string(),
                )
            } else {
                (
                    format!(
                        "rank {r} is blocked behind the deadlock: it waits for {}, deadlocked.",
                        targets.describe()
                    ),
                    "are blocked behind the deadlock: each waits for deadlocked ranks.".to_string(),
                )
            };
            atoms.push(Atom {
                kind: FindingKind::BlockedByDeadlock,
                rank: r,
                prefix: "",
                single,
                plural,
                evidence,
                edges,
            });
        }
        out.extend(merge_atoms(atoms));
        (out, d)
    }

    /// The waits of edge `from -> to`, AND-waits first.
    fn edge_waits(&self, adj: &Adj, from: i32, to: i32) -> Vec<&'a Wait> {
        let mut ws: Vec<&Wait> = adj
            .get(&from)
            .and_then(|o| o.get(&to))
            .map(|e| e.waits.iter().map(|&i| &self.waits[i]).collect())
            .unwrap_or_default();
        // AND-waits first, the strongest evidence first: a listed send, a receive, a
        // message waiting unexpected.
        ws.sort_by_key(|w| {
            (
                !matches!(w.target, WaitTarget::Rank(_)),
                match w.kind {
                    WaitKind::Send => 0,
                    WaitKind::Receive => 1,
                    WaitKind::Unexpected => 2,
                },
            )
        });
        ws
    }

    fn cycle_finding(&self, cycle: &[i32], adj: &Adj) -> Finding {
        let n = cycle.len();
        let hops: Vec<(i32, i32)> = (0..n).map(|i| (cycle[i], cycle[(i + 1) % n])).collect();
        let per_edge: Vec<Vec<&Wait>> = hops
            .iter()
            .map(|&(a, b)| {
                self.edge_waits(adj, a, b)
                    .into_iter()
                    .filter(|w| matches!(w.target, WaitTarget::Rank(_)))
                    .collect()
            })
            .collect();
        let path = path_text(cycle);
        let mut evidence = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for ws in &per_edge {
            for w in ws {
                for e in &w.evidence {
                    if seen.insert(e) {
                        evidence.push(e.clone());
                    }
                }
            }
        }
        // One description that fits every hop?
        let primary: Vec<&Wait> = per_edge.iter().map(|ws| ws[0]).collect();
        let uniform = |f: &dyn Fn(&Wait) -> bool| primary.iter().all(|w| f(w));
        let first = primary[0];
        let same_class = uniform(&|w| w.kind.is_message() == first.kind.is_message());
        let same_comm = uniform(&|w| w.comm == first.comm);
        let rel = first.relation();
        let same_rel = uniform(&|w| w.relation() == rel);
        let same_tag = uniform(&|w| w.tag == first.tag);
        let ranks = RankSet::from_i32s(cycle);
        let mut text = if same_class && same_comm {
            let peer = match (same_rel, rel) {
                (true, Relation::Absolute) | (false, _) => "the next rank of the cycle",
                (true, r) => r.its(),
            };
            let tag = if same_tag {
                format!(", {}", tag_words(first.tag))
            } else {
                String::new()
            };
            if first.kind.is_message() {
                let unlisted = primary.iter().all(|w| w.kind == WaitKind::Unexpected);
                let seen = if unlisted {
                    " (seen as their messages waiting unexpected at the destinations)"
                } else {
                    ""
                };
                let receives: RankSet = cycle
                    .iter()
                    .filter(|r| self.facts.get(r).is_some_and(|f| f.receives > 0))
                    .map(|&r| r as u32)
                    .collect();
                let note = if receives.is_empty() {
                    "no receive is posted on any of them".to_string()
                } else {
                    format!(
                        "the receives posted on {} match none of these messages",
                        receives.describe()
                    )
                };
                format!(
                    "Deadlock: ranks {path} each blocked in a send to {peer} on {}{tag}{seen}; {note}.",
                    first.comm.label()
                )
            } else {
                let sending: RankSet = cycle
                    .iter()
                    .filter(|r| self.facts.get(r).is_some_and(|f| f.sends > 0))
                    .map(|&r| r as u32)
                    .collect();
                let note = if sending.is_empty() {
                    "none of them has a send pending".to_string()
                } else {
                    format!(
                        "the sends pending on {} match none of these receives",
                        sending.describe()
                    )
                };
                format!(
                    "Deadlock: ranks {path} each blocked in a receive from {peer} on {}{tag}; {note}.",
                    first.comm.label()
                )
            }
        } else {
            let parts: Vec<String> = primary
                .iter()
                .zip(&hops)
                .map(|(w, (a, b))| format!("rank {a} waits for rank {b} ({})", w.what()))
                .collect();
            format!(
                "Deadlock: ranks {path} wait for each other: {}.",
                parts.join(", ")
            )
        };
        // Ranks whose only part in the cycle is a message waiting elsewhere.
        let unsure: RankSet = hops
            .iter()
            .zip(&per_edge)
            .filter(|((a, _), ws)| {
                ws.iter().all(|w| w.kind == WaitKind::Unexpected)
                    && self
                        .facts
                        .get(a)
                        .is_some_and(|f| f.receives == 0 && f.sends == 0)
            })
            .map(|((a, _), _)| *a as u32)
            .collect();
        if !unsure.is_empty() {
            let (who, has, own) = if unsure.len() == 1 {
                ("Rank", "has", "its")
            } else {
                ("Ranks", "have", "their")
            };
            let _ = write!(
                text,
                " ({who} {unsure} {has} no pending operation of {own} own: blocked in a send the library does not list (ch3/ch4 list no blocking sends), or past an eager send; watch the job to tell.)"
            );
        }
        Finding {
            kind: FindingKind::DeadlockCycle,
            ranks,
            text,
            evidence,
            cycle: Some(cycle.to_vec()),
            edges: hops,
        }
    }

    fn knot_finding(&self, scc: &[i32], members: &RankSet, adj: &Adj) -> Finding {
        let mut edges = Vec::new();
        // An any-source wait is an edge to every member: list them for small knots only.
        let count: usize = scc
            .iter()
            .map(|r| adj[r].keys().filter(|t| members.contains_i32(**t)).count())
            .sum();
        let all_edges = count <= MAX_KNOT_EDGES;
        if !all_edges {
            for &r in scc {
                for (&t, e) in &adj[&r] {
                    if e.and && members.contains_i32(t) {
                        edges.push((r, t));
                    }
                }
            }
        }
        let mut parts = Vec::new();
        let incoming: RankSet = self
            .waits
            .iter()
            .filter(|w| w.kind.is_message())
            .filter_map(|w| match w.target {
                WaitTarget::Rank(t) => u32::try_from(t).ok(),
                _ => None,
            })
            .collect();
        let mut indices: Vec<usize> = Vec::new();
        for &r in scc {
            // Each wait once (an any-source wait is an edge to every member).
            let mut mine: Vec<(i32, usize)> = Vec::new();
            let mut seen: HashSet<usize> = HashSet::new();
            for (&t, e) in &adj[&r] {
                if !members.contains_i32(t) {
                    continue;
                }
                if all_edges {
                    edges.push((r, t));
                }
                for &i in &e.waits {
                    if seen.insert(i) {
                        mine.push((t, i));
                    }
                }
            }
            let mut targets: Vec<String> = Vec::new();
            let mut any_source = false;
            for (t, i) in mine {
                let w = &self.waits[i];
                let text = match &w.target {
                    WaitTarget::AnyOf(set) => {
                        any_source = true;
                        format!(
                            "a message from any of {} on {}, {}",
                            set.describe(),
                            w.comm.label(),
                            tag_words(w.tag)
                        )
                    }
                    _ => format!("rank {t} ({})", w.what()),
                };
                if !targets.contains(&text) {
                    targets.push(text);
                }
                indices.push(i);
            }
            let nobody = if any_source && !incoming.contains_i32(r) {
                " and nobody sends to it"
            } else {
                ""
            };
            parts.push(format!(
                "rank {r} waits for {}{nobody}",
                targets.join(" and ")
            ));
        }
        let evidence = evidence_of(self.waits, indices);
        const LISTED: usize = 8;
        let mut listing = parts
            .iter()
            .take(LISTED)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if parts.len() > LISTED {
            let _ = write!(listing, "; and {} more ranks", parts.len() - LISTED);
        }
        Finding {
            kind: FindingKind::DeadlockKnot,
            ranks: members.clone(),
            text: format!(
                "Deadlock (knot): {} are all blocked and every rank they wait for is among them, so none can proceed: {listing}.",
                members.describe()
            ),
            evidence,
            cycle: None,
            edges,
        }
    }
}

/// "0 -> 1 -> 2 -> 0"; long cycles are shortened in the middle.
fn path_text(cycle: &[i32]) -> String {
    const SHOWN: usize = 32;
    let mut ranks: Vec<String> = cycle.iter().map(i32::to_string).collect();
    ranks.push(cycle[0].to_string());
    if cycle.len() > SHOWN {
        let tail = ranks.split_off(ranks.len() - 3);
        ranks.truncate(3);
        ranks.push("...".into());
        ranks.extend(tail);
        return format!("{} ({} ranks)", ranks.join(" -> "), cycle.len());
    }
    ranks.join(" -> ")
}

/// Strongly connected components (Tarjan, iterative), each sorted, in order of their
/// lowest rank.
fn strongly_connected<V>(adj: &BTreeMap<i32, BTreeMap<i32, V>>) -> Vec<Vec<i32>> {
    let nodes: Vec<i32> = adj.keys().copied().collect();
    let pos: HashMap<i32, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| adj[n].keys().filter_map(|t| pos.get(t).copied()).collect())
        .collect();
    let n = nodes.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(top) = call.last_mut() {
            let v = top.0;
            if top.1 < succ[v].len() {
                let w = succ[v][top.1];
                top.1 += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(nodes[w]);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out.sort();
    out
}

/// Elementary cycles of `adj` over `nodes` (Johnson's algorithm, iterative), each
/// starting at its lowest rank; at most `cap` (the flag says more exist). Each round
/// searches only the strongly connected component of the least vertex left, so the work is
/// linear in the graph per cycle found.
fn elementary_cycles(
    nodes: &[i32],
    adj: &BTreeMap<i32, Vec<i32>>,
    cap: usize,
) -> (Vec<Vec<i32>>, bool) {
    let all: BTreeSet<i32> = nodes.iter().copied().collect();
    let mut found = Vec::new();
    let mut from = i32::MIN;
    loop {
        // The component with the least vertex, among vertices >= from.
        let sub: BTreeMap<i32, BTreeMap<i32, ()>> = all
            .range(from..)
            .map(|&v| {
                let next = adj
                    .get(&v)
                    .into_iter()
                    .flatten()
                    .filter(|&&w| w >= from && all.contains(&w))
                    .map(|&w| (w, ()))
                    .collect();
                (v, next)
            })
            .collect();
        let Some(component) = strongly_connected(&sub)
            .into_iter()
            .find(|c| c.len() > 1 || sub[&c[0]].contains_key(&c[0]))
        else {
            return (found, false);
        };
        let s = component[0];
        let members: HashSet<i32> = component.iter().copied().collect();
        let succ = |v: i32| -> Vec<i32> {
            sub[&v]
                .keys()
                .copied()
                .filter(|w| members.contains(w))
                .collect()
        };
        let mut blocked: HashSet<i32> = HashSet::new();
        let mut b: HashMap<i32, HashSet<i32>> = HashMap::new();
        // (vertex, its successors, next successor index, found a cycle below)
        let mut call: Vec<(i32, Vec<i32>, usize, bool)> = vec![(s, succ(s), 0, false)];
        let mut path = vec![s];
        blocked.insert(s);
        while let Some(top) = call.last_mut() {
            if top.2 < top.1.len() {
                let w = top.1[top.2];
                top.2 += 1;
                if w == s {
                    if found.len() == cap {
                        return (found, true);
                    }
                    found.push(path.clone());
                    top.3 = true;
                } else if !blocked.contains(&w) {
                    blocked.insert(w);
                    path.push(w);
                    let next = succ(w);
                    call.push((w, next, 0, false));
                }
            } else {
                let (v, next, _, got) = call.pop().expect("non-empty");
                path.pop();
                if got {
                    let mut work = vec![v];
                    while let Some(x) = work.pop() {
                        if blocked.remove(&x)
                            && let Some(waiting) = b.remove(&x)
                        {
                            work.extend(waiting);
                        }
                    }
                } else {
                    for w in next {
                        b.entry(w).or_default().insert(v);
                    }
                }
                if let Some(parent) = call.last_mut() {
                    parent.3 |= got;
                }
            }
        }
        let Some(next) = s.checked_add(1) else {
            return (found, false);
        };
        from = next;
    }
}

// =========================================================================== diagnose

/// Everything but the deadlock analysis that explains who waits for whom.
fn other_findings(waits: &[Wait], facts: &BTreeMap<i32, RankFacts>) -> Vec<Atom> {
    let mut atoms = Vec::new();
    // Who waits for each rank, and the proof (indices of waits).
    // Per rank waited for: who waits, whether only in any-source receives, the waits'
    // indices, the edges.
    type Waiters = (RankSet, bool, Vec<usize>, Vec<(i32, i32)>);
    let mut waiters: BTreeMap<i32, Waiters> = BTreeMap::new();
    for (i, w) in waits.iter().enumerate() {
        let (targets, any) = match &w.target {
            WaitTarget::Rank(t) => (vec![*t], false),
            WaitTarget::AnyOf(set) => (set.iter().map(|r| r as i32).collect(), true),
            _ => continue,
        };
        for t in targets {
            if t == w.from {
                continue;
            }
            let e = waiters
                .entry(t)
                .or_insert_with(|| (RankSet::new(), true, Vec::new(), Vec::new()));
            if let Ok(from) = u32::try_from(w.from) {
                e.0.insert(from);
            }
            e.1 &= any;
            e.2.push(i);
            e.3.push((w.from, t));
        }
    }
    let active: HashSet<i32> = waits
        .iter()
        .map(|w| w.from)
        .chain(facts.iter().filter(|(_, f)| f.transit > 0).map(|(r, _)| *r))
        .collect();
    for (t, (who, any_only, indices, edges)) in waiters {
        if facts
            .get(&t)
            .is_some_and(|f| f.error.is_none() && active.contains(&t))
        {
            continue;
        }
        let evidence = evidence_of(waits, indices);
        let verb = if who.len() == 1 { "waits" } else { "wait" };
        let any = if any_only {
            " (in receives from any source)"
        } else {
            ""
        };
        match facts.get(&t) {
            Some(RankFacts { error: None, .. }) if !active.contains(&t) => atoms.push(Atom {
                kind: FindingKind::IdleTarget,
                rank: t,
                prefix: "",
                single: format!(
                    "rank {t} has no pending point-to-point communication, yet {} {verb} for it{any}: it is busy computing, or blocked outside point-to-point (a collective, I/O, a lock).",
                    who.describe()
                ),
                plural: format!(
                    "have no pending point-to-point communication, yet {} {verb} for them{any}: they are busy computing, or blocked outside point-to-point (a collective, I/O, a lock).",
                    who.describe()
                ),
                evidence,
                edges,
            }),
            Some(RankFacts { error: None, .. }) => {}
            _ if any_only => {}
            Some(RankFacts { error: Some(e), .. }) => atoms.push(Atom {
                kind: FindingKind::UndumpedTarget,
                rank: t,
                prefix: "",
                single: format!(
                    "rank {t} could not be dumped ({e}), yet {} {verb} for it: its state is unknown.",
                    who.describe()
                ),
                plural: format!(
                    "could not be dumped, yet {} {verb} for them: their state is unknown.",
                    who.describe()
                ),
                evidence,
                edges,
            }),
            None => atoms.push(Atom {
                kind: FindingKind::UndumpedTarget,
                rank: t,
                prefix: "",
                single: format!(
                    "rank {t} is not in the dump, yet {} {verb} for it: its state is unknown.",
                    who.describe()
                ),
                plural: format!(
                    "are not in the dump, yet {} {verb} for them: their state is unknown.",
                    who.describe()
                ),
                evidence,
                edges,
            }),
        }
    }
    for w in waits {
        let (single, plural) = match &w.target {
            WaitTarget::AnyUnknown => (
                format!(
                    "rank {} waits for a message from any member of {}, {}, whose COMM_WORLD ranks are unknown (the library reports no group): the analysis cannot follow this wait.",
                    w.from,
                    w.comm.label(),
                    tag_words(w.tag)
                ),
                format!(
                    "each wait for a message from any member of {}, {}, whose COMM_WORLD ranks are unknown (the library reports no group): the analysis cannot follow these waits.",
                    w.comm.label(),
                    tag_words(w.tag)
                ),
            ),
            WaitTarget::UnknownRank { local } => (
                format!(
                    "rank {} waits for local rank {local} of {} ({}), whose COMM_WORLD rank is unknown: the analysis cannot follow this wait.",
                    w.from,
                    w.comm.label(),
                    w.what()
                ),
                format!(
                    "each wait for a peer on {} ({}) whose COMM_WORLD rank is unknown: the analysis cannot follow these waits.",
                    w.comm.label(),
                    w.what()
                ),
            ),
            _ => continue,
        };
        atoms.push(Atom {
            kind: FindingKind::UnknownPeer,
            rank: w.from,
            prefix: "",
            single,
            plural,
            evidence: w.evidence.clone(),
            edges: Vec::new(),
        });
    }
    atoms
}

fn summary_finding(
    waits: &[Wait],
    facts: &BTreeMap<i32, RankFacts>,
    deadlocked: &RankSet,
) -> Option<Finding> {
    if !deadlocked.is_empty() {
        return None;
    }
    let failed: RankSet = facts
        .iter()
        .filter(|(_, f)| f.error.is_some())
        .map(|(&r, _)| r as u32)
        .collect();
    let dumped: RankSet = facts
        .iter()
        .filter(|(_, f)| f.error.is_none())
        .map(|(&r, _)| r as u32)
        .collect();
    let caveat = if failed.is_empty() {
        String::new()
    } else {
        format!(" ({} could not be dumped)", failed.describe())
    };
    if waits.is_empty() {
        let transit = facts.values().any(|f| f.transit > 0);
        let text = if transit {
            format!(
                "No rank waits for another{caveat}: only messages in transit, no point-to-point deadlock."
            )
        } else {
            format!("No rank waits for another{caveat}: no point-to-point deadlock.")
        };
        return Some(Finding::new(FindingKind::Clean, dumped, text, Vec::new()));
    }
    let waiting = RankSet::from_i32s(waits.iter().map(|w| &w.from));
    Some(Finding::new(
        FindingKind::NoDeadlock,
        waiting.clone(),
        format!(
            "No point-to-point deadlock{caveat}: {} {} wait, but every wait leads to a rank that is not blocked in point-to-point communication (see above).",
            waits.len(),
            if waits.len() == 1 {
                "operation"
            } else {
                "operations"
            }
        ),
        Vec::new(),
    ))
}

fn order(findings: &mut [Finding]) {
    // Stable: within a kind, the order of discovery (by rank).
    findings.sort_by_key(|f| f.kind);
}

/// The diagnosis of a job: who waits for whom, and why it does not move.
pub fn diagnose(job: &JobDump) -> Diagnosis {
    let s = scan(job);
    let graph = Graph::new(&s.waits, &s.facts);
    let (mut findings, deadlocked) = graph.findings();
    let mut atoms = mismatches(&s);
    atoms.extend(other_findings(&s.waits, &s.facts));
    let Scan {
        facts,
        waits,
        atoms: scanned,
        failed_atoms,
        ..
    } = s;
    atoms.extend(scanned);
    atoms.extend(failed_atoms);
    findings.extend(merge_atoms(atoms));
    findings.extend(summary_finding(&waits, &facts, &deadlocked));
    order(&mut findings);
    Diagnosis {
        findings,
        waits,
        deadlocked,
        facts,
    }
}

// ============================================================================== watch

/// What persisted across the samples of a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persistence {
    /// Number of samples.
    pub samples: usize,
    /// The waits present in every sample (as the last sample shows them).
    pub waits: Vec<Wait>,
    /// Deadlock findings on the persistent waits (cycles and knots that persisted, and the
    /// ranks blocked behind them), or one summary finding when none did.
    pub findings: Vec<Finding>,
    /// Deadlocks seen in some sample that did not persist: traffic.
    pub dissolved: Vec<Finding>,
    /// The ranks deadlocked in every sample.
    pub deadlocked: RankSet,
}

impl Persistence {
    /// Whether a deadlock persisted.
    pub fn has_deadlock(&self) -> bool {
        self.findings.iter().any(|f| f.kind.is_deadlock())
    }

    /// Plain words: what persisted, then what dissolved.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "Over {} samples, {} {} persisted.\n",
            self.samples,
            self.waits.len(),
            if self.waits.len() == 1 {
                "wait"
            } else {
                "waits"
            }
        );
        for f in &self.findings {
            let _ = writeln!(out, "{}", f.text);
            for line in f.evidence.iter().take(TEXT_EVIDENCE_LINES) {
                let _ = writeln!(out, "  {line}");
            }
        }
        if !self.dissolved.is_empty() {
            let _ = writeln!(out, "Dissolved between samples (traffic, not deadlocks):");
            for f in &self.dissolved {
                let _ = writeln!(out, "  {}", f.text);
            }
        }
        out
    }

    /// `{"samples", "deadlock", "deadlocked", "findings", "dissolved", "waits"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "samples": self.samples,
            "deadlock": self.has_deadlock(),
            "deadlocked": self.deadlocked.to_string(),
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "dissolved": self.dissolved.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "waits": self.waits.iter().map(Wait::to_json).collect::<Vec<_>>(),
        })
    }
}

/// The waits and deadlocks that persist across `samples` (oldest first): a cycle present
/// in every sample is a deadlock, one that dissolves is traffic. A job that finished (or
/// moved on) between samples gives no deadlock.
pub fn persistent(samples: &[Diagnosis]) -> Persistence {
    let Some(last) = samples.last() else {
        return Persistence {
            samples: 0,
            waits: Vec::new(),
            findings: vec![Finding::new(
                FindingKind::Clean,
                RankSet::new(),
                "No sample taken.".into(),
                Vec::new(),
            )],
            dissolved: Vec::new(),
            deadlocked: RankSet::new(),
        };
    };
    let mut common: HashSet<WaitKey> = last.waits.iter().map(Wait::key).collect();
    for s in &samples[..samples.len() - 1] {
        let keys: HashSet<WaitKey> = s.waits.iter().map(Wait::key).collect();
        common.retain(|k| keys.contains(k));
    }
    let waits: Vec<Wait> = last
        .waits
        .iter()
        .filter(|w| common.contains(&w.key()))
        .cloned()
        .collect();
    let graph = Graph::new(&waits, &last.facts);
    let (mut findings, deadlocked) = graph.findings();
    let persisted: HashSet<(i32, i32)> = findings
        .iter()
        .filter(|f| f.kind.is_deadlock())
        .flat_map(|f| f.edges.iter().copied())
        .collect();
    let mut dissolved: Vec<Finding> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        for f in s.findings.iter().filter(|f| f.kind.is_deadlock()) {
            let lasted = match f.kind {
                FindingKind::DeadlockKnot => f.ranks.is_subset(&deadlocked),
                _ => !f.edges.is_empty() && f.edges.iter().all(|e| persisted.contains(e)),
            };
            if lasted
                || dissolved
                    .iter()
                    .any(|d| d.kind == f.kind && d.edges == f.edges && d.ranks == f.ranks)
            {
                continue;
            }
            let mut d = f.clone();
            d.text = format!("sample {}: {}", i + 1, f.text);
            dissolved.push(d);
        }
    }
    if findings.is_empty() {
        let text = if waits.is_empty() {
            format!(
                "No wait persisted across the {} samples: no deadlock.",
                samples.len()
            )
        } else {
            format!(
                "{} {} persisted across the {} samples, but no cycle or knot of blocked ranks: no deadlock.",
                waits.len(),
                if waits.len() == 1 { "wait" } else { "waits" },
                samples.len()
            )
        };
        findings.push(Finding::new(
            FindingKind::NoDeadlock,
            RankSet::from_i32s(waits.iter().map(|w| &w.from)),
            text,
            Vec::new(),
        ));
    } else {
        for f in findings.iter_mut().filter(|f| f.kind.is_deadlock()) {
            f.text = format!("Persisted over {} samples: {}", samples.len(), f.text);
        }
    }
    Persistence {
        samples: samples.len(),
        waits,
        findings,
        dissolved,
        deadlocked,
    }
}

/// [`persistent`] over dumps: diagnoses each first.
pub fn persistent_dumps(samples: &[JobDump]) -> Persistence {
    let diagnoses: Vec<Diagnosis> = samples.iter().map(diagnose).collect();
    persistent(&diagnoses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adj(edges: &[(i32, i32)]) -> BTreeMap<i32, Vec<i32>> {
        let mut out: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &(a, b) in edges {
            out.entry(a).or_default().push(b);
            out.entry(b).or_default();
        }
        out
    }

    fn cycles(edges: &[(i32, i32)]) -> Vec<Vec<i32>> {
        let a = adj(edges);
        let nodes: Vec<i32> = a.keys().copied().collect();
        elementary_cycles(&nodes, &a, 100).0
    }

    #[test]
    fn johnson_finds_every_elementary_cycle_once() {
        assert_eq!(
            cycles(&[(0, 1), (1, 2), (2, 3), (3, 0)]),
            [vec![0, 1, 2, 3]]
        );
        assert_eq!(cycles(&[(0, 1), (1, 0)]), [vec![0, 1]]);
        assert!(cycles(&[(0, 1), (1, 2)]).is_empty());
        assert_eq!(cycles(&[(0, 0)]), [vec![0]]);
        let mut both = cycles(&[(0, 1), (1, 0), (2, 3), (3, 2), (0, 0)]);
        both.sort();
        assert_eq!(both, [vec![0], vec![0, 1], vec![2, 3]]);
        // Bidirectional ring of 4: two long cycles and four 2-cycles.
        let mut ring = Vec::new();
        for r in 0..4 {
            ring.push((r, (r + 1) % 4));
            ring.push((r, (r + 3) % 4));
        }
        assert_eq!(cycles(&ring).len(), 6);
        // The cap.
        let a = adj(&ring);
        let nodes: Vec<i32> = a.keys().copied().collect();
        let (some, more) = elementary_cycles(&nodes, &a, 3);
        assert_eq!(some.len(), 3);
        assert!(more);
    }

    #[test]
    fn big_ring_is_one_cycle_without_deep_recursion() {
        let n = 100_000;
        let edges: Vec<(i32, i32)> = (0..n).map(|r| (r, (r + 1) % n)).collect();
        let c = cycles(&edges);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n as usize);
        let mut m: BTreeMap<i32, BTreeMap<i32, ()>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a).or_default().insert(b, ());
        }
        assert_eq!(strongly_connected(&m).len(), 1);
    }

    #[test]
    fn tarjan_separates_components() {
        let mut m: BTreeMap<i32, BTreeMap<i32, ()>> = BTreeMap::new();
        for (a, b) in [(0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (4, 4)] {
            m.entry(a).or_default().insert(b, ());
            m.entry(b).or_default();
        }
        assert_eq!(strongly_connected(&m), [vec![0, 1], vec![2, 3], vec![4]]);
    }

    fn op(peer: i64, tag: i64) -> Operation {
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
        }
    }

    /// A job of `n` ranks on COMM_WORLD whose rank `r` has `receives(r)` posted.
    fn world_job(n: i32, receives: impl Fn(i32) -> Vec<Operation>) -> JobDump {
        let ranks = (0..n)
            .map(|r| crate::report::RankDump {
                rank: r,
                pid: None,
                host: None,
                executable: None,
                message: None,
                outcome: Ok(crate::session::Display {
                    communicators: vec![CommunicatorView {
                        unique_id: 1,
                        local_rank: i64::from(r),
                        size: i64::from(n),
                        name: "MPI_COMM_WORLD".into(),
                        group: Some((0..n).collect()),
                        group_error: None,
                        pending_receives: Queue::Operations(receives(r)),
                        unexpected_messages: Queue::Operations(Vec::new()),
                        pending_sends: Queue::Operations(Vec::new()),
                    }],
                }),
            })
            .collect();
        JobDump {
            dll: String::new(),
            dll_version: String::new(),
            acquired_by: "test".into(),
            starter_pid: None,
            abort_message: None,
            ranks,
        }
    }

    #[test]
    fn large_jobs_are_diagnosed_quickly() {
        let n = 2000;
        let start = std::time::Instant::now();
        // Everyone receives from any source: one knot of 2000.
        let d = diagnose(&world_job(n, |_| vec![op(-1, 1)]));
        assert_eq!(
            d.findings.len(),
            1,
            "{:?}",
            d.findings.iter().map(|f| f.kind).collect::<Vec<_>>()
        );
        assert_eq!(d.findings[0].kind, FindingKind::DeadlockKnot);
        assert_eq!(d.findings[0].ranks, RankSet::full(n as u32));
        assert_eq!(d.findings[0].evidence.len(), n as usize);
        // A receive ring of 2000.
        let d = diagnose(&world_job(n, |r| vec![op(i64::from((r + 1) % n), 2)]));
        assert_eq!(d.findings.len(), 1);
        assert_eq!(d.findings[0].cycle.as_ref().map(Vec::len), Some(n as usize));
        // All wait for rank 0, which waits for anyone: a knot (rank 0 can only be served
        // by blocked ranks).
        let d = diagnose(&world_job(n, |r| {
            vec![if r == 0 { op(-1, 3) } else { op(0, 3) }]
        }));
        assert_eq!(d.findings[0].kind, FindingKind::DeadlockKnot);
        let groups = aggregate(&world_job(n, |r| vec![op(i64::from((r + 1) % n), 2)]));
        assert_eq!(groups.len(), 1);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn relations() {
        assert_eq!(relation(3, 0, 4), Relation::Right);
        assert_eq!(relation(0, 3, 4), Relation::Left);
        assert_eq!(relation(0, 1, 2), Relation::Other);
        assert_eq!(relation(2, 2, 4), Relation::Itself);
        assert_eq!(relation(0, 2, 4), Relation::Absolute);
        assert_eq!(relation(0, -1, 4), Relation::Absolute);
    }

    #[test]
    fn long_paths_are_shortened() {
        let c: Vec<i32> = (0..64).collect();
        assert_eq!(
            path_text(&c),
            "0 -> 1 -> 2 -> ... -> 62 -> 63 -> 0 (64 ranks)"
        );
        assert_eq!(path_text(&[0, 1]), "0 -> 1 -> 0");
    }
}
