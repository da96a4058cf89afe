//! Verdicts on the MPIs users have, whose libmpi has no DWARF and no message queues:
//! Debian's MPICH, PyPI's mpich, Intel MPI (PyPI's impi-rt, MPICH's ABI with unnamed
//! internal functions), Debian's Open MPI 4 (found through orterun's MPIR table) and
//! PyPI's Open MPI 5 (no MPIR: found through the ranks' environment); Open MPI's handles
//! are pointers to its predefined objects.
//!
//! The corpus's programs are built the ways users build them (`-g -O0`, `-g -O2`, `-O2`
//! without `-g`); each blocked call's arguments are read from the caller's side (through
//! tail calls at `-O2`), and a possible deadlock is proven by holding the job. The table of
//! cases says, for each, the verdict mqd must give live and what it must name; every case
//! is also judged from gdb's cores of the stopped job (one snapshot, no hold: never
//! "deadlock" there unless proven, never confidently wrong). One test per MPI; each
//! writes its rows to `target/stock-verdicts-MPI.md`.

mod support;

use mqd_fixtures::real_mpich::{self, Job, Run};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RANKS: i32 = 4;
const SETTLE: Duration = Duration::from_millis(500);
const MQD_TIMEOUT: Duration = Duration::from_secs(120);

/// What the calls of a case's ranks must say: ranks in `call` name their communicator
/// (`MPI_COMM_WORLD`, or a program's own by its members), and a peer (`peer`).
struct Named {
    call: &'static str,
    comm: Comm,
    peer: bool,
}

/// How a call's communicator must be named.
#[derive(Clone, Copy)]
enum Comm {
    World,
    /// By its members (COMM_WORLD ranks), this many, the rank itself among them.
    Members(usize),
}

const fn named(call: &'static str, comm: Comm, peer: bool) -> Named {
    Named { call, comm, peer }
}

use Comm::{Members, World};

/// A case of the corpus.
struct Case {
    name: &'static str,
    hangs: bool,
    /// The verdict live, when a better one than "not confidently wrong" is due.
    verdict: Option<&'static str>,
    named: &'static [Named],
    /// Built every way; else at `-g -O2` only.
    every_build: bool,
    /// Also judged from cores.
    cores: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "ssend_ring",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[named("MPI_Ssend", World, true)],
        every_build: true,
        cores: true,
    },
    Case {
        name: "recv_ring",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[named("MPI_Recv", World, true)],
        every_build: true,
        cores: false,
    },
    Case {
        name: "halo_loop",
        hangs: false,
        verdict: None,
        named: &[],
        every_build: true,
        cores: false,
    },
    // A collective mismatch: rank 0 in MPI_Barrier, the others in MPI_Bcast.
    Case {
        name: "bcast_barrier",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[
            named("MPI_Barrier", World, false),
            named("MPI_Bcast", World, false),
        ],
        every_build: false,
        cores: false,
    },
    // A rank in MPI_Finalize that the others' collective waits for.
    Case {
        name: "allreduce_vs_finalize",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[named("MPI_Allreduce", World, false)],
        every_build: false,
        cores: false,
    },
    Case {
        name: "finalized_peer",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[named("MPI_Recv", World, true)],
        every_build: false,
        cores: false,
    },
    // Receives on communicators the program split (a 2x2 grid's rows and columns),
    // named by their members read from the library's objects.
    Case {
        name: "grid_row_col",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[named("MPI_Recv", Members(2), true)],
        every_build: false,
        cores: false,
    },
    // A collective on the program's column communicators waiting for their other
    // members, which wait for it on COMM_WORLD.
    Case {
        name: "col_barrier_vs_recv",
        hangs: true,
        verdict: Some("deadlock"),
        named: &[
            named("MPI_Barrier", Members(2), false),
            named("MPI_Recv", World, false),
        ],
        every_build: false,
        cores: false,
    },
    // The same collective waiting for its computing members.
    Case {
        name: "col_barrier_with_computing",
        hangs: false,
        verdict: Some("no_deadlock"),
        named: &[named("MPI_Barrier", Members(2), false)],
        every_build: false,
        cores: true,
    },
    // A collective waiting for a computing rank.
    Case {
        name: "allreduce_with_computing",
        hangs: false,
        verdict: Some("no_deadlock"),
        named: &[named("MPI_Allreduce", World, false)],
        every_build: false,
        cores: true,
    },
    Case {
        name: "recv_from_computing",
        hangs: false,
        verdict: Some("no_deadlock"),
        named: &[named("MPI_Recv", World, true)],
        every_build: false,
        cores: false,
    },
    Case {
        name: "preposted_compute",
        hangs: false,
        verdict: Some("no_deadlock"),
        named: &[],
        every_build: false,
        cores: false,
    },
];

const FLAGS: &[(&str, &[&str])] = &[
    ("-g -O0", &["-g", "-O0"]),
    ("-g -O2", &["-g", "-O2"]),
    ("-O2 (no -g)", &["-O2"]),
];

fn mqd(args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command.args(args);
    real_mpich::run(command, MQD_TIMEOUT)
}

fn verdict(doc: &Value) -> String {
    doc["diagnosis"]["verdict"]
        .as_str()
        .unwrap_or("error")
        .to_owned()
}

/// Whether the main threads' calls say what `case` must name; a failure says why.
fn check_named(case: &Case, doc: &Value) -> Result<(), String> {
    let calls: Vec<(i64, &Value)> = doc["ranks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r["rank"].as_i64()?,
                r["threads"].as_array()?.first()?.get("call")?,
            ))
        })
        .collect();
    for n in case.named {
        let in_call: Vec<&(i64, &Value)> = calls
            .iter()
            .filter(|(_, c)| c["function"].as_str().is_some_and(|f| f.contains(n.call)))
            .collect();
        if in_call.is_empty() {
            return Err(format!("no rank's call is named {}: {calls:?}", n.call));
        }
        for &&(rank, c) in &in_call {
            let told = match n.comm {
                World => c["predefined"] == "MPI_COMM_WORLD",
                Members(count) => c["members"].as_array().is_some_and(|m| {
                    m.len() == count && m.iter().any(|x| x.as_i64() == Some(rank))
                }),
            };
            if !told {
                return Err(format!(
                    "{}: rank {rank}'s communicator is not told: {c}",
                    n.call
                ));
            }
            if n.peer && !c["peer"].is_i64() {
                return Err(format!("{}: no peer: {c}", n.call));
            }
        }
    }
    Ok(())
}

/// A confidently wrong verdict, if `verdict` is one.
fn wrong(case: &Case, verdict: &str) -> bool {
    match case.hangs {
        true => verdict == "no_deadlock",
        false => verdict == "deadlock",
    }
}

struct Row {
    build: &'static str,
    case: &'static str,
    named: &'static str,
    live: String,
    core: Option<String>,
}

fn run_case(
    mpi: &support::StockMpi,
    program: &Path,
    build: &'static str,
    case: &Case,
    dir: &Path,
    failures: &mut Vec<String>,
) -> Row {
    let mut command = Command::new(&mpi.mpiexec);
    command
        .args(mpi.launcher_args)
        .args(["-n", &RANKS.to_string()])
        .arg(program)
        .arg(case.name);
    let what = format!("{} {build} {}", mpi.name, case.name);
    let mut job = Job::start(command, what.clone(), RANKS);
    job.program = "corpus".into();
    let pids: Vec<i32> = job.wait_ready(0).iter().map(|r| r.pid).collect();
    std::thread::sleep(SETTLE);
    // A short hold: these programs' messages move in microseconds.
    let due = case.verdict.is_some_and(|v| v != "undetermined");
    let (live, held_again) = support::short_hold_then_default("0.5", &job.starter.to_string(), due);
    let doc: Value = serde_json::from_slice(&live.stdout).unwrap_or_default();
    let live_verdict = verdict(&doc);
    if wrong(case, &live_verdict) || live_verdict == "error" {
        failures.push(format!("{what}: {live_verdict}, confidently wrong"));
    }
    if let Some(due) = case.verdict.filter(|&v| v != live_verdict) {
        failures.push(format!("{what}: {live_verdict}, not {due}"));
    }
    if due_held(case) && !doc.to_string().contains("\"held\"") {
        failures.push(format!(
            "{what}: a deadlock without the finding of its hold"
        ));
    }
    let named = match check_named(case, &doc) {
        Ok(()) if case.named.is_empty() => "-",
        Ok(()) => "yes",
        Err(why) => {
            failures.push(format!("{what}: {why}"));
            "NO"
        }
    };
    // Intel MPI's cores are 2.6 GB each (its shared heap): live only.
    let core = (case.cores && mpi.slug != "intel").then(|| {
        let cores = support::gcores(&pids, dir, &what);
        let mut args = vec!["core".to_owned(), "--json".into(), "--one-snapshot".into()];
        args.extend(cores.iter().map(|c| c.display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = mqd(&args);
        for c in &cores {
            let _ = std::fs::remove_file(c);
        }
        let doc: Value = serde_json::from_slice(&run.stdout).unwrap_or_default();
        let v = verdict(&doc);
        if wrong(case, &v) || v == "error" {
            failures.push(format!("{what}, cores: {v}, confidently wrong"));
        }
        if let Err(why) = check_named(case, &doc) {
            failures.push(format!("{what}, cores: {why}"));
        }
        v
    });
    drop(job);
    Row {
        build,
        case: case.name,
        named,
        live: if held_again {
            format!("{live_verdict} (held again: undetermined after the 0.5 s hold)")
        } else {
            live_verdict
        },
        core,
    }
}

/// A deadlock on a stock MPI is only ever proven by a hold.
fn due_held(case: &Case) -> bool {
    case.verdict == Some("deadlock")
}

fn run(mpi: &support::StockMpi, table: &mut String, failures: &mut Vec<String>) {
    let dir = std::env::temp_dir().join(format!(
        "mqd-stock-verdicts-{}-{}",
        mpi.slug,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/real-mpi/corpus.c");
    for (i, (build, flags)) in FLAGS.iter().enumerate() {
        let program = dir.join(format!("corpus{i}"));
        let cc = Command::new(&mpi.mpicc)
            .args(*flags)
            .args(["-pthread", "-o"])
            .arg(&program)
            .arg(source)
            .output()
            .expect("compiler wrapper");
        assert!(
            cc.status.success(),
            "{}: {}",
            mpi.name,
            String::from_utf8_lossy(&cc.stderr)
        );
        for case in CASES.iter().filter(|c| c.every_build || *build == "-g -O2") {
            let row = run_case(mpi, &program, build, case, &dir, failures);
            let _ = writeln!(
                table,
                "| {} | {} | {} | {} | {} | {} |",
                mpi.name,
                row.build,
                row.case,
                row.named,
                row.live,
                row.core.as_deref().unwrap_or("·")
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cases on one MPI, its rows written to `target/stock-verdicts-SLUG.md`.
fn stock_mpi_gives_verdicts_from_the_callers_side(mpi: &support::StockMpi) {
    let mut table =
        String::from("| MPI | build | case | named | live | cores |\n|---|---|---|---|---|---|\n");
    let mut failures = Vec::new();
    run(mpi, &mut table, &mut failures);
    let out = format!(
        "{}/../../target/stock-verdicts-{}.md",
        env!("CARGO_MANIFEST_DIR"),
        mpi.slug
    );
    let _ = std::fs::write(out, &table);
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

#[test]
fn debians_mpich_gives_verdicts_from_the_callers_side() {
    stock_mpi_gives_verdicts_from_the_callers_side(&support::debian());
}

#[test]
fn pypis_mpich_gives_verdicts_from_the_callers_side() {
    stock_mpi_gives_verdicts_from_the_callers_side(&support::pypi());
}

#[test]
fn intel_mpi_gives_verdicts_from_the_callers_side() {
    stock_mpi_gives_verdicts_from_the_callers_side(&support::intel());
}

#[test]
fn debians_open_mpi_gives_verdicts_from_the_callers_side() {
    stock_mpi_gives_verdicts_from_the_callers_side(&support::debian_open_mpi());
}

#[test]
fn pypis_open_mpi_gives_verdicts_from_the_callers_side() {
    stock_mpi_gives_verdicts_from_the_callers_side(&support::pypi_open_mpi());
}
