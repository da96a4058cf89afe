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

use mqd_debugger::core::{CoreFile, CoreTarget};
use mqd_debugger::dump::{self, JobContext, ProcessRef};
use mqd_debugger::target::{DebugInfo, Memory};
use mqd_fixtures as fixtures;
use mqd_model::{Acquisition, JobDump};
use mqd_synthetic::Layout;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
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
        let status = self.child.wait().expect("wait for the rank");
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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Serialises the tests that rely on `/proc/sys/kernel/core_pattern` (which one of them
/// may change, as root, when the cores would not land in the rank's directory).
fn core_pattern_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

const CORE_PATTERN: &str = "/proc/sys/kernel/core_pattern";

/// Makes the kernel write cores into the dumping process's working directory: a
/// relative `core_pattern` already does; a pipe (`|systemd-coredump ...`) or an
/// absolute directory is replaced by `core` for the guard's life (root only) and
/// restored after.
struct CorePatternGuard {
    original: Option<String>,
    _lock: MutexGuard<'static, ()>,
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

/// `gcore -o PREFIX PID...`: the cores, in the order of `pids`.
fn gcores(pids: &[i32], dir: &Path, what: &str) -> Vec<PathBuf> {
    let prefix = dir.join("gcore");
    let output = Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .args(pids.iter().map(i32::to_string))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{what}: cannot run gcore ({e}): install gdb (apt-get install gdb)")
        });
    let cores: Vec<PathBuf> = pids
        .iter()
        .map(|pid| PathBuf::from(format!("{}.{pid}", prefix.display())))
        .collect();
    let missing: Vec<&PathBuf> = cores.iter().filter(|c| !c.is_file()).collect();
    assert!(
        output.status.success() && missing.is_empty(),
        "{what}: gcore {pids:?} failed ({}), missing {missing:?}; stdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    cores
}

fn live_dump(pids: &[i32], what: &str) -> Value {
    let processes: Vec<ProcessRef> = pids.iter().map(|&p| ProcessRef::pid(p)).collect();
    let context = JobContext::new(Acquisition::Attach);
    let job = dump::dump_processes(&processes, None, &context, &dump::Quiet)
        .unwrap_or_else(|f| panic!("{what}: live dump: {f}"));
    to_json(&job)
}

fn core_dump(cores: &[PathBuf], exe: Option<&Path>, what: &str) -> Value {
    let context = JobContext::new(Acquisition::Core);
    let job = dump::dump_cores(dump::open_cores(cores, exe), None, &context)
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
    // `mqd` adds the analysis of the dump (aggregated view, diagnosis, verdict): it is
    // derived from the ranks, which are compared below, and must match the live one's.
    for doc in [&mut live, &mut cores] {
        if let Value::Object(members) = doc {
            for derived in ["aggregated", "diagnosis", "verdict"] {
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

macro_rules! every_layout {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            #[test]
            fn ch3() {
                run(Layout::Ch3, stringify!($scenario));
            }
            #[test]
            fn ch4() {
                run(Layout::Ch4Am, stringify!($scenario));
            }
            #[test]
            fn debugq4() {
                run(Layout::Debugq4, stringify!($scenario));
            }
            #[test]
            fn debugq5() {
                run(Layout::Debugq5, stringify!($scenario));
            }
        }
    )*};
}

every_layout!(comms, ring);

// -------------------------------------------------------------------- damaged cores

/// `(p_offset, p_filesz)` of the PT_NOTE segment of an x86-64 core.
fn notes_range(core: &[u8]) -> (usize, usize) {
    let u16_at = |at: usize| u16::from_le_bytes(core[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(core[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(core[at..at + 8].try_into().unwrap()) as usize;
    let (phoff, phnum) = (u64_at(32), u16_at(56));
    (0..phnum)
        .map(|i| phoff + 56 * i)
        .find(|&ph| u32_at(ph) == 4)
        .map(|ph| (u64_at(ph + 8), u64_at(ph + 32)))
        .expect("the core has a PT_NOTE segment")
}

/// Offset in the core of the header of the first note of type `n_type`.
fn find_note(core: &[u8], n_type: u32) -> Option<usize> {
    let (start, size) = notes_range(core);
    let u32_at = |at: usize| u32::from_le_bytes(core[at..at + 4].try_into().unwrap()) as usize;
    let pad = |n: usize| (n + 3) & !3;
    let mut at = start;
    while at + 12 <= start + size {
        if u32_at(at + 8) == n_type as usize {
            return Some(at);
        }
        at += 12 + pad(u32_at(at)) + pad(u32_at(at + 4));
    }
    None
}

const NT_FILE: u32 = 0x4649_4c45;

/// The first rank of a job cored by gcore and by the kernel.
struct Cored {
    _job: Job,
    gcore: PathBuf,
    kernel: PathBuf,
}

fn cored(program: &Path, scenario: &str, size: i32) -> Cored {
    let mut job = Job::spawn(program, scenario, size);
    let pids = job.pids();
    let what = job.what.clone();
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcore = gcores(&pids, &gdb_dir, &what).remove(0);
    let kernel = kernel_cores(&mut job.ranks, &what).remove(0);
    Cored {
        _job: job,
        gcore,
        kernel,
    }
}

fn open_error(path: &Path) -> String {
    match CoreFile::open(path) {
        Ok(core) => panic!("{} opened: {core:?}", path.display()),
        Err(e) => e.to_string(),
    }
}

fn dump_error(path: &Path) -> String {
    let context = JobContext::new(Acquisition::Core);
    match dump::dump_cores(dump::open_cores(&[path.to_owned()], None), None, &context) {
        Ok(job) => panic!("{} dumped: {}", path.display(), to_json(&job)),
        Err(f) => f.message,
    }
}

#[test]
fn truncated_corrupt_and_foreign_files_give_one_clear_error() {
    let program = fixtures::fixture(fixtures::DEBUGQ5);
    let cored = cored(&program, "ring", 1);
    let dir = TempDir::new("damaged");
    for (kind, core) in [("gcore", &cored.gcore), ("kernel", &cored.kernel)] {
        let bytes = std::fs::read(core).unwrap();
        let ok = CoreFile::open(core).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(
            ok.pid().is_some() && ok.has_file_mappings(),
            "{kind}: {ok:?}"
        );

        // Cut in half.
        let cut = dir.path().join(format!("{kind}.cut"));
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let e = open_error(&cut);
        assert!(
            e.starts_with("truncated core file: segment at 0x")
                && e.contains(&format!("file has {}", bytes.len() / 2)),
            "{kind}: {e}"
        );
        assert!(!e.contains('\n'), "{kind}: one line: {e}");
        assert_eq!(dump_error(&cut), e, "{kind}");

        // Garbage over the notes.
        let (start, size) = notes_range(&bytes);
        let mut garbage = bytes.clone();
        let mut x = 0x9e37_79b9u32;
        for b in &mut garbage[start..start + size] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        let path = dir.path().join(format!("{kind}.garbage"));
        std::fs::write(&path, &garbage).unwrap();
        let e = open_error(&path);
        assert!(
            e.starts_with(&format!(
                "corrupt notes in core file {}: note 0",
                path.display()
            )),
            "{kind}: {e}"
        );
        assert_eq!(dump_error(&path), e, "{kind}");

        // An NT_FILE whose count does not fit.
        let at = find_note(&bytes, NT_FILE).expect("NT_FILE");
        let namesz = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let desc = at + 12 + ((namesz + 3) & !3);
        let mut bad = bytes.clone();
        bad[desc..desc + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let path = dir.path().join(format!("{kind}.ntfile"));
        std::fs::write(&path, &bad).unwrap();
        let e = open_error(&path);
        assert!(
            e.starts_with("corrupt notes in core file") && e.contains("NT_FILE"),
            "{kind}: {e}"
        );

        // Random damage to the headers and notes: an error or a core, never a panic.
        let mut seed = 0x2545_f491_4f6c_dd1du64 ^ bytes.len() as u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let path = dir.path().join(format!("{kind}.mutant"));
        let mut opened = 0;
        for i in 0..150 {
            let mut m = bytes.clone();
            for _ in 0..(next() % 6 + 1) {
                let at = if next() % 2 == 0 {
                    (next() as usize) % 0x1000.min(m.len())
                } else {
                    start + (next() as usize) % size
                };
                m[at] = next() as u8;
            }
            std::fs::write(&path, &m).unwrap();
            if let Ok(target) = CoreTarget::open(&path, None) {
                opened += 1;
                let mut buf = [0u8; 64];
                for addr in [
                    0u64,
                    fixtures::ARENA,
                    target.find_symbol("MPIR_All_communicators").unwrap_or(8),
                ] {
                    let _ = target.read_memory(addr, &mut buf);
                }
                if i % 10 == 0 {
                    let context = JobContext::new(Acquisition::Core);
                    let cores = dump::open_cores(std::slice::from_ref(&path), None);
                    let _ = dump::dump_cores(cores, None, &context);
                }
            }
        }
        eprintln!("{kind}: {opened} of 150 damaged cores still opened");
    }

    // Not a core at all.
    let text = dir.path().join("text");
    std::fs::write(&text, "this is not a core file\n").unwrap();
    assert_eq!(
        open_error(&text),
        format!(
            "not an ELF core file: {} is not an ELF file",
            text.display()
        )
    );
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    assert!(open_error(&empty).starts_with("not an ELF core file"));
    let e = open_error(&program);
    assert!(
        e.starts_with(&format!("not an ELF core file: {} is a", program.display()))
            && e.contains("e_type"),
        "{e}"
    );
    assert_eq!(dump_error(&program), e);
    let missing = dir.path().join("no-such-core");
    assert!(
        open_error(&missing).starts_with(&format!("cannot read core file {}", missing.display()))
    );
    assert!(open_error(dir.path()).starts_with("cannot read core file"));
}

#[test]
fn core_without_file_mappings_needs_the_executable() {
    let program = fixtures::fixture(fixtures::CH4);
    let mut job = Job::spawn(&program, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, NT_FILE removed", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcores = gcores(&pids, &gdb_dir, &what);
    let kernel = kernel_cores(&mut job.ranks, &what);
    for (kind, cores) in [("gcore", gcores), ("kernel", kernel)] {
        let what = format!("{what} ({kind})");
        let stripped: Vec<PathBuf> = cores
            .iter()
            .map(|core| {
                let mut bytes = std::fs::read(core).unwrap();
                let at = find_note(&bytes, NT_FILE).expect("NT_FILE");
                bytes[at + 8..at + 12].copy_from_slice(&0x4e4f_4e45u32.to_le_bytes());
                let path = PathBuf::from(format!("{}.nofile", core.display()));
                std::fs::write(&path, bytes).unwrap();
                path
            })
            .collect();
        let core = CoreFile::open(&stripped[0]).unwrap();
        assert!(!core.has_file_mappings(), "{what}");
        let e = dump_error(&stripped[0]);
        assert!(
            e.contains("lacks file mappings") && e.contains("--exe"),
            "{what}: {e}"
        );
        let target = CoreTarget::open(&stripped[0], Some(&program))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let objects: Vec<PathBuf> = target.space.objects().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            objects.first(),
            Some(&program),
            "{what}: objects {objects:?}"
        );
        assert!(
            objects
                .iter()
                .any(|p| p.to_string_lossy().contains("libc.so")),
            "{what}: libc through link_map: {objects:?}"
        );
        let doc = core_dump(&stripped, Some(&program), &what);
        assert_same(&live, &doc, &stripped, Some(&program), &what);
    }
}

#[test]
fn moved_executable_is_missing_until_given() {
    let dir = TempDir::new("moved");
    let original = dir.path().join("mqd-fixture-copy");
    std::fs::copy(fixtures::fixture(fixtures::CH3), &original).unwrap();
    let mut job = Job::spawn(&original, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, moved", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcores = gcores(&pids, &gdb_dir, &what);
    let kernel = kernel_cores(&mut job.ranks, &what);
    let moved = dir.path().join("moved-away");
    std::fs::rename(&original, &moved).unwrap();
    for (kind, cores) in [("gcore", &gcores), ("kernel", &kernel)] {
        let what = format!("{what} ({kind})");
        let target = CoreTarget::open(&cores[0], None).unwrap_or_else(|e| panic!("{what}: {e}"));
        let warnings = target.warnings();
        assert!(
            warnings.iter().any(|w| w
                .starts_with(&format!("{} (mapped at 0x", original.display()))
                && w.contains("is missing")),
            "{what}: {warnings:?}"
        );
        let e = dump_error(&cores[0]);
        assert!(
            e.contains("is missing") && e.contains("--exe"),
            "{what}: {e}"
        );
        let doc = core_dump(cores, Some(&moved), &what);
        assert_same(&live, &doc, cores, Some(&moved), &what);
        let target = CoreTarget::open(&cores[0], Some(&moved)).unwrap();
        assert_eq!(target.warnings(), Vec::<String>::new(), "{what}");
    }
    // Another program in its place: changed since the crash (build-id), a warning.
    std::fs::copy(fixtures::fixture(fixtures::DEBUGQ5), &moved).unwrap();
    for core in [&gcores[0], &kernel[0]] {
        let target = CoreTarget::open(core, Some(&moved)).unwrap();
        let warnings = target.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("changed since the crash") && w.contains("build-id")),
            "{}: {warnings:?}",
            core.display()
        );
    }
}

/// Every readable file-backed mapping and the fixture's arena read the same from the
/// cores as from the process: the pages the dumpers left out (code and constants of the
/// program and of libc) come from the mapped files.
#[test]
fn core_memory_is_the_process_memory() {
    use std::os::unix::fs::FileExt;
    let program = fixtures::fixture(fixtures::DEBUGQ4);
    let mut job = Job::spawn(&program, "wildcards", 1);
    let pid = job.pids()[0];
    let what = format!("{}, memory", job.what);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let maps = mqd_debugger::debuginfo::parse_proc_maps(&maps);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let ranges: Vec<(u64, u64, String, Vec<u8>)> = maps
        .iter()
        .filter(|m| m.perms.starts_with('r'))
        .filter(|m| m.start == fixtures::ARENA || m.path.as_deref().is_some_and(Path::is_absolute))
        .map(|m| {
            let mut bytes = vec![0u8; (m.end - m.start) as usize];
            mem.read_exact_at(&mut bytes, m.start)
                .unwrap_or_else(|e| panic!("{what}: read {m:?}: {e}"));
            let name = m
                .path
                .as_ref()
                .map_or("arena".into(), |p| format!("{} {}", p.display(), m.perms));
            (m.start, m.end, name, bytes)
        })
        .collect();
    assert!(
        ranges
            .iter()
            .any(|r| r.2.contains("libc.so") && r.2.ends_with("r-xp")),
        "{what}: libc's code is mapped: {maps:?}"
    );
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcore = gcores(&[pid], &gdb_dir, &what).remove(0);
    let kernel = kernel_cores(&mut job.ranks, &what).remove(0);
    for (kind, core) in [("gcore", gcore), ("kernel", kernel)] {
        let core = CoreFile::open(&core).unwrap();
        let mut from_files = 0;
        for (start, end, name, bytes) in &ranges {
            let mut got = vec![0u8; bytes.len()];
            core.read_memory(*start, &mut got)
                .unwrap_or_else(|e| panic!("{what} ({kind}): {start:#x}-{end:#x} {name}: {e}"));
            if let Some(i) = got.iter().zip(bytes).position(|(a, b)| a != b) {
                panic!(
                    "{what} ({kind}): {start:#x}-{end:#x} {name}: byte {:#x} differs",
                    *start + i as u64
                );
            }
            let dumped: u64 = core
                .segments()
                .iter()
                .filter(|s| s.vaddr < *end && s.end() > *start)
                .map(|s| s.filesz.min(end - s.vaddr.max(*start)))
                .sum();
            if dumped < end - start {
                from_files += 1;
            }
        }
        assert!(
            from_files > 0,
            "{what} ({kind}): some mapping is read from its file"
        );
        eprintln!(
            "{what} ({kind}): {} ranges equal, {from_files} of them read (partly) from the mapped files",
            ranges.len()
        );
    }
}

/// 100 000 posted receives per rank: the same from a core as live, and how long each took.
#[test]
fn big_queues_from_cores() {
    let program = fixtures::fixture(fixtures::DEBUGQ5);
    let job = Job::spawn(&program, "big", 2);
    let pids = job.pids();
    let what = job.what.clone();
    let start = Instant::now();
    let live = live_dump(&pids, &what);
    let live_time = start.elapsed();
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let cores = gcores(&pids, &gdb_dir, &what);
    let start = Instant::now();
    let doc = core_dump(&cores, None, &what);
    let core_time = start.elapsed();
    for rank in doc["ranks"].as_array().unwrap() {
        let receives = rank["communicators"][0]["pending_receives"]["operations"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            receives,
            fixtures::BIG_COUNT,
            "{what}: rank {}",
            rank["rank"]
        );
    }
    assert_same(&live, &doc, &cores, None, &what);
    eprintln!("{what}: live dump {live_time:.2?}, dump of the gcores {core_time:.2?}");
}

/// `mqd core [--json] [--exe PATH] CORE...`: the same document as the library call, text
/// with every rank, and one line on stderr with exit code 1 for a damaged core.
#[test]
fn mqd_core_command() {
    let program = fixtures::fixture(fixtures::CH4);
    let job = Job::spawn(&program, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, mqd core", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let cores = gcores(&pids, &gdb_dir, &what);
    let mqd = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_mqd"))
            .arg("core")
            .args(args)
            .output()
            .expect("run mqd")
    };
    let os = |p: &Path| p.as_os_str().to_owned();
    let mut args: Vec<std::ffi::OsString> = vec!["--json".into()];
    args.extend(cores.iter().map(|c| os(c)));
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = mqd(&refs);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{what}: stderr: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["schema"], "mqd/1");
    assert_same(&live, &doc, &cores, None, &what);

    // --exe with the executable the cores name changes nothing.
    let mut with_exe: Vec<&std::ffi::OsStr> = vec!["--exe".as_ref(), program.as_os_str()];
    with_exe.extend(refs.iter().copied());
    let out = mqd(&with_exe);
    assert!(
        out.status.success(),
        "{what}: --exe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(again, doc, "{what}: --exe");

    // Text, rank by rank.
    let mut per_rank: Vec<&std::ffi::OsStr> = vec!["--per-rank".as_ref()];
    per_rank.extend(refs[1..].iter().copied());
    let out = mqd(&per_rank);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: text: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (r, pid) in pids.iter().enumerate() {
        assert!(
            text.contains(&format!("rank {r} (pid {pid})")),
            "{what}: rank {r}:\n{text}"
        );
    }

    // Damaged or foreign files: exit 1, one line naming the cause.
    let cut = gdb_dir.join("cut");
    let bytes = std::fs::read(&cores[0]).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    for (file, start) in [
        (
            cut.clone(),
            "mqd: truncated core file: segment at 0x".to_owned(),
        ),
        (program.clone(), "mqd: not an ELF core file: ".to_owned()),
        (
            gdb_dir.join("nothing"),
            format!(
                "mqd: cannot read core file {}",
                gdb_dir.join("nothing").display()
            ),
        ),
    ] {
        let out = mqd(&[file.as_os_str()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{what}: {}: {stderr}",
            file.display()
        );
        assert!(
            stderr.starts_with(&start) && stderr.lines().count() == 1,
            "{what}: {}: {stderr}",
            file.display()
        );
        assert!(out.stdout.is_empty(), "{what}: {}", file.display());
    }
    let out = mqd(&[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "mqd core without a core is a usage error"
    );
}
