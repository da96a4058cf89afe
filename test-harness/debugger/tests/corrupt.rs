//! Corrupt targets: cycles in the communicator list and in each queue, next pointers into
//! unmapped memory, billion-element claims, missing symbols, types and fields, garbage
//! pointers and random garbage. Each must give an error code with a clear
//! `mqs_dll_error_string` text, within a bounded number of target reads, without a crash,
//! a bad free or a leak.
//!
//! Every layout (A ch3, B ch4-am, C 4.x, C 5.x) on three ABIs (LP64 and ILP32 little-endian,
//! LP64 big-endian), built from `ProcessSpec::example` and then damaged through the hooks of
//! `SyntheticTarget`.

use mqd_debugger::library::MqsLibrary;
use mqd_debugger::session::{Counters, Debugger, Display, MqsError, Queue, SessionOptions};
use mqd_debugger::target::{DebugInfo, Target};
use mqd_mpich::error::Error;
use mqd_synthetic::{
    Arch, BuildOptions, GroupSide, Layout, ProcessSpec, QueueKind, SyntheticTarget,
};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------------------------------
// The library under test.

/// The built `libmqd_mpich.so`: `$MQD_DLL`, else the one beside the test binary
/// (`target/<profile>/deps/`, which `cargo test` keeps fresh, or `target/<profile>/`).
fn dll_path() -> PathBuf {
    match mqd_debugger::bundled_library() {
        Some(path) if path.is_file() => path,
        Some(path) => panic!("{} is not a file (MQD_DLL?)", path.display()),
        None => panic!(
            "libmqd_mpich.so not found beside {:?}: build it with `cargo build -p mqd-mpich`, \
             or point MQD_DLL at it",
            std::env::current_exe().ok()
        ),
    }
}

/// One load shared by every test of this file.
fn library() -> Arc<MqsLibrary> {
    static LIB: OnceLock<Arc<MqsLibrary>> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = dll_path();
        Arc::new(
            MqsLibrary::load(&path)
                .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display())),
        )
    })
    .clone()
}

const ARCHES: [Arch; 3] = [Arch::LP64_LE, Arch::ILP32_LE, Arch::LP64_BE];
const QUEUES: [QueueKind; 3] = [QueueKind::Posted, QueueKind::Unexpected, QueueKind::Sends];

/// Reads one of these small images may take, setup and two displays together.
const SMALL_IMAGE_FETCHES: u64 = 200;
/// Debugger memory the library may hold at once for a small image, however corrupt.
const SMALL_IMAGE_BYTES: u64 = 16 << 20;
/// Largest single read for a small image, however corrupt.
const SMALL_IMAGE_LARGEST_FETCH: u64 = 64 << 10;
/// A claim no real MPI job makes.
const BILLION: i32 = 1_000_000_000;

// ---------------------------------------------------------------------------------------
// Running a session over one target.

/// What one session over a target gave: setup, two displays, counters before and after
/// the session was dropped.
struct Run {
    what: String,
    setup: Result<(), MqsError>,
    displays: Vec<Result<Display, MqsError>>,
    counters: Counters,
    after_drop: Counters,
}

impl Run {
    /// The first display, which must have succeeded.
    fn display(&self) -> &Display {
        match &self.displays[0] {
            Ok(d) => d,
            Err(e) => panic!("{}: display failed: {e}", self.what),
        }
    }

    /// The first display's error, which must have happened.
    fn display_error(&self) -> &MqsError {
        match &self.displays[0] {
            Ok(d) => panic!(
                "{}: display succeeded with {} communicators, an error was expected",
                self.what,
                d.communicators.len()
            ),
            Err(e) => e,
        }
    }
}

/// Sets the target up as world rank 1 and shows its queues twice (the second display
/// re-reads what changed, or rebuilds what failed), then drops the session.
fn run(target: SyntheticTarget, what: impl Into<String>) -> Run {
    let what = format!("{} [{}]", what.into(), target.name());
    let mut dbg = Debugger::new(library(), SessionOptions::default());
    let handle = dbg.counter_handle();
    let setup = dbg.add_process(Box::new(target), 1).map(|_| ());
    let p = dbg.processes()[0];
    let mut displays = Vec::new();
    if setup.is_ok() {
        displays.push(dbg.display(p));
        displays.push(dbg.display(p));
    } else {
        // A failed process answers with its setup error, without calling the library.
        displays.push(dbg.display(p));
    }
    let counters = dbg.counters();
    drop(dbg);
    let after_drop = handle.snapshot();
    Run {
        what,
        setup,
        displays,
        counters,
        after_drop,
    }
}

/// Every error the run produced: setup, displays, queues, groups.
fn all_errors(run: &Run) -> Vec<&MqsError> {
    let mut errors: Vec<&MqsError> = Vec::new();
    errors.extend(run.setup.as_ref().err());
    for d in &run.displays {
        match d {
            Err(e) => errors.push(e),
            Ok(d) => {
                for c in &d.communicators {
                    errors.extend(c.group_error.as_ref());
                    for q in [
                        &c.pending_receives,
                        &c.unexpected_messages,
                        &c.pending_sends,
                    ] {
                        errors.extend(q.error());
                    }
                }
            }
        }
    }
    errors
}

/// The invariants of every run, corrupt or not: bounded reads and memory, no bad frees
/// or handles, nothing left allocated once the session is gone, no internal error.
fn assert_hygiene(run: &Run, max_fetches: u64) {
    let (c, what) = (&run.counters, &run.what);
    assert!(
        c.fetches <= max_fetches,
        "{what}: {} target reads, more than the {max_fetches} allowed",
        c.fetches
    );
    assert!(
        c.largest_fetch <= SMALL_IMAGE_LARGEST_FETCH,
        "{what}: one read of {} bytes",
        c.largest_fetch
    );
    assert!(
        c.outstanding_bytes < SMALL_IMAGE_BYTES,
        "{what}: the library holds {} bytes",
        c.outstanding_bytes
    );
    assert_eq!(c.bad_frees, 0, "{what}: bad frees");
    assert_eq!(c.bad_handles, 0, "{what}: bad handles passed to callbacks");
    assert_eq!(c.callback_panics, 0, "{what}: callbacks panicked");
    assert_eq!(
        run.after_drop.bad_frees, 0,
        "{what}: bad frees while destroying"
    );
    assert_eq!(
        run.after_drop.outstanding_allocations, 0,
        "{what}: {} allocations ({} bytes) left after the session was dropped",
        run.after_drop.outstanding_allocations, run.after_drop.outstanding_bytes
    );
    for e in all_errors(run) {
        assert_ne!(
            e.code,
            Error::Internal.code(),
            "{what}: internal error: {e}"
        );
        assert!(e.code >= 100, "{what}: unexpected result code {e}");
    }
}

/// `e` is `expected`, with the library's own text, which mentions `needle`.
fn assert_error(e: &MqsError, expected: Error, needle: &str, what: &str) {
    assert_eq!(
        Error::from_code(e.code),
        Some(expected),
        "{what}: expected {expected:?} (code {}), got {e}",
        expected.code()
    );
    let text = expected.text().to_str().unwrap();
    assert_eq!(e.text, text, "{what}: mqs_dll_error_string({})", e.code);
    assert!(
        e.text.contains(needle),
        "{what}: the text of {expected:?} does not mention {needle:?}: {}",
        e.text
    );
}

/// `mqs_dll_error_string` text fragment that makes each code clear to a user.
fn needle(e: Error) -> &'static str {
    match e {
        Error::ListCycle => "loops",
        Error::ReadFailed => "could not be read",
        Error::ImplausibleValue => "implausible",
        Error::ListTooLong => "longer than",
        Error::MissingType | Error::MissingSymbol => "--enable-debuginfo",
        Error::MissingField => "lacks a field",
        _ => "",
    }
}

/// Both displays of a run failed with `expected` (a failed update leaves nothing cached).
fn assert_display_fails(run: &Run, expected: Error) {
    for (i, d) in run.displays.iter().enumerate() {
        let what = format!("{} (display {})", run.what, i + 1);
        match d {
            Ok(d) => panic!(
                "{what}: succeeded with {} communicators, {expected:?} expected",
                d.communicators.len()
            ),
            Err(e) => assert_error(e, expected, needle(expected), &what),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Where things are in an image.

/// Address of the `comm_next` member of the communicator in `slot`.
fn comm_next(t: &SyntheticTarget, slot: u32) -> u64 {
    t.comm_address(slot) + t.offset_of("MPIR_Comm", "comm_next")
}

/// Address of `MPIR_All_communicators.head`.
fn comm_list_head(t: &SyntheticTarget) -> u64 {
    t.find_symbol("MPIR_All_communicators")
        .expect("MPIR_All_communicators")
        + t.offset_of("MPIR_Comm_list", "head")
}

/// Offset of the next link inside a queue node (`request_node_address`).
fn next_link(t: &SyntheticTarget, kind: QueueKind) -> u64 {
    match (t.layout(), kind) {
        (Layout::Debugq4 | Layout::Debugq5, _) => t.offset_of("MPIR_Debugq", "next"),
        (Layout::Ch3 | Layout::Ch4Am, QueueKind::Sends) => t.offset_of("MPIR_Sendq", "next"),
        (Layout::Ch3, _) => {
            t.offset_of("MPIR_Request", "dev") + t.offset_of("MPIDI_Request", "next")
        }
        (Layout::Ch4Am, _) => t.offset_of("MPIR_Request", "next"),
    }
}

/// Offset of the request pointer inside a queue node, where nodes are not requests.
fn request_link(t: &SyntheticTarget, kind: QueueKind) -> Option<u64> {
    match (t.layout(), kind) {
        (Layout::Debugq4 | Layout::Debugq5, _) => Some(t.offset_of("MPIR_Debugq", "req")),
        (_, QueueKind::Sends) => Some(t.offset_of("MPIR_Sendq", "sreq")),
        _ => None,
    }
}

/// Address of the variable that holds the first node of a queue.
fn queue_head(t: &SyntheticTarget, kind: QueueKind) -> u64 {
    let symbol = |name: &str| t.find_symbol(name).unwrap_or_else(|| panic!("no {name}"));
    match (t.layout(), kind) {
        (_, QueueKind::Sends) => symbol("MPIR_Sendq_head"),
        (Layout::Debugq4 | Layout::Debugq5, QueueKind::Posted) => symbol("MPIR_Recvq_head"),
        (Layout::Debugq4 | Layout::Debugq5, QueueKind::Unexpected) => symbol("MPIR_Unexpq_head"),
        // Layouts A and B publish a pointer to the static head variable.
        (_, QueueKind::Posted) => t
            .read_pointer(symbol("MPID_Recvq_posted_head_ptr"))
            .unwrap(),
        (_, QueueKind::Unexpected) => t
            .read_pointer(symbol("MPID_Recvq_unexpected_head_ptr"))
            .unwrap(),
    }
}

fn queue_len(spec: &ProcessSpec, kind: QueueKind) -> usize {
    match kind {
        QueueKind::Posted => spec.posted.len(),
        QueueKind::Unexpected => spec.unexpected.len(),
        QueueKind::Sends => spec.sends.len(),
    }
}

fn queue_of(c: &mqd_debugger::session::Communicator, kind: QueueKind) -> &Queue {
    match kind {
        QueueKind::Posted => &c.pending_receives,
        QueueKind::Unexpected => &c.unexpected_messages,
        QueueKind::Sends => &c.pending_sends,
    }
}

fn node(t: &SyntheticTarget, kind: QueueKind, index: usize) -> u64 {
    t.request_node_address(kind, index)
        .unwrap_or_else(|| panic!("no node {index} in {kind:?}"))
}

/// Every (layout, arch) with its example spec, image and clean display.
fn images() -> Vec<(ProcessSpec, SyntheticTarget, Display)> {
    let mut out = Vec::new();
    for layout in Layout::ALL {
        for arch in ARCHES {
            let spec = ProcessSpec::example(layout, arch);
            let target = spec.build();
            let clean = run(target.clone(), "clean example");
            assert_hygiene(&clean, SMALL_IMAGE_FETCHES);
            let display = clean.display().clone();
            assert_eq!(
                display.communicators.len(),
                spec.comms.len(),
                "{}",
                clean.what
            );
            for kind in QUEUES {
                let shown: usize = display
                    .communicators
                    .iter()
                    .map(|c| queue_of(c, kind).ops().len())
                    .sum();
                assert_eq!(shown, queue_len(&spec, kind), "{}: {kind:?}", clean.what);
            }
            out.push((spec, target, display));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The communicator list.

/// A communicator list that loops (to the head, to the middle, onto itself) fails every
/// display with ListCycle ("loops"), in a bounded number of reads.
#[test]
fn communicator_list_cycles_are_list_cycle_errors() {
    for (spec, clean, _) in images() {
        let slot = |i: usize| spec.comms[i].slot;
        let last = spec.comms.len() - 1;
        let cases = [
            ("last comm_next -> first communicator", slot(last), slot(0)),
            (
                "last comm_next -> a middle communicator",
                slot(last),
                slot(2),
            ),
            ("first comm_next -> itself", slot(0), slot(0)),
            ("second comm_next -> first", slot(1), slot(0)),
        ];
        for (what, from, to) in cases {
            let mut t = clean.clone();
            t.write_pointer(comm_next(&t, from), t.comm_address(to))
                .unwrap();
            let run = run(t, what);
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_display_fails(&run, Error::ListCycle);
            assert!(run.display_error().text.contains("loops"), "{}", run.what);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        }
    }
}

/// A comm_next or list head into unmapped (or NULL-page) memory fails the display with
/// ReadFailed; a head into the middle of other objects gives some answer, never a crash.
#[test]
fn communicator_list_pointers_into_unmapped_memory_are_read_failures() {
    for (spec, clean, _) in images() {
        let unmapped = clean.unmapped_address();
        let head = comm_list_head(&clean);
        let cases: Vec<(&str, u64, u64)> = vec![
            (
                "second comm_next -> unmapped",
                comm_next(&clean, spec.comms[1].slot),
                unmapped,
            ),
            (
                "last comm_next -> unmapped",
                comm_next(&clean, spec.comms[4].slot),
                unmapped,
            ),
            ("MPIR_All_communicators.head -> unmapped", head, unmapped),
            ("MPIR_All_communicators.head -> 0x10", head, 0x10),
            (
                "MPIR_All_communicators.head -> top of memory",
                head,
                u64::MAX - 7,
            ),
        ];
        for (what, at, value) in cases {
            let mut t = clean.clone();
            t.write_pointer(at, value).unwrap();
            let run = run(t, what);
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_display_fails(&run, Error::ReadFailed);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        }
        // Garbage that is mapped: a misaligned communicator, the list variable itself, a
        // request. Anything may come back, but bounded and clean.
        let garbage = [
            (
                "head -> misaligned communicator",
                clean.comm_address(spec.comms[0].slot) + 3,
            ),
            ("head -> MPIR_All_communicators itself", head),
            (
                "head -> a request",
                clean.request_address(QueueKind::Posted, 0).unwrap(),
            ),
        ];
        for (what, value) in garbage {
            let mut t = clean.clone();
            t.write_pointer(head, value).unwrap();
            let run = run(t, what);
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
        }
    }
}

/// A communicator claiming a billion (or a negative number of) ranks fails the display
/// with ImplausibleValue, without allocating for the claim.
#[test]
fn billion_rank_communicators_are_implausible() {
    for (spec, clean, _) in images() {
        let local_size = clean.offset_of("MPIR_Comm", "local_size");
        let remote_size = clean.offset_of("MPIR_Comm", "remote_size");
        let inter = spec.comms[0].slot; // "inter"
        let cases = [
            (
                "dup: local_size = 1e9",
                spec.comms[2].slot,
                local_size,
                BILLION,
            ),
            (
                "COMM_WORLD: local_size = 1e9",
                spec.comms[4].slot,
                local_size,
                BILLION,
            ),
            ("inter: remote_size = 1e9", inter, remote_size, BILLION),
            ("split: local_size = -5", spec.comms[1].slot, local_size, -5),
            (
                "COMM_SELF: local_size = i32::MAX",
                spec.comms[3].slot,
                local_size,
                i32::MAX,
            ),
        ];
        for (what, slot, offset, value) in cases {
            let mut t = clean.clone();
            t.write_i32(t.comm_address(slot) + offset, value).unwrap();
            let run = run(t, what);
            assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
            assert_display_fails(&run, Error::ImplausibleValue);
            assert_hygiene(&run, SMALL_IMAGE_FETCHES);
            assert!(
                run.counters.fetch_bytes < 1 << 20,
                "{}: {} bytes read",
                run.what,
                run.counters.fetch_bytes
            );
        }
    }
}

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
            assert_eq!(view(&before).group, Some(vec![1, 3]), "{}", before.what);
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

// ---------------------------------------------------------------------------------------
// The queues.

/// Checks that `kind` failed with `expected` for every communicator while the two other
/// queues show exactly what the clean image shows.
fn assert_only_queue_fails(run: &Run, clean: &Display, kind: QueueKind, expected: Error) {
    for (i, d) in run.displays.iter().enumerate() {
        let what = format!("{} (display {})", run.what, i + 1);
        let d = d
            .as_ref()
            .unwrap_or_else(|e| panic!("{what}: display failed: {e}"));
        assert_eq!(d.communicators.len(), clean.communicators.len(), "{what}");
        for (c, before) in d.communicators.iter().zip(&clean.communicators) {
            assert_eq!(
                (c.unique_id, &c.name, c.size),
                (before.unique_id, &before.name, before.size),
                "{what}"
            );
            assert_eq!(c.group, before.group, "{what}: {}", c.name);
            for other in QUEUES {
                let q = queue_of(c, other);
                if other == kind {
                    match q {
                        Queue::Error(e) => assert_error(
                            e,
                            expected,
                            needle(expected),
                            &format!("{what}: {}: {kind:?}", c.name),
                        ),
                        q => panic!(
                            "{what}: {}: {kind:?} should fail with {expected:?}, got {q:?}",
                            c.name
                        ),
                    }
                } else {
                    assert_eq!(
                        q,
                        queue_of(before, other),
                        "{what}: {}: {other:?} changed",
                        c.name
                    );
                }
            }
        }
    }
}

/// A cycle in each queue (last -> first, last -> middle, a node onto itself) makes that
/// queue a ListCycle error for every communicator; the other queues stay as they were.
#[test]
fn queue_cycles_are_list_cycle_errors_of_that_queue_only() {
    for (spec, clean, clean_display) in images() {
        for kind in QUEUES {
            let n = queue_len(&spec, kind);
            assert!(n >= 2, "the example has at least two {kind:?}");
            let link = next_link(&clean, kind);
            let mut cases = vec![
                ("last next -> first", n - 1, 0),
                ("last next -> itself", n - 1, n - 1),
                ("first next -> itself", 0, 0),
            ];
            if n >= 3 {
                cases.push(("last next -> second", n - 1, 1));
            }
            for (what, from, to) in cases {
                let mut t = clean.clone();
                t.write_pointer(node(&t, kind, from) + link, node(&t, kind, to))
                    .unwrap();
                let run = run(t, format!("{kind:?}: {what}"));
                assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                assert_only_queue_fails(&run, &clean_display, kind, Error::ListCycle);
            }
        }
    }
}

/// A next pointer or queue head into unmapped memory makes that queue a ReadFailed error;
/// the other queues stay as they were.
#[test]
fn queue_pointers_into_unmapped_memory_are_read_failures() {
    for (spec, clean, clean_display) in images() {
        for kind in QUEUES {
            let n = queue_len(&spec, kind);
            let link = next_link(&clean, kind);
            let unmapped = clean.unmapped_address();
            let cases = [
                (
                    "first next -> unmapped",
                    node(&clean, kind, 0) + link,
                    unmapped,
                ),
                (
                    "last next -> unmapped",
                    node(&clean, kind, n - 1) + link,
                    unmapped,
                ),
                ("last next -> 0x8", node(&clean, kind, n - 1) + link, 0x8),
                ("head -> unmapped", queue_head(&clean, kind), unmapped),
                (
                    "head -> top of memory",
                    queue_head(&clean, kind),
                    u64::MAX - 3,
                ),
            ];
            for (what, at, value) in cases {
                let mut t = clean.clone();
                t.write_pointer(at, value).unwrap();
                let run = run(t, format!("{kind:?}: {what}"));
                assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
                assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                assert_only_queue_fails(&run, &clean_display, kind, Error::ReadFailed);
            }
        }
    }
}

/// A garbage request pointer in a node (NULL-looking 0x8, unmapped, top of memory) makes
/// the queues that read the request ReadFailed errors; nothing crashes.
#[test]
fn garbage_request_pointers_in_nodes_are_read_failures() {
    for (spec, clean, clean_display) in images() {
        for kind in QUEUES {
            let Some(req) = request_link(&clean, kind) else {
                continue;
            };
            let values = [
                ("0x8", 0x8u64),
                ("unmapped", clean.unmapped_address()),
                ("top of memory", u64::MAX - 15),
            ];
            for (what, value) in values {
                for index in [0, queue_len(&spec, kind) - 1] {
                    let mut t = clean.clone();
                    t.write_pointer(node(&t, kind, index) + req, value).unwrap();
                    let run = run(t, format!("{kind:?}: node {index}'s request -> {what}"));
                    assert!(run.setup.is_ok(), "{}: setup {:?}", run.what, run.setup);
                    assert_hygiene(&run, SMALL_IMAGE_FETCHES);
                    if kind == QueueKind::Unexpected {
                        // Unexpected entries are described from the node alone.
                        run.display();
                    } else {
                        assert_only_queue_fails(&run, &clean_display, kind, Error::ReadFailed);
                    }
                }
            }
        }
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

fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
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
