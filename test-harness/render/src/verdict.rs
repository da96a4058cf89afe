//! The words of deadlocks and of the verdict: proven deadlocks say "blocked", possible
//! ones say what is pending and what would make it a deadlock, and the verdict says
//! "no deadlock" only when the analysis saw everything.

use super::phrases::{comm_label, describe, its, path_text, tag_words, their, wait_what};
use mqd_model::diagnosis::{CycleFacts, Doubt, KnotMember, KnotWait, Verdict};
use mqd_model::{Certainty, CommKey, Diagnosis, RankSet, WaitKind};
use std::fmt::Write as _;

/// Why ranks blocked in calls are not proven held: a snapshot cannot show messages in
/// flight.
const IN_FLIGHT: &str = "unless a message is already on its way, which one snapshot cannot show (a hold of the live job tells)";

/// Why "pending" is not "blocked": the queues cannot tell the calls apart.
fn unproven_note(receives: bool) -> &'static str {
    if receives {
        "a queue cannot tell MPI_Recv from MPI_Irecv"
    } else {
        "a queue cannot tell a blocking send from MPI_Isend"
    }
}

/// A cycle; `ranks` is more than its one rank when self-cycles of several ranks merged.
pub(super) fn cycle_text(
    cycle: &[i32],
    ranks: &RankSet,
    facts: &CycleFacts,
    certainty: Certainty,
) -> String {
    let possible = certainty == Certainty::Possible;
    let head = if possible {
        "Possible deadlock"
    } else {
        "Deadlock"
    };
    if cycle.len() == 1 {
        return self_cycle_text(ranks, facts, possible);
    }
    let path = path_text(cycle);
    let mut text = match &facts.uniform {
        Some(u) => {
            let peer = u.relation.map_or("the next rank of the cycle", its);
            let tag = match u.tag {
                Some(t) => format!(", {}", tag_words(t)),
                None => String::new(),
            };
            let comm = comm_label(&u.comm);
            let (what, other) = if u.messages {
                let seen = match (u.unlisted, possible) {
                    (false, _) => "",
                    (true, false) => {
                        " (blocking synchronous sends, which the library does not list: seen as their messages waiting unexpected at the destinations)"
                    }
                    (true, true) => {
                        " (seen as their messages waiting unexpected at the destinations)"
                    }
                };
                let note = if !u.unseen.is_empty() {
                    format!(
                        "the receives {} may have posted cannot be seen (no message queues)",
                        describe(&u.unseen)
                    )
                } else if u.other_side.is_empty() {
                    "no receive is posted on any of them".to_string()
                } else {
                    format!(
                        "the receives posted on {} match none of these messages",
                        describe(&u.other_side)
                    )
                };
                (format!("to {peer} on {comm}{tag}{seen}"), note)
            } else {
                let note = if !u.unseen.is_empty() && !possible {
                    // Proven without their queues (by the hang recorder's counts, or a
                    // hold, which says so itself).
                    format!(
                        "nothing {} sent them is still on its way",
                        describe(&u.unseen)
                    )
                } else if !u.unseen.is_empty() {
                    format!(
                        "the sends {} may have pending cannot be seen (no message queues)",
                        describe(&u.unseen)
                    )
                } else if u.other_side.is_empty() {
                    "none of them has a send pending".to_string()
                } else {
                    format!(
                        "the sends pending on {} match none of these receives",
                        describe(&u.other_side)
                    )
                };
                (format!("from {peer} on {comm}{tag}"), note)
            };
            let kind = if u.messages { "a send" } else { "a receive" };
            // "MPI_Recv from ...", "MPI_Wait for a receive from ...".
            let call = u.call.as_ref().map(|c| {
                if c.starts_with("MPI_Wait") {
                    format!("{c} for {kind}")
                } else {
                    c.clone()
                }
            });
            match (possible, &call) {
                (true, Some(call)) => format!(
                    "{head}: ranks {path} each blocked in {call} {what}; {other}. Deadlocked {IN_FLIGHT}."
                ),
                (true, None) => format!(
                    "{head}: ranks {path} each have {kind} {what} pending; {other}. They are deadlocked if they are blocked in these calls ({}).",
                    unproven_note(!u.messages)
                ),
                (false, Some(call)) => {
                    format!("{head}: ranks {path} each blocked in {call} {what}; {other}.")
                }
                (false, None) => {
                    format!("{head}: ranks {path} each blocked in {kind} {what}; {other}.")
                }
            }
        }
        None => {
            let parts: Vec<String> = facts
                .hops
                .iter()
                .map(|(a, b, w)| format!("rank {a} waits for rank {b} ({})", wait_what(w)))
                .collect();
            let collective = facts
                .hops
                .iter()
                .any(|(_, _, w)| w.kind == WaitKind::Collective);
            let condition = match (possible, collective, facts.in_calls) {
                (false, ..) => "",
                (true, false, false) => " if their pending operations are blocking calls",
                (true, false, true) => {
                    " (blocked in their calls), unless a message is already on its way"
                }
                (true, true, _) => {
                    " unless a rank has already left its collective and only its messages are on their way"
                }
            };
            format!(
                "{head}: ranks {path} wait for each other{condition}: {}.",
                parts.join(", ")
            )
        }
    };
    if !facts.unsure.is_empty() {
        let (who, has, own) = if facts.unsure.len() == 1 {
            ("Rank", "has", "its")
        } else {
            ("Ranks", "have", "their")
        };
        let _ = write!(
            text,
            " ({who} {} {has} no pending operation of {own} own: blocked in a send the library does not list, or past an eager send; its stack tells which.)",
            facts.unsure
        );
    }
    text
}

/// Ranks that wait for themselves: a receive from itself with no send to itself.
fn self_cycle_text(ranks: &RankSet, facts: &CycleFacts, possible: bool) -> String {
    let Some((_, _, w)) = facts.hops.first() else {
        return String::new();
    };
    let several = ranks.len() > 1;
    let (who, each, have, own) = if several {
        (
            describe(ranks),
            " each",
            "have",
            their(mqd_model::Relation::Itself),
        )
    } else {
        (describe(ranks), "", "has", its(mqd_model::Relation::Itself))
    };
    let what = match w.kind {
        WaitKind::Receive => format!("a receive from {own}"),
        _ => format!("a message to {own}"),
    };
    let place = format!("on {}, {}", comm_label(&w.comm), tag_words(w.tag));
    if possible {
        format!(
            "Possible deadlock: {who}{each} {have} {what} pending {place} that nothing else on the same rank matches. A deadlock only if blocked in it ({}); pre-posted receives are common.",
            unproven_note(w.kind == WaitKind::Receive)
        )
    } else {
        format!("Deadlock: {who}{each} blocked in {what} {place} that nothing can match.")
    }
}

/// What one member of a knot waits for, in words.
fn knot_targets(m: &KnotMember, all: &RankSet) -> String {
    const TARGETS: usize = 3;
    // Every other member, each for the same kind of wait: say so once.
    let mut others = all.clone();
    if let Ok(r) = u32::try_from(m.rank) {
        others.remove(r);
    }
    let mut ranks = RankSet::new();
    let mut summaries = m.waits_for.iter().map(|w| match w {
        KnotWait::Rank { rank, wait } => {
            if let Ok(r) = u32::try_from(*rank) {
                ranks.insert(r);
            }
            Some(wait)
        }
        KnotWait::AnyOf { .. } => None,
    });
    let first = summaries.next().flatten();
    let uniform = first.is_some() && summaries.all(|s| s == first);
    if let Some(wait) = first.filter(|_| uniform && m.more == 0 && others.len() > 1)
        && ranks == others
    {
        return format!("all the others ({})", wait_what(wait));
    }
    let mut targets: Vec<String> = m
        .waits_for
        .iter()
        .take(TARGETS)
        .map(|w| match w {
            KnotWait::AnyOf { ranks, comm, tag } => format!(
                "a message from any of {} on {}, {}",
                describe(ranks),
                comm_label(comm),
                tag_words(*tag)
            ),
            KnotWait::Rank { rank, wait } => format!("rank {rank} ({})", wait_what(wait)),
        })
        .collect();
    let more = m.waits_for.len().saturating_sub(TARGETS) + m.more;
    if more > 0 {
        targets.push(format!("{more} more"));
    }
    targets.join(" and ")
}

/// A strongly connected set of ranks that is not one simple cycle.
pub(super) fn knot_text(
    ranks: &RankSet,
    members: &[KnotMember],
    certainty: Certainty,
    in_calls: bool,
) -> String {
    const LISTED: usize = 6;
    // Members that wait for the same things are one clause.
    let mut clauses: Vec<(RankSet, String, bool)> = Vec::new();
    for m in members {
        let targets = match &m.polling {
            Some(call) => {
                let mut from = RankSet::new();
                for w in &m.waits_for {
                    match w {
                        KnotWait::AnyOf { ranks, .. } => from.union_with(ranks),
                        KnotWait::Rank { rank, .. } => {
                            if let Ok(r) = u32::try_from(*rank) {
                                from.insert(r);
                            }
                        }
                    }
                }
                format!("whatever {} may do (polling in {call})", describe(&from))
            }
            None => knot_targets(m, ranks),
        };
        let same = clauses
            .iter_mut()
            .find(|(_, t, nobody)| *t == targets && *nobody == m.nobody_sends);
        match same {
            Some((set, _, _)) => {
                if let Ok(r) = u32::try_from(m.rank) {
                    set.insert(r);
                }
            }
            None => clauses.push((RankSet::from_i32s([m.rank]), targets, m.nobody_sends)),
        }
    }
    let parts: Vec<String> = clauses
        .iter()
        .take(LISTED)
        .map(|(set, targets, nobody_sends)| {
            let several = set.len() > 1;
            let nobody = match (nobody_sends, several) {
                (false, _) => "",
                (true, false) => " and nobody sends to it",
                (true, true) => " and nobody sends to them",
            };
            let verb = if several { "each wait" } else { "waits" };
            format!("{} {verb} for {targets}{nobody}", describe(set))
        })
        .collect();
    let collective = members.iter().any(|m| {
        m.waits_for.iter().any(|w| match w {
            KnotWait::Rank { wait, .. } => wait.kind == WaitKind::Collective,
            KnotWait::AnyOf { .. } => false,
        })
    });
    let mut listing = parts.join("; ");
    if clauses.len() > LISTED {
        let _ = write!(
            listing,
            "; and {} more ranks (see --json)",
            clauses[LISTED..]
                .iter()
                .map(|(s, _, _)| s.len())
                .sum::<usize>()
        );
    }
    let polling = members.iter().any(|m| m.polling.is_some());
    match certainty {
        Certainty::Possible if polling => format!(
            "Possible deadlock (knot): {} wait only for each other if the loops that poll never end, which no snapshot shows: {listing}.",
            describe(ranks)
        ),
        Certainty::Definite => format!(
            "Deadlock (knot): {} are all blocked and every rank they wait for is among them, so none can proceed: {listing}.",
            describe(ranks)
        ),
        Certainty::Possible if in_calls && !collective => format!(
            "Possible deadlock (knot): {} are blocked in calls that wait only for each other, so none can proceed {IN_FLIGHT}: {listing}.",
            describe(ranks)
        ),
        Certainty::Possible if collective => format!(
            "Possible deadlock (knot): {} wait only for each other, so none could proceed unless a rank has already left its collective and only its messages are on their way: {listing}.",
            describe(ranks)
        ),
        Certainty::Possible => format!(
            "Possible deadlock (knot): {} wait only for each other, so none could proceed if their pending operations are blocking calls (a queue cannot tell MPI_Recv from MPI_Irecv): {listing}.",
            describe(ranks)
        ),
    }
}

/// Ranks in a collective and where the others are: the members not in it when its
/// communicator is known, else every rank elsewhere.
pub(super) fn collective_text(
    ranks: &RankSet,
    call: &str,
    others: &[(RankSet, String)],
    comm: Option<&CommKey>,
) -> String {
    let verb = if ranks.len() == 1 { "is" } else { "are" };
    let on = comm.map_or_else(String::new, |c| format!(" on {}", comm_label(c)));
    if others.is_empty() {
        let nobody = if comm.is_some() {
            "every member is in it"
        } else {
            "no rank is elsewhere"
        };
        return format!(
            "{} {verb} in {call}{on}, and {nobody}: the collective is under way (a hang inside it is MPI's or the network's).",
            describe(ranks)
        );
    }
    let places: Vec<String> = others
        .iter()
        .map(|(set, place)| {
            let verb = if set.len() == 1 { "is" } else { "are" };
            format!("{} {verb} {place}", describe(set))
        })
        .collect();
    let mut waited = RankSet::new();
    for (set, _) in others {
        waited.union_with(set);
    }
    let condition = if comm.is_some() {
        ""
    } else {
        "if they share its communicator, "
    };
    format!(
        "{} {verb} in {call}{on}; {}: {condition}{} {} for {}.",
        describe(ranks),
        places.join(", "),
        describe(ranks),
        if ranks.len() == 1 { "waits" } else { "wait" },
        describe(&waited)
    )
}

/// Ranks in different collectives at once, each call with where the program makes it.
pub(super) fn collective_mismatch_text(
    calls: &[(String, RankSet)],
    comm: Option<&CommKey>,
    at: &[Option<String>],
    counted: &[Option<u64>],
) -> String {
    let counts: Option<Vec<u64>> = counted.iter().copied().collect();
    if let (Some(c), Some(counts)) = (comm, counts.filter(|n| n.len() == calls.len())) {
        let parts: Vec<String> = calls
            .iter()
            .zip(&counts)
            .map(|((call, set), n)| {
                format!("{} in {call}, {}", describe(set), ordinal_collective(*n))
            })
            .collect();
        let label = comm_label(c);
        return if counts.windows(2).all(|w| w[0] == w[1]) {
            format!(
                "Collective mismatch, counted by the hang recorder: {}, on {label}: the program calls different collectives at the same point of the communicator's order, which MPI forbids; none of them can complete the others.",
                parts.join("; ")
            )
        } else {
            format!(
                "Not a mismatch: the hang recorder counted {}, on {label}: the ranks behind are finishing a collective the others have left.",
                parts.join("; ")
            )
        };
    }
    let parts: Vec<String> = calls
        .iter()
        .enumerate()
        .map(
            |(i, (call, set))| match at.get(i).and_then(Option::as_ref) {
                Some(line) => format!("{} in {call} ({line})", describe(set)),
                None => format!("{} in {call}", describe(set)),
            },
        )
        .collect();
    match comm {
        Some(c) => format!(
            "Collective mismatch: {}, all on {}: these calls cannot complete each other (unless a rank is just leaving one of them).",
            parts.join(", "),
            comm_label(c)
        ),
        None => format!(
            "Possible collective mismatch: {}: if they share a communicator, none of these collectives can complete.",
            parts.join(", ")
        ),
    }
}

/// "its 5th collective there" / "their 5th": which collective on the communicator a call is.
fn ordinal_collective(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("the {n}{suffix} collective each called on it")
}

/// Ranks blocked in point-to-point calls whose queues cannot be read.
pub(super) fn blocked_without_queues_text(
    ranks: &RankSet,
    calls: &[(String, RankSet)],
    running: &RankSet,
    finalized: &RankSet,
) -> String {
    let (verb, their, they) = if ranks.len() == 1 {
        ("is", "its", "it waits")
    } else {
        ("are", "their", "they wait")
    };
    let place = match calls {
        [(call, _)] => call.clone(),
        _ => {
            let parts: Vec<String> = calls
                .iter()
                .map(|(call, set)| format!("{} in {call}", describe(set)))
                .collect();
            format!("point-to-point calls ({})", parts.join(", "))
        }
    };
    let mut text = format!(
        "{} {verb} blocked in {place}, and {their} message queues cannot be read: whom {they} for is unknown",
        describe(ranks),
    );
    if !finalized.is_empty() {
        let _ = write!(
            text,
            "; {} {} in MPI_Finalize: a wait for {} never ends",
            describe(finalized),
            if finalized.len() == 1 { "is" } else { "are" },
            if finalized.len() == 1 { "it" } else { "them" }
        );
    }
    if running.is_empty() {
        text.push_str(
            "; no rank is running: a deadlock unless messages are still on their way (a hold of the live job tells)",
        );
    } else {
        let _ = write!(
            text,
            "; {} {} running and may still serve them",
            describe(running),
            if running.len() == 1 { "is" } else { "are" }
        );
    }
    text.push('.');
    text
}

/// "rank 3 is", "ranks 1,2 are".
fn ranks_are(ranks: &RankSet) -> String {
    format!(
        "{} {}",
        describe(ranks),
        if ranks.len() == 1 { "is" } else { "are" }
    )
}

/// "it waits", "they wait".
fn they_wait(ranks: &RankSet) -> &'static str {
    if ranks.len() == 1 {
        "it waits"
    } else {
        "they wait"
    }
}

/// One reason the verdict is not "no deadlock".
pub fn doubt_text(d: &Doubt) -> String {
    match d {
        Doubt::Missing { ranks } => format!("{} of the job not in the dump", describe(ranks)),
        Doubt::Failed { ranks } => format!("{} not dumped (see above)", describe(ranks)),
        Doubt::NoWorldRank { processes } => format!(
            "{processes} {} of unknown COMM_WORLD rank",
            if *processes == 1 {
                "process"
            } else {
                "processes"
            }
        ),
        Doubt::Unreadable { ranks } => {
            format!("queues of {} could not all be read", describe(ranks))
        }
        Doubt::UnknownPeers { ranks } => format!(
            "waits of {} name peers whose COMM_WORLD rank is unknown",
            describe(ranks)
        ),
        Doubt::Collectives { ranks } => format!(
            "{} are in different collectives at once: a mismatch if they share a communicator, unless a rank is just leaving its collective",
            describe(ranks)
        ),
        Doubt::UnknownCommunicators { ranks } => format!(
            "{} {} in collectives on communicators the stacks do not name (no debug information for the call's arguments)",
            describe(ranks),
            if ranks.len() == 1 { "is" } else { "are" }
        ),
        Doubt::Recent { ranks } => format!(
            "{} began to wait for each other in the last samples only: watch longer to tell a deadlock from traffic",
            describe(ranks)
        ),
        Doubt::Unproven { ranks } => format!(
            "{} may be deadlocked, but nothing proves {} held for good (a pending operation may be non-blocking, a message may still be on its way: a hold of the live job tells)",
            describe(ranks),
            if ranks.len() == 1 { "it" } else { "them" }
        ),
        Doubt::Buffering { ranks } => format!(
            "{} {} deadlocked unless the MPI buffers {} standard sends: each waits in a send no receive of its destination can take (the recorder's counts), which returns only if the MPI buffers the message; the program relies on buffering the standard does not promise (use MPI_Sendrecv, or nonblocking calls), and a hold of the live job tells whether this MPI buffers",
            describe(ranks),
            if ranks.len() == 1 { "is" } else { "are" },
            if ranks.len() == 1 { "its" } else { "their" }
        ),
        Doubt::Polling { ranks, call } => format!(
            "{} {} polling ({call}) for what only ranks inside MPI could give: a loop that only polls waits for ever, and a rank's returns from it prove no progress, so no snapshot or hold tells whether the loop ends (its source does)",
            describe(ranks),
            if ranks.len() == 1 { "is" } else { "are" }
        ),
        Doubt::NoStacks { ranks } => format!(
            "{} {} no stack: {} may be blocked in a call {} queues do not show (a collective, a blocking receive); stacks are taken unless --no-stacks",
            describe(ranks),
            if ranks.len() == 1 { "has" } else { "have" },
            if ranks.len() == 1 {
                "it"
            } else {
                "any of them"
            },
            if ranks.len() == 1 { "its" } else { "their" }
        ),
        Doubt::UnknownPlaces { ranks, example } => format!(
            "{} where mqd cannot tell what {} for ({example})",
            ranks_are(ranks),
            they_wait(ranks)
        ),
        Doubt::SelfBlocked { ranks } => format!(
            "every thread of {} waits for another thread of its process (outside MPI)",
            describe(ranks)
        ),
        Doubt::Snapshot { why } => {
            format!("{why}: a deadlock cannot be proven from processes seen at different moments")
        }
        Doubt::Busy {
            ranks,
            busy,
            window_ms,
        } => super::hold::busy_text(ranks, busy, *window_ms),
        Doubt::Unheld { ranks, why } => super::hold::unheld_text(ranks, why),
        Doubt::NotFollowed { ranks, why } => format!(
            "{} ({why}) {} in a state the analysis does not follow: what {} for is not known",
            describe(ranks),
            if ranks.len() == 1 { "is" } else { "are" },
            they_wait(ranks)
        ),
    }
}

/// The last line of a diagnosis: the verdict and why (for a deadlock, what the proof
/// rests on).
pub fn verdict_text(d: &Diagnosis) -> String {
    let basis = d.findings.iter().find_map(|f| match &f.subject {
        mqd_model::Subject::Held {
            window_ms, queues, ..
        } => Some(super::hold::basis(*window_ms, *queues)),
        _ => None,
    });
    verdict_with(d.verdict, &d.deadlocked, &d.doubts, basis.as_deref())
}

/// The verdict line of a diagnosis or a watch.
pub fn verdict_line(verdict: Verdict, deadlocked: &RankSet, doubts: &[Doubt]) -> String {
    verdict_with(verdict, deadlocked, doubts, None)
}

/// [`verdict_line`], with what a proven deadlock rests on when a hold proved it.
fn verdict_with(
    verdict: Verdict,
    deadlocked: &RankSet,
    doubts: &[Doubt],
    basis: Option<&str>,
) -> String {
    let reasons: Vec<String> = doubts.iter().map(doubt_text).collect();
    match verdict {
        Verdict::Deadlock => {
            let mut text = match basis {
                Some(basis) => format!(
                    "Verdict: deadlock ({} proven blocked: {basis}).",
                    describe(deadlocked)
                ),
                None => format!(
                    "Verdict: deadlock ({} proven blocked).",
                    describe(deadlocked)
                ),
            };
            if !reasons.is_empty() {
                let _ = write!(text, " Also: {}.", reasons.join("; "));
            }
            text
        }
        Verdict::NoDeadlock => {
            "Verdict: no deadlock (every rank seen, every wait followed).".into()
        }
        Verdict::Undetermined if reasons.is_empty() => {
            "Verdict: undetermined: nothing was seen.".into()
        }
        Verdict::Undetermined => format!("Verdict: undetermined: {}.", reasons.join("; ")),
    }
}
