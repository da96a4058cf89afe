//! What holding a job through a window showed. After a snapshot, the return addresses of
//! the calls its ranks are blocked in are counted, and what each process does while it
//! stays is measured (memory it touches, bytes it moves through the kernel, threads in
//! system calls on files); a second snapshot ends the window. These are the raw
//! measurements; the analysis (`mqd_analysis::hold`) judges them.

use crate::rank_set::RankSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The measurements of one hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// How long the ranks were watched, in milliseconds.
    pub window_ms: u64,
    /// Each watched rank's measurements.
    pub ranks: BTreeMap<i32, RankHold>,
    /// Ranks that could not be watched whole (another host without an agent, a counter
    /// the kernel refused, a thread without a return address).
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub unwatched: RankSet,
    /// Why the first of them could not be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_unwatched: Option<String>,
}

/// What one rank did during the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankHold {
    /// A thread's watched call returned (its return address ran); `None`: a counter could
    /// not be read.
    pub returned: Option<bool>,
    /// What its process did, where it could be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<Activity>,
}

/// What a process did between two readings of `/proc`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    /// Memory it touched (read or wrote), in kB: the pages whose accessed bit the
    /// hardware set again after it was cleared at the window's start. A process blocked
    /// in MPI touches its progress engine's few pages; one moving data touches the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touched_kb: Option<u64>,
    /// Bytes it read and wrote through the kernel (files, pipes, sockets read with
    /// `read`/`write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_bytes: Option<u64>,
    /// A thread in a system call on a file, or waiting for a device, at the window's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_io: Option<FileIo>,
    /// CPU time (clock ticks) each thread used during the window.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_ticks: BTreeMap<i32, u64>,
    /// Bytes the host's RDMA ports moved during the window (every process's: the NIC
    /// writes memory without touching page tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_bytes: Option<u64>,
    /// A thread was stopped (SIGSTOP, job control) at the window's end: the process does
    /// not run, whatever MPI would do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// A thread that was ready to run for most of the window but hardly ran (an
    /// overloaded host): a rank that could not run proves nothing by not returning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starved: Option<Starved>,
    /// Milliseconds its cgroup's CPU quota (`cpu.max`, `cpu.cfs_quota_us`) kept it from
    /// running during the window, the most of any cgroup above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_ms: Option<u64>,
}

/// A thread the scheduler kept waiting (`/proc/PID/task/TID/schedstat`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Starved {
    /// Its thread id.
    pub tid: i32,
    /// Milliseconds it ran during the window.
    pub ran_ms: u64,
    /// Milliseconds it was ready to run but waited for a CPU.
    pub waited_ms: u64,
}

/// A thread working on a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileIo {
    /// Its thread id.
    pub tid: i32,
    /// The system call (`write`, `fsync`), or `None` for a thread in uninterruptible
    /// sleep outside one the table knows.
    pub syscall: Option<String>,
    /// The file it works on, when the call names one.
    pub file: Option<String>,
}

/// The hold's verdict on one rank, as the analysis judged it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldAs {
    /// It stayed in its calls and did nothing: it counts in a proof.
    Quiet,
    /// It moved: not deadlocked when the window began.
    Moved(Moved),
    /// It stayed in its calls but worked: no proof rests on it.
    Busy(Busy),
}

/// How a rank moved or changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moved {
    /// A thread returned from the call it was blocked in.
    Returned,
    /// After the window a thread is in another call, or in the same one with other
    /// arguments.
    OtherCall,
    /// Its threads came or went.
    Threads,
    /// A thread outside MPI ran (it used CPU time, or is elsewhere).
    Outside,
}

/// How a rank worked while it stayed in its calls.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Busy {
    /// It touched this much memory (kB): data moving through the CPU.
    Memory {
        /// kB.
        kb: u64,
    },
    /// It read or wrote this many bytes through the kernel.
    Io {
        /// Bytes.
        bytes: u64,
    },
    /// A thread worked on a file (or waited for a device) at the window's end.
    File(FileIo),
    /// Its host's RDMA ports moved this many bytes.
    Rdma {
        /// Bytes.
        bytes: u64,
    },
    /// Its message queues changed.
    Queues,
    /// It was stopped (SIGSTOP, job control): a stopped rank is not held by MPI.
    Stopped,
    /// It could hardly run: the host was overloaded.
    Starved(Starved),
    /// Its cgroup's CPU quota kept it from running this many milliseconds of the window:
    /// a transfer between throttled ranks can crawl without touching much.
    Throttled {
        /// Milliseconds.
        ms: u64,
    },
    /// It polls (`MPI_Test`, `MPI_Iprobe`): its returns prove no progress, and whether
    /// its loop ends cannot be seen.
    Polling {
        /// The call.
        call: String,
    },
    /// It changed without returning from its calls: another call or other arguments,
    /// threads that came or went, a thread outside MPI that ran.
    Changed(Moved),
    /// What it did could not be measured (a counter or `/proc` could not be read).
    Unmeasured,
}
