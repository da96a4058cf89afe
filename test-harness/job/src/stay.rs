//! Whether ranks blocked in MPI calls stay in them: each blocked thread's call return
//! address is counted ([`ExecutionCounter::first`], a hardware breakpoint the kernel
//! counts, that disarms itself at its first execution: a busy loop costs one trap)
//! from before a snapshot to the end of a window. A count of zero proves the thread was
//! inside that very call, not a later one of a loop, the whole time. Counters live in
//! the process that opened them: this host's are opened here, another host's by an
//! agent there that keeps them between requests ([`RemoteCounters`]).

use crate::identity::this_host;
use mqd_model::{JobDump, Location, RankSet, ThreadStack};
use mqd_process::live::ExecutionCounter;
use std::collections::BTreeMap;

/// The return address of the MPI call a thread is in: the address of the program's
/// frame just outside the MPI library's.
fn return_address(t: &ThreadStack) -> Option<u64> {
    let entry = t.frames.iter().rposition(|f| f.mpi)?;
    t.frames.get(entry + 1).map(|f| f.address)
}

/// Counters kept on other hosts, by whoever can open them there.
pub trait RemoteCounters {
    /// Replaces `host`'s counters by ones watching each (tid, return address) point;
    /// the generation that names them, and for each point why it was refused (`None`:
    /// armed).
    fn arm(&self, host: &str, points: &[(i32, u64)]) -> Result<(u64, Vec<Option<String>>), String>;
    /// The counts of generation `generation`'s counters on `host`, in arming order
    /// (`None`: unreadable).
    fn counts(&self, host: &str, generation: u64) -> Result<Vec<Option<u64>>, String>;
    /// The CPU time (clock ticks) of each (pid, tid) thread of `host` (`None`: gone).
    fn cpu(&self, host: &str, threads: &[(i32, i32)]) -> Result<Vec<Option<u64>>, String>;
}

/// Where a watched call's counter is.
enum Counter {
    Here(ExecutionCounter),
    /// Point `index` of generation `generation` on `host`.
    There {
        host: String,
        generation: u64,
        index: usize,
    },
}

/// The counters of the threads in MPI calls of some ranks.
pub struct CallWatch<'a> {
    /// (rank, tid, return address, its counter).
    counters: Vec<(u32, i32, u64, Counter)>,
    /// Ranks that could not be watched whole (another host without `remote`, no return
    /// address, a counter refused).
    unwatched: RankSet,
    /// Why the first of them could not be.
    pub why_not: Option<String>,
    remote: Option<&'a dyn RemoteCounters>,
}

impl CallWatch<'static> {
    /// Starts counting the returns of the MPI calls the threads of `ranks` are in, as
    /// `job` shows them: this host's ranks only.
    pub fn arm(job: &JobDump, ranks: &RankSet) -> CallWatch<'static> {
        CallWatch::arm_across(job, ranks, None)
    }
}

impl<'a> CallWatch<'a> {
    /// [`CallWatch::arm`], the ranks of other hosts counted through `remote`.
    pub fn arm_across(
        job: &JobDump,
        ranks: &RankSet,
        remote: Option<&'a dyn RemoteCounters>,
    ) -> CallWatch<'a> {
        let here = this_host();
        let mut watch = CallWatch {
            counters: Vec::new(),
            unwatched: RankSet::new(),
            why_not: None,
            remote,
        };
        // Each other host's points, armed in one request: (rank, tid, address).
        let mut elsewhere: BTreeMap<String, Vec<(u32, i32, u64)>> = BTreeMap::new();
        for r in job.ranks.iter().filter(|r| r.rank >= 0) {
            let rank = r.rank as u32;
            if !ranks.contains(rank) {
                continue;
            }
            let host = r.host.clone().filter(|h| Some(h) != here.as_ref());
            let mut points = Vec::new();
            let mut whole = r.pid.is_some() && (host.is_none() || remote.is_some());
            if !whole {
                watch
                    .why_not
                    .get_or_insert_with(|| format!("rank {rank} is on another host"));
            }
            for t in r.threads.iter().filter(|t| {
                matches!(
                    t.location_in(r.executable.as_deref()),
                    Location::InMpi { .. }
                )
            }) {
                match return_address(t) {
                    Some(address) if whole => points.push((t.tid, address)),
                    _ => whole = false,
                }
            }
            if !whole {
                watch.unwatched.insert(rank);
                continue;
            }
            match host {
                Some(host) => elsewhere
                    .entry(host)
                    .or_default()
                    .extend(points.into_iter().map(|(tid, a)| (rank, tid, a))),
                None => {
                    for (tid, address) in points {
                        match ExecutionCounter::first(tid, address) {
                            Ok(c) => watch.counters.push((rank, tid, address, Counter::Here(c))),
                            Err(e) => watch.refused(rank, &format!("perf_event_open: {e}")),
                        }
                    }
                }
            }
        }
        if let Some(remote) = remote {
            for (host, points) in elsewhere {
                watch.arm_there(remote, host, &points);
            }
        }
        watch
    }

    fn arm_there(&mut self, remote: &dyn RemoteCounters, host: String, points: &[(u32, i32, u64)]) {
        let asked: Vec<(i32, u64)> = points.iter().map(|&(_, tid, a)| (tid, a)).collect();
        match remote.arm(&host, &asked) {
            Ok((generation, refusals)) if refusals.len() == points.len() => {
                for (index, (&(rank, tid, address), refused)) in
                    points.iter().zip(refusals).enumerate()
                {
                    match refused {
                        None => self.counters.push((
                            rank,
                            tid,
                            address,
                            Counter::There {
                                host: host.clone(),
                                generation,
                                index,
                            },
                        )),
                        Some(why) => self.refused(rank, &format!("on {host}: {why}")),
                    }
                }
            }
            Ok(_) => self.lost(
                points,
                format!("the agent on {host} answered for other calls"),
            ),
            Err(why) => self.lost(
                points,
                format!("its calls cannot be counted on {host}: {why}"),
            ),
        }
    }

    fn refused(&mut self, rank: u32, why: &str) {
        self.why_not.get_or_insert_with(|| {
            format!(
                "the kernel refused a hardware breakpoint counter ({why}; see kernel.perf_event_paranoid)"
            )
        });
        self.unwatched.insert(rank);
    }

    fn lost(&mut self, points: &[(u32, i32, u64)], why: String) {
        self.why_not.get_or_insert(why);
        for &(rank, ..) in points {
            self.unwatched.insert(rank);
        }
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
        // Each other host read once: its counts, or nothing (every rank there moved).
        let mut read: BTreeMap<(&str, u64), Vec<Option<u64>>> = BTreeMap::new();
        for (rank, tid, address, counter) in &self.counters {
            let same_call = job.ranks.iter().any(|r| {
                r.rank >= 0
                    && r.rank as u32 == *rank
                    && r.threads
                        .iter()
                        .any(|t| t.tid == *tid && return_address(t) == Some(*address))
            });
            let count = match counter {
                Counter::Here(c) => c.count().ok(),
                Counter::There {
                    host,
                    generation,
                    index,
                } => {
                    let counts = read.entry((host, *generation)).or_insert_with(|| {
                        self.remote
                            .and_then(|r| r.counts(host, *generation).ok())
                            .unwrap_or_default()
                    });
                    counts.get(*index).copied().flatten()
                }
            };
            if same_call && count == Some(0) {
                stayed.insert(*rank);
            } else {
                moved.insert(*rank);
            }
        }
        stayed.difference(&moved)
    }
}

/// The CPU time (user + system, clock ticks) thread `tid` of `pid` has used, from
/// `/proc`.
pub fn cpu_ticks(pid: i32, tid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    ticks(&stat)
}

/// utime + stime of a `/proc/.../stat` line (fields 14 and 15, after the command name
/// in parentheses, which may hold spaces).
fn ticks(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    // `rest` starts at field 3 (state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0";
        assert_eq!(ticks(stat), Some(12));
        assert_eq!(ticks("42 (cut"), None);
        let own = cpu_ticks(std::process::id() as i32, std::process::id() as i32);
        assert!(own.is_some());
    }
}
