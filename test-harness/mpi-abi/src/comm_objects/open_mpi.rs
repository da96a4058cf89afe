//! Open MPI's communicators (`ompi_communicator_t`) without debug information: a handle
//! is the object's address. Its local group (`ompi_group_t`) lists its processes
//! (`ompi_proc_t`, or a "sentinel" pointer that encodes the process's name), whose
//! `vpid` is the COMM_WORLD rank. Where the group sits differs between versions (4.1,
//! 5.0.0-5.0.6, 5.0.7 and later with or without fault tolerance), so the layout is the
//! one of [`LAYOUTS`] under which `MPI_COMM_WORLD` (exported as `ompi_mpi_comm_world`)
//! reads as itself: its name, its group holding process `i` at rank `i`.

use super::{CommObject, MAX_MEMBERS, Read, check_members, i32_at, string_is, u32_at, u64_at};
use mqd_debuginfo::AddressSpace;
use std::sync::OnceLock;

/// Where one version keeps the communicator's fields.
#[derive(Debug)]
pub struct Layout {
    /// Which versions.
    pub name: &'static str,
    /// `c_name` is an inline `char[64]` (4.1), else a pointer (5.0).
    name_inline: bool,
    /// The context id: a `uint32_t` (4.1), else the extended id's two `uint64_t`s.
    context: Context,
    my_rank: u64,
    local_group: u64,
}

#[derive(Debug, Clone, Copy)]
enum Context {
    U32(u64),
    Extended(u64),
}

/// The layouts known, from each version's `communicator.h`; `c_name` is at 160 in all.
pub const LAYOUTS: &[Layout] = &[
    Layout {
        name: "Open MPI 4.1",
        name_inline: true,
        context: Context::U32(224),
        my_rank: 228,
        local_group: 248,
    },
    Layout {
        name: "Open MPI 5.0.0-5.0.6",
        name_inline: false,
        context: Context::Extended(168),
        my_rank: 220,
        local_group: 248,
    },
    Layout {
        name: "Open MPI 5.0.7 or later",
        name_inline: false,
        context: Context::Extended(168),
        my_rank: 220,
        local_group: 256,
    },
    Layout {
        name: "Open MPI 5.0.7 or later, with fault tolerance",
        name_inline: false,
        context: Context::Extended(168),
        my_rank: 220,
        local_group: 264,
    },
];

const NAME: u64 = 160;
/// In `ompi_group_t`.
const GROUP_COUNT: u64 = 16;
const GROUP_MY_RANK: u64 = 20;
const GROUP_PROCS: u64 = 32;
/// In `ompi_proc_t`: its name, `{jobid, vpid}`.
const PROC_NAME: u64 = 40;

/// What `MPI_COMM_WORLD` said.
#[derive(Debug, Clone, Copy)]
struct World {
    layout: &'static Layout,
    jobid: u32,
    size: i64,
    rank: i32,
}

/// The communicators of one process's Open MPI.
#[derive(Debug)]
pub struct Objects {
    world: u64,
    calibrated: OnceLock<Result<World, String>>,
}

impl Objects {
    /// The communicators of the Open MPI `space` maps, if it exports `MPI_COMM_WORLD`.
    pub fn of(space: &AddressSpace) -> Option<Objects> {
        space.find_symbol("ompi_mpi_comm_world").map(Objects::at)
    }

    /// With `MPI_COMM_WORLD` at `world`.
    pub fn at(world: u64) -> Objects {
        Objects {
            world,
            calibrated: OnceLock::new(),
        }
    }

    fn world(&self, read: &mut Read<'_>) -> Result<World, String> {
        self.calibrated
            .get_or_init(|| {
                LAYOUTS
                    .iter()
                    .find_map(|l| world_as(read, self.world, l))
                    .ok_or_else(|| {
                        let known: Vec<&str> = LAYOUTS.iter().map(|l| l.name).collect();
                        format!(
                            "Open MPI's MPI_COMM_WORLD reads as itself in none of the layouts mqd knows ({})",
                            known.join(", ")
                        )
                    })
            })
            .clone()
    }

    /// The communicator `handle` names.
    pub fn read(
        &self,
        handle: u64,
        world_rank: Option<i32>,
        read: &mut Read<'_>,
    ) -> Result<CommObject, String> {
        let world = self.world(read)?;
        if world_rank.is_some_and(|r| r != world.rank) {
            return Err(format!(
                "Open MPI's MPI_COMM_WORLD says this process is rank {}, not {}",
                world.rank,
                world_rank.unwrap_or(-1)
            ));
        }
        let layout = world.layout;
        let object = handle;
        let unreadable = || format!("its object at {object:#x} ({}) is unreadable", layout.name);
        let local = u64_at(read, object + layout.local_group).ok_or_else(unreadable)?;
        let remote = u64_at(read, object + layout.local_group + 8).ok_or_else(unreadable)?;
        if local == 0 {
            return Err(format!(
                "its object at {object:#x} has no group: not {}'s layout",
                layout.name
            ));
        }
        if remote != local {
            return Err("an intercommunicator: its remote group is not read".into());
        }
        let my_rank = i64::from(i32_at(read, object + layout.my_rank).ok_or_else(unreadable)?);
        let (count, group_rank, procs) = group(read, local)?;
        if !(1..=world.size).contains(&count) || group_rank != my_rank {
            return Err(format!(
                "its object says rank {my_rank}, its group rank {group_rank} of {count}: not {}'s layout",
                layout.name
            ));
        }
        let mut members = Vec::with_capacity(count as usize);
        for i in 0..count as u64 {
            let (jobid, vpid) = proc_name(read, procs, i)?;
            if !same_job(jobid, world.jobid) {
                return Err(
                    "its members are processes of another MPI job (spawned or connected)".into(),
                );
            }
            members.push(vpid as i32);
        }
        check_members(&members, my_rank, Some(world.rank), Some(world.size))?;
        let context = match layout.context {
            Context::U32(at) => i64::from(u32_at(read, object + at).ok_or_else(unreadable)?),
            Context::Extended(at) => {
                let base = u64_at(read, object + at).ok_or_else(unreadable)?;
                let sub = u64_at(read, object + at + 8).ok_or_else(unreadable)?;
                // One number for both halves: the sub-id alone where the base is 0 (every
                // communicator made from a parent), else a mix of the two.
                (sub ^ base.rotate_left(32).wrapping_mul(0x9e37_79b9_7f4a_7c15)) as i64
            }
        };
        Ok(CommObject {
            address: object,
            context_id: context,
            members,
        })
    }
}

/// `MPI_COMM_WORLD` at `world`, read in `layout`, if it reads as itself there.
fn world_as(read: &mut Read<'_>, world: u64, layout: &'static Layout) -> Option<World> {
    let named = if layout.name_inline {
        string_is(read, world + NAME, "MPI_COMM_WORLD")
    } else {
        let name = u64_at(read, world + NAME)?;
        name != 0 && string_is(read, name, "MPI_COMM_WORLD")
    };
    if !named {
        return None;
    }
    let local = u64_at(read, world + layout.local_group)?;
    if local == 0 || u64_at(read, world + layout.local_group + 8)? != local {
        return None;
    }
    let rank = i32_at(read, world + layout.my_rank)?;
    let (size, group_rank, procs) = group(read, local).ok()?;
    if !(1..=MAX_MEMBERS).contains(&size) || !(0..size).contains(&i64::from(rank)) {
        return None;
    }
    if group_rank != i64::from(rank) {
        return None;
    }
    // Process i is rank i: the first, the last and this process's are checked.
    let (jobid, _) = proc_name(read, procs, 0).ok()?;
    for i in [0, size as u64 - 1, rank as u64] {
        let (j, vpid) = proc_name(read, procs, i).ok()?;
        if !same_job(j, jobid) || u64::from(vpid) != i {
            return None;
        }
    }
    Some(World {
        layout,
        jobid,
        size,
        rank,
    })
}

/// A group's `(grp_proc_count, grp_my_rank, grp_proc_pointers)`.
fn group(read: &mut Read<'_>, group: u64) -> Result<(i64, i64, u64), String> {
    let unreadable = || format!("its group at {group:#x} is unreadable");
    let count = i64::from(i32_at(read, group + GROUP_COUNT).ok_or_else(unreadable)?);
    let my_rank = i64::from(i32_at(read, group + GROUP_MY_RANK).ok_or_else(unreadable)?);
    let procs = u64_at(read, group + GROUP_PROCS).ok_or_else(unreadable)?;
    if procs == 0 {
        return Err(format!(
            "its group at {group:#x} lists no processes (a sparse group): not read"
        ));
    }
    Ok((count, my_rank, procs))
}

/// The name `{jobid, vpid}` of a group's `i`th process: its `ompi_proc_t`'s, or the
/// one a sentinel pointer (bit 0 set) encodes: vpid in the high half, the job family
/// in bits 16-31 and the job's local id in bits 1-15.
fn proc_name(read: &mut Read<'_>, procs: u64, i: u64) -> Result<(u32, u32), String> {
    let unreadable = || format!("its group's process list at {procs:#x} is unreadable");
    let proc = u64_at(read, procs + 8 * i).ok_or_else(unreadable)?;
    if proc & 1 == 1 {
        let family = (proc >> 16) & 0xffff;
        let local = (proc >> 1) & 0x7fff;
        return Ok((((family << 16) | local) as u32, (proc >> 32) as u32));
    }
    let name = u64_at(read, proc + PROC_NAME)
        .ok_or_else(|| format!("its process object at {proc:#x} is unreadable"))?;
    Ok((name as u32, (name >> 32) as u32))
}

/// Whether two job ids are the same job (a sentinel loses bit 15 of the local id).
fn same_job(a: u32, b: u32) -> bool {
    a & !0x8000 == b & !0x8000
}
