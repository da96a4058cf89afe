//! A fixed slice of the verdict matrix (`mqd_fixtures::verdict_matrix`; the whole of it
//! runs as `scripts/verdict-matrix`): cases of every family, built `-g -O2` (and `-g
//! -O0` on Debian's MPICH), run live on every MPI the tests have, and from the cores of
//! the stopped job on MPICH with debugger support. Every hang of the slice that hung must
//! be proven "deadlock" (a hang left undetermined, as a loaded host can leave a rank still
//! on its way into its last call, is run once more and judged by that run), every healthy
//! state must be "no deadlock", and nothing may be confidently wrong on any run.
//!
//! Then `mqd watch` and `mqd run` on the same cases must reach `mqd job`'s verdict: one
//! rule, the hold, everywhere.

mod support;

use mqd_fixtures::real_mpich::{self, Device};
use mqd_fixtures::stock::StockMpi;
use mqd_fixtures::verdict_matrix::run::{self, BUILDS, Build, Mpi, Outcome, Tally};
use mqd_fixtures::verdict_matrix::{Case, Truth, cases, named};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::Scratch;

/// One of each family: a ring of receives, a mismatch in an eager mode, a forgotten send
/// under `MPI_Waitall`, a collective mismatch, a rank in `MPI_Finalize`; traffic and a
/// rank computing. (Sub-communicators and threads run in the whole matrix.)
const SLICE: &[&str] = &[
    "ring_receive_first_recv",
    "tag_mismatch_send",
    "missing_send_waitall",
    "allgather_mismatch",
    "reduce_vs_finalize",
    "ring_loop_isend_wait",
    "recv_from_computing",
];

const O2: Build = BUILDS[1];

fn mqd() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mqd"))
}

fn slice() -> Vec<Case> {
    named(&cases(), SLICE)
}

fn stock(m: StockMpi) -> Mpi {
    Mpi::from(m)
}

fn with_queues(device: Device) -> Mpi {
    Mpi::with_queues(device)
}

/// The slice on `mpi`, built each of `builds`; cores taken when `cores`. Fails on any
/// verdict worse than due.
fn slice_on(mpi: Mpi, builds: &[Build], cores: bool) {
    let scratch = Scratch::new(&format!("verdict-matrix-{}", mpi.slug));
    let cases = slice();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut retried: Vec<Outcome> = Vec::new();
    for build in builds {
        let dir = scratch.path().join(build.name);
        let programs = run::build_all(&mpi, build, &cases, &dir);
        for (case, program) in cases.iter().zip(programs) {
            let program = program.unwrap_or_else(|e| panic!("{}: {}: {e}", mpi.name, case.name));
            let run = || run::run_case(&mpi, build, case, &program, &mqd(), &dir, cores);
            let mut outcome = run();
            // A loaded host can catch a rank still on its way into its last call: a hang
            // left undetermined is run once more, as a user would look again. The second
            // run's verdict is the one judged, and both are in the table.
            if case.truth == Truth::Hangs && outcome.hung && outcome.live == "undetermined" {
                eprintln!(
                    "{} {} {}: undetermined on the first run ({}); once more",
                    mpi.name,
                    case.name,
                    build.name,
                    outcome.why.as_deref().unwrap_or("no doubt given")
                );
                retried.push(outcome);
                outcome = run();
            }
            outcomes.push(outcome);
        }
    }
    let mut table = run::table(&mpi, &outcomes);
    for o in &retried {
        table.push_str(&format!(
            "\nfirst run of {} {}: undetermined ({})",
            o.case,
            o.build,
            o.why.as_deref().unwrap_or("no doubt given")
        ));
    }
    eprintln!("{table}");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("..")
        .join(format!("verdict-matrix-{}.md", mpi.slug));
    let _ = std::fs::write(out, &table);
    let mut failures: Vec<String> = Vec::new();
    for o in &outcomes {
        if let Some(why) = &o.failed {
            failures.push(format!("{} {}: not run: {why}", o.case, o.build));
            continue;
        }
        failures.extend(o.wrong());
        if let Some(c) = o.cores.as_deref().filter(|c| c.starts_with("no cores")) {
            failures.push(format!("{} {}: {c}", o.case, o.build));
        }
        let due = match o.truth {
            Truth::Hangs if o.hung => "deadlock",
            Truth::Hangs => {
                failures.push(format!("{} {}: did not hang", o.case, o.build));
                continue;
            }
            Truth::Moves => "no_deadlock",
        };
        if o.live != due {
            failures.push(format!(
                "{} {}: live {}, not {due}",
                o.case, o.build, o.live
            ));
        }
    }
    let refs: Vec<&Outcome> = outcomes.iter().chain(&retried).collect();
    assert!(Tally::of(&refs).wrong.is_empty(), "{table}");
    assert!(
        failures.is_empty(),
        "{}: {}\n\n{table}",
        mpi.name,
        failures.join("\n")
    );
}

#[test]
fn the_slice_on_mpich_ch3_with_queues() {
    slice_on(with_queues(Device::Ch3), &[O2], true);
}

#[test]
fn the_slice_on_mpich_ch4_with_queues() {
    slice_on(with_queues(Device::Ch4), &[O2], false);
}

#[test]
fn the_slice_on_debians_mpich() {
    slice_on(stock(support::debian()), &BUILDS, false);
}

#[test]
fn the_slice_on_debians_open_mpi() {
    slice_on(stock(support::debian_open_mpi()), &[O2], false);
}

#[test]
fn the_slice_on_pypis_mpich() {
    slice_on(stock(support::pypi()), &[O2], false);
}

#[test]
fn the_slice_on_pypis_open_mpi_5() {
    slice_on(stock(support::pypi_open_mpi()), &[O2], false);
}

#[test]
fn the_slice_on_intel_mpi() {
    slice_on(stock(support::intel()), &[O2], false);
}

// ------------------------------------------------------------------ one rule

/// The verdict of an mqd JSON document at `path` or in `bytes`.
fn verdict_of(bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|d| d["diagnosis"]["verdict"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "none".into())
}

/// `mqd job`, `mqd watch` and `mqd run` on `case` (its program built by `mpi`): the same
/// verdict.
fn one_rule(mpi: &Mpi, case: &Case, scratch: &Path) {
    let programs = run::build_all(mpi, &O2, std::slice::from_ref(case), scratch);
    let program = programs[0].clone().expect("builds");
    let start = || {
        let mut command = Command::new(&mpi.mpiexec);
        command
            .args(&mpi.launcher_args)
            .args(["-n", &run::RANKS.to_string()])
            .arg(&program);
        let mut job = real_mpich::Job::start(command, case.name.clone(), run::RANKS);
        job.program = case.name.clone();
        job.wait_ready(0);
        std::thread::sleep(Duration::from_millis(700));
        job
    };
    let mqd_run = |args: &[&str]| {
        let mut command = Command::new(mqd());
        command.args(args);
        real_mpich::run(command, Duration::from_secs(180))
    };
    let job = start();
    let starter = job.starter.to_string();
    // On a loaded host a rank may not be in its call yet, or a hold sees one starved:
    // mqd then says "undetermined" and to look again, and a hang is still there to be
    // proven the second time.
    let judged = |args: &[&str]| {
        let verdict = verdict_of(&mqd_run(args).stdout);
        if verdict == "undetermined" && case.truth == Truth::Hangs {
            return verdict_of(&mqd_run(args).stdout);
        }
        verdict
    };
    let by_job = judged(&["job", "--json", &starter]);
    let by_watch = judged(&[
        "watch",
        "--json",
        "--samples",
        "3",
        "--interval",
        "1",
        "--job",
        &starter,
    ]);
    drop(job);
    // `mqd run` starts the job itself; a healthy one ends at its timeout.
    let report = scratch.join(format!("report-{}", case.name));
    let mut args: Vec<String> = ["run", "--hang-after", "3s", "--timeout", "10s", "--report"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.push(report.display().to_string());
    args.push("--".into());
    args.push(mpi.mpiexec.display().to_string());
    args.extend(mpi.launcher_args.iter().cloned());
    args.extend(["-n".into(), run::RANKS.to_string()]);
    args.push(program.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = mqd_run(&args);
    let by_run = std::fs::read(report.join("report.json"))
        .map(|b| verdict_of(&b))
        .unwrap_or_else(|e| format!("no report ({e}): {}", ran.stderr));
    assert_eq!(
        (by_watch.as_str(), by_run.as_str()),
        (by_job.as_str(), by_job.as_str()),
        "{}, {}: job, watch and run disagree",
        mpi.name,
        case.name
    );
    let due = if case.truth == Truth::Hangs {
        "deadlock"
    } else {
        "no_deadlock"
    };
    assert_eq!(by_job, due, "{}, {}", mpi.name, case.name);
}

/// The rule on `mpi`: two hangs of point-to-point and one of collectives.
fn watch_and_run_reach_the_verdict_of_job_on(mpi: &Mpi, scratch: &Path) {
    let all = cases();
    let case = |name: &str| all.iter().find(|c| c.name == name).expect("a case").clone();
    for name in [
        "ring_receive_first_recv",
        "bcast_mismatch",
        "tag_mismatch_ssend",
    ] {
        one_rule(mpi, &case(name), scratch);
    }
}

#[test]
fn watch_and_run_reach_the_verdict_of_job_on_debians_mpich() {
    let scratch = Scratch::new("one-rule-debian");
    let mpi = stock(support::debian());
    watch_and_run_reach_the_verdict_of_job_on(&mpi, scratch.path());
    // A healthy job: watch sees it move, run ends it at its timeout; no deadlock.
    let all = cases();
    let healthy = all
        .iter()
        .find(|c| c.name == "allreduce_loop")
        .expect("a case");
    one_rule(&mpi, healthy, scratch.path());
}

#[test]
fn watch_and_run_reach_the_verdict_of_job_on_mpich_ch3_with_queues() {
    let scratch = Scratch::new("one-rule-ch3");
    watch_and_run_reach_the_verdict_of_job_on(&with_queues(Device::Ch3), scratch.path());
}
