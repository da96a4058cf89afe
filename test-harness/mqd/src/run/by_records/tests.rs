use super::*;
use mqd_job::record_watch::ThreadSeen;
use mqd_model::hold::Starved;
use std::cell::Cell;
use std::collections::BTreeMap;

/// Processes that did what `busy` says.
struct Fake(Option<(u32, Busy)>);

impl Measured for Fake {
    fn busy(&self) -> Option<(u32, Busy)> {
        self.0.clone()
    }
}

fn quiet(_: Vec<(u32, i32)>) -> Fake {
    Fake(None)
}

/// Thread `tid` with `calls` calls made, in `name` (or outside MPI), `cpu` ticks used.
fn thread(tid: i32, calls: u64, name: Option<&str>, cpu: u64) -> (i32, ThreadSeen) {
    let record = Slot::Whole {
        calls,
        call: name.map(str::to_owned),
    };
    (
        tid,
        ThreadSeen {
            record: Some(record),
            cpu: Some(cpu),
        },
    )
}

fn rank(pid: i32, threads: Vec<(i32, ThreadSeen)>) -> RankSample {
    RankSample {
        pid,
        threads: threads.into_iter().collect(),
        changing: false,
    }
}

/// Two ranks in MPI_Recv (polling: their CPU time grows with `cpu`), a third idle
/// outside MPI with a helper thread that made no MPI call.
fn job(cpu: u64) -> JobSample {
    let mut helper = thread(31, 0, None, 5);
    helper.1.record = None;
    BTreeMap::from([
        (0, rank(100, vec![thread(10, 7, Some("MPI_Recv"), cpu)])),
        (1, rank(101, vec![thread(20, 9, Some("MPI_Recv"), cpu)])),
        (2, rank(102, vec![thread(30, 4, None, 3), helper])),
    ])
}

fn secs(start: Instant, s: u64) -> Instant {
    start + Duration::from_secs(s)
}

#[test]
fn slots_that_never_change_hang_after_the_window_however_much_a_call_polls() {
    let start = Instant::now();
    let mut d = RecordDetector::new(Duration::from_secs(10));
    let measured = Cell::new(Vec::new());
    let measure = |ranks: Vec<(u32, i32)>| {
        measured.set(ranks);
        Fake(None)
    };
    assert_eq!(
        d.observe(start, job(0), measure),
        Observation::Still(Duration::ZERO)
    );
    // Only the ranks in a call are measured (as a hold measures them).
    assert_eq!(measured.take(), [(0, 100), (1, 101)]);
    assert_eq!(
        d.observe(secs(start, 5), job(500), quiet),
        Observation::Still(Duration::from_secs(5))
    );
    assert_eq!(
        d.observe(secs(start, 10), job(1000), quiet),
        Observation::Hung(Duration::from_secs(10))
    );
}

#[test]
fn a_call_returned_or_entered_is_progress_and_starts_the_clock_again() {
    let start = Instant::now();
    let mut d = RecordDetector::new(Duration::from_secs(10));
    d.observe(start, job(0), quiet);
    // Rank 0 returned from its receive and entered another: its count moved.
    let mut again = job(0);
    again.insert(0, rank(100, vec![thread(10, 8, Some("MPI_Recv"), 0)]));
    assert_eq!(
        d.observe(secs(start, 6), again.clone(), quiet),
        Observation::Moving("rank 0 made MPI calls".into())
    );
    assert_eq!(
        d.observe(secs(start, 12), again.clone(), quiet),
        Observation::Still(Duration::from_secs(6))
    );
    // Rank 1 returned and computes; rank 2 entered a barrier.
    let mut returned = again.clone();
    returned.insert(1, rank(101, vec![thread(20, 9, None, 0)]));
    assert_eq!(
        d.observe(secs(start, 13), returned.clone(), quiet),
        Observation::Moving("rank 1 returned from MPI_Recv".into())
    );
    let mut entered = returned;
    entered.insert(
        2,
        rank(
            102,
            vec![
                thread(30, 5, Some("MPI_Barrier"), 3),
                (
                    31,
                    ThreadSeen {
                        record: None,
                        cpu: Some(5),
                    },
                ),
            ],
        ),
    );
    assert_eq!(
        d.observe(secs(start, 14), entered, quiet),
        Observation::Moving("rank 2 entered MPI_Barrier".into())
    );
}

#[test]
fn a_thread_outside_mpi_is_idle_only_while_it_uses_no_cpu() {
    let start = Instant::now();
    let mut d = RecordDetector::new(Duration::from_secs(10));
    d.observe(start, job(0), quiet);
    // A tick or two of timers is idle.
    let mut timers = job(0);
    timers
        .get_mut(&2)
        .unwrap()
        .threads
        .get_mut(&30)
        .unwrap()
        .cpu = Some(5);
    assert_eq!(
        d.observe(secs(start, 2), timers, quiet),
        Observation::Still(Duration::from_secs(2))
    );
    // The helper that never called MPI computes: it may yet send what the others wait for.
    let mut computing = job(0);
    computing
        .get_mut(&2)
        .unwrap()
        .threads
        .get_mut(&31)
        .unwrap()
        .cpu = Some(300);
    assert_eq!(
        d.observe(secs(start, 3), computing, quiet),
        Observation::Moving("rank 2 computes outside MPI (thread 31)".into())
    );
    // A CPU time that cannot be read is never idle.
    let mut unread = job(0);
    unread
        .get_mut(&2)
        .unwrap()
        .threads
        .get_mut(&30)
        .unwrap()
        .cpu = None;
    d.observe(secs(start, 4), job(0), quiet);
    assert_eq!(
        d.observe(secs(start, 5), unread, quiet),
        Observation::Moving("rank 2 computes outside MPI (thread 30)".into())
    );
}

/// A change made to a sample.
type Change = Box<dyn Fn(&mut JobSample)>;

#[test]
fn slots_being_written_threads_and_processes_that_change_are_progress() {
    let start = Instant::now();
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(|j| j.get_mut(&1).unwrap().changing = true),
            "rank 1 entered or left an MPI call",
        ),
        (
            Box::new(|j| {
                j.get_mut(&0).unwrap().threads.get_mut(&10).unwrap().record = Some(Slot::Torn)
            }),
            "rank 0's thread 10 is entering or leaving an MPI call",
        ),
        (
            Box::new(|j| {
                let t = thread(11, 0, None, 0);
                j.get_mut(&0).unwrap().threads.insert(t.0, t.1);
            }),
            "rank 0's threads came or went",
        ),
        (
            Box::new(|j| j.get_mut(&1).unwrap().pid = 999),
            "rank 1 is another process",
        ),
        (
            Box::new(|j| {
                j.remove(&2);
            }),
            "a rank went",
        ),
    ];
    for (change, words) in cases {
        let mut d = RecordDetector::new(Duration::from_secs(10));
        d.observe(start, job(0), quiet);
        let mut now = job(0);
        change(&mut now);
        assert_eq!(
            d.observe(secs(start, 1), now, quiet),
            Observation::Moving(words.into())
        );
    }
}

#[test]
fn a_rank_that_works_in_its_call_progresses_and_one_that_cannot_run_defers_the_hang() {
    let start = Instant::now();
    let mut d = RecordDetector::new(Duration::from_secs(10));
    d.observe(start, job(0), |_| {
        Fake(Some((1, Busy::Io { bytes: 1 << 20 })))
    });
    assert!(matches!(
        d.observe(secs(start, 11), job(0), quiet),
        Observation::Moving(why) if why.starts_with("rank 1 ")
    ));
    let starved = Busy::Starved(Starved {
        tid: 20,
        ran_ms: 0,
        waited_ms: 10_000,
    });
    let mut d = RecordDetector::new(Duration::from_secs(10));
    d.observe(start, job(0), |_| Fake(Some((1, starved))));
    assert_eq!(
        d.observe(secs(start, 4), job(0), quiet),
        Observation::Still(Duration::from_secs(4))
    );
    assert!(matches!(
        d.observe(secs(start, 11), job(0), quiet),
        Observation::Deferred(_, why) if why.starts_with("rank 1 could hardly run (thread 20")
    ));
}
