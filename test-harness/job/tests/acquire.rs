//! MPIR and MPI2DD acquisition of real fixture jobs: launch under the debugger, attach to
//! a running starter, abort strings, releasing the ranks, and the errors.

use mqd_fixtures::{self as fixtures, JobOptions};
use mqd_job::acquire::{
    AcquireError, Interface, Job, LaunchOptions, attach_job, launch, launch_with, read_dll_name,
    release_ranks,
};
use mqd_process::live::{AttachError, LiveTarget};
use mqd_synthetic::Layout;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

const SCENARIO: &str = "compute";

/// A launched job: the starter and its ranks are killed (and the starter reaped) on drop.
struct Launched {
    job: Job,
    stdout: Receiver<String>,
    /// Kept so the starter's stderr stays drained (dropping it would close the pipe, and
    /// the ranks writing there would die of SIGPIPE).
    _stderr: Receiver<String>,
}

impl Drop for Launched {
    fn drop(&mut self) {
        for rank in &self.job.ranks {
            // The ranks are the starter's children: their pids are not reused before it is
            // reaped.
            unsafe { libc::kill(rank.pid, libc::SIGKILL) };
        }
        if let Some(starter) = self.job.starter.as_mut() {
            let _ = starter.kill();
            let _ = starter.wait();
        }
    }
}

impl Launched {
    /// Waits for a `READY <pid>` line from every rank.
    fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        let lines = &self.stdout;
        let mut missing: Vec<i32> = self.job.ranks.iter().map(|r| r.pid).collect();
        let deadline = Instant::now() + timeout;
        while !missing.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(pid) = line
                        .strip_prefix("READY ")
                        .and_then(|p| p.trim().parse::<i32>().ok())
                    {
                        missing.retain(|&p| p != pid);
                    }
                }
                Err(_) => return Err(format!("no READY from {missing:?}")),
            }
        }
        Ok(())
    }
}

fn lines_of<R: std::io::Read + Send + 'static>(stream: R) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn starter_command(binary: &str, args: &[&str]) -> Command {
    let mut command = Command::new(fixtures::fixture(binary));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn launch_fixture(binary: &str, args: &[&str], options: &LaunchOptions) -> Launched {
    let mut job = launch_with(starter_command(binary, args), options)
        .unwrap_or_else(|e| panic!("launch {binary} {args:?}: {e}"));
    let starter = job.starter.as_mut().expect("launch returns the starter");
    let stdout = lines_of(starter.stdout.take().unwrap());
    let stderr = lines_of(starter.stderr.take().unwrap());
    Launched {
        job,
        stdout,
        _stderr: stderr,
    }
}

fn parent_of(pid: i32) -> i32 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    text[text.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

fn state(pid: i32) -> char {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    text[text.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap();
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn check_ranks(job: &Job, n: usize, rank_binary: &str) {
    assert_eq!(job.ranks.len(), n, "{job:?}");
    let exe = fixtures::fixture(rank_binary);
    for (i, rank) in job.ranks.iter().enumerate() {
        assert_eq!(rank.rank, i as i32);
        assert_eq!(rank.host, hostname());
        assert_eq!(
            std::path::Path::new(&rank.executable)
                .canonicalize()
                .unwrap(),
            exe.canonicalize().unwrap()
        );
        assert_eq!(
            parent_of(rank.pid),
            job.starter_pid,
            "rank {i} is the starter's child"
        );
    }
    let mut pids: Vec<i32> = job.ranks.iter().map(|r| r.pid).collect();
    pids.dedup();
    assert_eq!(pids.len(), n);
}

#[test]
fn launch_acquires_an_mpir_job_and_releases_its_ranks() {
    let launched = launch_fixture(
        fixtures::STARTER,
        &["-n", "4", "--", SCENARIO],
        &LaunchOptions::default(),
    );
    let job = &launched.job;
    assert_eq!(job.via, Interface::Mpir);
    assert_eq!(job.abort_message, None);
    assert_eq!(
        job.dll_name, None,
        "the MPIR starter names no DLL; ranks do"
    );
    check_ranks(job, 4, fixtures::DEBUGQ5);
    // The starter runs on, untraced, and held the ranks for the debugger.
    assert_ne!(state(job.starter_pid), 't');
    assert!(
        launched.wait_ready(Duration::from_millis(300)).is_err(),
        "the ranks wait at the gate"
    );
    release_ranks(job).unwrap();
    launched.wait_ready(Duration::from_secs(30)).unwrap();
    // Every rank names the bundled library.
    for rank in &job.ranks {
        let target = LiveTarget::attach(rank.pid, Some(rank.rank)).unwrap();
        assert_eq!(read_dll_name(&target).as_deref(), Some(fixtures::DLL_PATH));
        assert!(
            mqd_target::Target::name(&target)
                .starts_with(&format!("rank {} (pid {}, ", rank.rank, rank.pid))
        );
        target.detach().unwrap();
    }
}

#[test]
fn launch_acquires_an_mpi2dd_job() {
    let launched = launch_fixture(
        fixtures::STARTER_MPI2DD,
        &["-n", "4", "--layout", "ch3", "--", SCENARIO],
        &LaunchOptions::default(),
    );
    let job = &launched.job;
    assert_eq!(job.via, Interface::Mpi2dd);
    assert_eq!(job.dll_name.as_deref(), Some(fixtures::DLL_PATH));
    assert_eq!(job.abort_message, None);
    check_ranks(job, 4, fixtures::CH3);
    // MPI2DD ranks are not gated.
    launched.wait_ready(Duration::from_secs(30)).unwrap();
    release_ranks(job).unwrap();
}

#[test]
fn launch_follows_a_starter_that_executes_another() {
    // The MPIR starter given --mpi2dd re-executes the MPI2DD one.
    let launched = launch_fixture(
        fixtures::STARTER,
        &["--mpi2dd", "-n", "2", "--", SCENARIO],
        &LaunchOptions::default(),
    );
    assert_eq!(launched.job.via, Interface::Mpi2dd);
    check_ranks(&launched.job, 2, fixtures::DEBUGQ5);
    launched.wait_ready(Duration::from_secs(30)).unwrap();
}

#[test]
fn launch_reports_the_abort_string() {
    for binary in [fixtures::STARTER, fixtures::STARTER_MPI2DD] {
        let launched = launch_fixture(
            binary,
            &["-n", "2", "--abort", "--", SCENARIO],
            &LaunchOptions {
                abort_grace: Duration::from_secs(10),
                ..LaunchOptions::default()
            },
        );
        let job = &launched.job;
        assert_eq!(
            job.abort_message.as_deref(),
            Some(fixtures::ABORT_MESSAGE),
            "{binary}"
        );
        check_ranks(job, 2, fixtures::DEBUGQ5);
        release_ranks(job).unwrap();
        launched.wait_ready(Duration::from_secs(30)).unwrap();
    }
    // Without watching after the spawn, the abort is not seen.
    let launched = launch_fixture(
        fixtures::STARTER,
        &["-n", "2", "--abort", "--", SCENARIO],
        &LaunchOptions {
            abort_grace: Duration::ZERO,
            ..LaunchOptions::default()
        },
    );
    assert_eq!(launched.job.abort_message, None);
    release_ranks(&launched.job).unwrap();
}

#[test]
fn attach_job_reads_a_running_starter() {
    for mpi2dd in [false, true] {
        let options = JobOptions {
            mpi2dd,
            ..JobOptions::new(4, Layout::Ch4Am, SCENARIO)
        };
        let running = fixtures::spawn_job(&options).unwrap();
        let job = attach_job(running.starter_pid()).unwrap();
        assert_eq!(job.starter_pid, running.starter_pid());
        assert_eq!(
            job.via,
            if mpi2dd {
                Interface::Mpi2dd
            } else {
                Interface::Mpir
            }
        );
        let pids: Vec<i32> = job.ranks.iter().map(|r| r.pid).collect();
        assert_eq!(pids, running.rank_pids());
        check_ranks(&job, 4, fixtures::CH4);
        assert!(job.starter.is_none());
        assert_eq!(job.abort_message, None);
        // Left running, untraced.
        thread::sleep(Duration::from_millis(20));
        assert!(matches!(state(running.starter_pid()), 'S' | 'R'));
    }
    // A starter that aborted says so.
    let options = JobOptions {
        abort: true,
        ..JobOptions::new(2, Layout::Debugq5, SCENARIO)
    };
    let running = fixtures::spawn_job(&options).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let job = loop {
        let job = attach_job(running.starter_pid()).unwrap();
        if job.abort_message.is_some() || Instant::now() > deadline {
            break job;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(job.abort_message.as_deref(), Some(fixtures::ABORT_MESSAGE));
    assert_eq!(job.ranks.len(), 2);
}

#[test]
fn errors_name_their_cause_and_leave_processes_alone() {
    // Not an MPI program: nothing to acquire, and the launched process is killed.
    let err = launch(&[fixtures::fixture(fixtures::PLAIN).into()]).unwrap_err();
    assert!(matches!(err, AcquireError::NotMpi { .. }), "{err:?}");
    assert!(err.to_string().contains("not an MPI starter"), "{err}");

    // A program that does not exist.
    let err = launch(&[OsString::from("/nonexistent/mpiexec")]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/mpiexec"), "{err}");
    assert_eq!(launch(&[]).unwrap_err(), AcquireError::EmptyCommand);

    // A starter that exits before spawning (usage error: no scenario).
    let err = launch_with(
        starter_command(fixtures::STARTER, &["-n", "2"]),
        &LaunchOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the starter (pid {}) exited with status 2 before spawning the job",
            match &err {
                AcquireError::Exited { pid, .. } => *pid,
                other => panic!("{other:?}"),
            }
        )
    );

    // attach_job on a process that is not a starter leaves it running.
    let mut plain =
        fixtures::spawn_command(Command::new(fixtures::fixture(fixtures::PLAIN))).unwrap();
    plain.wait_ready(Duration::from_secs(30)).unwrap();
    let err = attach_job(plain.pid()).unwrap_err();
    assert!(matches!(err, AcquireError::NotMpi { .. }), "{err:?}");
    thread::sleep(Duration::from_millis(20));
    assert!(matches!(state(plain.pid()), 'S' | 'R'));
    assert!(plain.is_running());

    // No such process.
    assert_eq!(
        attach_job(999_999_999).unwrap_err(),
        AcquireError::Attach(AttachError::NoSuchProcess { pid: 999_999_999 })
    );
}

#[test]
fn a_starter_without_dwarf_is_read_with_the_natural_layout() {
    // The starter runs the ranks from its own directory: give the stripped copy a rank.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("acquire-no-dwarf");
    std::fs::create_dir_all(&dir).unwrap();
    let starter = dir.join(fixtures::STARTER);
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&starter)
        .arg(fixtures::fixture(fixtures::STARTER))
        .status()
        .expect("strip (binutils) is needed");
    assert!(status.success());
    let rank = dir.join(fixtures::DEBUGQ5);
    let _ = std::fs::remove_file(&rank);
    std::os::unix::fs::symlink(fixtures::fixture(fixtures::DEBUGQ5), &rank).unwrap();

    let mut command = Command::new(&starter);
    command
        .args(["-n", "3", "--", SCENARIO])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut job = launch_with(command, &LaunchOptions::default()).unwrap();
    let child = job.starter.as_mut().unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let launched = Launched {
        job,
        stdout,
        _stderr: stderr,
    };
    assert_eq!(launched.job.via, Interface::Mpir);
    check_ranks(&launched.job, 3, fixtures::DEBUGQ5);
    release_ranks(&launched.job).unwrap();
    launched.wait_ready(Duration::from_secs(30)).unwrap();
}
