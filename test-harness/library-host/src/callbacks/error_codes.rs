//! The debugger's own error codes, from `mqs_first_user_code` on, and their text.

use mqd_abi::types::*;
use std::ffi::{CStr, c_int};

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
