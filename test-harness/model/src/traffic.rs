//! The messages a rank sent to and received from each peer, by tag, on any communicator,
//! as the hang recorder counted them: a message is counted sent when the call that sends
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
    /// Each peer's (a `MPI_COMM_WORLD` rank) and tag's, by the peer's distance to the
    /// right of this rank, then tag.
    pub counts: Vec<TrafficCount>,
}

/// Messages between a rank and one peer with one tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrafficCount {
    /// The peer's `MPI_COMM_WORLD` rank.
    pub peer: i32,
    /// The tag.
    pub tag: i32,
    /// Messages sent to the peer.
    pub sent: u64,
    /// Messages received from it.
    pub received: u64,
}
