//! # mqd-process: stopped processes, read from the outside
//!
//! Live processes and core files as [`mqd_target::Target`]s, before anything is known
//! of MPI. A tour:
//! - [`live`]: live processes through ptrace (attach, stop every thread, read, detach
//!   leaving signals as they were);
//! - [`core`]: ELF core files and the files they map;
//! - [`process_target`]: a process's memory joined with the debug information
//!   (`mqd-debuginfo`) of the objects it maps, the target of both.
#![deny(missing_docs)]

pub mod core;
pub mod live;
pub mod process_target;
