//! The diagnosis of a job of classes ([`ClassJob`]): what each class's ranks wait for is
//! read once from its first and last members, written as rules over rank sets, and the
//! proof's and the worst reading's deadlocked sets are computed by rank-set arithmetic
//! ([`Classes`]). Nothing costs a node per rank: a ring of a million ranks is one class
//! and one rule.
//!
//! It follows (modules `stacks`, `queues`, `view`): threads
//! running, waiting for their own process, in a blocking receive, send or
//! `MPI_Sendrecv` (a peer its members name alike: the same rank, or the same distance
//! around the job), in `MPI_Wait` or `MPI_Waitall` on requests of their own queues, in
//! one blocking collective on `MPI_COMM_WORLD`, ranks without stacks, and the queues on
//! communicators of the job's ranks in order and on `MPI_COMM_SELF`, matched by rank
//! sets. Any other state is not guessed at: its ranks are named in a doubt, and the
//! verdict is undetermined. It is the one analysis of every job: a job read rank by rank
//! is a class per rank ([`diagnose_ranks`]). Ranks merged into classes reach the verdict,
//! doubts, proven and possible sets and every finding's kind, certainty and ranks
//! ([`finding_ranks_of`]) of the same ranks each a class of one, checked on random jobs
//! by two property tests (one also against what the generated ranks truly do) and on
//! every in-process diagnosis test of `mqd`.

#![deny(missing_docs)]

mod call_mismatch;
mod collective_ops;
mod comms;
mod diagnosis;
mod failures;
mod queue_mismatch;
mod queue_waits;
mod queues;
mod report;
mod stacks;
mod transit;
mod view;
mod waits;

/// What other crates read as this one does: calls and their communicators, peers of
/// operations, places.
pub mod shared {
    pub use crate::call_mismatch::blocked_place;
    pub use crate::collective_ops::{CollectiveOp, collective_ops_on, messages_comm};
    pub use crate::diagnosis::verdict;
    pub use crate::failures::unreadable_queues;
    pub use crate::report::{name_communicators, openmp_findings};
    pub use crate::waits::{collective as collective_waits, collective_message, wait};
    pub use mqd_graph::summary::{
        clean_finding, dumped_and_failed, no_deadlock_finding, seen_all, summary_failed,
        summary_finding,
    };
    pub use mqd_model::call_comms::{
        ANY_SOURCE, ANY_TAG, COMM_WORLD_HANDLE, Comm, PROC_NULL, call_comm, call_members, comm_of,
        is_world, rooted,
    };
    pub use mqd_model::peers::{is_complete, peer_group, unexpected_sender, world_of};
    pub use mqd_model::places::{
        Instance, call_line, instance_names, line_of_call, main_thread, place,
    };
}

use collective_ops::collective_ops;
use comms::CommIndex;
pub use diagnosis::{ClassDiagnosis, FindingRanks, HeldBy, HeldClass, HoldBasis};
use mqd_graph::{ByRank, ClassAlternative, ClassPlan, Classes, Rule, parts};
use mqd_model::diagnosis::Doubt;
use mqd_model::diagnosis::RankFacts;
use mqd_model::{
    Certainty, ClassJob, CommKey, Finding, RankSet, Snapshot, Wait, WaitKind, WaitTarget,
};
use queues::{ClassQueues, Matching, Peer, reaching, refine};
use report::{
    blocked_without_queues, clean, collective_waits, collectives_somewhere, openmp_waits,
    queue_findings_of,
};
pub use report::{finding_ranks_of, in_full, in_full_for_ranks};
use stacks::{CollComm, Instance, Need, PointToPoint, State, requests_of, state_of};
use std::collections::BTreeMap;
use view::{Job, rule};

/// The rule of a receive from any source of `from`: held while every rank it may take a
/// message from is (the set added to `sets`).
fn any_source_rule(from: &stacks::AnySource, sets: &mut Vec<RankSet>) -> Rule {
    let (set, rule): (&RankSet, fn(usize) -> Rule) = match from {
        stacks::AnySource::Ranks(ranks) => (ranks, Rule::AllOf),
        stacks::AnySource::Around(offsets) => (offsets, Rule::AllAround),
    };
    sets.push(set.clone());
    rule(sets.len() - 1)
}

/// The diagnosis of `job`.
pub fn diagnose_classes(job: &ClassJob) -> ClassDiagnosis {
    let n = job.size;
    let mut not_followed: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut comms = CommIndex::default();
    let mut coll_comms: Vec<CollComm> = Vec::new();
    let mut states: Vec<State> = job
        .classes
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let holder = (ci, &c.ranks);
            state_of(
                (&c.first, c.last.as_ref()),
                (n, job.size_known),
                holder,
                &mut comms,
                &mut coll_comms,
            )
        })
        .collect();
    // Every class's queues, read once; a class whose queues are not followed is not.
    let mut queue_of: Vec<Option<ClassQueues>> = Vec::new();
    for (ci, (c, state)) in job.classes.iter().zip(&mut states).enumerate() {
        let read = match state {
            State::NotFollowed(_) => Err(String::new()),
            _ => queues::read((ci, &c.ranks, &c.first, c.last.as_ref()), n, &mut comms),
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
    // Operations followed by their peers' COMM_WORLD ranks on a communicator whose
    // members are not known, where a receive nobody can name is posted on it: it might
    // take them by its local rank.
    let unnamed_on: Vec<CommKey> = queue_of
        .iter()
        .flatten()
        .flat_map(|q| q.unknown_groups.0.iter().cloned())
        .collect();
    for (q, state) in queue_of.iter_mut().zip(&mut states) {
        if q.as_ref()
            .is_some_and(|q| q.unknown_groups.1.iter().any(|k| unnamed_on.contains(k)))
        {
            *state = State::NotFollowed(queues::UNKNOWN_MEMBERS.into());
            *q = None;
        }
    }
    // One index for a communicator's instances holds only where they are apart.
    for ci in comms.overlapping() {
        states[ci] = State::NotFollowed(
            "communicators of one context id whose members overlap without being the same".into(),
        );
        queue_of[ci] = None;
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
    // Ranks whose stacks account for every thread: queues would add nothing that
    // blocks, so a rank whose queues could not be read is seen whole without them.
    let mut accounted = RankSet::new();
    let mut finalized = RankSet::new();
    let mut no_stacks = RankSet::new();
    let mut self_blocked = RankSet::new();
    let mut unknown_places: Vec<(RankSet, String)> = Vec::new();
    // Ranks with a thread polling, and its call.
    let mut polls: Vec<(RankSet, String)> = Vec::new();
    // Ranks in collectives whose communicators are not known, by call.
    let mut unnamed: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut waiting = Vec::new();
    let mut without_stacks = Vec::new();
    for (ci, (c, state)) in job.classes.iter().zip(states).enumerate() {
        match state {
            State::Running => running.union_with(&c.ranks),
            State::Finalized => finalized.union_with(&c.ranks),
            State::NoStacks => {
                no_stacks.union_with(&c.ranks);
                without_stacks.push(ci);
            }
            State::SelfBlocked => self_blocked.union_with(&c.ranks),
            State::NotFollowed(why) => not_followed.entry(why).or_default().union_with(&c.ranks),
            State::Waiting {
                needs,
                calls,
                threads,
                holdable,
                unknown,
                polling,
                maybe_free,
            } => {
                if let Some(why) = needs.iter().find_map(|need| match need {
                    Need::Other(why) => Some(why.clone()),
                    _ => None,
                }) {
                    not_followed.entry(why).or_default().union_with(&c.ranks);
                    continue;
                }
                // A collective on a communicator not known, or a call whose wait is not
                // known: whom it waits for is not.
                let mut not_known = false;
                for need in &needs {
                    match need {
                        Need::CollectiveSomewhere(call) => {
                            unnamed
                                .entry(call.clone())
                                .or_default()
                                .union_with(&c.ranks);
                            not_known = true;
                        }
                        Need::Unknown(_) => not_known = true,
                        _ => {}
                    }
                }
                match &unknown {
                    Some(what) => unknown_places.push((c.ranks.clone(), what.clone())),
                    None if !not_known => accounted.union_with(&c.ranks),
                    None => {}
                }
                if let Some(call) = &polling {
                    polls.push((c.ranks.clone(), call.clone()));
                }
                waiting.push(Waiter {
                    ci,
                    needs,
                    calls,
                    threads,
                    holdable,
                    unknown: unknown.is_some(),
                    polling,
                    maybe_free,
                });
            }
        }
    }
    let mut mismatched = RankSet::new();
    // Each collective instance: its ranks, and who is not in it.
    let mut instances: BTreeMap<Instance, RankSet> = BTreeMap::new();
    for w in &waiting {
        for need in &w.needs {
            if let Need::Collective(comm, name, root, bytes) = need {
                instances
                    .entry((*comm, name.clone(), *root, *bytes))
                    .or_default()
                    .union_with(&job.classes[w.ci].ranks);
            }
        }
    }
    // Ranks in collectives on communicators not known, in different calls: a mismatch
    // if they share one.
    if unnamed.len() > 1 {
        let mut ranks = RankSet::new();
        unnamed.values().for_each(|r| ranks.union_with(r));
        mismatched.union_with(&ranks);
    }
    // Ranks in different collectives on one communicator at once: a mismatch (each
    // still waits for the members outside its own).
    for (comm, _) in coll_comms.iter().enumerate() {
        let on: Vec<&RankSet> = instances
            .iter()
            .filter(|(key, _)| key.0 == comm)
            .map(|(_, ranks)| ranks)
            .collect();
        if on.len() > 1 {
            let mut ranks = RankSet::new();
            on.iter().for_each(|r| ranks.union_with(r));
            mismatched.union_with(&ranks);
        }
    }
    // Receives posted by threads in their calls: the sends they would take go on.
    let called = waiting
        .iter()
        .flat_map(|w| {
            w.needs.iter().filter_map(|need| match need {
                Need::PointToPoint(PointToPoint {
                    comm,
                    receive: Some((source, tag, _)),
                    ..
                }) => Some((&job.classes[w.ci].ranks, *comm, *source, *tag)),
                _ => None,
            })
        })
        .collect();
    let classes = job.classes.iter().zip(queue_of);
    let classes = classes.map(|(c, q)| (&c.ranks, q)).collect();
    let view = Job::new(n, classes, matched, matching, called);
    let facts = view.queue_facts();
    // What the blocked calls' arguments show, where the queues' own mismatches do not.
    let mut queued = RankSet::new();
    facts
        .mismatched
        .iter()
        .for_each(|m| queued.union_with(&m.members));
    let call_findings = match call_mismatch::call_findings(job, &queued) {
        Ok(found) => found,
        Err((ci, why)) => {
            not_followed
                .entry(why)
                .or_default()
                .union_with(&job.classes[ci].ranks);
            Vec::new()
        }
    };
    let world = RankSet::full(n);
    let mut may = Classes {
        n,
        sets: vec![world.clone()],
        classes: Vec::new(),
    };
    let mut must = may.clone();
    // The proof were the MPI never to buffer a standard send: its sends no receive can
    // take wait as synchronous ones do.
    let mut unbuffered = may.clone();
    // Sinks: ranks that finalized or are held by their own threads never act again.
    let sinks = self_blocked.union(&finalized);
    for plan in [&mut may, &mut must, &mut unbuffered] {
        plan.classes.push(ClassPlan {
            ranks: sinks.clone(),
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
            Rule::AllOf(set) if set != diagnosis::WORLD => HeldBy::AnyOf(sets[set].clone()),
            Rule::AllOf(_) | Rule::AllOthers(_) => HeldBy::AnyRank,
            Rule::AnyIn(set) => HeldBy::Outside(sets[set].clone()),
            Rule::AllAround(set) => HeldBy::AnyNeighbour(sets[set].clone()),
            Rule::Never => return None,
        })
    };
    // The point-to-point rules of the worst reading, by piece: who waits for ranks
    // that finalized.
    let mut p2p: Vec<(RankSet, Rule)> = Vec::new();
    // The waits of ranks that are classes of one, plan by plan.
    let mut may_waits = ByRank::default();
    let mut must_waits = ByRank::default();
    for c in job
        .classes
        .iter()
        .filter(|c| c.last.is_none() && c.ranks.len() == 1)
    {
        if let Some(r) = c.ranks.first().filter(|&r| sinks.contains(r)) {
            may_waits.sink(r as i32);
            must_waits.sink(r as i32);
        }
    }
    for ci in without_stacks {
        let c = &job.classes[ci];
        let ops = collective_ops(&c.first, ci);
        let many = c.ranks.len() > 1 || c.last.is_some();
        if many && !ops.is_empty() {
            let why = "ranks without stacks with collectives' own messages";
            not_followed
                .entry(why.into())
                .or_default()
                .union_with(&c.ranks);
        }
        for (ranks, mut alternative, mut found) in view.queue_rules(ci, &mut may.sets) {
            p2p.extend(alternative.rules.iter().map(|&r| (ranks.clone(), r)));
            if let (Some(r), false) = (ranks.first(), many) {
                waits::scan_order(&mut found);
                // A collective's own messages: it is in a collective with their peers.
                for op in &ops {
                    let Some(peer) = op.peer.filter(|&p| u32::try_from(p).is_ok_and(|p| p < n))
                    else {
                        let why = "collectives' own messages to peers not known";
                        not_followed
                            .entry(why.into())
                            .or_default()
                            .union_with(&ranks);
                        continue;
                    };
                    alternative.rules.push(Rule::Fixed(peer as u32));
                    found.push(waits::collective_message(op));
                }
                may_waits.add(r as i32, (found, false));
            }
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
    let mut outside_of: BTreeMap<Instance, Option<usize>> = BTreeMap::new();
    let singles = mqd_evidence::quiet::singles(&job.classes);
    // What a hold of ranks each a class of its own builds on.
    let mut basis = HoldBasis::default();
    for w in &waiting {
        let Waiter {
            ci,
            needs,
            calls,
            unknown,
            polling,
            maybe_free,
            ..
        } = w;
        let c = &job.classes[*ci];
        let (mi, q) = (view.matched[*ci], view.classes[*ci].1.as_ref());
        // A wait's requests: each operation, the members for which it is done, and
        // those for which it is proven to wait (a synchronous message seen at its
        // destination); `None`: not known.
        let mut requests: Vec<Vec<(Option<Rule>, RankSet, RankSet)>> = Vec::new();
        // For a class of one: the wait of each request (`None`: done, or not known).
        let single = c.last.is_none() && c.ranks.len() == 1;
        let mut request_waits: Vec<Vec<Option<Wait>>> = Vec::new();
        let mut failed = None;
        for need in needs {
            let (Need::Wait(tid) | Need::WaitAny(tid)) = need else {
                requests.push(Vec::new());
                request_waits.push(Vec::new());
                continue;
            };
            let found = match (mi, q) {
                (Some(mi), Some(q)) => {
                    requests_of(&c.first, c.last.as_ref(), *tid, q).map(|items| {
                        request_waits.push(if single {
                            view.request_waits(mi, &items)
                        } else {
                            Vec::new()
                        });
                        view.request_sets(mi, q, &c.ranks, &items, &finalized)
                    })
                }
                // Queues not read: whatever the requests are, they are not known.
                _ => {
                    request_waits.push(vec![None]);
                    Ok(vec![(None, RankSet::new(), RankSet::new())])
                }
            };
            // Any one of requests to each member's neighbours is a rule of offsets
            // (`AllAround`); with requests to fixed ranks too, it is neither that nor a
            // rule over a fixed set.
            let found = found.and_then(|items| {
                let relative = items
                    .iter()
                    .any(|(r, ..)| matches!(r, Some(Rule::Offset(_))));
                let fixed = items.iter().any(|(r, ..)| {
                    matches!(
                        r,
                        Some(Rule::Fixed(_) | Rule::AllOf(_) | Rule::AllOthers(_) | Rule::AnyIn(_))
                    )
                });
                if matches!(need, Need::WaitAny(_)) && relative && fixed && c.ranks.len() > 1 {
                    Err("waits for any of requests to neighbours and to fixed ranks".to_owned())
                } else {
                    Ok(items)
                }
            });
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
        // send is proven to wait, whose proof is weak, who send to themselves, whose
        // receive's source finalized (it never comes), whose standard send no receive
        // can take (it waits unless the MPI buffers it).
        let mut sets: Vec<[RankSet; 7]> = Vec::new();
        for (need, &t) in needs.iter().zip(&w.threads) {
            let mut three: [RankSet; 7] = Default::default();
            if let Need::PointToPoint(p) = need {
                if let Some(receive) = p.receive {
                    three[0] = view.receive_proceeds(mi, q, &c.ranks, p.comm, receive);
                    three[5] = reaching(&c.ranks, receive.0, &finalized, Peer::Any, n);
                    // Or the recorder's counts: nothing its source sent is on its way.
                    let at = c.ranks.first().filter(|_| single);
                    let handle = c.first.threads.get(t).and_then(|t| t.call.as_ref()?.comm);
                    if let Some(at) = at.filter(|&at| {
                        let (from, tag) = (receive.0.at(at, n), receive.1);
                        mqd_evidence::quiet::receive_quiet(&singles, at, (from, tag, handle), n)
                    }) {
                        three[5].insert(at);
                    }
                }
                if let Some(send) = p.send {
                    three[1] = view.send_taken(&c.ranks, p.comm, send);
                    // A synchronous send to a rank that finalized waits for good (a
                    // standard one may have returned, its message buffered).
                    let to_finalized = if p.synchronous {
                        reaching(&c.ranks, send.0, &finalized, Peer::Any, n)
                    } else {
                        RankSet::new()
                    };
                    let (mut proven, weak) =
                        view.send_proven(&c.ranks, p.comm, send, p.synchronous, &to_finalized);
                    proven.union_with(&to_finalized);
                    // Or the recorder's: no receive its destination started takes it.
                    let args = c.first.threads.get(t).and_then(|t| t.call.as_ref());
                    if let (true, Some(at), Some(args)) = (single, c.ranks.first(), args)
                        && let Some(dest) = send.0.at(at, n)
                        && mqd_evidence::unmatched::send_unmatched(&singles, at, dest, args)
                    {
                        if p.synchronous {
                            proven.insert(at);
                        } else {
                            three[6].insert(at);
                        }
                    }
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
        // Members each collective cannot complete without that have not entered it,
        // by the recorder's counts (for a class of one).
        let behind: Vec<(Option<usize>, Vec<Wait>)> = needs
            .iter()
            .zip(&w.threads)
            .map(|(need, &t)| {
                let at = c.ranks.first().filter(|_| single)?;
                let args = c.first.threads.get(t)?.call.as_ref()?;
                let (set, labels) = match need {
                    Need::Collective(..) => (
                        mqd_evidence::behind::members_behind(&singles, at, args),
                        Vec::new(),
                    ),
                    // Over both groups: whom it waits for beyond its own, by the records.
                    Need::CollectiveSomewhere(call) if call.ends_with("Intercomm_create") => {
                        let set = mqd_evidence::pairing::pair_behind(&singles, at, args);
                        let labels = waits::pairing(at as i32, args, &set);
                        (set, labels)
                    }
                    _ => return None,
                };
                (!set.is_empty()).then(|| {
                    may.sets.push(set);
                    (Some(may.sets.len() - 1), labels)
                })
            })
            .map(Option::unwrap_or_default)
            .collect();
        let pieces = refine(vec![c.ranks.clone()], &by);
        for ranks in pieces {
            let at = ranks.first().unwrap_or(0);
            let mut proof = Vec::new();
            let mut proof_unbuffered = Vec::new();
            // For a class of one, each need's waits: the worst reading's, the proof's.
            let mut labels: Vec<(Vec<Wait>, Vec<Wait>, bool)> = Vec::new();
            let mut alternatives: Vec<ClassAlternative> = needs
                .iter()
                .zip(&sets)
                .zip(requests.iter().zip(&request_waits))
                .zip(calls)
                .zip(&behind)
                .map(
                    |(
                        (
                            (
                                (need, [received, taken, proven, weak, to_itself, gone, bare]),
                                (items, item_waits),
                            ),
                            call,
                        ),
                        behind,
                    )| {
                        let mut rules = Vec::new();
                        let mut certain = Vec::new();
                        // A standard send's wait, proven but for the MPI's buffering.
                        let mut unless_buffered = None;
                        let mut weakly = Vec::new();
                        let (mut may_w, mut must_w) = (Vec::new(), Vec::new());
                        // A wait for requests not known may wait for anything.
                        let mut unknown =
                            matches!(need, Need::CollectiveSomewhere(_) | Need::Unknown(_));
                        match need {
                            Need::Proceeds => {}
                            Need::Wait(_) => {
                                // Every request's operation, those not done.
                                for (k, (held, done, proven)) in items.iter().enumerate() {
                                    let Some(held) = held else {
                                        unknown = true;
                                        continue;
                                    };
                                    if !done.contains(at) {
                                        rules.push(*held);
                                        let w = item_waits.get(k).cloned().flatten();
                                        may_w.extend(w.clone());
                                        if proven.contains(at) {
                                            certain.push(*held);
                                            must_w.extend(w);
                                        }
                                    }
                                }
                            }
                            // One request done returns it: held while every request's
                            // peer is (as a receive from any of them).
                            Need::WaitAny(_) if items.iter().any(|(_, d, _)| d.contains(at)) => {}
                            Need::WaitAny(_) => {
                                // In the worst reading a request not known is held too:
                                // the others' peers hold it, or, without others, anything.
                                let mut peers = RankSet::new();
                                let mut offsets = RankSet::new();
                                for (held, ..) in items {
                                    match *held {
                                        Some(Rule::Fixed(p)) => {
                                            peers.insert(p);
                                        }
                                        // For a class of one, its rank.
                                        Some(Rule::Offset(k)) if single => {
                                            peers.insert(
                                                ((u64::from(at) + u64::from(k)) % u64::from(n))
                                                    as u32,
                                            );
                                        }
                                        // Else only with other offsets (checked above).
                                        Some(Rule::Offset(k)) => {
                                            offsets.insert(k);
                                        }
                                        Some(
                                            Rule::AllOf(i) | Rule::AllOthers(i) | Rule::AnyIn(i),
                                        ) => peers.union_with(&may.sets[i]),
                                        // No request's operation is such a rule.
                                        Some(Rule::Never | Rule::AllAround(_)) | None => {}
                                    }
                                }
                                if !offsets.is_empty() {
                                    let proven =
                                        items.iter().all(|(_, _, proven)| proven.contains(at));
                                    may.sets.push(offsets);
                                    let around = Rule::AllAround(may.sets.len() - 1);
                                    rules.push(around);
                                    if proven {
                                        certain.push(around);
                                    }
                                } else if peers.is_empty() {
                                    unknown = true;
                                } else {
                                    let all: Vec<Wait> =
                                        item_waits.iter().flatten().cloned().collect();
                                    let proven =
                                        items.iter().all(|(_, _, proven)| proven.contains(at));
                                    may_w.extend(waits::any_of(&all));
                                    if proven {
                                        must_w.extend(waits::any_of(&all));
                                    }
                                    may.sets.push(peers);
                                    let all = Rule::AllOf(may.sets.len() - 1);
                                    rules.push(all);
                                    if proven {
                                        certain.push(all);
                                    }
                                }
                            }
                            Need::PointToPoint(p) => {
                                let receive = p.receive.filter(|_| !received.contains(at));
                                let send = p.send.filter(|_| !taken.contains(at));
                                // The send's wait first, then the receive's.
                                if let (Some(dest), Some(w)) = (send, &p.waits.1) {
                                    let mut w = w.clone();
                                    let seen = view.seen_message(at, p.comm, dest);
                                    if let Some((m, _)) = &seen {
                                        w.evidence.clone_from(&m.evidence);
                                        w.requests.clone_from(&m.requests);
                                    }
                                    if proven.contains(at) {
                                        // Proven by its message seen at the destination
                                        // only: the wait is that message.
                                        if seen.as_ref().is_some_and(|(_, listed)| !listed) {
                                            w.kind = WaitKind::Unexpected;
                                        }
                                        must_w.push(w.clone());
                                    }
                                    may_w.push(w);
                                }
                                if let (Some((source, tag, _)), Some(w)) = (receive, &p.waits.0) {
                                    let evidence = view.call_receive(mi, at, p.comm, (source, tag));
                                    let w = Wait {
                                        evidence,
                                        ..w.clone()
                                    };
                                    if gone.contains(at) {
                                        must_w.push(w.clone());
                                    }
                                    may_w.push(w);
                                }
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
                                    let received =
                                        receive.map(|(peer, ..)| match (&p.any_source, peer) {
                                            (Some(from), Peer::Any) => {
                                                any_source_rule(from, &mut may.sets)
                                            }
                                            _ => rule(peer),
                                        });
                                    rules.extend(received);
                                    // Its source finalized, or sent nothing that is
                                    // on its way (the recorder's counts).
                                    if gone.contains(at) {
                                        certain.extend(received);
                                    }
                                    rules.extend(sent.map(|(held, ..)| held));
                                    if let Some((held, _, true)) = sent
                                        && received != Some(held)
                                    {
                                        weakly.push(held);
                                    }
                                    certain.extend(sent.filter(|s| s.1).map(|(h, ..)| h));
                                    if bare.contains(at) {
                                        unless_buffered = send.map(|(peer, _)| rule(peer));
                                    }
                                }
                            }
                            Need::Collective(comm, name, root, bytes) => {
                                // One set per instance, whatever the number of its classes.
                                let key = (*comm, name.clone(), *root, *bytes);
                                let index = *outside_of.entry(key.clone()).or_insert_with(|| {
                                    let members = RankSet::from_i32s(coll_comms[*comm].1.iter());
                                    let outside = members.difference(&instances[&key]);
                                    (!outside.is_empty()).then(|| {
                                        may.sets.push(outside);
                                        may.sets.len() - 1
                                    })
                                });
                                rules.extend(index.map(Rule::AnyIn));
                                certain.extend(behind.0.map(Rule::AnyIn));
                                if let (true, Some(i)) = (single, behind.0) {
                                    let (key, members) = &coll_comms[*comm];
                                    must_w =
                                        waits::collective(at as i32, key, members, &may.sets[i]);
                                }
                                if let (true, Some(i)) = (single, index) {
                                    let (key, members) = &coll_comms[*comm];
                                    may_w =
                                        waits::collective(at as i32, key, members, &may.sets[i]);
                                    // The collective's own messages to each are its evidence.
                                    let ops = collective_ops(&c.first, *ci);
                                    for w in &mut may_w {
                                        let WaitTarget::Rank(to) = w.target else {
                                            continue;
                                        };
                                        w.evidence = ops
                                            .iter()
                                            .filter(|o| o.comm == *key && o.peer == Some(to))
                                            .map(|o| o.evidence.clone())
                                            .collect();
                                    }
                                }
                            }
                            Need::Other(_) => unreachable!("not followed"),
                            Need::CollectiveSomewhere(_) => {
                                certain.extend(behind.0.map(Rule::AnyIn));
                                must_w.clone_from(&behind.1);
                            }
                            Need::Unknown(waits) => may_w.extend(waits.iter().cloned()),
                        }
                        let mut bare_rules = certain.clone();
                        bare_rules.extend(unless_buffered);
                        proof_unbuffered.push(ClassAlternative {
                            weak: weakly.clone(),
                            rules: bare_rules,
                            unknown: false,
                        });
                        proof.push(ClassAlternative {
                            weak: weakly.clone(),
                            rules: certain,
                            unknown: false,
                        });
                        for w in may_w.iter_mut().chain(&mut must_w) {
                            w.call.get_or_insert_with(|| call.clone());
                            w.blocked = false;
                        }
                        must_w.iter_mut().for_each(|w| w.blocked = true);
                        labels.push((may_w, must_w, unknown));
                        ClassAlternative {
                            rules,
                            unknown,
                            weak: weakly,
                        }
                    },
                )
                .collect();
            for (need, a) in needs.iter().zip(&alternatives) {
                if matches!(need, Need::PointToPoint(_) | Need::Wait(_)) {
                    p2p.extend(a.rules.iter().map(|&r| (ranks.clone(), r)));
                }
            }
            let mut waits: Vec<(String, HeldBy)> = calls
                .iter()
                .zip(&alternatives)
                .flat_map(|(call, a)| {
                    a.rules
                        .iter()
                        .filter_map(|&rule| Some((call.clone(), held_by(rule, &may.sets)?)))
                })
                .collect();
            if let Some(call) = polling {
                // It polls for ever for what any other rank might give: held while they
                // all are (for a member of the set, every rank of the job is).
                alternatives.push(ClassAlternative {
                    rules: vec![Rule::AllOthers(diagnosis::WORLD)],
                    ..ClassAlternative::default()
                });
                waits.push((call.clone(), HeldBy::AnyRank));
                if single {
                    may_waits.add(
                        at as i32,
                        (vec![waits::polls_for_anyone(at, call, n)], false),
                    );
                }
            }
            if single {
                if w.holdable {
                    basis.holdable.insert(at);
                    basis.blocked_calls.insert(at as i32, calls.clone());
                }
                for (k, (may_w, must_w, unknown)) in labels.into_iter().enumerate() {
                    if unknown && w.holdable {
                        let args = c
                            .first
                            .threads
                            .get(w.threads[k])
                            .and_then(|t| t.call.as_ref());
                        basis
                            .unknown_waits
                            .entry(at as i32)
                            .or_insert_with(|| stacks::unknown_wait(&calls[k], args));
                    }
                    may_waits.add(at as i32, (may_w, unknown));
                    if !maybe_free {
                        must_waits.add(at as i32, (must_w, false));
                    }
                }
            }
            if *unknown {
                alternatives.push(ClassAlternative {
                    unknown: true,
                    ..ClassAlternative::default()
                });
                if single {
                    may_waits.add(at as i32, (Vec::new(), true));
                }
            }
            waits_of.push((may.classes.len(), waits));
            may.classes.push(ClassPlan {
                ranks: ranks.clone(),
                sink: false,
                alternatives,
            });
            if !maybe_free {
                unbuffered.classes.push(ClassPlan {
                    ranks: ranks.clone(),
                    sink: false,
                    alternatives: proof_unbuffered,
                });
                must.classes.push(ClassPlan {
                    ranks,
                    sink: false,
                    alternatives: proof,
                });
            }
        }
    }
    // Ranks that never act again are said apart.
    let apart = |d: RankSet| {
        if d.is_subset(&sinks) {
            RankSet::new()
        } else {
            d.difference(&sinks)
        }
    };
    // Each plan's deadlocked set, sinks included (for its parts), once.
    // The proof names the sets the worst reading made.
    must.sets.clone_from(&may.sets);
    unbuffered.sets.clone_from(&may.sets);
    // Rank by rank where the classes do not settle, up to a bound.
    let may_set = may
        .deadlocked()
        .or_else(|| may.deadlocked_by_ranks(parts::MAX_EXPLICIT));
    let must_set = must
        .deadlocked()
        .or_else(|| must.deadlocked_by_ranks(parts::MAX_EXPLICIT));
    let settled = |plan: &Classes, set: &Option<RankSet>, not_followed: &mut BTreeMap<_, _>| {
        set.clone().map(apart).unwrap_or_else(|| {
            let mut ranks = RankSet::new();
            plan.classes.iter().for_each(|c| ranks.union_with(&c.ranks));
            not_followed
                .entry("waits that did not settle by classes".to_owned())
                .or_insert_with(RankSet::new)
                .union_with(&ranks.difference(&sinks));
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
    if !job.snapshot.is_one() {
        deadlocked = RankSet::new();
    }
    // Deadlocked but for buffering the MPI may do: proven as the rest of the proof is,
    // and as possible as the worst reading (which takes every send to wait).
    let mut unless_buffered = RankSet::new();
    if not_followed.is_empty() && job.snapshot.is_one() && unbuffered.classes.len() > 1 {
        let set = unbuffered
            .deadlocked()
            .or_else(|| unbuffered.deadlocked_by_ranks(parts::MAX_EXPLICIT));
        unless_buffered = set
            .map(apart)
            .unwrap_or_default()
            .difference(&deadlocked)
            .intersection(&possibly_deadlocked);
    }
    possibly_deadlocked.union_with(&deadlocked);
    let possible_parts = may_set.map(|d| parts::parts(&may, &d, &deadlocked));
    let deadlocks = match (proven_parts.unwrap_or(Some(Vec::new())), possible_parts) {
        (Some(proven), Some(Some(possible))) => {
            let proven_certainty = if !job.snapshot.is_one() {
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
    // Ranks not dumped, and ranks seen by their stacks only (their queues could not be
    // read): failed, unless their stacks show them running or account for them.
    let mut not_dumped = RankSet::new();
    job.failed
        .iter()
        .for_each(|f| not_dumped.union_with(&f.ranks));
    let mut errored = RankSet::new();
    for c in job.classes.iter().filter(|c| c.first.outcome.is_err()) {
        errored.union_with(&c.ranks);
    }
    let failed = not_dumped.union(&errored);
    let read = job.dumped().difference(&errored);
    let missing = world.difference(&job.dumped()).difference(&not_dumped);
    let mut doubts = Vec::new();
    if !missing.is_empty() {
        doubts.push(Doubt::Missing { ranks: missing });
    }
    let unaccounted = failed.difference(&running).difference(&accounted);
    if !unaccounted.is_empty() {
        doubts.push(Doubt::Failed { ranks: unaccounted });
    }
    if !job.unranked.is_empty() {
        doubts.push(Doubt::NoWorldRank {
            processes: job.unranked.len(),
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
    // The polling doubt says why these are not proven.
    // The mismatch doubt says why those are not proven, the polling doubt why these.
    let unproven = possibly_deadlocked
        .difference(&deadlocked)
        .difference(&mismatched)
        .difference(&unless_buffered);
    let mut polling = RankSet::new();
    polls.iter().for_each(|(r, _)| polling.union_with(r));
    let polled = unproven.intersection(&polling);
    let unproven = unproven.difference(&polled);
    if let Some(lowest) = polled.first()
        && let Some((_, call)) = polls.iter().find(|(r, _)| r.contains(lowest))
    {
        doubts.push(Doubt::Polling {
            ranks: polled.clone(),
            call: call.clone(),
        });
    }
    if !unproven.is_empty() {
        doubts.push(Doubt::Unproven { ranks: unproven });
    }
    if !unless_buffered.is_empty() {
        doubts.push(Doubt::Buffering {
            ranks: unless_buffered,
        });
    }
    if !mismatched.is_empty() {
        doubts.push(Doubt::Collectives {
            ranks: mismatched.clone(),
        });
    }
    let mut unknown_communicators = RankSet::new();
    unnamed
        .values()
        .for_each(|r| unknown_communicators.union_with(r));
    let unknown_communicators = unknown_communicators.difference(&mismatched);
    if !unknown_communicators.is_empty() {
        doubts.push(Doubt::UnknownCommunicators {
            ranks: unknown_communicators,
        });
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
            ranks: self_blocked.clone(),
        });
    }
    if let Snapshot::Separate { why } = &job.snapshot {
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
    let (may_plan, must_plan) = (may_waits.plan(), must_waits.plan());
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
    let mut hold = None;
    let (findings, facts_by_rank) = if not_followed.is_empty() {
        // Every rank a class of its own: the findings of deadlocks, of messages in
        // transit, of mismatches, of ranks waited for, of queues not read, of waits on
        // finalized ranks and the summary in full, each rank's waits named.
        let singles = job
            .classes
            .iter()
            .all(|c| c.last.is_none() && c.ranks.len() == 1);
        let mut of_ranks = RankFindings::default();
        let mut by_rank = BTreeMap::new();
        if singles {
            let (transit, in_transit) = transit::transit(&view);
            by_rank = rank_facts(job, &view);
            for (rank, count) in in_transit {
                by_rank.entry(rank).or_default().transit += count;
            }
            let one = job.snapshot.is_one();
            (of_ranks.first, ..) =
                mqd_graph::proven_and_possible(&must_plan, &may_plan, &by_rank, one);
            let queue_waits = queue_waits::queue_waits(&view);
            let mut atoms = queue_mismatch::atoms(&view, &facts.mismatched);
            atoms.extend(mqd_graph::attention(&queue_waits, &by_rank));
            atoms.extend(transit);
            atoms.extend(queue_waits::unknown_senders(&view));
            atoms.extend(failures::failures(job));
            of_ranks.first.extend(mqd_graph::merge(atoms));
            of_ranks.finalized = mqd_graph::waits_on_finalized(
                &may_plan.waits,
                &finalizing(job, &finalized),
                &finalized,
                &deadlocked,
            );
            if possibly_deadlocked.is_empty() && !queue_waits.is_empty() {
                let seen_all = mqd_graph::summary::seen_all(&doubts);
                of_ranks.summary = mqd_graph::summary::no_deadlock_finding(
                    &queue_waits,
                    &by_rank,
                    seen_all,
                    &running,
                );
            }
            for (ranks, call) in &polls {
                for r in ranks {
                    basis.polling.insert(r as i32, call.clone());
                }
            }
            hold = Some(HoldBasis {
                may: may_plan.clone(),
                finalized: finalized.clone(),
                queue_waits,
                facts: by_rank.clone(),
                running: running.clone(),
                size: Some(n),
                ..basis
            });
            let named = of_ranks.first.iter_mut().chain(&mut of_ranks.finalized);
            report::name_communicators(named, |e| {
                let c = job.classes.get(e.op.process)?;
                Some(CommKey::of(c.first.communicators().get(e.op.communicator)?))
            });
        } else {
            // Classes of many: the mismatches their members' words say alike, the
            // messages in transit, and what could not be read of them (each class's
            // own words).
            let mut atoms = queue_mismatch::worded_atoms(&view, &facts.mismatched);
            atoms.extend(transit::transit(&view).0);
            atoms.extend(failures::failures(job));
            of_ranks.first = mqd_graph::merge(atoms);
        }
        // In the order a reader of the job rank by rank expects.
        let mut findings = of_ranks.first;
        findings.extend(collective_waits(job, &coll_comms, &instances, &finalized));
        findings.extend(collectives_somewhere(job, &unnamed));
        if facts.waiting.is_empty() {
            findings.extend(clean(
                (&read, &failed),
                &doubts,
                &possibly_deadlocked,
                &running,
                !facts.transit.is_empty(),
            ));
        }
        queue_findings = queue_findings_of(
            job,
            (&read, &failed),
            &facts,
            &possibly_deadlocked,
            &running,
        );
        findings.extend(blocked_without_queues(job, &running));
        findings.extend(of_ranks.finalized);
        findings.extend(openmp_waits(job, &self_blocked));
        findings.extend(call_findings);
        findings.extend(of_ranks.summary);
        queue_findings.extend(waits_on_finalized(
            job,
            (&p2p, &may.sets),
            &finalized,
            &deadlocked,
        ));
        // Stable: within a kind, proven before possible, then the order of discovery.
        findings.sort_by_key(|f| (f.kind, f.certainty));
        (findings, by_rank)
    } else {
        (Vec::new(), BTreeMap::new())
    };
    ClassDiagnosis {
        verdict: diagnosis::verdict(&deadlocked, &doubts),
        doubts,
        deadlocked,
        possibly_deadlocked,
        running,
        not_followed,
        findings,
        held,
        deadlocks,
        queue_findings,
        waits: mqd_graph::graph(&may_plan, &must_plan, job.snapshot.is_one()),
        facts: facts_by_rank,
        hold,
    }
}

/// A class waiting in blocking calls, as its stacks show it.
struct Waiter {
    ci: usize,
    needs: Vec<Need>,
    /// The call of each need.
    calls: Vec<String>,
    /// The thread of each need.
    threads: Vec<usize>,
    /// A hold can prove it ([`stacks::State::Waiting`]).
    holdable: bool,
    /// A thread's place is not known.
    unknown: bool,
    /// A thread polls (its call).
    polling: Option<String>,
    /// A thread may call MPI now: in no proof.
    maybe_free: bool,
}

/// The findings of a job whose every rank is a class of its own that the class analysis
/// gives in full only there.
#[derive(Default)]
struct RankFindings {
    /// The deadlocks' and the queues' findings.
    first: Vec<Finding>,
    /// Waits on finalized ranks.
    finalized: Option<Finding>,
    /// The summary of waits that deadlock nobody.
    summary: Option<Finding>,
}

/// What each rank of `job`, every class of one rank, looked like: its pid, why it could
/// not be read, what its queues hold.
fn rank_facts(job: &ClassJob, view: &Job<'_>) -> BTreeMap<i32, RankFacts> {
    let mut facts = BTreeMap::new();
    for (ci, c) in job.classes.iter().enumerate() {
        let mut f = match &c.first.outcome {
            Err(error) => RankFacts {
                error: Some(error.clone()),
                ..RankFacts::default()
            },
            Ok(_) => view.rank_facts(ci),
        };
        f.pid = c.first.pid;
        facts.insert(c.first.rank, f);
    }
    for f in &job.failed {
        for r in &f.ranks {
            facts.insert(
                r as i32,
                RankFacts {
                    pid: f.pid,
                    error: Some(f.why.clone()),
                    ..RankFacts::default()
                },
            );
        }
    }
    facts
}

/// Ranks that `finalized` or are in `MPI_Finalize`.
fn finalizing(job: &ClassJob, finalized: &RankSet) -> RankSet {
    let mut finalizing = finalized.clone();
    for c in &job.classes {
        let location = mqd_model::places::main_thread(&c.first)
            .map(|t| t.location_in(c.first.executable.as_deref()));
        if let Some(mqd_model::Location::InMpi {
            class: mqd_model::CallClass::Finalize,
            ..
        }) = location
        {
            finalizing.union_with(&c.ranks);
        }
    }
    finalizing
}

/// Ranks that finalized or are in `MPI_Finalize` that others wait for in point-to-point
/// (the rules `p2p` of pieces, over `sets`): a message from them never comes. Proven
/// when every waiter is proven deadlocked and every rank waited for finalized.
fn waits_on_finalized(
    job: &ClassJob,
    (p2p, sets): (&[(RankSet, Rule)], &[RankSet]),
    finalized: &RankSet,
    deadlocked: &RankSet,
) -> Option<FindingRanks> {
    let finalizing = finalizing(job, finalized);
    let mut waited = RankSet::new();
    let mut waiters = RankSet::new();
    for (ranks, rule) in p2p {
        let from = ranks.difference(&finalizing);
        match *rule {
            Rule::Offset(k) => {
                let those = reaching(&from, Peer::Off(k), &finalizing, Peer::Any, job.size);
                waited.union_with(&queues::image(&those, Peer::Off(k), job.size));
                waiters.union_with(&those);
            }
            Rule::Fixed(p) if finalizing.contains(p) && !from.is_empty() => {
                waited.insert(p);
                waiters.union_with(&from);
            }
            // The destinations of a rank's messages: a wait for each.
            Rule::AnyIn(i) if !from.is_empty() && sets[i].intersects(&finalizing) => {
                waited.union_with(&sets[i].intersection(&finalizing));
                waiters.union_with(&from);
            }
            _ => {}
        }
    }
    if waiters.is_empty() {
        return None;
    }
    let blocked = waiters.is_subset(deadlocked) && waited.is_subset(finalized);
    Some(FindingRanks {
        kind: mqd_model::FindingKind::WaitsOnFinalized,
        certainty: if blocked {
            Certainty::Definite
        } else {
            Certainty::Possible
        },
        ranks: waited,
    })
}

/// The diagnosis `d` of `classes` (its evidence naming classes by index, as their first
/// members) with its evidence naming the processes of `dump` instead: the dump the
/// classes were made of.
pub fn in_dump(
    mut d: ClassDiagnosis,
    classes: &mqd_model::ClassJob,
    dump: &mqd_model::JobDump,
) -> ClassDiagnosis {
    let process: Vec<Option<usize>> = classes
        .classes
        .iter()
        .map(|c| {
            dump.ranks
                .iter()
                .position(|r| !r.duplicate && r.rank == c.first.rank)
        })
        .collect();
    let basis = d.hold.iter_mut().flat_map(|b| {
        let waits = b.may.waits.iter_mut().chain(&mut b.queue_waits);
        waits.flat_map(|w| &mut w.evidence)
    });
    let evidence = d
        .waits
        .iter_mut()
        .flat_map(|w| &mut w.evidence)
        .chain(d.findings.iter_mut().flat_map(|f| &mut f.evidence))
        .chain(basis);
    for e in evidence {
        if let Some(Some(p)) = process.get(e.op.process) {
            e.op.process = *p;
        }
    }
    d
}

/// The diagnosis of `job` by the class analysis, each rank a class of its own, in the
/// per-rank form. Ranks in a state it does not follow are a doubt
/// ([`Doubt::NotFollowed`](mqd_model::Doubt::NotFollowed)): the verdict is never
/// "no deadlock" and nothing rests on them.
pub fn diagnose_ranks(job: &mqd_model::JobDump) -> mqd_model::Diagnosis {
    analyse_ranks(job).0
}

/// [`diagnose_ranks`] with what a hold of `job` builds on, from the same analysis: nothing
/// a hold could prove where the analysis does not follow every rank.
pub fn analyse_ranks(job: &mqd_model::JobDump) -> (mqd_model::Diagnosis, HoldBasis) {
    let classes = ClassJob::of_ranks(job);
    let d = in_dump(diagnose_classes(&classes), &classes, job);
    let basis = HoldBasis {
        size: job.known_size(),
        ..d.hold
            .filter(|_| d.not_followed.is_empty())
            .unwrap_or_default()
    };
    let diagnosis = mqd_model::Diagnosis {
        findings: d.findings,
        waits: d.waits,
        deadlocked: d.deadlocked,
        possibly_deadlocked: d.possibly_deadlocked,
        facts: d.facts,
        verdict: d.verdict,
        doubts: d.doubts,
        hold: None,
    };
    (diagnosis, basis)
}
