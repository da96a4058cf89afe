//! A job's records read while its ranks run, never stopping them: for each rank, each
//! thread's count of MPI calls entered and the call it is in (the hang recorder's
//! slots, by `process_vm_readv`) and the CPU time each thread used (`/proc`); a rank on
//! another host read there by the agent the front end keeps on it ([`RemoteRecords`]).
//! Each rank's slots are read twice: a slot written between the two reads is seen
//! changing, never believed torn.

use crate::acquire::Job;
use crate::activity::{cpu_ticks, tasks};
use crate::records::Records;
use mqd_debuginfo::AddressSpace;
use mqd_process::live::RunningMemory;
use mqd_recording::ThreadRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ranks of a job whose records can be read while it runs.
#[derive(Debug, Clone)]
pub struct RecordWatch {
    /// (rank, pid, where its records are) of this host's ranks, by rank.
    here: Vec<(u32, i32, Records)>,
    /// Other hosts' ranks, (rank, pid) by host.
    there: BTreeMap<String, Vec<(u32, i32)>>,
}

/// Reads records on other hosts, through the agent the front end keeps on each.
pub trait RemoteRecords {
    /// What each of `host`'s ranks (rank, pid) shows now, in that order.
    fn records(&self, host: &str, ranks: &[(u32, i32)]) -> Result<Vec<RankRecords>, String>;
}

/// What an agent answers of one rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankRecords {
    /// Its records now.
    Sample(RankSample),
    /// Why they cannot be read, not yet ([`NotRecorded::Yet`]) or never.
    Not {
        /// Never (it calls the MPI past the recorder).
        never: bool,
        /// Why.
        why: String,
    },
}

/// A thread's slot as a watch compares it: it changes whenever the thread enters or
/// leaves a call (a call entered is counted; one left is no longer in the slot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// Caught mid-write: the thread is entering or leaving a call.
    Torn,
    /// Read whole: the calls it entered, and the one it is in.
    Whole {
        /// MPI calls entered.
        calls: u64,
        /// The call in progress, by name.
        call: Option<String>,
    },
}

impl Slot {
    /// The slot of `record`.
    pub fn of(record: &ThreadRecord) -> Slot {
        match record {
            ThreadRecord::Torn { .. } => Slot::Torn,
            ThreadRecord::Whole { calls, call, .. } => Slot::Whole {
                calls: *calls,
                call: call.as_ref().map(|c| c.name.clone()),
            },
        }
    }

    /// The call it is in, read whole.
    pub fn call(&self) -> Option<&str> {
        match self {
            Slot::Whole { call, .. } => call.as_deref(),
            Slot::Torn => None,
        }
    }
}

/// What one thread showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSeen {
    /// Its slot (`None`: it has made no MPI call the recorder saw).
    pub record: Option<Slot>,
    /// Its CPU time, in clock ticks (`None`: not read).
    pub cpu: Option<u64>,
}

/// What one rank showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankSample {
    /// Its process.
    pub pid: i32,
    /// Its threads, by thread id.
    pub threads: BTreeMap<i32, ThreadSeen>,
    /// Its slots differed between the two reads: a thread entered or left a call.
    pub changing: bool,
}

/// Why a job is not watched through its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRecorded {
    /// Not yet, or not in this job: a rank is not seen, or has no records (not started,
    /// or started without the recorder).
    Yet(String),
    /// Never: a rank runs on another host, or calls the MPI past the recorder.
    Never(String),
}

/// A job's ranks as one sample showed them, by rank.
pub type JobSample = BTreeMap<u32, RankSample>;

impl RecordWatch {
    /// The ranks of `job` (`space` gives each one's address space), if every rank has
    /// the hang recorder loaded and no object it loads calls the MPI past it (Open MPI's
    /// Fortran bindings), each read here or, on another host, by its agent (`remote`);
    /// else why not.
    pub fn find<'a>(
        job: &Job,
        mut space: impl FnMut(i32) -> Option<&'a AddressSpace>,
        remote: Option<&dyn RemoteRecords>,
    ) -> Result<RecordWatch, NotRecorded> {
        let here = crate::identity::this_host();
        let size = job.size.unwrap_or(job.ranks.len() as u32);
        let mut watch = RecordWatch {
            here: Vec::new(),
            there: BTreeMap::new(),
        };
        let mut seen = Vec::new();
        for r in &job.ranks {
            let rank = u32::try_from(r.rank).map_err(|_| {
                NotRecorded::Yet(format!("a process of unknown rank (pid {})", r.pid))
            })?;
            seen.push(rank);
            if here.as_deref() != Some(r.host.as_str()) && !r.host.is_empty() {
                if remote.is_none() {
                    return Err(NotRecorded::Never(format!(
                        "rank {rank} runs on {}, where no agent reads it",
                        r.host
                    )));
                }
                watch
                    .there
                    .entry(r.host.clone())
                    .or_default()
                    .push((rank, r.pid));
                continue;
            }
            let records = locate(rank, r.pid, space(r.pid))?;
            watch.here.push((rank, r.pid, records));
        }
        seen.sort_unstable();
        seen.dedup();
        if seen.len() as u32 != size || seen.last().is_some_and(|&r| r + 1 != size) {
            return Err(NotRecorded::Yet(format!(
                "{} of the job's {size} ranks are seen",
                seen.len()
            )));
        }
        watch.here.sort_by_key(|&(rank, ..)| rank);
        watch.here.dedup_by_key(|&mut (rank, ..)| rank);
        // Each other host's agent finds its ranks' records, or says why not.
        if let Some(remote) = remote {
            for (host, ranks) in &watch.there {
                let answers = remote.records(host, ranks).map_err(|e| {
                    NotRecorded::Never(format!("the agent on {host} cannot read records: {e}"))
                })?;
                for answer in answers {
                    match answer {
                        RankRecords::Sample(_) => {}
                        RankRecords::Not { never: true, why } => {
                            return Err(NotRecorded::Never(why));
                        }
                        RankRecords::Not { never: false, why } => {
                            return Err(NotRecorded::Yet(why));
                        }
                    }
                }
            }
        }
        Ok(watch)
    }

    /// The ranks watched: (rank, pid, host: `None` for this one), by rank.
    pub fn ranks(&self) -> Vec<(u32, i32, Option<&str>)> {
        let mut all: Vec<_> = self
            .here
            .iter()
            .map(|&(rank, pid, _)| (rank, pid, None))
            .collect();
        for (host, ranks) in &self.there {
            all.extend(
                ranks
                    .iter()
                    .map(|&(rank, pid)| (rank, pid, Some(host.as_str()))),
            );
        }
        all.sort_by_key(|&(rank, ..)| rank);
        all
    }

    /// Every rank now (those of other hosts through `remote`), or why a rank cannot be
    /// read (it ended, its region is damaged, its agent failed).
    pub fn sample(&self, remote: Option<&dyn RemoteRecords>) -> Result<JobSample, String> {
        let mut job = JobSample::new();
        for &(rank, pid, records) in &self.here {
            job.insert(rank, sample_rank(rank, pid, records)?);
        }
        for (host, ranks) in &self.there {
            let remote = remote.ok_or_else(|| format!("no agent reads {host}"))?;
            let answers = remote.records(host, ranks)?;
            if answers.len() != ranks.len() {
                return Err(format!("the agent on {host} answered for other ranks"));
            }
            for (&(rank, _), answer) in ranks.iter().zip(answers) {
                match answer {
                    RankRecords::Sample(sample) => job.insert(rank, sample),
                    RankRecords::Not { why, .. } => return Err(why),
                };
            }
        }
        Ok(job)
    }
}

/// Where rank `rank` (process `pid`, `space` its address space) keeps its records, if
/// it has them and loads nothing that calls the MPI past them.
pub fn locate(rank: u32, pid: i32, space: Option<&AddressSpace>) -> Result<Records, NotRecorded> {
    let records = space
        .and_then(Records::of)
        .ok_or_else(|| NotRecorded::Yet(format!("rank {rank} (pid {pid}) has no records")))?;
    // Calls made past the recorder would look like computing, or like nothing.
    if let Some((object, name)) = space.and_then(crate::stacks::bypassing) {
        return Err(NotRecorded::Never(format!(
            "rank {rank} loads {object}, which calls the MPI's {name} itself: the records miss those calls"
        )));
    }
    Ok(records)
}

/// What rank `rank` (process `pid`, on this host, its records where [`locate`] found
/// them) shows now, for an agent's answer.
pub fn read_rank(rank: u32, pid: i32, located: &Result<Records, NotRecorded>) -> RankRecords {
    match located {
        Ok(records) => match sample_rank(rank, pid, *records) {
            Ok(sample) => RankRecords::Sample(sample),
            Err(why) => RankRecords::Not { never: false, why },
        },
        Err(NotRecorded::Yet(why)) => RankRecords::Not {
            never: false,
            why: why.clone(),
        },
        Err(NotRecorded::Never(why)) => RankRecords::Not {
            never: true,
            why: why.clone(),
        },
    }
}

/// One rank now: its threads (from `/proc`), their CPU times and their slots.
fn sample_rank(rank: u32, pid: i32, records: Records) -> Result<RankSample, String> {
    let memory = RunningMemory::of(pid);
    let read = || {
        records
            .read_threads(&memory)
            .map(|(_, _, threads)| threads)
            .map_err(|e| format!("rank {rank}'s records cannot be read: {e}"))
    };
    let first = read()?;
    let tids = tasks(std::path::Path::new("/"), pid);
    if tids.is_empty() {
        return Err(format!("rank {rank} (pid {pid}) has ended"));
    }
    let second = read()?;
    // The slots in table order, alike in both reads unless one was written between.
    let changing = first != second;
    let slots: BTreeMap<u64, ThreadRecord> = first
        .into_iter()
        .map(|t| match t {
            ThreadRecord::Whole { thread, .. } | ThreadRecord::Torn { thread } => (thread, t),
        })
        .collect();
    Ok(RankSample {
        pid,
        changing,
        threads: tids
            .into_iter()
            .map(|tid| {
                let seen = ThreadSeen {
                    record: slots.get(&(tid as u64)).map(Slot::of),
                    cpu: cpu_ticks(pid, tid),
                };
                (tid, seen)
            })
            .collect(),
    })
}
