//! The region decoded from bytes read out of a rank: every size and offset is checked
//! against bounds before use, and a slot caught mid-write is said to be torn.

use crate::layout::{ABSENT, FIELD_COUNT, HEADER_WORDS, HeaderWord, MAGIC, ThreadField, VERSION};

/// Bounds no sound region exceeds: a damaged header cannot make a reader allocate or read
/// without limit.
const MAX_NAMES_BYTES: u64 = 64 * 1024;
const MAX_PROCEDURES: u64 = 4096;
const MAX_THREAD_SLOTS: u64 = 4096;
const MAX_SLOT_SIZE: u64 = 4096;

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
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Unreadable(at) => write!(f, "its memory at {at:#x} cannot be read"),
            Damage::NoMagic => f.write_str("no recorder magic at its symbol"),
            Damage::Version(v) => write!(f, "layout version {v}, this mqd reads version 1"),
            Damage::OutOfBounds(what, v) => write!(f, "{what} is {v}: out of bounds"),
        }
    }
}

/// The header's words that say where the rest is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// 0 not known, 1 integer handles, 2 pointer handles.
    pub abi: u64,
    /// The rank in `MPI_COMM_WORLD`, once known.
    pub world_rank: Option<i64>,
    /// The size of `MPI_COMM_WORLD`, once known.
    pub world_size: Option<i64>,
    names: (u64, u64),
    procedures: u64,
    threads: (u64, u64, u64),
    fields: (u64, u64),
    /// Tables that overflowed, one bit each.
    pub overflow: u64,
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
    })
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
    let mut at = [0usize; FIELD_COUNT];
    for (i, offset) in at.iter_mut().enumerate() {
        let o = word(offsets, i).ok_or(Damage::OutOfBounds("the field offsets", 0))?;
        if o % 8 != 0 || o + 8 > slot_size as u64 {
            return Err(Damage::OutOfBounds("a thread field's offset", o));
        }
        *offset = o as usize;
    }
    let names: Vec<&[u8]> = names.split(|&b| b == 0).collect();
    if (names.len() as u64) < header.procedures {
        return Err(Damage::OutOfBounds(
            "the procedure names",
            names.len() as u64,
        ));
    }
    let mut threads = Vec::new();
    for slot in table.chunks_exact(slot_size.max(8)) {
        let field = |f: ThreadField| {
            let o = at[f as usize];
            u64::from_le_bytes(slot[o..o + 8].try_into().unwrap_or_default())
        };
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
            n => {
                let name = names
                    .get((n - 1) as usize)
                    .filter(|_| n <= header.procedures)
                    .ok_or(Damage::OutOfBounds("a call number", n))?;
                Some(ThreadCall {
                    name: String::from_utf8_lossy(name).into_owned(),
                    comm: given(ThreadField::Comm),
                    peer: signed(ThreadField::Peer),
                    tag: signed(ThreadField::Tag),
                    count: given(ThreadField::Count),
                    datatype: given(ThreadField::Datatype),
                    peer2: signed(ThreadField::Peer2),
                    tag2: signed(ThreadField::Tag2),
                    requests: given(ThreadField::Requests),
                    request_count: given(ThreadField::RequestCount).unwrap_or(0),
                })
            }
        };
        threads.push(ThreadRecord::Whole {
            thread,
            calls: field(ThreadField::Calls),
            call,
        });
    }
    Ok(threads)
}
