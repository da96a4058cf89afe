//! What the image lacks: types, fields and symbols of MPICH's debugger support, named in
//! the has-queues message; optional pieces degrade the display; failures do not stick.

mod support;

use mqd_library_host::session::{Display, Queue, Session, SessionOptions};
use mqd_model::OperationStatus;
use mqd_mpich::error::Error;
use mqd_synthetic::{Arch, Layout, ProcessSpec, QueueKind};
use mqd_target::{DebugInfo, Target};
use support::*;

// ---------------------------------------------------------------------------------------
// What the image lacks.

/// Checks a setup failure: the code, its text, and a has-queues message that names the
/// missing thing, the image, and the likely cause.
fn check_missing(run: &Run, expected: Error, names: &str, failures: &mut Vec<String>) {
    let e = match &run.setup {
        Ok(()) => {
            failures.push(format!(
                "{}: setup succeeded, {expected:?} expected",
                run.what
            ));
            return;
        }
        Err(e) => e,
    };
    if Error::from_code(e.code) != Some(expected) {
        failures.push(format!("{}: expected {expected:?}, got {e}", run.what));
        return;
    }
    if e.text != expected.text().to_str().unwrap() {
        failures.push(format!("{}: text {:?}", run.what, e.text));
    }
    // The failed process answers displays with the same error.
    if run.displays[0].as_ref().err() != Some(e) {
        failures.push(format!(
            "{}: display after failed setup: {:?}",
            run.what, run.displays[0]
        ));
    }
    match &e.message {
        None => failures.push(format!("{}: no has-queues message", run.what)),
        Some(m) => {
            if !m.contains(names) {
                failures.push(format!(
                    "{}: message does not name {names:?}: {m}",
                    run.what
                ));
            }
            if !m.contains("--enable-debuginfo") {
                failures.push(format!(
                    "{}: message does not say --enable-debuginfo: {m}",
                    run.what
                ));
            }
            if !m.contains("synthetic") || m.contains("%s") {
                failures.push(format!(
                    "{}: message does not name the image: {m}",
                    run.what
                ));
            }
        }
    }
}

/// Removing a type the layout needs makes setup fail with MissingType, and the message
/// names the type and says --enable-debuginfo.
#[test]
fn missing_types_are_named() {
    let mut failures = Vec::new();
    for layout in Layout::ALL {
        let mut types = vec!["MPIR_Comm_list", "MPIR_Comm", "MPIR_Request"];
        types.extend(match layout {
            Layout::Ch3 => &["MPIDI_Request", "MPIDI_Message_match"][..],
            Layout::Ch4Am => &["MPIDI_Devreq_t", "MPIDIG_req_t"][..],
            Layout::Debugq4 | Layout::Debugq5 => &["MPIR_Debugq"][..],
        });
        for arch in [Arch::LP64_LE, Arch::ILP32_LE] {
            for ty in &types {
                let mut t = ProcessSpec::example(layout, arch).build();
                assert!(t.remove_type(ty), "{ty} in {}", t.name());
                let run = run(t, format!("without type {ty}"));
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                check_missing(&run, Error::MissingType, ty, &mut failures);
            }
        }
    }
    finish(failures);
}

/// The fields each layout cannot do without.
fn required_fields(layout: Layout) -> Vec<(&'static str, &'static str)> {
    let mut fields = vec![
        ("MPIR_Comm", "recvcontext_id"),
        ("MPIR_Comm", "context_id"),
        ("MPIR_Comm", "comm_next"),
        ("MPIR_Comm", "rank"),
        ("MPIR_Comm", "name"),
        ("MPIR_Comm_list", "head"),
        ("MPIR_Comm_list", "sequence_number"),
    ];
    fields.extend(match layout {
        Layout::Ch3 => &[
            ("MPIDI_Request", "user_buf"),
            ("MPIDI_Request", "user_count"),
            ("MPIDI_Request", "match"),
            ("MPIDI_Request", "next"),
            ("MPIR_Request", "dev"),
        ][..],
        Layout::Ch4Am => &[
            ("MPIDIG_req_t", "buffer"),
            ("MPIDIG_req_t", "count"),
            ("MPIR_Request", "next"),
            ("MPIR_Request", "dev"),
        ][..],
        Layout::Debugq4 | Layout::Debugq5 => &[("MPIR_Debugq", "next"), ("MPIR_Debugq", "req")][..],
    });
    fields
}

/// Removing a field the layout needs makes setup fail with MissingField, and the message
/// names `Type.field` and says --enable-debuginfo.
#[test]
fn missing_fields_are_named() {
    let mut failures = Vec::new();
    for layout in Layout::ALL {
        let fields = required_fields(layout);
        for arch in [Arch::LP64_LE, Arch::LP64_BE] {
            for (ty, field) in &fields {
                let mut t = ProcessSpec::example(layout, arch).build();
                assert!(t.remove_field(ty, field), "{ty}.{field} in {}", t.name());
                // CH3 links requests through MPIDI_Request.next up to MPICH 3.x and
                // MPIR_Request.next in 4.x: only without both is the link missing.
                let (ty, field) =
                    if layout == Layout::Ch3 && (*ty, *field) == ("MPIDI_Request", "next") {
                        assert!(t.remove_field("MPIR_Request", "next"));
                        (&"MPIR_Request", &"next")
                    } else {
                        (ty, field)
                    };
                let run = run(t, format!("without field {ty}.{field}"));
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                check_missing(
                    &run,
                    Error::MissingField,
                    &format!("{ty}.{field}"),
                    &mut failures,
                );
            }
        }
    }
    finish(failures);
}

/// A type table that places a needed field past any MPICH object (damaged DWARF, or
/// types that are not MPICH's) fails setup with ImplausibleValue naming the field, and is
/// never read: the dll fuzz target found the library reading a gigabyte for one request.
#[test]
fn fields_placed_past_any_object_are_damage() {
    let mut failures = Vec::new();
    for layout in Layout::ALL {
        for arch in [Arch::LP64_LE, Arch::ILP32_BE] {
            for (ty, field) in required_fields(layout) {
                // CH3's link has a second home (MPIR_Request.next) that is then used.
                if layout == Layout::Ch3 && (ty, field) == ("MPIDI_Request", "next") {
                    continue;
                }
                let mut t = ProcessSpec::example(layout, arch).build();
                assert!(t.set_member_offset(ty, field, 1 << 30), "{ty}.{field}");
                let run = run(t, format!("{ty}.{field} at 1 GiB"));
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                let message = run.setup.as_ref().err().and_then(|e| e.message.clone());
                let code = run.setup.as_ref().err().map(|e| Error::from_code(e.code));
                if code != Some(Some(Error::ImplausibleValue)) {
                    failures.push(format!("{}: setup gave {:?}", run.what, run.setup));
                } else if !message
                    .as_deref()
                    .is_some_and(|m| m.contains(&format!("{ty}.{field}")) && m.contains("damaged"))
                {
                    failures.push(format!("{}: message {message:?}", run.what));
                }
            }
        }
    }
    finish(failures);
}

/// A group-table entry the debugger sizes at 64 kB (two or three integers in MPICH) is
/// not believed: the display still comes, and no read is larger than an object. Found by
/// the dll fuzz target, which saw one read of the whole table at that stride.
#[test]
fn absurd_group_entry_sizes_are_not_believed() {
    let mut checked = 0;
    for layout in Layout::ALL {
        for arch in Arch::ALL {
            let spec = ProcessSpec::example(layout, arch);
            let mut t = spec.build();
            if !t.set_type_size("MPII_Group_pmap_t", 0xfff0) {
                continue;
            }
            let run = run(t, "MPII_Group_pmap_t of 65,520 bytes");
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            assert!(run.setup.is_ok(), "{}: {:?}", run.what, run.setup);
            assert_eq!(
                run.display().communicators.len(),
                spec.comms.len(),
                "{}",
                run.what
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no layout serves MPII_Group_pmap_t");
}

/// Removing a global of MPICH's debugger support makes setup fail with MissingSymbol, and
/// the message names that symbol and says --enable-debuginfo.
#[test]
fn missing_symbols_are_named() {
    let mut failures = Vec::new();
    for layout in Layout::ALL {
        let symbols: &[&str] = match layout {
            Layout::Ch3 | Layout::Ch4Am => &[
                "MPIR_All_communicators",
                "MPID_Recvq_posted_head_ptr",
                "MPID_Recvq_unexpected_head_ptr",
            ],
            Layout::Debugq4 | Layout::Debugq5 => &[
                "MPIR_All_communicators",
                "MPIR_Recvq_head",
                "MPIR_Unexpq_head",
            ],
        };
        for arch in [Arch::LP64_LE, Arch::ILP32_LE] {
            for symbol in symbols {
                let mut t = ProcessSpec::example(layout, arch).build();
                assert!(t.remove_symbol(symbol), "{symbol} in {}", t.name());
                let run = run(t, format!("without symbol {symbol}"));
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                check_missing(&run, Error::MissingSymbol, symbol, &mut failures);
            }
        }
    }
    finish(failures);
}

/// MPIR_Sendq_head is optional: without it the sends are "no information", the rest works.
#[test]
fn missing_send_queue_is_no_information() {
    for (_, clean, clean_display) in images() {
        let mut t = clean.clone();
        assert!(t.remove_symbol("MPIR_Sendq_head"));
        let run = run(t, "without MPIR_Sendq_head");
        assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        for (c, before) in run
            .display()
            .communicators
            .iter()
            .zip(&clean_display.communicators)
        {
            assert_eq!(
                c.pending_sends,
                Queue::NoInformation,
                "{}: {}",
                run.what,
                c.name
            );
            assert_eq!(c.pending_receives, before.pending_receives, "{}", run.what);
            assert_eq!(
                c.unexpected_messages, before.unexpected_messages,
                "{}",
                run.what
            );
        }
    }
}

/// What a display without one optional piece still shows, beside every entry.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fallback {
    /// Exactly the clean display.
    Same,
    /// Completion unknown: every entry pending, nothing matched.
    AllPending,
    /// Completed entries without their matched source and tag.
    NoStatus,
    /// Sends "no information", the rest the clean display.
    NoSends,
    /// Groups known only for COMM_WORLD and COMM_SELF.
    WorldAndSelfGroups,
    /// Message kinds unknown: the same entries, fewer notes.
    FewerNotes,
}

/// One optional piece removed from the image: which, where, what it costs.
struct Optional {
    what: &'static str,
    remove: &'static [(&'static str, Option<&'static str>)],
    layouts: &'static [Layout],
    /// The cost the has-queues message names.
    cost: &'static str,
    fallback: Fallback,
}

const REQUEST_LISTS: &[Layout] = &[Layout::Ch3, Layout::Ch4Am];
const DEBUGQ: &[Layout] = &[Layout::Debugq4, Layout::Debugq5];

const OPTIONAL: &[Optional] = &[
    Optional {
        what: "MPIR_Comm.local_size",
        remove: &[("MPIR_Comm", Some("local_size"))],
        layouts: &Layout::ALL,
        cost: "sizes from remote_size",
        fallback: Fallback::Same,
    },
    Optional {
        what: "MPIR_Comm.comm_kind",
        remove: &[("MPIR_Comm", Some("comm_kind"))],
        layouts: &Layout::ALL,
        cost: "intercommunicators told apart by their context ids only",
        fallback: Fallback::Same,
    },
    Optional {
        what: "MPIR_Request.cc",
        remove: &[("MPIR_Request", Some("cc"))],
        layouts: &Layout::ALL,
        cost: "completion unknown",
        fallback: Fallback::AllPending,
    },
    Optional {
        what: "MPIR_Request.status",
        remove: &[("MPIR_Request", Some("status"))],
        layouts: &Layout::ALL,
        cost: "sources and tags of completed receives unknown",
        fallback: Fallback::NoStatus,
    },
    Optional {
        what: "MPI_Status",
        remove: &[("MPI_Status", None)],
        layouts: &Layout::ALL,
        cost: "sources and tags of completed receives unknown",
        fallback: Fallback::NoStatus,
    },
    Optional {
        what: "MPIR_Sendq",
        remove: &[("MPIR_Sendq", None)],
        layouts: REQUEST_LISTS,
        cost: "sends not listed",
        fallback: Fallback::NoSends,
    },
    Optional {
        what: "MPIR_Sendq.sreq",
        remove: &[("MPIR_Sendq", Some("sreq"))],
        layouts: REQUEST_LISTS,
        cost: "sends not listed",
        fallback: Fallback::NoSends,
    },
    Optional {
        what: "MPIR_Group (a device table remains)",
        remove: &[("MPIR_Group", None)],
        layouts: REQUEST_LISTS,
        cost: "",
        fallback: Fallback::Same,
    },
    Optional {
        what: "MPIR_Group",
        remove: &[("MPIR_Group", None)],
        layouts: DEBUGQ,
        cost: "world ranks unknown but for COMM_WORLD",
        fallback: Fallback::WorldAndSelfGroups,
    },
    Optional {
        what: "MPIR_Pmap",
        remove: &[("MPIR_Pmap", None)],
        layouts: &[Layout::Debugq5],
        cost: "world ranks unknown but for COMM_WORLD",
        fallback: Fallback::WorldAndSelfGroups,
    },
    Optional {
        what: "every group source",
        remove: &[
            ("MPIR_Group", None),
            ("MPIDI_VCRT", None),
            ("MPIDI_rank_map_t", None),
        ],
        layouts: &Layout::ALL,
        cost: "world ranks unknown but for COMM_WORLD",
        fallback: Fallback::WorldAndSelfGroups,
    },
    Optional {
        what: "MPIDIG_req_ext_t",
        remove: &[("MPIDIG_req_ext_t", None)],
        layouts: &[Layout::Ch4Am],
        cost: "eager, rendezvous and synchronous messages not told apart",
        fallback: Fallback::FewerNotes,
    },
    Optional {
        what: "MPIDI_Request.state",
        remove: &[("MPIDI_Request", Some("state"))],
        layouts: &[Layout::Ch3],
        cost: "eager, rendezvous and synchronous messages not told apart",
        fallback: Fallback::FewerNotes,
    },
];

/// What stays of an operation whatever optional piece is missing.
fn essentials(op: &mqd_model::Operation) -> (i64, bool, i64, i64, u64) {
    (
        op.desired_local_rank,
        op.tag_wild,
        op.desired_tag,
        op.desired_length,
        op.buffer,
    )
}

/// Checks one degraded display against the clean one under its fallback.
fn check_fallback(run: &Run, row: &Optional, clean: &Display, failures: &mut Vec<String>) {
    let d = run.display();
    if row.fallback == Fallback::Same {
        if d != clean {
            failures.push(format!("{}: display differs from the clean one", run.what));
        }
        return;
    }
    let mut fail = |what: String| failures.push(format!("{}: {what}", run.what));
    if d.communicators.len() != clean.communicators.len() {
        fail(format!("{} communicators", d.communicators.len()));
        return;
    }
    for (c, before) in d.communicators.iter().zip(&clean.communicators) {
        if (c.unique_id, &c.name, c.size, c.local_rank)
            != (
                before.unique_id,
                &before.name,
                before.size,
                before.local_rank,
            )
        {
            fail(format!("{}: identity changed", c.name));
        }
        let world_or_self = c.name == "MPI_COMM_WORLD" || c.name == "MPI_COMM_SELF";
        match row.fallback {
            Fallback::WorldAndSelfGroups if world_or_self => {
                if c.group != before.group {
                    fail(format!("{}: group {:?}", c.name, c.group));
                }
            }
            Fallback::WorldAndSelfGroups => {
                if c.group.is_some() {
                    fail(format!(
                        "{}: a group without a table: {:?}",
                        c.name, c.group
                    ));
                }
            }
            _ => {
                if c.group != before.group {
                    fail(format!("{}: group {:?}", c.name, c.group));
                }
            }
        }
        for kind in QUEUES {
            let (q, b) = (queue_of(c, kind), queue_of(before, kind));
            if row.fallback == Fallback::NoSends && kind == QueueKind::Sends {
                if q != &Queue::NoInformation {
                    fail(format!("{}: sends {q:?}", c.name));
                }
                continue;
            }
            if let Some(e) = q.error() {
                fail(format!("{}: {kind:?}: {e}", c.name));
                continue;
            }
            let (ops, before_ops) = (q.ops(), b.ops());
            let same: Vec<_> = ops.iter().map(essentials).collect();
            let expected: Vec<_> = before_ops.iter().map(essentials).collect();
            if same != expected {
                fail(format!("{}: {kind:?}: {same:?} != {expected:?}", c.name));
                continue;
            }
            for (op, before_op) in ops.iter().zip(before_ops) {
                let ok = match row.fallback {
                    Fallback::AllPending => {
                        op.status == OperationStatus::Pending
                            && (kind != QueueKind::Posted || op.actual_tag == -1)
                    }
                    Fallback::NoStatus if kind == QueueKind::Posted => {
                        op.status == before_op.status
                            && (before_op.status != OperationStatus::Complete
                                || (op.actual_local_rank, op.actual_tag) == (-1, -1))
                    }
                    Fallback::WorldAndSelfGroups => {
                        op.status == before_op.status
                            && (world_or_self
                                || before_op.desired_global_rank < 0
                                || op.desired_global_rank == -1)
                    }
                    Fallback::FewerNotes => op.status == before_op.status && op.sender.is_none(),
                    _ => op.status == before_op.status,
                };
                if !ok {
                    fail(format!("{}: {kind:?}: {op:?}, clean {before_op:?}", c.name));
                }
            }
        }
    }
}

/// Optional type information missing (each row of [`OPTIONAL`]) is no error: setup
/// succeeds, the has-queues message names what it costs, and the display degrades only
/// as documented, with every queue entry still listed.
#[test]
fn missing_optional_information_degrades_the_display() {
    let mut failures = Vec::new();
    for (spec, clean, clean_display) in images() {
        for row in OPTIONAL.iter().filter(|r| r.layouts.contains(&spec.layout)) {
            let mut t = clean.clone();
            for (ty, field) in row.remove {
                let removed = match field {
                    Some(f) => t.remove_field(ty, f),
                    None => t.remove_type(ty),
                };
                // "every group source" names the tables of every device.
                if !removed && row.remove.len() == 1 {
                    failures.push(format!("{}: {ty} {field:?} not in {}", row.what, t.name()));
                }
            }
            let run = run(t, format!("without optional {}", row.what));
            if let Err(e) = &run.setup {
                failures.push(format!("{}: setup failed: {e}", run.what));
                continue;
            }
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            let message = run.image_message.as_deref().unwrap_or("");
            if !message.contains(row.cost) {
                failures.push(format!(
                    "{}: message lacks {:?}: {message}",
                    run.what, row.cost
                ));
            }
            let listing = mqd_abi::notes::SendListing::find(message)
                .map(|l| format!("; {}", l.text()))
                .unwrap_or_default();
            if row.cost.is_empty() && message.replace(&listing, "").contains(';') {
                failures.push(format!("{}: a cost named for nothing: {message}", run.what));
            }
            check_fallback(&run, row, &clean_display, &mut failures);
        }
    }
    finish(failures);
}

/// A failed display does not poison the next: once memory is sound again (the process
/// ran and stopped), the display is exactly the clean one, and nothing leaks.
#[test]
fn failures_do_not_stick() {
    for (spec, clean, clean_display) in images() {
        let sequence = clean.find_symbol("MPIR_All_communicators").unwrap()
            + clean.offset_of("MPIR_Comm_list", "sequence_number");
        // A new list (sequence number moved) that loops.
        let mut looping = clean.clone();
        looping
            .write_i32(sequence, spec.sequence_number + 1)
            .unwrap();
        let last = spec.comms.last().unwrap().slot;
        looping
            .write_pointer(
                comm_next(&looping, last),
                looping.comm_address(spec.comms[0].slot),
            )
            .unwrap();
        // Unchanged list, a posted queue that loops.
        let mut queue = clean.clone();
        let n = spec.posted.len();
        queue
            .write_pointer(
                node(&queue, QueueKind::Posted, n - 1) + next_link(&queue, QueueKind::Posted),
                node(&queue, QueueKind::Posted, 0),
            )
            .unwrap();
        // A list whose head is unreadable.
        let mut unreadable = clean.clone();
        unreadable
            .write_i32(sequence, spec.sequence_number + 2)
            .unwrap();
        unreadable
            .write_pointer(comm_list_head(&unreadable), unreadable.unmapped_address())
            .unwrap();

        let mut dbg = Session::new(library(), SessionOptions::default());
        let handle = dbg.counter_handle();
        let what = clean.name();
        let p = dbg.add_process(Box::new(clean.clone()), 1).unwrap();
        assert_eq!(dbg.display(p).as_ref(), Ok(&clean_display), "{what}");
        for (broken, expected) in [(looping, Error::ListCycle), (unreadable, Error::ReadFailed)] {
            dbg.replace_target(p, Box::new(broken)).unwrap();
            let e = dbg.display(p).expect_err("a corrupt list");
            assert_error(&e, expected, needle(expected), &what);
            dbg.replace_target(p, Box::new(clean.clone())).unwrap();
            assert_eq!(
                dbg.display(p).as_ref(),
                Ok(&clean_display),
                "{what}: after {expected:?}"
            );
        }
        dbg.replace_target(p, Box::new(queue)).unwrap();
        let d = dbg.display(p).unwrap();
        for c in &d.communicators {
            assert_error(
                c.pending_receives.error().expect("looping posted queue"),
                Error::ListCycle,
                "loops",
                &what,
            );
        }
        dbg.replace_target(p, Box::new(clean.clone())).unwrap();
        assert_eq!(
            dbg.display(p).as_ref(),
            Ok(&clean_display),
            "{what}: after a looping queue"
        );
        assert_eq!(dbg.counters().bad_frees, 0, "{what}");
        drop(dbg);
        assert_eq!(handle.snapshot().outstanding_allocations, 0, "{what}");
    }
}
