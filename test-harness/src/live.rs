//! Live processes: attach with ptrace, read and write their memory, detach leaving them
//! exactly as they were.
//!
//! A [`LiveProcess`] is one traced process (all its threads). [`LiveProcess::attach`]
//! seizes every thread (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`, or `PTRACE_ATTACH` where
//! seizing is not available), waits for each to stop with a deadline (a process stuck in
//! uninterruptible sleep gives [`AttachError::Timeout`], never a hang), and remembers
//! whether the process was running or stopped. [`LiveProcess::detach`] (or dropping it)
//! lets it go as it was found: running if it was running, stopped if it was stopped, with
//! every signal that arrived meanwhile delivered.
//!
//! Reads use `process_vm_readv`, falling back to `/proc/PID/mem` and then to
//! `PTRACE_PEEKDATA`; while the process is stopped they go through a cache of 4 KiB blocks,
//! so the many small reads of an MQD library turn into few system calls
//! ([`LiveProcess::stats`]). The cache is dropped at every resume.
//!
//! ```no_run
//! # use mqd_harness::live::LiveProcess;
//! let process = LiveProcess::attach(1234)?;
//! let mut word = [0u8; 8];
//! process.read(0x601040, &mut word)?;
//! process.detach()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threads
//! Linux accepts ptrace requests for a tracee only from the thread that attached it. Each
//! `LiveProcess` therefore owns a tracer thread of its own that makes every ptrace request
//! and `waitpid` for it; the handle itself may move between threads, and any number of
//! processes can be attached at once. Memory reads need no tracer and run on the caller's
//! thread. While a process is attached, nothing else in this program may `waitpid` for it
//! (e.g. [`std::process::Child::try_wait`] on a child being traced): that would steal its
//! stop notifications. Conversely, a child of this program that exits while attached is
//! reaped by the tracer, and its `Child::wait` then fails.

use crate::debuginfo::{AddressSpace, DebugInfoError};
use crate::target::{ByteOrder, Target, TargetError, TypeId};
use mqd_mpich::abi::mqs_target_type_sizes;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Granularity of the read cache and of the page-by-page retry of short reads.
pub const BLOCK_SIZE: usize = 4096;

/// Most blocks the cache holds (256 MiB) before it starts over.
const MAX_CACHED_BLOCKS: usize = 1 << 16;
/// Most remote iovecs in one `process_vm_readv` (`IOV_MAX`).
const MAX_IOVECS: usize = 1024;

const PTRACE_EVENT_STOP: i32 = 128;
const PF_KTHREAD: u64 = 0x0020_0000;

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
    /// How long to wait for each thread to stop before giving up.
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
            } => write!(
                f,
                "pid {pid} did not stop within {:.1}s (thread {tid} is in state {state}{}); try again",
                waited.as_secs_f64(),
                if *state == 'D' {
                    ": uninterruptible sleep"
                } else {
                    ""
                }
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

impl std::error::Error for AttachError {}

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

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn clear_errno() {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = 0 };
}

/// One ptrace request with integer arguments.
fn ptrace(request: libc::c_uint, tid: i32, addr: usize, data: usize) -> Result<libc::c_long, i32> {
    clear_errno();
    // SAFETY: the requests made with this helper take integers (or nothing) in addr/data.
    let r = unsafe { libc::ptrace(request as _, tid, addr as *mut c_void, data as *mut c_void) };
    if r == -1 {
        let e = errno();
        // PEEK requests return the word, which may be -1: errno tells.
        if e != 0 {
            return Err(e);
        }
    }
    Ok(r)
}

fn is_stop_signal(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("was killed by signal {}", libc::WTERMSIG(status))
    } else {
        "has exited".to_string()
    }
}

/// `/proc/PID/stat` fields a debugger looks at before attaching.
struct ProcStat {
    state: char,
    flags: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        flags: fields.get(6)?.parse().ok()?,
    })
}

fn proc_status_field(pid: i32, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .map(|value| value.trim().to_string())
}

fn thread_state(pid: i32, tid: i32) -> char {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
        .ok()
        .and_then(|text| {
            let rest = &text[text.rfind(')')? + 1..];
            rest.split_whitespace().next()?.chars().next()
        })
        .unwrap_or('?')
}

fn list_threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

/// Why the kernel refused to let us trace `pid`, and how to fix it.
fn permission_hint(pid: i32) -> String {
    let scope: Option<u32> = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let owner: Option<u32> =
        proc_status_field(pid, "Uid").and_then(|uids| uids.split_whitespace().nth(1)?.parse().ok());
    if scope == Some(3) {
        return "kernel.yama.ptrace_scope is 3: ptrace is disabled until the next reboot".into();
    }
    if euid != 0 {
        if let Some(owner) = owner
            && owner != euid
        {
            return format!(
                "it belongs to uid {owner} and the debugger runs as uid {euid}: run as that user or as root"
            );
        }
        if let Some(scope @ (1 | 2)) = scope {
            return format!(
                "kernel.yama.ptrace_scope is {scope}: run as root, or `sudo sysctl kernel.yama.ptrace_scope=0`, or give the debugger CAP_SYS_PTRACE"
            );
        }
        return "run as root or as the process's owner (a setuid or non-dumpable process needs root)"
            .into();
    }
    "the debugger lacks CAP_SYS_PTRACE (in a container, run it with --cap-add=SYS_PTRACE) or a security module forbids tracing".into()
}

/// A closure run on the tracer thread.
type Job = Box<dyn FnOnce(&mut Tracer) + Send>;

/// The thread that owns the ptrace relationship (see the module docs).
struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Worker {
    /// Starts the tracer thread; `init` runs on it and creates the [`Tracer`]. If `init`
    /// fails the thread ends, and with it (in the kernel) anything it still traced.
    fn start<T: Send + 'static, E: Send + 'static>(
        name: String,
        init: impl FnOnce() -> Result<(Tracer, T), E> + Send + 'static,
    ) -> Result<(Worker, T), E> {
        let (result_tx, result_rx) = mpsc::sync_channel(1);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let handle = thread::Builder::new()
            .name(name)
            .spawn(move || {
                let mut tracer = match init() {
                    Ok((tracer, value)) => {
                        let _ = result_tx.send(Ok(value));
                        tracer
                    }
                    Err(e) => {
                        let _ = result_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = jobs_rx.recv() {
                    job(&mut tracer);
                }
                // The handle went away without detaching (it cannot: Drop detaches), or
                // detach failed half-way: leave nothing stopped behind.
                let _ = tracer.detach_all();
            })
            .expect("cannot start the tracer thread");
        match result_rx.recv() {
            Ok(Ok(value)) => Ok((
                Worker {
                    jobs: Some(jobs_tx),
                    handle: Some(handle),
                },
                value,
            )),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => {
                let _ = handle.join();
                panic!("the tracer thread panicked while attaching")
            }
        }
    }

    /// Runs `f` on the tracer thread and returns its result.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Tracer) -> R + Send + 'static,
    ) -> Result<R, LiveError> {
        let jobs = self.jobs.as_ref().ok_or(LiveError::TracerGone)?;
        let (tx, rx) = mpsc::sync_channel(1);
        jobs.send(Box::new(move |tracer: &mut Tracer| {
            let _ = tx.send(f(tracer));
        }))
        .map_err(|_| LiveError::TracerGone)?;
        rx.recv().map_err(|_| LiveError::TracerGone)
    }

    fn stop(&mut self) {
        self.jobs = None;
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// State of one traced thread, as the tracer knows it.
#[derive(Debug, Default)]
struct ThreadState {
    /// In a ptrace-stop; `delivery` when it is a signal-delivery-stop (the only stop where
    /// restarting can inject a signal).
    stopped: bool,
    delivery: bool,
    /// Signals taken from the thread while traced, to deliver when it runs again.
    pending: Vec<i32>,
    /// `SIGSTOP`s the tracer sent (`PTRACE_ATTACH`, interrupts of a non-seized tracee)
    /// that have not been reported yet.
    expected_sigstops: u32,
}

/// The tracer's side of a [`LiveProcess`]; lives on the tracer thread.
struct Tracer {
    pid: i32,
    seized: bool,
    /// Seize threads created while the process ran (attached processes; a process started
    /// with `PTRACE_TRACEME` is followed on its main thread only).
    follow_threads: bool,
    threads: BTreeMap<i32, ThreadState>,
    timeout: Duration,
    exited: Option<String>,
    attached: bool,
}

enum Waited {
    Status(i32),
    Gone,
    TimedOut,
}

/// Waits for one status change of `tid`, polling so a thread that never stops cannot hang
/// the debugger.
fn wait_tid(tid: i32, deadline: Instant) -> Waited {
    let mut pause = Duration::from_micros(50);
    loop {
        let mut status = 0;
        // SAFETY: plain syscall with a valid out-pointer.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == tid {
            return Waited::Status(status);
        }
        if r < 0 {
            match errno() {
                libc::EINTR => continue,
                _ => return Waited::Gone,
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::TimedOut;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

impl Tracer {
    fn os(&self, call: &'static str, errno: i32) -> LiveError {
        if errno == libc::ESRCH
            && let Some(how) = &self.exited
        {
            return LiveError::Exited {
                pid: self.pid,
                how: how.clone(),
            };
        }
        LiveError::Os {
            pid: self.pid,
            call,
            errno,
        }
    }

    fn check_alive(&self) -> Result<(), LiveError> {
        match &self.exited {
            Some(how) => Err(LiveError::Exited {
                pid: self.pid,
                how: how.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Attaches to every thread of `pid` and stops them all.
    fn attach(pid: i32, options: AttachOptions) -> Result<Tracer, AttachError> {
        let mut tracer = Tracer {
            pid,
            seized: options.method == AttachMethod::Seize,
            follow_threads: true,
            threads: BTreeMap::new(),
            timeout: options.timeout,
            exited: None,
            attached: true,
        };
        let deadline = Instant::now() + options.timeout;
        loop {
            let mut tids = list_threads(pid);
            // The main thread first, so its errors are the ones reported.
            tids.retain(|&tid| tid != pid);
            tids.insert(0, pid);
            let new: Vec<i32> = tids
                .into_iter()
                .filter(|tid| !tracer.threads.contains_key(tid))
                .collect();
            if new.is_empty() {
                break;
            }
            for tid in new {
                match tracer.attach_thread(tid) {
                    Ok(()) => {}
                    // A thread that exited meanwhile is no loss.
                    Err(libc::ESRCH) if tid != pid => {}
                    Err(e) => {
                        tracer.release_stopped();
                        return Err(attach_error(pid, tid, e));
                    }
                }
            }
            if let Err(e) = tracer.stop_all(deadline) {
                tracer.release_stopped();
                return Err(match e {
                    StopFailure::Timeout(tid) => AttachError::Timeout {
                        pid,
                        tid,
                        state: thread_state(pid, tid),
                        waited: options.timeout,
                    },
                    StopFailure::Exited => AttachError::Exited { pid },
                    StopFailure::Os(call, errno) => AttachError::Os { pid, call, errno },
                });
            }
        }
        if tracer.threads.is_empty() {
            return Err(AttachError::Exited { pid });
        }
        Ok(tracer)
    }

    /// After a failed attach: lets the threads that did stop go (with their signals). The
    /// ones that did not are released by the kernel when the tracer thread ends.
    fn release_stopped(&mut self) {
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            let _ = self.restart(tid, libc::PTRACE_DETACH);
        }
        self.attached = false;
    }

    fn attach_thread(&mut self, tid: i32) -> Result<(), i32> {
        if self.seized {
            match ptrace(libc::PTRACE_SEIZE, tid, 0, 0) {
                Ok(_) => {
                    self.threads.insert(tid, ThreadState::default());
                    return Ok(());
                }
                // A kernel without PTRACE_SEIZE (before 3.4).
                Err(libc::EIO) if self.threads.is_empty() => self.seized = false,
                Err(e) => return Err(e),
            }
        }
        ptrace(libc::PTRACE_ATTACH, tid, 0, 0)?;
        self.threads.insert(
            tid,
            ThreadState {
                expected_sigstops: 1,
                ..ThreadState::default()
            },
        );
        Ok(())
    }

    /// Interprets one wait status of `tid`, updating its state.
    fn note_status(&mut self, tid: i32, status: i32) -> StopReason {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.threads.remove(&tid);
            if tid == self.pid {
                self.exited = Some(describe_status(status));
                self.threads.clear();
            }
            return if libc::WIFEXITED(status) {
                StopReason::Exited(libc::WEXITSTATUS(status))
            } else {
                StopReason::Killed(libc::WTERMSIG(status))
            };
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        let seized = self.seized;
        let group = !seized && is_stop_signal(sig) && {
            // A non-seized tracee's group-stop looks like a signal; it has no siginfo.
            // SAFETY: siginfo_t is plain data; the kernel fills it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            clear_errno();
            // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t at data.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_GETSIGINFO as _,
                    tid,
                    std::ptr::null_mut::<c_void>(),
                    &mut info as *mut libc::siginfo_t as *mut c_void,
                )
            };
            r == -1 && errno() == libc::EINVAL
        };
        let Some(thread) = self.threads.get_mut(&tid) else {
            return StopReason::Interrupted;
        };
        thread.stopped = true;
        thread.delivery = false;
        if seized && event == PTRACE_EVENT_STOP {
            return if is_stop_signal(sig) {
                StopReason::GroupStop(sig)
            } else {
                StopReason::Interrupted
            };
        }
        if event != 0 {
            return StopReason::Event(event);
        }
        if group {
            return StopReason::GroupStop(sig);
        }
        thread.delivery = true;
        if sig == libc::SIGSTOP && thread.expected_sigstops > 0 {
            // Our own SIGSTOP: restarting with no signal suppresses it.
            thread.expected_sigstops -= 1;
            return StopReason::Interrupted;
        }
        thread.pending.push(sig);
        StopReason::Signal(sig)
    }

    /// Stops every running thread and waits for each; threads that appear meanwhile
    /// (attached processes only) are seized too.
    fn stop_all(&mut self, deadline: Instant) -> Result<(), StopFailure> {
        loop {
            let running: Vec<i32> = self
                .threads
                .iter()
                .filter(|(_, t)| !t.stopped)
                .map(|(&tid, _)| tid)
                .collect();
            for &tid in &running {
                let thread = self.threads.get_mut(&tid).expect("listed");
                let r = if self.seized {
                    ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).map(|_| ())
                } else if thread.expected_sigstops == 0 {
                    thread.expected_sigstops += 1;
                    // SAFETY: plain syscall.
                    let r =
                        unsafe { libc::syscall(libc::SYS_tgkill, self.pid, tid, libc::SIGSTOP) };
                    if r == 0 { Ok(()) } else { Err(errno()) }
                } else {
                    Ok(())
                };
                if let Err(e) = r
                    && e != libc::ESRCH
                {
                    return Err(StopFailure::Os("ptrace(PTRACE_INTERRUPT)", e));
                }
            }
            for tid in running {
                loop {
                    if !self.threads.contains_key(&tid) {
                        break;
                    }
                    match wait_tid(tid, deadline) {
                        Waited::Status(status) => {
                            self.note_status(tid, status);
                        }
                        Waited::Gone => {
                            self.threads.remove(&tid);
                            if tid == self.pid {
                                self.exited.get_or_insert_with(|| "has exited".into());
                                self.threads.clear();
                            }
                        }
                        Waited::TimedOut => return Err(StopFailure::Timeout(tid)),
                    }
                    if self.threads.get(&tid).is_none_or(|t| t.stopped) {
                        break;
                    }
                }
                if self.exited.is_some() {
                    return Err(StopFailure::Exited);
                }
            }
            if !self.follow_threads {
                return Ok(());
            }
            let new: Vec<i32> = list_threads(self.pid)
                .into_iter()
                .filter(|tid| !self.threads.contains_key(tid))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            for tid in new {
                if let Err(e) = self.attach_thread(tid)
                    && e != libc::ESRCH
                {
                    return Err(StopFailure::Os("ptrace(PTRACE_SEIZE)", e));
                }
            }
        }
    }

    fn stop_all_live(&mut self) -> Result<(), LiveError> {
        self.check_alive()?;
        let deadline = Instant::now() + self.timeout;
        self.stop_all(deadline).map_err(|e| match e {
            StopFailure::Timeout(tid) => LiveError::Timeout {
                pid: self.pid,
                what: format!(
                    "waiting for thread {tid} to stop (state {})",
                    thread_state(self.pid, tid)
                ),
            },
            StopFailure::Exited => LiveError::Exited {
                pid: self.pid,
                how: self.exited.clone().unwrap_or_else(|| "has exited".into()),
            },
            StopFailure::Os(call, errno) => self.os(call, errno),
        })
    }

    /// Restarts one stopped thread with `request` (`PTRACE_CONT`, `PTRACE_SINGLESTEP`,
    /// `PTRACE_DETACH`), handing it the signals it has pending.
    fn restart(&mut self, tid: i32, request: libc::c_uint) -> Result<(), LiveError> {
        let pid = self.pid;
        let Some(thread) = self.threads.get_mut(&tid) else {
            return Ok(());
        };
        if !thread.stopped {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut thread.pending);
        let inject = if thread.delivery && !pending.is_empty() {
            pending.remove(0)
        } else {
            0
        };
        thread.stopped = false;
        thread.delivery = false;
        let r = ptrace(request, tid, 0, inject as usize);
        // Signals that cannot be injected go back to the thread's queue.
        for sig in pending {
            // SAFETY: plain syscall.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, sig) };
        }
        match r {
            Ok(_) => Ok(()),
            Err(libc::ESRCH) => {
                // It died while stopped (SIGKILL): reap it.
                if let Waited::Status(status) = wait_tid(tid, Instant::now()) {
                    self.note_status(tid, status);
                }
                Ok(())
            }
            Err(e) => {
                if let Some(thread) = self.threads.get_mut(&tid) {
                    thread.stopped = true;
                }
                Err(self.os("ptrace(restart)", e))
            }
        }
    }

    fn resume_all(&mut self) -> Result<(), LiveError> {
        self.check_alive()?;
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.restart(tid, libc::PTRACE_CONT)?;
        }
        Ok(())
    }

    /// Waits until some thread stops by itself, then stops the others.
    fn wait_any(&mut self, timeout: Duration) -> Result<StopEvent, LiveError> {
        self.check_alive()?;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        loop {
            let running: Vec<i32> = self
                .threads
                .iter()
                .filter(|(_, t)| !t.stopped)
                .map(|(&tid, _)| tid)
                .collect();
            if running.is_empty() {
                return Err(LiveError::WrongState {
                    pid: self.pid,
                    expected: "running",
                });
            }
            let mut event = None;
            for tid in running {
                let mut status = 0;
                // SAFETY: plain syscall with a valid out-pointer.
                let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
                if r == tid {
                    let reason = self.note_status(tid, status);
                    match reason {
                        // Our own SIGSTOP of an earlier interrupt: let it go on.
                        StopReason::Interrupted => {
                            self.restart(tid, libc::PTRACE_CONT)?;
                            continue;
                        }
                        StopReason::Exited(_) | StopReason::Killed(_) if tid != self.pid => {
                            continue;
                        }
                        _ => {}
                    }
                    event = Some(StopEvent { tid, reason });
                    break;
                } else if r < 0 && errno() == libc::ECHILD {
                    self.threads.remove(&tid);
                    if tid == self.pid {
                        self.exited = Some("has exited".into());
                        return Err(LiveError::Exited {
                            pid: self.pid,
                            how: "has exited".into(),
                        });
                    }
                }
            }
            if let Some(event) = event {
                if self.exited.is_none() {
                    self.stop_all_live()?;
                }
                return Ok(event);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LiveError::Timeout {
                    pid: self.pid,
                    what: format!("after {:.1}s waiting for a stop", timeout.as_secs_f64()),
                });
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// Detaches every thread, handing back the signals taken from them.
    fn detach_all(&mut self) -> Result<(), LiveError> {
        if !self.attached || self.exited.is_some() {
            self.attached = false;
            return Ok(());
        }
        // PTRACE_DETACH needs a ptrace-stop.
        self.stop_all_live()?;
        self.drain_sigstops()?;
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        let mut result = Ok(());
        for tid in tids {
            if let Err(e) = self.restart(tid, libc::PTRACE_DETACH)
                && result.is_ok()
            {
                result = Err(e);
            }
        }
        self.threads.clear();
        self.attached = false;
        result
    }

    /// A non-seized tracee may still have our `SIGSTOP` queued: run it until the kernel
    /// reports it, so detaching does not leave it to stop the process.
    fn drain_sigstops(&mut self) -> Result<(), LiveError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let Some(tid) = self
                .threads
                .iter()
                .find(|(_, t)| t.expected_sigstops > 0)
                .map(|(&tid, _)| tid)
            else {
                return Ok(());
            };
            let before = self.threads[&tid].expected_sigstops;
            self.restart(tid, libc::PTRACE_CONT)?;
            match wait_tid(tid, deadline) {
                Waited::Status(status) => {
                    self.note_status(tid, status);
                }
                Waited::Gone => {
                    self.threads.remove(&tid);
                }
                Waited::TimedOut => {
                    return Err(LiveError::Timeout {
                        pid: self.pid,
                        what: "waiting for the attach SIGSTOP".into(),
                    });
                }
            }
            if self
                .threads
                .get(&tid)
                .is_some_and(|t| t.expected_sigstops == before)
            {
                // Some other stop came first: forget the SIGSTOP rather than loop forever
                // if it never comes.
                if let Some(thread) = self.threads.get_mut(&tid) {
                    thread.expected_sigstops = 0;
                }
            }
            if self.exited.is_some() {
                return Ok(());
            }
        }
    }

    fn stopped_thread(&self, tid: i32) -> Result<(), LiveError> {
        self.check_alive()?;
        match self.threads.get(&tid) {
            Some(t) if t.stopped => Ok(()),
            _ => Err(LiveError::WrongState {
                pid: self.pid,
                expected: "stopped",
            }),
        }
    }

    fn get_regs(&self, tid: i32) -> Result<libc::user_regs_struct, LiveError> {
        self.stopped_thread(tid)?;
        // SAFETY: user_regs_struct is plain data.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: &mut regs as *mut _ as *mut c_void,
            iov_len: std::mem::size_of::<libc::user_regs_struct>(),
        };
        clear_errno();
        // SAFETY: PTRACE_GETREGSET NT_PRSTATUS fills at most iov_len bytes at iov_base.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETREGSET as _,
                tid,
                libc::NT_PRSTATUS as usize as *mut c_void,
                &mut iov as *mut libc::iovec as *mut c_void,
            )
        };
        if r == -1 {
            return Err(self.os("ptrace(PTRACE_GETREGSET)", errno()));
        }
        Ok(regs)
    }

    fn set_regs(&self, tid: i32, regs: &mut libc::user_regs_struct) -> Result<(), LiveError> {
        let mut iov = libc::iovec {
            iov_base: regs as *mut _ as *mut c_void,
            iov_len: std::mem::size_of::<libc::user_regs_struct>(),
        };
        // SAFETY: PTRACE_SETREGSET NT_PRSTATUS reads iov_len bytes at iov_base.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETREGSET as _,
                tid,
                libc::NT_PRSTATUS as usize as *mut c_void,
                &mut iov as *mut libc::iovec as *mut c_void,
            )
        };
        if r == -1 {
            return Err(self.os("ptrace(PTRACE_SETREGSET)", errno()));
        }
        Ok(())
    }

    /// Reads aligned words with `PTRACE_PEEKDATA`; returns how many bytes of `buf` were
    /// read before the first unreadable word, and that word's errno.
    fn peek(&self, addr: u64, buf: &mut [u8]) -> (usize, Option<i32>, u64) {
        const W: u64 = std::mem::size_of::<libc::c_long>() as u64;
        let tid = self.pid;
        let mut done = 0usize;
        let mut calls = 0;
        while done < buf.len() {
            let at = addr + done as u64;
            let word_addr = at & !(W - 1);
            calls += 1;
            let word = match ptrace(libc::PTRACE_PEEKDATA, tid, word_addr as usize, 0) {
                Ok(word) => word.to_ne_bytes(),
                Err(e) => return (done, Some(e), calls),
            };
            let skip = (at - word_addr) as usize;
            let n = (W as usize - skip).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&word[skip..skip + n]);
            done += n;
        }
        (done, None, calls)
    }

    /// Writes with `PTRACE_POKEDATA`, read-modify-write at the unaligned ends.
    fn poke(&self, addr: u64, data: &[u8]) -> Result<(), i32> {
        const W: u64 = std::mem::size_of::<libc::c_long>() as u64;
        let tid = self.pid;
        let mut done = 0usize;
        while done < data.len() {
            let at = addr + done as u64;
            let word_addr = at & !(W - 1);
            let skip = (at - word_addr) as usize;
            let n = (W as usize - skip).min(data.len() - done);
            let mut word = if n == W as usize {
                [0u8; 8]
            } else {
                ptrace(libc::PTRACE_PEEKDATA, tid, word_addr as usize, 0)?.to_ne_bytes()
            };
            word[skip..skip + n].copy_from_slice(&data[done..done + n]);
            let value = libc::c_long::from_ne_bytes(word);
            ptrace(
                libc::PTRACE_POKEDATA,
                tid,
                word_addr as usize,
                value as usize,
            )?;
            done += n;
        }
        Ok(())
    }
}

/// Why a `PTRACE_POKEDATA` write did not happen.
enum PokeFailure {
    /// The process is not in a state to be written (running, exited).
    State(LiveError),
    /// The kernel refused the write.
    Errno(i32),
}

enum StopFailure {
    Timeout(i32),
    Exited,
    Os(&'static str, i32),
}

/// Turns a failed `PTRACE_SEIZE`/`PTRACE_ATTACH` into its cause.
fn attach_error(pid: i32, tid: i32, errno: i32) -> AttachError {
    match errno {
        libc::ESRCH => {
            if proc_stat(tid).is_some() {
                AttachError::Exited { pid }
            } else {
                AttachError::NoSuchProcess { pid }
            }
        }
        libc::EPERM => {
            if let Some(tracer) = proc_status_field(tid, "TracerPid")
                .and_then(|t| t.parse::<i32>().ok())
                .filter(|&t| t != 0)
            {
                AttachError::AlreadyTraced { pid, tracer }
            } else if proc_stat(tid).is_none() {
                AttachError::Exited { pid }
            } else {
                AttachError::PermissionDenied {
                    pid,
                    hint: permission_hint(pid),
                }
            }
        }
        errno => AttachError::Os {
            pid,
            call: "ptrace(PTRACE_SEIZE)",
            errno,
        },
    }
}

/// Checks that can name the cause before any ptrace request is made.
fn precheck(pid: i32) -> Result<(), AttachError> {
    if pid <= 0 {
        return Err(AttachError::NoSuchProcess { pid });
    }
    // SAFETY: getpid cannot fail.
    let own = unsafe { libc::getpid() };
    let stat = proc_stat(pid).ok_or(AttachError::NoSuchProcess { pid })?;
    if stat.flags & PF_KTHREAD != 0 {
        return Err(AttachError::KernelThread { pid });
    }
    let tgid: Option<i32> = proc_status_field(pid, "Tgid").and_then(|t| t.parse().ok());
    if pid == own || tgid == Some(own) {
        return Err(AttachError::OwnProcess { pid });
    }
    match stat.state {
        'Z' | 'X' | 'x' => return Err(AttachError::Exited { pid }),
        _ => {}
    }
    if let Some(tracer) = proc_status_field(pid, "TracerPid")
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|&t| t != 0)
    {
        return Err(AttachError::AlreadyTraced { pid, tracer });
    }
    Ok(())
}

/// The reading side of a [`LiveProcess`]: runs on the caller's thread.
struct Reader {
    pid: i32,
    method: Cell<ReadMethod>,
    mem: RefCell<Option<File>>,
    /// Block address -> contents, or `None` for a block that could not be read.
    cache: RefCell<HashMap<u64, Option<Box<[u8]>>>>,
    /// Whether the process is stopped (caching allowed).
    stopped: Cell<bool>,
    stats: Cell<ReadStats>,
}

/// Result of fetching a run of blocks: how many leading blocks were read, and why the
/// next one was not.
struct Fetched {
    blocks: usize,
    failure: Option<FetchFailure>,
}

enum FetchFailure {
    /// The first block not read is not mapped (or not readable).
    Unmapped,
    /// Something else went wrong.
    Error(TargetError),
}

impl Reader {
    fn bump(&self, f: impl FnOnce(&mut ReadStats)) {
        let mut stats = self.stats.get();
        f(&mut stats);
        self.stats.set(stats);
    }

    fn os_error(&self, what: &str, errno: i32) -> TargetError {
        if errno == libc::ESRCH {
            TargetError::Io(format!("pid {} has exited", self.pid))
        } else {
            TargetError::Io(format!(
                "{what} of pid {}: {}",
                self.pid,
                io::Error::from_raw_os_error(errno)
            ))
        }
    }

    /// Fetches `out.len() / BLOCK_SIZE` blocks starting at block address `start`.
    fn fetch(&self, worker: &Worker, start: u64, out: &mut [u8]) -> Fetched {
        loop {
            let method = self.method.get();
            let result = match method {
                ReadMethod::ProcessVmReadv => self.fetch_vm(start, out),
                ReadMethod::ProcMem => self.fetch_mem(start, out),
                ReadMethod::Peek => self.fetch_peek(worker, start, out),
            };
            match result {
                Err(fallback) => self.method.set(fallback),
                Ok(fetched) => return fetched,
            }
        }
    }

    fn fetch_vm(&self, start: u64, out: &mut [u8]) -> Result<Fetched, ReadMethod> {
        let total = out.len() / BLOCK_SIZE;
        let mut done = 0;
        while done < total {
            let count = (total - done).min(MAX_IOVECS);
            let local = libc::iovec {
                iov_base: out[done * BLOCK_SIZE..].as_mut_ptr() as *mut c_void,
                iov_len: count * BLOCK_SIZE,
            };
            // One remote iovec per block: a short read then names the first bad block.
            let remote: Vec<libc::iovec> = (0..count)
                .map(|i| libc::iovec {
                    iov_base: (start + ((done + i) * BLOCK_SIZE) as u64) as usize as *mut c_void,
                    iov_len: BLOCK_SIZE,
                })
                .collect();
            self.bump(|s| s.syscalls += 1);
            // SAFETY: the local iovec covers count blocks of `out`; the remote ones are only
            // addresses in the other process.
            let n = unsafe {
                libc::process_vm_readv(self.pid, &local, 1, remote.as_ptr(), count as _, 0)
            };
            if n < 0 {
                let e = errno();
                return match e {
                    libc::EFAULT | libc::EIO | libc::ENOMEM => Ok(Fetched {
                        blocks: done,
                        failure: Some(FetchFailure::Unmapped),
                    }),
                    libc::EPERM | libc::ENOSYS | libc::EACCES => Err(ReadMethod::ProcMem),
                    e => Ok(Fetched {
                        blocks: done,
                        failure: Some(FetchFailure::Error(self.os_error("process_vm_readv", e))),
                    }),
                };
            }
            let got = n as usize / BLOCK_SIZE;
            done += got;
            if got < count {
                return Ok(Fetched {
                    blocks: done,
                    failure: Some(FetchFailure::Unmapped),
                });
            }
        }
        Ok(Fetched {
            blocks: total,
            failure: None,
        })
    }

    fn fetch_mem(&self, start: u64, out: &mut [u8]) -> Result<Fetched, ReadMethod> {
        if self.mem.borrow().is_none() {
            match File::open(format!("/proc/{}/mem", self.pid)) {
                Ok(file) => *self.mem.borrow_mut() = Some(file),
                Err(_) => return Err(ReadMethod::Peek),
            }
        }
        let mem = self.mem.borrow();
        let file = mem.as_ref().expect("opened above");
        let mut done = 0usize;
        while done < out.len() {
            let at = start + done as u64;
            if at > i64::MAX as u64 {
                break;
            }
            self.bump(|s| s.syscalls += 1);
            match file.read_at(&mut out[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => match e.raw_os_error().unwrap_or(0) {
                    libc::EIO | libc::EFAULT => break,
                    libc::EPERM | libc::EACCES if done == 0 => return Err(ReadMethod::Peek),
                    errno => {
                        return Ok(Fetched {
                            blocks: done / BLOCK_SIZE,
                            failure: Some(FetchFailure::Error(self.os_error("read", errno))),
                        });
                    }
                },
            }
        }
        let blocks = done / BLOCK_SIZE;
        Ok(Fetched {
            blocks,
            failure: (blocks * BLOCK_SIZE < out.len()).then_some(FetchFailure::Unmapped),
        })
    }

    fn fetch_peek(
        &self,
        worker: &Worker,
        start: u64,
        out: &mut [u8],
    ) -> Result<Fetched, ReadMethod> {
        let len = out.len();
        let result = worker.call(move |tracer| {
            let mut buf = vec![0u8; len];
            let (n, err, calls) = tracer.peek(start, &mut buf);
            (buf, n, err, calls)
        });
        let (buf, n, err, calls) = match result {
            Ok(r) => r,
            Err(e) => {
                return Ok(Fetched {
                    blocks: 0,
                    failure: Some(FetchFailure::Error(TargetError::Io(e.to_string()))),
                });
            }
        };
        self.bump(|s| s.syscalls += calls);
        out[..n].copy_from_slice(&buf[..n]);
        let blocks = n / BLOCK_SIZE;
        let failure = match err {
            None => None,
            Some(libc::EIO | libc::EFAULT) => Some(FetchFailure::Unmapped),
            Some(e) => Some(FetchFailure::Error(self.os_error("PTRACE_PEEKDATA", e))),
        };
        Ok(Fetched { blocks, failure })
    }

    /// Reads from `addr` into `buf`; with `all`, fails unless every byte is readable,
    /// otherwise returns how many leading bytes were.
    fn read(
        &self,
        worker: &Worker,
        addr: u64,
        buf: &mut [u8],
        all: bool,
    ) -> Result<usize, TargetError> {
        let len = buf.len();
        self.bump(|s| {
            s.requests += 1;
            s.bytes_requested += len as u64;
        });
        if len == 0 {
            return Ok(0);
        }
        let unmapped = TargetError::Unmapped { addr, len };
        let Some(end) = addr.checked_add(len as u64) else {
            return Err(unmapped);
        };
        let first = addr & !(BLOCK_SIZE as u64 - 1);
        let last = (end - 1) & !(BLOCK_SIZE as u64 - 1);
        if !self.stopped.get() {
            // A running process: no cache, the bytes are stale as soon as they are read.
            return self.read_uncached(worker, addr, buf, all, first, last);
        }
        let mut cache = self.cache.borrow_mut();
        let mut missing = false;
        let mut block = first;
        loop {
            match cache.get(&block) {
                None => missing = true,
                Some(None) => break,
                Some(Some(_)) => {}
            }
            if block == last {
                break;
            }
            block += BLOCK_SIZE as u64;
        }
        if !missing {
            self.bump(|s| s.cache_hits += 1);
        }
        // Fetch the missing blocks in runs, stopping at the first unreadable one.
        let mut copied = 0usize;
        let mut block = first;
        loop {
            if !cache.contains_key(&block) {
                let mut run = 1usize;
                while block + (run * BLOCK_SIZE) as u64 <= last
                    && !cache.contains_key(&(block + (run * BLOCK_SIZE) as u64))
                {
                    run += 1;
                }
                if cache.len() + run > MAX_CACHED_BLOCKS {
                    cache.clear();
                }
                let mut data = vec![0u8; run * BLOCK_SIZE];
                let fetched = self.fetch(worker, block, &mut data);
                self.bump(|s| s.blocks_fetched += fetched.blocks as u64);
                for (i, chunk) in data
                    .chunks_exact(BLOCK_SIZE)
                    .take(fetched.blocks)
                    .enumerate()
                {
                    cache.insert(block + (i * BLOCK_SIZE) as u64, Some(chunk.into()));
                }
                match fetched.failure {
                    None => {}
                    Some(FetchFailure::Unmapped) => {
                        cache.insert(block + (fetched.blocks * BLOCK_SIZE) as u64, None);
                    }
                    Some(FetchFailure::Error(e)) => return Err(e),
                }
            }
            match cache.get(&block) {
                Some(Some(data)) => {
                    let from = addr.max(block);
                    let to = end.min(block + BLOCK_SIZE as u64);
                    let n = (to - from) as usize;
                    let offset = (from - block) as usize;
                    buf[copied..copied + n].copy_from_slice(&data[offset..offset + n]);
                    copied += n;
                }
                _ => {
                    return if all { Err(unmapped) } else { Ok(copied) };
                }
            }
            if block == last {
                return Ok(copied);
            }
            block += BLOCK_SIZE as u64;
        }
    }

    fn read_uncached(
        &self,
        worker: &Worker,
        addr: u64,
        buf: &mut [u8],
        all: bool,
        first: u64,
        last: u64,
    ) -> Result<usize, TargetError> {
        let blocks = ((last - first) as usize) / BLOCK_SIZE + 1;
        let mut data = vec![0u8; blocks * BLOCK_SIZE];
        let fetched = self.fetch(worker, first, &mut data);
        self.bump(|s| s.blocks_fetched += fetched.blocks as u64);
        if let Some(FetchFailure::Error(e)) = fetched.failure {
            return Err(e);
        }
        let offset = (addr - first) as usize;
        let readable = (fetched.blocks * BLOCK_SIZE)
            .saturating_sub(offset)
            .min(buf.len());
        if readable < buf.len() && all {
            return Err(TargetError::Unmapped {
                addr,
                len: buf.len(),
            });
        }
        buf[..readable].copy_from_slice(&data[offset..offset + readable]);
        Ok(readable)
    }

    fn invalidate(&self, addr: u64, len: usize) {
        let mut cache = self.cache.borrow_mut();
        let end = addr.saturating_add(len as u64);
        let mut block = addr & !(BLOCK_SIZE as u64 - 1);
        while block < end {
            cache.remove(&block);
            block += BLOCK_SIZE as u64;
        }
    }
}

/// One traced process, stopped unless [`LiveProcess::resume`] let it run.
///
/// Not `Sync`: reads go through a cache without locks. Dropping it detaches.
pub struct LiveProcess {
    pid: i32,
    was_stopped: bool,
    worker: Worker,
    reader: Reader,
}

impl fmt::Debug for LiveProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveProcess")
            .field("pid", &self.pid)
            .field("was_stopped", &self.was_stopped)
            .field("stopped", &self.reader.stopped.get())
            .finish()
    }
}

impl LiveProcess {
    /// Attaches to every thread of `pid` and stops them (see [`AttachOptions::default`]).
    pub fn attach(pid: i32) -> Result<LiveProcess, AttachError> {
        Self::attach_with(pid, AttachOptions::default())
    }

    /// [`LiveProcess::attach`] with options.
    pub fn attach_with(pid: i32, options: AttachOptions) -> Result<LiveProcess, AttachError> {
        precheck(pid)?;
        // A thread id names its process.
        let pid = proc_status_field(pid, "Tgid")
            .and_then(|t| t.parse().ok())
            .unwrap_or(pid);
        let state_before = proc_stat(pid).map(|s| s.state);
        let (worker, group_stopped) = Worker::start(format!("mqd-tracer-{pid}"), move || {
            let tracer = Tracer::attach(pid, options)?;
            Ok((tracer, ()))
        })
        .map(|(worker, ())| (worker, state_before == Some('T')))?;
        Ok(LiveProcess {
            pid,
            was_stopped: group_stopped,
            reader: Reader {
                pid,
                method: Cell::new(ReadMethod::ProcessVmReadv),
                mem: RefCell::new(None),
                cache: RefCell::new(HashMap::new()),
                stopped: Cell::new(true),
                stats: Cell::new(ReadStats::default()),
            },
            worker,
        })
    }

    /// Starts `command` under ptrace (`PTRACE_TRACEME`): it is returned stopped just after
    /// its `exec`, before its first instruction, together with its [`Child`] handle (wait
    /// for it only after detaching). Only the main thread is traced. A later `exec` stops it
    /// with [`StopReason::Event`]`(libc::PTRACE_EVENT_EXEC)`. If this debugger dies while
    /// the process is still attached, the kernel kills it (`PTRACE_O_EXITKILL`).
    ///
    /// The process's parent is the tracer thread, which ends at detach: a program that
    /// asks for `PR_SET_PDEATHSIG` gets its signal then.
    pub fn spawn(command: Command, timeout: Duration) -> Result<(LiveProcess, Child), LiveError> {
        use std::os::unix::process::CommandExt;
        let program = command.get_program().to_string_lossy().into_owned();
        let (worker, child) = Worker::start(format!("mqd-tracer-{program}"), move || {
            let mut command = command;
            // SAFETY: the closure runs in the child between fork and exec and only makes
            // one async-signal-safe system call.
            unsafe {
                command.pre_exec(|| {
                    if libc::ptrace(
                        libc::PTRACE_TRACEME as _,
                        0,
                        std::ptr::null_mut::<c_void>(),
                        std::ptr::null_mut::<c_void>(),
                    ) == -1
                    {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = command.spawn().map_err(|e| LiveError::Spawn {
                program: program.clone(),
                cause: e.to_string(),
            })?;
            let pid = child.id() as i32;
            let mut tracer = Tracer {
                pid,
                seized: false,
                follow_threads: false,
                threads: BTreeMap::from([(pid, ThreadState::default())]),
                timeout,
                exited: None,
                attached: true,
            };
            let fail = |child: &mut Child, e: LiveError| {
                let _ = child.kill();
                let _ = child.wait();
                e
            };
            // The exec reports itself with a SIGTRAP.
            match wait_tid(pid, Instant::now() + timeout) {
                Waited::Status(status) => {
                    let reason = tracer.note_status(pid, status);
                    if let StopReason::Exited(_) | StopReason::Killed(_) = reason {
                        return Err(LiveError::Spawn {
                            program,
                            cause: describe_status(status),
                        });
                    }
                }
                Waited::Gone => {
                    return Err(fail(
                        &mut child,
                        LiveError::Spawn {
                            program,
                            cause: "it vanished".into(),
                        },
                    ));
                }
                Waited::TimedOut => {
                    return Err(fail(
                        &mut child,
                        LiveError::Timeout {
                            pid,
                            what: "waiting for the exec stop".into(),
                        },
                    ));
                }
            }
            if let Some(thread) = tracer.threads.get_mut(&pid) {
                thread.pending.retain(|&sig| sig != libc::SIGTRAP);
            }
            let options = libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACEEXEC;
            if let Err(e) = ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options as usize) {
                let e = tracer.os("ptrace(PTRACE_SETOPTIONS)", e);
                return Err(fail(&mut child, e));
            }
            Ok((tracer, child))
        })?;
        let pid = child.id() as i32;
        Ok((
            LiveProcess {
                pid,
                was_stopped: false,
                reader: Reader {
                    pid,
                    method: Cell::new(ReadMethod::ProcessVmReadv),
                    mem: RefCell::new(None),
                    cache: RefCell::new(HashMap::new()),
                    stopped: Cell::new(true),
                    stats: Cell::new(ReadStats::default()),
                },
                worker,
            },
            child,
        ))
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process was stopped (job control, state `T`) when attached; detaching
    /// leaves it stopped again.
    pub fn was_stopped(&self) -> bool {
        self.was_stopped
    }

    /// Whether the process is stopped now (not resumed since attach or the last stop).
    pub fn is_stopped(&self) -> bool {
        self.reader.stopped.get()
    }

    /// The traced threads.
    pub fn threads(&self) -> Vec<i32> {
        self.worker
            .call(|tracer| tracer.threads.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The signals taken from the process while attached that will be delivered at the
    /// next resume or at detach, per thread.
    pub fn pending_signals(&self) -> Vec<(i32, i32)> {
        self.worker
            .call(|tracer| {
                tracer
                    .threads
                    .iter()
                    .flat_map(|(&tid, t)| t.pending.iter().map(move |&sig| (tid, sig)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The executable, from `/proc/PID/exe`.
    pub fn executable(&self) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/exe", self.pid)).ok()
    }

    /// Reads `buf.len()` bytes at `addr`, all or nothing.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.reader.read(&self.worker, addr, buf, true).map(|_| ())
    }

    /// Reads as many bytes at `addr` as are readable, up to `buf.len()`, and returns how
    /// many; stops at the first unreadable 4 KiB block.
    pub fn read_partial(&self, addr: u64, buf: &mut [u8]) -> Result<usize, TargetError> {
        self.reader.read(&self.worker, addr, buf, false)
    }

    /// A NUL-terminated string at `addr`, at most `max` bytes (without the NUL): the bytes
    /// up to the NUL, or `max` bytes, or up to the end of readable memory.
    pub fn read_c_string(&self, addr: u64, max: usize) -> Result<Vec<u8>, TargetError> {
        read_c_string_with(addr, max, |at, buf| self.read_partial(at, buf))
    }

    /// Writes `data` at `addr` (`PTRACE_POKEDATA`, else `/proc/PID/mem`); the process must
    /// be stopped.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), TargetError> {
        if data.is_empty() {
            return Ok(());
        }
        let unmapped = TargetError::Unmapped {
            addr,
            len: data.len(),
        };
        if addr.checked_add(data.len() as u64).is_none() {
            return Err(unmapped);
        }
        self.reader.invalidate(addr, data.len());
        let owned = data.to_vec();
        let poked = self.worker.call(move |tracer| {
            tracer
                .stopped_thread(tracer.pid)
                .map_err(PokeFailure::State)?;
            tracer.poke(addr, &owned).map_err(PokeFailure::Errno)
        });
        match poked {
            Ok(Ok(())) => Ok(()),
            Err(e) | Ok(Err(PokeFailure::State(e))) => Err(TargetError::Io(e.to_string())),
            Ok(Err(PokeFailure::Errno(libc::EIO | libc::EFAULT))) => Err(unmapped),
            Ok(Err(PokeFailure::Errno(_))) => {
                // PTRACE_POKEDATA refused (a security module?): /proc/PID/mem may not be.
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .open(format!("/proc/{}/mem", self.pid))
                    .and_then(|file| file.write_all_at(data, addr));
                match written {
                    Ok(()) => Ok(()),
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EFAULT)) => {
                        Err(unmapped)
                    }
                    Err(e) => Err(TargetError::Io(format!("write to pid {}: {e}", self.pid))),
                }
            }
        }
    }

    /// Lets the process run (delivering the signals taken while it was stopped). The read
    /// cache is dropped.
    pub fn resume(&mut self) -> Result<(), LiveError> {
        self.reader.cache.borrow_mut().clear();
        self.reader.stopped.set(false);
        self.worker.call(|tracer| tracer.resume_all())?
    }

    /// Stops every thread of a process that [`LiveProcess::resume`] let run.
    pub fn interrupt(&mut self) -> Result<(), LiveError> {
        self.worker.call(|tracer| tracer.stop_all_live())??;
        self.reader.cache.borrow_mut().clear();
        self.reader.stopped.set(true);
        Ok(())
    }

    /// Waits, at most `timeout`, for a resumed process to stop by itself (a signal, a
    /// breakpoint, job control, exit), then stops its other threads too.
    pub fn wait_stop(&mut self, timeout: Duration) -> Result<StopEvent, LiveError> {
        let event = self.worker.call(move |tracer| tracer.wait_any(timeout))??;
        self.reader.cache.borrow_mut().clear();
        self.reader.stopped.set(true);
        Ok(event)
    }

    /// Drops the signals `tid` has pending (a breakpoint's `SIGTRAP` must not reach it).
    pub fn discard_signal(&mut self, tid: i32) -> Result<(), LiveError> {
        self.worker.call(move |tracer| {
            if let Some(thread) = tracer.threads.get_mut(&tid) {
                thread.pending.clear();
            }
        })
    }

    /// The program counter of a stopped thread.
    pub fn pc(&self, tid: i32) -> Result<u64, LiveError> {
        let regs = self.worker.call(move |tracer| tracer.get_regs(tid))??;
        pc_of(&regs)
    }

    /// Sets the program counter of a stopped thread.
    pub fn set_pc(&mut self, tid: i32, pc: u64) -> Result<(), LiveError> {
        self.worker.call(move |tracer| {
            let mut regs = tracer.get_regs(tid)?;
            set_pc_of(&mut regs, pc)?;
            tracer.set_regs(tid, &mut regs)
        })?
    }

    /// Executes one instruction of a stopped thread (the others stay stopped).
    pub fn step(&mut self, tid: i32) -> Result<(), LiveError> {
        self.reader.cache.borrow_mut().clear();
        self.worker.call(move |tracer| {
            tracer.stopped_thread(tid)?;
            // A signal taken while stepping waits for the next resume, with the others.
            let mut taken = Vec::new();
            let deadline = Instant::now() + tracer.timeout;
            let result = loop {
                if let Some(thread) = tracer.threads.get_mut(&tid) {
                    taken.append(&mut thread.pending);
                }
                tracer.restart(tid, libc::PTRACE_SINGLESTEP)?;
                match wait_tid(tid, deadline) {
                    Waited::Status(status) => match tracer.note_status(tid, status) {
                        StopReason::Signal(libc::SIGTRAP) => {
                            if let Some(thread) = tracer.threads.get_mut(&tid) {
                                thread.pending.retain(|&s| s != libc::SIGTRAP);
                            }
                            break Ok(());
                        }
                        StopReason::Exited(_) | StopReason::Killed(_) => {
                            break Err(LiveError::Exited {
                                pid: tracer.pid,
                                how: tracer.exited.clone().unwrap_or_default(),
                            });
                        }
                        _ => continue,
                    },
                    Waited::Gone => {
                        break Err(LiveError::Exited {
                            pid: tracer.pid,
                            how: "has exited".into(),
                        });
                    }
                    Waited::TimedOut => {
                        break Err(LiveError::Timeout {
                            pid: tracer.pid,
                            what: "single-stepping".into(),
                        });
                    }
                }
            };
            if let Some(thread) = tracer.threads.get_mut(&tid) {
                taken.append(&mut thread.pending);
                thread.pending = taken;
            }
            result
        })?
    }

    /// Kills the process (`SIGKILL`) and waits until it is dead. It is not reaped: its
    /// parent (this program, for [`LiveProcess::spawn`]) still gets its exit status.
    pub fn kill(mut self) -> Result<(), LiveError> {
        let pid = self.pid;
        // SAFETY: plain syscall.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(10);
        // A dead tracee stays a zombie until its tracer lets it go; waiting for it here
        // would reap this program's own children behind their Child handles.
        while proc_stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X' | 'x')) {
            if Instant::now() >= deadline {
                return Err(LiveError::Timeout {
                    pid,
                    what: "waiting for SIGKILL to take effect".into(),
                });
            }
            thread::sleep(Duration::from_millis(1));
        }
        let result = self.worker.call(|tracer| {
            tracer.threads.clear();
            tracer.attached = false;
        });
        self.worker.stop();
        result
    }

    /// Detaches, leaving the process running if it was running and stopped if it was
    /// stopped, with the signals it received meanwhile delivered.
    pub fn detach(mut self) -> Result<(), LiveError> {
        let result = self.worker.call(|tracer| tracer.detach_all());
        self.worker.stop();
        result?
    }

    /// How the next uncached read will fetch memory.
    pub fn read_method(&self) -> ReadMethod {
        self.reader.method.get()
    }

    /// Chooses how uncached reads fetch memory (the reader still falls back from
    /// `process_vm_readv` to `/proc/PID/mem` to `PTRACE_PEEKDATA` when one is refused).
    pub fn set_read_method(&self, method: ReadMethod) {
        self.reader.method.set(method);
    }

    /// What reading has cost since attach or the last [`LiveProcess::reset_stats`].
    pub fn stats(&self) -> ReadStats {
        self.reader.stats.get()
    }

    /// Zeroes [`LiveProcess::stats`].
    pub fn reset_stats(&self) {
        self.reader.stats.set(ReadStats::default());
    }

    /// Drops the read cache (it is dropped at every resume anyway).
    pub fn clear_cache(&self) {
        self.reader.cache.borrow_mut().clear();
    }
}

impl Drop for LiveProcess {
    fn drop(&mut self) {
        if self.worker.jobs.is_some() {
            let _ = self.worker.call(|tracer| tracer.detach_all());
            self.worker.stop();
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn pc_of(regs: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Ok(regs.rip)
}
#[cfg(target_arch = "x86_64")]
fn set_pc_of(regs: &mut libc::user_regs_struct, pc: u64) -> Result<(), LiveError> {
    regs.rip = pc;
    Ok(())
}
#[cfg(target_arch = "aarch64")]
fn pc_of(regs: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Ok(regs.pc)
}
#[cfg(target_arch = "aarch64")]
fn set_pc_of(regs: &mut libc::user_regs_struct, pc: u64) -> Result<(), LiveError> {
    regs.pc = pc;
    Ok(())
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn pc_of(_: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Err(LiveError::Unsupported(
        "program counter on this architecture",
    ))
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn set_pc_of(_: &mut libc::user_regs_struct, _: u64) -> Result<(), LiveError> {
    Err(LiveError::Unsupported(
        "program counter on this architecture",
    ))
}

/// Reads a NUL-terminated string with a partial reader, in chunks that do not cross a
/// 256-byte boundary needlessly, so a string near the end of a mapping is still found.
pub(crate) fn read_c_string_with(
    addr: u64,
    max: usize,
    mut read_partial: impl FnMut(u64, &mut [u8]) -> Result<usize, TargetError>,
) -> Result<Vec<u8>, TargetError> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let to_boundary = 256 - (at % 256) as usize;
        let want = to_boundary.min(max - out.len());
        let mut chunk = vec![0u8; want];
        let n = read_partial(at, &mut chunk)?;
        if let Some(nul) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..nul]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk[..n]);
        if n < want {
            if out.is_empty() {
                return Err(TargetError::Unmapped { addr, len: 1 });
            }
            return Ok(out);
        }
        at = match at.checked_add(n as u64) {
            Some(next) => next,
            None => return Ok(out),
        };
    }
    Ok(out)
}

/// A live process as a [`Target`]: its memory through [`LiveProcess`], its symbols and
/// types through [`AddressSpace`].
pub struct LiveTarget {
    /// The process.
    pub process: LiveProcess,
    /// Its loaded objects, symbols and types.
    pub space: AddressSpace,
    name: String,
}

impl fmt::Debug for LiveTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveTarget")
            .field("name", &self.name)
            .field("process", &self.process)
            .finish()
    }
}

impl LiveTarget {
    /// Attaches to `pid` and reads its symbols. `rank`, when known, goes into the name
    /// ("rank 3 (pid 1234, /path/exe)").
    pub fn attach(pid: i32, rank: Option<i32>) -> Result<LiveTarget, AttachError> {
        let process = LiveProcess::attach(pid)?;
        let space = AddressSpace::from_pid(process.pid())
            .map_err(|error| AttachError::DebugInfo { pid, error })?;
        Ok(LiveTarget::new(process, space, rank))
    }

    /// Puts together an attached process and its address space.
    pub fn new(process: LiveProcess, space: AddressSpace, rank: Option<i32>) -> LiveTarget {
        let exe = space
            .main_executable()
            .or_else(|| process.executable())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "?".into());
        let name = match rank {
            Some(rank) => format!("rank {rank} (pid {}, {exe})", process.pid()),
            None => format!("pid {} ({exe})", process.pid()),
        };
        LiveTarget {
            process,
            space,
            name,
        }
    }

    /// Detaches (see [`LiveProcess::detach`]).
    pub fn detach(self) -> Result<(), LiveError> {
        self.process.detach()
    }

    /// The process and its address space, apart (e.g. to read the symbols again after
    /// the process loaded more objects).
    pub fn into_parts(self) -> (LiveProcess, AddressSpace) {
        (self.process, self.space)
    }
}

impl Target for LiveTarget {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.process.read(addr, buf)
    }
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.space.find_symbol(name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.space.find_function(name)
    }
    fn find_type(&self, name: &str) -> Option<TypeId> {
        self.space.find_type(name)
    }
    fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.space.type_size(ty)
    }
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        self.space.field_offset(ty, field)
    }
    fn type_sizes(&self) -> mqs_target_type_sizes {
        self.space.type_sizes()
    }
    fn byte_order(&self) -> ByteOrder {
        self.space.byte_order()
    }
    fn name(&self) -> String {
        self.name.clone()
    }
}
