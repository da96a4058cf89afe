//! `mqd run`, the watchdog of CI pipelines and batch jobs, on real MPI jobs
//! (`real-mpi/watchdog.c`) under MPICH ch3 with debugger support and Debian's stock
//! MPICH: a job that ends keeps its status and output, a deadlock after healthy traffic
//! is reported within `--hang-after` and one interval and ended, a rank computing longer
//! than `--hang-after` and slow traffic are no hang, `--timeout` reports whatever state
//! the job is in, SIGTERM and SIGINT end the job and mqd, and the JUnit file is read by
//! a real JUnit consumer (`junitparser`). With the hang recorder the watch reads the
//! ranks' records while they run, stopping none before the report.

mod support;

use mqd_fixtures::real_mpich::{self, Device, Run};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One job at a time: a hung MPICH job spins on every core it has.
static ONE_JOB: Mutex<()> = Mutex::new(());

const HANG_AFTER: u64 = 5;
const INTERVAL: u64 = 1;
/// Longest a test's mqd may run.
const LIMIT: Duration = Duration::from_secs(120);

/// An MPI and the watchdog program built with it.
struct Mpi {
    name: &'static str,
    mpiexec: PathBuf,
    program: PathBuf,
}

fn build(name: &'static str, mpicc: &Path, mpiexec: PathBuf, slug: &str) -> Mpi {
    let dir = std::env::temp_dir().join(format!("mqd-run-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join(format!("watchdog-{slug}"));
    support::build_watchdog(mpicc, &program);
    Mpi {
        name,
        mpiexec,
        program,
    }
}

fn mpis() -> Vec<Mpi> {
    let ch3 = real_mpich::mpich(Device::Ch3);
    let debian = support::debian();
    vec![
        build(
            "MPICH ch3 (debugger support)",
            &ch3.prefix.join("bin/mpicc"),
            ch3.mpiexec(),
            "ch3",
        ),
        build(
            "Debian's mpich",
            &debian.mpicc,
            debian.mpiexec.clone(),
            "debian",
        ),
    ]
}

/// Kills, when dropped, every process still running `program`: a failed test leaves
/// none behind.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in running(&self.0) {
            real_mpich::signal(pid, libc::SIGKILL);
        }
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The processes of this host running `program`.
fn running(program: &Path) -> Vec<i32> {
    support::processes(|pid| {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == program)
    })
}

/// No process of `program` is left (waiting up to 5 s for them to go).
fn none_left(program: &Path) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if running(program).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn mqd_run(args: &[&str], mpi: &Mpi, job: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command
        .arg("run")
        .args(args)
        .arg("--")
        .arg(&mpi.mpiexec)
        .args(["-n", "4"])
        .arg(&mpi.program)
        .args(job);
    command
}

fn code(run: &Run) -> Option<i32> {
    run.status.and_then(|s| s.code())
}

#[test]
fn a_job_that_ends_keeps_its_status_and_output() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    for mpi in mpis() {
        let _reaper = Reaper(mpi.program.clone());
        for mode in ["finish", "fail"] {
            let mut direct = Command::new(&mpi.mpiexec);
            direct.args(["-n", "4"]).arg(&mpi.program).args([mode, "2"]);
            let direct = real_mpich::run(direct, LIMIT);
            let watched =
                real_mpich::run(mqd_run(&["--hang-after", "5s"], &mpi, &[mode, "2"]), LIMIT);
            let what = format!("{}, {mode}", mpi.name);
            assert!(code(&direct).is_some(), "{what}: {direct:?}");
            assert_eq!(code(&watched), code(&direct), "{what}: {}", watched.stderr);
            let lines = |out: &[u8]| {
                let mut l: Vec<String> = String::from_utf8_lossy(out)
                    .lines()
                    .map(str::to_owned)
                    .collect();
                l.sort();
                l
            };
            assert_eq!(lines(&watched.stdout), lines(&direct.stdout), "{what}");
            assert!(
                !watched.stderr.contains("no rank made progress"),
                "{what}: {}",
                watched.stderr
            );
        }
    }
}

/// A line of mqd's or the job's output with the time it came.
fn lines_of(stream: impl std::io::Read + Send + 'static, tx: mpsc::Sender<(Instant, String)>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
}

#[test]
fn a_deadlock_after_healthy_traffic_is_reported_in_time_and_ended() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let python = support::junitparser_python();
    for mpi in mpis() {
        let reaper = Reaper(mpi.program.clone());
        let report = reaper
            .0
            .with_file_name(format!("report-{}", std::process::id()));
        let hang_after = format!("{HANG_AFTER}s");
        let interval = format!("{INTERVAL}s");
        let mut command = mqd_run(
            &[
                "--hang-after",
                &hang_after,
                "--interval",
                &interval,
                "--report",
                &report.display().to_string(),
            ],
            &mpi,
            &["late_deadlock", "10"],
        );
        let mut child = mqd_fixtures::default_signal_actions(&mut command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (out_tx, out_rx) = mpsc::channel();
        let (err_tx, err_rx) = mpsc::channel();
        lines_of(child.stdout.take().unwrap(), out_tx);
        lines_of(child.stderr.take().unwrap(), err_tx);
        let status = real_mpich::wait_child(&mut child, LIMIT);
        let out: Vec<(Instant, String)> = out_rx.try_iter().collect();
        let err: Vec<(Instant, String)> = err_rx.try_iter().collect();
        let text: Vec<&str> = err.iter().map(|l| l.1.as_str()).collect();
        let what = format!("{}: {}", mpi.name, text.join("\n"));
        assert_eq!(status.and_then(|s| s.code()), Some(8), "{what}");
        let deadlocked = out.iter().find(|l| l.1 == "DEADLOCK").expect("DEADLOCK").0;
        let declared = err
            .iter()
            .find(|l| {
                l.1.contains("no rank made progress")
                    || l.1
                        .contains("every rank stayed in its MPI call for --hang-after")
            })
            .unwrap_or_else(|| panic!("no hang declared: {what}"))
            .0;
        // Said within --hang-after and one interval of the deadlock (and the sample that
        // sees it), never before --hang-after; the report follows its dump and proof. On
        // an overloaded host what is said then may be that a rank could hardly run, the
        // declaration waiting for a sample in which it ran (mqd run says so).
        let after = declared.saturating_duration_since(deadlocked);
        assert!(
            after >= Duration::from_secs(HANG_AFTER) - Duration::from_millis(500),
            "declared {after:?} after the deadlock: {what}"
        );
        assert!(
            after <= Duration::from_secs(HANG_AFTER + INTERVAL + 3),
            "declared {after:?} after the deadlock: {what}"
        );
        assert!(
            text.iter().any(|l| l.starts_with("Verdict: deadlock")),
            "{what}"
        );
        // The hang was seen in the ranks' records, without stopping them.
        assert!(
            text.iter()
                .any(|l| l.contains("samples read from the ranks' records, no rank stopped")),
            "{what}"
        );
        assert!(none_left(&mpi.program), "the job was not ended: {what}");
        // The report's files, the JSON's verdict, and the JUnit file as a JUnit
        // consumer reads it.
        for file in [
            "report.txt",
            "report.json",
            "stacks.txt",
            "junit.xml",
            "wait-for.svg",
        ] {
            assert!(report.join(file).is_file(), "{file} missing: {what}");
        }
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
        assert_eq!(json["diagnosis"]["verdict"], "deadlock", "{what}");
        let parsed = Command::new(&python)
            .arg("-c")
            .arg(JUNIT_CHECK)
            .arg(report.join("junit.xml"))
            .output()
            .unwrap();
        assert!(
            parsed.status.success(),
            "junitparser: {}{}",
            String::from_utf8_lossy(&parsed.stdout),
            String::from_utf8_lossy(&parsed.stderr)
        );
        let parsed = String::from_utf8_lossy(&parsed.stdout);
        assert!(
            parsed.starts_with("MPI job hung|failure|Verdict: deadlock"),
            "{parsed}"
        );
        let _ = std::fs::remove_dir_all(&report);
    }
}

/// Reads a JUnit file with junitparser: prints "case|result kind|message".
const JUNIT_CHECK: &str = r#"
import sys
from junitparser import JUnitXml, Failure
xml = JUnitXml.fromfile(sys.argv[1])
cases = [c for suite in xml for c in suite]
assert len(cases) == 1, cases
case = cases[0]
results = case.result
assert len(results) == 1 and isinstance(results[0], Failure), results
assert "Deadlock" in results[0].text, results[0].text
print(f"{case.name}|failure|{results[0].message}")
"#;

/// Watches, every 2 ms until stopped, which of the processes running `program` a
/// tracer is attached to (`TracerPid` of `/proc/PID/status`).
struct Tracers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<i32>>,
}

impl Tracers {
    fn watch(program: &Path) -> Tracers {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (program, stopped) = (program.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut traced = Vec::new();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                for pid in running(&program) {
                    let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
                    let tracer = status.ok().and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("TracerPid:"))
                            .and_then(|v| v.trim().parse::<i32>().ok())
                    });
                    if tracer.is_some_and(|t| t != 0) && !traced.contains(&pid) {
                        traced.push(pid);
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            traced
        });
        Tracers { stop, thread }
    }

    /// The processes seen traced.
    fn traced(self) -> Vec<i32> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Ranks that compute are no hang, and with the hang recorder (which `mqd run` preloads)
/// the watch reads their records while they run: no rank is ever attached. Without it
/// (`--no-record`) each sample stops the ranks, and the watcher sees them traced.
#[test]
fn computing_longer_than_hang_after_is_no_hang() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    for (i, mpi) in mpis().iter().enumerate() {
        let _reaper = Reaper(mpi.program.clone());
        let mut ways = vec![(true, vec!["--hang-after", "3s", "--interval", "1s"])];
        if i == 0 {
            ways.push((
                false,
                vec!["--hang-after", "3s", "--interval", "1s", "--no-record"],
            ));
        }
        for (recorded, args) in ways {
            let tracers = Tracers::watch(&mpi.program);
            let run = real_mpich::run(mqd_run(&args, mpi, &["compute", "9"]), LIMIT);
            let traced = tracers.traced();
            let what = format!("{} ({args:?}): {}", mpi.name, run.stderr);
            assert_eq!(code(&run), Some(0), "{what}");
            assert!(!run.stderr.contains("no rank made progress"), "{what}");
            assert!(run.elapsed >= Duration::from_secs(9), "{what}");
            if recorded {
                assert!(
                    run.stderr
                        .contains("samples read from the ranks' records, no rank stopped"),
                    "{what}"
                );
                assert!(
                    traced.is_empty(),
                    "ranks {traced:?} attached while watched: {what}"
                );
            } else {
                assert!(!traced.is_empty(), "no rank seen traced: {what}");
            }
        }
    }
}

#[test]
fn slow_traffic_is_no_hang_and_a_timeout_reports_it() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    for mpi in mpis() {
        let _reaper = Reaper(mpi.program.clone());
        let run = real_mpich::run(
            mqd_run(
                &["--hang-after", "3s", "--interval", "1s", "--timeout", "9s"],
                &mpi,
                &["traffic", "100"],
            ),
            LIMIT,
        );
        let what = format!("{}: {}", mpi.name, run.stderr);
        assert!(run.stderr.contains("--timeout 9 s passed"), "{what}");
        assert!(!run.stderr.contains("no rank made progress"), "{what}");
        // Stopped with no deadlock: 124, or 9 where the moment is undetermined; never
        // success, never deadlock.
        assert!(matches!(code(&run), Some(124 | 9)), "{what}");
        assert!(none_left(&mpi.program), "the job was not ended: {what}");
    }
}

#[test]
fn sigterm_and_sigint_end_the_job_and_mqd() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    for mpi in mpis() {
        let _reaper = Reaper(mpi.program.clone());
        for (signal, status) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
            let mut command = mqd_run(&["--hang-after", "5m"], &mpi, &["traffic", "100"]);
            let mut child = mqd_fixtures::default_signal_actions(&mut command)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let err = real_mpich::read_all(child.stderr.take().unwrap());
            // The job running: its ranks are there.
            let end = Instant::now() + Duration::from_secs(30);
            while running(&mpi.program).len() < 4 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_secs(2));
            real_mpich::signal(child.id() as i32, signal);
            let exit = real_mpich::wait_child(&mut child, Duration::from_secs(30));
            let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
            let what = format!("{}, signal {signal}: {err}", mpi.name);
            assert_eq!(exit.and_then(|s| s.code()), Some(status), "{what}");
            assert!(err.contains("the job was ended"), "{what}");
            assert!(none_left(&mpi.program), "the job was not ended: {what}");
        }
    }
}

/// A directory of a Python job's files; its ranks (any process naming it) killed and it
/// removed when dropped, also when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mqd-run-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for pid in support::running_with(&self.0.display().to_string()) {
            real_mpich::signal(pid, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `mqd run -- mpiexec -n 2 python -m pytest`: the job is whatever the launcher starts.
/// A test session that passes keeps pytest's output and status; one whose test hangs
/// in mpi4py's `ssend` is declared hung by the rule and ended, its Python ranks shown
/// in the MPI call mpi4py made.
#[test]
fn a_pytest_session_of_mpi4py_ranks_is_watched() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let bin = support::mpi4py_bin();
    let _cleanup = Scratch::new("pytest");
    let dir = _cleanup.0.clone();
    std::fs::write(
        dir.join("test_sum.py"),
        "from mpi4py import MPI\n\n\
         def test_sum():\n    assert MPI.COMM_WORLD.allreduce(1) == MPI.COMM_WORLD.Get_size()\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("test_ring.py"),
        "from mpi4py import MPI\n\n\
         def test_ring():\n    c = MPI.COMM_WORLD\n    r, n = c.Get_rank(), c.Get_size()\n    \
         c.ssend(r, dest=(r + 1) % n)\n    c.recv(source=(r - 1) % n)\n",
    )
    .unwrap();
    let pytest = |file: &str, report: &Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
        mqd_fixtures::default_signal_actions(&mut command)
            .args(["run", "--hang-after", "5s", "--interval", "1s", "--report"])
            .arg(report)
            .arg("--")
            .arg(bin.join("mpiexec"))
            .args(["-n", "2"])
            .arg(bin.join("python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(dir.join(file));
        real_mpich::run(command, LIMIT)
    };

    let run = pytest("test_sum.py", &dir.join("sum-report"));
    let out = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), Some(0), "{out}\n{}", run.stderr);
    assert_eq!(
        out.matches("1 passed").count(),
        2,
        "each rank's pytest: {out}"
    );

    let report = dir.join("ring-report");
    let run = pytest("test_ring.py", &report);
    // Undetermined: a stock MPICH shows no queues, and mpi4py's arguments are Python
    // objects; never "no deadlock".
    assert!(matches!(code(&run), Some(8 | 9)), "{}", run.stderr);
    assert!(
        run.stderr.contains("no rank made progress for"),
        "{}",
        run.stderr
    );
    let text = std::fs::read_to_string(report.join("report.txt")).expect("report.txt");
    // The ranks ran with the hang recorder (mqd run preloads it): the call mpi4py made,
    // as the recorder saw it.
    assert!(
        text.contains("ranks 0,1: MPI_Ssend_c, from mpi4py.MPI.Comm.ssend in test_ring"),
        "{text}"
    );
    assert!(
        text.contains("ranks 0,1: the hang recorder's records read"),
        "{text}"
    );
    assert!(
        text.contains("mpi4py"),
        "the Cython frame of mpi4py's ssend: {text}"
    );
    let junit = std::fs::read_to_string(report.join("junit.xml")).expect("junit.xml");
    assert!(junit.contains("MPI job hung"), "{junit}");
    let end = Instant::now() + Duration::from_secs(5);
    while !support::running_with(&dir.display().to_string()).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        support::running_with(&dir.display().to_string()).is_empty(),
        "the ranks were not ended"
    );
}

/// mpi4py ranks under `mqd run` trade messages round a ring, then each waits in
/// `comm.recv` (`MPI_Mprobe`) for what nobody sends: the recorder's counts (mpi4py loads
/// its MPI out of the global scope; the recorder asks the MPI there) prove the ring
/// deadlocked from the one snapshot, no hold needed.
#[test]
fn an_mpi4py_ring_is_proven_from_one_snapshot_by_the_recorders_counts() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let bin = support::mpi4py_bin();
    let _cleanup = Scratch::new("counted");
    let dir = _cleanup.0.clone();
    let ring = dir.join("ring.py");
    std::fs::write(
        &ring,
        "from mpi4py import MPI\n\
         c = MPI.COMM_WORLD\n\
         r, n = c.Get_rank(), c.Get_size()\n\
         for _ in range(3):\n    c.send(r, dest=(r + 1) % n, tag=5)\n    c.recv(source=(r - 1) % n, tag=5)\n\
         c.recv(source=(r - 1) % n, tag=7)\n",
    )
    .unwrap();
    let report = dir.join("report");
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    mqd_fixtures::default_signal_actions(&mut command)
        .args(["run", "--hang-after", "3s", "--interval", "1s", "--report"])
        .arg(&report)
        .arg("--")
        .arg(bin.join("mpiexec"))
        .args(["-n", "3"])
        .arg(bin.join("python"))
        .arg(&ring);
    let run = real_mpich::run(command, LIMIT);
    let text = std::fs::read_to_string(report.join("report.txt")).expect("report.txt");
    assert_eq!(code(&run), Some(8), "{text}\n{}", run.stderr);
    assert!(
        text.contains("each blocked in MPI_Mprobe from its left neighbour")
            && text.contains("nothing ranks 0-2 sent them is still on its way"),
        "{text}"
    );
    assert!(
        !text.contains("Proven by holding"),
        "no hold needed: {text}"
    );
}

/// A hang reported by classes (`--by-classes`, as a job past 256 ranks is): the report's
/// text, JSON and JUnit by classes with what the hold proved (no snapshot proves a ring
/// of `MPI_Recv` without the recorder), the verdict and exit code as rank by rank, and
/// no graph (one of every rank is what classes avoid).
#[test]
fn a_hang_is_reported_by_classes_with_what_its_hold_proved() {
    let _one = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let ch3 = real_mpich::mpich(Device::Ch3);
    let mpi = build(
        "MPICH ch3 (debugger support)",
        &ch3.prefix.join("bin/mpicc"),
        ch3.mpiexec(),
        "ch3-by-classes",
    );
    let _reaper = Reaper(mpi.program.clone());
    let _cleanup = Scratch::new("by-classes");
    let report = _cleanup.0.join("report");
    let flags = ["--hang-after", "3s", "--interval", "1s", "--no-record"];
    let mut command = mqd_run(
        &[
            &flags[..],
            &["--by-classes", "--report", report.to_str().unwrap()],
        ]
        .concat(),
        &mpi,
        &["late_recv_ring", "2"],
    );
    mqd_fixtures::default_signal_actions(&mut command);
    let run = real_mpich::run(command, LIMIT);
    let text = std::fs::read_to_string(report.join("report.txt")).expect("report.txt");
    assert_eq!(code(&run), Some(8), "{text}\n{}", run.stderr);
    assert!(
        text.contains(" 4 ranks, by classes (--per-rank for each rank).\n"),
        "{text}"
    );
    assert!(
        text.ends_with("Verdict: deadlock (ranks 0-3 proven blocked).\n"),
        "{text}"
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "mqd/3-classes");
    let d = &doc["diagnosis"];
    assert_eq!(d["verdict"], "deadlock", "{d:#}");
    assert_eq!(d["deadlocked"], "0-3", "{d:#}");
    assert_eq!(d["hold"]["proven"], "0-3", "{d:#}");
    let junit = std::fs::read_to_string(report.join("junit.xml")).expect("junit.xml");
    assert!(
        junit.contains("failure message=\"Verdict: deadlock"),
        "{junit}"
    );
    assert!(!report.join("wait-for.svg").exists(), "no graph by classes");
    assert!(none_left(&mpi.program), "{}: ranks left", mpi.name);
}
