//! MPICH's communicators (`MPIR_Comm`) without debug information: MPICH 4.0 (ch4),
//! MPICH 5.0 and Intel MPI 2021. A handle of a communicator the program made is
//! "direct" (`0x84000000 | i`): the `i`th object of `MPIR_Comm_direct`, whose address
//! and object size the communicators' allocator (`MPIR_Comm_mem`, in the library's
//! `.data`) holds. No symbol names either in a stripped library, so the allocator is
//! found by its shape: object kind 1 (communicators), the object size, a pointer into
//! the library's `.bss` and the number of direct objects. The object size says which
//! layout (of [`LAYOUTS`]) the objects have.
//!
//! Members: MPICH 4.0's ch4 device maps local ranks to COMM_WORLD ranks by a rank map
//! (`MPIDI_rank_map_t`: direct, offset, stride, blocks of strides or a table), MPICH 5.0
//! by the communicator's group (`MPIR_Group`: a table or an offset and stride of
//! 64-bit process ids, the world's index in the high half).

use super::{CommObject, MAX_MEMBERS, Read, check_members, i32_at, u32_at, u64_at};
use mqd_debuginfo::AddressSpace;
use std::ops::Range;
use std::sync::OnceLock;

/// How a layout's objects map local ranks to COMM_WORLD ranks.
#[derive(Debug, Clone, Copy)]
enum Members {
    /// ch4's `MPIDI_rank_map_t` at this offset.
    RankMap(u64),
    /// The `MPIR_Group *local_group` at this offset.
    Group(u64),
}

/// One version's `MPIR_Comm`.
#[derive(Debug)]
pub struct Layout {
    /// Which MPI it is.
    pub name: &'static str,
    /// `sizeof(MPIR_Comm)`, what tells the layouts apart.
    pub object_size: u64,
    /// `context_id`, and its width in bytes (2 or 4).
    context: (u64, u8),
    rank: u64,
    local_size: u64,
    /// `comm_kind`: 0 for an intracommunicator.
    kind: u64,
    members: Members,
}

/// The layouts known, from each version's `mpir_comm.h` and ch4's `mpidpre.h` (MPICH),
/// and measured on the library (Intel MPI, whose sources are not public).
pub const LAYOUTS: &[Layout] = &[
    // MPICH 4.0 ch4 (Debian's 4.0.2, ch4:ucx): context_id is a uint16_t; the device
    // part comes last, its rank map after the netmod's.
    Layout {
        name: "MPICH 4.0 (ch4)",
        object_size: 872,
        context: (64, 2),
        rank: 72,
        local_size: 88,
        kind: 112,
        members: Members::RankMap(784),
    },
    // Intel MPI 2021 (2021.15, measured): MPICH 4's fields from a 32-bit context id on.
    Layout {
        name: "Intel MPI 2021",
        object_size: 808,
        context: (64, 4),
        rank: 76,
        local_size: 88,
        kind: 152,
        members: Members::RankMap(640),
    },
    // MPICH 5.0: the fields reordered, the members in the group.
    Layout {
        name: "MPICH 5.0",
        object_size: 1832,
        context: (12, 4),
        rank: 20,
        local_size: 24,
        kind: 40,
        members: Members::Group(32),
    },
];

/// The objects of a library's communicators: its allocator, the direct ones.
#[derive(Debug, Clone, Copy)]
struct Table {
    allocator: u64,
    direct: u64,
    count: u64,
    layout: &'static Layout,
}

/// The communicators of one process's MPICH.
#[derive(Debug)]
pub struct Objects {
    /// `MPIR_Comm_mem`, where a symbol names it (Intel MPI keeps `.symtab`).
    allocator: Option<u64>,
    data: Option<Range<u64>>,
    bss: Option<Range<u64>>,
    table: OnceLock<Result<Table, String>>,
}

/// Kind of MPICH's communicator objects (`MPIR_COMM`), in handles and allocators.
const COMM_KIND: u32 = 1;
/// Most direct objects an allocator is believed to hold.
const MAX_DIRECT: u64 = 4096;

impl Objects {
    /// The communicators of the MPICH `space` maps.
    pub fn of(space: &AddressSpace) -> Objects {
        Objects {
            allocator: space.find_symbol("MPIR_Comm_mem"),
            data: space.section_of_definer("PMPI_Init", ".data"),
            bss: space.section_of_definer("PMPI_Init", ".bss"),
            table: OnceLock::new(),
        }
    }

    /// Objects at known places (tests).
    pub fn at(allocator: Option<u64>, data: Range<u64>, bss: Range<u64>) -> Objects {
        Objects {
            allocator,
            data: Some(data),
            bss: Some(bss),
            table: OnceLock::new(),
        }
    }

    fn table(&self, read: &mut Read<'_>) -> Result<Table, String> {
        self.table.get_or_init(|| self.find_table(read)).clone()
    }

    fn find_table(&self, read: &mut Read<'_>) -> Result<Table, String> {
        let bss = self
            .bss
            .clone()
            .ok_or("the MPI library's .bss is not found")?;
        let found = match self.allocator {
            Some(a) => allocator_at(read, a, &bss).map(|f| (a, f)).ok_or_else(|| {
                format!("MPIR_Comm_mem at {a:#x} is not a communicator allocator")
            })?,
            None => {
                let data = self
                    .data
                    .clone()
                    .ok_or("the MPI library's .data is not found")?;
                let mut found = None;
                let mut a = data.start.next_multiple_of(8);
                while a + 56 <= data.end {
                    if let Some(f) = allocator_at(read, a, &bss) {
                        if found.is_some() {
                            return Err(
                                "two places in the MPI library's .data look like its communicator allocator".into(),
                            );
                        }
                        found = Some((a, f));
                    }
                    a += 8;
                }
                found.ok_or(
                    "no communicator allocator is found in the MPI library's .data (an MPICH mqd does not know)",
                )?
            }
        };
        let (allocator, (direct, size, count)) = found;
        let layout = LAYOUTS.iter().find(|l| l.object_size == size).ok_or_else(|| {
            let known: Vec<String> = LAYOUTS
                .iter()
                .map(|l| format!("{} ({} bytes)", l.name, l.object_size))
                .collect();
            format!(
                "the library's communicators are objects of {size} bytes, a layout mqd does not know (it knows {})",
                known.join(", ")
            )
        })?;
        Ok(Table {
            allocator,
            direct,
            count,
            layout,
        })
    }

    /// The communicator `handle` names.
    pub fn read(
        &self,
        handle: u64,
        world_rank: Option<i32>,
        read: &mut Read<'_>,
    ) -> Result<CommObject, String> {
        let h = handle as u32;
        if (h >> 26) & 0xf != COMM_KIND {
            return Err(format!("{h:#x} is not a communicator's handle"));
        }
        let table = self.table(read)?;
        let layout = table.layout;
        let object = match h >> 30 {
            2 => {
                let index = u64::from(h & 0x03ff_ffff);
                if index >= table.count {
                    return Err(format!(
                        "{h:#x} is past the library's {} direct communicators",
                        table.count
                    ));
                }
                table.direct + index * layout.object_size
            }
            3 => indirect(read, &table, h)?,
            1 => return Err(format!("{h:#x} is a predefined communicator")),
            _ => return Err(format!("{h:#x} is not a valid handle")),
        };
        let unreadable = || format!("its object at {object:#x} ({}) is unreadable", layout.name);
        let held = u32_at(read, object).ok_or_else(unreadable)?;
        if held != h {
            return Err(format!(
                "its object at {object:#x} holds handle {held:#x}, not {h:#x}: not {}'s layout",
                layout.name
            ));
        }
        if i32_at(read, object + 4).ok_or_else(unreadable)? <= 0 {
            return Err("the communicator was freed".into());
        }
        if u32_at(read, object + layout.kind).ok_or_else(unreadable)? != 0 {
            return Err("an intercommunicator: its remote group is not read".into());
        }
        let size = i64::from(i32_at(read, object + layout.local_size).ok_or_else(unreadable)?);
        let rank = i64::from(i32_at(read, object + layout.rank).ok_or_else(unreadable)?);
        if !(1..=MAX_MEMBERS).contains(&size) || !(0..size).contains(&rank) {
            return Err(format!(
                "its object says rank {rank} of {size}: not {}'s layout",
                layout.name
            ));
        }
        let context = u32_at(read, object + layout.context.0).ok_or_else(unreadable)?;
        let context = match layout.context.1 {
            2 => i64::from(context as u16),
            _ => i64::from(context as i32),
        };
        let members = match layout.members {
            Members::RankMap(at) => rank_map(read, object + at, size)?,
            Members::Group(at) => {
                let group = u64_at(read, object + at).ok_or_else(unreadable)?;
                group_members(read, group, size, rank)?
            }
        };
        check_members(&members, rank, world_rank, None)?;
        Ok(CommObject {
            address: object,
            context_id: context,
            members,
        })
    }
}

/// The object of indirect handle `h`: the allocator's table of blocks (its pointer at
/// +16, their number at +24) holds block `h >> 12` (14 bits), whose object `h & 0xfff`
/// it is.
fn indirect(read: &mut Read<'_>, table: &Table, h: u32) -> Result<u64, String> {
    let unreadable = || format!("the allocator's blocks of {h:#x} are unreadable");
    let blocks = u64_at(read, table.allocator + 16).ok_or_else(unreadable)?;
    let count = u64::from(u32_at(read, table.allocator + 24).ok_or_else(unreadable)?);
    let block = u64::from((h >> 12) & 0x3fff);
    if blocks == 0 || block >= count.min(1 << 14) {
        return Err(format!(
            "{h:#x} is in block {block} of the library's {count} blocks of communicators"
        ));
    }
    let base = u64_at(read, blocks + 8 * block).ok_or_else(unreadable)?;
    Ok(base + u64::from(h & 0xfff) * table.layout.object_size)
}

/// The allocator at `a` (direct objects, object size, their number), if it is one of
/// communicators whose direct objects are in `bss`. MPICH 4.0 keeps the kind and size
/// at +28 and +32, 5.0 at +32 and +36; both the direct array at +40 and its length at
/// +48.
fn allocator_at(read: &mut Read<'_>, a: u64, bss: &Range<u64>) -> Option<(u64, u64, u64)> {
    let direct = u64_at(read, a + 40)?;
    let count = u64::from(u32_at(read, a + 48)?);
    if !bss.contains(&direct) || !(1..=MAX_DIRECT).contains(&count) {
        return None;
    }
    let size = [(28, 32), (32, 36)].into_iter().find_map(|(kind, size)| {
        let s = u64::from(u32_at(read, a + size)?);
        (u32_at(read, a + kind)? == COMM_KIND && (64..=1 << 16).contains(&s)).then_some(s)
    })?;
    (direct + size * count <= bss.end).then_some((direct, size, count))
}

/// ch4's rank map modes (`MPIDI_rank_map_mode`), the odd ones its `_INTRA` forms (only
/// this job's processes).
const DIRECT: i32 = 0;
const OFFSET: i32 = 2;
const STRIDE: i32 = 4;
const STRIDE_BLOCK: i32 = 6;
const LUT: i32 = 8;
const MLUT: i32 = 10;

/// The members an `MPIDI_rank_map_t` at `map` says: `{mode, avtid, size, offset,
/// stride, blocksize, lut *, lpid *}` (ints, then two pointers at +24 and +32).
fn rank_map(read: &mut Read<'_>, map: u64, size: i64) -> Result<Vec<i32>, String> {
    let unreadable = || format!("its rank map at {map:#x} is unreadable");
    let mut int = |offset: u64| i32_at(read, map + offset).ok_or_else(unreadable);
    let (mode, avtid, map_size) = (int(0)?, int(4)?, int(8)?);
    let (offset, stride, block) = (int(12)?, int(16)?, int(20)?);
    if i64::from(map_size) != size {
        return Err(format!(
            "its rank map has {map_size} entries for {size} members: not the library's layout"
        ));
    }
    // `_INTRA` modes are the job's own processes; others say which process table.
    let base = mode & !1;
    if mode & 1 == 0 && base != MLUT && avtid != 0 {
        return Err("its members are processes of another MPI job (spawned or connected)".into());
    }
    let n = size as i32;
    let members: Vec<i64> = match base {
        DIRECT => (0..n).map(i64::from).collect(),
        OFFSET => (0..n).map(|r| i64::from(r) + i64::from(offset)).collect(),
        STRIDE => (0..n)
            .map(|r| i64::from(r) * i64::from(stride) + i64::from(offset))
            .collect(),
        STRIDE_BLOCK if block > 0 => (0..n)
            .map(|r| {
                i64::from(r / block) * i64::from(stride - block) + i64::from(r) + i64::from(offset)
            })
            .collect(),
        LUT | MLUT if mode <= MLUT => {
            let table = u64_at(read, map + 32).ok_or_else(unreadable)?;
            let (width, what) = if base == LUT { (4, "lut") } else { (8, "mlut") };
            let mut out = Vec::with_capacity(size as usize);
            for r in 0..size as u64 {
                let at = table + r * width;
                let entry = read(at).ok_or_else(|| {
                    format!("its rank map's {what} table at {table:#x} is unreadable")
                })?;
                if base == MLUT && entry as u32 != 0 {
                    return Err(
                        "its members are processes of another MPI job (spawned or connected)"
                            .into(),
                    );
                }
                out.push(if base == LUT {
                    i64::from(entry as u32 as i32)
                } else {
                    i64::from((entry >> 32) as u32 as i32)
                });
            }
            out
        }
        _ => {
            return Err(format!(
                "its rank map's mode {mode} is none mqd knows: not the library's layout"
            ));
        }
    };
    to_ranks(members)
}

/// The members an `MPIR_Group` at `group` says (MPICH 5.0): `{handle, ref_count, size,
/// rank, use_map (bool), union {lpid *map; {offset, stride}}}`, process ids 64-bit with
/// the world's index in the high half.
fn group_members(
    read: &mut Read<'_>,
    group: u64,
    size: i64,
    rank: i64,
) -> Result<Vec<i32>, String> {
    if group == 0 {
        return Err("its group is not made: not the library's layout".into());
    }
    let unreadable = || format!("its group at {group:#x} is unreadable");
    let g_size = i64::from(i32_at(read, group + 8).ok_or_else(unreadable)?);
    let g_rank = i64::from(i32_at(read, group + 12).ok_or_else(unreadable)?);
    if g_size != size || g_rank != rank {
        return Err(format!(
            "its group says rank {g_rank} of {g_size}, the communicator {rank} of {size}: not the library's layout"
        ));
    }
    let use_map = u32_at(read, group + 16).ok_or_else(unreadable)? & 0xff;
    let first = u64_at(read, group + 24).ok_or_else(unreadable)?;
    let lpids: Vec<i64> = match use_map {
        0 => {
            let stride = u64_at(read, group + 32).ok_or_else(unreadable)? as i64;
            (0..size)
                .map(|r| (first as i64).wrapping_add(r.wrapping_mul(stride)))
                .collect()
        }
        1 => {
            let mut out = Vec::with_capacity(size as usize);
            for r in 0..size as u64 {
                let lpid = read(first + r * 8)
                    .ok_or_else(|| format!("its group's table at {first:#x} is unreadable"))?;
                out.push(lpid as i64);
            }
            out
        }
        _ => return Err("its group's form is none mqd knows: not the library's layout".into()),
    };
    if lpids.iter().any(|&l| l >> 32 != 0) {
        return Err("its members are processes of another MPI job (spawned or connected)".into());
    }
    to_ranks(lpids)
}

/// Process indexes as COMM_WORLD ranks.
fn to_ranks(members: Vec<i64>) -> Result<Vec<i32>, String> {
    members
        .into_iter()
        .map(|m| {
            i32::try_from(m).map_err(|_| {
                format!("its members read as COMM_WORLD rank {m}: not the library's layout")
            })
        })
        .collect()
}
