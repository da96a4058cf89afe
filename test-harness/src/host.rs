//! The debugger's half of the MQD ABI: the three callback tables, served from a [`Target`].
//!
//! An MQD library never touches the target itself; every allocation, symbol, type and
//! memory read comes through the callbacks here. They are written the way a real
//! debugger's must be:
//!
//! - every `extern "C"` body runs inside one panic guard: a panic (in the
//!   harness or in a [`Target`]) becomes an error value, never an unwind into C;
//! - every pointer the library hands back is checked: NULL is tolerated, and the
//!   `mqs_image *`, `mqs_process *` and `mqs_type *` handles carry a magic number so a
//!   handle of the wrong kind is refused and counted in [`Counters::bad_handles`];
//! - every callback is counted per debugger session ([`Counters`]), so tests can assert
//!   how many target reads a library makes and that it frees all it allocates.
//!
//! Callbacks that receive a handle (`fetch_data`, `find_symbol`, ...) are attributed to
//! the session owning that handle. The ones that receive none (`malloc`, `free`,
//! `dprints`) are attributed to the session that is calling into the library on the
//! current thread (a session scope); outside any session they go to
//! [`unattributed_counters`]. Each allocation remembers its owner, so a `free` made later
//! (for instance by `mqs_destroy_process_info` while a session drops) is credited back to
//! the session that allocated.
//!
//! The debugger's own error codes, returned by `fetch_data`, `find_symbol` and
//! `find_function`, start at `mqs_first_user_code` (see [`ERR_TARGET_UNREADABLE`] and the
//! constants after it); [`error_text`] is what the `mqs_errorstring_fp` callback answers.
// Matching on the ABI's result codes by their spec names (mqs_ok, ...).
#![allow(non_upper_case_globals)]

use crate::target::{ByteOrder, Target, TypeId};
use mqd_mpich::abi::*;
use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

/// `fetch_data`: the target has no readable memory at (part of) the requested range.
pub const ERR_TARGET_UNREADABLE: c_int = mqs_first_user_code;
/// A callback got a NULL output pointer, a NULL name or a negative length.
pub const ERR_INVALID_ARGUMENT: c_int = mqs_first_user_code + 1;
/// A callback got an `mqs_image *`/`mqs_process *` that is not one of this debugger's.
pub const ERR_BAD_HANDLE: c_int = mqs_first_user_code + 2;
/// `find_symbol`: the target has no such global variable.
pub const ERR_SYMBOL_NOT_FOUND: c_int = mqs_first_user_code + 3;
/// `find_function`: the target has no such function.
pub const ERR_FUNCTION_NOT_FOUND: c_int = mqs_first_user_code + 4;
/// The debugger failed internally (a panic caught at the boundary).
pub const ERR_INTERNAL: c_int = mqs_first_user_code + 5;

/// Largest single `mqs_malloc_fp` request served; bigger ones return NULL so a library
/// that sizes a buffer from corrupt target memory cannot exhaust the harness.
pub const MAX_ALLOCATION: usize = 1 << 30;
/// Alignment of every block `mqs_malloc_fp` returns (what C's `malloc` guarantees on LP64).
pub const MALLOC_ALIGN: usize = 16;
/// `dprints` lines kept per session; later ones are only counted.
pub const MAX_DPRINTS_LINES: usize = 100_000;

/// Text of a debugger error code, as `mqs_errorstring_fp` answers it.
///
/// Static so the pointer handed to the library never dangles.
pub fn error_text(code: c_int) -> &'static CStr {
    match code {
        mqs_ok => c"ok",
        mqs_no_information => c"no information",
        mqs_end_of_list => c"end of list",
        ERR_TARGET_UNREADABLE => c"target memory unreadable",
        ERR_INVALID_ARGUMENT => c"invalid callback argument (NULL pointer or negative length)",
        ERR_BAD_HANDLE => c"not a handle of this debugger",
        ERR_SYMBOL_NOT_FOUND => c"symbol not found in the target",
        ERR_FUNCTION_NOT_FOUND => c"function not found in the target",
        ERR_INTERNAL => c"debugger internal error",
        _ => c"unknown debugger error code",
    }
}

// ---------------------------------------------------------------------------------------
// Counters

/// Live counters of one debugger session, updated from the callbacks.
#[derive(Default)]
pub(crate) struct SessionCounters {
    fetches: AtomicU64,
    fetch_bytes: AtomicU64,
    failed_fetches: AtomicU64,
    largest_fetch: AtomicU64,
    find_symbol_calls: AtomicU64,
    find_function_calls: AtomicU64,
    find_type_calls: AtomicU64,
    field_offset_calls: AtomicU64,
    sizeof_calls: AtomicU64,
    type_sizes_calls: AtomicU64,
    target_to_host_calls: AtomicU64,
    mallocs: AtomicU64,
    failed_mallocs: AtomicU64,
    frees: AtomicU64,
    bad_frees: AtomicU64,
    outstanding_allocations: AtomicU64,
    outstanding_bytes: AtomicU64,
    bad_handles: AtomicU64,
    callback_panics: AtomicU64,
    dprints_calls: AtomicU64,
    errorstring_calls: AtomicU64,
    image_info_calls: AtomicU64,
    process_info_calls: AtomicU64,
    get_image_calls: AtomicU64,
    get_global_rank_calls: AtomicU64,
    dprints: Mutex<Vec<String>>,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SessionCounters {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn snapshot(&self) -> Counters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counters {
            fetches: get(&self.fetches),
            fetch_bytes: get(&self.fetch_bytes),
            failed_fetches: get(&self.failed_fetches),
            largest_fetch: get(&self.largest_fetch),
            find_symbol_calls: get(&self.find_symbol_calls),
            find_function_calls: get(&self.find_function_calls),
            find_type_calls: get(&self.find_type_calls),
            field_offset_calls: get(&self.field_offset_calls),
            sizeof_calls: get(&self.sizeof_calls),
            type_sizes_calls: get(&self.type_sizes_calls),
            target_to_host_calls: get(&self.target_to_host_calls),
            mallocs: get(&self.mallocs),
            failed_mallocs: get(&self.failed_mallocs),
            frees: get(&self.frees),
            bad_frees: get(&self.bad_frees),
            outstanding_allocations: get(&self.outstanding_allocations),
            outstanding_bytes: get(&self.outstanding_bytes),
            bad_handles: get(&self.bad_handles),
            callback_panics: get(&self.callback_panics),
            dprints_calls: get(&self.dprints_calls),
            errorstring_calls: get(&self.errorstring_calls),
            image_info_calls: get(&self.image_info_calls),
            process_info_calls: get(&self.process_info_calls),
            get_image_calls: get(&self.get_image_calls),
            get_global_rank_calls: get(&self.get_global_rank_calls),
            dprints: lock(&self.dprints).clone(),
        }
    }

    /// Zeroes the call counts; outstanding allocations are state, not counts, and stay.
    fn reset(&self) {
        for c in [
            &self.fetches,
            &self.fetch_bytes,
            &self.failed_fetches,
            &self.largest_fetch,
            &self.find_symbol_calls,
            &self.find_function_calls,
            &self.find_type_calls,
            &self.field_offset_calls,
            &self.sizeof_calls,
            &self.type_sizes_calls,
            &self.target_to_host_calls,
            &self.mallocs,
            &self.failed_mallocs,
            &self.frees,
            &self.bad_frees,
            &self.bad_handles,
            &self.callback_panics,
            &self.dprints_calls,
            &self.errorstring_calls,
            &self.image_info_calls,
            &self.process_info_calls,
            &self.get_image_calls,
            &self.get_global_rank_calls,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        lock(&self.dprints).clear();
    }
}

/// A snapshot of what one debugger session's callbacks have been asked to do.
///
/// Taken by [`CounterHandle::snapshot`] or `Debugger::counters`; the counts tell how
/// expensive a library is for a real debugger (each fetch is a round trip there) and
/// whether it leaks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// `mqs_fetch_data_fp` calls, failed ones included.
    pub fetches: u64,
    /// Bytes requested by those calls (failed ones included).
    pub fetch_bytes: u64,
    /// Fetches that returned an error.
    pub failed_fetches: u64,
    /// Largest single fetch requested, in bytes.
    pub largest_fetch: u64,
    /// `mqs_find_symbol_fp` calls.
    pub find_symbol_calls: u64,
    /// `mqs_find_function_fp` calls.
    pub find_function_calls: u64,
    /// `mqs_find_type_fp` calls.
    pub find_type_calls: u64,
    /// `mqs_field_offset_fp` calls.
    pub field_offset_calls: u64,
    /// `mqs_sizeof_fp` calls.
    pub sizeof_calls: u64,
    /// `mqs_get_type_sizes_fp` calls.
    pub type_sizes_calls: u64,
    /// `mqs_target_to_host_fp` calls.
    pub target_to_host_calls: u64,
    /// `mqs_malloc_fp` calls, failed ones included.
    pub mallocs: u64,
    /// `mqs_malloc_fp` calls that returned NULL (too large, or out of memory).
    pub failed_mallocs: u64,
    /// Successful `mqs_free_fp` calls of blocks this session allocated.
    pub frees: u64,
    /// `mqs_free_fp` calls with a pointer the harness never handed out, or freed twice.
    pub bad_frees: u64,
    /// Blocks allocated by this session and not freed yet.
    pub outstanding_allocations: u64,
    /// Bytes in those blocks.
    pub outstanding_bytes: u64,
    /// Callbacks that got a NULL or foreign `mqs_image`/`mqs_process`/`mqs_type` handle.
    pub bad_handles: u64,
    /// Panics caught at the C boundary (a harness or target bug, never the library's).
    pub callback_panics: u64,
    /// `mqs_dprints_fp` calls (all of them, even past [`MAX_DPRINTS_LINES`]).
    pub dprints_calls: u64,
    /// `mqs_errorstring_fp` calls.
    pub errorstring_calls: u64,
    /// `mqs_put_image_info_fp` and `mqs_get_image_info_fp` calls.
    pub image_info_calls: u64,
    /// `mqs_put_process_info_fp` and `mqs_get_process_info_fp` calls.
    pub process_info_calls: u64,
    /// `mqs_get_image_fp` calls.
    pub get_image_calls: u64,
    /// `mqs_get_global_rank_fp` calls.
    pub get_global_rank_calls: u64,
    /// The `mqs_dprints_fp` lines, trailing newline removed.
    pub dprints: Vec<String>,
}

/// A shared handle on one session's counters that outlives the session itself.
///
/// Lets a test drop a `Debugger` (which destroys the library's per-process state) and
/// then check that no allocation is left outstanding.
#[derive(Clone)]
pub struct CounterHandle(pub(crate) Arc<SessionCounters>);

impl CounterHandle {
    /// Takes a snapshot of the counters now.
    pub fn snapshot(&self) -> Counters {
        self.0.snapshot()
    }

    /// Zeroes the call counts (outstanding allocations are kept: they are state).
    pub fn reset(&self) {
        self.0.reset();
    }
}

impl std::fmt::Debug for CounterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CounterHandle")
            .field(&self.snapshot())
            .finish()
    }
}

static UNATTRIBUTED: LazyLock<Arc<SessionCounters>> = LazyLock::new(SessionCounters::new);

/// Counters of the callbacks made while no session was calling the library on that
/// thread (e.g. during `MqsLibrary::load`).
///
/// Shared by the whole process, so parallel tests should not assert exact values on it.
pub fn unattributed_counters() -> CounterHandle {
    CounterHandle(UNATTRIBUTED.clone())
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<SessionCounters>>> = const { RefCell::new(None) };
}

/// Counters of the session calling into the library on this thread.
fn current() -> Arc<SessionCounters> {
    CURRENT
        .try_with(|c| c.try_borrow().ok().and_then(|c| c.clone()))
        .ok()
        .flatten()
        .unwrap_or_else(|| UNATTRIBUTED.clone())
}

/// Marks the current thread as calling the library for one session, until dropped.
///
/// `malloc`, `free` and `dprints` carry no handle; this is how they find their session.
/// Scopes nest (the previous owner is restored on drop).
pub(crate) struct SessionScope {
    previous: Option<Arc<SessionCounters>>,
}

impl SessionScope {
    pub(crate) fn enter(counters: &Arc<SessionCounters>) -> Self {
        let previous = CURRENT
            .try_with(|c| c.replace(Some(counters.clone())))
            .ok()
            .flatten();
        SessionScope { previous }
    }
}

impl Drop for SessionScope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
    }
}

/// Runs a callback body, turning a panic into `fallback` (an unwind into C would abort
/// the debugger).
fn guard<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            bump(&current().callback_panics);
            // Dropping a payload can itself panic; leak it rather than risk that.
            std::mem::forget(payload);
            fallback
        }
    }
}

// ---------------------------------------------------------------------------------------
// Contexts behind mqs_image *, mqs_process *, mqs_type *

const IMAGE_MAGIC: u64 = u64::from_be_bytes(*b"mqdIMAGE");
const PROCESS_MAGIC: u64 = u64::from_be_bytes(*b"mqdPROCS");
const TYPE_MAGIC: u64 = u64::from_be_bytes(*b"mqdTYPE_");

/// What an `mqs_image *` points to: one per process (ASLR gives each its own addresses).
///
/// It owns the process's [`Target`] because type questions arrive with an image only.
#[repr(C)]
pub(crate) struct ImageContext {
    magic: Cell<u64>, // first field: checked before anything else is trusted
    counters: Arc<SessionCounters>,
    target: RefCell<Box<dyn Target>>,
    info: Cell<*mut mqs_image_info>,
    /// Every handle ever returned by `find_type`, kept until the image goes away. Boxed:
    /// the library holds their addresses, which must not move when the Vec grows.
    #[allow(clippy::vec_box)]
    type_handles: RefCell<Vec<Box<TypeHandle>>>,
    /// Current target's `TypeId` -> handle, so each type gets one stable handle.
    types_by_id: RefCell<HashMap<TypeId, *mut TypeHandle>>,
}

/// What an `mqs_type *` points to.
#[repr(C)]
pub(crate) struct TypeHandle {
    magic: Cell<u64>,
    image: *const ImageContext,
    /// `None` once a replaced target no longer knows the type.
    id: Cell<Option<TypeId>>,
    /// The name it was found by, to find it again in a replaced target.
    name: String,
}

/// What an `mqs_process *` points to.
#[repr(C)]
pub(crate) struct ProcessContext {
    magic: Cell<u64>,
    counters: Arc<SessionCounters>,
    image: *const ImageContext,
    info: Cell<*mut mqs_process_info>,
    global_rank: c_int,
}

impl ImageContext {
    /// Boxes a new image context; the pointer is what the library sees as `mqs_image *`.
    pub(crate) fn create(counters: Arc<SessionCounters>, target: Box<dyn Target>) -> *mut Self {
        Box::into_raw(Box::new(ImageContext {
            magic: Cell::new(IMAGE_MAGIC),
            counters,
            target: RefCell::new(target),
            info: Cell::new(std::ptr::null_mut()),
            type_handles: RefCell::new(Vec::new()),
            types_by_id: RefCell::new(HashMap::new()),
        }))
    }

    /// Frees an image context and its type handles.
    ///
    /// # Safety
    /// `ptr` came from [`ImageContext::create`], is freed once, and no process context
    /// pointing at it is used afterwards.
    pub(crate) unsafe fn destroy(ptr: *mut Self) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the contract, ptr is a live box we own.
        let ctx = unsafe { Box::from_raw(ptr) };
        ctx.magic.set(0);
        for handle in ctx.type_handles.borrow().iter() {
            handle.magic.set(0);
        }
        drop(ctx);
    }

    /// The library's image info, as it last stored it.
    pub(crate) fn info(&self) -> *mut mqs_image_info {
        self.info.get()
    }

    /// Forgets the image info (after `mqs_destroy_image_info`).
    pub(crate) fn clear_info(&self) {
        self.info.set(std::ptr::null_mut());
    }

    /// The target's human name, for has-queues messages.
    pub(crate) fn target_name(&self) -> String {
        match self.target.try_borrow() {
            Ok(t) => t.name(),
            Err(_) => String::from("<target busy>"),
        }
    }

    /// Swaps in the memory of a process that ran and stopped again.
    ///
    /// Type handles stay valid: each is looked up again by name in the new target.
    pub(crate) fn replace_target(&self, target: Box<dyn Target>) {
        *self.target.borrow_mut() = target;
        let target = self.target.borrow();
        let handles = self.type_handles.borrow();
        let mut by_id = self.types_by_id.borrow_mut();
        by_id.clear();
        for handle in handles.iter() {
            let id = target.find_type(&handle.name);
            handle.id.set(id);
            if let Some(id) = id {
                by_id
                    .entry(id)
                    .or_insert(&**handle as *const TypeHandle as *mut TypeHandle);
            }
        }
    }
}

impl ProcessContext {
    /// Boxes a new process context running `image`.
    pub(crate) fn create(
        counters: Arc<SessionCounters>,
        image: *const ImageContext,
        global_rank: c_int,
    ) -> *mut Self {
        Box::into_raw(Box::new(ProcessContext {
            magic: Cell::new(PROCESS_MAGIC),
            counters,
            image,
            info: Cell::new(std::ptr::null_mut()),
            global_rank,
        }))
    }

    /// Frees a process context.
    ///
    /// # Safety
    /// `ptr` came from [`ProcessContext::create`] and is freed once.
    pub(crate) unsafe fn destroy(ptr: *mut Self) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the contract, ptr is a live box we own.
        let ctx = unsafe { Box::from_raw(ptr) };
        ctx.magic.set(0);
        drop(ctx);
    }

    /// The library's process info, as it last stored it.
    pub(crate) fn info(&self) -> *mut mqs_process_info {
        self.info.get()
    }

    /// Forgets the process info (after `mqs_destroy_process_info`).
    pub(crate) fn clear_info(&self) {
        self.info.set(std::ptr::null_mut());
    }
}

/// Reads the magic word a handle starts with, without trusting anything else about it.
///
/// # Safety
/// `ptr` is NULL or points to at least 8 readable bytes (true of every handle this
/// debugger hands out, whatever its kind).
unsafe fn magic_of(ptr: *const c_void) -> Option<u64> {
    if ptr.is_null() || !(ptr as usize).is_multiple_of(align_of::<u64>()) {
        return None;
    }
    // SAFETY: per the contract; the magic is the first field of every context.
    Some(unsafe { std::ptr::read(ptr as *const u64) })
}

/// Checks an `mqs_image *` from the library, counting a bad one.
unsafe fn image_ctx<'a>(image: *mut mqs_image) -> Option<&'a ImageContext> {
    // SAFETY: handles come from this debugger (or are NULL); see magic_of.
    if unsafe { magic_of(image as *const c_void) } == Some(IMAGE_MAGIC) {
        // SAFETY: the magic says it is a live ImageContext.
        Some(unsafe { &*(image as *const ImageContext) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// Checks an `mqs_process *` from the library, counting a bad one.
unsafe fn process_ctx<'a>(process: *mut mqs_process) -> Option<&'a ProcessContext> {
    // SAFETY: as for image_ctx.
    if unsafe { magic_of(process as *const c_void) } == Some(PROCESS_MAGIC) {
        // SAFETY: the magic says it is a live ProcessContext.
        Some(unsafe { &*(process as *const ProcessContext) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// Checks an `mqs_type *` from the library, counting a bad one.
unsafe fn type_handle<'a>(ty: *mut mqs_type) -> Option<&'a TypeHandle> {
    // SAFETY: as for image_ctx.
    if unsafe { magic_of(ty as *const c_void) } == Some(TYPE_MAGIC) {
        // SAFETY: the magic says it is a live TypeHandle.
        Some(unsafe { &*(ty as *const TypeHandle) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// A name passed by the library, if it is a valid NUL-terminated UTF-8 string.
unsafe fn c_name<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the library passes NUL-terminated names (mpi_interface.h).
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

// ---------------------------------------------------------------------------------------
// Allocation

/// One block handed to the library.
struct Allocation {
    size: usize,
    owner: Arc<SessionCounters>,
}

/// Every live block, keyed by address: the only way to recognise a foreign or double
/// free without reading memory in front of a pointer we may not own.
static ALLOCATIONS: LazyLock<Mutex<HashMap<usize, Allocation>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Bytes written into fresh blocks, so a library reading memory it never initialised
/// sees garbage in tests rather than convenient zeros.
const FRESH_FILL: u8 = 0xCD;
/// Bytes written into freed blocks before they go back to the allocator.
const FREED_FILL: u8 = 0xDD;

fn block_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.max(1), MALLOC_ALIGN).ok()
}

/// `mqs_malloc_fp`: 16-byte aligned, poisoned, recorded for the calling session.
unsafe extern "C" fn cb_malloc(size: usize) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let counters = current();
        bump(&counters.mallocs);
        let Some(layout) = block_layout(size).filter(|_| size <= MAX_ALLOCATION) else {
            bump(&counters.failed_mallocs);
            return std::ptr::null_mut();
        };
        // SAFETY: layout has a non-zero size.
        let block = unsafe { std::alloc::alloc(layout) };
        if block.is_null() {
            bump(&counters.failed_mallocs);
            return std::ptr::null_mut();
        }
        // SAFETY: the block has layout.size() writable bytes.
        unsafe { std::ptr::write_bytes(block, FRESH_FILL, layout.size()) };
        counters
            .outstanding_allocations
            .fetch_add(1, Ordering::Relaxed);
        counters
            .outstanding_bytes
            .fetch_add(size as u64, Ordering::Relaxed);
        lock(&ALLOCATIONS).insert(
            block as usize,
            Allocation {
                size,
                owner: counters,
            },
        );
        block as *mut c_void
    })
}

/// `mqs_free_fp`: frees only blocks `cb_malloc` handed out; anything else is counted.
unsafe extern "C" fn cb_free(ptr: *mut c_void) {
    guard((), || {
        if ptr.is_null() {
            return; // free(NULL) is a no-op in C too
        }
        let removed = lock(&ALLOCATIONS).remove(&(ptr as usize));
        let Some(Allocation { size, owner }) = removed else {
            bump(&current().bad_frees);
            return;
        };
        bump(&owner.frees);
        owner
            .outstanding_allocations
            .fetch_sub(1, Ordering::Relaxed);
        owner
            .outstanding_bytes
            .fetch_sub(size as u64, Ordering::Relaxed);
        if let Some(layout) = block_layout(size) {
            // SAFETY: the block came from std::alloc::alloc with this layout, and the
            // registry entry we just removed made us its only owner.
            unsafe {
                std::ptr::write_bytes(ptr as *mut u8, FREED_FILL, layout.size());
                std::alloc::dealloc(ptr as *mut u8, layout);
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// Basic callbacks

/// `mqs_dprints_fp`: the library's only diagnostic channel, kept per session.
unsafe extern "C" fn cb_dprints(text: *const c_char) {
    guard((), || {
        let counters = current();
        bump(&counters.dprints_calls);
        if text.is_null() {
            return;
        }
        // SAFETY: the library passes a NUL-terminated string.
        let line = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let line = line.strip_suffix('\n').unwrap_or(&line).to_owned();
        let mut lines = lock(&counters.dprints);
        if lines.len() < MAX_DPRINTS_LINES {
            lines.push(line);
        }
    })
}

/// `mqs_errorstring_fp`: static text, so the pointer never dangles.
unsafe extern "C" fn cb_errorstring(code: c_int) -> *mut c_char {
    // The library must treat it as read-only; C's prototype just lacks the const.
    guard(error_text(ERR_INTERNAL).as_ptr() as *mut c_char, || {
        bump(&current().errorstring_calls);
        error_text(code).as_ptr() as *mut c_char
    })
}

unsafe extern "C" fn cb_put_image_info(image: *mut mqs_image, info: *mut mqs_image_info) {
    guard((), || {
        // SAFETY: checked handle.
        if let Some(ctx) = unsafe { image_ctx(image) } {
            bump(&ctx.counters.image_info_calls);
            ctx.info.set(info);
        }
    })
}

unsafe extern "C" fn cb_get_image_info(image: *mut mqs_image) -> *mut mqs_image_info {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { image_ctx(image) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.image_info_calls);
            ctx.info.get()
        })
    })
}

unsafe extern "C" fn cb_put_process_info(process: *mut mqs_process, info: *mut mqs_process_info) {
    guard((), || {
        // SAFETY: checked handle.
        if let Some(ctx) = unsafe { process_ctx(process) } {
            bump(&ctx.counters.process_info_calls);
            ctx.info.set(info);
        }
    })
}

unsafe extern "C" fn cb_get_process_info(process: *mut mqs_process) -> *mut mqs_process_info {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.process_info_calls);
            ctx.info.get()
        })
    })
}

/// The basic table every library gets: the functions are the same for every session
/// (sessions are told apart by handle or by `SessionScope`), so one static table can
/// outlive any number of loads of the same library.
pub(crate) static BASIC_CALLBACKS: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_malloc_fp: Some(cb_malloc),
    mqs_free_fp: Some(cb_free),
    mqs_dprints_fp: Some(cb_dprints),
    mqs_errorstring_fp: Some(cb_errorstring),
    mqs_put_image_info_fp: Some(cb_put_image_info),
    mqs_get_image_info_fp: Some(cb_get_image_info),
    mqs_put_process_info_fp: Some(cb_put_process_info),
    mqs_get_process_info_fp: Some(cb_get_process_info),
};

/// The basic table as MPICH's tvtest passes it: no `dprints`, no `errorstring`.
pub(crate) static BASIC_CALLBACKS_NULL_DIAGNOSTICS: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_dprints_fp: None,
    mqs_errorstring_fp: None,
    ..BASIC_CALLBACKS
};

// ---------------------------------------------------------------------------------------
// Image callbacks

unsafe extern "C" fn cb_get_type_sizes(
    process: *mut mqs_process,
    sizes: *mut mqs_target_type_sizes,
) {
    guard((), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return;
        };
        bump(&ctx.counters.type_sizes_calls);
        if sizes.is_null() {
            return;
        }
        // SAFETY: the image outlives its processes.
        let image = unsafe { &*ctx.image };
        let value = image.target.borrow().type_sizes();
        // Exactly the five standard fields: never past them (Open MPI's copy has more).
        // SAFETY: the library passes a writable mqs_target_type_sizes; it may be unaligned.
        unsafe { std::ptr::write_unaligned(sizes, value) };
    })
}

unsafe extern "C" fn cb_find_function(
    image: *mut mqs_image,
    name: *mut c_char,
    _lang: c_int,
    addr: *mut mqs_taddr_t,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return ERR_BAD_HANDLE;
        };
        bump(&ctx.counters.find_function_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return ERR_INVALID_ARGUMENT;
        };
        let found = ctx.target.borrow().find_function(name);
        let Some(found) = found.and_then(|a| mqs_taddr_t::try_from(a).ok()) else {
            return ERR_FUNCTION_NOT_FOUND;
        };
        // A NULL addr only asks the debugger to load that unit's debug information.
        if !addr.is_null() {
            // SAFETY: the library passes a writable mqs_taddr_t.
            unsafe { std::ptr::write_unaligned(addr, found) };
        }
        mqs_ok
    })
}

unsafe extern "C" fn cb_find_symbol(
    image: *mut mqs_image,
    name: *mut c_char,
    addr: *mut mqs_taddr_t,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return ERR_BAD_HANDLE;
        };
        bump(&ctx.counters.find_symbol_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return ERR_INVALID_ARGUMENT;
        };
        if addr.is_null() {
            return ERR_INVALID_ARGUMENT;
        }
        let found = ctx.target.borrow().find_symbol(name);
        let Some(found) = found.and_then(|a| mqs_taddr_t::try_from(a).ok()) else {
            return ERR_SYMBOL_NOT_FOUND;
        };
        // SAFETY: checked non-NULL; the library passes a writable mqs_taddr_t.
        unsafe { std::ptr::write_unaligned(addr, found) };
        mqs_ok
    })
}

unsafe extern "C" fn cb_find_type(
    image: *mut mqs_image,
    name: *mut c_char,
    _lang: c_int,
) -> *mut mqs_type {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return std::ptr::null_mut();
        };
        bump(&ctx.counters.find_type_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return std::ptr::null_mut();
        };
        let Some(id) = ctx.target.borrow().find_type(name) else {
            return std::ptr::null_mut();
        };
        let mut by_id = ctx.types_by_id.borrow_mut();
        let handle = by_id.entry(id).or_insert_with(|| {
            let mut handle = Box::new(TypeHandle {
                magic: Cell::new(TYPE_MAGIC),
                image: ctx as *const ImageContext,
                id: Cell::new(Some(id)),
                name: name.to_owned(),
            });
            // The box's heap address is stable while the Vec owns it.
            let ptr: *mut TypeHandle = &mut *handle;
            ctx.type_handles.borrow_mut().push(handle);
            ptr
        });
        *handle as *mut mqs_type
    })
}

/// The target and type id behind a type handle, if both are still known.
unsafe fn with_type<R>(
    ty: *mut mqs_type,
    f: impl FnOnce(&ImageContext, &dyn Target, TypeId) -> R,
) -> Option<R> {
    // SAFETY: checked handle.
    let handle = unsafe { type_handle(ty) }?;
    // SAFETY: a live handle's image is alive (handles die with it).
    let image = unsafe { &*handle.image };
    let target = image.target.borrow();
    let id = handle.id.get();
    Some(f(image, &**target, id?))
}

unsafe extern "C" fn cb_field_offset(ty: *mut mqs_type, field: *mut c_char) -> c_int {
    guard(-1, || {
        // SAFETY: library-provided string.
        let field = unsafe { c_name(field) };
        // SAFETY: checked inside.
        let r = unsafe {
            with_type(ty, |image, target, id| {
                bump(&image.counters.field_offset_calls);
                field.and_then(|f| target.field_offset(id, f))
            })
        };
        r.flatten()
            .and_then(|off| c_int::try_from(off).ok())
            .unwrap_or(-1)
    })
}

unsafe extern "C" fn cb_sizeof(ty: *mut mqs_type) -> c_int {
    guard(-1, || {
        // SAFETY: checked inside.
        let r = unsafe {
            with_type(ty, |image, target, id| {
                bump(&image.counters.sizeof_calls);
                target.type_size(id)
            })
        };
        r.flatten()
            .and_then(|size| c_int::try_from(size).ok())
            .unwrap_or(-1)
    })
}

/// The image table a debugger normally passes.
pub(crate) static IMAGE_CALLBACKS: mqs_image_callbacks = mqs_image_callbacks {
    mqs_get_type_sizes_fp: Some(cb_get_type_sizes),
    mqs_find_function_fp: Some(cb_find_function),
    mqs_find_symbol_fp: Some(cb_find_symbol),
    mqs_find_type_fp: Some(cb_find_type),
    mqs_field_offset_fp: Some(cb_field_offset),
    mqs_sizeof_fp: Some(cb_sizeof),
};

/// The image table as MPICH's tvtest passes it: no `sizeof`.
pub(crate) static IMAGE_CALLBACKS_NULL_SIZEOF: mqs_image_callbacks = mqs_image_callbacks {
    mqs_sizeof_fp: None,
    ..IMAGE_CALLBACKS
};

// ---------------------------------------------------------------------------------------
// Process callbacks

unsafe extern "C" fn cb_get_global_rank(process: *mut mqs_process) -> c_int {
    guard(MQS_INVALID_PROCESS, || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(MQS_INVALID_PROCESS, |ctx| {
            bump(&ctx.counters.get_global_rank_calls);
            ctx.global_rank
        })
    })
}

unsafe extern "C" fn cb_get_image(process: *mut mqs_process) -> *mut mqs_image {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.get_image_calls);
            ctx.image as *mut mqs_image
        })
    })
}

/// A target address as the harness's `u64` (`mqs_taddr_t` is C `unsigned long`).
#[allow(clippy::useless_conversion)] // the identity on LP64, a widening elsewhere
fn taddr_to_u64(addr: mqs_taddr_t) -> u64 {
    u64::from(addr)
}

/// Reads target memory all or nothing: `buf` is only written when every byte was read.
fn fetch_into(target: &dyn Target, addr: u64, buf: &mut [u8]) -> c_int {
    // A scratch copy keeps the all-or-nothing promise whatever a Target does on failure;
    // small reads (the common case) stay on the stack.
    let mut small = [0u8; 512];
    let mut large = Vec::new();
    let scratch: &mut [u8] = if buf.len() <= small.len() {
        &mut small[..buf.len()]
    } else {
        large.resize(buf.len(), 0);
        &mut large
    };
    match target.read_memory(addr, scratch) {
        Ok(()) => {
            buf.copy_from_slice(scratch);
            mqs_ok
        }
        Err(_) => ERR_TARGET_UNREADABLE,
    }
}

unsafe extern "C" fn cb_fetch_data(
    process: *mut mqs_process,
    addr: mqs_taddr_t,
    nbytes: c_int,
    buf: *mut c_void,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return ERR_BAD_HANDLE;
        };
        let counters = &ctx.counters;
        bump(&counters.fetches);
        if let Ok(len) = u64::try_from(nbytes) {
            counters.fetch_bytes.fetch_add(len, Ordering::Relaxed);
            counters.largest_fetch.fetch_max(len, Ordering::Relaxed);
        }
        let result = match usize::try_from(nbytes) {
            Err(_) => ERR_INVALID_ARGUMENT,
            Ok(0) => mqs_ok,
            Ok(_) if buf.is_null() => ERR_INVALID_ARGUMENT,
            Ok(len) => {
                // SAFETY: the library passes a buffer of nbytes writable bytes.
                let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
                // SAFETY: the image outlives its processes.
                let image = unsafe { &*ctx.image };
                fetch_into(&**image.target.borrow(), taddr_to_u64(addr), out)
            }
        };
        if result != mqs_ok {
            bump(&counters.failed_fetches);
        }
        result
    })
}

/// Converts one target scalar to host byte order: reversed when the orders differ,
/// copied otherwise. `input` and `output` have the same length.
pub fn target_to_host(target_order: ByteOrder, input: &[u8], output: &mut [u8]) {
    output.copy_from_slice(input);
    if target_order != host_byte_order() {
        output.reverse();
    }
}

/// The byte order of the machine running the harness.
pub fn host_byte_order() -> ByteOrder {
    if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    }
}

unsafe extern "C" fn cb_target_to_host(
    process: *mut mqs_process,
    input: *const c_void,
    output: *mut c_void,
    nbytes: c_int,
) {
    guard((), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return;
        };
        bump(&ctx.counters.target_to_host_calls);
        let Ok(len) = usize::try_from(nbytes) else {
            return;
        };
        if len == 0 || input.is_null() || output.is_null() {
            return;
        }
        // SAFETY: the image outlives its processes.
        let order = unsafe { &*ctx.image }.target.borrow().byte_order();
        // in and out may be the same buffer: copy in first.
        // SAFETY: the library passes nbytes readable bytes at input.
        let scalar = unsafe { std::slice::from_raw_parts(input as *const u8, len) }.to_vec();
        // SAFETY: and nbytes writable bytes at output (no live reference aliases it now).
        let out = unsafe { std::slice::from_raw_parts_mut(output as *mut u8, len) };
        target_to_host(order, &scalar, out);
    })
}

/// The process table; one static table serves every process.
pub(crate) static PROCESS_CALLBACKS: mqs_process_callbacks = mqs_process_callbacks {
    mqs_get_global_rank_fp: Some(cb_get_global_rank),
    mqs_get_image_fp: Some(cb_get_image),
    mqs_fetch_data_fp: Some(cb_fetch_data),
    mqs_target_to_host_fp: Some(cb_target_to_host),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetError;

    /// A tiny in-memory target: one mapping, a few symbols and one struct type.
    struct Mem {
        base: u64,
        bytes: Vec<u8>,
        order: ByteOrder,
    }

    impl Target for Mem {
        fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            let unmapped = TargetError::Unmapped {
                addr,
                len: buf.len(),
            };
            let start = addr.checked_sub(self.base).ok_or(unmapped.clone())? as usize;
            let end = start.checked_add(buf.len()).ok_or(unmapped.clone())?;
            let src = self.bytes.get(start..end).ok_or(unmapped)?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn find_symbol(&self, name: &str) -> Option<u64> {
            (name == "MPIR_dll_name").then_some(self.base)
        }
        fn find_function(&self, name: &str) -> Option<u64> {
            (name == "MPI_Init").then_some(0x4000)
        }
        fn find_type(&self, name: &str) -> Option<TypeId> {
            match name {
                "MPIR_Comm" | "struct MPIR_Comm" => Some(TypeId(7)),
                _ => None,
            }
        }
        fn type_size(&self, ty: TypeId) -> Option<u64> {
            (ty == TypeId(7)).then_some(1024)
        }
        fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
            (ty == TypeId(7) && field == "rank").then_some(24)
        }
        fn type_sizes(&self) -> mqs_target_type_sizes {
            mqs_target_type_sizes {
                short_size: 2,
                int_size: 4,
                long_size: 8,
                long_long_size: 8,
                pointer_size: 8,
            }
        }
        fn byte_order(&self) -> ByteOrder {
            self.order
        }
        fn name(&self) -> String {
            "mem".into()
        }
    }

    struct Fixture {
        counters: Arc<SessionCounters>,
        image: *mut ImageContext,
        process: *mut ProcessContext,
    }

    impl Fixture {
        fn new(order: ByteOrder) -> Self {
            let counters = SessionCounters::new();
            let target = Mem {
                base: 0x1000,
                bytes: (0..=255u8).collect(),
                order,
            };
            let image = ImageContext::create(counters.clone(), Box::new(target));
            let process = ProcessContext::create(counters.clone(), image, 3);
            Fixture {
                counters,
                image,
                process,
            }
        }
        fn p(&self) -> *mut mqs_process {
            self.process as *mut mqs_process
        }
        fn i(&self) -> *mut mqs_image {
            self.image as *mut mqs_image
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            // SAFETY: created in new, destroyed once, process before image.
            unsafe {
                ProcessContext::destroy(self.process);
                ImageContext::destroy(self.image);
            }
        }
    }

    #[test]
    fn byte_swapping_follows_target_order() {
        let other = match host_byte_order() {
            ByteOrder::Little => ByteOrder::Big,
            ByteOrder::Big => ByteOrder::Little,
        };
        let mut out = [0u8; 4];
        target_to_host(host_byte_order(), &[1, 2, 3, 4], &mut out);
        assert_eq!(out, [1, 2, 3, 4]);
        target_to_host(other, &[1, 2, 3, 4], &mut out);
        assert_eq!(out, [4, 3, 2, 1]);
        let mut one = [0u8; 1];
        target_to_host(other, &[9], &mut one);
        assert_eq!(one, [9]);

        let f = Fixture::new(ByteOrder::Big);
        let mut v = 0x0102_0304_0506_0708u64.to_be_bytes();
        let p = v.as_mut_ptr() as *mut c_void;
        // In place, as some libraries call it.
        // SAFETY: valid 8-byte buffer.
        unsafe { cb_target_to_host(f.p(), p, p, 8) };
        assert_eq!(u64::from_ne_bytes(v), 0x0102_0304_0506_0708);
        let x = 0x1122u16.to_le_bytes();
        let mut y = [0u8; 2];
        let f = Fixture::new(ByteOrder::Little);
        // SAFETY: valid buffers.
        unsafe { cb_target_to_host(f.p(), x.as_ptr().cast(), y.as_mut_ptr().cast(), 2) };
        assert_eq!(u16::from_ne_bytes(y), 0x1122);
        // NULLs and negative lengths are ignored.
        // SAFETY: nothing is dereferenced.
        unsafe {
            cb_target_to_host(f.p(), std::ptr::null(), y.as_mut_ptr().cast(), 2);
            cb_target_to_host(f.p(), x.as_ptr().cast(), y.as_mut_ptr().cast(), -2);
        }
        assert_eq!(f.counters.snapshot().target_to_host_calls, 3);
    }

    #[test]
    fn fetch_is_all_or_nothing_and_counted() {
        let f = Fixture::new(ByteOrder::Little);
        let mut buf = [0xEEu8; 8];
        // SAFETY: valid buffer of the stated length.
        unsafe {
            assert_eq!(
                cb_fetch_data(f.p(), 0x1010, 4, buf.as_mut_ptr().cast()),
                mqs_ok
            );
            assert_eq!(buf[..4], [0x10, 0x11, 0x12, 0x13]);
            // Straddles the end of the mapping: nothing written.
            assert_eq!(
                cb_fetch_data(f.p(), 0x10fc, 8, buf.as_mut_ptr().cast()),
                ERR_TARGET_UNREADABLE
            );
            assert_eq!(buf[..4], [0x10, 0x11, 0x12, 0x13]);
            assert_eq!(
                cb_fetch_data(f.p(), 0x1000, -1, buf.as_mut_ptr().cast()),
                ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                cb_fetch_data(f.p(), 0x1000, 4, std::ptr::null_mut()),
                ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                cb_fetch_data(f.p(), 0x1000, 0, std::ptr::null_mut()),
                mqs_ok
            );
            assert_eq!(
                cb_fetch_data(std::ptr::null_mut(), 0x1000, 4, buf.as_mut_ptr().cast()),
                ERR_BAD_HANDLE
            );
            // An image handle where a process is expected is refused, not misread.
            assert_eq!(
                cb_fetch_data(
                    f.i() as *mut mqs_process,
                    0x1000,
                    4,
                    buf.as_mut_ptr().cast()
                ),
                ERR_BAD_HANDLE
            );
        }
        let mut big = vec![0u8; 256];
        // SAFETY: valid buffer.
        assert_eq!(
            unsafe { cb_fetch_data(f.p(), 0x1000, 256, big.as_mut_ptr().cast()) },
            mqs_ok
        );
        assert_eq!(big, (0..=255u8).collect::<Vec<_>>());
        let c = f.counters.snapshot();
        assert_eq!(
            (c.fetches, c.failed_fetches, c.fetch_bytes, c.largest_fetch),
            (6, 3, 4 + 8 + 4 + 256, 256)
        );
    }

    #[test]
    fn symbols_types_and_handles() {
        let f = Fixture::new(ByteOrder::Little);
        let _scope = SessionScope::enter(&f.counters);
        let mut addr: mqs_taddr_t = 0;
        // SAFETY: valid NUL-terminated names and output pointers.
        unsafe {
            assert_eq!(
                cb_find_symbol(f.i(), c"MPIR_dll_name".as_ptr() as *mut c_char, &mut addr),
                mqs_ok
            );
            assert_eq!(addr, 0x1000);
            assert_eq!(
                cb_find_symbol(f.i(), c"nope".as_ptr() as *mut c_char, &mut addr),
                ERR_SYMBOL_NOT_FOUND
            );
            assert_eq!(
                cb_find_symbol(f.i(), std::ptr::null_mut(), &mut addr),
                ERR_INVALID_ARGUMENT
            );
            let init = c"MPI_Init".as_ptr() as *mut c_char;
            assert_eq!(
                cb_find_function(f.i(), init, b'c' as c_int, std::ptr::null_mut()),
                mqs_ok
            );
            assert_eq!(
                cb_find_function(f.i(), init, b'c' as c_int, &mut addr),
                mqs_ok
            );
            assert_eq!(addr, 0x4000);
            let t1 = cb_find_type(f.i(), c"MPIR_Comm".as_ptr() as *mut c_char, b'c' as c_int);
            let t2 = cb_find_type(
                f.i(),
                c"struct MPIR_Comm".as_ptr() as *mut c_char,
                b'c' as c_int,
            );
            assert!(!t1.is_null());
            assert_eq!(t1, t2, "one handle per type");
            assert!(
                cb_find_type(
                    f.i(),
                    c"MPIR_Request".as_ptr() as *mut c_char,
                    b'c' as c_int
                )
                .is_null()
            );
            assert_eq!(cb_field_offset(t1, c"rank".as_ptr() as *mut c_char), 24);
            assert_eq!(cb_field_offset(t1, c"nope".as_ptr() as *mut c_char), -1);
            assert_eq!(cb_field_offset(t1, std::ptr::null_mut()), -1);
            assert_eq!(cb_sizeof(t1), 1024);
            assert_eq!(cb_sizeof(std::ptr::null_mut()), -1);
            assert_eq!(cb_sizeof(f.i() as *mut mqs_type), -1);
            let mut sizes = mqs_target_type_sizes::default();
            cb_get_type_sizes(f.p(), &mut sizes);
            assert_eq!(sizes.long_size, 8);
            assert_eq!(cb_get_global_rank(f.p()), 3);
            assert_eq!(
                cb_get_global_rank(std::ptr::null_mut()),
                MQS_INVALID_PROCESS
            );
            assert_eq!(cb_get_image(f.p()), f.i());
            // Handles survive a new stop of the process.
            (*f.image).replace_target(Box::new(Mem {
                base: 0,
                bytes: vec![],
                order: ByteOrder::Little,
            }));
            assert_eq!(cb_sizeof(t1), 1024);
            assert_eq!(
                cb_find_type(f.i(), c"MPIR_Comm".as_ptr() as *mut c_char, b'c' as c_int),
                t1
            );
        }
        let c = f.counters.snapshot();
        assert_eq!(c.find_symbol_calls, 3);
        assert_eq!(c.find_function_calls, 2);
        assert_eq!(c.find_type_calls, 4);
        assert_eq!(
            c.field_offset_calls, 3,
            "a NULL field name is still a call on a valid type"
        );
        assert_eq!(c.sizeof_calls, 2);
        assert_eq!(c.type_sizes_calls, 1);
        assert_eq!(c.bad_handles, 3);
    }

    #[test]
    fn info_pointers_round_trip() {
        let f = Fixture::new(ByteOrder::Little);
        let info = 0x1234usize as *mut mqs_image_info;
        let pinfo = 0x5678usize as *mut mqs_process_info;
        // SAFETY: the info pointers are stored, never dereferenced.
        unsafe {
            assert!(cb_get_image_info(f.i()).is_null());
            cb_put_image_info(f.i(), info);
            cb_put_process_info(f.p(), pinfo);
            assert_eq!(cb_get_image_info(f.i()), info);
            assert_eq!(cb_get_process_info(f.p()), pinfo);
            assert!(cb_get_process_info(f.i() as *mut mqs_process).is_null());
            cb_put_image_info(std::ptr::null_mut(), info);
            assert_eq!((*f.image).info(), info);
            assert_eq!((*f.process).info(), pinfo);
        }
        let c = f.counters.snapshot();
        assert_eq!((c.image_info_calls, c.process_info_calls), (3, 2));
    }

    #[test]
    fn allocations_are_aligned_and_attributed_per_session() {
        let a = SessionCounters::new();
        let b = SessionCounters::new();
        let (pa, pb) = {
            let _s = SessionScope::enter(&a);
            // SAFETY: plain allocation calls.
            let pa = unsafe { cb_malloc(40) };
            let pb = {
                let _inner = SessionScope::enter(&b);
                // SAFETY: as above.
                unsafe { cb_malloc(0) }
            };
            (pa, pb)
        };
        assert!(!pa.is_null() && !pb.is_null());
        assert_eq!(pa as usize % MALLOC_ALIGN, 0);
        assert_eq!(pb as usize % MALLOC_ALIGN, 0);
        // SAFETY: pa is a 40-byte block.
        unsafe { std::ptr::write_bytes(pa as *mut u8, 1, 40) };
        let ca = a.snapshot();
        assert_eq!(
            (ca.mallocs, ca.outstanding_allocations, ca.outstanding_bytes),
            (1, 1, 40)
        );
        let cb = b.snapshot();
        assert_eq!(
            (cb.mallocs, cb.outstanding_allocations, cb.outstanding_bytes),
            (1, 1, 0)
        );
        {
            // Freed from b's scope: still credited to a, the owner.
            let _s = SessionScope::enter(&b);
            // SAFETY: blocks from cb_malloc.
            unsafe {
                cb_free(pa);
                cb_free(pb);
                cb_free(std::ptr::null_mut());
            }
        }
        let ca = a.snapshot();
        assert_eq!(
            (
                ca.frees,
                ca.outstanding_allocations,
                ca.outstanding_bytes,
                ca.bad_frees
            ),
            (1, 0, 0, 0)
        );
        let cb = b.snapshot();
        assert_eq!(
            (cb.frees, cb.outstanding_allocations, cb.bad_frees),
            (1, 0, 0)
        );
    }

    #[test]
    fn bad_and_double_frees_are_counted_not_crashing() {
        let s = SessionCounters::new();
        let _scope = SessionScope::enter(&s);
        let mut on_stack = 0u64;
        // SAFETY: cb_free never dereferences a pointer it did not hand out.
        unsafe {
            let p = cb_malloc(16);
            cb_free(p);
            cb_free(p);
            cb_free(&mut on_stack as *mut u64 as *mut c_void);
            cb_free(0x10usize as *mut c_void);
        }
        let c = s.snapshot();
        assert_eq!(
            (c.mallocs, c.frees, c.bad_frees, c.outstanding_allocations),
            (1, 1, 3, 0)
        );
    }

    #[test]
    fn huge_allocations_fail_cleanly() {
        let s = SessionCounters::new();
        let _scope = SessionScope::enter(&s);
        // SAFETY: plain allocation calls.
        unsafe {
            assert!(cb_malloc(usize::MAX).is_null());
            assert!(cb_malloc(MAX_ALLOCATION + 1).is_null());
        }
        let c = s.snapshot();
        assert_eq!(
            (c.mallocs, c.failed_mallocs, c.outstanding_allocations),
            (2, 2, 0)
        );
    }

    #[test]
    fn dprints_lines_go_to_the_calling_session_and_reset_keeps_state() {
        let s = SessionCounters::new();
        let _scope = SessionScope::enter(&s);
        // SAFETY: NUL-terminated strings or NULL.
        let p = unsafe {
            cb_dprints(c"first line\n".as_ptr());
            cb_dprints(std::ptr::null());
            cb_dprints(c"second".as_ptr());
            cb_malloc(8)
        };
        let c = s.snapshot();
        assert_eq!(c.dprints, ["first line", "second"]);
        assert_eq!(c.dprints_calls, 3);
        s.reset();
        let c = s.snapshot();
        assert!(c.dprints.is_empty());
        assert_eq!(
            (c.mallocs, c.outstanding_allocations, c.outstanding_bytes),
            (0, 1, 8)
        );
        // SAFETY: block from cb_malloc.
        unsafe { cb_free(p) };
        assert_eq!(s.snapshot().outstanding_allocations, 0);
    }

    #[test]
    fn error_text_is_static_and_specific() {
        assert_eq!(
            error_text(ERR_TARGET_UNREADABLE).to_str().unwrap(),
            "target memory unreadable"
        );
        assert_eq!(
            error_text(999).to_str().unwrap(),
            "unknown debugger error code"
        );
        // SAFETY: returns a static C string.
        let s = unsafe { CStr::from_ptr(cb_errorstring(ERR_SYMBOL_NOT_FOUND)) };
        assert_eq!(s.to_str().unwrap(), "symbol not found in the target");
        let codes = [
            ERR_TARGET_UNREADABLE,
            ERR_INVALID_ARGUMENT,
            ERR_BAD_HANDLE,
            ERR_SYMBOL_NOT_FOUND,
            ERR_FUNCTION_NOT_FOUND,
            ERR_INTERNAL,
        ];
        let texts: std::collections::HashSet<_> = codes.iter().map(|&c| error_text(c)).collect();
        assert_eq!(texts.len(), codes.len());
        assert!(BASIC_CALLBACKS_NULL_DIAGNOSTICS.mqs_dprints_fp.is_none());
        assert!(BASIC_CALLBACKS_NULL_DIAGNOSTICS.mqs_malloc_fp.is_some());
        assert!(IMAGE_CALLBACKS_NULL_SIZEOF.mqs_sizeof_fp.is_none());
    }

    #[test]
    fn a_panicking_target_becomes_an_error_code() {
        struct Panics;
        impl Target for Panics {
            fn read_memory(&self, _: u64, _: &mut [u8]) -> Result<(), TargetError> {
                panic!("target bug")
            }
            fn find_symbol(&self, _: &str) -> Option<u64> {
                panic!("target bug")
            }
            fn find_function(&self, _: &str) -> Option<u64> {
                None
            }
            fn find_type(&self, _: &str) -> Option<TypeId> {
                None
            }
            fn type_size(&self, _: TypeId) -> Option<u64> {
                None
            }
            fn field_offset(&self, _: TypeId, _: &str) -> Option<u64> {
                None
            }
            fn type_sizes(&self) -> mqs_target_type_sizes {
                mqs_target_type_sizes::default()
            }
            fn byte_order(&self) -> ByteOrder {
                ByteOrder::Little
            }
            fn name(&self) -> String {
                "panics".into()
            }
        }
        let counters = SessionCounters::new();
        let _scope = SessionScope::enter(&counters);
        let image = ImageContext::create(counters.clone(), Box::new(Panics));
        let process = ProcessContext::create(counters.clone(), image, 0);
        let mut buf = [0u8; 4];
        let mut addr = 0;
        // SAFETY: valid handles and buffers; destroyed once at the end.
        unsafe {
            assert_eq!(
                cb_fetch_data(process as *mut mqs_process, 0, 4, buf.as_mut_ptr().cast()),
                ERR_INTERNAL
            );
            assert_eq!(
                cb_find_symbol(
                    image as *mut mqs_image,
                    c"x".as_ptr() as *mut c_char,
                    &mut addr
                ),
                ERR_INTERNAL
            );
            ProcessContext::destroy(process);
            ImageContext::destroy(image);
        }
        assert_eq!(counters.snapshot().callback_panics, 2);
    }
}
