//! The DLL never writes to stdout or stderr (padb parses stdout and treats any stderr line
//! as a failure): with fds 1 and 2 sent to a file, loading the library, displays of every
//! layout on three ABIs, corrupt images, misuse of the interface and sessions with NULL
//! optional callbacks leave that file empty.
//!
//! One test only in this file, so libtest itself prints nothing while fds 1 and 2 are
//! redirected.

use mqd_abi::types::{mqs_communicator, mqs_pending_operation};
use mqd_library_host::library::{BasicOptions, MqsLibrary};
use mqd_library_host::session::{Session, SessionOptions};
use mqd_synthetic::{Arch, Layout, ProcessSpec, QueueKind, SyntheticTarget};
use mqd_target::Target;
use std::ffi::c_int;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

unsafe extern "C" {
    /// POSIX `dup2`.
    fn dup2(oldfd: c_int, newfd: c_int) -> c_int;
}

/// The built `libmqd_mpich.so`: `$MQD_DLL`, else the one beside the test binary
/// (`target/<profile>/deps/`, which `cargo test` keeps fresh, or `target/<profile>/`).
fn dll_path() -> PathBuf {
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

/// fds 1 and 2 sent to a file until dropped, then restored.
struct Redirect {
    saved_stdout: OwnedFd,
    saved_stderr: OwnedFd,
}

impl Redirect {
    fn to(file: &std::fs::File) -> Redirect {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let saved_stdout = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .expect("dup(1)");
        let saved_stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .expect("dup(2)");
        // SAFETY: plain fd syscalls on fds this process owns.
        unsafe {
            assert_eq!(dup2(file.as_raw_fd(), 1), 1, "dup2 onto stdout");
            assert_eq!(dup2(file.as_raw_fd(), 2), 2, "dup2 onto stderr");
        }
        Redirect {
            saved_stdout,
            saved_stderr,
        }
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: as above; the saved fds are open until this struct's fields drop.
        unsafe {
            dup2(self.saved_stdout.as_raw_fd(), 1);
            dup2(self.saved_stderr.as_raw_fd(), 2);
        }
    }
}

const ARCHES: [Arch; 3] = [Arch::LP64_LE, Arch::ILP32_LE, Arch::LP64_BE];

/// Corrupt variants of the example image: a looping communicator list, a looping posted
/// queue, next pointers into unmapped memory, a request pointer at the top of memory, a
/// billion-rank communicator, a missing type, field and symbol.
fn corrupt_images(layout: Layout, arch: Arch) -> Vec<SyntheticTarget> {
    let spec = ProcessSpec::example(layout, arch);
    let clean = spec.build();
    let comm_next = clean.offset_of("MPIR_Comm", "comm_next");
    let first = clean.comm_address(spec.comms[0].slot);
    let last = clean.comm_address(spec.comms.last().unwrap().slot);
    let posted_next = match layout {
        Layout::Debugq4 | Layout::Debugq5 => clean.offset_of("MPIR_Debugq", "next"),
        Layout::Ch3 => {
            clean.offset_of("MPIR_Request", "dev") + clean.offset_of("MPIDI_Request", "next")
        }
        Layout::Ch4Am => clean.offset_of("MPIR_Request", "next"),
    };
    let node = |i| clean.request_node_address(QueueKind::Posted, i).unwrap();
    let mut out = Vec::new();

    let mut t = clean.clone();
    t.write_pointer(last + comm_next, first).unwrap();
    out.push(t);

    let mut t = clean.clone();
    t.write_pointer(node(spec.posted.len() - 1) + posted_next, node(0))
        .unwrap();
    out.push(t);

    let mut t = clean.clone();
    t.write_pointer(first + comm_next, clean.unmapped_address())
        .unwrap();
    out.push(t);

    let mut t = clean.clone();
    t.write_pointer(node(0) + posted_next, clean.unmapped_address())
        .unwrap();
    out.push(t);

    // Pointers at the top of memory: address arithmetic on them has made the library
    // panic (caught) in debug builds, and a caught panic must be as silent as the rest.
    let mut t = clean.clone();
    let request = match layout {
        Layout::Debugq4 | Layout::Debugq5 => node(0) + clean.offset_of("MPIR_Debugq", "req"),
        _ => {
            clean.request_node_address(QueueKind::Sends, 0).unwrap()
                + clean.offset_of("MPIR_Sendq", "sreq")
        }
    };
    t.write_pointer(request, u64::MAX).unwrap();
    out.push(t);

    let mut t = clean.clone();
    t.write_i32(
        first + clean.offset_of("MPIR_Comm", "local_size"),
        1_000_000_000,
    )
    .unwrap();
    out.push(t);

    let mut t = clean.clone();
    assert!(t.remove_type("MPIR_Comm"));
    out.push(t);

    let mut t = clean.clone();
    assert!(t.remove_field("MPIR_Comm", "recvcontext_id"));
    out.push(t);

    let mut t = clean.clone();
    assert!(t.remove_symbol("MPIR_All_communicators"));
    out.push(t);

    out
}

/// One session over `target`: setup, two displays, the padb extensions; outcomes ignored,
/// only the output matters here. Returns a problem the harness saw, if any.
fn session(
    lib: &Arc<MqsLibrary>,
    options: SessionOptions,
    target: SyntheticTarget,
) -> Option<String> {
    let name = target.name();
    let mut dbg = Session::new(lib.clone(), options);
    let handle = dbg.counter_handle();
    if let Ok(p) = dbg.add_process(Box::new(target), 1) {
        let _ = dbg.display(p);
        let _ = dbg.display(p);
        let _ = dbg.global_rank_from_library(p);
        let _ = dbg.collective_states(p);
    }
    let c = dbg.counters();
    drop(dbg);
    let after = handle.snapshot();
    if c.callback_panics != 0 || c.bad_frees != 0 || after.outstanding_allocations != 0 {
        return Some(format!("{name}: {c:?} / after drop {after:?}"));
    }
    None
}

/// Calls out of order and with bad arguments: the error paths must be silent too.
fn misuse(lib: &Arc<MqsLibrary>, target: SyntheticTarget) {
    let mut dbg = Session::new(lib.clone(), SessionOptions::default());
    let Ok(p) = dbg.add_process(Box::new(target), 1) else {
        return;
    };
    let _ = dbg.with_raw(p, |raw, process, _image| {
        // SAFETY: live handles of this session; out-pointers are locals or NULL where the
        // interface must reject NULL.
        unsafe {
            let mut comm: mqs_communicator = std::mem::zeroed();
            let mut op: mqs_pending_operation = std::mem::zeroed();
            (raw.get_communicator)(process, &mut comm); // before any update
            (raw.next_operation)(process, &mut op); // before any iterator
            (raw.update_communicator_list)(process);
            (raw.setup_communicator_iterator)(process);
            (raw.setup_operation_iterator)(process, 7); // no such class
            (raw.get_communicator)(process, std::ptr::null_mut());
            (raw.next_operation)(process, std::ptr::null_mut());
            if let Some(group) = raw.get_comm_group {
                group(process, std::ptr::null_mut());
            }
            (raw.update_communicator_list)(std::ptr::null_mut());
            for code in [-1, 0, 1, 2, 99, 100, 119, 120, 1000, c_int::MIN, c_int::MAX] {
                (raw.dll_error_string)(code);
            }
        }
    });
}

/// Everything the DLL is put through while fds 1 and 2 are redirected. Returns the
/// problems noticed (none expected); never panics on purpose.
fn exercise(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let lib = match MqsLibrary::load(path) {
        Ok(lib) => Arc::new(lib),
        Err(e) => return vec![format!("load: {e}")],
    };
    let quiet = match MqsLibrary::load_with(
        path,
        BasicOptions {
            null_dprints_and_errorstring: true,
        },
    ) {
        Ok(lib) => Arc::new(lib),
        Err(e) => return vec![format!("load with NULL dprints/errorstring: {e}")],
    };
    let null_sizeof = SessionOptions {
        null_sizeof: true,
        ..SessionOptions::default()
    };
    for layout in Layout::ALL {
        for arch in ARCHES {
            let spec = ProcessSpec::example(layout, arch);
            for (l, options) in [
                (&lib, SessionOptions::default()),
                (&lib, null_sizeof),
                (&quiet, SessionOptions::default()),
                (&quiet, null_sizeof),
            ] {
                problems.extend(session(l, options, spec.build()));
                for t in corrupt_images(layout, arch) {
                    problems.extend(session(l, options, t));
                }
            }
            misuse(&lib, spec.build());
            misuse(&quiet, spec.build());
            // The library's own texts, through both loads.
            for code in 100..125 {
                let _ = lib.error_string(code);
                let _ = quiet.error_string(code);
            }
        }
    }
    problems
}

/// Nothing the DLL does reaches stdout or stderr.
#[test]
fn the_dll_never_writes_to_stdout_or_stderr() {
    let path = dll_path();
    let capture_path =
        std::env::temp_dir().join(format!("mqd-stdio-silence-{}.out", std::process::id()));
    let capture = std::fs::File::create(&capture_path).expect("temporary capture file");

    let redirect = Redirect::to(&capture);
    let outcome = std::panic::catch_unwind(|| exercise(&path));
    drop(redirect);

    let written = std::fs::read(&capture_path).expect("read the capture file");
    let _ = std::fs::remove_file(&capture_path);
    assert!(
        written.is_empty(),
        "the DLL wrote {} bytes to stdout/stderr: {:?}",
        written.len(),
        String::from_utf8_lossy(&written[..written.len().min(4096)])
    );
    match outcome {
        Ok(problems) => assert!(problems.is_empty(), "{}", problems.join("\n")),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
