//! Finding the processes of an MPI job, as TotalView does: MPIR and MPI2DD.
//!
//! A debugger debugs the job's *starter* (`mpiexec`) and learns the job from it
//! (`shared/spec/acquisition.md`):
//!
//! - [`launch`] starts the starter under ptrace, tells it a debugger is there
//!   (`MPIR_being_debugged = 1`, or `MPI2DD_FLAG_BEING_DEBUGGED`), plants a breakpoint at
//!   `MPIR_Breakpoint` (or `MPI2DD_breakpoint`) and lets it run. When the breakpoint is
//!   hit with the job spawned it reads the process table, and an abort string if the job
//!   aborts; then it removes the breakpoint and detaches, leaving the starter running.
//! - [`attach_job`] reads the process table of a starter that is already running.
//! - [`release_ranks`] lets ranks held in `MPI_Init` go (`MPIR_debug_gate = 1`).
//! - [`read_dll_name`] is the message-queue library a rank names (`MPIR_dll_name`).
//! - [`programs`] names a starter by the program it runs; [`slurm`] finds a Slurm job's
//!   `srun` on this host.
//!
//! ```no_run
//! # use mqd_job::acquire::{launch, release_ranks};
//! let job = launch(&["mpiexec".into(), "-n".into(), "4".into(), "./app".into()])?;
//! for rank in &job.ranks {
//!     println!("rank {} is pid {} on {}", rank.rank, rank.pid, rank.host);
//! }
//! release_ranks(&job)?;
//! # Ok::<(), mqd_job::acquire::AcquireError>(())
//! ```
//!
//! Target structures are decoded from bytes with the target's byte order and pointer
//! size; `MPIR_PROCDESC` is laid out from the starter's DWARF (natural C layout when it
//! has none), `MPI2DD_INFO` and `MPI2DD_PROCDESC` are packed and fixed by the draft.

mod breakpoint;
mod descendants;
mod error;
mod job;
pub mod programs;
pub mod slurm;
mod tables;
#[cfg(test)]
mod tests;

pub use error::AcquireError;
pub use job::{Interface, Job, RankInfo};
pub use tables::{MAX_NAME, MAX_RANKS};

use breakpoint::*;
use mqd_debuginfo::AddressSpace;
use mqd_process::live::{LiveError, LiveProcess, LiveTarget};
use mqd_target::{DebugInfo, Target};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tables::*;

/// What a starter's tables say at one moment, read from any target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StarterTables {
    /// How they were found.
    pub interface: Interface,
    /// Every process of the job, in table order.
    pub ranks: Vec<RankInfo>,
    /// The MQD library the starter names (`MPIR_dll_name`, MPI2DD `dll_name_64`).
    pub dll_name: Option<String>,
    /// `MPIR_debug_abort_string`, when the job is aborting.
    pub abort_message: Option<String>,
}

/// Reads the MPIR or MPI2DD tables of `target` (a live starter, a core, a synthetic
/// image), MPI2DD first when both are there; `pid` names the process in errors. Fails
/// with the reason when there are none or they do not hold together.
pub fn read_tables(target: &dyn Target, pid: i32) -> Result<StarterTables, AcquireError> {
    let (interface, _) = tables::detect(target, None).ok_or(AcquireError::BadData {
        pid,
        what: "neither MPIR nor MPI2DD tables".into(),
    })?;
    let published = tables::read_published(target, pid, interface)?;
    Ok(StarterTables {
        interface,
        ranks: published.ranks,
        dll_name: published.dll_name,
        abort_message: published.abort_message,
    })
}

/// Options of [`launch_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Longest wait from the start until the job is spawned.
    pub timeout: Duration,
    /// After the job is spawned, how long to keep watching the starter for an abort
    /// (MPIR state 2, MPI2DD `ABORT`) before detaching. Zero detaches at once.
    pub abort_grace: Duration,
    /// Use this interface even if the starter has both.
    pub interface: Option<Interface>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            timeout: Duration::from_secs(30),
            abort_grace: Duration::from_millis(300),
            interface: None,
        }
    }
}

/// Starts `cmd` (program and arguments) under the debugger and acquires its job (see
/// [`launch_with`]).
pub fn launch(cmd: &[OsString]) -> Result<Job, AcquireError> {
    let (program, args) = cmd.split_first().ok_or(AcquireError::EmptyCommand)?;
    let mut command = Command::new(program);
    command.args(args);
    launch_with(command, &LaunchOptions::default())
}

/// Starts a starter under the debugger, waits at its breakpoint until the job is spawned,
/// reads the process table and detaches, leaving the starter running (returned in
/// [`Job::starter`]). The ranks are not touched: if the starter holds them for the
/// debugger, [`release_ranks`] lets them go.
///
/// Only the starter's main thread is traced, and children it forks are not: a child that
/// runs `MPIR_Breakpoint` before it `exec`s would die of the breakpoint. If the starter
/// fails to spawn the job, it is killed.
pub fn launch_with(command: Command, options: &LaunchOptions) -> Result<Job, AcquireError> {
    breakpoint_instruction()?;
    let (process, mut child) = LiveProcess::spawn(command, options.timeout)?;
    match acquire_launched(process, options) {
        Ok(mut job) => {
            job.starter = Some(child);
            Ok(job)
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

fn acquire_launched(
    mut process: LiveProcess,
    options: &LaunchOptions,
) -> Result<Job, AcquireError> {
    let pid = process.pid();
    let started = Instant::now();
    let deadline = started + options.timeout;
    let mut ran_to_main = false;
    'image: loop {
        let target = LiveTarget::new(process, load_space(pid)?, None);
        let Some((via, bp_addr)) = detect(&target, options.interface) else {
            // The symbols may be in a library the dynamic linker has not loaded yet.
            let main = target.find_function("main");
            let (stopped, _) = target.into_parts();
            process = stopped;
            if let Some(main) = main.filter(|_| !ran_to_main) {
                ran_to_main = true;
                let bp = Breakpoint::insert(&process, main)?;
                match continue_to(&mut process, &bp, deadline)? {
                    Hit::Breakpoint(_) => bp.remove(&process)?,
                    Hit::Exec => {}
                    Hit::TimedOut => {
                        return Err(AcquireError::Timeout {
                            pid,
                            waited: options.timeout,
                        });
                    }
                }
                continue 'image;
            }
            return Err(AcquireError::NotMpi {
                pid,
                executable: executable_of(pid),
            });
        };
        let mut target = target;
        announce(&target, pid, via)?;
        let bp = Breakpoint::insert(&target.process, bp_addr)?;
        let mut job: Option<Published> = None;
        let mut watch_until = deadline;
        loop {
            let hit = continue_to(&mut target.process, &bp, watch_until);
            let tid = match hit {
                Ok(Hit::Breakpoint(tid)) => tid,
                Ok(Hit::Exec) => {
                    if let Some(published) = job {
                        // A new program: the breakpoint went with the old one.
                        return finish(target, None, published, via);
                    }
                    process = target.into_parts().0;
                    continue 'image;
                }
                Ok(Hit::TimedOut) => {
                    if let Some(published) = job {
                        target.process.interrupt()?;
                        return finish(target, Some(&bp), published, via);
                    }
                    return Err(AcquireError::Timeout {
                        pid,
                        waited: options.timeout,
                    });
                }
                Err(AcquireError::Exited { .. }) if job.is_some() => {
                    let published = job.take().expect("checked");
                    return finish(target, None, published, via);
                }
                Err(e) => return Err(e),
            };
            let now = read_published(&target, pid, via)?;
            match job.as_mut() {
                None if now.spawned || now.abort_message.is_some() => {
                    let done = now.abort_message.is_some() || options.abort_grace.is_zero();
                    job = Some(now);
                    if done {
                        return finish(target, Some(&bp), job.take().expect("set"), via);
                    }
                    watch_until = Instant::now() + options.abort_grace;
                }
                Some(published) if now.abort_message.is_some() => {
                    published.abort_message = now.abort_message;
                    if published.ranks.is_empty() {
                        published.ranks = now.ranks;
                    }
                    let published = job.take().expect("set");
                    return finish(target, Some(&bp), published, via);
                }
                _ => {}
            }
            bp.step_over(&mut target.process, tid)?;
        }
    }
}

/// Removes the breakpoint (when the image still has it) and detaches.
fn finish(
    target: LiveTarget,
    bp: Option<&Breakpoint>,
    published: Published,
    via: Interface,
) -> Result<Job, AcquireError> {
    let pid = target.process.pid();
    if let Some(bp) = bp {
        // The PC of a thread stopped at the breakpoint was rewound to it: with the
        // original instruction back, it simply runs on.
        bp.remove(&target.process)?;
    }
    match target.detach() {
        Ok(()) | Err(LiveError::Exited { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Job {
        starter_pid: pid,
        ranks: published.ranks,
        dll_name: published.dll_name,
        abort_message: published.abort_message,
        via,
        starter: None,
        size: None,
    })
}

/// Attaches to a running starter, reads its process table (and abort string, if it
/// aborted) and detaches.
pub fn attach_job(starter_pid: i32) -> Result<Job, AcquireError> {
    let process = LiveProcess::attach(starter_pid)?;
    let space = load_space(process.pid())?;
    let target = LiveTarget::new(process, space, None);
    let pid = target.process.pid();
    let via = if target.find_symbol("MPI2DD_info").is_some() {
        Interface::Mpi2dd
    } else if target.find_symbol("MPIR_proctable").is_some() {
        Interface::Mpir
    } else {
        target.detach()?;
        // A starter stripped of MPIR (Debian's mpiexec): its descendants say their ranks.
        return descendants::job_of(pid).ok_or_else(|| AcquireError::NotMpi {
            pid,
            executable: executable_of(pid),
        });
    };
    let published = read_published(&target, pid, via)?;
    target.detach()?;
    if published.ranks.is_empty() && published.abort_message.is_none() {
        return Err(AcquireError::NotSpawned { pid });
    }
    Ok(Job {
        starter_pid: pid,
        ranks: published.ranks,
        dll_name: published.dll_name,
        abort_message: published.abort_message,
        via,
        starter: None,
        size: None,
    })
}

/// Lets the ranks of a job held for the debugger go: for each, waits until it runs its
/// own executable (a freshly forked rank may not have `exec`ed yet), attaches, writes
/// `MPIR_debug_gate = 1` (and sets `MPI2DD_FLAG_GATE` where it has `MPI2DD_info`) when
/// it has them, and detaches. Every rank is tried; the first failure is returned.
pub fn release_ranks(job: &Job) -> Result<(), AcquireError> {
    release_ranks_within(job, Duration::from_secs(10))
}

/// [`release_ranks`] waiting at most `timeout` for each rank to `exec`.
pub fn release_ranks_within(job: &Job, timeout: Duration) -> Result<(), AcquireError> {
    let mut first_error = None;
    for rank in &job.ranks {
        if let Err(e) = release_rank(rank, timeout)
            && first_error.is_none()
        {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

fn release_rank(rank: &RankInfo, timeout: Duration) -> Result<(), AcquireError> {
    let error = |cause: String| AcquireError::Release {
        rank: rank.rank,
        pid: rank.pid,
        cause,
    };
    let expected = Path::new(&rank.executable);
    if expected.is_absolute() && expected.exists() {
        let expected = canonical(expected);
        let deadline = Instant::now() + timeout;
        loop {
            match std::fs::read_link(format!("/proc/{}/exe", rank.pid)) {
                Ok(exe) if canonical(&exe) == expected => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(error("it has exited".into()));
                }
                // Not readable (permissions): attach will tell.
                Err(_) => break,
            }
            if Instant::now() >= deadline {
                return Err(error(format!(
                    "it did not start {} within {:.1}s",
                    rank.executable,
                    timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let process = LiveProcess::attach(rank.pid).map_err(|e| error(e.to_string()))?;
    let space = AddressSpace::from_pid(rank.pid).map_err(|e| error(e.to_string()))?;
    let target = LiveTarget::new(process, space, Some(rank.rank));
    let mem = Mem::new(&target, rank.pid);
    if let Some(gate) = target.find_symbol("MPIR_debug_gate") {
        target
            .process
            .write(gate, &mem.encode(1, mem.int))
            .map_err(|e| error(format!("cannot write MPIR_debug_gate: {e}")))?;
    }
    if let Some(info) = target.find_symbol("MPI2DD_info")
        && read_mpi2dd_info(&target, rank.pid, info).is_ok()
    {
        set_mpi2dd_flags(&target, rank.pid, info, MPI2DD_FLAG_GATE)
            .map_err(|e| error(e.to_string()))?;
    }
    target.detach().map_err(|e| error(e.to_string()))
}

/// The message-queue library a process names: its `MPIR_dll_name` (a `char[]`), else the
/// `dll_name_64` of its `MPI2DD_info`; `None` when it names none.
pub fn read_dll_name(target: &dyn Target) -> Option<String> {
    let mem = Mem::new(target, 0);
    if let Some(addr) = target.find_symbol("MPIR_dll_name")
        && let Ok(name) = mem.string(addr, "MPIR_dll_name")
        && !name.is_empty()
    {
        return Some(name);
    }
    let info = target.find_symbol("MPI2DD_info")?;
    let info = read_mpi2dd_info(target, 0, info).ok()?;
    let name = mem.string(info.dll_name_64, "dll_name_64").ok()?;
    (!name.is_empty()).then_some(name)
}
