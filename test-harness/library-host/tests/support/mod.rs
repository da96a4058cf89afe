//! Shared by the corrupt-target tests: the library under test, one session over a
//! damaged image ([`run`]), the invariants every run keeps, and where things sit in the
//! synthetic images.
#![allow(dead_code)]

use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{Counters, Display, MqsError, Queue, Session, SessionOptions};
use mqd_mpich::error::Error;
use mqd_synthetic::{Arch, Layout, ProcessSpec, QueueKind, SyntheticTarget};
use mqd_target::{DebugInfo, Target};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------------------------------
// The library under test.

/// The built `libmqd_mpich.so`: `$MQD_DLL`, else the one beside the test binary
/// (`target/<profile>/deps/`, which `cargo test` keeps fresh, or `target/<profile>/`).
pub fn dll_path() -> PathBuf {
    match mqd_library_host::library::bundled_library() {
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
pub fn library() -> Arc<MqsLibrary> {
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

pub const ARCHES: [Arch; 3] = [Arch::LP64_LE, Arch::ILP32_LE, Arch::LP64_BE];
pub const QUEUES: [QueueKind; 3] = [QueueKind::Posted, QueueKind::Unexpected, QueueKind::Sends];

/// Reads one of these small images may take, setup and two displays together.
pub const SMALL_IMAGE_FETCHES: u64 = 200;
/// Debugger memory the library may hold at once for a small image, however corrupt.
pub const SMALL_IMAGE_BYTES: u64 = 16 << 20;
/// Largest single read for a small image, however corrupt.
pub const SMALL_IMAGE_LARGEST_FETCH: u64 = 64 << 10;
/// A claim no real MPI job makes.
pub const BILLION: i32 = 1_000_000_000;

// ---------------------------------------------------------------------------------------
// Running a session over one target.

/// What one session over a target gave: setup, two displays, counters before and after
/// the session was dropped.
pub struct Run {
    pub what: String,
    pub setup: Result<(), MqsError>,
    /// The `mqs_image_has_queues` message, `%s` expanded.
    pub image_message: Option<String>,
    pub displays: Vec<Result<Display, MqsError>>,
    pub counters: Counters,
    pub after_drop: Counters,
}

impl Run {
    /// The first display, which must have succeeded.
    pub fn display(&self) -> &Display {
        match &self.displays[0] {
            Ok(d) => d,
            Err(e) => panic!("{}: display failed: {e}", self.what),
        }
    }

    /// The first display's error, which must have happened.
    pub fn display_error(&self) -> &MqsError {
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
pub fn run(target: SyntheticTarget, what: impl Into<String>) -> Run {
    let what = format!("{} [{}]", what.into(), target.name());
    let mut dbg = Session::new(library(), SessionOptions::default());
    let handle = dbg.counter_handle();
    let setup = dbg.add_process(Box::new(target), 1).map(|_| ());
    let p = dbg.processes()[0];
    let image_message = dbg.image_message(p).map(str::to_owned);
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
        image_message,
        displays,
        counters,
        after_drop,
    }
}

/// Every error the run produced: setup, displays, queues, groups.
pub fn all_errors(run: &Run) -> Vec<&MqsError> {
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
pub fn assert_hygiene(run: &Run, max_fetches: u64) {
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
pub fn assert_error(e: &MqsError, expected: Error, needle: &str, what: &str) {
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
pub fn needle(e: Error) -> &'static str {
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
pub fn assert_display_fails(run: &Run, expected: Error) {
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
pub fn comm_next(t: &SyntheticTarget, slot: u32) -> u64 {
    t.comm_address(slot) + t.offset_of("MPIR_Comm", "comm_next")
}

/// Address of `MPIR_All_communicators.head`.
pub fn comm_list_head(t: &SyntheticTarget) -> u64 {
    t.find_symbol("MPIR_All_communicators")
        .expect("MPIR_All_communicators")
        + t.offset_of("MPIR_Comm_list", "head")
}

/// Offset of the next link inside a queue node (`request_node_address`).
pub fn next_link(t: &SyntheticTarget, kind: QueueKind) -> u64 {
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
pub fn request_link(t: &SyntheticTarget, kind: QueueKind) -> Option<u64> {
    match (t.layout(), kind) {
        (Layout::Debugq4 | Layout::Debugq5, _) => Some(t.offset_of("MPIR_Debugq", "req")),
        (_, QueueKind::Sends) => Some(t.offset_of("MPIR_Sendq", "sreq")),
        _ => None,
    }
}

/// Address of the variable that holds the first node of a queue.
pub fn queue_head(t: &SyntheticTarget, kind: QueueKind) -> u64 {
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

pub fn queue_len(spec: &ProcessSpec, kind: QueueKind) -> usize {
    match kind {
        QueueKind::Posted => spec.posted.len(),
        QueueKind::Unexpected => spec.unexpected.len(),
        QueueKind::Sends => spec.sends.len(),
    }
}

pub fn queue_of(c: &mqd_library_host::session::Communicator, kind: QueueKind) -> &Queue {
    match kind {
        QueueKind::Posted => &c.pending_receives,
        QueueKind::Unexpected => &c.unexpected_messages,
        QueueKind::Sends => &c.pending_sends,
    }
}

pub fn node(t: &SyntheticTarget, kind: QueueKind, index: usize) -> u64 {
    t.request_node_address(kind, index)
        .unwrap_or_else(|| panic!("no node {index} in {kind:?}"))
}

/// Every (layout, arch) with its example spec, image and clean display.
pub fn images() -> Vec<(ProcessSpec, SyntheticTarget, Display)> {
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

/// Checks that `kind` failed with `expected` for every communicator while the two other
/// queues show exactly what the clean image shows.
pub fn assert_only_queue_fails(run: &Run, clean: &Display, kind: QueueKind, expected: Error) {
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

/// Fails with every collected failure, if any.
pub fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
