//! Shared by the tests of `mqd`: jobs of synthetic MPICH processes displayed through the
//! real library, the diagnosis as a user reads it (findings with their words), DOT
//! parsing, and scratch files.
#![allow(dead_code)]

pub mod rendered;

pub use rendered::*;

use mqd_fixtures::expect;
use mqd_model::{Acquisition, FindingKind, JobDump, LibraryInfo, RankDump};
use mqd_synthetic::{
    Arch, CommSpec, Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec, SyntheticTarget,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

// ------------------------------------------------------------------ synthetic jobs

/// Context id of the "ring" duplicate of COMM_WORLD.
pub const RING: i32 = 48;

/// A process of an `n`-rank job at world rank `r`: COMM_SELF and COMM_WORLD, no queues.
pub fn base(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = ProcessSpec::new(layout, Arch::LP64_LE);
    spec.sequence_number = 2;
    spec.comms = vec![CommSpec::self_comm(r), CommSpec::world(n, r)];
    spec
}

/// [`base`] plus the "ring" duplicate of COMM_WORLD.
pub fn with_ring(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = base(layout, n, r);
    spec.sequence_number = 3;
    spec.comms
        .insert(0, CommSpec::intra(2, "ring", RING, r, (0..n).collect()));
    spec
}

/// Displays every process through the library, as a job (rank i = `specs[i]`).
pub fn job(specs: &[ProcessSpec]) -> JobDump {
    let mut dbg = expect::debugger();
    let ranks = specs
        .iter()
        .enumerate()
        .map(|(r, spec)| {
            let p = dbg
                .add_process(Box::new(SyntheticTarget::build(spec)), r as i32)
                .unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let display = dbg.display(p).unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let message = dbg.process_message(p).map(str::to_owned);
            RankDump {
                mpi: dbg.mpi_state(p),
                rank: r as i32,
                pid: Some(1000 + r as i32),
                host: Some("synthetic".into()),
                executable: None,
                lists_blocking_sends: mqd_library_host::display::lists_blocking_sends(
                    message.as_deref(),
                ),
                signal: None,
                duplicate: false,
                threads: Vec::new(),
                message,
                outcome: Ok(display.communicators),
                notes: Vec::new(),
                traffic: None,
            }
        })
        .collect();
    let lib = expect::library();
    JobDump {
        snapshot: mqd_model::Snapshot::One,
        dll: LibraryInfo {
            path: lib.path().display().to_string(),
            version: lib.version_string().to_owned(),
            note: None,
        },
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
        job_size: None,
        ranks,
    }
}

/// An `n`-rank ring blocked in `MPI_Ssend` to the right neighbour on "ring", tag 5: each
/// send pending (listed when `listed`), each message waiting unexpected at the destination
/// (eager when `listed`, a rendezvous announcement otherwise: what ch3 shows of a blocking
/// MPI_Ssend, which it does not list).
pub fn ssend_ring(layout: Layout, n: i32, listed: bool) -> JobDump {
    let specs: Vec<ProcessSpec> = (0..n)
        .map(|r| {
            let (left, right) = ((r + n - 1) % n, (r + 1) % n);
            let mut spec = with_ring(layout, n, r);
            if listed {
                spec.sends = vec![RequestSpec::send(RING, right, 5, 0x7000_0000, 1000)];
                spec.unexpected = vec![
                    RequestSpec::unexpected(RING, left, 5, 0)
                        .completed(left, 5)
                        .synchronous(),
                ];
            } else {
                spec.unexpected = vec![RequestSpec::unexpected(RING, left, 5, 0).synchronous()];
            }
            spec
        })
        .collect();
    job(&specs)
}

/// [`ssend_ring`] of 4 ranks (unlisted sends) whose stacks show each blocked in
/// `MPI_Ssend` to its right neighbour on "ring", tag 5: what proves the ring.
pub fn blocked_ssend_ring(layout: Layout) -> JobDump {
    let mut job = ssend_ring(layout, 4, false);
    blocked_in(
        &mut job,
        "MPI_Ssend",
        "ring",
        |r| Some(i64::from((r + 1) % 4)),
        Some(5),
    );
    job
}

/// Rank 0 waits for anyone (tag 1); ranks 1 and 2 wait for rank 0 (tag 2).
pub fn knot_job() -> JobDump {
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 3, r);
            spec.posted = vec![if r == 0 {
                RequestSpec::recv(0, MPI_ANY_SOURCE, 1, 0x7000_0000, 1)
            } else {
                RequestSpec::recv(0, 0, 2, 0x7000_0000, 1)
            }];
            spec
        })
        .collect();
    job(&specs)
}

pub fn kinds(d: &Rendered) -> Vec<FindingKind> {
    d.findings.iter().map(|f| f.kind).collect()
}

pub fn json_kinds(d: &Rendered) -> Vec<String> {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

pub fn only(d: &Rendered, kind: FindingKind) -> &Seen {
    let found: Vec<_> = d.of_kind(kind).collect();
    assert_eq!(found.len(), 1, "one {kind:?} in\n{}", d.to_text());
    found[0]
}

/// The JSON finding of `kind` (the first).
pub fn json_finding(d: &Rendered, kind: &str) -> Value {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:#}", d.to_json()))
        .clone()
}

// ------------------------------------------------------------------ pictures

/// A DOT document in the one-statement-per-line form `to_dot` writes.
#[derive(Debug, Default)]
pub struct Dot {
    pub nodes: BTreeMap<String, String>,
    pub edges: Vec<(String, String, String)>,
}

pub fn parse_dot(text: &str) -> Dot {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("digraph mqd {"), "{text}");
    assert_eq!(text.lines().last(), Some("}"), "{text}");
    assert_eq!(text.matches('{').count(), text.matches('}').count());
    let mut dot = Dot::default();
    for line in lines {
        let line = line.trim();
        if line == "}" || line.is_empty() {
            continue;
        }
        assert!(line.ends_with("];"), "statement: {line}");
        let (head, attrs) = line.split_once(" [").expect("attributes");
        // Quotes balance (escaped quotes do not count).
        assert_eq!(
            attrs.replace("\\\"", "").matches('"').count() % 2,
            0,
            "{line}"
        );
        match head.split_once(" -> ") {
            Some((a, b)) => dot.edges.push((a.into(), b.into(), attrs.into())),
            None if ["graph", "node", "edge"].contains(&head) => {}
            None => {
                assert!(
                    head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "node id {head}"
                );
                assert!(
                    dot.nodes.insert(head.into(), attrs.into()).is_none(),
                    "{head} twice"
                );
            }
        }
    }
    for (a, b, _) in &dot.edges {
        assert!(
            dot.nodes.contains_key(a) && dot.nodes.contains_key(b),
            "{a} -> {b} undeclared:\n{text}"
        );
    }
    dot
}

/// A scratch directory of one test, under the target directory (never `/tmp` itself),
/// removed with everything in it when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh directory named after the test.
    pub fn new(test: &str) -> Scratch {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mqd-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// A file in it.
    pub fn file(&self, name: &str) -> PathBuf {
        assert!(
            !name.is_empty() && !name.contains('/'),
            "a file name: {name:?}"
        );
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// -------------------------------------------------------------- processes

/// The processes of this host that `keep` keeps.
pub fn processes(keep: impl Fn(i32) -> bool) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| keep(pid))
        .collect()
}

/// The processes of this host whose command line names `word`.
pub fn running_with(word: &str) -> Vec<i32> {
    processes(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(word))
    })
}

// ------------------------------------------------------------------ cores

/// Waits (at most 30 s) until the threads of each of `pids` have stayed the same for
/// `quiet`: a rank entering `MPI_Finalize` ends its MPI's helper threads, and a hold
/// that sees threads come or go rightly proves nothing.
pub fn threads_settled(pids: &[i32], quiet: std::time::Duration) {
    let threads = || -> Vec<Vec<String>> {
        pids.iter()
            .map(|pid| {
                let mut tids: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                tids.sort();
                tids
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = threads();
    let mut since = std::time::Instant::now();
    while since.elapsed() < quiet && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = threads();
        if now != seen {
            seen = now;
            since = std::time::Instant::now();
        }
    }
}

/// gdb's cores of `pids`, stopped together while they are taken (one snapshot of them
/// all, as `mqd core --one-snapshot` reads them): `DIR/core.PID`, in the order of `pids`.
pub fn gcores(pids: &[i32], dir: &std::path::Path, what: &str) -> Vec<PathBuf> {
    mqd_fixtures::gcore_one_snapshot(pids, &dir.join("core"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

// ------------------------------------------------------------------ stack scenarios

/// What `mqd --stacks` must conclude on a scenario of `real-mpi/scenarios.c`.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    /// The JSON verdict.
    pub verdict: &'static str,
    /// The exit status that goes with it.
    pub exit: i32,
    /// The kind of the finding that says it.
    pub kind: &'static str,
    /// Words of that finding.
    pub words: &'static str,
}

/// A scenario of the stacks issue, with its conclusions on an MPI without message queues
/// (stacks only) and on MPICH with debugger support (queues and stacks).
#[derive(Debug, Clone, Copy)]
pub struct StackScenario {
    pub name: &'static str,
    pub ranks: usize,
    /// Live: a possible deadlock is proven by the hold.
    pub stacks_only: Expected,
    /// From cores: one moment, nothing held.
    pub stacks_only_cores: Expected,
    /// Live, with queues: what one snapshot leaves open, the hold proves.
    pub with_queues: Expected,
    /// From cores, with queues: one moment.
    pub with_queues_cores: Expected,
}

/// A collective waiting for a computing rank, a Bcast/Barrier mismatch, a p2p ring,
/// pre-posted receives of computing ranks (never a deadlock), and a rank in
/// `MPI_Finalize` while another waits.
pub const STACK_SCENARIOS: [StackScenario; 5] = [
    StackScenario {
        name: "allreduce",
        ranks: 3,
        stacks_only: ALLREDUCE_SEEN,
        stacks_only_cores: ALLREDUCE_SEEN,
        with_queues: ALLREDUCE_SEEN,
        with_queues_cores: ALLREDUCE_SEEN,
    },
    StackScenario {
        name: "mismatch",
        ranks: 4,
        stacks_only: MISMATCH_HELD,
        stacks_only_cores: MISMATCH_POSSIBLE,
        with_queues: MISMATCH_HELD,
        with_queues_cores: MISMATCH_POSSIBLE,
    },
    StackScenario {
        name: "ring",
        ranks: 4,
        // On a communicator the program duplicated: without queues its members come
        // from the library's object; live, persistence proves the cycle.
        stacks_only: RING_PROVEN,
        stacks_only_cores: RING_POSSIBLE,
        with_queues: RING_WITH_QUEUES,
        with_queues_cores: RING_WITH_QUEUES,
    },
    StackScenario {
        name: "preposted",
        ranks: 2,
        stacks_only: PREPOSTED_CLEAN,
        stacks_only_cores: PREPOSTED_CLEAN,
        with_queues: PREPOSTED_WITH_QUEUES,
        with_queues_cores: PREPOSTED_WITH_QUEUES,
    },
    StackScenario {
        name: "finalize",
        ranks: 2,
        stacks_only: FINALIZE_HELD,
        // Rank 1 is still inside MPI_Finalize: a message it sent before may be on its way.
        stacks_only_cores: FINALIZE_POSSIBLE,
        with_queues: FINALIZE_HELD,
        with_queues_cores: FINALIZE_POSSIBLE,
    },
];

const ALLREDUCE_SEEN: Expected = Expected {
    verdict: "no_deadlock",
    exit: 0,
    kind: "collective_wait",
    words: "ranks 0,1 are in MPI_Allreduce on \"MPI_COMM_WORLD\"; rank 2 is not in MPI (in compute_forever at scenarios.c:",
};

const MISMATCH_HELD: Expected = Expected {
    verdict: "deadlock",
    exit: 8,
    kind: "collective_mismatch",
    words: "rank 0 in MPI_Barrier (scenarios.c:551), ranks 1-3 in MPI_Bcast (scenarios.c:553), all on \"MPI_COMM_WORLD\"",
};

const RING_WITH_QUEUES: Expected = Expected {
    verdict: "deadlock",
    exit: 8,
    kind: "deadlock_cycle",
    words: "Deadlock",
};

const PREPOSTED_WITH_QUEUES: Expected = Expected {
    verdict: "no_deadlock",
    exit: 0,
    kind: "no_deadlock",
    words: "the stacks show ranks 0,1 running (not blocked in MPI)",
};

/// Held: rank 0's receive from rank 1, in MPI_Finalize, never ends.
const FINALIZE_HELD: Expected = Expected {
    verdict: "deadlock",
    exit: 8,
    kind: "held",
    words: "Proven by holding the job for",
};

const MISMATCH_POSSIBLE: Expected = Expected {
    verdict: "undetermined",
    exit: 9,
    kind: "collective_mismatch",
    words: "rank 0 in MPI_Barrier (scenarios.c:551), ranks 1-3 in MPI_Bcast (scenarios.c:553), all on \"MPI_COMM_WORLD\"",
};

const RING_PROVEN: Expected = Expected {
    verdict: "deadlock",
    exit: 8,
    kind: "deadlock_cycle",
    words: "Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend to its right neighbour on the communicator of ranks 0-3, tag 5",
};

/// One snapshot (cores): the cycle is named, not proven.
const RING_POSSIBLE: Expected = Expected {
    verdict: "undetermined",
    exit: 9,
    kind: "deadlock_cycle",
    words: "Possible deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend to its right neighbour on the communicator of ranks 0-3, tag 5",
};

const PREPOSTED_CLEAN: Expected = Expected {
    verdict: "no_deadlock",
    exit: 0,
    kind: "clean",
    words: "No rank is blocked: the stacks show ranks 0,1 running (not blocked in MPI)",
};

const FINALIZE_POSSIBLE: Expected = Expected {
    verdict: "undetermined",
    exit: 9,
    kind: "waits_on_finalized",
    words: "rank 1 is in or past MPI_Finalize, yet rank 0 waits for messages from it",
};

/// Checks one `mqd` run (its text, then its JSON) against what is expected; `run` runs
/// `mqd` with extra arguments.
pub fn check_stack_scenario(
    what: &str,
    expected: &Expected,
    run: impl Fn(&[&str]) -> std::process::Output,
) {
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(expected.exit),
        "{what}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(expected.words),
        "{what}: the text does not say {:?}:\n{text}",
        expected.words
    );
    let out = run(&["--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(out.status.code(), Some(expected.exit), "{what}: {doc:#}");
    assert_eq!(
        doc["diagnosis"]["verdict"], expected.verdict,
        "{what}: {doc:#}"
    );
    // Where each rank is, in the model: the class of its MPI call, or outside MPI.
    for r in doc["ranks"].as_array().cloned().unwrap_or_default() {
        let location = &r["threads"][0]["location"];
        assert!(
            location
                .get("in_mpi")
                .is_some_and(|l| l["class"].is_string())
                || location.get("outside").is_some(),
            "{what}: rank {}: {location:#}",
            r["rank"]
        );
    }
    let findings = doc["diagnosis"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        findings.iter().any(|f| f["kind"] == expected.kind
            && f["text"]
                .as_str()
                .is_some_and(|t| t.contains(expected.words))),
        "{what}: no {} finding says {:?}: {findings:#?}",
        expected.kind,
        expected.words
    );
}

// ------------------------------------------------------------------ gdb

/// A function name as both sides spell it: without glibc's internal prefixes and
/// leading underscores (`__GI___sigsuspend` and `sigsuspend` are one function).
pub fn normal(name: &str) -> String {
    name.trim_start_matches("__GI_")
        .trim_start_matches('_')
        .to_owned()
}

/// Longest gdb may take to attach and print, in seconds (it takes about two here, the
/// debug information of MPICH included): a gdb that hangs fails its test, saying so.
const GDB_TIMEOUT: &str = "600";

/// gdb's standard output for `commands` run on process `pid`, then its standard error
/// (each line marked); a gdb that did not finish in time fails the test, saying so.
pub fn gdb_batch(pid: i32, commands: &[&str]) -> String {
    let mut command = std::process::Command::new("timeout");
    command.args([GDB_TIMEOUT, "gdb", "-nx", "-batch", "-p", &pid.to_string()]);
    for c in commands {
        command.args(["-ex", c]);
    }
    let out = command
        .stdin(std::process::Stdio::null())
        .output()
        .expect("gdb (scripts/test installs it)");
    assert_ne!(
        out.status.code(),
        Some(124),
        "gdb on pid {pid} did not finish in {GDB_TIMEOUT} s: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its warnings after its output, each line marked, for a failure to show why
    // (no line of it reads as a frame or a thread).
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        text.push_str(&format!("\ngdb's stderr: {line}"));
    }
    text
}

/// gdb's backtrace of every thread of `pid`: per thread (by its id), the function names
/// innermost first, up to `main` (gdb stops there).
pub fn gdb_stacks(pid: i32) -> Vec<(i32, Vec<String>)> {
    let text = gdb_batch(pid, &["thread apply all bt"]);
    let mut threads: Vec<(i32, Vec<String>)> = Vec::new();
    for line in text.lines() {
        // "Thread 2 (Thread 0x7fd7c86636c0 (LWP 26290) "name"):"
        if line.starts_with("Thread ") {
            let lwp = line
                .split("(LWP ")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(-1);
            threads.push((lwp, Vec::new()));
            continue;
        }
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        // "#1  0x000055c4f79655e0 in main (argc=7, ...) at ..." or "#0  main (...)".
        let rest = rest
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        let rest = match rest.split_once(" in ") {
            Some((address, name)) if address.starts_with("0x") => name,
            _ => rest,
        };
        let name = rest.split(" (").next().unwrap_or(rest).trim();
        if let Some((_, thread)) = threads.last_mut() {
            thread.push(name.to_owned());
        }
    }
    assert!(
        !threads.is_empty(),
        "gdb gave no backtrace of pid {pid}:\n{text}"
    );
    threads
}

// ------------------------------------------------------------------------ stock MPIs

// Each test binary uses some of them.
#[allow(unused_imports)]
pub use mqd_fixtures::stock::{
    StockMpi, debian, debian_open_mpi, intel, pypi, pypi_open_mpi, venv, venv_built,
};

/// Builds `real-mpi/watchdog.c` (the jobs of `mqd run`'s tests) with `mpicc -g -O0`
/// into `program`.
pub fn build_watchdog(mpicc: &std::path::Path, program: &std::path::Path) {
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/real-mpi/watchdog.c"
    );
    let cc = std::process::Command::new(mpicc)
        .args(["-g", "-O0", "-o"])
        .arg(program)
        .arg(source)
        .output()
        .expect("mpicc");
    assert!(
        cc.status.success(),
        "{}: {}",
        mpicc.display(),
        String::from_utf8_lossy(&cc.stderr)
    );
}

/// The Python of a virtual environment with `junitparser`, a JUnit XML consumer.
pub fn junitparser_python() -> PathBuf {
    venv("junitparser", &["junitparser==3.2.0"]).join("bin/python")
}

/// Python ranks: a virtual environment with mpi4py, PyPI's `mpich` wheel (the MPI
/// mpi4py's wheel finds there), pytest and py-spy; its `bin` directory.
pub fn mpi4py_bin() -> PathBuf {
    venv(
        "mpi4py-mpich",
        &[
            "mpi4py==4.1.2",
            "mpich==5.0.2",
            "pytest==9.2.0",
            "py-spy==0.4.3",
        ],
    )
    .join("bin")
}

/// Python ranks on the MPICH with debugger support (ch3): mpi4py built from its source
/// against it (`MPICC`; unoptimised, which halves the build), py-spy beside it; its `bin`
/// directory, and that MPICH's `mpiexec`.
pub fn mpi4py_ch3() -> (PathBuf, PathBuf) {
    let ch3 = mqd_fixtures::real_mpich::mpich(mqd_fixtures::real_mpich::Device::Ch3);
    let mpicc = ch3.prefix.join("bin/mpicc");
    let mpicc = mpicc.to_str().expect("UTF-8");
    let venv = venv_built(
        "mpi4py-ch3",
        &["--no-binary", "mpi4py", "mpi4py==4.1.2", "py-spy==0.4.3"],
        &[("MPICC", mpicc), ("CFLAGS", "-O0 -g0")],
    );
    (venv.join("bin"), ch3.mpiexec())
}

/// PyPI's `intel-openmp`: Intel's OpenMP runtime (`libiomp5.so`, its OMPD symbols kept)
/// and its OMPD library (`libiomp5_db.so`), in a virtual environment; their directory.
pub fn intel_openmp_lib() -> PathBuf {
    venv("intel-openmp", &["intel-openmp==2026.2.0"]).join("lib")
}

/// Builds `real-mpi/hybrid.c` with `mpicc`: compiled with `-g -O0 -fopenmp` (GCC's
/// directives), linked with `link` (the OpenMP runtime: `-liomp5` and its directory, or
/// `-fopenmp` for GCC's libgomp) into `program`.
pub fn build_hybrid(mpicc: &std::path::Path, link: &[&str], program: &std::path::Path) {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/real-mpi/hybrid.c");
    let object = program.with_extension("o");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(mpicc)
            .args(args)
            .output()
            .expect("mpicc");
        assert!(
            out.status.success(),
            "{} {args:?}: {}",
            mpicc.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    run(&[
        os("-g"),
        os("-O0"),
        os("-fopenmp"),
        os("-c"),
        os(source),
        os("-o"),
        object.as_os_str(),
    ]);
    let mut args: Vec<&std::ffi::OsStr> = vec![os("-g"), object.as_os_str(), os("-o")];
    args.push(program.as_os_str());
    args.extend(link.iter().map(std::ffi::OsStr::new));
    run(&args);
}

// ------------------------------------------------------------------------- stacks

/// A thread stack of frames named innermost first.
pub fn stack(
    tid: i32,
    frames: &[&str],
    call: Option<mqd_model::CallArguments>,
) -> mqd_model::ThreadStack {
    mqd_model::ThreadStack {
        openmp: None,
        tid,
        frames: frames
            .iter()
            .map(|f| mqd_model::Frame {
                function: Some((*f).to_owned()),
                ..mqd_model::Frame::default()
            })
            .collect(),
        truncated: None,
        call,
    }
}

/// Gives each rank `rank` of `job` for which `peer` says `Some` one thread blocked in
/// `call` on the communicator named `comm` (its object the library's unique id), with that
/// peer and `tag`, as a debugger reads them from the call's frame; `None` leaves the rank
/// as it is.
pub fn blocked_in(
    job: &mut JobDump,
    call: &str,
    comm: &str,
    peer: impl Fn(i32) -> Option<i64>,
    tag: Option<i64>,
) {
    for r in &mut job.ranks {
        let Some(peer) = peer(r.rank) else { continue };
        let address = r
            .communicators()
            .iter()
            .find(|c| c.name == comm)
            .map(|c| c.unique_id);
        let args = mqd_model::CallArguments {
            function: format!("P{call}"),
            comm_address: address,
            peer: Some(peer),
            tag,
            ..mqd_model::CallArguments::default()
        };
        r.threads = vec![stack(
            r.pid.unwrap_or(r.rank),
            &["poll", call, "main", "_start"],
            Some(args),
        )];
    }
}

/// Gives the ranks `ranks` of `job` one thread computing outside MPI (in `solve`).
pub fn computing(job: &mut JobDump, ranks: &[i32]) {
    for r in &mut job.ranks {
        if ranks.contains(&r.rank) {
            r.threads = vec![stack(
                r.pid.unwrap_or(r.rank),
                &["solve", "main", "_start"],
                None,
            )];
        }
    }
}

/// `mqd job --json --hold SHORT STARTER`, the tests' short hold. Where it leaves
/// "undetermined" a verdict that must be decided (`decided_due`: on a loaded host a rank
/// can hardly run, or shows no move, in half a second, and mqd says to hold again), the
/// job is held again with mqd's default hold, once. The run judged, and whether it was
/// the second.
pub fn short_hold_then_default(
    short: &str,
    starter: &str,
    decided_due: bool,
) -> (mqd_fixtures::real_mpich::Run, bool) {
    let job = |hold: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mqd"));
        command.args(["job", "--json"]).args(hold).arg(starter);
        mqd_fixtures::real_mpich::run(command, std::time::Duration::from_secs(120))
    };
    let first = job(&["--hold", short]);
    let undetermined = serde_json::from_slice::<Value>(&first.stdout)
        .is_ok_and(|doc| doc["diagnosis"]["verdict"] == "undetermined");
    if undetermined && decided_due {
        (job(&[]), true)
    } else {
        (first, false)
    }
}
