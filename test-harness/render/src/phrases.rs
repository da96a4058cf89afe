//! The short phrases sentences are built of: rank sets, communicators, tags, relations
//! between ranks, waits and cycle paths.

use mqd_model::diagnosis::WaitSummary;
use mqd_model::{CommKey, RankSet, Relation, WaitKind};

/// "rank 3" or "ranks 0-5,7" (or "no rank").
pub fn describe(ranks: &RankSet) -> String {
    match ranks.len() {
        0 => "no rank".into(),
        1 => format!("rank {ranks}"),
        _ => format!("ranks {ranks}"),
    }
}

/// `"ring"`, `the communicator of ranks 0,2` (known by its members alone), `an unnamed
/// intercommunicator` (known by the hang recorder's lineage alone: its two groups'
/// sizes may differ), or `an unnamed communicator of size 4`.
pub fn comm_label(comm: &CommKey) -> String {
    match (&comm.of_ranks, comm.name.is_empty()) {
        (_, false) => format!("{:?}", comm.name),
        (Some(ranks), true) => format!("the communicator of ranks {ranks}"),
        (None, true) if comm.lineage != 0 && comm.context.is_none() => {
            "an unnamed intercommunicator".into()
        }
        (None, true) => format!("an unnamed communicator of size {}", comm.size),
    }
}

/// "tag 5" or "any tag".
pub fn tag_words(tag: Option<i64>) -> String {
    match tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".into(),
    }
}

/// "its right neighbour", ... ("" for [`Relation::Absolute`]).
pub fn its(relation: Relation) -> &'static str {
    match relation {
        Relation::Itself => "itself",
        Relation::Right => "its right neighbour",
        Relation::Left => "its left neighbour",
        Relation::Other => "the other rank",
        Relation::Absolute => "",
    }
}

/// "their right neighbour", ... ("" for [`Relation::Absolute`]).
pub fn their(relation: Relation) -> &'static str {
    match relation {
        Relation::Itself => "themselves",
        Relation::Right => "their right neighbour",
        Relation::Left => "their left neighbour",
        Relation::Other => "the other rank",
        Relation::Absolute => "",
    }
}

/// Short: "a send on \"ring\", tag 5".
pub fn wait_what(w: &WaitSummary) -> String {
    let what = match w.kind {
        WaitKind::Send => "a send",
        WaitKind::Unexpected => "a message waiting unexpected",
        WaitKind::Receive => "a receive",
        WaitKind::Collective if w.beyond => {
            return format!("a collective on {} and a remote group", comm_label(&w.comm));
        }
        WaitKind::Collective => return format!("a collective on {}", comm_label(&w.comm)),
    };
    format!("{what} on {}, {}", comm_label(&w.comm), tag_words(w.tag))
}

/// "0 -> 1 -> 2 -> 0"; long cycles are shortened in the middle.
pub fn path_text(cycle: &[i32]) -> String {
    const SHOWN: usize = 32;
    let Some(first) = cycle.first() else {
        return String::new();
    };
    let mut ranks: Vec<String> = cycle.iter().map(i32::to_string).collect();
    ranks.push(first.to_string());
    if cycle.len() > SHOWN {
        let tail = ranks.split_off(ranks.len() - 3);
        ranks.truncate(3);
        ranks.push("...".into());
        ranks.extend(tail);
        return format!("{} ({} ranks)", ranks.join(" -> "), cycle.len());
    }
    ranks.join(" -> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_sets_in_words() {
        assert_eq!(describe(&RankSet::full(3)), "ranks 0-2");
        assert_eq!(describe(&RankSet::single(3)), "rank 3");
        assert_eq!(describe(&RankSet::new()), "no rank");
    }

    #[test]
    fn long_paths_are_shortened() {
        let c: Vec<i32> = (0..64).collect();
        assert_eq!(
            path_text(&c),
            "0 -> 1 -> 2 -> ... -> 62 -> 63 -> 0 (64 ranks)"
        );
        assert_eq!(path_text(&[0, 1]), "0 -> 1 -> 0");
    }

    #[test]
    fn a_wait_beyond_the_communicators_group_says_so() {
        let mut w = WaitSummary {
            kind: WaitKind::Collective,
            comm: CommKey::named("evens", 2),
            tag: None,
            beyond: false,
        };
        assert_eq!(wait_what(&w), "a collective on \"evens\"");
        w.beyond = true;
        assert_eq!(
            wait_what(&w),
            "a collective on \"evens\" and a remote group"
        );
    }
}
