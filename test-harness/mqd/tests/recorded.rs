//! Jobs run with the hang recorder preloaded (`libmqd_recorder.so`): `mqd job` takes each
//! blocked call's envelope from the records in the ranks' memory, exact in a program
//! built `-O2` without `-g` on an MPI without debug information (Debian's MPICH), where
//! the frames alone cannot say a destination a helper computed; live and from cores.

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::gcore_one_snapshot;
use mqd_fixtures::stock::{StockMpi, debian, debian_open_mpi};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `libmqd_recorder.so`, built with the workspace beside `mqd`.
fn recorder() -> PathBuf {
    let mqd = Path::new(env!("CARGO_BIN_EXE_mqd"));
    let lib = mqd.with_file_name("libmqd_recorder.so");
    assert!(
        lib.exists(),
        "{} is not built: build the workspace (scripts/test does)",
        lib.display()
    );
    lib
}

/// A launcher and its ranks, killed on drop; its scratch directory removed.
struct Job {
    mpiexec: Child,
    ranks: Vec<i32>,
    dir: PathBuf,
}

impl Drop for Job {
    fn drop(&mut self) {
        // A rank that never said READY has no pid (0): kill(0) would end this test's
        // whole process group.
        for &pid in self.ranks.iter().filter(|&&pid| pid > 0) {
            // SAFETY: kill(2) of this job's own ranks.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.mpiexec.kill();
        let _ = self.mpiexec.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A ring as users write it: each rank sends to its right neighbour, which a helper of
/// another file names, synchronously, and nobody receives. The helper's result reaches
/// `MPI_Ssend` in a register the call does not preserve: from the frames alone the
/// destination is unknown.
const SSEND_RING: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int right_of(int rank, int size);
int main(int argc, char **argv) {
    int rank, size, x[4] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("READY %d %d\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Ssend(x, 4, MPI_INT, right_of(rank, size), 9, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"#;
const NEIGHBOURS: &str = "int right_of(int rank, int size) { return (rank + 1) % size; }\n";

/// `scenario` of the real-MPI scenarios (or `ssend-ring`, [`SSEND_RING`]), built `-O2`
/// without `-g`, on `n` ranks, with the recorder preloaded or not; returned once every
/// rank said READY.
fn start(mpi: &StockMpi, scenario: &str, n: usize, preload: Option<&Path>) -> Job {
    let dir = std::env::temp_dir().join(format!(
        "mqd-recorded-{}-{scenario}-{}-{}",
        mpi.slug,
        preload.is_some(),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("scenarios");
    let source = match scenario {
        "ssend-ring" => {
            std::fs::write(dir.join("neighbours.c"), NEIGHBOURS).unwrap();
            let path = dir.join("ring.c");
            std::fs::write(&path, SSEND_RING).unwrap();
            path
        }
        _ => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/real-mpi/scenarios.c"
        )),
    };
    let cc = Command::new(&mpi.mpicc)
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(&source)
        .args((scenario == "ssend-ring").then(|| dir.join("neighbours.c")))
        .output()
        .expect("the MPI's compiler wrapper");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let mut cmd = Command::new(&mpi.mpiexec);
    cmd.args(mpi.launcher_args);
    // The ranks' environment, not the launcher's: hydra's -genv, Open MPI's -x.
    if let Some(lib) = preload {
        let open_mpi = mpi.slug.contains("openmpi");
        match open_mpi {
            true => cmd.arg("-x").arg(format!("LD_PRELOAD={}", lib.display())),
            false => cmd.args(["-genv", "LD_PRELOAD"]).arg(lib),
        };
    }
    cmd.args(["-n", &n.to_string()])
        .arg(&program)
        .args(["--scenario", scenario])
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    default_signal_actions(&mut cmd);
    let mut mpiexec = cmd.spawn().expect("the MPI's launcher");
    let lines = mqd_fixtures::stock::output_lines(&mut mpiexec);
    let mut job = Job {
        mpiexec,
        ranks: vec![0; n],
        dir,
    };
    mqd_fixtures::stock::wait_ready(&lines, &mut job.ranks, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{scenario}: the job did not get ready: {e}"));
    job
}

/// `mqd job --json` of the job, once each rank's main thread is in `call` (a rank says
/// READY just before its blocking call).
fn dump_in(job: &Job, call: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
        cmd.args(["job", "--json", "--per-rank", &job.mpiexec.id().to_string()])
            .stdin(Stdio::null());
        default_signal_actions(&mut cmd);
        let out = cmd.output().expect("mqd");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let all_in = doc["ranks"].as_array().is_some_and(|ranks| {
            ranks.iter().all(|r| {
                r["threads"][0]["frames"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["function"] == call))
            })
        });
        if all_in {
            return doc;
        }
        assert!(Instant::now() < deadline, "never all in {call}: {doc:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each rank's main-thread call in `doc`.
fn calls(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["threads"][0]["call"].clone())
        .collect()
}

#[test]
fn records_give_each_blocked_calls_envelope_on_debians_mpich() {
    head_to_head(&debian());
}

/// Open MPI passes handles as pointers: `MPI_COMM_WORLD` is the program's copy of
/// `ompi_mpi_comm_world` (copy-relocated into the executable), not the library's.
#[test]
fn records_give_each_blocked_calls_envelope_on_debians_open_mpi() {
    head_to_head(&debian_open_mpi());
}

fn head_to_head(mpi: &StockMpi) {
    let lib = recorder();
    // headtohead: ranks 0 and 1 each MPI_Recv(1 int, from 1 - rank, tag 1, WORLD).
    let job = start(mpi, "headtohead", 2, Some(&lib));
    let doc = dump_in(&job, "MPI_Recv");
    for (rank, r) in doc["ranks"].as_array().unwrap().iter().enumerate() {
        let call = &r["threads"][0]["call"];
        let what = format!("rank {rank}: {call:#}");
        assert_eq!(call["function"], "MPI_Recv", "{what}");
        assert_eq!(call["peer"], 1 - rank as i64, "{what}");
        assert_eq!(call["tag"], 1, "{what}");
        assert_eq!(call["predefined"], "MPI_COMM_WORLD", "{what}");
        assert_eq!(call["bytes"], 4, "{what}: one MPI_INT");
        for field in ["peer", "tag", "comm", "bytes"] {
            assert_eq!(call["sources"][field], "the hang recorder", "{what}");
        }
        // The recorder's wrapper is the MPI's interface: its frame is MPI's, not the
        // program's.
        let frames = r["threads"][0]["frames"].as_array().unwrap();
        let wrapper = frames
            .iter()
            .find(|f| {
                f["object"]
                    .as_str()
                    .is_some_and(|o| o.ends_with("libmqd_recorder.so"))
            })
            .unwrap_or_else(|| panic!("{what}: no frame of the recorder"));
        assert_eq!(wrapper["mpi"], true, "{what}");
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("the hang recorder's records read: 1 thread(s) in an MPI call"),
            "{rank}: {notes}"
        );
    }
    let recorded = calls(&doc);

    // The same records from gdb's cores of the ranks, taken at one moment.
    let cores = gcore_one_snapshot(&job.ranks, &job.dir.join("core"), 120).expect("gcore");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqd"));
    cmd.args(["core", "--one-snapshot", "--json", "--per-rank"])
        .args(&cores)
        .stdin(Stdio::null());
    default_signal_actions(&mut cmd);
    let out = cmd.output().expect("mqd core");
    let from_cores: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    for (call, live) in calls(&from_cores).iter().zip(&recorded) {
        for field in ["function", "peer", "tag", "bytes", "predefined", "sources"] {
            assert_eq!(call[field], live[field], "{field} from a core: {call:#}");
        }
    }
    drop(job);

    // The same job without the recorder: the caller's code gives the same envelope (the
    // records agree with it), and nothing is said of records.
    let job = start(mpi, "headtohead", 2, None);
    let doc = dump_in(&job, "MPI_Recv");
    for (r, (read, recorded)) in doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(calls(&doc).iter().zip(&recorded))
    {
        for field in ["peer", "tag", "bytes", "predefined"] {
            assert_eq!(read[field], recorded[field], "{field}: {read:#}");
        }
        assert_ne!(read["sources"]["peer"], "the hang recorder");
        assert!(!r["notes"].to_string().contains("hang recorder"), "{r:#}");
    }
}

#[test]
fn records_know_a_destination_a_helper_computed() {
    let mpi = debian();
    let lib = recorder();
    let n = 3;
    let job = start(&mpi, "ssend-ring", n, Some(&lib));
    let doc = dump_in(&job, "MPI_Ssend");
    for (rank, call) in calls(&doc).iter().enumerate() {
        assert_eq!(
            call["peer"],
            ((rank + 1) % n) as i64,
            "rank {rank}: {call:#}"
        );
        assert_eq!(call["tag"], 9, "rank {rank}: {call:#}");
        assert_eq!(call["bytes"], 16, "rank {rank}: {call:#}");
        assert_eq!(
            call["sources"]["peer"], "the hang recorder",
            "rank {rank}: {call:#}"
        );
    }
    drop(job);
    // Without it, the destination is not known from the frames.
    let job = start(&mpi, "ssend-ring", n, None);
    let doc = dump_in(&job, "MPI_Ssend");
    for call in calls(&doc) {
        assert!(call["peer"].is_null(), "{call:#}");
        assert!(call["unknown"]["dest"].is_string(), "{call:#}");
    }
}
