//! What a display gives back across the pipe: the rank's dump, the failure, and the
//! counters `--stats` shows.

use crate::callbacks::Counters;
use crate::failure::Failure;
use mqd_model::RankDump;
use serde::{Deserialize, Serialize};

/// A display's results, as the host sends them.
#[derive(Serialize, Deserialize)]
pub(super) struct Displayed {
    pub(super) dump: RankDump,
    /// The failure `display_into` returned.
    pub(super) failure: Option<Failure>,
    /// The session's counters over the process (those `--stats` shows).
    pub(super) counters: [u64; 9],
}

/// The counters a display sends back (the nine `--stats` shows).
pub(super) fn counters_of(c: &Counters) -> [u64; 9] {
    [
        c.fetches,
        c.fetch_bytes,
        c.failed_fetches,
        c.largest_fetch,
        c.find_symbol_calls,
        c.find_type_calls,
        c.field_offset_calls,
        c.mallocs,
        c.frees,
    ]
}

/// Counters as [`counters_of`] sent them; the others are zero.
pub(super) fn counters_from(n: [u64; 9]) -> Counters {
    Counters {
        fetches: n[0],
        fetch_bytes: n[1],
        failed_fetches: n[2],
        largest_fetch: n[3],
        find_symbol_calls: n[4],
        find_type_calls: n[5],
        field_offset_calls: n[6],
        mallocs: n[7],
        frees: n[8],
        ..Counters::default()
    }
}
