//! Rank sets in words: `ranks 0-63: "ring" send to right neighbour tag 5 count 1000;
//! unexpected from left neighbour tag 5`.

use super::phrases::{comm_label, describe};
use mqd_model::Group;
use mqd_model::aggregate::{OpForm, QueueForm, RankForm};
use mqd_model::diagnosis::PeerName;
use mqd_model::{QueueKind, Relation};
use std::fmt::Write as _;

/// Operations shown in a group's one-line summary before "and N more".
pub const SUMMARY_OPERATIONS: usize = 6;

/// The queues in the order a state is told, with the verb of their operations.
const QUEUE_ORDER: [(QueueKind, &str); 3] = [
    (QueueKind::PendingReceives, "receive from"),
    (QueueKind::PendingSends, "send to"),
    (QueueKind::UnexpectedMessages, "unexpected from"),
];

/// `ranks 0-63`, `rank 3`, with the processes of unknown rank.
pub fn who(g: &Group) -> String {
    let mut who = if g.ranks.is_empty() {
        String::new()
    } else {
        describe(&g.ranks)
    };
    if !g.unranked.is_empty() {
        let pids: Vec<String> = g
            .unranked
            .iter()
            .map(|p| p.map_or("?".into(), |p| p.to_string()))
            .collect();
        if !who.is_empty() {
            who.push_str(" and ");
        }
        let _ = write!(
            who,
            "{} of unknown rank (pid {})",
            if pids.len() == 1 {
                "a process"
            } else {
                "processes"
            },
            pids.join(", ")
        );
    }
    who
}

/// "right neighbour", "rank 3", ...
pub fn peer_text(peer: &PeerName) -> String {
    match peer {
        PeerName::AnySource => "any source".into(),
        PeerName::Relative(Relation::Right) => "right neighbour".into(),
        PeerName::Relative(Relation::Left) => "left neighbour".into(),
        PeerName::Relative(Relation::Other) => "the other rank".into(),
        PeerName::Relative(_) => "itself".into(),
        PeerName::World(w) => format!("rank {w}"),
        PeerName::Local(l) => format!("local rank {l}"),
    }
}

fn op_line(verb: &str, op: &OpForm, times: usize) -> String {
    let mut line = format!("{verb} {}", peer_text(&op.peer));
    match op.tag {
        Some(t) => {
            let _ = write!(line, " tag {t}");
        }
        None => line.push_str(" tag any"),
    }
    if let Some(c) = op.count {
        // Unexpected messages have no count of their own: the library gives their length.
        let word = if verb.starts_with("unexpected") {
            "length"
        } else {
            "count"
        };
        let _ = write!(line, " {word} {c}");
    }
    match op.status {
        Some(1) => line.push_str(" (matched)"),
        Some(2) => line.push_str(" (complete, not yet waited)"),
        Some(0) | None => {}
        Some(n) => {
            let _ = write!(line, " (status {n})");
        }
    }
    if op.collective {
        line.push_str(" (a collective's own)");
    }
    if times > 1 {
        let _ = write!(line, " ({times} times)");
    }
    line
}

/// A state in words: one line per distinct operation (or queue error), communicator
/// first; and the one-line summary, shortened after [`SUMMARY_OPERATIONS`] operations.
pub fn state_lines(form: &RankForm) -> (Vec<String>, String) {
    let comms = match form {
        RankForm::Failed(e) => {
            let line = format!("no message queues: {e}");
            return (vec![line.clone()], line);
        }
        RankForm::Display(comms) => comms,
    };
    let mut lines = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for c in comms {
        let label = comm_label(&c.key);
        let mut first = true;
        let mut add = |item: String, lines: &mut Vec<String>, parts: &mut Vec<String>| {
            lines.push(format!("{label} {item}"));
            parts.push(if first {
                format!("{label} {item}")
            } else {
                item
            });
            first = false;
        };
        for (kind, verb) in QUEUE_ORDER {
            let name = kind.key().replace('_', " ");
            match c.queue(kind) {
                QueueForm::Ops(ops) => {
                    for (op, n) in ops {
                        add(op_line(verb, op, *n), &mut lines, &mut parts);
                    }
                }
                QueueForm::NoInformation => {
                    add(format!("{name}: no information"), &mut lines, &mut parts);
                }
                QueueForm::Error(e) => {
                    add(format!("{name}: error: {e}"), &mut lines, &mut parts);
                }
            }
        }
    }
    if lines.is_empty() {
        let line = "no pending operations".to_string();
        return (vec![line.clone()], line);
    }
    let mut summary = parts
        .iter()
        .take(SUMMARY_OPERATIONS)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if parts.len() > SUMMARY_OPERATIONS {
        let _ = write!(summary, "; and {} more", parts.len() - SUMMARY_OPERATIONS);
    }
    (lines, summary)
}

/// How many operations each queue of a state holds and their tags: "100000 receives
/// (tags 0-99999)".
fn spread(form: &RankForm) -> String {
    let RankForm::Display(comms) = form else {
        return String::new();
    };
    let mut parts = Vec::new();
    for (kind, noun) in [
        (QueueKind::PendingReceives, "receives"),
        (QueueKind::PendingSends, "sends"),
        (QueueKind::UnexpectedMessages, "unexpected messages"),
    ] {
        let mut count = 0;
        let mut tags: Option<(i64, i64)> = None;
        let mut any = false;
        for c in comms {
            if let QueueForm::Ops(ops) = c.queue(kind) {
                for (op, n) in ops {
                    count += n;
                    match op.tag {
                        Some(t) => {
                            let (lo, hi) = tags.get_or_insert((t, t));
                            *lo = (*lo).min(t);
                            *hi = (*hi).max(t);
                        }
                        None => any = true,
                    }
                }
            }
        }
        if count == 0 {
            continue;
        }
        let mut tag_text = match tags {
            Some((lo, hi)) if lo == hi => format!("tag {lo}"),
            Some((lo, hi)) => format!("tags {lo}-{hi}"),
            None => String::new(),
        };
        if any {
            tag_text.push_str(if tag_text.is_empty() {
                "any tag"
            } else {
                " and any"
            });
        }
        parts.push(format!("{count} {noun} ({tag_text})"));
    }
    parts.join(", ")
}

/// The aggregated view: `ranks 0-63: <summary>`, followed by the full lines (indented,
/// at most `limit` of them, 0 for all) when the summary had to be shortened.
pub fn groups_text(groups: &[Group], limit: usize) -> String {
    let mut out = String::new();
    for g in groups {
        let (lines, summary) = state_lines(&g.form);
        let _ = writeln!(out, "{}: {summary}", who(g));
        if lines.len() > SUMMARY_OPERATIONS {
            let shown = if limit == 0 { lines.len() } else { limit };
            for line in lines.iter().take(shown) {
                let _ = writeln!(out, "  {line}");
            }
            if lines.len() > shown {
                let _ = writeln!(
                    out,
                    "  ... and {} more; in all {} (--json has them all; --limit 0 lists them)",
                    lines.len() - shown,
                    spread(&g.form)
                );
            }
        }
    }
    out
}
