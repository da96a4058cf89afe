use super::*;
use mqd_model::{RankDump, ThreadStack};
use std::cell::Cell;

/// Counters that say every rank in `stayed` stayed.
struct Fake(RankSet);

impl Stays for Fake {
    fn stayed(&self, _: &JobDump) -> (RankSet, Option<(u32, Busy)>) {
        (self.0.clone(), None)
    }
}

fn blocked(tid: i32) -> ThreadStack {
    ThreadStack::named(tid, &["poll", "MPI_Recv", "main"], None)
}

fn computing(tid: i32, at: u64) -> ThreadStack {
    let mut t = ThreadStack::named(tid, &["solve", "main"], None);
    t.frames[0].address = at;
    t
}

/// A job of `threads.len()` ranks on this host, rank r with threads `threads[r]`.
fn job(threads: Vec<Vec<ThreadStack>>) -> JobDump {
    let n = threads.len() as u32;
    let mut j = JobDump::of_ranks(
        threads
            .into_iter()
            .enumerate()
            .map(|(r, t)| RankDump {
                threads: t,
                ..RankDump::unread(r as i32, Some(100 + r as i32), None)
            })
            .collect(),
    );
    j.job_size = Some(n);
    j
}

fn all_blocked() -> JobDump {
    job(vec![vec![blocked(1)], vec![blocked(2)]])
}

fn secs(start: Instant, s: u64) -> Instant {
    start + Duration::from_secs(s)
}

#[test]
fn blocked_ranks_whose_calls_never_return_hang_after_the_window() {
    let start = Instant::now();
    let mut d = Detector::new(Duration::from_secs(10), false);
    let armed = Cell::new(0);
    let arm = |_: &JobDump, ranks: &RankSet| {
        armed.set(armed.get() + 1);
        Fake(ranks.clone())
    };
    assert_eq!(
        d.observe(start, all_blocked(), CpuTimes::new(), arm),
        Observation::Still(Duration::ZERO)
    );
    let arm = |_: &JobDump, ranks: &RankSet| Fake(ranks.clone());
    assert_eq!(
        d.observe(secs(start, 5), all_blocked(), CpuTimes::new(), arm),
        Observation::Still(Duration::from_secs(5))
    );
    let arm = |_: &JobDump, ranks: &RankSet| Fake(ranks.clone());
    assert_eq!(
        d.observe(secs(start, 11), all_blocked(), CpuTimes::new(), arm),
        Observation::Hung(Duration::from_secs(11))
    );
    assert_eq!(armed.get(), 1);
}

#[test]
fn a_call_that_returned_starts_the_clock_again() {
    let start = Instant::now();
    let mut d = Detector::new(Duration::from_secs(10), false);
    // Rank 1's counter says its call returned (a loop of the same call).
    d.observe(start, all_blocked(), CpuTimes::new(), |_, _| {
        Fake([0].into_iter().collect())
    });
    let seen = d.observe(secs(start, 20), all_blocked(), CpuTimes::new(), |_, r| {
        Fake(r.clone())
    });
    assert_eq!(
        seen,
        Observation::Moving("rank 1 returned from or left MPI_Recv".into())
    );
    // Re-armed at 20 s: still from there.
    let seen = d.observe(secs(start, 25), all_blocked(), CpuTimes::new(), |_, r| {
        Fake(r.clone())
    });
    assert_eq!(seen, Observation::Still(Duration::from_secs(5)));
}

#[test]
fn a_rank_computing_outside_mpi_is_progress() {
    let start = Instant::now();
    let mut d = Detector::new(Duration::from_secs(10), false);
    let at = |pc: u64| job(vec![vec![blocked(1)], vec![computing(2, pc)]]);
    let cpu = |ticks: u64| -> CpuTimes { [((1, 2), ticks)].into_iter().collect() };
    d.observe(start, at(0x10), cpu(0), |_, r| Fake(r.clone()));
    // Same place, but it spent CPU time: a loop at one address.
    let seen = d.observe(secs(start, 30), at(0x10), cpu(2500), |_, r| Fake(r.clone()));
    assert_eq!(
        seen,
        Observation::Moving("rank 1 computes outside MPI (thread 2)".into())
    );
    // Elsewhere.
    let seen = d.observe(secs(start, 40), at(0x20), cpu(2500), |_, r| Fake(r.clone()));
    assert_eq!(seen, Observation::Moving("rank 1 runs outside MPI".into()));
    // Idle where it was, no CPU time: the whole job idle is a hang.
    let seen = d.observe(secs(start, 60), at(0x20), cpu(2501), |_, r| Fake(r.clone()));
    assert_eq!(seen, Observation::Hung(Duration::from_secs(20)));
}

#[test]
fn a_job_not_seen_whole_is_never_still() {
    let start = Instant::now();
    let mut d: Detector<Fake> = Detector::new(Duration::from_secs(1), false);
    let mut j = all_blocked();
    j.job_size = Some(3);
    let seen = d.observe(start, j, CpuTimes::new(), |_, r| Fake(r.clone()));
    assert_eq!(
        seen,
        Observation::Moving("ranks 2 of 3 are not seen".into())
    );
    let mut j = all_blocked();
    j.ranks[1].host = Some("elsewhere.example".into());
    let seen = d.observe(secs(start, 5), j, CpuTimes::new(), |_, r| Fake(r.clone()));
    assert!(matches!(seen, Observation::Moving(why) if why.contains("another host")));
    let mut j = all_blocked();
    j.job_size = None;
    let seen = d.observe(secs(start, 9), j, CpuTimes::new(), |_, r| Fake(r.clone()));
    assert!(matches!(seen, Observation::Moving(why) if why.contains("size")));
}

#[test]
fn changed_queues_are_progress() {
    let start = Instant::now();
    let mut d = Detector::new(Duration::from_secs(10), false);
    d.observe(start, all_blocked(), CpuTimes::new(), |_, r| {
        Fake(r.clone())
    });
    let mut j = all_blocked();
    j.ranks[0].outcome = Ok(Vec::new());
    let seen = d.observe(secs(start, 20), j, CpuTimes::new(), |_, r| Fake(r.clone()));
    assert_eq!(
        seen,
        Observation::Moving("rank 0's message queues changed".into())
    );
}

#[test]
fn ranks_on_other_hosts_are_watched_only_across_hosts() {
    let start = Instant::now();
    let remote = || {
        let mut j = all_blocked();
        j.ranks[1].host = Some("elsewhere.example".into());
        j
    };
    let mut d = Detector::new(Duration::from_secs(10), true);
    d.observe(start, remote(), CpuTimes::new(), |_, r| Fake(r.clone()));
    let seen = d.observe(secs(start, 10), remote(), CpuTimes::new(), |_, r| {
        Fake(r.clone())
    });
    assert_eq!(seen, Observation::Hung(Duration::from_secs(10)));
    // Where the other host's counters say its rank left its call, that is progress.
    let mut d = Detector::new(Duration::from_secs(10), true);
    let only_0: RankSet = [0].into_iter().collect();
    d.observe(start, remote(), CpuTimes::new(), |_, _| {
        Fake(only_0.clone())
    });
    let seen = d.observe(secs(start, 10), remote(), CpuTimes::new(), |_, _| {
        Fake(only_0.clone())
    });
    assert!(matches!(seen, Observation::Moving(why) if why.contains("rank 1 returned")));
}

/// Another host's agent, as a table: its threads' CPU times by (pid, tid).
struct Agents(HashMap<(i32, i32), u64>);

impl RemoteCounters for Agents {
    fn arm(
        &self,
        _: &str,
        _: &[(i32, u64)],
        _: &[i32],
    ) -> Result<(u64, Vec<Option<String>>), String> {
        Err("not here".into())
    }
    fn counts(&self, _: &str, _: u64) -> Result<mqd_job::stay::Readings, String> {
        Err("not here".into())
    }
    fn cpu(&self, host: &str, threads: &[(i32, i32)]) -> Result<Vec<Option<u64>>, String> {
        assert_eq!(host, "elsewhere.example");
        Ok(threads.iter().map(|t| self.0.get(t).copied()).collect())
    }
}

#[test]
fn cpu_times_of_other_hosts_come_from_their_agents_keyed_by_rank() {
    // Rank 1 elsewhere has this test's pid too: pids of two hosts may be equal.
    let me = std::process::id() as i32;
    let mut j = job(vec![vec![blocked(me)], vec![blocked(5)]]);
    j.ranks[0].pid = Some(me);
    j.ranks[1].pid = Some(me);
    j.ranks[1].host = Some("elsewhere.example".into());
    let agents = Agents([((me, 5), 77)].into_iter().collect());
    let times = cpu_times(&j, Some(&agents));
    assert_eq!(times.get(&(1, 5)), Some(&77));
    assert!(times.contains_key(&(0, me)), "{times:?}");
    // Without agents, the other host's thread has no time: it is never idle.
    let times = cpu_times(&j, None);
    assert!(!times.contains_key(&(1, 5)));
}

/// Counters that say every rank stayed, and rank 0 could hardly run while `starved`.
struct Starving<'a>(RankSet, &'a Cell<bool>);

impl Stays for Starving<'_> {
    fn stayed(&self, _: &JobDump) -> (RankSet, Option<(u32, Busy)>) {
        let starved = mqd_model::hold::Starved {
            tid: 1,
            ran_ms: 1,
            waited_ms: 900,
        };
        (
            self.0.clone(),
            self.1.get().then_some((0, Busy::Starved(starved))),
        )
    }
}

#[test]
fn a_rank_that_could_hardly_run_keeps_the_clock_going_but_declares_nothing() {
    let start = Instant::now();
    let mut d = Detector::new(Duration::from_secs(10), false);
    let starved = Cell::new(true);
    let armed = Cell::new(0);
    let arm = |_: &JobDump, ranks: &RankSet| {
        armed.set(armed.get() + 1);
        Starving(ranks.clone(), &starved)
    };
    d.observe(start, all_blocked(), CpuTimes::new(), arm);
    let again = |_: &JobDump, ranks: &RankSet| Starving(ranks.clone(), &starved);
    // Within --hang-after: still.
    assert_eq!(
        d.observe(secs(start, 5), all_blocked(), CpuTimes::new(), again),
        Observation::Still(Duration::from_secs(5))
    );
    // Past --hang-after, but rank 0 could hardly run: deferred, not hung, not re-armed.
    let seen = d.observe(secs(start, 11), all_blocked(), CpuTimes::new(), again);
    let Observation::Deferred(still, why) = seen else {
        panic!("{seen:?}")
    };
    assert_eq!(still, Duration::from_secs(11));
    assert!(
        why.starts_with("rank 0 could hardly run (thread 1 waited"),
        "{why}"
    );
    // Once it ran (the window since the start shows it), the hang is declared.
    starved.set(false);
    assert_eq!(
        d.observe(secs(start, 12), all_blocked(), CpuTimes::new(), again),
        Observation::Hung(Duration::from_secs(12))
    );
    assert_eq!(armed.get(), 1);
}
