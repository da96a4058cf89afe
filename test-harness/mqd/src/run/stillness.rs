//! When a job has stopped making progress: every rank of it seen, every thread either
//! inside the very MPI call it was in at the start (its return address never executed
//! since: [`Stays`], hardware breakpoint counters), a thread of the MPI library, or idle
//! outside MPI (the same stack, no CPU time spent), and no message queue changed, for
//! the whole of `--hang-after`. Anything else is progress, and starts the clock again:
//! a rank computing outside MPI uses CPU time or moves, a loop of MPI calls returns from
//! them, traffic changes the queues. A rank on another host is counted by an agent there
//! that keeps its counters between samples (`mqd_remote::HostCounters`). A rank that
//! stays in its call but moves data or writes a file (`mqd_job::activity`) progresses
//! too. A rank that could hardly run since the clock started (an overloaded host) is
//! neither: the clock goes on, but no hang is declared until a sample shows every rank
//! ran. Without an agent one (`--local-only`), or where it fails, the rank cannot be
//! counted and the job is never declared hung by this rule (only `--timeout` ends it).

use mqd_job::stay::{CallWatch, RemoteCounters, cpu_ticks};
use mqd_model::hold::Busy;
use mqd_model::{JobDump, Location, RankDump, RankSet};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Which ranks stayed in the MPI calls a watch counts, as its counters read now, and
/// which of them worked meanwhile.
pub trait Stays {
    /// The ranks none of whose watched calls returned, shown in those calls by `dump`,
    /// and the first of them that worked while it stayed (moved data, wrote a file), or
    /// else the first that could hardly run.
    fn stayed(&self, dump: &JobDump) -> (RankSet, Option<(u32, Busy)>);
}

impl Stays for CallWatch<'_> {
    fn stayed(&self, dump: &JobDump) -> (RankSet, Option<(u32, Busy)>) {
        let (stayed, measures) = self.stayed_and_read(dump);
        let busy: Vec<(u32, Busy)> = measures
            .0
            .iter()
            .filter_map(|(&rank, a)| Some((rank, mqd_analysis::hold::busy_of(a.as_ref()?)?)))
            .collect();
        (stayed, first_busy(busy))
    }
}

/// CPU time (clock ticks) of each thread, by (rank, tid), when the sample was taken.
pub type CpuTimes = HashMap<(i32, i32), u64>;

/// What a sample says of the job's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Something moved, or cannot be watched (why).
    Moving(String),
    /// Nothing moved for this long.
    Still(Duration),
    /// Nothing moved for this long, at least `--hang-after`.
    Hung(Duration),
    /// Nothing moved for this long, at least `--hang-after`, but a rank could hardly run
    /// (why): no hang is declared until a sample shows it ran.
    Deferred(Duration, String),
}

/// The job as it was when it last stood still, and the counters armed then.
struct Base<W> {
    since: Instant,
    dump: JobDump,
    cpu: CpuTimes,
    watch: W,
}

/// Follows the samples of one job.
pub struct Detector<W> {
    hang_after: Duration,
    /// Ranks on other hosts can be watched (through their hosts' agents).
    across_hosts: bool,
    base: Option<Base<W>>,
}

impl<W: Stays> Detector<W> {
    /// A detector that declares a hang after `hang_after` without progress; ranks on
    /// other hosts are watched only `across_hosts`.
    pub fn new(hang_after: Duration, across_hosts: bool) -> Detector<W> {
        Detector {
            hang_after,
            across_hosts,
            base: None,
        }
    }

    /// Takes the sample `dump` (with its threads' `cpu` times) taken at `at`; `arm`
    /// starts counting the returns of the MPI calls a dump shows (for ranks that may
    /// be stuck).
    pub fn observe(
        &mut self,
        at: Instant,
        dump: JobDump,
        cpu: CpuTimes,
        arm: impl FnOnce(&JobDump, &RankSet) -> W,
    ) -> Observation {
        let in_mpi = match coverage(&dump, self.across_hosts) {
            Ok(ranks) => ranks,
            Err(why) => {
                self.base = None;
                return Observation::Moving(why);
            }
        };
        if let Some(base) = &self.base {
            match unchanged(base, &dump, &cpu, at) {
                Ok(starved) => {
                    let still = at.saturating_duration_since(base.since);
                    return stillness(still, self.hang_after, starved);
                }
                Err(why) => {
                    self.base = Some(Base {
                        since: at,
                        watch: arm(&dump, &in_mpi),
                        dump,
                        cpu,
                    });
                    return Observation::Moving(why);
                }
            }
        }
        self.base = Some(Base {
            since: at,
            watch: arm(&dump, &in_mpi),
            dump,
            cpu,
        });
        Observation::Still(Duration::ZERO)
    }
}

/// A job still for `still`, against `--hang-after`; `starved` says why a rank could
/// hardly run since it was still.
pub(super) fn stillness(
    still: Duration,
    hang_after: Duration,
    starved: Option<String>,
) -> Observation {
    // A rank that could hardly run neither moved nor proves the job still: the clock
    // goes on, and a later sample (a longer window, in which it ran) may declare the
    // hang.
    match starved {
        _ if still < hang_after => Observation::Still(still),
        Some(why) => Observation::Deferred(still, why),
        None => Observation::Hung(still),
    }
}

/// What the first rank that did something in its call did: progress (`Err`), or why a
/// rank could hardly run (`Ok(Some)`), or nothing.
pub(super) fn judged(busy: Option<(u32, Busy)>) -> Result<Option<String>, String> {
    match busy {
        // Words that do not change from sample to sample: they are said once.
        Some((rank, Busy::Starved(s))) => Ok(Some(format!(
            "rank {rank} could hardly run (thread {} waited for a CPU most of the time: the host is overloaded)",
            s.tid
        ))),
        // A rank that moves data or writes a file while it stays in its call progresses.
        Some((rank, busy)) => Err(format!(
            "rank {rank} {}",
            crate::render::hold::busy_words(&busy)
        )),
        None => Ok(None),
    }
}

/// The first of `busy` (rank, what it did) that worked, else the first that could
/// hardly run (which proves nothing).
pub(super) fn first_busy(busy: Vec<(u32, Busy)>) -> Option<(u32, Busy)> {
    busy.iter()
        .find(|(_, b)| !matches!(b, Busy::Starved(_)))
        .or(busy.first())
        .cloned()
}

/// CPU time a sleeping thread may still use in `elapsed` (timers, signals): 2% of it,
/// in clock ticks of 10 ms.
pub(super) fn idle_allowance(elapsed: Duration) -> u64 {
    1 + 2 * elapsed.as_secs()
}

/// The ranks with a thread in an MPI call, if every rank of the job is there to be
/// watched: all of its size, each with its threads unwound, and on this host unless
/// `across_hosts`.
fn coverage(dump: &JobDump, across_hosts: bool) -> Result<RankSet, String> {
    let size = dump
        .job_size
        .ok_or("the job's size is not known, so a rank may be missing")?;
    let mut seen = RankSet::new();
    let mut in_mpi = RankSet::new();
    let here = mqd_job::identity::this_host();
    for r in &dump.ranks {
        let Ok(rank) = u32::try_from(r.rank) else {
            return Err(format!("a process of unknown rank (pid {:?})", r.pid));
        };
        if !across_hosts && r.host.is_some() && r.host != here {
            return Err(format!(
                "rank {rank} is on another host, where its calls cannot be counted"
            ));
        }
        if r.threads.is_empty() {
            return Err(format!("rank {rank}'s threads were not unwound"));
        }
        if r.threads.iter().any(|t| in_call(r, t)) {
            in_mpi.insert(rank);
        }
        seen.insert(rank);
    }
    let all: RankSet = (0..size).collect();
    let missing = all.difference(&seen);
    if !missing.is_empty() {
        return Err(format!("ranks {missing} of {size} are not seen"));
    }
    Ok(in_mpi)
}

fn in_call(r: &RankDump, t: &mqd_model::ThreadStack) -> bool {
    matches!(
        t.location_in(r.executable.as_deref()),
        Location::InMpi { .. }
    )
}

/// Whether `dump` (taken at `at`) shows the job as `base` did: the watched calls never
/// returned, every other thread idle in the same place, the queues the same; with why,
/// when it does but a rank could hardly run since the base (an overloaded host).
fn unchanged<W: Stays>(
    base: &Base<W>,
    dump: &JobDump,
    cpu: &CpuTimes,
    at: Instant,
) -> Result<Option<String>, String> {
    let (stayed, busy) = base.watch.stayed(dump);
    let starved = judged(busy)?;
    let before: BTreeMap<i32, &RankDump> = base.dump.ranks.iter().map(|r| (r.rank, r)).collect();
    let allowed = idle_allowance(at.saturating_duration_since(base.since));
    for r in &dump.ranks {
        let Some(old) = before.get(&r.rank) else {
            return Err(format!("rank {} appeared", r.rank));
        };
        if old.pid != r.pid {
            return Err(format!("rank {} is another process", r.rank));
        }
        let old_threads: BTreeMap<i32, &mqd_model::ThreadStack> =
            old.threads.iter().map(|t| (t.tid, t)).collect();
        if old_threads.len() != r.threads.len() {
            return Err(format!("rank {}'s threads came or went", r.rank));
        }
        for t in &r.threads {
            let Some(was) = old_threads.get(&t.tid) else {
                return Err(format!("rank {}'s threads came or went", r.rank));
            };
            match t.location_in(r.executable.as_deref()) {
                Location::MpiThread => {}
                Location::InMpi { call, .. } => {
                    if !stayed.contains(r.rank as u32) {
                        return Err(format!("rank {} returned from or left {call}", r.rank));
                    }
                }
                _ => {
                    let place = |s: &mqd_model::ThreadStack| -> Vec<u64> {
                        s.frames.iter().map(|f| f.address).collect()
                    };
                    if place(t) != place(was) {
                        return Err(format!("rank {} runs outside MPI", r.rank));
                    }
                    let key = (r.rank, t.tid);
                    let spent = match (base.cpu.get(&key), cpu.get(&key)) {
                        (Some(a), Some(b)) => b.saturating_sub(*a),
                        _ => u64::MAX,
                    };
                    if spent > allowed {
                        return Err(format!(
                            "rank {} computes outside MPI (thread {})",
                            r.rank, t.tid
                        ));
                    }
                }
            }
        }
        if queues(old) != queues(r) {
            return Err(format!("rank {}'s message queues changed", r.rank));
        }
    }
    Ok(starved)
}

/// A rank's message queues, as one comparable text ("" without queues).
fn queues(r: &RankDump) -> String {
    match &r.outcome {
        Ok(comms) => serde_json::to_string(comms).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The CPU time of each thread of `dump` now: this host's from `/proc`, other hosts'
/// through `remote` (a thread without one is missing: never idle).
pub fn cpu_times(dump: &JobDump, remote: Option<&dyn RemoteCounters>) -> CpuTimes {
    let here = mqd_job::identity::this_host();
    let mut times = CpuTimes::new();
    // Each other host's threads: (rank, pid, tid).
    let mut elsewhere: BTreeMap<&str, Vec<(i32, i32, i32)>> = BTreeMap::new();
    for r in &dump.ranks {
        let Some(pid) = r.pid else { continue };
        for t in &r.threads {
            match r.host.as_deref().filter(|h| Some(*h) != here.as_deref()) {
                Some(host) => elsewhere
                    .entry(host)
                    .or_default()
                    .push((r.rank, pid, t.tid)),
                None => {
                    if let Some(ticks) = cpu_ticks(pid, t.tid) {
                        times.insert((r.rank, t.tid), ticks);
                    }
                }
            }
        }
    }
    let Some(remote) = remote else { return times };
    for (host, threads) in elsewhere {
        let asked: Vec<(i32, i32)> = threads.iter().map(|&(_, pid, tid)| (pid, tid)).collect();
        let Ok(ticks) = remote.cpu(host, &asked) else {
            continue;
        };
        for (&(rank, _, tid), ticks) in threads.iter().zip(ticks) {
            if let Some(ticks) = ticks {
                times.insert((rank, tid), ticks);
            }
        }
    }
    times
}

#[cfg(test)]
mod tests;
