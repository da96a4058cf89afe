//! What the image lacks: types, fields and symbols of MPICH's debugger support, named in
//! the has-queues message; optional pieces degrade the display; failures do not stick.

mod support;

use mqd_debugger::session::{Debugger, Queue, SessionOptions};
use mqd_debugger::target::{DebugInfo, Target};
use mqd_mpich::error::Error;
use mqd_synthetic::{Arch, Layout, ProcessSpec, QueueKind};
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
            Layout::Debugq4 => &["MPIR_Debugq"][..],
            Layout::Debugq5 => &["MPIR_Debugq", "MPIR_Pmap"][..],
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

/// Removing a field the layout needs makes setup fail with MissingField, and the message
/// names `Type.field` and says --enable-debuginfo.
#[test]
fn missing_fields_are_named() {
    let mut failures = Vec::new();
    for layout in Layout::ALL {
        let mut fields = vec![
            ("MPIR_Comm", "recvcontext_id"),
            ("MPIR_Comm", "comm_next"),
            ("MPIR_Comm", "local_size"),
            ("MPIR_Comm_list", "head"),
            ("MPIR_Request", "cc"),
        ];
        fields.extend(match layout {
            Layout::Ch3 => &[
                ("MPIDI_Request", "user_buf"),
                ("MPIDI_Request", "next"),
                ("MPIR_Sendq", "sreq"),
            ][..],
            Layout::Ch4Am => &[
                ("MPIDIG_req_t", "buffer"),
                ("MPIR_Request", "next"),
                ("MPIR_Sendq", "next"),
            ][..],
            Layout::Debugq4 | Layout::Debugq5 => {
                &[("MPIR_Debugq", "next"), ("MPIR_Debugq", "req")][..]
            }
        });
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

/// Optional type information missing (MPIR_Group, MPI_Status, ch3/ch4's MPIR_Sendq) is no
/// error: setup succeeds and the display degrades (groups or statuses unknown, sends no
/// information) with every queue entry still listed.
#[test]
fn missing_optional_types_degrade_the_display() {
    for (spec, clean, clean_display) in images() {
        let mut optional = vec!["MPIR_Group", "MPI_Status"];
        if matches!(spec.layout, Layout::Ch3 | Layout::Ch4Am) {
            optional.push("MPIR_Sendq");
        }
        for ty in optional {
            let mut t = clean.clone();
            assert!(t.remove_type(ty), "{ty}");
            let run = run(t, format!("without optional type {ty}"));
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            let d = run.display();
            assert_eq!(
                d.communicators.len(),
                clean_display.communicators.len(),
                "{}",
                run.what
            );
            for (c, before) in d.communicators.iter().zip(&clean_display.communicators) {
                assert_eq!(
                    (c.unique_id, &c.name, c.size),
                    (before.unique_id, &before.name, before.size),
                    "{}",
                    run.what
                );
                for kind in QUEUES {
                    let (q, b) = (queue_of(c, kind), queue_of(before, kind));
                    if ty == "MPIR_Sendq" && kind == QueueKind::Sends {
                        assert_eq!(q, &Queue::NoInformation, "{}: {}", run.what, c.name);
                    } else {
                        assert!(
                            q.error().is_none(),
                            "{}: {}: {kind:?}: {q:?}",
                            run.what,
                            c.name
                        );
                        assert_eq!(
                            q.ops().len(),
                            b.ops().len(),
                            "{}: {}: {kind:?}",
                            run.what,
                            c.name
                        );
                    }
                }
            }
        }
    }
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

        let mut dbg = Debugger::new(library(), SessionOptions::default());
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
