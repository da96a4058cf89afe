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

use mqd_abi::types::*;
use mqd_process::target::{Target, TargetAbi, TypeId};
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

mod callbacks;
mod contexts;
mod counters;
#[cfg(test)]
mod tests;

pub(crate) use callbacks::{
    BASIC_CALLBACKS, BASIC_CALLBACKS_NULL_DIAGNOSTICS, IMAGE_CALLBACKS,
    IMAGE_CALLBACKS_NULL_SIZEOF, PROCESS_CALLBACKS,
};
pub(crate) use contexts::{ImageContext, ProcessContext};
pub use counters::{CounterHandle, Counters, unattributed_counters};
pub(crate) use counters::{SessionCounters, SessionScope};
