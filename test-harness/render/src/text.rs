//! The text views: every rank and communicator, the diagnosis, and a watch's verdict.

use super::verdict::verdict_text;
use super::words::{evidence_lines, finding_text};
use mqd_model::{
    Communicator, Diagnosis, Finding, JobDump, Operation, OperationStatus, Persistence, Queue,
    QueueKind,
};
use std::fmt::Write as _;

/// Longest evidence list the text prints per finding (JSON has all).
pub const TEXT_EVIDENCE_LINES: usize = 32;

/// "Ranks on 3 hosts: sim0 (0-2), sim1 (3-5), sim2 (6,7).", for a job on several hosts.
fn hosts_line(job: &JobDump) -> Option<String> {
    let mut hosts: Vec<(&str, mqd_model::RankSet)> = Vec::new();
    for r in &job.ranks {
        let Some(host) = r.host.as_deref() else {
            continue;
        };
        let at = match hosts.iter().position(|(h, _)| *h == host) {
            Some(i) => i,
            None => {
                hosts.push((host, mqd_model::RankSet::new()));
                hosts.len() - 1
            }
        };
        if let Some(rank) = r.world_rank() {
            hosts[at].1.insert(rank);
        }
    }
    if hosts.len() < 2 {
        return None;
    }
    const LISTED: usize = 16;
    let mut listed: Vec<String> = hosts
        .iter()
        .take(LISTED)
        .map(|(h, ranks)| format!("{h} ({ranks})"))
        .collect();
    if hosts.len() > LISTED {
        listed.push(format!("and {} more", hosts.len() - LISTED));
    }
    Some(format!(
        "Ranks on {} hosts: {}.\n",
        hosts.len(),
        listed.join(", ")
    ))
}

/// What the queues were read with, and what the job said as it died: the library and
/// the MPICH flavour it recognised, `MPI_Abort`'s message, the hosts, the signals that
/// killed ranks.
pub fn header_text(job: &JobDump) -> String {
    let mut out = String::new();
    if !job.dll.version.is_empty() {
        let mut flavours: Vec<&str> = job
            .ranks
            .iter()
            .filter_map(|r| flavour(r.message.as_deref()?))
            .collect();
        flavours.sort_unstable();
        flavours.dedup();
        let what = if flavours.is_empty() {
            String::new()
        } else {
            format!(": {}", flavours.join(", "))
        };
        let _ = writeln!(
            out,
            "Queues read by {} ({}){what}.",
            job.dll.version, job.dll.path
        );
        if let Some(note) = &job.dll.note {
            let _ = writeln!(out, "Note: {note}.");
        }
    }
    if let Some(abort) = &job.abort_message {
        let _ = writeln!(out, "The job is aborting (MPI_Abort): {abort}");
    }
    if let Some(hosts) = hosts_line(job) {
        out.push_str(&hosts);
    }
    for r in &job.ranks {
        if let Some(signal) = r.signal {
            let _ = writeln!(
                out,
                "rank {} (pid {}) was killed by signal {signal} ({})",
                r.rank,
                r.pid.map_or("?".into(), |p| p.to_string()),
                signal_name(signal)
            );
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// "MPICH ch3 device queues" from a has-queues message "... has MPICH ch3 device
/// queues; ...".
fn flavour(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("' has ")?;
    Some(rest.split(';').next().unwrap_or(rest).trim())
}

/// The usual name of a fatal signal.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => "a signal",
    }
}

/// A readable listing per rank and communicator, at most `limit` operations per queue
/// (0: all).
pub fn job_text(job: &JobDump, limit: usize) -> String {
    let mut out = String::new();
    for r in &job.ranks {
        let place = match (r.pid, &r.host) {
            (Some(pid), Some(host)) => format!(" (pid {pid} on {host})"),
            (Some(pid), None) => format!(" (pid {pid})"),
            _ => String::new(),
        };
        let _ = writeln!(out, "rank {}{place}", r.rank);
        match &r.outcome {
            Err(e) => {
                let _ = writeln!(out, "  no message queues: {e}");
            }
            Ok(comms) => {
                for c in comms {
                    communicator_text(&mut out, c, limit);
                }
            }
        }
        out.push('\n');
    }
    out
}

fn communicator_text(out: &mut String, c: &Communicator, limit: usize) {
    let group = match &c.group {
        // COMM_WORLD's of a million ranks, not copied to be printed "0-999999".
        Some(g) => match g.progression() {
            Some((first, 1, len)) if len > 2 => {
                format!(", world ranks {first}-{}", first + (len - 1) as i32)
            }
            _ => format!(", world ranks {}", ranks_text(&g.to_vec())),
        },
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  {:?}: rank {} of {}{group}",
        c.name, c.local_rank, c.size
    );
    for (label, kind) in [
        ("receive", QueueKind::PendingReceives),
        ("unexpected", QueueKind::UnexpectedMessages),
        ("send", QueueKind::PendingSends),
    ] {
        match c.queue(kind) {
            Queue::Operations(ops) => {
                let shown = if limit == 0 { ops.len() } else { limit };
                for op in ops.iter().take(shown) {
                    let _ = writeln!(out, "    {label:<10} {}", operation_text(op, kind));
                }
                if ops.len() > shown {
                    let _ = writeln!(
                        out,
                        "    {label:<10} ... and {} more ({}; --limit 0 lists all)",
                        ops.len() - shown,
                        ranges(&ops[shown..])
                    );
                }
            }
            Queue::NoInformation => {}
            Queue::Error(e) => {
                let _ = writeln!(out, "    {label:<10} error: {}", e.text);
            }
        }
    }
}

/// "tags 0-99999, peers 0-3 and any": the spread of some operations.
pub fn ranges(ops: &[Operation]) -> String {
    let tags: Vec<i64> = ops
        .iter()
        .filter(|o| !o.tag_wild)
        .map(|o| o.desired_tag)
        .collect();
    let peers: Vec<i64> = ops
        .iter()
        .map(|o| o.desired_local_rank)
        .filter(|&p| p >= 0)
        .collect();
    let span = |v: &[i64]| match (v.iter().min(), v.iter().max()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "none".into(),
    };
    let mut text = format!("tags {}", span(&tags));
    if tags.len() < ops.len() {
        text.push_str(" and any");
    }
    let _ = write!(text, ", peers {}", span(&peers));
    if peers.len() < ops.len() {
        text.push_str(" and any");
    }
    text
}

fn peer(local: i64, global: i64) -> String {
    match (local, global) {
        (l, _) if l < 0 => "any source".into(),
        (l, g) if g >= 0 && g != l => format!("{l} (world {g})"),
        (l, _) => l.to_string(),
    }
}

fn operation_text(op: &Operation, kind: QueueKind) -> String {
    let direction = match kind {
        QueueKind::PendingSends => "to",
        _ => "from",
    };
    let tag = if op.tag_wild {
        "any".into()
    } else {
        op.desired_tag.to_string()
    };
    let status = match op.status {
        OperationStatus::Pending => "",
        OperationStatus::Matched => ", matched",
        OperationStatus::Complete => ", complete",
        OperationStatus::Other(_) => ", unknown status",
    };
    format!(
        "{direction} {} tag {tag} count {} buf {:#x}{status}",
        peer(op.desired_local_rank, op.desired_global_rank),
        op.desired_length,
        op.buffer
    )
}

/// "0-3,5,7-9": runs of increasing ranks as ranges, in the order given.
pub fn ranks_text(ranks: &[i32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", ranks[i], ranks[j])
        } else if j == i + 1 {
            format!("{},{}", ranks[i], ranks[j])
        } else {
            ranks[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

/// One finding: its paragraph, then the evidence of its first [`TEXT_EVIDENCE_LINES`]
/// operations (each line once), indented, and how many operations are not shown, as
/// the JSON's `evidence` and `evidence_omitted` say. Only those lines are written: a
/// finding over 100,000 receives has as many operations.
fn finding_block(out: &mut String, job: &JobDump, text: &str, f: &Finding, more_note: bool) {
    let _ = writeln!(out, "{text}");
    let shown = f.evidence.len().min(TEXT_EVIDENCE_LINES);
    for line in evidence_lines(job, &f.evidence[..shown]) {
        let _ = writeln!(out, "  {line}");
    }
    if more_note && f.evidence.len() > shown {
        let _ = writeln!(
            out,
            "  ... and {} more (see --json)",
            f.evidence.len() - shown
        );
    }
}

/// Each finding's text, then its evidence indented (at most [`TEXT_EVIDENCE_LINES`]).
pub fn diagnosis_text(job: &JobDump, diagnosis: &Diagnosis) -> String {
    let mut out = String::new();
    for f in &diagnosis.findings {
        finding_block(&mut out, job, &finding_text(f), f, true);
    }
    let _ = writeln!(out, "{}", verdict_text(diagnosis));
    out
}

/// A persistent finding's text: deadlocks say they persisted.
pub fn persisted_text(p: &Persistence, f: &Finding) -> String {
    if f.kind.is_deadlock() {
        format!("Persisted over {} samples: {}", p.samples, finding_text(f))
    } else {
        finding_text(f)
    }
}

/// A dissolved finding's text: "sample 2: Deadlock: ...".
pub fn dissolved_text(sample: usize, f: &Finding) -> String {
    format!("sample {}: {}", sample + 1, finding_text(f))
}

/// "Across the 3 samples, 4 waits were in every one".
pub(crate) fn waits_in_every_sample(p: &Persistence) -> String {
    let was = if p.waits.len() == 1 {
        "wait was"
    } else {
        "waits were"
    };
    format!(
        "Across the {} samples, {} {was} in every one",
        p.samples,
        p.waits.len()
    )
}

/// What persisted over a watch (evidence from the last sample), then what dissolved;
/// the watch's answer is [`watch_text`]'s.
pub fn persistence_text(samples: &[JobDump], p: &Persistence) -> String {
    let mut out = format!("{}.\n", waits_in_every_sample(p));
    if let Some(last) = samples.last() {
        for f in &p.findings {
            finding_block(&mut out, last, &persisted_text(p, f), f, false);
        }
    } else {
        for f in &p.findings {
            let _ = writeln!(out, "{}", persisted_text(p, f));
        }
    }
    if !p.new.is_empty() {
        let _ = writeln!(
            out,
            "New in the last samples (too recent to tell a deadlock from traffic):"
        );
        for d in &p.new {
            let _ = writeln!(out, "  {}", dissolved_text(d.sample, &d.finding));
        }
    }
    if !p.dissolved.is_empty() {
        let _ = writeln!(out, "Dissolved between samples (traffic, not deadlocks):");
        for d in &p.dissolved {
            let _ = writeln!(out, "  {}", dissolved_text(d.sample, &d.finding));
        }
    }
    out
}

/// A watch: what persisted across its samples, then its answer (the diagnosis of sample
/// `at`, with its hold), in `mqd job`'s words.
pub fn watch_text(samples: &[JobDump], p: &Persistence, at: usize, answer: &Diagnosis) -> String {
    let mut out = persistence_text(samples, p);
    let Some(dump) = samples.get(at) else {
        let _ = writeln!(out, "{}", verdict_text(answer));
        return out;
    };
    let held = answer
        .hold
        .as_ref()
        .map(|h| format!(", held from it for {:.1} s", h.window_ms as f64 / 1000.0))
        .unwrap_or_default();
    let _ = writeln!(out, "\nThe job at sample {}{held}:", at + 1);
    out.push_str(&diagnosis_text(dump, answer));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_ranges() {
        assert_eq!(ranks_text(&[0, 1, 2, 3, 5, 7, 8, 9]), "0-3,5,7-9");
        assert_eq!(ranks_text(&[3, 2, 1]), "3,2,1");
        assert_eq!(ranks_text(&[4, 5]), "4,5");
        assert_eq!(ranks_text(&[]), "");
    }
}
