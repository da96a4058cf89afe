//! `libmqd_recorder.so`: every C binding of the MPI standard wrapped (the profiling
//! interface, `LD_PRELOAD`ed), each thread's call in progress kept in a region of the
//! rank's own memory that `mqd` finds by symbol and reads, live or from a core.
//!
//! A wrapper records and calls the next definition of its binding (another tool preloaded
//! after this one, else the MPI's), passing on the very words it was called with: a
//! handle is an `int` in the MPICH family and a pointer in Open MPI, and both travel in
//! 64-bit registers and stack slots, so one wrapper serves both ABIs. It never changes
//! what the call does or returns. Nothing here allocates, locks or writes to a file.

mod comms;
mod next;
mod record;
mod region;

/// A machine word: how every argument of an MPI C binding travels on x86-64 and AArch64.
pub type Word = usize;

/// A wrapped C binding.
pub struct Binding {
    /// Its name.
    pub name: &'static std::ffi::CStr,
    /// Each parameter's role (see `build.rs`).
    pub roles: &'static [u8],
    /// The large-count (`_c`) form.
    pub large: bool,
    /// Collective over its communicator (counted there).
    pub collective: bool,
}

include!(concat!(env!("OUT_DIR"), "/wrappers.rs"));
