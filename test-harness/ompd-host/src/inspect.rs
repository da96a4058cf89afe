//! One process through an OMPD library: each thread's state, team number, regions and
//! task. Every handle the library makes is released before the process's handle, and
//! every string it gives is freed with the allocator it got it from.

use crate::abi::{self, Handle};
use crate::callbacks::{Counters, OsThread, Source, Space};
use crate::library::OmpdLibrary;
use crate::names::Icvs;
use mqd_model::{OpenMpRegion, OpenMpTask, OpenMpThread};
use serde::{Deserialize, Serialize};
use std::ffi::c_int;

/// Deepest nesting of regions followed: a corrupt team's parent chain is no loop.
const MAX_LEVELS: usize = 64;

/// One OpenMP thread of the process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// Its kernel id.
    pub tid: i32,
    /// What the runtime says of it (its task's function still unnamed).
    pub thread: OpenMpThread,
    /// Its task's function's address, for the caller to name.
    pub task_function: Option<u64>,
}

/// What the library said of one process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    /// The OpenMP threads, in the order given.
    pub threads: Vec<Found>,
    /// The OpenMP version the runtime implements (`ompd_get_omp_version`: 201811...).
    pub omp_version: Option<i64>,
    /// The runtime tracks no states (`OMP_DEBUG` unset in the process's environment).
    pub untracked: bool,
    /// What the library asked.
    pub counters: Counters,
}

/// Reads `threads` of the process `source` serves through `library`.
pub fn inspect(
    library: &OmpdLibrary,
    source: &dyn Source,
    threads: &[OsThread],
) -> Result<Inspection, String> {
    let e = &library.entry;
    let space = Space::new(source, threads);
    let mut process: *mut Handle = std::ptr::null_mut();
    // SAFETY: the space outlives every handle made with it (released below).
    let rc = unsafe { (e.process_initialize)(space.as_context(), &mut process) };
    if rc != abi::RC_OK || process.is_null() {
        return Err(match rc {
            abi::RC_UNAVAILABLE | abi::RC_ERROR => format!(
                "the OMPD library {} cannot read this process's OpenMP runtime ({}): a runtime without its symbols (stripped), or one that does not match the library",
                library.path.display(),
                abi::rc_name(rc)
            ),
            _ => format!("ompd_process_initialize failed: {}", abi::rc_name(rc)),
        });
    }
    let mut found = Inspection::default();
    let mut version = 0i64;
    // SAFETY: a live process handle, an out pointer to a local.
    if unsafe { (e.get_omp_version)(process, &mut version) } == abi::RC_OK {
        found.omp_version = Some(version);
    }
    // A library's instance reads one process: its numbers are asked once per process.
    let icvs = &Icvs::of(e.enumerate_icvs, process);
    let mut regions = Regions::default();
    for thread in threads {
        if let Some(t) = one_thread(library, process, icvs, &mut regions, thread, &mut found) {
            found.threads.push(t);
        }
    }
    regions.release(library);
    // SAFETY: every handle made with it is released.
    unsafe { (e.rel_address_space_handle)(process) };
    found.counters = space.counters();
    Ok(found)
}

/// One thread: `None` if the runtime does not know it (not an OpenMP thread).
fn one_thread(
    library: &OmpdLibrary,
    process: *mut Handle,
    icvs: &Icvs,
    regions: &mut Regions,
    os: &OsThread,
    found: &mut Inspection,
) -> Option<Found> {
    let e = &library.entry;
    let mut thread: *mut Handle = std::ptr::null_mut();
    // A pthread_t first (Intel's library takes no other), then the kernel's id.
    let by_pthread = os.pthread.map(|p| {
        // SAFETY: a live process handle; the id is 8 bytes as its kind says.
        unsafe {
            (e.get_thread_handle)(
                process,
                abi::THREAD_ID_PTHREAD,
                8,
                (&p as *const u64).cast(),
                &mut thread,
            )
        }
    });
    if by_pthread != Some(abi::RC_OK) {
        let lwp = u64::try_from(os.tid).ok()?;
        // SAFETY: as above.
        let rc = unsafe {
            (e.get_thread_handle)(
                process,
                abi::THREAD_ID_LWP,
                8,
                (&lwp as *const u64).cast(),
                &mut thread,
            )
        };
        if rc != abi::RC_OK {
            return None;
        }
    }
    if thread.is_null() {
        return None;
    }
    let mut out = OpenMpThread::default();
    let (mut state, mut wait) = (0i64, 0u64);
    // SAFETY: a live thread handle, out pointers to locals.
    match unsafe { (e.get_state)(thread, &mut state, &mut wait) } {
        abi::RC_OK => {
            out.state_value = Some(state);
            out.state = Some(icvs.state_name(e.enumerate_states, process, state));
            out.wait_id = (wait != 0).then_some(wait);
        }
        abi::RC_NEEDS_STATE_TRACKING => found.untracked = true,
        _ => {}
    }
    out.thread_num = icvs
        .thread_num
        .and_then(|id| library.icv(thread, abi::SCOPE_THREAD, id))
        .filter(|&n| n >= 0);
    // Its regions, innermost first; the initial thread's implicit one (level 0) is no
    // region of the program's.
    let mut parallel: *mut Handle = std::ptr::null_mut();
    // SAFETY: as above.
    let mut rc = unsafe { (e.get_curr_parallel_handle)(thread, &mut parallel) };
    while rc == abi::RC_OK && !parallel.is_null() && out.regions.len() < MAX_LEVELS {
        let level = icvs
            .levels
            .and_then(|id| library.icv(parallel, abi::SCOPE_PARALLEL, id));
        if level == Some(0) {
            // SAFETY: made above, released once.
            unsafe { (e.rel_parallel_handle)(parallel) };
            break;
        }
        out.regions.push(OpenMpRegion {
            id: regions.id_of(library, parallel),
            team_size: icvs
                .team_size
                .and_then(|id| library.icv(parallel, abi::SCOPE_PARALLEL, id)),
            level,
            ..OpenMpRegion::default()
        });
        let mut enclosing: *mut Handle = std::ptr::null_mut();
        // SAFETY: a live parallel handle (kept by `regions`), an out pointer.
        rc = unsafe { (e.get_enclosing_parallel_handle)(parallel, &mut enclosing) };
        parallel = enclosing;
    }
    let mut task: *mut Handle = std::ptr::null_mut();
    let mut task_function = None;
    // SAFETY: as above.
    if unsafe { (e.get_curr_task_handle)(thread, &mut task) } == abi::RC_OK && !task.is_null() {
        let mut entry = abi::Address::default();
        // SAFETY: a live task handle, an out pointer.
        if unsafe { (e.get_task_function)(task, &mut entry) } == abi::RC_OK && entry.address != 0 {
            task_function = Some(entry.address);
        }
        out.task = Some(OpenMpTask {
            function: None,
            implicit: icvs
                .implicit_task
                .and_then(|id| library.icv(task, abi::SCOPE_TASK, id))
                .map(|v| v != 0),
        });
        // SAFETY: made above, released once.
        unsafe { (e.rel_task_handle)(task) };
    }
    // SAFETY: made above, released once.
    unsafe { (e.rel_thread_handle)(thread) };
    Some(Found {
        tid: os.tid,
        thread: out,
        task_function,
    })
}

/// The regions met so far in the process, each numbered by its first meeting; their
/// handles kept for comparing, released at the end.
#[derive(Default)]
struct Regions(Vec<*mut Handle>);

impl Regions {
    fn id_of(&mut self, library: &OmpdLibrary, handle: *mut Handle) -> u32 {
        let e = &library.entry;
        for (i, &known) in self.0.iter().enumerate() {
            let mut cmp: c_int = 1;
            // SAFETY: two live parallel handles, an out pointer.
            if unsafe { (e.parallel_handle_compare)(known, handle, &mut cmp) } == abi::RC_OK
                && cmp == 0
            {
                return i as u32;
            }
        }
        self.0.push(handle);
        (self.0.len() - 1) as u32
    }

    fn release(self, library: &OmpdLibrary) {
        for handle in self.0 {
            // SAFETY: each made once by the library, released once.
            unsafe { (library.entry.rel_parallel_handle)(handle) };
        }
    }
}
