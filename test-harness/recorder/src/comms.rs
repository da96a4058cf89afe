//! The communicators of the rank: each noted when it is known valid (`MPI_COMM_WORLD` and
//! `MPI_COMM_SELF` once the MPI is initialised, any other when a call that makes one
//! returns it), with its size and its members as `MPI_COMM_WORLD` ranks asked of the MPI
//! itself; each collective call on it counted, in order; marked freed by
//! `MPI_Comm_free`. Only handles the MPI just returned or predefined ones are asked
//! about: a query on a handle the program merely passed could raise an error the program
//! would not have seen.

use crate::Word;
use crate::region::{
    COMM_SLOTS, COMMS, CommSlot, MEMBER_CAPACITY, MEMBERS, held, mqd_recorder_region,
};
use mqd_recording::{
    ABSENT, COMM_FREED, COMM_INTER, COMM_LIVE, COMM_MEMBERS_UNKNOWN, COMM_WINDOW, COMM_WORLD_ORDER,
    CommField, LINEAGE_WORLD, OVERFLOW_COMMS, OVERFLOW_MEMBERS, pair_lineage,
};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

impl CommSlot {
    fn field(&self, f: CommField) -> &AtomicU64 {
        &self.0[f as usize]
    }

    /// Runs `fill` with the slot held; `false` when another thread held it for too
    /// long (then nothing was written).
    fn write(&self, fill: impl FnOnce(&Self)) -> bool {
        held(self.field(CommField::Sequence), || fill(self))
    }

    fn set(&self, f: CommField, value: u64) {
        self.field(f).store(value, Ordering::Relaxed);
    }

    fn get(&self, f: CommField) -> u64 {
        self.field(f).load(Ordering::Relaxed)
    }

    /// Writes a communicator or window noted anew: no collective counted yet, no
    /// topology's neighbours, no remote group.
    fn fresh(&self, size: u64, members: u64, lineage: u64, flags: u64) {
        self.set(CommField::Size, size);
        self.set(CommField::Members, members);
        self.set(CommField::Collectives, 0);
        self.set(CommField::LastCall, 0);
        self.set(CommField::LastRoot, ABSENT);
        self.set(CommField::Lineage, lineage);
        self.set(CommField::Sources, ABSENT);
        self.set(CommField::SourceCount, 0);
        self.set(CommField::Remote, ABSENT);
        self.set(CommField::RemoteSize, 0);
        self.set(CommField::Flags, flags);
    }
}

/// Where `handle`'s probe starts.
fn home(handle: u64) -> usize {
    (handle.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % COMM_SLOTS
}

/// The slot of a communicator noted with `handle`, if any.
fn find(handle: u64) -> Option<&'static CommSlot> {
    let start = home(handle);
    for i in 0..COMM_SLOTS {
        let slot = &COMMS[(start + i) % COMM_SLOTS];
        match slot.field(CommField::Handle).load(Ordering::Acquire) {
            0 => return None,
            h if h == handle => return Some(slot),
            _ => {}
        }
    }
    None
}

/// The slot for `handle`: its own, or a free one claimed for it.
fn claim(handle: u64) -> Option<&'static CommSlot> {
    let start = home(handle);
    for i in 0..COMM_SLOTS {
        let slot = &COMMS[(start + i) % COMM_SLOTS];
        let field = slot.field(CommField::Handle);
        match field.compare_exchange(0, handle, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(slot),
            Err(h) if h == handle => return Some(slot),
            Err(_) => {}
        }
    }
    mqd_recorder_region
        .overflow
        .fetch_or(OVERFLOW_COMMS, Ordering::Relaxed);
    None
}

/// The slots of [`pmpi`]'s procedures.
pub(crate) const COMM_SIZE: usize = 0;
const TEST_INTER: usize = 1;
const COMM_GROUP: usize = 2;
const TRANSLATE: usize = 3;
const GROUP_FREE: usize = 4;
pub(crate) const COMM_RANK: usize = 5;
const CARTDIM_GET: usize = 6;
const CART_SHIFT: usize = 7;
const GRAPH_NEIGHBORS_COUNT: usize = 8;
const GRAPH_NEIGHBORS: usize = 9;
const DIST_NEIGHBORS_COUNT: usize = 10;
const DIST_NEIGHBORS: usize = 11;
const REMOTE_SIZE: usize = 12;
const REMOTE_GROUP: usize = 13;
pub(crate) const TEST_CANCELLED: usize = 14;

/// The MPI's own procedures the recorder asks, found once (the `PMPI_` names: another
/// tool preloaded after this one sees none of these questions).
fn pmpi(index: usize, name: &std::ffi::CStr) -> *mut libc::c_void {
    #[allow(clippy::declare_interior_mutable_const)]
    const UNKNOWN: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
    static FOUND: [AtomicPtr<libc::c_void>; 15] = [UNKNOWN; 15];
    let mut f = FOUND[index].load(Ordering::Relaxed);
    if f.is_null() {
        // By its own name wherever the MPI is: an MPI loaded out of the global scope
        // (mpi4py's) is out of RTLD_NEXT's reach too.
        f = crate::next::object(name);
        FOUND[index].store(f, Ordering::Relaxed);
    }
    f
}

type Query = unsafe extern "C" fn(Word, *mut Word) -> Word;
type Translate = unsafe extern "C" fn(Word, i32, *const i32, Word, *mut i32) -> Word;
type Free = unsafe extern "C" fn(*mut Word) -> Word;

/// Calls a query of the MPI's (`PMPI_Comm_size`, ..., `PMPI_Test_cancelled` of a status)
/// on `comm`: its answer, or `None`.
pub(crate) fn ask(index: usize, name: &std::ffi::CStr, comm: Word) -> Option<Word> {
    let f = pmpi(index, name);
    if f.is_null() {
        return None;
    }
    // SAFETY: these PMPI procedures take a handle and a pointer to their answer.
    let query = unsafe { std::mem::transmute::<*mut libc::c_void, Query>(f) };
    let mut answer: Word = 0;
    // SAFETY: a handle the MPI returned or predefined, and a word for the answer (an
    // int or a handle: the word holds either, zeroed above).
    (unsafe { query(comm, &mut answer) } == 0).then_some(answer)
}

/// The handle of `MPI_COMM_WORLD` once noted (0: not yet).
static WORLD: AtomicU64 = AtomicU64::new(0);

/// What names a communicator alike in every member.
pub(crate) enum Named {
    /// This lineage (0: nothing).
    By(u64),
    /// An intercommunicator's two groups, with how many intercommunicators between
    /// them this rank saw made before.
    ByGroups,
}

/// Notes the communicator `comm` (a valid handle) `named` so in its slot; `world` is
/// the handle of `MPI_COMM_WORLD`. A slot that named a freed communicator with the same
/// handle is noted anew.
pub(crate) fn note(comm: Word, world: Word, named: Named) {
    let Some(slot) = claim(comm as u64) else {
        return;
    };
    let Some(size) = ask(COMM_SIZE, c"PMPI_Comm_size", comm) else {
        slot.write(|s| {
            s.set(CommField::Lineage, 0);
            s.set(CommField::Flags, COMM_LIVE | COMM_MEMBERS_UNKNOWN);
        });
        if matches!(named, Named::ByGroups) {
            unordered();
        }
        return;
    };
    let size = size as u32 as i32;
    let inter = ask(TEST_INTER, c"PMPI_Comm_test_inter", comm).is_some_and(|f| f as u32 != 0);
    let (flags, local) = if comm == world {
        WORLD.store(world as u64, Ordering::Relaxed);
        (COMM_WORLD_ORDER, ABSENT)
    } else {
        match members(COMM_GROUP, c"PMPI_Comm_group", comm, world, size) {
            Some(at) => (0, at),
            None => (COMM_MEMBERS_UNKNOWN, ABSENT),
        }
    };
    // An intercommunicator's remote group: whom its point-to-point calls name.
    let remote = inter
        .then(|| {
            let n = ask(REMOTE_SIZE, c"PMPI_Comm_remote_size", comm)? as u32 as i32;
            let at = members(REMOTE_GROUP, c"PMPI_Comm_remote_group", comm, world, n)?;
            Some((at, n as u64))
        })
        .flatten();
    let lineage = match named {
        Named::By(lineage) => lineage,
        Named::ByGroups => match (run(local, size as u64), remote) {
            (Some(local), Some((at, n))) if flags & COMM_MEMBERS_UNKNOWN == 0 => {
                let remote = run(at, n).unwrap_or(&[]);
                pair_ordinal(local, remote).map_or(0, |k| pair_lineage(local, remote, k))
            }
            _ => {
                unordered();
                0
            }
        },
    };
    let flags = COMM_LIVE | flags | if inter { COMM_INTER } else { 0 };
    slot.write(|s| {
        s.fresh(size as u64, local, lineage, flags);
        if let Some((at, n)) = remote {
            s.set(CommField::Remote, at);
            s.set(CommField::RemoteSize, n);
        }
    });
}

/// The run of `n` ranks of the members pool that starts at `start` ([`ABSENT`]: none).
fn run(start: u64, n: u64) -> Option<&'static [i32]> {
    let (s, n) = (usize::try_from(start).ok()?, usize::try_from(n).ok()?);
    let ranks = MEMBERS.get(s..s.checked_add(n)?)?;
    // SAFETY: AtomicI32 is laid out as i32, and a run is written once, before the slot
    // that names it.
    Some(unsafe { std::slice::from_raw_parts(ranks.as_ptr().cast::<i32>(), n) })
}

/// Intercommunicators between two groups being made by this rank's threads.
static PAIRING: AtomicU64 = AtomicU64::new(0);
/// Two were made at once, or one could not be named: this rank's order of them is no
/// longer the other members'.
static UNORDERED: AtomicBool = AtomicBool::new(false);

pub(crate) fn unordered() {
    UNORDERED.store(true, Ordering::Relaxed);
}

/// A thread enters `MPI_Intercomm_create` or `MPI_Intercomm_create_from_groups`.
pub(crate) fn pairing_entered() {
    if PAIRING.fetch_add(1, Ordering::AcqRel) > 0 {
        unordered();
    }
}

/// It left: whether this rank's order of such calls is still the other members' (no
/// two were in progress at once).
pub(crate) fn pairing_left() -> bool {
    if PAIRING.fetch_sub(1, Ordering::AcqRel) > 1 {
        unordered();
    }
    !UNORDERED.load(Ordering::Relaxed)
}

/// How many pairs the recorder keeps counts of.
const PAIRS: usize = 64;

/// The pairs of groups with intercommunicators between them, each with how many this
/// rank saw made: (key, count).
static PAIR_COUNTS: [[AtomicU64; 2]; PAIRS] =
    [const { [AtomicU64::new(0), AtomicU64::new(0)] }; PAIRS];

/// Which intercommunicator between the groups `local` and `remote` this one is (1 for
/// the first), where this rank's order is known. Every member of both groups takes
/// part in making each, and no member makes two at once (else [`unordered`]), so each
/// member counts them in the same order.
fn pair_ordinal(local: &[i32], remote: &[i32]) -> Option<u64> {
    let key = pair_lineage(local, remote, 0);
    for pair in &PAIR_COUNTS {
        match pair[0].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(pair[1].fetch_add(1, Ordering::AcqRel) + 1),
            Err(k) if k == key => return Some(pair[1].fetch_add(1, Ordering::AcqRel) + 1),
            Err(_) => {}
        }
    }
    unordered();
    None
}

/// Notes the window `window` (a valid handle) a collective on the communicator `comm`
/// just made, of `lineage`: its group is `comm`'s, whose size and members it shares
/// (the pool's runs are never reused).
pub(crate) fn note_window(window: Word, comm: Word, lineage: u64) {
    let parent = find(comm as u64).filter(|s| {
        let flags = s.get(CommField::Flags);
        flags & COMM_LIVE != 0 && flags & (COMM_INTER | COMM_FREED) == 0
    });
    let Some(slot) = claim(window as u64) else {
        return;
    };
    let (size, members, flags) = match parent {
        Some(p) => (
            p.get(CommField::Size),
            p.get(CommField::Members),
            p.get(CommField::Flags) & (COMM_WORLD_ORDER | COMM_MEMBERS_UNKNOWN),
        ),
        None => (0, ABSENT, COMM_MEMBERS_UNKNOWN),
    };
    let lineage = if parent.is_some() { lineage } else { 0 };
    slot.write(|s| s.fresh(size, members, lineage, COMM_LIVE | COMM_WINDOW | flags));
}

/// A virtual topology's kind, by the constructor that made it.
#[derive(Clone, Copy)]
pub(crate) enum Topology {
    Cartesian,
    Graph,
    DistributedGraph,
}

/// The most neighbours kept for one rank of a topology.
const MAX_SOURCES: usize = 64;

/// The procedure `name` of the MPI's (slot `index` of [`pmpi`]), as type `F`.
fn procedure<F: Copy>(index: usize, name: &std::ffi::CStr) -> Option<F> {
    let f = pmpi(index, name);
    // SAFETY: `F` is the procedure's prototype (a function pointer of its size).
    (!f.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut libc::c_void, F>(&f) })
}

/// This rank's neighbours in the topology of `comm` (of `kind`) that a neighbourhood
/// collective receives from, in the standard's order, asked of the MPI: ranks of
/// `comm`, `MPI_PROC_NULL` (negative) for a missing one.
fn sources(comm: Word, kind: Topology) -> Option<([i32; MAX_SOURCES], usize)> {
    let mut out = [-1i32; MAX_SOURCES];
    let ok = |r: Word| (r == 0).then_some(());
    let n = match kind {
        Topology::Cartesian => {
            type Shift = unsafe extern "C" fn(Word, i32, i32, *mut i32, *mut i32) -> Word;
            let ndims = ask(CARTDIM_GET, c"PMPI_Cartdim_get", comm)? as u32 as usize;
            if 2 * ndims > MAX_SOURCES {
                return None;
            }
            let shift: Shift = procedure(CART_SHIFT, c"PMPI_Cart_shift")?;
            // Per dimension, the neighbour below, then the one above.
            for d in 0..ndims {
                let (below, above) = out[2 * d..2 * d + 2].split_at_mut(1);
                // SAFETY: a communicator the MPI just returned, two ints for the answer.
                ok(unsafe { shift(comm, d as i32, 1, &mut below[0], &mut above[0]) })?;
            }
            2 * ndims
        }
        Topology::Graph => {
            type Count = unsafe extern "C" fn(Word, i32, *mut i32) -> Word;
            type Neighbours = unsafe extern "C" fn(Word, i32, i32, *mut i32) -> Word;
            let me = ask(COMM_RANK, c"PMPI_Comm_rank", comm)? as u32 as i32;
            let count: Count = procedure(GRAPH_NEIGHBORS_COUNT, c"PMPI_Graph_neighbors_count")?;
            let neighbours: Neighbours = procedure(GRAPH_NEIGHBORS, c"PMPI_Graph_neighbors")?;
            let mut n = 0i32;
            // SAFETY: an int for the answer.
            ok(unsafe { count(comm, me, &mut n) })?;
            let n = usize::try_from(n).ok().filter(|&n| n <= MAX_SOURCES)?;
            // SAFETY: room for `n` ranks.
            ok(unsafe { neighbours(comm, me, n as i32, out.as_mut_ptr()) })?;
            n
        }
        Topology::DistributedGraph => {
            type Count = unsafe extern "C" fn(Word, *mut i32, *mut i32, *mut i32) -> Word;
            type Neighbours = unsafe extern "C" fn(
                Word,
                i32,
                *mut i32,
                *mut i32,
                i32,
                *mut i32,
                *mut i32,
            ) -> Word;
            let count: Count = procedure(DIST_NEIGHBORS_COUNT, c"PMPI_Dist_graph_neighbors_count")?;
            let neighbours: Neighbours = procedure(DIST_NEIGHBORS, c"PMPI_Dist_graph_neighbors")?;
            let (mut indegree, mut outdegree, mut weighted) = (0i32, 0i32, 0i32);
            // SAFETY: three ints for the answers.
            ok(unsafe { count(comm, &mut indegree, &mut outdegree, &mut weighted) })?;
            let n = usize::try_from(indegree)
                .ok()
                .filter(|&n| n <= MAX_SOURCES)?;
            let m = usize::try_from(outdegree)
                .ok()
                .filter(|&m| m <= MAX_SOURCES)?;
            // Weights asked into buffers of their own: valid whether the graph has them
            // or not.
            let mut weights = [0i32; MAX_SOURCES];
            let mut dests = [0i32; MAX_SOURCES];
            let mut dest_weights = [0i32; MAX_SOURCES];
            // SAFETY: room for `n` sources and `m` destinations, and their weights.
            ok(unsafe {
                neighbours(
                    comm,
                    n as i32,
                    out.as_mut_ptr(),
                    weights.as_mut_ptr(),
                    m as i32,
                    dests.as_mut_ptr(),
                    dest_weights.as_mut_ptr(),
                )
            })?;
            n
        }
    };
    Some((out, n))
}

/// Notes the neighbours a neighbourhood collective on the topology `comm` (just noted,
/// of `kind`) receives from, as `MPI_COMM_WORLD` ranks in the pool; `MPI_PROC_NULL`
/// ones (a non-periodic edge) are left out.
pub(crate) fn note_sources(comm: Word, kind: Topology) {
    let Some(slot) = find(comm as u64) else {
        return;
    };
    let Some((ranks, n)) = sources(comm, kind) else {
        return;
    };
    let mut world = [0i32; MAX_SOURCES];
    let mut kept = 0;
    for &r in ranks[..n].iter().filter(|&&r| r >= 0) {
        let Some((w, _)) = peer_of(comm, r) else {
            return;
        };
        world[kept] = w;
        kept += 1;
    }
    let used = &mqd_recorder_region.members_used;
    let start = used.fetch_add(kept as u64, Ordering::Relaxed) as usize;
    if start + kept > MEMBER_CAPACITY {
        mqd_recorder_region
            .overflow
            .fetch_or(OVERFLOW_MEMBERS, Ordering::Relaxed);
        return;
    }
    for (m, &w) in MEMBERS[start..start + kept].iter().zip(&world[..kept]) {
        m.store(w, Ordering::Relaxed);
    }
    slot.write(|s| {
        s.set(CommField::Sources, start as u64);
        s.set(CommField::SourceCount, kept as u64);
    });
}

/// The `size` members of `comm`'s group (asked by the procedure `name`, slot `index` of
/// [`pmpi`]: its group or its remote group) as `MPI_COMM_WORLD` ranks, written into the
/// pool: where they start, or `None` (the pool full, the MPI did not answer, or a member
/// is not in `MPI_COMM_WORLD`).
fn members(index: usize, name: &std::ffi::CStr, comm: Word, world: Word, size: i32) -> Option<u64> {
    let n = usize::try_from(size).ok().filter(|&n| n > 0)?;
    // The ranks asked about (0..n), then the answers: the second run is kept.
    let used = &mqd_recorder_region.members_used;
    let start = used.fetch_add(2 * n as u64, Ordering::Relaxed) as usize;
    if start + 2 * n > MEMBER_CAPACITY {
        mqd_recorder_region
            .overflow
            .fetch_or(OVERFLOW_MEMBERS, Ordering::Relaxed);
        return None;
    }
    for (i, m) in MEMBERS[start..start + n].iter().enumerate() {
        m.store(i as i32, Ordering::Relaxed);
    }
    let group = ask(index, name, comm)?;
    let world_group = ask(COMM_GROUP, c"PMPI_Comm_group", world);
    let translate = pmpi(TRANSLATE, c"PMPI_Group_translate_ranks");
    let free = pmpi(GROUP_FREE, c"PMPI_Group_free");
    let mut ok = false;
    if let Some(world_group) = world_group
        && !translate.is_null()
    {
        // SAFETY: PMPI_Group_translate_ranks's prototype.
        let translate = unsafe { std::mem::transmute::<*mut libc::c_void, Translate>(translate) };
        let ranks = MEMBERS[start..].as_ptr().cast::<i32>();
        // SAFETY: `n` ranks in, room for `n` answers after them, both runs this call's
        // own (taken from the pool above); AtomicI32 is laid out as i32.
        ok = unsafe { translate(group, size, ranks, world_group, ranks.add(n).cast_mut()) } == 0;
        if !free.is_null() {
            // SAFETY: PMPI_Group_free's prototype, a group the MPI gave us.
            let free = unsafe { std::mem::transmute::<*mut libc::c_void, Free>(free) };
            let mut g = world_group;
            // SAFETY: as above.
            unsafe { free(&mut g) };
        }
    }
    if !free.is_null() {
        // SAFETY: PMPI_Group_free's prototype, a group the MPI gave us.
        let free = unsafe { std::mem::transmute::<*mut libc::c_void, Free>(free) };
        let mut g = group;
        // SAFETY: as above.
        unsafe { free(&mut g) };
    }
    // A member of another job (a connected or spawned one) has no rank here.
    let ranks = run((start + n) as u64, n as u64)?;
    (ok && ranks.iter().all(|&r| r >= 0)).then_some((start + n) as u64)
}

/// The lineage of the communicator `comm` (0 where it is not noted or its collectives'
/// order is lost).
pub(crate) fn lineage_of(comm: Word) -> u64 {
    find(comm as u64)
        .filter(|s| s.get(CommField::Flags) & COMM_LIVE != 0)
        .map_or(0, |s| s.get(CommField::Lineage))
}

/// Marks the communicator `comm` freed (`MPI_Comm_free` is about to end it).
pub(crate) fn freed(comm: Word) {
    if let Some(slot) = find(comm as u64) {
        slot.write(|s| s.set(CommField::Flags, s.get(CommField::Flags) | COMM_FREED));
    }
}

/// Counts a collective call (`id`, rooted at `root` or [`ABSENT`]) on `comm`: which one
/// it is there (1 for the first), where `comm` is noted.
pub(crate) fn collective(comm: Word, id: usize, root: u64) -> Option<u64> {
    let slot = find(comm as u64)?;
    let mut index = None;
    let written = slot.write(|s| {
        let flags = s.get(CommField::Flags);
        if flags & COMM_LIVE == 0 || flags & COMM_FREED != 0 {
            return;
        }
        let n = s.get(CommField::Collectives) + 1;
        s.set(CommField::Collectives, n);
        s.set(CommField::LastCall, id as u64 + 1);
        s.set(CommField::LastRoot, root);
        index = Some(n);
    });
    if !written {
        // Two threads on one communicator's collectives at once (erroneous): its counts
        // are no longer known.
        slot.field(CommField::Flags)
            .fetch_and(!COMM_LIVE, Ordering::Relaxed);
    }
    index
}

/// The `MPI_COMM_WORLD` rank of rank `rank` of `comm` (of its remote group for an
/// intercommunicator: whom its point-to-point calls name), and `comm`'s lineage, where
/// `comm` is noted with those members.
pub(crate) fn peer_of(comm: Word, rank: i32) -> Option<(i32, u64)> {
    // MPI_COMM_WORLD, the communicator most messages travel on, without a probe.
    let world = WORLD.load(Ordering::Relaxed);
    if world != 0 && comm as u64 == world {
        let size = mqd_recorder_region.world_size.load(Ordering::Relaxed);
        return (i64::from(rank) < size).then_some((rank, LINEAGE_WORLD));
    }
    let slot = find(comm as u64)?;
    let index = usize::try_from(rank).ok()?;
    let flags = slot.get(CommField::Flags);
    if flags & COMM_LIVE == 0 || flags & (COMM_FREED | COMM_WINDOW) != 0 {
        return None;
    }
    let lineage = slot.get(CommField::Lineage);
    if flags & COMM_INTER != 0 {
        let ranks = run(slot.get(CommField::Remote), slot.get(CommField::RemoteSize))?;
        return ranks.get(index).map(|&w| (w, lineage));
    }
    if flags & COMM_MEMBERS_UNKNOWN != 0 || index >= slot.get(CommField::Size) as usize {
        return None;
    }
    if flags & COMM_WORLD_ORDER != 0 {
        return Some((rank, lineage));
    }
    let start = usize::try_from(slot.get(CommField::Members)).ok()?;
    MEMBERS
        .get(start.checked_add(index)?)
        .map(|m| (m.load(Ordering::Relaxed), lineage))
}
