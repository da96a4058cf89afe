//! The words of the header and of a thread slot, in the order the recorder writes them.
//! The order is the writer's business: a reader takes each field's offset from the header.

/// The exported symbol whose address is the header.
pub const SYMBOL: &str = "mqd_recorder_region";

/// A function only the recorder defines (it returns [`VERSION`]): what marks its
/// wrappers' frames as the MPI's interface in a stack.
pub const ENTRY: &str = "mqd_recorder_version";

/// The header's first eight bytes.
pub const MAGIC: [u8; 8] = *b"mqd-rec\0";

/// The layout's version: a reader refuses a region whose version it does not know.
/// Version 2 added the communicator table and the members pool; version 3 the message
/// accounting and the request table; version 4 the finalize word and each
/// communicator's lineage; version 5 the requests of nonblocking collectives, windows
/// (noted as communicators of their group), a call's assertion and a topology's
/// neighbours; version 6 an intercommunicator's remote group; version 7
/// `MPI_Intercomm_create`'s remote leader as an `MPI_COMM_WORLD` rank ([`ThreadField::Peer2`]).
pub const VERSION: u64 = 7;

/// A field's value when the call has no such argument: no rank, tag, count or handle
/// of any MPI equals it (ranks and tags are `int`s sign-extended, pointers canonical).
pub const ABSENT: u64 = 1 << 63;

/// The header's 64-bit words, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum HeaderWord {
    /// [`MAGIC`], as a little-endian word.
    Magic = 0,
    /// [`VERSION`].
    Version,
    /// The header's size in bytes.
    HeaderSize,
    /// Which handles the MPI passes: 0 not yet known, 1 integers (MPICH, Intel MPI), 2
    /// pointers (Open MPI), 3 the MPI 5 standard ABI's (a `libmpi_abi.so`).
    Abi,
    /// The rank in `MPI_COMM_WORLD` once the MPI is initialised, else -1.
    WorldRank,
    /// The size of `MPI_COMM_WORLD` once known, else -1.
    WorldSize,
    /// Address of the procedure names: NUL-terminated, in call-number order.
    Names,
    /// Their length in bytes.
    NamesLength,
    /// How many procedures are wrapped.
    Procedures,
    /// Address of the thread slots.
    Threads,
    /// How many thread slots there are.
    ThreadSlots,
    /// The size of one thread slot in bytes.
    ThreadSlotSize,
    /// Address of the field offsets of a thread slot: one word per [`ThreadField`].
    ThreadFields,
    /// How many field offsets that table has.
    ThreadFieldCount,
    /// Tables that overflowed, one bit each ([`OVERFLOW_THREADS`], [`OVERFLOW_COMMS`],
    /// [`OVERFLOW_MEMBERS`]): what they miss is unknown.
    Overflow,
    /// Address of the communicator slots.
    Comms,
    /// How many communicator slots there are.
    CommSlots,
    /// The size of one communicator slot in bytes.
    CommSlotSize,
    /// Address of the field offsets of a communicator slot: one word per [`CommField`].
    CommFields,
    /// How many field offsets that table has.
    CommFieldCount,
    /// Address of the members pool: `i32` ranks of `MPI_COMM_WORLD`.
    Members,
    /// How many ranks the pool holds.
    MemberCapacity,
    /// How many of them are taken (each communicator's run is written before its slot
    /// names it).
    MembersUsed,
    /// Address of the message accounting slots.
    Traffic,
    /// How many accounting slots there are.
    TrafficSlots,
    /// The size of one accounting slot in bytes.
    TrafficSlotSize,
    /// Address of the field offsets of an accounting slot: one word per [`TrafficField`].
    TrafficFields,
    /// How many field offsets that table has.
    TrafficFieldCount,
    /// Address of the request slots.
    Requests,
    /// How many request slots there are.
    RequestSlots,
    /// The size of one request slot in bytes.
    RequestSlotSize,
    /// Address of the field offsets of a request slot: one word per [`RequestField`].
    RequestFields,
    /// How many field offsets that table has.
    RequestFieldCount,
    /// [`FINALIZE_ENTERED`] once `MPI_Finalize` is called, [`FINALIZE_RETURNED`] once it
    /// returned, else 0.
    Finalize,
}

/// How many words the header has in this version.
pub const HEADER_WORDS: usize = HeaderWord::Finalize as usize + 1;

/// `MPI_Finalize` was called: the rank starts no message or collective again.
pub const FINALIZE_ENTERED: u64 = 1;
/// `MPI_Finalize` returned.
pub const FINALIZE_RETURNED: u64 = 2;

/// Overflow bit: a thread found no free slot.
pub const OVERFLOW_THREADS: u64 = 1;
/// Overflow bit: a communicator found no free slot.
pub const OVERFLOW_COMMS: u64 = 2;
/// Overflow bit: a communicator's members did not fit in the pool.
pub const OVERFLOW_MEMBERS: u64 = 4;
/// Overflow bit: a message was sent that could not be counted (no accounting slot left,
/// a communicator whose members are unknown, an intercommunicator whose remote group or
/// lineage is unknown, a persistent or partitioned send not kept): the counts of messages sent are not all there.
pub const OVERFLOW_TRAFFIC: u64 = 8;
/// Overflow bit: a request found no slot: what it is may be unknown.
pub const OVERFLOW_REQUESTS: u64 = 16;

/// The fields of a thread slot, each a 64-bit word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum ThreadField {
    /// Odd while the slot is being written.
    Sequence = 0,
    /// The owning thread's id (0: free).
    Thread,
    /// MPI calls this thread has made (entered).
    Calls,
    /// The call in progress: its number + 1 (0: none).
    Call,
    /// Its communicator handle, as the MPI passes it.
    Comm,
    /// Its destination, source or root.
    Peer,
    /// Its tag.
    Tag,
    /// Its element count.
    Count,
    /// Its datatype handle.
    Datatype,
    /// The source of a `MPI_Sendrecv`'s receive half; `MPI_Intercomm_create`'s remote
    /// leader as an `MPI_COMM_WORLD` rank at its local leader (its argument means nothing
    /// elsewhere), where its peer communicator is noted, else [`ABSENT`].
    Peer2,
    /// The tag of a `MPI_Sendrecv`'s receive half.
    Tag2,
    /// A request handle, or the address of an array of them.
    Requests,
    /// How many requests (0: none; 1: `Requests` is the handle itself).
    RequestCount,
    /// For a collective call: which collective on its communicator it is (1 for the
    /// first), else [`ABSENT`].
    Collective,
    /// Its assertion (`MPI_Win_fence`'s `assert`), else [`ABSENT`].
    Assert,
}

/// How many fields a thread slot has in this version.
pub const FIELD_COUNT: usize = ThreadField::Assert as usize + 1;

/// The thread fields in offset-table order.
pub const THREAD_FIELDS: [ThreadField; FIELD_COUNT] = [
    ThreadField::Sequence,
    ThreadField::Thread,
    ThreadField::Calls,
    ThreadField::Call,
    ThreadField::Comm,
    ThreadField::Peer,
    ThreadField::Tag,
    ThreadField::Count,
    ThreadField::Datatype,
    ThreadField::Peer2,
    ThreadField::Tag2,
    ThreadField::Requests,
    ThreadField::RequestCount,
    ThreadField::Collective,
    ThreadField::Assert,
];

/// The fields of a communicator slot, each a 64-bit word. A communicator is noted when a
/// call first names it (its members asked of the MPI then), and again when its handle
/// names a new one after `MPI_Comm_free`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum CommField {
    /// Odd while the slot is being written.
    Sequence = 0,
    /// The communicator's handle, as the MPI passes it (0: a free slot).
    Handle,
    /// [`COMM_LIVE`], [`COMM_FREED`], [`COMM_INTER`], [`COMM_WORLD_ORDER`],
    /// [`COMM_MEMBERS_UNKNOWN`], [`COMM_WINDOW`].
    Flags,
    /// Its size (an intercommunicator's local group's).
    Size,
    /// Where its members start in the pool, else [`ABSENT`].
    Members,
    /// Collective calls entered on it.
    Collectives,
    /// The last one's call number + 1 (0: none yet).
    LastCall,
    /// The last one's root, else [`ABSENT`].
    LastRoot,
    /// What names the communicator alike in every member ([`lineage`]), 0 where nothing
    /// does.
    Lineage,
    /// A virtual topology's: where this rank's neighbours it receives from in a
    /// neighbourhood collective (`MPI_COMM_WORLD` ranks, in order) start in the pool,
    /// else [`ABSENT`].
    Sources,
    /// How many of them.
    SourceCount,
    /// An intercommunicator's: where its remote group's members (`MPI_COMM_WORLD`
    /// ranks, in its rank order) start in the pool, else [`ABSENT`].
    Remote,
    /// How many of them.
    RemoteSize,
}

/// How many fields a communicator slot has in this version.
pub const COMM_FIELD_COUNT: usize = CommField::RemoteSize as usize + 1;

/// The communicator fields in offset-table order.
pub const COMM_FIELDS: [CommField; COMM_FIELD_COUNT] = [
    CommField::Sequence,
    CommField::Handle,
    CommField::Flags,
    CommField::Size,
    CommField::Members,
    CommField::Collectives,
    CommField::LastCall,
    CommField::LastRoot,
    CommField::Lineage,
    CommField::Sources,
    CommField::SourceCount,
    CommField::Remote,
    CommField::RemoteSize,
];

/// The lineage of `MPI_COMM_WORLD`.
pub const LINEAGE_WORLD: u64 = 1;
/// The lineage of `MPI_COMM_SELF` (one member: never the same communicator as another
/// rank's).
pub const LINEAGE_SELF: u64 = 2;

/// The lineage of the communicator a collective constructor made on a communicator of
/// lineage `parent`, as its `ordinal`-th collective there. Every member of the parent
/// calls its collectives in one order, so every member that took part computes the same
/// value; those of a split that share it share the members too, so a lineage and a
/// member set name one communicator across the job. 0 (unknown) stays 0.
pub fn lineage(parent: u64, ordinal: u64) -> u64 {
    if parent == 0 {
        return 0;
    }
    // A 64-bit mix (splitmix64's finaliser) of both: collisions are negligible.
    let mut x = parent.rotate_left(29) ^ ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)).max(LINEAGE_SELF + 1)
}

/// The lineage of the `ordinal`-th intercommunicator a rank saw made between the groups
/// `local` and `remote` (`MPI_COMM_WORLD` ranks, any order) by `MPI_Intercomm_create`
/// or `MPI_Intercomm_create_from_groups`: those are collective over both groups, whose
/// two sides count no collective alike, so the pair of member sets names it, the same
/// on both sides.
pub fn pair_lineage(local: &[i32], remote: &[i32], ordinal: u64) -> u64 {
    // A sum of mixed ranks: the same whatever the order, no allocation in the recorder.
    let set = |ranks: &[i32]| {
        ranks
            .iter()
            .fold(0u64, |h, &r| {
                h.wrapping_add(lineage(u64::from(r as u32) + 1, 1))
            })
            .max(1)
    };
    let (a, b) = (set(local), set(remote));
    lineage(lineage(a.min(b), a.max(b)), ordinal)
}

/// The slot describes a communicator in use.
pub const COMM_LIVE: u64 = 1;
/// The communicator was freed (`MPI_Comm_free`, `MPI_Comm_disconnect`).
pub const COMM_FREED: u64 = 2;
/// An intercommunicator: its members are its local group, its remote group kept apart.
pub const COMM_INTER: u64 = 4;
/// Its members are `MPI_COMM_WORLD`'s ranks in order (no run in the pool).
pub const COMM_WORLD_ORDER: u64 = 8;
/// Its members could not be asked or kept.
pub const COMM_MEMBERS_UNKNOWN: u64 = 16;
/// A window (`MPI_Win_create`...), noted with its group's members: its synchronisation
/// calls (`MPI_Win_fence`, `MPI_Win_free`) are counted as its collectives.
pub const COMM_WINDOW: u64 = 32;

/// The fields of a message accounting slot, each a 64-bit word: the messages this rank
/// sent to one peer with one tag on the communicators of one lineage, and those it
/// received from that peer with that tag there. A message is counted sent when the call
/// that sends it is entered, received when the call that receives it has returned (after
/// the thread's record says it left that call), so a reader never sees more received
/// than sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum TrafficField {
    /// [`traffic_claim`] of the key and lineage (0: a free slot): what a writer claims
    /// the slot by, before it writes them.
    Claim = 0,
    /// The peer's rank in `MPI_COMM_WORLD` plus one, in the upper 32 bits, and the tag in
    /// the lower ([`traffic_key`]).
    Key,
    /// The communicator's lineage (0: not known: a communicator no lineage names).
    Lineage,
    /// Messages sent to the peer with the tag.
    Sent,
    /// Messages received from the peer with the tag.
    Received,
}

/// How many fields an accounting slot has in this version.
pub const TRAFFIC_FIELD_COUNT: usize = TrafficField::Received as usize + 1;

/// The accounting fields in offset-table order.
pub const TRAFFIC_FIELDS: [TrafficField; TRAFFIC_FIELD_COUNT] = [
    TrafficField::Claim,
    TrafficField::Key,
    TrafficField::Lineage,
    TrafficField::Sent,
    TrafficField::Received,
];

/// The accounting key of a peer (a `MPI_COMM_WORLD` rank) and a tag.
pub fn traffic_key(peer: i32, tag: i32) -> u64 {
    (u64::from(peer as u32).wrapping_add(1) << 32) | u64::from(tag as u32)
}

/// The peer and tag of an accounting key (`None`: no key).
pub fn traffic_of_key(key: u64) -> Option<(i32, i32)> {
    let peer = (key >> 32).checked_sub(1)?;
    Some((peer as u32 as i32, key as u32 as i32))
}

/// What claims the accounting slot of `key` on communicators of `lineage`: a mix of
/// both, never 0 (collisions are negligible in 64 bits).
pub fn traffic_claim(key: u64, lineage: u64) -> u64 {
    let mut x = key ^ lineage.rotate_left(32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (x ^ (x >> 33)) | 1
}

/// The fields of a request slot, each a 64-bit word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum RequestField {
    /// Odd while the slot is being written.
    Sequence = 0,
    /// The request's handle, as the MPI passes it (0: a free slot).
    Handle,
    /// [`REQUEST_RECEIVE`], [`REQUEST_SEND`], [`REQUEST_PERSISTENT`], [`REQUEST_ACTIVE`],
    /// [`REQUEST_CANCELLED`], [`REQUEST_SYNCHRONOUS`], [`REQUEST_COLLECTIVE`].
    Kind,
    /// Its communicator handle.
    Comm,
    /// Its source or destination, a rank in the communicator.
    Peer,
    /// Its tag.
    Tag,
    /// For a nonblocking collective's request ([`REQUEST_COLLECTIVE`]): the procedure
    /// that made it (its number in the names, from 1), else 0.
    Call,
    /// Which collective on its communicator it is (1 for the first), as the calls'
    /// own field counts them.
    Collective,
}

/// How many fields a request slot has in this version.
pub const REQUEST_FIELD_COUNT: usize = RequestField::Collective as usize + 1;

/// The request fields in offset-table order.
pub const REQUEST_FIELDS: [RequestField; REQUEST_FIELD_COUNT] = [
    RequestField::Sequence,
    RequestField::Handle,
    RequestField::Kind,
    RequestField::Comm,
    RequestField::Peer,
    RequestField::Tag,
    RequestField::Call,
    RequestField::Collective,
];

/// A receive (`MPI_Irecv`, `MPI_Recv_init`, `MPI_Imrecv`, an `MPI_Isendrecv`).
pub const REQUEST_RECEIVE: u64 = 1;
/// A send (`MPI_Send_init` and the like).
pub const REQUEST_SEND: u64 = 2;
/// Persistent: it stays after completing, inactive until started again.
pub const REQUEST_PERSISTENT: u64 = 4;
/// Started and not yet seen completing.
pub const REQUEST_ACTIVE: u64 = 8;
/// `MPI_Cancel` was called on it: its completion may be a cancellation.
pub const REQUEST_CANCELLED: u64 = 16;
/// A synchronous send (`MPI_Issend`, `MPI_Ssend_init`): it completes only once a
/// receive takes it.
pub const REQUEST_SYNCHRONOUS: u64 = 32;
/// A nonblocking collective's (`MPI_Ibarrier`...): its peer is its root, and its call
/// and collective fields say which collective it is.
pub const REQUEST_COLLECTIVE: u64 = 64;
/// A handle this slot held was freed or completed: 0 would end a probe sequence.
pub const REQUEST_TOMBSTONE: u64 = u64::MAX;
