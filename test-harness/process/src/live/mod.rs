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
//! # use mqd_process::live::LiveProcess;
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

mod counter;
mod errors;
mod options;
mod ptrace;
mod reader;
mod running;
pub mod syscall;
mod tracer;

pub use counter::ExecutionCounter;
pub use errors::{AttachError, LiveError};
pub use options::*;
pub use running::RunningMemory;

use crate::process_target::ProcessTarget;
use mqd_debuginfo::{AddressSpace, SearchOptions};
use mqd_target::{Memory, TargetError};
use ptrace::*;
use reader::Reader;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::fmt;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};
use tracer::{PokeFailure, ThreadState, Tracer, Waited, Worker, wait_tid};

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
            let stopped = tracer.saw_group_stop;
            Ok((tracer, stopped))
        })
        .map(|(worker, stopped)| (worker, stopped || state_before == Some('T')))?;
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
                saw_group_stop: false,
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

    /// The traced threads: the main thread first (its id is the pid), then by id.
    pub fn threads(&self) -> Vec<i32> {
        let mut tids: Vec<i32> = self
            .worker
            .call(|tracer| tracer.threads.keys().copied().collect())
            .unwrap_or_default();
        // Where pids wrapped around, a later thread can have a smaller id.
        tids.sort_by_key(|&tid| (tid != self.pid, tid));
        tids
    }

    /// The stack of every traced thread, the main thread's first then by thread id,
    /// unwound by `reader` from the thread's registers (x86_64) and the process's memory.
    pub fn stacks(
        &self,
        reader: &mqd_debuginfo::stack::StackReader,
    ) -> Vec<mqd_debuginfo::stack::ThreadStack> {
        let mut regs: Vec<(i32, Result<libc::user_regs_struct, LiveError>)> = self
            .worker
            .call(|tracer| {
                tracer
                    .threads
                    .keys()
                    .map(|&tid| (tid, tracer.get_regs(tid)))
                    .collect()
            })
            .unwrap_or_default();
        // Where pids wrapped around, a later thread can have a smaller id.
        regs.sort_by_key(|&(tid, _)| (tid != self.pid, tid));
        regs.into_iter()
            .map(
                |(tid, regs)| match regs.map(|r| (start_regs(&r), thread_pointer(&r))) {
                    Ok((Some(start), pointer)) => {
                        let mut stack = reader.unwind(tid, &start, |addr| {
                            let mut word = [0u8; 8];
                            self.read(addr, &mut word).ok()?;
                            Some(u64::from_le_bytes(word))
                        });
                        stack.thread_pointer = pointer;
                        stack
                    }
                    Ok((None, _)) => mqd_debuginfo::stack::ThreadStack::unwalked(
                        tid,
                        "stacks are unwound on x86_64 only",
                    ),
                    Err(e) => mqd_debuginfo::stack::ThreadStack::unwalked(
                        tid,
                        format!("its registers could not be read: {e}"),
                    ),
                },
            )
            .collect()
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

    /// The auxiliary vector the kernel gave the process, from `/proc/PID/auxv`.
    pub fn auxv(&self) -> Vec<(u64, u64)> {
        std::fs::read(format!("/proc/{}/auxv", self.pid))
            .unwrap_or_default()
            .chunks_exact(16)
            .map(|pair| {
                let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
                (word(&pair[..8]), word(&pair[8..]))
            })
            .take_while(|&(key, _)| key != 0)
            .collect()
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
        mqd_target::read_c_string(self, addr, max)
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
            Err(e) | Ok(Err(PokeFailure::State(e))) => Err(TargetError::Channel(e.to_string())),
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
                    Err(e) => Err(TargetError::Os {
                        pid: self.pid,
                        operation: "write to /proc/PID/mem".into(),
                        errno: e.raw_os_error().unwrap_or(libc::EIO),
                    }),
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

impl Memory for LiveProcess {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.read(addr, buf)
    }

    fn read_partial(&self, addr: u64, buf: &mut [u8]) -> Result<usize, TargetError> {
        LiveProcess::read_partial(self, addr, buf)
    }
}

/// A live process as a [`Target`](mqd_target::Target): its memory through
/// [`LiveProcess`], its symbols and types through [`AddressSpace`].
pub type LiveTarget = ProcessTarget<LiveProcess>;

impl ProcessTarget<LiveProcess> {
    /// Attaches to `pid` and reads its symbols. `rank`, when known, goes into the name
    /// ("rank 3 (pid 1234, /path/exe)").
    pub fn attach(pid: i32, rank: Option<i32>) -> Result<LiveTarget, AttachError> {
        LiveTarget::attach_with(pid, rank, &SearchOptions::default())
    }

    /// [`Self::attach`], its objects found as `options` say (the pid is `pid`).
    pub fn attach_with(
        pid: i32,
        rank: Option<i32>,
        options: &SearchOptions,
    ) -> Result<LiveTarget, AttachError> {
        let process = LiveProcess::attach(pid)?;
        let space = AddressSpace::from_pid_with(process.pid(), options)
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
        ProcessTarget::from_parts(process, space, name)
    }

    /// Detaches (see [`LiveProcess::detach`]).
    pub fn detach(self) -> Result<(), LiveError> {
        self.process.detach()
    }
}

/// Where an unwind starts: every general register.
#[cfg(target_arch = "x86_64")]
fn start_regs(r: &libc::user_regs_struct) -> Option<mqd_debuginfo::cfi::Registers> {
    mqd_debuginfo::cfi::Registers::from_user_regs(&[
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp,
    ])
}

/// The thread pointer (`fs_base`), where the thread has one.
#[cfg(target_arch = "x86_64")]
fn thread_pointer(r: &libc::user_regs_struct) -> Option<u64> {
    Some(r.fs_base).filter(|&p| p != 0)
}

#[cfg(not(target_arch = "x86_64"))]
fn thread_pointer(_: &libc::user_regs_struct) -> Option<u64> {
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn start_regs(_: &libc::user_regs_struct) -> Option<mqd_debuginfo::cfi::Registers> {
    None
}
