//! Target reads: one `mqs_fetch_data` per target object per element, and each
//! queue walked once per display whatever the number of communicators.

use mqd_fixtures::expect::*;
use mqd_synthetic::{Arch, Layout, ProcessSpec};

/// Fetches of one display of a fresh session.
fn display_fetches(spec: &ProcessSpec) -> (u64, u64) {
    let (dbg, display) = display_once(spec.build(), 0);
    assert!(display.communicators.iter().all(|c| {
        [
            &c.pending_receives,
            &c.unexpected_messages,
            &c.pending_sends,
        ]
        .iter()
        .all(|q| q.error().is_none())
    }));
    let c = dbg.counters();
    let handle = dbg.counter_handle();
    drop(dbg);
    assert_eq!(
        handle.snapshot().outstanding_allocations,
        0,
        "debugger memory leaked"
    );
    (c.fetches, c.fetch_bytes)
}

/// Reads spent on the queues: a display minus the same display with empty queues.
fn queue_fetches(layout: Layout, comms: usize, requests: usize) -> (u64, ProcessSpec) {
    let spec = ProcessSpec::big_queue(layout, Arch::LP64_LE, comms, requests);
    let mut empty = spec.clone();
    empty.posted.clear();
    empty.unexpected.clear();
    empty.sends.clear();
    (display_fetches(&spec).0 - display_fetches(&empty).0, spec)
}

#[test]
fn one_fetch_per_target_object() {
    for layout in LAYOUTS {
        let (fetches, spec) = queue_fetches(layout, 10, 2000);
        let (posted, unexpected, sends) = (
            spec.posted.len() as u64,
            spec.unexpected.len() as u64,
            spec.sends.len() as u64,
        );
        // Objects per element: A and B receive queues hold the request itself (and
        // B's unexpected messages their extension, with the message state); a send is
        // an MPIR_Sendq node plus its request; layout C reads the MPIR_Debugq node plus
        // its request (for cc), unexpected entries the node only.
        let expected = match layout {
            Layout::Ch3 => posted + unexpected + 2 * sends,
            Layout::Ch4Am => posted + 2 * unexpected + 2 * sends,
            Layout::Debugq4 | Layout::Debugq5 => 2 * posted + unexpected + 2 * sends,
        };
        assert_eq!(
            fetches,
            expected,
            "{}: {posted} posted, {unexpected} unexpected, {sends} sends",
            layout.name()
        );
    }
}

#[test]
fn queue_reads_do_not_depend_on_the_number_of_communicators() {
    for layout in LAYOUTS {
        let counts: Vec<u64> = [1, 10, 200]
            .iter()
            .map(|&c| queue_fetches(layout, c, 3000).0)
            .collect();
        assert!(
            counts.windows(2).all(|w| w[0] == w[1]),
            "{}: {counts:?}",
            layout.name()
        );
    }
}
