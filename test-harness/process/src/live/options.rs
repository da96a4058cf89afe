//! How to attach and read, what was read, and why a thread stopped: the vocabulary of
//! live processes, shared by the tracer, the reader and their owner.

use std::time::Duration;

/// Granularity of the read cache and of the page-by-page retry of short reads.
pub const BLOCK_SIZE: usize = 4096;

/// Most blocks the cache holds (8 MiB) before it starts over. Libraries read an object
/// once, or field by field while they are at it: a small cache catches that locality,
/// and a large one only holds a process's whole heap (100,000 requests filled 100 MiB
/// per rank).
pub(super) const MAX_CACHED_BLOCKS: usize = 1 << 11;
/// Most remote iovecs in one `process_vm_readv` (`IOV_MAX`).
pub(super) const MAX_IOVECS: usize = 1024;

pub(super) const PTRACE_EVENT_STOP: i32 = 128;
pub(super) const PF_KTHREAD: u64 = 0x0020_0000;

/// How to attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMethod {
    /// `PTRACE_SEIZE` + `PTRACE_INTERRUPT`; falls back to [`AttachMethod::Attach`] on a
    /// kernel without it.
    Seize,
    /// `PTRACE_ATTACH`, which stops the process with a `SIGSTOP` the tracer suppresses.
    Attach,
}

/// Options of [`LiveProcess::attach_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachOptions {
    /// How to attach.
    pub method: AttachMethod,
    /// How long to wait for each thread to stop before giving up (a thread that is
    /// runnable but has not run yet, on a loaded machine, is given 20 s more).
    pub timeout: Duration,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            method: AttachMethod::Seize,
            timeout: Duration::from_secs(5),
        }
    }
}

/// How [`LiveProcess::read`] fetches memory it has not cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMethod {
    /// `process_vm_readv`, one remote iovec per 4 KiB block.
    ProcessVmReadv,
    /// `pread` on `/proc/PID/mem`.
    ProcMem,
    /// `PTRACE_PEEKDATA`, one word at a time (always permitted to the tracer, slow).
    Peek,
}

/// What the reads of one [`LiveProcess`] cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Calls of [`LiveProcess::read`] and [`LiveProcess::read_partial`].
    pub requests: u64,
    /// Requests served from the cache alone.
    pub cache_hits: u64,
    /// System calls made to fetch memory (`process_vm_readv`, `pread`, `PTRACE_PEEKDATA`).
    pub syscalls: u64,
    /// Blocks fetched (readable ones).
    pub blocks_fetched: u64,
    /// Bytes asked for.
    pub bytes_requested: u64,
}

/// Why a thread stopped (see [`LiveProcess::wait_stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Stopped by the debugger (`PTRACE_INTERRUPT` or its own `SIGSTOP`).
    Interrupted,
    /// The process entered a group-stop (`SIGSTOP`, `SIGTSTP`, ...): job control stopped it.
    GroupStop(i32),
    /// A signal is about to be delivered; it stays pending and is delivered at the next
    /// resume or detach unless [`LiveProcess::discard_signal`] drops it (a breakpoint's
    /// `SIGTRAP`).
    Signal(i32),
    /// A ptrace event stop (`PTRACE_EVENT_*`).
    Event(i32),
    /// The process exited with this status.
    Exited(i32),
    /// The process was killed by this signal.
    Killed(i32),
}

/// One stop reported by [`LiveProcess::wait_stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopEvent {
    /// The thread that stopped.
    pub tid: i32,
    /// Why.
    pub reason: StopReason,
}
