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
use mqd_target::{Memory, ThreadDbField};
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;

/// Longest `link_map` chain followed.
const MAX_OBJECTS: usize = 4096;

/// A process's memory and objects.
pub struct TargetSource<'a> {
    space: &'a AddressSpace,
    memory: &'a dyn Memory,
    /// glibc's TLS fields, read on first need.
    layout: OnceCell<Option<TlsLayout>>,
    /// TLS module id by object load bias.
    modules: RefCell<HashMap<u64, Option<u64>>>,
}

/// Where glibc keeps what a thread-local variable's address needs, as its `_thread_db_*`
/// fields say.
struct TlsLayout {
    /// `link_map.l_tls_modid` (64 bits).
    modid_at: u64,
    /// The DTV pointer in a thread's descriptor.
    dtv_at: u64,
    /// A DTV slot's size.
    slot: u64,
    /// The block's pointer in a slot.
    value_at: u64,
}

impl<'a> TargetSource<'a> {
    /// The source of the process whose objects are `space` and memory `memory`.
    pub fn new(space: &'a AddressSpace, memory: &'a dyn Memory) -> TargetSource<'a> {
        TargetSource {
            space,
            memory,
            layout: OnceCell::new(),
            modules: RefCell::new(HashMap::new()),
        }
    }

    fn word(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.memory.read_memory(addr, &mut b).ok()?;
        Some(u64::from_le_bytes(b))
    }

    /// glibc's TLS fields, read once.
    fn layout(&self) -> Option<&TlsLayout> {
        let read = || {
            let field = |name: &str| {
                let at = self.space.find_symbol(&format!("_thread_db_{name}"))?;
                ThreadDbField::read(self.memory, at)
            };
            let modid = field("link_map_l_tls_modid").filter(|f| f.bits == 64)?;
            Some(TlsLayout {
                modid_at: u64::from(modid.offset),
                dtv_at: field("pthread_dtvp").map_or(8, |f| u64::from(f.offset)),
                slot: field("dtv_dtv").map_or(16, |f| u64::from(f.bits / 8)),
                value_at: field("dtv_t_pointer_val").map_or(0, |f| u64::from(f.offset)),
            })
        };
        self.layout.get_or_init(read).as_ref()
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
        let modid_at = self.layout()?.modid_at;
        // struct r_debug { int r_version; struct link_map *r_map; ... }; struct link_map
        // { l_addr, l_name, l_ld, l_next, l_prev, ... }: public fields of <link.h>.
        let r_debug = self.space.find_symbol("_r_debug")?;
        let mut map = self.word(r_debug + 8)?;
        for _ in 0..MAX_OBJECTS {
            if map == 0 {
                return None;
            }
            if self.word(map)? == bias {
                return self.word(map + modid_at).filter(|&id| id != 0);
            }
            map = self.word(map + 24)?;
        }
        None
    }

    /// The address of the variable at `offset` in the TLS block of the object loaded at
    /// `bias`, in the thread whose thread pointer is `tp`.
    fn tls_address(&self, bias: u64, offset: u64, tp: u64) -> Option<u64> {
        let module = self.module_id(bias)?;
        let layout = self.layout()?;
        let dtv = self.word(tp.checked_add(layout.dtv_at)?)?;
        let entry = dtv
            .checked_add(module.checked_mul(layout.slot)?)?
            .checked_add(layout.value_at)?;
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
