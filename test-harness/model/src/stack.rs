//! Where each thread of a process is: its stack, innermost frame first.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One frame of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The instruction address (for a caller, its return address).
    pub address: u64,
    /// The function containing it, from the object's symbol tables (for an inlined
    /// frame, from its DWARF).
    pub function: Option<String>,
    /// The object (executable or shared library) it is in.
    pub object: Option<String>,
    /// The address's offset from the function's start.
    pub offset: u64,
    /// The source file, from the object's DWARF line table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The source line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A function inlined at this address into the frame that follows: no frame of its
    /// own on the stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The frame is in the MPI library (the object that defines `MPI_Init`, or one it
    /// loads for it: its transports, its process manager's client).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mpi: bool,
    /// The language of a frame of an interpreter's own stack (a Python function, read
    /// from the interpreter's memory): its function, file and line are the source's, and
    /// it has no address. Absent for machine code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
}

/// The language of an interpreted frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// CPython's.
    Python,
}

/// The stack of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStack {
    /// Its thread id.
    pub tid: i32,
    /// Its frames, innermost first.
    pub frames: Vec<Frame>,
    /// Why the walk ended before the stack's base, if it did (a corrupt stack, an
    /// address outside every object, the depth cap).
    pub truncated: Option<String>,
    /// The arguments of the MPI call it is in, where the debug information locates
    /// them in its frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallArguments>,
    /// What the OpenMP runtime says of it, through its OMPD library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<crate::openmp::OpenMpThread>,
}

/// What an MPI call was given, read from its frame through DWARF location expressions;
/// `None` for what is not an argument of the call, or is optimized out there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallArguments {
    /// The function whose frame they were read from (`PMPI_Recv`, `internal_Recv`).
    pub function: String,
    /// The communicator handle (`MPI_Comm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<i64>,
    /// The communicator object's address in the process (MPICH's `MPIR_Comm`): what the
    /// message-queue library gives as the communicator's unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_address: Option<u64>,
    /// The communicator's context id: the same in every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<i64>,
    /// The source or destination, a rank of the communicator; `MPI_ANY_SOURCE` and
    /// `MPI_PROC_NULL` as MPICH's ABI spells them (-2, -1), whatever the library's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<i64>,
    /// The tag; `MPI_ANY_TAG` as MPICH's ABI spells it (-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    /// The root of a rooted collective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<i64>,
    /// The source of `MPI_Sendrecv`'s receive (its `peer` and `tag` are the send's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_peer: Option<i64>,
    /// The tag of `MPI_Sendrecv`'s receive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_tag: Option<i64>,
    /// `MPI_Intercomm_create`'s remote leader, an `MPI_COMM_WORLD` rank, as the hang
    /// recorder keeps it at the local leader: whose group is the remote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_leader: Option<i32>,
    /// The requests of a wait call (`MPI_Wait`, the array of `MPI_Waitall`...): each
    /// handle's object address, `None` for a handle not followed (an indirect one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<Option<u64>>,
    /// The MPI function the caller's call instruction calls (through its PLT slot's
    /// relocation), when read from the caller's side: what names the call where no frame
    /// of the MPI library carries an MPI name (Intel MPI's stubs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called: Option<String>,
    /// The predefined communicator `comm` is (`MPI_COMM_WORLD`, `MPI_COMM_SELF`), in
    /// whichever ABI the MPI library has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predefined: Option<String>,
    /// The communicator's members, COMM_WORLD ranks in local rank order, read from the
    /// MPI library's own object where it has no debug information to say them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<i32>>,
    /// An intercommunicator's remote group, COMM_WORLD ranks in its rank order, as the
    /// hang recorder keeps it: whom the call's peer names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<Vec<i32>>,
    /// The message's size in bytes, where its count and datatype are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// For a collective call: which collective on its communicator it is in the rank's
    /// order (1 for the first), as the hang recorder counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<u64>,
    /// Its communicator's lineage, as the hang recorder keeps it: what names the
    /// communicator alike in every member, with its members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<u64>,
    /// An `MPI_Wait` that waits for a synchronous send (`MPI_Issend`, `MPI_Ssend_init`),
    /// as the hang recorder's request table keeps it: it returns only once a receive
    /// takes the message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synchronous: bool,
    /// A wait on a nonblocking collective's request, as the hang recorder's request
    /// table keeps it: that collective (`MPI_Ibarrier`), whose communicator, root and
    /// place among its communicator's collectives these arguments are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<String>,
    /// Where each argument was read ("dest": "a constant in the caller's code").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
    /// The arguments of the call that could not be read, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, String>,
}

impl Frame {
    /// "file.c:88": the source file's name and line, when known.
    pub fn source(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}:{}", self.line?))
    }

    /// The frame as a stack listing shows it: a Python frame with its source
    /// (`step (solver.py:88)`), a Cython function by its Python name
    /// (`mpi4py.MPI.Comm.ssend`), anything else by [`Frame::name`].
    pub fn label(&self) -> String {
        let name = self.name();
        match (self.language, self.source()) {
            (Some(Language::Python), Some(at)) => format!("{name} ({at})"),
            (Some(Language::Python), None) => name,
            (None, _) => display_name(&name),
        }
    }

    /// [`Frame::label`] with the frame's source line (`halo::exchange (halo.f90:17)`),
    /// when the DWARF says it: how a program's own frames are shown.
    pub fn label_with_source(&self) -> String {
        match (self.language, self.source()) {
            (None, Some(at)) => format!("{} ({at})", self.label()),
            _ => self.label(),
        }
    }

    /// The function's name, else `object+0xoffset`, else the address.
    pub fn name(&self) -> String {
        match (&self.function, &self.object) {
            (Some(f), _) => f.clone(),
            (None, Some(o)) => format!("{}+{:#x}", o.rsplit('/').next().unwrap_or(o), self.offset),
            (None, None) => format!("{:#x}", self.address),
        }
    }
}

/// A function's name as its source spells it: a Cython function by its Python name
/// ([`cython_name`]), a Fortran module procedure as `module::procedure`
/// (`__halo_MOD_exchange`), a procedure the compiler numbered (`inner.0`, a Fortran
/// internal procedure) by its own name; anything else as it is.
pub fn display_name(symbol: &str) -> String {
    if let Some(python) = cython_name(symbol) {
        return python;
    }
    if let Some(rest) = symbol.strip_prefix("__")
        && let Some((module, procedure)) = rest.split_once("_MOD_")
        && !module.is_empty()
        && !procedure.is_empty()
    {
        return format!("{module}::{procedure}");
    }
    match symbol.rsplit_once('.') {
        Some((base, n))
            if !base.is_empty()
                && !base.contains('.')
                && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base.to_owned()
        }
        _ => symbol.to_owned(),
    }
}

/// The Python name of a function Cython generated for a Python-callable one
/// (`__pyx_pw_6mpi4py_3MPI_4Comm_257ssend`: the module, class and function names, each
/// after its length, the function's after a counter): `mpi4py.MPI.Comm.ssend`.
pub fn cython_name(symbol: &str) -> Option<String> {
    let mut rest = symbol.strip_prefix("__pyx_pw_")?;
    let mut parts: Vec<&str> = Vec::new();
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest[..digits].parse().ok()?;
        let after = &rest[digits..];
        match after.get(..len) {
            // A length-prefixed name followed by another part.
            Some(part) if after[len..].starts_with('_') && !after[len + 1..].is_empty() => {
                parts.push(part);
                rest = &after[len + 1..];
            }
            // The counter and the function's name.
            _ => {
                if after.is_empty() || after.starts_with(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                parts.push(after);
                return (parts.len() >= 2).then(|| parts.join("."));
            }
        }
    }
}

/// One frame of stacks merged across ranks (a prefix tree from the outermost frame).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackNode {
    /// The frame's name.
    pub frame: String,
    /// The ranks whose stacks pass through it.
    pub ranks: crate::rank_set::RankSet,
    /// How many threads do.
    pub threads: usize,
    /// Why walks that ended here stopped, if they ended early.
    pub truncated: Option<String>,
    /// Its callees.
    pub children: Vec<StackNode>,
}

pub use crate::calls::CallClass;

/// Where a thread is with respect to MPI: the call the program made into the MPI library
/// (the outermost frame of the MPI library below the program's frames), or where it is
/// outside MPI.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// In an MPI call.
    InMpi {
        /// Its name, without the profiling `P` (`MPI_Allreduce`); for an entry point
        /// without a name (a stub that jumps into an unnamed function), the frame as
        /// named (`libmpi.so.12+0x23d210`), with class `unknown`.
        call: String,
        /// What it waits for.
        class: CallClass,
    },
    /// A thread the MPI library started itself (progress, transport, PMI): it runs no
    /// code of the program.
    MpiThread,
    /// Not in MPI: computing, or waiting for something outside MPI, in this function.
    Outside {
        /// The innermost frame's function, when named.
        function: Option<String>,
        /// Its source line, "file.c:88", when the DWARF says it.
        source: Option<String>,
        /// It waits for another thread of its process (a lock, a condition variable, a
        /// join, an OpenMP barrier) with no time limit: the primitive it waits in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waits: Option<String>,
    },
    /// Unknown: the walk ended early (a corrupt stack, code it could not unwind) before
    /// any MPI frame, so the thread may still be inside MPI.
    Unknown,
}

/// Functions a thread of the C library or an OpenMP runtime waits in until another
/// thread of its process wakes it, with no time limit. (`pthread_join` tail-calls
/// `__pthread_clockjoin_ex`; its timed forms name themselves in an outer frame.)
const WAITS_FOR_THREADS: &[&str] = &[
    "pthread_cond_wait",
    "__pthread_cond_wait",
    "___pthread_cond_wait",
    "pthread_join",
    "__pthread_join",
    "___pthread_join",
    "__pthread_clockjoin_ex",
    "pthread_mutex_lock",
    "__pthread_mutex_lock",
    "___pthread_mutex_lock",
    "__pthread_mutex_lock_full",
    "__lll_lock_wait",
    "pthread_rwlock_rdlock",
    "__pthread_rwlock_rdlock",
    "___pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "__pthread_rwlock_wrlock",
    "___pthread_rwlock_wrlock",
    "pthread_barrier_wait",
    "___pthread_barrier_wait",
    "sem_wait",
    "__new_sem_wait",
    "__new_sem_wait_slow64",
    "gomp_barrier_wait_end",
    "gomp_team_barrier_wait_end",
    "gomp_team_barrier_wait_final",
    "gomp_simple_barrier_wait",
    "gomp_mutex_lock_slow",
    "gomp_sem_wait_slow",
    "__kmp_suspend_64",
    "__kmp_suspend_32",
    "__kmp_suspend_oncore",
    "__kmp_fork_barrier",
    "__kmp_join_barrier",
    "__kmp_barrier",
    "__kmp_hyper_barrier_gather",
    "__kmp_hyper_barrier_release",
    "__kmp_wait_template",
    "__kmp_wait_4",
    "__kmp_wait_yield_4",
];

/// Functions whose waits end by themselves (a time limit, a try): a thread in them runs on.
const TIMED: &[&str] = &[
    "timedwait",
    "clockwait",
    "timedjoin",
    "clockjoin_np",
    "tryjoin",
    "timedlock",
    "clocklock",
    "trylock",
    "timedrdlock",
    "timedwrlock",
];

/// Frames that start a thread, and nothing of the program: `clone3` -> `start_thread`.
fn thread_glue(f: &Frame) -> bool {
    match f.function.as_deref() {
        Some(name) => matches!(
            name,
            "start_thread"
                | "clone"
                | "clone3"
                | "__clone"
                | "__clone3"
                | "__GI___clone"
                | "__GI___clone3"
                | "__start_thread"
        ),
        // An unnamed frame of the C library (its thread start without symbols).
        None => f.object.as_deref().is_some_and(|o| {
            o.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
        }),
    }
}

impl Frame {
    /// Whether this frame is MPI's: in the MPI library (as the debugger found it), or
    /// named as an MPI procedure (`MPI_`, `PMPI_`, `MPIX_`, Fortran's `mpi_x_`).
    pub fn is_mpi(&self) -> bool {
        self.mpi
            || self.function.as_deref().is_some_and(|n| {
                n.starts_with("MPI_")
                    || n.starts_with("PMPI_")
                    || n.starts_with("MPIX_")
                    || n.starts_with("PMPIX_")
                    || crate::calls::canonical(n).is_some()
            })
    }
}

impl Frame {
    /// Whether the frame is in the program's own executable (`program`, as the rank's
    /// dump names it) and not MPI's.
    pub fn in_program(&self, program: Option<&str>) -> bool {
        !self.is_mpi() && self.language.is_none() && same_file(self.object.as_deref(), program)
    }
}

/// Whether an object's path is the program's: the same path, or the same file name when
/// the program is named as launched (`./solver`, relative to a directory unknown here).
fn same_file(object: Option<&str>, program: Option<&str>) -> bool {
    // `/job/./solver` is `/job/solver`.
    let clean = |s: &str| {
        s.split('/')
            .filter(|c| *c != ".")
            .collect::<Vec<_>>()
            .join("/")
    };
    match (object, program) {
        (Some(o), Some(p)) if clean(o) == clean(p) => true,
        (Some(o), Some(p)) if !p.starts_with('/') => {
            let name = |s: &str| s.rsplit('/').next().map(str::to_owned);
            name(o) == name(p)
        }
        _ => false,
    }
}

impl ThreadStack {
    /// A thread whose frames, innermost first, are named `frames`, with `call`'s
    /// arguments: what tests and fixtures build on.
    pub fn named(tid: i32, frames: &[&str], call: Option<CallArguments>) -> ThreadStack {
        ThreadStack {
            openmp: None,
            tid,
            frames: frames
                .iter()
                .map(|f| Frame {
                    function: Some((*f).to_owned()),
                    ..Frame::default()
                })
                .collect(),
            truncated: None,
            call,
        }
    }

    /// Where the thread is with respect to MPI; outside it, the innermost Python frame
    /// (the rank runs an interpreter) or the innermost frame of `program` (the rank's
    /// executable) names where it computes.
    pub fn location_in(&self, program: Option<&str>) -> Location {
        match self.location() {
            Location::Outside {
                function,
                source,
                waits,
            } => {
                let python = self
                    .frames
                    .iter()
                    .find(|f| f.language == Some(Language::Python));
                match python.or_else(|| {
                    self.frames
                        .iter()
                        .find(|f| f.function.is_some() && same_file(f.object.as_deref(), program))
                }) {
                    Some(f) => Location::Outside {
                        function: f.function.as_deref().map(|n| match f.language {
                            Some(_) => n.to_owned(),
                            None => display_name(n),
                        }),
                        source: f.source(),
                        waits,
                    },
                    None => Location::Outside {
                        function,
                        source,
                        waits,
                    },
                }
            }
            inside => inside,
        }
    }

    /// Where the thread is with respect to MPI.
    pub fn location(&self) -> Location {
        // Outermost first: the entry point the program called.
        let Some(entry) = self.frames.iter().rposition(Frame::is_mpi) else {
            if self.truncated.is_some() || self.frames.is_empty() {
                return Location::Unknown;
            }
            // The OpenMP runtime's own word first, for a stack walked whole (a thread
            // whose walk stopped early may be in a task, or in MPI, below its state).
            // A thread that runs a task from its wait runs the program's code: the state
            // is believed where the runtime's own code is the innermost of the stack.
            let openmp = self
                .openmp
                .as_ref()
                .filter(|_| self.innermost_in_openmp_runtime())
                .and_then(|o| o.waits_for_threads());
            return Location::Outside {
                function: self.frames.first().and_then(|f| f.function.clone()),
                source: self.frames.first().and_then(Frame::source),
                waits: openmp.or_else(|| self.waits_for_threads()),
            };
        };
        // Nothing of the program's outside the MPI library: a thread MPI started.
        if self.truncated.is_none() && self.frames[entry + 1..].iter().all(thread_glue) {
            return Location::MpiThread;
        }
        let frame = &self.frames[entry];
        // Unnamed entry points (Intel MPI's): the call the caller's code makes names it.
        let called = self
            .call
            .as_ref()
            .and_then(|c| c.called.as_deref())
            .filter(|_| {
                frame
                    .function
                    .as_deref()
                    .and_then(crate::calls::canonical)
                    .is_none()
            });
        if let Some(name) = called
            && let Some(call) = crate::calls::canonical(name)
        {
            return Location::InMpi {
                class: call.class,
                call: name.to_owned(),
            };
        }
        match frame.function.as_deref().and_then(crate::calls::binding) {
            Some(binding) => {
                let name = frame.function.as_deref().unwrap_or_default();
                let name = name.strip_prefix('P').unwrap_or(name);
                // The C name as the program called it: `MPI_Send_c` stays itself; a
                // Fortran binding (`pmpi_recv_`, Open MPI's `MPI_Barrier_f08`) is its call.
                let call_name = if binding.fortran {
                    binding.call.name.to_owned()
                } else {
                    name.to_owned()
                };
                Location::InMpi {
                    class: binding.call.class,
                    call: call_name,
                }
            }
            None => Location::InMpi {
                call: frame.name(),
                class: CallClass::Unknown,
            },
        }
    }

    /// Whether the innermost frame beside the C library's is the OpenMP runtime's
    /// (`libiomp5`, `libomp`, `libgomp`).
    fn innermost_in_openmp_runtime(&self) -> bool {
        let name = |f: &Frame| {
            f.object
                .as_deref()
                .and_then(|o| o.rsplit('/').next())
                .map(str::to_owned)
        };
        let system = |n: &str| {
            ["libc.so", "libc-", "libpthread", "ld-linux", "ld-"]
                .iter()
                .any(|p| n.starts_with(p))
        };
        self.frames
            .iter()
            .filter_map(name)
            .find(|n| !system(n))
            .is_some_and(|n| {
                ["libiomp5", "libomp.", "libomp-", "libgomp."]
                    .iter()
                    .any(|p| n.starts_with(p))
            })
    }

    /// The primitive a thread outside MPI waits in for another thread of its process,
    /// without time limit: searched among its innermost frames (the C library's and the
    /// OpenMP runtime's, up to the first frame of other code).
    fn waits_for_threads(&self) -> Option<String> {
        let runtime = |f: &Frame| {
            f.object.as_deref().is_none_or(|o| {
                let name = o.rsplit('/').next().unwrap_or(o);
                [
                    "libc.so",
                    "libc-",
                    "libpthread",
                    "ld-linux",
                    "libgomp",
                    "libomp",
                    "libiomp",
                ]
                .iter()
                .any(|p| name.starts_with(p))
            })
        };
        let inner: Vec<&Frame> = self.frames.iter().take_while(|f| runtime(f)).collect();
        let names = || inner.iter().filter_map(|f| f.function.as_deref());
        if names().any(|n| TIMED.iter().any(|t| n.contains(t))) {
            return None;
        }
        let named = names()
            .rfind(|n| WAITS_FOR_THREADS.contains(n))
            .map(str::to_owned);
        // A worker of an OpenMP runtime none of whose frames is the program's: idle in
        // the runtime (at a barrier, waiting for work), whatever its functions are called
        // (a stripped libgomp names none): it waits for its team.
        let openmp = |f: &Frame| {
            f.object.as_deref().is_some_and(|o| {
                let name = o.rsplit('/').next().unwrap_or(o);
                ["libgomp", "libomp", "libiomp"]
                    .iter()
                    .any(|p| name.starts_with(p))
            })
        };
        let idle_worker = self.truncated.is_none()
            && self.frames.iter().any(openmp)
            && self.frames.iter().all(|f| runtime(f) || thread_glue(f));
        named.or_else(|| idle_worker.then(|| "the OpenMP runtime (an idle worker)".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> Frame {
        Frame {
            function: Some(name.to_owned()),
            ..Frame::default()
        }
    }

    fn stack(names: &[&str]) -> ThreadStack {
        ThreadStack {
            openmp: None,
            tid: 1,
            frames: names.iter().map(|n| frame(n)).collect(),
            truncated: None,
            call: None,
        }
    }

    fn outside(function: &str, waits: Option<&str>) -> Location {
        Location::Outside {
            function: Some(function.into()),
            source: None,
            waits: waits.map(str::to_owned),
        }
    }

    #[test]
    fn the_outermost_mpi_frame_is_the_call() {
        let s = stack(&[
            "poll",
            "MPIDI_progress",
            "MPIR_Wait",
            "PMPI_Recv",
            "main",
            "_start",
        ]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Recv".into(),
                class: CallClass::BlockingReceive
            }
        );
        let s = stack(&["MPI_Test", "MPI_Allreduce", "main"]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Allreduce".into(),
                class: CallClass::Collective
            }
        );
        // The large-count binding keeps its name; a Fortran binding is named in C.
        let s = stack(&["poll", "PMPI_Send_c", "send_pickled", "main"]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Send_c".into(),
                class: CallClass::BlockingSend
            }
        );
        let s = stack(&["poll", "pmpi_bcast_", "MAIN__", "main"]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Bcast".into(),
                class: CallClass::Collective
            }
        );
        assert_eq!(stack(&["solve", "main"]).location(), outside("solve", None));
        // A walk that stopped early, with no MPI frame yet, may still be in MPI.
        let cut = ThreadStack {
            truncated: Some("return address 0x10 is in no mapped object".into()),
            ..stack(&["solve"])
        };
        assert_eq!(cut.location(), Location::Unknown);
    }

    #[test]
    fn a_thread_inside_the_mpi_library_is_in_mpi_whatever_its_frames_are_named() {
        let libmpi = |name: Option<&str>| Frame {
            function: name.map(str::to_owned),
            object: Some("/venv/lib/libmpi.so.12".into()),
            offset: 0x23d210,
            mpi: true,
            ..Frame::default()
        };
        // Intel MPI: PMPI_Ssend jumps into an unnamed function; no frame says MPI_.
        let s = ThreadStack {
            frames: vec![
                frame("sched_yield"),
                libmpi(Some("MPID_Progress_wait")),
                libmpi(Some("MPIR_Wait")),
                libmpi(None),
                frame("main"),
            ],
            ..stack(&[])
        };
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "libmpi.so.12+0x23d210".into(),
                class: CallClass::Unknown
            }
        );
        // A thread MPI started itself runs none of the program's code.
        let s = ThreadStack {
            frames: vec![
                frame("epoll_wait"),
                libmpi(Some("progress_engine")),
                frame("start_thread"),
                frame("clone3"),
            ],
            ..stack(&[])
        };
        assert_eq!(s.location(), Location::MpiThread);
        // An unknown MPI_ name is an unknown call, never computing.
        assert_eq!(
            stack(&["poll", "MPI_Frobnicate", "main"]).location(),
            Location::InMpi {
                call: "MPI_Frobnicate".into(),
                class: CallClass::Unknown
            }
        );
    }

    #[test]
    fn threads_waiting_for_their_own_process_are_told_from_running_ones() {
        let s = stack(&[
            "__futex_abstimed_wait_common",
            "__pthread_cond_wait_common",
            "___pthread_cond_wait",
            "wait_for_work",
            "main",
        ]);
        assert_eq!(
            s.location(),
            outside("__futex_abstimed_wait_common", Some("___pthread_cond_wait"))
        );
        let timed = stack(&[
            "__futex_abstimed_wait_common",
            "__pthread_cond_wait_common",
            "___pthread_cond_timedwait64",
            "wait_for_work",
        ]);
        assert_eq!(
            timed.location(),
            outside("__futex_abstimed_wait_common", None)
        );
        let barrier = stack(&["futex_wait", "gomp_team_barrier_wait_end", "main._omp_fn.0"]);
        assert_eq!(
            barrier.location(),
            outside("futex_wait", Some("gomp_team_barrier_wait_end"))
        );
        // Sleeping, reading: a wait that something outside ends.
        assert_eq!(
            stack(&["clock_nanosleep", "usleep", "solve"]).location(),
            outside("clock_nanosleep", None)
        );
    }
}

#[cfg(test)]
mod python_tests {
    use super::*;

    #[test]
    fn cython_functions_are_named_as_python_names_them() {
        assert_eq!(
            cython_name("__pyx_pw_6mpi4py_3MPI_4Comm_257ssend").as_deref(),
            Some("mpi4py.MPI.Comm.ssend")
        );
        assert_eq!(
            cython_name("__pyx_pw_5numpy_6random_7_common_12check_array").as_deref(),
            Some("numpy.random._common.check_array")
        );
        for not in [
            "PMPI_Send",
            "__pyx_pw_",
            "__pyx_pw_x",
            "__pyx_pw_3abc",
            "__pyx_pw_6mpi4py_12",
        ] {
            assert_eq!(cython_name(not), None, "{not}");
        }
    }

    #[test]
    fn a_python_rank_outside_mpi_is_where_its_innermost_python_frame_is() {
        let python = |function: &str, line| Frame {
            function: Some(function.to_owned()),
            file: Some("/app/solver.py".to_owned()),
            line: Some(line),
            language: Some(Language::Python),
            ..Frame::default()
        };
        let native = |function: &str| Frame {
            function: Some(function.to_owned()),
            object: Some("/usr/bin/python3.11".to_owned()),
            ..Frame::default()
        };
        let stack = ThreadStack {
            openmp: None,
            tid: 1,
            frames: vec![
                native("long_add"),
                python("integrate", 42),
                python("<module>", 7),
            ],
            truncated: None,
            call: None,
        };
        assert_eq!(
            stack.location_in(Some("/usr/bin/python3.11")),
            Location::Outside {
                function: Some("integrate".into()),
                source: Some("solver.py:42".into()),
                waits: None
            }
        );
        assert_eq!(stack.frames[1].label(), "integrate (solver.py:42)");
        assert_eq!(stack.frames[0].label(), "long_add");
    }

    #[test]
    fn fortran_and_numbered_procedures_are_named_as_their_source_does() {
        assert_eq!(display_name("__halo_MOD_exchange"), "halo::exchange");
        assert_eq!(display_name("__my_mod_MOD_do_it"), "my_mod::do_it");
        assert_eq!(display_name("inner.0"), "inner");
        // GCC's clones keep their names.
        assert_eq!(display_name("solve.constprop.0"), "solve.constprop.0");
        assert_eq!(display_name("main"), "main");
        assert_eq!(display_name("__libc_start_main"), "__libc_start_main");
        assert_eq!(display_name("_MOD_"), "_MOD_");
        let frame = Frame {
            function: Some("__halo_MOD_exchange".into()),
            file: Some("/src/halo.f90".into()),
            line: Some(17),
            ..Frame::default()
        };
        assert_eq!(frame.label_with_source(), "halo::exchange (halo.f90:17)");
        assert_eq!(frame.label(), "halo::exchange");
    }
}
