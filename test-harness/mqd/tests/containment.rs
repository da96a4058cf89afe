//! A foreign MQD library that crashes or hangs costs only the rank it was reading: mqd
//! runs it in a library host, reports that rank, dumps the others, and leaves every
//! process running and untraced.
//!
//! The foreign library is built here: a shim over ours that dereferences NULL (as
//! MPICH's libtvmpich.so does after a communicator was freed) or spins for ever in
//! `mqs_update_communicator_list` of the ranks it is told, and passes everything else on.

use mqd_fixtures::{self as fixtures, JobOptions};
use mqd_library_host::helper::Helper;
use mqd_synthetic::Layout;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SHIM: &str = r#"
#include <dlfcn.h>
#include <stdlib.h>
#include "mpi_interface.h"

static void *real;
static const mqs_process_callbacks *process_callbacks;

static void *real_symbol(const char *name) {
    if (!real) real = dlopen(getenv("MQD_SHIM_REAL"), RTLD_NOW | RTLD_LOCAL);
    return real ? dlsym(real, name) : NULL;
}

#define PASS(ret, name, params, args) \
    ret name params { \
        static ret (*f) params; \
        if (!f) f = (ret (*) params) real_symbol(#name); \
        return f args; \
    }
#define PASS_VOID(name, params, args) \
    void name params { \
        static void (*f) params; \
        if (!f) f = (void (*) params) real_symbol(#name); \
        f args; \
    }

PASS_VOID(mqs_setup_basic_callbacks, (const mqs_basic_callbacks *c), (c))
const char *mqs_version_string(void) { return "crash-test shim over mqd"; }
PASS(int, mqs_version_compatibility, (void), ())
PASS(int, mqs_dll_taddr_width, (void), ())
PASS(const char *, mqs_dll_error_string, (int c), (c))
PASS(int, mqs_setup_image, (mqs_image *i, const mqs_image_callbacks *c), (i, c))
PASS(int, mqs_image_has_queues, (mqs_image *i, const char **m), (i, m))
PASS_VOID(mqs_destroy_image_info, (mqs_image_info *i), (i))
PASS(int, mqs_process_has_queues, (mqs_process *p, char **m), (p, m))
PASS_VOID(mqs_destroy_process_info, (mqs_process_info *i), (i))
PASS(int, mqs_setup_communicator_iterator, (mqs_process *p), (p))
PASS(int, mqs_get_communicator, (mqs_process *p, mqs_communicator *c), (p, c))
PASS(int, mqs_get_comm_group, (mqs_process *p, int *g), (p, g))
PASS(int, mqs_next_communicator, (mqs_process *p), (p))
PASS(int, mqs_setup_operation_iterator, (mqs_process *p, int o), (p, o))
PASS(int, mqs_next_operation, (mqs_process *p, mqs_pending_operation *o), (p, o))

int mqs_setup_process(mqs_process *p, const mqs_process_callbacks *c) {
    static int (*f)(mqs_process *, const mqs_process_callbacks *);
    if (!f) f = (int (*)(mqs_process *, const mqs_process_callbacks *))
        real_symbol("mqs_setup_process");
    process_callbacks = c;
    return f(p, c);
}

static int told(const char *variable, int rank) {
    const char *value = getenv(variable);
    return value && atoi(value) == rank;
}

int mqs_update_communicator_list(mqs_process *p) {
    static int (*f)(mqs_process *);
    if (!f) f = (int (*)(mqs_process *)) real_symbol("mqs_update_communicator_list");
    int rank = process_callbacks->mqs_get_global_rank_fp(p);
    if (told("MQD_SHIM_CRASH_RANK", rank)) {
        volatile int *null = 0;
        return *null;
    }
    if (told("MQD_SHIM_HANG_RANK", rank)) {
        for (;;) {}
    }
    return f(p);
}
"#;

/// The shim, built once per test run.
fn shim(dir: &Path) -> PathBuf {
    let source = dir.join("shim.c");
    let library = dir.join("libcrash-shim.so");
    std::fs::write(&source, SHIM).expect("write the shim");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-I")
        .arg(&include)
        .arg("-ldl")
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed on the shim");
    library
}

/// Every process runs or sleeps, untraced (5 s to settle).
fn assert_running_untraced(pids: &[i32]) {
    let stuck = fixtures::unsettled(pids, Duration::from_secs(5));
    assert!(stuck.is_empty(), "left stopped or traced: {stuck:?}");
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(test: &str) -> Scratch {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("containment-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    Scratch(dir)
}

/// `mqd job --json` of `starter` with the shim, which crashes on `crash` and hangs on
/// `hang`; its document, exit status and standard error. A deadline kills it.
fn dump_with_shim(
    shim: &Path,
    starter: i32,
    crash: i32,
    hang: Option<i32>,
    extra: &[&str],
) -> (Value, Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command
        .args(["job", "--json", "--dll"])
        .arg(shim)
        .args(extra)
        .arg(starter.to_string())
        .env("MQD_CACHE_DIR", "")
        .env(
            "MQD_SHIM_REAL",
            mqd_library_host::library::bundled_library().expect("our library"),
        )
        .env("MQD_SHIM_CRASH_RANK", crash.to_string())
        .env("MQD_LIBRARY_SILENCE", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(rank) = hang {
        command.env("MQD_SHIM_HANG_RANK", rank.to_string());
    }
    fixtures::default_signal_actions(&mut command);
    let child = command.spawn().expect("run mqd");
    let pid = child.id() as i32;
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if fixtures::process_status(pid).is_none_or(|(state, _)| state == 'Z') {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: kill(2) of our own child, which has not been reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let out = child.wait_with_output().expect("mqd's output");
    let _ = watchdog.join();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("mqd printed no document ({e}); stderr: {stderr}"));
    (doc, out.status.code(), stderr)
}

fn rank(doc: &Value, rank: i64) -> &Value {
    doc["ranks"]
        .as_array()
        .and_then(|ranks| ranks.iter().find(|r| r["rank"] == rank))
        .unwrap_or_else(|| panic!("no rank {rank} in {doc}"))
}

#[test]
fn a_crashing_or_hanging_library_costs_only_its_rank() {
    let dir = scratch("crash");
    let shim = shim(&dir.0);
    let job = fixtures::spawn_job(&JobOptions::new(4, Layout::Ch3, "ring")).expect("a job");
    let mut pids = job.rank_pids().to_vec();
    pids.push(job.starter_pid());

    let (doc, code, stderr) = dump_with_shim(&shim, job.starter_pid(), 1, Some(2), &[]);
    assert!(code.is_some(), "mqd was killed: {stderr}");
    let crashed = rank(&doc, 1)["error"].as_str().unwrap_or_default();
    assert!(
        crashed.contains("crashed (SIGSEGV)") && crashed.contains("libcrash-shim.so"),
        "rank 1: {crashed}"
    );
    let hung = rank(&doc, 2)["error"].as_str().unwrap_or_default();
    assert!(
        hung.contains("did not answer for 2.0 s (hung)"),
        "rank 2: {hung}"
    );
    for healthy in [0, 3] {
        let r = rank(&doc, healthy);
        assert!(r["error"].is_null(), "rank {healthy}: {}", r["error"]);
        let comms = r["communicators"].as_array().expect("communicators");
        assert!(
            comms.iter().any(|c| c["name"] == "MPI_COMM_WORLD"),
            "rank {healthy}: {comms:?}"
        );
    }
    // A verdict over two unread ranks is no verdict.
    let verdict = doc["verdict"].as_str().unwrap_or_default().to_lowercase();
    assert!(verdict.contains("undetermined"), "{verdict}");
    assert_running_untraced(&pids);

    // The same job, dumped again at once: nothing was left behind.
    let (again, _, stderr) = dump_with_shim(&shim, job.starter_pid(), -1, None, &[]);
    for r in 0..4 {
        assert!(rank(&again, r)["error"].is_null(), "rank {r}: {stderr}");
    }
    assert_running_untraced(&pids);
}

#[test]
fn our_library_in_a_host_dumps_what_it_dumps_in_process() {
    let job = fixtures::spawn_job(&JobOptions::new(4, Layout::Ch4Am, "ring")).expect("a job");
    let dump = |isolation: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_mqd"))
            .args(["job", "--json", "--isolate-library", isolation])
            .arg(job.starter_pid().to_string())
            .env("MQD_CACHE_DIR", "")
            .output()
            .expect("run mqd");
        serde_json::from_slice(&out.stdout).expect("a document")
    };
    let (inside, hosted) = (dump("never"), dump("always"));
    assert_eq!(inside["ranks"], hosted["ranks"]);
    assert_eq!(inside["verdict"], hosted["verdict"]);
    assert!(inside["ranks"].as_array().is_some_and(|r| r.len() == 4));
}

/// MPICH's own library crashes when a communicator was freed between two displays of
/// one session (it dereferences NULL): in a library host, that costs the host, not mqd.
/// The process is reported, and the next process is read by a new host.
#[test]
fn libtvmpich_crashing_on_a_freed_communicator_is_contained() {
    use mqd_fixtures::real_mpich::{Device, mpich};
    use mqd_library_host::isolation::LibraryHost;
    use mqd_synthetic::{Arch, ProcessSpec};

    let tvmpich = mpich(Device::Ch3).tvmpich();
    let helper = Helper::new(env!("CARGO_BIN_EXE_mqd"), &["library-host"]);
    let mut host = LibraryHost::new(&helper, &tvmpich);
    let before = ProcessSpec::example(Layout::Ch3, Arch::LP64_LE);
    let mut after = before.clone();
    after.comms.retain(|c| c.name != "split");
    after.sequence_number += 1;
    let blank = || mqd_model::RankDump::unread(1, None, None);

    let mut first = blank();
    let (shown, _) = host.display(Box::new(before.build()), true, "", Some(1), &mut first);
    assert!(shown.is_ok(), "{shown:?}");
    let names: Vec<&str> = first
        .communicators()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        names.contains(&"split"),
        "libtvmpich's first display: {names:?}"
    );

    let mut second = blank();
    let (shown, _) = host.redisplay(0, Box::new(after.build()), &mut second);
    let why = shown
        .expect_err("libtvmpich survived the freed communicator")
        .cause;
    assert!(why.contains("crashed (SIGSEGV)"), "{why}");
    assert_eq!(second.outcome.as_ref().err(), Some(&why));
    assert_eq!(host.lost_hosts, 1);

    // The next process gets a new host, which reads it whole.
    let mut third = blank();
    let (shown, _) = host.display(Box::new(after.build()), true, "", Some(1), &mut third);
    assert!(shown.is_ok(), "{shown:?}");
    assert!(
        third
            .communicators()
            .iter()
            .any(|c| c.name == "MPI_COMM_WORLD")
    );
}
