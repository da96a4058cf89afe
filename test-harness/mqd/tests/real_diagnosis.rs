//! The diagnosis of real hung MPI jobs: the diagnosis scenarios of `real-mpi/scenarios.c`
//! (and `ring`), run with MPICH 4.0.2 on ch3 and ch4 (`scripts/real-mpich`) under plain `mpiexec`,
//! inspected by pid with `mqd attach --json` once every rank printed READY; `completes` under
//! `mqd watch`; the hung `ring` also post mortem from gcore'd cores (`mqd core`), which must
//! show what the live `mqd dump` shows.
//!
//! Every job is killed by a Drop guard, whatever happens to the test.

mod support;

use mqd_fixtures::real_mpich::{self, Device, Job, Run, mpich};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::Scratch;

/// Longest an mqd run may take before it counts as hung.
const MQD_TIMEOUT: Duration = Duration::from_secs(60);
use real_mpich::JOB_TIMEOUT;
/// After the READY lines: the blocking call is entered, the messages are in.
const SETTLE: Duration = Duration::from_millis(500);

// ----------------------------------------------------------------------- MPICH and programs

fn ours() -> PathBuf {
    mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built with the tests")
}

// ------------------------------------------------------------------------------ running mqd

fn run_mqd(args: &[String]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command.args(args);
    let run = real_mpich::run(command, MQD_TIMEOUT);
    eprintln!("{}: {:?} in {:.2?}", run.what, run.status, run.elapsed);
    run
}

/// The JSON document of a successful run.
trait Document {
    fn json(&self) -> Value;
}

impl Document for Run {
    fn json(&self) -> Value {
        assert!(
            self.status
                .is_some_and(|s| mqd::verdict_of_exit_code(s.code()).is_some()),
            "{}: {:?}\nstderr: {}\nstdout: {}",
            self.what,
            self.status,
            self.stderr,
            String::from_utf8_lossy(&self.stdout)
        );
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "{}: no JSON document ({e}): {}",
                self.what,
                String::from_utf8_lossy(&self.stdout)
            )
        })
    }
}

fn mqd_on(command: &str, pids: &[i32], extra: &[&str]) -> Run {
    let mut a: Vec<String> = vec![command.into(), "--json".into()];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push("--dll".into());
    a.push(ours().display().to_string());
    a.extend(pids.iter().map(i32::to_string));
    run_mqd(&a)
}

// ------------------------------------------------------------------------------- findings

fn findings(doc: &Value) -> Vec<Value> {
    doc["diagnosis"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn kinds(doc: &Value) -> Vec<String> {
    findings(doc)
        .iter()
        .map(|f| f["kind"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn summary(doc: &Value) -> String {
    findings(doc)
        .iter()
        .map(|f| {
            format!(
                "  {} [{}]: {}\n    evidence: {}",
                f["kind"].as_str().unwrap_or("?"),
                f["ranks"].as_str().unwrap_or("?"),
                f["text"].as_str().unwrap_or(""),
                f["evidence"]
            )
        })
        .chain(
            doc["diagnosis"]["doubts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| format!("  doubt: {}", d["text"].as_str().unwrap_or("?"))),
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ranks of a finding, from "rank_list" (else from the "ranks" text "0,1" / "0-3").
fn ranks_of(f: &Value) -> Vec<i64> {
    if let Some(list) = f["rank_list"].as_array() {
        return list.iter().filter_map(Value::as_i64).collect();
    }
    let mut out = Vec::new();
    for part in f["ranks"].as_str().unwrap_or("").split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                out.extend(a..=b);
            }
        } else if let Ok(r) = part.parse() {
            out.push(r);
        }
    }
    out
}

/// The findings of `kind`, or a panic naming all findings.
fn of_kind(ctx: &str, doc: &Value, kind: &str) -> Vec<Value> {
    let found: Vec<Value> = findings(doc)
        .into_iter()
        .filter(|f| f["kind"] == kind)
        .collect();
    assert!(
        !found.is_empty(),
        "{ctx}: no {kind} finding; findings:\n{}",
        summary(doc)
    );
    found
}

fn is_deadlock_kind(kind: &str) -> bool {
    matches!(
        kind,
        "deadlock_cycle" | "deadlock_knot" | "blocked_by_deadlock"
    )
}

fn assert_no_deadlock(ctx: &str, doc: &Value) {
    let diag = &doc["diagnosis"];
    assert!(
        diag["deadlock"] != Value::Bool(true) && !kinds(doc).iter().any(|k| is_deadlock_kind(k)),
        "{ctx}: a deadlock reported; findings:\n{}",
        summary(doc)
    );
}

/// Runs `scenario` on `n` ranks to READY (+ settle) and returns its `mqd attach` document.
fn attach_scenario(device: Device, scenario: &str, n: i32) -> (Job, Value) {
    attach_scenario_with(device, scenario, n, &[])
}

/// [`attach_scenario`] with `extra` arguments.
fn attach_scenario_with(device: Device, scenario: &str, n: i32, extra: &[&str]) -> (Job, Value) {
    let m = mpich(device);
    let mut job = Job::spawn(m, scenario, n);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    std::thread::sleep(SETTLE);
    let doc = mqd_on("attach", &pids, extra).json();
    eprintln!("{scenario}: findings:\n{}", summary(&doc));
    (job, doc)
}

// ------------------------------------------------------------------------------- the tests

fn ring_is_a_deadlock_cycle(device: Device) {
    let started = Instant::now();
    let (mut job, mut doc) = attach_scenario(device, "ring", 4);
    // Each rank's message reaches its right neighbour just after READY: wait for all four.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !kinds(&doc).iter().any(|k| k == "deadlock_cycle") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        doc = mqd_on("attach", &job.pids(), &[]).json();
    }
    let cycles = of_kind("ring", &doc, "deadlock_cycle");
    assert!(
        cycles.iter().any(|f| {
            let mut r = ranks_of(f);
            r.sort();
            r == [0, 1, 2, 3]
        }),
        "ring: no deadlock_cycle over ranks 0-3; findings:\n{}",
        summary(&doc)
    );
    assert_eq!(doc["diagnosis"]["deadlock"], Value::Bool(true), "ring");
    // Blocking MPI_Ssends, which MPICH lists nowhere but marks synchronous at the
    // destination: proven.
    assert_eq!(doc["diagnosis"]["verdict"], "deadlock", "ring");
    // What a user types: `mqd job STARTER`, no options (MPIR, our library, stacks, one
    // two-phase snapshot).
    let run = run_mqd(&[String::from("job"), job.starter.to_string()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.and_then(|s| s.code()),
        Some(8),
        "mqd job {}: {text}\n{}",
        job.starter,
        run.stderr
    );
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "mqd job {}: {text}",
        job.starter
    );
    assert!(
        text.contains("MPI_Ssend"),
        "mqd job {}: {text}",
        job.starter
    );
    job.drain();
    eprintln!("ring: {:.2?}", started.elapsed());
}

fn headtohead_is_possible_in_one_snapshot_and_proven_by_the_hold(device: Device) {
    let started = Instant::now();
    let (job, doc) = attach_scenario_with(device, "headtohead", 2, &["--no-hold"]);
    let cycles = of_kind("headtohead", &doc, "deadlock_cycle");
    assert!(
        cycles.iter().any(|f| {
            let mut r = ranks_of(f);
            r.sort();
            r == [0, 1]
        }),
        "headtohead: no deadlock_cycle over ranks 0,1; findings:\n{}",
        summary(&doc)
    );
    // In one snapshot, a receive on its way cannot be ruled out: a possible deadlock
    // only, and the verdict says so.
    assert_eq!(cycles[0]["certainty"], "possible", "headtohead");
    assert_eq!(
        doc["diagnosis"]["deadlock"],
        Value::Bool(false),
        "headtohead"
    );
    assert_eq!(doc["diagnosis"]["verdict"], "undetermined", "headtohead");
    assert_eq!(doc["diagnosis"]["possibly_deadlocked"], "0,1", "headtohead");
    // Held: neither rank returns, no queue changes, nothing moves: proven.
    let doc = mqd_on("attach", &job.pids(), &[]).json();
    assert_eq!(doc["diagnosis"]["verdict"], "deadlock", "{}", summary(&doc));
    let cycles = of_kind("headtohead", &doc, "deadlock_cycle");
    assert_eq!(cycles[0]["certainty"], "definite", "{}", summary(&doc));
    let held = of_kind("headtohead", &doc, "held");
    assert_eq!(held[0]["ranks"], "0,1", "{}", summary(&doc));
    assert_eq!(
        doc["diagnosis"]["hold"]["proven"],
        "0,1",
        "{}",
        summary(&doc)
    );
    // By classes (as a job of more than 256 ranks is reported): the hold proves it too,
    // and the classes' cycle is proven.
    let doc = mqd_on("attach", &job.pids(), &["--by-classes"]).json();
    assert_eq!(doc["schema"], "mqd/3-classes");
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], "deadlock", "{d:#}");
    assert_eq!(d["deadlocked"], "0,1", "{d:#}");
    assert_eq!(d["hold"]["proven"], "0,1", "{d:#}");
    let parts = d["deadlocks"].as_array().expect("the parts");
    assert!(
        parts
            .iter()
            .any(|p| p["kind"] == "deadlock_cycle" && p["certainty"] == "definite"),
        "{d:#}"
    );
    let cycles = of_kind("headtohead, by classes", &doc, "deadlock_cycle");
    assert_eq!(cycles[0]["certainty"], "definite", "{d:#}");
    eprintln!("headtohead: {:.2?}", started.elapsed());
}

/// With the stacks, both ranks are blocked in MPI_Recv (libmpi's own symbol) on the
/// receive the queues show; in one snapshot still only possible: a message already on
/// its way would free them, and one snapshot cannot show one.
fn headtohead_with_stacks_is_blocked_but_not_proven_in_one_snapshot(device: Device) {
    let started = Instant::now();
    let m = mpich(device);
    let mut job = Job::spawn(m, "headtohead", 2);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    std::thread::sleep(SETTLE);
    let doc = mqd_on("attach", &pids, &["--no-hold"]).json();
    assert_eq!(
        doc["diagnosis"]["verdict"],
        "undetermined",
        "{}",
        summary(&doc)
    );
    let cycles = of_kind("headtohead", &doc, "deadlock_cycle");
    assert_eq!(cycles[0]["certainty"], "possible", "{}", summary(&doc));
    let text = cycles[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Possible deadlock: ranks 0 -> 1 -> 0 each blocked in MPI_Recv from the other rank on \"MPI_COMM_WORLD\", tag 1")
            && text.contains("Deadlocked unless a message is already on its way"),
        "{text}"
    );
    let waits = doc["diagnosis"]["waits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        waits.len() == 2 && waits.iter().all(|w| w["call"] == "MPI_Recv"),
        "{waits:#?}"
    );
    for r in 0..2 {
        let frames = doc["ranks"][r]["threads"][0]["frames"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let names: Vec<&str> = frames
            .iter()
            .filter_map(|f| f["function"].as_str())
            .collect();
        assert!(
            names.iter().any(|n| *n == "MPI_Recv" || *n == "PMPI_Recv"),
            "rank {r}: {names:?}"
        );
        assert!(names.contains(&"main"), "rank {r}: {names:?}");
    }
    eprintln!("headtohead with stacks: {:.2?}", started.elapsed());
}

/// The scenarios of the stacks issue on real MPICH with debugger support, live through
/// the job's MPIR table and from gcore's cores, in text and JSON: queues and stacks
/// together, the calls' communicators read from their frames' DWARF.
fn stack_scenarios_live_and_from_cores(device: Device) {
    let started = Instant::now();
    let m = mpich(device);
    let ours = ours().display().to_string();
    let run = |args: Vec<String>| -> std::process::Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
        command.args(&args);
        let run = real_mpich::run(command, MQD_TIMEOUT);
        std::process::Output {
            status: run
                .status
                .unwrap_or_else(|| panic!("{}: timed out", run.what)),
            stdout: run.stdout,
            stderr: run.stderr.into_bytes(),
        }
    };
    for scenario in &support::STACK_SCENARIOS {
        let what = format!("{}, {}", device.name(), scenario.name);
        let mut job = Job::spawn(m, scenario.name, scenario.ranks as i32);
        let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
        std::thread::sleep(SETTLE);
        // Rank 1 of "finalize" ends its MPI's threads in MPI_Finalize: held then, it works.
        support::threads_settled(&pids, SETTLE);
        let starter = job.starter.to_string();
        support::check_stack_scenario(&format!("{what}, live"), &scenario.with_queues, |extra| {
            let mut args: Vec<String> = vec!["job".into(), "--stacks".into(), "--dll".into()];
            args.push(ours.clone());
            args.extend(extra.iter().map(|s| s.to_string()));
            args.push(starter.clone());
            run(args)
        });
        let scratch = Scratch::new(&format!(
            "stack-scenario-{}-{}",
            device.name(),
            scenario.name
        ));
        let cores = support::gcores(&pids, scratch.path(), &what);
        support::check_stack_scenario(
            &format!("{what}, cores"),
            &scenario.with_queues_cores,
            |extra| {
                let mut args: Vec<String> =
                    vec!["core".into(), "--one-snapshot".into(), "--dll".into()];
                args.push(ours.clone());
                args.extend(extra.iter().map(|s| s.to_string()));
                args.extend(cores.iter().map(|c| c.display().to_string()));
                run(args)
            },
        );
        job.drain();
    }
    eprintln!("stack scenarios on real MPICH: {:.2?}", started.elapsed());
}

/// The arguments `mqd` reads from the MPI call's frame (MPICH's -O1 code: location
/// lists, callee-saved registers recovered through every frame below) are gdb's `info
/// args` of the same frame.
fn call_arguments_agree_with_gdb(device: Device) {
    let m = mpich(device);
    for (scenario, n, function) in [("headtohead", 2, "Recv"), ("mismatch", 4, "Bcast")] {
        let mut job = Job::spawn(m, scenario, n);
        let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
        std::thread::sleep(SETTLE);
        let doc = mqd_on("dump", &pids, &["--stacks"]).json();
        let mut compared = 0;
        for (r, &pid) in pids.iter().enumerate() {
            let threads = doc["ranks"][r]["threads"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let main = threads
                .iter()
                .find(|t| t["tid"] == pid)
                .unwrap_or_else(|| panic!("{scenario}: rank {r} has no main thread: {doc:#}"));
            let call = &main["call"];
            if !call["function"]
                .as_str()
                .is_some_and(|f| f.ends_with(function))
            {
                // The rank of the scenario that is in another call (the Barrier).
                continue;
            }
            // gdb's backtrace line of the call: "#6  PMPI_Recv (buf=..., source=1, ...)".
            let text = support::gdb_batch(pid, &["bt"]);
            let line = text
                .lines()
                .find(|l| l.contains(&format!(" PMPI_{function} (")))
                .unwrap_or_else(|| panic!("{scenario}, rank {r}: no PMPI_{function} in\n{text}"));
            let gdb_value = |name: &str| -> Option<i64> {
                let (_, rest) = line.split_once(&format!(" {name}="))?;
                rest.split([',', ')']).next()?.trim().parse().ok()
            };
            let pairs = [
                ("comm", call["comm"].as_i64(), gdb_value("comm")),
                ("peer", call["peer"].as_i64(), gdb_value("source")),
                ("tag", call["tag"].as_i64(), gdb_value("tag")),
                ("root", call["root"].as_i64(), gdb_value("root")),
            ];
            for (what, ours, gdbs) in pairs {
                assert_eq!(
                    ours, gdbs,
                    "{scenario}, rank {r}: {what}: ours {ours:?}, gdb's {gdbs:?}\n{call:#}\n{text}"
                );
            }
            assert!(
                call["comm"].as_i64().is_some(),
                "{scenario}, rank {r}: {call:#}"
            );
            compared += 1;
        }
        assert!(
            compared >= 2,
            "{scenario}: only {compared} ranks compared: {doc:#}"
        );
        job.drain();
    }
}

/// The main thread's frames, the functions inlined into MPICH's -O1 code included (from
/// its DWARF), are gdb's, in order, from the wait loop (`MPIR_Wait_state`) out to
/// `main`: the progress engine below it polls, so it is elsewhere by the time gdb looks.
fn stacks_with_inlined_frames_agree_with_gdb(device: Device) {
    let m = mpich(device);
    let mut job = Job::spawn(m, "headtohead", 2);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    std::thread::sleep(SETTLE);
    let doc = mqd_on("dump", &pids, &["--stacks", "--all-threads"]).json();
    // PMPI_Recv and MPI_Recv are one function under two names.
    let name = |n: &str| {
        support::normal(
            n.strip_prefix('P')
                .filter(|n| n.starts_with("MPI_"))
                .unwrap_or(n),
        )
    };
    let mut inlined = 0;
    for (r, &pid) in pids.iter().enumerate() {
        let threads = doc["ranks"][r]["threads"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let (tid, gdb) = support::gdb_stacks(pid)
            .into_iter()
            .find(|(tid, _)| *tid == pid)
            .unwrap_or_else(|| panic!("rank {r}: gdb shows no main thread"));
        let ours = threads
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap_or_else(|| panic!("rank {r}: no thread {tid} in {threads:#?}"));
        let frames = ours["frames"].as_array().cloned().unwrap_or_default();
        let ours: Vec<String> = frames
            .iter()
            .map(|f| name(f["function"].as_str().unwrap_or("??")))
            .collect();
        let gdb: Vec<String> = gdb.iter().map(|n| name(n)).collect();
        let from = |names: &[String]| {
            names
                .iter()
                .position(|n| n == "MPIR_Wait_state")
                .unwrap_or_else(|| panic!("rank {r}: no MPIR_Wait_state in {names:?}"))
        };
        let (a, b) = (from(&ours), from(&gdb));
        assert!(
            ours.len() - a >= gdb.len() - b,
            "rank {r}: ours {ours:?} is shorter than gdb's {gdb:?}"
        );
        assert_eq!(
            ours[a..a + gdb.len() - b],
            gdb[b..],
            "rank {r}: ours, gdb's, from the wait loop out"
        );
        inlined += frames[a..a + gdb.len() - b]
            .iter()
            .filter(|f| f["inlined"] == true)
            .count();
    }
    assert!(inlined > 0, "no inlined frame in MPICH's stacks: {doc:#}");
    job.drain();
}

/// MPI_Waitall's requests, read from its frame, are the operations it waits for: the
/// two receives it was given make the (possible, in one snapshot) deadlock, the third
/// pending receive is no part of it.
fn waitall_waits_for_its_own_requests(device: Device) {
    let m = mpich(device);
    let mut job = Job::spawn(m, "waitall", 2);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    std::thread::sleep(SETTLE);
    let doc = mqd_on("dump", &pids, &["--stacks", "--no-hold"]).json();
    for r in 0..2 {
        let call = &doc["ranks"][r]["threads"][0]["call"];
        let requests = call["requests"].as_array().cloned().unwrap_or_default();
        assert_eq!(requests.len(), 2, "rank {r}: {call:#}");
        assert!(requests.iter().all(Value::is_u64), "rank {r}: {call:#}");
    }
    assert_eq!(
        doc["diagnosis"]["verdict"],
        "undetermined",
        "{}",
        summary(&doc)
    );
    let cycle = &of_kind("waitall", &doc, "deadlock_cycle")[0];
    assert_eq!(cycle["certainty"], "possible", "{cycle:#}");
    let evidence = cycle["evidence"].to_string();
    assert!(
        evidence.contains("tag 13") && evidence.contains("tag 14") && !evidence.contains("tag 15"),
        "the cycle rests on other operations than MPI_Waitall's: {cycle:#}"
    );
    job.drain();
}

fn tagmismatch_is_a_tag_mismatch(device: Device) {
    let started = Instant::now();
    let (_job, doc) = attach_scenario(device, "tagmismatch", 2);
    let found = of_kind("tagmismatch", &doc, "tag_mismatch");
    let f = &found[0];
    let text = f["text"].as_str().unwrap_or("");
    let all = format!("{text} {}", f["evidence"]);
    assert!(
        ranks_of(f).contains(&0),
        "tagmismatch: the finding names the blocked rank 0: {f:#}"
    );
    for needle in ["rank 0", "rank 1", "tag 6", "tag 5"] {
        assert!(
            all.contains(needle),
            "tagmismatch: the tag_mismatch finding does not say {needle:?}: {f:#}"
        );
    }
    // Rank 1's eager MPI_Send completed: CH3 marks the message as no synchronous send,
    // so rank 1 is not blocked and there is no cycle.
    assert_no_deadlock("tagmismatch", &doc);
    eprintln!("tagmismatch: {:.2?}", started.elapsed());
}

fn sourcemismatch_is_a_source_mismatch(device: Device) {
    let started = Instant::now();
    let (_job, doc) = attach_scenario(device, "sourcemismatch", 3);
    let found = of_kind("sourcemismatch", &doc, "source_mismatch");
    let f = &found[0];
    let text = f["text"].as_str().unwrap_or("");
    assert!(
        ranks_of(f).contains(&0),
        "sourcemismatch: the finding names the blocked rank 0: {f:#}"
    );
    for needle in ["rank 0", "rank 1", "rank 2", "tag 5"] {
        assert!(
            text.contains(needle),
            "sourcemismatch: the source_mismatch finding does not say {needle:?}: {f:#}"
        );
    }
    assert_no_deadlock("sourcemismatch", &doc);
    eprintln!("sourcemismatch: {:.2?}", started.elapsed());
}

fn anysource_waits_on_an_idle_rank(device: Device) {
    let started = Instant::now();
    let (_job, doc) = attach_scenario(device, "anysource", 2);
    let idle = of_kind("anysource", &doc, "idle_target");
    assert!(
        idle.iter().any(|f| ranks_of(f) == [1]),
        "anysource: no idle_target naming rank 1; findings:\n{}",
        summary(&doc)
    );
    assert_no_deadlock("anysource", &doc);
    eprintln!("anysource: {:.2?}", started.elapsed());
}

fn compute_waits_on_an_idle_rank(device: Device) {
    let started = Instant::now();
    let (_job, doc) = attach_scenario(device, "compute", 3);
    let idle = of_kind("compute", &doc, "idle_target");
    let f = idle.iter().find(|f| ranks_of(f) == [0]).unwrap_or_else(|| {
        panic!(
            "compute: no idle_target naming rank 0; findings:\n{}",
            summary(&doc)
        )
    });
    let text = f["text"].as_str().unwrap_or("");
    assert!(
        text.contains("ranks 1,2") || text.contains("ranks 1-2") || text.contains("ranks 1 and 2"),
        "compute: the idle_target finding does not say that ranks 1 and 2 wait for rank 0: {f:#}"
    );
    assert_no_deadlock("compute", &doc);
    eprintln!("compute: {:.2?}", started.elapsed());
}

fn completes_has_no_persistent_deadlock(device: Device) {
    let started = Instant::now();
    let m = mpich(device);
    let mut job = Job::spawn(m, "completes", 2);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    let run = mqd_on("watch", &pids, &["--samples", "3", "--interval", "0.3"]);
    let ok = run
        .status
        .is_some_and(|s| mqd::verdict_of_exit_code(s.code()).is_some());
    if ok {
        let doc = run.json();
        let persistent = &doc["persistent"];
        assert!(
            persistent.is_object(),
            "completes: no \"persistent\" in {doc:#}"
        );
        assert_ne!(
            persistent["deadlock"],
            Value::Bool(true),
            "completes: a persistent deadlock: {persistent:#}"
        );
        let bad: Vec<&Value> = persistent["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["kind"].as_str().is_some_and(is_deadlock_kind))
            .collect();
        assert!(bad.is_empty(), "completes: deadlock findings {bad:#?}");
        eprintln!("completes: watch reported {}", persistent["findings"]);
    } else {
        // The job may have finished during sampling: then the failure says so.
        let exited = job.wait_exit(Duration::from_millis(100)).is_some()
            || pids
                .iter()
                .any(|p| !Path::new(&format!("/proc/{p}")).exists());
        let why = run.stderr.to_lowercase();
        assert!(
            exited
                && (why.contains("exit")
                    || why.contains("no such process")
                    || why.contains("gone")
                    || why.contains("vanished")),
            "completes: mqd watch failed ({:?}) while the job ran on, or without saying that it exited: {}",
            run.status,
            run.stderr
        );
        eprintln!(
            "completes: the job exited during watch: {}",
            run.stderr.trim()
        );
    }
    let status = job.wait_exit(JOB_TIMEOUT);
    assert!(
        status == Some(0),
        "completes: mpiexec exit code {status:?}; output {:#?}",
        job.drain()
    );
    eprintln!("completes: {:.2?}", started.elapsed());
}

/// Drops what differs between a live dump and a post mortem one.
fn normalized(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        o.remove("acquired_by");
        // Ranks spinning in MPI's progress engine are caught in other frames each time:
        // where each thread is (its call) is what must agree.
        o.remove("stacks");
    }
    if let Some(ranks) = doc["ranks"].as_array_mut() {
        for r in ranks {
            if let Some(threads) = r["threads"].as_array_mut() {
                for t in threads {
                    *t = t["location"].clone();
                }
            }
            if let Some(o) = r.as_object_mut() {
                o.remove("message");
            }
        }
    }
    doc
}

/// The first differences between two JSON values, as paths.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                differences(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("{path}: live {a} / core {b}")),
        _ => {}
    }
}

fn ring_cores_match_the_live_dump(device: Device) {
    let started = Instant::now();
    let m = mpich(device);
    let mut job = Job::spawn(m, "ring", 4);
    let pids = job.wait_ready(0).iter().map(|r| r.pid).collect::<Vec<_>>();
    // Every message in: each rank's left neighbour's message waits unexpected.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut live;
    loop {
        std::thread::sleep(SETTLE);
        live = mqd_on("dump", &pids, &[]).json();
        let settled = live["ranks"].as_array().is_some_and(|ranks| {
            ranks.len() == 4
                && ranks.iter().all(|r| {
                    r["communicators"].as_array().is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c["name"] == "ring"
                                && c["unexpected_messages"]["operations"]
                                    .as_array()
                                    .is_some_and(|o| !o.is_empty())
                        })
                    })
                })
        });
        if settled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ring: the messages of the ring never all arrived: {live:#}"
        );
    }
    // Removed when the test ends, however it ends: cores are large.
    let scratch = Scratch::new(&format!("ring-cores-{}", device.name()));
    let gstart = Instant::now();
    // Taken with every rank stopped: one snapshot, as the live dump is.
    let cores = support::gcores(&pids, scratch.path(), "ring");
    eprintln!("ring: gcore of 4 ranks took {:.2?}", gstart.elapsed());
    let mut a: Vec<String> = vec![
        "core".into(),
        "--one-snapshot".into(),
        "--json".into(),
        "--dll".into(),
    ];
    a.push(ours().display().to_string());
    a.extend(cores.iter().map(|c| c.display().to_string()));
    let post = run_mqd(&a).json();
    let (l, p) = (normalized(live), normalized(post));
    let mut diffs = Vec::new();
    differences("", &l, &p, &mut diffs);
    assert!(
        diffs.is_empty(),
        "ring: mqd core differs from the live mqd dump:\n{}",
        diffs.join("\n")
    );
    job.drain();
    eprintln!("ring cores: {:.2?}", started.elapsed());
}

mqd_fixtures::every_device!(
    ring_is_a_deadlock_cycle,
    headtohead_is_possible_in_one_snapshot_and_proven_by_the_hold,
    headtohead_with_stacks_is_blocked_but_not_proven_in_one_snapshot,
    stack_scenarios_live_and_from_cores,
    call_arguments_agree_with_gdb,
    stacks_with_inlined_frames_agree_with_gdb,
    waitall_waits_for_its_own_requests,
    tagmismatch_is_a_tag_mismatch,
    sourcemismatch_is_a_source_mismatch,
    anysource_waits_on_an_idle_rank,
    compute_waits_on_an_idle_rank,
    completes_has_no_persistent_deadlock,
    ring_cores_match_the_live_dump,
);
