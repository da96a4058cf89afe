//! A debugger for MQD libraries.
//!
//! It loads any message-queue library (`libmqd_mpich.so`, MPICH's `libtvmpich.so`,
//! Open MPI's `libompi_dbg_msgq.so`) the way TotalView does and serves its callbacks
//! from a [`target::Target`]: a synthetic image, a live process or a core file.
#![deny(missing_docs)]

pub mod analysis;
pub mod dump;
pub mod host;
pub mod library;
pub mod report;
pub mod session;
pub mod synthetic;
pub mod target;

use std::path::PathBuf;

/// The `libmqd_mpich.so` built with this harness: `$MQD_DLL` if set, else the
/// newest library beside the running executable (`target/<profile>/` or its
/// `deps/`, also when the executable is a test or an example one directory deeper).
pub fn bundled_library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MQD_DLL") {
        return Some(PathBuf::from(path));
    }
    // Cargo refreshes `deps/` on every build of a dependent crate but the copy in
    // the profile directory only when the root crate itself is built: take the newest.
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .take(3)
        .flat_map(|dir| [dir.join("libmqd_mpich.so"), dir.join("deps/libmqd_mpich.so")])
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

pub mod debuginfo;
pub mod live;
pub mod fixtures;
pub mod acquire;
pub mod core;
pub mod ranks;
pub mod graph;
