//! Hybrid MPI+OpenMP ranks read through their OpenMP runtime's own debugging library
//! (OMPD): `real-mpi/hybrid.c` built with gcc's directives and linked against PyPI's
//! `intel-openmp` (Intel's runtime and its `libiomp5_db.so`, in a virtual environment
//! the tests make), run on the MPICH with debugger support and on Debian's MPICH, with
//! `OMP_DEBUG=enabled` so that the runtime tracks its threads' states. Each rank prints
//! the kernel id of each of its OpenMP threads by thread number: what mqd says of a
//! thread is checked against what the thread recorded of itself, live and from cores.
//! Runtimes without OMPD (GCC's libgomp, Debian's stripped libomp) say why; an OMPD
//! library that crashes or hangs costs the OpenMP view of each process, nothing else.

mod support;

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::real_mpich::{self, Device, Job};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use support::Scratch;

/// One job at a time: eight OpenMP threads per job on two cores.
static ONE_JOB: Mutex<()> = Mutex::new(());

const LIMIT: Duration = Duration::from_secs(120);

const SOURCE: &str = include_str!("../../fixtures/real-mpi/hybrid.c");

/// Where the `n`-th `#pragma omp parallel` (from 1) of the function `function` of
/// hybrid.c is ("hybrid.c:51"): where mqd must place the region it makes.
fn directive(function: &str, n: usize) -> String {
    let lines: Vec<&str> = SOURCE.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(&format!("static void {function}(void)")))
        .unwrap_or_else(|| panic!("no {function} in hybrid.c"));
    let at = lines[start..]
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("#pragma omp parallel"))
        .nth(n - 1)
        .map(|(i, _)| start + i + 1)
        .unwrap_or_else(|| panic!("no directive {n} in {function}"));
    format!("hybrid.c:{at}")
}

/// hybrid.c built against PyPI's Intel OpenMP runtime with `mpicc`.
fn intel_program(dir: &Scratch, mpicc: &Path) -> PathBuf {
    let lib = support::intel_openmp_lib();
    let program = dir.file("hybrid");
    let lib_dir = lib.display().to_string();
    support::build_hybrid(
        mpicc,
        &[
            &format!("-L{lib_dir}"),
            "-liomp5",
            &format!("-Wl,-rpath,{lib_dir}"),
        ],
        &program,
    );
    program
}

/// `mpiexec -n 2 PROGRAM --scenario SCENARIO`, the runtime tracking states, every
/// rank's READY line in and its threads settled in their waits.
fn start(mpiexec: &Path, program: &Path, scenario: &str) -> Job {
    let mut command = Command::new(mpiexec);
    command
        .args(["-n", "2"])
        .arg(program)
        .args(["--scenario", scenario])
        .env("OMP_DEBUG", "enabled");
    let mut job = Job::start(
        command,
        format!("mpiexec -n 2 hybrid --scenario {scenario}"),
        2,
    );
    job.program = "hybrid".into();
    job.wait_ready(0);
    // Past the READY line: the other threads into their waits.
    std::thread::sleep(Duration::from_millis(1500));
    job
}

fn mqd(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    // A crashing library host may leave a core: in the scratch space, if anywhere.
    default_signal_actions(&mut command)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_TARGET_TMPDIR"));
    let run = real_mpich::run(command, LIMIT);
    (
        run.status.and_then(|s| s.code()),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        run.stderr,
    )
}

fn json(args: &[&str]) -> Value {
    let (code, out, err) = mqd(args, &[]);
    assert!(matches!(code, Some(0..=9)), "mqd {args:?}: {code:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("mqd {args:?}: {e}: {out}"))
}

/// Each rank's threads by the number hybrid.c gave them (`tN=` on its READY line): the
/// thread's JSON.
fn threads_by_number(dump: &Value, job: &Job) -> Vec<HashMap<u32, Value>> {
    job.ready
        .iter()
        .map(|ready| {
            let rank = dump["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["rank"] == ready.rank)
                .unwrap_or_else(|| panic!("rank {} not in the dump: {dump}", ready.rank));
            (0..4)
                .filter_map(|n| {
                    let tid = *ready.addrs.get(&format!("t{n}"))?;
                    let thread = rank["threads"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|t| t["tid"].as_u64() == Some(tid))
                        .unwrap_or_else(|| panic!("thread {tid} (t{n}) not in {rank}"))
                        .clone();
                    Some((n, thread))
                })
                .collect()
        })
        .collect()
}

/// `mqd core --json` of cores of every rank of `job` (taken while all are stopped).
fn from_cores(job: &Job, dir: &Scratch, what: &str) -> Value {
    let cores = support::gcores(&job.pids(), dir.path(), what);
    let mut args = vec!["core".to_owned(), "--json".into()];
    args.extend(cores.iter().map(|c| c.display().to_string()));
    let dump = json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for core in cores {
        let _ = std::fs::remove_file(core);
    }
    dump
}

/// Checks recv-in-region: thread 0 in MPI_Recv working in a region of 4 at the
/// directive, threads 1-3 at its closing barrier, waiting for their process.
fn check_recv_in_region(dump: &Value, job: &Job, what: &str) {
    let site = directive("recv_in_region", 1);
    for threads in threads_by_number(dump, job) {
        let t0 = &threads[&0];
        let openmp = &t0["openmp"];
        assert_eq!(openmp["thread_num"], 0, "{what}: {t0}");
        assert_eq!(openmp["state"], "work_parallel", "{what}: {t0}");
        assert_eq!(t0["location"]["in_mpi"]["call"], "MPI_Recv", "{what}: {t0}");
        let region = &openmp["regions"][0];
        assert_eq!(region["team_size"], 4, "{what}: {t0}");
        assert_eq!(region["level"], 1, "{what}: {t0}");
        assert_eq!(region["source"], site.as_str(), "{what}: {t0}");
        assert_eq!(region["function"], "recv_in_region", "{what}: {t0}");
        assert_eq!(
            openmp["regions"].as_array().unwrap().len(),
            1,
            "{what}: {t0}"
        );
        for n in 1..4 {
            let t = &threads[&n];
            assert_eq!(t["openmp"]["thread_num"], n, "{what}: {t}");
            assert_eq!(
                t["openmp"]["state"], "wait_barrier_implicit_parallel",
                "{what}: {t}"
            );
            assert_eq!(t["openmp"]["regions"][0]["id"], region["id"], "{what}: {t}");
            assert_eq!(
                t["location"]["outside"]["waits"], "OpenMP wait_barrier_implicit_parallel",
                "{what}: {t}"
            );
        }
    }
}

/// A thread in MPI_Recv inside a parallel region while its team waits at the region's
/// closing barrier, on the MPICH with debugger support: the states, regions and tasks
/// of every thread, live in JSON and text and from cores; none with --no-openmp.
#[test]
fn a_thread_in_mpi_recv_inside_a_region_and_its_team_at_the_barrier_live_and_from_cores() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-recv");
    let ch3 = real_mpich::mpich(Device::Ch3);
    let program = intel_program(&dir, &ch3.prefix.join("bin/mpicc"));
    let job = start(&ch3.mpiexec(), &program, "recv-in-region");
    let starter = job.starter.to_string();

    let dump = json(&["job", &starter, "--json"]);
    check_recv_in_region(&dump, &job, "live");
    // The ranks wait in MPI_Recv for each other, their teams for them: the hold proves
    // it, nothing is open.
    let diagnosis = &dump["diagnosis"];
    let doubts: Vec<String> = diagnosis["doubts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["doubt"].as_object().unwrap().keys().cloned())
        .collect();
    assert!(doubts.is_empty(), "{diagnosis}");
    assert_eq!(diagnosis["verdict"], "deadlock", "{diagnosis}");
    assert!(
        diagnosis["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "deadlock_cycle" && f["ranks"] == "0,1"),
        "{diagnosis}"
    );
    for r in dump["ranks"].as_array().unwrap() {
        assert!(r.get("notes").is_none(), "nothing missing: {}", r["notes"]);
    }

    let (code, text, err) = mqd(&["job", &starter], &[]);
    assert!(matches!(code, Some(0..=9)), "{err}");
    let site = directive("recv_in_region", 1);
    let expected = format!(
        "  ranks 0,1: region at {site} (recv_in_region), team of 4: thread 0 in MPI_Recv, threads 1-3 at the region's closing barrier (wait_barrier_implicit_parallel)"
    );
    assert!(text.contains(&expected), "{expected}\nnot in:\n{text}");
    // By classes (as a job past 256 ranks): each class with its ranks' OpenMP threads.
    let (_, text, err) = mqd(&["job", &starter, "--by-classes"], &[]);
    let expected = format!(
        "    OpenMP: region at {site} (recv_in_region), team of 4: thread 0 in MPI_Recv, threads 1-3 at the region's closing barrier (wait_barrier_implicit_parallel)\n"
    );
    assert!(text.contains(&expected), "{expected}\nnot in:\n{text}{err}");

    // In mqd's own process (a private copy of the library per process): the same.
    let in_process = json(&["job", &starter, "--json", "--isolate-library", "never"]);
    check_recv_in_region(&in_process, &job, "in process");

    // Without OMPD, no thread has an OpenMP view.
    let plain = json(&["job", &starter, "--json", "--no-openmp"]);
    for r in plain["ranks"].as_array().unwrap() {
        for t in r["threads"].as_array().unwrap() {
            assert!(t.get("openmp").is_none(), "{t}");
        }
    }

    // From cores of both ranks, taken at one moment: the same.
    check_recv_in_region(&from_cores(&job, &dir, "recv-in-region"), &job, "cores");
}

/// Checks nested: the MPI thread in two regions, its inner team's other thread at the
/// inner barrier, outer thread 1 at the outer barrier.
fn check_nested(dump: &Value, job: &Job, what: &str) {
    let outer_site = directive("nested", 1);
    for threads in threads_by_number(dump, job) {
        // t0: thread 0 of the inner team of outer thread 0, in MPI_Recv.
        let t0 = &threads[&0];
        let regions = t0["openmp"]["regions"].as_array().unwrap();
        assert_eq!(regions.len(), 2, "{what}: {t0}");
        assert_eq!(regions[0]["level"], 2, "{what}: {t0}");
        assert_eq!(regions[0]["team_size"], 2, "{what}: {t0}");
        assert_eq!(regions[0]["function"], "nested._omp_fn.0", "{what}: {t0}");
        assert_eq!(regions[1]["level"], 1, "{what}: {t0}");
        assert_eq!(regions[1]["team_size"], 2, "{what}: {t0}");
        assert_eq!(regions[1]["source"], outer_site.as_str(), "{what}: {t0}");
        assert_eq!(
            regions[0]["source"],
            directive("nested", 2).as_str(),
            "{what}: {t0}"
        );
        assert_eq!(t0["location"]["in_mpi"]["call"], "MPI_Recv", "{what}: {t0}");
        // t1: thread 1 of that inner team, at its closing barrier.
        let t1 = &threads[&1];
        assert_eq!(t1["openmp"]["thread_num"], 1, "{what}: {t1}");
        assert_eq!(
            t1["openmp"]["regions"][0]["id"], regions[0]["id"],
            "{what}: {t1}"
        );
        assert_eq!(
            t1["openmp"]["state"], "wait_barrier_implicit_parallel",
            "{what}: {t1}"
        );
        // t2: outer thread 1, its inner region over, at the outer region's barrier.
        let t2 = &threads[&2];
        assert_eq!(t2["openmp"]["thread_num"], 1, "{what}: {t2}");
        let outer = t2["openmp"]["regions"].as_array().unwrap();
        assert_eq!(outer.len(), 1, "{what}: {t2}");
        assert_eq!(outer[0]["id"], regions[1]["id"], "{what}: {t2}");
        assert_eq!(
            t2["openmp"]["state"], "wait_barrier_implicit_parallel",
            "{what}: {t2}"
        );
    }
}

/// Checks lock-in-mpi: thread 0 in MPI_Recv, threads 1-3 waiting for one lock.
fn check_lock_in_mpi(dump: &Value, job: &Job, what: &str) {
    for threads in threads_by_number(dump, job) {
        assert_eq!(
            threads[&0]["location"]["in_mpi"]["call"], "MPI_Recv",
            "{what}: {}",
            threads[&0]
        );
        let lock = threads[&1]["openmp"]["wait_id"].as_u64();
        assert!(lock.is_some_and(|l| l != 0), "{what}: {}", threads[&1]);
        for n in 1..4 {
            let t = &threads[&n];
            assert_eq!(t["openmp"]["state"], "wait_lock", "{what}: {t}");
            assert_eq!(
                t["openmp"]["wait_id"].as_u64(),
                lock,
                "{what}: one lock: {t}"
            );
            assert_eq!(
                t["location"]["outside"]["waits"], "OpenMP wait_lock",
                "{what}: {t}"
            );
        }
    }
}

/// Nested regions (a region of 2 whose threads make regions of 2) and a lock held by a
/// thread blocked in MPI while its team waits for it, live and from cores.
#[test]
fn nested_regions_and_a_lock_held_by_a_thread_blocked_in_mpi() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-nested");
    let ch3 = real_mpich::mpich(Device::Ch3);
    let program = intel_program(&dir, &ch3.prefix.join("bin/mpicc"));

    let job = start(&ch3.mpiexec(), &program, "nested");
    let dump = json(&["job", &job.starter.to_string(), "--json"]);
    check_nested(&dump, &job, "live");
    check_nested(&from_cores(&job, &dir, "nested"), &job, "cores");
    drop(job);

    let job = start(&ch3.mpiexec(), &program, "lock-in-mpi");
    let starter = job.starter.to_string();
    let dump = json(&["job", &starter, "--json"]);
    check_lock_in_mpi(&dump, &job, "live");
    check_lock_in_mpi(&from_cores(&job, &dir, "lock-in-mpi"), &job, "cores");
    let (_, text, _) = mqd(&["job", &starter], &[]);
    assert!(
        text.contains(&format!(
            "region at {} (lock_in_mpi), team of 4: thread 0 in MPI_Recv, threads 1-3 waiting for a lock (wait_lock)",
            directive("lock_in_mpi", 1)
        )),
        "{text}"
    );
}

/// Threads that wait for each other inside a rank, no MPI call pending: thread 0 at a
/// barrier its team cannot reach, as they wait for the lock thread 0 holds. A finding
/// of its own, possible (one snapshot cannot prove it), live and from cores; and no "no
/// deadlock" without OMPD either.
#[test]
fn an_openmp_only_hang_is_a_finding_of_its_own() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-lock");
    let ch3 = real_mpich::mpich(Device::Ch3);
    let program = intel_program(&dir, &ch3.prefix.join("bin/mpicc"));
    let job = start(&ch3.mpiexec(), &program, "lock-only");
    let starter = job.starter.to_string();
    let dump = json(&["job", &starter, "--json"]);
    let diagnosis = &dump["diagnosis"];
    assert_eq!(diagnosis["verdict"], "undetermined", "{diagnosis}");
    let finding = diagnosis["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "openmp_wait")
        .unwrap_or_else(|| panic!("no openmp_wait finding: {diagnosis}"));
    assert_eq!(finding["ranks"], "0,1", "{finding}");
    assert_eq!(finding["certainty"], "possible", "{finding}");
    let states = &finding["subject"]["openmp_wait"]["states"];
    assert_eq!(states[0][1], serde_json::json!([0]), "{finding}");
    assert_eq!(states[1][0], "wait_lock", "{finding}");
    assert_eq!(states[1][1], serde_json::json!([1, 2, 3]), "{finding}");
    let (_, text, _) = mqd(&["job", &starter], &[]);
    assert!(
        text.contains("Possible hang inside ranks 0,1 (OpenMP): every thread waits for another thread of its process, as its OpenMP runtime says: thread 0 at a barrier")
            && text.contains("threads 1-3 waiting for one lock (wait_lock)"),
        "{text}"
    );
    // From cores: the same finding.
    let cored = from_cores(&job, &dir, "lock-only");
    assert!(
        cored["diagnosis"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "openmp_wait" && f["ranks"] == "0,1"),
        "{}",
        cored["diagnosis"]
    );
    // Without OMPD the spinning lock waiters are still seen waiting (their runtime's
    // wait loop), but nothing says on what.
    let plain = json(&["job", &starter, "--json", "--no-openmp"]);
    assert_ne!(plain["diagnosis"]["verdict"], "no deadlock", "{plain}");
    assert!(
        !plain["diagnosis"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "openmp_wait"),
        "{plain}"
    );
}

/// The same program on Debian's MPICH (no message queues): the OpenMP view is the
/// runtime's, whatever the MPI, live and from cores.
#[test]
fn on_a_stock_mpi_the_openmp_view_is_the_same() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-stock");
    let mpi = support::debian();
    let program = intel_program(&dir, &mpi.mpicc);
    let job = start(&mpi.mpiexec, &program, "recv-in-region");
    let mut args = vec!["dump".to_owned(), "--json".into()];
    args.extend(job.pids().iter().map(i32::to_string));
    let dump = json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    check_recv_in_region(&dump, &job, "Debian's MPICH");
    check_recv_in_region(
        &from_cores(&job, &dir, "Debian's MPICH"),
        &job,
        "Debian's MPICH, cores",
    );
}

/// Runtimes without an OMPD library to serve them: GCC's libgomp (no released GCC has
/// one) and Debian's LLVM libomp (stripped of the symbols its libompd reads). Each rank
/// says why, and its stacks are still there.
#[test]
fn runtimes_without_ompd_say_why() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-none");
    let ch3 = real_mpich::mpich(Device::Ch3);
    let mpicc = ch3.prefix.join("bin/mpicc");
    let llvm = "/usr/lib/llvm-14/lib";
    for (name, link, note) in [
        (
            "libgomp",
            vec!["-fopenmp".to_owned()],
            "has no OMPD library (no released GCC ships one)",
        ),
        (
            "libomp",
            vec![
                format!("-L{llvm}"),
                "-lomp".into(),
                format!("-Wl,-rpath,{llvm}"),
            ],
            "is stripped of the symbols its OMPD library reads",
        ),
    ] {
        let program = dir.file(&format!("hybrid-{name}"));
        let link: Vec<&str> = link.iter().map(String::as_str).collect();
        support::build_hybrid(&mpicc, &link, &program);
        let mut job = start(&ch3.mpiexec(), &program, "recv-in-region");
        job.program = format!("hybrid-{name}");
        let dump = json(&["job", &job.starter.to_string(), "--json"]);
        for r in dump["ranks"].as_array().unwrap() {
            let notes = r["notes"].to_string();
            assert!(notes.contains(note), "{name}: {notes}");
            assert!(r["threads"].as_array().unwrap().len() >= 4, "{name}: {r}");
            assert!(
                r["threads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|t| t.get("openmp").is_none()),
                "{name}: {r}"
            );
        }
    }
}

/// A C shim with every OMPD entry point whose `ompd_process_initialize` crashes
/// (`SHIM=crash`) or never returns (`SHIM=hang`).
const SHIM: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef long long w;
int ompd_get_api_version(w *v) { *v = 201811; return 0; }
int ompd_get_version_string(const char **s) { *s = "shim"; return 0; }
int ompd_initialize(w v, const void *cb) { return 0; }
int ompd_process_initialize(void *c, void **h) {
    if (!strcmp(getenv("SHIM") ? getenv("SHIM") : "", "crash")) *(volatile int *)8 = 1;
    for (;;) pause();
}
#define STUB(name) int name(void) { return 4; }
STUB(ompd_rel_address_space_handle) STUB(ompd_get_omp_version) STUB(ompd_get_thread_handle)
STUB(ompd_rel_thread_handle) STUB(ompd_get_curr_parallel_handle)
STUB(ompd_get_enclosing_parallel_handle) STUB(ompd_rel_parallel_handle)
STUB(ompd_parallel_handle_compare) STUB(ompd_get_curr_task_handle) STUB(ompd_rel_task_handle)
STUB(ompd_get_task_function) STUB(ompd_get_state) STUB(ompd_enumerate_states)
STUB(ompd_enumerate_icvs) STUB(ompd_get_icv_from_scope)
"#;

/// An OMPD library that crashes, or hangs, in every process: each rank's OpenMP view is
/// lost with the reason, its queues, stacks and the verdict are as without OMPD, and no
/// library host is left.
#[test]
fn an_ompd_library_that_crashes_or_hangs_costs_only_the_openmp_view() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("openmp-shim");
    let shim = dir.file("libshim_db.so");
    let source = dir.file("shim.c");
    std::fs::write(&source, SHIM).unwrap();
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&source)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let ch3 = real_mpich::mpich(Device::Ch3);
    let program = intel_program(&dir, &ch3.prefix.join("bin/mpicc"));
    let job = start(&ch3.mpiexec(), &program, "recv-in-region");
    let starter = job.starter.to_string();
    let shim_arg = shim.display().to_string();
    let (plain_code, plain, _) = mqd(&["job", &starter, "--no-openmp"], &[]);
    let verdict = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("Verdict:"))
            .map(str::to_owned)
    };
    for (mode, how) in [
        ("crash", "crashed (SIGSEGV)"),
        ("hang", "did not answer for 2.0 s (hung)"),
    ] {
        let env = [("SHIM", mode), ("MQD_LIBRARY_SILENCE", "2")];
        let (code, text, err) = mqd(&["job", &starter, "--ompd", &shim_arg], &env);
        assert_eq!(code, plain_code, "{mode}: {err}\n{text}");
        let note = format!(
            "ranks 0,1: OpenMP threads not read: the OMPD library {shim_arg} {how} while reading this process's OpenMP threads"
        );
        assert!(text.contains(&note), "{mode}: {note}\nnot in:\n{text}");
        assert!(
            text.contains("receive from the other rank tag 7"),
            "{mode}: {text}"
        );
        assert_eq!(verdict(&text), verdict(&plain), "{mode}: {text}");
        // The children name the library on their command lines.
        let left = support::running_with(&shim_arg);
        assert!(left.is_empty(), "{mode}: hosts left: {left:?}");
    }
}
