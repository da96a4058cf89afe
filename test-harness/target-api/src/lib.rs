//! # mqd-target: what a debugger reads of one stopped process
//!
//! What the debugger knows about one stopped process, in two halves: its [`Memory`] and
//! its [`DebugInfo`] (symbols, types, the sizes and byte order of its ABI).
//!
//! A live process (ptrace) and a core file share one implementation, `mqd-process`'s
//! `ProcessTarget`: their memory differs, their debug information is the `AddressSpace`
//! (`mqd-debuginfo`) of the ELF objects they map. Other targets (the synthetic images of
//! the tests) implement the traits themselves. An MQD library is served from any
//! [`Target`].

#![deny(missing_docs)]

mod codec;
mod interface;
mod pages;
mod strings;
mod thread_db;

pub use codec::ByteOrder;
pub use interface::*;
pub use pages::PageReader;
pub use strings::read_c_string;
pub use thread_db::ThreadDbField;
