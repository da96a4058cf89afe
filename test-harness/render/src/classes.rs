//! A job of classes (analysed at scale) in words and as JSON: one line per class, the
//! verdict and its reasons. Nothing is written per rank.

use super::phrases::describe;
use super::verdict::{doubt_text, verdict_line};
use super::words::finding_text;
use mqd_model::{
    Certainty, ClassJob, ClassPeer, FindingKind, Location, RankClass, RankDump, RankSet,
};
use mqd_scale::shared::{comm_of, is_world};
use mqd_scale::{ClassDiagnosis, FindingRanks, HeldBy, HeldClass};
use serde_json::{Value, json};

/// Where a class's ranks are: their first member's threads, with the caller of the MPI
/// call and, for a receive, its source as the class sees it; where the last member reads
/// otherwise (a number tied to the rank), both.
pub fn place(class: &RankClass, size: u32) -> String {
    let first = place_of(class, &class.first, size);
    match &class.last {
        Some(last) if place_of(class, last, size) != first => format!(
            "{first} (rank {}) ... {} (rank {})",
            class.first.rank,
            place_of(class, last, size),
            last.rank
        ),
        _ => first,
    }
}

fn place_of(class: &RankClass, first: &mqd_model::RankDump, size: u32) -> String {
    let program = first.executable.as_deref();
    let places: Vec<String> = first
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| match t.location_in(program) {
            Location::InMpi { call, .. } => {
                // A Python rank's caller is its Python line, not the extension's C.
                let caller = super::stacks::python_caller(t).or_else(|| {
                    t.frames
                        .iter()
                        .skip_while(|f| f.function.as_deref() != Some(call.as_str()))
                        .nth(1)
                        .and_then(|f| f.function.clone())
                });
                let mut text = format!("in {call}");
                if let Some(caller) = caller {
                    text.push_str(&format!(" (from {caller})"));
                }
                if let Some(source) = source(class, i, size) {
                    text.push_str(&format!(", {source}"));
                }
                text
            }
            Location::Outside {
                function: Some(f), ..
            } => format!("not in MPI (in {f})"),
            Location::Outside { .. } => "not in MPI".into(),
            Location::MpiThread => "a thread of the MPI library".into(),
            Location::Unknown => "where its stack could not be followed".into(),
        })
        .collect();
    places.join("; ")
}

/// A rank's `d`-th right neighbour around a job of `size`, in words.
fn neighbour(d: i64, size: u32) -> String {
    match d {
        1 => "its right neighbour (rank + 1)".into(),
        d if d == i64::from(size) - 1 => "its left neighbour (rank - 1)".into(),
        d if d > i64::from(size) / 2 => format!("rank - {} (mod {size})", i64::from(size) - d),
        d => format!("rank + {d} (mod {size})"),
    }
}

/// The peer of thread `index`'s call in `r` as a COMM_WORLD rank (or MPI's special
/// value): its local rank on the call's communicator translated by the communicator's
/// members. `Err` with the local rank where the communicator is not known.
fn world_peer(r: &RankDump, index: usize, size: u32) -> Option<Result<i64, i64>> {
    let args = r.threads.get(index)?.call.as_ref()?;
    let peer = args.peer?;
    if peer < 0 || is_world(args) {
        return Some(Ok(peer));
    }
    Some(
        comm_of(r, args, Some(size))
            .and_then(|c| c.world(peer))
            .map(i64::from)
            .ok_or(peer),
    )
}

/// The peer of a thread's call in words, as every member of the class names it.
fn source(class: &RankClass, index: usize, size: u32) -> Option<String> {
    let first = world_peer(&class.first, index, size)?;
    let last = match &class.last {
        Some(l) => Some(world_peer(l, index, size)?),
        None => None,
    };
    let (p0, p1) = match (first, last) {
        (Ok(p0), None) => (p0, None),
        (Ok(p0), Some(Ok(p1))) => (p0, Some(p1)),
        (Err(local), _) | (_, Some(Err(local))) => {
            return Some(format!("with local rank {local} of its communicator"));
        }
    };
    let at = |p: i64, r: &RankDump| (p, i64::from(r.rank));
    let last = class.last.as_ref().zip(p1).map(|(l, p1)| at(p1, l));
    Some(match ClassPeer::of(at(p0, &class.first), last, size)? {
        ClassPeer::Any => "from any source".into(),
        ClassPeer::Null => "from MPI_PROC_NULL".into(),
        ClassPeer::Offset(d) => format!("with {}", neighbour(d, size)),
        ClassPeer::Rank(p) => format!("with rank {p}"),
    })
}

/// What a class of the worst reading waits for, in words: "in MPI_Recv, each waiting
/// for its right neighbour (rank + 1)".
pub fn held_text(h: &HeldClass, size: u32) -> String {
    let words: Vec<String> = h
        .waits
        .iter()
        .map(|(call, by)| {
            let what = match by {
                HeldBy::Neighbour(k) => {
                    format!("each waiting for {}", neighbour((*k).into(), size))
                }
                // Itself (an any-source receive's own rank) is no one it waits for.
                HeldBy::AnyNeighbour(offsets) => {
                    let each: Vec<String> = offsets
                        .iter()
                        .filter(|&k| k != 0)
                        .map(|k| neighbour(k.into(), size))
                        .collect();
                    match each.is_empty() {
                        true => "each waiting for itself".into(),
                        false => format!("each waiting for any one of {}", each.join(" and ")),
                    }
                }
                HeldBy::Rank(p) => format!("waiting for rank {p}"),
                HeldBy::AnyRank => "waiting for any rank (a receive from any source)".into(),
                HeldBy::AnyOf(ranks) => format!("waiting for any one of {}", short(ranks)),
                HeldBy::Outside(ranks) => format!("waiting for {}, not in it", short(ranks)),
            };
            format!("in {call}, {what}")
        })
        .collect();
    words.join("; and ")
}

/// A deadlocked set's part in words: "are on cycles of waits, proven".
pub(crate) fn part_text(p: &FindingRanks) -> String {
    let what = match p.kind {
        FindingKind::DeadlockCycle => "are on cycles of waits",
        FindingKind::DeadlockKnot => "are in a knot of waits (no one simple cycle)",
        FindingKind::DeadlockClosed => "wait only for each other (a closed set)",
        _ => "are blocked behind them",
    };
    let how = match p.certainty {
        Certainty::Definite => "proven",
        Certainty::Possible => "possibly",
    };
    format!("{what}, {how}")
}

/// A queue finding in words, by rank sets: ranks whose queues were not read say why, as
/// their classes' dumps do (an MPI that keeps no queues has none to read); ranks not
/// dumped at all are said with the job's failures.
fn queue_finding_lines(job: &ClassJob, f: &FindingRanks) -> Vec<(RankSet, String)> {
    if f.kind != FindingKind::DumpFailed {
        return vec![(f.ranks.clone(), queue_finding_text(f.kind).to_owned())];
    }
    let mut lines: Vec<(RankSet, String)> = Vec::new();
    for c in &job.classes {
        let ranks = c.ranks.intersection(&f.ranks);
        if ranks.is_empty() {
            continue;
        }
        let text = match c.first.outcome.as_ref().err() {
            Some(e) if e.starts_with("its MPI ") => format!("have no message queues: {e}"),
            Some(e) => format!("could not be dumped: {e}"),
            None => queue_finding_text(f.kind).to_owned(),
        };
        match lines.iter_mut().find(|(_, t)| *t == text) {
            Some((set, _)) => set.union_with(&ranks),
            None => lines.push((ranks, text)),
        }
    }
    lines
}

/// What the queues show of ranks, by the kind of the per-rank finding.
fn queue_finding_text(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::DumpFailed => "could not be dumped",
        FindingKind::InTransit => "have messages in transit",
        FindingKind::TagMismatch => "have a receive a waiting message would match but for its tag",
        FindingKind::SourceMismatch => {
            "have a receive a waiting message would match but for its source"
        }
        FindingKind::CommunicatorMismatch => {
            "have a receive a waiting message would match but for its communicator"
        }
        FindingKind::IdleTarget => {
            "have no pending point-to-point communication, yet ranks wait for them: busy computing, or blocked outside point-to-point (a collective, I/O, a lock)"
        }
        FindingKind::UndumpedTarget => {
            "are waited for, and were not dumped: their state is unknown"
        }
        FindingKind::UnknownPeer => {
            "have operations whose peers' COMM_WORLD ranks are unknown: they are left out of the wait-for graph"
        }
        FindingKind::UnreadableQueues => {
            "have queues that could not all be read: their waits are not all known"
        }
        FindingKind::WaitsOnFinalized => {
            "are past or in MPI_Finalize, yet ranks wait in point-to-point for them: messages from them never come"
        }
        FindingKind::NoDeadlock => "wait, and deadlock nobody",
        _ => "are named by a finding of this kind (--per-rank words it)",
    }
}

/// Most classes the text report lists one by one.
const SHOWN_CLASSES: usize = 20;

/// The text report.
pub fn class_text(job: &ClassJob, d: &ClassDiagnosis, title: &str) -> String {
    let mut out = format!("{title}\n");
    let classes = job.classes.len();
    out.push_str(&format!(
        "{} ranks in {} {}:\n",
        job.dumped().len(),
        classes,
        if classes == 1 { "class" } else { "classes" }
    ));
    // Largest classes first; the deviants, small, at the end where they are seen, the
    // smallest of many summed up: the report stays a screen whatever the job.
    let mut order: Vec<&RankClass> = job.classes.iter().collect();
    order.sort_by_key(|c| std::cmp::Reverse(c.ranks.len()));
    for c in order.iter().take(SHOWN_CLASSES) {
        out.push_str(&format!(
            "  {} ({}): {}\n",
            short(&c.ranks),
            c.ranks.len(),
            place(c, job.size)
        ));
        // Hybrid ranks: their OpenMP threads as the runtime says, the first member's.
        if let Some(openmp) = super::openmp::rank_text(&c.first) {
            out.push_str(&format!("    OpenMP: {openmp}\n"));
        }
    }
    if let Some((more, ranks)) = beyond(order.iter().map(|c| &c.ranks)) {
        out.push_str(&format!(
            "  and {more} more classes, {ranks} (--json lists every class, --per-rank every rank)\n"
        ));
    }
    for f in &job.failed {
        out.push_str(&format!("  {} not dumped: {}\n", short(&f.ranks), f.why));
    }
    for f in d.findings.iter().take(SHOWN_CLASSES) {
        out.push_str(&format!("{}\n", finding_text(f)));
    }
    if let Some((more, ranks)) = beyond(d.findings.iter().map(|f| &f.ranks)) {
        out.push_str(&format!(
            "and {more} more findings, of {ranks} (--json lists every finding)\n"
        ));
    }
    if !d.possibly_deadlocked.is_empty() {
        let unproven = d.possibly_deadlocked.difference(&d.deadlocked);
        let head = match (d.deadlocked.is_empty(), unproven.is_empty()) {
            (true, _) => format!("Possibly deadlocked: {}", describe(&unproven)),
            (false, true) => format!("Deadlocked (proven): {}", describe(&d.deadlocked)),
            (false, false) => format!(
                "Deadlocked (proven): {}; possibly: {}",
                describe(&d.deadlocked),
                describe(&unproven)
            ),
        };
        out.push_str(&format!("{head}:\n"));
        // The largest first, the rest summed up, as the classes.
        let mut held: Vec<&HeldClass> = d.held.iter().collect();
        held.sort_by_key(|h| std::cmp::Reverse(h.ranks.len()));
        for h in held.iter().take(SHOWN_CLASSES) {
            out.push_str(&format!(
                "  {} ({}): {}\n",
                short(&h.ranks),
                h.ranks.len(),
                held_text(h, job.size)
            ));
        }
        if let Some((more, ranks)) = beyond(held.iter().map(|h| &h.ranks)) {
            out.push_str(&format!(
                "  and {more} more, {ranks}, each waiting otherwise (--json lists each)\n"
            ));
        }
        for p in d.deadlocks.iter().flatten() {
            out.push_str(&format!(
                "  {} ({}) {}\n",
                short(&p.ranks),
                p.ranks.len(),
                part_text(p)
            ));
        }
    }
    for f in &d.queue_findings {
        // Said already, rank by rank, by a finding of the same kind.
        let worded = (d.findings.iter()).any(|w| w.kind == f.kind && f.ranks.is_subset(&w.ranks));
        if worded {
            continue;
        }
        for (ranks, text) in queue_finding_lines(job, f) {
            out.push_str(&format!("{} ({}): {text}\n", short(&ranks), ranks.len()));
        }
    }
    out.push_str(&verdict_line(d.verdict, &d.deadlocked, &d.doubts));
    out.push('\n');
    out
}

/// What a list cut after [`SHOWN_CLASSES`] entries leaves out: how many entries, and
/// their ranks ("ranks 20-299 (280)"); `None` when nothing is left out.
fn beyond<'a>(sets: impl ExactSizeIterator<Item = &'a RankSet>) -> Option<(usize, String)> {
    let more = sets.len().checked_sub(SHOWN_CLASSES).filter(|&m| m > 0)?;
    let mut rest = RankSet::new();
    sets.skip(SHOWN_CLASSES).for_each(|r| rest.union_with(r));
    Some((more, format!("{} ({})", short(&rest), rest.len())))
}

/// The ranks of `job` a signal killed (read from their cores), by signal: "ranks 0-299
/// (300) were killed by signal 3 (SIGQUIT)", a line each; with the same as JSON.
pub fn killed(job: &mqd_model::JobDump) -> (String, Value) {
    let mut by_signal: std::collections::BTreeMap<i32, RankSet> = Default::default();
    for r in job.ranks.iter().filter(|r| !r.duplicate) {
        if let (Some(signal), Ok(rank)) = (r.signal, u32::try_from(r.rank)) {
            by_signal.entry(signal).or_default().insert(rank);
        }
    }
    let name = super::text::signal_name;
    let text = by_signal
        .iter()
        .map(|(signal, ranks)| {
            format!(
                "{} ({}) {} killed by signal {signal} ({})\n",
                short(ranks),
                ranks.len(),
                if ranks.len() == 1 { "was" } else { "were" },
                name(*signal)
            )
        })
        .collect();
    let doc = by_signal
        .iter()
        .map(|(signal, ranks)| {
            json!({"ranks": ranks.to_string(), "signal": signal, "name": name(*signal)})
        })
        .collect();
    (text, Value::Array(doc))
}

/// A rank set as it prints (ranges, and single ranks equally apart as `a-b:step`), cut
/// after the first few elements.
pub(crate) fn short(ranks: &RankSet) -> String {
    const SHOWN: usize = 8;
    let text = ranks.to_string();
    if ranks.len() == 1 {
        return format!("rank {text}");
    }
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() <= SHOWN {
        return format!("ranks {text}");
    }
    format!(
        "ranks {},... ({} more)",
        parts[..SHOWN].join(","),
        parts.len() - SHOWN
    )
}

/// A dump as JSON with each group in progression (`MPI_COMM_WORLD`'s of a million)
/// written `{"start", "step", "count"}`: never a million numbers per class.
fn compact_dump(dump: &mqd_model::RankDump) -> Value {
    let mut light = dump.clone();
    let mut ranges = Vec::new();
    if let Ok(comms) = &mut light.outcome {
        for c in comms.iter_mut() {
            let range =
                c.group.as_ref().and_then(|g| g.progression()).map(
                    |(start, step, count)| json!({"start": start, "step": step, "count": count}),
                );
            if range.is_some() {
                c.group = None;
            }
            ranges.push(range);
        }
    }
    let mut value = serde_json::to_value(&light).unwrap_or_default();
    if let Some(comms) = value.get_mut("communicators").and_then(Value::as_array_mut) {
        for (c, range) in comms.iter_mut().zip(ranges) {
            if let Some(range) = range {
                c["group"] = range;
            }
        }
    }
    value
}

/// A class document: its members but `classes` as values (`head`, to which members may
/// be added), and the classes serialized one at a time: a job whose classes were split
/// into classes of one holds every rank's dump, never all held as JSON values at once.
pub struct ClassDocument<'a> {
    /// Every member but `classes`.
    pub head: Value,
    job: &'a ClassJob,
}

impl ClassDocument<'_> {
    /// Writes the document to `out` as one JSON object, each class built as it is
    /// written.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(b"{")?;
        for (key, value) in self.head.as_object().into_iter().flatten() {
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")?;
            serde_json::to_writer(&mut *out, value)?;
            out.write_all(b",")?;
        }
        out.write_all(b"\"classes\":[")?;
        let job = self.job;
        for (i, c) in job.classes.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let class = json!({
                "ranks": c.ranks,
                "count": c.ranks.len(),
                "place": place(c, job.size),
                "openmp": super::openmp::rank_text(&c.first),
                "first": compact_dump(&c.first),
            });
            serde_json::to_writer(&mut *out, &class)?;
        }
        out.write_all(b"]}")
    }

    /// The document as a string.
    pub fn to_json_string(&self) -> String {
        let mut text = Vec::new();
        // Writing to memory fails only where serializing does: never for values.
        let _ = self.write_to(&mut text);
        String::from_utf8(text).unwrap_or_default()
    }
}

/// The JSON document.
pub fn class_json<'a>(job: &'a ClassJob, d: &ClassDiagnosis, about: Value) -> ClassDocument<'a> {
    let head = json!({
        "schema": "mqd/3-classes",
        "job": about,
        "size": job.size,
        "library": job.dll,
        "failed": job.failed.iter().map(|f| json!({
            "ranks": f.ranks,
            "why": f.why,
        })).collect::<Vec<_>>(),
        "diagnosis": {
            "verdict": d.verdict.name(),
            "doubts": d.doubts.iter().map(|x| json!({
                "doubt": x,
                "text": doubt_text(x),
            })).collect::<Vec<_>>(),
            "deadlocked": d.deadlocked,
            "possibly_deadlocked": d.possibly_deadlocked,
            "held": d.held.iter().map(|h| json!({
                "ranks": h.ranks,
                "count": h.ranks.len(),
                "text": held_text(h, job.size),
            })).collect::<Vec<_>>(),
            "deadlocks": d.deadlocks.as_ref().map(|parts| parts.iter().map(|p| json!({
                "kind": p.kind,
                "certainty": p.certainty,
                "ranks": p.ranks,
                "count": p.ranks.len(),
                "text": part_text(p),
            })).collect::<Vec<_>>()),
            "queue_findings": d.queue_findings.iter().map(|f| json!({
                "kind": f.kind,
                "ranks": f.ranks,
                "count": f.ranks.len(),
                "text": queue_finding_lines(job, f).into_iter().map(|(_, t)| t).collect::<Vec<_>>().join("; "),
            })).collect::<Vec<_>>(),
            "running": d.running,
            "findings": d.findings.iter().map(|f| json!({
                "kind": f.kind,
                "certainty": f.certainty,
                "ranks": f.ranks,
                "subject": f.subject,
                "text": finding_text(f),
            })).collect::<Vec<_>>(),
        },
        "verdict": verdict_line(d.verdict, &d.deadlocked, &d.doubts),
    });
    ClassDocument { head, job }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{Acquisition, LibraryInfo, RankDump, Snapshot, ThreadStack};

    #[test]
    fn many_classes_are_listed_up_to_a_screen() {
        // One class of 70 ranks computing, and 30 deviants each a class of its own.
        let computing = |r: i32, f: &str| RankDump {
            threads: vec![ThreadStack::named(r + 1, &[f, "main"], None)],
            ..RankDump::unread(r, Some(100 + r), Some("/bin/app".into()))
        };
        let mut classes = vec![RankClass {
            ranks: (0..70).collect(),
            first: computing(0, "solve"),
            last: Some(computing(69, "solve")),
        }];
        classes.extend((70..100).map(|r| RankClass {
            ranks: RankSet::single(r as u32),
            first: computing(r, &format!("step{r}")),
            last: None,
        }));
        let job = ClassJob {
            dll: LibraryInfo::default(),
            acquired_by: Acquisition::Attach,
            starter_pid: None,
            abort_message: None,
            size: 100,
            size_known: true,
            classes,
            failed: Vec::new(),
            unranked: Vec::new(),
            snapshot: Snapshot::One,
        };
        let text = class_text(&job, &mqd_scale::diagnose_classes(&job), "Job");
        assert!(text.contains("100 ranks in 31 classes:\n"), "{text}");
        let listed = text
            .lines()
            .filter(|l| l.starts_with("  ranks ") || l.starts_with("  rank "))
            .count();
        assert_eq!(listed, SHOWN_CLASSES, "{text}");
        assert!(
            text.contains("\n  and 11 more classes, ranks 89-99 (11) (--json"),
            "{text}"
        );
    }

    /// Ranks of an MPI that keeps no queues (Debian's, PyPI's) in `MPI_Recv` from
    /// Python, one class of eight: their place is their Python line, and their queues are
    /// said to be missing, not their dumps to have failed.
    #[test]
    fn python_ranks_without_queues_read_as_such_by_classes() {
        use mqd_model::Frame;
        use mqd_model::stack::Language;
        let no_queues = "its MPI keeps no message queues for debuggers";
        let rank = |r: i32| {
            let frame = |function: &str, mpi: bool| Frame {
                function: Some(function.into()),
                mpi,
                ..Frame::default()
            };
            let line = Frame {
                file: Some("ring.py".into()),
                line: Some(6),
                language: Some(Language::Python),
                ..frame("exchange", false)
            };
            let frames = vec![
                frame("MPI_Recv", true),
                frame("__pyx_f_6mpi4py_3MPI_PyMPI_recv", false),
                frame("__pyx_pw_6mpi4py_3MPI_4Comm_257recv", false),
                line,
                frame("main", false),
            ];
            let mut thread = ThreadStack::named(r + 1, &[], None);
            thread.frames = frames;
            RankDump {
                threads: vec![thread],
                outcome: Err(no_queues.into()),
                ..RankDump::unread(r, Some(100 + r), Some("/usr/bin/python3".into()))
            }
        };
        let job = ClassJob {
            dll: LibraryInfo::default(),
            acquired_by: Acquisition::Attach,
            starter_pid: None,
            abort_message: None,
            size: 8,
            size_known: true,
            classes: vec![RankClass {
                ranks: RankSet::full(8),
                first: rank(0),
                last: Some(rank(7)),
            }],
            failed: Vec::new(),
            unranked: Vec::new(),
            snapshot: Snapshot::One,
        };
        let text = class_text(&job, &mqd_scale::diagnose_classes(&job), "Job");
        assert!(
            text.contains(
                "  ranks 0-7 (8): in MPI_Recv (from mpi4py.MPI.Comm.recv in exchange (ring.py:6))"
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "\nranks 0-7 have no message queues: {no_queues}\n"
            )),
            "{text}"
        );
        assert!(!text.contains("could not be dumped"), "{text}");
    }

    #[test]
    fn what_a_class_waits_for_any_one_of_is_named_without_itself() {
        let held = |by: HeldBy| {
            let h = HeldClass {
                ranks: RankSet::full(12),
                waits: vec![("MPI_Recv".into(), by)],
            };
            held_text(&h, 12)
        };
        // A row of four's second column: the others of its row.
        assert_eq!(
            held(HeldBy::AnyNeighbour([11, 0, 1, 2].into_iter().collect())),
            "in MPI_Recv, each waiting for any one of its right neighbour (rank + 1) and \
             rank + 2 (mod 12) and its left neighbour (rank - 1)"
        );
        assert_eq!(
            held(HeldBy::AnyNeighbour(RankSet::single(0))),
            "in MPI_Recv, each waiting for itself"
        );
        assert_eq!(
            held(HeldBy::AnyOf([0, 2, 4].into_iter().collect())),
            "in MPI_Recv, waiting for any one of ranks 0,2,4"
        );
    }
}
