//! Core files: a crashed or `gcore`d process as a [`Target`], post mortem.
//!
//! [`CoreFile`] reads an ELF core (`ET_CORE`, 32 or 64 bits, either byte order) the way
//! a debugger does:
//!
//! - memory from its `PT_LOAD` segments. Dumpers leave out what the files hold: the
//!   kernel writes only the first page of a read-only file-backed mapping (`p_filesz`
//!   one page, `p_memsz` the whole mapping), `gcore` leaves such mappings out entirely.
//!   Those bytes (the code and constants of the program and of `libmpi.so`) are read
//!   from the mapped file, at the offset the `NT_FILE` note gives. The part of a segment
//!   beyond `p_filesz` reads as zeros only when no file backs it (anonymous memory the
//!   process never touched); an anonymous mapping the dumper skipped altogether
//!   (`p_filesz` 0: `MADV_DONTDUMP`, `coredump_filter`) is unreadable, not zero;
//! - the notes: `NT_PRSTATUS` (threads, signal), `NT_PRPSINFO` (pid, program name and
//!   arguments, state), `NT_FILE` (the file mappings, which become
//!   [`mqd_debuginfo::Mapping`]s for an [`AddressSpace`]) and `NT_AUXV` (where the
//!   program's headers are, hence which file is the main executable).
//!
//! [`CoreTarget`] adds the symbols and DWARF types of the mapped files, read by
//! [`AddressSpace::from_mappings_with`] exactly as for a live process. For a core
//! without `NT_FILE` (Linux before 3.7, some dumpers) the executable must be given; the
//! shared libraries are then found the way the dynamic linker lists them (`DT_DEBUG` ->
//! `r_debug` -> `link_map`), in the core's memory.
//!
//! Files mapped by the process that are missing or changed since the crash (build-id,
//! else size and the bytes the core holds of them) give warnings
//! ([`CoreTarget::warnings`]), not errors: the core still has the data segments, and
//! only what would be read from such a file is unreliable.
//!
//! ```no_run
//! use mqd_process::core::CoreTarget;
//! use mqd_target::{DebugInfo, Target};
//! let target = CoreTarget::open("core.1234".as_ref(), None)?;
//! println!("{} (pid {:?})", target.name(), target.pid());
//! let head = target.find_symbol("MPIR_All_communicators");
//! # Ok::<(), mqd_process::core::CoreError>(())
//! ```

mod error;
mod file;
mod files;
mod format;
mod stacks;
mod target;
#[cfg(test)]
mod tests;

pub use error::CoreError;
pub use file::{CoreFile, CoreProcessInfo, FileProblem, Segment};
pub use format::FileMapping;
pub use target::CoreTarget;
