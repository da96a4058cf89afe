//! The hang recorder's region: what `libmqd_recorder.so` keeps in each rank's memory and
//! how `mqd` reads it back.
//!
//! The region is found by its symbol ([`SYMBOL`]): a header that describes itself, as
//! CPython's `_Py_DebugOffsets` do. It starts with a magic and a version, then says where
//! each table is, how many slots it has, how large a slot is and at which offset each
//! field of a slot lies, so a reader never assumes a layout it was not told. The tables
//! live apart from the header (zeroed memory, untouched until used).
//!
//! Every slot has one writer (the thread that owns it) and a sequence word: odd while the
//! slot is being written. A reader that finds it odd, or finds it changed across its
//! read, has a torn record: unknown, never a fact.

mod decode;
mod layout;

pub use decode::{
    CommRecord, Damage, Header, Recording, RequestRecord, ThreadCall, ThreadRecord, Traffic,
    decode_comms, decode_header, decode_requests, decode_threads, decode_traffic,
};
pub use layout::{
    ABSENT, COMM_FIELD_COUNT, COMM_FIELDS, COMM_FREED, COMM_INTER, COMM_LIVE, COMM_MEMBERS_UNKNOWN,
    COMM_WINDOW, COMM_WORLD_ORDER, CommField, ENTRY, FIELD_COUNT, FINALIZE_ENTERED,
    FINALIZE_RETURNED, HEADER_WORDS, HeaderWord, LINEAGE_SELF, LINEAGE_WORLD, MAGIC,
    OVERFLOW_COMMS, OVERFLOW_MEMBERS, OVERFLOW_REQUESTS, OVERFLOW_THREADS, OVERFLOW_TRAFFIC,
    REQUEST_ACTIVE, REQUEST_CANCELLED, REQUEST_COLLECTIVE, REQUEST_FIELD_COUNT, REQUEST_FIELDS,
    REQUEST_PERSISTENT, REQUEST_RECEIVE, REQUEST_SEND, REQUEST_SYNCHRONOUS, REQUEST_TOMBSTONE,
    RequestField, SYMBOL, THREAD_FIELDS, TRAFFIC_FIELD_COUNT, TRAFFIC_FIELDS, ThreadField,
    TrafficField, VERSION, lineage, pair_lineage, traffic_claim, traffic_key, traffic_of_key,
};
