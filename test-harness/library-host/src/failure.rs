//! Why one process could not be displayed: a kind a program can act on, the process it
//! concerns, and a cause that says what to do. The process is kept apart from the cause,
//! so that many processes failing alike are one failure.

use mqd_process::live::AttachError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of failure ended a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// No such process, or it exited.
    NoProcess,
    /// The kernel refused to let us trace it (or another tracer has it).
    NotPermitted,
    /// The process is not an MPI process, or its MPI has no queue support.
    NotMpi,
    /// The MQD library is missing or incompatible.
    Library,
    /// Debug information is missing.
    NoDebugInfo,
    /// Anything else (job acquisition, ptrace, unreadable files).
    Other,
}

impl From<&AttachError> for FailureKind {
    fn from(e: &AttachError) -> FailureKind {
        match e {
            AttachError::NoSuchProcess { .. } | AttachError::Exited { .. } => {
                FailureKind::NoProcess
            }
            AttachError::PermissionDenied { .. } | AttachError::AlreadyTraced { .. } => {
                FailureKind::NotPermitted
            }
            _ => FailureKind::Other,
        }
    }
}

/// A failure with a one-line cause, displayed as `TARGET: CAUSE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Its kind.
    pub kind: FailureKind,
    /// The process or file it concerns, as users know it (`pid 12 (/path/prog)`), when
    /// it concerns one.
    pub target: Option<String>,
    /// What went wrong and what to do, without the target: the same words for every
    /// process that failed alike.
    pub cause: String,
}

impl Failure {
    /// A failure of `kind` that concerns no one process.
    pub fn new(kind: FailureKind, cause: impl Into<String>) -> Failure {
        Failure {
            kind,
            target: None,
            cause: cause.into(),
        }
    }

    /// A failure of `kind` of `target`.
    pub fn of(kind: FailureKind, target: impl Into<String>, cause: impl Into<String>) -> Failure {
        Failure {
            kind,
            target: Some(target.into()),
            cause: cause.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Some(target) => write!(f, "{target}: {}", self.cause),
            None => f.write_str(&self.cause),
        }
    }
}

impl std::error::Error for Failure {}

impl From<&AttachError> for Failure {
    fn from(e: &AttachError) -> Failure {
        Failure::of(FailureKind::from(e), format!("pid {}", e.pid()), e.cause())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_failing_alike_have_one_cause_and_their_own_target() {
        let a = Failure::from(&AttachError::Exited { pid: 12 });
        let b = Failure::from(&AttachError::Exited { pid: 13 });
        assert_eq!(a.cause, b.cause);
        assert_eq!(a.kind, FailureKind::NoProcess);
        assert_eq!(a.to_string(), "pid 12: it has exited");
        assert_eq!(b.target.as_deref(), Some("pid 13"));
        assert_eq!(
            Failure::new(FailureKind::Other, "no process given").to_string(),
            "no process given"
        );
    }
}
