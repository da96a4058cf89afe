//! Why the objects of an address space could not be read.

use std::fmt;
use std::path::PathBuf;

/// Why the objects of an address space could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugInfoError {
    /// There is no process with that id (or it is not visible here).
    NoSuchProcess {
        /// The process id asked for.
        pid: i32,
    },
    /// The operating system refused to open a file of the process (or its maps).
    PermissionDenied {
        /// The file refused.
        path: PathBuf,
    },
    /// Another input/output error.
    Io {
        /// The file being read.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A file of the address space is not an ELF object.
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// An ELF file whose headers cannot be parsed.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The mappings name no ELF object at all (a zombie, a kernel thread, an empty list).
    NoObjects,
}

impl fmt::Display for DebugInfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DebugInfoError::NoSuchProcess { pid } => write!(f, "no such process: {pid}"),
            DebugInfoError::PermissionDenied { path } => write!(
                f,
                "permission denied reading {} (debugging another user's process needs root, \
                 or CAP_SYS_PTRACE; see also /proc/sys/kernel/yama/ptrace_scope)",
                path.display()
            ),
            DebugInfoError::Io { path, message } => {
                write!(f, "cannot read {}: {message}", path.display())
            }
            DebugInfoError::NotElf { path } => write!(f, "not an ELF file: {}", path.display()),
            DebugInfoError::Malformed { path, message } => {
                write!(f, "malformed ELF file {}: {message}", path.display())
            }
            DebugInfoError::NoObjects => {
                write!(f, "no ELF object is mapped (a zombie or kernel thread?)")
            }
        }
    }
}

impl std::error::Error for DebugInfoError {}
