//! # mqd-debugger: a debugger for MQD libraries
//!
//! It loads any message-queue library (`libmqd_mpich.so`, MPICH's `libtvmpich.so`,
//! Open MPI's `libompi_dbg_msgq.so`) the way TotalView does and serves its callbacks from
//! a [`target::Target`]: a live process, a core file, or any other implementation.
//!
//! A tour, bottom up:
//! - [`target`]: memory and debug information of one stopped process, one byte-order
//!   codec and C-string reader;
//! - [`live`] (ptrace) and [`core`] (ELF core files): the processes, joined with
//!   [`debuginfo`] (ELF symbols, DWARF types, separate debug files) into targets;
//! - [`library`] (loading an MQD library), [`host`] (the callbacks it calls, counted) and
//!   [`session`] (its displays, exactly as TotalView drives them);
//! - [`acquire`]: jobs through MPIR and MPI2DD;
//! - [`dump`]: whole jobs and core files into a [`mqd_model::JobDump`].
#![deny(missing_docs)]

pub mod acquire;
mod call_args;
pub mod cfi;
pub mod core;
pub mod cut;
pub mod debuginfo;
pub mod dump;
pub mod host;
pub mod identity;
pub mod isolation;
pub mod library;
pub mod live;
mod notes;
pub mod remote;
pub mod session;
pub mod stack;
pub mod target;

pub use library::bundled_library;
