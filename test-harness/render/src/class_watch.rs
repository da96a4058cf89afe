//! What persisted across a watch's samples, by rank sets: the watch of a job reported by
//! classes. Its deadlocks are merged by kind and certainty, what appeared in the last
//! sample or dissolved between samples likewise, and the waits present in every sample
//! are counted; nothing is written per rank, per wait or per hop.

use super::classes::{part_text, short};
use super::verdict::doubt_text;
use super::words::finding_text;
use mqd_model::diagnosis::Dissolved;
use mqd_model::{Certainty, Finding, FindingKind, Persistence, RankSet};
use mqd_scale::FindingRanks;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Deadlock findings (and the ranks blocked behind them) merged by kind and certainty,
/// with the samples each was first seen in.
fn merged<'a>(
    findings: impl Iterator<Item = (&'a Finding, usize)>,
) -> Vec<(FindingRanks, Vec<usize>)> {
    let mut by: BTreeMap<(FindingKind, Certainty), (RankSet, Vec<usize>)> = BTreeMap::new();
    for (f, sample) in findings {
        let (ranks, samples) = by.entry((f.kind, f.certainty)).or_default();
        ranks.union_with(&f.ranks);
        if !samples.contains(&sample) {
            samples.push(sample);
        }
    }
    by.into_iter()
        .map(|((kind, certainty), (ranks, samples))| {
            (
                FindingRanks {
                    kind,
                    certainty,
                    ranks,
                },
                samples,
            )
        })
        .collect()
}

/// The persisted deadlocks merged, and the other findings (the summary) as they are.
fn persisted(p: &Persistence) -> (Vec<FindingRanks>, Vec<&Finding>) {
    let parts = merged(
        p.findings
            .iter()
            .filter(|f| f.kind.is_deadlock_part())
            .map(|f| (f, 0)),
    );
    let others = p
        .findings
        .iter()
        .filter(|f| !f.kind.is_deadlock_part())
        .collect();
    (parts.into_iter().map(|(part, _)| part).collect(), others)
}

fn of_samples(list: &[Dissolved]) -> Vec<(FindingRanks, Vec<usize>)> {
    merged(list.iter().map(|d| (&d.finding, d.sample)))
}

/// The ranks whose waits were present in every sample.
fn waiting(p: &Persistence) -> RankSet {
    let mut ranks = RankSet::new();
    for w in &p.waits {
        if let Ok(r) = u32::try_from(w.from) {
            ranks.insert(r);
        }
    }
    ranks
}

fn samples_text(samples: &[usize]) -> String {
    let one_based: Vec<String> = samples.iter().map(|s| (s + 1).to_string()).collect();
    let word = if samples.len() == 1 {
        "sample"
    } else {
        "samples"
    };
    format!("{word} {}", one_based.join(","))
}

/// What persisted across the samples `p`, by rank sets: a few lines whatever the job.
pub fn persistence_text(p: &Persistence) -> String {
    let ranks = waiting(p);
    let mut out = super::text::waits_in_every_sample(p);
    if ranks.is_empty() {
        out.push_str(".\n");
    } else {
        out.push_str(&format!(", of {} ({}).\n", short(&ranks), ranks.len()));
    }
    let (parts, others) = persisted(p);
    for part in &parts {
        out.push_str(&format!(
            "Persisted over {} samples: {} ({}) {}\n",
            p.samples,
            short(&part.ranks),
            part.ranks.len(),
            part_text(part)
        ));
    }
    for f in others {
        out.push_str(&format!("{}\n", finding_text(f)));
    }
    let listed = [
        (
            &p.new,
            "New in the last sample (too recent to tell a deadlock from traffic):",
        ),
        (
            &p.dissolved,
            "Dissolved between samples (traffic, not deadlocks):",
        ),
    ];
    for (list, head) in listed {
        if list.is_empty() {
            continue;
        }
        out.push_str(head);
        out.push('\n');
        for (part, samples) in of_samples(list) {
            out.push_str(&format!(
                "  {}: {} ({}) {}\n",
                samples_text(&samples),
                short(&part.ranks),
                part.ranks.len(),
                part_text(&part)
            ));
        }
    }
    out
}

fn part_json(part: &FindingRanks, samples: Option<&[usize]>) -> Value {
    let mut doc = json!({
        "kind": part.kind,
        "certainty": part.certainty,
        "ranks": part.ranks,
        "count": part.ranks.len(),
        "text": part_text(part),
    });
    if let Some(samples) = samples {
        doc["samples"] = json!(samples);
    }
    doc
}

/// [`persistence_text`] as JSON: the watch's verdict, sets and doubts, its deadlocks by
/// kind and certainty, and the waits present in every sample by count and ranks.
pub fn persistence_json(p: &Persistence) -> Value {
    let (parts, others) = persisted(p);
    let mut findings: Vec<Value> = parts.iter().map(|part| part_json(part, None)).collect();
    findings.extend(others.into_iter().map(|f| {
        json!({
            "kind": f.kind,
            "certainty": f.certainty,
            "ranks": f.ranks,
            "count": f.ranks.len(),
            "subject": f.subject,
            "text": finding_text(f),
        })
    }));
    let listed = |list: &[Dissolved]| -> Vec<Value> {
        of_samples(list)
            .iter()
            .map(|(part, samples)| part_json(part, Some(samples)))
            .collect()
    };
    let ranks = waiting(p);
    json!({
        "samples": p.samples,
        "verdict": p.verdict.name(),
        "deadlock": p.has_deadlock(),
        "deadlocked": p.deadlocked,
        "possibly_deadlocked": p.possibly_deadlocked,
        "doubts": p.doubts.iter().map(|x| json!({
            "doubt": x,
            "text": doubt_text(x),
        })).collect::<Vec<_>>(),
        "findings": findings,
        "new": listed(&p.new),
        "dissolved": listed(&p.dissolved),
        "waits": {
            "count": p.waits.len(),
            "ranks": ranks,
            "ranks_count": ranks.len(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::diagnosis::{CycleFacts, Subject};
    use mqd_model::{CommKey, Verdict, Wait, WaitKind, WaitTarget};

    fn wait(from: i32, to: i32) -> Wait {
        Wait {
            from,
            target: WaitTarget::Rank(to),
            kind: WaitKind::Receive,
            comm: CommKey::named("MPI_COMM_WORLD", 0),
            local_rank: i64::from(from),
            peer_local: i64::from(to),
            tag: Some(0),
            count: 1,
            evidence: Vec::new(),
            blocked: true,
            requests: Vec::new(),
            remote_peer: false,
            call: Some("MPI_Recv".into()),
        }
    }

    fn cycle(ranks: std::ops::Range<u32>, certainty: Certainty) -> Finding {
        let facts = CycleFacts {
            hops: Vec::new(),
            uniform: None,
            unsure: RankSet::new(),
            in_calls: true,
        };
        Finding {
            edges: ranks
                .clone()
                .map(|r| (r as i32, ((r + 1) % ranks.end) as i32))
                .collect(),
            ..Finding::unproven_by_operations(
                FindingKind::DeadlockCycle,
                certainty,
                ranks.collect(),
                Subject::Cycle(facts),
            )
        }
    }

    #[test]
    fn a_ring_of_many_ranks_persisted_is_a_line_not_a_hop_each() {
        let n = 4096;
        let waits: Vec<Wait> = (0..n as i32).map(|r| wait(r, (r + 1) % n as i32)).collect();
        let p = Persistence {
            samples: 3,
            waits,
            // Two cycles of one proven deadlock: merged into one line.
            findings: vec![
                cycle(0..2048, Certainty::Definite),
                cycle(2048..4096, Certainty::Definite),
            ],
            new: Vec::new(),
            dissolved: vec![Dissolved {
                sample: 0,
                finding: cycle(0..2, Certainty::Possible),
            }],
            deadlocked: RankSet::full(n),
            possibly_deadlocked: RankSet::full(n),
            verdict: Verdict::Deadlock,
            doubts: Vec::new(),
        };
        let text = persistence_text(&p);
        assert_eq!(
            text,
            "Across the 3 samples, 4096 waits were in every one, of ranks 0-4095 (4096).\n\
             Persisted over 3 samples: ranks 0-4095 (4096) are on cycles of waits, proven\n\
             Dissolved between samples (traffic, not deadlocks):\n  \
             sample 1: ranks 0,1 (2) are on cycles of waits, possibly\n"
        );
        let doc = persistence_json(&p);
        assert_eq!(doc["verdict"], "deadlock");
        assert_eq!(doc["findings"].as_array().map(Vec::len), Some(1));
        assert_eq!(doc["findings"][0]["count"], 4096);
        assert_eq!(doc["waits"]["count"], 4096);
        assert_eq!(doc["dissolved"][0]["samples"], json!([0]));
        // Bounded: no wait, edge or hop listed.
        assert!(doc.to_string().len() < 2048, "{doc}");
    }
}
