//! The front end's side of the agents' streams: parsing the lines of a job of N ranks in
//! K distinct states and rebuilding every rank, as `mqd job` does for ranks on other
//! hosts. Grid: 4,096 ranks in 1, 64 and 4,096 states; 1,024 and 16,384 ranks in one
//! state. Each rank holds COMM_WORLD (its group a range of N), COMM_SELF, a pending send
//! to its right neighbour and a stack of three frames; a state differs from another in
//! the function its stack is in. The bytes on the wire are printed per case.
//!
//! Run: `cargo bench -p mqd-remote --bench agents`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mqd_model::{Communicator, Frame, Operation, OperationStatus, Queue, RankDump, ThreadStack};
use mqd_remote::wire::{Decoder, Encoder, Record};
use std::time::Duration;

fn communicator(
    name: &str,
    id: u64,
    local_rank: i64,
    group: Vec<i32>,
    sends: Vec<Operation>,
) -> Communicator {
    Communicator {
        context: None,
        unique_id: id,
        name: name.into(),
        size: group.len() as i64,
        local_rank,
        group: Some(group.into()),
        group_error: None,
        pending_receives: Queue::Operations(Vec::new()),
        unexpected_messages: Queue::Operations(Vec::new()),
        pending_sends: Queue::Operations(sends),
    }
}

/// A function name per state, without digits (digits in strings travel as numbers).
fn phase(state: usize) -> String {
    let mut name = String::from("phase_");
    let mut k = state;
    loop {
        name.push(char::from(b'a' + (k % 26) as u8));
        k /= 26;
        if k == 0 {
            return name;
        }
    }
}

/// Rank `r` of `n`, in state `state`, its heap and libraries where ASLR put them.
fn rank(n: i32, r: i32, state: usize) -> RankDump {
    let slide = (r as u64 % 97) << 20;
    let send = Operation {
        collective: false,
        status: OperationStatus::Pending,
        desired_local_rank: i64::from((r + 1) % n),
        desired_global_rank: i64::from((r + 1) % n),
        tag_wild: false,
        desired_tag: 5,
        desired_length: 4000,
        system_buffer: false,
        buffer: 0x5555_0000_0000 + slide,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: vec![format!("request {:#x}", 0x5555_1000_0000 + slide)],
        sender: None,
        request: Some(0x5555_1000_0000 + slide),
        remote_group: false,
    };
    let frame = |address: u64, function: String| Frame {
        mpi: false,
        address: address + slide,
        function: Some(function),
        object: Some("/opt/app/bin/solver".into()),
        offset: 0x40,
        file: Some("solver.c".into()),
        line: Some(120),
        inlined: false,
        language: None,
    };
    let pid = 10_000 + r;
    RankDump {
        mpi: mqd_model::MpiState::default(),
        rank: r,
        pid: Some(pid),
        host: None,
        executable: Some("/opt/app/bin/solver".into()),
        message: Some(format!(
            "mqd: 'rank {r} (pid {pid}, /opt/app/bin/solver)' has MPICH ch4 device queues"
        )),
        signal: None,
        duplicate: false,
        threads: vec![ThreadStack {
            openmp: None,
            tid: pid,
            frames: vec![
                frame(0x7f00_0000_1000, "MPI_Ssend".into()),
                frame(0x5555_0000_2000, phase(state)),
                frame(0x5555_0000_3000, "main".into()),
            ],
            truncated: None,
            call: None,
        }],
        lists_blocking_sends: Some(true),
        outcome: Ok(vec![
            communicator(
                "MPI_COMM_WORLD",
                0x5555_2000_0000 + slide,
                i64::from(r),
                (0..n).collect(),
                vec![send],
            ),
            communicator(
                "MPI_COMM_SELF",
                0x5555_2000_1000 + slide,
                0,
                vec![r],
                Vec::new(),
            ),
        ]),
        notes: Vec::new(),
        traffic: None,
    }
}

/// The lines 64 ranks per host make, one stream per host.
fn streams(n: i32, states: usize) -> Vec<Vec<String>> {
    let per_host = 64.min(n);
    (0..n)
        .step_by(per_host as usize)
        .enumerate()
        .map(|(host, first)| {
            let dumps: Vec<RankDump> = (first..first + per_host)
                .map(|r| rank(n, r, r as usize % states))
                .collect();
            Encoder::new()
                .encode(host as u32, &dumps)
                .expect("encode")
                .iter()
                .map(|record| serde_json::to_string(record).expect("a line"))
                .collect()
        })
        .collect()
}

/// What the front end does with the streams: parse and rebuild every rank.
fn merge(streams: &[Vec<String>]) -> usize {
    let mut ranks = 0;
    for lines in streams {
        let mut decoder = Decoder::new();
        for line in lines {
            match serde_json::from_str::<Record>(line).expect("a record") {
                Record::State(s) => decoder.add_state(s),
                Record::Ranks(r) => {
                    ranks += decoder.ranks(&r, |_| "node".into()).expect("ranks").len()
                }
                _ => {}
            }
        }
    }
    ranks
}

fn front_end(c: &mut Criterion) {
    let mut group = c.benchmark_group("front_end_merge");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for (n, states) in [(4096, 1), (4096, 64), (4096, 4096), (1024, 1), (16384, 1)] {
        let streams = streams(n, states);
        let bytes: usize = streams.iter().flatten().map(|l| l.len() + 1).sum();
        println!(
            "{n} ranks in {states} states: {bytes} bytes on the wire, {:.1} per rank",
            bytes as f64 / f64::from(n)
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(
            BenchmarkId::new(format!("{states}_states"), n),
            &streams,
            |b, s| b.iter(|| assert_eq!(merge(s), n as usize)),
        );
    }
    group.finish();
}

criterion_group!(benches, front_end);
criterion_main!(benches);
