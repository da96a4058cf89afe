//! Post mortem: `dump::dump_cores` on cores of live fixture ranks, made by `gcore` (gdb)
//! and by the kernel (RLIMIT_CORE unlimited, SIGQUIT), gives the JSON that the live
//! `dump::dump_processes` gave for the same processes just before.
//!
//! What differs by design, and is normalised before the comparison:
//! - `acquired_by`: the caller's context ("attach" for the live dump, "core" here);
//! - each rank's `message` (the library's has-queues message) names the target: "pid P
//!   (EXE)" live, "core PATH (pid P, EXE)" for a core;
//! - with `--exe` for an executable that moved, `executable` is the new path.
//!
//! Everything else must be equal: ranks, pids (the core records the process's pid),
//! executables, communicators with their ids (addresses in the process), groups, and
//! every field of every operation (buffer and request addresses included).
//!
//! Also: cut, corrupt and foreign files give one clear error and no panic; a core without
//! `NT_FILE` asks for `--exe` and, given it, finds the libraries through the dynamic
//! linker's list; an executable that moved is reported missing and found with `--exe`.

mod damaged;
#[path = "../support/mod.rs"]
mod support;

#[allow(unused_imports)]
use damaged::*;

use mqd_fixtures as fixtures;
use mqd_job::dump::{self, JobContext, ProcessRef};
use mqd_model::{Acquisition, JobDump};
use mqd_process::core::{CoreFile, CoreTarget};
use mqd_synthetic::Layout;
use mqd_target::{DebugInfo, Memory};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------ helpers

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqd-cores-{}-{}-{what}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One fixture rank started to be dumped, cored by gdb and then by the kernel: its own
/// working directory (where a relative `core_pattern` puts its core) and RLIMIT_CORE
/// unlimited. Killed and reaped on drop.
struct CoreRank {
    child: Child,
    /// Its working directory, empty but for the kernel's core.
    cwd: PathBuf,
    /// Its exit status, once reaped.
    status: Option<ExitStatus>,
}

impl CoreRank {
    fn spawn(program: &Path, scenario: &str, rank: i32, size: i32, cwd: PathBuf) -> CoreRank {
        std::fs::create_dir_all(&cwd).unwrap();
        let mut cmd = Command::new(program);
        cmd.args([
            "--scenario",
            scenario,
            "--rank",
            &rank.to_string(),
            "--size",
            &size.to_string(),
        ])
        .env_remove("MQD_WAIT_FOR_GATE")
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
        // SIGQUIT must dump a core, even when this runner was started with it ignored.
        mqd_fixtures::default_signal_actions(&mut cmd);
        // SAFETY: only async-signal-safe calls (setrlimit, getrlimit) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let unlimited = libc::rlimit {
                    rlim_cur: libc::RLIM_INFINITY,
                    rlim_max: libc::RLIM_INFINITY,
                };
                if libc::setrlimit(libc::RLIMIT_CORE, &unlimited) != 0 {
                    // Not allowed to raise the hard limit: as much as it allows.
                    let mut limit = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::getrlimit(libc::RLIMIT_CORE, &mut limit);
                    limit.rlim_cur = limit.rlim_max;
                    libc::setrlimit(libc::RLIMIT_CORE, &limit);
                }
                Ok(())
            });
        }
        let what = format!(
            "{} --scenario {scenario} --rank {rank} --size {size}",
            program.display()
        );
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.trim() == format!("READY {pid}") => break,
                Ok(_) => {}
                Err(e) => panic!("{what}: no READY line ({e})"),
            }
        }
        // After READY the rank still runs into sigsuspend (resolving its PLT entry, a
        // write to the GOT): wait until it sleeps there, so that its memory is settled.
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc_state(pid) != Some('S') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            proc_state(pid),
            Some('S'),
            "{what}: pid {pid} does not sleep after READY"
        );
        // The line reader keeps draining stdout after READY.
        CoreRank {
            child,
            cwd,
            status: None,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGQUIT, then waits for the process to end (after the kernel wrote its core).
    fn quit(&mut self) -> ExitStatus {
        // SAFETY: kill(2) on our own child, not yet reaped.
        let rc = unsafe { libc::kill(self.pid(), libc::SIGQUIT) };
        assert_eq!(rc, 0, "kill -QUIT {}", self.pid());
        // Writing a core takes a moment; never wait without a deadline.
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the rank") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "pid {} still runs 60 s after SIGQUIT",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        self.status = Some(status);
        status
    }
}

impl Drop for CoreRank {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The state letter of `/proc/PID/stat`.
fn proc_state(pid: i32) -> Option<char> {
    stat_state(Path::new(&format!("/proc/{pid}/stat")))
}

/// The state letter of a `stat` file of `/proc` (a process's or a thread's).
fn stat_state(stat: &Path) -> Option<char> {
    let stat = std::fs::read_to_string(stat).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Serialises the tests (of any process) that rely on `/proc/sys/kernel/core_pattern` (which one of them
/// may change, as root, when the cores would not land in the rank's directory).
fn core_pattern_lock() -> mqd_fixtures::Exclusive {
    mqd_fixtures::exclusive("core-pattern")
}

const CORE_PATTERN: &str = "/proc/sys/kernel/core_pattern";

/// Makes the kernel write cores into the dumping process's working directory: a
/// relative `core_pattern` already does; a pipe (`|systemd-coredump ...`) or an
/// absolute directory is replaced by `core` for the guard's life (root only) and
/// restored after.
struct CorePatternGuard {
    original: Option<String>,
    _lock: mqd_fixtures::Exclusive,
}

impl CorePatternGuard {
    fn acquire() -> CorePatternGuard {
        let lock = core_pattern_lock();
        let pattern = std::fs::read_to_string(CORE_PATTERN)
            .unwrap_or_else(|e| panic!("cannot read {CORE_PATTERN}: {e}"));
        let pattern = pattern.trim_end_matches('\n').to_owned();
        if !pattern.is_empty() && !pattern.starts_with('|') && !pattern.starts_with('/') {
            return CorePatternGuard {
                original: None,
                _lock: lock,
            };
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "the kernel writes cores to {pattern:?} ({CORE_PATTERN}), not to the process's directory, \
             and only root may change that: run as root or set a relative core_pattern (e.g. `core`)"
        );
        std::fs::write(CORE_PATTERN, "core\n").unwrap_or_else(|e| {
            panic!("cannot set {CORE_PATTERN} to `core` (it is {pattern:?}): {e}")
        });
        CorePatternGuard {
            original: Some(pattern),
            _lock: lock,
        }
    }
}

impl Drop for CorePatternGuard {
    fn drop(&mut self) {
        if let Some(original) = &self.original {
            let _ = std::fs::write(CORE_PATTERN, format!("{original}\n"));
        }
    }
}

/// Kills every rank with SIGQUIT and returns the cores the kernel wrote, in rank order.
/// Fails, saying why, when the kernel wrote none.
fn kernel_cores(ranks: &mut [CoreRank], what: &str) -> Vec<PathBuf> {
    let _pattern = CorePatternGuard::acquire();
    let pids: Vec<i32> = ranks.iter().map(CoreRank::pid).collect();
    wait_asleep(&pids, what);
    let mut cores = Vec::new();
    for rank in ranks.iter_mut() {
        let pid = rank.pid();
        let status = rank.quit();
        let files: Vec<PathBuf> = std::fs::read_dir(&rank.cwd)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        if files.len() != 1 {
            let limit = std::fs::read_to_string(format!("/proc/{}/limits", std::process::id()))
                .unwrap_or_default();
            let limit = limit
                .lines()
                .find(|l| l.starts_with("Max core file size"))
                .unwrap_or("?")
                .to_owned();
            panic!(
                "{what}: the kernel wrote no core for pid {pid} in {} (files there: {files:?}): exit {status:?}, \
                 core dumped: {}, core_pattern {:?}, our {limit:?}, suid_dumpable {:?}. \
                 Containers may forbid core dumps; the test needs them",
                rank.cwd.display(),
                status.core_dumped(),
                std::fs::read_to_string(CORE_PATTERN)
                    .unwrap_or_default()
                    .trim(),
                std::fs::read_to_string("/proc/sys/fs/suid_dumpable")
                    .unwrap_or_default()
                    .trim(),
            );
        }
        assert_eq!(
            status.signal(),
            Some(libc::SIGQUIT),
            "{what}: pid {pid} ended by {status:?}"
        );
        cores.push(files.into_iter().next().unwrap());
    }
    cores
}

/// Until every thread of `pids` sleeps (state S: in its `sigsuspend`), a minute at most.
/// Captures compare only then. The previous capture's detach or SIGCONT woke the threads,
/// and each restarts its call: on a loaded host one may not have run yet, and the next
/// capture would stop it back in user mode at the `syscall` instruction, its PC 2 bytes
/// before the one a thread inside the call has.
fn wait_asleep(pids: &[i32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for &pid in pids {
        loop {
            let states: Vec<char> = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|tasks| {
                    tasks
                        .filter_map(|t| stat_state(&t.ok()?.path().join("stat")))
                        .collect()
                })
                .unwrap_or_default();
            if !states.is_empty() && states.iter().all(|&s| s == 'S') {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: pid {pid}: its threads did not all sleep within a minute (states {states:?})"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn live_dump(pids: &[i32], what: &str) -> Value {
    wait_asleep(pids, what);
    let processes: Vec<ProcessRef> = pids.iter().map(|&p| ProcessRef::pid(p)).collect();
    let context = JobContext::new(Acquisition::Attach);
    let job = dump::dump_processes(&processes, None, &context, &dump::Quiet)
        .unwrap_or_else(|f| panic!("{what}: live dump: {f}"));
    to_json(&job)
}

/// gdb's cores of `pids`, once every thread sleeps.
fn gcores(pids: &[i32], dir: &Path, what: &str) -> Vec<PathBuf> {
    wait_asleep(pids, what);
    support::gcores(pids, dir, what)
}

fn core_dump(cores: &[PathBuf], exe: Option<&Path>, what: &str) -> Value {
    let context = JobContext::new(Acquisition::Core);
    let job = dump::dump_cores(
        dump::open_cores(cores, exe, context.type_cache.as_deref()),
        None,
        &context,
    )
    .unwrap_or_else(|f| panic!("{what}: dump_cores: {f}"));
    to_json(&job)
}

/// The dump as its JSON document has it (without the analysis `mqd` adds).
fn to_json(job: &JobDump) -> Value {
    let mut doc = serde_json::to_value(job).expect("a dump serialises");
    doc["schema"] = Value::from(mqd_model::SCHEMA);
    doc
}

/// The first place where two JSON values differ, as a path.
fn difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (va, vb) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                if let Some(d) = difference(va, vb, &format!("{path}.{key}")) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!(
                    "{path}: {} elements live, {} from the cores",
                    x.len(),
                    y.len()
                ));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (va, vb))| difference(va, vb, &format!("{path}[{i}]")))
        }
        _ => (a != b).then(|| format!("{path}: {a} live, {b} from the cores")),
    }
}

/// Removes what differs by design (see the top of this file) and checks the rest.
fn assert_same(
    live: &Value,
    cores: &Value,
    core_paths: &[PathBuf],
    exe: Option<&Path>,
    what: &str,
) {
    let mut live = live.clone();
    let mut cores = cores.clone();
    assert_eq!(live["acquired_by"], "attach", "{what}");
    assert_eq!(cores["acquired_by"], "core", "{what}");
    live["acquired_by"] = Value::Null;
    cores["acquired_by"] = Value::Null;
    // Live processes are stopped together; cores of several are of separate moments
    // unless said otherwise.
    assert_eq!(live["snapshot"], "one", "{what}");
    let n = cores["ranks"].as_array().map_or(0, Vec::len);
    if n > 1 {
        assert!(cores["snapshot"]["separate"]["why"].is_string(), "{what}");
    }
    live["snapshot"] = Value::Null;
    cores["snapshot"] = Value::Null;
    // `mqd` adds the analysis of the dump (aggregated view, diagnosis, verdict): it is
    // derived from the ranks, which are compared below, and must match the live one's.
    for doc in [&mut live, &mut cores] {
        if let Value::Object(members) = doc {
            for derived in ["aggregated", "diagnosis", "verdict", "stacks"] {
                members.remove(derived);
            }
        }
    }
    let n = live["ranks"].as_array().map_or(0, Vec::len);
    assert_eq!(
        cores["ranks"].as_array().map_or(0, Vec::len),
        n,
        "{what}: number of ranks"
    );
    for r in 0..n {
        let pid = live["ranks"][r]["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("{what}: rank {r} has no pid"));
        assert_eq!(
            cores["ranks"][r]["pid"], live["ranks"][r]["pid"],
            "{what}: rank {r}: the core records the pid"
        );
        assert_eq!(
            cores["ranks"][r]["rank"], live["ranks"][r]["rank"],
            "{what}: rank {r}"
        );
        let live_exe = live["ranks"][r]["executable"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(exe) = exe {
            assert_eq!(
                cores["ranks"][r]["executable"],
                exe.display().to_string(),
                "{what}: rank {r}: --exe"
            );
            cores["ranks"][r]["executable"] = Value::from(live_exe.clone());
        }
        // Only a core knows the signal that killed its process.
        cores["ranks"][r]["signal"] = Value::Null;
        // Where the files are looked up differs when they moved or the core does not
        // name them (`--exe`): the frames' objects, not their functions and lines.
        if exe.is_some() {
            for doc in [&mut live, &mut cores] {
                if let Some(threads) = doc["ranks"][r]["threads"].as_array_mut() {
                    for frame in threads
                        .iter_mut()
                        .filter_map(|t| t["frames"].as_array_mut())
                        .flatten()
                    {
                        frame["object"] = Value::Null;
                    }
                }
            }
        }
        let core_exe = exe.map_or(live_exe.clone(), |e| e.display().to_string());
        // The core of that pid (cores are given in any order; ranks come out sorted).
        let core = core_paths
            .iter()
            .find(|c| CoreFile::open(c).ok().and_then(|f| f.pid()) == Some(pid as i32))
            .unwrap_or_else(|| panic!("{what}: no core has pid {pid}"));
        let live_name = format!("pid {pid} ({live_exe})");
        let core_name = format!("core {} (pid {pid}, {core_exe})", core.display());
        let message = cores["ranks"][r]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains(&core_name),
            "{what}: rank {r}: the message {message:?} names the core {core_name:?}"
        );
        cores["ranks"][r]["message"] = Value::from(message.replace(&core_name, &live_name));
    }
    if let Some(d) = difference(&live, &cores, "") {
        panic!(
            "{what}: the cores' dump differs from the live one at {d}\nlive:  {}\ncores: {}",
            serde_json::to_string(&live).unwrap(),
            serde_json::to_string(&cores).unwrap()
        );
    }
}

/// Every rank dumped, none in error.
fn assert_complete(doc: &Value, n: usize, what: &str) {
    let ranks = doc["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no ranks"));
    assert_eq!(ranks.len(), n, "{what}");
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(rank["rank"], r as i64, "{what}: ranks sorted");
        assert!(
            rank["error"].is_null(),
            "{what}: rank {r}: {}",
            rank["error"]
        );
        assert!(
            rank["communicators"]
                .as_array()
                .is_some_and(|c| !c.is_empty()),
            "{what}: rank {r}: communicators"
        );
    }
}

/// The running ranks of one fixture job of a layout, each in its own directory.
struct Job {
    what: String,
    dir: TempDir,
    ranks: Vec<CoreRank>,
}

impl Job {
    fn spawn(program: &Path, scenario: &str, size: i32) -> Job {
        let what = format!(
            "{} {scenario} (N={size})",
            program.file_name().unwrap().to_string_lossy()
        );
        let dir = TempDir::new(scenario);
        let ranks = (0..size)
            .map(|r| {
                CoreRank::spawn(
                    program,
                    scenario,
                    r,
                    size,
                    dir.path().join(format!("rank{r}")),
                )
            })
            .collect();
        Job { what, dir, ranks }
    }

    fn pids(&self) -> Vec<i32> {
        self.ranks.iter().map(CoreRank::pid).collect()
    }
}

const SIZE: i32 = 4;

/// Live dump, gcore, dump of the gcores; SIGQUIT, dump of the kernel's cores; both equal
/// to the live dump.
fn run(layout: Layout, scenario: &str) {
    let program = fixtures::fixture(fixtures::layout_binary(layout));
    let mut job = Job::spawn(&program, scenario, SIZE);
    let pids = job.pids();
    let what = job.what.clone();
    let live = live_dump(&pids, &what);
    assert_complete(&live, SIZE as usize, &format!("{what}, live"));

    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcores = gcores(&pids, &gdb_dir, &what);
    // Given in reverse: the dump sorts by rank.
    let reversed: Vec<PathBuf> = gcores.iter().rev().cloned().collect();
    let from_gdb = core_dump(&reversed, None, &format!("{what}, gcore"));
    assert_same(&live, &from_gdb, &gcores, None, &format!("{what}, gcore"));

    let kernel = kernel_cores(&mut job.ranks, &what);
    let from_kernel = core_dump(&kernel, None, &format!("{what}, kernel core"));
    assert_same(
        &live,
        &from_kernel,
        &kernel,
        None,
        &format!("{what}, kernel core"),
    );
    // Only the kernel's cores record a fatal signal (gdb's record the stop it used).
    for r in 0..SIZE as usize {
        assert_eq!(from_gdb["ranks"][r]["signal"], Value::Null, "{what}: gcore");
        assert_eq!(from_kernel["ranks"][r]["signal"], 3, "{what}: kernel core");
    }
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_mqd"))
        .arg("core")
        .args(&kernel)
        .output()
        .expect("run mqd core");
    let text = String::from_utf8_lossy(&text.stdout);
    for (r, pid) in pids.iter().enumerate() {
        assert!(
            text.contains(&format!(
                "rank {r} (pid {pid}) was killed by signal 3 (SIGQUIT)"
            )),
            "{what}: {text}"
        );
    }
    for core in gcores.iter().chain(&kernel) {
        let target = CoreTarget::open(core, None).unwrap();
        assert_eq!(
            target.warnings(),
            Vec::<String>::new(),
            "{what}: {}",
            core.display()
        );
        assert_eq!(
            target.executable().as_deref(),
            Some(program.as_path()),
            "{what}: {}",
            core.display()
        );
    }
}

mqd_fixtures::every_layout!(comms, ring);

/// More processes or cores than are reported one by one (256) are reported by classes:
/// `mqd dump` of a 300-rank ring of `MPI_Ssend` is one class proven deadlocked, and so is
/// `mqd core` of the kernel's cores of its ranks, which also says the signal that killed
/// them; `--per-rank` gives each rank.
#[test]
fn many_processes_and_cores_are_reported_by_classes() {
    let n = 300;
    let program = fixtures::fixture(fixtures::layout_binary(Layout::Ch3));
    let mut job = Job::spawn(&program, "ssend-ring", n);
    let pids: Vec<String> = job.pids().iter().map(i32::to_string).collect();
    let mqd = |args: &[&str], more: &[String]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mqd"))
            .args(args)
            .args(more)
            .output()
            .expect("run mqd");
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(8), "mqd {args:?}: {said}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let by_classes = |doc: &Value, what: &str| {
        assert_eq!(doc["schema"], "mqd/3-classes", "{what}");
        assert_eq!(doc["diagnosis"]["verdict"], "deadlock", "{what}");
        assert_eq!(doc["diagnosis"]["deadlocked"], "0-299", "{what}");
        let classes = doc["classes"].as_array().expect("classes");
        assert_eq!(classes.len(), 1, "{what}: {:#}", doc["classes"]);
        assert_eq!(classes[0]["count"], n, "{what}");
    };
    let live: Value = serde_json::from_str(&mqd(&["dump", "--json"], &pids)).expect("JSON");
    by_classes(&live, "mqd dump");
    assert_eq!(live["job"]["pids"].as_array().map(Vec::len), Some(300));
    let text = mqd(&["dump"], &pids);
    assert!(
        text.starts_with("300 processes, by classes (--per-rank for each rank).\n"),
        "{text}"
    );

    let cores: Vec<String> = kernel_cores(&mut job.ranks, &job.what)
        .iter()
        .map(|c| c.display().to_string())
        .collect();
    let args = ["core", "--one-snapshot", "--json"];
    let doc: Value = serde_json::from_str(&mqd(&args, &cores)).expect("JSON");
    by_classes(&doc, "mqd core");
    assert_eq!(doc["job"]["cores"], n);
    assert_eq!(
        doc["job"]["killed"],
        serde_json::json!([{"ranks": "0-299", "signal": 3, "name": "SIGQUIT"}])
    );
    let text = mqd(&["core", "--one-snapshot"], &cores);
    for line in [
        "300 cores, by classes (--per-rank for each rank).\nranks 0-299 (300) were killed by signal 3 (SIGQUIT)\n",
        "\n300 ranks in 1 class:\n  ranks 0-299 (300): in MPI_Ssend",
        "\nVerdict: deadlock (ranks 0-299 proven blocked).",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    let each = ["core", "--one-snapshot", "--json", "--per-rank"];
    let each: Value = serde_json::from_str(&mqd(&each, &cores)).expect("JSON");
    assert_eq!(each["schema"], "mqd/3");
    assert_eq!(each["ranks"].as_array().map(Vec::len), Some(300));
    assert_eq!(each["diagnosis"]["verdict"], "deadlock");
}
