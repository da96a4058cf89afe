//! Stillness read from the ranks' records while they run, no rank stopped: the rules
//! of [`super::stillness`] with the hang recorder's slots in place of stacks and
//! breakpoint counters. A thread stays in its MPI call while its slot (the call, and its
//! count of calls entered) is unchanged; a thread outside any call, or that made none,
//! is idle while it uses no CPU time; a rank with a thread in a call is measured as a
//! held rank is (data moved, files written, or starved by an overloaded host).

use super::stillness::{Observation, first_busy, idle_allowance, judged, stillness};
use mqd_job::activity::Baseline;
use mqd_job::record_watch::{JobSample, RankSample, RecordWatch, Slot};
use mqd_job::stay::RemoteCounters;
use mqd_model::hold::Busy;
use std::time::{Duration, Instant};

/// What the processes of some ranks did since they were first measured.
pub trait Measured {
    /// The first rank that did something while in its call (moved data, wrote a file),
    /// else the first that could hardly run.
    fn busy(&self) -> Option<(u32, Busy)>;
}

/// The ranks' processes, measured from `/proc` here and by each other host's agent.
pub struct Processes<'a> {
    here: Vec<(u32, Baseline)>,
    /// Each other host's measures: (host, the agent's generation of them, or why there
    /// is none, and their ranks in arming order).
    there: Vec<(String, Result<u64, String>, Vec<u32>)>,
    remote: Option<&'a dyn RemoteCounters>,
}

impl<'a> Processes<'a> {
    /// Starts measuring the processes of `ranks`: (rank, pid), on the hosts `watch`
    /// says, another host's by its agent (`remote`).
    pub fn start(
        ranks: Vec<(u32, i32)>,
        watch: &RecordWatch,
        remote: Option<&'a dyn RemoteCounters>,
    ) -> Processes<'a> {
        let hosts: std::collections::BTreeMap<u32, Option<String>> = watch
            .ranks()
            .into_iter()
            .map(|(rank, _, host)| (rank, host.map(str::to_owned)))
            .collect();
        let mut here = Vec::new();
        let mut by_host: std::collections::BTreeMap<String, Vec<(u32, i32)>> = Default::default();
        for (rank, pid) in ranks {
            match hosts.get(&rank).cloned().flatten() {
                None => here.push((rank, Baseline::start(pid))),
                Some(host) => by_host.entry(host).or_default().push((rank, pid)),
            }
        }
        let there = by_host
            .into_iter()
            .map(|(host, ranks)| {
                let pids: Vec<i32> = ranks.iter().map(|&(_, pid)| pid).collect();
                let armed = match remote {
                    Some(r) => r.arm(&host, &[], &pids).map(|(generation, _)| generation),
                    None => Err(format!("no agent measures {host}")),
                };
                (
                    host,
                    armed,
                    ranks.into_iter().map(|(rank, _)| rank).collect(),
                )
            })
            .collect();
        Processes {
            here,
            there,
            remote,
        }
    }
}

impl Measured for Processes<'_> {
    fn busy(&self) -> Option<(u32, Busy)> {
        let mut busy: Vec<(u32, Busy)> = self
            .here
            .iter()
            .filter_map(|(rank, b)| Some((*rank, mqd_analysis::hold::busy_of(&b.read())?)))
            .collect();
        for (host, armed, ranks) in &self.there {
            let readings = match (armed, self.remote) {
                (Ok(generation), Some(r)) => r.counts(host, *generation).ok(),
                _ => None,
            };
            for (i, &rank) in ranks.iter().enumerate() {
                // Not measured there: it may have done anything.
                let activity = readings.as_ref().and_then(|r| r.activity.get(i)?.as_ref());
                match activity {
                    Some(a) => busy.extend(mqd_analysis::hold::busy_of(a).map(|b| (rank, b))),
                    None => busy.push((rank, Busy::Unmeasured)),
                }
            }
        }
        first_busy(busy)
    }
}

/// The job as it was when it last stood still, and its measures since.
struct Base<M> {
    since: Instant,
    sample: JobSample,
    measured: M,
}

/// Follows the samples of one job's records.
pub struct RecordDetector<M> {
    hang_after: Duration,
    base: Option<Base<M>>,
}

impl<M: Measured> RecordDetector<M> {
    /// A detector that declares a hang after `hang_after` without progress.
    pub fn new(hang_after: Duration) -> RecordDetector<M> {
        RecordDetector {
            hang_after,
            base: None,
        }
    }

    /// Takes `sample`, read at `at`; `measure` starts measuring the processes of the
    /// ranks with a thread in an MPI call: (rank, pid).
    pub fn observe(
        &mut self,
        at: Instant,
        sample: JobSample,
        measure: impl FnOnce(Vec<(u32, i32)>) -> M,
    ) -> Observation {
        if let Some(base) = &self.base {
            match unchanged(base, &sample, at) {
                Ok(starved) => {
                    let still = at.saturating_duration_since(base.since);
                    return stillness(still, self.hang_after, starved);
                }
                Err(why) => {
                    self.rebase(at, sample, measure);
                    return Observation::Moving(why);
                }
            }
        }
        self.rebase(at, sample, measure);
        Observation::Still(Duration::ZERO)
    }

    fn rebase(
        &mut self,
        at: Instant,
        sample: JobSample,
        measure: impl FnOnce(Vec<(u32, i32)>) -> M,
    ) {
        let in_calls = sample
            .iter()
            .filter(|(_, r)| r.threads.values().any(|t| in_call(t.record.as_ref())))
            .map(|(&rank, r)| (rank, r.pid))
            .collect();
        self.base = Some(Base {
            since: at,
            measured: measure(in_calls),
            sample,
        });
    }
}

/// A slot read whole, in a call.
fn in_call(record: Option<&Slot>) -> bool {
    record.and_then(Slot::call).is_some()
}

/// Whether `now` (read at `at`) shows the job as `base` did; with why a rank could
/// hardly run, when it does.
fn unchanged<M: Measured>(
    base: &Base<M>,
    now: &JobSample,
    at: Instant,
) -> Result<Option<String>, String> {
    let allowed = idle_allowance(at.saturating_duration_since(base.since));
    for (rank, r) in now {
        let Some(was) = base.sample.get(rank) else {
            return Err(format!("rank {rank} appeared"));
        };
        rank_unchanged(*rank, was, r, allowed)?;
    }
    if now.len() != base.sample.len() {
        return Err("a rank went".into());
    }
    judged(base.measured.busy())
}

fn rank_unchanged(
    rank: u32,
    was: &RankSample,
    now: &RankSample,
    allowed: u64,
) -> Result<(), String> {
    if was.pid != now.pid {
        return Err(format!("rank {rank} is another process"));
    }
    if now.changing {
        return Err(format!("rank {rank} entered or left an MPI call"));
    }
    if !was.threads.keys().eq(now.threads.keys()) {
        return Err(format!("rank {rank}'s threads came or went"));
    }
    for ((tid, old), new) in was.threads.iter().zip(now.threads.values()) {
        match (&old.record, &new.record) {
            (_, Some(Slot::Torn)) => {
                return Err(format!(
                    "rank {rank}'s thread {tid} is entering or leaving an MPI call"
                ));
            }
            (a, b) if a != b => return Err(moved_words(rank, a.as_ref(), b.as_ref())),
            (_, b) if in_call(b.as_ref()) => {}
            _ => {
                let spent = match (old.cpu, new.cpu) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => u64::MAX,
                };
                if spent > allowed {
                    return Err(format!("rank {rank} computes outside MPI (thread {tid})"));
                }
            }
        }
    }
    Ok(())
}

/// How a thread's slot changed, in words.
fn moved_words(rank: u32, was: Option<&Slot>, now: Option<&Slot>) -> String {
    let call = |r: Option<&Slot>| r.and_then(Slot::call).map(str::to_owned);
    match (call(was), call(now)) {
        (Some(a), None) => format!("rank {rank} returned from {a}"),
        (None, Some(b)) => format!("rank {rank} entered {b}"),
        (Some(a), Some(b)) if a != b => format!("rank {rank} left {a} for {b}"),
        _ => format!("rank {rank} made MPI calls"),
    }
}

#[cfg(test)]
mod tests;
