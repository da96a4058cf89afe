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
//!
//! [`Target`]: mqd_target::Target
// Matching on the ABI's result codes by their spec names (mqs_ok, ...).
#![allow(non_upper_case_globals)]

mod contexts;
mod counters;
mod error_codes;
mod limits;
mod tables;
#[cfg(test)]
mod tests;

pub(crate) use contexts::{ImageContext, ProcessContext};
pub use counters::{CounterHandle, Counters, unattributed_counters};
pub(crate) use counters::{SessionCounters, SessionScope};
pub use error_codes::{
    ERR_BAD_HANDLE, ERR_FUNCTION_NOT_FOUND, ERR_INTERNAL, ERR_INVALID_ARGUMENT,
    ERR_SYMBOL_NOT_FOUND, ERR_TARGET_UNREADABLE, error_text,
};
pub use limits::{MALLOC_ALIGN, MAX_ALLOCATION, MAX_DPRINTS_LINES};
pub(crate) use tables::{
    BASIC_CALLBACKS, BASIC_CALLBACKS_NULL_DIAGNOSTICS, IMAGE_CALLBACKS,
    IMAGE_CALLBACKS_NULL_SIZEOF, PROCESS_CALLBACKS,
};
