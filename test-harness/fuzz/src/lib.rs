//! # mqd-fuzz: every surface that reads untrusted bytes, as fuzz targets
//!
//! Each [`Target`] takes arbitrary bytes and runs one part of mqd on them. A target
//! *fails* (panics) when mqd panics, reads without bound, or keeps memory of the
//! library's after its session: the same invariants the hand-written corruption tests
//! check. What is fuzzed:
//!
//! - [`Target::Dll`]: the MQD library through a debugger session over a synthetic MPICH
//!   image (any layout, width and byte order), whose objects the input overwrites.
//! - [`Target::Elf`]: an ELF file's symbols and DWARF type lookups.
//! - [`Target::Core`]: the core-file reader: headers, notes, mappings, memory.
//! - [`Target::Tables`]: a starter's MPIR and MPI2DD tables in a memory image.
//! - [`Target::Stack`]: a thread's stack unwound (CFI, frame pointers) and symbolised
//!   over an ELF program, with its MPI call's arguments.
//!
//! [`runner`] mutates seeds in process (short runs, and machines without AFL++);
//! `src/bin/afl.rs` is the AFL++ entry point of a campaign (`scripts/fuzz-campaign`).

pub mod runner;
mod targets;

pub use targets::{Target, recording, run, starter_tables, unwound_stack};
