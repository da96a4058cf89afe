//! The region decoded from bytes read out of a rank: every size and offset is checked
//! against bounds before use, and a slot caught mid-write is said to be torn.

use crate::layout::{
    ABSENT, COMM_FIELD_COUNT, COMM_FREED, COMM_INTER, COMM_LIVE, COMM_MEMBERS_UNKNOWN, COMM_WINDOW,
    COMM_WORLD_ORDER, CommField, FIELD_COUNT, HEADER_WORDS, HeaderWord, MAGIC, REQUEST_FIELD_COUNT,
    REQUEST_TOMBSTONE, RequestField, TRAFFIC_FIELD_COUNT, ThreadField, TrafficField, VERSION,
    traffic_claim, traffic_of_key,
};

/// Bounds no sound region exceeds: a damaged header cannot make a reader allocate or read
/// without limit.
const MAX_NAMES_BYTES: u64 = 64 * 1024;
const MAX_PROCEDURES: u64 = 4096;
const MAX_THREAD_SLOTS: u64 = 4096;
const MAX_SLOT_SIZE: u64 = 4096;
const MAX_COMM_SLOTS: u64 = 4096;
/// At most 16 MB of members.
const MAX_MEMBERS: u64 = 1 << 22;
/// At most 2 MB of accounting or requests (a sound region has 256 kB and 128 kB).
const MAX_TABLE_BYTES: u64 = 2 << 20;

/// Why a region cannot be read: it is then unknown, as if there were none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Its memory could not be read at this address.
    Unreadable(u64),
    /// No magic: not a region, or one overwritten.
    NoMagic,
    /// A version this reader does not know.
    Version(u64),
    /// A size, count or offset out of bounds: what, and its value.
    OutOfBounds(&'static str, u64),
    /// Its tables' addresses are still null: the dynamic linker has not relocated the
    /// library yet (the rank is still starting).
    NotRelocated,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Unreadable(at) => write!(f, "its memory at {at:#x} cannot be read"),
            Damage::NotRelocated => {
                f.write_str("the library is not relocated yet (the rank is still starting)")
            }
            Damage::NoMagic => f.write_str("no recorder magic at its symbol"),
            Damage::Version(v) => write!(f, "layout version {v}, this mqd reads version {VERSION}"),
            Damage::OutOfBounds(what, v) => write!(f, "{what} is {v}: out of bounds"),
        }
    }
}

/// The header's words that say where the rest is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// 0 not known, 1 integer handles, 2 pointer handles, 3 the standard ABI's.
    pub abi: u64,
    /// The rank in `MPI_COMM_WORLD`, once known.
    pub world_rank: Option<i64>,
    /// The size of `MPI_COMM_WORLD`, once known.
    pub world_size: Option<i64>,
    names: (u64, u64),
    procedures: u64,
    threads: (u64, u64, u64),
    fields: (u64, u64),
    /// Tables that overflowed (`OVERFLOW_*` bits).
    pub overflow: u64,
    /// 0, `FINALIZE_ENTERED` or `FINALIZE_RETURNED`.
    pub finalize: u64,
    comms: (u64, u64, u64),
    comm_fields: (u64, u64),
    members: (u64, u64),
    /// Address, slot count, slot size, field offsets' address, field count.
    traffic: (u64, u64, u64, u64, u64),
    requests: (u64, u64, u64, u64, u64),
}

/// The call a thread is in, as its wrapper recorded it; `None` where the call has no
/// such argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCall {
    /// The procedure's name, as the standard spells it (`MPI_Send`).
    pub name: String,
    /// Its communicator handle.
    pub comm: Option<u64>,
    /// Destination, source or root.
    pub peer: Option<i64>,
    /// Its tag.
    pub tag: Option<i64>,
    /// Its element count.
    pub count: Option<u64>,
    /// Its datatype handle.
    pub datatype: Option<u64>,
    /// A `MPI_Sendrecv`'s source.
    pub peer2: Option<i64>,
    /// A `MPI_Sendrecv`'s receive tag.
    pub tag2: Option<i64>,
    /// A request handle (one) or the address of an array of `request_count` of them.
    pub requests: Option<u64>,
    /// How many requests.
    pub request_count: u64,
    /// For a collective: which collective on its communicator it is (1 for the first).
    pub collective: Option<u64>,
    /// Its assertion (`MPI_Win_fence`'s).
    pub assert: Option<i64>,
}

/// One thread's slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadRecord {
    /// Read whole: its thread, how many MPI calls it entered, and the call it is in.
    Whole {
        /// The thread's id.
        thread: u64,
        /// MPI calls entered.
        calls: u64,
        /// The call in progress.
        call: Option<ThreadCall>,
    },
    /// Caught mid-write (its thread was stopped entering or leaving a call): unknown.
    Torn {
        /// The thread's id, as far as it was read.
        thread: u64,
    },
}

/// A rank's region, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// Its header.
    pub header: Header,
    /// The slots in use.
    pub threads: Vec<ThreadRecord>,
    /// The communicators noted.
    pub comms: Vec<CommRecord>,
    /// The messages counted, by peer, tag and lineage.
    pub traffic: Vec<Traffic>,
    /// An accounting slot was caught being claimed: the counts may miss a message.
    pub traffic_torn: bool,
    /// The requests kept.
    pub requests: Vec<RequestRecord>,
}

fn word(bytes: &[u8], index: usize) -> Option<u64> {
    let at = index.checked_mul(8)?;
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn bounded(what: &'static str, value: u64, max: u64) -> Result<u64, Damage> {
    if value > max {
        Err(Damage::OutOfBounds(what, value))
    } else {
        Ok(value)
    }
}

/// The header from its bytes (at least [`HEADER_WORDS`] words).
pub fn decode_header(bytes: &[u8]) -> Result<Header, Damage> {
    let w = |h: HeaderWord| word(bytes, h as usize).ok_or(Damage::OutOfBounds("header", 0));
    if w(HeaderWord::Magic)?.to_le_bytes() != MAGIC {
        return Err(Damage::NoMagic);
    }
    let version = w(HeaderWord::Version)?;
    if version != VERSION {
        return Err(Damage::Version(version));
    }
    let size = w(HeaderWord::HeaderSize)?;
    if size < (HEADER_WORDS * 8) as u64 {
        return Err(Damage::OutOfBounds("the header's size", size));
    }
    let tables = [
        HeaderWord::Names,
        HeaderWord::Threads,
        HeaderWord::ThreadFields,
        HeaderWord::Comms,
        HeaderWord::CommFields,
        HeaderWord::Members,
        HeaderWord::Traffic,
        HeaderWord::TrafficFields,
        HeaderWord::Requests,
        HeaderWord::RequestFields,
    ];
    if tables.iter().any(|&t| w(t).is_ok_and(|a| a == 0)) {
        return Err(Damage::NotRelocated);
    }
    let known = |v: u64| (v as i64 >= 0).then_some(v as i64);
    let slot_size = bounded(
        "a thread slot's size",
        w(HeaderWord::ThreadSlotSize)?,
        MAX_SLOT_SIZE,
    )?;
    let field_count = w(HeaderWord::ThreadFieldCount)?;
    if field_count < FIELD_COUNT as u64 || field_count > 256 {
        return Err(Damage::OutOfBounds("the thread field count", field_count));
    }
    Ok(Header {
        abi: w(HeaderWord::Abi)?,
        world_rank: known(w(HeaderWord::WorldRank)?),
        world_size: known(w(HeaderWord::WorldSize)?),
        names: (
            w(HeaderWord::Names)?,
            bounded(
                "the names' length",
                w(HeaderWord::NamesLength)?,
                MAX_NAMES_BYTES,
            )?,
        ),
        procedures: bounded(
            "the procedure count",
            w(HeaderWord::Procedures)?,
            MAX_PROCEDURES,
        )?,
        threads: (
            w(HeaderWord::Threads)?,
            bounded(
                "the thread slot count",
                w(HeaderWord::ThreadSlots)?,
                MAX_THREAD_SLOTS,
            )?,
            slot_size,
        ),
        fields: (w(HeaderWord::ThreadFields)?, field_count),
        overflow: w(HeaderWord::Overflow)?,
        finalize: w(HeaderWord::Finalize)?,
        comms: (
            w(HeaderWord::Comms)?,
            bounded(
                "the communicator slot count",
                w(HeaderWord::CommSlots)?,
                MAX_COMM_SLOTS,
            )?,
            bounded(
                "a communicator slot's size",
                w(HeaderWord::CommSlotSize)?,
                MAX_SLOT_SIZE,
            )?,
        ),
        comm_fields: (w(HeaderWord::CommFields)?, {
            let n = w(HeaderWord::CommFieldCount)?;
            if n < COMM_FIELD_COUNT as u64 || n > 256 {
                return Err(Damage::OutOfBounds("the communicator field count", n));
            }
            n
        }),
        members: (
            w(HeaderWord::Members)?,
            bounded(
                "the members taken",
                w(HeaderWord::MembersUsed)?.min(w(HeaderWord::MemberCapacity)?),
                MAX_MEMBERS,
            )?,
        ),
        traffic: table(
            &w,
            [
                HeaderWord::Traffic,
                HeaderWord::TrafficSlots,
                HeaderWord::TrafficSlotSize,
                HeaderWord::TrafficFields,
                HeaderWord::TrafficFieldCount,
            ],
            TRAFFIC_FIELD_COUNT,
            "the accounting",
        )?,
        requests: table(
            &w,
            [
                HeaderWord::Requests,
                HeaderWord::RequestSlots,
                HeaderWord::RequestSlotSize,
                HeaderWord::RequestFields,
                HeaderWord::RequestFieldCount,
            ],
            REQUEST_FIELD_COUNT,
            "the request table",
        )?,
    })
}

/// A table's address, slot count, slot size, field offsets' address and field count,
/// each bounded.
fn table(
    w: &impl Fn(HeaderWord) -> Result<u64, Damage>,
    words: [HeaderWord; 5],
    fields: usize,
    what: &'static str,
) -> Result<(u64, u64, u64, u64, u64), Damage> {
    let [at, slots, size, offsets, count] = words.map(w);
    let (slots, size, count) = (slots?, size?, count?);
    if size == 0 || size > MAX_SLOT_SIZE || slots.saturating_mul(size) > MAX_TABLE_BYTES {
        return Err(Damage::OutOfBounds(what, slots.saturating_mul(size)));
    }
    if count < fields as u64 || count > 256 {
        return Err(Damage::OutOfBounds(what, count));
    }
    Ok((at?, slots, size, offsets?, count))
}

impl Header {
    /// Where the names are, and how many bytes.
    pub fn names(&self) -> (u64, usize) {
        (self.names.0, self.names.1 as usize)
    }

    /// Where the thread fields' offsets are, and how many bytes.
    pub fn field_offsets(&self) -> (u64, usize) {
        (self.fields.0, self.fields.1 as usize * 8)
    }

    /// Where the thread slots are, and how many bytes.
    pub fn thread_table(&self) -> (u64, usize) {
        (self.threads.0, (self.threads.1 * self.threads.2) as usize)
    }

    /// Where the communicator fields' offsets are, and how many bytes.
    pub fn comm_field_offsets(&self) -> (u64, usize) {
        (self.comm_fields.0, self.comm_fields.1 as usize * 8)
    }

    /// Where the communicator slots are, and how many bytes.
    pub fn comm_table(&self) -> (u64, usize) {
        (self.comms.0, (self.comms.1 * self.comms.2) as usize)
    }

    /// Where the members taken are, and how many bytes.
    pub fn members(&self) -> (u64, usize) {
        (self.members.0, self.members.1 as usize * 4)
    }

    /// Where the accounting fields' offsets are, and how many bytes.
    pub fn traffic_field_offsets(&self) -> (u64, usize) {
        (self.traffic.3, self.traffic.4 as usize * 8)
    }

    /// Where the accounting slots are, and how many bytes.
    pub fn traffic_table(&self) -> (u64, usize) {
        (self.traffic.0, (self.traffic.1 * self.traffic.2) as usize)
    }

    /// Where the request fields' offsets are, and how many bytes.
    pub fn request_field_offsets(&self) -> (u64, usize) {
        (self.requests.3, self.requests.4 as usize * 8)
    }

    /// Where the request slots are, and how many bytes.
    pub fn request_table(&self) -> (u64, usize) {
        (
            self.requests.0,
            (self.requests.1 * self.requests.2) as usize,
        )
    }
}

/// Messages to and from one peer with one tag, on the communicators of one lineage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// The peer's rank in `MPI_COMM_WORLD`.
    pub peer: i32,
    /// The tag.
    pub tag: i32,
    /// The communicators' lineage (0: not known).
    pub lineage: u64,
    /// Messages this rank sent to the peer with the tag.
    pub sent: u64,
    /// Messages it received from the peer with the tag.
    pub received: u64,
}

/// The accounting's slots in use, from the bytes of their field offsets and the table;
/// and whether a slot was caught claimed but not yet written (its counts are not known).
pub fn decode_traffic(
    header: &Header,
    offsets: &[u8],
    table: &[u8],
) -> Result<(Vec<Traffic>, bool), Damage> {
    let slot_size = header.traffic.2 as usize;
    let at: [usize; TRAFFIC_FIELD_COUNT] =
        field_offsets(offsets, slot_size, "an accounting field's offset")?;
    let mut out = Vec::new();
    let mut torn = false;
    for slot in table.chunks_exact(slot_size.max(8)) {
        let field = |f: TrafficField| slot_word(slot, at[f as usize]);
        let claim = field(TrafficField::Claim);
        if claim == 0 {
            continue;
        }
        let (key, lineage) = (field(TrafficField::Key), field(TrafficField::Lineage));
        // Claimed and not yet written, or written over: not known.
        let Some((peer, tag)) =
            traffic_of_key(key).filter(|_| traffic_claim(key, lineage) == claim)
        else {
            torn = true;
            continue;
        };
        out.push(Traffic {
            peer,
            tag,
            lineage,
            sent: field(TrafficField::Sent),
            received: field(TrafficField::Received),
        });
    }
    Ok((out, torn))
}

/// A request as the recorder keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestRecord {
    /// A slot read whole.
    Whole {
        /// Its handle, as the MPI passes it.
        handle: u64,
        /// The `REQUEST_*` bits.
        kind: u64,
        /// Its communicator handle.
        comm: Option<u64>,
        /// Its source or destination in the communicator.
        peer: Option<i64>,
        /// Its tag.
        tag: Option<i64>,
        /// A nonblocking collective's: the call that made it, and which collective on
        /// its communicator it is.
        collective: Option<(String, u64)>,
    },
    /// Being written when read: unknown.
    Torn,
}

/// The request slots in use, from the bytes of their field offsets, the names and the
/// table.
pub fn decode_requests(
    header: &Header,
    offsets: &[u8],
    names: &[u8],
    table: &[u8],
) -> Result<Vec<RequestRecord>, Damage> {
    let names = procedure_names(header, names)?;
    let slot_size = header.requests.2 as usize;
    let at: [usize; REQUEST_FIELD_COUNT] =
        field_offsets(offsets, slot_size, "a request field's offset")?;
    let mut out = Vec::new();
    for slot in table.chunks_exact(slot_size.max(8)) {
        let field = |f: RequestField| slot_word(slot, at[f as usize]);
        if field(RequestField::Sequence) % 2 == 1 {
            out.push(RequestRecord::Torn);
            continue;
        }
        let handle = field(RequestField::Handle);
        if handle == 0 || handle == REQUEST_TOMBSTONE {
            continue;
        }
        let given = |f: RequestField| Some(field(f)).filter(|&v| v != ABSENT);
        let kind = field(RequestField::Kind);
        let collective = match field(RequestField::Call) {
            0 => None,
            n => Some((
                call_name(header, &names, n)?,
                given(RequestField::Collective).ok_or(Damage::OutOfBounds(
                    "a collective request's ordinal",
                    ABSENT,
                ))?,
            )),
        };
        out.push(RequestRecord::Whole {
            handle,
            kind,
            comm: given(RequestField::Comm),
            peer: given(RequestField::Peer).map(|v| v as i64),
            tag: given(RequestField::Tag).map(|v| v as i64),
            collective,
        });
    }
    Ok(out)
}

/// A communicator as the recorder noted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommRecord {
    /// A slot read whole.
    Whole {
        /// Its handle, as the MPI passes it.
        handle: u64,
        /// Freed since (its handle may name another communicator next).
        freed: bool,
        /// An intercommunicator (its members are its local group).
        inter: bool,
        /// An intercommunicator's remote group, `MPI_COMM_WORLD` ranks in its rank
        /// order, where kept: whom its point-to-point calls name.
        remote: Option<Vec<i32>>,
        /// A window, noted with its group (its collectives are its synchronisations).
        window: bool,
        /// Its size.
        size: u64,
        /// Its members, `MPI_COMM_WORLD` ranks in its rank order, where known.
        members: Option<Vec<i32>>,
        /// Collective calls entered on it.
        collectives: u64,
        /// The last one's name and root.
        last: Option<(String, Option<i64>)>,
        /// What names it alike in every member (`crate::lineage`; 0: nothing).
        lineage: u64,
        /// A virtual topology's: the neighbours this rank receives from in a
        /// neighbourhood collective, `MPI_COMM_WORLD` ranks, where kept.
        sources: Option<Vec<i32>>,
    },
    /// Being written when read: unknown.
    Torn {
        /// Its handle.
        handle: u64,
    },
}

/// The offsets of `count` fields from `offsets`, each within a slot of `slot_size`.
fn field_offsets<const N: usize>(
    offsets: &[u8],
    slot_size: usize,
    what: &'static str,
) -> Result<[usize; N], Damage> {
    let mut at = [0usize; N];
    for (i, offset) in at.iter_mut().enumerate() {
        let o = word(offsets, i).ok_or(Damage::OutOfBounds(what, 0))?;
        if o % 8 != 0 || o + 8 > slot_size as u64 {
            return Err(Damage::OutOfBounds(what, o));
        }
        *offset = o as usize;
    }
    Ok(at)
}

/// The word at `offset` of a slot (an offset [`field_offsets`] checked against its size).
fn slot_word(slot: &[u8], offset: usize) -> u64 {
    slot.get(offset..offset + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The names of the procedures, by call number - 1.
fn procedure_names<'a>(header: &Header, names: &'a [u8]) -> Result<Vec<&'a [u8]>, Damage> {
    let names: Vec<&[u8]> = names.split(|&b| b == 0).collect();
    if (names.len() as u64) < header.procedures {
        return Err(Damage::OutOfBounds(
            "the procedure names",
            names.len() as u64,
        ));
    }
    Ok(names)
}

/// The name of call number `n` (1-based).
fn call_name(header: &Header, names: &[&[u8]], n: u64) -> Result<String, Damage> {
    names
        .get((n - 1) as usize)
        .filter(|_| n <= header.procedures)
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .ok_or(Damage::OutOfBounds("a call number", n))
}

/// The communicator slots in use, from the bytes of their field offsets, the names, the
/// slot table and the members taken (each as [`Header`] says where).
pub fn decode_comms(
    header: &Header,
    offsets: &[u8],
    names: &[u8],
    table: &[u8],
    members: &[u8],
) -> Result<Vec<CommRecord>, Damage> {
    let slot_size = header.comms.2 as usize;
    let at: [usize; COMM_FIELD_COUNT] =
        field_offsets(offsets, slot_size, "a communicator field's offset")?;
    let names = procedure_names(header, names)?;
    let pool: Vec<i32> = members
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap_or_default()))
        .collect();
    // A run of the pool: beyond what was read, unknown, never guessed.
    let run = |start: u64, n: u64| {
        let (s, n) = (usize::try_from(start).ok()?, usize::try_from(n).ok()?);
        pool.get(s..s.checked_add(n)?).map(<[i32]>::to_vec)
    };
    let mut comms = Vec::new();
    for slot in table.chunks_exact(slot_size.max(8)) {
        let field = |f: CommField| slot_word(slot, at[f as usize]);
        let handle = field(CommField::Handle);
        if handle == 0 {
            continue;
        }
        if field(CommField::Sequence) % 2 == 1 {
            comms.push(CommRecord::Torn { handle });
            continue;
        }
        let flags = field(CommField::Flags);
        if flags & COMM_LIVE == 0 {
            // Claimed, its first record not yet written.
            comms.push(CommRecord::Torn { handle });
            continue;
        }
        let size = field(CommField::Size);
        let members = if flags & COMM_MEMBERS_UNKNOWN != 0 {
            None
        } else if flags & COMM_WORLD_ORDER != 0 {
            // The world's own order: as many as the world has, within reason.
            let n = i32::try_from(size)
                .ok()
                .filter(|_| size <= MAX_MEMBERS && header.world_size == Some(size as i64));
            n.map(|n| (0..n).collect())
        } else {
            run(field(CommField::Members), size)
        };
        let last = match field(CommField::LastCall) {
            0 => None,
            n => {
                let root = Some(field(CommField::LastRoot))
                    .filter(|&v| v != ABSENT)
                    .map(|v| v as i64);
                Some((call_name(header, &names, n)?, root))
            }
        };
        comms.push(CommRecord::Whole {
            handle,
            freed: flags & COMM_FREED != 0,
            inter: flags & COMM_INTER != 0,
            remote: match field(CommField::Remote) {
                ABSENT => None,
                start if flags & COMM_INTER != 0 => run(start, field(CommField::RemoteSize)),
                _ => None,
            },
            window: flags & COMM_WINDOW != 0,
            size,
            members,
            collectives: field(CommField::Collectives),
            last,
            lineage: field(CommField::Lineage),
            sources: match field(CommField::Sources) {
                ABSENT => None,
                start => run(start, field(CommField::SourceCount)),
            },
        });
    }
    Ok(comms)
}

/// The thread slots in use, from the bytes of the field offsets, the names and the slot
/// table (each as [`Header`] says where).
pub fn decode_threads(
    header: &Header,
    offsets: &[u8],
    names: &[u8],
    table: &[u8],
) -> Result<Vec<ThreadRecord>, Damage> {
    let slot_size = header.threads.2 as usize;
    let at: [usize; FIELD_COUNT] = field_offsets(offsets, slot_size, "a thread field's offset")?;
    let names = procedure_names(header, names)?;
    let mut threads = Vec::new();
    for slot in table.chunks_exact(slot_size.max(8)) {
        let field = |f: ThreadField| slot_word(slot, at[f as usize]);
        let thread = field(ThreadField::Thread);
        if thread == 0 {
            continue;
        }
        if field(ThreadField::Sequence) % 2 == 1 {
            threads.push(ThreadRecord::Torn { thread });
            continue;
        }
        let given = |f: ThreadField| Some(field(f)).filter(|&v| v != ABSENT);
        let signed = |f: ThreadField| given(f).map(|v| v as i64);
        let call = match field(ThreadField::Call) {
            0 => None,
            n => Some(ThreadCall {
                name: call_name(header, &names, n)?,
                comm: given(ThreadField::Comm),
                peer: signed(ThreadField::Peer),
                tag: signed(ThreadField::Tag),
                count: given(ThreadField::Count),
                datatype: given(ThreadField::Datatype),
                peer2: signed(ThreadField::Peer2),
                tag2: signed(ThreadField::Tag2),
                requests: given(ThreadField::Requests),
                request_count: given(ThreadField::RequestCount).unwrap_or(0),
                collective: given(ThreadField::Collective),
                assert: signed(ThreadField::Assert),
            }),
        };
        threads.push(ThreadRecord::Whole {
            thread,
            calls: field(ThreadField::Calls),
            call,
        });
    }
    Ok(threads)
}
