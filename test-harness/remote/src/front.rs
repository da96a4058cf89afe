//! The front end: this host's ranks dumped here, every other host's through agents, all
//! merged into one job.

use super::children::{Children, Event, shares};
use super::launcher::Launcher;
use super::merge::Merger;
use super::task::{AgentOptions, HostTask, RankTask};
use super::wire::{Decoder, Encoder, Record, StreamError};
use mqd_job::cut::CutPoint;
use mqd_job::dump::{self, AttachProgress, JobContext};
use mqd_job::identity;
use mqd_job::process_ref::ProcessRef;
use mqd_library_host::failure::{Failure, FailureKind};
use mqd_library_host::helper::Helper;
use mqd_model::{
    ClassJob, FailedRanks, GroupTable, JobDump, LibraryInfo, RankClass, RankDump, RankSet, Snapshot,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How ranks on other hosts are reached.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// How agents are started.
    pub launcher: Launcher,
    /// The `mqd` to run on the hosts.
    pub agent: Helper,
    /// Most agents one process starts and reads.
    pub fanout: usize,
    /// Seconds the agents may take.
    pub timeout: f64,
}

/// What the agents' streams gave.
#[derive(Default)]
pub(super) struct Collected {
    /// Hosts whose agents stopped their ranks (or failed: nothing of them is held).
    pub(super) stopped: HashSet<String>,
    /// The agents were released: every host stopped before, or the cut was given up.
    pub(super) released: bool,
    /// Why the cut was given up, if it was.
    pub(super) broken: Option<String>,
    ranks: Vec<RankDump>,
    pub(super) library: Option<LibraryInfo>,
    job_size: Option<u32>,
    /// Hosts fully reported.
    done: HashSet<String>,
    /// Why a host's ranks were not all reported.
    pub(super) failed: HashMap<String, String>,
    /// The ranks the agents reported, merged by class, not yet rebuilt.
    pub(super) merger: Merger,
    /// The merged stream's host numbers' names.
    pub(super) host_names: Vec<String>,
}

/// Dumps `processes` wherever they run: those of this host here, the others through one
/// agent per host. Without ranks elsewhere it is [`dump::dump_processes`].
pub fn dump_across_hosts(
    processes: &[ProcessRef],
    dll: Option<&std::path::Path>,
    context: &JobContext,
    progress: &dyn AttachProgress,
    remote: &RemoteOptions,
    stop: &dyn Fn() -> bool,
) -> Result<JobDump, Failure> {
    dump_across_hosts_kept(processes, dll, context, progress, remote, stop)?.into_ranks()
}

/// A job dumped across hosts: all here, or the agents' ranks still merged by class.
pub enum Across {
    /// Every rank runs on this host: dumped here.
    Here(JobDump),
    /// Ranks run elsewhere: what their agents sent, not yet rebuilt.
    Hosts(Box<HostsDump>),
}

/// This host's ranks and the agents' merged classes.
pub struct HostsDump {
    here: Option<Result<JobDump, Failure>>,
    local: Vec<ProcessRef>,
    got: Collected,
    /// The agents' merged stream.
    records: Vec<Record>,
    hosts: Vec<HostTask>,
    context: JobContext,
    launcher: Launcher,
}

impl Across {
    /// Every rank rebuilt: one dump per rank.
    pub fn into_ranks(self) -> Result<JobDump, Failure> {
        match self {
            Across::Here(job) => Ok(job),
            Across::Hosts(h) => {
                let HostsDump {
                    here,
                    local,
                    mut got,
                    records,
                    hosts,
                    context,
                    launcher,
                } = *h;
                decode(&mut got, records);
                merge(here, &local, got, &hosts, &context, &launcher)
            }
        }
    }

    /// The job as classes: the agents' as they merged them, with this host's ranks
    /// merged among them; no rank is rebuilt but each class's first and last.
    pub fn classes(&self) -> Result<ClassJob, Failure> {
        let corrupt = |e: StreamError| {
            Failure::new(
                FailureKind::Other,
                format!("the merged stream could not be read back: {e}"),
            )
        };
        let h = match self {
            Across::Here(job) => return super::classes::classes_of(job).map_err(corrupt),
            Across::Hosts(h) => h,
        };
        let mut host_names = h.got.host_names.clone();
        let mut merger = Merger::new();
        for record in &h.records {
            match record {
                Record::State(s) => merger.add_state(0, s.clone()),
                Record::Ranks(line) => merger.add_line(0, line.clone()).map_err(corrupt)?,
                _ => {}
            }
        }
        // This host's ranks, one more stream, merged into the agents' classes.
        let mut failed: Vec<FailedRanks> = Vec::new();
        let meta = match &h.here {
            Some(Ok(job)) => {
                let this = host_names.len() as u32;
                host_names.push(identity::this_host().unwrap_or_default());
                let dumps: Vec<RankDump> =
                    job.ranks.iter().filter(|r| !r.duplicate).cloned().collect();
                for record in Encoder::new().encode(this, &dumps).map_err(corrupt)? {
                    match record {
                        Record::State(s) => merger.add_state(1, s),
                        Record::Ranks(line) => merger.add_line(1, line).map_err(corrupt)?,
                        _ => {}
                    }
                }
                Some(job)
            }
            Some(Err(f)) => {
                let ranks: RankSet = h
                    .local
                    .iter()
                    .filter_map(|p| u32::try_from(p.rank?).ok())
                    .collect();
                FailedRanks::add_to(&mut failed, &ranks, &f.cause, None);
                None
            }
            None => None,
        };
        let name = |i: u32| host_names.get(i as usize).cloned().unwrap_or_default();
        let decoded = super::classes::decode_classes(merger, &name);
        if let Some((_, e)) = decoded.corrupt.into_iter().next() {
            return Err(corrupt(e));
        }
        let (lost, mut classes): (Vec<RankClass>, Vec<RankClass>) = decoded
            .classes
            .into_iter()
            .partition(|c| c.first.outcome.is_err() && c.first.threads.is_empty());
        classes.sort_by_key(|c| c.ranks.first());
        for c in lost {
            let why = c.first.outcome.err().unwrap_or_default();
            FailedRanks::add_to(&mut failed, &c.ranks, &why, c.first.pid);
        }
        // What the rank-by-rank report checks process by process (a rank two processes
        // claim, a process that is not the rank its table says, another job's process)
        // is not read from classes: such a job is rebuilt rank by rank, where it is.
        let doubtful = |why: String| {
            Failure::new(
                FailureKind::Other,
                format!("the job is not reported by classes: {why}"),
            )
        };
        let mut reported = RankSet::new();
        for c in &classes {
            if !reported.intersection(&c.ranks).is_empty() {
                return Err(doubtful(format!("ranks {} are in two classes", c.ranks)));
            }
            reported.union_with(&c.ranks);
        }
        failed.iter().for_each(|f| reported.union_with(&f.ranks));
        for host in &h.hosts {
            let missing: RankSet = host
                .ranks
                .iter()
                .filter_map(|r| u32::try_from(r.rank).ok())
                .filter(|&r| !reported.contains(r))
                .collect();
            if missing.is_empty() {
                continue;
            }
            let why = h.got.failed.get(&host.name).cloned().unwrap_or_else(|| {
                "its agent did not report it (not in the process table it was given?)".into()
            });
            let why = format!(
                "on host {} (through {}): {why}",
                host.name,
                h.launcher.name()
            );
            FailedRanks::add_to(&mut failed, &missing, &why, None);
        }
        let empty = dump::job_of(Vec::new(), None, &h.context);
        let meta = meta.unwrap_or(&empty);
        let size = h.context.job_size.or(h.got.job_size).unwrap_or_else(|| {
            let world = classes
                .iter()
                .flat_map(|c| c.first.communicators())
                .filter(|c| c.name == "MPI_COMM_WORLD")
                .filter_map(|c| u32::try_from(c.size).ok())
                .max();
            let all = reported.last().map_or(0, |r| r + 1);
            world.unwrap_or(0).max(all)
        });
        for d in classes
            .iter()
            .flat_map(|c| std::iter::once(&c.first).chain(c.last.as_ref()))
        {
            let world = d
                .communicators()
                .iter()
                .find(|c| c.name == "MPI_COMM_WORLD")
                .map(|c| (c.local_rank, c.size));
            if let Some((rank, n)) = world.filter(|&w| w != (i64::from(d.rank), i64::from(size))) {
                return Err(doubtful(format!(
                    "the process listed as rank {} is COMM_WORLD rank {rank} of {n}",
                    d.rank
                )));
            }
        }
        let mut job = ClassJob::of_job(meta, classes, failed, decoded.unranked);
        job.size = size;
        if job.dll.path.is_empty()
            && let Some(library) = &h.got.library
        {
            job.dll = library.clone();
        }
        if let Some(why) = &h.got.broken {
            job.snapshot = Snapshot::Separate { why: why.clone() };
        }
        Ok(job)
    }
}

/// [`dump_across_hosts`], the agents' ranks kept as their classes.
pub fn dump_across_hosts_kept(
    processes: &[ProcessRef],
    dll: Option<&std::path::Path>,
    context: &JobContext,
    progress: &dyn AttachProgress,
    remote: &RemoteOptions,
    stop: &dyn Fn() -> bool,
) -> Result<Across, Failure> {
    let this = identity::this_host();
    let (local, elsewhere): (Vec<&ProcessRef>, Vec<&ProcessRef>) =
        processes.iter().partition(|p| match &p.host {
            Some(host) => identity::is_this_host(host, this.as_deref()),
            None => true,
        });
    if elsewhere.is_empty() {
        return dump::dump_processes(processes, dll, context, progress).map(Across::Here);
    }
    let mut hosts: Vec<HostTask> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for p in &elsewhere {
        let name = p.host.as_deref().unwrap_or_default();
        let i = *index.entry(name).or_insert_with(|| {
            hosts.push(HostTask {
                name: name.to_owned(),
                ranks: Vec::new(),
                simulated: None,
            });
            hosts.len() - 1
        });
        hosts[i].ranks.push(RankTask {
            rank: p.rank.unwrap_or(-1),
            pid: p.pid,
            executable: p.executable.clone(),
        });
    }
    let options = AgentOptions {
        stacks: context.stacks,
        python_frames: context.python_frames,
        dll: dll.map(|p| p.to_path_buf()),
        dll_name: context.dll_name.clone(),
        job_size: context.job_size,
        timeout: remote.timeout,
        fanout: remote.fanout,
        agent: remote.agent.clone(),
        no_cache: context.type_cache.is_none(),
        job_library: context.job_library,
        openmp: context.openmp.is_some(),
        ompd: context.openmp.as_ref().and_then(|o| o.library.clone()),
    };
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(remote.timeout);
    let mut children = Children::start(
        shares(hosts.clone(), remote.fanout),
        &options,
        &remote.launcher,
    );
    // This host's ranks while the agents work on theirs; all of them held until every
    // host has stopped its own.
    let local: Vec<ProcessRef> = local.into_iter().cloned().collect();
    let cut = Arc::new(CutPoint::new());
    let here_context = JobContext {
        cut: Some(cut.clone()),
        cut_deadline: Some(deadline),
        ..context.clone()
    };
    let (here, collected) = std::thread::scope(|scope| {
        let dumping = (!local.is_empty())
            .then(|| scope.spawn(|| dump::dump_processes(&local, dll, &here_context, progress)));
        if dumping.is_none() {
            cut.stopped();
        }
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        let collected = collect(&mut children, deadline, remote.timeout, stop, &cut, &names);
        // Whatever happened, this host's ranks go now.
        cut.release();
        let here = dumping.map(|d| {
            d.join().unwrap_or_else(|_| {
                Err(Failure::new(
                    FailureKind::Other,
                    "this host's dump failed unexpectedly",
                ))
            })
        });
        (here, collected)
    });
    drop(children);
    let mut got = collected;
    let records = std::mem::take(&mut got.merger).records(0);
    Ok(Across::Hosts(Box::new(HostsDump {
        here,
        local,
        got,
        records,
        hosts,
        context: context.clone(),
        launcher: remote.launcher.clone(),
    })))
}

pub(super) fn collect(
    children: &mut Children,
    deadline: Instant,
    timeout: f64,
    stop: &dyn Fn() -> bool,
    cut: &CutPoint,
    hosts: &[&str],
) -> Collected {
    let shares = children.share_names();
    let mut got = Collected::default();
    let Collected {
        merger, host_names, ..
    } = &mut got;
    let (mut merger, mut host_names) = (std::mem::take(merger), std::mem::take(host_names));
    // Each stream's host numbers, and the merged stream's: an index into `host_names`.
    let mut names: HashMap<(usize, u32), u32> = HashMap::new();
    children.pump(deadline, timeout, stop, |children, event| {
        // Every host stopped (this one too): the cut holds; let every rank go.
        if !got.released && cut.is_stopped() && hosts.iter().all(|h| got.stopped.contains(*h)) {
            got.released = true;
            children.release();
            cut.release();
        }
        let Some(event) = event else { return };
        match event {
            Event::Record(child, record) => {
                let number = |id: u32| names.get(&(child, id)).copied();
                let name = |id: u32| number(id).map(|n| host_names[n as usize].clone());
                match record {
                    Record::Host(h) => {
                        names.insert((child, h.id), host_names.len() as u32);
                        host_names.push(h.name);
                    }
                    Record::Stopped { host } => {
                        if let Some(host) = name(host) {
                            got.stopped.insert(host);
                        }
                    }
                    Record::State(s) => merger.add_state(child, s),
                    Record::Ranks(mut line) => {
                        let Some(host) = number(line.host) else {
                            return;
                        };
                        line.host = host;
                        let merged = match line.hosts.renumber(number) {
                            Some(()) => merger.add_line(child, line),
                            None => Err(StreamError::UnknownHost),
                        };
                        if let Err(e) = merged {
                            got.failed
                                .entry(host_names[host as usize].clone())
                                .or_insert(format!("its agent's stream is corrupt: {e}"));
                        }
                    }
                    Record::Library { library, .. } => {
                        got.library.get_or_insert(library);
                    }
                    Record::HostDone { host, job_size } => {
                        if let Some(host) = name(host) {
                            got.done.insert(host);
                        }
                        got.job_size = got.job_size.or(job_size);
                    }
                    Record::HostFailed { host, why } => {
                        if let Some(host) = name(host) {
                            // Nothing of it is held: no need to wait for it.
                            got.stopped.insert(host.clone());
                            got.failed.entry(host).or_insert(why);
                        }
                    }
                    Record::Hello(_) | Record::Refused { .. } | Record::End => {}
                }
            }
            Event::Ended(child, why) => {
                for host in &shares[child] {
                    if !got.done.contains(host) {
                        got.failed
                            .entry(host.clone())
                            .or_insert_with(|| why.clone());
                    }
                    got.stopped.insert(host.clone());
                }
            }
        }
    });
    // The agents all ended (failed): only this host's ranks may still be stopping.
    if !got.released && hosts.iter().all(|h| got.stopped.contains(*h)) && cut.wait_stopped(deadline)
    {
        got.released = true;
    }
    if !got.released {
        let waiting: Vec<&str> = hosts
            .iter()
            .copied()
            .filter(|h| !got.stopped.contains(*h))
            .collect();
        got.broken = Some(if waiting.is_empty() {
            "this host's ranks were not all stopped in time".to_owned()
        } else {
            format!(
                "the ranks of {} were not stopped within {timeout} s, while the others were held",
                waiting.join(", ")
            )
        });
    }
    got.merger = merger;
    got.host_names = host_names;
    got
}

/// Every rank of the merged classes, rebuilt; each distinct group held once.
fn decode(got: &mut Collected, records: Vec<Record>) {
    let mut decoder = Decoder::new();
    let mut groups = GroupTable::new();
    let host_names = std::mem::take(&mut got.host_names);
    let name = |h: u32| host_names.get(h as usize).cloned().unwrap_or_default();
    for record in records {
        match record {
            Record::State(s) => decoder.add_state(s),
            Record::Ranks(line) => match decoder.ranks(&line, name) {
                Ok(mut ranks) => {
                    for r in &mut ranks {
                        if let Ok(comms) = &mut r.outcome {
                            groups.share_all(comms);
                        }
                    }
                    got.ranks.extend(ranks);
                }
                Err(e) => {
                    got.failed
                        .entry(name(line.host))
                        .or_insert(format!("its agent's stream is corrupt: {e}"));
                }
            },
            _ => {}
        }
    }
}

/// One job of this host's dump and the agents' ranks; every rank of the table that no
/// one reported is there, failed, with its host's reason.
fn merge(
    here: Option<Result<JobDump, Failure>>,
    local: &[ProcessRef],
    mut got: Collected,
    hosts: &[HostTask],
    context: &JobContext,
    launcher: &Launcher,
) -> Result<JobDump, Failure> {
    let reported: HashSet<(String, i32)> = got
        .ranks
        .iter()
        .filter_map(|r| Some((r.host.clone()?, r.pid?)))
        .collect();
    for host in hosts {
        let why = got.failed.get(&host.name).cloned().unwrap_or_else(|| {
            "its agent did not report it (not in the process table it was given?)".into()
        });
        for r in &host.ranks {
            if reported.contains(&(host.name.clone(), r.pid)) {
                continue;
            }
            let process = ProcessRef {
                rank: Some(r.rank),
                pid: r.pid,
                host: Some(host.name.clone()),
                executable: r.executable.clone(),
            };
            got.ranks.push(dump::not_dumped(
                &process,
                format!("on host {} (through {}): {why}", host.name, launcher.name()),
            ));
        }
    }
    let mut job = match here {
        Some(Ok(job)) => job,
        // Not one of this host's ranks could be dumped: each says why, beside the others.
        Some(Err(f)) => {
            let ranks = local
                .iter()
                .map(|p| dump::not_dumped(p, f.cause.clone()))
                .collect();
            dump::job_of(ranks, None, context)
        }
        None => dump::job_of(Vec::new(), None, context),
    };
    if job.dll.path.is_empty()
        && let Some(library) = got.library
    {
        job.dll = library;
    }
    job.ranks.extend(got.ranks);
    job.ranks.sort_by_key(|r| (r.rank < 0, r.rank));
    identity::check_ranks(&mut job.ranks, context.job_size);
    job.job_size = job.job_size.or(got.job_size);
    if let Some(why) = got.broken {
        job.snapshot = Snapshot::Separate { why };
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tests::rank;
    use mqd_model::Acquisition;

    /// Ranks 0-3 here, 4-7 from host node7's agent, the job named through a starter.
    fn across(ring: bool, here: Option<Result<JobDump, Failure>>) -> Across {
        let dumps: Vec<RankDump> = (4..8).map(|r| rank(8, r, ring, 0)).collect();
        let mut merger = Merger::new();
        for record in Encoder::new().encode(0, &dumps).expect("encode") {
            match record {
                Record::State(s) => merger.add_state(0, s),
                Record::Ranks(line) => merger.add_line(0, line).expect("a line"),
                _ => {}
            }
        }
        let mut got = Collected::default();
        got.host_names.push("node7".into());
        let task = |r: i32| RankTask {
            rank: r,
            pid: 4000 + 3 * r,
            executable: None,
        };
        Across::Hosts(Box::new(HostsDump {
            here,
            local: (0..4)
                .map(|r| ProcessRef {
                    rank: Some(r),
                    pid: 4000 + 3 * r,
                    host: None,
                    executable: None,
                })
                .collect(),
            got,
            records: merger.records(0),
            hosts: vec![HostTask {
                name: "node7".into(),
                // Rank 8 is in the table but its agent did not report it.
                ranks: (4..9).map(task).collect(),
                simulated: None,
            }],
            context: JobContext::new(Acquisition::Mpir),
            launcher: Launcher::ssh(),
        }))
    }

    fn here(ring: bool) -> Option<Result<JobDump, Failure>> {
        let ranks = (0..4).map(|r| rank(8, r, ring, 0)).collect();
        Some(Ok(JobDump::of_ranks(ranks)))
    }

    #[test]
    fn classes_come_in_the_order_of_their_first_ranks() {
        // This host's ranks in another state: classes of their own, first.
        let ranks = (0..4).map(|r| rank(8, r, false, 0)).collect();
        let job = across(true, Some(Ok(JobDump::of_ranks(ranks))))
            .classes()
            .expect("classes");
        let classes: Vec<String> = job.classes.iter().map(|c| c.ranks.to_string()).collect();
        assert_eq!(classes, ["0-3", "4-7"]);
    }

    #[test]
    fn this_hosts_ranks_join_the_agents_classes() {
        for ring in [false, true] {
            let job = across(ring, here(ring)).classes().expect("classes");
            let classes: Vec<String> = job.classes.iter().map(|c| c.ranks.to_string()).collect();
            assert_eq!(classes, ["0-7"], "ring {ring}");
            assert_eq!(job.size, 8);
            assert_eq!(job.failed.len(), 1, "{:?}", job.failed);
            assert_eq!(job.failed[0].ranks.to_string(), "8");
            assert!(
                job.failed[0]
                    .why
                    .starts_with("on host node7 (through ssh): its agent did not report it"),
                "{}",
                job.failed[0].why
            );
            // Rebuilt, the same ranks one by one.
            let ranks = across(ring, here(ring)).into_ranks().expect("ranks");
            let dumped: Vec<i32> = ranks.ranks.iter().map(|r| r.rank).collect();
            assert_eq!(dumped, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
        }
    }

    #[test]
    fn ranks_that_are_not_what_they_claim_are_reported_rank_by_rank() {
        // Rank 5 here too: two processes claim it.
        let mut ranks: Vec<RankDump> = (0..4).map(|r| rank(8, r, true, 0)).collect();
        ranks.push(rank(8, 5, false, 0));
        let claimed = across(true, Some(Ok(JobDump::of_ranks(ranks)))).classes();
        assert!(
            claimed
                .as_ref()
                .is_err_and(|e| e.cause.contains("are in two classes")),
            "{:?}",
            claimed.map(|j| j.classes.len())
        );
        // A process of another job: COMM_WORLD of 9 where the job has 8.
        let ranks: Vec<RankDump> = (0..4)
            .map(|r| rank(if r == 2 { 9 } else { 8 }, r, true, 0))
            .collect();
        let other = across(true, Some(Ok(JobDump::of_ranks(ranks)))).classes();
        assert!(
            other
                .as_ref()
                .is_err_and(|e| e.cause.contains("is COMM_WORLD rank")),
            "{:?}",
            other.map(|j| j.classes.len())
        );
        // Rebuilt rank by rank, each problem is said where it is.
        let mut ranks: Vec<RankDump> = (0..4).map(|r| rank(8, r, true, 0)).collect();
        ranks.push(rank(8, 5, false, 0));
        let job = across(true, Some(Ok(JobDump::of_ranks(ranks))))
            .into_ranks()
            .expect("ranks");
        let claims = job.ranks.iter().filter(|r| r.rank == 5).count();
        assert!(claims >= 1, "rank 5 is still there");
    }

    #[test]
    fn this_hosts_failed_dump_fails_its_ranks() {
        let failed = Failure::new(FailureKind::NoProcess, "no such process");
        let job = across(true, Some(Err(failed))).classes().expect("classes");
        let classes: Vec<String> = job.classes.iter().map(|c| c.ranks.to_string()).collect();
        assert_eq!(classes, ["4-7"]);
        let failed: Vec<(String, &str)> = job
            .failed
            .iter()
            .map(|f| (f.ranks.to_string(), f.why.as_str()))
            .collect();
        assert_eq!(failed[0], ("0-3".to_owned(), "no such process"));
        assert_eq!(failed[1].0, "8");
    }
}
