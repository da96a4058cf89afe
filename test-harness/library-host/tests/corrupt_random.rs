//! Long damaged lists cost linear reads, and random garbage written anywhere into an image
//! never crashes, leaks or reads without bound.

mod support;

use mqd_mpich::error::Error;
use mqd_synthetic::{Arch, GroupSide, Layout, ProcessSpec, SyntheticTarget};
use mqd_target::DebugInfo;
use proptest::prelude::*;
use support::*;

// ---------------------------------------------------------------------------------------
// Long lists: reads grow with the list, not faster.

/// Cycles in a long communicator list and long queues are found in O(length) reads: at
/// most a few times what the clean display of the same image costs.
#[test]
fn cycles_in_long_lists_cost_linear_reads() {
    const COMMS: usize = 64;
    const REQUESTS: usize = 512;
    for layout in Layout::ALL {
        for arch in [Arch::LP64_LE, Arch::ILP32_LE] {
            let spec = ProcessSpec::big_queue(layout, arch, COMMS, REQUESTS);
            let clean = spec.build();
            let base = run(clean.clone(), "big clean");
            assert_hygiene(&base, u64::MAX);
            base.display();
            let clean_fetches = base.counters.fetches;
            // A clean display is itself linear: one read per object, plus groups.
            assert!(
                clean_fetches <= 2 * (8 * COMMS + 3 * REQUESTS) as u64,
                "{}: {clean_fetches} reads for {COMMS} communicators and {REQUESTS} requests",
                base.what
            );
            let bound = 4 * clean_fetches + 100;

            let last = spec.comms.last().unwrap().slot;
            for (what, to) in [
                ("last -> first", spec.comms[0].slot),
                ("last -> middle", spec.comms[COMMS / 2].slot),
            ] {
                let mut t = clean.clone();
                t.write_pointer(comm_next(&t, last), t.comm_address(to))
                    .unwrap();
                let run = run(t, format!("{COMMS} communicators, {what}"));
                assert_display_fails(&run, Error::ListCycle);
                assert_hygiene(&run, bound);
            }
            for kind in QUEUES {
                let n = queue_len(&spec, kind);
                let link = next_link(&clean, kind);
                for (what, to) in [("last -> first", 0), ("last -> middle", n / 2)] {
                    let mut t = clean.clone();
                    t.write_pointer(node(&t, kind, n - 1) + link, node(&t, kind, to))
                        .unwrap();
                    let run = run(t, format!("{kind:?} of {n}, {what}"));
                    assert_hygiene(&run, bound);
                    for c in &run.display().communicators {
                        let e = queue_of(c, kind)
                            .error()
                            .unwrap_or_else(|| panic!("{}: {}: no error", run.what, c.name));
                        assert_error(e, Error::ListCycle, "loops", &run.what);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Random garbage.

/// What one random write puts into the target.
#[derive(Debug, Clone)]
enum Garbage {
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A pointer to (or near) one of the image's objects: makes cycles and cross-links.
    Pointer(prop::sample::Index, u16),
    /// A pointer that leads nowhere.
    Wild(u64),
    /// An `int` a size or count field may be given.
    Int(i32),
}

fn garbage() -> impl Strategy<Value = Garbage> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 1..24).prop_map(Garbage::Bytes),
        (any::<prop::sample::Index>(), 0u16..64).prop_map(|(i, d)| Garbage::Pointer(i, d)),
        prop_oneof![
            Just(0u64),
            Just(8),
            Just(u64::MAX),
            Just(0xdead_beef),
            any::<u64>()
        ]
        .prop_map(Garbage::Wild),
        prop_oneof![
            Just(0),
            Just(-1),
            Just(2),
            Just(BILLION),
            Just(i32::MIN),
            Just((1 << 24) + 1),
            any::<i32>()
        ]
        .prop_map(Garbage::Int),
    ]
}

/// The objects of an image worth damaging: `(address, size)`.
fn objects(spec: &ProcessSpec, t: &SyntheticTarget) -> Vec<(u64, u64)> {
    let mut objects = vec![(
        t.find_symbol("MPIR_All_communicators").unwrap(),
        t.size_of("MPIR_Comm_list"),
    )];
    for c in &spec.comms {
        objects.push((t.comm_address(c.slot), t.size_of("MPIR_Comm")));
        for side in [GroupSide::Local, GroupSide::Remote] {
            if let Some(g) = t.group_address(c.slot, side) {
                objects.push((g, t.size_of("MPIR_Group")));
            }
        }
    }
    let node_type = match spec.layout {
        Layout::Ch3 | Layout::Ch4Am => "MPIR_Sendq",
        Layout::Debugq4 | Layout::Debugq5 => "MPIR_Debugq",
    };
    for kind in QUEUES {
        for i in 0..queue_len(spec, kind) {
            let request = t.request_address(kind, i).unwrap();
            objects.push((request, t.size_of("MPIR_Request")));
            let n = node(t, kind, i);
            if n != request {
                objects.push((n, t.size_of(node_type)));
            }
        }
    }
    objects
}

proptest! {
    // A fixed seed: the same cases on every run, so a failure is reproducible.
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6d71_6421),
        ..ProptestConfig::default()
    })]

    /// Random garbage over random offsets of communicators, groups, requests and nodes
    /// never crashes: displays succeed or fail with a corruption code, reads stay bounded,
    /// nothing leaks or is freed twice.
    #[test]
    fn random_garbage_never_crashes(
        layout in 0..4usize,
        arch in 0..3usize,
        writes in prop::collection::vec(
            (any::<prop::sample::Index>(), any::<prop::sample::Index>(), garbage()),
            1..10,
        ),
    ) {
        let spec = ProcessSpec::example(Layout::ALL[layout], ARCHES[arch]);
        let mut t = spec.build();
        let objects = objects(&spec, &t);
        let p = u64::from(ARCHES[arch].pointer_size);
        for (which, offset, value) in &writes {
            let (base, size) = objects[which.index(objects.len())];
            let offset = offset.index(size as usize) as u64;
            // Writes that would cross into a hole are simply not made.
            let _ = match value {
                Garbage::Bytes(bytes) => t.write_bytes(base + offset, bytes),
                Garbage::Pointer(to, delta) => {
                    let (to, _) = objects[to.index(objects.len())];
                    t.write_pointer(base + offset / p * p, to + u64::from(*delta))
                }
                Garbage::Wild(value) => t.write_pointer(base + offset / p * p, *value),
                Garbage::Int(value) => t.write_i32(base + offset / 4 * 4, *value),
            };
        }
        let run = run(t, format!("garbage {writes:?}"));
        prop_assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
        prop_assert!(run.counters.fetches < 10_000, "{}: {} reads", run.what, run.counters.fetches);
        prop_assert_eq!(run.counters.bad_frees, 0);
        prop_assert_eq!(run.counters.bad_handles, 0);
        prop_assert_eq!(run.counters.callback_panics, 0);
        prop_assert_eq!(run.after_drop.outstanding_allocations, 0, "{}", run.what);
        let corruption = [Error::ReadFailed, Error::ListCycle, Error::ListTooLong, Error::ImplausibleValue];
        for e in all_errors(&run) {
            prop_assert!(
                Error::from_code(e.code).is_some_and(|c| corruption.contains(&c)),
                "{}: unexpected error {}", run.what, e
            );
        }
    }
}
