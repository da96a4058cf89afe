//! # mqd: who waits for whom in a hung MPI job
//!
//! The command users run, as a library for its own tests: [`render`] (`mqd-render`) words
//! the model and the analysis as text, JSON and Graphviz DOT; [`exit_code`] says how each failure ends
//! the process; [`demo`] carries the bundled demo job; [`progress`] draws the attach
//! progress line; [`recording`] puts the hang recorder into the jobs mqd starts. Acquisition and dumping are `mqd-job`'s (over `mqd-process`,
//! `mqd-debuginfo` and `mqd-library-host`), the analysis is `mqd-analysis`'s.
#![deny(missing_docs)]

pub mod demo;
pub mod interrupt;
pub mod progress;
pub mod reach;
pub mod recording;
pub mod run;
pub mod starter;

pub use mqd_render as render;

use mqd_library_host::failure::FailureKind;
use mqd_model::Verdict;

/// The exit code of a failure: 3 no such process, 4 not permitted (ptrace), 5 not an MPI
/// process or no queues, 6 no debug information, 7 message queue library missing or
/// incompatible, 1 anything else (2 is bad usage; see [`verdict_exit_code`] for a dump).
pub fn exit_code(kind: FailureKind) -> u8 {
    match kind {
        FailureKind::NoProcess => 3,
        FailureKind::NotPermitted => 4,
        FailureKind::NotMpi => 5,
        FailureKind::NoDebugInfo => 6,
        FailureKind::Library => 7,
        FailureKind::Other => 1,
    }
}

/// The exit code of a dump: 0 no deadlock, 8 deadlock, 9 undetermined (a rank not seen,
/// a wait not followed, or a deadlock that only pending operations suggest).
pub fn verdict_exit_code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::NoDeadlock => 0,
        Verdict::Deadlock => 8,
        Verdict::Undetermined => 9,
    }
}

/// The verdict an exit code of `mqd` reports, if it reports one (the process dumped).
pub fn verdict_of_exit_code(code: Option<i32>) -> Option<Verdict> {
    [
        Verdict::NoDeadlock,
        Verdict::Deadlock,
        Verdict::Undetermined,
    ]
    .into_iter()
    .find(|&v| code == Some(i32::from(verdict_exit_code(v))))
}
