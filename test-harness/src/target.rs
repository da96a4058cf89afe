//! What the debugger knows about one stopped process: its memory, symbols and types.
//!
//! Three sources implement [`Target`]: a live process (ptrace), a core file and the
//! synthetic images of [`crate::synthetic`]. The callback host serves the MQD library
//! from any of them.

use mqd_mpich::abi::mqs_target_type_sizes;
use std::fmt;

/// Byte order of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

/// A handle on a type known to a [`Target`]; meaningful only to that target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeId(pub usize);

/// Why a read of target memory failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// No mapping covers `[addr, addr + len)`.
    Unmapped {
        /// First byte asked for.
        addr: u64,
        /// Bytes asked for.
        len: usize,
    },
    /// The operating system refused the read.
    Io(String),
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Unmapped { addr, len } => {
                write!(f, "no target memory at {addr:#x} ({len} bytes)")
            }
            TargetError::Io(why) => write!(f, "target read failed: {why}"),
        }
    }
}

impl std::error::Error for TargetError {}

/// One stopped process as a debugger sees it.
pub trait Target {
    /// Fills `buf` with the target bytes at `addr`, all or nothing.
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;
    /// Address of a global variable.
    fn find_symbol(&self, name: &str) -> Option<u64>;
    /// Address of a function.
    fn find_function(&self, name: &str) -> Option<u64>;
    /// A named type (struct, union or typedef), if the debug information has it.
    fn find_type(&self, name: &str) -> Option<TypeId>;
    /// `sizeof` the type.
    fn type_size(&self, ty: TypeId) -> Option<u64>;
    /// Byte offset of a member of a struct or union type.
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64>;
    /// Sizes of the basic C types.
    fn type_sizes(&self) -> mqs_target_type_sizes;
    /// Byte order of scalars in memory.
    fn byte_order(&self) -> ByteOrder;
    /// A short human name for messages ("rank 3 (pid 1234)", "synthetic ch3 LP64 LE").
    fn name(&self) -> String;
}
