//! Notes this library writes into `extra_text` that a debugger may decode: the one
//! definition both sides use, so that what the library knows of an unexpected message's
//! sender reaches a deadlock analysis as a fact, not as a sentence to search for.
//!
//! MPICH's CH3 device records whether a send was synchronous and whether its data came
//! eagerly. A synchronous sender waits until a receive matches; a standard send whose data
//! arrived eagerly has returned, and its sender has gone on.

/// The note on a complete eager message, which may be followed by a [`SenderNote`] after
/// `"; "` on the same line.
pub const ALL_DATA_ARRIVED: &str = "all data arrived";

/// What the library says about the sender of an unexpected message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderNote {
    /// The sender used a synchronous send and waits for the match.
    Waits,
    /// A standard send completed eagerly: its sender has gone on.
    GoneOn,
}

impl SenderNote {
    /// The note as written into `extra_text`.
    pub fn text(self) -> &'static str {
        match self {
            SenderNote::Waits => "synchronous send: sender waits",
            SenderNote::GoneOn => "its sender has gone on",
        }
    }

    /// The note of one `extra_text` line: the note alone, or after
    /// `"all data arrived; "`.
    pub fn of_line(line: &str) -> Option<SenderNote> {
        let note = line
            .strip_prefix(ALL_DATA_ARRIVED)
            .and_then(|rest| rest.strip_prefix("; "))
            .unwrap_or(line);
        [SenderNote::Waits, SenderNote::GoneOn]
            .into_iter()
            .find(|n| n.text() == note)
    }

    /// The note among the lines of one operation.
    pub fn find<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<SenderNote> {
        lines.into_iter().find_map(SenderNote::of_line)
    }
}

/// The note on an operation of an intercommunicator: its peer's rank is in the remote
/// group, so it says nothing about the peer's place relative to this rank.
pub const REMOTE_GROUP: &str = "peer rank is in the remote group";

/// The note on an operation of a collective's own algorithm: MPICH sends and receives
/// those on the communicator's context id plus one, which no communicator has.
pub const COLLECTIVE_INTERNAL: &str =
    "collective-internal: part of a collective on this communicator";

/// The note on an unexpected message whose data waits at its sender until a receive
/// matches it (MPICH's rendezvous protocol): its sender, if in a blocking send, waits.
pub const RENDEZVOUS_PREFIX: &str = "rendezvous: ";

/// The note naming the MPICH request behind an operation: `request 0x...`. The same
/// request in two displays is the same operation, still pending.
pub const REQUEST_PREFIX: &str = "request 0x";

/// The request address a note line names, if it is that note.
pub fn request_of_line(line: &str) -> Option<u64> {
    u64::from_str_radix(line.strip_prefix(REQUEST_PREFIX)?, 16).ok()
}

/// What the has-queues message says the send queue lists, as one `"; "`-separated part:
/// with only non-blocking sends listed, a synchronous message waiting at its destination
/// that its sender does not list comes from a blocking send, which proves the sender
/// blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendListing {
    /// Only the `MPI_Isend` family (MPICH's ch3 and ch4 devices up to 4.0).
    NonBlockingOnly,
    /// Blocking sends as well, not told apart (the debug queues of MPICH 5.x; 4.1-4.3
    /// too, but their layout is 4.0.3's, which does not).
    All,
}

impl SendListing {
    /// The part as written into the message.
    pub fn text(self) -> &'static str {
        match self {
            SendListing::NonBlockingOnly => "sends listed: non-blocking only",
            SendListing::All => "sends listed: blocking and non-blocking",
        }
    }

    /// The listing a has-queues message states, if any.
    pub fn find(message: &str) -> Option<SendListing> {
        message.split("; ").find_map(|part| {
            [SendListing::NonBlockingOnly, SendListing::All]
                .into_iter()
                .find(|l| l.text() == part)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_notes_round_trip() {
        let line = format!("{REQUEST_PREFIX}{:x}", 0x55c5_f819_08e0u64);
        assert_eq!(request_of_line(&line), Some(0x55c5_f819_08e0));
        assert_eq!(request_of_line("request 0xzz"), None);
        assert_eq!(request_of_line("all data arrived"), None);
    }

    #[test]
    fn send_listing_round_trips_through_a_message() {
        for l in [SendListing::NonBlockingOnly, SendListing::All] {
            let message = format!(
                "mqd: 'x' has MPICH ch3 device queues; {}; groups unknown",
                l.text()
            );
            assert_eq!(SendListing::find(&message), Some(l));
        }
        assert_eq!(
            SendListing::find("mqd: 'x' has MPICH ch3 device queues"),
            None
        );
    }

    #[test]
    fn notes_are_found_alone_or_after_all_data_arrived() {
        for note in [SenderNote::Waits, SenderNote::GoneOn] {
            assert_eq!(SenderNote::of_line(note.text()), Some(note));
            let combined = format!("{ALL_DATA_ARRIVED}; {}", note.text());
            assert!(combined.len() <= 63, "fits one extra_text line: {combined}");
            assert_eq!(SenderNote::of_line(&combined), Some(note));
        }
        assert_eq!(SenderNote::of_line(ALL_DATA_ARRIVED), None);
        assert_eq!(SenderNote::of_line("request 0x1234"), None);
        assert_eq!(
            SenderNote::find(["posted", "its sender has gone on", "x"]),
            Some(SenderNote::GoneOn)
        );
    }
}
