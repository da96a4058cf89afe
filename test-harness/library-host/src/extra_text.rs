//! The notes of our MQD library, decoded into the model through the library's own
//! definition of them ([`mqd_abi::notes`]).

use mqd_abi::notes::{
    COLLECTIVE_INTERNAL, REMOTE_GROUP, RENDEZVOUS_PREFIX, SenderNote, request_of_line,
};
use mqd_model::SenderState;

/// What the library says of an unexpected message's sender, if anything: a synchronous
/// send, or a rendezvous whose data is still at the sender, waits for the match.
pub(crate) fn sender_of(extra_text: &[String]) -> Option<SenderState> {
    SenderNote::find(extra_text.iter().map(String::as_str))
        .map(|note| match note {
            SenderNote::Waits => SenderState::Waits,
            SenderNote::GoneOn => SenderState::GoneOn,
        })
        .or_else(|| {
            extra_text
                .iter()
                .any(|line| line.starts_with(RENDEZVOUS_PREFIX))
                .then_some(SenderState::Waits)
        })
}

/// Whether the operation is a message of a collective's own algorithm.
pub(crate) fn collective(extra_text: &[String]) -> bool {
    extra_text.iter().any(|line| line == COLLECTIVE_INTERNAL)
}

/// The request behind an operation, when the library names it.
pub(crate) fn request_of(extra_text: &[String]) -> Option<u64> {
    extra_text.iter().find_map(|line| request_of_line(line))
}

/// Whether the operation's peer is in the remote group of an intercommunicator.
pub(crate) fn remote_group(extra_text: &[String]) -> bool {
    extra_text.iter().any(|line| line == REMOTE_GROUP)
}
