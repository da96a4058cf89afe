//! Jobs the unit tests build: one rank a thread, without queues, as a stock MPI's.

use mqd_model::{JobDump, RankDump, ThreadStack};

/// A stock MPI's job (no queues) of `threads.len()` ranks, rank r with pid 100 + r.
pub fn of_threads(threads: Vec<ThreadStack>) -> JobDump {
    let n = threads.len();
    let mut j = JobDump::of_ranks(
        threads
            .into_iter()
            .enumerate()
            .map(|(r, t)| RankDump {
                threads: vec![t],
                ..RankDump::unread(r as i32, Some(100 + r as i32), None)
            })
            .collect(),
    );
    j.job_size = Some(n as u32);
    j
}
