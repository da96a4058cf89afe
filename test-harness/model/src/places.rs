//! Where a rank is and what it is in, in the terms findings use: its main thread, the
//! place a finding names, a collective instance's name.

use crate::{Location, RankDump, RankSet, ThreadStack};
use std::collections::BTreeMap;

/// The main thread of a rank: the thread whose id is its pid, else its first.
pub fn main_thread(r: &RankDump) -> Option<&ThreadStack> {
    r.threads
        .iter()
        .find(|t| Some(t.tid) == r.pid)
        .or(r.threads.first())
}

/// Where the program made the MPI call a thread is in ("ring.c:27"): its frame just
/// outside MPI, when its line table says.
pub fn call_line(t: &ThreadStack) -> Option<String> {
    let entry = t.frames.iter().rposition(|f| f.is_mpi())?;
    t.frames.get(entry + 1)?.source()
}

/// Where a rank is, in the words of a finding.
pub fn place(location: &Location) -> String {
    match location {
        Location::InMpi { call, .. } => format!("in {call}"),
        Location::Outside {
            function: Some(f),
            source: Some(at),
            ..
        } => format!("not in MPI (in {f} at {at})"),
        Location::Outside {
            function: Some(f), ..
        } => format!("not in MPI (in {f})"),
        Location::Outside { function: None, .. } => "not in MPI".into(),
        Location::MpiThread => "in a thread of the MPI library".into(),
        Location::Unknown => "where its stack could not be followed".into(),
    }
}

/// The calls of a communicator by name, a root added where one call has several.
/// An instance of a collective: its call, root and message size.
pub type Instance = (String, Option<i64>, Option<u64>);

/// The instances' names for a reader: the call, with its root and size where the same
/// call runs in several instances.
pub fn instance_names(calls: &BTreeMap<Instance, RankSet>) -> BTreeMap<String, RankSet> {
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_root: BTreeMap<(&str, Option<i64>), usize> = BTreeMap::new();
    for (name, root, _) in calls.keys() {
        *by_name.entry(name).or_default() += 1;
        *by_root.entry((name, *root)).or_default() += 1;
    }
    let mut out: BTreeMap<String, RankSet> = BTreeMap::new();
    for ((name, root, bytes), set) in calls {
        let mut shown = name.clone();
        if by_name[name.as_str()] > 1 {
            let mut parts = Vec::new();
            if let Some(root) = root {
                parts.push(format!("root {root}"));
            }
            if by_root[&(name.as_str(), *root)] > 1 {
                parts.push(bytes.map_or("size unknown".into(), |b| format!("{b} bytes")));
            }
            if !parts.is_empty() {
                shown = format!("{name} ({})", parts.join(", "));
            }
        }
        out.entry(shown).or_default().union_with(set);
    }
    out
}

/// Which collective on its communicator the main-thread call of `ranks` is, where the
/// hang recorder counted it for every class of them (its ranks, its first) alike.
pub fn counted<'a>(
    classes: impl IntoIterator<Item = (&'a RankSet, &'a RankDump)>,
    ranks: &RankSet,
) -> Option<u64> {
    let mut found = None;
    for (_, first) in classes
        .into_iter()
        .filter(|(c, _)| !c.intersection(ranks).is_empty())
    {
        let n = main_thread(first)?.call.as_ref()?.collective?;
        if found.is_some_and(|f| f != n) {
            return None;
        }
        found = Some(n);
    }
    found
}

/// Whether every call was counted, all at the same point of their communicator's
/// collectives: different collectives there are a mismatch MPI forbids, no rank "just
/// leaving" one.
pub fn at_one_point(counted: &[Option<u64>]) -> bool {
    !counted.is_empty()
        && counted.iter().all(Option::is_some)
        && counted.windows(2).all(|w| w[0] == w[1])
}

/// Where the first of `ranks` (in order, each class read by its first member) that is in
/// `call` (a name, maybe with its root or size after it) made it.
pub fn line_of_call<'a>(
    members: impl IntoIterator<Item = &'a RankDump>,
    ranks: &RankSet,
    call: &str,
) -> Option<String> {
    let name = call.split(" (").next().unwrap_or(call);
    let canonical = |c: &str| crate::calls::canonical(c).map_or(c, |k| k.name).to_owned();
    let wanted = canonical(name);
    members
        .into_iter()
        .filter(|d| u32::try_from(d.rank).is_ok_and(|r| ranks.contains(r)))
        .find_map(|d| {
            d.threads
                .iter()
                .find_map(|t| match t.location_in(d.executable.as_deref()) {
                    Location::InMpi { call, .. } if canonical(&call) == wanted => call_line(t),
                    _ => None,
                })
        })
}

/// Each OpenMP state of a rank's threads with the numbers of its threads.
pub type OpenMpStates = Vec<(String, Vec<i64>)>;

/// The OpenMP states of `r`'s threads, in order of their lowest thread, and whether
/// those waiting for a lock wait for one lock; `None` when its runtime says nothing.
pub fn states_of(r: &RankDump) -> Option<(OpenMpStates, bool)> {
    let mut states: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    let mut locks: Vec<u64> = Vec::new();
    for t in &r.threads {
        let Some(openmp) = &t.openmp else { continue };
        let Some(state) = &openmp.state else { continue };
        states
            .entry(state.clone())
            .or_default()
            .push(openmp.thread_num.unwrap_or(-1));
        if state == "wait_lock" || state == "wait_mutex" {
            locks.extend(openmp.wait_id);
        }
    }
    if states.is_empty() {
        return None;
    }
    locks.sort_unstable();
    locks.dedup();
    let mut states: OpenMpStates = states.into_iter().collect();
    for (_, nums) in &mut states {
        nums.sort_unstable();
    }
    states.sort_by_key(|(_, nums)| nums.first().copied());
    Some((states, locks.len() == 1))
}
