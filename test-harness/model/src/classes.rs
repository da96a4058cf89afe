//! A job as classes of ranks: ranks that share a state (the same communicators, queues
//! and stacks up to their own numbers: rank, peers relative to it, pid, addresses) are one
//! class, a rank set with two of its members' dumps. What reaches the front end of a job
//! of a million ranks grows with its distinct states, not with its ranks.

use crate::dump::{Acquisition, JobDump, LibraryInfo, RankDump, Snapshot};
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

/// Ranks that could not be dumped, for one reason.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRanks {
    /// The ranks.
    pub ranks: RankSet,
    /// Why.
    pub why: String,
    /// The pid of its one rank (of several ranks, none is named).
    pub pid: Option<i32>,
}

impl FailedRanks {
    /// `ranks` (with `pid`, when one rank) added to `list` under `why`.
    pub fn add_to(list: &mut Vec<FailedRanks>, ranks: &RankSet, why: &str, pid: Option<i32>) {
        match list.iter_mut().find(|f| f.why == why) {
            Some(f) => {
                f.ranks.union_with(ranks);
                f.pid = None;
            }
            None => list.push(FailedRanks {
                ranks: ranks.clone(),
                why: why.to_owned(),
                pid: if ranks.len() == 1 { pid } else { None },
            }),
        }
    }
}

/// A process of the job whose COMM_WORLD rank is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct UnrankedProcess {
    /// Its pid.
    pub pid: Option<i32>,
    /// Why it could not be dumped, when it could not.
    pub error: Option<String>,
}

/// A job of classes.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassJob {
    /// The library that read the queues.
    pub dll: LibraryInfo,
    /// How the processes were found.
    pub acquired_by: Acquisition,
    /// The starter's pid, for a job found through its starter.
    pub starter_pid: Option<i32>,
    /// `MPIR_debug_abort_string` when the job is aborting.
    pub abort_message: Option<String>,
    /// Its size (`MPI_COMM_WORLD`'s).
    pub size: u32,
    /// Whether something says that size (a process table, a launcher, a communicator
    /// read): where not, it is one more than the highest rank seen, and ranks beyond it
    /// may exist.
    pub size_known: bool,
    /// The classes of the ranks that were dumped, in the order of their first ranks.
    pub classes: Vec<RankClass>,
    /// Ranks that could not be dumped, by why.
    pub failed: Vec<FailedRanks>,
    /// Processes reported whose COMM_WORLD rank is unknown.
    pub unranked: Vec<UnrankedProcess>,
    /// Whether the ranks were all seen at one moment.
    pub snapshot: Snapshot,
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

    /// `job` with every rank a class of its own: its ranks that were read (queues or
    /// stacks) are classes, those with neither are failed (each with its pid), processes
    /// without a COMM_WORLD rank are listed apart and entries that repeat another are
    /// left out.
    pub fn of_ranks(job: &JobDump) -> ClassJob {
        let mut classes = Vec::new();
        let mut failed: Vec<FailedRanks> = Vec::new();
        let mut unranked = Vec::new();
        for r in job.ranks.iter().filter(|r| !r.duplicate) {
            let Ok(rank) = u32::try_from(r.rank) else {
                unranked.push(UnrankedProcess {
                    pid: r.pid,
                    error: r.outcome.as_ref().err().cloned(),
                });
                continue;
            };
            match &r.outcome {
                Err(why) if r.threads.is_empty() => failed.push(FailedRanks {
                    ranks: RankSet::single(rank),
                    why: why.clone(),
                    pid: r.pid,
                }),
                _ => classes.push(RankClass {
                    ranks: RankSet::single(rank),
                    first: r.clone(),
                    last: None,
                }),
            }
        }
        classes.sort_by_key(|c| c.ranks.first());
        ClassJob::of_job(job, classes, failed, unranked)
    }

    /// `classes` of `job`, with its header (library, acquisition, size, snapshot) and
    /// its `failed` and `unranked` processes.
    pub fn of_job(
        job: &JobDump,
        classes: Vec<RankClass>,
        failed: Vec<FailedRanks>,
        unranked: Vec<UnrankedProcess>,
    ) -> ClassJob {
        ClassJob {
            dll: job.dll.clone(),
            acquired_by: job.acquired_by,
            starter_pid: job.starter_pid,
            abort_message: job.abort_message.clone(),
            size: job.world_size(),
            size_known: job.known_size().is_some(),
            classes,
            failed,
            unranked,
            snapshot: job.snapshot.clone(),
        }
    }
}
