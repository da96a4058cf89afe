//! The classes of merged lines: each class's ranks with its first and last members
//! rebuilt, never every rank; for the front end of a real job or a simulated one, and for
//! a job already in memory.

use super::merge::Merger;
use super::wire::{Decoder, Encoder, HostRuns, PidRuns, RanksRecord, Record, StreamError};
use mqd_model::{
    ClassJob, FailedRanks, GroupTable, JobDump, RankClass, RankDump, RankSet, UnrankedProcess,
};

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
/// in memory, and to hold merged classes to its ranks each a class of one. Ranks whose queues could not be
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
