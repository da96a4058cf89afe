//! What the debugger knows about one stopped process, in two halves: its [`Memory`] and
//! its [`DebugInfo`] (symbols, types, the sizes and byte order of its ABI).
//!
//! A live process (ptrace) and a core file share one implementation,
//! [`ProcessTarget`](crate::process_target::ProcessTarget): their memory differs, their
//! debug information is an [`AddressSpace`](crate::debuginfo::AddressSpace) of the ELF
//! objects they map. Other targets (the synthetic images of the tests) implement the
//! traits themselves. An MQD library is served from any [`Target`].

mod codec;
mod interface;
mod strings;

pub use codec::ByteOrder;
pub use interface::*;
pub use strings::read_c_string;
