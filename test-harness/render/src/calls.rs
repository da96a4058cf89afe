//! The words of the mismatches blocked calls show: both sides, each with the line of the
//! program that made its call.

use super::phrases::{comm_label, describe, tag_words};
use mqd_model::diagnosis::{CallSide, PeerName};
use mqd_model::{FindingKind, RankSet, Relation};

fn plural(ranks: &RankSet) -> bool {
    ranks.len() != 1
}

/// " (ring.c:27)", or nothing.
fn at(side: &CallSide) -> String {
    side.at
        .as_ref()
        .map_or_else(String::new, |at| format!(" ({at})"))
}

/// "from rank 0", "from their left neighbour", "from any source".
fn source_words(source: &PeerName, several: bool) -> String {
    let whose = if several { "their" } else { "its" };
    match source {
        PeerName::AnySource => "from any source".into(),
        PeerName::World(r) => format!("from rank {r}"),
        PeerName::Local(l) => format!("from local rank {l}"),
        PeerName::Relative(Relation::Left) => format!("from {whose} left neighbour"),
        PeerName::Relative(Relation::Right) => format!("from {whose} right neighbour"),
        PeerName::Relative(Relation::Other) => "from the other rank".into(),
        PeerName::Relative(Relation::Itself) => {
            format!("from {}", if several { "themselves" } else { "itself" })
        }
        PeerName::Relative(Relation::Absolute) => "from a rank".into(),
    }
}

/// " on \"ring\"", or nothing when the communicator is not known.
fn on(side: &CallSide) -> String {
    side.comm
        .as_ref()
        .map_or_else(String::new, |c| format!(" on {}", comm_label(c)))
}

/// A mismatch between receives and the calls of the ranks they wait for.
pub fn call_mismatch_text(
    kind: FindingKind,
    receive: &CallSide,
    other: &CallSide,
    source: &PeerName,
) -> String {
    let several = plural(&receive.ranks);
    let wait = if several { "wait" } else { "waits" };
    let others_are = if plural(&other.ranks) { "are" } else { "is" };
    let them = if several { "them" } else { "it" };
    let from = source_words(source, several);
    match kind {
        FindingKind::TagMismatch => format!(
            "Tag mismatch: {} {wait} in {} {from} with {}{}, and {} {others_are} blocked in {} to {them} with {}{}: these never match.",
            describe(&receive.ranks),
            receive.call,
            tag_words(receive.tag),
            at(receive),
            describe(&other.ranks),
            other.call,
            tag_words(other.tag),
            at(other)
        ),
        FindingKind::CommunicatorMismatch => format!(
            "Communicator mismatch: {} {wait} in {} {from}{}{}, and {} {others_are} blocked in {} to {them}{}{}: messages never cross communicators.",
            describe(&receive.ranks),
            receive.call,
            on(receive),
            at(receive),
            describe(&other.ranks),
            other.call,
            on(other),
            at(other)
        ),
        FindingKind::SourceMismatch => format!(
            "Source mismatch: {} {wait} in {} {from}{}, while {} {others_are} blocked in {} to {them}{}: a receive {from} never takes {} message.",
            describe(&receive.ranks),
            receive.call,
            at(receive),
            describe(&other.ranks),
            other.call,
            at(other),
            if plural(&other.ranks) { "their" } else { "its" }
        ),
        _ => format!(
            "Unmatched receive: {} {wait} in {} {from} with {}{}, and {} {others_are} blocked in {}{}, sending nothing to {them} (a message sent earlier with another tag or communicator would show only in message queues).",
            describe(&receive.ranks),
            receive.call,
            tag_words(receive.tag),
            at(receive),
            describe(&other.ranks),
            other.call,
            at(other)
        ),
    }
}

/// A rooted collective whose members name different roots.
pub fn root_mismatch_text(
    call: &str,
    comm: Option<&mqd_model::CommKey>,
    roots: &[(i64, RankSet, Option<String>)],
) -> String {
    let parts: Vec<String> = roots
        .iter()
        .map(|(root, ranks, at)| {
            format!(
                "{} with root {root}{}",
                describe(ranks),
                at.as_ref().map_or_else(String::new, |a| format!(" ({a})"))
            )
        })
        .collect();
    let on = comm.map_or_else(String::new, |c| format!(" on {}", comm_label(c)));
    format!(
        "Root mismatch: {call}{on} is called by {}: every member must name the same root.",
        parts.join(", ")
    )
}
