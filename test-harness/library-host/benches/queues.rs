//! One display of a synthetic MPICH process through `libmqd_mpich.so`, as a
//! debugger makes it: update the communicator list, then for every communicator
//! the three queues. Queues of 1k, 100k and 1M elements across 1, 10 and 1000
//! communicators, for layout A (ch3) and layout C (5.x debug queues).
//!
//! Criterion reports the time per element (throughput in elements); the target
//! reads per element, counted by the harness, are printed and written to
//! `target/criterion/mqd-reads.md`.
//!
//! Run: `cargo bench -p mqd-library-host --bench queues`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mqd_abi::types::{mqs_communicator, mqs_end_of_list, mqs_ok, mqs_pending_operation};
use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{ProcessId, Session, SessionOptions};
use mqd_synthetic::{Arch, Layout, ProcessSpec};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];
const COMMS: [usize; 3] = [1, 10, 1000];

/// One display with the raw entry points; returns the operations seen.
fn display(dbg: &mut Session, p: ProcessId) -> u64 {
    dbg.with_raw(p, |raw, process, _| {
        // SAFETY: live handles of this session, valid during the closure.
        unsafe {
            assert_eq!((raw.update_communicator_list)(process), mqs_ok);
            let mut ops = 0u64;
            let mut rc = (raw.setup_communicator_iterator)(process);
            let mut comm: mqs_communicator = std::mem::zeroed();
            let mut op: mqs_pending_operation = std::mem::zeroed();
            while rc == mqs_ok {
                assert_eq!((raw.get_communicator)(process, &mut comm), mqs_ok);
                for class in [1, 2, 0] {
                    if (raw.setup_operation_iterator)(process, class) == mqs_ok {
                        while (raw.next_operation)(process, &mut op) == mqs_ok {
                            ops += 1;
                        }
                    }
                }
                rc = (raw.next_communicator)(process);
            }
            assert_eq!(rc, mqs_end_of_list);
            ops
        }
    })
    .expect("process is set up")
}

fn queues(c: &mut Criterion) {
    let path = mqd_library_host::library::bundled_library()
        .expect("libmqd_mpich.so is built beside the bench");
    let lib = Arc::new(MqsLibrary::load(&path).expect("load libmqd_mpich.so"));
    let mut table = String::from(
        "| layout | elements | communicators | fetches/element | bytes/element | queue fetches (all comms) |\n|---|---|---|---|---|---|\n",
    );
    let mut group = c.benchmark_group("display");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for layout in [Layout::Ch3, Layout::Debugq5] {
        for &n in &SIZES {
            for &comms in &COMMS {
                let spec = ProcessSpec::big_queue(layout, Arch::LP64_LE, comms, n);
                let mut empty = spec.clone();
                empty.posted.clear();
                empty.unexpected.clear();
                empty.sends.clear();
                // Reads of the queues alone: a display minus one with empty queues.
                let mut base = Session::new(lib.clone(), SessionOptions::default());
                let bp = base.add_process(Box::new(empty.build()), 0).expect("setup");
                base.reset_counters();
                display(&mut base, bp);
                let base_counts = base.counters();

                let mut dbg = Session::new(lib.clone(), SessionOptions::default());
                let p = dbg.add_process(Box::new(spec.build()), 0).expect("setup");
                dbg.reset_counters();
                let seen = display(&mut dbg, p);
                let counts = dbg.counters();
                let fetches = counts.fetches - base_counts.fetches;
                let bytes = counts.fetch_bytes - base_counts.fetch_bytes;
                let _ = writeln!(
                    table,
                    "| {} | {n} | {comms} | {:.3} | {:.1} | {fetches} |",
                    layout.name(),
                    fetches as f64 / n as f64,
                    bytes as f64 / n as f64,
                );
                assert!(seen as usize <= n);
                group.throughput(Throughput::Elements(n as u64));
                group.bench_with_input(
                    BenchmarkId::new(layout.name(), format!("{n}x{comms}")),
                    &(),
                    |b, ()| b.iter(|| display(&mut dbg, p)),
                );
            }
        }
    }
    group.finish();
    println!("\nTarget reads per display (queue part):\n{table}");
    let out =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion/mqd-reads.md");
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&out, &table);
}

criterion_group!(benches, queues);
criterion_main!(benches);
