//! Deadlocks proven by persistence, where one snapshot cannot prove them (an MPI
//! without message queues, where nothing shows the receives posted or the messages on
//! their way).
//!
//! The rule: a possible deadlock (a cycle or knot of the worst reading) is proven when,
//! in every one of several samples, the same ranks form it, and each of them has the
//! same stacks (the same frames and the same call arguments) with every thread either
//! blocked in a point-to-point call whose message is known and small, or a thread of the
//! MPI library. Why it holds: a blocked call runs MPI's progress engine, so a message
//! already on its way, or a receive already posted that matches a blocked send (an
//! `MPI_Irecv` before an `MPI_Ssend` ring), completes in microseconds to milliseconds for
//! messages this small; staying blocked over the samples means none exists. What would
//! make it lie, and is excluded: a large transfer still in progress (unknown or large
//! sizes are not proven), a rank that moved and came back between samples (its stack
//! would differ in a loop's frame only if its arguments or frames differ: identical
//! arguments in every sample are required, and the verdict states the samples), and a
//! thread that could still act (any other thread rules the rank out).

use crate::diagnose::diagnose;
use mqd_model::diagnosis::Doubt;
use mqd_model::{
    CallClass, Certainty, Diagnosis, Finding, FindingKind, JobDump, Location, RankSet, Subject,
    Verdict,
};

/// Samples a confirmation takes, the first included.
pub const CONFIRM_SAMPLES: usize = 3;
/// Milliseconds between them.
pub const CONFIRM_INTERVAL_MS: u64 = 1000;
/// Largest message a blocked call may carry for its persistence to prove anything.
pub const CONFIRM_MAX_BYTES: u64 = 64 * 1024;

/// Whether `job`'s possible deadlocks could be proven by persistence: some rank of one
/// has a blocked point-to-point call with a small known message.
pub fn worth_confirming(job: &JobDump, diagnosis: &Diagnosis) -> bool {
    diagnosis.verdict == Verdict::Undetermined
        && diagnosis.findings.iter().any(|f| {
            f.kind.is_deadlock()
                && f.certainty == Certainty::Possible
                && provable(job, &f.ranks).is_some()
        })
}

/// The largest message of the blocked calls of `ranks`, if every thread of each is
/// blocked in a point-to-point call with a small known message or is MPI's own.
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
                Location::InMpi { class, .. } => {
                    let call = t.call.as_ref()?;
                    let bytes = match class {
                        CallClass::BlockingSend
                        | CallClass::BlockingReceive
                        | CallClass::SendReceive => {
                            // A probe waits for an envelope, not a transfer.
                            call.bytes
                                .or_else(|| call.function.contains("robe").then_some(0))?
                        }
                        _ => return None,
                    };
                    if bytes > CONFIRM_MAX_BYTES || call.peer.is_none() {
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

/// What must not change in a rank between samples: each thread's frames and call.
fn fingerprint(job: &JobDump, rank: u32) -> Option<String> {
    let r = job
        .ranks
        .iter()
        .find(|r| i64::from(r.rank) == i64::from(rank))?;
    let mut threads: Vec<String> = r
        .threads
        .iter()
        .map(|t| {
            let frames: Vec<String> = t
                .frames
                .iter()
                .filter(|f| !f.mpi)
                .map(|f| format!("{:#x}", f.address))
                .collect();
            format!("{}|{}|{:?}", t.tid, frames.join(","), t.call)
        })
        .collect();
    threads.sort();
    Some(threads.join(";"))
}

/// The diagnosis of the last of `samples` (taken `interval_ms` apart), with each
/// possible deadlock that every sample shows alike proven by persistence.
pub fn confirm(samples: &[JobDump], interval_ms: u64) -> Option<Diagnosis> {
    let last = samples.last()?;
    let mut diagnosis = diagnose(last);
    if samples.len() < 2 {
        return Some(diagnosis);
    }
    let earlier: Vec<Diagnosis> = samples[..samples.len() - 1].iter().map(diagnose).collect();
    let mut proven = Vec::new();
    for f in &diagnosis.findings {
        if !f.kind.is_deadlock() || f.certainty != Certainty::Possible {
            continue;
        }
        let Some(max_bytes) = samples
            .iter()
            .map(|s| provable(s, &f.ranks))
            .try_fold(0u64, |m, b| b.map(|b| m.max(b)))
        else {
            continue;
        };
        let same_cycle = earlier.iter().all(|d| {
            d.findings
                .iter()
                .any(|g| g.kind.is_deadlock() && g.ranks == f.ranks)
        });
        let same_stacks = f.ranks.iter().all(|r| {
            let first = fingerprint(last, r);
            first.is_some() && samples.iter().all(|s| fingerprint(s, r) == first)
        });
        if same_cycle && same_stacks {
            proven.push((f.ranks.clone(), max_bytes));
        }
    }
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
                samples: samples.len(),
                interval_ms,
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
    Some(diagnosis)
}
