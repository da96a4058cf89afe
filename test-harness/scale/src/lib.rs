//! The diagnosis of a job of classes ([`ClassJob`]): what each class's ranks wait for is
//! read once from its first and last members, written as rules over rank sets, and the
//! proof's and the worst reading's deadlocked sets are computed by rank-set arithmetic
//! ([`Classes`]). Nothing costs a node per rank: a ring of a million ranks is one class
//! and one rule.
//!
//! It follows what the per-rank analysis reads (modules `stacks`, `queues`, `view`): threads
//! running, waiting for their own process, in a blocking receive, send or
//! `MPI_Sendrecv` (a peer its members name alike: the same rank, or the same distance
//! around the job), in `MPI_Wait` or `MPI_Waitall` on requests of their own queues, in
//! one blocking collective on `MPI_COMM_WORLD`, ranks without stacks, and the queues on
//! communicators of the job's ranks in order and on `MPI_COMM_SELF`, matched as the
//! per-rank scan matches them. Any other state is not guessed at: its ranks are named in
//! a doubt, and the verdict is undetermined. Where it follows every class it reaches the
//! per-rank analysis's verdict, doubts, proven and possible sets and every finding's
//! kind, certainty and ranks ([`finding_ranks_of`]), checked on random jobs by two
//! property tests and on every in-process diagnosis test of `mqd`.

#![deny(missing_docs)]

mod diagnosis;
mod parts;
mod queues;
mod report;
mod stacks;
mod view;

pub use diagnosis::{ClassDiagnosis, FindingRanks, HeldBy, HeldClass};
pub use report::finding_ranks_of;

use mqd_analysis::shared::{ClassAlternative, ClassPlan, Classes, Rule};
use mqd_model::diagnosis::{Doubt, Verdict};
use mqd_model::{Certainty, ClassJob, CommKey, Finding, RankSet};
use queues::{ClassQueues, Matching, Peer, refine};
use report::{clean, collective_wait, queue_findings_of};
use stacks::{Need, PointToPoint, State, requests_of, state_of};
use std::collections::BTreeMap;
use view::{Job, rule};

/// The diagnosis of `job`.
pub fn diagnose_classes(job: &ClassJob) -> ClassDiagnosis {
    let n = job.size;
    let mut not_followed: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut comms: Vec<CommKey> = Vec::new();
    let mut states: Vec<State> = job
        .classes
        .iter()
        .map(|c| state_of(&c.first, c.last.as_ref(), n, &mut comms))
        .collect();
    // Every class's queues, read once; a class whose queues are not followed is not.
    let mut queue_of: Vec<Option<ClassQueues>> = Vec::new();
    for (c, state) in job.classes.iter().zip(&mut states) {
        let read = match state {
            State::NotFollowed(_) => Err(String::new()),
            _ => queues::read(&c.first, c.last.as_ref(), n, &mut comms),
        };
        match read {
            Ok(q) => queue_of.push(Some(q)),
            Err(why) => {
                if !why.is_empty() {
                    *state = State::NotFollowed(why);
                }
                queue_of.push(None);
            }
        }
    }
    let mut matched = Vec::new();
    let mut inputs = Vec::new();
    for (c, q) in job.classes.iter().zip(&queue_of) {
        matched.push(q.as_ref().map(|q| {
            inputs.push((&c.ranks, q));
            inputs.len() - 1
        }));
    }
    let matching = match queues::matching(&inputs, n) {
        Ok(m) => m,
        Err(why) => {
            // The matching is the whole job's: no class's queues are followed.
            for (q, state) in queue_of.iter().zip(&mut states) {
                if q.as_ref().is_some_and(|q| !q.is_empty()) {
                    *state = State::NotFollowed(why.clone());
                }
            }
            inputs.clear();
            matched.iter_mut().for_each(|m| *m = None);
            Matching::default()
        }
    };
    let mut running = RankSet::new();
    let mut no_stacks = RankSet::new();
    let mut self_blocked = RankSet::new();
    let mut unknown_places: Vec<(RankSet, String)> = Vec::new();
    let mut waiting = Vec::new();
    let mut without_stacks = Vec::new();
    for (ci, (c, state)) in job.classes.iter().zip(states).enumerate() {
        match state {
            State::Running => running.union_with(&c.ranks),
            State::NoStacks => {
                no_stacks.union_with(&c.ranks);
                without_stacks.push(ci);
            }
            State::SelfBlocked => self_blocked.union_with(&c.ranks),
            State::NotFollowed(why) => not_followed.entry(why).or_default().union_with(&c.ranks),
            State::Waiting {
                needs,
                calls,
                unknown,
                maybe_free,
            } => {
                if let Some(why) = needs.iter().find_map(|need| match need {
                    Need::Other(why) => Some(why.clone()),
                    _ => None,
                }) {
                    not_followed.entry(why).or_default().union_with(&c.ranks);
                    continue;
                }
                if let Some(what) = &unknown {
                    unknown_places.push((c.ranks.clone(), what.clone()));
                }
                waiting.push((ci, needs, unknown.is_some(), calls, maybe_free));
            }
        }
    }
    // Each collective instance on MPI_COMM_WORLD: its ranks, and who is not in it.
    let mut instances: BTreeMap<(String, Option<i64>, Option<u64>), RankSet> = BTreeMap::new();
    for (ci, needs, ..) in &waiting {
        for need in needs {
            if let Need::Collective(name, root, bytes) = need {
                instances
                    .entry((name.clone(), *root, *bytes))
                    .or_default()
                    .union_with(&job.classes[*ci].ranks);
            }
        }
    }
    if instances.len() > 1 {
        let mut ranks = RankSet::new();
        instances.values().for_each(|r| ranks.union_with(r));
        not_followed
            .entry("ranks in different collectives on MPI_COMM_WORLD".into())
            .or_default()
            .union_with(&ranks);
        waiting.retain(|(ci, ..)| !job.classes[*ci].ranks.intersects(&ranks));
    }
    // Receives posted by threads in their calls: the sends they would take go on.
    let called = waiting
        .iter()
        .flat_map(|(ci, needs, ..)| {
            needs.iter().filter_map(|need| match need {
                Need::PointToPoint(PointToPoint {
                    comm,
                    receive: Some((source, tag, _)),
                    ..
                }) => Some((&job.classes[*ci].ranks, *comm, *source, *tag)),
                _ => None,
            })
        })
        .collect();
    let classes = job.classes.iter().zip(queue_of);
    let classes = classes.map(|(c, q)| (&c.ranks, q)).collect();
    let view = Job::new(n, classes, matched, matching, called);
    let world = RankSet::full(n);
    let mut may = Classes {
        n,
        sets: vec![world.clone()],
        classes: Vec::new(),
    };
    let mut must = may.clone();
    // Sinks: ranks held by their own threads never act again.
    for plan in [&mut may, &mut must] {
        plan.classes.push(ClassPlan {
            ranks: self_blocked.clone(),
            sink: true,
            alternatives: Vec::new(),
        });
    }
    // What each plan's ranks wait for, in words' terms (by plan index).
    let mut waits_of: Vec<(usize, Vec<(String, HeldBy)>)> = Vec::new();
    let held_by = |rule: Rule, sets: &[RankSet]| -> Option<HeldBy> {
        Some(match rule {
            Rule::Offset(k) => HeldBy::Neighbour(k),
            Rule::Fixed(p) => HeldBy::Rank(p),
            Rule::AllOf(_) => HeldBy::AnyRank,
            Rule::AnyIn(set) => HeldBy::Outside(sets[set].clone()),
            Rule::Never => return None,
        })
    };
    for ci in without_stacks {
        for (ranks, alternative) in view.queue_rules(ci, &mut may.sets) {
            let waits = alternative
                .rules
                .iter()
                .filter_map(|&r| Some(("a pending operation".to_owned(), held_by(r, &may.sets)?)))
                .collect();
            waits_of.push((may.classes.len(), waits));
            may.classes.push(ClassPlan {
                ranks,
                sink: false,
                alternatives: vec![alternative],
            });
        }
    }
    let mut outside_of: BTreeMap<(String, Option<i64>, Option<u64>), Option<usize>> =
        BTreeMap::new();
    for (ci, needs, unknown, calls, maybe_free) in &waiting {
        let c = &job.classes[*ci];
        let (mi, q) = (view.matched[*ci], view.classes[*ci].1.as_ref());
        // A wait's requests: each operation, the members for which it is done, and
        // those for which it is proven to wait (a synchronous message seen at its
        // destination).
        let mut requests: Vec<Vec<(Rule, RankSet, RankSet)>> = Vec::new();
        let mut failed = None;
        for need in needs {
            let Need::Wait(tid) = need else {
                requests.push(Vec::new());
                continue;
            };
            let found = match (mi, q) {
                (Some(mi), Some(q)) => requests_of(&c.first, c.last.as_ref(), *tid, q)
                    .map(|items| view.request_sets(mi, q, &c.ranks, &items)),
                _ => Err("waits for requests not in their own queues".into()),
            };
            match found {
                Ok(items) => requests.push(items),
                Err(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        if let Some(why) = failed {
            not_followed.entry(why).or_default().union_with(&c.ranks);
            continue;
        }
        // Per need: members whose receive goes on, whose send a receive takes, whose
        // send is proven to wait.
        let mut sets: Vec<[RankSet; 5]> = Vec::new();
        for need in needs {
            let mut three: [RankSet; 5] = Default::default();
            if let Need::PointToPoint(p) = need {
                if let Some(receive) = p.receive {
                    three[0] = view.receive_proceeds(mi, q, &c.ranks, p.comm, receive);
                }
                if let Some(send) = p.send {
                    three[1] = view.send_taken(&c.ranks, p.comm, send);
                    let (proven, weak) = view.send_proven(&c.ranks, p.comm, send, p.synchronous);
                    three[2] = proven.difference(&three[1]);
                    let to_itself = match send.0 {
                        Peer::Off(0) => c.ranks.clone(),
                        Peer::Abs(d) => c.ranks.intersection(&RankSet::single(d)),
                        _ => RankSet::new(),
                    };
                    three[3] = weak;
                    three[4] = to_itself;
                }
            }
            sets.push(three);
        }
        let mut by = sets.concat();
        for (_, done, proven) in requests.iter().flatten() {
            by.push(done.clone());
            by.push(proven.clone());
        }
        let pieces = refine(vec![c.ranks.clone()], &by);
        for ranks in pieces {
            let at = ranks.first().unwrap_or(0);
            let mut proof = Vec::new();
            let mut alternatives: Vec<ClassAlternative> = needs
                .iter()
                .zip(&sets)
                .zip(&requests)
                .map(
                    |((need, [received, taken, proven, weak, to_itself]), items)| {
                        let mut rules = Vec::new();
                        let mut certain = Vec::new();
                        let mut weakly = Vec::new();
                        match need {
                            Need::Proceeds => {}
                            Need::Wait(_) => {
                                // Every request's operation, those not done.
                                for (held, done, proven) in items {
                                    if !done.contains(at) {
                                        rules.push(*held);
                                        if proven.contains(at) {
                                            certain.push(*held);
                                        }
                                    }
                                }
                            }
                            Need::PointToPoint(p) => {
                                let receive = p.receive.filter(|_| !received.contains(at));
                                let send = p.send.filter(|_| !taken.contains(at));
                                // A call goes on only when both its halves do.
                                if receive.is_some() || send.is_some() {
                                    // Proven by a message its sender does not list: weak
                                    // evidence, which of a send to itself holds nothing.
                                    let sent = send.map(|(peer, _)| {
                                        let proof = proven.contains(at);
                                        let weak = proof && weak.contains(at);
                                        let held = if weak && to_itself.contains(at) {
                                            Rule::Never
                                        } else {
                                            rule(peer)
                                        };
                                        (held, proof, weak)
                                    });
                                    let received = receive.map(|(peer, ..)| rule(peer));
                                    rules.extend(received);
                                    rules.extend(sent.map(|(held, ..)| held));
                                    if let Some((held, _, true)) = sent
                                        && received != Some(held)
                                    {
                                        weakly.push(held);
                                    }
                                    certain.extend(sent.filter(|s| s.1).map(|(h, ..)| h));
                                }
                            }
                            Need::Collective(name, root, bytes) => {
                                // One set per instance, whatever the number of its classes.
                                let key = (name.clone(), *root, *bytes);
                                let index = *outside_of.entry(key.clone()).or_insert_with(|| {
                                    let outside = world.difference(&instances[&key]);
                                    (!outside.is_empty()).then(|| {
                                        may.sets.push(outside);
                                        may.sets.len() - 1
                                    })
                                });
                                rules.extend(index.map(Rule::AnyIn));
                            }
                            Need::Other(_) => unreachable!("not followed"),
                        }
                        proof.push(ClassAlternative {
                            weak: weakly.clone(),
                            rules: certain,
                            unknown: false,
                        });
                        ClassAlternative {
                            rules,
                            unknown: false,
                            weak: weakly,
                        }
                    },
                )
                .collect();
            let waits = calls
                .iter()
                .zip(&alternatives)
                .flat_map(|(call, a)| {
                    a.rules
                        .iter()
                        .filter_map(|&rule| Some((call.clone(), held_by(rule, &may.sets)?)))
                })
                .collect();
            if *unknown {
                alternatives.push(ClassAlternative {
                    unknown: true,
                    ..ClassAlternative::default()
                });
            }
            waits_of.push((may.classes.len(), waits));
            may.classes.push(ClassPlan {
                ranks: ranks.clone(),
                sink: false,
                alternatives,
            });
            if !maybe_free {
                must.classes.push(ClassPlan {
                    ranks,
                    sink: false,
                    alternatives: proof,
                });
            }
        }
    }
    // Ranks held by their own threads are said apart.
    let apart = |d: RankSet| {
        if d.is_subset(&self_blocked) {
            RankSet::new()
        } else {
            d.difference(&self_blocked)
        }
    };
    // Each plan's deadlocked set, sinks included (for its parts), once.
    let may_set = may.deadlocked();
    let must_set = must.deadlocked();
    let settled = |plan: &Classes, set: &Option<RankSet>, not_followed: &mut BTreeMap<_, _>| {
        set.clone().map(apart).unwrap_or_else(|| {
            let mut ranks = RankSet::new();
            plan.classes.iter().for_each(|c| ranks.union_with(&c.ranks));
            not_followed
                .entry("waits that did not settle by classes".to_owned())
                .or_insert_with(RankSet::new)
                .union_with(&ranks.difference(&self_blocked));
            RankSet::new()
        })
    };
    let mut possibly_deadlocked = settled(&may, &may_set, &mut not_followed);
    let mut deadlocked = settled(&must, &must_set, &mut not_followed);
    // A proof needs every class followed; in separate moments it is possible only.
    if !not_followed.is_empty() {
        deadlocked = RankSet::new();
    }
    let proven_parts = must_set
        .filter(|_| not_followed.is_empty())
        .map(|d| parts::parts(&must, &d, &RankSet::new()));
    if job.separate.is_some() {
        deadlocked = RankSet::new();
    }
    possibly_deadlocked.union_with(&deadlocked);
    let possible_parts = may_set.map(|d| parts::parts(&may, &d, &deadlocked));
    let deadlocks = match (proven_parts.unwrap_or(Some(Vec::new())), possible_parts) {
        (Some(proven), Some(Some(possible))) => {
            let proven_certainty = if job.separate.is_some() {
                Certainty::Possible
            } else {
                Certainty::Definite
            };
            let mut parts: Vec<FindingRanks> = proven
                .into_iter()
                .map(|p| FindingRanks {
                    kind: p.kind,
                    certainty: proven_certainty,
                    ranks: p.ranks,
                })
                .collect();
            // The worst reading's parts not already proven.
            parts.extend(possible.into_iter().map(|p| FindingRanks {
                kind: p.kind,
                certainty: Certainty::Possible,
                ranks: p.ranks,
            }));
            Some(parts)
        }
        _ => None,
    };
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let missing = world.difference(&job.dumped()).difference(&failed);
    let mut doubts = Vec::new();
    if !missing.is_empty() {
        doubts.push(Doubt::Missing { ranks: missing });
    }
    if !failed.is_empty() {
        doubts.push(Doubt::Failed { ranks: failed });
    }
    if job.unranked > 0 {
        doubts.push(Doubt::NoWorldRank {
            processes: job.unranked,
        });
    }
    let unreadable = view.unreadable();
    if !unreadable.is_empty() {
        doubts.push(Doubt::Unreadable { ranks: unreadable });
    }
    let unresolved = view.unresolved();
    if !unresolved.is_empty() {
        doubts.push(Doubt::UnknownPeers { ranks: unresolved });
    }
    let unproven = possibly_deadlocked.difference(&deadlocked);
    if !unproven.is_empty() {
        doubts.push(Doubt::Unproven { ranks: unproven });
    }
    if !no_stacks.is_empty() {
        doubts.push(Doubt::NoStacks { ranks: no_stacks });
    }
    if let Some((_, example)) = unknown_places.first() {
        let mut ranks = RankSet::new();
        unknown_places.iter().for_each(|(r, _)| ranks.union_with(r));
        doubts.push(Doubt::UnknownPlaces {
            ranks,
            example: example.clone(),
        });
    }
    if !self_blocked.is_empty() {
        doubts.push(Doubt::SelfBlocked {
            ranks: self_blocked,
        });
    }
    if let Some(why) = &job.separate {
        doubts.push(Doubt::Snapshot { why: why.clone() });
    }
    let not_followed: Vec<(RankSet, String)> =
        not_followed.into_iter().map(|(why, r)| (r, why)).collect();
    for (ranks, why) in &not_followed {
        doubts.push(Doubt::NotFollowed {
            ranks: ranks.clone(),
            why: why.clone(),
        });
    }
    // The worst reading's ranks, grouped by what they wait for.
    let mut held: BTreeMap<Vec<(String, HeldBy)>, RankSet> = BTreeMap::new();
    for (plan, waits) in waits_of {
        let ranks = may.classes[plan].ranks.intersection(&possibly_deadlocked);
        if !ranks.is_empty() && !waits.is_empty() {
            held.entry(waits).or_default().union_with(&ranks);
        }
    }
    let held = held
        .into_iter()
        .map(|(waits, ranks)| HeldClass { ranks, waits })
        .collect();
    let mut queue_findings = Vec::new();
    let findings = if not_followed.is_empty() {
        let mut findings: Vec<Finding> = instances
            .iter()
            .filter_map(|((call, _, _), ranks)| collective_wait(job, call, ranks))
            .collect();
        let facts = view.queue_facts();
        if facts.waiting.is_empty() {
            findings.extend(clean(
                job,
                &doubts,
                &possibly_deadlocked,
                &running,
                !facts.transit.is_empty(),
            ));
        }
        queue_findings = queue_findings_of(job, &facts, &possibly_deadlocked, &running);
        findings
    } else {
        Vec::new()
    };
    ClassDiagnosis {
        verdict: if !deadlocked.is_empty() {
            Verdict::Deadlock
        } else if doubts.is_empty() {
            Verdict::NoDeadlock
        } else {
            Verdict::Undetermined
        },
        doubts,
        deadlocked,
        possibly_deadlocked,
        running,
        not_followed,
        findings,
        held,
        deadlocks,
        queue_findings,
    }
}

#[cfg(test)]
mod tests;
