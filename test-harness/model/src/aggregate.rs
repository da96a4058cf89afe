//! Ranks in the same state, listed once: each rank's queues in a normal form where peers
//! are written relative to the rank when that is what most ranks share.

use crate::diagnosis::{CommKey, PeerName};
use crate::dump::QueueKind;
use crate::rank_set::RankSet;

/// One operation, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpForm {
    /// Its peer: relative to the rank, or absolute.
    pub peer: PeerName,
    /// The tag (`None`: any tag).
    pub tag: Option<i64>,
    /// The count (for unexpected messages, the length; `None` when not recorded).
    pub count: Option<i64>,
    /// The status code (`None` for unexpected messages, whose status says eager or
    /// rendezvous, not the rank's state).
    pub status: Option<i32>,
    /// A message of a collective's own algorithm.
    pub collective: bool,
}

/// One queue, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueForm {
    /// The distinct operations, each with how many times the rank has it.
    Ops(Vec<(OpForm, usize)>),
    /// The library has no information about the queue.
    NoInformation,
    /// The queue could not be read (the error's text).
    Error(String),
}

/// One communicator with something in its queues, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommForm {
    /// The communicator.
    pub key: CommKey,
    /// Its queues, in [`QueueKind::ALL`] order.
    pub queues: [QueueForm; 3],
}

impl CommForm {
    /// One of its queues.
    pub fn queue(&self, kind: QueueKind) -> &QueueForm {
        let index = match kind {
            QueueKind::PendingReceives => 0,
            QueueKind::UnexpectedMessages => 1,
            QueueKind::PendingSends => 2,
        };
        &self.queues[index]
    }
}

/// A rank's whole state, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RankForm {
    /// Its communicators with something in their queues, sorted.
    Display(Vec<CommForm>),
    /// It could not be dumped (why).
    Failed(String),
}

/// Ranks in the same state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Their COMM_WORLD ranks.
    pub ranks: RankSet,
    /// Processes in that state whose COMM_WORLD rank is unknown (their pids).
    pub unranked: Vec<Option<i32>>,
    /// The state.
    pub form: RankForm,
}
