//! Work in progress is not a deadlock: the hold must not prove what only looks like a
//! hang to a snapshot (`fixtures/real-mpi/work.c`).
//!
//! - A multi-gigabyte transfer between two ranks while the others wait in a barrier:
//!   every rank inside MPI, none returning for seconds (the two transferring ranks are
//!   held to a share of a CPU by a cgroup the test makes, from before their first byte,
//!   so that the transfer lasts well past the hold). Judged by `mqd job` on Debian's
//!   MPICH (no queues: whom `MPI_Wait` waits for is unknown, so only the hold could
//!   decide) and on MPICH with debugger support, and watched by `mqd run`, which must not
//!   call it hung.
//! - A collective write to a file system that drains slowly (a FUSE file system the test
//!   mounts, whose every write waits), on Debian's MPICH and Open MPI: the aggregating
//!   rank waits in `write(2)` on the file, the others inside `MPI_File_write_at_all`.

mod support;

use mqd_fixtures::real_mpich::{self, Device, Job, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::Scratch;

const RANKS: i32 = 4;
const MQD_TIMEOUT: Duration = Duration::from_secs(180);
/// GiB the two ranks exchange.
const GIB: &str = "2";
/// The CPU the transferring ranks get under `mqd job`'s holds: 20% of one. Each 1 MiB
/// block crosses in many handshakes, each needing both ranks on a CPU: on one loaded
/// host, at 5% the two touched 4 MB in a 2 s hold (mqd rightly said "throttled", never
/// "memory"); at 20%, 13-40 MB. On an idle host the 2 GiB take 18 s at 20%.
const HOLD_QUOTA_US: u64 = 20_000;
/// The CPU they get under `mqd run`, whose job must outlast its 30 s `--timeout`: 5%, 66 s
/// for the 2 GiB on an idle host (26 s at 10%); on a loaded one they read as starved,
/// which is not stillness.
const RUN_QUOTA_US: u64 = 5_000;
const PERIOD_US: u64 = 100_000;

/// `work.c` built with `mpicc -g -O2` into `dir`.
fn build(mpicc: &Path, dir: &Path) -> PathBuf {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/real-mpi/work.c");
    let program = dir.join("work");
    let out = Command::new(mpicc)
        .args(["-g", "-O2", "-o"])
        .arg(&program)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mpicc.display()));
    assert!(
        out.status.success(),
        "{}: {}",
        mpicc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    program
}

/// Processes held to a share of one CPU by a cgroup of their own (v1's cpu controller,
/// else v2's cpu.max); let go and removed when dropped.
struct Throttle {
    dir: PathBuf,
    root: PathBuf,
    pids: Vec<i32>,
}

impl Throttle {
    fn new(pids: &[i32], quota_us: u64) -> Throttle {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("mqd-work-in-progress-{}-{n}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let (root, dir) = if v1.join("cpu.cfs_quota_us").exists() {
            (v1.to_path_buf(), v1.join(&name))
        } else {
            let root = PathBuf::from("/sys/fs/cgroup");
            assert!(
                root.join("cgroup.controllers").exists(),
                "neither cgroup v1's cpu controller nor cgroup v2 is mounted: the transfer cannot be slowed"
            );
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            (root.clone(), root.join(&name))
        };
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make the cgroup {}: {e}", dir.display()));
        let throttle = Throttle {
            dir,
            root,
            pids: pids.to_vec(),
        };
        let limited = if throttle.dir.join("cpu.cfs_quota_us").exists() {
            std::fs::write(
                throttle.dir.join("cpu.cfs_period_us"),
                PERIOD_US.to_string(),
            )
            .and_then(|()| {
                std::fs::write(throttle.dir.join("cpu.cfs_quota_us"), quota_us.to_string())
            })
        } else {
            std::fs::write(
                throttle.dir.join("cpu.max"),
                format!("{quota_us} {PERIOD_US}"),
            )
        };
        limited.unwrap_or_else(|e| panic!("cannot limit {}: {e}", throttle.dir.display()));
        for pid in pids {
            std::fs::write(throttle.dir.join("cgroup.procs"), pid.to_string())
                .unwrap_or_else(|e| panic!("cannot move {pid} into the cgroup: {e}"));
        }
        throttle
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for pid in &self.pids {
            let _ = std::fs::write(self.root.join("cgroup.procs"), pid.to_string());
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn mqd(args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command.args(args);
    real_mpich::run(command, MQD_TIMEOUT)
}

fn verdict(doc: &Value) -> &str {
    doc["diagnosis"]["verdict"].as_str().unwrap_or("none")
}

/// The kinds of work the hold saw, from the `busy` doubts.
fn busy(doc: &Value) -> Vec<String> {
    doc["diagnosis"]["doubts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["doubt"]["busy"]["busy"].as_object())
        .flat_map(|b| b.keys().cloned())
        .collect()
}

/// Every error and reason the document gives (a rank not dumped, a queue not read), for
/// a failure's message.
fn errors(doc: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![doc];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("error" | "why", Value::String(text)) => found.push(text.clone()),
                        _ => stack.push(value),
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// Waits for every rank's READY line; the pids in rank order. Three minutes: two jobs
/// whose ranks wrote 4 GiB before they were ready were not ready after 60 s beside
/// `stress` (every rank runnable, waiting for a CPU); `work stream` writes 64 MB, and a
/// loaded host may still be that slow.
fn ready(job: &mut Job) -> Vec<i32> {
    job.wait_ready_within(0, Duration::from_secs(180))
        .iter()
        .map(|r| r.pid)
        .collect()
}

/// Waits until each of `pids` is stopped (state `T`), for a minute at most.
fn wait_stopped(pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for &pid in pids {
        loop {
            let state = real_mpich::proc_state(pid);
            if state == Some('T') {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "rank {pid} did not stop itself within a minute of its READY (state {state:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether the job printed `DONE` yet.
fn done(job: &mut Job) -> bool {
    job.drain().iter().any(|l| l.starts_with("DONE "))
}

/// The transfer on `mpiexec`'s job of `program`, judged by `mqd job`; with `stock`,
/// only the hold could decide, and it must see the work.
fn transfer_is_no_deadlock(
    what: &str,
    mpiexec: &Path,
    launcher: &[&str],
    program: &Path,
    stock: bool,
) {
    let mut command = Command::new(mpiexec);
    command
        .args(launcher)
        .args(["-n", &RANKS.to_string()])
        .arg(program)
        .args(["stream", GIB]);
    let mut job = Job::start(command, format!("{what} transfer"), RANKS);
    job.program = "work".into();
    let pids = ready(&mut job);
    // Slowed before the first byte moves: the transferring ranks stop themselves once
    // READY (a loaded host can delay this test for seconds, enough for Debian's MPICH to
    // move the 2 GiB at full speed), and run again only once in their cgroup.
    wait_stopped(&pids[..2]);
    let _slow = Throttle::new(&pids[..2], HOLD_QUOTA_US);
    for &pid in &pids[..2] {
        real_mpich::signal(pid, libc::SIGCONT);
    }
    std::thread::sleep(Duration::from_millis(300));
    // On a machine busy with other work, the throttled ranks may not run enough in one
    // hold to move memory: the hold then says so ("throttled": they could not run
    // freely), and another hold is taken, up to three, each longer than the last (what
    // a throttled rank moves grows with the window).
    let mut reasons = Vec::new();
    for hold in ["2", "6", "12"] {
        let run = mqd(&["job", "--json", "--hold", hold, &job.starter.to_string()]);
        let over = done(&mut job);
        let doc: Value = serde_json::from_slice(&run.stdout)
            .unwrap_or_else(|e| panic!("{what}: no JSON ({e}): {}", run.stderr));
        eprintln!("{what}:\n{}", doc["verdict"].as_str().unwrap_or_default());
        assert_ne!(
            verdict(&doc),
            "deadlock",
            "{what}: a transfer in progress called a deadlock:\n{}",
            doc["verdict"].as_str().unwrap_or_default()
        );
        assert!(
            !over,
            "{what}: the transfer ended within the hold: slow it more"
        );
        let seen = busy(&doc);
        // Nothing but the hold could have decided: it saw the data move.
        if !stock || seen.iter().any(|b| b == "memory") {
            return;
        }
        assert!(
            seen.iter().any(|b| b == "throttled"),
            "{what}: the hold did not see the transfer's memory: {seen:?}\n{}",
            doc["verdict"].as_str().unwrap_or_default()
        );
        reasons.push((seen, errors(&doc)));
    }
    panic!(
        "{what}: three holds did not see the transfer's memory (each: what it saw, the errors it gave): {reasons:?}"
    );
}

#[test]
fn a_multi_gigabyte_transfer_is_no_deadlock_on_debians_mpich() {
    let scratch = Scratch::new("transfer-debian");
    let mpi = support::debian();
    let program = build(&mpi.mpicc, scratch.path());
    transfer_is_no_deadlock(
        "Debian's MPICH",
        &mpi.mpiexec,
        mpi.launcher_args,
        &program,
        true,
    );
}

#[test]
fn a_multi_gigabyte_transfer_is_no_deadlock_on_mpich_with_queues() {
    let scratch = Scratch::new("transfer-ch3");
    let m = real_mpich::mpich(Device::Ch3);
    let program = build(&m.prefix.join("bin/mpicc"), scratch.path());
    transfer_is_no_deadlock("MPICH ch3", &m.mpiexec(), &[], &program, false);
}

/// `mqd run` on the transfer: while data moves, no rank stands still, so the watchdog
/// only ends the job at its `--timeout`, and says no deadlock.
#[test]
fn mqd_run_does_not_call_a_transfer_hung() {
    let scratch = Scratch::new("transfer-run");
    let mpi = support::debian();
    let program = build(&mpi.mpicc, scratch.path());
    let report = scratch.path().join("report");
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command
        .args([
            "run",
            "--hang-after",
            "4s",
            "--interval",
            "1s",
            // Room for two ranks writing 2 GiB each before READY on a loaded host: the
            // watchdog's clock starts with the job.
            "--timeout",
            "30s",
        ])
        .arg("--report")
        .arg(&report)
        .arg("--")
        .arg(&mpi.mpiexec)
        .args(["-n", &RANKS.to_string()])
        .arg(&program)
        // Ready at once: the watchdog's clock starts with the job, and the transfer's
        // setup (writing 4 GiB) took over its --timeout on a host loaded twice over.
        .args(["stream", GIB])
        .stdout(Stdio::piped());
    let mut child = mqd_fixtures::default_signal_actions(&mut command)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mqd run");
    let lines = std::sync::mpsc::channel();
    real_mpich::forward_lines(child.stdout.take().expect("piped"), lines.0.clone());
    let stderr = real_mpich::read_all(child.stderr.take().expect("piped"));
    // The two transferring ranks, as soon as they say where they are.
    let mut pids = vec![0; 2];
    let deadline = Instant::now() + Duration::from_secs(90);
    while pids.contains(&0) && Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let said = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
            panic!("mqd run ended ({status}) before the transferring ranks said READY:\n{said}");
        }
        if let Ok((at, line)) = lines.1.recv_timeout(Duration::from_secs(1))
            && let Some(r) = real_mpich::parse_ready(at, &line)
            && r.rank < 2
        {
            pids[r.rank as usize] = r.pid;
        }
    }
    assert!(
        !pids.contains(&0),
        "the transferring ranks never said READY"
    );
    // They stop themselves once READY (see `transfer_is_no_deadlock`): slowed before the
    // first byte moves, or an idle host moves the 2 GiB before the test can slow them.
    wait_stopped(&pids);
    let slow = Throttle::new(&pids, RUN_QUOTA_US);
    for &pid in &pids {
        real_mpich::signal(pid, libc::SIGCONT);
    }
    let status = real_mpich::wait_child(&mut child, MQD_TIMEOUT).expect("mqd run ends");
    drop(slow);
    let said = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    assert!(
        said.contains("--timeout") && !said.contains("no rank made progress"),
        "mqd run called a transfer hung ({status}) after {:?}:\n{said}",
        started.elapsed()
    );
    assert_ne!(status.code(), Some(8), "{said}");
}

/// A FUSE file system over a directory of the scratch whose every write waits; unmounted
/// and ended when dropped.
struct SlowFs {
    mount: PathBuf,
    server: Child,
}

impl SlowFs {
    fn mount(scratch: &Path, delay: &str) -> SlowFs {
        let python = support::venv("fusepy", &["fusepy==3.0.1"]).join("bin/python");
        let backing = scratch.join("backing");
        let mount = scratch.join("slow");
        std::fs::create_dir_all(&backing).expect("backing directory");
        std::fs::create_dir_all(&mount).expect("mount point");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/slowfs.py");
        let mut command = Command::new(python);
        command.arg(script).arg(&backing).arg(&mount).arg(delay);
        let server = mqd_fixtures::default_signal_actions(&mut command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the slow file system (scripts/test installs libfuse2)");
        let fs = SlowFs { mount, server };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mounted(&fs.mount) {
            assert!(
                Instant::now() < deadline,
                "the slow file system did not mount on {}",
                fs.mount.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        fs
    }
}

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(1) == path.to_str()))
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// The collective write on `mpi` into a slow file system, judged by `mqd job`: never a
/// deadlock, and the file being written is named (a rank that cannot be stopped while
/// its `pwrite` lasts says so; one that can be is busy in the hold).
fn slow_write_is_no_deadlock(mpi: &mqd_fixtures::stock::StockMpi) {
    let scratch = Scratch::new(&format!("slow-write-{}", mpi.slug));
    let program = build(&mpi.mpicc, scratch.path());
    // Each write request waits 2 s: a rank's 1 MiB `pwrite` lasts 16 s.
    let fs = SlowFs::mount(scratch.path(), "2");
    let file = fs.mount.join("out");
    let mut command = Command::new(&mpi.mpiexec);
    command
        .args(mpi.launcher_args)
        .args(["-n", &RANKS.to_string()])
        .arg(&program)
        .arg("write")
        .arg(&file);
    let mut job = Job::start(command, format!("{} slow write", mpi.name), RANKS);
    job.program = "work".into();
    ready(&mut job);
    std::thread::sleep(Duration::from_millis(1500));
    let run = mqd(&["job", "--json", &job.starter.to_string()]);
    drop(job);
    drop(fs);
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap_or_default();
    let said = format!("{doc}\n{}", run.stderr);
    assert_ne!(
        verdict(&doc),
        "deadlock",
        "{}: a collective write in progress called a deadlock:\n{said}",
        mpi.name
    );
    let named = format!("write64 on {}", file.display());
    assert!(
        said.contains(&named) || said.contains(&format!("write on {}", file.display())),
        "{}: the write to {} is not named:\n{said}",
        mpi.name,
        file.display()
    );
}

#[test]
fn a_collective_write_to_a_slow_file_system_is_no_deadlock_on_debians_mpich() {
    slow_write_is_no_deadlock(&support::debian());
}

#[test]
fn a_collective_write_to_a_slow_file_system_is_no_deadlock_on_debians_open_mpi() {
    slow_write_is_no_deadlock(&support::debian_open_mpi());
}
