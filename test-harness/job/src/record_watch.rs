//! A job's records read while its ranks run, never stopping them: for each rank, each
//! thread's count of MPI calls entered and the call it is in (the hang recorder's
//! slots, by `process_vm_readv`) and the CPU time each thread used (`/proc`). Each
//! rank's slots are read twice: a slot written between the two reads is seen changing,
//! never believed torn.

use crate::acquire::Job;
use crate::activity::{cpu_ticks, tasks};
use crate::records::Records;
use mqd_debuginfo::AddressSpace;
use mqd_process::live::RunningMemory;
pub use mqd_recording::ThreadRecord;
use std::collections::BTreeMap;

/// The ranks of a job whose records can be read while it runs.
#[derive(Debug, Clone)]
pub struct RecordWatch {
    /// (rank, pid, where its records are), by rank.
    ranks: Vec<(u32, i32, Records)>,
}

/// What one thread showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSeen {
    /// Its slot (`None`: it has made no MPI call the recorder saw).
    pub record: Option<ThreadRecord>,
    /// Its CPU time, in clock ticks (`None`: not read).
    pub cpu: Option<u64>,
}

/// What one rank showed.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The ranks of `job` (`space` gives each one's address space), if the whole job
    /// runs on this host with the hang recorder loaded in every rank, and no object
    /// they load calls the MPI past it (Open MPI's Fortran bindings); else why not.
    pub fn find<'a>(
        job: &Job,
        mut space: impl FnMut(i32) -> Option<&'a AddressSpace>,
    ) -> Result<RecordWatch, NotRecorded> {
        let here = crate::identity::this_host();
        let size = job.size.unwrap_or(job.ranks.len() as u32);
        let mut ranks = Vec::new();
        for r in &job.ranks {
            let rank = u32::try_from(r.rank).map_err(|_| {
                NotRecorded::Yet(format!("a process of unknown rank (pid {})", r.pid))
            })?;
            if here.as_deref() != Some(r.host.as_str()) && !r.host.is_empty() {
                return Err(NotRecorded::Never(format!(
                    "rank {rank} runs on {}",
                    r.host
                )));
            }
            let space = space(r.pid);
            let records = space.and_then(Records::of).ok_or_else(|| {
                NotRecorded::Yet(format!("rank {rank} (pid {}) has no records", r.pid))
            })?;
            // Calls made past the recorder would look like computing, or like nothing.
            if let Some((object, name)) = space.and_then(crate::stacks::bypassing) {
                return Err(NotRecorded::Never(format!(
                    "rank {rank} loads {object}, which calls the MPI's {name} itself: the records miss those calls"
                )));
            }
            ranks.push((rank, r.pid, records));
        }
        ranks.sort_by_key(|&(rank, ..)| rank);
        ranks.dedup_by_key(|&mut (rank, ..)| rank);
        if ranks.len() as u32 != size || ranks.last().is_some_and(|&(r, ..)| r + 1 != size) {
            return Err(NotRecorded::Yet(format!(
                "{} of the job's {size} ranks are seen",
                ranks.len()
            )));
        }
        Ok(RecordWatch { ranks })
    }

    /// The ranks watched: (rank, pid).
    pub fn ranks(&self) -> impl Iterator<Item = (u32, i32)> + '_ {
        self.ranks.iter().map(|&(rank, pid, _)| (rank, pid))
    }

    /// Every rank now, or why a rank cannot be read (it ended, its region is damaged).
    pub fn sample(&self) -> Result<JobSample, String> {
        let mut job = JobSample::new();
        for &(rank, pid, records) in &self.ranks {
            job.insert(rank, sample_rank(rank, pid, records)?);
        }
        Ok(job)
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
                    record: slots.get(&(tid as u64)).cloned(),
                    cpu: cpu_ticks(pid, tid),
                };
                (tid, seen)
            })
            .collect(),
    })
}
