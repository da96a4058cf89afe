//! The notes of our MQD library, decoded into the model through the library's own
//! definition of them ([`mqd_mpich::notes`]).

use mqd_model::SenderState;
use mqd_mpich::notes::SenderNote;

/// What the library says of an unexpected message's sender, if anything.
pub(crate) fn sender_of(extra_text: &[String]) -> Option<SenderState> {
    SenderNote::find(extra_text.iter().map(String::as_str)).map(|note| match note {
        SenderNote::Waits => SenderState::Waits,
        SenderNote::GoneOn => SenderState::GoneOn,
    })
}
