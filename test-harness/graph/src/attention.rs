//! What the queues' waits show beyond the deadlocks: ranks waited for that have nothing
//! pending or were not dumped, and waits that cannot be followed.

use crate::atoms::Atom;
use crate::deadlock::evidence_of;
use mqd_model::diagnosis::{RankFacts, Subject};
use mqd_model::{FindingKind, RankSet, Wait, WaitTarget};
use std::collections::{BTreeMap, HashSet};

/// Per rank waited for: who waits, whether only in any-source receives, the waits'
/// indices, the edges.
type Waiters = (RankSet, bool, Vec<usize>, Vec<(i32, i32)>);

/// What the queues' `waits` show beyond the deadlocks (`facts`: each rank's): ranks
/// waited for that do nothing the queues show (idle), whose queues were not all read or
/// that were not dumped, and waits for peers nobody can name.
pub fn attention(waits: &[Wait], facts: &BTreeMap<i32, RankFacts>) -> Vec<Atom> {
    let mut atoms = Vec::new();
    let mut waiters: BTreeMap<i32, Waiters> = BTreeMap::new();
    for (i, w) in waits.iter().enumerate() {
        let (targets, any) = match &w.target {
            WaitTarget::Rank(t) => (vec![*t], false),
            WaitTarget::AnyOf(set) => (set.iter().map(|r| r as i32).collect(), true),
            _ => continue,
        };
        for t in targets {
            if t == w.from {
                continue;
            }
            let e = waiters
                .entry(t)
                .or_insert_with(|| (RankSet::new(), true, Vec::new(), Vec::new()));
            if let Ok(from) = u32::try_from(w.from) {
                e.0.insert(from);
            }
            e.1 &= any;
            e.2.push(i);
            e.3.push((w.from, t));
        }
    }
    let active: HashSet<i32> = waits
        .iter()
        .map(|w| w.from)
        .chain(facts.iter().filter(|(_, f)| f.transit > 0).map(|(r, _)| *r))
        .collect();
    for (t, (who, any_only, indices, edges)) in waiters {
        if facts
            .get(&t)
            .is_some_and(|f| f.error.is_none() && !f.unreadable && active.contains(&t))
        {
            continue;
        }
        let (kind, subject) = match facts.get(&t) {
            // Queues that could not be read say nothing of what it does.
            Some(RankFacts {
                error: None,
                unreadable: true,
                ..
            }) => (
                FindingKind::UndumpedTarget,
                Subject::UndumpedTarget {
                    waiters: who,
                    error: Some("its queues could not all be read".into()),
                },
            ),
            Some(RankFacts { error: None, .. }) if !active.contains(&t) => (
                FindingKind::IdleTarget,
                Subject::IdleTarget {
                    waiters: who,
                    any_source_only: any_only,
                },
            ),
            Some(RankFacts { error: None, .. }) => continue,
            _ if any_only => continue,
            Some(RankFacts { error, .. }) => (
                FindingKind::UndumpedTarget,
                Subject::UndumpedTarget {
                    waiters: who,
                    error: error.clone(),
                },
            ),
            None => (
                FindingKind::UndumpedTarget,
                Subject::UndumpedTarget {
                    waiters: who,
                    error: None,
                },
            ),
        };
        atoms.push(Atom {
            kind,
            ranks: RankSet::from_i32s([t]),
            subject,
            evidence: evidence_of(waits, indices),
            edges,
        });
    }
    for w in waits {
        let subject = match &w.target {
            WaitTarget::AnyUnknown => Subject::UnfollowableAnySource {
                comm: w.comm.clone(),
                tag: w.tag,
            },
            WaitTarget::UnknownRank { local } => Subject::UnfollowableRank {
                local: *local,
                wait: w.summary(),
            },
            _ => continue,
        };
        atoms.push(Atom::new(
            FindingKind::UnknownPeer,
            w.from,
            subject,
            w.evidence.clone(),
        ));
    }
    atoms
}
