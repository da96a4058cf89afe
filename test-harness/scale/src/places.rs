//! Where a rank is and what it is in, in the terms findings use: its main thread, the
//! place a finding names, a collective instance's name.

use mqd_model::{Location, RankDump, RankSet, ThreadStack};
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
