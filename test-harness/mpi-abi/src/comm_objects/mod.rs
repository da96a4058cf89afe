//! A program's own communicator, named by its members where the MPI library has no
//! debug information: the object its handle names, read at offsets that are facts of
//! the library's version ([`mpich`], [`open_mpi`]), and believed only where the object
//! says what it must (its own handle, the process's own COMM_WORLD rank at its local
//! rank, members that are distinct ranks of this job). Anything else is unknown, with
//! why.

pub mod mpich;
pub mod open_mpi;

use crate::tables::{Abi, Family};
use mqd_debuginfo::AddressSpace;

/// What a communicator's object says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommObject {
    /// The object's address.
    pub address: u64,
    /// Its context id: the same in every member (each MPI agrees on it over the parent
    /// communicator), and shared by the communicators one split makes.
    pub context_id: i64,
    /// Its members, COMM_WORLD ranks in local rank order.
    pub members: Vec<i32>,
}

/// Reads words of the process: 8 bytes at any address.
pub type Read<'a> = dyn FnMut(u64) -> Option<u64> + 'a;

/// The communicator objects of one process's MPI library.
#[derive(Debug)]
pub enum CommObjects {
    /// MPICH's `MPIR_Comm`s (MPICH, Intel MPI).
    Mpich(mpich::Objects),
    /// Open MPI's `ompi_communicator_t`s.
    OpenMpi(open_mpi::Objects),
    /// An ABI whose objects are not read (the standard ABI's handles are the library's
    /// own translation).
    Unread(&'static str),
}

impl CommObjects {
    /// The readers for the MPI library `space` maps, of ABI `abi`.
    pub fn of(space: &AddressSpace, abi: &Abi) -> CommObjects {
        match abi.family {
            Family::Mpich => CommObjects::Mpich(mpich::Objects::of(space)),
            Family::OpenMpi => match open_mpi::Objects::of(space) {
                Some(objects) => CommObjects::OpenMpi(objects),
                None => CommObjects::Unread("Open MPI's MPI_COMM_WORLD object is not found"),
            },
            Family::Standard => CommObjects::Unread(
                "the library uses the standard ABI, whose handles mqd does not follow into it",
            ),
        }
    }

    /// The communicator `handle` names, in the process whose COMM_WORLD rank is
    /// `world_rank` (when known).
    pub fn read(
        &self,
        handle: u64,
        world_rank: Option<i32>,
        read: &mut Read<'_>,
    ) -> Result<CommObject, String> {
        match self {
            CommObjects::Mpich(o) => o.read(handle, world_rank, read),
            CommObjects::OpenMpi(o) => o.read(handle, world_rank, read),
            CommObjects::Unread(why) => Err((*why).to_owned()),
        }
    }
}

/// The 4 bytes at `a`.
fn u32_at(read: &mut Read<'_>, a: u64) -> Option<u32> {
    read(a).map(|w| w as u32)
}

/// The `int` at `a`.
fn i32_at(read: &mut Read<'_>, a: u64) -> Option<i32> {
    u32_at(read, a).map(|w| w as i32)
}

/// The pointer (or 8-byte integer) at `a`.
fn u64_at(read: &mut Read<'_>, a: u64) -> Option<u64> {
    read(a)
}

/// Whether the NUL-terminated string at `a` is `text`.
fn string_is(read: &mut Read<'_>, a: u64, text: &str) -> bool {
    let mut bytes = Vec::with_capacity(text.len() + 8);
    while bytes.len() <= text.len() {
        let Some(word) = read(a + bytes.len() as u64) else {
            return false;
        };
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.get(..text.len()) == Some(text.as_bytes()) && bytes[text.len()] == 0
}

/// Most members a communicator may have to be read (a job of a million ranks).
const MAX_MEMBERS: i64 = 1 << 24;

/// The checks every object's members must pass: distinct non-negative COMM_WORLD
/// ranks, the process's own at its local rank.
fn check_members(
    members: &[i32],
    local_rank: i64,
    world_rank: Option<i32>,
    world_size: Option<i64>,
) -> Result<(), String> {
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    for &m in members {
        if m < 0 || world_size.is_some_and(|n| i64::from(m) >= n) {
            return Err(format!(
                "its members read as COMM_WORLD rank {m}: not the library's layout"
            ));
        }
        if !seen.insert(m) {
            return Err(format!(
                "its members read with rank {m} twice: not the library's layout"
            ));
        }
    }
    let own = usize::try_from(local_rank)
        .ok()
        .and_then(|l| members.get(l))
        .copied();
    match (own, world_rank) {
        (None, _) => Err(format!(
            "its local rank {local_rank} is not one of its {} members",
            members.len()
        )),
        (Some(own), Some(world)) if own != world => Err(format!(
            "its member at this process's local rank is COMM_WORLD rank {own}, but this process is rank {world}: not the library's layout"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
