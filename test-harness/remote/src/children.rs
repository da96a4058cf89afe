//! The agents a front end or a relay starts: one per share of the hosts, each read on
//! its own thread, their records and ends delivered in one channel, each bounded in time.

use super::launcher::Launcher;
use super::task::{AgentOptions, HostTask, MQD_VERSION, Task};
use super::wire::{self, Hello, Record};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest line an agent may write (a rank with a million operations fits).
const MAX_LINE: u64 = 1 << 30;
/// Lines of an agent's standard error kept for the message when it fails.
const STDERR_LINES: usize = 8;

/// What one of the started agents said.
#[derive(Debug)]
pub(super) enum Event {
    /// A record of its stream (its hello already checked).
    Record(usize, Record),
    /// Its stream is over: why its hosts not reported by then were not.
    Ended(usize, String),
}

/// Why the hosts an agent did not report failed when its stream ended well.
const UNREPORTED: &str = "its agent ended without reporting it";

/// One started agent.
struct Started {
    /// The launcher process (ssh, mpiexec, srun), shared with its reader.
    process: Arc<Mutex<Option<Child>>>,
    reader: Option<JoinHandle<()>>,
    /// Dropped (or sent to) to close the agent's standard input: its ranks may go.
    release: Option<Sender<()>>,
}

/// The agents started for shares of the hosts, and the channel they report in.
pub(super) struct Children {
    started: Vec<Started>,
    /// Their events.
    pub events: Receiver<Event>,
    /// Each agent's hosts.
    pub shares: Vec<Vec<HostTask>>,
}

/// Splits `hosts` into at most `fanout` shares of consecutive hosts, as even as can be.
pub(super) fn shares(hosts: Vec<HostTask>, fanout: usize) -> Vec<Vec<HostTask>> {
    let n = hosts.len();
    let parts = fanout.max(1).min(n);
    let mut out = Vec::with_capacity(parts);
    let mut rest = hosts.into_iter();
    for i in 0..parts {
        let size = n / parts + usize::from(i < n % parts);
        out.push(rest.by_ref().take(size).collect());
    }
    out
}

impl Children {
    /// The host names of each share.
    pub fn share_names(&self) -> Vec<Vec<String>> {
        self.shares
            .iter()
            .map(|share| share.iter().map(|h| h.name.clone()).collect())
            .collect()
    }

    /// Starts one agent per share, on the share's first host.
    pub fn start(
        shares: Vec<Vec<HostTask>>,
        options: &AgentOptions,
        launcher: &Launcher,
    ) -> Children {
        let (tx, events) = channel();
        let started = shares
            .iter()
            .enumerate()
            .map(|(i, share)| start_one(i, share, options, launcher, tx.clone()))
            .collect();
        Children {
            started,
            events,
            shares,
        }
    }

    /// Closes every agent's standard input: the ranks they hold may go.
    pub fn release(&mut self) {
        for started in &mut self.started {
            started.release.take();
        }
    }

    /// Delivers every event until each agent ended or `deadline` passed (or `stop`
    /// says so); agents still running then are ended, each with why. `on_event` is also
    /// called with `None` at least every 100 ms.
    pub fn pump(
        &mut self,
        deadline: Instant,
        timeout: f64,
        stop: &dyn Fn() -> bool,
        mut on_event: impl FnMut(&mut Children, Option<Event>),
    ) {
        let mut running = self.started.len();
        let mut ended = vec![false; self.started.len()];
        while running > 0 {
            let now = Instant::now();
            let cut = if stop() {
                Some("mqd was asked to stop before its agent finished".to_owned())
            } else if now >= deadline {
                Some(format!(
                    "its agent did not finish within {timeout} s (--agent-timeout): ended"
                ))
            } else {
                None
            };
            if let Some(why) = cut {
                for (i, done) in ended.iter().enumerate() {
                    if !done {
                        self.kill(i);
                        on_event(self, Some(Event::Ended(i, why.clone())));
                    }
                }
                break;
            }
            let wait = (deadline - now).min(Duration::from_millis(100));
            match self.events.recv_timeout(wait) {
                Ok(event) => {
                    if let Event::Ended(i, _) = &event {
                        if std::mem::replace(&mut ended[*i], true) {
                            continue;
                        }
                        running -= 1;
                    } else if let Event::Record(i, _) = &event
                        && ended[*i]
                    {
                        continue;
                    }
                    on_event(self, Some(event));
                }
                Err(RecvTimeoutError::Timeout) => on_event(self, None),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Ends an agent's launcher (the agent, on its host, finds its output closed, lets
    /// its ranks go and exits).
    fn kill(&mut self, i: usize) {
        if let Some(child) = self.started[i]
            .process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            terminate(child);
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.release();
        for i in 0..self.started.len() {
            self.kill(i);
        }
        for started in &mut self.started {
            if let Some(reader) = started.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

/// SIGTERM to the launcher's process group (mpiexec and srun pass it on), then SIGKILL
/// to whatever is left of it, then the launcher reaped. The group is signalled while the
/// launcher is not yet reaped (running, or a zombie): its id cannot be anyone else's
/// then, and an agent that outlived its launcher in the group is ended too. Returns
/// how the launcher ended, when this call reaped it.
pub(super) fn terminate(child: &mut Child) -> Option<std::process::ExitStatus> {
    if !unreaped(child) {
        return None;
    }
    let pid = child.id() as i32;
    // SAFETY: plain syscalls on the group of a child this process has not reaped.
    unsafe { libc::kill(-pid, libc::SIGTERM) };
    for _ in 0..20 {
        if exited(child) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // SAFETY: as above: the launcher is still unreaped.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    child.wait().ok()
}

/// `waitid` on the child without consuming its state: `Some(true)` once it has exited.
fn probe(child: &Child) -> Option<bool> {
    // SAFETY: siginfo_t is plain data; waitid with WNOWAIT on our own child only reads.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as above.
    let rc = unsafe { libc::waitid(libc::P_PID, child.id(), &mut info, flags) };
    // SAFETY: si_pid is set by a successful waitid (zero: no state change yet).
    (rc == 0).then(|| unsafe { info.si_pid() } != 0)
}

/// Not reaped yet (running, or exited and waiting to be reaped).
fn unreaped(child: &Child) -> bool {
    probe(child).is_some()
}

/// Exited, not reaped yet.
fn exited(child: &Child) -> bool {
    probe(child) == Some(true)
}

fn start_one(
    index: usize,
    share: &[HostTask],
    options: &AgentOptions,
    launcher: &Launcher,
    tx: Sender<Event>,
) -> Started {
    let host = share[0].name.clone();
    let mut command = launcher.command(&host, &options.agent);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group: ended as a whole, and a Ctrl-C at mqd's terminal is mqd's
    // to handle, not the agents'.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = tx.send(Event::Ended(
                index,
                format!("cannot run {}: {e}", launcher.name()),
            ));
            return Started {
                process: Arc::new(Mutex::new(None)),
                reader: None,
                release: None,
            };
        }
    };
    let task = Task {
        protocol: wire::PROTOCOL,
        mqd: MQD_VERSION.to_owned(),
        hosts: share.to_vec(),
        options: options.clone(),
        launcher: launcher.clone(),
    };
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let process = Arc::new(Mutex::new(Some(child)));
    let shared = process.clone();
    let name = launcher.name();
    let (release, released) = channel::<()>();
    let reader = std::thread::spawn(move || {
        // The task is written on a thread of its own: an agent that never reads it
        // must not hold this one. Its standard input stays open, holding its ranks
        // stopped, until the release (or the agent's end).
        let writer = stdin.map(|mut stdin| {
            std::thread::spawn(move || {
                let line = serde_json::to_string(&task).unwrap_or_default();
                let _ = stdin.write_all(line.as_bytes());
                let _ = stdin.write_all(b"\n");
                let _ = stdin.flush();
                let _ = released.recv();
            })
        });
        let errors = stderr.map(|stderr| std::thread::spawn(move || last_lines(stderr)));
        let outcome = match stdout {
            Some(stdout) => read_stream(index, &host, stdout, &tx),
            None => Err("no output".to_owned()),
        };
        let status = reap(&shared);
        let errors = errors.and_then(|e| e.join().ok()).unwrap_or_default();
        // The writer holds the input until released; the agent has ended: let it end.
        drop(writer);
        let why = match outcome {
            Ok(()) => UNREPORTED.to_owned(),
            Err(why) => {
                let mut why = format!("{why} ({name}: {status})");
                if !errors.is_empty() {
                    why.push_str(": ");
                    why.push_str(&errors.join(" | "));
                }
                why
            }
        };
        let _ = tx.send(Event::Ended(index, why));
    });
    Started {
        process,
        reader: Some(reader),
        release: Some(release),
    }
}

/// Reads an agent's stream up to its end; `Err` says why it ended otherwise.
fn read_stream(
    index: usize,
    host: &str,
    stdout: impl Read,
    tx: &Sender<Event>,
) -> Result<(), String> {
    let mut lines = BufReader::new(stdout.take(u64::MAX));
    let mut line = String::new();
    let mut greeted = false;
    loop {
        line.clear();
        let n = (&mut lines)
            .take(MAX_LINE)
            .read_line(&mut line)
            .map_err(|e| format!("its agent's output could not be read: {e}"))?;
        if n == 0 {
            return Err(if greeted {
                "its agent's output ended before every rank was reported".to_owned()
            } else {
                "no agent answered".to_owned()
            });
        }
        let record: Record = match serde_json::from_str(line.trim_end()) {
            Ok(r) => r,
            Err(_) if !greeted => {
                // Something else speaks there (a shell's banner, an old mqd without
                // agents): say what it said.
                let said: String = line.trim().chars().take(200).collect();
                return Err(format!(
                    "what answered on {host} is not an mqd agent: {said:?}"
                ));
            }
            Err(e) => return Err(format!("its agent wrote a line that is not a record: {e}")),
        };
        if !greeted {
            let Record::Hello(hello) = &record else {
                return Err(format!("the agent on {host} did not say its version first"));
            };
            check_hello(hello, host)?;
            greeted = true;
            continue;
        }
        match record {
            Record::End => return Ok(()),
            Record::Refused { why } => return Err(format!("its agent refused: {why}")),
            record => {
                if tx.send(Event::Record(index, record)).is_err() {
                    return Err("nobody reads it any more".into());
                }
            }
        }
    }
}

/// The handshake: the same protocol and the same mqd, or a clear refusal.
pub(super) fn check_hello(hello: &Hello, host: &str) -> Result<(), String> {
    if hello.protocol != wire::PROTOCOL || hello.mqd != MQD_VERSION {
        return Err(format!(
            "the mqd on {host} ({}) is version {} (agent protocol {}), this one is {MQD_VERSION} (protocol {}): install the same mqd on every host, or name it with --agent PATH",
            hello.host,
            hello.mqd,
            hello.protocol,
            wire::PROTOCOL
        ));
    }
    Ok(())
}

/// Waits a little for the launcher to exit after its output ended, then ends it.
fn reap(process: &Mutex<Option<Child>>) -> String {
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let mut guard = process.lock().unwrap_or_else(|e| e.into_inner());
        let Some(child) = guard.as_mut() else {
            return "not started".into();
        };
        match probe(child) {
            // Its group ended with it: nothing it started stays behind.
            Some(true) => {
                return terminate(child)
                    .or_else(|| child.try_wait().ok().flatten())
                    .map_or_else(|| "status unknown".into(), describe);
            }
            Some(false) if Instant::now() >= end => {
                terminate(child);
                return "ended: it did not exit after its output closed".into();
            }
            Some(false) => {}
            None => {
                return match child.try_wait() {
                    Ok(Some(status)) => describe(status),
                    Ok(None) => "status unknown".into(),
                    Err(e) => format!("status unknown: {e}"),
                };
            }
        }
        drop(guard);
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The last lines of a stream, without empty ones.
fn last_lines(stream: impl Read) -> Vec<String> {
    let mut kept = VecDeque::with_capacity(STDERR_LINES);
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        if kept.len() == STDERR_LINES {
            kept.pop_front();
        }
        kept.push_back(line.chars().take(300).collect());
    }
    kept.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Vec<HostTask> {
        (0..n)
            .map(|i| HostTask {
                name: format!("h{i}"),
                ranks: Vec::new(),
                simulated: None,
            })
            .collect()
    }

    #[test]
    fn shares_are_even_and_bounded() {
        let sizes = |n, f| -> Vec<usize> { shares(hosts(n), f).iter().map(Vec::len).collect() };
        assert_eq!(sizes(64, 32), vec![2; 32]);
        assert_eq!(sizes(5, 2), vec![3, 2]);
        assert_eq!(sizes(3, 8), vec![1, 1, 1]);
        assert!(sizes(0, 4).is_empty());
        let order: Vec<String> = shares(hosts(5), 2)
            .concat()
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(order, ["h0", "h1", "h2", "h3", "h4"]);
    }

    #[test]
    fn another_version_is_refused_with_what_to_do() {
        let hello = Hello {
            protocol: wire::PROTOCOL,
            mqd: "0.0.1".into(),
            host: "n1.cluster".into(),
            pid: 7,
        };
        let why = check_hello(&hello, "n1").expect_err("refused");
        assert!(why.contains("version 0.0.1"), "{why}");
        assert!(why.contains("--agent PATH"), "{why}");
        assert!(
            check_hello(
                &Hello {
                    mqd: MQD_VERSION.into(),
                    ..hello
                },
                "n1"
            )
            .is_ok()
        );
    }
}
