//! Why attaching to a process, or an operation on an attached one, failed.

use mqd_debuginfo::DebugInfoError;
use std::fmt;
use std::io;
use std::time::Duration;

/// Why [`LiveProcess::attach`] failed. Each variant displays as a one-line cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachError {
    /// No process has this pid.
    NoSuchProcess {
        /// The pid asked for.
        pid: i32,
    },
    /// The process has exited (it is a zombie, or died while being attached).
    Exited {
        /// The pid asked for.
        pid: i32,
    },
    /// The kernel refused; `hint` says why and how to fix it.
    PermissionDenied {
        /// The pid asked for.
        pid: i32,
        /// Likely cause and fix.
        hint: String,
    },
    /// Another debugger (or strace) traces the process.
    AlreadyTraced {
        /// The pid asked for.
        pid: i32,
        /// Pid of the tracer.
        tracer: i32,
    },
    /// The pid is a kernel thread, which has no user memory to debug.
    KernelThread {
        /// The pid asked for.
        pid: i32,
    },
    /// The pid is this debugger itself.
    OwnProcess {
        /// The pid asked for.
        pid: i32,
    },
    /// A thread did not stop in time (e.g. uninterruptible sleep in a driver).
    Timeout {
        /// The pid asked for.
        pid: i32,
        /// The thread that did not stop.
        tid: i32,
        /// Its `/proc` state letter when the wait gave up.
        state: char,
        /// How long the wait was.
        waited: Duration,
        /// The system call it was in, in words, when it was in one.
        call: Option<String>,
    },
    /// Another system call failed.
    Os {
        /// The pid asked for.
        pid: i32,
        /// What was being done.
        call: &'static str,
        /// The error number.
        errno: i32,
    },
    /// Attached, but the process's objects could not be read.
    DebugInfo {
        /// The pid asked for.
        pid: i32,
        /// The cause.
        error: DebugInfoError,
    },
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::NoSuchProcess { pid } => write!(f, "no such process: pid {pid}"),
            AttachError::Exited { pid } => write!(f, "pid {pid} has exited"),
            AttachError::PermissionDenied { pid, hint } => {
                write!(f, "not permitted to trace pid {pid}: {hint}")
            }
            AttachError::AlreadyTraced { pid, tracer } => write!(
                f,
                "pid {pid} is already traced by pid {tracer} (another debugger?); detach it first"
            ),
            AttachError::KernelThread { pid } => write!(
                f,
                "pid {pid} is a kernel thread: only user processes can be debugged"
            ),
            AttachError::OwnProcess { pid } => {
                write!(f, "pid {pid} is this debugger itself: cannot trace it")
            }
            AttachError::Timeout {
                pid,
                tid,
                state,
                waited,
                call,
            } => write!(
                f,
                "pid {pid} {}",
                not_stopped(*tid, *state, *waited, call.as_deref())
            ),
            AttachError::Os { pid, call, errno } => write!(
                f,
                "{call} on pid {pid} failed: {}",
                io::Error::from_raw_os_error(*errno)
            ),
            AttachError::DebugInfo { pid, error } => {
                write!(f, "cannot read the symbols of pid {pid}: {error}")
            }
        }
    }
}

/// Why a thread did not stop: "did not stop within 5.0s (thread 12 is in state D:
/// uninterruptible sleep); try again", with the system call it is in when it waits in
/// one: a thread stops only when it leaves it.
fn not_stopped(tid: i32, state: char, waited: Duration, call: Option<&str>) -> String {
    let why = if state == 'D' {
        ": uninterruptible sleep"
    } else {
        ""
    };
    match call {
        Some(call) => format!(
            "did not stop within {:.1}s (thread {tid} is in state {state}{why}, in {call}: it stops when that call ends, which I/O in progress may take long)",
            waited.as_secs_f64()
        ),
        None => format!(
            "did not stop within {:.1}s (thread {tid} is in state {state}{why}); try again",
            waited.as_secs_f64()
        ),
    }
}

impl AttachError {
    /// The pid asked for.
    pub fn pid(&self) -> i32 {
        match self {
            AttachError::NoSuchProcess { pid }
            | AttachError::Exited { pid }
            | AttachError::PermissionDenied { pid, .. }
            | AttachError::AlreadyTraced { pid, .. }
            | AttachError::KernelThread { pid }
            | AttachError::OwnProcess { pid }
            | AttachError::Timeout { pid, .. }
            | AttachError::Os { pid, .. }
            | AttachError::DebugInfo { pid, .. } => *pid,
        }
    }

    /// The cause without the process: the same words for every process that failed
    /// alike ("it has exited").
    pub fn cause(&self) -> String {
        match self {
            AttachError::NoSuchProcess { .. } => "no such process".into(),
            AttachError::Exited { .. } => "it has exited".into(),
            AttachError::PermissionDenied { hint, .. } => {
                format!("not permitted to trace it: {hint}")
            }
            AttachError::AlreadyTraced { tracer, .. } => {
                format!("it is already traced by pid {tracer} (another debugger?); detach it first")
            }
            AttachError::KernelThread { .. } => {
                "it is a kernel thread: only user processes can be debugged".into()
            }
            AttachError::OwnProcess { .. } => "it is this debugger itself: cannot trace it".into(),
            AttachError::Timeout {
                tid,
                state,
                waited,
                call,
                ..
            } => format!("it {}", not_stopped(*tid, *state, *waited, call.as_deref())),
            AttachError::Os { call, errno, .. } => {
                format!("{call} failed: {}", io::Error::from_raw_os_error(*errno))
            }
            AttachError::DebugInfo { error, .. } => format!("cannot read its symbols: {error}"),
        }
    }
}

impl std::error::Error for AttachError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttachError::DebugInfo { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why an operation on an attached process failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveError {
    /// The process is gone.
    Exited {
        /// Its pid.
        pid: i32,
        /// How it ended ("exited with status 0", "killed by signal 9").
        how: String,
    },
    /// A thread did not stop, or the process did not report, in time.
    Timeout {
        /// Its pid.
        pid: i32,
        /// What was being waited for.
        what: String,
    },
    /// A ptrace request or another system call failed.
    Os {
        /// Its pid.
        pid: i32,
        /// What was being done.
        call: &'static str,
        /// The error number.
        errno: i32,
    },
    /// The process could not be started.
    Spawn {
        /// The program.
        program: String,
        /// Why.
        cause: String,
    },
    /// The operation needs a stopped process but it is running (or the reverse).
    WrongState {
        /// Its pid.
        pid: i32,
        /// What was expected.
        expected: &'static str,
    },
    /// Not supported on this architecture.
    Unsupported(&'static str),
    /// The tracer thread is gone (it panicked, or the process was detached).
    TracerGone,
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveError::Exited { pid, how } => write!(f, "pid {pid} {how}"),
            LiveError::Timeout { pid, what } => write!(f, "pid {pid}: timed out {what}"),
            LiveError::Os { pid, call, errno } => write!(
                f,
                "{call} on pid {pid} failed: {}",
                io::Error::from_raw_os_error(*errno)
            ),
            LiveError::Spawn { program, cause } => write!(f, "cannot start {program}: {cause}"),
            LiveError::WrongState { pid, expected } => {
                write!(f, "pid {pid} must be {expected} for this")
            }
            LiveError::Unsupported(what) => write!(f, "not supported here: {what}"),
            LiveError::TracerGone => write!(f, "the tracer thread is gone"),
        }
    }
}

impl std::error::Error for LiveError {}
