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

/// The peer of a class's MPI call, as every member of the class has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassPeer {
    /// `MPI_ANY_SOURCE`.
    Any,
    /// `MPI_PROC_NULL`.
    Null,
    /// The member's rank plus this, around the job.
    Offset(i64),
    /// This rank, for every member.
    Rank(i64),
}

impl RankClass {
    /// The peer of the call of the thread at `index` of the first member (its arguments
    /// in MPICH's ABI), for a communicator that is `MPI_COMM_WORLD`: the same rank in the
    /// first and last members, or the same distance from each around a job of `size`.
    pub fn peer(&self, index: usize, size: u32) -> Option<ClassPeer> {
        let peer_of = |d: &RankDump| d.threads.get(index)?.call.as_ref()?.peer;
        let p0 = peer_of(&self.first)?;
        match p0 {
            -2 => return Some(ClassPeer::Any),
            -1 => return Some(ClassPeer::Null),
            _ => {}
        }
        let n = i64::from(size.max(1));
        let offset = (p0 - i64::from(self.first.rank)).rem_euclid(n);
        let relative = self.last.as_ref().and_then(|last| {
            let p1 = peer_of(last)?;
            (p1 != p0 && (p1 - i64::from(last.rank)).rem_euclid(n) == offset).then_some(offset)
        });
        Some(relative.map_or(ClassPeer::Rank(p0), ClassPeer::Offset))
    }
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
