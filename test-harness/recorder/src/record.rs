//! What a wrapper records: on entry, the call and its envelope in the thread's slot; on
//! leaving, that the thread is in no call. Calls the MPI makes from inside a call (its
//! own use of the public names) are counted as part of the outer one.

use crate::comms::Named;
use crate::region::{
    ABI_INTEGERS, ABI_POINTERS, ABI_STANDARD, ThreadSlot, handle_at, mqd_recorder_region, wide,
};
use crate::{BINDINGS, Status, Traffic, Word, comms, traffic};
use mqd_recording::{
    ABSENT, FINALIZE_ENTERED, FINALIZE_RETURNED, LINEAGE_SELF, LINEAGE_WORLD, ThreadField,
};
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// A thread's state: its slot (claimed on its first call) and how deep in MPI it is.
pub(crate) struct ThreadState {
    slot: Cell<Option<&'static ThreadSlot>>,
    claimed: Cell<bool>,
    depth: Cell<u32>,
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.get() {
            slot.release();
        }
    }
}

thread_local! {
    static STATE: ThreadState = const {
        ThreadState { slot: Cell::new(None), claimed: Cell::new(false), depth: Cell::new(0) }
    };
}

/// What [`enter`] did, for [`leave`]: with the thread's state, so that leaving does not
/// look up the thread-local again.
pub(crate) enum Entered {
    /// The outermost call, recorded in this slot (or in none: all were taken).
    /// With what the accounting needs of the call's envelope, the handles' ABI, and
    /// which collective on its communicator it is.
    Outer(
        &'static ThreadState,
        Option<&'static ThreadSlot>,
        traffic::Envelope,
        u64,
        Option<u64>,
    ),
    /// A call from inside another.
    Nested(&'static ThreadState),
    /// A call on a thread whose thread-locals are gone (it is ending): not recorded.
    Unrecorded,
}

fn abi() -> u64 {
    let known = mqd_recorder_region.abi.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let init = crate::next::symbol(c"MPI_Init");
    let found = if standard_abi(init) {
        ABI_STANDARD
    } else if !crate::next::object(c"ompi_mpi_comm_world").is_null() {
        ABI_POINTERS
    } else if !init.is_null() {
        ABI_INTEGERS
    } else {
        // No MPI loaded yet: asked again once one is.
        return ABI_INTEGERS;
    };
    mqd_recorder_region.abi.store(found, Ordering::Relaxed);
    found
}

/// Whether `init` (the MPI's `MPI_Init`) is defined by a library of the MPI 5 standard
/// ABI: its name says so (`libmpi_abi.so`, as MPICH and Open MPI name theirs).
fn standard_abi(init: *mut libc::c_void) -> bool {
    if init.is_null() {
        return false;
    }
    // SAFETY: dladdr fills `info` for any address; its file name is the loaded object's.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(init, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: a NUL-terminated path the dynamic linker keeps.
    let path = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_bytes();
    let file = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    file.starts_with(b"libmpi_abi.so")
}

/// Records binding `id` entered with `args`; where the call takes a status, `own` is
/// one of the wrapper's for the MPI to write where the program ignores it.
///
/// Inlined into each wrapper, as are `leave`, `Envelope::of` and the accounting's entry
/// and exit: with the binding a constant there, its roles are too, and only its own
/// call's work remains (`MPI_Comm_rank` 103 instructions instead of 314, `MPI_Sendrecv`
/// 291 instead of 646: `scripts/bench-recorder-instructions`).
#[inline(always)]
pub(crate) fn enter(id: usize, args: &mut [Word], own: Option<&mut Status>) -> Entered {
    let Ok(state) = STATE.try_with(|state| {
        // SAFETY: a thread-local lives as long as its thread, and `leave` runs on this
        // thread before it ends.
        unsafe { &*(state as *const ThreadState) }
    }) else {
        return Entered::Unrecorded;
    };
    let depth = state.depth.get();
    state.depth.set(depth + 1);
    if depth > 0 {
        return Entered::Nested(state);
    }
    if !state.claimed.get() {
        state.claimed.set(true);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u64;
        state.slot.set(ThreadSlot::claim(tid));
    }
    let slot = state.slot.get();
    let binding = &BINDINGS[id];
    let handles = abi();
    let mut envelope = Envelope::of(binding, args, handles);
    if let Some(comm) = envelope.ending.and_then(|at| handle_at(at, handles)) {
        comms::freed(comm as Word);
    }
    let collective = if binding.collective && envelope.comm != ABSENT {
        comms::collective(envelope.comm as Word, id, envelope.peers[0])
    } else {
        None
    };
    if id == crate::FINALIZER {
        mqd_recorder_region
            .finalize
            .store(FINALIZE_ENTERED, Ordering::Relaxed);
    }
    if crate::GROUP_PAIRERS.contains(&id) {
        comms::pairing_entered();
        envelope.peers[1] = if id == crate::GROUP_PAIRERS[0] {
            remote_leader(args, handles, &envelope)
        } else {
            ABSENT
        };
    }
    if binding.traffic != Traffic::None {
        traffic::enter(binding, args, envelope.accounted(), own, handles);
    }
    if let Some(slot) = slot {
        slot.count_call();
        slot.write(|s| {
            s.set(ThreadField::Call, id as u64 + 1);
            s.set(ThreadField::Comm, envelope.comm);
            s.set(ThreadField::Peer, envelope.peers[0]);
            s.set(ThreadField::Tag, envelope.tags[0]);
            s.set(ThreadField::Count, envelope.count);
            s.set(ThreadField::Datatype, envelope.datatype);
            s.set(ThreadField::Peer2, envelope.peers[1]);
            s.set(ThreadField::Tag2, envelope.tags[1]);
            s.set(ThreadField::Requests, envelope.requests);
            s.set(ThreadField::RequestCount, envelope.request_count);
            s.set(ThreadField::Collective, collective.unwrap_or(ABSENT));
            s.set(ThreadField::Assert, envelope.assert);
        });
    }
    Entered::Outer(state, slot, envelope.accounted(), handles, collective)
}

/// `MPI_Intercomm_create`'s remote leader (entered with `args`, `e` their envelope) as
/// an `MPI_COMM_WORLD` rank, at the local leader only: elsewhere the argument means
/// nothing, and its peer communicator may be no valid handle. [`ABSENT`] where the peer
/// communicator is not noted (never asked of the MPI here: see `comms`).
fn remote_leader(args: &[Word], abi: u64, e: &Envelope) -> u64 {
    let me = mqd_recorder_region.world_rank.load(Ordering::Relaxed);
    let leader = comms::peer_of(e.comm as Word, e.peers[0] as i32).map(|(w, _)| i64::from(w));
    if me < 0 || leader != Some(me) {
        return ABSENT;
    }
    // (local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm)
    let peer_comm = if wide(abi) {
        args[2] as u64
    } else {
        u64::from(args[2] as u32)
    };
    match comms::peer_of(peer_comm as Word, e.peers[1] as i32) {
        Some((w, _)) if w >= 0 => w as u64,
        _ => ABSENT,
    }
}

/// The handles of `MPI_COMM_WORLD`, `MPI_COMM_SELF` and `MPI_COMM_NULL` in `abi`.
fn predefined(abi: u64) -> [u64; 3] {
    match abi {
        ABI_POINTERS => [
            crate::next::object(c"ompi_mpi_comm_world") as u64,
            crate::next::object(c"ompi_mpi_comm_self") as u64,
            crate::next::object(c"ompi_mpi_comm_null") as u64,
        ],
        // The standard's constants.
        ABI_STANDARD => [0x101, 0x102, 0x100],
        // The MPICH family's.
        _ => [0x4400_0000, 0x4400_0001, 0x0400_0000],
    }
}

/// Records that the call [`enter`] recorded with `args` has returned `status`: a
/// communicator it made is noted.
#[inline(always)]
pub(crate) fn leave(id: usize, entered: Entered, status: Word, args: &[Word]) {
    let (state, slot, envelope, handles, ordinal) = match entered {
        Entered::Outer(state, slot, envelope, abi, ordinal) => {
            (state, slot, envelope, abi, ordinal)
        }
        Entered::Nested(state) => {
            state.depth.set(state.depth.get().saturating_sub(1));
            return;
        }
        Entered::Unrecorded => return,
    };
    state.depth.set(state.depth.get().saturating_sub(1));
    if let Some(slot) = slot {
        slot.write(|s| s.set(ThreadField::Call, 0));
    }
    // Counted after the record says the thread left the call: a reader never sees a
    // message received by a thread still waiting for it.
    let binding = &BINDINGS[id];
    if binding.traffic != Traffic::None || binding.makes_request {
        let collective = ordinal.map(|k| (id, k));
        traffic::leave(binding, status, args, (envelope, collective), handles);
    }
    if id == crate::FINALIZER {
        mqd_recorder_region
            .finalize
            .store(FINALIZE_RETURNED, Ordering::Relaxed);
    }
    // Left whatever it returned: the next one's order is its own.
    let pairing = crate::GROUP_PAIRERS.contains(&id).then(comms::pairing_left);
    // Only calls that make a communicator or a window (or start MPI) note one, and
    // those that free a window: the others pay a status test and three loads.
    if status != 0 {
        if pairing.is_some() {
            // Made on some members and not here: the counts of pairs differ now.
            comms::unordered();
        }
        return;
    }
    if binding.at::<b'X'>().is_some() {
        // MPI_Win_free: its window (entered with, as the envelope's communicator) is
        // gone, its handle free for another.
        comms::freed(envelope.comm as Word);
        return;
    }
    let initialiser = crate::INITIALISERS.contains(&id);
    if !initialiser && binding.at::<b'C'>().is_none() && binding.at::<b'W'>().is_none() {
        return;
    }
    let abi = abi();
    let [world, own, null] = predefined(abi);
    if initialiser {
        note_world(world as Word);
        comms::note(world as Word, world as Word, Named::By(LINEAGE_WORLD));
        comms::note(own as Word, world as Word, Named::By(LINEAGE_SELF));
    } else {
        let made = Envelope::of(binding, args, abi);
        // Made by a collective on its parent: named by the parent's lineage and which
        // of its collectives made it, alike in every member.
        let lineage = ordinal.map_or(0, |k| {
            mqd_recording::lineage(comms::lineage_of(envelope.comm as Word), k)
        });
        if let Some(comm) = made
            .made
            .and_then(|at| handle_at(at, abi))
            .filter(|&h| h != null && h != 0)
        {
            // An intercommunicator between two groups: named by them, in the order
            // this rank saw such pairs made (unknown where two were made at once).
            let named = match pairing {
                Some(true) => Named::ByGroups,
                Some(false) => Named::By(0),
                None => Named::By(lineage),
            };
            comms::note(comm as Word, world as Word, named);
            if let Some(kind) = topology(BINDINGS[id].name.to_bytes()) {
                comms::note_sources(comm as Word, kind);
            }
        } else if let Some(window) = made
            .window
            .and_then(|at| handle_at(at, abi))
            .filter(|&h| h != 0)
        {
            comms::note_window(window as Word, envelope.comm as Word, lineage);
        }
    }
}

/// The virtual topology the constructor `name` makes, if it makes one.
fn topology(name: &[u8]) -> Option<comms::Topology> {
    match name {
        b"MPI_Cart_create" | b"MPI_Cart_sub" => Some(comms::Topology::Cartesian),
        b"MPI_Graph_create" => Some(comms::Topology::Graph),
        b"MPI_Dist_graph_create" | b"MPI_Dist_graph_create_adjacent" => {
            Some(comms::Topology::DistributedGraph)
        }
        _ => None,
    }
}

/// The rank and size in `MPI_COMM_WORLD` (handle `world`), asked of the MPI once it is
/// initialised.
fn note_world(world: Word) {
    let ask =
        |index, name| comms::ask(index, name, world).map_or(-1, |v| i64::from(v as u32 as i32));
    let region = &mqd_recorder_region;
    region
        .world_size
        .store(ask(comms::COMM_SIZE, c"PMPI_Comm_size"), Ordering::Relaxed);
    region
        .world_rank
        .store(ask(comms::COMM_RANK, c"PMPI_Comm_rank"), Ordering::Relaxed);
}

/// A call's envelope from its arguments, by their roles.
struct Envelope {
    comm: u64,
    peers: [u64; 2],
    tags: [u64; 2],
    count: u64,
    datatype: u64,
    requests: u64,
    request_count: u64,
    /// Where the communicator a call makes will be written (`MPI_Comm *`).
    made: Option<Word>,
    /// Where the communicator a call ends is (`MPI_Comm_free`'s `MPI_Comm *`).
    ending: Option<Word>,
    /// Where the window a call makes will be written (`MPI_Win *`).
    window: Option<Word>,
    /// Its assertion (`MPI_Win_fence`'s).
    assert: u64,
}

impl Envelope {
    /// What the accounting needs of it.
    fn accounted(&self) -> traffic::Envelope {
        traffic::Envelope {
            comm: self.comm,
            peers: self.peers,
            tags: self.tags,
        }
    }

    #[inline(always)]
    fn of(binding: &crate::Binding, args: &[Word], abi: u64) -> Envelope {
        let handle = |w: Word| {
            if wide(abi) {
                w as u64
            } else {
                u64::from(w as u32)
            }
        };
        let int = |w: Word| w as i32 as i64 as u64;
        let mut e = Envelope {
            comm: ABSENT,
            peers: [ABSENT; 2],
            tags: [ABSENT; 2],
            count: ABSENT,
            datatype: ABSENT,
            requests: ABSENT,
            request_count: 0,
            made: None,
            ending: None,
            window: None,
            assert: ABSENT,
        };
        macro_rules! get {
            ($role:literal) => {
                binding.at::<$role>().map(|i| args[i])
            };
        }
        let second = |role: u8| binding.second(role).map(|i| args[i]);
        if let Some(c) = get!(b'c') {
            e.comm = handle(c);
        } else if let Some(w) = get!(b'w') {
            // A window's synchronisation: the window stands for its communicator.
            e.comm = handle(w);
        } else if let Some(w) = get!(b'X').and_then(|at| handle_at(at, abi)) {
            e.comm = w;
        }
        e.window = get!(b'W');
        if let Some(a) = get!(b'a') {
            e.assert = int(a);
        }
        e.peers = [get!(b'r'), second(b'r')].map(|p| p.map_or(ABSENT, int));
        e.tags = [get!(b't'), second(b't')].map(|t| t.map_or(ABSENT, int));
        if let Some(n) = get!(b'n') {
            e.count = if binding.large { n as u64 } else { int(n) };
        }
        if let Some(d) = get!(b'd') {
            e.datatype = handle(d);
        }
        e.made = get!(b'C');
        e.ending = get!(b'F');
        if let Some(q) = get!(b'Q') {
            e.requests = q as u64;
            e.request_count = 1;
        }
        if let Some(a) = get!(b'A') {
            e.requests = a as u64;
            e.request_count = get!(b'L').map_or(0, int);
        }
        e
    }
}
