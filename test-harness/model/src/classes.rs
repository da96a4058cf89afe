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

impl ClassPeer {
    /// The peer `first.0` of a class's first member (rank `first.1`) as every member
    /// names it, given its last member's peer and rank: the same special value, the same
    /// rank, or the same distance around a job of `size`. `None` when the two name it
    /// otherwise (it is not the same function of the rank in every member).
    pub fn of(first: (i64, i64), last: Option<(i64, i64)>, size: u32) -> Option<ClassPeer> {
        let (p0, r0) = first;
        let n = i64::from(size.max(1));
        let offset = |p: i64, r: i64| (p - r).rem_euclid(n);
        match (p0, last) {
            (-2, None | Some((-2, _))) => Some(ClassPeer::Any),
            (-1, None | Some((-1, _))) => Some(ClassPeer::Null),
            (-2 | -1, Some(_)) => None,
            (_, None) => Some(ClassPeer::Rank(p0)),
            (_, Some((p1, _))) if p1 == p0 => Some(ClassPeer::Rank(p0)),
            (_, Some((p1, r1))) if p1 >= 0 && offset(p1, r1) == offset(p0, r0) => {
                Some(ClassPeer::Offset(offset(p0, r0)))
            }
            _ => None,
        }
    }
}

impl RankClass {
    /// The peer of the call of the thread at `index` of the first member (its arguments
    /// in MPICH's ABI), for a communicator that is `MPI_COMM_WORLD`, as every member
    /// names it ([`ClassPeer::of`]).
    pub fn peer(&self, index: usize, size: u32) -> Option<ClassPeer> {
        let peer_of =
            |d: &RankDump| Some((d.threads.get(index)?.call.as_ref()?.peer?, d.rank.into()));
        let last = match &self.last {
            Some(last) => Some(peer_of(last)?),
            None => None,
        };
        ClassPeer::of(peer_of(&self.first)?, last, size)
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
