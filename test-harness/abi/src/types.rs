//! The C types of `mpi_interface.h`.
//!
//! Field order, widths and names follow the header MPICH ships (and TotalView
//! defined), so `include/mpi_interface.h` — generated from this module by
//! cbindgen — is a drop-in replacement for it. Values that arrive from C are
//! plain `c_int`s: a Rust enum is never received by value across the boundary.
#![allow(non_camel_case_types, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::marker::PhantomData;

/// A target address, wide enough for any target pointer (C `unsigned long`).
pub type mqs_taddr_t = c_ulong;
/// A target word (C `long`).
pub type mqs_tword_t = c_long;

/// The interface version this library implements.
pub const MQS_INTERFACE_COMPATIBILITY: c_int = 2;
/// Success.
pub const mqs_ok: c_int = 0;
/// The library has nothing to say (e.g. no group known).
pub const mqs_no_information: c_int = 1;
/// An iterator is exhausted.
pub const mqs_end_of_list: c_int = 2;
/// First code of the range each side uses for its own errors.
pub const mqs_first_user_code: c_int = 100;
/// An invalid process index.
pub const MQS_INVALID_PROCESS: c_int = -1;

/// Source language of a looked-up type or function (passed as a C `int`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mqs_lang_code {
    /// C (`'c'`).
    mqs_lang_c = 99,
    /// C++ (`'C'`).
    mqs_lang_cplus = 67,
    /// Fortran 77 (`'f'`).
    mqs_lang_f77 = 102,
    /// Fortran 90 (`'F'`).
    mqs_lang_f90 = 70,
}

/// The three queues of a communicator.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mqs_op_class {
    /// Sends not yet matched by their receiver.
    mqs_pending_sends = 0,
    /// Receives posted and not yet freed.
    mqs_pending_receives = 1,
    /// Messages that arrived before a matching receive was posted.
    mqs_unexpected_messages = 2,
}

/// Completion state of an operation (`mqs_pending_operation::status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mqs_status {
    /// Not matched yet.
    mqs_st_pending = 0,
    /// Matched, data still moving.
    mqs_st_matched = 1,
    /// Complete, the request not yet waited for or freed.
    mqs_st_complete = 2,
}

/// Sizes of the target's basic C types, filled by the debugger.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mqs_target_type_sizes {
    /// `sizeof(short)`.
    pub short_size: c_int,
    /// `sizeof(int)`.
    pub int_size: c_int,
    /// `sizeof(long)`.
    pub long_size: c_int,
    /// `sizeof(long long)`.
    pub long_long_size: c_int,
    /// `sizeof(void *)`.
    pub pointer_size: c_int,
}

/// One communicator as the debugger displays it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mqs_communicator {
    /// Identity of the communicator, stable across updates while it lives.
    pub unique_id: mqs_taddr_t,
    /// This process's rank in it (`MPI_Comm_rank`).
    pub local_rank: mqs_tword_t,
    /// `MPI_Comm_size` (the local group of an intercommunicator).
    pub size: mqs_tword_t,
    /// NUL-terminated name.
    pub name: [c_char; 64],
}

/// One pending send, posted receive or unexpected message.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mqs_pending_operation {
    /// A `mqs_status` value.
    pub status: c_int,
    /// Peer rank in the communicator, -1 for any source.
    pub desired_local_rank: mqs_tword_t,
    /// Peer rank in COMM_WORLD, -1 when unknown or any.
    pub desired_global_rank: mqs_tword_t,
    /// Non-zero for an MPI_ANY_TAG receive.
    pub tag_wild: c_int,
    /// Tag (meaningless when `tag_wild`).
    pub desired_tag: mqs_tword_t,
    /// Element count of the user buffer.
    pub desired_length: mqs_tword_t,
    /// Non-zero when the data sits in a library buffer.
    pub system_buffer: c_int,
    /// Address of the data.
    pub buffer: mqs_taddr_t,
    /// Matched peer rank in the communicator.
    pub actual_local_rank: mqs_tword_t,
    /// Matched peer rank in COMM_WORLD.
    pub actual_global_rank: mqs_tword_t,
    /// Matched tag.
    pub actual_tag: mqs_tword_t,
    /// Matched length.
    pub actual_length: mqs_tword_t,
    /// Five NUL-terminated lines shown to the user as they are.
    pub extra_text: [[c_char; 64]; 5],
}

/// Debugger-owned executable image (opaque to the library).
pub struct mqs_image {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}
/// Debugger-owned process (opaque to the library).
pub struct mqs_process {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}
/// Debugger-owned type handle (opaque to the library).
pub struct mqs_type {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}
/// Library-owned per-image state (opaque to the debugger).
pub struct mqs_image_info {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}
/// Library-owned per-process state (opaque to the debugger).
pub struct mqs_process_info {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}

/// Allocate debugger memory.
pub type mqs_malloc_ft = Option<unsafe extern "C" fn(usize) -> *mut c_void>;
/// Free debugger memory.
pub type mqs_free_ft = Option<unsafe extern "C" fn(*mut c_void)>;
/// Print a diagnostic line in the debugger.
pub type mqs_dprints_ft = Option<unsafe extern "C" fn(*const c_char)>;
/// Text of a debugger error code.
pub type mqs_errorstring_ft = Option<unsafe extern "C" fn(c_int) -> *mut c_char>;
/// Hang library state on an image.
pub type mqs_put_image_info_ft = Option<unsafe extern "C" fn(*mut mqs_image, *mut mqs_image_info)>;
/// Get it back.
pub type mqs_get_image_info_ft =
    Option<unsafe extern "C" fn(*mut mqs_image) -> *mut mqs_image_info>;
/// Hang library state on a process.
pub type mqs_put_process_info_ft =
    Option<unsafe extern "C" fn(*mut mqs_process, *mut mqs_process_info)>;
/// Get it back.
pub type mqs_get_process_info_ft =
    Option<unsafe extern "C" fn(*mut mqs_process) -> *mut mqs_process_info>;
/// Sizes of the target's basic types.
pub type mqs_get_type_sizes_ft =
    Option<unsafe extern "C" fn(*mut mqs_process, *mut mqs_target_type_sizes)>;
/// Address of a function (`addr` may be NULL: load its unit's debug info).
pub type mqs_find_function_ft =
    Option<unsafe extern "C" fn(*mut mqs_image, *mut c_char, c_int, *mut mqs_taddr_t) -> c_int>;
/// Address of a global variable.
pub type mqs_find_symbol_ft =
    Option<unsafe extern "C" fn(*mut mqs_image, *mut c_char, *mut mqs_taddr_t) -> c_int>;
/// A named type, NULL when unknown.
pub type mqs_find_type_ft =
    Option<unsafe extern "C" fn(*mut mqs_image, *mut c_char, c_int) -> *mut mqs_type>;
/// Byte offset of a field, -1 when unknown.
pub type mqs_field_offset_ft = Option<unsafe extern "C" fn(*mut mqs_type, *mut c_char) -> c_int>;
/// `sizeof` a type.
pub type mqs_sizeof_ft = Option<unsafe extern "C" fn(*mut mqs_type) -> c_int>;
/// COMM_WORLD rank of a process.
pub type mqs_get_global_rank_ft = Option<unsafe extern "C" fn(*mut mqs_process) -> c_int>;
/// The image a process runs.
pub type mqs_get_image_ft = Option<unsafe extern "C" fn(*mut mqs_process) -> *mut mqs_image>;
/// Read raw target bytes.
pub type mqs_fetch_data_ft =
    Option<unsafe extern "C" fn(*mut mqs_process, mqs_taddr_t, c_int, *mut c_void) -> c_int>;
/// Convert one target scalar to host byte order.
pub type mqs_target_to_host_ft =
    Option<unsafe extern "C" fn(*mut mqs_process, *const c_void, *mut c_void, c_int)>;

/// Callbacks every debugger provides once.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mqs_basic_callbacks {
    /// Allocate.
    pub mqs_malloc_fp: mqs_malloc_ft,
    /// Free.
    pub mqs_free_fp: mqs_free_ft,
    /// Diagnostics (may be NULL).
    pub mqs_dprints_fp: mqs_dprints_ft,
    /// Debugger error text (may be NULL).
    pub mqs_errorstring_fp: mqs_errorstring_ft,
    /// Store image info.
    pub mqs_put_image_info_fp: mqs_put_image_info_ft,
    /// Load image info.
    pub mqs_get_image_info_fp: mqs_get_image_info_ft,
    /// Store process info.
    pub mqs_put_process_info_fp: mqs_put_process_info_ft,
    /// Load process info.
    pub mqs_get_process_info_fp: mqs_get_process_info_ft,
}

/// Callbacks about an image: symbols and types.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mqs_image_callbacks {
    /// Target type sizes (takes a process).
    pub mqs_get_type_sizes_fp: mqs_get_type_sizes_ft,
    /// Find a function.
    pub mqs_find_function_fp: mqs_find_function_ft,
    /// Find a global variable.
    pub mqs_find_symbol_fp: mqs_find_symbol_ft,
    /// Find a type.
    pub mqs_find_type_fp: mqs_find_type_ft,
    /// Offset of a field.
    pub mqs_field_offset_fp: mqs_field_offset_ft,
    /// Size of a type (may be NULL).
    pub mqs_sizeof_fp: mqs_sizeof_ft,
}

/// Callbacks about a process: memory and identity.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mqs_process_callbacks {
    /// COMM_WORLD rank.
    pub mqs_get_global_rank_fp: mqs_get_global_rank_ft,
    /// The image.
    pub mqs_get_image_fp: mqs_get_image_ft,
    /// Read memory.
    pub mqs_fetch_data_fp: mqs_fetch_data_ft,
    /// Byte order conversion.
    pub mqs_target_to_host_fp: mqs_target_to_host_ft,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn lp64_sizes_and_offsets_match_mpich_header() {
        assert_eq!(size_of::<mqs_target_type_sizes>(), 20);
        assert_eq!(size_of::<mqs_communicator>(), 88);
        assert_eq!(offset_of!(mqs_communicator, name), 24);
        assert_eq!(size_of::<mqs_pending_operation>(), 416);
        assert_eq!(offset_of!(mqs_pending_operation, desired_local_rank), 8);
        assert_eq!(offset_of!(mqs_pending_operation, tag_wild), 24);
        assert_eq!(offset_of!(mqs_pending_operation, system_buffer), 48);
        assert_eq!(offset_of!(mqs_pending_operation, buffer), 56);
        assert_eq!(offset_of!(mqs_pending_operation, extra_text), 96);
        assert_eq!(size_of::<mqs_basic_callbacks>(), 64);
        assert_eq!(size_of::<mqs_image_callbacks>(), 48);
        assert_eq!(size_of::<mqs_process_callbacks>(), 32);
        assert_eq!(size_of::<mqs_lang_code>(), 4);
    }
}
