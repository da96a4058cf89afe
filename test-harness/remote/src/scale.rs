//! Jobs at scale kept as classes: the front end takes the agents' merged classes as they
//! are, rebuilding only the first and last member of each ([`ClassJob`]), never every
//! rank. A simulated job ([`simulate`](crate::simulate)) goes through the same launcher,
//! agents and relays as a real one.

use super::children::{Children, shares};
use super::front::{Collected, RemoteOptions, collect};
use super::merge::Merger;
use super::simulate::Simulation;
use super::task::AgentOptions;
use super::wire::{Decoder, Encoder, HostRuns, PidRuns, RanksRecord, Record, StreamError};
use mqd_job::cut::CutPoint;
use mqd_library_host::helper::Helper;
use mqd_model::{
    Acquisition, ClassJob, FailedRanks, GroupTable, JobDump, LibraryInfo, RankClass, RankDump,
    RankSet, Snapshot, UnrankedProcess,
};
use std::time::{Duration, Instant};

/// What this process has cost since it started (its agents' is theirs).
#[derive(Debug, Clone, Copy)]
pub struct OwnCost {
    /// CPU seconds, user and system.
    pub cpu: f64,
    /// Peak resident set, MB.
    pub peak_mb: f64,
}

impl OwnCost {
    /// Now.
    pub fn now() -> OwnCost {
        // SAFETY: getrusage fills the struct it is given.
        let u = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut u);
            u
        };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        OwnCost {
            cpu: seconds(u.ru_utime) + seconds(u.ru_stime),
            peak_mb: u.ru_maxrss as f64 / 1024.0,
        }
    }
}

/// Runs the simulated job `job` through agents started as `remote` says (each standing
/// for a share of its hosts) and returns it as classes.
pub fn simulate_job(job: &Simulation, remote: &RemoteOptions, stop: &dyn Fn() -> bool) -> ClassJob {
    let hosts = job.hosts();
    let options = AgentOptions {
        stacks: true,
        python_frames: false,
        dll: None,
        dll_name: None,
        job_size: Some(job.ranks),
        timeout: remote.timeout,
        fanout: remote.fanout,
        agent: Helper::new(remote.agent.program.clone(), &["agent"]),
        no_cache: true,
        job_library: false,
        openmp: false,
        ompd: None,
    };
    let deadline = Instant::now() + Duration::from_secs_f64(remote.timeout);
    let mut children = Children::start(
        shares(hosts.clone(), remote.fanout),
        &options,
        &remote.launcher,
    );
    let cut = CutPoint::new();
    cut.stopped();
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    let got = collect(&mut children, deadline, remote.timeout, stop, &cut, &names);
    cut.release();
    drop(children);
    // Each host's ranks as a range: a set each would cost the job's size per host.
    let ranges: Vec<(String, std::ops::Range<u32>)> = hosts
        .iter()
        .filter_map(|h| {
            let s = h.simulated?;
            Some((h.name.clone(), s.first..s.first + s.count))
        })
        .collect();
    class_job(got, job.ranks, &ranges)
}

/// The classes of what the agents reported; every rank of `hosts` (each host's name and
/// ranks) that no class holds failed, with its host's reason.
fn class_job(mut got: Collected, size: u32, hosts: &[(String, std::ops::Range<u32>)]) -> ClassJob {
    let host_names = std::mem::take(&mut got.host_names);
    let name = |h: u32| host_names.get(h as usize).cloned().unwrap_or_default();
    let decoded = decode_classes(std::mem::take(&mut got.merger), &name);
    for (host, e) in decoded.corrupt {
        got.failed
            .entry(name(host))
            .or_insert(format!("its agent's stream is corrupt: {e}"));
    }
    let (classes, unranked) = (decoded.classes, decoded.unranked);
    let mut reported = RankSet::new();
    for c in &classes {
        reported.union_with(&c.ranks);
    }
    let mut failed: Vec<FailedRanks> = Vec::new();
    for (host, ranks) in hosts {
        let lost: RankSet = ranks.clone().filter(|&r| !reported.contains(r)).collect();
        if lost.is_empty() {
            continue;
        }
        let why = got
            .failed
            .get(host)
            .cloned()
            .unwrap_or_else(|| "its agent did not report them".into());
        let why = format!("on host {host}: {why}");
        FailedRanks::add_to(&mut failed, &lost, &why, None);
    }
    ClassJob {
        dll: got.library.take().unwrap_or_else(|| LibraryInfo {
            path: String::new(),
            version: "simulated".into(),
            note: None,
        }),
        // Simulated ranks are named by the simulation, as attached pids would be.
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
        size,
        classes,
        failed,
        unranked,
        snapshot: match got.broken.take() {
            Some(why) => Snapshot::Separate { why },
            None => Snapshot::One,
        },
    }
}

/// The classes of merged lines.
pub(super) struct Decoded {
    pub(super) classes: Vec<RankClass>,
    /// Processes without a COMM_WORLD rank.
    pub(super) unranked: Vec<UnrankedProcess>,
    /// Hosts whose lines could not be decoded, and why.
    pub(super) corrupt: Vec<(u32, StreamError)>,
}

/// The classes of `merger`'s lines, each with its first and last members rebuilt.
pub(super) fn decode_classes(merger: Merger, name: &dyn Fn(u32) -> String) -> Decoded {
    let mut decoder = Decoder::new();
    let mut groups = GroupTable::new();
    let mut out = Decoded {
        classes: Vec::new(),
        unranked: Vec::new(),
        corrupt: Vec::new(),
    };
    for record in merger.records(0) {
        match record {
            Record::State(s) => decoder.add_state(s),
            Record::Ranks(line) if line.ranks.is_empty() => match decoder.ranks(&line, name) {
                Ok(dumps) => out
                    .unranked
                    .extend(dumps.into_iter().map(|d| UnrankedProcess {
                        pid: d.pid,
                        error: d.outcome.err(),
                    })),
                Err(e) => out.corrupt.push((line.host, e)),
            },
            Record::Ranks(line) => match class_of(&decoder, &line, name) {
                Ok(mut class) => {
                    // Groups held once for every class.
                    for d in std::iter::once(&mut class.first).chain(class.last.as_mut()) {
                        if let Ok(comms) = &mut d.outcome {
                            groups.share_all(comms);
                        }
                    }
                    out.classes.push(class)
                }
                Err(e) => out.corrupt.push((line.host, e)),
            },
            _ => {}
        }
    }
    out
}

/// The classes of a job whose every rank is here, as its agents would send them (host
/// by host) and the front end would merge them: for the class analysis of a job already
/// in memory, and to hold it to the per-rank analysis. Ranks whose queues could not be
/// read, and that have no stack, are the job's failed ranks, with their errors.
pub fn classes_of(job: &JobDump) -> Result<ClassJob, StreamError> {
    let mut host_names: Vec<String> = Vec::new();
    let mut by_host: Vec<Vec<RankDump>> = Vec::new();
    for r in job.ranks.iter().filter(|r| !r.duplicate) {
        let host = r.host.clone().unwrap_or_default();
        let i = match host_names.iter().position(|h| *h == host) {
            Some(i) => i,
            None => {
                host_names.push(host);
                by_host.push(Vec::new());
                host_names.len() - 1
            }
        };
        by_host[i].push(r.clone());
    }
    let mut merger = Merger::new();
    for (i, dumps) in by_host.iter().enumerate() {
        for record in Encoder::new().encode(i as u32, dumps)? {
            match record {
                Record::State(s) => merger.add_state(i, s),
                Record::Ranks(line) => merger.add_line(i, line)?,
                _ => {}
            }
        }
    }
    let name = |h: u32| host_names.get(h as usize).cloned().unwrap_or_default();
    let decoded = decode_classes(merger, &name);
    if let Some((_, e)) = decoded.corrupt.into_iter().next() {
        return Err(e);
    }
    let (failed, classes): (Vec<RankClass>, Vec<RankClass>) = decoded
        .classes
        .into_iter()
        .partition(|c| c.first.outcome.is_err() && c.first.threads.is_empty());
    let failed = failed
        .into_iter()
        .map(|c| FailedRanks {
            pid: if c.ranks.len() == 1 {
                c.first.pid
            } else {
                None
            },
            why: c.first.outcome.err().unwrap_or_default(),
            ranks: c.ranks,
        })
        .collect();
    Ok(ClassJob::of_job(job, classes, failed, decoded.unranked))
}

/// A class from a merged line: its ranks, its first and last members rebuilt.
fn class_of(
    decoder: &Decoder,
    line: &RanksRecord,
    name: &dyn Fn(u32) -> String,
) -> Result<RankClass, StreamError> {
    let count = line.ranks.len();
    if line.pids.len() != count || (!line.hosts.is_empty() && line.hosts.len() != count) {
        return Err(StreamError::Lengths {
            ranks: count,
            other: line.pids.len(),
            what: "pids",
        });
    }
    let member = |index: usize, rank: u32| -> Result<RankDump, StreamError> {
        let host = line.hosts.iter().nth(index).unwrap_or(line.host);
        let one = RanksRecord {
            host,
            state: line.state,
            ranks: RankSet::single(rank),
            pids: [line.pids.iter().nth(index).flatten()]
                .into_iter()
                .collect::<PidRuns>(),
            hosts: HostRuns::default(),
            delta: line.delta.clone(),
            slides: line.slides.get(index).cloned().into_iter().collect(),
        };
        decoder
            .ranks(&one, name)?
            .pop()
            .ok_or(StreamError::FewerDifferences)
    };
    let first_rank = line.ranks.first().ok_or(StreamError::FewerDifferences)?;
    let last_rank = line.ranks.last().ok_or(StreamError::FewerDifferences)?;
    Ok(RankClass {
        first: member(0, first_rank)?,
        last: (count > 1)
            .then(|| member(count - 1, last_rank))
            .transpose()?,
        ranks: line.ranks.clone(),
    })
}
