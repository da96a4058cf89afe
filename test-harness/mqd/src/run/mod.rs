//! `mqd run`: the job's watchdog. The job runs as it would without mqd (its output
//! untouched, its exit status returned); mqd samples it and, when no rank has made
//! progress for `--hang-after` ([`stillness`]) or `--timeout` passes, dumps it once
//! more, says who waits for whom, writes the [`report`] and ends it.

pub mod by_records;
pub mod duration;
pub mod report;
pub mod stillness;
pub mod watchdog;

use std::time::Duration;

/// The time between samples for a `hang_after`: a tenth of it, from 1 s to 30 s, so
/// that a hang is reported within `hang_after` and one interval.
pub fn default_interval(hang_after: Duration) -> Duration {
    (hang_after / 10).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// The exit code of a stopped job: the verdict's, but never 0 (success) for a job that
/// was stopped: a timed-out job with no deadlock exits 124, as `timeout(1)`'s do.
pub fn stopped_exit_code(verdict: mqd_model::Verdict) -> u8 {
    match crate::verdict_exit_code(verdict) {
        0 => TIMED_OUT,
        code => code,
    }
}

/// The exit code of a job stopped without a deadlock or an undetermined verdict.
pub const TIMED_OUT: u8 = 124;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_follow_the_window() {
        assert_eq!(
            default_interval(Duration::from_secs(300)),
            Duration::from_secs(30)
        );
        assert_eq!(
            default_interval(Duration::from_secs(5)),
            Duration::from_secs(1)
        );
        assert_eq!(
            default_interval(Duration::from_secs(60)),
            Duration::from_secs(6)
        );
    }

    #[test]
    fn a_stopped_job_never_succeeds() {
        use mqd_model::Verdict;
        assert_eq!(stopped_exit_code(Verdict::NoDeadlock), TIMED_OUT);
        assert_eq!(stopped_exit_code(Verdict::Deadlock), 8);
        assert_eq!(stopped_exit_code(Verdict::Undetermined), 9);
    }
}
