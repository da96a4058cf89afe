//! The diagnosis of a job: every analysis run on its dump, their findings merged, sorted
//! and given their communicators, and the verdict.

use crate::{attention, call_mismatch, calls, locations, mismatch, openmp, plan, scan, verdict};
use mqd_graph::{merge as merge_atoms, proven_and_possible};
use mqd_model::{CommKey, Diagnosis, JobDump, RankSet};
use mqd_scale::shared::name_communicators;

/// The diagnosis of a job: who waits for whom, and why it does not move. The class
/// analysis answers, each rank a class of its own, wherever it follows every rank.
pub fn diagnose(job: &JobDump) -> Diagnosis {
    analysed(job).0
}

/// [`diagnose`], and the ranks whose state the class analysis did not follow, with why:
/// for those the per-rank rules answered (empty when the class analysis answered).
pub fn analysed(job: &JobDump) -> (Diagnosis, Vec<(RankSet, String)>) {
    match mqd_scale::diagnose_ranks(job) {
        Ok(d) => (d, Vec::new()),
        Err(not_followed) => (per_rank(job), not_followed),
    }
}

/// What a hold of `job` builds on: the class analysis's, each rank a class of its own,
/// where it follows every rank; else the per-rank rules'.
pub(crate) fn hold_basis(job: &JobDump) -> mqd_scale::HoldBasis {
    mqd_scale::hold_basis(job).unwrap_or_else(|| {
        let s = scan::scan(job);
        let p = plan::plans(job, &s);
        mqd_scale::HoldBasis {
            may: p.may,
            holdable: p.holdable,
            blocked_calls: p.blocked_calls,
            unknown_waits: p.unknown_waits,
            polling: p.polling,
            finalized: p.finalized,
            queue_waits: s.waits,
            facts: s.facts,
            running: p.running,
            size: p.job_size,
        }
    })
}

/// The per-rank rules' diagnosis: what answers until the class analysis follows every
/// state, and what tests hold the class analysis to.
pub fn per_rank(job: &JobDump) -> Diagnosis {
    let s = scan::scan(job);
    let plans = plan::plans(job, &s);
    let locations = locations::locations(job);
    let (mut findings, deadlocked, possibly_deadlocked) =
        proven_and_possible(&plans.must, &plans.may, &s.facts, job.snapshot.is_one());
    let mut atoms = mismatch::mismatches(&s);
    atoms.extend(mqd_graph::attention(&s.waits, &s.facts));
    let scan::Scan {
        facts,
        waits,
        atoms: scanned,
        failed_atoms,
        ..
    } = s;
    atoms.extend(scanned);
    atoms.extend(failed_atoms);
    findings.extend(merge_atoms(atoms));
    findings.extend(plans.collectives.findings.iter().cloned());
    findings.extend(calls::blocked_without_queues(
        job,
        &locations,
        &plans.running,
    ));
    findings.extend(calls::finalize_findings(&plans, &locations, &deadlocked));
    findings.extend(openmp::waits_within(job, &plans.self_blocked));
    // What the blocked calls' arguments show, where the queues did not already say it.
    let queued: mqd_model::RankSet = findings
        .iter()
        .filter(|f| matches!(f.subject, mqd_model::Subject::Mismatch { .. }))
        .fold(mqd_model::RankSet::new(), |mut set, f| {
            set.union_with(&f.ranks);
            set
        });
    findings.extend(call_mismatch::call_findings(job, plans.job_size, &queued));
    // Collective mismatches say where each side calls.
    for f in &mut findings {
        if let mqd_model::Subject::CollectiveMismatch { calls, at, .. } = &mut f.subject {
            *at = calls
                .iter()
                .map(|(call, ranks)| locations::line_of_call(job, ranks, call))
                .collect();
        }
    }
    let unproven = possibly_deadlocked.difference(&deadlocked);
    let doubts = verdict::doubts(
        job,
        &facts,
        &waits,
        &findings,
        verdict::Unseen {
            unproven,
            running: &plans.running,
            accounted: &plans.accounted,
            unknown_communicators: plans.collectives.unknown.clone(),
            no_stacks: plans.no_stacks.clone(),
            unknown_places: &plans.unknown_places,
            self_blocked: plans.self_blocked.clone(),
            polling: &plans.polling,
        },
    );
    let seen_all = mqd_scale::shared::seen_all(&doubts);
    findings.extend(attention::summary_finding(
        &waits,
        &facts,
        &possibly_deadlocked,
        seen_all,
        &plans.running,
    ));
    // Stable: within a kind, proven before possible, then the order of discovery.
    findings.sort_by_key(|f| (f.kind, f.certainty));
    name_communicators(&mut findings, |e| {
        e.op.resolve(job).map(|(_, comm, _)| CommKey::of(comm))
    });
    // The graph: the worst reading's waits, those the proof holds marked blocked.
    let graph = mqd_graph::graph(&plans.may, &plans.must, job.snapshot.is_one());
    drop(waits);
    Diagnosis {
        verdict: mqd_scale::shared::verdict(&deadlocked, &doubts),
        doubts,
        findings,
        waits: graph,
        deadlocked,
        possibly_deadlocked,
        facts,
        hold: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate;
    use mqd_model::{Communicator, FindingKind, Operation, Queue, RankDump, RankSet};

    fn op(peer: i64, tag: i64) -> Operation {
        Operation::pending(peer, tag)
    }

    /// A job of `n` ranks on COMM_WORLD whose rank `r` has `receives(r)` posted.
    fn world_job(n: i32, receives: impl Fn(i32) -> Vec<Operation>) -> JobDump {
        let ranks = (0..n)
            .map(|r| RankDump {
                mpi: mqd_model::MpiState::default(),
                rank: r,
                pid: None,
                host: None,
                executable: None,
                message: None,
                lists_blocking_sends: None,
                signal: None,
                duplicate: false,
                threads: Vec::new(),
                outcome: Ok(vec![Communicator {
                    context: None,
                    unique_id: 1,
                    local_rank: i64::from(r),
                    size: i64::from(n),
                    name: "MPI_COMM_WORLD".into(),
                    group: Some((0..n).collect()),
                    group_error: None,
                    pending_receives: Queue::Operations(receives(r)),
                    unexpected_messages: Queue::Operations(Vec::new()),
                    pending_sends: Queue::Operations(Vec::new()),
                }]),
                notes: Vec::new(),
            })
            .collect();
        JobDump::of_ranks(ranks)
    }

    #[test]
    fn large_jobs_are_diagnosed_quickly() {
        let n = 2000;
        let start = thread_cpu_ns();
        // Everyone receives from any source: one knot of 2000.
        let d = diagnose(&world_job(n, |_| vec![op(-1, 1)]));
        assert_eq!(
            d.findings.len(),
            1,
            "{:?}",
            d.findings.iter().map(|f| f.kind).collect::<Vec<_>>()
        );
        assert_eq!(d.findings[0].kind, FindingKind::DeadlockKnot);
        assert_eq!(d.findings[0].ranks, RankSet::full(n as u32));
        assert_eq!(d.findings[0].evidence.len(), n as usize);
        // A receive ring of 2000.
        let d = diagnose(&world_job(n, |r| vec![op(i64::from((r + 1) % n), 2)]));
        assert_eq!(d.findings.len(), 1);
        assert_eq!(d.findings[0].cycle.as_ref().map(Vec::len), Some(n as usize));
        // All wait for rank 0, which waits for anyone: a knot (rank 0 can only be served
        // by blocked ranks).
        let d = diagnose(&world_job(n, |r| {
            vec![if r == 0 { op(-1, 3) } else { op(0, 3) }]
        }));
        assert_eq!(d.findings[0].kind, FindingKind::DeadlockKnot);
        let groups = aggregate(&world_job(n, |r| vec![op(i64::from((r + 1) % n), 2)]));
        assert_eq!(groups.len(), 1);
        // A bound against a blow-up (quadratic work at 2000 ranks would take hours), on
        // this thread's CPU time: a loaded host stretches the wall clock, not that.
        let spent = std::time::Duration::from_nanos(thread_cpu_ns() - start);
        assert!(spent < std::time::Duration::from_secs(60), "{spent:?}");
    }

    /// The CPU time this thread has run, from the scheduler's own account.
    fn thread_cpu_ns() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
        stat.split_whitespace()
            .next()
            .and_then(|ns| ns.parse().ok())
            .expect("schedstat's first field")
    }

    #[test]
    fn findings_name_their_communicators() {
        let job = world_job(2, |r| vec![op(i64::from(1 - r), 2)]);
        let d = diagnose(&job);
        assert_eq!(d.findings[0].kind, FindingKind::DeadlockCycle);
        let world = CommKey::named("MPI_COMM_WORLD", 2);
        assert_eq!(d.findings[0].communicators, [world]);
        assert_eq!(d.findings[0].evidence.len(), 2);
        let (rank, _, op) = d.findings[0].evidence[1]
            .op
            .resolve(&job)
            .expect("evidence points into the dump");
        assert_eq!((rank.rank, op.desired_local_rank), (1, 0));
    }
}
