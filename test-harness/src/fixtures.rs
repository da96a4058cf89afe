//! The C fixture programs: real Linux processes that hold MPICH's data structures.
//!
//! `build.rs` compiles `test-harness/fixtures/*.c` with `gcc -g -O0` into [`dir()`]:
//!
//! | binary | what it is |
//! |---|---|
//! | [`CH3`], [`CH4`], [`DEBUGQ4`], [`DEBUGQ5`] | one rank of a fixture job, per MPICH layout (A, B, C-4.x, C-5.x) |
//! | [`CH4_DWARF4`] | the ch4 rank built with `-gdwarf-4` |
//! | [`STARTER`] | an MPIR starter (`MPIR_proctable`, `MPIR_Breakpoint`, ...) that forks N ranks |
//! | [`STARTER_MPI2DD`] | the same starter exposing `MPI2DD_info` / `MPI2DD_breakpoint` instead of MPIR |
//! | [`PLAIN`] | a process that is not MPI at all |
//! | [`STRIPPED_DEBUG`], [`STRIPPED_ALL`] | the debugq5 rank after `strip --strip-debug` / `--strip-all` |
//! | [`DEBUGLINK`] | the debugq5 rank without DWARF, which lives in `DEBUGLINK.debug` next to it (`.gnu_debuglink`) |
//!
//! A rank runs as `BINARY --scenario NAME --rank R --size N` (rank and size default to
//! `$MQD_RANK`/`$MQD_SIZE`), builds the communicators and queues of the scenario, prints
//! `READY <pid>` on stdout and waits; SIGTERM ends it with status 0. What each scenario holds,
//! rank by rank, is documented at the top of `fixtures/scenario.c`; buffers live at fixed
//! addresses ([`buffer`], [`big_buffer`]). With `MQD_WAIT_FOR_GATE=1` a rank first spins in
//! `MPII_Wait_for_debugger` until a debugger writes 1 into its `MPIR_debug_gate`.
//!
//! The starter runs as `STARTER -n N [--layout ch3|ch4|debugq4|debugq5] [--abort] [--mpi2dd]
//! [--] SCENARIO`: it forks the N ranks of the layout (default debugq5), prints
//! `PIDS <pid of rank 0> ...` on stderr, fills the proctable, sets the debug state to spawned
//! and calls the breakpoint function; with `--abort` it then publishes the abort string
//! [`ABORT_MESSAGE`] and calls it again. It forwards SIGTERM to the ranks, which also get
//! SIGTERM when the starter dies. Ranks are gated when `MPIR_being_debugged` was set in the
//! starter before it spawned them. `--mpi2dd` makes the MPIR starter re-execute
//! [`STARTER_MPI2DD`] (debuggers that launch the job should start that one directly).
//!
//! [`spawn_rank`] and [`spawn_job`] start them from tests and return guards that kill the
//! processes when dropped.

use std::fmt;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::synthetic::Layout;

/// Layout A (ch3) rank binary.
pub const CH3: &str = "mqd-fixture-ch3";
/// Layout B (ch4 active messages) rank binary.
pub const CH4: &str = "mqd-fixture-ch4";
/// Layout C as in MPICH 4.0.3–4.3 rank binary.
pub const DEBUGQ4: &str = "mqd-fixture-debugq4";
/// Layout C as in MPICH 5.x rank binary.
pub const DEBUGQ5: &str = "mqd-fixture-debugq5";
/// The ch4 rank binary with DWARF version 4 debug information (the others have DWARF 5).
pub const CH4_DWARF4: &str = "mqd-fixture-ch4-dwarf4";
/// The MPIR starter.
pub const STARTER: &str = "mqd-fixture-starter";
/// The MPI2DD starter (no MPIR symbols).
pub const STARTER_MPI2DD: &str = "mqd-fixture-starter-mpi2dd";
/// A program that is not an MPI process (prints `READY <pid>` and waits).
pub const PLAIN: &str = "mqd-fixture-plain";
/// [`DEBUGQ5`] after `strip --strip-debug`: symbols but no DWARF.
pub const STRIPPED_DEBUG: &str = "mqd-fixture-debugq5-strip-debug";
/// [`DEBUGQ5`] after `strip --strip-all`: no `.symtab`, no DWARF.
pub const STRIPPED_ALL: &str = "mqd-fixture-debugq5-strip-all";
/// [`DEBUGQ5`] without DWARF, with a `.gnu_debuglink` to `mqd-fixture-debugq5-debuglink.debug`
/// in the same directory.
pub const DEBUGLINK: &str = "mqd-fixture-debugq5-debuglink";

/// The four rank binaries, in [`Layout::ALL`] order.
pub const RANK_BINARIES: [&str; 4] = [CH3, CH4, DEBUGQ4, DEBUGQ5];

/// Every scenario a rank can build.
pub const SCENARIOS: [&str; 8] = [
    "wildcards",
    "unexpected",
    "sends",
    "comms",
    "freed",
    "big",
    "ring",
    "compute",
];

/// Posted receives of the `big` scenario.
pub const BIG_COUNT: usize = 100_000;

/// Base of the arena that holds the user buffers of every scenario (same address in every
/// process and run).
pub const ARENA: u64 = 0x4d51_4400_0000;

/// The abort string of `STARTER --abort`.
pub const ABORT_MESSAGE: &str = "rank 1 called MPI_Abort(MPI_COMM_WORLD, 3)";

/// The `libmqd_mpich.so` that ranks name in `MPIR_dll_name` (and the MPI2DD starter in
/// `dll_name_64`): `target/<profile>/libmqd_mpich.so`, absolute.
pub const DLL_PATH: &str = env!("MQD_FIXTURE_DLL");

/// Address of buffer `k` of a scenario (`buf(k)` in `scenario.c`).
pub fn buffer(k: u64) -> u64 {
    ARENA + k * 0x1000
}

/// Address of the buffer of posted receive `i` of the `big` scenario.
pub fn big_buffer(i: u64) -> u64 {
    ARENA + 0x10_0000 + 16 * i
}

/// The directory holding the fixture binaries (`OUT_DIR/fixtures`).
pub fn dir() -> PathBuf {
    PathBuf::from(env!("MQD_FIXTURE_DIR"))
}

/// Path of the fixture binary `name` (one of the constants of this module).
pub fn fixture(name: &str) -> PathBuf {
    dir().join(name)
}

/// The rank binary of a layout.
pub fn layout_binary(layout: Layout) -> &'static str {
    match layout {
        Layout::Ch3 => CH3,
        Layout::Ch4Am => CH4,
        Layout::Debugq4 => DEBUGQ4,
        Layout::Debugq5 => DEBUGQ5,
    }
}

/// The starter's `--layout` argument for a layout.
pub fn layout_arg(layout: Layout) -> &'static str {
    match layout {
        Layout::Ch3 => "ch3",
        Layout::Ch4Am => "ch4",
        Layout::Debugq4 => "debugq4",
        Layout::Debugq5 => "debugq5",
    }
}

/// Sends a signal (a name as `kill -s` takes it: `TERM`, `USR1`, `KILL`, ...) to `pid`.
pub fn send_signal(pid: i32, signal: &str) -> io::Result<()> {
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .stderr(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "kill -s {signal} {pid} failed ({status})"
        )))
    }
}

/// Lines of a child's stream, read by a thread; copied to our stderr when `echo`.
fn line_reader<R: io::Read + Send + 'static>(stream: R, echo: bool) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if echo {
                eprintln!("{line}");
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `timeout` for a line of `lines` accepted by `want`, skipping others.
fn wait_line<T>(
    lines: &Receiver<String>,
    timeout: Duration,
    what: &str,
    mut want: impl FnMut(&str) -> Option<T>,
) -> io::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(v) = want(&line) {
                    return Ok(v);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no {what} within {timeout:?}"),
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the process closed its output before {what}"),
                ));
            }
        }
    }
}

/// The pid of a `READY <pid>` line.
fn ready_pid(line: &str) -> Option<i32> {
    line.strip_prefix("READY ")?.trim().parse().ok()
}

/// One fixture process started by [`spawn_rank`] (or [`spawn_command`]); killed (SIGKILL) and
/// reaped on drop.
pub struct Rank {
    child: Child,
    stdout: Receiver<String>,
}

impl fmt::Debug for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rank")
            .field("pid", &self.pid())
            .finish_non_exhaustive()
    }
}

/// Starts one rank of `binary` (a name from this module, e.g. [`DEBUGQ5`]) building
/// `scenario` as rank `rank` of `size`, and waits for its `READY` line (up to 30 s).
pub fn spawn_rank(binary: &str, scenario: &str, rank: i32, size: i32) -> io::Result<Rank> {
    let mut cmd = Command::new(fixture(binary));
    cmd.args([
        "--scenario",
        scenario,
        "--rank",
        &rank.to_string(),
        "--size",
        &size.to_string(),
    ]);
    cmd.env_remove("MQD_WAIT_FOR_GATE");
    let mut rank = spawn_command(cmd)?;
    rank.wait_ready(Duration::from_secs(30))?;
    Ok(rank)
}

/// Starts any command with its stdout captured (stderr inherited) without waiting for
/// `READY`; use [`Rank::wait_ready`].
pub fn spawn_command(mut cmd: Command) -> io::Result<Rank> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn()?;
    let stdout: ChildStdout = child.stdout.take().expect("stdout is piped");
    Ok(Rank {
        child,
        stdout: line_reader(stdout, false),
    })
}

impl Rank {
    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits up to `timeout` for the next `READY <pid>` line (the `freed` scenario prints a
    /// second one after SIGUSR1).
    pub fn wait_ready(&mut self, timeout: Duration) -> io::Result<()> {
        let pid = self.pid();
        wait_line(&self.stdout, timeout, "READY line", |line| {
            (ready_pid(line) == Some(pid)).then_some(())
        })
    }

    /// Sends a signal by name (`USR1`, `TERM`, ...).
    pub fn signal(&self, signal: &str) -> io::Result<()> {
        send_signal(self.pid(), signal)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> io::Result<std::process::ExitStatus> {
        self.signal("TERM")?;
        self.child.wait()
    }

    /// Whether the process is still running (not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Rank {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start a fixture job with [`spawn_job`].
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Number of ranks (`-n`).
    pub ranks: usize,
    /// Layout of the ranks.
    pub layout: Layout,
    /// Scenario every rank builds.
    pub scenario: String,
    /// Start [`STARTER_MPI2DD`] instead of [`STARTER`].
    pub mpi2dd: bool,
    /// Pass `--abort`.
    pub abort: bool,
}

impl JobOptions {
    /// `ranks` ranks of `layout` building `scenario`, MPIR, no abort.
    pub fn new(ranks: usize, layout: Layout, scenario: &str) -> JobOptions {
        JobOptions {
            ranks,
            layout,
            scenario: scenario.to_owned(),
            mpi2dd: false,
            abort: false,
        }
    }

    /// The starter command line (program and arguments).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(fixture(if self.mpi2dd { STARTER_MPI2DD } else { STARTER }));
        cmd.args([
            "-n",
            &self.ranks.to_string(),
            "--layout",
            layout_arg(self.layout),
        ]);
        if self.abort {
            cmd.arg("--abort");
        }
        cmd.arg("--").arg(&self.scenario);
        cmd
    }
}

/// A running fixture job started by [`spawn_job`]: the starter and its ranks. On drop the
/// ranks and the starter are killed and the starter reaped.
pub struct Job {
    starter: Child,
    pids: Vec<i32>,
    stdout: Receiver<String>,
    /// Kept so that the reader thread keeps draining the starter's stderr.
    stderr: Receiver<String>,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("starter", &self.starter_pid())
            .field("ranks", &self.pids)
            .finish_non_exhaustive()
    }
}

/// Starts a fixture job (not under a debugger) and waits (up to 30 s) until the starter
/// printed the ranks' pids and every rank printed `READY`.
pub fn spawn_job(options: &JobOptions) -> io::Result<Job> {
    let mut cmd = options.command();
    let mut starter = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = line_reader(starter.stdout.take().expect("stdout is piped"), false);
    let stderr_stream: ChildStderr = starter.stderr.take().expect("stderr is piped");
    let mut job = Job {
        starter,
        pids: Vec::new(),
        stdout,
        // The ranks share the starter's stderr: show their messages in the test output.
        stderr: line_reader(stderr_stream, true),
    };
    let timeout = Duration::from_secs(30);
    job.pids = wait_line(&job.stderr, timeout, "PIDS line from the starter", |line| {
        let rest = line.strip_prefix("PIDS")?;
        rest.split_whitespace()
            .map(|p| p.parse().ok())
            .collect::<Option<Vec<i32>>>()
    })?;
    job.wait_ready(timeout)?;
    Ok(job)
}

impl Job {
    /// The starter's pid.
    pub fn starter_pid(&self) -> i32 {
        self.starter.id() as i32
    }

    /// The ranks' pids in COMM_WORLD rank order (from the starter's `PIDS` line).
    pub fn rank_pids(&self) -> &[i32] {
        &self.pids
    }

    /// Waits for one `READY` line from every rank.
    fn wait_ready(&mut self, timeout: Duration) -> io::Result<()> {
        let mut missing: Vec<i32> = self.pids.clone();
        let deadline = Instant::now() + timeout;
        while !missing.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let pid = wait_line(&self.stdout, left, "READY line from every rank", |line| {
                ready_pid(line)
            })?;
            missing.retain(|&p| p != pid);
        }
        Ok(())
    }

    /// Sends SIGTERM to the starter (which forwards it to the ranks) and waits for its exit
    /// status.
    pub fn terminate(mut self) -> io::Result<std::process::ExitStatus> {
        send_signal(self.starter_pid(), "TERM")?;
        self.starter.wait()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // The ranks are the starter's children: until the starter is reaped their pids
        // cannot be reused, so killing them by pid is safe.
        if matches!(self.starter.try_wait(), Ok(None)) {
            for &pid in &self.pids {
                let _ = send_signal(pid, "KILL");
            }
        }
        let _ = self.starter.kill();
        let _ = self.starter.wait();
    }
}
