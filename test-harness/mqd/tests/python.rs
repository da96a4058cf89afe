//! Python ranks: mpi4py jobs (the machine's CPython, mpi4py and PyPI's MPICH in a virtual
//! environment the tests make) shown in their Python frames merged with the native stack:
//! a collective waiting for a rank computing in pure Python, read live; the Python
//! frames of every thread compared with `py-spy dump` on the same stopped processes;
//! the same frames from a core of a rank (gdb's `gcore`).

mod support;

use mqd_fixtures::default_signal_actions;
use mqd_fixtures::real_mpich::{self, Job};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use support::Scratch;

/// One job at a time: four ranks busy-poll on two cores.
static ONE_JOB: Mutex<()> = Mutex::new(());

const LIMIT: Duration = Duration::from_secs(120);

/// The job: ranks 0-2 call `comm.allreduce` (line 25) from `main` (line 28), the last
/// rank computes in `integrate` (lines 11-13) first; each rank has a sleeping thread.
const JOB: &str = r#"import os, threading, time
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


def integrate(n):
    total = 0.0
    while True:
        for i in range(n):
            total += i * 0.5
        n += 1


def helper():
    time.sleep(3600)


def main():
    threading.Thread(target=helper, name="helper", daemon=True).start()
    os.write(1, f"READY {rank} {os.getpid()}\n".encode())
    if rank == comm.Get_size() - 1:
        integrate(1000)
    return comm.allreduce(rank)


main()
"#;

/// The job started by the environment's `mpiexec`, every rank's READY line in.
fn start(dir: &Scratch, bin: &Path) -> (Job, PathBuf) {
    let job = run_script(dir, "job.py", JOB, &bin.join("mpiexec"), bin, 4);
    (job, dir.file("job.py"))
}

/// `script`, saved as `name`, run by `n` ranks of `mpiexec` with the Python of the
/// environment `bin`: every rank's READY line in, and the ranks into their calls.
fn run_script(dir: &Scratch, name: &str, script: &str, mpiexec: &Path, bin: &Path, n: i32) -> Job {
    let path = dir.file(name);
    std::fs::write(&path, script).unwrap();
    let python = bin.join("python");
    let mut command = Command::new(mpiexec);
    command.args(["-n", &n.to_string()]).arg(&python).arg(&path);
    let mut job = Job::start(command, format!("mpiexec -n {n} python {name}"), n);
    // Leftovers are the interpreter's processes.
    let interpreter = std::fs::canonicalize(&python).expect("the environment's python");
    job.program = interpreter
        .file_name()
        .expect("a file")
        .to_string_lossy()
        .into_owned();
    job.wait_ready(0);
    // Past MPI_Init and into the calls.
    std::thread::sleep(Duration::from_millis(1500));
    job
}

fn mqd(args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    default_signal_actions(&mut command).args(args);
    let run = real_mpich::run(command, LIMIT);
    (
        run.status.and_then(|s| s.code()),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        run.stderr,
    )
}

/// Each thread's Python frames (by thread id): (function, file, line), innermost first.
type PythonThreads = Vec<(i64, Vec<(String, String, i64)>)>;

/// (function, file, line) of each frame, under the names `keys` gives them.
fn triples<'a>(
    frames: impl IntoIterator<Item = &'a Value>,
    keys: [&str; 3],
) -> Vec<(String, String, i64)> {
    frames
        .into_iter()
        .map(|f| {
            (
                f[keys[0]].as_str().unwrap_or("").to_owned(),
                f[keys[1]].as_str().unwrap_or("").to_owned(),
                f[keys[2]].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

/// Each thread's Python frames in a rank of `doc`: tid -> [(function, file, line)],
/// innermost first.
fn python_frames(rank: &Value) -> PythonThreads {
    rank["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            let python = t["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .filter(|f| f["language"] == "python");
            let frames = triples(python, ["function", "file", "line"]);
            (t["tid"].as_i64().expect("tid"), frames)
        })
        .collect()
}

#[test]
fn a_collective_waiting_for_a_rank_computing_in_python_is_shown_in_python_frames() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let bin = support::mpi4py_bin();
    let dir = Scratch::new("python-collective");
    let (job, script) = start(&dir, &bin);
    let script = script.display().to_string();
    let starter = job.starter.to_string();

    let (code, text, err) = mqd(&["job", &starter]);
    let what = format!("{text}\n{err}");
    // The last rank computes: the others wait for it, no deadlock.
    assert_eq!(code, Some(0), "{what}");
    assert!(text.contains("Verdict: no deadlock"), "{what}");
    assert!(
        text.contains("rank 3 is not in MPI (in integrate at job.py:1"),
        "the computing rank's Python function and line: {what}"
    );
    // The tree: Python frames with their lines above mpi4py's call and the MPI call.
    for line in [
        "<module> (job.py:28)",
        "main (job.py:25)",
        "mpi4py.MPI.Comm.allreduce",
        "main (job.py:24)",
        "integrate (job.py:1",
        // mpi4py's first allreduce duplicates the communicator for itself.
        "Called from Python:\n  ranks 0-2: MPI_Comm_dup, from mpi4py.MPI.Comm.allreduce in main (job.py:25)\n",
    ] {
        assert!(text.contains(line), "{line}: {what}");
    }

    // By classes (as a job of more than 256 ranks): each class's place is its Python
    // line, and the MPI that keeps no queues is said to keep none.
    let (code, text, err) = mqd(&["job", &starter, "--by-classes"]);
    let what = format!("{text}\n{err}");
    assert_eq!(code, Some(0), "{what}");
    assert!(
        text.contains("(from mpi4py.MPI.Comm.allreduce in main (job.py:25))"),
        "{what}"
    );
    assert!(
        text.contains("rank 3 (1): not in MPI (in integrate)"),
        "{what}"
    );
    assert!(text.contains("have no message queues"), "{what}");
    assert!(!text.contains("could not be dumped"), "{what}");

    let (_, out, err) = mqd(&["job", &starter, "--json"]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    for (r, rank) in doc["ranks"].as_array().expect("ranks").iter().enumerate() {
        let pid = rank["pid"].as_i64().expect("pid");
        let threads = python_frames(rank);
        let main = &threads.iter().find(|(tid, _)| *tid == pid).expect("main").1;
        let names: Vec<(&str, i64)> = main.iter().map(|(f, _, l)| (f.as_str(), *l)).collect();
        if r < 3 {
            assert_eq!(names, [("main", 25), ("<module>", 28)], "rank {r}");
            // The main thread comes first, whatever its id (pids wrap around).
            let main = &rank["threads"][0];
            assert_eq!(
                main["tid"].as_i64(),
                Some(pid),
                "rank {r}: the main thread first"
            );
            let location = &main["location"];
            assert!(location["in_mpi"].is_object(), "rank {r}: {location}");
        } else {
            assert_eq!(names[0].0, "integrate", "rank {r}: {names:?}");
            assert!((11..=13).contains(&names[0].1), "rank {r}: {names:?}");
            assert_eq!(&names[1..], [("main", 24), ("<module>", 28)], "rank {r}");
        }
        assert!(main.iter().all(|(_, file, _)| *file == script), "{main:?}");
        // The sleeping thread, in Python frames too.
        assert!(
            threads
                .iter()
                .any(|(_, frames)| frames.first().is_some_and(|f| f.0 == "helper" && f.2 == 17)),
            "rank {r}: {threads:?}"
        );
    }
}

/// `py-spy dump --json` of a process: os thread id -> [(name, file, line)].
fn py_spy(bin: &Path, pid: i32) -> PythonThreads {
    let mut command = Command::new(bin.join("py-spy"));
    command.args(["dump", "--nonblocking", "--json", "--pid", &pid.to_string()]);
    let run = real_mpich::run(command, LIMIT);
    let out = String::from_utf8_lossy(&run.stdout);
    let doc: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("py-spy: {e}: {out}\n{}", run.stderr));
    doc.as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            let frames = triples(
                t["frames"].as_array().expect("frames"),
                ["name", "filename", "line"],
            );
            (t["os_thread_id"].as_i64().expect("os_thread_id"), frames)
        })
        .collect()
}

/// Stops `pids` (SIGSTOP) for the length of `f`: both readers see the same moment.
fn stopped<T>(pids: &[i32], f: impl FnOnce() -> T) -> T {
    struct Resume<'a>(&'a [i32]);
    impl Drop for Resume<'_> {
        fn drop(&mut self) {
            for &pid in self.0 {
                real_mpich::signal(pid, libc::SIGCONT);
            }
        }
    }
    for &pid in pids {
        real_mpich::signal(pid, libc::SIGSTOP);
    }
    let _resume = Resume(pids);
    std::thread::sleep(Duration::from_millis(200));
    f()
}

#[test]
fn python_frames_agree_with_py_spy_and_with_a_core_for_every_thread() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let bin = support::mpi4py_bin();
    let dir = Scratch::new("python-py-spy");
    let (job, _) = start(&dir, &bin);
    for ready in &job.ready {
        let pid = ready.pid;
        let (ours, theirs, core) = stopped(&[pid], || {
            let (_, out, err) = mqd(&["dump", &pid.to_string(), "--json"]);
            let doc: Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
            let ours = python_frames(&doc["ranks"][0]);
            let theirs = py_spy(&bin, pid);
            (ours, theirs, gcore(&dir, pid))
        });
        let what = format!("rank {}: mqd {ours:#?}\npy-spy {theirs:#?}", ready.rank);
        assert!(theirs.len() >= 2, "{what}");
        for (tid, frames) in &theirs {
            let mine = ours.iter().find(|(t, _)| t == tid).map(|(_, f)| f);
            assert_eq!(mine, Some(frames), "thread {tid}: {what}");
        }
        // The core: the same Python frames, thread by thread.
        let python = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
        let (_, out, err) = mqd(&[
            "core",
            core.to_str().expect("UTF-8"),
            "--exe",
            python.to_str().expect("UTF-8"),
            "--json",
        ]);
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
        let cored = python_frames(&doc["ranks"][0]);
        for (tid, frames) in &theirs {
            let mine = cored.iter().find(|(t, _)| t == tid).map(|(_, f)| f);
            assert_eq!(
                mine,
                Some(frames),
                "thread {tid} in the core: {what}\n{err}"
            );
        }
        let _ = std::fs::remove_file(&core);
    }
}

/// A `comm.recv` ring: each rank waits in mpi4py's matched probe for its left neighbour.
const RING: &str = r#"import os
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
os.write(1, f"READY {rank} {os.getpid()}\n".encode())


def exchange():
    data = comm.recv(source=(rank - 1) % size, tag=7)
    comm.send(data, dest=(rank + 1) % size, tag=7)


exchange()
"#;

/// Rank 0 in a barrier, the others in a broadcast from it: collectives that cannot
/// complete each other.
const BCAST: &str = r#"import os
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
os.write(1, f"READY {rank} {os.getpid()}\n".encode())


def share(value):
    if rank == 0:
        comm.barrier()
    return comm.bcast(value, root=0)


share([rank] * 4)
"#;

/// `script` run by 3 ranks of the MPICH with debugger support, in mpi4py built for it.
fn start_ch3(dir: &Scratch, name: &str, script: &str) -> Job {
    let (bin, mpiexec) = support::mpi4py_ch3();
    run_script(dir, name, script, &mpiexec, &bin, 3)
}

/// Cores of every rank of `job`, taken while all of them are stopped.
fn cores(dir: &Scratch, job: &Job) -> Vec<String> {
    stopped(&job.pids(), || {
        job.pids()
            .iter()
            .map(|&pid| gcore(dir, pid).display().to_string())
            .collect()
    })
}

/// A core of process `pid` by gdb's `gcore`, in `dir`.
fn gcore(dir: &Scratch, pid: i32) -> PathBuf {
    let out = Command::new("gcore")
        .arg("-o")
        .arg(dir.file("core"))
        .arg(pid.to_string())
        .output()
        .expect("gcore (gdb)");
    assert!(out.status.success(), "gcore: {out:?}");
    dir.file(&format!("core.{pid}"))
}

#[test]
fn on_mpich_with_queues_python_hangs_get_verdicts_live_and_from_cores() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("python-ch3");

    // The ring: a deadlock, in Python's words.
    let job = start_ch3(&dir, "ring.py", RING);
    let (code, text, err) = mqd(&["job", &job.starter.to_string()]);
    let what = format!("{text}\n{err}");
    assert_eq!(code, Some(8), "{what}");
    for line in [
        "<module> (ring.py:14)\nexchange (ring.py:10)\nmpi4py.MPI.Comm.recv\nMPI_Mprobe\n",
        "each blocked in MPI_Mprobe from its left neighbour on \"MPI_COMM_WORLD\", tag 7",
        "Verdict: deadlock",
    ] {
        assert!(text.contains(line), "{line}: {what}");
    }
    // From cores taken at one moment: the same frames; a cycle one snapshot cannot
    // prove (a message may be on its way).
    let files = cores(&dir, &job);
    let mut args = vec!["core", "--one-snapshot"];
    args.extend(files.iter().map(String::as_str));
    let (code, text, err) = mqd(&args);
    let what = format!("{text}\n{err}");
    assert_eq!(code, Some(9), "{what}");
    assert!(
        text.contains("exchange (ring.py:10)\nmpi4py.MPI.Comm.recv\n"),
        "{what}"
    );
    assert!(
        text.contains("Possible deadlock: ranks 0 -> 2 -> 1 -> 0"),
        "{what}"
    );
    drop(job);

    // The mismatch: named, with where each rank called from; the hold proves it.
    let job = start_ch3(&dir, "bcast.py", BCAST);
    let (code, text, err) = mqd(&["job", &job.starter.to_string()]);
    let what = format!("{text}\n{err}");
    assert_eq!(code, Some(8), "{what}");
    for line in [
        "rank 0: share (bcast.py:11)\n    mpi4py.MPI.Comm.barrier\n    PMPI_Barrier",
        "ranks 1,2: share (bcast.py:12)\n    mpi4py.MPI.Comm.bcast\n    MPI_Bcast",
        "Collective mismatch: rank 0 in MPI_Barrier",
        "ranks 1,2 in MPI_Bcast",
        // The hold lasts longer on a loaded machine (it grows until the ranks are
        // seen still): its length is not the finding.
        "Verdict: deadlock (ranks 0-2 proven blocked: held for ",
    ] {
        assert!(text.contains(line), "{line}: {what}");
    }
}
