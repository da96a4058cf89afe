//! The tracer thread: the one thread that makes ptrace requests and `waitpid`s for a
//! traced process (Linux accepts requests only from the thread that attached).

use super::errors::*;
use super::options::*;
use super::ptrace::*;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
/// A closure run on the tracer thread.
pub(super) type Job = Box<dyn FnOnce(&mut Tracer) + Send>;

/// The thread that owns the ptrace relationship (see the module docs).
pub(super) struct Worker {
    pub(super) jobs: Option<mpsc::Sender<Job>>,
    pub(super) handle: Option<thread::JoinHandle<()>>,
}

impl Worker {
    /// Starts the tracer thread; `init` runs on it and creates the [`Tracer`]. If `init`
    /// fails the thread ends, and with it (in the kernel) anything it still traced.
    pub(super) fn start<T: Send + 'static, E: Send + 'static>(
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
    pub(super) fn call<R: Send + 'static>(
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

    pub(super) fn stop(&mut self) {
        self.jobs = None;
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// State of one traced thread, as the tracer knows it.
#[derive(Debug, Default)]
pub(super) struct ThreadState {
    /// In a ptrace-stop; `delivery` when it is a signal-delivery-stop (the only stop where
    /// restarting can inject a signal).
    pub(super) stopped: bool,
    pub(super) delivery: bool,
    /// Signals taken from the thread while traced, to deliver when it runs again.
    pub(super) pending: Vec<i32>,
    /// `SIGSTOP`s the tracer sent (`PTRACE_ATTACH`, interrupts of a non-seized tracee)
    /// that have not been reported yet.
    pub(super) expected_sigstops: u32,
}

/// The tracer's side of a [`LiveProcess`]; lives on the tracer thread.
pub(super) struct Tracer {
    pub(super) pid: i32,
    pub(super) seized: bool,
    /// Seize threads created while the process ran (attached processes; a process started
    /// with `PTRACE_TRACEME` is followed on its main thread only).
    pub(super) follow_threads: bool,
    pub(super) threads: BTreeMap<i32, ThreadState>,
    pub(super) timeout: Duration,
    pub(super) exited: Option<String>,
    pub(super) attached: bool,
    /// A thread reported a group-stop: the process was stopped, or about to stop again
    /// (just after a detach from a stopped process, `/proc` still says running).
    pub(super) saw_group_stop: bool,
}

pub(super) enum Waited {
    Status(i32),
    Gone,
    TimedOut,
}

/// How much longer a thread that is runnable, but has not run since it was asked to
/// stop, is waited for.
const STARVED_GRACE: Duration = Duration::from_secs(20);

/// Waits for one status change of `tid`, polling so a thread that never stops cannot hang
/// the debugger.
pub(super) fn wait_tid(tid: i32, deadline: Instant) -> Waited {
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
    pub(super) fn os(&self, call: &'static str, errno: i32) -> LiveError {
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

    pub(super) fn check_alive(&self) -> Result<(), LiveError> {
        match &self.exited {
            Some(how) => Err(LiveError::Exited {
                pid: self.pid,
                how: how.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Attaches to every thread of `pid` and stops them all.
    pub(super) fn attach(pid: i32, options: AttachOptions) -> Result<Tracer, AttachError> {
        let mut tracer = Tracer {
            pid,
            seized: options.method == AttachMethod::Seize,
            follow_threads: true,
            threads: BTreeMap::new(),
            timeout: options.timeout,
            exited: None,
            attached: true,
            saw_group_stop: false,
        };
        let started = Instant::now();
        let deadline = started + options.timeout;
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
                        waited: started.elapsed(),
                        call: super::syscall::system_call(pid, tid)
                            .filter(|c| c.name.is_some())
                            .map(|c| c.to_string()),
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
    pub(super) fn release_stopped(&mut self) {
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            let _ = self.restart(tid, libc::PTRACE_DETACH);
        }
        self.attached = false;
    }

    pub(super) fn attach_thread(&mut self, tid: i32) -> Result<(), i32> {
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
    pub(super) fn note_status(&mut self, tid: i32, status: i32) -> StopReason {
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
                self.saw_group_stop = true;
                StopReason::GroupStop(sig)
            } else {
                StopReason::Interrupted
            };
        }
        if event != 0 {
            return StopReason::Event(event);
        }
        if group {
            self.saw_group_stop = true;
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
    pub(super) fn stop_all(&mut self, mut deadline: Instant) -> Result<(), StopFailure> {
        let mut starved = false;
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
                        // A runnable thread stops the moment it runs: on a machine
                        // so loaded that it has not run yet, it is waited for once more
                        // (seen: a polling MPICH rank beside `stress` and six jobs).
                        Waited::TimedOut if !starved && thread_state(self.pid, tid) == 'R' => {
                            starved = true;
                            deadline = Instant::now() + STARVED_GRACE;
                            continue;
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

    pub(super) fn stop_all_live(&mut self) -> Result<(), LiveError> {
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
    pub(super) fn restart(&mut self, tid: i32, request: libc::c_uint) -> Result<(), LiveError> {
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

    pub(super) fn resume_all(&mut self) -> Result<(), LiveError> {
        self.check_alive()?;
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.restart(tid, libc::PTRACE_CONT)?;
        }
        Ok(())
    }

    /// Waits until some thread stops by itself, then stops the others.
    pub(super) fn wait_any(&mut self, timeout: Duration) -> Result<StopEvent, LiveError> {
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
    pub(super) fn detach_all(&mut self) -> Result<(), LiveError> {
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
    pub(super) fn drain_sigstops(&mut self) -> Result<(), LiveError> {
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

    pub(super) fn stopped_thread(&self, tid: i32) -> Result<(), LiveError> {
        self.check_alive()?;
        match self.threads.get(&tid) {
            Some(t) if t.stopped => Ok(()),
            _ => Err(LiveError::WrongState {
                pid: self.pid,
                expected: "stopped",
            }),
        }
    }

    pub(super) fn get_regs(&self, tid: i32) -> Result<libc::user_regs_struct, LiveError> {
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

    pub(super) fn set_regs(
        &self,
        tid: i32,
        regs: &mut libc::user_regs_struct,
    ) -> Result<(), LiveError> {
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
    pub(super) fn peek(&self, addr: u64, buf: &mut [u8]) -> (usize, Option<i32>, u64) {
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
    pub(super) fn poke(&self, addr: u64, data: &[u8]) -> Result<(), i32> {
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
pub(super) enum PokeFailure {
    /// The process is not in a state to be written (running, exited).
    State(LiveError),
    /// The kernel refused the write.
    Errno(i32),
}

pub(super) enum StopFailure {
    Timeout(i32),
    Exited,
    Os(&'static str, i32),
}
