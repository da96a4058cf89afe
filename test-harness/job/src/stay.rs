//! Whether ranks blocked in MPI calls stay in them: each blocked thread's call return
//! address is counted ([`ExecutionCounter::first`], a hardware breakpoint the kernel
//! counts, that disarms itself at its first execution: a busy loop costs one trap)
//! from before a snapshot to the end of a window. A count of zero proves the thread was
//! inside that very call, not a later one of a loop, the whole time. Only processes of
//! this host are counted.

use crate::identity::this_host;
use mqd_model::{JobDump, Location, RankSet, ThreadStack};
use mqd_process::live::ExecutionCounter;

/// The return address of the MPI call a thread is in: the address of the program's
/// frame just outside the MPI library's.
fn return_address(t: &ThreadStack) -> Option<u64> {
    let entry = t.frames.iter().rposition(|f| f.mpi)?;
    t.frames.get(entry + 1).map(|f| f.address)
}

/// The counters of the threads in MPI calls of some ranks.
pub struct CallWatch {
    /// (rank, tid, return address, its counter).
    counters: Vec<(u32, i32, u64, ExecutionCounter)>,
    /// Ranks that could not be watched whole (another host, no return address, a
    /// counter the kernel refused).
    unwatched: RankSet,
    /// Why the first of them could not be.
    pub why_not: Option<String>,
}

impl CallWatch {
    /// Starts counting the returns of the MPI calls the threads of `ranks` are in, as
    /// `job` shows them.
    pub fn arm(job: &JobDump, ranks: &RankSet) -> CallWatch {
        let here = this_host();
        let mut watch = CallWatch {
            counters: Vec::new(),
            unwatched: RankSet::new(),
            why_not: None,
        };
        for r in job.ranks.iter().filter(|r| r.rank >= 0) {
            let rank = r.rank as u32;
            if !ranks.contains(rank) {
                continue;
            }
            let local = r.host.is_none() || r.host == here;
            let mut armed = local && r.pid.is_some();
            if !armed {
                watch
                    .why_not
                    .get_or_insert_with(|| format!("rank {rank} is on another host"));
            }
            for t in &r.threads {
                if !armed {
                    break;
                }
                if !matches!(
                    t.location_in(r.executable.as_deref()),
                    Location::InMpi { .. }
                ) {
                    continue;
                }
                let Some(address) = return_address(t) else {
                    armed = false;
                    break;
                };
                match ExecutionCounter::first(t.tid, address) {
                    Ok(counter) => watch.counters.push((rank, t.tid, address, counter)),
                    Err(e) => {
                        watch.why_not.get_or_insert_with(|| {
                            format!(
                                "the kernel refused a hardware breakpoint counter (perf_event_open: {e}; see kernel.perf_event_paranoid)"
                            )
                        });
                        armed = false;
                    }
                }
            }
            if !armed {
                watch.unwatched.insert(rank);
            }
        }
        watch
    }

    /// Whether any rank is watched.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The ranks none of whose watched calls returned, and that `job` (a snapshot taken
    /// after arming) shows in exactly the calls watched.
    pub fn stayed(&self, job: &JobDump) -> RankSet {
        let mut stayed = RankSet::new();
        let mut moved = self.unwatched.clone();
        for (rank, tid, address, counter) in &self.counters {
            let same_call = job.ranks.iter().any(|r| {
                r.rank >= 0
                    && r.rank as u32 == *rank
                    && r.threads
                        .iter()
                        .any(|t| t.tid == *tid && return_address(t) == Some(*address))
            });
            if same_call && counter.count().is_ok_and(|n| n == 0) {
                stayed.insert(*rank);
            } else {
                moved.insert(*rank);
            }
        }
        stayed.difference(&moved)
    }
}
