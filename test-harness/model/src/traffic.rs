//! The messages a rank sent to and received from each peer, by tag, on any communicator,
//! and the collectives it entered on each communicator, as the hang recorder counted
//! them: a message is counted sent when the call that sends
//! it is entered and received once the call that receives it has returned. So, between
//! two ranks stopped at one moment, received never exceeds sent, and where they are
//! equal no message is on its way: a subtraction, not a wait (`crate::quiet`).

use serde::{Deserialize, Serialize};

/// A rank's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Traffic {
    /// The `MPI_COMM_WORLD` rank the records are of (-1: not known): counts of another
    /// rank than the dump's prove nothing.
    pub rank: i32,
    /// Every message the rank sent was counted (no table overflowed, no binding of its
    /// MPI bypasses the recorder): only then do its sent counts prove anything.
    pub sends_complete: bool,
    /// Each peer's (a `MPI_COMM_WORLD` rank), tag's and communicator lineage's, by the
    /// peer's distance to the right of this rank, then tag and lineage.
    pub counts: Vec<TrafficCount>,
    /// Every collective the rank called was counted (no binding of its MPI bypasses the
    /// recorder, no table overflowed): only then does a count prove a collective not
    /// entered.
    #[serde(default)]
    pub collectives_complete: bool,
    /// Its communicators that every member names alike (each with a lineage and known
    /// members), with the collectives it entered on each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comms: Vec<CommCount>,
    /// Every request of the rank was kept (no table overflowed or was caught
    /// mid-write, no binding bypasses the recorder): only then do [`Traffic::posted`]
    /// prove that no other receive is posted.
    #[serde(default)]
    pub requests_complete: bool,
    /// Its receive requests started and not yet completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub posted: Vec<PostedReceive>,
}

/// A receive request a rank started and has not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PostedReceive {
    /// Its communicator's lineage (0: not known: it may be any).
    pub lineage: u64,
    /// Its source's `MPI_COMM_WORLD` rank (`None`: any source, or not known).
    pub source: Option<i32>,
    /// Its tag (`None`: any tag).
    pub tag: Option<i32>,
}

impl PostedReceive {
    /// Whether it may take a message from `source` with `tag` on a communicator of
    /// `lineage`.
    pub fn may_take(&self, source: i32, tag: i32, lineage: u64) -> bool {
        (self.lineage == 0 || self.lineage == lineage)
            && self.source.is_none_or(|s| s == source)
            && self.tag.is_none_or(|t| t == tag)
    }
}

/// The collectives a rank entered on one communicator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommCount {
    /// The rank's handle of it, as its calls name it.
    pub handle: i64,
    /// What names it alike in every member: `MPI_COMM_WORLD` 1, any other a hash of its
    /// parent's lineage and which collective there made it.
    pub lineage: u64,
    /// Its members as `MPI_COMM_WORLD` ranks in its rank order; `None`: the world's ranks
    /// in order, `size` of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<i32>>,
    /// How many members.
    pub size: u64,
    /// Collectives entered on it.
    pub entered: u64,
    /// The last one entered, and its root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<(String, Option<i64>)>,
    /// A virtual topology's: the neighbours (`MPI_COMM_WORLD` ranks) this rank receives
    /// from in a neighbourhood collective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<i32>>,
}

impl CommCount {
    /// The `MPI_COMM_WORLD` rank of its rank `local`.
    pub fn world_rank(&self, local: usize) -> Option<i32> {
        match &self.members {
            Some(m) => m.get(local).copied(),
            None => (local < self.size as usize).then_some(local as i32),
        }
    }

    /// Its rank of `MPI_COMM_WORLD` rank `world`.
    pub fn local_rank(&self, world: i32) -> Option<usize> {
        match &self.members {
            Some(m) => m.iter().position(|&r| r == world),
            None => usize::try_from(world)
                .ok()
                .filter(|&w| w < self.size as usize),
        }
    }

    /// Whether it is the communicator `other` names (a rank's own record of it).
    pub fn same(&self, other: &CommCount) -> bool {
        self.lineage == other.lineage
            && self.size == other.size
            && (0..self.size as usize).all(|i| self.world_rank(i) == other.world_rank(i))
    }
}

/// Messages between a rank and one peer with one tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrafficCount {
    /// The peer's `MPI_COMM_WORLD` rank.
    pub peer: i32,
    /// The tag.
    pub tag: i32,
    /// The lineage of the communicators the messages travelled on ([`CommCount`]), 0
    /// where none was known.
    #[serde(default)]
    pub lineage: u64,
    /// Messages sent to the peer.
    pub sent: u64,
    /// Messages received from it.
    pub received: u64,
}
