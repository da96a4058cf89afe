//! Pictures of the wait-for graph: Graphviz DOT text, rendered by Graphviz's `dot`.
//!
//! [`to_dot`] draws ranks as nodes and every [`Wait`] of a [`Diagnosis`] as an arrow
//! from the waiting rank to the rank it waits for: sends blue, messages waiting
//! unexpected orange, receives green, receives from any source dashed green to an "any of
//! ranks ..." node (dotted arrows lead from it to its members). Each arrow is labelled
//! with the tag and the communicator. Arrows of deadlock cycles and knots are red and
//! bold; deadlocked ranks are filled red (outlined red and dashed when the deadlock is
//! only possible: pending operations that may be non-blocking), ranks others wait for that have no pending
//! communication yellow, ranks that are not in the dump grey and dashed. Jobs of more than
//! [`DotOptions::collapse_above`] ranks (or any job, with [`Collapse::Always`]) are drawn
//! with one node per [`aggregate`] group ("ranks 0-63"), and arrows between groups say how
//! many waits they stand for.
//!
//! [`render`] runs `dot -Tsvg` / `dot -Tpng`; when Graphviz is missing the error says how
//! to install it.

use super::groups::{state_lines, who};
use super::phrases::describe;
use mqd_analysis::aggregate;
use mqd_model::{
    Diagnosis, FindingKind, JobDump, RankSet, Relation, Verdict, Wait, WaitKind, WaitTarget,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// When to draw rank-set nodes instead of one node per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collapse {
    /// When the job has more than [`DotOptions::collapse_above`] ranks.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Options of [`to_dot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DotOptions {
    /// When to collapse ranks into rank-set nodes.
    pub collapse: Collapse,
    /// Largest job drawn rank by rank under [`Collapse::Auto`] (default 32).
    pub collapse_above: usize,
    /// Most members of an "any of ranks ..." node that get a dotted arrow each (default 16).
    pub max_any_members: usize,
    /// First line of the graph's title (default "mqd: who waits for whom").
    pub title: Option<String>,
}

impl Default for DotOptions {
    fn default() -> Self {
        DotOptions {
            collapse: Collapse::Auto,
            collapse_above: 32,
            max_any_members: 16,
            title: None,
        }
    }
}

/// Colour of a kind of wait.
pub fn kind_colour(kind: WaitKind) -> &'static str {
    match kind {
        WaitKind::Send => "#1f5fbf",
        WaitKind::Unexpected => "#e07000",
        WaitKind::Receive => "#2a8a2a",
        WaitKind::Collective => "#7a3fa0",
    }
}

/// Colour of the arrows of deadlock cycles and knots.
pub const CYCLE_COLOUR: &str = "red";

/// A DOT string literal: quotes and backslashes escaped, newlines as `\n`.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The node id of COMM_WORLD rank `rank` in an uncollapsed graph: `r0`, `r1`, ...
/// (`rm1` for -1).
pub fn rank_node(rank: i32) -> String {
    if rank < 0 {
        format!("rm{}", -i64::from(rank))
    } else {
        format!("r{rank}")
    }
}

fn tag_label(tag: Option<i64>) -> String {
    match tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".into(),
    }
}

fn comm_label(w: &Wait) -> String {
    match (&w.comm.of_ranks, w.comm.name.is_empty()) {
        (_, false) => w.comm.name.to_string(),
        (Some(ranks), true) => format!("(ranks {ranks})"),
        (None, true) => format!("(unnamed, size {})", w.comm.size),
    }
}

/// Edges of the deadlock findings.
fn highlighted(diagnosis: &Diagnosis) -> HashSet<(i32, i32)> {
    diagnosis
        .findings
        .iter()
        .filter(|f| f.kind.is_deadlock())
        .flat_map(|f| f.edges.iter().copied())
        .collect()
}

/// Ranks of findings of `kind`.
fn ranks_of(diagnosis: &Diagnosis, kind: FindingKind) -> RankSet {
    let mut set = RankSet::new();
    for f in diagnosis.of_kind(kind) {
        set.union_with(&f.ranks);
    }
    set
}

struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, line: impl AsRef<str>) {
        self.text.push_str("  ");
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }
}

fn header(out: &mut Out, job: &JobDump, diagnosis: &Diagnosis, options: &DotOptions) {
    let title = options
        .title
        .clone()
        .unwrap_or_else(|| "mqd: who waits for whom".into());
    let ranks = job.ranks.len();
    let state = match diagnosis.verdict {
        Verdict::Deadlock => format!("deadlock: {}", describe(&diagnosis.deadlocked)),
        Verdict::NoDeadlock => "no deadlock".to_string(),
        Verdict::Undetermined if !diagnosis.possibly_deadlocked.is_empty() => format!(
            "undetermined (possible deadlock: {})",
            describe(&diagnosis.possibly_deadlocked)
        ),
        Verdict::Undetermined => "undetermined (see the text view)".to_string(),
    };
    let label = format!(
        "{title}\n{ranks} {}, {state}; arrows go from the waiting rank to the rank it waits for\nblue: send, orange: message waiting unexpected, green: receive, red: deadlock",
        if ranks == 1 { "rank" } else { "ranks" }
    );
    out.text.push_str("digraph mqd {\n");
    out.line(format!(
        "graph [label={}, labelloc=t, fontname=\"Helvetica\", fontsize=12, rankdir=LR, nodesep=0.4];",
        quote(&label)
    ));
    out.line("node [shape=box, style=\"rounded,filled\", fillcolor=\"white\", fontname=\"Helvetica\", fontsize=11];");
    out.line("edge [fontname=\"Helvetica\", fontsize=9];");
}

/// Attributes of a node holding ranks `ranks`.
fn node_style(
    ranks: &RankSet,
    diagnosis: &Diagnosis,
    idle: &RankSet,
    failed: &RankSet,
) -> &'static str {
    if ranks.intersects(&diagnosis.deadlocked) {
        "fillcolor=\"#f8d0d0\", color=\"red\", penwidth=2"
    } else if ranks.intersects(&diagnosis.possibly_deadlocked) {
        // Possibly deadlocked: pending operations that may be non-blocking.
        "fillcolor=\"#fbeaea\", color=\"red\", style=\"rounded,filled,dashed\""
    } else if ranks.intersects(idle) {
        "fillcolor=\"#fff2b3\""
    } else if !ranks.is_empty() && ranks.is_subset(failed) {
        "fillcolor=\"#e0e0e0\", style=\"rounded,filled,dashed\""
    } else {
        "fillcolor=\"white\""
    }
}

/// One arrow of the drawing, before merging identical ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Arrow {
    from: String,
    to: String,
    kind: WaitKind,
    any: bool,
    /// "recv from left", "send".
    head: String,
    tag: Option<i64>,
    comm: String,
}

/// Most arrows drawn between two nodes for one kind of wait: more are one arrow that
/// says how many and which tags (a rank with 100,000 receives draws one arrow, and
/// `dot` finishes in seconds).
const MAX_PARALLEL_ARROWS: usize = 4;

/// An arrow as drawn.
struct Drawn {
    from: String,
    to: String,
    kind: WaitKind,
    any: bool,
    label: String,
    hot: bool,
    /// Part of a proven deadlock (else a possible one, when hot).
    proven: bool,
}

/// How many waits an arrow stands for, whether it is part of a deadlock, and whether
/// that deadlock is proven.
type Weight = (usize, bool, bool);

/// Arrows between two nodes for one kind of wait.
type Bundle = Vec<(Arrow, Weight)>;

/// The arrows between each pair of nodes, one per kind of wait when there are many.
fn bundle(arrows: BTreeMap<Arrow, Weight>) -> Vec<Drawn> {
    let mut bundles: BTreeMap<(String, String, WaitKind, bool), Bundle> = BTreeMap::new();
    for (a, weight) in arrows {
        bundles
            .entry((a.from.clone(), a.to.clone(), a.kind, a.any))
            .or_default()
            .push((a, weight));
    }
    let mut out = Vec::new();
    for ((from, to, kind, any), arrows) in bundles {
        if arrows.len() <= MAX_PARALLEL_ARROWS {
            for (a, (n, hot, proven)) in arrows {
                let mut label = format!("{} {}\n{}", a.head, tag_label(a.tag), a.comm);
                if n > 1 {
                    let _ = write!(label, "\n\u{d7}{n}");
                }
                out.push(Drawn {
                    from: from.clone(),
                    to: to.clone(),
                    kind,
                    any,
                    label,
                    hot,
                    proven,
                });
            }
            continue;
        }
        let total: usize = arrows.iter().map(|(_, (n, _, _))| n).sum();
        let hot = arrows.iter().any(|(_, (_, h, _))| *h);
        let proven = arrows.iter().any(|(_, (_, _, p))| *p);
        let tags: Vec<i64> = arrows.iter().filter_map(|(a, _)| a.tag).collect();
        let tags = match (tags.iter().min(), tags.iter().max()) {
            (Some(lo), Some(hi)) if lo != hi => format!("tags {lo}-{hi}"),
            (Some(t), _) => format!("tag {t}"),
            _ => "any tag".into(),
        };
        let first = &arrows[0].0;
        let comm = if arrows.iter().all(|(a, _)| a.comm == first.comm) {
            first.comm.clone()
        } else {
            "several communicators".into()
        };
        let label = format!("{} \u{d7}{total}, {tags}\n{comm}", first.head);
        out.push(Drawn {
            from,
            to,
            kind,
            any,
            label,
            hot,
            proven,
        });
    }
    out
}

/// The wait-for graph of `job` as DOT text (see the module documentation).
pub fn to_dot(job: &JobDump, diagnosis: &Diagnosis, options: &DotOptions) -> String {
    let collapse = match options.collapse {
        Collapse::Always => true,
        Collapse::Never => false,
        Collapse::Auto => job.ranks.len() > options.collapse_above,
    };
    let mut out = Out {
        text: String::new(),
    };
    header(&mut out, job, diagnosis, options);
    let idle = ranks_of(diagnosis, FindingKind::IdleTarget);
    let failed: RankSet = job
        .ranks
        .iter()
        .filter(|r| r.outcome.is_err())
        .filter_map(|r| u32::try_from(r.rank).ok())
        .collect();
    let hot = highlighted(diagnosis);
    let knots = ranks_of(diagnosis, FindingKind::DeadlockKnot);

    // Node of each rank.
    let mut node_of: HashMap<i32, String> = HashMap::new();
    let mut declared: BTreeSet<String> = BTreeSet::new();
    if collapse {
        for (i, g) in aggregate(job).iter().enumerate() {
            let id = format!("g{i}");
            let who = who(g);
            let summary = wrap(&state_lines(&g.form).1, 48, 4);
            let label = format!("{who} ({})\n{summary}", g.ranks.len() + g.unranked.len());
            out.line(format!(
                "{id} [label={}, {}];",
                quote(&label),
                node_style(&g.ranks, diagnosis, &idle, &failed)
            ));
            for r in &g.ranks {
                node_of.insert(r as i32, id.clone());
            }
            declared.insert(id);
        }
    } else {
        for r in &job.ranks {
            let id = rank_node(r.rank);
            if !declared.insert(id.clone()) {
                continue;
            }
            let mut label = format!("rank {}", r.rank);
            if let Some(pid) = r.pid {
                let _ = write!(label, "\npid {pid}");
            }
            if let Some(host) = &r.host {
                let _ = write!(label, "\n{host}");
            }
            let ranks = RankSet::from_i32s([r.rank]);
            if r.outcome.is_err() {
                label.push_str("\nnot dumped");
            } else if ranks.intersects(&idle) {
                label.push_str("\nno pending p2p");
            }
            out.line(format!(
                "{id} [label={}, {}];",
                quote(&label),
                node_style(&ranks, diagnosis, &idle, &failed)
            ));
            node_of.insert(r.rank, id);
        }
    }
    // Ranks waited for that are not in the dump.
    let mut missing = RankSet::new();
    for w in &diagnosis.waits {
        let targets: Vec<i32> = match &w.target {
            WaitTarget::Rank(t) => vec![*t],
            WaitTarget::AnyOf(set) if set.len() <= options.max_any_members => {
                set.iter().map(|r| r as i32).collect()
            }
            _ => Vec::new(),
        };
        for t in targets.into_iter().chain([w.from]) {
            if !node_of.contains_key(&t)
                && let Ok(t) = u32::try_from(t)
            {
                missing.insert(t);
            }
        }
    }
    if !missing.is_empty() {
        if collapse {
            let id = "missing".to_string();
            out.line(format!(
                "{id} [label={}, fillcolor=\"#e0e0e0\", style=\"rounded,filled,dashed\"];",
                quote(&format!("{}\nnot in the dump", describe(&missing)))
            ));
            for r in &missing {
                node_of.insert(r as i32, id.clone());
            }
        } else {
            for r in &missing {
                let id = rank_node(r as i32);
                out.line(format!(
                    "{id} [label={}, fillcolor=\"#e0e0e0\", style=\"rounded,filled,dashed\"];",
                    quote(&format!("rank {r}\nnot in the dump"))
                ));
                node_of.insert(r as i32, id);
            }
        }
    }

    // Pseudo-nodes: "any of ranks ..." and unknown peers.
    let mut pseudo: BTreeMap<String, (String, Option<RankSet>)> = BTreeMap::new();
    let mut arrows: BTreeMap<Arrow, Weight> = BTreeMap::new();
    for w in &diagnosis.waits {
        let Some(from) = node_of.get(&w.from).cloned() else {
            continue;
        };
        let (to, any) = match &w.target {
            WaitTarget::Rank(t) => (node_of[t].clone(), false),
            WaitTarget::AnyOf(set) => {
                let label = format!("any of {}\non {}", describe(set), comm_label(w));
                let id = pseudo_id(&mut pseudo, label, Some(set.clone()));
                (id, true)
            }
            WaitTarget::AnyUnknown => {
                let label = format!("any member of {}\n(group unknown)", comm_label(w));
                (pseudo_id(&mut pseudo, label, None), true)
            }
            WaitTarget::UnknownRank { local } => {
                let label = format!(
                    "local rank {local} of {}\n(world rank unknown)",
                    comm_label(w)
                );
                (pseudo_id(&mut pseudo, label, None), false)
            }
        };
        let verb = match w.kind {
            WaitKind::Send => "send",
            WaitKind::Unexpected => "unexpected",
            WaitKind::Receive => "recv",
            WaitKind::Collective => "coll",
        };
        let relation = if collapse {
            match (&w.target, w.relation()) {
                (WaitTarget::Rank(_), r) if r != Relation::Absolute => {
                    let direction = if w.kind == WaitKind::Receive {
                        "from"
                    } else {
                        "to"
                    };
                    format!(" {direction} {}", r.name())
                }
                _ => String::new(),
            }
        } else {
            String::new()
        };
        let head = format!("{verb}{relation}");
        let is_hot = match &w.target {
            WaitTarget::Rank(t) => hot.contains(&(w.from, *t)),
            WaitTarget::AnyOf(set) => {
                set.is_subset(&diagnosis.possibly_deadlocked) && knots.contains_i32(w.from)
                    || set.iter().any(|t| hot.contains(&(w.from, t as i32)))
            }
            _ => false,
        };
        let e = arrows
            .entry(Arrow {
                from,
                to,
                kind: w.kind,
                any,
                head,
                tag: w.tag,
                comm: comm_label(w),
            })
            .or_insert((0, false, false));
        e.0 += 1;
        e.1 |= is_hot;
        e.2 |= is_hot && w.blocked;
    }
    for (id, (label, members)) in &pseudo {
        out.line(format!(
            "{id} [label={}, shape=ellipse, style=\"dashed\", fillcolor=\"white\"];",
            quote(label)
        ));
        if let Some(members) = members
            && members.len() <= options.max_any_members
        {
            for m in members {
                let Some(node) = node_of.get(&(m as i32)) else {
                    continue;
                };
                // Red when a deadlocked rank waits on this set and the member is deadlocked.
                let hot_member = members.is_subset(&diagnosis.possibly_deadlocked)
                    && diagnosis.possibly_deadlocked.contains(m)
                    && diagnosis.waits.iter().any(|w| {
                        knots.contains_i32(w.from)
                            && matches!(&w.target, WaitTarget::AnyOf(s) if s == members)
                    });
                let colour = if hot_member { CYCLE_COLOUR } else { "gray50" };
                out.line(format!(
                    "{id} -> {node} [style=dotted, color=\"{colour}\", arrowhead=empty];"
                ));
            }
        }
    }
    for Drawn {
        from,
        to,
        kind,
        any,
        label,
        hot: is_hot,
        proven,
    } in &bundle(arrows)
    {
        let colour = if *is_hot {
            CYCLE_COLOUR
        } else {
            kind_colour(*kind)
        };
        let mut style = Vec::new();
        if *any {
            style.push("dashed");
        }
        // Proven deadlocks bold, possible ones dashed.
        match (*is_hot, *proven) {
            (true, true) => style.push("bold"),
            (true, false) if !*any => style.push("dashed"),
            _ => {}
        }
        let style = if style.is_empty() {
            String::new()
        } else {
            format!(", style=\"{}\"", style.join(","))
        };
        let width = match (*is_hot, *proven) {
            (true, true) => ", penwidth=2.5",
            (true, false) => ", penwidth=1.5",
            _ => "",
        };
        out.line(format!(
            "{from} -> {to} [label={}, color=\"{colour}\", fontcolor=\"{colour}\"{style}{width}];",
            quote(label)
        ));
    }
    out.text.push_str("}\n");
    out.text
}

fn pseudo_id(
    pseudo: &mut BTreeMap<String, (String, Option<RankSet>)>,
    label: String,
    members: Option<RankSet>,
) -> String {
    if let Some((id, _)) = pseudo.iter().find(|(_, (l, _))| *l == label) {
        return id.clone();
    }
    let id = format!("p{}", pseudo.len());
    pseudo.insert(id.clone(), (label, members));
    id
}

/// Breaks `text` at "; " into lines of about `width` characters, at most `lines` lines.
fn wrap(text: &str, width: usize, lines: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for part in text.split("; ") {
        if !current.is_empty() && current.len() + part.len() + 2 > width {
            out.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("; ");
        }
        current.push_str(part);
    }
    if !current.is_empty() {
        out.push(current);
    }
    if out.len() > lines {
        out.truncate(lines);
        out.push("...".into());
    }
    out.join("\n")
}

/// How to get Graphviz.
pub const INSTALL_HINT: &str = "install Graphviz: `apt-get install graphviz` (Debian, Ubuntu), `dnf install graphviz` (Fedora), `brew install graphviz` (macOS)";

/// Renders DOT text to `out` as `format` ("svg" or "png") with Graphviz's `dot`.
pub fn render(dot: &str, format: &str, out: &Path) -> Result<(), String> {
    render_with("dot", dot, format, out)
}

/// [`render`] with another Graphviz program (a path, or a name looked up in `PATH`).
pub fn render_with(program: &str, dot: &str, format: &str, out: &Path) -> Result<(), String> {
    if !matches!(format, "svg" | "png") {
        return Err(format!(
            "cannot render the graph as {format:?}: the formats are svg and png"
        ));
    }
    let mut child = match Command::new(program)
        .arg(format!("-T{format}"))
        .arg("-o")
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "cannot render the graph: Graphviz's `{program}` is not installed; {INSTALL_HINT}; or write the DOT text with --format dot"
            ));
        }
        Err(e) => return Err(format!("cannot run Graphviz's `{program}`: {e}")),
    };
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = dot.to_owned();
    // Written from a thread: `dot` may report errors before it has read everything.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("Graphviz's `{program}` failed: {e}"))?;
    let written = writer.join().unwrap_or(Ok(()));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "Graphviz's `{program} -T{format}` failed ({}): {}",
            output.status,
            stderr.trim()
        ));
    }
    written.map_err(|e| format!("cannot write the graph to Graphviz's `{program}`: {e}"))?;
    Ok(())
}
