//! The OpenMP view of a job in text: for each rank, its parallel regions (where their
//! directives are, their teams) and what each OpenMP thread of them does, as the
//! runtime's OMPD library says, the MPI call of a thread in one named; ranks that agree
//! print once ("ranks 0-63: region at solver.c:120 (4 threads): thread 0 in MPI_Recv,
//! threads 1-3 at the region's closing barrier").

use super::phrases::describe;
use mqd_model::openmp::OpenMpThread;
use mqd_model::{JobDump, Location, RankDump, RankSet};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The OpenMP view of `job`, `None` when no thread of it has one.
pub fn openmp_text(job: &JobDump) -> Option<String> {
    let mut groups: BTreeMap<String, RankSet> = BTreeMap::new();
    for r in &job.ranks {
        let (Ok(rank), Some(text)) = (u32::try_from(r.rank), rank_text(r)) else {
            continue;
        };
        groups.entry(text).or_default().insert(rank);
    }
    if groups.is_empty() {
        return None;
    }
    let mut out = String::from("OpenMP (each rank's runtime, through its OMPD library):\n");
    for (text, ranks) in groups {
        let _ = writeln!(out, "  {}: {text}", describe(&ranks));
    }
    Some(out)
}

/// What threads do, with the thread numbers of those that do it.
type Doing = BTreeMap<String, Vec<i64>>;

/// One rank's regions and threads, innermost regions after the ones they nest in
/// ("region at solver.c:120 (solve), team of 4: thread 0 in MPI_Recv, threads 1-3 at the
/// region's closing barrier"); `None` where no thread has an OpenMP view.
pub fn rank_text(r: &RankDump) -> Option<String> {
    // Threads by their innermost region (None: outside every region), then by what
    // they do, as thread numbers.
    let mut regions: BTreeMap<(i64, u32), (String, Doing)> = BTreeMap::new();
    let mut outside: BTreeMap<String, usize> = BTreeMap::new();
    for t in &r.threads {
        let Some(openmp) = &t.openmp else { continue };
        let doing = match t.location_in(r.executable.as_deref()) {
            Location::InMpi { call, .. } => format!("in {call}"),
            _ => activity(openmp),
        };
        match openmp.region() {
            Some(region) => {
                let key = (region.level.unwrap_or(0), region.id);
                let entry = regions.entry(key).or_insert_with(|| {
                    let place = match (&region.source, &region.function) {
                        (Some(source), Some(f)) => format!("region at {source} ({f})"),
                        (None, Some(f)) => format!("region in {f}"),
                        (Some(source), None) => format!("region at {source}"),
                        (None, None) => "a region".to_owned(),
                    };
                    let team = region
                        .team_size
                        .map_or(String::new(), |n| format!(", team of {n}"));
                    let level = match region.level {
                        Some(level) if level > 1 => format!(", nested at level {level}"),
                        _ => String::new(),
                    };
                    (format!("{place}{team}{level}"), BTreeMap::new())
                });
                entry
                    .1
                    .entry(doing)
                    .or_default()
                    .push(openmp.thread_num.unwrap_or(-1));
            }
            None => *outside.entry(doing).or_default() += 1,
        }
    }
    if regions.is_empty() && outside.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = regions
        .into_values()
        .map(|(place, doing)| {
            // Thread 0's doing first, then by the lowest thread of each.
            let mut doing: Vec<(String, Vec<i64>)> = doing.into_iter().collect();
            for (_, nums) in &mut doing {
                nums.sort_unstable();
            }
            doing.sort_by_key(|(_, nums)| nums.first().copied());
            let threads: Vec<String> = doing
                .into_iter()
                .map(|(what, nums)| format!("{} {what}", thread_numbers(&nums)))
                .collect();
            format!("{place}: {}", threads.join(", "))
        })
        .collect();
    for (what, n) in outside {
        let threads = if n == 1 { "thread" } else { "threads" };
        parts.push(format!("{n} {threads} outside any region {what}"));
    }
    Some(parts.join("; "))
}

/// "thread 0", "threads 1-3", "threads 0,2".
pub(crate) fn thread_numbers(nums: &[i64]) -> String {
    let known: Vec<u32> = nums.iter().filter_map(|&n| u32::try_from(n).ok()).collect();
    let set = RankSet::from_iter(known.iter().copied());
    match known.len() {
        1 => format!("thread {set}"),
        _ => format!("threads {set}"),
    }
}

/// What a thread's state says it does, in words, with the state's own name.
fn activity(openmp: &OpenMpThread) -> String {
    match openmp.state.as_deref() {
        Some(state) => state_words(state),
        None => "(state not tracked)".to_owned(),
    }
}

/// A state in words, with its own name: "at an explicit barrier
/// (wait_barrier_explicit)".
pub(crate) fn state_words(state: &str) -> String {
    let words = match state {
        "work_serial" | "work_parallel" => "working",
        "work_reduction" => "in a reduction",
        "wait_barrier_implicit_parallel" => "at the region's closing barrier",
        "wait_barrier_implicit_workshare" => "at a worksharing construct's closing barrier",
        "wait_barrier_explicit" => "at an explicit barrier",
        "wait_barrier" | "wait_barrier_implicit" | "wait_barrier_implementation" => "at a barrier",
        "wait_taskwait" => "in taskwait",
        "wait_taskgroup" => "at the end of a taskgroup",
        "wait_lock" | "wait_mutex" => "waiting for a lock",
        "wait_critical" => "waiting to enter a critical section",
        "wait_atomic" => "waiting for an atomic update",
        "wait_ordered" => "waiting for its ordered turn",
        "idle" => "idle",
        "overhead" => "in the runtime",
        other if other.starts_with("wait_target") => "waiting for a target device",
        _ => return format!("in state {state}"),
    };
    format!("{words} ({state})")
}
