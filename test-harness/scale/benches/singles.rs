//! The class analysis of a job whose ranks are each a class of their own (every rank in a
//! state of its own: what a job of distinct states costs, as classes and from the dump,
//! its evidence pointing into it, as `mqd` diagnoses a job read rank by rank). Each rank of a ring of N is in `MPI_Ssend` to its
//! right neighbour, its message pending at it and waiting unexpected at the destination,
//! and holds a posted receive from its left neighbour with a tag no message has; a
//! function named by its rank keeps ranks from merging.
//!
//! Run: `cargo bench -p mqd-scale --bench singles`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mqd_model::{
    ClassJob, Communicator, JobDump, Operation, OperationStatus, Queue, RankDump, SenderState,
    ThreadStack,
};
use std::time::Duration;

fn operation(peer: i64, tag: i64) -> Operation {
    Operation {
        collective: false,
        status: OperationStatus::Pending,
        desired_local_rank: peer,
        desired_global_rank: peer,
        tag_wild: false,
        desired_tag: tag,
        desired_length: 400,
        system_buffer: false,
        buffer: 0x7000_0000,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: Vec::new(),
        sender: None,
        request: None,
        remote_group: false,
    }
}

fn rank(r: u32, n: u32) -> RankDump {
    let (left, right) = (i64::from((r + n - 1) % n), i64::from((r + 1) % n));
    let mut unexpected = operation(left, 5);
    unexpected.sender = Some(SenderState::Waits);
    let world = Communicator {
        context: None,
        unique_id: 0x1000,
        name: "MPI_COMM_WORLD".into(),
        size: i64::from(n),
        local_rank: i64::from(r),
        group: Some((0..n as i32).collect()),
        group_error: None,
        pending_receives: Queue::Operations(vec![operation(left, 9)]),
        unexpected_messages: Queue::Operations(vec![unexpected]),
        pending_sends: Queue::Operations(vec![operation(right, 5)]),
    };
    RankDump {
        mpi: mqd_model::MpiState::default(),
        rank: r as i32,
        pid: Some(1000 + r as i32),
        host: None,
        executable: None,
        message: None,
        signal: None,
        duplicate: false,
        threads: vec![ThreadStack::named(
            1,
            &["poll", "MPI_Ssend", &format!("step_{r}")],
            None,
        )],
        lists_blocking_sends: Some(true),
        outcome: Ok(vec![world]),
        notes: Vec::new(),
        traffic: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("singles");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for n in [500u32, 2_000, 8_000] {
        let job = JobDump::of_ranks((0..n).map(|r| rank(r, n)).collect());
        let classes = ClassJob::of_ranks(&job);
        group.bench_with_input(BenchmarkId::new("by classes", n), &classes, |b, job| {
            b.iter(|| mqd_scale::diagnose_classes(job))
        });
        group.bench_with_input(BenchmarkId::new("from the dump", n), &job, |b, job| {
            b.iter(|| mqd_scale::diagnose_ranks(job))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
