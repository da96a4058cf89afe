//! Why a job could not be acquired.

use mqd_debuginfo::DebugInfoError;
use mqd_process::live::{AttachError, LiveError};
use mqd_target::TargetError;
use std::fmt;
use std::time::Duration;

/// Why a job could not be acquired. Each variant displays as a one-line cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireError {
    /// Attaching to a process failed.
    Attach(AttachError),
    /// Controlling a process failed.
    Live(LiveError),
    /// The objects of a process could not be read.
    DebugInfo {
        /// The process.
        pid: i32,
        /// Why.
        error: DebugInfoError,
    },
    /// Nothing to launch.
    EmptyCommand,
    /// The process has neither MPIR nor MPI2DD symbols.
    NotMpi {
        /// The process.
        pid: i32,
        /// Its executable.
        executable: String,
    },
    /// An acquisition structure makes no sense (bad magic, size out of range, ...).
    BadData {
        /// The process.
        pid: i32,
        /// What is wrong.
        what: String,
    },
    /// Target memory could not be read or written.
    Memory {
        /// The process.
        pid: i32,
        /// What was being read.
        what: String,
        /// The error.
        error: TargetError,
    },
    /// The starter exited before the job was spawned.
    Exited {
        /// The starter.
        pid: i32,
        /// How it ended.
        how: String,
    },
    /// The job did not spawn in time.
    Timeout {
        /// The starter.
        pid: i32,
        /// How long was waited.
        waited: Duration,
    },
    /// A running starter has not spawned its job yet (empty process table).
    NotSpawned {
        /// The starter.
        pid: i32,
    },
    /// A rank could not be released.
    Release {
        /// The rank.
        rank: i32,
        /// Its pid.
        pid: i32,
        /// Why.
        cause: String,
    },
    /// Breakpoints are not implemented for this architecture.
    Unsupported(&'static str),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Attach(e) => write!(f, "{e}"),
            AcquireError::Live(e) => write!(f, "{e}"),
            AcquireError::DebugInfo { pid, error } => {
                write!(f, "cannot read the symbols of pid {pid}: {error}")
            }
            AcquireError::EmptyCommand => write!(f, "no command to launch"),
            AcquireError::NotMpi { pid, executable } => write!(
                f,
                "pid {pid} ({executable}) is not an MPI starter: it has neither MPIR_Breakpoint/MPIR_proctable nor MPI2DD_info, and none of its descendants has a launcher rank (PMI_RANK...) in its environment"
            ),
            AcquireError::BadData { pid, what } => write!(f, "pid {pid}: {what}"),
            AcquireError::Memory { pid, what, error } => {
                write!(f, "pid {pid}: cannot access {what}: {error}")
            }
            AcquireError::Exited { pid, how } => {
                write!(f, "the starter (pid {pid}) {how} before spawning the job")
            }
            AcquireError::Timeout { pid, waited } => write!(
                f,
                "the starter (pid {pid}) did not spawn the job within {:.1}s",
                waited.as_secs_f64()
            ),
            AcquireError::NotSpawned { pid } => write!(
                f,
                "pid {pid} has not spawned its job yet (its process table is empty)"
            ),
            AcquireError::Release { rank, pid, cause } => {
                write!(f, "cannot release rank {rank} (pid {pid}): {cause}")
            }
            AcquireError::Unsupported(what) => write!(f, "not supported: {what}"),
        }
    }
}

impl std::error::Error for AcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AcquireError::Attach(e) => Some(e),
            AcquireError::Live(e) => Some(e),
            AcquireError::DebugInfo { error, .. } => Some(error),
            AcquireError::Memory { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<AttachError> for AcquireError {
    fn from(e: AttachError) -> Self {
        AcquireError::Attach(e)
    }
}

impl From<LiveError> for AcquireError {
    fn from(e: LiveError) -> Self {
        AcquireError::Live(e)
    }
}
