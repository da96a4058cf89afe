//! # mqd-debuginfo: symbols, types, code and stacks of a process, like a debugger reads them
//!
//! The ELF objects mapped in a process's address space, their load bias, their symbol
//! tables and their DWARF; and its threads' stacks, unwound through their CFI.
//!
//! An [`AddressSpace`] is built from `/proc/PID/maps` ([`AddressSpace::from_pid`]) or
//! from any list of [`Mapping`]s (a core file's, [`AddressSpace::from_mappings`]). It
//! answers what an MQD library asks through its image callbacks:
//!
//! - [`AddressSpace::find_symbol`] and [`AddressSpace::find_function`] search `.symtab`
//!   *and* `.dynsym` of every object, the main executable first; a global definition
//!   wins over a local (`static`) one, and local symbols are found too, since MPICH's
//!   queue heads are `static`. Addresses are run-time addresses (load bias applied).
//! - [`AddressSpace::find_type`], [`AddressSpace::type_size`] and
//!   [`AddressSpace::field_offset`] read DWARF 2 to 5 (type units and compressed
//!   sections too): structs, unions, enums, base types
//!   and typedef chains, skipping declarations (an opaque `struct X;` is resolved to a
//!   definition of `X` elsewhere), with members of anonymous struct and union members
//!   found through them and dotted paths (`"dev.ch4.am"`).
//! - A stripped object's separate debug file is found by build-id
//!   (`<debug dir>/.build-id/ab/cdef….debug`) or `.gnu_debuglink` (beside the object,
//!   in its `.debug/` subdirectory, or in `<debug dir>/<object's dir>/`).
//!
//! Nothing is parsed twice: each file is mapped and parsed once per process (a cache
//! keyed by canonical path, device, inode and modification time, shared by every
//! address space, so the ranks of one job share one parse of `libmpi.so`). Symbol tables
//! are read on the first symbol lookup; DWARF on the first type query, when each unit's
//! top-level DIEs (and nothing below them) are indexed by name, on all cores for a
//! large file (`MQD_INDEX_THREADS` caps the threads). Member DIEs are read only for the
//! type whose field is asked.
//!
//! ```no_run
//! use mqd_debuginfo::AddressSpace;
//! let space = AddressSpace::from_pid(1234)?;
//! let head = space.find_symbol("MPIR_All_communicators");
//! let comm = space.find_type("MPIR_Comm").expect("no DWARF for MPIR_Comm");
//! let offset = space.field_offset(comm, "context_id");
//! # Ok::<(), mqd_debuginfo::DebugInfoError>(())
//! ```

//!
//! A tour of the modules:
//! - [`space`]: the [`AddressSpace`] of a process, and how its files are found
//!   ([`SearchOptions`]);
//! - [`elf`] (objects, symbol tables, separate debug files) over [`bytes`] (mapped
//!   files and their sections), [`dwarf`] (units and the type name index, with
//!   `accel`'s `.debug_names` and `absent`'s proofs that a name is not there),
//!   [`code`] (locations, inlined scopes, line tables), [`maps`] (`/proc/PID/maps`),
//!   [`memo`] (type answers kept between runs), [`error`];
//! - [`cfi`] and [`stack`]: call-frame information and unwinding every thread, with the
//!   frames of a runtime the caller names marked.
#![deny(missing_docs)]

mod absent;
mod accel;
pub mod bytes;
pub mod call_site;
pub mod cfi;
pub mod code;
pub mod dwarf;
pub mod dynsym;
pub mod elf;
pub mod error;
mod inflated;
pub mod maps;
pub mod memo;
pub mod space;
pub mod stack;

pub use error::DebugInfoError;
pub use maps::{Mapping, parse_proc_maps};
pub use space::{AddressSpace, SearchOptions, default_debug_dirs, indexed_files};
