//! # mqd-ompd-host: an OpenMP runtime's own debugging library, hosted as MQD's is
//!
//! OMPD (OpenMP 5.0, descended from DMPL) is a library the OpenMP runtime ships for
//! debuggers: loaded by the debugger, served through callbacks, it answers what the
//! runtime's threads are doing. A tour, bottom up:
//! - [`abi`]: `omp-tools.h`'s OMPD types, codes and states;
//! - [`callbacks`]: the callback table, served from a [`callbacks::Source`];
//! - [`library`]: loading and initializing a library;
//! - [`names`]: the numbers a library gives ICVs and states;
//! - [`inspect`]: one process's threads, regions and tasks through it;
//! - [`runtime`]: which runtime a process runs and which library it names;
//! - [`target`]: the source for a process mqd holds (thread-local variables included);
//! - [`isolation`]: the library in a child process, so that its crash or hang costs
//!   one process's OpenMP view, never mqd;
//! - [`OpenMpReader`]: all of it for the processes of a job, into the model's threads.
#![deny(missing_docs)]

pub mod abi;
pub mod callbacks;
pub mod inspect;
pub mod isolation;
pub mod library;
pub mod names;
pub mod runtime;
pub mod target;

use callbacks::{Counters, OsThread};
use inspect::Inspection;
use isolation::OmpdHost;
use library::OmpdLibrary;
use mqd_debuginfo::AddressSpace;
use mqd_library_host::helper::Helper;
use mqd_library_host::isolation::Isolation;
use mqd_target::Memory;
use runtime::Runtime;
use std::path::PathBuf;

/// How a job's OMPD libraries are found and run.
#[derive(Debug, Clone, Default)]
pub struct OmpdOptions {
    /// The library to use whatever the runtime names (`--ompd PATH`).
    pub library: Option<PathBuf>,
    /// Whether libraries run in a child (every OMPD library is foreign to mqd: isolated
    /// unless `Never`).
    pub isolation: Isolation,
    /// The program that serves `ompd-host DLL` (mqd itself); without one, libraries
    /// run in process.
    pub helper: Option<Helper>,
}

/// What the process's code says of an address, for the caller to give.
#[derive(Clone, Copy)]
pub struct Code<'a> {
    /// The function at an address.
    pub function_at: &'a dyn Fn(u64) -> Option<String>,
    /// The source line of an address ("solver.c:120").
    pub line_at: &'a dyn Fn(u64) -> Option<String>,
}

/// The OpenMP view of a job's processes: each process read by a fresh instance of its
/// runtime's library (a child of its own, or loaded anew in process).
pub struct OpenMpReader {
    options: OmpdOptions,
    /// What the library asked of the last process read (none: not asked).
    pub last: Option<Counters>,
}

impl OpenMpReader {
    /// A reader with `options`.
    pub fn new(options: OmpdOptions) -> OpenMpReader {
        OpenMpReader {
            options,
            last: None,
        }
    }

    /// Reads the OpenMP threads of the process of `space` and `memory`, whose threads
    /// are `os` (kernel id and thread pointer), into `threads` (the model's, matched by
    /// kernel id). `code` names a task's function and a region's line. What kept the view
    /// from being read or whole goes to `notes`; what the library asked, to
    /// [`OpenMpReader::last`].
    pub fn read(
        &mut self,
        space: &AddressSpace,
        memory: &dyn Memory,
        os: &[OsThread],
        threads: &mut [mqd_model::ThreadStack],
        notes: &mut Vec<String>,
        code: Code,
    ) {
        self.last = None;
        let library = match runtime::find(space, memory) {
            Runtime::Absent | Runtime::NotStarted(_) => return,
            Runtime::Gomp(path) => {
                notes.push(format!(
                    "OpenMP: GCC's libgomp ({}) has no OMPD library (no released GCC ships one), so its threads' states are unknown: they are shown by their stacks only",
                    path.display()
                ));
                return;
            }
            Runtime::Stripped(path) => match self.options.library.clone() {
                Some(library) => library,
                None => {
                    notes.push(format!(
                        "OpenMP: the runtime {} is stripped of the symbols its OMPD library reads (ompd_dll_locations, ompd_state, __kmp_threads...), so its threads' states are unknown: install the runtime's debug symbols, or use a runtime that keeps them (PyPI's intel-openmp does)",
                        path.display()
                    ));
                    return;
                }
            },
            Runtime::Found {
                runtime,
                libraries,
                named,
            } => match self
                .options
                .library
                .clone()
                .or_else(|| libraries.into_iter().next())
            {
                Some(library) => library,
                None => {
                    notes.push(format!(
                        "OpenMP: the runtime {} names its OMPD library {}, which is not on this host: give its path with --ompd PATH",
                        runtime.display(),
                        named.join(", ")
                    ));
                    return;
                }
            },
        };
        let started = std::time::Instant::now();
        let source = target::TargetSource::new(space, memory);
        let result = self.inspect(&library, &source, os);
        let inspection = match result {
            Ok(inspection) => inspection,
            Err(why) => {
                notes.push(format!("OpenMP threads not read: {why}"));
                return;
            }
        };
        if inspection.untracked {
            notes.push(
                "OpenMP thread states are not tracked: the runtime tracks them only with OMP_DEBUG=enabled in the job's environment".into(),
            );
        }
        merge(inspection.threads, threads, code.function_at);
        mqd_model::regions::locate_regions(threads, code.line_at);
        let counters = Counters {
            microseconds: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            ..inspection.counters
        };
        self.last = Some(counters);
    }

    /// Reads a process with a fresh instance of `library`: a child of its own, or a
    /// private copy in process (a library may keep what it read of one process, and stay
    /// loaded once loaded: Intel's does both).
    fn inspect(
        &self,
        library: &std::path::Path,
        source: &dyn callbacks::Source,
        os: &[OsThread],
    ) -> Result<Inspection, String> {
        match &self.options.helper {
            Some(helper) if self.options.isolation != Isolation::Never => {
                OmpdHost::new(helper, library).inspect(source, os)
            }
            _ => inspect::inspect(&OmpdLibrary::load_private(library)?, source, os),
        }
    }
}

/// Puts each OpenMP thread's view on the model's thread of the same kernel id.
fn merge(
    found: Vec<inspect::Found>,
    threads: &mut [mqd_model::ThreadStack],
    name: &dyn Fn(u64) -> Option<String>,
) {
    for f in found {
        let Some(thread) = threads.iter_mut().find(|t| t.tid == f.tid) else {
            continue;
        };
        let mut openmp = f.thread;
        if let (Some(task), Some(address)) = (openmp.task.as_mut(), f.task_function) {
            task.function = Some(name(address).unwrap_or_else(|| format!("{address:#x}")));
        }
        thread.openmp = Some(openmp);
    }
}
