//! The words `mqd` uses for the analysis: findings and their evidence, in sentences built
//! of the [`phrases`](super::phrases) for rank sets, waits and peers.

use super::phrases::{comm_label, describe, tag_words, their, wait_what};
use super::verdict::{cycle_text, knot_text};
use mqd_model::diagnosis::{MismatchMessage, MismatchReceive, PeerName};
use mqd_model::{
    Certainty, CommKey, Evidence, Finding, FindingKind, JobDump, Operation, OperationStatus, Peer,
    QueueKind, RankSet, Subject,
};

/// The library's notes on an operation: " [a; b]", or nothing.
fn notes(op: &Operation) -> String {
    if op.extra_text.is_empty() {
        String::new()
    } else {
        format!(" [{}]", op.extra_text.join("; "))
    }
}

/// "rank 3", or the local rank when the COMM_WORLD rank is unknown.
fn world_or_local(world: Option<i32>, local: i64) -> String {
    match world {
        Some(r) => format!("rank {r}"),
        None => format!("local rank {local} (COMM_WORLD rank unknown)"),
    }
}

/// One line of evidence: what the operation shows its rank doing.
pub fn evidence_line(job: &JobDump, e: &Evidence) -> String {
    let Some((rank, comm, op)) = e.op.resolve(job) else {
        return format!("(operation {:?} is not in the dump)", e.op);
    };
    let (rank, label) = (rank.rank, comm_label(&CommKey::of(comm)));
    let resolved = match &e.peer {
        Peer::World(r) => Some(*r),
        _ => None,
    };
    match e.op.queue {
        QueueKind::PendingSends => {
            let how = match op.status {
                OperationStatus::Matched => "has a matched send (data moving)",
                _ => "has a pending send",
            };
            let status = match op.status {
                OperationStatus::Other(n) => format!(", status {n}"),
                _ => String::new(),
            };
            format!(
                "rank {rank} {how} to {} on {label}, tag {}, count {}{status}{}",
                world_or_local(resolved, op.desired_local_rank),
                op.desired_tag,
                op.desired_length,
                notes(op)
            )
        }
        QueueKind::UnexpectedMessages => {
            let length = if op.desired_length != 0 {
                format!(", length {}", op.desired_length)
            } else {
                String::new()
            };
            // Eager or rendezvous is in the library's notes, not in the status.
            let how = match op.status {
                OperationStatus::Matched => ", matched",
                _ => "",
            };
            format!(
                "rank {rank} holds an unexpected message from {} on {label}, tag {}{length}{how}{}",
                world_or_local(resolved, op.desired_local_rank),
                op.desired_tag,
                notes(op)
            )
        }
        QueueKind::PendingReceives => {
            let from = match &e.peer {
                Peer::AnyOf(set) => format!("any source ({})", describe(set)),
                Peer::AnyUnresolved => "any source (members unknown)".into(),
                _ => world_or_local(resolved, op.desired_local_rank),
            };
            let how = match op.status {
                OperationStatus::Matched => "has a matched receive (data moving)",
                _ => "has a pending receive",
            };
            format!(
                "rank {rank} {how} from {from} on {label}, {}, count {}{}",
                tag_words((!op.tag_wild).then_some(op.desired_tag)),
                op.desired_length,
                notes(op)
            )
        }
    }
}

/// The evidence lines of a finding, each line once.
pub fn evidence_lines(job: &JobDump, evidence: &[Evidence]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::with_capacity(evidence.len());
    let mut seen = std::collections::HashSet::new();
    for e in evidence {
        let line = evidence_line(job, e);
        if seen.insert(line.clone()) {
            lines.push(line);
        }
    }
    lines
}

/// A finding in one paragraph.
pub fn finding_text(f: &Finding) -> String {
    let rank = f.ranks.first().map_or(-1, |r| r as i32);
    let several = f.ranks.len() > 1;
    // A pattern shared by several ranks: "Tag mismatch: ranks 0-3 each wait for ...".
    let merged = |prefix: &str, single: String, plural: String| {
        if several {
            format!("{prefix}{} {plural}", describe(&f.ranks))
        } else {
            format!("{prefix}{single}")
        }
    };
    match &f.subject {
        Subject::DumpFailed { pid, error } => {
            let who = if rank >= 0 {
                format!("rank {rank}")
            } else {
                format!("process {}", pid_text(*pid))
            };
            // An MPI that keeps no queues: the rank was read (its stack), its queues not.
            let what = if error.starts_with("its MPI ") {
                "has no message queues"
            } else {
                "could not be dumped"
            };
            let several = if what == "has no message queues" {
                "have no message queues"
            } else {
                what
            };
            merged(
                "",
                format!("{who} {what}: {error}"),
                format!("{several}: {error}"),
            )
        }
        Subject::NoWorldRank { pid } => merged(
            "",
            format!(
                "process {} has no known COMM_WORLD rank: it is left out of the analysis",
                pid_text(*pid)
            ),
            "have no known COMM_WORLD rank".into(),
        ),
        Subject::Matched => merged(
            "In transit: ",
            format!("rank {rank} has an operation in status \"matched\": its data is moving"),
            "have operations in status \"matched\": their data is moving".into(),
        ),
        Subject::Delivered {
            from,
            to,
            comm,
            tag,
        } => merged(
            "In transit: ",
            format!(
                "the message from {} to rank {to} on {}, tag {tag}, matches a receive posted there: it is being delivered (a persistent one means stalled progress)",
                from.map_or("an unknown rank".into(), |s| format!("rank {s}")),
                comm_label(comm)
            ),
            format!(
                "each have a message on {} matched by a posted receive: it is being delivered (a persistent one means stalled progress)",
                comm_label(comm)
            ),
        ),
        Subject::UnknownSender { sender_local, comm } => merged(
            "",
            format!(
                "rank {rank} holds an unexpected message from local rank {sender_local} of {}, whose COMM_WORLD rank is unknown: its sender is left out of the wait-for graph",
                comm_label(comm)
            ),
            format!(
                "hold unexpected messages on {} whose senders' COMM_WORLD ranks are unknown: they are left out of the wait-for graph",
                comm_label(comm)
            ),
        ),
        Subject::Mismatch { receive, message } => {
            let (prefix, single, plural) = mismatch_words(f.kind, rank, receive, message);
            merged(prefix, single, plural)
        }
        Subject::IdleTarget {
            waiters,
            any_source_only,
        } => {
            let verb = if waiters.len() == 1 { "waits" } else { "wait" };
            let any = if *any_source_only {
                " (in receives from any source)"
            } else {
                ""
            };
            let who = describe(waiters);
            merged(
                "",
                format!(
                    "rank {rank} has no pending point-to-point communication, yet {who} {verb} for it{any}: it is busy computing, or blocked outside point-to-point (a collective, I/O, a lock)."
                ),
                format!(
                    "have no pending point-to-point communication, yet {who} {verb} for them{any}: they are busy computing, or blocked outside point-to-point (a collective, I/O, a lock)."
                ),
            )
        }
        Subject::UndumpedTarget { waiters, error } => {
            let verb = if waiters.len() == 1 { "waits" } else { "wait" };
            let who = describe(waiters);
            match error {
                Some(e) => merged(
                    "",
                    format!(
                        "rank {rank} could not be dumped ({e}), yet {who} {verb} for it: its state is unknown."
                    ),
                    format!(
                        "could not be dumped, yet {who} {verb} for them: their state is unknown."
                    ),
                ),
                None => merged(
                    "",
                    format!(
                        "rank {rank} is not in the dump, yet {who} {verb} for it: its state is unknown."
                    ),
                    format!(
                        "are not in the dump, yet {who} {verb} for them: their state is unknown."
                    ),
                ),
            }
        }
        Subject::UnfollowableAnySource { comm, tag } => merged(
            "",
            format!(
                "rank {rank} waits for a message from any member of {}, {}, whose COMM_WORLD ranks are unknown (the library reports no group): the analysis cannot follow this wait.",
                comm_label(comm),
                tag_words(*tag)
            ),
            format!(
                "each wait for a message from any member of {}, {}, whose COMM_WORLD ranks are unknown (the library reports no group): the analysis cannot follow these waits.",
                comm_label(comm),
                tag_words(*tag)
            ),
        ),
        Subject::UnfollowableRank { local, wait } => merged(
            "",
            format!(
                "rank {rank} waits for local rank {local} of {} ({}), whose COMM_WORLD rank is unknown: the analysis cannot follow this wait.",
                comm_label(&wait.comm),
                wait_what(wait)
            ),
            format!(
                "each wait for a peer on {} ({}) whose COMM_WORLD rank is unknown: the analysis cannot follow these waits.",
                comm_label(&wait.comm),
                wait_what(wait)
            ),
        ),
        Subject::BehindDeadlock { targets, weak_only } => {
            if f.certainty == Certainty::Possible {
                merged(
                    "",
                    format!(
                        "rank {rank} waits for {}, possibly deadlocked: it is stuck too if they are.",
                        describe(targets)
                    ),
                    "wait for possibly deadlocked ranks: they are stuck too if those are.".into(),
                )
            } else if *weak_only {
                merged(
                    "",
                    format!(
                        "rank {rank} may be blocked behind the deadlock: its messages wait unexpected at {}, deadlocked (if they were sent eagerly, rank {rank} has moved on).",
                        describe(targets)
                    ),
                    "may be blocked behind the deadlock: their messages wait unexpected at deadlocked ranks (if they were sent eagerly, they have moved on).".into(),
                )
            } else {
                merged(
                    "",
                    format!(
                        "rank {rank} is blocked behind the deadlock: it waits for {}, deadlocked.",
                        describe(targets)
                    ),
                    "are blocked behind the deadlock: each waits for deadlocked ranks.".into(),
                )
            }
        }
        Subject::Cycle(facts) => cycle_text(
            f.cycle.as_deref().unwrap_or(&[]),
            &f.ranks,
            facts,
            f.certainty,
        ),
        Subject::Knot { members, in_calls } => knot_text(&f.ranks, members, f.certainty, *in_calls),
        Subject::NoDeadlock {
            waits,
            failed,
            seen_all,
            running,
        } if !running.is_empty() => {
            let head = if *seen_all {
                "No deadlock"
            } else {
                "No deadlock among the ranks seen"
            };
            format!(
                "{head}{}: {waits} operations are pending, but the stacks show {} running (not blocked in MPI): they can still complete them.",
                caveat(failed),
                describe(running)
            )
        }
        Subject::NoDeadlock {
            waits,
            failed,
            seen_all,
            ..
        } => {
            let operations = if *waits == 1 {
                "operation"
            } else {
                "operations"
            };
            let head = if *seen_all {
                "No point-to-point deadlock"
            } else {
                "No deadlock among the ranks seen"
            };
            format!(
                "{head}{}: {waits} {operations} wait, but every wait leads to a rank that is not waiting in point-to-point communication (see above).",
                caveat(failed)
            )
        }
        Subject::Clean {
            in_transit,
            failed,
            seen_all,
            running,
        } => {
            let tail = match (*in_transit, *seen_all) {
                (true, true) => ": only messages in transit, no point-to-point deadlock",
                (false, true) => ": no point-to-point deadlock",
                (true, false) => " among the ranks seen: only messages in transit",
                (false, false) => " among the ranks seen",
            };
            if f.ranks.is_empty() && !running.is_empty() {
                // No queues at all: only the stacks speak.
                return format!(
                    "No rank is blocked: the stacks show {} running (not blocked in MPI){}.",
                    describe(running),
                    caveat(failed)
                );
            }
            let running = if running.is_empty() {
                String::new()
            } else {
                format!(
                    " The stacks show {} running (not blocked in MPI).",
                    describe(running)
                )
            };
            format!(
                "No rank waits for another{}{tail}.{running}",
                caveat(failed)
            )
        }
        Subject::BlockedWithoutQueues {
            calls,
            running,
            finalized,
        } => super::verdict::blocked_without_queues_text(&f.ranks, calls, running, finalized),
        Subject::OpenMpWait { states, one_lock } => {
            let parts: Vec<String> = states
                .iter()
                .map(|(state, nums)| {
                    let what = super::openmp::state_words(state);
                    let what = if *one_lock && state == "wait_lock" {
                        what.replace("for a lock", "for one lock")
                    } else {
                        what
                    };
                    format!("{} {what}", super::openmp::thread_numbers(nums))
                })
                .collect();
            format!(
                "Possible hang inside {} (OpenMP): every thread waits for another thread of its process, as its OpenMP runtime says: {}. Unless a thread is about to be woken, none of them moves again: a lock whose holder waits for its waiters, or a barrier some threads never reach (one snapshot cannot prove it; mqd watch shows whether it lasts).",
                describe(&f.ranks),
                parts.join(", ")
            )
        }
        Subject::CallMismatch {
            receive,
            other,
            source,
        } => super::calls::call_mismatch_text(f.kind, receive, other, source),
        Subject::RootMismatch { call, comm, roots } => {
            super::calls::root_mismatch_text(call, comm.as_ref(), roots)
        }
        Subject::Held {
            window_ms,
            touched_kb,
            queues,
        } => super::hold::held_text(&f.ranks, *window_ms, *touched_kb, *queues),
        Subject::Closed {
            calls,
            at,
            unknown,
            finalized,
        } => super::hold::closed_text(&f.ranks, calls, at, unknown, finalized),
        Subject::Dissolved { moved, window_ms } => {
            super::hold::dissolved_text(&f.ranks, moved, *window_ms)
        }
        Subject::Collective { call, others, comm } => {
            super::verdict::collective_text(&f.ranks, call, others, comm.as_ref())
        }
        Subject::CollectiveMismatch {
            calls,
            comm,
            at,
            counted,
        } => super::verdict::collective_mismatch_text(calls, comm.as_ref(), at, counted),
        Subject::Finalized { waiters, blocked } => {
            let (is, them) = if f.ranks.len() == 1 {
                ("is", "it")
            } else {
                ("are", "them")
            };
            let verb = if waiters.len() == 1 { "waits" } else { "wait" };
            if *blocked {
                format!(
                    "Hang: {} {is} past MPI_Finalize (MPI says so), yet {} {verb} for messages from {them}, blocked in MPI calls: those waits never end.",
                    describe(&f.ranks),
                    describe(waiters)
                )
            } else {
                format!(
                    "{} {is} in or past MPI_Finalize, yet {} {verb} for messages from {them}: unless those messages are already on their way, the waits never end.",
                    describe(&f.ranks),
                    describe(waiters)
                )
            }
        }
        Subject::UnreadableQueues { queues, error } => merged(
            "",
            format!(
                "rank {rank}: {queues} of its queues could not be read ({error}): its waits are not all known (did it exit or change while being read?)"
            ),
            format!(
                "some queues could not be read ({error}): their waits are not all known (did they exit or change while being read?)"
            ),
        ),
        Subject::NoSample => "No sample taken.".into(),
        Subject::NothingPersisted { waits, samples, .. } => {
            // What lasted, not a verdict: the watch's answer follows it.
            if *waits == 0 {
                format!("No wait lasted through all {samples} samples.")
            } else {
                format!(
                    "{waits} {} lasted through all {samples} samples, but no cycle or knot of ranks waiting for each other.",
                    if *waits == 1 { "wait" } else { "waits" }
                )
            }
        }
    }
}

fn pid_text(pid: Option<i32>) -> String {
    pid.map_or("?".into(), |p| p.to_string())
}

fn caveat(failed: &RankSet) -> String {
    if failed.is_empty() {
        String::new()
    } else {
        format!(" ({} could not be dumped)", describe(failed))
    }
}

/// A peer by rank: "any source", "rank 3", "local rank 2".
fn peer_by_rank(peer: &PeerName) -> String {
    match peer {
        PeerName::AnySource => "any source".into(),
        PeerName::World(r) => format!("rank {r}"),
        PeerName::Local(l) => format!("local rank {l}"),
        PeerName::Relative(r) => their(*r).into(),
    }
}

/// Prefix, text for one rank, text after "ranks 0-3 " for several.
fn mismatch_words(
    kind: FindingKind,
    t: i32,
    receive: &MismatchReceive,
    message: &MismatchMessage,
) -> (&'static str, String, String) {
    let comm = comm_label(&receive.comm);
    let tag = tag_words(receive.tag);
    let source = peer_by_rank(&receive.source);
    let source_plural = peer_by_rank(&receive.source_relative);
    let sender = peer_by_rank(&message.sender);
    let sender_rel = peer_by_rank(&message.sender_relative);
    let mtag = message.tag;
    let where_single = match (message.unexpected, message.dest, message.sender_rank) {
        (true, Some(d), _) => format!("waits unexpected at rank {d}"),
        (true, None, _) => "waits unexpected".into(),
        (false, _, Some(s)) => format!("is a pending send at rank {s}, not yet arrived"),
        (false, _, None) => "is a pending send".into(),
    };
    let where_plural = if message.unexpected {
        "waits unexpected at them"
    } else {
        "is still a pending send"
    };
    match kind {
        FindingKind::TagMismatch => (
            "Tag mismatch: ",
            format!(
                "rank {t} waits for {tag} from {source} on {comm}; {sender}'s message with tag {mtag} {where_single}"
            ),
            format!(
                "each wait for {tag} from {source_plural} on {comm}; the message from {sender_rel} has tag {mtag} and {where_plural}"
            ),
        ),
        FindingKind::SourceMismatch => (
            "Source mismatch: ",
            format!(
                "rank {t} waits for {tag} from {source} on {comm}; {sender}'s message with tag {mtag} {where_single}"
            ),
            format!(
                "each wait for {tag} from {source_plural} on {comm}; a message with tag {mtag} from {sender_rel} {where_plural}"
            ),
        ),
        _ => {
            let mcomm = comm_label(&message.comm);
            (
                "Communicator mismatch: ",
                format!(
                    "rank {t} waits on {comm} for {tag} from {source}; {sender}'s message with tag {mtag} on {mcomm} {where_single}"
                ),
                format!(
                    "each wait on {comm} for {tag} from {source_plural}; the message from {sender_rel} with tag {mtag} was sent on {mcomm} and {where_plural}"
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::diagnosis::{Certainty, CommKey, FindingKind};

    fn mismatch(counted: Vec<Option<u64>>) -> String {
        let comm = CommKey::named("rows", 4);
        let calls = vec![
            ("MPI_Barrier".to_owned(), "1-3".parse().unwrap()),
            ("MPI_Bcast".to_owned(), "0".parse().unwrap()),
        ];
        finding_text(&Finding::unproven_by_operations(
            FindingKind::CollectiveMismatch,
            Certainty::Possible,
            "0-3".parse().unwrap(),
            Subject::CollectiveMismatch {
                calls,
                comm: Some(comm),
                at: Vec::new(),
                counted,
            },
        ))
    }

    /// The recorder's counts name the point each rank is at: the same point is a
    /// mismatch for certain, different points are ranks behind, never a mismatch; without
    /// counts, the words of the stacks alone.
    #[test]
    fn a_collective_mismatch_is_said_by_its_counts() {
        let same = mismatch(vec![Some(5), Some(5)]);
        assert!(same.starts_with("Collective mismatch, counted by the hang recorder: ranks 1-3 in MPI_Barrier, the 5th collective each called on it; rank 0 in MPI_Bcast, the 5th"), "{same}");
        let behind = mismatch(vec![Some(5), Some(4)]);
        assert!(behind.starts_with("Not a mismatch: the hang recorder counted ranks 1-3 in MPI_Barrier, the 5th collective each called on it; rank 0 in MPI_Bcast, the 4th"), "{behind}");
        let unknown = mismatch(vec![Some(5), None]);
        assert!(
            unknown.starts_with("Collective mismatch: ranks 1-3 in MPI_Barrier"),
            "{unknown}"
        );
        assert_eq!(mismatch(Vec::new()), unknown);
    }
}
