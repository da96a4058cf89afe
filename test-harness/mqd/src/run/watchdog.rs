//! The watchdog's loop (the rules are [`super::stillness`]'s): the job started as its
//! launcher would be, sampled and reported with `mqd job`'s machinery ([`Dumper`]), and
//! ended.

use super::by_records::{Processes, RecordDetector};
use super::duration::words;
use super::report::{Ending, Report};
use super::stillness::{Detector, Observation, cpu_times};
use super::stopped_exit_code;
use crate::interrupt;
use mqd_job::acquire::{self, Job};
use mqd_job::record_watch::{NotRecorded, RecordWatch, RemoteRecords};
use mqd_job::stay::{CallWatch, RemoteCounters};
use mqd_library_host::failure::{Failure, FailureKind};
use mqd_model::{Diagnosis, JobDump};
use mqd_remote::HostCounters;
use std::cell::OnceCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

/// What the watchdog needs of `mqd job`: its dump, its hold and its
/// words, as the command line's options shape them.
pub trait Dumper {
    /// Every rank of `job`, as `mqd job` dumps it.
    fn dump(&self, job: &Job) -> Result<JobDump, Failure>;
    /// The counters of `job`'s other hosts (none where they cannot be reached).
    fn counters(&self, job: &Job) -> Option<HostCounters>;
    /// `first` and its diagnosis, what one snapshot leaves open held where it
    /// can be (dumping `job` again; other hosts' calls counted through `remote`).
    fn confirmed(
        &self,
        first: JobDump,
        job: &Job,
        remote: Option<&HostCounters>,
    ) -> (JobDump, Option<Diagnosis>);
    /// The report of `dump` and its diagnosis, as `mqd job` gives it.
    fn report(&self, dump: &JobDump, diagnosis: &Diagnosis) -> Rendered;
}

/// A job's report in each form `mqd run` leaves.
pub struct Rendered {
    /// The text report.
    pub text: String,
    /// The JSON document.
    pub json: Option<String>,
    /// The merged stacks as text.
    pub stacks: Option<String>,
    /// The wait-for graph in Graphviz DOT (none for a job reported by classes).
    pub dot: Option<String>,
}

/// The watchdog's settings.
pub struct Watchdog {
    /// `--hang-after`.
    pub hang_after: Duration,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--interval`.
    pub interval: Duration,
    /// `--keep`.
    pub keep: bool,
    /// `--report DIR`.
    pub report: Option<PathBuf>,
    /// The command run, where it is not the user's (the hang recorder's options added
    /// to its launcher's); reports still show the user's.
    pub spawn: Option<Vec<OsString>>,
    /// Variables for the launcher, where the hang recorder reaches the ranks that way.
    pub env: Vec<(&'static str, OsString)>,
}

/// How long the job's launcher has to end after SIGTERM before it and its ranks are
/// killed.
const END_GRACE: Duration = Duration::from_secs(10);

/// Runs `cmd` under the watchdog `watch`.
pub fn run_watched(
    cmd: &[OsString],
    watch: &Watchdog,
    dumper: &dyn Dumper,
) -> Result<ExitCode, Failure> {
    let spawned = watch.spawn.as_deref().unwrap_or(cmd);
    let (program, args) = spawned.split_first().expect("clap requires a command");
    let line: Vec<String> = cmd
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let line = line.join(" ");
    let started = Instant::now();
    let mut command = Command::new(program);
    command.args(args);
    command.envs(watch.env.iter().map(|(k, v)| (k, v)));
    let mut child = command.spawn().map_err(|e| {
        Failure::new(
            FailureKind::Other,
            format!("cannot start {}: {e}", program.to_string_lossy()),
        )
    })?;
    let starter = child.id() as i32;
    // Other hosts' agents, once the job is found; kept (with their counters) to the end.
    let counters: OnceCell<Option<HostCounters>> = OnceCell::new();
    let remote = || {
        counters
            .get()
            .and_then(Option::as_ref)
            .map(|c| c as &dyn RemoteCounters)
    };
    let mut detector = None::<Detector<CallWatch>>;
    let mut costs = Costs::default();
    let hang_after = watch.hang_after;
    // Once every rank is found with records: the job read while it runs.
    let mut by_records = None::<RecordWatch>;
    let mut record_detector = None::<RecordDetector<Processes>>;
    let mut records_failed = false;
    let mut ranks: Vec<i32> = Vec::new();
    let mut said = None::<String>;
    let mut warm = std::collections::HashMap::new();
    let trigger = loop {
        match wait(&mut child, watch.interval) {
            Waited::Exited(status) => {
                let code = status_code(status);
                finish_ended(watch, &line, started, code, &costs);
                return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
            }
            Waited::Interrupted(signal) => {
                end(&mut child, &ranks);
                eprintln!("mqd run: stopped by signal {signal}: the job was ended");
                return Ok(ExitCode::from(interrupt::exit_code(signal)));
            }
            Waited::Running => {}
        }
        if let Some(limit) = watch.timeout
            && started.elapsed() >= limit
        {
            break format!("--timeout {} passed", words(limit));
        }
        let t0 = Instant::now();
        let mut job = None;
        if by_records.is_none() {
            let found = match acquire::attach_job(starter) {
                Ok(found) => found,
                Err(f) => {
                    // Not started yet, or between programs: said once, tried again.
                    say_once(
                        &mut said,
                        format!("the job cannot be sampled yet: {}", Failure::from(f)),
                    );
                    continue;
                }
            };
            counters.get_or_init(|| dumper.counters(&found));
            // This host's ranks only: another host's pid names another process here.
            let here = mqd_job::identity::this_host();
            ranks = found
                .ranks
                .iter()
                .filter(|r| Some(&r.host) == here.as_ref() || r.host.is_empty())
                .map(|r| r.pid)
                .collect();
            // Each rank's files stay parsed (symbols, unwind tables, DWARF indexes) from
            // one sample to the next: a parse is shared while any address space holds it.
            warm.retain(|pid, _| ranks.contains(pid));
            for &pid in &ranks {
                if !warm.contains_key(&pid)
                    && let Ok(space) = mqd_debuginfo::AddressSpace::from_pid(pid)
                {
                    warm.insert(pid, space);
                }
            }
            let agents = counters
                .get()
                .and_then(Option::as_ref)
                .map(|c| c as &dyn RemoteRecords);
            match RecordWatch::find(&found, |pid| warm.get(&pid), agents) {
                _ if records_failed => job = Some(found),
                Ok(records) => {
                    eprintln!(
                        "mqd run: the job is watched through its ranks' records, read while they run: no rank is stopped until the report"
                    );
                    by_records = Some(records);
                }
                Err(NotRecorded::Never(why)) => {
                    eprintln!("mqd run: {why}: the job is watched by stopping its ranks");
                    records_failed = true;
                    job = Some(found);
                }
                Err(NotRecorded::Yet(_)) => job = Some(found),
            }
        }
        // Read from the ranks' records while they run, where every rank has them.
        if let Some(records) = &by_records {
            match sample_records(
                records,
                counters.get().and_then(Option::as_ref),
                &mut record_detector,
                &mut costs.records,
                hang_after,
            ) {
                Ok(Observation::Hung(still)) => {
                    break format!("no rank made progress for {}", words(still));
                }
                Ok(seen) => say_deferred(&mut said, &seen),
                Err(why) => {
                    // Once: a region that cannot be read is not tried again.
                    eprintln!("mqd run: {why}: the job is watched by stopping its ranks");
                    records_failed = true;
                    by_records = None;
                    record_detector = None;
                }
            }
            continue;
        }
        let Some(job) = job else { continue };
        let dump = match dumper.dump(&job) {
            Ok(dump) => dump,
            Err(f) => {
                say_once(&mut said, format!("the job cannot be sampled yet: {f}"));
                continue;
            }
        };
        costs.stopped.push(t0.elapsed());
        let cpu = cpu_times(&dump, remote());
        let detector =
            detector.get_or_insert_with(|| Detector::new(watch.hang_after, remote().is_some()));
        let seen = detector.observe(Instant::now(), dump, cpu, |dump, ranks| {
            CallWatch::arm_across(dump, ranks, remote())
        });
        if let Observation::Hung(still) = seen {
            break format!("no rank made progress for {}", words(still));
        }
        say_deferred(&mut said, &seen);
    };
    // Said the moment it is known: the dump and its proof take a few seconds more.
    eprintln!("mqd run: {trigger}: dumping the job for the report");
    // The report: one more dump, held as `mqd job` holds it.
    let job = acquire::attach_job(starter).map_err(Failure::from);
    let dumped = job.and_then(|job| {
        let first = dumper.dump(&job)?;
        Ok(dumper.confirmed(first, &job, counters.get().and_then(Option::as_ref)))
    });
    let (report, verdict) = match dumped {
        Ok((dump, diagnosis)) => {
            let diagnosis = diagnosis.unwrap_or_else(|| mqd_analysis::diagnose(&dump));
            let rendered = dumper.report(&dump, &diagnosis);
            let text = rendered.text;
            let verdict_line = text
                .lines()
                .rev()
                .find(|l| l.starts_with("Verdict:"))
                .unwrap_or("Verdict: none")
                .to_owned();
            let report = Report {
                command: line.clone(),
                elapsed: started.elapsed(),
                ending: Ending::Stopped {
                    verdict: verdict_line,
                    trigger: trigger.clone(),
                },
                json: rendered.json,
                stacks: rendered.stacks,
                dot: rendered.dot,
                text: Some(text),
            };
            (report, Some(diagnosis.verdict))
        }
        Err(f) => {
            let report = Report {
                command: line.clone(),
                elapsed: started.elapsed(),
                ending: Ending::Stopped {
                    verdict: format!("Verdict: none (the job could not be dumped: {f})"),
                    trigger: trigger.clone(),
                },
                text: None,
                json: None,
                stacks: None,
                dot: None,
            };
            (report, None)
        }
    };
    eprint!("{}", report.summary());
    write_report(watch, &report);
    say_costs(&costs);
    if watch.keep {
        eprintln!("mqd run: the job goes on: its launcher is pid {starter}");
    } else {
        end(&mut child, &ranks);
    }
    Ok(ExitCode::from(match verdict {
        Some(v) => stopped_exit_code(v),
        None => crate::exit_code(FailureKind::Other),
    }))
}

/// The report of a job that ended by itself, where `--report` asks for one.
fn finish_ended(watch: &Watchdog, line: &str, started: Instant, code: i32, costs: &Costs) {
    say_costs(costs);
    if watch.report.is_none() {
        return;
    }
    let report = Report {
        command: line.to_owned(),
        elapsed: started.elapsed(),
        ending: Ending::Ended(code),
        text: None,
        json: None,
        stacks: None,
        dot: None,
    };
    write_report(watch, &report);
}

fn write_report(watch: &Watchdog, report: &Report) {
    let Some(dir) = &watch.report else { return };
    match report.write(dir) {
        Ok((written, skipped)) => {
            let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            eprintln!("mqd run: report written: {}", names.join(", "));
            for s in skipped {
                eprintln!("mqd run: not written: {s}");
            }
        }
        Err(e) => eprintln!("mqd run: {e}"),
    }
}

/// What sampling cost: how many samples, and how long each held the job.
/// The time each sample took, by how it was taken.
#[derive(Default)]
struct Costs {
    /// Dumps, each holding the job stopped.
    stopped: Vec<Duration>,
    /// Reads of the ranks' records, no rank stopped.
    records: Vec<Duration>,
}

fn say_costs(costs: &Costs) {
    let median_and_longest = |times: &[Duration]| {
        let mut sorted = times.to_vec();
        sorted.sort();
        (
            words(sorted[sorted.len() / 2]),
            words(sorted[sorted.len() - 1]),
        )
    };
    if !costs.records.is_empty() {
        let (median, longest) = median_and_longest(&costs.records);
        eprintln!(
            "mqd run: {} samples read from the ranks' records, no rank stopped, each taking {median} (median; longest {longest})",
            costs.records.len()
        );
    }
    if !costs.stopped.is_empty() {
        let (median, longest) = median_and_longest(&costs.stopped);
        eprintln!(
            "mqd run: {} samples, each holding the job for {median} (median; longest {longest})",
            costs.stopped.len()
        );
    }
}

/// One sample of the ranks' records (`watch`; other hosts' read by their agents in
/// `agents`), judged by `detector` (made at the first): what it shows, or why the
/// records cannot be read.
fn sample_records<'a>(
    watch: &RecordWatch,
    agents: Option<&'a HostCounters>,
    detector: &mut Option<RecordDetector<Processes<'a>>>,
    costs: &mut Vec<Duration>,
    hang_after: Duration,
) -> Result<Observation, String> {
    let t0 = Instant::now();
    let sample = watch.sample(agents.map(|a| a as &dyn RemoteRecords))?;
    costs.push(t0.elapsed());
    let detector = detector.get_or_insert_with(|| RecordDetector::new(hang_after));
    let measure = |ranks| Processes::start(ranks, watch, agents.map(|a| a as &dyn RemoteCounters));
    Ok(detector.observe(Instant::now(), sample, measure))
}

/// Said once per stillness: a CI log shows why the hang is not declared yet.
fn say_deferred(said: &mut Option<String>, seen: &Observation) {
    if let Observation::Deferred(_, why) = seen {
        say_once(
            said,
            format!(
                "every rank stayed in its MPI call for --hang-after, but {why}: a hang is declared only once a sample shows every rank ran"
            ),
        );
    }
}

fn say_once(said: &mut Option<String>, what: String) {
    if said.as_deref() != Some(what.as_str()) {
        eprintln!("mqd run: {what}");
        *said = Some(what);
    }
}

enum Waited {
    Exited(ExitStatus),
    Interrupted(i32),
    Running,
}

/// Waits up to `interval` for the job to end or a stop to be asked for.
fn wait(child: &mut Child, interval: Duration) -> Waited {
    let end = Instant::now() + interval;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Waited::Exited(status);
        }
        if let Some(signal) = interrupt::requested() {
            return Waited::Interrupted(signal);
        }
        let now = Instant::now();
        if now >= end {
            return Waited::Running;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// A process's exit status as a shell reports it: its code, or 128 + its signal.
fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Ends the job: SIGTERM to its launcher (which ends its ranks), and after a grace
/// period SIGKILL to it and to the ranks still there.
fn end(child: &mut Child, ranks: &[i32]) {
    let pid = child.id() as i32;
    // SAFETY: kill(2) on our own child, which is not reaped yet (its pid is ours).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + END_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
        let _ = child.wait();
    }
    for &rank in ranks {
        // SAFETY: kill(2) with signal 0 then SIGKILL; a rank already gone is ESRCH.
        unsafe {
            if libc::kill(rank, 0) == 0 {
                libc::kill(rank, libc::SIGKILL);
            }
        }
    }
}
