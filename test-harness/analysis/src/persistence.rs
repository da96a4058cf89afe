//! Deadlocks proven by persistence, where one snapshot cannot prove them (an MPI
//! without message queues, where nothing shows the receives posted or the messages on
//! their way).
//!
//! The rule: a possible deadlock (a cycle or knot of the worst reading) in a snapshot is
//! proven when each of its ranks stayed inside the very MPI calls the snapshot shows
//! from before the snapshot until the end of a window (their return addresses were
//! never executed: `mqd_job::stay`), every thread of each either blocked in a
//! point-to-point call, or a collective on a communicator whose members are known, whose
//! message is known and small (`MPI_Finalize`, which waits for the others, has none), or
//! a thread of the MPI library. Why it holds: a blocked call runs MPI's progress engine, so a message
//! already on its way, or a receive already posted that matches a blocked send (an
//! `MPI_Irecv` before an `MPI_Ssend` ring), completes within milliseconds for messages
//! this small; staying blocked through the window means none exists. What would make it
//! lie, and is excluded: a large transfer still in progress (unknown or large sizes are
//! not proven); a loop that left the call and came back (its return address ran); a
//! thread that could still act (any other thread rules its rank out); a rank whose
//! calls were not counted (another host without an agent to count them).

use crate::diagnose::diagnose;
use mqd_model::diagnosis::Doubt;
use mqd_model::{
    CallClass, Certainty, Diagnosis, Finding, FindingKind, JobDump, Location, RankSet, Subject,
    Verdict,
};

/// The window a confirmation watches, in milliseconds.
pub const CONFIRM_WINDOW_MS: u64 = 2000;
/// Largest message a blocked call may carry for its persistence to prove anything.
pub const CONFIRM_MAX_BYTES: u64 = 64 * 1024;

/// The ranks of `job`'s possible deadlocks that persistence could prove: every thread
/// of each blocked in a point-to-point call with a small known message, or MPI's own.
pub fn confirmable(job: &JobDump, diagnosis: &Diagnosis) -> RankSet {
    let mut ranks = RankSet::new();
    if diagnosis.verdict != Verdict::Undetermined {
        return ranks;
    }
    for f in &diagnosis.findings {
        if f.kind.is_deadlock()
            && f.certainty == Certainty::Possible
            && provable(job, &f.ranks).is_some()
        {
            ranks.union_with(&f.ranks);
        }
    }
    ranks
}

/// The largest message of the blocked calls of `ranks`, if every thread of each is
/// blocked in a call the rule covers (see the module) with a small known message, or in
/// `MPI_Finalize`, or is MPI's own.
fn provable(job: &JobDump, ranks: &RankSet) -> Option<u64> {
    let mut max = 0;
    for rank in ranks.iter() {
        let r = job
            .ranks
            .iter()
            .find(|r| i64::from(r.rank) == i64::from(rank))?;
        let program = r.executable.as_deref();
        if r.threads.is_empty() {
            return None;
        }
        let mut blocked = false;
        for t in &r.threads {
            match t.location_in(program) {
                Location::MpiThread => {}
                // MPICH's finalize waits for the other ranks; it has no data.
                Location::InMpi {
                    class: CallClass::Finalize,
                    ..
                } => blocked = true,
                Location::InMpi { class, .. } => {
                    let call = t.call.as_ref()?;
                    let bytes = match class {
                        CallClass::BlockingSend
                        | CallClass::BlockingReceive
                        | CallClass::SendReceive
                            if call.peer.is_some() =>
                        {
                            // A probe waits for an envelope, not a transfer.
                            call.bytes
                                .or_else(|| call.function.contains("robe").then_some(0))?
                        }
                        // A collective on a communicator whose members are known.
                        CallClass::Collective
                            if call.predefined.as_deref() == Some("MPI_COMM_WORLD")
                                || call.context_id.is_some() =>
                        {
                            call.bytes?
                        }
                        _ => return None,
                    };
                    if bytes > CONFIRM_MAX_BYTES {
                        return None;
                    }
                    max = max.max(bytes);
                    blocked = true;
                }
                _ => return None,
            }
        }
        if !blocked {
            return None;
        }
    }
    Some(max)
}

/// The diagnosis of `job`, with each possible deadlock whose ranks all `stayed` in
/// their calls through a window of `window_ms` proven by persistence.
pub fn confirm(job: &JobDump, stayed: &RankSet, window_ms: u64) -> Diagnosis {
    let mut diagnosis = diagnose(job);
    let proven: Vec<(RankSet, u64)> = diagnosis
        .findings
        .iter()
        .filter(|f| f.kind.is_deadlock() && f.certainty == Certainty::Possible)
        .filter(|f| f.ranks.difference(stayed).is_empty())
        .filter_map(|f| Some((f.ranks.clone(), provable(job, &f.ranks)?)))
        .collect();
    for (ranks, max_bytes) in proven {
        for f in diagnosis.findings.iter_mut() {
            if f.kind.is_deadlock() && f.ranks == ranks {
                f.certainty = Certainty::Definite;
            }
        }
        diagnosis.deadlocked.union_with(&ranks);
        diagnosis.findings.push(Finding::unproven_by_operations(
            FindingKind::Persisted,
            Certainty::Definite,
            ranks.clone(),
            Subject::Persisted {
                window_ms,
                max_bytes,
            },
        ));
        diagnosis.doubts.retain_mut(|d| match d {
            Doubt::Unproven { ranks: r } => {
                *r = r.difference(&ranks);
                !r.is_empty()
            }
            _ => true,
        });
    }
    if !diagnosis.deadlocked.is_empty() {
        diagnosis.verdict = Verdict::Deadlock;
    }
    diagnosis
}
