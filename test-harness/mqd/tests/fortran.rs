//! Fortran ranks: a slice of the verdict matrix's Fortran part
//! (`mqd_fixtures::verdict_matrix::fortran`; the whole of it runs as
//! `scripts/verdict-matrix --fortran`) on every MPI here with Fortran bindings: Debian's
//! MPICH and Open MPI, MPICH with debugger support (Debian's bindings of the same release
//! over it), Intel MPI. Each case is judged live by `mqd job`, and for a ring of receives
//! every rank's call must be named with its peer, tag and communicator, read from the
//! Fortran caller's memory, and the default stacks must show the program's procedure with
//! its file and line.

mod support;

use mqd_fixtures::real_mpich::{self, Device};
use mqd_fixtures::verdict_matrix::fortran::{self, Form};
use mqd_fixtures::verdict_matrix::run::{self, BUILDS, Build, Mpi};
use mqd_fixtures::verdict_matrix::{Case, Truth, named};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use support::Scratch;

/// The cases: the ring in every form, and one of each other kind in one form each.
const SLICE: &[&str] = &[
    "f_recv_ring_mpifh",
    "f_recv_ring_usempi",
    "f_recv_ring_f08",
    "f_barrier_vs_bcast_usempi",
    "f_recv_from_finalized_f08",
    "f_recv_from_computing_mpifh",
];

const O2: Build = BUILDS[1];

fn slice(forms: &[Form]) -> Vec<Case> {
    let mut cases = named(&fortran::cases(), SLICE);
    cases.retain(|c| forms.iter().any(|f| c.name.ends_with(f.name())));
    cases
}

/// `mqd job --json` on the job `starter`, and its text stacks (`mqd job --no-hold`: the
/// stacks and arguments do not need the hold the verdict does).
fn inspect(starter: i32) -> (Value, String) {
    let run = |json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
        command.arg("job");
        command.arg(if json { "--json" } else { "--no-hold" });
        command.arg(starter.to_string());
        real_mpich::run(command, Duration::from_secs(120))
    };
    let json = run(true);
    let doc = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("no JSON document ({e}): {}", json.stderr));
    let text = run(false);
    (doc, String::from_utf8_lossy(&text.stdout).into_owned())
}

/// The procedure a case's work is in, as the default stacks name it.
fn work_procedure(case: &Case) -> String {
    if case.name.ends_with(Form::MpifH.name()) {
        "work".into()
    } else {
        format!("{}_work::work", case.name)
    }
}

/// Checks a ring of receives: every rank in `MPI_Recv` from its left neighbour, tag 7,
/// on `MPI_COMM_WORLD`, and the program's procedure with its line in the stacks.
fn check_ring(what: &str, case: &Case, doc: &Value, text: &str) {
    for rank in doc["ranks"].as_array().expect("ranks") {
        let r = rank["rank"].as_i64().expect("rank");
        let pid = rank["pid"].as_i64();
        let main = rank["threads"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["tid"].as_i64() == pid)
            .unwrap_or_else(|| panic!("{what}: rank {r} has no main thread"));
        let call = &main["call"];
        // Read from the Fortran caller's side (`called`), or from MPI's own frame where
        // its library has debug information.
        let name = call["called"]
            .as_str()
            .or(call["function"].as_str())
            .map(|n| n.trim_start_matches('P'));
        assert_eq!(name, Some("MPI_Recv"), "{what}: rank {r}: {call:#}");
        assert_eq!(call["peer"], (r + 3) % 4, "{what}: rank {r}: {call:#}");
        assert_eq!(call["tag"], 7, "{what}: rank {r}: {call:#}");
        assert_eq!(
            call["predefined"], "MPI_COMM_WORLD",
            "{what}: rank {r}: {call:#}"
        );
        if !call["called"].is_null() {
            assert_eq!(call["bytes"], 16, "{what}: rank {r}: 4 INTEGERs: {call:#}");
        }
    }
    let work = format!("{} ({}.f90:", work_procedure(case), case.name);
    assert!(
        text.lines().any(|l| l.trim_start().starts_with(&work)),
        "{what}: the stacks name {work}...):\n{text}"
    );
    // MPI's Fortran entry points are shown as the call they are.
    let tree: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Stacks ("))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(
        tree.iter().any(|l| l.trim() == "MPI_Recv")
            && !tree
                .iter()
                .any(|l| l.contains("pmpi_") || l.contains("mpi_recv")),
        "{what}: {tree:#?}"
    );
}

/// The slice's cases in `forms` on `mpi`, built `-g -O2` (and `-g -O0` where `o0`);
/// `queues` is what the text must say of the ranks' message queues.
fn slice_on(mpi: Mpi, forms: &[Form], o0: bool, queues: &str) {
    let scratch = Scratch::new(&format!("fortran-{}", mpi.slug));
    let cases = slice(forms);
    let builds: &[Build] = if o0 { &BUILDS } else { &[O2] };
    let mut failures = Vec::new();
    for build in builds {
        let dir = scratch.path().join(build.name);
        let programs = run::build_all(&mpi, build, &cases, &dir);
        for (case, program) in cases.iter().zip(programs) {
            let what = format!("{} {} {}", mpi.name, case.name, build.name);
            let program = program.unwrap_or_else(|e| panic!("{what}: does not build: {e}"));
            // A loaded host can catch a rank still on its way into its last call: a
            // hang left undetermined is looked at once more, as a user would.
            let mut verdict = String::new();
            for attempt in 0..2 {
                let (mut job, _pids) =
                    run::start(&mpi, case, &program).unwrap_or_else(|e| panic!("{what}: {e}"));
                let (doc, text) = inspect(job.starter);
                assert!(text.contains(queues), "{what}: not said: {queues}\n{text}");
                verdict = doc["diagnosis"]["verdict"]
                    .as_str()
                    .unwrap_or("none")
                    .to_owned();
                let passed = job.drain().iter().any(|l| l.starts_with("PASSED "));
                job.terminate();
                assert!(!passed, "{what}: the program did not stay where it was");
                let wrong = match case.truth {
                    Truth::Hangs => verdict == "no_deadlock",
                    Truth::Moves => verdict == "deadlock",
                };
                assert!(
                    !wrong,
                    "{what}: confidently wrong: {verdict}\n{:#}",
                    doc["diagnosis"]
                );
                if case.name.starts_with("f_recv_ring_") {
                    check_ring(&what, case, &doc, &text);
                }
                // Every MPI call in the stacks by its name (not Open MPI's `MPI_Barrier_f08`
                // alias, not `pmpi_bcast_`).
                for line in text.lines().skip_while(|l| !l.starts_with("Stacks (")) {
                    let frame = line.trim().rsplit(": ").next().unwrap_or_default();
                    let lower = frame.to_ascii_lowercase();
                    assert!(
                        !(lower.starts_with("mpi_") || lower.starts_with("pmpi"))
                            || (frame.starts_with("MPI_")
                                && !frame.ends_with("_f08")
                                && !frame.ends_with("_f")
                                && !frame.ends_with('_')),
                        "{what}: {frame}\n{text}"
                    );
                }
                let undecided = case.truth == Truth::Hangs && verdict == "undetermined";
                if !undecided || attempt == 1 {
                    break;
                }
                eprintln!(
                    "{what}: undetermined on the first run; once more\n{:#}",
                    doc["diagnosis"]
                );
            }
            let due = match case.truth {
                Truth::Hangs => "deadlock",
                Truth::Moves => "no_deadlock",
            };
            if verdict != due {
                failures.push(format!("{what}: {verdict}, not {due}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fortran_ranks_on_debians_mpich() {
    slice_on(
        Mpi::from(support::debian()),
        &Form::ALL,
        true,
        "no message queues: its MPI keeps no message queues for debuggers",
    );
}

#[test]
fn fortran_ranks_on_debians_open_mpi() {
    // Open MPI's own library, which stops at the first type Debian stripped.
    slice_on(
        Mpi::from(support::debian_open_mpi()),
        &Form::ALL,
        false,
        "needs libmpi's debug types and found no opal_list_item_t: the distribution strips them (install libmpi's debug symbols",
    );
}

#[test]
fn fortran_ranks_on_mpich_with_queues() {
    slice_on(
        Mpi::with_queues(Device::Ch4),
        &Form::ALL,
        false,
        "Queues read by mqd",
    );
}

/// Intel MPI's `use mpi_f08` wrappers are built for Intel's compiler: only `mpif.h` and
/// `use mpi` serve gfortran.
#[test]
fn fortran_ranks_on_intel_mpi() {
    slice_on(
        Mpi::from(support::intel()),
        &[Form::MpifH, Form::UseMpi],
        false,
        "its MPI is Intel MPI, which keeps MPICH's debugger symbols but ships libmpi without the types",
    );
}
