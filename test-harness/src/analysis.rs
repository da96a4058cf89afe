//! Who waits for whom: a wait-for graph over COMM_WORLD ranks, built from a
//! job's queues, and the cycles in it.
//!
//! A pending send waits for its destination; a posted receive with a specific
//! source waits for that source. Only edges between ranks of the dump count.

use crate::report::JobDump;
use crate::session::OperationStatus;

/// One "rank waits for rank" fact, with the operation that proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The waiting rank.
    pub from: i32,
    /// The rank it waits for.
    pub to: i32,
    /// "a send to rank 1 on \"ring\", tag 5".
    pub why: String,
}

/// Every wait of the job.
pub fn waits(job: &JobDump) -> Vec<Wait> {
    let mut out = Vec::new();
    for rank in &job.ranks {
        let Ok(display) = &rank.outcome else { continue };
        for comm in &display.communicators {
            for op in comm.pending_sends.ops() {
                if op.status != OperationStatus::Complete && op.desired_global_rank >= 0 {
                    out.push(Wait {
                        from: rank.rank,
                        to: op.desired_global_rank as i32,
                        why: format!(
                            "a send to rank {} on {:?}, tag {}",
                            op.desired_global_rank, comm.name, op.desired_tag
                        ),
                    });
                }
            }
            for op in comm.pending_receives.ops() {
                if op.status != OperationStatus::Complete && op.desired_global_rank >= 0 {
                    let tag = if op.tag_wild {
                        "any tag".to_string()
                    } else {
                        format!("tag {}", op.desired_tag)
                    };
                    out.push(Wait {
                        from: rank.rank,
                        to: op.desired_global_rank as i32,
                        why: format!(
                            "a receive from rank {} on {:?}, {tag}",
                            op.desired_global_rank, comm.name
                        ),
                    });
                }
            }
        }
    }
    out
}

/// Elementary cycles of the wait-for graph, each once, smallest rank first.
pub fn cycles(waits: &[Wait]) -> Vec<Vec<Wait>> {
    let mut ranks: Vec<i32> = waits.iter().flat_map(|w| [w.from, w.to]).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut found: Vec<Vec<Wait>> = Vec::new();
    for &start in &ranks {
        // Depth-first search for paths back to `start` through ranks > start only,
        // so each cycle is reported from its smallest rank.
        let mut path: Vec<&Wait> = Vec::new();
        search(start, start, waits, &mut path, &mut found);
    }
    found
}

fn search<'a>(
    start: i32,
    at: i32,
    waits: &'a [Wait],
    path: &mut Vec<&'a Wait>,
    found: &mut Vec<Vec<Wait>>,
) {
    if found.len() >= 64 || path.len() > 4096 {
        return;
    }
    let mut seen_targets: Vec<i32> = Vec::new();
    for w in waits.iter().filter(|w| w.from == at) {
        if seen_targets.contains(&w.to) {
            continue;
        }
        seen_targets.push(w.to);
        if w.to == start {
            let mut cycle: Vec<Wait> = path.iter().map(|w| (*w).clone()).collect();
            cycle.push(w.clone());
            found.push(cycle);
        } else if w.to > start && !path.iter().any(|p| p.from == w.to) {
            path.push(w);
            search(start, w.to, waits, path, found);
            path.pop();
        }
    }
}

/// A plain-words verdict on the job.
pub fn verdict(job: &JobDump) -> String {
    let waits = waits(job);
    let cycles = cycles(&waits);
    if cycles.is_empty() {
        return if waits.is_empty() {
            "No rank waits for another: no point-to-point deadlock.".to_string()
        } else {
            format!(
                "{} waits, no cycle among them: no point-to-point deadlock.",
                waits.len()
            )
        };
    }
    let mut out = String::new();
    for cycle in &cycles {
        let path: Vec<String> = cycle
            .iter()
            .map(|w| w.from.to_string())
            .chain([cycle[0].from.to_string()])
            .collect();
        out.push_str(&format!(
            "Deadlock: ranks {} wait for each other:\n",
            path.join(" -> ")
        ));
        for w in cycle {
            out.push_str(&format!("  rank {} is blocked in {}\n", w.from, w.why));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(from: i32, to: i32) -> Wait {
        Wait {
            from,
            to,
            why: String::new(),
        }
    }

    #[test]
    fn ring_is_one_cycle() {
        let c = cycles(&[w(0, 1), w(1, 2), w(2, 3), w(3, 0)]);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].iter().map(|w| w.from).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn head_to_head_and_chain() {
        assert_eq!(cycles(&[w(0, 1), w(1, 0)]).len(), 1);
        assert!(cycles(&[w(0, 1), w(1, 2)]).is_empty());
        assert_eq!(
            cycles(&[w(0, 1), w(1, 0), w(2, 3), w(3, 2), w(0, 0)]).len(),
            3
        );
    }
}
