//! Counters on other hosts: `mqd agent --counters` runs on a host for as long as the
//! front end watches it (`mqd run`, the hold), because a hardware breakpoint counter
//! lives in the process that opened it. It arms the counters asked for, measures what the
//! processes asked for do (`mqd_job::activity`), reads both, reads threads' CPU time,
//! and reads ranks' hang recorder slots while they run (`mqd_job::record_watch`); it
//! never stops a rank. One JSON line per
//! request and per answer; the end of its input ends it, and its counters with it.

use super::children::{check_hello, terminate};
use super::front::RemoteOptions;
use super::launcher::Launcher;
use super::task::MQD_VERSION;
use super::wire::{self, Hello};
use mqd_debuginfo::AddressSpace;
use mqd_job::activity::Baseline;
use mqd_job::identity;
use mqd_job::record_watch::{self, RankRecords, RemoteRecords};
use mqd_job::records::Records;
use mqd_job::stay::{Readings, RemoteCounters, cpu_ticks};
use mqd_library_host::helper::Helper;
use mqd_process::live::ExecutionCounter;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Longest request or answer line.
const MAX_LINE: u64 = 1 << 26;
/// How long after a host's session failed before another is started there.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// What the front end asks.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Request {
    /// Replace the counters by ones watching each (tid, address), and measure what the
    /// processes `pids` do.
    Arm {
        points: Vec<(i32, u64)>,
        #[serde(default)]
        pids: Vec<i32>,
    },
    /// The counts of generation `generation`'s counters.
    Counts { generation: u64 },
    /// The CPU ticks of (pid, tid) threads.
    Cpu { threads: Vec<(i32, i32)> },
    /// The records of (rank, pid) ranks, read while they run.
    Records { ranks: Vec<(u32, i32)> },
}

/// What the agent answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Hello(Hello),
    Armed {
        generation: u64,
        refused: Vec<Option<String>>,
    },
    Counts(Readings),
    Cpu {
        ticks: Vec<Option<u64>>,
    },
    Records {
        ranks: Vec<RankRecords>,
    },
    Failed {
        why: String,
    },
}

/// `mqd agent --counters`: answers requests on `input` until it ends.
pub fn serve_counters(input: impl Read, out: impl Write) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(out);
    let mut say = |answer: &Answer| -> Result<(), String> {
        serde_json::to_writer(&mut out, answer)
            .map_err(|e| e.to_string())
            .and_then(|()| out.write_all(b"\n").map_err(|e| e.to_string()))
            .and_then(|()| out.flush().map_err(|e| e.to_string()))
            .map_err(|e| format!("cannot write the answers: {e}"))
    };
    say(&Answer::Hello(Hello {
        protocol: wire::PROTOCOL,
        mqd: MQD_VERSION.to_owned(),
        host: identity::this_host().unwrap_or_default(),
        pid: std::process::id(),
    }))?;
    let mut generation = 0u64;
    let mut counters: Vec<Option<ExecutionCounter>> = Vec::new();
    let mut baselines: Vec<Baseline> = Vec::new();
    // Where each process keeps its records, once found (its files parsed once).
    let mut located: HashMap<i32, Records> = HashMap::new();
    let mut lines = BufReader::new(input);
    let mut line = String::new();
    loop {
        line.clear();
        match (&mut lines).take(MAX_LINE).read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(format!("cannot read the requests: {e}")),
        }
        let answer = match serde_json::from_str::<Request>(line.trim_end()) {
            Ok(Request::Arm { points, pids }) => {
                // The old counters go first: a thread has few breakpoint registers.
                counters.clear();
                baselines = pids.into_iter().map(Baseline::start).collect();
                generation += 1;
                let mut refused = Vec::with_capacity(points.len());
                for (tid, address) in points {
                    match ExecutionCounter::first(tid, address) {
                        Ok(c) => {
                            counters.push(Some(c));
                            refused.push(None);
                        }
                        Err(e) => {
                            counters.push(None);
                            refused.push(Some(format!("perf_event_open: {e}")));
                        }
                    }
                }
                Answer::Armed {
                    generation,
                    refused,
                }
            }
            Ok(Request::Counts { generation: g }) if g == generation => Answer::Counts(Readings {
                counts: counters
                    .iter()
                    .map(|c| c.as_ref().and_then(|c| c.count().ok()))
                    .collect(),
                activity: baselines.iter().map(|b| Some(b.read())).collect(),
            }),
            Ok(Request::Counts { generation: g }) => Answer::Failed {
                why: format!("counters {g} were replaced by {generation}"),
            },
            Ok(Request::Cpu { threads }) => Answer::Cpu {
                ticks: threads
                    .iter()
                    .map(|&(pid, tid)| cpu_ticks(pid, tid))
                    .collect(),
            },
            Ok(Request::Records { ranks }) => Answer::Records {
                ranks: ranks
                    .into_iter()
                    .map(|(rank, pid)| {
                        let found = match located.get(&pid) {
                            Some(&records) => Ok(records),
                            None => {
                                let space = AddressSpace::from_pid(pid).ok();
                                record_watch::locate(rank, pid, space.as_ref())
                            }
                        };
                        if let Ok(records) = found {
                            located.insert(pid, records);
                        }
                        record_watch::read_rank(rank, pid, &found)
                    })
                    .collect(),
            },
            Err(e) => Answer::Failed {
                why: format!("not a request: {e}"),
            },
        };
        say(&answer)?;
    }
}

/// When and why a host's session failed.
type Failed = (Instant, String);

/// One host's agent, as the front end holds it.
struct Session {
    child: Child,
    input: ChildStdin,
    answers: Receiver<String>,
}

impl Session {
    fn start(
        launcher: &Launcher,
        agent: &Helper,
        host: &str,
        wait: Duration,
    ) -> Result<Session, String> {
        let mut counters = agent.clone();
        counters.args.push("--counters".into());
        let mut command = launcher.command(host, &counters);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // Its own group: ended as a whole, and not by a Ctrl-C meant for mqd.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", launcher.name()))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            terminate(&mut child);
            return Err("no pipes to the agent".into());
        };
        let (tx, answers) = channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(output);
            loop {
                let mut line = String::new();
                match (&mut lines).take(MAX_LINE).read_line(&mut line) {
                    Ok(n) if n > 0 && tx.send(line).is_ok() => {}
                    _ => return,
                }
            }
        });
        let mut session = Session {
            child,
            input,
            answers,
        };
        match session.receive(wait) {
            Ok(Answer::Hello(hello)) => check_hello(&hello, host).map(|()| session),
            Ok(_) => Err(format!("the agent on {host} did not say its version first")),
            Err(why) => Err(why),
        }
    }

    fn receive(&mut self, wait: Duration) -> Result<Answer, String> {
        let line = self.answers.recv_timeout(wait).map_err(|e| match e {
            RecvTimeoutError::Timeout => format!(
                "no answer within {} s (--agent-timeout)",
                wait.as_secs_f64()
            ),
            RecvTimeoutError::Disconnected => "its agent ended without answering".to_owned(),
        })?;
        serde_json::from_str(line.trim_end()).map_err(|_| {
            let said: String = line.trim().chars().take(200).collect();
            format!("what answered is not an mqd agent: {said:?}")
        })
    }

    fn ask(&mut self, request: &Request, wait: Duration) -> Result<Answer, String> {
        let mut line = serde_json::to_string(request).map_err(|e| e.to_string())?;
        line.push('\n');
        self.input
            .write_all(line.as_bytes())
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("the agent went away: {e}"))?;
        self.receive(wait)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// The counters of the hosts a front end watches: one `mqd agent --counters` per
/// host, started through the job's launcher when the host is first asked for, kept
/// until this is dropped. A host whose agent failed is tried again a minute later.
pub struct HostCounters {
    launcher: Launcher,
    agent: Helper,
    wait: Duration,
    sessions: Mutex<HashMap<String, Result<Session, Failed>>>,
}

impl HostCounters {
    /// Counters reached as `options` reaches hosts.
    pub fn new(options: &RemoteOptions) -> HostCounters {
        HostCounters {
            launcher: options.launcher.clone(),
            agent: options.agent.clone(),
            wait: Duration::from_secs_f64(options.timeout.max(1.0)),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// `request` to `host`'s agent, started if need be; a failed exchange ends the
    /// session (its counters with it), a refusal does not.
    fn ask(&self, host: &str, request: &Request) -> Result<Answer, String> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let retry = match sessions.get(host) {
            None => true,
            Some(Err((when, _))) => when.elapsed() >= RETRY_AFTER,
            Some(Ok(_)) => false,
        };
        if retry {
            let started = Session::start(&self.launcher, &self.agent, host, self.wait)
                .map_err(|why| (Instant::now(), why));
            sessions.insert(host.to_owned(), started);
        }
        let entry = sessions.get_mut(host).expect("inserted above");
        let session = entry.as_mut().map_err(|(_, why)| why.clone())?;
        match session.ask(request, self.wait) {
            // The agent is there and said why: the session goes on.
            Ok(Answer::Failed { why }) => Err(why),
            Ok(answer) => Ok(answer),
            // A lost or late answer would answer the next request: the session ends.
            Err(why) => {
                *entry = Err((Instant::now(), why.clone()));
                Err(why)
            }
        }
    }
}

impl RemoteCounters for HostCounters {
    fn arm(
        &self,
        host: &str,
        points: &[(i32, u64)],
        pids: &[i32],
    ) -> Result<(u64, Vec<Option<String>>), String> {
        match self.ask(
            host,
            &Request::Arm {
                points: points.to_vec(),
                pids: pids.to_vec(),
            },
        )? {
            Answer::Armed {
                generation,
                refused,
            } => Ok((generation, refused)),
            _ => Err(format!("the agent on {host} answered something else")),
        }
    }

    fn counts(&self, host: &str, generation: u64) -> Result<Readings, String> {
        match self.ask(host, &Request::Counts { generation })? {
            Answer::Counts(readings) => Ok(readings),
            _ => Err(format!("the agent on {host} answered something else")),
        }
    }

    fn cpu(&self, host: &str, threads: &[(i32, i32)]) -> Result<Vec<Option<u64>>, String> {
        match self.ask(
            host,
            &Request::Cpu {
                threads: threads.to_vec(),
            },
        )? {
            Answer::Cpu { ticks } => Ok(ticks),
            _ => Err(format!("the agent on {host} answered something else")),
        }
    }
}

impl RemoteRecords for HostCounters {
    fn records(&self, host: &str, ranks: &[(u32, i32)]) -> Result<Vec<RankRecords>, String> {
        match self.ask(
            host,
            &Request::Records {
                ranks: ranks.to_vec(),
            },
        )? {
            Answer::Records { ranks } => Ok(ranks),
            _ => Err(format!("the agent on {host} answered something else")),
        }
    }
}

#[cfg(test)]
mod tests;
