//! # mqd-process: stopped processes, read from the outside
//!
//! What a debugger needs of a process before it knows anything of MPI: its memory, its
//! objects' symbols and types, and its threads' stacks. A tour, bottom up:
//! - [`target`]: the [`target::Target`] every reader serves (memory, symbols, types), its
//!   byte-order codec and C-string reader;
//! - [`debuginfo`]: ELF objects, their symbol tables and separate debug files, DWARF
//!   types, code (locations, inlined scopes, line tables), and the cache of indexed
//!   types;
//! - [`process_target`]: a process's memory joined with the debug information of the
//!   objects it maps, the target of live processes and cores;
//! - [`live`]: live processes through ptrace (attach, stop every thread, read, detach
//!   leaving signals as they were);
//! - [`core`]: ELF core files and the files they map;
//! - [`cfi`] and [`stack`]: call-frame information and unwinding every thread, with the
//!   frames of a runtime the caller names (an MPI library, for `mqd-job`) marked.
#![deny(missing_docs)]

pub mod cfi;
pub mod core;
pub mod debuginfo;
pub mod live;
pub mod process_target;
pub mod stack;
pub mod target;
