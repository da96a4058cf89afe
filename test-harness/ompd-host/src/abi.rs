//! The OMPD interface of `omp-tools.h` (OpenMP 5.0/5.1) as the host sees it: the
//! callback table it gives the library, the types of the entry points it calls, and the
//! values both sides agree on. Facts of the header; the layouts are LP64's.

#![allow(missing_docs)] // Each name is the header's, documented there.
use std::ffi::{c_char, c_int, c_void};

/// `ompd_rc_t`: every entry point's and callback's result.
pub type Rc = c_int;
pub const RC_OK: Rc = 0;
pub const RC_UNAVAILABLE: Rc = 1;
pub const RC_STALE_HANDLE: Rc = 2;
pub const RC_BAD_INPUT: Rc = 3;
pub const RC_ERROR: Rc = 4;
pub const RC_UNSUPPORTED: Rc = 5;
pub const RC_NEEDS_STATE_TRACKING: Rc = 6;
pub const RC_NOMEM: Rc = 10;

/// An `ompd_rc_t` in words.
pub fn rc_name(rc: Rc) -> String {
    let name = match rc {
        0 => "ompd_rc_ok",
        1 => "ompd_rc_unavailable",
        2 => "ompd_rc_stale_handle",
        3 => "ompd_rc_bad_input",
        4 => "ompd_rc_error",
        5 => "ompd_rc_unsupported",
        6 => "ompd_rc_needs_state_tracking",
        7 => "ompd_rc_incompatible",
        8 => "ompd_rc_device_read_error",
        9 => "ompd_rc_device_write_error",
        10 => "ompd_rc_nomem",
        11 => "ompd_rc_incomplete",
        12 => "ompd_rc_callback_error",
        13 => "ompd_rc_incompatible_handle",
        _ => return format!("ompd_rc_t {rc}"),
    };
    name.into()
}

/// `ompd_scope_t` values the host asks ICVs in.
pub const SCOPE_THREAD: c_int = 3;
pub const SCOPE_PARALLEL: c_int = 4;
pub const SCOPE_TASK: c_int = 6;

/// Thread id kinds of `ompd-types.h`: a `pthread_t`, or the kernel's thread id.
pub const THREAD_ID_PTHREAD: u64 = 0;
pub const THREAD_ID_LWP: u64 = 1;

/// `ompd_state_undefined`: where an enumeration of states starts.
pub const STATE_UNDEFINED: i64 = 0x102;

/// `ompd_address_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Address {
    pub segment: u64,
    pub address: u64,
}

/// `ompd_device_type_sizes_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TypeSizes {
    pub char_: u8,
    pub short: u8,
    pub int: u8,
    pub long: u8,
    pub long_long: u8,
    pub pointer: u8,
}

/// Opaque handles the library makes, and contexts the host makes.
pub type Handle = c_void;
pub type Context = c_void;

/// `ompd_callbacks_t`: eleven function pointers, in the header's order.
#[repr(C)]
pub struct Callbacks {
    pub alloc_memory: unsafe extern "C" fn(u64, *mut *mut c_void) -> Rc,
    pub free_memory: unsafe extern "C" fn(*mut c_void) -> Rc,
    pub print_string: unsafe extern "C" fn(*const c_char, c_int) -> Rc,
    pub sizeof_type: unsafe extern "C" fn(*mut Context, *mut TypeSizes) -> Rc,
    pub symbol_addr_lookup: unsafe extern "C" fn(
        *mut Context,
        *mut Context,
        *const c_char,
        *mut Address,
        *const c_char,
    ) -> Rc,
    pub read_memory:
        unsafe extern "C" fn(*mut Context, *mut Context, *const Address, u64, *mut c_void) -> Rc,
    pub write_memory:
        unsafe extern "C" fn(*mut Context, *mut Context, *const Address, u64, *const c_void) -> Rc,
    pub read_string:
        unsafe extern "C" fn(*mut Context, *mut Context, *const Address, u64, *mut c_void) -> Rc,
    pub device_to_host:
        unsafe extern "C" fn(*mut Context, *const c_void, u64, u64, *mut c_void) -> Rc,
    pub host_to_device:
        unsafe extern "C" fn(*mut Context, *const c_void, u64, u64, *mut c_void) -> Rc,
    pub get_thread_context_for_thread_id:
        unsafe extern "C" fn(*mut Context, u64, u64, *const c_void, *mut *mut Context) -> Rc,
}

/// The entry points the host calls, by their C types.
pub type GetApiVersion = unsafe extern "C" fn(*mut i64) -> Rc;
pub type GetVersionString = unsafe extern "C" fn(*mut *const c_char) -> Rc;
pub type Initialize = unsafe extern "C" fn(i64, *const Callbacks) -> Rc;
pub type ProcessInitialize = unsafe extern "C" fn(*mut Context, *mut *mut Handle) -> Rc;
pub type RelHandle = unsafe extern "C" fn(*mut Handle) -> Rc;
pub type GetOmpVersion = unsafe extern "C" fn(*mut Handle, *mut i64) -> Rc;
pub type GetThreadHandle =
    unsafe extern "C" fn(*mut Handle, u64, u64, *const c_void, *mut *mut Handle) -> Rc;
pub type GetHandleOf = unsafe extern "C" fn(*mut Handle, *mut *mut Handle) -> Rc;
pub type HandleCompare = unsafe extern "C" fn(*mut Handle, *mut Handle, *mut c_int) -> Rc;
pub type GetState = unsafe extern "C" fn(*mut Handle, *mut i64, *mut u64) -> Rc;
pub type EnumerateStates =
    unsafe extern "C" fn(*mut Handle, i64, *mut i64, *mut *const c_char, *mut i64) -> Rc;
pub type EnumerateIcvs = unsafe extern "C" fn(
    *mut Handle,
    u64,
    *mut u64,
    *mut *const c_char,
    *mut c_int,
    *mut c_int,
) -> Rc;
pub type GetIcvFromScope = unsafe extern "C" fn(*mut Handle, c_int, u64, *mut i64) -> Rc;
pub type GetTaskFunction = unsafe extern "C" fn(*mut Handle, *mut Address) -> Rc;

/// The API version the host speaks: OpenMP 5.0's OMPD (both LLVM's and Intel's libraries
/// accept only it).
pub const API_VERSION: i64 = 201811;

/// A state's name as `omp-tools.h` has it, without `ompt_state_`, for the values a
/// library may not enumerate (LLVM 14's names no 0x015).
pub fn state_name(value: i64) -> Option<&'static str> {
    Some(match value {
        0x000 => "work_serial",
        0x001 => "work_parallel",
        0x002 => "work_reduction",
        0x010 => "wait_barrier",
        0x011 => "wait_barrier_implicit_parallel",
        0x012 => "wait_barrier_implicit_workshare",
        0x013 => "wait_barrier_implicit",
        0x014 => "wait_barrier_explicit",
        0x015 => "wait_barrier_implementation",
        0x016 => "wait_barrier_teams",
        0x020 => "wait_taskwait",
        0x021 => "wait_taskgroup",
        0x040 => "wait_mutex",
        0x041 => "wait_lock",
        0x042 => "wait_critical",
        0x043 => "wait_atomic",
        0x044 => "wait_ordered",
        0x080 => "wait_target",
        0x081 => "wait_target_map",
        0x082 => "wait_target_update",
        0x100 => "idle",
        0x101 => "overhead",
        0x102 => "undefined",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_table_is_eleven_pointers() {
        assert_eq!(std::mem::size_of::<Callbacks>(), 88);
        assert_eq!(std::mem::size_of::<Address>(), 16);
        assert_eq!(std::mem::size_of::<TypeSizes>(), 6);
    }

    #[test]
    fn unknown_codes_and_states_are_said_as_numbers() {
        assert_eq!(rc_name(6), "ompd_rc_needs_state_tracking");
        assert_eq!(rc_name(99), "ompd_rc_t 99");
        assert_eq!(state_name(0x015), Some("wait_barrier_implementation"));
        assert_eq!(state_name(0x300), None);
    }
}
