//! A Slurm job's step on this host: its `srun`, found by the job's environment or by the
//! session that made the allocation (`scontrol show jobs`: `AllocNode:Sid`).

use super::programs::{processes, runs};
use crate::identity::{is_this_host, this_host};
use std::process::{Command, Stdio};

/// Most candidates listed in an error.
const LISTED: usize = 8;

/// A job as `scontrol show jobs -o` lists it.
struct SlurmJob {
    id: String,
    /// The host and session that made the allocation.
    alloc_node: String,
    alloc_sid: i32,
}

/// Every job the controller knows.
fn jobs() -> Result<Vec<SlurmJob>, String> {
    let out = Command::new("scontrol")
        .args(["show", "jobs", "-o"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run scontrol ({e}): is Slurm installed here?"))?;
    if !out.status.success() {
        return Err(format!(
            "scontrol show jobs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let field = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(str::to_owned)
            };
            let (node, sid) = field("AllocNode:Sid=")?
                .rsplit_once(':')
                .map(|(n, s)| (n.to_owned(), s.to_owned()))?;
            Some(SlurmJob {
                id: field("JobId=")?,
                alloc_node: node,
                alloc_sid: sid.parse().ok()?,
            })
        })
        .collect())
}

/// The job id in a process's environment.
fn job_in_environment(pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ.split(|&b| b == 0).find_map(|v| {
        let v = String::from_utf8_lossy(v);
        v.strip_prefix("SLURM_JOB_ID=")
            .or_else(|| v.strip_prefix("SLURM_JOBID="))
            .map(str::to_owned)
    })
}

/// A process's session and parent.
fn session_and_parent(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
    Some((rest.get(3)?.parse().ok()?, rest.get(1)?.parse().ok()?))
}

/// Whether `pid` is an srun of `job`: its environment names the job (inside salloc or a
/// batch script), or the job was allocated from its session on this host.
fn is_srun_of(pid: i32, job: &SlurmJob, here: Option<&str>) -> bool {
    runs(pid, "srun")
        && (job_in_environment(pid).as_deref() == Some(job.id.as_str())
            || (is_this_host(&job.alloc_node, here)
                && session_and_parent(pid).is_some_and(|(sid, _)| sid == job.alloc_sid)))
}

/// The `srun` of this host that runs a step of Slurm job `id` (the first of srun's own
/// processes: srun forks a helper).
pub fn srun_of_job(id: &str) -> Result<i32, String> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return Err(format!("{id:?} is not a Slurm job id"));
    }
    let jobs = jobs()?;
    let job = jobs
        .iter()
        .find(|j| j.id == id)
        .ok_or_else(|| format!("Slurm knows no job {id} (scontrol show jobs)"))?;
    let here = this_host();
    let of_job = |pid: i32| is_srun_of(pid, job, here.as_deref());
    let found: Vec<(i32, String)> = processes()
        .into_iter()
        .filter(|(pid, _)| of_job(*pid))
        .filter(|(pid, _)| !session_and_parent(*pid).is_some_and(|(_, parent)| of_job(parent)))
        .collect();
    match found.as_slice() {
        [(pid, _)] => Ok(*pid),
        [] => Err(format!(
            "no srun of Slurm job {id} runs on this host (it was allocated from {}): run mqd there, or give the srun's pid",
            job.alloc_node
        )),
        several => Err(format!(
            "{} sruns of Slurm job {id} run on this host ({}): give the pid of the step's srun",
            several.len(),
            several
                .iter()
                .take(LISTED)
                .map(|(pid, line)| format!("{pid} ({line})"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The Slurm job an `srun` runs a step of, when `pid` is one.
pub fn job_of_srun(pid: i32) -> Option<String> {
    if !runs(pid, "srun") {
        return None;
    }
    if let Some(id) = job_in_environment(pid) {
        return Some(id);
    }
    let here = this_host();
    let jobs = jobs().ok()?;
    let mut matching = jobs.iter().filter(|j| is_srun_of(pid, j, here.as_deref()));
    let job = matching.next()?;
    // A session that allocated several jobs does not say which.
    matching.next().is_none().then(|| job.id.clone())
}
