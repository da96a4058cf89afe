//! A debugger for MQD libraries.
//!
//! It loads any message-queue library (`libmqd_mpich.so`, MPICH's `libtvmpich.so`,
//! Open MPI's `libompi_dbg_msgq.so`) the way TotalView does and serves its callbacks
//! from a [`target::Target`]: a synthetic image, a live process or a core file.
#![deny(missing_docs)]

pub mod host;
pub mod library;
pub mod session;
pub mod synthetic;
pub mod target;
