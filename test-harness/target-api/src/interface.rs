//! The two halves of a target as traits, and the types they speak: its memory, and its
//! debug information (symbols, types, the sizes and byte order of its ABI).

use crate::codec::ByteOrder;
use std::fmt;

/// A handle on a type known to a [`DebugInfo`]; meaningful only to that one.
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
    /// The process has exited.
    Exited {
        /// Its pid.
        pid: i32,
    },
    /// A system call on the process failed.
    Os {
        /// Its pid.
        pid: i32,
        /// What was being done (`process_vm_readv`, `PTRACE_PEEKDATA`...).
        operation: String,
        /// The error number.
        errno: i32,
    },
    /// The memory is mapped, but its bytes are not to be had: a core cut short or
    /// without that memory, a mapped file missing or changed since.
    Unavailable {
        /// First byte asked for.
        addr: u64,
        /// Why, and what would have held it.
        why: String,
    },
    /// The way to the target failed (its tracer, the pipe to a library host).
    Channel(String),
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Unmapped { addr, len } => {
                write!(f, "no target memory at {addr:#x} ({len} bytes)")
            }
            TargetError::Exited { pid } => write!(f, "target read failed: pid {pid} has exited"),
            TargetError::Os {
                pid,
                operation,
                errno,
            } => write!(
                f,
                "target read failed: {operation} of pid {pid}: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            TargetError::Unavailable { why, .. } => write!(f, "target read failed: {why}"),
            TargetError::Channel(why) => write!(f, "target read failed: {why}"),
        }
    }
}

impl std::error::Error for TargetError {}

/// Sizes in bytes of the basic C types of the target's ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TargetAbi {
    /// `short`.
    pub short: u8,
    /// `int`.
    pub int: u8,
    /// `long`.
    pub long: u8,
    /// `long long`.
    pub long_long: u8,
    /// A data pointer.
    pub pointer: u8,
}

impl TargetAbi {
    /// x86_64, aarch64 and other LP64 Unix targets.
    pub const LP64: TargetAbi = TargetAbi {
        short: 2,
        int: 4,
        long: 8,
        long_long: 8,
        pointer: 8,
    };
    /// 32-bit Unix targets.
    pub const ILP32: TargetAbi = TargetAbi {
        short: 2,
        int: 4,
        long: 4,
        long_long: 8,
        pointer: 4,
    };
}

/// The memory of a stopped process.
pub trait Memory {
    /// Fills `buf` with the target bytes at `addr`, all or nothing.
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;

    /// Reads as many bytes at `addr` as are readable, up to `buf.len()`, and returns how
    /// many. The default narrows all-or-nothing reads down to the readable prefix.
    fn read_partial(&self, addr: u64, buf: &mut [u8]) -> Result<usize, TargetError> {
        match self.read_memory(addr, buf) {
            Ok(()) => Ok(buf.len()),
            Err(TargetError::Unmapped { .. }) => {
                let mut n = 0;
                while n < buf.len() {
                    let at = addr.checked_add(n as u64).ok_or(TargetError::Unmapped {
                        addr,
                        len: buf.len(),
                    })?;
                    if self.read_memory(at, &mut buf[n..n + 1]).is_err() {
                        break;
                    }
                    n += 1;
                }
                Ok(n)
            }
            Err(e) => Err(e),
        }
    }

    /// The byte order of the memory image, when it says itself (a core's ELF header).
    fn image_byte_order(&self) -> Option<ByteOrder> {
        None
    }
}

/// The symbols and types of a stopped process.
pub trait DebugInfo {
    /// Address of a global variable.
    fn find_symbol(&self, name: &str) -> Option<u64>;
    /// Address of a function.
    fn find_function(&self, name: &str) -> Option<u64>;
    /// A named type (struct, union or typedef), if the debug information has it.
    fn find_type(&self, name: &str) -> Option<TypeId>;
    /// `sizeof` the type.
    fn type_size(&self, ty: TypeId) -> Option<u64>;
    /// Byte offset of a member of a struct or union type (dotted paths reach into
    /// members of unnamed types).
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64>;
    /// Sizes of the basic C types.
    fn abi(&self) -> TargetAbi;
    /// Byte order of scalars in memory.
    fn byte_order(&self) -> ByteOrder;
}

/// One stopped process as a debugger sees it: memory and debug information.
pub trait Target: Memory + DebugInfo {
    /// A short human name for messages ("rank 3 (pid 1234, /path/a.out)").
    fn name(&self) -> String;
}
