//! Whether ranks blocked in MPI calls stay in them: each blocked thread's call return
//! address is counted ([`ExecutionCounter::first`], a hardware breakpoint the kernel
//! counts, that disarms itself at its first execution: a busy loop costs one trap)
//! from before a snapshot to the end of a window. A count of zero proves the thread was
//! inside that very call, not a later one of a loop, the whole time. What each process
//! does meanwhile is measured too ([`crate::activity`]). Counters live in the process
//! that opened them: this host's are opened here, another host's by an agent there that
//! keeps them between requests ([`RemoteCounters`]).

use crate::activity::Baseline;
pub use crate::activity::cpu_ticks;
use crate::identity::this_host;
use mqd_model::hold::{Activity, Hold, RankHold};
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
    /// Replaces `host`'s counters by ones watching each (tid, return address) point, and
    /// starts measuring what the processes `pids` do; the generation that names them,
    /// and for each point why it was refused (`None`: armed).
    fn arm(
        &self,
        host: &str,
        points: &[(i32, u64)],
        pids: &[i32],
    ) -> Result<(u64, Vec<Option<String>>), String>;
    /// The counts of generation `generation`'s counters on `host`, in arming order
    /// (`None`: unreadable), and what each of its processes did, in arming order.
    fn counts(&self, host: &str, generation: u64) -> Result<Readings, String>;
    /// The CPU time (clock ticks) of each (pid, tid) thread of `host` (`None`: gone).
    fn cpu(&self, host: &str, threads: &[(i32, i32)]) -> Result<Vec<Option<u64>>, String>;
}

/// What a host's counters and measurements read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Readings {
    /// Each counter's count (`None`: unreadable).
    pub counts: Vec<Option<u64>>,
    /// Each process's activity since it was armed (`None`: not measured).
    #[serde(default)]
    pub activity: Vec<Option<Activity>>,
}

/// What each watched rank's process did (`None`: not measured), by rank, and how long
/// after the arming that was read.
#[derive(Debug, Clone, Default)]
pub struct Measures(pub BTreeMap<u32, Option<Activity>>, pub std::time::Duration);

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

/// One other host's points to count, (rank, tid, address), and processes to measure,
/// (rank, pid).
type HostPoints = (Vec<(u32, i32, u64)>, Vec<(u32, i32)>);

/// Where a watched process's measurements are.
enum Measured {
    Here(Baseline),
    /// Process `index` of generation `generation` on `host`.
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
    /// What each watched rank's process does.
    measured: Vec<(u32, Measured)>,
    /// When the watch began.
    since: std::time::Instant,
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
            measured: Vec::new(),
            since: std::time::Instant::now(),
            unwatched: RankSet::new(),
            why_not: None,
            remote,
        };
        // Each other host's points, armed in one request: (rank, tid, address), and its
        // processes (rank, pid).
        let mut elsewhere: BTreeMap<String, HostPoints> = BTreeMap::new();
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
            let pid = r.pid.unwrap_or_default();
            match host {
                Some(host) => {
                    let (p, pids) = elsewhere.entry(host).or_default();
                    p.extend(points.into_iter().map(|(tid, a)| (rank, tid, a)));
                    pids.push((rank, pid));
                }
                None => {
                    watch
                        .measured
                        .push((rank, Measured::Here(Baseline::start(pid))));
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
            for (host, (points, pids)) in elsewhere {
                watch.arm_there(remote, host, &points, &pids);
            }
        }
        watch
    }

    fn arm_there(
        &mut self,
        remote: &dyn RemoteCounters,
        host: String,
        points: &[(u32, i32, u64)],
        pids: &[(u32, i32)],
    ) {
        let asked: Vec<(i32, u64)> = points.iter().map(|&(_, tid, a)| (tid, a)).collect();
        let processes: Vec<i32> = pids.iter().map(|&(_, pid)| pid).collect();
        match remote.arm(&host, &asked, &processes) {
            Ok((generation, refusals)) if refusals.len() == points.len() => {
                for (index, &(rank, _)) in pids.iter().enumerate() {
                    self.measured.push((
                        rank,
                        Measured::There {
                            host: host.clone(),
                            generation,
                            index,
                        },
                    ));
                }
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

    /// The ranks that could not be watched whole.
    pub fn unwatched(&self) -> &RankSet {
        &self.unwatched
    }

    /// Whether any rank is watched.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// Each other host's readings, read once per call.
    fn remote_readings(&self) -> impl FnMut(&str, u64) -> Readings + '_ {
        let mut read: BTreeMap<(String, u64), Readings> = BTreeMap::new();
        move |host: &str, generation: u64| -> Readings {
            read.entry((host.to_owned(), generation))
                .or_insert_with(|| {
                    self.remote
                        .and_then(|r| r.counts(host, generation).ok())
                        .unwrap_or_default()
                })
                .clone()
        }
    }

    /// Each counter's count now, by (rank, tid, address).
    fn counts(&self) -> Vec<(u32, i32, u64, Option<u64>)> {
        let mut there = self.remote_readings();
        self.counters
            .iter()
            .map(|(rank, tid, address, counter)| {
                let count = match counter {
                    Counter::Here(c) => c.count().ok(),
                    Counter::There {
                        host,
                        generation,
                        index,
                    } => there(host, *generation)
                        .counts
                        .get(*index)
                        .copied()
                        .flatten(),
                };
                (*rank, *tid, *address, count)
            })
            .collect()
    }

    /// What each watched rank's process did since the watch was armed, read now (before
    /// a snapshot, whose reads of its memory would count as touching it).
    pub fn measure(&self) -> Measures {
        let mut there = self.remote_readings();
        Measures(
            self.measured
                .iter()
                .map(|(rank, measured)| {
                    let activity = match measured {
                        Measured::Here(b) => Some(b.read()),
                        Measured::There {
                            host,
                            generation,
                            index,
                        } => there(host, *generation)
                            .activity
                            .get(*index)
                            .cloned()
                            .flatten(),
                    };
                    (*rank, activity)
                })
                .collect(),
            self.since.elapsed(),
        )
    }

    /// [`CallWatch::measure`] after `window`, the window stretched by further ones, to
    /// `most` in all, while a watched rank could hardly run (an overloaded host: a rank
    /// that never got a CPU proves nothing by not returning, and one that gets it later
    /// does). `sleep` waits and says whether to go on (`false`: interrupted, `None`).
    /// Returns the measures and the window asked for.
    pub fn measure_through(
        &self,
        window: std::time::Duration,
        most: u32,
        sleep: impl FnMut(std::time::Duration) -> bool,
    ) -> Option<(Measures, std::time::Duration)> {
        stretched(window, most, sleep, || self.measure())
    }

    /// What the watch showed: its counters read now, what the processes did as
    /// `measures` says; a window from the arming to when they were read, said as
    /// `at_least` (the window asked for, which the one measured exceeds by the time the
    /// snapshots took: words that do not change from run to run).
    pub fn hold(&self, measures: Measures, at_least: std::time::Duration) -> Hold {
        let window = measures.1.min(at_least);
        let mut ranks: BTreeMap<i32, RankHold> = BTreeMap::new();
        for (rank, _, _, count) in self.counts() {
            let h = ranks.entry(rank as i32).or_insert(RankHold {
                returned: Some(false),
                activity: None,
            });
            h.returned = match (h.returned, count) {
                (Some(true), _) | (_, Some(1..)) => Some(true),
                (_, None) => None,
                (r, Some(0)) => r,
            };
        }
        for (rank, activity) in measures.0 {
            if let Some(h) = ranks.get_mut(&(rank as i32)) {
                h.activity = activity;
            }
        }
        Hold {
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            ranks: ranks
                .into_iter()
                .filter(|(r, _)| !self.unwatched.contains_i32(*r))
                .collect(),
            unwatched: self.unwatched.clone(),
            why_unwatched: self.why_not.clone(),
        }
    }

    /// The ranks none of whose watched calls returned, and that `job` (a snapshot taken
    /// after arming) shows in exactly the calls watched.
    pub fn stayed(&self, job: &JobDump) -> RankSet {
        self.stayed_and_read(job).0
    }

    /// [`CallWatch::stayed`], with what each rank's process did meanwhile.
    pub fn stayed_and_read(&self, job: &JobDump) -> (RankSet, Measures) {
        let mut stayed = RankSet::new();
        let mut moved = self.unwatched.clone();
        let measures = self.measure();
        for (rank, tid, address, count) in self.counts() {
            let same_call = job.ranks.iter().any(|r| {
                r.rank >= 0
                    && r.rank as u32 == rank
                    && r.threads
                        .iter()
                        .any(|t| t.tid == tid && return_address(t) == Some(address))
            });
            if same_call && count == Some(0) {
                stayed.insert(rank);
            } else {
                moved.insert(rank);
            }
        }
        (stayed.difference(&moved), measures)
    }
}

/// [`CallWatch::measure_through`], with its measuring given.
fn stretched(
    window: std::time::Duration,
    most: u32,
    mut sleep: impl FnMut(std::time::Duration) -> bool,
    mut measure: impl FnMut() -> Measures,
) -> Option<(Measures, std::time::Duration)> {
    let mut asked = window;
    if !sleep(window) {
        return None;
    }
    let mut measures = measure();
    for _ in 1..most.max(1) {
        if !starved(&measures) {
            break;
        }
        if !sleep(window) {
            return None;
        }
        asked += window;
        measures = measure();
    }
    Some((measures, asked))
}

/// Whether a measured rank could hardly run.
fn starved(measures: &Measures) -> bool {
    measures
        .0
        .values()
        .any(|a| a.as_ref().is_some_and(|a| a.starved.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Measures of one rank, starved or not.
    fn rank_0(starved: bool) -> Measures {
        let activity = Activity {
            starved: starved.then_some(mqd_model::hold::Starved {
                tid: 7,
                ran_ms: 0,
                waited_ms: 1900,
            }),
            ..Activity::default()
        };
        Measures(BTreeMap::from([(0, Some(activity))]), Duration::ZERO)
    }

    #[test]
    fn a_hold_goes_on_while_a_rank_could_hardly_run_and_no_longer() {
        let second = Duration::from_secs(1);
        let never_sleep = |_| true;
        // Starved in the first two windows, then run: three windows.
        let mut left = 2;
        let (m, asked) = stretched(second, 4, never_sleep, || {
            left -= 1;
            rank_0(left >= 0)
        })
        .unwrap();
        assert_eq!((starved(&m), asked), (false, 3 * second));
        // Never run: four windows, and the last measures say so.
        let (m, asked) = stretched(second, 4, never_sleep, || rank_0(true)).unwrap();
        assert_eq!((starved(&m), asked), (true, 4 * second));
        // Ran at once: one window.
        let (_, asked) = stretched(second, 4, never_sleep, || rank_0(false)).unwrap();
        assert_eq!(asked, second);
        // Interrupted in the second window: nothing to judge.
        let mut sleeps = 0;
        let interrupted = stretched(
            second,
            4,
            |_| {
                sleeps += 1;
                sleeps < 2
            },
            || rank_0(true),
        );
        assert!(interrupted.is_none());
    }

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0";
        assert_eq!(crate::activity::stat_ticks(stat), Some(12));
        assert_eq!(crate::activity::stat_ticks("42 (cut"), None);
        let own = cpu_ticks(std::process::id() as i32, std::process::id() as i32);
        assert!(own.is_some());
    }
}
