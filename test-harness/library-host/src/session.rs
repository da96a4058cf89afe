//! A debugger session: what TotalView or padb do with an MQD library, step by step.
//!
//! A [`Session`] owns the processes it debugs. [`Session::add_process`] runs the setup
//! sequence (`mqs_setup_image`, `mqs_image_has_queues`, `mqs_setup_process`,
//! `mqs_process_has_queues`); [`Session::display`] is one message-queue window: update
//! the communicator list, walk the communicators and, in each, the pending receives,
//! unexpected messages and pending sends. Everything the library asks of the debugger
//! meanwhile is counted ([`Counters`]).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use mqd_library_host::library::MqsLibrary;
//! # use mqd_library_host::session::{Session, SessionOptions};
//! # fn target() -> Box<dyn mqd_target::Target> { unimplemented!() }
//! let lib = Arc::new(MqsLibrary::load("target/debug/libmqd_mpich.so")?);
//! let mut dbg = Session::new(lib, SessionOptions::default());
//! let p = dbg.add_process(target(), 0)?;
//! for comm in dbg.display(p)?.communicators {
//!     println!("{} ({} ranks): {} pending receives", comm.name, comm.size,
//!              comm.pending_receives.ops().len());
//! }
//! assert_eq!(dbg.counters().outstanding_allocations, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every call into the library is raw FFI: the harness hands it only live pointers,
//! bounds every loop it drives, and reports anything unexpected as an [`MqsError`].
// Matching on the ABI's result codes by their spec names (mqs_ok, ...).
#![allow(non_upper_case_globals)]

use crate::callbacks::{
    IMAGE_CALLBACKS, IMAGE_CALLBACKS_NULL_SIZEOF, ImageContext, PROCESS_CALLBACKS, ProcessContext,
    SessionCounters, SessionScope,
};
use crate::library::{MqsLibrary, RawFunctions, lossy_c_string};
use mqd_abi::types::*;
pub use mqd_model::{Communicator, MqsError, Operation, OperationStatus, Queue};
use mqd_model::{ContextIds, GroupTable, MpiPhase, MpiState, ThreadLevel};
use mqd_target::Target;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};
use std::fmt;
use std::sync::Arc;

pub use crate::callbacks::{CounterHandle, Counters};

/// Harness error: the [`ProcessId`] is not (or no longer) in this session.
pub const HARNESS_UNKNOWN_PROCESS: i32 = -100;
/// Harness error: the library exceeded a loop bound of [`SessionOptions`].
pub const HARNESS_LOOP_BOUND: i32 = -101;
/// Harness error: `mqs_get_communicator` reported a size the harness will not allocate
/// a group for (negative or above [`MAX_GROUP_SIZE`]).
pub const HARNESS_BAD_GROUP_SIZE: i32 = -102;
/// Harness error: `mqs_get_comm_group` wrote past the `size` entries it was given.
pub const HARNESS_GROUP_OVERRUN: i32 = -103;
/// Harness error: the library does not export the function asked for.
pub const HARNESS_NOT_EXPORTED: i32 = -104;

/// Largest communicator group the harness allocates for `mqs_get_comm_group`.
pub const MAX_GROUP_SIZE: i64 = 1 << 24;
/// Number of collective classes in padb's `mqs_get_comm_coll_state` (barrier..scatterv).
pub const COLLECTIVE_CLASSES: usize = 14;

/// Guard entries after a group buffer, to catch a library writing past `size`.
const GROUP_GUARD: [c_int; 4] = [0x6d71_6447; 4];

/// An error the harness itself raised (one of the `HARNESS_*` codes).
fn harness_error(code: i32, text: impl Into<String>) -> MqsError {
    MqsError {
        code,
        text: text.into(),
        message: None,
    }
}

/// Options of one debugger session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// Pass NULL for `mqs_sizeof_fp`, as MPICH's tvtest does (the library must cope).
    pub null_sizeof: bool,
    /// Most communicators one display walks before it is reported as an error.
    pub max_communicators: usize,
    /// Most operations one queue yields before it is reported as an error.
    pub max_operations_per_queue: usize,
    /// Fill the `mqs_communicator`/`mqs_pending_operation` the library writes with 0xA5
    /// instead of zeros, so fields it forgets to set show up.
    pub poison_outputs: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            null_sizeof: false,
            max_communicators: 1_000_000,
            max_operations_per_queue: 10_000_000,
            poison_outputs: false,
        }
    }
}

/// One process of a [`Session`]; only meaningful to the session that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessId(usize);

/// Text of a fixed `char[N]` field: up to the first NUL (or all of it), lossy UTF-8.
fn text_field(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An `mqs_pending_operation` in the model's terms; the notes of our library that the
/// model carries as facts are decoded on the way.
// mqs_tword_t/mqs_taddr_t are C long/unsigned long: i64/u64 only on LP64.
#[allow(clippy::useless_conversion)]
pub fn operation(op: &mqs_pending_operation) -> Operation {
    let extra_text: Vec<String> = op
        .extra_text
        .iter()
        .map(|l| text_field(l))
        .filter(|l| !l.is_empty())
        .collect();
    Operation {
        status: OperationStatus::from_code(op.status),
        desired_local_rank: i64::from(op.desired_local_rank),
        desired_global_rank: i64::from(op.desired_global_rank),
        tag_wild: op.tag_wild != 0,
        desired_tag: i64::from(op.desired_tag),
        desired_length: i64::from(op.desired_length),
        system_buffer: op.system_buffer != 0,
        buffer: u64::from(op.buffer),
        actual_local_rank: i64::from(op.actual_local_rank),
        actual_global_rank: i64::from(op.actual_global_rank),
        actual_tag: i64::from(op.actual_tag),
        actual_length: i64::from(op.actual_length),
        sender: crate::extra_text::sender_of(&extra_text),
        request: crate::extra_text::request_of(&extra_text),
        remote_group: crate::extra_text::remote_group(&extra_text),
        collective: crate::extra_text::collective(&extra_text),
        extra_text,
    }
}

/// One message-queue display of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Display {
    /// The communicators in the library's order.
    pub communicators: Vec<Communicator>,
}

/// The count and activity of one collective class (padb's extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveCount {
    /// How many calls of that collective the communicator has entered.
    pub count: i32,
    /// Non-zero while one is in progress.
    pub active: i32,
}

/// The collective state of one communicator (padb's `mqs_get_comm_coll_state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveState {
    /// `mqs_communicator::unique_id`.
    pub unique_id: u64,
    /// Its name.
    pub name: String,
    /// Per class 0..[`COLLECTIVE_CLASSES`]; `None` where the library had no information.
    pub classes: Vec<Option<CollectiveCount>>,
}

/// One process as the session tracks it.
struct ProcessSlot {
    image: *mut ImageContext,
    process: *mut ProcessContext,
    image_message: Option<String>,
    process_message: Option<String>,
    /// Outcome of the setup sequence; displays of a failed process return it.
    setup: Result<(), MqsError>,
}

/// A debugger session over one loaded library.
///
/// Not `Send`: targets are not, and the library is called from one thread per session
/// (other sessions on other threads may share the library).
pub struct Session {
    lib: Arc<MqsLibrary>,
    options: SessionOptions,
    counters: Arc<SessionCounters>,
    processes: BTreeMap<usize, ProcessSlot>,
    next_id: usize,
    /// The groups of every process of the session, held once.
    groups: std::cell::RefCell<GroupTable>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("library", &self.lib.path())
            .field("options", &self.options)
            .field("processes", &self.processes.len())
            .finish_non_exhaustive()
    }
}

/// Expands a has-queues message: it is a printf template with at most one `%s`.
fn expand_message(template: &str, name: &str) -> String {
    let mut out = String::with_capacity(template.len() + name.len());
    let mut rest = template;
    let mut substituted = false;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('s').filter(|_| !substituted) {
            out.push_str(name);
            substituted = true;
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('%') {
            out.push('%');
            rest = tail;
        } else {
            out.push('%');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Identity, rank, size and name of an `mqs_communicator` in harness types.
#[allow(clippy::useless_conversion)] // C long/unsigned long are i64/u64 only on LP64
fn comm_fields(comm: &mqs_communicator) -> (u64, i64, i64, String) {
    (
        u64::from(comm.unique_id),
        i64::from(comm.local_rank),
        i64::from(comm.size),
        text_field(&comm.name),
    )
}

/// The outcome of one raw call that yields a result code.
fn check(code: c_int) -> Result<(), c_int> {
    if code == mqs_ok { Ok(()) } else { Err(code) }
}

impl Session {
    /// Starts a session; the library stays loaded as long as the session lives.
    pub fn new(lib: Arc<MqsLibrary>, options: SessionOptions) -> Self {
        Session {
            lib,
            options,
            counters: SessionCounters::new(),
            processes: BTreeMap::new(),
            next_id: 0,
            groups: Default::default(),
        }
    }

    /// The library this session uses.
    pub fn library(&self) -> &Arc<MqsLibrary> {
        &self.lib
    }

    /// The options given at creation.
    pub fn options(&self) -> SessionOptions {
        self.options
    }

    fn error(&self, code: c_int, message: Option<String>) -> MqsError {
        let _scope = SessionScope::enter(&self.counters);
        MqsError {
            code,
            text: self.lib.error_string(code),
            message,
        }
    }

    fn slot(&self, p: ProcessId) -> Result<&ProcessSlot, MqsError> {
        self.processes.get(&p.0).ok_or_else(|| {
            harness_error(
                HARNESS_UNKNOWN_PROCESS,
                format!("no process {} in this session", p.0),
            )
        })
    }

    /// Sets up one process: a fresh image (each process has its own addresses), then
    /// the library's image and process setup and their has-queues checks.
    ///
    /// On failure the process stays registered (so the library's state is destroyed
    /// with it, and its messages can be read) and the error is returned.
    pub fn add_process(
        &mut self,
        target: Box<dyn Target>,
        global_rank: i32,
    ) -> Result<ProcessId, MqsError> {
        let id = ProcessId(self.next_id);
        self.next_id += 1;
        let image = ImageContext::create(self.counters.clone(), target);
        let process = ProcessContext::create(self.counters.clone(), image, global_rank);
        self.processes.insert(
            id.0,
            ProcessSlot {
                image,
                process,
                image_message: None,
                process_message: None,
                setup: Ok(()),
            },
        );
        let outcome = self.setup_process(id);
        if let Some(slot) = self.processes.get_mut(&id.0) {
            slot.setup = outcome.clone();
        }
        outcome.map(|()| id)
    }

    fn setup_process(&mut self, id: ProcessId) -> Result<(), MqsError> {
        let raw = *self.lib.raw();
        let image_table: &'static mqs_image_callbacks = if self.options.null_sizeof {
            &IMAGE_CALLBACKS_NULL_SIZEOF
        } else {
            &IMAGE_CALLBACKS
        };
        let slot = self.slot(id)?;
        let (image, process) = (slot.image, slot.process);
        // SAFETY: the contexts are live until the slot is removed.
        let name = unsafe { &*image }.target_name();
        let image_ptr = image as *mut mqs_image;
        let process_ptr = process as *mut mqs_process;

        let scope = SessionScope::enter(&self.counters);
        // SAFETY: live image handle and a static table.
        let code = unsafe { (raw.setup_image)(image_ptr, image_table) };
        drop(scope);
        check(code).map_err(|c| self.error(c, None))?;

        let scope = SessionScope::enter(&self.counters);
        let mut message: *const c_char = std::ptr::null();
        // SAFETY: live image handle and a valid out-pointer; the message is read at once.
        let code = unsafe { (raw.image_has_queues)(image_ptr, &mut message) };
        // SAFETY: the library's message is a static string or NULL.
        let image_message = unsafe { lossy_c_string(message) }.map(|m| expand_message(&m, &name));
        drop(scope);
        if let Some(slot) = self.processes.get_mut(&id.0) {
            slot.image_message = image_message.clone();
        }
        check(code).map_err(|c| self.error(c, image_message))?;

        let scope = SessionScope::enter(&self.counters);
        // SAFETY: live process handle and a static table.
        let code = unsafe { (raw.setup_process)(process_ptr, &PROCESS_CALLBACKS) };
        drop(scope);
        check(code).map_err(|c| self.error(c, None))?;

        let scope = SessionScope::enter(&self.counters);
        let mut message: *mut c_char = std::ptr::null_mut();
        // SAFETY: as for the image.
        let code = unsafe { (raw.process_has_queues)(process_ptr, &mut message) };
        // SAFETY: as for the image.
        let process_message = unsafe { lossy_c_string(message) }.map(|m| expand_message(&m, &name));
        drop(scope);
        if let Some(slot) = self.processes.get_mut(&id.0) {
            slot.process_message = process_message.clone();
        }
        check(code).map_err(|c| self.error(c, process_message))
    }

    /// The process ran and stopped again: same image and process for the library, new
    /// memory. Type handles the library holds stay valid.
    pub fn replace_target(
        &mut self,
        p: ProcessId,
        target: Box<dyn Target>,
    ) -> Result<(), MqsError> {
        let slot = self.slot(p)?;
        // SAFETY: live context; no library call is running (we hold &mut self).
        unsafe { &*slot.image }.replace_target(target);
        Ok(())
    }

    /// The processes of this session, in the order they were added.
    pub fn processes(&self) -> Vec<ProcessId> {
        self.processes.keys().map(|&k| ProcessId(k)).collect()
    }

    /// The outcome of the process's setup sequence.
    pub fn setup_result(&self, p: ProcessId) -> Result<(), MqsError> {
        self.slot(p)?.setup.clone()
    }

    /// The `mqs_process_has_queues` message, `%s` expanded, if the library gave one.
    pub fn process_message(&self, p: ProcessId) -> Option<&str> {
        self.processes.get(&p.0)?.process_message.as_deref()
    }

    /// The `mqs_image_has_queues` message, `%s` expanded, if the library gave one.
    pub fn image_message(&self, p: ProcessId) -> Option<&str> {
        self.processes.get(&p.0)?.image_message.as_deref()
    }

    /// A snapshot of this session's counters.
    pub fn counters(&self) -> Counters {
        CounterHandle(self.counters.clone()).snapshot()
    }

    /// Zeroes the call counts; outstanding allocations are state and stay.
    pub fn reset_counters(&self) {
        CounterHandle(self.counters.clone()).reset();
    }

    /// A handle on the counters that stays readable after the session is dropped.
    pub fn counter_handle(&self) -> CounterHandle {
        CounterHandle(self.counters.clone())
    }

    /// The live handles of a ready process, for one display-like walk.
    fn ready(&self, p: ProcessId) -> Result<(*mut mqs_process, RawFunctions), MqsError> {
        let slot = self.slot(p)?;
        slot.setup.clone()?;
        Ok((slot.process as *mut mqs_process, *self.lib.raw()))
    }

    /// One message-queue display, exactly as TotalView and padb drive it.
    pub fn display(&mut self, p: ProcessId) -> Result<Display, MqsError> {
        let (process, raw) = self.ready(p)?;
        let _scope = SessionScope::enter(&self.counters);
        let mut communicators = Vec::new();
        // SAFETY (all calls below): `process` is a live handle of this session; every
        // out-pointer is a local of the right type, alive across the call.
        check(unsafe { (raw.update_communicator_list)(process) })
            .map_err(|c| self.error(c, None))?;
        match unsafe { (raw.setup_communicator_iterator)(process) } {
            mqs_ok => {}
            mqs_end_of_list => return Ok(Display { communicators }),
            c => return Err(self.error(c, None)),
        }
        loop {
            if communicators.len() >= self.options.max_communicators {
                return Err(harness_error(
                    HARNESS_LOOP_BOUND,
                    format!(
                        "more than {} communicators: the library's iterator does not end",
                        self.options.max_communicators
                    ),
                ));
            }
            let comm = self.communicator(process, &raw)?;
            let (unique_id, local_rank, size, name) = comm_fields(&comm);
            let (group, group_error) = match raw.get_comm_group {
                Some(get_comm_group) => self.group(process, get_comm_group, size),
                None => (None, None),
            };
            let context = raw.get_comm_context_ids.and_then(|get| {
                let (mut send, mut receive): (mqs_tword_t, mqs_tword_t) = (0, 0);
                // SAFETY: live handle, local out-values.
                let code = unsafe { get(process, &mut send, &mut receive) };
                #[allow(clippy::useless_conversion)] // C long is i64 only on LP64
                (code == mqs_ok).then(|| ContextIds {
                    context_id: i64::from(send),
                    recv_context_id: i64::from(receive),
                })
            });
            let pending_receives = self.queue(process, &raw, mqs_op_class::mqs_pending_receives);
            let unexpected_messages =
                self.queue(process, &raw, mqs_op_class::mqs_unexpected_messages);
            let pending_sends = self.queue(process, &raw, mqs_op_class::mqs_pending_sends);
            communicators.push(Communicator {
                unique_id,
                local_rank,
                size,
                name,
                context,
                group,
                group_error,
                pending_receives,
                unexpected_messages,
                pending_sends,
            });
            match unsafe { (raw.next_communicator)(process) } {
                mqs_ok => {}
                mqs_end_of_list => break,
                c => return Err(self.error(c, None)),
            }
        }
        Ok(Display { communicators })
    }

    /// The output structs the library fills, zeroed or poisoned per the options.
    fn blank<T: Copy>(&self) -> T {
        let mut value = std::mem::MaybeUninit::<T>::uninit();
        let fill = if self.options.poison_outputs { 0xA5 } else { 0 };
        // SAFETY: only used for mqs_communicator and mqs_pending_operation, plain C
        // structs of integers and char arrays for which any byte pattern is valid.
        unsafe {
            std::ptr::write_bytes(value.as_mut_ptr(), fill, 1);
            value.assume_init()
        }
    }

    fn communicator(
        &self,
        process: *mut mqs_process,
        raw: &RawFunctions,
    ) -> Result<mqs_communicator, MqsError> {
        let mut comm: mqs_communicator = self.blank();
        // SAFETY: live handle, local out-struct.
        check(unsafe { (raw.get_communicator)(process, &mut comm) })
            .map_err(|c| self.error(c, None))?;
        Ok(comm)
    }

    fn group(
        &self,
        process: *mut mqs_process,
        get_comm_group: mqd_abi::entry::GetCommGroupFn,
        size: i64,
    ) -> (Option<mqd_model::CommGroup>, Option<MqsError>) {
        let Some(len) = usize::try_from(size)
            .ok()
            .filter(|_| size <= MAX_GROUP_SIZE)
        else {
            let e = harness_error(
                HARNESS_BAD_GROUP_SIZE,
                format!("communicator size {size} is not a group size"),
            );
            return (None, Some(e));
        };
        let mut buf: Vec<c_int> = vec![-1; len];
        buf.extend_from_slice(&GROUP_GUARD);
        // SAFETY: live handle; the buffer has `size` entries (plus guards), as the ABI asks.
        let code = unsafe { get_comm_group(process, buf.as_mut_ptr()) };
        if buf[len..] != GROUP_GUARD {
            let e = harness_error(
                HARNESS_GROUP_OVERRUN,
                format!("mqs_get_comm_group wrote past the {len} entries"),
            );
            return (None, Some(e));
        }
        match code {
            mqs_ok => (Some(self.groups.borrow_mut().share(&buf[..len])), None),
            mqs_no_information => (None, None),
            c => (None, Some(self.error(c, None))),
        }
    }

    fn queue(&self, process: *mut mqs_process, raw: &RawFunctions, class: mqs_op_class) -> Queue {
        // SAFETY: live handle; the class goes over as the int the ABI takes.
        match unsafe { (raw.setup_operation_iterator)(process, class as c_int) } {
            mqs_ok => {}
            mqs_no_information => return Queue::NoInformation,
            mqs_end_of_list => return Queue::Operations(Vec::new()),
            c => return Queue::Error(self.error(c, None)),
        }
        let mut ops = Vec::new();
        loop {
            if ops.len() >= self.options.max_operations_per_queue {
                return Queue::Error(harness_error(
                    HARNESS_LOOP_BOUND,
                    format!(
                        "more than {} operations in one queue: the library's iterator does not end",
                        self.options.max_operations_per_queue
                    ),
                ));
            }
            let mut op: mqs_pending_operation = self.blank();
            // SAFETY: live handle, local out-struct.
            match unsafe { (raw.next_operation)(process, &mut op) } {
                mqs_ok => ops.push(operation(&op)),
                mqs_end_of_list => return Queue::Operations(ops),
                c => return Queue::Error(self.error(c, None)),
            }
        }
    }

    /// What the MPI library records of the process (its phase, its thread level), when
    /// the library exports `mqd_get_mpi_state` and knows it.
    pub fn mpi_state(&mut self, p: ProcessId) -> MpiState {
        let Ok((process, raw)) = self.ready(p) else {
            return MpiState::default();
        };
        let Some(get) = raw.get_mpi_state else {
            return MpiState::default();
        };
        let _scope = SessionScope::enter(&self.counters);
        let (mut phase, mut level): (c_int, c_int) = (-1, -1);
        // SAFETY: live handle, local out-values.
        if unsafe { get(process, &mut phase, &mut level) } != mqs_ok {
            return MpiState::default();
        }
        MpiState {
            phase: match phase {
                0 => Some(MpiPhase::NotInitialized),
                1 => Some(MpiPhase::Initializing),
                2 => Some(MpiPhase::Initialized),
                3 => Some(MpiPhase::Finalized),
                _ => None,
            },
            thread_level: ThreadLevel::from_mpi(i64::from(level)),
        }
    }

    /// padb's `mqs_get_global_rank`, when the library exports it.
    pub fn global_rank_from_library(&mut self, p: ProcessId) -> Result<Option<i32>, MqsError> {
        let (process, raw) = self.ready(p)?;
        let Some(get_global_rank) = raw.get_global_rank else {
            return Ok(None);
        };
        let _scope = SessionScope::enter(&self.counters);
        // SAFETY: live handle.
        Ok(Some(unsafe { get_global_rank(process) }))
    }

    /// padb's collective state of every communicator (`mqs_get_comm_coll_state`, asked
    /// for each class while the communicator iterator stands on it).
    pub fn collective_states(&mut self, p: ProcessId) -> Result<Vec<CollectiveState>, MqsError> {
        let (process, raw) = self.ready(p)?;
        let Some(get_state) = raw.get_comm_coll_state else {
            return Err(harness_error(
                HARNESS_NOT_EXPORTED,
                "the library does not export mqs_get_comm_coll_state",
            ));
        };
        let _scope = SessionScope::enter(&self.counters);
        let mut states = Vec::new();
        // SAFETY (all calls below): live handle, local out-values.
        check(unsafe { (raw.update_communicator_list)(process) })
            .map_err(|c| self.error(c, None))?;
        match unsafe { (raw.setup_communicator_iterator)(process) } {
            mqs_ok => {}
            mqs_end_of_list => return Ok(states),
            c => return Err(self.error(c, None)),
        }
        loop {
            if states.len() >= self.options.max_communicators {
                return Err(harness_error(
                    HARNESS_LOOP_BOUND,
                    "the library's communicator iterator does not end",
                ));
            }
            let comm = self.communicator(process, &raw)?;
            let mut classes = Vec::with_capacity(COLLECTIVE_CLASSES);
            for class in 0..COLLECTIVE_CLASSES as c_int {
                let (mut count, mut active) = (0, 0);
                match unsafe { get_state(process, class, &mut count, &mut active) } {
                    mqs_ok => classes.push(Some(CollectiveCount { count, active })),
                    mqs_no_information => classes.push(None),
                    c => return Err(self.error(c, None)),
                }
            }
            let (unique_id, _, _, name) = comm_fields(&comm);
            states.push(CollectiveState {
                unique_id,
                name,
                classes,
            });
            match unsafe { (raw.next_communicator)(process) } {
                mqs_ok => {}
                mqs_end_of_list => break,
                c => return Err(self.error(c, None)),
            }
        }
        Ok(states)
    }

    /// Runs `f` with the library's entry points and the process's live handles, with
    /// callbacks attributed to this session: for tests that call the library out of the
    /// usual order. The handles are valid only during `f`.
    pub fn with_raw<R>(
        &mut self,
        p: ProcessId,
        f: impl FnOnce(&RawFunctions, *mut mqs_process, *mut mqs_image) -> R,
    ) -> Result<R, MqsError> {
        let slot = self.slot(p)?;
        let (process, image) = (
            slot.process as *mut mqs_process,
            slot.image as *mut mqs_image,
        );
        let raw = *self.lib.raw();
        let _scope = SessionScope::enter(&self.counters);
        Ok(f(&raw, process, image))
    }

    /// Forgets a process: the library destroys what it stored for it. Returns whether
    /// the process was in the session.
    pub fn remove_process(&mut self, p: ProcessId) -> bool {
        match self.processes.remove(&p.0) {
            Some(slot) => {
                self.destroy(slot);
                true
            }
            None => false,
        }
    }

    fn destroy(&self, slot: ProcessSlot) {
        let raw = self.lib.raw();
        let _scope = SessionScope::enter(&self.counters);
        // SAFETY: the contexts are live until destroyed below, and each info pointer is
        // the one the library stored (handed back once, then forgotten).
        unsafe {
            let process = &*slot.process;
            let info = process.info();
            if !info.is_null() {
                process.clear_info();
                (raw.destroy_process_info)(info);
            }
            let image = &*slot.image;
            let info = image.info();
            if !info.is_null() {
                image.clear_info();
                (raw.destroy_image_info)(info);
            }
            ProcessContext::destroy(slot.process);
            ImageContext::destroy(slot.image);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for (_, slot) in std::mem::take(&mut self.processes) {
            self.destroy(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_expand_one_percent_s() {
        assert_eq!(
            expand_message("no queues in %s", "rank 3"),
            "no queues in rank 3"
        );
        assert_eq!(expand_message("%s: %s", "a"), "a: %s");
        assert_eq!(expand_message("100%% sure, %d", "x"), "100% sure, %d");
        assert_eq!(expand_message("trailing %", "x"), "trailing %");
        assert_eq!(expand_message("plain", "x"), "plain");
    }

    #[test]
    fn operations_mirror_the_c_struct() {
        // SAFETY: a plain C struct, all-zero is valid.
        let mut raw: mqs_pending_operation = unsafe { std::mem::zeroed() };
        raw.status = 1;
        raw.desired_local_rank = -1;
        raw.tag_wild = 7;
        raw.desired_tag = 42;
        raw.buffer = 0xdead_beef;
        for (i, b) in b"hello".iter().enumerate() {
            raw.extra_text[2][i] = *b as c_char;
        }
        // A line without NUL is taken whole; invalid UTF-8 is replaced, not an error.
        raw.extra_text[4] = [b'x' as c_char; 64];
        raw.extra_text[4][0] = 0xff_u8 as c_char;
        let op = operation(&raw);
        assert_eq!(op.status, OperationStatus::Matched);
        assert_eq!(op.desired_local_rank, -1);
        assert!(op.tag_wild && !op.system_buffer);
        assert_eq!((op.desired_tag, op.buffer), (42, 0xdead_beef));
        assert_eq!(op.extra_text.len(), 2);
        assert_eq!(op.extra_text[0], "hello");
        assert!(op.extra_text[1].starts_with('\u{fffd}') && op.extra_text[1].len() == 3 + 63);
        assert_eq!(OperationStatus::from_code(9), OperationStatus::Other(9));
    }

    #[test]
    fn queue_helpers_and_error_display() {
        let e = MqsError {
            code: 100,
            text: "bad".into(),
            message: Some("no MPIR_All_communicators in a.out".into()),
        };
        assert_eq!(
            e.to_string(),
            "bad (code 100): no MPIR_All_communicators in a.out"
        );
        assert!(Queue::Error(e.clone()).ops().is_empty());
        assert_eq!(Queue::Error(e.clone()).error(), Some(&e));
        assert!(Queue::NoInformation.ops().is_empty());
        let q = Queue::Operations(vec![]);
        assert!(q.ops().is_empty() && q.error().is_none());
    }
}
