//! A process's memory joined with the debug information of the objects it maps: the
//! one [`Target`] for live processes and core files.

use mqd_debuginfo::AddressSpace;
use mqd_target::{ByteOrder, DebugInfo, Memory, Target, TargetAbi, TargetError, TypeId};
use std::fmt;

/// A process as a [`Target`]: memory from `process` (a live process, a core file),
/// symbols and types from `space`.
pub struct ProcessTarget<M> {
    /// The process: where the memory comes from.
    pub process: M,
    /// Its loaded objects, symbols and types.
    pub space: AddressSpace,
    name: String,
}

impl<M: fmt::Debug> fmt::Debug for ProcessTarget<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessTarget")
            .field("name", &self.name)
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl<M> ProcessTarget<M> {
    /// Joins a process and its address space under a name for messages.
    pub fn from_parts(process: M, space: AddressSpace, name: String) -> ProcessTarget<M> {
        ProcessTarget {
            process,
            space,
            name,
        }
    }

    /// The process and its address space, apart.
    pub fn into_parts(self) -> (M, AddressSpace) {
        (self.process, self.space)
    }
}

impl<M: Memory> Memory for ProcessTarget<M> {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.process.read_memory(addr, buf)
    }

    fn read_partial(&self, addr: u64, buf: &mut [u8]) -> Result<usize, TargetError> {
        self.process.read_partial(addr, buf)
    }

    fn image_byte_order(&self) -> Option<ByteOrder> {
        self.process.image_byte_order()
    }
}

impl<M: Memory> DebugInfo for ProcessTarget<M> {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.space.find_symbol(name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.space.find_function(name)
    }
    fn find_type(&self, name: &str) -> Option<TypeId> {
        self.space.find_type(name)
    }
    fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.space.type_size(ty)
    }
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        self.space.field_offset(ty, field)
    }
    fn abi(&self) -> TargetAbi {
        self.space.abi()
    }
    fn byte_order(&self) -> ByteOrder {
        // A core says its byte order itself, even when none of its files could be read.
        self.process
            .image_byte_order()
            .unwrap_or_else(|| self.space.byte_order())
    }
}

impl<M: Memory> Target for ProcessTarget<M> {
    fn name(&self) -> String {
        self.name.clone()
    }
}
