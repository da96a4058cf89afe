//! # mqd-abi: the MQD interface, one definition for both sides
//!
//! The library (`mqd-mpich`, the cdylib) and the debugger that loads any MQD library
//! (`mqd-library-host`) share these definitions, so that neither can drift from the
//! other or from `mpi_interface.h`:
//! - [`types`]: the C types of `mpi_interface.h`, field for field those of MPICH's header
//!   (cbindgen generates `include/mpi_interface.h` from it);
//! - [`entry`]: the signature of every entry point, which the library's exports are
//!   checked against at compile time and the loader resolves symbols as;
//! - [`notes`]: the notes our library writes into an operation's `extra_text` for
//!   debuggers to decode.
#![deny(missing_docs)]

pub mod entry;
pub mod notes;
pub mod types;
