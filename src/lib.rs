//! # mqd-mpich: message queue dumping for MPICH
//!
//! A parallel debugger (TotalView, Linaro DDT, padb) `dlopen`s this library and
//! asks it, through the C ABI of `mpi_interface.h`, for the communicators and the
//! pending sends, posted receives and unexpected messages of a stopped MPICH
//! process. The library never touches the process itself: symbols, types, memory
//! and allocations all come from the debugger's callbacks.
//!
//! A tour of the layers:
//! - The C types (field for field those of MPICH's header), the entry points'
//!   signatures and the notes for debuggers are `mqd-abi`'s, shared with the debugger.
//! - `ffi`: the 18 exported functions, each behind a panic guard.
//! - `callbacks`: the debugger's callbacks behind two small traits, the only place the
//!   safe core meets the C tables (tests implement the traits in Rust).
//! - `layout`: which MPICH layout an image holds (ch3, ch4, debug queues 4.x and
//!   5.x), learnt from the debugger's type information only.
//! - `process` and `target`: per-process state in debugger memory (communicators,
//!   groups, queue walks, the operations' notes), and bounded, cycle-safe walks of
//!   MPICH's lists with one read per target object.
//! - [`error`]: the library's result codes and their texts.
#![deny(missing_docs)]

mod callbacks;
mod debugger;
pub mod error;
mod ffi;
mod layout;
mod process;
mod target;
#[cfg(test)]
mod testing;

pub use ffi::{
    mqs_destroy_image_info, mqs_destroy_process_info, mqs_dll_error_string, mqs_dll_taddr_width,
    mqs_get_comm_group, mqs_get_communicator, mqs_image_has_queues, mqs_next_communicator,
    mqs_next_operation, mqs_process_has_queues, mqs_setup_basic_callbacks,
    mqs_setup_communicator_iterator, mqs_setup_image, mqs_setup_operation_iterator,
    mqs_setup_process, mqs_update_communicator_list, mqs_version_compatibility, mqs_version_string,
};
