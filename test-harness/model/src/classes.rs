//! A job as classes of ranks: ranks that share a state (the same communicators, queues
//! and stacks up to their own numbers: rank, peers relative to it, pid, addresses) are one
//! class, a rank set with two of its members' dumps. What reaches the front end of a job
//! of a million ranks grows with its distinct states, not with its ranks.

use crate::dump::{LibraryInfo, RankDump};
use crate::rank_set::RankSet;

/// Ranks in one state.
#[derive(Debug, Clone, PartialEq)]
pub struct RankClass {
    /// Its ranks.
    pub ranks: RankSet,
    /// Its lowest rank's dump.
    pub first: RankDump,
    /// Its highest rank's dump, for a class of more than one rank: what is tied to the
    /// rank (a peer that is its right neighbour) reads differently in the two; what is
    /// the same in both is the same in every member.
    pub last: Option<RankDump>,
}

/// A job of classes.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassJob {
    /// The library that read the queues.
    pub dll: LibraryInfo,
    /// Its size (`MPI_COMM_WORLD`'s).
    pub size: u32,
    /// The classes of the ranks that were dumped.
    pub classes: Vec<RankClass>,
    /// Ranks that could not be dumped, with why.
    pub failed: Vec<(RankSet, String)>,
    /// Processes reported whose COMM_WORLD rank is unknown.
    pub unranked: usize,
    /// Why the ranks were not all seen at one moment, when they were not.
    pub separate: Option<String>,
}

impl ClassJob {
    /// Every rank dumped.
    pub fn dumped(&self) -> RankSet {
        let mut all = RankSet::new();
        for c in &self.classes {
            all.union_with(&c.ranks);
        }
        all
    }
}
