//! The verdict corpus: the real MPI programs of `fixtures/real-mpi/corpus.c`, each a state
//! MPI users meet (point-to-point of every mode, probes, persistent requests, the wait
//! family, collectives, communicator and window management, one-sided, intercommunicators,
//! threads, finalize, and correct programs caught mid-traffic), run on every MPI the tests
//! have: MPICH 4.0.2 with debugger support (ch3 and ch4), Debian's MPICH, PyPI's, and
//! Intel MPI (PyPI's `impi-rt`: live only, 16 cases). Each job is inspected by `mqd job`
//! as it runs, with its defaults (stacks, our library); then, its ranks stopped (SIGSTOP),
//! with `--no-stacks`; then from gdb's cores of the stopped ranks (`mqd core
//! --one-snapshot`), with stacks and (with queues) without, and once without
//! `--one-snapshot`.
//!
//! No verdict may be confidently wrong: a job that hangs is never "no deadlock", one that
//! moves (or waits for a rank that computes) never "deadlock". Live, the hold decides:
//! every hang is "deadlock" and every moving state "no deadlock" (but a computing worker
//! thread on an MPI that does not record its thread level). From cores, where mqd must
//! do better than "undetermined", the case says what it must say. Every MPI's table (case, truth,
//! each verdict) is written to `target/corpus-<mpi>.md`.

mod support;

use mqd_fixtures::real_mpich::{self, Device, Job, Run};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What is true of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    /// Nothing can ever move: "deadlock" or "undetermined".
    Hangs,
    /// It moves, or what others wait for computes: "no deadlock" or "undetermined".
    Moves,
}

impl Truth {
    fn allows(self, verdict: &str) -> bool {
        match self {
            Truth::Hangs => verdict != "no_deadlock",
            Truth::Moves => verdict != "deadlock",
        }
    }
}

/// One program of the corpus.
struct Case {
    name: &'static str,
    truth: Truth,
    /// The verdict mqd must give with stacks on MPICH with debugger support (live and
    /// from the cores of the stopped job), when it must do better than "undetermined".
    with_queues: Option<&'static str>,
    /// The same on an MPI without debugger support (stacks only).
    stock: Option<&'static str>,
    /// The verdict with queues but no stacks: "undetermined" (any rank may be in a call no
    /// queue shows) unless MPICH's own record settles it.
    without_stacks: &'static str,
}

const fn case(name: &'static str, truth: Truth) -> Case {
    Case {
        name,
        truth,
        with_queues: None,
        stock: None,
        without_stacks: "undetermined",
    }
}

const fn must(name: &'static str, truth: Truth, with_queues: &'static str) -> Case {
    Case {
        name,
        truth,
        with_queues: Some(with_queues),
        stock: None,
        without_stacks: "undetermined",
    }
}

const fn always(name: &'static str, truth: Truth, verdict: &'static str) -> Case {
    Case {
        name,
        truth,
        with_queues: Some(verdict),
        stock: Some(verdict),
        without_stacks: "undetermined",
    }
}

/// Every rank past `MPI_Finalize`, which MPICH records: nothing of MPI can hold them, even
/// without stacks.
const fn all_finalized(name: &'static str) -> Case {
    Case {
        name,
        truth: Truth::Moves,
        with_queues: Some("no_deadlock"),
        stock: Some("no_deadlock"),
        without_stacks: "no_deadlock",
    }
}

use Truth::{Hangs, Moves};

const CASES: &[Case] = &[
    case("recv_ring", Hangs),
    must("ssend_ring", Hangs, "deadlock"),
    case("send_ring_rndv", Hangs),
    case("send_c_ring", Hangs),
    case("bsend_wrong_tag", Hangs),
    case("probe_ring", Hangs),
    case("mprobe_ring", Hangs),
    case("probe_pairs", Hangs),
    case("waitall_mixed", Hangs),
    case("waitany_none", Hangs),
    case("issend_wait_ring", Hangs),
    case("ssend_init_ring", Hangs),
    case("recv_init_ring", Hangs),
    case("bcast_barrier", Hangs),
    case("skipped_allreduce", Hangs),
    case("allreduce_vs_finalize", Hangs),
    case("bcast_root_mismatch", Hangs),
    case("dup_vs_barrier", Hangs),
    case("split_vs_recv", Hangs),
    case("win_fence_vs_recv", Hangs),
    case("win_free_vs_recv", Hangs),
    case("intercomm_recv", Hangs),
    case("intercomm_create_skip", Hangs),
    case("wrong_dup", Hangs),
    case("grid_row_col", Hangs),
    case("col_barrier_vs_recv", Hangs),
    case("mt_comm_threads", Hangs),
    case("finalized_peer", Hangs),
    case("sendrecv_tags", Hangs),
    case("ibarrier_vs_recv", Hangs),
    case("alltoall_vs_allgather", Hangs),
    case("neighbor_vs_barrier", Hangs),
    case("halo_loop", Moves),
    case("sendrecv_loop", Moves),
    case("pingpong_loop", Moves),
    case("allreduce_loop", Moves),
    case("bcast_barrier_loop", Moves),
    always("preposted_compute", Moves, "no_deadlock"),
    must("recv_from_computing", Moves, "no_deadlock"),
    must("allreduce_with_computing", Moves, "no_deadlock"),
    must("col_barrier_with_computing", Moves, "no_deadlock"),
    must("mt_worker_will_send", Moves, "no_deadlock"),
    case("iprobe_loop", Moves),
    case("persistent_loop", Moves),
    case("rma_fence_loop", Moves),
    case("testsome_loop", Moves),
    case("large_count_loop", Moves),
    all_finalized("finalize_all"),
    case("late_init", Moves),
    case("ssend_pairs_loop", Moves),
    always("issend_freed_compute", Moves, "no_deadlock"),
];

/// Ranks of every case.
const RANKS: i32 = 4;
/// After the READY lines: the ranks reach their calls, the messages arrive.
const SETTLE: Duration = Duration::from_millis(500);
/// Longest one mqd run may take.
const MQD_TIMEOUT: Duration = Duration::from_secs(120);
/// The hold of the live runs, in seconds.
const HOLD: &str = "0.5";

/// One job at a time: a hung MPICH job spins on every core it has.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// An MPI to run the corpus on.
struct Mpi {
    name: &'static str,
    slug: &'static str,
    mpicc: PathBuf,
    mpiexec: PathBuf,
    /// It has message queues (MPICH with debugger support).
    queues: bool,
    /// Its ranks' cores are read too (Intel MPI's are 2.6 GB each: its shared heap).
    cores: bool,
    /// The cases it runs, when not all.
    cases: Option<&'static [&'static str]>,
}

/// Intel MPI runs what tells where a rank in its unnamed internal functions is: blocking
/// point-to-point of every kind, collectives and communicator management against
/// point-to-point, threads, and states that must stay "no deadlock" (its start-up is the
/// slowest of the MPIs: the whole corpus would double the time).
///
/// Not `send_c_ring`: Intel MPI buffers 1 MiB standard sends, so some ranks of that ring
/// leave their send and compute while the others wait for them (no deadlock, which mqd
/// says): the case's truth is another there.
const INTEL_CASES: &[&str] = &[
    "recv_ring",
    "ssend_ring",
    "probe_pairs",
    "waitall_mixed",
    "bcast_barrier",
    "skipped_allreduce",
    "dup_vs_barrier",
    "win_fence_vs_recv",
    "mt_comm_threads",
    "halo_loop",
    "preposted_compute",
    "recv_from_computing",
    "mt_worker_will_send",
    "finalize_all",
    "issend_freed_compute",
];

fn debuginfo(device: Device) -> Mpi {
    let m = real_mpich::mpich(device);
    Mpi {
        name: match device {
            Device::Ch3 => "MPICH 4.0.2 ch3 (debuginfo)",
            Device::Ch4 => "MPICH 4.0.2 ch4 (debuginfo)",
        },
        slug: device.name(),
        mpicc: m.prefix.join("bin/mpicc"),
        mpiexec: m.mpiexec(),
        queues: true,
        cores: true,
        cases: None,
    }
}

fn stock(mpi: support::StockMpi) -> Mpi {
    let cores = mpi.slug != "intel";
    Mpi {
        name: mpi.name,
        slug: mpi.slug,
        mpicc: mpi.mpicc,
        mpiexec: mpi.mpiexec,
        queues: false,
        cores,
        cases: (mpi.slug == "intel").then_some(INTEL_CASES),
    }
}

/// The corpus program built with `mpi`'s compiler wrapper.
fn build(mpi: &Mpi, dir: &Path) -> PathBuf {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/real-mpi/corpus.c");
    let program = dir.join("corpus");
    let cc = Command::new(&mpi.mpicc)
        .args(["-g", "-O0", "-pthread", "-Wall", "-o"])
        .arg(&program)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("{}: {}: {e}", mpi.name, mpi.mpicc.display()));
    assert!(
        cc.status.success(),
        "{}: {}",
        mpi.name,
        String::from_utf8_lossy(&cc.stderr)
    );
    program
}

fn mqd(args: &[String]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command.args(args);
    real_mpich::run(command, MQD_TIMEOUT)
}

/// What MPICH itself records, as our library reads it, in the live dump of a case: the
/// phase of finalized ranks, the thread level a case asked for, the messages of a
/// collective's own algorithm. A failure says why.
fn check_mpich_state(case: &str, doc: &Value) -> Result<(), String> {
    let ranks = doc["ranks"].as_array().cloned().unwrap_or_default();
    let mpi = |r: &Value, field: &str| r["mpi"][field].as_str().unwrap_or("none").to_owned();
    let ops = |r: &Value| -> Vec<Value> {
        let mut all = Vec::new();
        for c in r["communicators"].as_array().into_iter().flatten() {
            for list in ["pending_receives", "unexpected_messages", "pending_sends"] {
                all.extend(
                    c[list]["operations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
        }
        all
    };
    let phases: Vec<String> = ranks.iter().map(|r| mpi(r, "phase")).collect();
    let levels: Vec<String> = ranks.iter().map(|r| mpi(r, "thread_level")).collect();
    let fail = |what: &str| {
        Err(format!(
            "{case}: {what}: phases {phases:?}, levels {levels:?}"
        ))
    };
    match case {
        "finalize_all" if phases.iter().any(|p| p != "finalized") => fail("not all finalized"),
        "recv_ring" if phases.iter().any(|p| p != "initialized") => fail("not all initialized"),
        "mt_comm_threads" if levels.iter().any(|l| l != "multiple") => fail("not all multiple"),
        "recv_ring" if levels.iter().any(|l| l != "single") => fail("not all single"),
        // Ranks 1-3 wait for the broadcast's message from their parent, which only a
        // collective's own (context + 1) traffic carries.
        "bcast_barrier"
            if !ranks
                .iter()
                .flat_map(ops)
                .any(|op| op["collective"] == Value::Bool(true)) =>
        {
            fail("no operation of a collective's own")
        }
        "bcast_barrier"
            if !doc["aggregated"]
                .to_string()
                .contains("(a collective's own)") =>
        {
            fail("the listing does not say which messages are a collective's own")
        }
        _ => Ok(()),
    }
}

/// Intel MPI's `PMPI_Ssend` jumps into functions without names: the ranks of the
/// `MPI_Ssend` ring are in libmpi under no MPI name. Inside the MPI library is inside MPI:
/// in a call of class unknown, and the doubts say so.
fn check_unnamed_frames(slug: &str, case: &str, doc: &Value) -> Result<(), String> {
    if slug != "intel" || case != "ssend_ring" {
        return Ok(());
    }
    // Intel MPI's MPI_Ssend is a stub into unnamed functions: the caller's call names
    // it, and the place is known.
    let doubts = doc["diagnosis"]["doubts"].to_string();
    let calls: Vec<(String, String)> = doc["ranks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let t = &r["threads"][0];
            (
                t["location"]["in_mpi"]["class"].to_string(),
                t["call"]["called"].to_string(),
            )
        })
        .collect();
    let named = calls
        .iter()
        .all(|(class, called)| class == "\"blocking_send\"" && called == "\"MPI_Ssend\"");
    if !doubts.contains("unknown_places") && named && !calls.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{case}: places and calls {calls:?}, doubts {doubts}"
        ))
    }
}

/// The verdict of a run: its JSON document's, or how it failed.
fn verdict(run: &Run) -> String {
    let code = run.status.and_then(|s| s.code());
    if mqd::verdict_of_exit_code(code).is_none() {
        return format!("error {}", code.unwrap_or(-1));
    }
    match serde_json::from_slice::<Value>(&run.stdout) {
        Ok(doc) => doc["diagnosis"]["verdict"]
            .as_str()
            .unwrap_or("no verdict")
            .to_owned(),
        Err(e) => format!("no JSON document: {e}"),
    }
}

/// One case's verdicts, by how they were taken.
struct Row {
    case: &'static str,
    truth: Truth,
    verdicts: Vec<(&'static str, String)>,
    /// The short hold left it undetermined, so the job was held again.
    held_again: bool,
    /// Seconds spent in each phase: start (until every rank said READY, and the settle),
    /// live, stopped (without stacks), cores (gcore and mqd core).
    phases: [f64; 4],
}

fn run_case(mpi: &Mpi, program: &Path, case: &Case, dir: &Path, failures: &mut Vec<String>) -> Row {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let mut command = Command::new(&mpi.mpiexec);
    command
        .args(["-n", &RANKS.to_string()])
        .arg(program)
        .arg(case.name);
    let mut clock = Instant::now();
    let mut phases = [0.0; 4];
    let mut lap = |phase: usize| {
        phases[phase] = clock.elapsed().as_secs_f64();
        clock = Instant::now();
    };
    let mut job = Job::start(command, format!("{} {}", mpi.name, case.name), RANKS);
    job.program = "corpus".into();
    let ready = job.wait_ready(0);
    std::thread::sleep(SETTLE);
    lap(0);
    let pids: Vec<i32> = ready.iter().map(|r| r.pid).collect();
    let starter = job.starter.to_string();
    let s = |x: &str| x.to_owned();
    let mut verdicts = Vec::new();
    // As the job runs: mqd's defaults, but a short hold (these programs' messages move in
    // microseconds; the default window is held to its word by verdict_matrix.rs).
    let due = live_due(mpi, case).is_some_and(|v| v != "undetermined");
    let (live, held_again) = support::short_hold_then_default(HOLD, &starter, due);
    let doc = serde_json::from_slice::<Value>(&live.stdout).unwrap_or_default();
    verdicts.push(("live", verdict(&live)));
    lap(1);
    // What mqd said where it failed, for the report.
    let said = &live.stderr;
    let live_error = verdict(&live)
        .starts_with("error")
        .then(|| said.lines().rev().take(5).collect::<Vec<_>>().join(" / "));
    let doubts: Vec<&str> = doc["diagnosis"]["doubts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["text"].as_str())
        .collect();
    let checked = if mpi.queues {
        check_mpich_state(case.name, &doc)
    } else {
        check_unnamed_frames(mpi.slug, case.name, &doc)
    };
    if let Err(e) = checked {
        failures.push(format!("{}, {e}", mpi.name));
    }
    // Stopped where it is: the same job, read again.
    for &pid in &pids {
        real_mpich::signal(pid, libc::SIGSTOP);
    }
    let stackless = mqd(&[s("job"), s("--json"), s("--no-stacks"), starter.clone()]);
    verdicts.push(("no stacks", verdict(&stackless)));
    // Why, where it failed otherwise than for want of queues (exit 5), for the report.
    let stackless_error =
        (verdict(&stackless).starts_with("error") && verdict(&stackless) != "error 5").then(|| {
            let said = &stackless.stderr;
            said.lines().rev().take(5).collect::<Vec<_>>().join(" / ")
        });
    lap(2);
    if mpi.cores {
        from_cores(mpi, case, &pids, dir, &mut verdicts, failures);
    }
    lap(3);
    for &pid in &pids {
        real_mpich::signal(pid, libc::SIGCONT);
    }
    drop(job);
    let before = failures.len();
    judge(mpi, case, &verdicts, failures);
    if failures.len() > before && !doubts.is_empty() {
        failures.push(format!("    (live doubts: {})", doubts.join("; ")));
    }
    if let (true, Some(said)) = (failures.len() > before, live_error) {
        failures.push(format!("    (mqd's last words, last first: {said})"));
    }
    if let (true, Some(said)) = (failures.len() > before, stackless_error) {
        failures.push(format!(
            "    (mqd's last words without stacks, last first: {said})"
        ));
    }
    Row {
        case: case.name,
        truth: case.truth,
        verdicts,
        held_again,
        phases,
    }
}

/// The verdicts from gdb's cores of the stopped ranks.
fn from_cores(
    mpi: &Mpi,
    case: &Case,
    pids: &[i32],
    dir: &Path,
    verdicts: &mut Vec<(&'static str, String)>,
    failures: &mut Vec<String>,
) {
    let s = |x: &str| x.to_owned();
    let case_dir = dir.join(case.name);
    std::fs::create_dir_all(&case_dir).expect("scratch");
    // The ranks are stopped already: one snapshot.
    let cores: Vec<String> = mqd_fixtures::gcore(pids, &case_dir.join("core"))
        .unwrap_or_else(|e| panic!("{}, {}: {e}", mpi.name, case.name))
        .iter()
        .map(|c| c.display().to_string())
        .collect();
    let core_args = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![s("core"), s("--json")];
        args.extend(extra.iter().map(|x| s(x)));
        args.extend(cores.iter().cloned());
        args
    };
    verdicts.push(("cores", verdict(&mqd(&core_args(&["--one-snapshot"])))));
    // Without queues or stacks a core has nothing to show (the live run checks how
    // that is said).
    if mpi.queues {
        verdicts.push((
            "cores, no stacks",
            verdict(&mqd(&core_args(&["--one-snapshot", "--no-stacks"]))),
        ));
    }
    if case.name == "ssend_ring" || case.name == "preposted_compute" {
        // Cores of several processes, not said to be of one moment.
        let separate = verdict(&mqd(&core_args(&[])));
        if separate != "undetermined" {
            failures.push(format!(
                "{}, {}: cores without --one-snapshot gave {separate}",
                mpi.name, case.name
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&case_dir);
}

/// What the hold must give live: every hang proven, every state that moves "no
/// deadlock"; but where a worker thread computes beside a blocked main thread on an MPI
/// that does not record the thread level it gave, that thread may call MPI: undetermined.
/// Ranks caught all polling (`MPI_Iprobe`, `MPI_Testsome` loops) may be in a loop that
/// never ends: "no deadlock" or "undetermined", as the moment of the snapshot has it.
fn live_due(mpi: &Mpi, case: &Case) -> Option<&'static str> {
    match case.truth {
        Truth::Hangs => Some("deadlock"),
        Truth::Moves if case.name == "mt_worker_will_send" && !mpi.queues => Some("undetermined"),
        Truth::Moves if POLLING.contains(&case.name) => None,
        Truth::Moves => Some("no_deadlock"),
    }
}

/// The cases whose ranks loop on a call that polls.
const POLLING: [&str; 2] = ["iprobe_loop", "testsome_loop"];

/// Never confidently wrong; better than undetermined where the case says so.
fn judge(mpi: &Mpi, case: &Case, verdicts: &[(&'static str, String)], failures: &mut Vec<String>) {
    let exact = if mpi.queues {
        case.with_queues
    } else {
        case.stock
    };
    for (how, v) in verdicts {
        let stackless = how.contains("no stacks");
        // Without stacks or queues (a stock MPI) there is nothing to dump: exit 5 (no
        // queues) or 6 (no debug information), said so. Any other failure is one.
        let excused = stackless && !mpi.queues && (v == "error 5" || v == "error 6");
        let wrong = (v.starts_with("error") && !excused) || !case.truth.allows(v);
        let expected = match (exact, stackless, *how) {
            (_, true, _) => Some(case.without_stacks),
            (_, false, "live") => live_due(mpi, case),
            (Some(e), false, _) => Some(e),
            (None, false, _) => None,
        };
        if wrong || expected.is_some_and(|e| e != v && !excused) {
            failures.push(format!(
                "{}, {} ({:?}), {how}: {v}{}",
                mpi.name,
                case.name,
                case.truth,
                expected.map_or_else(String::new, |e| format!(", expected {e}"))
            ));
        }
    }
}

fn run_corpus(mpi: Mpi) {
    let scratch = support::Scratch::new(&format!("corpus-{}", mpi.slug));
    let program = build(&mpi, scratch.path());
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    // `MQD_CORPUS=a,b` runs only those cases (while working on them).
    let only = std::env::var("MQD_CORPUS").ok();
    let only: Option<Vec<&str>> = only.as_deref().map(|o| o.split(',').collect());
    for case in CASES {
        if only.as_ref().is_some_and(|o| !o.contains(&case.name))
            || mpi.cases.is_some_and(|c| !c.contains(&case.name))
        {
            continue;
        }
        rows.push(run_case(
            &mpi,
            &program,
            case,
            scratch.path(),
            &mut failures,
        ));
    }
    let mut table = format!(
        "# The verdict corpus on {} ({} cases, {:.0} s)\n\n| case | truth | live | no stacks | cores | cores, no stacks | seconds: start, live, stopped, cores |\n|---|---|---|---|---|---|---|\n",
        mpi.name,
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    for row in &rows {
        let _ = write!(table, "| {} | {:?} |", row.case, row.truth);
        for how in ["live", "no stacks", "cores", "cores, no stacks"] {
            let v = row.verdicts.iter().find(|(h, _)| *h == how);
            let _ = write!(table, " {} |", v.map_or("-", |(_, v)| v.as_str()));
        }
        let [start, live, stopped, cores] = row.phases;
        let _ = write!(table, " {start:.1}, {live:.1}, {stopped:.1}, {cores:.1} |");
        table.push('\n');
    }
    let again: Vec<&str> = rows
        .iter()
        .filter(|r| r.held_again)
        .map(|r| r.case)
        .collect();
    if !again.is_empty() {
        let _ = write!(
            table,
            "\nHeld again with mqd's default hold (the {HOLD} s hold left them undetermined): {}\n",
            again.join(", ")
        );
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("..")
        .join(format!("corpus-{}.md", mpi.slug));
    let _ = std::fs::write(&out, &table);
    eprintln!("{table}");
    assert!(
        failures.is_empty(),
        "{} verdicts wrong or worse than they must be:\n{}\n\n{table}",
        failures.len(),
        failures.join("\n")
    );
    assert!(CASES.len() >= 40);
    assert!(
        INTEL_CASES
            .iter()
            .all(|c| CASES.iter().any(|k| k.name == *c))
    );
}

#[test]
fn corpus_on_mpich_ch3() {
    run_corpus(debuginfo(Device::Ch3));
}

#[test]
fn corpus_on_mpich_ch4() {
    run_corpus(debuginfo(Device::Ch4));
}

#[test]
fn corpus_on_debians_mpich() {
    run_corpus(stock(support::debian()));
}

#[test]
fn corpus_on_pypis_mpich() {
    run_corpus(stock(support::pypi()));
}

#[test]
fn corpus_on_intel_mpi() {
    run_corpus(stock(support::intel()));
}
