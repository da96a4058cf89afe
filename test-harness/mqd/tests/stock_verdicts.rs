//! Verdicts on the MPIs users have, whose libmpi has no DWARF and no message queues:
//! Debian's MPICH, PyPI's mpich, Intel MPI (PyPI's impi-rt, MPICH's ABI with unnamed
//! internal functions), Debian's Open MPI 4 (found through orterun's MPIR table) and
//! PyPI's Open MPI 5 (no MPIR: found through the ranks' environment); Open MPI's handles
//! are pointers to its predefined objects. The corpus's programs are built the ways users build them
//! (`-g -O0`, `-g -O2`, no `-g` at `-O2`); the arguments of each blocked call are read
//! from the caller's side, and a possible deadlock is confirmed by persistence.
//!
//! Rings of blocking `MPI_Ssend` and of `MPI_Recv` must be "deadlock" (proven by
//! persistence), with `MPI_COMM_WORLD` and the peers named; states that move (a halo exchange going on,
//! receives pre-posted by computing ranks) must never be "deadlock". Every row is
//! written to `target/stock-verdicts.md`.

mod support;

use mqd_fixtures::real_mpich::{self, Job, Run};
use serde_json::Value;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

const RANKS: i32 = 4;
const SETTLE: Duration = Duration::from_millis(500);
const MQD_TIMEOUT: Duration = Duration::from_secs(120);

/// A case: its name in the corpus, whether it hangs, and what must be named in it.
struct Case {
    name: &'static str,
    hangs: bool,
    /// The call the ranks' threads are in, as named (from the caller's side for Intel).
    call: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "ssend_ring",
        hangs: true,
        call: "MPI_Ssend",
    },
    Case {
        name: "recv_ring",
        hangs: true,
        call: "MPI_Recv",
    },
    Case {
        name: "halo_loop",
        hangs: false,
        call: "",
    },
    Case {
        name: "preposted_compute",
        hangs: false,
        call: "",
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

/// The main thread's call of each rank in the JSON document.
fn calls(doc: &Value) -> Vec<Value> {
    doc["ranks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["threads"].as_array()?.first()?.get("call").cloned())
        .collect()
}

fn run(mpi: &support::StockMpi, table: &mut String, failures: &mut Vec<String>) {
    let dir = std::env::temp_dir().join(format!(
        "mqd-stock-verdicts-{}-{}",
        mpi.slug,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/real-mpi/corpus.c");
    for (label, flags) in FLAGS {
        let program = dir.join(format!("corpus{}", label.len()));
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
        for case in CASES {
            let mut command = Command::new(&mpi.mpiexec);
            command
                .args(mpi.launcher_args)
                .args(["-n", &RANKS.to_string()])
                .arg(&program)
                .arg(case.name);
            let mut job = Job::start(
                command,
                format!("{} {} {label}", mpi.name, case.name),
                RANKS,
            );
            job.program = "corpus".into();
            job.wait_ready(0);
            std::thread::sleep(SETTLE);
            let live = mqd(&["job", "--json", &job.starter.to_string()]);
            drop(job);
            let doc: Value = serde_json::from_slice(&live.stdout).unwrap_or_default();
            let verdict = doc["diagnosis"]["verdict"]
                .as_str()
                .unwrap_or("error")
                .to_owned();
            let text = doc.to_string();
            let what = format!("{} {label} {}", mpi.name, case.name);
            let named = if case.hangs {
                let all_named = calls(&doc).iter().filter(|c| !c.is_null()).count()
                    == RANKS as usize
                    && calls(&doc).iter().all(|c| {
                        c["predefined"] == "MPI_COMM_WORLD"
                            && c["peer"].is_i64()
                            && c["function"]
                                .as_str()
                                .is_some_and(|f| f.contains(case.call))
                    });
                if verdict != "deadlock" {
                    failures.push(format!("{what}: {verdict}, not deadlock"));
                }
                if !all_named {
                    failures.push(format!(
                        "{what}: the calls are not all named: {:?}",
                        calls(&doc)
                    ));
                }
                if !text.contains("\"persisted\"") {
                    failures.push(format!("{what}: no persistence finding"));
                }
                "MPI_COMM_WORLD, peers"
            } else {
                if verdict == "deadlock" {
                    failures.push(format!("{what}: deadlock in a job that moves"));
                }
                "-"
            };
            let _ = writeln!(
                table,
                "| {} | {label} | {} | {named} | {verdict} |",
                mpi.name, case.name
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stock_mpis_give_verdicts_from_the_callers_side() {
    let mut table =
        String::from("| MPI | build | case | named | verdict |\n|---|---|---|---|---|\n");
    let mut failures = Vec::new();
    for mpi in [
        support::debian(),
        support::pypi(),
        support::intel(),
        support::debian_open_mpi(),
        support::pypi_open_mpi(),
    ] {
        run(&mpi, &mut table, &mut failures);
    }
    let out = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/stock-verdicts.md"
    );
    let _ = std::fs::write(out, &table);
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}
