//! What happens between two stops: communicators freed and created, names set,
//! queues drained; identities stay stable and nothing stale or dangling is shown.

use mqd_fixtures::expect::*;
use mqd_synthetic::{Arch, BuildOptions, CommSpec, ProcessSpec, RequestSpec, SyntheticTarget};
use std::collections::HashMap;

fn ids(display: &mqd_library_host::session::Display) -> HashMap<String, u64> {
    display
        .communicators
        .iter()
        .map(|c| (c.name.clone(), c.unique_id))
        .collect()
}

/// A communicator freed and one created between two updates (MPICH's DLL
/// crashes on the first): the freed one disappears, the new one appears, the
/// others keep their unique ids.
#[test]
fn communicator_freed_and_created_between_updates() {
    for layout in LAYOUTS {
        for arch in ARCHES {
            let before = ProcessSpec::example(layout, arch);
            let mut after = before.clone();
            after.comms.retain(|c| c.name != "split");
            after
                .comms
                .insert(0, CommSpec::intra(9, "created later", 560, 0, vec![1, 2]));
            after.unexpected.retain(|r| r.context_id != 496);
            after.posted.push(RequestSpec::recv(560, 1, 4, 0x9000, 1));
            after.sequence_number += 2;

            let mut dbg = debugger();
            let first = before.build();
            let p = dbg.add_process(Box::new(first), 1).expect("setup");
            let d1 = dbg.display(p).expect("first display");
            let second = after.build();
            let want = expected_display(&after, &BuildOptions::default(), &second, 1);
            dbg.replace_target(p, Box::new(second)).expect("replace");
            let d2 = dbg.display(p).expect("second display");
            let what = format!("{} {}", layout.name(), arch.name());
            assert_display(&what, &d2, &want);
            let (i1, i2) = (ids(&d1), ids(&d2));
            assert!(
                i1.contains_key("split") && !i2.contains_key("split"),
                "{what}"
            );
            assert!(
                i2.contains_key("created later") && !i1.contains_key("created later"),
                "{what}"
            );
            for name in [
                "MPI_COMM_WORLD",
                "MPI_COMM_SELF",
                "Dup of comm world",
                "inter",
            ] {
                assert_eq!(i1[name], i2[name], "{what}: unique_id of {name} changed");
            }
            let handle = dbg.counter_handle();
            drop(dbg);
            assert_eq!(handle.snapshot().outstanding_allocations, 0, "{what}");
        }
    }
}

/// An unchanged `sequence_number` keeps the communicator list (groups are not
/// re-read) but queues and names are read afresh at every display.
#[test]
fn unchanged_sequence_number_reuses_the_list_and_refreshes_names() {
    for layout in LAYOUTS {
        let spec = ProcessSpec::example(layout, Arch::LP64_LE);
        let mut dbg = debugger();
        let p = dbg.add_process(Box::new(spec.build()), 1).expect("setup");
        dbg.reset_counters();
        dbg.display(p).expect("first display");
        let rebuild = dbg.counters().fetches;

        // The program ran: one receive matched, the dup got a new name.
        let mut later = spec.clone();
        later.posted.retain(|r| r.tag != 17);
        let mut target = later.build();
        let dup = target.comm_address(2) + target.offset_of("MPIR_Comm", "name");
        target
            .write_bytes(dup, b"renamed dup\0")
            .expect("write name");
        dbg.replace_target(p, Box::new(target)).expect("replace");
        dbg.reset_counters();
        let d = dbg.display(p).expect("second display");
        let reuse = dbg.counters().fetches;
        assert!(
            reuse < rebuild,
            "{}: {reuse} fetches with an unchanged list, {rebuild} to build it",
            layout.name()
        );
        let names: Vec<&str> = d.communicators.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"renamed dup"),
            "{}: {names:?}",
            layout.name()
        );
        assert!(
            d.communicators.iter().all(|c| c
                .pending_receives
                .ops()
                .iter()
                .all(|o| o.desired_tag != 17))
        );
    }
}

/// MPICH's tvtest: a dup named "Dup of comm world", receives with tags 17 and
/// 19 from the right neighbour, a send with tag 18 to the left; three displays
/// as messages are exchanged.
#[test]
fn tvtest_scenario_three_displays() {
    for layout in LAYOUTS {
        for arch in ARCHES {
            let (rank, size) = (0, 2);
            let right = (rank + 1) % size;
            let left = (rank + size - 1) % size;
            let mut spec = ProcessSpec::new(layout, arch);
            spec.sequence_number = 3;
            spec.comms = vec![
                CommSpec::intra(2, "Dup of comm world", 480, rank, (0..size).collect()),
                CommSpec::self_comm(rank),
                CommSpec::world(size, rank),
            ];
            spec.posted = vec![
                RequestSpec::recv(480, right, 17, 0x1000, 1),
                RequestSpec::recv(480, right, 19, 0x2000, 1),
            ];
            spec.sends = vec![RequestSpec::send(0, left, 18, 0x3000, 1)];
            let mut second = spec.clone();
            second.posted.remove(0);
            second.sends.clear();
            let mut third = second.clone();
            third.posted.clear();

            let mut dbg = debugger();
            let p = dbg
                .add_process(Box::new(spec.build()), rank)
                .expect("setup");
            let mut entries = Vec::new();
            for (i, s) in [&spec, &second, &third].into_iter().enumerate() {
                let target = s.build();
                let want = expected_display(s, &BuildOptions::default(), &target, rank);
                if i > 0 {
                    dbg.replace_target(p, Box::new(target)).expect("replace");
                }
                let d = dbg.display(p).expect("display");
                assert_display(
                    &format!("{} {} display {i}", layout.name(), arch.name()),
                    &d,
                    &want,
                );
                assert_eq!(d.communicators.len(), 3);
                entries.push(
                    d.communicators
                        .iter()
                        .map(|c| {
                            c.pending_receives.ops().len()
                                + c.unexpected_messages.ops().len()
                                + c.pending_sends.ops().len()
                        })
                        .sum::<usize>(),
                );
            }
            assert_eq!(entries, [3, 1, 0], "{} {}", layout.name(), arch.name());
        }
    }
}

/// A debugger that passes NULL dprints, errorstring and sizeof (tvtest does)
/// still gets full displays; without sizeof the widths come from the ABI.
#[test]
fn null_optional_callbacks_are_tolerated() {
    use mqd_library_host::library::{BasicOptions, MqsLibrary};
    use mqd_library_host::session::{Session, SessionOptions};
    let path = mqd_library_host::library::bundled_library().expect("built library");
    let lib = std::sync::Arc::new(
        MqsLibrary::load_with(
            &path,
            BasicOptions {
                null_dprints_and_errorstring: true,
            },
        )
        .expect("load"),
    );
    for layout in LAYOUTS {
        let spec = ProcessSpec::example(layout, Arch::LP64_LE);
        let target = SyntheticTarget::build(&spec);
        let want = expected_display(&spec, &BuildOptions::default(), &target, 1);
        let mut dbg = Session::new(
            lib.clone(),
            SessionOptions {
                null_sizeof: true,
                ..SessionOptions::default()
            },
        );
        let p = dbg
            .add_process(Box::new(target), 1)
            .expect("setup without sizeof");
        let d = dbg.display(p).expect("display");
        assert_display(&format!("{} without sizeof", layout.name()), &d, &want);
    }
}

/// A debugger that does not know the process's rank (`mqd dump PID`) still gets
/// single-process communicators' groups: COMM_WORLD's rank is the process's.
#[test]
fn unknown_global_rank_is_learnt_from_comm_world() {
    for layout in LAYOUTS {
        let mut spec = ProcessSpec::example(layout, Arch::LP64_LE);
        for c in &mut spec.comms {
            if c.name == "MPI_COMM_SELF" {
                c.local_group = None;
            }
        }
        let (_dbg, display) = display_once(spec.build(), -1);
        let own = display
            .communicators
            .iter()
            .find(|c| c.name == "MPI_COMM_SELF")
            .expect("self");
        assert_eq!(
            own.group
                .as_ref()
                .map(mqd_model::CommGroup::to_vec)
                .as_deref(),
            Some(&[1][..]),
            "{}",
            layout.name()
        );
    }
}
