//! Dumping live processes: stop them all, find and load the MQD library, take
//! one display per process, and let them go exactly as they were.

use crate::host::Counters;
use crate::library::MqsLibrary;
use crate::live::LiveTarget;
use crate::report::{JobDump, RankDump};
use crate::session::{Debugger, SessionOptions};
use crate::target::Target;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A process to dump, with what the job (proctable) says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRef {
    /// COMM_WORLD rank when a proctable gave it.
    pub rank: Option<i32>,
    /// Process id.
    pub pid: i32,
    /// Host name from the proctable.
    pub host: Option<String>,
    /// Executable from the proctable.
    pub executable: Option<String>,
}

impl ProcessRef {
    /// A bare pid.
    pub fn pid(pid: i32) -> ProcessRef {
        ProcessRef {
            rank: None,
            pid,
            host: None,
            executable: None,
        }
    }
}

/// What kind of failure ended a dump; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No such process, or it exited.
    NoProcess,
    /// The kernel refused to let us trace it.
    NotPermitted,
    /// The process is not an MPI process, or its MPI has no queue support.
    NotMpi,
    /// The MQD library is missing or incompatible.
    Library,
    /// Debug information is missing.
    NoDebugInfo,
    /// Anything else (job acquisition, ptrace).
    Other,
}

impl FailureKind {
    /// The exit code `mqd` uses for it.
    pub fn exit_code(self) -> u8 {
        match self {
            FailureKind::NoProcess => 3,
            FailureKind::NotPermitted => 4,
            FailureKind::NotMpi => 5,
            FailureKind::NoDebugInfo => 6,
            FailureKind::Library => 7,
            FailureKind::Other => 1,
        }
    }
}

/// A failure with a one-line cause.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its kind.
    pub kind: FailureKind,
    /// What went wrong and what to do.
    pub message: String,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

fn attach_failure(e: &crate::live::AttachError) -> Failure {
    use crate::live::AttachError as E;
    let kind = match e {
        E::NoSuchProcess { .. } | E::Exited { .. } => FailureKind::NoProcess,
        E::PermissionDenied { .. } | E::AlreadyTraced { .. } => FailureKind::NotPermitted,
        _ => FailureKind::Other,
    };
    Failure::new(kind, e.to_string())
}

/// Reads a NUL-terminated string variable of the target, at most `max` bytes.
pub fn read_string_variable(target: &dyn Target, symbol: &str, max: usize) -> Option<String> {
    let addr = target.find_symbol(symbol)?;
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < max {
        let at = addr.checked_add(out.len() as u64)?;
        // Near the end of a mapping, fall back to byte reads.
        if target.read_memory(at, &mut chunk).is_err() {
            let mut byte = [0u8; 1];
            target.read_memory(at, &mut byte).ok()?;
            if byte[0] == 0 {
                break;
            }
            out.push(byte[0]);
            continue;
        }
        match chunk.iter().position(|&b| b == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                break;
            }
            None => out.extend_from_slice(&chunk),
        }
    }
    out.truncate(max);
    (!out.is_empty()).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// Which library to load: `--dll`, else the target's `MPIR_dll_name`, else the job's
/// MPI2DD `dll_name_64`, else the `libmqd_mpich.so` built with `mqd`.
pub fn choose_library(
    explicit: Option<&Path>,
    first: Option<&dyn Target>,
    job_dll: Option<&str>,
) -> Result<PathBuf, Failure> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let named = first
        .and_then(|t| read_string_variable(t, "MPIR_dll_name", 4096))
        .or_else(|| job_dll.map(str::to_owned));
    if let Some(name) = named {
        let path = PathBuf::from(&name);
        if path.exists() {
            return Ok(path);
        }
        return Err(Failure::new(
            FailureKind::Library,
            format!("the target names the message queue library {name} (MPIR_dll_name), which does not exist; pass --dll PATH"),
        ));
    }
    crate::bundled_library().ok_or_else(|| {
        Failure::new(
            FailureKind::Library,
            "no message queue library: the target has no MPIR_dll_name and libmqd_mpich.so is not beside mqd; pass --dll PATH",
        )
    })
}

/// Loads the library, with a failure that says what is wrong with it.
pub fn load_library(path: &Path) -> Result<Arc<MqsLibrary>, Failure> {
    MqsLibrary::load(path)
        .map(Arc::new)
        .map_err(|e| Failure::new(FailureKind::Library, format!("cannot use the message queue library: {e}")))
}

/// How the processes were found, for the report.
#[derive(Debug, Clone, Default)]
pub struct JobContext {
    /// "attach", "mpir", "mpi2dd", "demo".
    pub acquired_by: String,
    /// The starter's pid.
    pub starter_pid: Option<i32>,
    /// The DLL the job names (MPI2DD `dll_name_64`).
    pub dll_name: Option<String>,
    /// Why the job is aborting.
    pub abort_message: Option<String>,
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
}

/// Stops every process, dumps them with one library, and detaches (leaving each
/// process running or stopped as it was). A process that cannot be attached or has
/// no queues is reported in its [`RankDump`]; when no process at all could be
/// dumped the first failure is returned.
pub fn dump_processes(
    processes: &[ProcessRef],
    dll: Option<&Path>,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    dump_processes_counted(processes, dll, context).map(|(job, _)| job)
}

/// [`dump_processes`], with the callbacks each dumped process cost (`mqd dump --stats`).
pub fn dump_processes_counted(
    processes: &[ProcessRef],
    dll: Option<&Path>,
    context: &JobContext,
) -> Result<(JobDump, Vec<ProcessCost>), Failure> {
    let mut attached = attach_all(processes);
    let first = attached.iter().find_map(|(_, t)| t.as_ref().ok());
    if first.is_none() {
        let failure = attached
            .into_iter()
            .find_map(|(_, t)| t.err())
            .unwrap_or_else(|| Failure::new(FailureKind::Other, "no process given"));
        return Err(failure);
    }
    let path = choose_library(dll, first.map(|t| t as &dyn Target), context.dll_name.as_deref())?;
    let lib = load_library(&path)?;
    let mut debugger = Debugger::new(lib.clone(), SessionOptions::default());
    let mut ranks = Vec::new();
    let mut costs = Vec::new();
    let mut failures = Vec::new();
    for (process, target) in attached.drain(..) {
        let mut dump = RankDump {
            rank: process.rank.unwrap_or(-1),
            pid: Some(process.pid),
            host: process.host.clone(),
            executable: process
                .executable
                .clone()
                .or_else(|| target.as_ref().ok().and_then(|t| t.space.main_executable()).map(|p| p.display().to_string())),
            message: None,
            outcome: Err(String::new()),
        };
        let target = match target {
            Ok(t) => t,
            Err(f) => {
                dump.outcome = Err(f.message.clone());
                failures.push(f);
                ranks.push(dump);
                continue;
            }
        };
        let debug_info = target.space.has_debug_info();
        // The counters are the session's: start them afresh for each process.
        debugger.reset_counters();
        match display_into(&mut debugger, Box::new(target), debug_info, "", process.rank, &mut dump) {
            Ok(()) => costs.push(ProcessCost {
                rank: dump.rank,
                pid: process.pid,
                counters: debugger.counters(),
            }),
            Err(f) => failures.push(f),
        }
        ranks.push(dump);
    }
    // Dropping the session detaches every process.
    drop(debugger);
    costs.sort_by_key(|c| (c.rank < 0, c.rank));
    let job = finish_job(ranks, failures, &path, &lib, context)?;
    Ok((job, costs))
}

/// Stops every process, in parallel: attaching (waiting for the stop, reading the
/// objects' symbol tables) is most of the cost of a dump, and each process has its own
/// tracer thread. Several threads at most per core keep a 64-rank job quick without
/// flooding the machine.
fn attach_all(processes: &[ProcessRef]) -> Vec<(ProcessRef, Result<LiveTarget, Failure>)> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get() * 4).min(processes.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<LiveTarget, Failure>>> = (0..processes.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut slots);
    let progress = Progress::new(processes.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = processes.get(i) else { break };
                let target = LiveTarget::attach(p.pid, p.rank).map_err(|e| attach_failure(&e));
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(target);
                progress.tick();
            });
        }
    });
    progress.finish();
    processes
        .iter()
        .cloned()
        .zip(slots.into_iter().map(|t| t.unwrap_or_else(|| Err(Failure::new(FailureKind::Other, "attach did not run")))))
        .collect()
}

/// A progress line on stderr while attaching to a large job, only on a terminal.
struct Progress {
    total: usize,
    done: std::sync::atomic::AtomicUsize,
    shown: bool,
}

impl Progress {
    /// Jobs smaller than this attach too fast for a progress line to help.
    const MIN_RANKS: usize = 16;

    fn new(total: usize) -> Progress {
        use std::io::IsTerminal;
        Progress {
            total,
            done: std::sync::atomic::AtomicUsize::new(0),
            shown: total >= Self::MIN_RANKS && std::io::stderr().is_terminal(),
        }
    }

    fn tick(&self) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if self.shown {
            let width = 30;
            let filled = done * width / self.total.max(1);
            eprint!("\rmqd: attaching [{}{}] {done}/{}", "#".repeat(filled), " ".repeat(width - filled), self.total);
        }
    }

    fn finish(&self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}

/// Why a process cannot have message queues, before asking the library.
fn not_debuggable(target: &dyn Target, debug_info: bool, hint: &str) -> Option<Failure> {
    let has = |s: &str| target.find_symbol(s).is_some();
    let mpi = has("MPIR_All_communicators") || has("MPIR_dll_name") || has("MPIR_debug_gate");
    if !mpi {
        return Some(Failure::new(
            FailureKind::NotMpi,
            format!(
                "{} is not an MPI process, or is stripped of its symbol table: it has none of MPICH's debugger symbols (MPIR_All_communicators, MPIR_dll_name){hint}",
                target.name()
            ),
        ));
    }
    if !debug_info {
        return Some(Failure::new(
            FailureKind::NoDebugInfo,
            format!(
                "{} has no debug information: build MPICH (and the program) with -g / --enable-debuginfo and do not strip it, or install its separate debug files{hint}",
                target.name()
            ),
        ));
    }
    None
}

/// One process (live or core) through the library: its has-queues message and display
/// go into `dump`, and so does its rank when no proctable gave it (its rank in
/// COMM_WORLD). A failure is recorded in `dump` and returned.
fn display_into(
    debugger: &mut Debugger,
    target: Box<dyn Target>,
    debug_info: bool,
    hint: &str,
    rank: Option<i32>,
    dump: &mut RankDump,
) -> Result<(), Failure> {
    let failed = |dump: &mut RankDump, f: Failure| {
        dump.outcome = Err(f.message.clone());
        Err(f)
    };
    if let Some(f) = not_debuggable(target.as_ref(), debug_info, hint) {
        return failed(dump, f);
    }
    let p = match debugger.add_process(target, rank.unwrap_or(-1)) {
        Ok(p) => p,
        Err(e) => {
            let message = e.message.clone().unwrap_or_else(|| e.text.clone());
            let message = message.strip_prefix("mqd: ").unwrap_or(&message).to_owned();
            // Our library says which piece of debug information is missing.
            let ours = debugger.library().version_string().starts_with("mqd ");
            let kind = if ours && e.code == mqd_mpich::error::Error::MissingType.code() {
                FailureKind::NoDebugInfo
            } else {
                FailureKind::NotMpi
            };
            return failed(dump, Failure::new(kind, message));
        }
    };
    dump.message = debugger.process_message(p).map(str::to_owned);
    dump.outcome = debugger
        .display(p)
        .map_err(|e| format!("{} {}", e.text, e.message.unwrap_or_default()).trim().to_owned());
    if rank.is_none()
        && let Ok(display) = &dump.outcome
        && let Some(world) = display.communicators.iter().find(|c| c.name == "MPI_COMM_WORLD")
    {
        dump.rank = world.local_rank as i32;
    }
    Ok(())
}

/// The job in rank order; the first failure when no process at all could be dumped.
fn finish_job(
    mut ranks: Vec<RankDump>,
    failures: Vec<Failure>,
    path: &Path,
    lib: &MqsLibrary,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    if ranks.iter().all(|r| r.outcome.is_err())
        && let Some(f) = failures.into_iter().next()
    {
        return Err(f);
    }
    ranks.sort_by_key(|r| (r.rank < 0, r.rank));
    Ok(JobDump {
        dll: path.display().to_string(),
        dll_version: lib.version_string().to_owned(),
        acquired_by: context.acquired_by.clone(),
        starter_pid: context.starter_pid,
        abort_message: context.abort_message.clone(),
        ranks,
    })
}

/// Dumps the message queues of core files (`mqd core`): [`dump_processes`] with
/// [`crate::core::CoreTarget`]s in place of live processes. `exe` overrides the main
/// executable of every core (for cores without `NT_FILE`, or whose executable moved).
/// Each core's rank is its `MPI_COMM_WORLD` rank, its pid the one the core records;
/// several cores of one job are one [`JobDump`], sorted by rank. A core that cannot be
/// read or has no queues is reported in its [`RankDump`] (pid unknown for a core that
/// cannot be opened); when no core at all could be dumped the first failure is
/// returned. Warnings about mapped files missing or changed since the crash are
/// printed on stderr (`mqd: warning: ...`).
pub fn dump_cores(
    cores: &[PathBuf],
    exe: Option<&Path>,
    dll: Option<&Path>,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    use crate::core::CoreTarget;
    let opened: Vec<Result<CoreTarget, Failure>> = cores
        .iter()
        .map(|path| {
            CoreTarget::open(path, exe).map_err(|e| Failure::new(FailureKind::Other, e.to_string()))
        })
        .collect();
    for target in opened.iter().flatten() {
        for warning in target.warnings() {
            eprintln!("mqd: warning: {}: {warning}", target.core.path().display());
        }
    }
    let Some(first) = opened.iter().find_map(|t| t.as_ref().ok()) else {
        let failure = opened
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| Failure::new(FailureKind::Other, "no core file given"));
        return Err(failure);
    };
    let path = choose_library(dll, Some(first as &dyn Target), context.dll_name.as_deref())?;
    let lib = load_library(&path)?;
    let mut debugger = Debugger::new(lib.clone(), SessionOptions::default());
    let mut ranks = Vec::new();
    let mut failures = Vec::new();
    for target in opened {
        let mut dump = RankDump {
            rank: -1,
            pid: target.as_ref().ok().and_then(CoreTarget::pid),
            host: None,
            executable: target
                .as_ref()
                .ok()
                .and_then(CoreTarget::executable)
                .map(|p| p.display().to_string()),
            message: None,
            outcome: Err(String::new()),
        };
        let target = match target {
            Ok(t) => t,
            Err(f) => {
                dump.outcome = Err(f.message.clone());
                failures.push(f);
                ranks.push(dump);
                continue;
            }
        };
        let debug_info = target.space.has_debug_info();
        let hint = moved_files_hint(&target);
        if let Err(f) = display_into(&mut debugger, Box::new(target), debug_info, &hint, None, &mut dump) {
            failures.push(f);
        }
        ranks.push(dump);
    }
    drop(debugger);
    finish_job(ranks, failures, &path, &lib, context)
}

/// For a core: which mapped files are missing (an executable that moved: `--exe`).
fn moved_files_hint(target: &crate::core::CoreTarget) -> String {
    let missing: Vec<String> = target.warnings().into_iter().filter(|w| w.contains("is missing")).collect();
    if missing.is_empty() {
        String::new()
    } else {
        format!(" ({}; pass --exe PATH if the executable moved)", missing.join("; "))
    }
}
