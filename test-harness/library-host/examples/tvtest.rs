//! MPICH's tvtest scenario replayed through `libmqd_mpich.so` on synthetic
//! processes of every MPICH layout, then a four-rank MPI_Ssend ring that
//! deadlocks, dumped rank by rank with the wait-for cycle it proves.
//!
//! Run: `cargo run --release -p mqd-library-host --example tvtest`

use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{
    Display, Operation, OperationStatus, Queue, Session, SessionOptions,
};
use mqd_synthetic::{Arch, CommSpec, Layout, ProcessSpec, RequestSpec};
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let Some(path) = mqd_library_host::library::bundled_library() else {
        eprintln!(
            "tvtest: libmqd_mpich.so not found; build it with `cargo build -p mqd-mpich` or set MQD_DLL"
        );
        return ExitCode::FAILURE;
    };
    let lib = match MqsLibrary::load(&path) {
        Ok(lib) => Arc::new(lib),
        Err(e) => {
            eprintln!("tvtest: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{} ({})\n", lib.version_string(), path.display());
    for layout in [Layout::Ch3, Layout::Ch4Am, Layout::Debugq4, Layout::Debugq5] {
        if let Err(e) = tvtest(&lib, layout) {
            eprintln!("tvtest: {}: {e}", layout.name());
            return ExitCode::FAILURE;
        }
    }
    match ring(&lib) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tvtest: ring: {e}");
            ExitCode::FAILURE
        }
    }
}

/// tvtest on rank 0 of 2: the dup, receives tagged 17 and 19, a send tagged 18,
/// and three displays as the program moves on.
fn tvtest(lib: &Arc<MqsLibrary>, layout: Layout) -> Result<(), String> {
    let (rank, size) = (0, 2);
    let mut spec = ProcessSpec::new(layout, Arch::LP64_LE);
    spec.sequence_number = 3;
    spec.comms = vec![
        CommSpec::intra(2, "Dup of comm world", 480, rank, (0..size).collect()),
        CommSpec::self_comm(rank),
        CommSpec::world(size, rank),
    ];
    spec.posted = vec![
        RequestSpec::recv(480, 1, 17, 0x7ffc_1000, 1),
        RequestSpec::recv(480, 1, 19, 0x7ffc_2000, 1),
    ];
    spec.sends = vec![RequestSpec::send(0, 1, 18, 0x7ffc_3000, 1)];
    let mut exchanged = spec.clone();
    exchanged.posted.remove(0);
    exchanged.sends.clear();
    let mut matched = exchanged.clone();
    matched.posted.clear();

    let mut dbg = Session::new(lib.clone(), SessionOptions::default());
    let p = dbg
        .add_process(Box::new(spec.build()), rank)
        .map_err(|e| format!("{e:?}"))?;
    println!(
        "=== tvtest, {} ===",
        dbg.process_message(p).unwrap_or(layout.name())
    );
    for (i, step) in [&spec, &exchanged, &matched].into_iter().enumerate() {
        if i > 0 {
            dbg.replace_target(p, Box::new(step.build()))
                .map_err(|e| format!("{e:?}"))?;
        }
        let display = dbg.display(p).map_err(|e| format!("{e:?}"))?;
        println!("Display {}:", i + 1);
        print_display(&display);
    }
    let counters = dbg.counters();
    println!(
        "({} target reads, {} bytes, {} debugger allocations outstanding)\n",
        counters.fetches, counters.fetch_bytes, counters.outstanding_allocations
    );
    Ok(())
}

fn print_display(display: &Display) {
    for comm in &display.communicators {
        let group = comm
            .group
            .as_ref()
            .map_or("unknown".to_string(), |g| format!("{g:?}"));
        println!(
            "  Communicator {:?}: size {}, rank {}, COMM_WORLD ranks {group}",
            comm.name, comm.size, comm.local_rank
        );
        for (label, queue) in [
            ("pending receives", &comm.pending_receives),
            ("unexpected messages", &comm.unexpected_messages),
            ("pending sends", &comm.pending_sends),
        ] {
            match queue {
                Queue::Operations(ops) if ops.is_empty() => {
                    println!("    No {label} for communicator {}", comm.name)
                }
                Queue::Operations(ops) => {
                    println!("    {label}:");
                    for op in ops {
                        print_operation(op);
                    }
                }
                Queue::NoInformation => println!("    No information available for {label}"),
                Queue::Error(e) => println!("    {label}: error {}: {}", e.code, e.text),
            }
        }
    }
}

fn print_operation(op: &Operation) {
    let rank = if op.desired_local_rank < 0 {
        "any".to_string()
    } else {
        op.desired_local_rank.to_string()
    };
    let tag = if op.tag_wild {
        "any".to_string()
    } else {
        op.desired_tag.to_string()
    };
    let status = match op.status {
        OperationStatus::Pending => "pending",
        OperationStatus::Matched => "matched",
        OperationStatus::Complete => "complete",
        OperationStatus::Other(_) => "?",
    };
    println!(
        "      tag = {tag}, rank = {rank} (world {}), length = {}, buffer = {:#x}, {status}; {}",
        op.desired_global_rank,
        op.desired_length,
        op.buffer,
        op.extra_text.join("; ")
    );
}

/// Four ranks, each blocked in MPI_Ssend(tag 5) to its right neighbour on a
/// communicator named "ring": every rank holds its own pending send and the
/// unexpected message of its left neighbour, and no receive is posted.
fn ring(lib: &Arc<MqsLibrary>) -> Result<(), String> {
    let size = 4;
    let mut dbg = Session::new(lib.clone(), SessionOptions::default());
    let mut ranks = Vec::new();
    for rank in 0..size {
        let mut spec = ProcessSpec::new(Layout::Debugq5, Arch::LP64_LE);
        spec.sequence_number = 3;
        let ring = CommSpec::intra(2, "ring", 480, rank, (0..size).collect());
        spec.comms = vec![ring, CommSpec::self_comm(rank), CommSpec::world(size, rank)];
        spec.sends = vec![RequestSpec::send(
            480,
            (rank + 1) % size,
            5,
            0x7ffc_0000 + 64 * rank as u64,
            1,
        )];
        spec.unexpected = vec![RequestSpec::unexpected(480, (rank + size - 1) % size, 5, 0)];
        let p = dbg
            .add_process(Box::new(spec.build()), rank)
            .map_err(|e| format!("{e:?}"))?;
        ranks.push(p);
    }
    println!("=== a 4-rank MPI_Ssend ring, MPICH 5.x debug queues ===");
    // A blocked send waits for its destination; a receive for its source.
    let mut waits_for: Vec<Vec<(i64, String)>> = vec![Vec::new(); size as usize];
    let mut posted_receives = 0;
    for (rank, &p) in ranks.iter().enumerate() {
        let display = dbg.display(p).map_err(|e| format!("{e:?}"))?;
        println!("Rank {rank}:");
        print_display(&display);
        for comm in &display.communicators {
            posted_receives += comm.pending_receives.ops().len();
            for op in comm
                .pending_sends
                .ops()
                .iter()
                .filter(|o| o.status != OperationStatus::Complete)
            {
                waits_for[rank].push((
                    op.desired_global_rank,
                    format!(
                        "a send to rank {} on {:?}, tag {}",
                        op.desired_global_rank, comm.name, op.desired_tag
                    ),
                ));
            }
            for op in comm
                .pending_receives
                .ops()
                .iter()
                .filter(|o| o.desired_global_rank >= 0 && o.status != OperationStatus::Complete)
            {
                waits_for[rank].push((
                    op.desired_global_rank,
                    format!(
                        "a receive from rank {} on {:?}, tag {}",
                        op.desired_global_rank, comm.name, op.desired_tag
                    ),
                ));
            }
        }
    }
    match find_cycle(&waits_for) {
        Some(cycle) => {
            let path: Vec<String> = cycle
                .iter()
                .map(|(r, _)| r.to_string())
                .chain([cycle[0].0.to_string()])
                .collect();
            println!(
                "\nDeadlock: ranks {} wait for each other:",
                path.join(" -> ")
            );
            for (rank, why) in &cycle {
                println!("  rank {rank} is blocked in {why}");
            }
            if posted_receives == 0 {
                println!(
                    "  and no receive is posted on any rank: none of these sends can complete."
                );
            }
        }
        None => println!("\nNo wait-for cycle."),
    }
    Ok(())
}

/// The first cycle of the wait-for graph, as (rank, why it waits) steps.
fn find_cycle(edges: &[Vec<(i64, String)>]) -> Option<Vec<(usize, String)>> {
    for start in 0..edges.len() {
        let mut path: Vec<(usize, String)> = Vec::new();
        let mut at = start;
        while path.len() <= edges.len() {
            let (next, why) = edges[at].first()?;
            path.push((at, why.clone()));
            let next = usize::try_from(*next).ok()?;
            if next == start {
                return Some(path);
            }
            at = next;
        }
    }
    None
}
