//! Why one process could not be displayed: a kind a program can act on, and a cause
//! that says what to do.

use mqd_process::live::AttachError;
use std::fmt;

/// What kind of failure ended a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A failure with a one-line cause.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its kind.
    pub kind: FailureKind,
    /// What went wrong and what to do.
    pub message: String,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<&AttachError> for Failure {
    fn from(e: &AttachError) -> Failure {
        Failure::new(FailureKind::from(e), e.to_string())
    }
}
