//! Corrupt values: billion-rank groups, unreadable group tables, garbage VC pointers,
//! unterminated names, pointers at the top of memory. None crashes, leaks or reads without
//! bound; each gives an error or an unknown group.

mod support;

use mqd_mpich::error::Error;
use mqd_synthetic::{BuildOptions, GroupSide, Layout, ProcessSpec, QueueKind, SyntheticTarget};
use mqd_target::Target;
use support::*;

/// A group whose size claims a billion ranks is not believed: the display works, that
/// communicator's group is unknown (None, no error), nothing else changes, and neither
/// reads nor allocations follow the claim.
#[test]
fn billion_rank_groups_are_unknown_groups() {
    for (spec, clean, clean_display) in images() {
        let split = spec.comms[1].slot;
        let inter = spec.comms[0].slot;
        let size = clean.offset_of("MPIR_Group", "size");
        let mut cases = vec![
            (
                "split's local group claims 1e9 ranks",
                split,
                GroupSide::Local,
            ),
            (
                "inter's local group claims 1e9 ranks",
                inter,
                GroupSide::Local,
            ),
            (
                "inter's remote group claims 1e9 ranks",
                inter,
                GroupSide::Remote,
            ),
        ];
        if spec.layout == Layout::Debugq5 {
            cases.push((
                "dup's local group claims 1e9 ranks",
                spec.comms[2].slot,
                GroupSide::Local,
            ));
        }
        for (what, slot, side) in cases {
            let mut t = clean.clone();
            let group = t
                .group_address(slot, side)
                .unwrap_or_else(|| panic!("{what}: no group in {}", t.name()));
            t.write_i32(group + size, BILLION).unwrap();
            let run = run(t, what);
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            assert!(
                run.counters.fetch_bytes < 1 << 20,
                "{}: {} bytes read",
                run.what,
                run.counters.fetch_bytes
            );
            let display = run.display();
            assert_eq!(
                display.communicators.len(),
                clean_display.communicators.len()
            );
            for (c, before) in display
                .communicators
                .iter()
                .zip(&clean_display.communicators)
            {
                assert_eq!(c.name, before.name, "{}", run.what);
                assert!(
                    c.group_error.is_none(),
                    "{}: {}: {:?}",
                    run.what,
                    c.name,
                    c.group_error
                );
                if c.unique_id == clean.comm_address(slot) && side == GroupSide::Local {
                    // Unknown; the right group from another source (a device table)
                    // would do too, never a wrong one.
                    assert!(
                        c.group.is_none() || c.group == before.group,
                        "{}: {}'s group must be unknown, not {:?}",
                        run.what,
                        c.name,
                        c.group
                    );
                } else {
                    assert_eq!(
                        c.group, before.group,
                        "{}: {}'s group changed",
                        run.what, c.name
                    );
                }
                assert_eq!(c.size, before.size, "{}", run.what);
            }
            // Still the same second time round (the list is cached by sequence number).
            assert_eq!(run.displays[1].as_ref().ok(), Some(display), "{}", run.what);
        }
        // ch3 keeps groups in its VC reference tables too: with MPIR_Group left NULL
        // (lazy groups, as MPICH does), the split's group comes from its VCRT alone.
        if spec.layout == Layout::Ch3 {
            let lazy = BuildOptions {
                lazy_groups: true,
                ..BuildOptions::default()
            };
            let mut t = SyntheticTarget::build_with(&spec, &lazy);
            let before = run(t.clone(), "lazy groups");
            let view = |r: &Run| {
                r.display()
                    .communicators
                    .iter()
                    .find(|c| c.unique_id == clean.comm_address(split))
                    .unwrap()
                    .clone()
            };
            assert_eq!(
                view(&before)
                    .group
                    .as_ref()
                    .map(mqd_model::CommGroup::to_vec)
                    .as_deref(),
                Some(&[1, 3][..]),
                "{}",
                before.what
            );
            let vcrt_at = t.comm_address(split)
                + t.offset_of("MPIR_Comm", "dev")
                + t.offset_of("MPIDI_CH3I_comm_t", "vcrt");
            let vcrt = t.read_pointer(vcrt_at).unwrap();
            assert_ne!(vcrt, 0);
            t.write_i32(vcrt + t.offset_of("MPIDI_VCRT", "size"), BILLION)
                .unwrap();
            let run = run(t, "lazy groups, split's VCRT claims 1e9 ranks");
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            assert!(
                run.counters.fetch_bytes < 1 << 20,
                "{}: {} bytes read",
                run.what,
                run.counters.fetch_bytes
            );
            assert_eq!(view(&run).group, None, "{}", run.what);
        }
    }
}

/// A group table pointer into unmapped memory gives an error or an unknown group, never
/// a crash, a wrong group or a leak.
#[test]
fn unreadable_group_tables_do_not_crash() {
    for (spec, clean, clean_display) in images() {
        let split = spec.comms[1].slot;
        let mut t = clean.clone();
        let group = t.group_address(split, GroupSide::Local).unwrap();
        let table = match spec.layout {
            Layout::Debugq5 => {
                let pmap = t.offset_of("MPIR_Group", "pmap");
                // Force the explicit map form, then point the map nowhere.
                t.write_bytes(group + pmap + t.offset_of("MPIR_Pmap", "use_map"), &[1])
                    .unwrap();
                group + pmap + t.offset_of("MPIR_Pmap", "u")
            }
            _ => group + t.offset_of("MPIR_Group", "lrank_to_lpid"),
        };
        t.write_pointer(table, t.unmapped_address()).unwrap();
        let run = run(t, "split's rank table -> unmapped");
        assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        match &run.displays[0] {
            Err(e) => assert_error(e, Error::ReadFailed, needle(Error::ReadFailed), &run.what),
            Ok(d) => {
                let view = d
                    .communicators
                    .iter()
                    .find(|c| c.unique_id == clean.comm_address(split))
                    .unwrap();
                let before = clean_display
                    .communicators
                    .iter()
                    .find(|c| c.unique_id == view.unique_id)
                    .unwrap();
                assert!(
                    view.group.is_none() || view.group == before.group,
                    "{}: {:?}",
                    run.what,
                    view.group
                );
            }
        }
    }
}

/// ch3 with lazy groups (MPIR_Group NULL, ranks only in the VC reference table): a garbage
/// VC pointer in the table (unmapped, NULL page) gives an error or an unknown group.
#[test]
fn garbage_vc_pointers_in_ch3_tables_do_not_crash() {
    let lazy = BuildOptions {
        lazy_groups: true,
        ..BuildOptions::default()
    };
    for arch in ARCHES {
        let spec = ProcessSpec::example(Layout::Ch3, arch);
        let clean = SyntheticTarget::build_with(&spec, &lazy);
        let split = spec.comms[1].slot;
        let vcrt_at = clean.comm_address(split)
            + clean.offset_of("MPIR_Comm", "dev")
            + clean.offset_of("MPIDI_CH3I_comm_t", "vcrt");
        let vcrt = clean.read_pointer(vcrt_at).unwrap();
        let table = vcrt + clean.offset_of("MPIDI_VCRT", "vcr_table");
        for (what, value) in [("unmapped", clean.unmapped_address()), ("0x8", 0x8)] {
            for (at, which) in [(vcrt_at, "split's VCRT"), (table, "split's first VC")] {
                let mut t = clean.clone();
                t.write_pointer(at, value).unwrap();
                let run = run(t, format!("lazy groups, {which} -> {what}"));
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                match &run.displays[0] {
                    Err(e) => {
                        assert_error(e, Error::ReadFailed, needle(Error::ReadFailed), &run.what)
                    }
                    Ok(d) => {
                        let view = d
                            .communicators
                            .iter()
                            .find(|c| c.unique_id == clean.comm_address(split))
                            .unwrap();
                        assert!(view.group.is_none(), "{}: {:?}", run.what, view.group);
                    }
                }
            }
        }
    }
}

/// A name without a terminating NUL is cut, not read past.
#[test]
fn unterminated_names_are_cut() {
    for (spec, clean, _) in images() {
        let mut t = clean.clone();
        let slot = spec.comms[1].slot;
        t.write_bytes(
            t.comm_address(slot) + t.offset_of("MPIR_Comm", "name"),
            &[b'x'; 128],
        )
        .unwrap();
        let run = run(t, "name of 128 'x' without NUL");
        assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        let view = run
            .display()
            .communicators
            .iter()
            .find(|c| c.unique_id == clean.comm_address(slot))
            .unwrap();
        assert!(
            !view.name.is_empty() && view.name.len() < 128,
            "{}: {:?}",
            run.what,
            view.name
        );
        assert!(
            view.name.bytes().all(|b| b == b'x'),
            "{}: {:?}",
            run.what,
            view.name
        );
    }
}

/// What a pointer near the top of the address space must give.
#[derive(Debug, Clone, Copy)]
enum TopExpect {
    /// The display fails with ReadFailed.
    DisplayFails,
    /// That queue is a ReadFailed error, the others unchanged.
    QueueFails(QueueKind),
    /// Not dereferenced for this queue: anything but a crash or an internal error.
    Survives,
    /// The display fails with ReadFailed, or that communicator's group is unknown.
    GroupUnknown(u32),
}

/// The message of a caught panic.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Every pointer the library follows, set to all ones (and just below): address
/// arithmetic on them must not overflow; each gives ReadFailed (or an unknown group),
/// never an internal error.
#[test]
fn top_of_memory_pointers_are_read_failures() {
    let mut failures = Vec::new();
    let lazy = BuildOptions {
        lazy_groups: true,
        ..BuildOptions::default()
    };
    for layout in Layout::ALL {
        for arch in ARCHES {
            let spec = ProcessSpec::example(layout, arch);
            let split = spec.comms[1].slot;
            for options in [BuildOptions::default(), lazy] {
                if options.lazy_groups && layout != Layout::Ch3 {
                    continue;
                }
                let clean = SyntheticTarget::build_with(&spec, &options);
                let clean_display = run(clean.clone(), "clean").display().clone();
                let mut places: Vec<(String, u64, TopExpect)> = vec![
                    (
                        "MPIR_All_communicators.head".into(),
                        comm_list_head(&clean),
                        TopExpect::DisplayFails,
                    ),
                    (
                        "split's comm_next".into(),
                        comm_next(&clean, split),
                        TopExpect::DisplayFails,
                    ),
                ];
                if let Some(group) = clean.group_address(split, GroupSide::Local) {
                    places.push((
                        "split's local_group".into(),
                        clean.comm_address(split) + clean.offset_of("MPIR_Comm", "local_group"),
                        TopExpect::GroupUnknown(split),
                    ));
                    let table = match layout {
                        Layout::Debugq5 => None, // stride form for [1, 3]: no table
                        _ => Some(group + clean.offset_of("MPIR_Group", "lrank_to_lpid")),
                    };
                    if let Some(table) = table {
                        places.push((
                            "split's lrank_to_lpid".into(),
                            table,
                            TopExpect::GroupUnknown(split),
                        ));
                    }
                }
                if options.lazy_groups {
                    let vcrt_at = clean.comm_address(split)
                        + clean.offset_of("MPIR_Comm", "dev")
                        + clean.offset_of("MPIDI_CH3I_comm_t", "vcrt");
                    let vcrt = clean.read_pointer(vcrt_at).unwrap();
                    places.push((
                        "split's VCRT".into(),
                        vcrt_at,
                        TopExpect::GroupUnknown(split),
                    ));
                    places.push((
                        "split's first VC".into(),
                        vcrt + clean.offset_of("MPIDI_VCRT", "vcr_table"),
                        TopExpect::GroupUnknown(split),
                    ));
                }
                for kind in QUEUES {
                    let n = queue_len(&spec, kind);
                    places.push((
                        format!("{kind:?} head"),
                        queue_head(&clean, kind),
                        TopExpect::QueueFails(kind),
                    ));
                    places.push((
                        format!("{kind:?} last next"),
                        node(&clean, kind, n - 1) + next_link(&clean, kind),
                        TopExpect::QueueFails(kind),
                    ));
                    if let Some(req) = request_link(&clean, kind) {
                        let expect = if kind == QueueKind::Unexpected
                            && matches!(layout, Layout::Debugq4 | Layout::Debugq5)
                        {
                            TopExpect::Survives
                        } else {
                            TopExpect::QueueFails(kind)
                        };
                        places.push((
                            format!("{kind:?} first node's request"),
                            node(&clean, kind, 0) + req,
                            expect,
                        ));
                    }
                }
                for (place, at, expect) in places {
                    for value in [u64::MAX, u64::MAX - 5] {
                        let mut t = clean.clone();
                        t.write_pointer(at, value).unwrap();
                        let lazy_note = if options.lazy_groups {
                            "lazy groups, "
                        } else {
                            ""
                        };
                        let run = run(t, format!("{lazy_note}{place} -> {value:#x}"));
                        let checked =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                                match expect {
                                    TopExpect::DisplayFails => {
                                        assert_display_fails(&run, Error::ReadFailed)
                                    }
                                    TopExpect::QueueFails(kind) => assert_only_queue_fails(
                                        &run,
                                        &clean_display,
                                        kind,
                                        Error::ReadFailed,
                                    ),
                                    TopExpect::Survives => {}
                                    TopExpect::GroupUnknown(slot) => match &run.displays[0] {
                                        Err(e) => assert_error(
                                            e,
                                            Error::ReadFailed,
                                            needle(Error::ReadFailed),
                                            &run.what,
                                        ),
                                        Ok(d) => {
                                            let view = d
                                                .communicators
                                                .iter()
                                                .find(|c| c.unique_id == clean.comm_address(slot))
                                                .unwrap();
                                            assert!(
                                                view.group.is_none(),
                                                "{}: {:?}",
                                                run.what,
                                                view.group
                                            );
                                        }
                                    },
                                }
                            }));
                        if let Err(payload) = checked {
                            failures.push(panic_text(payload));
                        }
                    }
                }
            }
        }
    }
    finish(failures);
}
