//! Reading what a starter publishes: `MPIR_proctable` and `MPIR_debug_state`, or the
//! packed `MPI2DD_info` tables, in the target's byte order and sizes.

use super::error::AcquireError;
use super::job::{Interface, RankInfo};
use mqd_target::{ByteOrder, Target, TargetError, read_c_string};

/// Most ranks a process table may list before it is taken as garbage.
pub const MAX_RANKS: i64 = 1 << 22;
/// Longest host or executable name read from the target.
pub const MAX_NAME: usize = 4096;

pub(super) const MPIR_DEBUG_SPAWNED: i64 = 1;
pub(super) const MPIR_DEBUG_ABORTING: i64 = 2;

pub(super) const MPI2DD_MAGIC: [u8; 5] = *b"MPI2\x7f";
pub(super) const MPI2DD_DEBUG_START: u8 = 1;
pub(super) const MPI2DD_DEBUG_SPAWN: u8 = 2;
pub(super) const MPI2DD_DEBUG_ABORT: u8 = 8;
/// `debugger_flags` bits.
pub(super) const MPI2DD_FLAG_GATE: u32 = 0x1;
pub(super) const MPI2DD_FLAG_BEING_DEBUGGED: u32 = 0x2;

/// Scalars and strings of a target, in its byte order and sizes.
pub(super) struct Mem<'a> {
    pub(super) target: &'a dyn Target,
    pub(super) pid: i32,
    pub(super) order: ByteOrder,
    pub(super) pointer: usize,
    pub(super) int: usize,
}

impl<'a> Mem<'a> {
    pub(super) fn new(target: &'a dyn Target, pid: i32) -> Mem<'a> {
        let abi = target.abi();
        Mem {
            target,
            pid,
            order: target.byte_order(),
            pointer: Some(usize::from(abi.pointer))
                .filter(|&s| s == 4 || s == 8)
                .unwrap_or(8),
            int: Some(usize::from(abi.int))
                .filter(|&s| matches!(s, 2 | 4 | 8))
                .unwrap_or(4),
        }
    }

    pub(super) fn memory_error(&self, what: &str, error: TargetError) -> AcquireError {
        AcquireError::Memory {
            pid: self.pid,
            what: what.to_string(),
            error,
        }
    }

    pub(super) fn bytes(&self, addr: u64, len: usize, what: &str) -> Result<Vec<u8>, AcquireError> {
        let mut buf = vec![0u8; len];
        self.target
            .read_memory(addr, &mut buf)
            .map_err(|e| self.memory_error(what, e))?;
        Ok(buf)
    }

    pub(super) fn decode(&self, bytes: &[u8]) -> u64 {
        self.order.unsigned(bytes)
    }

    pub(super) fn encode(&self, value: u64, size: usize) -> Vec<u8> {
        self.order.encode(value, size)
    }

    pub(super) fn pointer_at(&self, bytes: &[u8], offset: usize) -> Option<u64> {
        self.order.unsigned_at(bytes, offset, self.pointer)
    }

    pub(super) fn int_at(&self, bytes: &[u8], offset: usize, size: usize) -> Option<i64> {
        Some(
            self.order
                .signed(bytes.get(offset..offset.checked_add(size)?)?),
        )
    }

    pub(super) fn read_int(&self, addr: u64, what: &str) -> Result<i64, AcquireError> {
        let bytes = self.bytes(addr, self.int, what)?;
        Ok(self.order.signed(&bytes))
    }

    pub(super) fn read_pointer(&self, addr: u64, what: &str) -> Result<u64, AcquireError> {
        let bytes = self.bytes(addr, self.pointer, what)?;
        Ok(self.decode(&bytes))
    }

    /// A NUL-terminated string, at most [`MAX_NAME`] bytes; a null pointer is "".
    pub(super) fn string(&self, addr: u64, what: &str) -> Result<String, AcquireError> {
        if addr == 0 {
            return Ok(String::new());
        }
        let bytes =
            read_c_string(self.target, addr, MAX_NAME).map_err(|e| self.memory_error(what, e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// `MPIR_PROCDESC` as laid out in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProcdescLayout {
    pub(super) host_name: usize,
    pub(super) executable_name: usize,
    pub(super) pid: usize,
    pub(super) size: usize,
}

pub(super) fn procdesc_layout(target: &dyn Target, mem: &Mem) -> ProcdescLayout {
    let p = mem.pointer;
    let int = mem.int;
    let natural = ProcdescLayout {
        host_name: 0,
        executable_name: p,
        pid: 2 * p,
        size: (2 * p + int).next_multiple_of(p.max(int)),
    };
    let from_dwarf = || {
        let ty = target.find_type("MPIR_PROCDESC")?;
        let layout = ProcdescLayout {
            host_name: usize::try_from(target.field_offset(ty, "host_name")?).ok()?,
            executable_name: usize::try_from(target.field_offset(ty, "executable_name")?).ok()?,
            pid: usize::try_from(target.field_offset(ty, "pid")?).ok()?,
            size: usize::try_from(target.type_size(ty)?).ok()?,
        };
        let fits = layout.host_name + p <= layout.size
            && layout.executable_name + p <= layout.size
            && layout.pid + int <= layout.size;
        fits.then_some(layout)
    };
    from_dwarf().unwrap_or(natural)
}

/// What the starter says about the job at one moment.
#[derive(Debug, Default)]
pub(super) struct Published {
    pub(super) spawned: bool,
    pub(super) ranks: Vec<RankInfo>,
    pub(super) dll_name: Option<String>,
    pub(super) abort_message: Option<String>,
}

pub(super) fn read_mpir(target: &dyn Target, pid: i32) -> Result<Published, AcquireError> {
    let mem = Mem::new(target, pid);
    let mut published = Published::default();
    let state = match target.find_symbol("MPIR_debug_state") {
        Some(addr) => mem.read_int(addr, "MPIR_debug_state")?,
        None => MPIR_DEBUG_SPAWNED,
    };
    let table = target.find_symbol("MPIR_proctable");
    let size = target.find_symbol("MPIR_proctable_size");
    if let (Some(table), Some(size)) = (table, size) {
        let table = mem.read_pointer(table, "MPIR_proctable")?;
        let size = mem.read_int(size, "MPIR_proctable_size")?;
        if !(0..=MAX_RANKS).contains(&size) {
            return Err(AcquireError::BadData {
                pid,
                what: format!("MPIR_proctable_size is {size}"),
            });
        }
        if size > 0 {
            if table == 0 {
                return Err(AcquireError::BadData {
                    pid,
                    what: format!("MPIR_proctable_size is {size} but MPIR_proctable is NULL"),
                });
            }
            let layout = procdesc_layout(target, &mem);
            let bytes = mem.bytes(table, size as usize * layout.size, "MPIR_proctable")?;
            for (rank, entry) in bytes.chunks_exact(layout.size).enumerate() {
                let bad = || AcquireError::BadData {
                    pid,
                    what: format!("MPIR_proctable[{rank}] is malformed"),
                };
                let host = mem.pointer_at(entry, layout.host_name).ok_or_else(bad)?;
                let exe = mem
                    .pointer_at(entry, layout.executable_name)
                    .ok_or_else(bad)?;
                let rank_pid = mem.int_at(entry, layout.pid, mem.int).ok_or_else(bad)?;
                published.ranks.push(RankInfo {
                    rank: rank as i32,
                    host: mem.string(host, &format!("MPIR_proctable[{rank}].host_name"))?,
                    executable: mem
                        .string(exe, &format!("MPIR_proctable[{rank}].executable_name"))?,
                    pid: rank_pid as i32,
                });
            }
            published.spawned = state == MPIR_DEBUG_SPAWNED || state == MPIR_DEBUG_ABORTING;
        }
    }
    if state == MPIR_DEBUG_ABORTING {
        let text = match target.find_symbol("MPIR_debug_abort_string") {
            Some(addr) => {
                let pointer = mem.read_pointer(addr, "MPIR_debug_abort_string")?;
                mem.string(pointer, "the abort string")?
            }
            None => String::new(),
        };
        published.abort_message = Some(text);
    }
    if let Some(addr) = target.find_symbol("MPIR_dll_name") {
        let name = mem.string(addr, "MPIR_dll_name")?;
        published.dll_name = (!name.is_empty()).then_some(name);
    }
    Ok(published)
}

/// `struct MPI2DD_INFO` (packed): offsets of the fields after the fixed 16-byte head.
pub(super) struct Mpi2ddInfo {
    pub(super) debug_state: u8,
    pub(super) dll_name_64: u64,
    pub(super) abort_string: u64,
    pub(super) proctable: u64,
    pub(super) proctable_size: i64,
}

pub(super) const MPI2DD_DEBUGGER_FLAGS: u64 = 8;

pub(super) fn read_mpi2dd_info(
    target: &dyn Target,
    pid: i32,
    addr: u64,
) -> Result<Mpi2ddInfo, AcquireError> {
    let mem = Mem::new(target, pid);
    let a = mem.pointer;
    // magic[5] version variant debug_state debugger_flags mpi_flags, 8 addresses,
    // 4 int32, padding[8].
    let size = 16 + 8 * a + 16 + 32;
    let bytes = mem.bytes(addr, size, "MPI2DD_info")?;
    if bytes[..5] != MPI2DD_MAGIC {
        return Err(AcquireError::BadData {
            pid,
            what: format!("MPI2DD_info has a bad magic {:02x?}", &bytes[..5]),
        });
    }
    if bytes[5] != 1 || bytes[6] != 1 {
        return Err(AcquireError::BadData {
            pid,
            what: format!(
                "MPI2DD_info version {} variant {} (only 1/1 is known)",
                bytes[5], bytes[6]
            ),
        });
    }
    let address = |i: usize| mem.pointer_at(&bytes, 16 + i * a).unwrap_or(0);
    Ok(Mpi2ddInfo {
        debug_state: bytes[7],
        dll_name_64: address(1),
        abort_string: address(4),
        proctable: address(5),
        proctable_size: mem.int_at(&bytes, 16 + 8 * a, 4).unwrap_or(0),
    })
}

pub(super) fn read_mpi2dd(
    target: &dyn Target,
    pid: i32,
    addr: u64,
) -> Result<Published, AcquireError> {
    let mem = Mem::new(target, pid);
    let info = read_mpi2dd_info(target, pid, addr)?;
    let mut published = Published::default();
    let size = info.proctable_size;
    if !(0..=MAX_RANKS).contains(&size) {
        return Err(AcquireError::BadData {
            pid,
            what: format!("MPI2DD_info.proctable_size is {size}"),
        });
    }
    if size > 0 {
        if info.proctable == 0 {
            return Err(AcquireError::BadData {
                pid,
                what: format!("MPI2DD_info.proctable_size is {size} but proctable is NULL"),
            });
        }
        // host_name, executable_name, spawn_desc, comm_world_id, pid, rank (packed).
        let a = mem.pointer;
        let entry_size = 4 * a + 8;
        let bytes = mem.bytes(
            info.proctable,
            size as usize * entry_size,
            "the MPI2DD proctable",
        )?;
        for (i, entry) in bytes.chunks_exact(entry_size).enumerate() {
            let host = mem.pointer_at(entry, 0).unwrap_or(0);
            let exe = mem.pointer_at(entry, a).unwrap_or(0);
            published.ranks.push(RankInfo {
                rank: mem.int_at(entry, 4 * a + 4, 4).unwrap_or(-1) as i32,
                host: mem.string(host, &format!("proctable[{i}].host_name"))?,
                executable: mem.string(exe, &format!("proctable[{i}].executable_name"))?,
                pid: mem.int_at(entry, 4 * a, 4).unwrap_or(-1) as i32,
            });
        }
        published.ranks.sort_by_key(|r| r.rank);
        published.spawned = matches!(
            info.debug_state,
            MPI2DD_DEBUG_START | MPI2DD_DEBUG_SPAWN | MPI2DD_DEBUG_ABORT
        );
    }
    if info.debug_state == MPI2DD_DEBUG_ABORT {
        published.abort_message = Some(mem.string(info.abort_string, "abort_string")?);
    }
    if info.dll_name_64 != 0 {
        let name = mem.string(info.dll_name_64, "dll_name_64")?;
        published.dll_name = (!name.is_empty()).then_some(name);
    }
    Ok(published)
}

pub(super) fn read_published(
    target: &dyn Target,
    pid: i32,
    via: Interface,
) -> Result<Published, AcquireError> {
    match via {
        Interface::Mpir => read_mpir(target, pid),
        Interface::Mpi2dd => {
            let addr = target
                .find_symbol("MPI2DD_info")
                .ok_or(AcquireError::BadData {
                    pid,
                    what: "MPI2DD_info vanished".into(),
                })?;
            read_mpi2dd(target, pid, addr)
        }
        Interface::Environment => Err(AcquireError::BadData {
            pid,
            what: "a starter without MPIR or MPI2DD tables publishes none".into(),
        }),
    }
}

/// The interface a starter offers and its breakpoint function.
pub(super) fn detect(target: &dyn Target, prefer: Option<Interface>) -> Option<(Interface, u64)> {
    let mpi2dd = target
        .find_symbol("MPI2DD_info")
        .and(target.find_function("MPI2DD_breakpoint"))
        .map(|bp| (Interface::Mpi2dd, bp));
    let mpir = target
        .find_symbol("MPIR_debug_state")
        .and(target.find_function("MPIR_Breakpoint"))
        .map(|bp| (Interface::Mpir, bp));
    match prefer {
        Some(Interface::Mpir) => mpir,
        Some(Interface::Mpi2dd) => mpi2dd,
        Some(Interface::Environment) => None,
        None => mpi2dd.or(mpir),
    }
}
