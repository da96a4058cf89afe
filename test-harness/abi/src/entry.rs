//! The signatures of the MQD entry points: what the loader resolves each symbol as, and
//! what `mqd-mpich` exports (checked where it defines them, so that the two cannot
//! differ).

use crate::types::*;
use std::ffi::{c_char, c_int};

/// `mqs_setup_basic_callbacks`.
pub type SetupBasicCallbacksFn = unsafe extern "C" fn(*const mqs_basic_callbacks);
/// `mqs_version_string`, `mqs_dll_error_string` without its argument.
pub type VersionStringFn = unsafe extern "C" fn() -> *const c_char;
/// `mqs_version_compatibility`, `mqs_dll_taddr_width`.
pub type IntFn = unsafe extern "C" fn() -> c_int;
/// `mqs_dll_error_string`.
pub type DllErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
/// `mqs_setup_image`.
pub type SetupImageFn = unsafe extern "C" fn(*mut mqs_image, *const mqs_image_callbacks) -> c_int;
/// `mqs_image_has_queues` (MPICH declares `const char **`, Open MPI `char **`: same ABI).
pub type ImageHasQueuesFn = unsafe extern "C" fn(*mut mqs_image, *mut *const c_char) -> c_int;
/// `mqs_destroy_image_info`.
pub type DestroyImageInfoFn = unsafe extern "C" fn(*mut mqs_image_info);
/// `mqs_setup_process`.
pub type SetupProcessFn =
    unsafe extern "C" fn(*mut mqs_process, *const mqs_process_callbacks) -> c_int;
/// `mqs_process_has_queues` (`char **`, as MPICH declares it).
pub type ProcessHasQueuesFn = unsafe extern "C" fn(*mut mqs_process, *mut *mut c_char) -> c_int;
/// `mqs_destroy_process_info`.
pub type DestroyProcessInfoFn = unsafe extern "C" fn(*mut mqs_process_info);
/// `mqs_update_communicator_list`, `mqs_setup_communicator_iterator`,
/// `mqs_next_communicator`, and padb's `mqs_get_global_rank`.
pub type ProcessFn = unsafe extern "C" fn(*mut mqs_process) -> c_int;
/// `mqs_get_communicator`.
pub type GetCommunicatorFn = unsafe extern "C" fn(*mut mqs_process, *mut mqs_communicator) -> c_int;
/// `mqs_get_comm_group` (the caller allocates `size` ints).
pub type GetCommGroupFn = unsafe extern "C" fn(*mut mqs_process, *mut c_int) -> c_int;
/// `mqs_setup_operation_iterator`.
pub type SetupOperationIteratorFn = unsafe extern "C" fn(*mut mqs_process, c_int) -> c_int;
/// `mqs_next_operation`.
pub type NextOperationFn =
    unsafe extern "C" fn(*mut mqs_process, *mut mqs_pending_operation) -> c_int;
/// padb's `mqs_get_comm_coll_state(process, coll_class, &count, &active)`.
pub type GetCommCollStateFn =
    unsafe extern "C" fn(*mut mqs_process, c_int, *mut c_int, *mut c_int) -> c_int;

/// Our library's `mqd_get_comm_context_ids(process, &context_id, &recv_context_id)`.
pub type GetCommContextIdsFn =
    unsafe extern "C" fn(*mut mqs_process, *mut mqs_tword_t, *mut mqs_tword_t) -> c_int;
/// Our library's `mqd_get_mpi_state(process, &phase, &thread_level)`.
pub type GetMpiStateFn = unsafe extern "C" fn(*mut mqs_process, *mut c_int, *mut c_int) -> c_int;
