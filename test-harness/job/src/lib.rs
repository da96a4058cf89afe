//! # mqd-job: MPI jobs, found, stopped at one moment and dumped
//!
//! A tour, bottom up:
//! - [`acquire`]: jobs through MPIR (a starter's proctable), MPI2DD and launchers'
//!   environments;
//! - [`process_ref`]: a process to dump, as the job names it (or a bare pid);
//! - [`identity`]: which rank a process is, and checks that a process is the one the
//!   job names;
//! - [`cut`]: one consistent cut, every process stopped before any is read;
//! - [`call_args`] and [`stacks`]: every thread's stack with the arguments of the MPI
//!   call it is in (MPICH's handles and communicators); [`caller_args`] reads them
//!   from the caller's side where the library has no DWARF, with what `mqd-mpi-abi`
//!   knows of each MPI's handles and communicator objects;
//! - [`stay`] and [`activity`]: whether blocked ranks stay in their calls through a
//!   window, and what their processes do meanwhile (a hold);
//! - [`records`]: what the hang recorder kept in a rank's memory (each thread's call and
//!   its envelope), taken over what its frames say;
//! - [`dump`]: whole jobs and core files into a [`mqd_model::JobDump`] (other hosts are
//!   `mqd-remote`'s).
#![deny(missing_docs)]

pub mod acquire;
pub mod activity;
pub mod call_args;
pub mod caller_args;
pub mod cut;
pub mod dump;
pub mod identity;
pub mod process_ref;
pub mod record_watch;
pub mod records;
pub mod signatures;
pub mod stacks;
pub mod stay;
