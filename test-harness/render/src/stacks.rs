//! Stacks merged across ranks, as STAT draws them: one prefix tree from the outermost
//! frame in, each branch labelled with the ranks that took it, so that ranks whose stacks
//! agree print once.

use super::phrases::describe;
use mqd_model::{Frame, JobDump, Location, RankDump, RankSet, StackNode, ThreadStack};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Which threads the tree shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// The main thread of each rank (its tid is its pid).
    Main,
    /// Every thread.
    All,
}

/// One node of the tree: a frame name, the ranks through it, and its callees.
#[derive(Debug, Default)]
struct Node {
    ranks: RankSet,
    threads: usize,
    children: BTreeMap<String, Node>,
    /// Walks that ended here with a note, and the note.
    cut: Option<String>,
}

impl Node {
    fn insert(&mut self, rank: u32, path: &[String], cut: Option<&str>) {
        self.ranks.insert(rank);
        self.threads += 1;
        match path.split_first() {
            Some((first, rest)) => self
                .children
                .entry(first.clone())
                .or_default()
                .insert(rank, rest, cut),
            None => {
                if let Some(note) = cut {
                    self.cut = Some(note.to_owned());
                }
            }
        }
    }
}

/// How much of each stack the tree shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    /// Which threads.
    pub threads: Threads,
    /// At most this many frames from the outermost (0: all).
    pub depth: usize,
    /// Also the frames inside MPI below the call the program made.
    pub mpi_internals: bool,
}

/// The frames of a stack outermost first, as `shown` says: the program's own (in
/// `program`, its executable) with their source lines, the MPI call it made by the name
/// the program called it (a Fortran binding by its call's).
fn path(stack: &ThreadStack, shown: Shown, program: Option<&str>) -> Vec<String> {
    // Cython's call glue into a Python-callable function of an extension
    // (`__Pyx_CyFunction_Vectorcall...` above `__pyx_pw_...`) is not shown.
    let glue = |i: usize| {
        let name = |j: usize| stack.frames.get(j).and_then(|f| f.function.as_deref());
        name(i).is_some_and(|n| n.starts_with("__Pyx_"))
            && i.checked_sub(1)
                .and_then(name)
                .is_some_and(|n| n.starts_with("__pyx_pw_"))
    };
    let frames: Vec<&Frame> = stack
        .frames
        .iter()
        .enumerate()
        .rev()
        .filter(|&(i, _)| shown.mpi_internals || !glue(i))
        .map(|(_, f)| f)
        .collect();
    // A Python thread's program lines are its Python frames'.
    let python = frames.iter().any(|f| f.language.is_some());
    let mut names: Vec<String> = frames
        .iter()
        .map(|f| {
            if !python && f.in_program(program) {
                f.label_with_source()
            } else {
                f.label()
            }
        })
        .collect();
    let binding = |f: &Frame| f.function.as_deref().and_then(mqd_model::calls::binding);
    let named_entry = frames
        .iter()
        .zip(&names)
        .position(|(f, n)| binding(f).is_some() || n.starts_with("MPI_") || n.starts_with("PMPI_"));
    // An MPI entry under no MPI name (Intel MPI's): the caller's call names it.
    let called = stack.call.as_ref().and_then(|c| c.called.as_deref());
    let unnamed_entry = frames.iter().position(|f| f.mpi);
    match (named_entry, called, unnamed_entry) {
        (Some(entry), _, _) if !shown.mpi_internals => {
            names.truncate(entry + 1);
            if let Some(b) = binding(frames[entry]).filter(|b| b.fortran) {
                names[entry] = b.call.name.to_owned();
            }
        }
        (None, Some(called), Some(entry)) if !shown.mpi_internals => {
            names.truncate(entry);
            names.push(format!("{called} (named by the caller's call)"));
        }
        _ => {}
    }
    // mpi4py's own helpers between the method the program called and the MPI call
    // are its internals, as the MPI library's are.
    if !shown.mpi_internals
        && let Some(entry) = names
            .iter()
            .position(|n| n.starts_with("MPI_") || n.starts_with("PMPI_"))
        && let Some(method) = names[..entry]
            .iter()
            .rposition(|n| n.starts_with("mpi4py."))
    {
        names.drain(method + 1..entry);
    }
    if shown.depth > 0 && names.len() > shown.depth {
        names.truncate(shown.depth);
    }
    names
}

/// The tree of the stacks of ranks of known rank, and the stacks of processes of unknown
/// rank (by pid), as `shown` says.
fn build(job: &JobDump, shown: Shown) -> (Node, Vec<(&RankDump, &ThreadStack)>) {
    let mut root = Node::default();
    let mut unranked = Vec::new();
    for r in &job.ranks {
        for stack in &r.threads {
            if shown.threads == Threads::Main && r.pid.is_some_and(|p| p != stack.tid) {
                continue;
            }
            match u32::try_from(r.rank) {
                Ok(rank) => root.insert(
                    rank,
                    &path(stack, shown, r.executable.as_deref()),
                    stack.truncated.as_deref(),
                ),
                Err(_) => unranked.push((r, stack)),
            }
        }
    }
    (root, unranked)
}

/// The stacks merged across ranks, as the model holds them (for JSON), or `None` when no
/// rank has any.
pub fn merged(job: &JobDump, shown: Shown) -> Option<Vec<StackNode>> {
    fn convert(name: &str, node: &Node) -> StackNode {
        StackNode {
            frame: name.to_owned(),
            ranks: node.ranks.clone(),
            threads: node.threads,
            truncated: node.cut.clone(),
            children: node.children.iter().map(|(n, c)| convert(n, c)).collect(),
        }
    }
    let (root, _) = build(job, shown);
    (root.threads > 0).then(|| root.children.iter().map(|(n, c)| convert(n, c)).collect())
}

/// The merged tree of the stacks of `job` in words, or `None` when no process has any.
pub fn stacks_text(job: &JobDump, shown: Shown) -> Option<String> {
    let (root, unranked) = build(job, shown);
    if root.threads == 0 && unranked.is_empty() {
        return None;
    }
    let which = match shown.threads {
        Threads::Main => "the main thread of each rank",
        Threads::All => "every thread of each rank",
    };
    let mut out = format!("Stacks ({which}, outermost frame first):\n");
    print(&mut out, &root, 0, &RankSet::new());
    // What could not be read beside the stacks (an interpreter's frames), by ranks.
    let mut notes: BTreeMap<&str, RankSet> = BTreeMap::new();
    for r in &job.ranks {
        if let Ok(rank) = u32::try_from(r.rank) {
            for note in &r.notes {
                notes.entry(note).or_default().insert(rank);
            }
        }
    }
    for (note, ranks) in notes {
        let _ = writeln!(out, "{}: {note}", describe(&ranks));
    }
    // Processes of unknown rank (no queues to say it), by pid.
    for (r, stack) in unranked {
        let pid = r.pid.map_or("?".into(), |p| p.to_string());
        let _ = writeln!(out, "pid {pid} (rank unknown), thread {}:", stack.tid);
        for name in path(stack, shown, r.executable.as_deref()) {
            let _ = writeln!(out, "  {name}");
        }
        if let Some(note) = &stack.truncated {
            let _ = writeln!(out, "  ({note})");
        }
    }
    Some(out)
}

/// The arguments of MPI calls that could not be read, with why (`None`: none), for the
/// threads `shown`: ranks whose reasons agree print once.
pub fn unknown_arguments_text(job: &JobDump, shown: Shown) -> Option<String> {
    let mut groups: BTreeMap<String, RankSet> = BTreeMap::new();
    for (rank, _, stack) in shown_threads(job, shown) {
        let Some(call) = stack.call.as_ref().filter(|c| !c.unknown.is_empty()) else {
            continue;
        };
        let name = call.called.as_deref().unwrap_or(&call.function);
        let why: Vec<String> = call
            .unknown
            .iter()
            .map(|(arg, why)| format!("{arg}: {}", without_addresses(why)))
            .collect();
        groups
            .entry(format!("in {name}: {}", why.join("; ")))
            .or_default()
            .insert(rank);
    }
    if groups.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Arguments not known (read from the caller's side: the MPI library has no debug information):
",
    );
    for (text, ranks) in groups {
        let _ = writeln!(out, "  {} {text}", describe(&ranks));
    }
    Some(out)
}

/// Where Python ranks made their MPI calls (`None`: no thread `shown` is a Python
/// thread in MPI): the call, the Python-callable function of an extension that made it
/// (`mpi4py.MPI.Comm.allreduce`), and the Python line that called that; ranks that agree
/// print once.
pub fn python_calls_text(job: &JobDump, shown: Shown) -> Option<String> {
    let mut groups: BTreeMap<String, RankSet> = BTreeMap::new();
    for (rank, r, stack) in shown_threads(job, shown) {
        let Location::InMpi { call, .. } = stack.location_in(r.executable.as_deref()) else {
            continue;
        };
        let Some(caller) = python_caller(stack) else {
            continue;
        };
        groups
            .entry(format!("{call}, from {caller}"))
            .or_default()
            .insert(rank);
    }
    if groups.is_empty() {
        return None;
    }
    let mut out = String::from("Called from Python:\n");
    for (text, ranks) in groups {
        let _ = writeln!(out, "  {}: {text}", describe(&ranks));
    }
    Some(out)
}

/// The Python code that made a thread's MPI call: the Python-callable function of an
/// extension that made it (`mpi4py.MPI.Comm.allreduce`) and the Python line that called
/// that ("mpi4py.MPI.Comm.allreduce in step (solver.py:12)"); `None` for a thread
/// without Python frames.
pub(crate) fn python_caller(stack: &ThreadStack) -> Option<String> {
    let caller = stack.frames.iter().position(|f| f.language.is_some())?;
    let method = stack.frames[..caller].iter().rev().find_map(|f| {
        f.function
            .as_deref()
            .and_then(mqd_model::stack::cython_name)
    });
    let line = stack.frames[caller].label();
    Some(match method {
        Some(m) => format!("{m} in {line}"),
        None => line,
    })
}

/// The threads `shown` of the ranks of known rank: (rank, its dump, the thread).
fn shown_threads(
    job: &JobDump,
    shown: Shown,
) -> impl Iterator<Item = (u32, &RankDump, &ThreadStack)> {
    job.ranks.iter().flat_map(move |r| {
        let rank = u32::try_from(r.rank).ok();
        r.threads.iter().filter_map(move |stack| {
            let hidden = shown.threads == Threads::Main && r.pid.is_some_and(|p| p != stack.tid);
            Some((rank?, r, stack)).filter(|_| !hidden)
        })
    })
}

/// A reason without its code addresses (they differ from rank to rank).
pub(crate) fn without_addresses(why: &str) -> String {
    why.split(' ')
        .filter(|w| !w.starts_with("0x"))
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" at (", " (")
        .replace(" at ", " ")
}

/// A node's callees: a chain of single callees on one indentation, a branch indented,
/// each branch naming its ranks.
fn print(out: &mut String, node: &Node, indent: usize, parent: &RankSet) {
    let branches = node.children.len() > 1;
    // Branches one step in from the chain they leave, their callees one more.
    let indent = if branches { indent + 2 } else { indent };
    for (name, child) in &node.children {
        let pad = " ".repeat(indent);
        let who = if branches || child.ranks != *parent {
            format!("{}: ", describe(&child.ranks))
        } else {
            String::new()
        };
        let threads = if child.threads > child.ranks.len() {
            format!(" ({} threads)", child.threads)
        } else {
            String::new()
        };
        let _ = writeln!(out, "{pad}{who}{name}{threads}");
        if let Some(note) = &child.cut {
            let _ = writeln!(out, "{pad}  ({note})");
        }
        let next = if branches { indent + 2 } else { indent };
        print(out, child, next, &child.ranks);
    }
}

/// The merged stacks as Graphviz DOT: a node per frame (with its ranks and threads), an
/// arrow from each caller to each callee.
pub fn stacks_dot(roots: &[StackNode]) -> String {
    fn walk(out: &mut String, node: &StackNode, parent: Option<usize>, next: &mut usize) {
        let id = *next;
        *next += 1;
        let threads = if node.threads > node.ranks.len() {
            format!("\n{} threads", node.threads)
        } else {
            String::new()
        };
        let label = format!("{}\n{}{threads}", node.frame, describe(&node.ranks));
        let _ = writeln!(out, "  f{id} [label={}];", super::dot::quote(&label));
        if let Some(p) = parent {
            let _ = writeln!(out, "  f{p} -> f{id};");
        }
        for child in &node.children {
            walk(out, child, Some(id), next);
        }
    }
    let mut out = String::from(
        "digraph stacks {\n  graph [label=\"mqd: stacks merged across ranks, outermost frame first\", labelloc=t, fontname=\"Helvetica\"];\n  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n",
    );
    let mut next = 0;
    for root in roots {
        walk(&mut out, root, None, &mut next);
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{CallArguments, Frame, RankDump};

    fn rank(r: i32, why: &str) -> RankDump {
        let mut dump = RankDump::unread(r, Some(100 + r), None);
        let mut call = CallArguments {
            function: "MPI_Bcast".into(),
            called: Some("MPI_Bcast".into()),
            ..CallArguments::default()
        };
        call.unknown.insert("root".into(), why.into());
        dump.threads = vec![ThreadStack {
            openmp: None,
            tid: 100 + r,
            frames: vec![
                Frame {
                    function: None,
                    object: Some("/lib/libmpi.so.12".into()),
                    offset: 0x2d0,
                    mpi: true,
                    ..Frame::default()
                },
                Frame {
                    function: Some("main".into()),
                    ..Frame::default()
                },
            ],
            truncated: None,
            call: Some(call),
        }];
        dump
    }

    #[test]
    fn unknown_arguments_are_said_once_for_ranks_that_agree_and_unnamed_entries_named() {
        let shown = Shown {
            threads: Threads::Main,
            depth: 0,
            mpi_internals: false,
        };
        let job = JobDump::of_ranks(vec![
            rank(0, "rcx is computed at 0x5581 (Sub)"),
            rank(1, "rcx is computed at 0x7f00 (Sub)"),
        ]);
        let text = unknown_arguments_text(&job, shown).unwrap();
        assert!(
            text.contains("ranks 0,1 in MPI_Bcast: root: rcx is computed (Sub)"),
            "{text}"
        );
        let tree = stacks_text(&job, shown).unwrap();
        assert!(
            tree.contains("MPI_Bcast (named by the caller's call)"),
            "{tree}"
        );
        assert!(!tree.contains("libmpi.so.12+"), "{tree}");
    }
}
