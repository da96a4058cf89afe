//! Jobs at scale kept as classes: the front end takes the agents' merged classes as they
//! are, rebuilding only the first and last member of each ([`ClassJob`]), never every
//! rank. A simulated job ([`simulate`](crate::simulate)) goes through the same launcher,
//! agents and relays as a real one.

use super::children::{Children, shares};
use super::classes::decode_classes;
use super::front::{Collected, RemoteOptions, collect};
use super::simulate::Simulation;
use super::task::AgentOptions;
use mqd_job::cut::CutPoint;
use mqd_library_host::helper::Helper;
use mqd_model::{Acquisition, ClassJob, FailedRanks, LibraryInfo, RankSet, Snapshot};
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
        // The launcher's count of ranks.
        size_known: true,
        classes,
        failed,
        unranked,
        snapshot: match got.broken.take() {
            Some(why) => Snapshot::Separate { why },
            None => Snapshot::One,
        },
    }
}
