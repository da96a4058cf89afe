//! The diagnosis of a job: the class analysis, each rank a class of its own.

use mqd_model::{Diagnosis, JobDump};
use mqd_scale::HoldBasis;

/// The diagnosis of a job: who waits for whom, and why it does not move.
pub fn diagnose(job: &JobDump) -> Diagnosis {
    mqd_scale::diagnose_ranks(job)
}

/// A snapshot's diagnosis with what a hold of it builds on, from one analysis.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Who waits for whom, and why it does not move.
    pub diagnosis: Diagnosis,
    /// The worst reading and the ranks a hold could prove.
    pub(crate) basis: HoldBasis,
}

/// [`diagnose`], keeping what a hold of `job` needs ([`crate::hold`]).
pub fn analyse(job: &JobDump) -> Analysis {
    let (diagnosis, basis) = mqd_scale::analyse_ranks(job);
    Analysis { diagnosis, basis }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate;
    use mqd_model::{CommKey, Communicator, FindingKind, Operation, Queue, RankDump, RankSet};

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
                traffic: None,
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
