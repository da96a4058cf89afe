//! The callbacks' source for a process mqd holds (live or a core): its memory, the
//! symbols of its objects (local ones too: Intel's runtime keeps its OMPD symbols in
//! `.symtab` only) and its threads' thread-local variables.
//!
//! A thread-local variable is found as glibc's `libthread_db` finds it, from facts glibc
//! publishes for debuggers (`_thread_db_*` descriptors: offset and size of a field):
//! the object's `link_map` (from `_r_debug`, by its load bias) gives its TLS module id;
//! the thread's descriptor (at its thread pointer) gives its DTV; the DTV's slot for the
//! module gives the block the variable is at an offset in.

use crate::abi::TypeSizes;
use crate::callbacks::{OsThread, Source};
use mqd_debuginfo::AddressSpace;
use mqd_target::Memory;
use std::cell::RefCell;
use std::collections::HashMap;

/// Longest `link_map` chain followed.
const MAX_OBJECTS: usize = 4096;

/// A process's memory and objects.
pub struct TargetSource<'a> {
    space: &'a AddressSpace,
    memory: &'a dyn Memory,
    /// TLS module id by object load bias.
    modules: RefCell<HashMap<u64, Option<u64>>>,
}

impl<'a> TargetSource<'a> {
    /// The source of the process whose objects are `space` and memory `memory`.
    pub fn new(space: &'a AddressSpace, memory: &'a dyn Memory) -> TargetSource<'a> {
        TargetSource {
            space,
            memory,
            modules: RefCell::new(HashMap::new()),
        }
    }

    fn word(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.memory.read_memory(addr, &mut b).ok()?;
        Some(u64::from_le_bytes(b))
    }

    /// A glibc descriptor `_thread_db_NAME`: (size in bits, count, offset).
    fn descriptor(&self, name: &str) -> Option<(u32, u32, u32)> {
        let at = self.space.find_symbol(&format!("_thread_db_{name}"))?;
        let mut b = [0u8; 12];
        self.memory.read_memory(at, &mut b).ok()?;
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some((word(0), word(4), word(8)))
    }

    /// The TLS module id of the object loaded at `bias`.
    fn module_id(&self, bias: u64) -> Option<u64> {
        if let Some(&known) = self.modules.borrow().get(&bias) {
            return known;
        }
        let found = self.find_module_id(bias);
        self.modules.borrow_mut().insert(bias, found);
        found
    }

    fn find_module_id(&self, bias: u64) -> Option<u64> {
        let (bits, _, offset) = self.descriptor("link_map_l_tls_modid")?;
        if bits != 64 {
            return None;
        }
        // struct r_debug { int r_version; struct link_map *r_map; ... }; struct link_map
        // { l_addr, l_name, l_ld, l_next, l_prev, ... }: public fields of <link.h>.
        let r_debug = self.space.find_symbol("_r_debug")?;
        let mut map = self.word(r_debug + 8)?;
        for _ in 0..MAX_OBJECTS {
            if map == 0 {
                return None;
            }
            if self.word(map)? == bias {
                return self.word(map + u64::from(offset)).filter(|&id| id != 0);
            }
            map = self.word(map + 24)?;
        }
        None
    }

    /// The address of the variable at `offset` in the TLS block of the object loaded at
    /// `bias`, in the thread whose thread pointer is `tp`.
    fn tls_address(&self, bias: u64, offset: u64, tp: u64) -> Option<u64> {
        let module = self.module_id(bias)?;
        let dtv_at = self.descriptor("pthread_dtvp").map_or(8, |d| d.2);
        let slot = self.descriptor("dtv_dtv").map_or(16, |d| d.0 / 8);
        let value_at = self.descriptor("dtv_t_pointer_val").map_or(0, |d| d.2);
        let dtv = self.word(tp.checked_add(u64::from(dtv_at))?)?;
        let entry = dtv
            .checked_add(module.checked_mul(u64::from(slot))?)?
            .checked_add(u64::from(value_at))?;
        let block = self.word(entry)?;
        // glibc's TLS_DTV_UNALLOCATED: the thread has not touched the module's block.
        if block == 0 || block == u64::MAX {
            return None;
        }
        block.checked_add(offset)
    }
}

impl Source for TargetSource<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.memory.read_memory(addr, buf).is_ok()
    }

    fn symbol(&self, name: &str, thread: Option<&OsThread>) -> Option<u64> {
        if let Some(thread) = thread
            && let Some((_, bias, offset)) = self.space.find_tls_symbol(name)
        {
            return self.tls_address(bias, offset, thread.pthread?);
        }
        self.space
            .find_symbol(name)
            .or_else(|| self.space.find_function(name))
    }

    fn sizes(&self) -> TypeSizes {
        let abi = self.space.abi();
        TypeSizes {
            char_: 1,
            short: abi.short,
            int: abi.int,
            long: abi.long,
            long_long: abi.long_long,
            pointer: abi.pointer,
        }
    }
}
