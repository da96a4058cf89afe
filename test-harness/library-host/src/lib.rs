//! # mqd-library-host: any MQD library, hosted as TotalView hosts it
//!
//! It loads a message-queue library (`libmqd_mpich.so`, MPICH's `libtvmpich.so`, Open
//! MPI's `libompi_dbg_msgq.so`) and serves its callbacks from a
//! [`mqd_target::Target`]. A tour, bottom up:
//! - [`library`]: loading a library and resolving its entry points (`mqd-abi`'s
//!   signatures); finding the `libmqd_mpich.so` that goes with the running program;
//! - [`callbacks`]: the callback tables the library calls, their per-image and
//!   per-process contexts, and the counters of what it asked;
//! - [`session`]: a library's images, processes and displays, driven exactly as
//!   TotalView drives them; [`extra_text`] decodes what our library writes for debuggers;
//! - [`display`]: one process's display into a rank of the model, and [`failure`], why
//!   one could not be made;
//! - [`isolation`]: a library run in a child process (a [`helper`] the binary names),
//!   its callbacks served over a pipe, so that a library that crashes or hangs costs
//!   one rank, not the debugger.
#![deny(missing_docs)]

pub mod callbacks;
pub mod display;
pub mod extra_text;
pub mod failure;
pub mod helper;
pub mod isolation;
pub mod library;
pub mod session;
