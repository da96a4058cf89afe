//! Many sessions over many processes at once, one library shared by every thread: each
//! session sees what it sees alone, and its counters count its own callbacks only.

mod support;

use mqd_library_host::session::{Counters, Display, Session, SessionOptions};
use mqd_synthetic::{Arch, Layout, ProcessSpec};
use support::library;

/// What one session over several processes gives: each process's two displays, and the
/// session's counters.
#[derive(Debug, PartialEq)]
struct Seen {
    displays: Vec<(Display, Display)>,
    counters: Counters,
}

fn session(specs: &[&ProcessSpec]) -> Seen {
    let mut dbg = Session::new(library(), SessionOptions::default());
    let processes: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(rank, spec)| {
            dbg.add_process(Box::new(spec.build()), rank as i32)
                .unwrap_or_else(|e| panic!("{spec:?}: setup: {e}"))
        })
        .collect();
    let displays = processes
        .iter()
        .map(|&p| {
            let first = dbg.display(p).expect("first display");
            let second = dbg.display(p).expect("second display");
            (first, second)
        })
        .collect();
    Seen {
        displays,
        counters: dbg.counters(),
    }
}

/// Sessions of one to four processes of every layout and architecture, run by eight
/// threads at once in different orders, three times over, equal the same sessions run
/// one after the other: displays and counters (reads, look-ups, allocations) alike.
#[test]
fn parallel_sessions_see_and_count_what_serial_ones_do() {
    let specs: Vec<ProcessSpec> = Layout::ALL
        .iter()
        .flat_map(|&layout| Arch::ALL.map(|arch| ProcessSpec::example(layout, arch)))
        .collect();
    // Session i: processes i, i+1, ... (1 to 4 of them), mixing layouts and widths.
    let sessions: Vec<Vec<&ProcessSpec>> = (0..specs.len())
        .map(|i| {
            (0..1 + i % 4)
                .map(|k| &specs[(i + 5 * k) % specs.len()])
                .collect()
        })
        .collect();
    let serial: Vec<Seen> = sessions.iter().map(|s| session(s)).collect();
    for seen in &serial {
        assert!(seen.counters.fetches > 0);
        assert_eq!(
            seen.counters.outstanding_allocations,
            seen.counters.mallocs - seen.counters.frees
        );
    }
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let (sessions, serial) = (&sessions, &serial);
            scope.spawn(move || {
                for round in 0..3 {
                    for step in 0..sessions.len() {
                        // Each thread in its own order, so that different sessions overlap.
                        let i = (step * (2 * thread + 1) + round) % sessions.len();
                        let seen = session(&sessions[i]);
                        assert_eq!(
                            seen, serial[i],
                            "thread {thread}, round {round}, session {i}"
                        );
                    }
                }
            });
        }
    });
}
