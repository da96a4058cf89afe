//! What each debugger session's callbacks were asked to do, attributed to the session.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
// ---------------------------------------------------------------------------------------
// Counters

/// Live counters of one debugger session, updated from the callbacks.
#[derive(Default)]
pub(crate) struct SessionCounters {
    pub(crate) fetches: AtomicU64,
    pub(crate) fetch_bytes: AtomicU64,
    pub(crate) failed_fetches: AtomicU64,
    pub(crate) largest_fetch: AtomicU64,
    pub(crate) find_symbol_calls: AtomicU64,
    pub(crate) find_function_calls: AtomicU64,
    pub(crate) find_type_calls: AtomicU64,
    pub(crate) field_offset_calls: AtomicU64,
    pub(crate) sizeof_calls: AtomicU64,
    pub(crate) type_sizes_calls: AtomicU64,
    pub(crate) target_to_host_calls: AtomicU64,
    pub(crate) mallocs: AtomicU64,
    pub(crate) failed_mallocs: AtomicU64,
    pub(crate) frees: AtomicU64,
    pub(crate) bad_frees: AtomicU64,
    pub(crate) outstanding_allocations: AtomicU64,
    pub(crate) outstanding_bytes: AtomicU64,
    pub(crate) bad_handles: AtomicU64,
    pub(crate) callback_panics: AtomicU64,
    pub(crate) dprints_calls: AtomicU64,
    pub(crate) errorstring_calls: AtomicU64,
    pub(crate) image_info_calls: AtomicU64,
    pub(crate) process_info_calls: AtomicU64,
    pub(crate) get_image_calls: AtomicU64,
    pub(crate) get_global_rank_calls: AtomicU64,
    pub(crate) dprints: Mutex<Vec<String>>,
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SessionCounters {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(crate) fn snapshot(&self) -> Counters {
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
    pub(crate) fn reset(&self) {
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
/// Taken by [`CounterHandle::snapshot`] or `Session::counters`; the counts tell how
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
    /// `mqs_dprints_fp` calls (all of them, even past
    /// [`MAX_DPRINTS_LINES`](crate::callbacks::MAX_DPRINTS_LINES)).
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
/// Lets a test drop a `Session` (which destroys the library's per-process state) and
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

pub(crate) static UNATTRIBUTED: LazyLock<Arc<SessionCounters>> =
    LazyLock::new(SessionCounters::new);

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
pub(crate) fn current() -> Arc<SessionCounters> {
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
    pub(crate) previous: Option<Arc<SessionCounters>>,
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
pub(crate) fn guard<R>(fallback: R, body: impl FnOnce() -> R) -> R {
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
