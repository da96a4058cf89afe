//! The job found: its processes, and the interface that named them.

use std::fmt;
use std::process::Child;

/// The acquisition interface a job was found through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interface {
    /// MPIR (`MPIR_proctable`, `MPIR_Breakpoint`): every MPI launcher.
    Mpir,
    /// The MPI2DD draft (`MPI2DD_info`, `MPI2DD_breakpoint`).
    Mpi2dd,
    /// No table: the starter's descendants with a launcher rank in their environment.
    Environment,
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Interface::Mpir => "MPIR",
            Interface::Mpi2dd => "MPI2DD",
            Interface::Environment => "the launcher's environment",
        })
    }
}

/// One process of the job, from the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankInfo {
    /// Rank in `MPI_COMM_WORLD` (the table index for MPIR, explicit for MPI2DD).
    pub rank: i32,
    /// Where it runs.
    pub host: String,
    /// Its executable, as the starter names it.
    pub executable: String,
    /// Its process id on `host`.
    pub pid: i32,
}

/// A job found through its starter.
#[derive(Debug)]
pub struct Job {
    /// The starter's pid.
    pub starter_pid: i32,
    /// The processes, by rank.
    pub ranks: Vec<RankInfo>,
    /// The message-queue library the starter names (MPI2DD `dll_name_64`, or an
    /// `MPIR_dll_name` in the starter); ranks name theirs
    /// ([`read_dll_name`](super::read_dll_name)).
    pub dll_name: Option<String>,
    /// The abort string, when the job aborted while watched.
    pub abort_message: Option<String>,
    /// How the job was found.
    pub via: Interface,
    /// The starter, when [`launch`](super::launch) started it: wait for it or kill it.
    pub starter: Option<Child>,
    /// The job's size, when it is known apart from the table (the launcher's
    /// `PMI_SIZE`): ranks beyond those found run elsewhere.
    pub size: Option<u32>,
}
