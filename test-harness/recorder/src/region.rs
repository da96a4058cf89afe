//! The region `mqd` reads: a self-describing header exported as `mqd_recorder_region`,
//! and thread slots in zeroed memory (no page of them is touched until a thread uses it).

use crate::{NAMES, PROCEDURES};
use mqd_recording::{
    COMM_FIELD_COUNT, FIELD_COUNT, HEADER_WORDS, MAGIC, OVERFLOW_THREADS, REQUEST_FIELD_COUNT,
    TRAFFIC_FIELD_COUNT, ThreadField, VERSION,
};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering, fence};

/// The handles the MPI passes, told apart on first call: Open MPI exports its
/// predefined communicators as objects, the MPICH family uses integers, and the MPI 5
/// standard ABI (a `libmpi_abi.so`) pointer-sized handles whose predefined ones are
/// small constants.
pub(crate) const ABI_INTEGERS: u64 = 1;
pub(crate) const ABI_POINTERS: u64 = 2;
pub(crate) const ABI_STANDARD: u64 = 3;

/// Whether `abi`'s handles are pointer-sized.
pub(crate) fn wide(abi: u64) -> bool {
    abi != ABI_INTEGERS
}

/// The handle stored at `at` (a `MPI_Comm *`, `MPI_Request *`...), as `abi` passes
/// handles; `None` for 0 and 1, which no MPI gives as such a pointer.
pub(crate) fn handle_at(at: crate::Word, abi: u64) -> Option<u64> {
    (at > 1).then(|| {
        // SAFETY: a pointer to a handle the program gave the MPI, which reads (or
        // writes) it too.
        unsafe {
            if wide(abi) {
                std::ptr::read_unaligned(at as *const u64)
            } else {
                u64::from(std::ptr::read_unaligned(at as *const u32))
            }
        }
    })
}

/// How many threads can be recorded at once; a thread beyond them sets the overflow bit.
pub(crate) const THREAD_SLOTS: usize = 256;
/// How many communicators can be noted; one beyond them sets the overflow bit.
pub(crate) const COMM_SLOTS: usize = 1024;
/// How many `MPI_COMM_WORLD` ranks the members pool holds (512 kB).
pub(crate) const MEMBER_CAPACITY: usize = 1 << 17;

/// How many peer, tag and lineage triples the message accounting holds (256 kB).
pub(crate) const TRAFFIC_SLOTS: usize = 4096;
/// How many requests the request table holds (128 kB).
pub(crate) const REQUEST_SLOTS: usize = 2048;

/// One triple's counts: one word per [`mqd_recording::TrafficField`].
#[repr(C, align(64))]
pub(crate) struct TrafficSlot(pub(crate) [AtomicU64; 8]);

#[allow(clippy::declare_interior_mutable_const)]
const FREE_TRAFFIC: TrafficSlot = TrafficSlot([const { AtomicU64::new(0) }; 8]);
/// The accounting slots, probed from their key's hash.
pub(crate) static TRAFFIC: [TrafficSlot; TRAFFIC_SLOTS] = [FREE_TRAFFIC; TRAFFIC_SLOTS];
static TRAFFIC_FIELD_OFFSETS: [u64; TRAFFIC_FIELD_COUNT] = word_offsets();

/// One request's record: one word per [`mqd_recording::RequestField`].
#[repr(C, align(64))]
pub(crate) struct RequestSlot(pub(crate) [AtomicU64; 8]);

#[allow(clippy::declare_interior_mutable_const)]
const FREE_REQUEST: RequestSlot = RequestSlot([const { AtomicU64::new(0) }; 8]);
/// The request slots, probed from their handle's hash.
pub(crate) static REQUESTS: [RequestSlot; REQUEST_SLOTS] = [FREE_REQUEST; REQUEST_SLOTS];
static REQUEST_FIELD_OFFSETS: [u64; REQUEST_FIELD_COUNT] = word_offsets();

/// One communicator's record: one word per [`mqd_recording::CommField`].
#[repr(C, align(64))]
pub(crate) struct CommSlot(pub(crate) [AtomicU64; COMM_FIELD_COUNT]);

#[allow(clippy::declare_interior_mutable_const)]
const FREE_COMM: CommSlot = CommSlot([const { AtomicU64::new(0) }; COMM_FIELD_COUNT]);
/// The communicator slots, probed from their handle's hash.
pub(crate) static COMMS: [CommSlot; COMM_SLOTS] = [FREE_COMM; COMM_SLOTS];
/// The members pool: runs of `MPI_COMM_WORLD` ranks, taken from the front.
pub(crate) static MEMBERS: [AtomicI32; MEMBER_CAPACITY] =
    [const { AtomicI32::new(0) }; MEMBER_CAPACITY];

/// Offsets of `n` consecutive words.
const fn word_offsets<const N: usize>() -> [u64; N] {
    let mut offsets = [0u64; N];
    let mut i = 0;
    while i < N {
        offsets[i] = (i * 8) as u64;
        i += 1;
    }
    offsets
}

static COMM_FIELD_OFFSETS: [u64; COMM_FIELD_COUNT] = word_offsets();

/// One thread's record: one word per [`ThreadField`], padded to two cache lines.
#[repr(C, align(128))]
pub(crate) struct ThreadSlot([AtomicU64; 16]);

#[allow(clippy::declare_interior_mutable_const)]
const FREE: ThreadSlot = ThreadSlot([const { AtomicU64::new(0) }; 16]);
static THREADS: [ThreadSlot; THREAD_SLOTS] = [FREE; THREAD_SLOTS];

/// The fields' offsets in a slot, in [`ThreadField`] order.
static FIELD_OFFSETS: [u64; FIELD_COUNT] = word_offsets();

/// The header, word by word in [`mqd_recording::HeaderWord`] order.
#[repr(C)]
pub struct Header {
    magic: u64,
    version: u64,
    header_size: u64,
    pub(crate) abi: AtomicU64,
    pub(crate) world_rank: AtomicI64,
    pub(crate) world_size: AtomicI64,
    names: *const u8,
    names_length: u64,
    procedures: u64,
    threads: *const ThreadSlot,
    thread_slots: u64,
    thread_slot_size: u64,
    thread_fields: *const u64,
    thread_field_count: u64,
    pub(crate) overflow: AtomicU64,
    comms: *const CommSlot,
    comm_slots: u64,
    comm_slot_size: u64,
    comm_fields: *const u64,
    comm_field_count: u64,
    members: *const AtomicI32,
    member_capacity: u64,
    pub(crate) members_used: AtomicU64,
    traffic: *const TrafficSlot,
    traffic_slots: u64,
    traffic_slot_size: u64,
    traffic_fields: *const u64,
    traffic_field_count: u64,
    requests: *const RequestSlot,
    request_slots: u64,
    request_slot_size: u64,
    request_fields: *const u64,
    request_field_count: u64,
    pub(crate) finalize: AtomicU64,
}

// SAFETY: the raw pointers point at immutable or atomic statics.
unsafe impl Sync for Header {}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_WORDS * 8);

/// The region's header: `mqd` finds it by this name.
#[unsafe(no_mangle)]
pub static mqd_recorder_region: Header = Header {
    magic: u64::from_le_bytes(MAGIC),
    version: VERSION,
    header_size: std::mem::size_of::<Header>() as u64,
    abi: AtomicU64::new(0),
    world_rank: AtomicI64::new(-1),
    world_size: AtomicI64::new(-1),
    names: NAMES.as_ptr(),
    names_length: NAMES.len() as u64,
    procedures: PROCEDURES as u64,
    threads: THREADS.as_ptr(),
    thread_slots: THREAD_SLOTS as u64,
    thread_slot_size: std::mem::size_of::<ThreadSlot>() as u64,
    thread_fields: FIELD_OFFSETS.as_ptr(),
    thread_field_count: FIELD_COUNT as u64,
    overflow: AtomicU64::new(0),
    comms: COMMS.as_ptr(),
    comm_slots: COMM_SLOTS as u64,
    comm_slot_size: std::mem::size_of::<CommSlot>() as u64,
    comm_fields: COMM_FIELD_OFFSETS.as_ptr(),
    comm_field_count: COMM_FIELD_COUNT as u64,
    members: MEMBERS.as_ptr(),
    member_capacity: MEMBER_CAPACITY as u64,
    members_used: AtomicU64::new(0),
    traffic: TRAFFIC.as_ptr(),
    traffic_slots: TRAFFIC_SLOTS as u64,
    traffic_slot_size: std::mem::size_of::<TrafficSlot>() as u64,
    traffic_fields: TRAFFIC_FIELD_OFFSETS.as_ptr(),
    traffic_field_count: TRAFFIC_FIELD_COUNT as u64,
    requests: REQUESTS.as_ptr(),
    request_slots: REQUEST_SLOTS as u64,
    request_slot_size: std::mem::size_of::<RequestSlot>() as u64,
    request_fields: REQUEST_FIELD_OFFSETS.as_ptr(),
    request_field_count: REQUEST_FIELD_COUNT as u64,
    finalize: AtomicU64::new(0),
};

/// Runs `fill` holding a slot shared by threads, whose `sequence` word is odd while it
/// runs (a reader that stops a thread in between knows the slot is torn); `false` when
/// another thread held it for too long (then `fill` did not run).
pub(crate) fn held(sequence: &AtomicU64, fill: impl FnOnce()) -> bool {
    for _ in 0..10_000 {
        let s = sequence.load(Ordering::Relaxed);
        if s.is_multiple_of(2)
            && sequence
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            fence(Ordering::Release);
            fill();
            sequence.store(s + 2, Ordering::Release);
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// The region layout's version. Defined only here: a stack's frames in the library that
/// defines it are the MPI's interface (the program called MPI through them).
#[unsafe(no_mangle)]
pub extern "C" fn mqd_recorder_version() -> u64 {
    VERSION
}

impl ThreadSlot {
    fn field(&self, f: ThreadField) -> &AtomicU64 {
        &self.0[f as usize]
    }

    /// Claims a free slot for thread `tid`; `None` when all are taken (then said).
    pub(crate) fn claim(tid: u64) -> Option<&'static ThreadSlot> {
        let found = THREADS.iter().find(|slot| {
            slot.field(ThreadField::Thread)
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        });
        if found.is_none() {
            mqd_recorder_region
                .overflow
                .fetch_or(OVERFLOW_THREADS, Ordering::Relaxed);
        }
        found
    }

    /// Frees the slot (its thread ends).
    pub(crate) fn release(&self) {
        self.write(|slot| slot.set(ThreadField::Call, 0));
        self.field(ThreadField::Thread).store(0, Ordering::Release);
    }

    /// Writes fields under the sequence word: odd while `fill` runs, so a reader that
    /// stops this thread in between knows the slot is torn.
    pub(crate) fn write(&self, fill: impl FnOnce(&Self)) {
        let sequence = self.field(ThreadField::Sequence);
        let s = sequence.load(Ordering::Relaxed);
        sequence.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        fill(self);
        sequence.store(s.wrapping_add(2), Ordering::Release);
    }

    /// One field (only its owning thread writes it).
    pub(crate) fn set(&self, f: ThreadField, value: u64) {
        self.field(f).store(value, Ordering::Relaxed);
    }

    /// Counts a call entered.
    pub(crate) fn count_call(&self) {
        let calls = self.field(ThreadField::Calls);
        calls.store(
            calls.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }
}
