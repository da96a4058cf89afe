//! `mqd agent`: dump this host's ranks and stream them; relay for the hosts below.

use super::children::{Children, Event, shares};
use super::merge::Merger;
use super::simulate::{self, SimulatedHost};
use super::task::{AgentOptions, HostTask, MQD_VERSION, Task};
use super::wire::{self, Encoder, Hello, HostRecord, Record};
use mqd_job::cut::CutPoint;
use mqd_job::dump::{self, JobContext, Quiet};
use mqd_job::identity;
use mqd_job::process_ref::ProcessRef;
use mqd_library_host::helper::Helper;
use mqd_model::Acquisition;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest task a front end may send.
const MAX_TASK: u64 = 1 << 28;

/// Serves one task: says hello on `out`, reads the task from `input`, stops the first
/// host's ranks (all at once), says so, dumps them, relays for the other hosts, and holds
/// its ranks until the front end closes `input` (every host stopped: one consistent cut)
/// or the task's time is up; then lets them go as they were and ends the stream. `Err`
/// is why it stopped early (said on `out` when it still can). It never leaves a rank
/// stopped: a closed output or input, or the deadline, lets them go.
pub fn serve(
    input: impl Read + Send + 'static,
    out: impl Write,
    stop: &dyn Fn() -> bool,
    library_host: Option<Helper>,
) -> Result<(), String> {
    let start = Instant::now();
    let mut out = Stream(std::io::BufWriter::new(out));
    out.send(&Record::Hello(Hello {
        protocol: wire::PROTOCOL,
        mqd: MQD_VERSION.to_owned(),
        host: identity::this_host().unwrap_or_default(),
        pid: std::process::id(),
    }))?;
    out.flush()?;
    let mut input = BufReader::new(input.take(MAX_TASK));
    let task = match read_task(&mut input) {
        Ok(task) => task,
        Err(why) => {
            out.send(&Record::Refused { why: why.clone() })?;
            out.flush()?;
            return Err(why);
        }
    };
    let deadline = start + Duration::from_secs_f64(task.options.timeout);
    // The front end closes the input once every host has stopped its ranks: the cut.
    let cut = Arc::new(CutPoint::new());
    {
        let cut = cut.clone();
        std::thread::spawn(move || {
            let mut rest = Vec::new();
            let _ = input.into_inner().read_to_end(&mut rest);
            cut.release();
        });
    }
    let mut hosts = task.hosts.into_iter();
    let Some(own) = hosts.next() else {
        out.send(&Record::End)?;
        return out.flush();
    };
    let rest: Vec<HostTask> = hosts.collect();
    let ids: HashMap<String, u32> = std::iter::once(&own)
        .chain(&rest)
        .enumerate()
        .map(|(i, h)| (h.name.clone(), i as u32))
        .collect();
    for (i, host) in std::iter::once(&own).chain(&rest).enumerate() {
        out.send(&Record::Host(HostRecord {
            id: i as u32,
            name: host.name.clone(),
            agent_host: (i == 0).then(identity::this_host).flatten(),
        }))?;
    }
    out.flush()?;
    // Agents below leave a margin to be reported before this one's own time is up.
    let mut below = task.options.clone();
    below.timeout = (below.timeout - 2.0).max(1.0);
    let mut children = (!rest.is_empty())
        .then(|| Children::start(shares(rest, task.options.fanout), &below, &task.launcher));
    let options = task.options.clone();
    std::thread::scope(|scope| {
        let dumping = scope.spawn(|| match &own.simulated {
            Some(host) => simulated_own(host, &cut),
            None => dump_own(&own, &options, &cut, deadline, library_host),
        });
        // This host's ranks are stopped (or none could be): say so at once.
        cut.wait_stopped(deadline);
        out.send(&Record::Stopped { host: 0 })?;
        out.flush()?;
        let mut merger = Merger::new();
        if let Some(children) = &mut children {
            relay(
                children,
                &ids,
                &mut out,
                &mut merger,
                deadline,
                task.options.timeout,
                stop,
                &cut,
            )?;
        }
        let own_records = dumping
            .join()
            .map_err(|_| "this host's dump failed unexpectedly".to_owned())??;
        // This host's ranks join the classes of the hosts below.
        let own = usize::MAX;
        let mut rest = Vec::new();
        for record in own_records {
            match record {
                Record::State(s) => merger.add_state(own, s),
                Record::Ranks(r) => merger
                    .add_line(own, r)
                    .map_err(|e| format!("this host's ranks could not be merged: {e}"))?,
                other => rest.push(other),
            }
        }
        for record in merger.records(0).into_iter().chain(rest) {
            out.send(&record)?;
        }
        out.send(&Record::End)?;
        out.flush()
    })
}

fn read_task(input: &mut impl BufRead) -> Result<Task, String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the task: {e}"))?;
    // The version first: another version's task may not parse as this one's.
    #[derive(serde::Deserialize)]
    struct Version {
        protocol: u32,
        mqd: String,
    }
    let not_a_task = |e: serde_json::Error| format!("not a task from an mqd front end: {e}");
    let version: Version = serde_json::from_str(line.trim_end()).map_err(not_a_task)?;
    if version.protocol != wire::PROTOCOL || version.mqd != MQD_VERSION {
        return Err(format!(
            "this mqd is version {MQD_VERSION} (agent protocol {}), the front end's is {} (protocol {}): install the same mqd on every host, or name it with --agent PATH",
            wire::PROTOCOL,
            version.mqd,
            version.protocol
        ));
    }
    serde_json::from_str(line.trim_end()).map_err(not_a_task)
}

/// The agent's standard output, one record per line.
struct Stream<W: Write>(W);

impl<W: Write> Stream<W> {
    fn send(&mut self, record: &Record) -> Result<(), String> {
        serde_json::to_writer(&mut self.0, record)
            .map_err(|e| format!("cannot write the stream: {e}"))?;
        self.0
            .write_all(b"\n")
            .map_err(|e| format!("cannot write the stream: {e}"))
    }

    fn flush(&mut self) -> Result<(), String> {
        self.0
            .flush()
            .map_err(|e| format!("cannot write the stream: {e}"))
    }
}

/// The records of a simulated host: no process to stop or read.
fn simulated_own(host: &SimulatedHost, cut: &CutPoint) -> Result<Vec<Record>, String> {
    cut.stopped();
    let mut records =
        simulate::records(host).map_err(|e| format!("cannot encode the simulated ranks: {e}"))?;
    records.push(Record::HostDone {
        host: 0,
        job_size: Some(host.job.ranks),
    });
    Ok(records)
}

/// Dumps this host's ranks, held until `cut` is released (or `deadline`), and returns
/// the records that report them; every one is let go by the time this returns.
fn dump_own(
    own: &HostTask,
    options: &AgentOptions,
    cut: &Arc<CutPoint>,
    deadline: Instant,
    library_host: Option<Helper>,
) -> Result<Vec<Record>, String> {
    let processes: Vec<ProcessRef> = own
        .ranks
        .iter()
        .map(|r| ProcessRef {
            rank: Some(r.rank),
            pid: r.pid,
            // This host: the agent runs where the table says they are.
            host: None,
            executable: r.executable.clone(),
        })
        .collect();
    let context = JobContext {
        stacks: options.stacks,
        python_frames: options.python_frames,
        dll_name: options.dll_name.clone(),
        job_size: options.job_size,
        job_library: options.job_library,
        // A foreign library runs isolated here too, as the binary says; an OMPD library
        // in a child of the same binary.
        openmp: options.openmp.then(|| mqd_ompd_host::OmpdOptions {
            library: options.ompd.clone(),
            isolation: mqd_library_host::isolation::Isolation::Always,
            helper: library_host
                .as_ref()
                .map(|h| Helper::new(h.program.clone(), &["ompd-host"])),
        }),
        library_host,
        cut: Some(cut.clone()),
        cut_deadline: Some(deadline),
        type_cache: if options.no_cache {
            None
        } else {
            mqd_debuginfo::memo::default_directory()
        },
        ..JobContext::new(Acquisition::Mpir)
    };
    let dumped = dump::dump_processes(&processes, options.dll.as_deref(), &context, &Quiet);
    // A dump that failed before it stopped anything holds nothing.
    cut.stopped();
    let (ranks, library, job_size, separate) = match dumped {
        Ok(job) => {
            let separate = !job.snapshot.is_one();
            (job.ranks, Some(job.dll), job.job_size, separate)
        }
        // Not one rank could be dumped: each says why.
        Err(f) => (
            processes
                .iter()
                .map(|p| {
                    let p = ProcessRef {
                        executable: None,
                        ..p.clone()
                    };
                    dump::not_dumped(&p, f.cause.clone())
                })
                .collect(),
            None,
            None,
            false,
        ),
    };
    let mut records = Vec::new();
    if let Some(library) = library.filter(|l| !l.path.is_empty()) {
        records.push(Record::Library { host: 0, library });
    }
    records.extend(
        Encoder::new()
            .encode(0, &ranks)
            .map_err(|e| format!("cannot encode this host's ranks: {e}"))?,
    );
    if separate {
        // Let go before every host was stopped: its ranks were seen apart.
        records.push(Record::HostFailed {
            host: 0,
            why:
                "its agent let its ranks go before every host had stopped its own (--agent-timeout)"
                    .into(),
        });
    } else {
        records.push(Record::HostDone { host: 0, job_size });
    }
    Ok(records)
}

/// Forwards the streams of the agents below into this one, their hosts renumbered and
/// their ranks kept in `merger` (sent once merged); a host an agent below did not finish
/// is reported failed, and so is one whose ranks do not read.
#[allow(clippy::too_many_arguments)]
fn relay<W: Write>(
    children: &mut Children,
    ids: &HashMap<String, u32>,
    out: &mut Stream<W>,
    merger: &mut Merger,
    deadline: Instant,
    timeout: f64,
    stop: &dyn Fn() -> bool,
    cut: &CutPoint,
) -> Result<(), String> {
    let shares = children.share_names();
    let mut hosts: HashMap<(usize, u32), u32> = HashMap::new();
    let mut done: HashSet<u32> = HashSet::new();
    let mut result = Ok(());
    let mut released = false;
    children.pump(deadline, timeout, stop, |children, event| {
        // The front end let this agent's ranks go: the agents below may let theirs go.
        if !released && cut.wait_release(Instant::now()) {
            released = true;
            children.release();
        }
        let Some(event) = event else { return };
        if result.is_err() {
            return;
        }
        let sent = match event {
            Event::Record(child, record) => {
                let host =
                    |hosts: &HashMap<(usize, u32), u32>, id: u32| hosts.get(&(child, id)).copied();
                match record {
                    Record::Host(h) => match ids.get(&h.name) {
                        Some(&id) => {
                            hosts.insert((child, h.id), id);
                            out.send(&Record::Host(HostRecord { id, ..h }))
                        }
                        None => Ok(()),
                    },
                    Record::State(s) => {
                        merger.add_state(child, s);
                        Ok(())
                    }
                    Record::Ranks(mut r) => {
                        let renumbered = host(&hosts, r.host).and_then(|h| {
                            r.host = h;
                            r.hosts.renumber(|x| host(&hosts, x))
                        });
                        let at = r.host;
                        let merged = match renumbered {
                            Some(()) => merger.add_line(child, r),
                            None => Ok(()),
                        };
                        match merged {
                            Err(e) if done.insert(at) => out.send(&Record::HostFailed {
                                host: at,
                                why: format!("its agent's stream is corrupt: {e}"),
                            }),
                            _ => Ok(()),
                        }
                    }
                    Record::Library { host: h, library } => match host(&hosts, h) {
                        Some(h) => out.send(&Record::Library { host: h, library }),
                        None => Ok(()),
                    },
                    Record::HostDone { host: h, job_size } => match host(&hosts, h) {
                        Some(h) => {
                            done.insert(h);
                            out.send(&Record::HostDone { host: h, job_size })
                        }
                        None => Ok(()),
                    },
                    Record::HostFailed { host: h, why } => match host(&hosts, h) {
                        Some(h) => {
                            done.insert(h);
                            out.send(&Record::HostFailed { host: h, why })
                        }
                        None => Ok(()),
                    },
                    Record::Stopped { host: h } => match host(&hosts, h) {
                        Some(h) => out.send(&Record::Stopped { host: h }),
                        None => Ok(()),
                    },
                    Record::Hello(_) | Record::Refused { .. } | Record::End => Ok(()),
                }
            }
            Event::Ended(child, why) => {
                let mut sent = Ok(());
                for name in &shares[child] {
                    let id = ids[name];
                    if done.insert(id) {
                        sent = sent.and(out.send(&Record::HostFailed {
                            host: id,
                            why: why.clone(),
                        }));
                    }
                }
                sent
            }
        };
        result = sent.and_then(|()| out.flush());
    });
    result
}
