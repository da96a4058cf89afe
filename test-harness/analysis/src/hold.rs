//! Proof by holding: what one snapshot cannot prove, a window can.
//!
//! After a snapshot, the return address of every call a candidate rank is blocked in is
//! counted (a hardware breakpoint), and what each process does meanwhile is measured;
//! a second snapshot ends the window ([`Hold`]). Each watched rank is then judged:
//! - **moved**: a call returned (its return address ran). A rank that moved was not
//!   deadlocked when the window began (a deadlocked rank never moves again).
//! - **busy**: it did not return but worked or changed: it touched more memory than a
//!   progress engine does (data moving through the CPU: a large message, a reduction),
//!   moved bytes through the kernel, had a thread in a system call on a file or waiting
//!   for a device (collective I/O), its host's RDMA ports moved data, its queues
//!   changed, a thread is in another call or threads came or went, a thread outside MPI
//!   ran. No proof rests on it, nor on what waits for it, and it proves no move.
//! - **quiet**: it stayed and did nothing.
//!
//! **The proof.** The greatest set of quiet ranks each of which waits only for ranks of
//! the set (a wait whose peer or communicator is not known may wait for any rank of the
//! job: it holds only when the whole job is in the set), with ranks past or in
//! `MPI_Finalize` counted as never sending again, is deadlocked. The one assumption
//! left: no message of theirs is still on its way after the window. It is safe because
//! every thread of every rank of the set is inside MPI throughout, and a blocked MPI call
//! drives the progress engine: a message in transit is delivered within milliseconds,
//! and a large one keeps a rank busy (its data is touched), which the rule excludes.
//! What would make it lie, and is excluded: a loop that left the call and came back (its
//! return address ran), a thread that could still act (a rank with a thread outside MPI
//! that is not waiting for its own process is never holdable), a call that waits for
//! another job (`MPI_Comm_accept`, `MPI_Comm_connect`), a transfer or I/O in progress,
//! a rank that could not be counted.
//!
//! **Dissolved.** Ranks of a possible deadlock that moved were not deadlocked: the worst
//! reading without them says what may still be; when it deadlocks nobody and nothing
//! else is in doubt, the verdict is "no deadlock" for the moment of the snapshot.

use crate::Analysis;
use mqd_graph::{Graph, Unknown};
use mqd_model::diagnosis::{Doubt, HoldReport, Subject};
use mqd_model::hold::{Activity, Busy, Hold, Moved};
use mqd_model::{
    Certainty, Diagnosis, Finding, FindingKind, JobDump, Location, RankDump, RankSet, ThreadStack,
};
use mqd_scale::HoldBasis;
use mqd_scale::shared::{seen_all, summary_finding, verdict};
use std::collections::BTreeMap;

/// The window a hold watches, in milliseconds.
pub const HOLD_WINDOW_MS: u64 = 2000;

/// Windows a hold may last in all while a rank could hardly run (an overloaded host),
/// before it is judged with that rank unproven.
pub const HOLD_STRETCH: u32 = 4;

/// Memory (kB) a rank may touch during a hold and still be quiet. A rank blocked in MPI
/// touches its progress engine's pages: about 2 MB in 2 s, measured on MPICH (ch3, ch4)
/// and Open MPI; a transfer or a reduction touches its data.
pub const QUIET_TOUCHED_KB: u64 = 32 * 1024;

/// Bytes a rank may read and write through the kernel during a hold and still be quiet
/// (a blocked rank moves none).
pub const QUIET_IO_BYTES: u64 = 256 * 1024;

/// Milliseconds a rank's cgroup may be throttled during a hold for it to be quiet. A
/// throttled rank gets its CPU in slices of its quota: two such ranks exchanging a large
/// message in pieces (MPICH's pipelined copy through shared memory) each wait for the
/// other's next slice, and move a few MB a second, too little to read as busy.
pub const QUIET_THROTTLED_MS: u64 = 50;

/// Bytes its host's RDMA ports may move during a hold for its ranks to be quiet.
pub const QUIET_RDMA_BYTES: u64 = 1 << 20;

/// CPU time (clock ticks of 10 ms) a thread waiting for its own process may use in a
/// window of `ms` and still be idle (timers, signals): 2%, and one tick.
fn idle_ticks(ms: u64) -> u64 {
    1 + ms / 500
}

/// The ranks worth holding after the analysis `a` of a snapshot: those a hold could prove
/// (the greatest set of holdable ranks that wait only for each other) and those of
/// possible deadlocks (a hold may show them moving). Empty when the snapshot already
/// decides.
pub fn candidates(a: &Analysis) -> RankSet {
    let diagnosis = &a.diagnosis;
    if diagnosis.verdict != mqd_model::Verdict::Undetermined {
        return RankSet::new();
    }
    let mut ranks = closure(&a.basis, a.basis.holdable.clone());
    ranks.union_with(
        &diagnosis
            .possibly_deadlocked
            .difference(&diagnosis.deadlocked),
    );
    ranks
}

/// The greatest subset of `quiet` (with the finalized ranks, which never send again)
/// whose every rank waits only for ranks of it; without the finalized ranks.
fn closure(b: &HoldBasis, quiet: RankSet) -> RankSet {
    let mut start = quiet.intersection(&b.holdable);
    start.union_with(&b.finalized);
    // Where the job's size is not known, a rank may be missing: no set is the whole job.
    let all = b.size.map(RankSet::full).unwrap_or_default();
    let graph = Graph::of_plan(&b.may, &b.facts);
    graph
        .stuck_within(start, &Unknown::FreedByAnyOf(all))
        .difference(&b.finalized)
}

/// The return address of the MPI call a thread is in: the address of the program's frame
/// just outside the MPI library's.
fn return_address(t: &ThreadStack) -> Option<u64> {
    let entry = t.frames.iter().rposition(|f| f.mpi)?;
    t.frames.get(entry + 1).map(|f| f.address)
}

/// How `before` (the snapshot) and `after` (the end of the window) show a rank moved.
fn moved_between(before: &RankDump, after: &RankDump, ms: u64, hold: &Hold) -> Option<Moved> {
    if before.pid != after.pid || before.threads.len() != after.threads.len() {
        return Some(Moved::Threads);
    }
    let ticks = hold
        .ranks
        .get(&before.rank)
        .and_then(|h| h.activity.as_ref())
        .map(|a| &a.cpu_ticks);
    let program = before.executable.as_deref();
    for t in &before.threads {
        let Some(u) = after.threads.iter().find(|u| u.tid == t.tid) else {
            return Some(Moved::Threads);
        };
        match t.location_in(program) {
            Location::MpiThread => {}
            Location::InMpi { .. } => {
                let same = return_address(t) == return_address(u)
                    && t.location_in(program) == u.location_in(program)
                    && t.call == u.call;
                if !same {
                    return Some(Moved::OtherCall);
                }
            }
            _ => {
                let place =
                    |s: &ThreadStack| s.frames.iter().map(|f| f.address).collect::<Vec<_>>();
                let spent = ticks.and_then(|c| c.get(&t.tid)).copied();
                if place(t) != place(u) || spent.is_none_or(|s| s > idle_ticks(ms)) {
                    return Some(Moved::Outside);
                }
            }
        }
    }
    None
}

/// What a process's measurements say it did beyond what a rank blocked in MPI does
/// (`None`: nothing, or nothing measured that says so).
pub fn busy_of(a: &Activity) -> Option<Busy> {
    if a.stopped {
        return Some(Busy::Stopped);
    }
    if let Some(s) = &a.starved {
        return Some(Busy::Starved(s.clone()));
    }
    if let Some(f) = &a.file_io {
        return Some(Busy::File(f.clone()));
    }
    if let Some(kb) = a.touched_kb.filter(|&kb| kb > QUIET_TOUCHED_KB) {
        return Some(Busy::Memory { kb });
    }
    if let Some(bytes) = a.io_bytes.filter(|&b| b > QUIET_IO_BYTES) {
        return Some(Busy::Io { bytes });
    }
    if let Some(bytes) = a.rdma_bytes.filter(|&b| b > QUIET_RDMA_BYTES) {
        return Some(Busy::Rdma { bytes });
    }
    if let Some(ms) = a.throttled_ms.filter(|&ms| ms > QUIET_THROTTLED_MS) {
        return Some(Busy::Throttled { ms });
    }
    None
}

/// What `rank` did that keeps it from being quiet, judged from its measurements.
fn busy(before: &RankDump, after: &RankDump, hold: &Hold) -> Option<Busy> {
    let h = hold.ranks.get(&before.rank)?;
    let Some(a) = &h.activity else {
        return Some(Busy::Unmeasured);
    };
    if let Some(b) = busy_of(a) {
        return Some(b);
    }
    if a.touched_kb.is_none() || a.io_bytes.is_none() {
        return Some(Busy::Unmeasured);
    }
    if before.outcome != after.outcome {
        return Some(Busy::Queues);
    }
    None
}

/// `rank` into the entry of `list` whose key is `same` as `key`, or a new one.
fn add_to<K>(list: &mut Vec<(RankSet, K)>, rank: u32, key: K, same: impl Fn(&K, &K) -> bool) {
    match list.iter_mut().find(|(_, k)| same(k, &key)) {
        Some((set, _)) => {
            set.insert(rank);
        }
        None => list.push((RankSet::from_iter([rank]), key)),
    }
}

/// Each watched rank's judgement.
struct Judged {
    quiet: RankSet,
    moved: Vec<(RankSet, Moved)>,
    busy: Vec<(RankSet, Busy)>,
}

/// `polling`: the ranks with a thread polling at the snapshot, and its call.
fn judge_ranks(
    first: &JobDump,
    last: &JobDump,
    hold: &Hold,
    polling: &BTreeMap<i32, String>,
) -> Judged {
    let mut judged = Judged {
        quiet: RankSet::new(),
        moved: Vec::new(),
        busy: Vec::new(),
    };
    for (&rank, h) in &hold.ranks {
        let Ok(r) = u32::try_from(rank) else { continue };
        if hold.unwatched.contains(r) {
            continue;
        }
        let find = |job: &'_ JobDump| -> Option<RankDump> {
            job.ranks
                .iter()
                .find(|d| d.rank == rank && !d.duplicate)
                .cloned()
        };
        let (Some(before), Some(after)) = (find(first), find(last)) else {
            continue;
        };
        // A poll returns at once, in a loop or not: it proves nothing either way.
        if let Some(call) = polling.get(&rank).cloned() {
            add_to(&mut judged.busy, r, Busy::Polling { call }, |a, b| {
                std::mem::discriminant(a) == std::mem::discriminant(b)
            });
            continue;
        }
        if h.returned == Some(true) {
            add_to(&mut judged.moved, r, Moved::Returned, |a, b| a == b);
            continue;
        }
        // Only a return proves a rank was not deadlocked; a call that reads otherwise,
        // threads that came or went, a thread outside MPI that ran (an OpenMP worker
        // spinning at its barrier) only keep it out of a proof.
        let why = if let Some(how) = moved_between(&before, &after, hold.window_ms, hold) {
            Some(Busy::Changed(how))
        } else if h.returned.is_none() {
            Some(Busy::Unmeasured)
        } else {
            busy(&before, &after, hold)
        };
        match why {
            None => {
                judged.quiet.insert(r);
            }
            // One entry per kind of work, the first rank's figures.
            Some(b) => add_to(&mut judged.busy, r, b, |a, b| {
                std::mem::discriminant(a) == std::mem::discriminant(b)
            }),
        }
    }
    judged
}

/// The diagnosis of `first` (the snapshot a hold began with), with what the hold showed:
/// `last` is the snapshot that ended it, `analysis` the snapshot's own.
pub fn judge(first: &JobDump, last: &JobDump, analysis: Analysis, hold: &Hold) -> Diagnosis {
    let Analysis {
        diagnosis: mut d,
        basis: b,
    } = analysis;
    let judged = judge_ranks(first, last, hold, &b.polling);
    let proven = closure(&b, judged.quiet.clone());
    let mut moved = RankSet::new();
    for (set, _) in &judged.moved {
        moved.union_with(set);
    }
    let watched: RankSet = hold
        .ranks
        .keys()
        .filter_map(|&r| u32::try_from(r).ok())
        .collect();
    let report = HoldReport {
        window_ms: hold.window_ms,
        watched,
        quiet: judged.quiet.clone(),
        moved: judged.moved.clone(),
        busy: judged.busy.clone(),
        unwatched: hold.unwatched.clone(),
        proven: proven.clone(),
    };
    if !proven.is_empty() {
        prove(&mut d, &b, first, hold, &proven);
    }
    if !moved.is_empty() {
        dissolve(&mut d, &b, &judged.moved, hold.window_ms);
    }
    // Why what remains possible was not proven by the hold.
    let open = d.possibly_deadlocked.difference(&d.deadlocked);
    for (set, b) in &judged.busy {
        let ranks = set.intersection(&open);
        // The polling doubt already says why a poll proves nothing.
        if !ranks.is_empty() && !matches!(b, Busy::Polling { .. }) {
            d.doubts.push(Doubt::Busy {
                ranks,
                busy: b.clone(),
                window_ms: hold.window_ms,
            });
        }
    }
    let unheld = hold.unwatched.intersection(&open);
    if !unheld.is_empty() {
        d.doubts.push(Doubt::Unheld {
            ranks: unheld,
            why: hold
                .why_unwatched
                .clone()
                .unwrap_or_else(|| "their calls could not be counted".into()),
        });
    }
    d.verdict = verdict(&d.deadlocked, &d.doubts);
    d.hold = Some(report);
    d
}

/// Ranks of rank-set doubts the hold settled no longer count in them: whom they wait
/// for, and what their queues hold, no longer matter once they are proven deadlocked or
/// seen moving.
fn settle_doubts(doubts: &mut Vec<Doubt>, settled: &RankSet) {
    doubts.retain_mut(|doubt| {
        let ranks = match doubt {
            Doubt::Unproven { ranks }
            | Doubt::Buffering { ranks }
            | Doubt::Collectives { ranks }
            | Doubt::UnknownCommunicators { ranks }
            | Doubt::UnknownPeers { ranks }
            | Doubt::Failed { ranks } => ranks,
            _ => return true,
        };
        *ranks = ranks.difference(settled);
        !ranks.is_empty()
    });
}

/// `proven` is deadlocked: the findings about it are definite, a finding names what no
/// cycle or knot does, and the proof is said.
fn prove(d: &mut Diagnosis, b: &HoldBasis, first: &JobDump, hold: &Hold, proven: &RankSet) {
    let mut covered = RankSet::new();
    for f in d.findings.iter_mut() {
        let deadlockish = f.kind.is_deadlock_part();
        if deadlockish && f.ranks.is_subset(proven) {
            f.certainty = Certainty::Definite;
            covered.union_with(&f.ranks);
        }
    }
    // What the proof settles: blocked ranks without queues whose waits were unknown.
    d.findings
        .retain(|f| !(f.kind == FindingKind::BlockedWithoutQueues && f.ranks.is_subset(proven)));
    let uncovered = proven.difference(&covered).difference(&d.deadlocked);
    if !uncovered.is_empty() {
        d.findings.push(closed_finding(b, first, &uncovered));
    }
    let touched = proven
        .iter()
        .filter_map(|r| {
            let a = hold.ranks.get(&(r as i32))?.activity.as_ref()?;
            a.touched_kb
        })
        .max();
    let queues = proven.iter().all(|r| {
        first
            .ranks
            .iter()
            .any(|x| x.rank == r as i32 && x.outcome.is_ok())
    });
    d.findings.push(Finding::unproven_by_operations(
        FindingKind::Held,
        Certainty::Definite,
        proven.clone(),
        Subject::Held {
            window_ms: hold.window_ms,
            touched_kb: touched,
            queues,
        },
    ));
    d.deadlocked.union_with(proven);
    d.possibly_deadlocked.union_with(proven);
    settle_doubts(&mut d.doubts, proven);
    d.findings.sort_by_key(|f| (f.kind, f.certainty));
}

/// The finding of deadlocked ranks no cycle or knot names: blocked ranks that wait only
/// for each other, some waits unknown.
fn closed_finding(b: &HoldBasis, first: &JobDump, ranks: &RankSet) -> Finding {
    let mut calls: Vec<(RankSet, String)> = Vec::new();
    for r in ranks {
        for call in b.blocked_calls.get(&(r as i32)).into_iter().flatten() {
            let name = mqd_model::calls::canonical(call).map_or(call.as_str(), |c| c.name);
            add_to(&mut calls, r, name.to_owned(), |a, b| a == b);
        }
    }
    let mut unknown: Vec<(RankSet, String)> = Vec::new();
    for r in ranks {
        if let Some(what) = b.unknown_waits.get(&(r as i32)) {
            add_to(&mut unknown, r, what.clone(), |a, b| a == b);
        }
    }
    // The finalized ranks the set waits for.
    let in_job: RankSet = first
        .ranks
        .iter()
        .filter_map(|r| u32::try_from(r.rank).ok())
        .collect();
    let mut dumps: Vec<&RankDump> = first.ranks.iter().filter(|r| !r.duplicate).collect();
    dumps.sort_by_key(|d| d.rank);
    let at = calls
        .iter()
        .map(|(set, call)| mqd_scale::shared::line_of_call(dumps.iter().copied(), set, call))
        .collect();
    Finding::unproven_by_operations(
        FindingKind::DeadlockClosed,
        Certainty::Definite,
        ranks.clone(),
        Subject::Closed {
            calls: calls.into_iter().map(|(set, c)| (c, set)).collect(),
            at,
            unknown,
            finalized: b.finalized.intersection(&in_job),
        },
    )
}

/// Ranks that moved were not deadlocked: the possible deadlocks they were in dissolve,
/// and the worst reading without them says what may still be.
fn dissolve(d: &mut Diagnosis, b: &HoldBasis, how: &[(RankSet, Moved)], ms: u64) {
    let mut moved = RankSet::new();
    for (set, _) in how {
        moved.union_with(set);
    }
    let moved = &moved;
    let graph = Graph::of_plan(&b.may, &b.facts);
    let start = RankSet::from_i32s(b.may.ranks.keys()).difference(moved);
    let sinks: RankSet =
        RankSet::from_i32s(b.may.ranks.iter().filter(|(_, r)| r.sink).map(|(r, _)| r));
    let mut possible = graph
        .stuck_within(start, &Unknown::Holds)
        .difference(&sinks);
    possible.union_with(&d.deadlocked);
    let was = d.possibly_deadlocked.clone();
    let dissolved = was.intersection(moved);
    d.findings.retain(|f| {
        !(f.certainty == Certainty::Possible
            && f.kind.is_deadlock_part()
            && !f.ranks.intersection(moved).is_empty())
    });
    if !dissolved.is_empty() {
        d.findings.push(Finding::unproven_by_operations(
            FindingKind::Dissolved,
            Certainty::Definite,
            dissolved.clone(),
            Subject::Dissolved {
                moved: how
                    .iter()
                    .map(|(set, m)| (set.intersection(&dissolved), m.clone()))
                    .filter(|(set, _)| !set.is_empty())
                    .collect(),
                window_ms: ms,
            },
        ));
    }
    settle_doubts(&mut d.doubts, moved);
    d.doubts.retain_mut(|doubt| match doubt {
        Doubt::Unproven { ranks } | Doubt::Buffering { ranks } | Doubt::Polling { ranks, .. } => {
            *ranks = ranks.intersection(&possible);
            !ranks.is_empty()
        }
        _ => true,
    });
    d.possibly_deadlocked = possible;
    // Nothing possible left: the summary a snapshot without deadlocks has.
    if d.possibly_deadlocked.is_empty()
        && !d
            .findings
            .iter()
            .any(|f| matches!(f.kind, FindingKind::NoDeadlock | FindingKind::Clean))
    {
        let all = seen_all(&d.doubts);
        if let Some(f) = summary_finding(&b.queue_waits, &b.facts, all, &b.running) {
            d.findings.push(f);
        }
    }
    d.findings.sort_by_key(|f| (f.kind, f.certainty));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{analyse, diagnose};
    use mqd_model::hold::{Activity, FileIo, RankHold};
    use mqd_model::{CallArguments, ThreadStack, Verdict};

    /// MPICH's `MPI_COMM_WORLD` handle, as the caller's side reads it.
    const WORLD: i64 = mqd_scale::shared::COMM_WORLD_HANDLE;

    /// A thread blocked in `call` on COMM_WORLD with `peer` (unknown: `None`) and tag 7.
    fn blocked(tid: i32, call: &str, peer: Option<i64>) -> ThreadStack {
        ThreadStack::named(
            tid,
            &["poll", call, "main"],
            Some(CallArguments {
                function: format!("{call} (the caller's call)"),
                comm: Some(WORLD),
                peer,
                tag: Some(7),
                bytes: Some(4),
                ..CallArguments::default()
            }),
        )
    }

    fn computing(tid: i32) -> ThreadStack {
        ThreadStack::named(tid, &["solve", "main"], None)
    }

    /// A stock MPI's job (no queues) of `threads.len()` ranks.
    fn job(threads: Vec<ThreadStack>) -> JobDump {
        JobDump::of_threads(threads)
    }

    /// A ring of receives from the left neighbour, its peers known or not.
    fn recv_ring(n: i64, known: bool) -> JobDump {
        job((0..n)
            .map(|r| {
                let left = known.then_some((r + n - 1) % n);
                blocked(100 + r as i32, "MPI_Recv", left)
            })
            .collect())
    }

    fn quiet() -> Activity {
        Activity {
            touched_kb: Some(2_000),
            throttled_ms: Some(10),
            io_bytes: Some(0),
            cpu_ticks: (100..110).map(|t| (t, 200)).collect(),
            ..Activity::default()
        }
    }

    /// Every rank of `job` watched, as `of(rank)` says it did.
    fn hold(job: &JobDump, of: impl Fn(i32) -> RankHold) -> Hold {
        Hold {
            window_ms: 2000,
            ranks: job.ranks.iter().map(|r| (r.rank, of(r.rank))).collect(),
            unwatched: RankSet::new(),
            why_unwatched: None,
        }
    }

    fn stayed(activity: Activity) -> RankHold {
        RankHold {
            returned: Some(false),
            activity: Some(activity),
        }
    }

    fn judged(job: &JobDump, h: &Hold) -> Diagnosis {
        judge(job, job, analyse(job), h)
    }

    #[test]
    fn ranks_that_poll_each_other_are_never_cleared_nor_proven() {
        // Ranks 0-2 loop on MPI_Test, rank 3 receives from rank 2: nobody computes.
        let poll = |tid| ThreadStack::named(tid, &["poll", "MPI_Test", "main"], None);
        let j = job(vec![
            poll(100),
            poll(101),
            poll(102),
            blocked(103, "MPI_Recv", Some(2)),
        ]);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert!(
            d.doubts.iter().any(|x| matches!(
                x,
                Doubt::Polling { ranks, call } if ranks.to_string() == "0-2" && call == "MPI_Test"
            )),
            "{:?}",
            d.doubts
        );
        // Their returns prove no progress, and staying no deadlock (rank 3 stays).
        for returned in [true, false] {
            let d = judged(
                &j,
                &hold(&j, |r| RankHold {
                    returned: Some(returned && r < 3),
                    activity: Some(quiet()),
                }),
            );
            assert_eq!(d.verdict, Verdict::Undetermined, "{:?}", d.findings);
            assert!(d.deadlocked.is_empty());
            assert!(
                d.doubts.iter().any(|x| matches!(x, Doubt::Polling { .. })),
                "{:?}",
                d.doubts
            );
        }
        // A rank that computes may give what they poll for.
        let j = job(vec![poll(100), poll(101), computing(102)]);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.doubts);
    }

    #[test]
    fn a_ring_that_holds_is_proven_and_says_what_the_proof_rests_on() {
        let j = recv_ring(4, true);
        let d = diagnose(&j);
        assert_eq!(d.verdict, Verdict::Undetermined);
        assert_eq!(candidates(&analyse(&j)).to_string(), "0-3");
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        assert_eq!(d.deadlocked.to_string(), "0-3");
        assert!(d.doubts.is_empty(), "{:?}", d.doubts);
        let held = d.of_kind(FindingKind::Held).next().expect("the proof");
        assert!(matches!(
            held.subject,
            Subject::Held {
                window_ms: 2000,
                touched_kb: Some(2000),
                queues: false
            }
        ));
        assert!(
            d.of_kind(FindingKind::DeadlockCycle)
                .all(|f| f.certainty == Certainty::Definite)
        );
    }

    #[test]
    fn a_rank_that_works_proves_nothing_nor_do_those_that_wait_for_it() {
        let j = recv_ring(4, true);
        let kinds = [
            Activity {
                touched_kb: Some(3_000_000),
                ..quiet()
            },
            Activity {
                io_bytes: Some(5 << 20),
                ..quiet()
            },
            Activity {
                file_io: Some(FileIo {
                    tid: 101,
                    syscall: Some("pwrite64".into()),
                    file: Some("/scratch/out".into()),
                }),
                ..quiet()
            },
            Activity {
                rdma_bytes: Some(1 << 30),
                ..quiet()
            },
            Activity {
                stopped: true,
                ..quiet()
            },
            Activity {
                starved: Some(mqd_model::hold::Starved {
                    tid: 101,
                    ran_ms: 20,
                    waited_ms: 1900,
                }),
                ..quiet()
            },
            // A transfer crawling between ranks held to 5% of a CPU by their cgroup:
            // 28 MB touched in 2 s, less than a rank that moves data at speed.
            Activity {
                touched_kb: Some(28_000),
                throttled_ms: Some(1_900),
                ..quiet()
            },
        ];
        for busy in kinds {
            let d = judged(
                &j,
                &hold(&j, |r| stayed(if r == 1 { busy.clone() } else { quiet() })),
            );
            assert_eq!(d.verdict, Verdict::Undetermined, "{busy:?}");
            assert!(d.deadlocked.is_empty());
            assert!(
                d.doubts
                    .iter()
                    .any(|x| matches!(x, Doubt::Busy { ranks, .. } if ranks.to_string() == "1")),
                "{:?}",
                d.doubts
            );
        }
        // Not measured at all: nothing rests on it either.
        let d = judged(
            &j,
            &hold(&j, |r| RankHold {
                returned: Some(false),
                activity: (r != 2).then(quiet),
            }),
        );
        assert_eq!(d.verdict, Verdict::Undetermined);
    }

    #[test]
    fn a_closed_set_needs_no_edges_but_must_be_the_whole_job() {
        // Nobody's peer known: only the whole job, every rank quiet, closes.
        let j = recv_ring(4, false);
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        let closed = d
            .of_kind(FindingKind::DeadlockClosed)
            .next()
            .expect("named");
        let Subject::Closed { calls, unknown, .. } = &closed.subject else {
            panic!("{closed:?}")
        };
        assert_eq!(calls, &[("MPI_Recv".to_owned(), RankSet::full(4))]);
        assert_eq!(unknown[0].0.to_string(), "0-3");
        // One rank computing: it may send to anyone.
        let mut j = recv_ring(4, false);
        j.ranks[3].threads = vec![computing(103)];
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_ne!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        // The job's size unknown: a rank may be missing.
        let mut j = recv_ring(4, false);
        j.job_size = None;
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_ne!(d.verdict, Verdict::Deadlock);
        // A rank waiting for another job, in MPI_Comm_accept, is never held.
        let mut j = recv_ring(4, false);
        j.ranks[0].threads = vec![ThreadStack::named(
            100,
            &["poll", "MPI_Comm_accept", "main"],
            None,
        )];
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_ne!(d.verdict, Verdict::Deadlock);
    }

    #[test]
    fn known_peers_close_a_part_of_the_job_and_leave_the_rest_alone() {
        // Ranks 0 and 1 receive from each other; ranks 2 and 3 compute.
        let mut j = recv_ring(4, true);
        j.ranks[0].threads = vec![blocked(100, "MPI_Recv", Some(1))];
        j.ranks[1].threads = vec![blocked(101, "MPI_Recv", Some(0))];
        j.ranks[2].threads = vec![computing(102)];
        j.ranks[3].threads = vec![computing(103)];
        let d = judged(&j, &hold(&j, |_| stayed(quiet())));
        assert_eq!(d.verdict, Verdict::Deadlock, "{:?}", d.findings);
        assert_eq!(d.deadlocked.to_string(), "0,1");
    }

    #[test]
    fn ranks_that_moved_dissolve_what_was_possible() {
        let j = recv_ring(4, true);
        let d = judged(
            &j,
            &hold(&j, |_| RankHold {
                returned: Some(true),
                activity: Some(quiet()),
            }),
        );
        assert_eq!(
            d.verdict,
            Verdict::NoDeadlock,
            "{:?} {:?}",
            d.findings,
            d.doubts
        );
        assert!(d.of_kind(FindingKind::Dissolved).next().is_some());
        assert!(d.possibly_deadlocked.is_empty());
        // One that moved breaks the ring: the rest cannot be proven, nor be cleared
        // (they may wait for it again).
        let d = judged(
            &j,
            &hold(&j, |r| RankHold {
                returned: Some(r == 2),
                activity: Some(quiet()),
            }),
        );
        assert!(d.deadlocked.is_empty());
        assert_eq!(d.verdict, Verdict::NoDeadlock, "{:?}", d.doubts);
        // A counter that could not be read: not quiet.
        let d = judged(
            &j,
            &hold(&j, |r| RankHold {
                returned: if r == 0 { None } else { Some(false) },
                activity: Some(quiet()),
            }),
        );
        assert_eq!(d.verdict, Verdict::Undetermined);
    }

    #[test]
    fn another_call_after_the_window_keeps_a_rank_out_of_the_proof() {
        let j = recv_ring(2, true);
        let mut after = j.clone();
        after.ranks[0].threads = vec![blocked(100, "MPI_Recv", Some(0))];
        let d = judge(&j, &after, analyse(&j), &hold(&j, |_| stayed(quiet())));
        assert!(d.deadlocked.is_empty(), "{:?}", d.findings);
        let report = d.hold.expect("the hold's report");
        assert!(report.moved.is_empty(), "{report:?}");
        assert_eq!(report.busy[0].1, Busy::Changed(Moved::OtherCall));
        // It proves no move either: still undetermined.
        assert_eq!(d.verdict, Verdict::Undetermined);
    }
}
