//! End to end against a real MPICH: 4.0.2 built with `--enable-debuginfo` for ch3:nemesis
//! (layout A) and for ch4:ofi (layout B) by `scripts/real-mpich`, into a cache outside the
//! work tree (built on first use: minutes; a failed build fails these tests with its
//! output). Every test runs on both devices (modules `ch3` and `ch4`).
//!
//! What ch4 hides from any MQD library, and how the models account for it: receives the
//! netmod matches itself (libfabric's tag matching, between nodes) never enter MPICH's
//! queues; these jobs run on one node, where every message takes the shared-memory AM path
//! and is listed. Single-process communicators bypass the AM queues too; ours lists their
//! self queues (the models expect them, with the sender's count and buffer for a message
//! to itself). An eager unexpected message sits in a buffer of MPICH's (its address is
//! shown, not predicted) and its request is not complete until received.
//!
//! The programs are `real-mpi/scenarios.c`, compiled with that MPICH's `mpicc -g -O0` and run
//! with its `mpiexec` (hydra). Each scenario is run twice:
//!
//! - through MPIR: `mqd launch --keep -- mpiexec -n N scenarios --scenario S` (breakpoint on
//!   hydra's `MPIR_Breakpoint`, `MPIR_proctable`), then `mqd job STARTER_PID` once the job
//!   was resumed; the job's output (on mqd's stderr) must show every rank's READY line before
//!   the dump;
//! - by pid: plain `mpiexec`, ranks' pids from their READY lines, `mqd dump PID...` twice.
//!
//! Every dump is checked against a model written here, rank by rank, from what the program
//! does (buffers from its READY lines): every field of every queue entry, communicator names,
//! sizes, local ranks and COMM_WORLD ranks. MPICH's internal communicators (`MPI_ICOMM_WORLD`
//! and the unnamed node-level sub-communicators) are checked to be plausibly internal.
//! Failures are collected and reported together, so one run names every wrong field.
//!
//! The by-pid dumps are also taken through MPICH's own `libtvmpich.so`: every entry it
//! reports must be in ours, each differing field explained (and ours right, by the model);
//! the differences and the `fetch_data` costs of both libraries are printed and written to
//! `target/real-mpich-diff.md`. A crash or hang of a library is caught (mqd runs under a
//! timeout) and reported.

mod compare;
mod drop_in;
mod expect;
mod model;
mod tvtest;

#[allow(unused_imports)]
use compare::*;
use drop_in::drop_in_replaces_libtvmpich;
#[allow(unused_imports)]
use expect::*;
#[allow(unused_imports)]
use model::*;
use tvtest::tvtest_lists_what_mpich_lists;

use mqd_fixtures::real_mpich::{
    self, DEVICES, Device, Job, Mpich, Ready, Run, forward_lines, parse_ready, proc_state,
    read_all, signal, tracer, wait_child,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::sync::mpsc;
use std::time::{Duration, Instant};

const ANY_SOURCE: i32 = -2;
const ANY_TAG: i32 = -1;
/// The rendezvous messages of `unexpected` and `sends`: 262144 ints.
const RNDV_BYTES: i64 = 262_144 * 4;
const RNDV_INTS: i64 = 262_144;
const BIG_COUNT: usize = 10_000;
/// Longest an mqd run may take before it counts as hung.
const MQD_TIMEOUT: Duration = Duration::from_secs(60);
/// `mqd launch --delay`: the ranks reach their READY point well within it.
const LAUNCH_DELAY: Duration = Duration::from_secs(3);

const SCENARIOS: [&str; 7] = [
    "big",
    "comms",
    "freed",
    "ring",
    "sends",
    "unexpected",
    "wildcards",
];

fn size_of(scenario: &str) -> i32 {
    match scenario {
        "wildcards" | "unexpected" | "sends" | "ring" => 4,
        "comms" => 5,
        "freed" | "big" => 2,
        other => panic!("unknown scenario {other}"),
    }
}

// ----------------------------------------------------------------------- MPICH and programs

fn ours() -> PathBuf {
    mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built with the tests")
}

/// The cached MPICH and the scenario programs (see [`real_mpich::mpich`]).
fn mpich(device: Device) -> &'static Mpich {
    static SUBREAPER: std::sync::Once = std::sync::Once::new();
    SUBREAPER.call_once(|| {
        // `mqd launch --keep` leaves mpiexec running when mqd exits: it becomes our child,
        // so that it is reaped (and its pid not reused) only when we say so.
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    });
    real_mpich::mpich(device)
}

/// Every rank alive, not stopped, not traced: as a dump must leave it.
fn check_running(checks: &mut Checks, ctx: &str, pids: &[i32]) {
    for &pid in pids {
        // Detaching restarts an interrupted sleep: allow a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        let (state, traced) = loop {
            let s = proc_state(pid);
            let t = tracer(pid);
            if (matches!(s, Some('S' | 'R')) && t == Some(0)) || Instant::now() >= deadline {
                break (s, t);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        checks.that(matches!(state, Some('S' | 'R')), || {
            format!("{ctx}: pid {pid} is in state {state:?} after the dump")
        });
        checks.that(traced == Some(0), || {
            format!("{ctx}: pid {pid} is still traced ({traced:?}) after the dump")
        });
    }
}

/// A directory of one test, removed with everything in it when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(dir: PathBuf) -> Scratch {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ------------------------------------------------------------------------------ running mqd

fn mqd_command(args: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs mqd to its end, or kills it after [`MQD_TIMEOUT`].
fn run_mqd(args: &[String]) -> Run {
    real_mpich::run(mqd_command(args), MQD_TIMEOUT)
}

/// What a run of mqd gave.
trait Outcome {
    fn failure(&self) -> Option<String>;
    fn json(&self) -> Result<Value, String>;
    fn stats(&self) -> Vec<Value>;
}

impl Outcome for Run {
    /// Why the run is not a dump: a hang, a crash, or mqd's own failure.
    fn failure(&self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt as _;
        match self.status {
            None => Some(format!("hung: killed after {}s", MQD_TIMEOUT.as_secs())),
            Some(s) if s.signal().is_some() => Some(format!(
                "crashed: killed by signal {} ({})",
                s.signal().unwrap_or(0),
                self.stderr.lines().last().unwrap_or("")
            )),
            Some(s) if mqd::verdict_of_exit_code(s.code()).is_none() => {
                Some(format!("failed ({s}): {}", self.stderr.trim()))
            }
            Some(_) => None,
        }
    }

    /// The document; a rank the library could not dump is in it with its error (mqd exits
    /// with 5 then), a hang or a crash is an error.
    fn json(&self) -> Result<Value, String> {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(f) = self
            .failure()
            .filter(|_| self.status.is_none_or(|s| s.signal().is_some()))
        {
            return Err(format!("{}: {f}", self.what));
        }
        serde_json::from_slice(&self.stdout).map_err(|e| {
            format!(
                "{}: no JSON document ({e}); {}",
                self.what,
                self.failure().unwrap_or_default()
            )
        })
    }

    /// The per-process costs of `--stats`.
    fn stats(&self) -> Vec<Value> {
        self.stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v["mqd_stats"]["processes"].as_array().cloned())
            .unwrap_or_default()
    }
}

fn args(list: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<String> {
    list.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect()
}

/// `mqd dump --json --stats --dll DLL PID...`.
fn dump(dll: &Path, pids: &[i32]) -> Run {
    let mut a = args(&[&"dump", &"--json", &"--stats", &"--dll", &dll]);
    a.extend(pids.iter().map(i32::to_string));
    run_mqd(&a)
}

// ------------------------------------------------------------------------------- checking

/// Failures collected over a whole scenario, reported together.
#[derive(Default)]
struct Checks {
    failures: Vec<String>,
    more: usize,
}

impl Checks {
    fn fail(&mut self, message: String) {
        if self.failures.len() < 80 {
            self.failures.push(message);
        } else {
            self.more += 1;
        }
    }

    fn that(&mut self, ok: bool, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.fail(message());
        }
        ok
    }

    fn eq(&mut self, ctx: &str, got: &Value, want: &Value) -> bool {
        self.that(got == want, || format!("{ctx}: got {got}, want {want}"))
    }

    fn finish(self, scenario: &str) {
        if !self.failures.is_empty() {
            let mut text = String::new();
            for f in &self.failures {
                let _ = writeln!(text, "- {f}");
            }
            if self.more > 0 {
                let _ = writeln!(text, "- ... and {} more", self.more);
            }
            panic!(
                "real MPICH, scenario {scenario}: {} failure(s):\n{text}",
                self.failures.len() + self.more
            );
        }
    }
}

// ------------------------------------------------------------------------------ scenarios

/// MPIR: `mqd launch --keep` (first dump), `mqd job` after the job ran on (second dump).
fn launch_path(m: &Mpich, scenario: &'static str, n: i32, checks: &mut Checks) {
    let ours = ours();
    let program = m.program.display().to_string();
    let first_state = if scenario == "freed" { 1 } else { 0 };
    let ctx = format!("{scenario} through MPIR (mqd launch)");
    // The ring's ranks block after READY: they must be there a little before the dump.
    let margin = if scenario == "ring" {
        Duration::from_millis(500)
    } else {
        Duration::ZERO
    };
    // A loaded machine may start the job late: once, with a longer delay.
    let delays = [LAUNCH_DELAY, 4 * LAUNCH_DELAY];
    let mut attempt = 0;
    let (doc, mut job, ready, starter) = loop {
        let delay = delays[attempt];
        let a = args(&[
            &"launch",
            &"--json",
            &"--keep",
            &"--delay",
            &delay.as_secs_f64().to_string(),
            &"--dll",
            &ours,
            &"--",
            &m.mpiexec(),
            &"-n",
            &n.to_string(),
            &program,
            &"--scenario",
            &scenario,
        ]);
        let what = format!("mqd {}", a.join(" "));
        let started = Instant::now();
        let mut mqd = mqd_command(&a).spawn().expect("start mqd launch");
        let stdout = read_all(mqd.stdout.take().expect("piped"));
        let (tx, lines) = mpsc::channel();
        // The job's output goes to mqd's stderr; it stays open after mqd exits (--keep).
        forward_lines(mqd.stderr.take().expect("piped"), tx);
        let status = wait_child(&mut mqd, MQD_TIMEOUT);
        let doc: Value =
            serde_json::from_slice(&stdout.join().unwrap_or_default()).unwrap_or(Value::Null);
        let starter = doc["starter_pid"].as_i64().unwrap_or(0) as i32;
        let mut job = Job::adopt(format!("{what} (mpiexec pid {starter})"), n, starter, lines);
        checks.that(
            status.is_some_and(|s| mqd::verdict_of_exit_code(s.code()).is_some()),
            || format!("{what}: exit status {status:?}"),
        );
        if starter <= 0 {
            // Whatever it printed says why; READY lines (if any) let the job be killed.
            let deadline = Instant::now() + Duration::from_secs(2);
            while let Ok((at, line)) = job
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                if let Some(r) = parse_ready(at, &line) {
                    job.ready.push(r);
                }
                // mqd names the starter of a job it leaves running: ended with the job.
                if let Some(pid) = line
                    .split_once("its starter is pid ")
                    .and_then(|(_, p)| p.trim().parse().ok())
                {
                    job.starter = pid;
                }
                job.log.push(line);
            }
            panic!("{}: {status:?}, no dump: {:#?}", job.what, job.log);
        }
        let ready = job.wait_ready(first_state);
        // The dump started `delay` after mqd did, at the earliest: the ranks were there.
        let late: Vec<String> = ready
            .iter()
            .map(|r| (r.rank, r.at.duration_since(started)))
            .filter(|&(_, at)| at + margin > delay)
            .map(|(rank, at)| format!("{ctx}: rank {rank} printed READY {at:?} after the start, too late for a dump after {delay:?}"))
            .collect();
        if late.is_empty() {
            break (doc, job, ready, starter);
        }
        attempt += 1;
        if attempt == delays.len() {
            for l in late {
                checks.that(false, || l);
            }
            break (doc, job, ready, starter);
        }
        eprintln!(
            "{ctx}: the job started late ({}); again with a longer delay",
            late[0]
        );
        job.terminate();
    };
    let pids: Vec<i32> = ready.iter().map(|r| r.pid).collect();
    let host = hostname();
    let found = Found::Mpir {
        starter,
        host: &host,
        executable: &program,
    };
    let models: Vec<RankModel> = ready
        .iter()
        .map(|r| model(m.device, scenario, n, r))
        .collect();
    check_dump(checks, &ctx, &doc, &models, &ready, &found, n);
    check_running(checks, &ctx, &pids);
    // `mqd launch` preloads the hang recorder: each rank's records read (the ring's
    // ranks each in one call), and the calls they give still name the communicator the
    // queues show (the ring's proof is of one snapshot, no hold).
    let in_calls = if scenario == "ring" { "1" } else { "" };
    let note = format!("the hang recorder's records read: {in_calls}");
    let recorded = doc["ranks"].as_array().is_some_and(|ranks| {
        ranks.iter().all(|r| {
            r["notes"].as_array().is_some_and(|notes| {
                notes
                    .iter()
                    .any(|n| n.as_str().is_some_and(|n| n.starts_with(&note)))
            })
        })
    });
    checks.that(recorded, || format!("{ctx}: not every rank's records read"));
    if scenario == "ring" {
        checks.that(
            doc["diagnosis"]["verdict"] == "deadlock" && doc["diagnosis"]["hold"].is_null(),
            || {
                format!(
                    "{ctx}: not proven from one snapshot: {:#}",
                    doc["diagnosis"]
                )
            },
        );
    }

    // The job ran on; `mqd job` finds it again through the proctable.
    let job_args = args(&[&"job", &"--json", &"--dll", &ours, &starter.to_string()]);
    let again = run_mqd(&job_args).json().unwrap_or_else(|e| panic!("{e}"));
    let ctx2 = format!("{scenario} through MPIR (mqd job, after the job ran on)");
    check_dump(checks, &ctx2, &again, &models, &ready, &found, n);
    checks.that(queues_of(&again) == queues_of(&doc), || {
        format!("{ctx2}: differs from the first dump")
    });
    check_running(checks, &ctx2, &pids);
    if scenario == "ring" {
        // What the user sees: `mqd job` in text.
        let text = run_mqd(&args(&[&"job", &"--dll", &ours, &starter.to_string()]));
        eprintln!(
            "mqd job {starter} (ours) on the ring:\n{}",
            String::from_utf8_lossy(&text.stdout)
        );
    }
    if scenario == "freed" {
        for r in &ready {
            signal(r.pid, libc::SIGUSR1);
        }
        let ready2 = job.wait_ready(2);
        let models2: Vec<RankModel> = ready2
            .iter()
            .map(|r| model(m.device, scenario, n, r))
            .collect();
        let third = run_mqd(&job_args).json().unwrap_or_else(|e| panic!("{e}"));
        let ctx3 = format!("{scenario} state 2 through MPIR (mqd job)");
        check_dump(checks, &ctx3, &third, &models2, &ready2, &found, n);
        check_running(checks, &ctx3, &pids);
    }
    if scenario == "ring" {
        job.terminate();
    } else {
        if let Err(e) = job.finish() {
            checks.fail(e);
        }
    }
}

/// Every rank shows its left neighbour's message (it arrives just after READY).
fn ring_settled(doc: &Value, n: i32) -> bool {
    doc["ranks"].as_array().is_some_and(|ranks| {
        ranks.len() == n as usize
            && ranks.iter().all(|r| {
                comm_named(r, "ring").is_some_and(|c| {
                    c["unexpected_messages"]["operations"]
                        .as_array()
                        .is_some_and(|o| !o.is_empty())
                })
            })
    })
}

/// By pid: plain mpiexec, `mqd dump` twice with ours, once with MPICH's; for `freed` again
/// after SIGUSR1.
fn plain_path(
    m: &Mpich,
    scenario: &'static str,
    n: i32,
    checks: &mut Checks,
    section: &mut Section,
) {
    let ours = ours();
    let theirs = m.tvmpich();
    let mut job = Job::spawn(m, scenario, n);
    let states: &[u32] = if scenario == "freed" { &[1, 2] } else { &[0] };
    let mut kept_ids: Vec<Vec<Value>> = Vec::new();
    for (k, &state) in states.iter().enumerate() {
        if k > 0 {
            for pid in job.pids() {
                signal(pid, libc::SIGUSR1);
            }
        }
        let ready = job.wait_ready(state);
        let pids = job.pids();
        let models: Vec<RankModel> = ready
            .iter()
            .map(|r| model(m.device, scenario, n, r))
            .collect();
        let label = if state == 0 {
            scenario.to_owned()
        } else {
            format!("{scenario} state {state}")
        };
        if scenario == "ring" {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !dump(&ours, &pids).json().is_ok_and(|d| ring_settled(&d, n))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let first = dump(&ours, &pids);
        let doc = first.json().unwrap_or_else(|e| panic!("{e}"));
        let ctx = format!("{label} by pid (mqd dump)");
        check_dump(checks, &ctx, &doc, &models, &ready, &Found::Attach, n);
        check_running(checks, &ctx, &pids);
        let second = dump(&ours, &pids);
        let doc2 = second.json().unwrap_or_else(|e| panic!("{e}"));
        checks.that(queues_of(&doc2) == queues_of(&doc), || {
            format!("{ctx}: the second dump differs from the first")
        });
        check_running(checks, &format!("{ctx}, second dump"), &pids);
        kept_ids.push(
            doc["ranks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| comm_named(r, "kept").map_or(Value::Null, |c| c["unique_id"].clone()))
                .collect(),
        );

        // The same processes through MPICH's own library.
        let mpich_run = dump(&theirs, &pids);
        let (of, ob, oper) = cost(&first);
        section.notes.push(format!(
            "{label}: our dump took {:.2?}, MPICH's DLL's {:.2?}",
            first.elapsed, mpich_run.elapsed
        ));
        match mpich_run.json() {
            Err(e) => {
                section
                    .notes
                    .push(format!("{label}: **MPICH's DLL failed**: {e}"));
                // Whatever it did to them, the ranks must be running on.
                for pid in &pids {
                    signal(*pid, libc::SIGCONT);
                }
            }
            Ok(their_doc) => {
                let (tf, tb, tper) = cost(&mpich_run);
                section.notes.push(format!(
                    "{label}: fetch_data calls (bytes) for one display of all {n} ranks: MPICH's DLL {tf} ({tb}), ours {of} ({ob})"
                ));
                if scenario == "big" {
                    for ((r, tf, tb), (_, f, b)) in tper.iter().zip(&oper) {
                        section.notes.push(format!(
                            "big, rank {r} ({BIG_COUNT} posted receives): MPICH's DLL {tf} fetch_data calls, {tb} bytes; ours {f} calls, {b} bytes"
                        ));
                    }
                    // One read per target object: about one per queue element.
                    for (r, f, _) in &oper {
                        checks.that(*f <= BIG_COUNT as u64 + 500, || {
                            format!("big, rank {r}: {f} fetch_data calls for {BIG_COUNT} receives")
                        });
                    }
                    checks.that(of < tf, || {
                        format!("big: ours {of} fetch_data calls, MPICH's DLL {tf}")
                    });
                }
                compare_with_mpich(checks, section, &label, &doc, &their_doc, &models);
            }
        }
        check_running(checks, &format!("{ctx}, after MPICH's DLL"), &pids);
        if scenario == "ring" {
            eprintln!(
                "mqd dump (ours) of the ring:\n{}",
                String::from_utf8_lossy(
                    &run_mqd(&{
                        let mut a = args(&[&"dump", &"--dll", &ours]);
                        a.extend(pids.iter().map(i32::to_string));
                        a
                    })
                    .stdout
                )
            );
        }
    }
    if scenario == "freed" {
        checks.that(
            kept_ids[0] == kept_ids[1] && kept_ids[0].iter().all(|v| !v.is_null()),
            || format!("freed: unique_id of \"kept\" moved: {:?}", kept_ids),
        );
    }
    if scenario == "ring" {
        job.terminate();
    } else {
        if let Err(e) = job.finish() {
            checks.fail(e);
        }
    }
}

fn run(device: Device, scenario: &'static str) {
    let m = mpich(device);
    let n = size_of(scenario);
    let mut checks = Checks::default();
    let mut section = Section::new(device, scenario, n);
    launch_path(m, scenario, n, &mut checks);
    plain_path(m, scenario, n, &mut checks, &mut section);
    publish(&section);
    checks.finish(&format!("{} {scenario}", device.name()));
}

fn big(device: Device) {
    run(device, "big");
}

fn comms(device: Device) {
    run(device, "comms");
}

fn freed(device: Device) {
    run(device, "freed");
}

fn ring(device: Device) {
    run(device, "ring");
}

fn sends(device: Device) {
    run(device, "sends");
}

fn unexpected(device: Device) {
    run(device, "unexpected");
}

fn wildcards(device: Device) {
    run(device, "wildcards");
}

// `big` first: libtest starts tests in name order, and it is the longest.
mqd_fixtures::every_device!(
    big,
    comms,
    freed,
    ring,
    sends,
    unexpected,
    wildcards,
    ring_as_a_user_sees_it,
    tvtest_lists_what_mpich_lists,
    drop_in_replaces_libtvmpich,
);

/// Acceptance: `mqd launch -- mpiexec -n 4 ./ring` shows the ring on every rank: the
/// unexpected message from the left neighbour (ch3 and ch4 do not record the blocking
/// MPI_Ssend itself). Run as a user would, in text, with mqd's choice (ours, for an MPICH
/// job) and, on ch3, with the library the job names (`--dll job`: MPIR_dll_name, MPICH's
/// libtvmpich.so). On ch4 MPICH's own library cannot show it with a real debugger (it asks
/// for `MPIDI_Devreq_t.am`, which only its stub debugger knows; see the differential
/// comparison), so ours alone is asked there.
fn ring_as_a_user_sees_it(device: Device) {
    let m = mpich(device);
    let job = std::path::PathBuf::from("job");
    let libraries = match device {
        Device::Ch3 => vec![Some(job.clone()), None],
        Device::Ch4 => vec![None],
    };
    for choice in libraries {
        // `None`: mqd's default, ours; `job`: the job's own.
        let mqds_choice = choice.is_none();
        let dll = choice.clone();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
        cmd.arg("launch")
            .arg("--per-rank")
            .args(["--delay", &LAUNCH_DELAY.as_secs_f64().to_string()]);
        if let Some(dll) = &dll {
            cmd.arg("--dll").arg(dll);
        }
        cmd.arg("--")
            .arg(m.mpiexec())
            .args(["-n", "4", "./ring"])
            .current_dir(&m.dir);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start mqd launch");
        let out = read_all(child.stdout.take().expect("piped"));
        let err = read_all(child.stderr.take().expect("piped"));
        let status = wait_child(&mut child, MQD_TIMEOUT);
        let text = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
        let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
        let which = if mqds_choice {
            "mqd's choice (ours, for an MPICH job)".to_owned()
        } else {
            "the job's MPIR_dll_name (MPICH's libtvmpich.so)".to_owned()
        };
        eprintln!("mqd launch -- mpiexec -n 4 ./ring, library {which}:\n{text}");
        assert!(
            status.is_some_and(|s| mqd::verdict_of_exit_code(s.code()).is_some()),
            "mqd launch ({which}): {status:?}\n{stderr}"
        );
        // First what read the queues, then the ranks.
        let (header, listing) = text
            .split_once("\n\nrank ")
            .unwrap_or_else(|| panic!("{which}: no listing in\n{text}"));
        let version = if mqds_choice {
            "Queues read by mqd message queue support for MPICH"
        } else {
            "Queues read by MPICH message queue support for MPICH 4.0.2"
        };
        assert!(header.starts_with(version), "{which}: {header}");
        if mqds_choice {
            assert!(
                header.contains("libtvmpich.so (MPIR_dll_name); mqd reads MPICH jobs with its own"),
                "{which}: says why: {header}"
            );
        }
        let blocks: Vec<&str> = listing.split("\nrank ").collect();
        assert_eq!(blocks.len(), 4, "{which}: four ranks in\n{text}");
        for (r, block) in blocks.iter().enumerate() {
            let left = (r + 3) % 4;
            let block = block.strip_prefix("rank ").unwrap_or(block);
            assert!(
                block.starts_with(&format!("{r} (pid ")),
                "{which}: rank {r} block:\n{block}"
            );
            let ring = block
                .split("\n  \"")
                .find(|c| c.starts_with("ring\""))
                .unwrap_or_else(|| panic!("{which}: rank {r} has no \"ring\":\n{block}"));
            assert!(
                ring.starts_with(&format!("ring\": rank {r} of 4")),
                "{which}: rank {r}: {ring}"
            );
            let entries: Vec<&str> = ring
                .lines()
                .skip(1)
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            assert_eq!(
                entries.len(),
                1,
                "{which}: rank {r}: one entry on \"ring\" (no send: MPICH does not record a blocking MPI_Ssend): {entries:?}"
            );
            assert!(
                entries[0].starts_with(&format!("unexpected from {left} tag 5 count ")),
                "{which}: rank {r}: {entries:?}"
            );
            // ch3 holds no buffer for an unexpected message; ch4 one of its own.
            match (mqds_choice, device) {
                (true, Device::Ch3) => assert_eq!(
                    entries[0],
                    format!("unexpected from {left} tag 5 count 4000 buf 0x0"),
                    "{which}: rank {r}"
                ),
                (true, Device::Ch4) => assert!(
                    entries[0]
                        .starts_with(&format!("unexpected from {left} tag 5 count 4000 buf 0x"))
                        && !entries[0].ends_with(" buf 0x0"),
                    "{which}: rank {r}: {entries:?}"
                ),
                (false, _) => {}
            }
        }
    }
}

/// A document without what changes while ranks spin in MPI's progress engine (their
/// innermost frames, the words about them): its queues, communicators and verdict.
fn queues_of(doc: &serde_json::Value) -> serde_json::Value {
    let mut doc = doc.clone();
    if let Some(ranks) = doc["ranks"].as_array_mut() {
        for r in ranks {
            r["threads"] = serde_json::Value::Null;
        }
    }
    let verdict = doc["diagnosis"]["verdict"].clone();
    if let serde_json::Value::Object(members) = &mut doc {
        for derived in ["stacks", "diagnosis", "verdict"] {
            members.remove(derived);
        }
        members.insert("verdict".into(), verdict);
    }
    doc
}
