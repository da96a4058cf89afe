//! The diagnosis of a job of classes ([`ClassJob`]): what each class's ranks wait for is
//! read once from its first and last members, written as rules over rank sets, and the
//! worst reading's deadlocked set is computed by rank-set arithmetic ([`Classes`]).
//! Nothing costs a node per rank: a ring of a million ranks is one class and one rule.
//!
//! It follows the states a hang at scale mostly shows, as the per-rank analysis reads
//! them from stacks: threads running, waiting for their own process, in a blocking
//! receive, send or `MPI_Sendrecv` on `MPI_COMM_WORLD` (a peer its members name alike:
//! the same rank, or the same distance around the job; a send goes on where a receive
//! of its destination takes it), in one blocking collective on `MPI_COMM_WORLD`
//! (waiting for the members not in it), and ranks without stacks whose queues list
//! nothing. Any other state (queues that list operations, request waits, other
//! communicators, finalized ranks...) is not guessed at: its ranks are named in a
//! doubt, and the verdict is undetermined. Where it follows every class, it reaches the
//! per-rank analysis's verdict, sets, collective and clean findings (checked on random
//! jobs by a property test, and on every in-process diagnosis test of `mqd`).

use crate::classes::{ClassAlternative, ClassPlan, Classes, Rule};
use crate::collectives::place;
use crate::locations::main_thread;
use crate::plan::{ANY_TAG, is_world, rooted};
use mqd_model::diagnosis::{Doubt, Verdict};
use mqd_model::{
    CallArguments, CallClass, Certainty, ClassJob, ClassPeer, CommKey, Finding, FindingKind,
    Location, Queue, RankDump, RankSet, Subject, ThreadLevel, ThreadStack,
};
use std::collections::BTreeMap;

/// What the class analysis concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassDiagnosis {
    /// The verdict.
    pub verdict: Verdict,
    /// Why it is not "no deadlock", as the per-rank analysis says it.
    pub doubts: Vec<Doubt>,
    /// Ranks deadlocked in the worst reading.
    pub possibly_deadlocked: RankSet,
    /// Ranks their stacks show running.
    pub running: RankSet,
    /// Ranks in a state this analysis does not follow, each set with why.
    pub not_followed: Vec<(RankSet, String)>,
    /// What the per-rank analysis finds of the collective and of a job with nothing
    /// held, computed by class: the ranks in the collective on `MPI_COMM_WORLD` and
    /// where the others are; that nothing waits. Only where every class is followed.
    pub findings: Vec<Finding>,
    /// The ranks of the worst reading, by what they wait for: a ring of a million
    /// ranks each waiting for its right neighbour is one entry.
    pub held: Vec<HeldClass>,
}

/// Ranks of the worst reading that wait for the same, each relative to itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldClass {
    /// The ranks.
    pub ranks: RankSet,
    /// Each blocked call (its name) and what holds it.
    pub waits: Vec<(String, HeldBy)>,
}

/// What a blocked call of a [`HeldClass`] waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeldBy {
    /// Each rank's `k`-th right neighbour, around the job.
    Neighbour(u32),
    /// This rank.
    Rank(u32),
    /// Any rank (a receive from any source).
    AnyRank,
    /// One of these ranks: the members not in the collective.
    Outside(RankSet),
}

/// The set `AllOf` rules of any-source receives name: every rank of the job.
const WORLD: usize = 0;

/// A blocked thread of a class's first member, as the rule it becomes.
enum Need {
    /// Returns: the rank goes on.
    Proceeds,
    /// In a blocking point-to-point call on `MPI_COMM_WORLD`.
    PointToPoint(PointToPoint),
    /// In this collective on `MPI_COMM_WORLD`.
    Collective(String, Option<i64>, Option<u64>),
    /// Not followed here (why).
    Other(String),
}

/// A blocking point-to-point call's peers as rules, with their tags.
#[derive(Clone, Copy)]
struct PointToPoint {
    /// The receive's source, and its tag (`None`: any).
    receive: Option<(Rule, Option<i64>)>,
    /// The send's destination, and its tag.
    send: Option<(Rule, i64)>,
}

/// What one class's ranks do.
enum State {
    Running,
    /// No stack and nothing pending: it may be anywhere, and may go on.
    NoStacks,
    SelfBlocked,
    Waiting {
        needs: Vec<Need>,
        /// The call of each need.
        calls: Vec<String>,
        unknown: Option<String>,
    },
    NotFollowed(String),
}

fn kind(t: &ThreadStack, program: Option<&str>) -> Result<Option<(String, CallClass)>, String> {
    match t.location_in(program) {
        Location::Outside { waits: Some(_), .. } | Location::MpiThread => Ok(None),
        Location::Outside { .. } => Err(String::new()),
        Location::Unknown => Err("a stack that could not be followed".into()),
        Location::InMpi { call, class } => match class.blocks() {
            None => Err(call),
            Some(false) => Err(String::new()),
            Some(true) => Ok(Some((call, class))),
        },
    }
}

/// Which peer of a point-to-point call a rule is made of.
#[derive(Clone, Copy)]
enum Side {
    /// The source of a receive (any source allowed).
    Source,
    /// The destination of a send.
    Destination,
    /// The source of `MPI_Sendrecv`'s receive.
    SendrecvSource,
}

/// The peer a blocking point-to-point call waits for, as a rule for every member of the
/// class: `Ok(None)` when it needs nobody (`MPI_PROC_NULL`).
fn peer_rule(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    side: Side,
) -> Result<Option<Rule>, String> {
    let peer_of = |r: &RankDump| -> Option<(i64, i64)> {
        let args: &CallArguments = r.threads.get(tid)?.call.as_ref()?;
        let peer = match side {
            Side::Source | Side::Destination => args.peer?,
            Side::SendrecvSource => args.recv_peer?,
        };
        (is_world(args) && !args.function.contains("Mrecv")).then_some((peer, r.rank.into()))
    };
    let unknown = || String::from("calls whose communicator or peer is not known");
    let first = peer_of(first).ok_or_else(unknown)?;
    let last = match last {
        Some(last) => Some(peer_of(last).ok_or_else(unknown)?),
        None => None,
    };
    let in_job = |p: i64| (0..i64::from(n)).contains(&p);
    match ClassPeer::of(first, last, n) {
        None => Err("calls whose peers differ across the class".into()),
        Some(ClassPeer::Null) => Ok(None),
        Some(ClassPeer::Any) if !matches!(side, Side::Destination) => Ok(Some(Rule::AllOf(WORLD))),
        Some(ClassPeer::Rank(p)) if in_job(p) => Ok(Some(Rule::Fixed(p as u32))),
        Some(ClassPeer::Offset(k)) if in_job(first.0) && last.is_none_or(|l| in_job(l.0)) => {
            Ok(Some(Rule::Offset(k as u32)))
        }
        Some(_) => Err(format!("a call with rank {}, not in the job", first.0)),
    }
}

/// The tag of a class's call, the same in its first and last members.
fn tag_of(
    first: &RankDump,
    last: Option<&RankDump>,
    tid: usize,
    pick: fn(&CallArguments) -> Option<i64>,
) -> Result<Option<i64>, String> {
    let tag = |r: &RankDump| r.threads.get(tid)?.call.as_ref().and_then(pick);
    let t0 = tag(first);
    match last.map(tag) {
        Some(t1) if t1 != t0 => Err("calls whose tags differ across the class".into()),
        _ => Ok(t0),
    }
}

/// What a blocking point-to-point call needs: its receive's source and its send's
/// destination (`MPI_PROC_NULL` needs nobody).
fn point_to_point(
    first: &RankDump,
    last: Option<&RankDump>,
    n: u32,
    tid: usize,
    class: CallClass,
) -> Need {
    let (receive, send) = match class {
        CallClass::BlockingReceive => (Some(Side::Source), None),
        CallClass::BlockingSend => (None, Some(Side::Destination)),
        _ => (Some(Side::SendrecvSource), Some(Side::Destination)),
    };
    let mut call = PointToPoint {
        receive: None,
        send: None,
    };
    if let Some(side) = receive {
        let pick = match side {
            Side::SendrecvSource => |a: &CallArguments| a.recv_tag,
            _ => |a: &CallArguments| a.tag,
        };
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, pick),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(rule), Ok(tag)) => {
                call.receive = rule.map(|r| (r, tag.filter(|&t| t != ANY_TAG)));
            }
        }
    }
    if let Some(side) = send {
        match (
            peer_rule(first, last, n, tid, side),
            tag_of(first, last, tid, |a| a.tag),
        ) {
            (Err(why), _) | (_, Err(why)) => return Need::Other(why),
            (Ok(None), _) => {}
            (Ok(Some(_)), Ok(None)) => return Need::Other("sends whose tag is not known".into()),
            (Ok(Some(rule)), Ok(Some(tag))) => call.send = Some((rule, tag)),
        }
    }
    match call {
        PointToPoint {
            receive: None,
            send: None,
        } => Need::Proceeds,
        _ => Need::PointToPoint(call),
    }
}

/// The members of `members`, sending by rule `send`, whose message a receive of ranks
/// `receivers` from `source` would take (as a receive posted by a thread in its call
/// lets a send to it go on): each sender's destination is a receiver whose source is it.
fn served(members: &RankSet, send: Rule, receivers: &RankSet, source: Rule, n: u32) -> RankSet {
    let at = |r: u64| RankSet::single((r % u64::from(n)) as u32);
    match send {
        Rule::Offset(k) => {
            let reaching = members.intersection(&receivers.rotated(k, n));
            match source {
                Rule::AllOf(_) => reaching,
                // The source of r + k is r + k + j: r itself when k + j is 0 mod n.
                Rule::Offset(j) if (u64::from(k) + u64::from(j)) % u64::from(n) == 0 => reaching,
                Rule::Fixed(p) => reaching.intersection(&RankSet::single(p)),
                _ => RankSet::new(),
            }
        }
        Rule::Fixed(d) if receivers.contains(d) => match source {
            Rule::AllOf(_) => members.clone(),
            Rule::Offset(j) => members.intersection(&at(u64::from(d) + u64::from(j))),
            Rule::Fixed(p) => members.intersection(&RankSet::single(p)),
            _ => RankSet::new(),
        },
        _ => RankSet::new(),
    }
}

fn state_of(first: &RankDump, last: Option<&RankDump>, n: u32) -> State {
    if first.outcome.is_err() {
        return State::NotFollowed("ranks whose queues could not be read".into());
    }
    if first.mpi.phase == Some(mqd_model::MpiPhase::Finalized) {
        return State::NotFollowed("ranks that finalized".into());
    }
    let listed = first.communicators().iter().any(|c| {
        [
            &c.pending_receives,
            &c.unexpected_messages,
            &c.pending_sends,
        ]
        .iter()
        .any(|q| !matches!(q, Queue::NoInformation) && !q.ops().is_empty())
    });
    if listed {
        return State::NotFollowed("ranks whose queues list operations".into());
    }
    if first.threads.is_empty() {
        // Nothing pending, and no stack to say where it is: it may go on.
        return State::NoStacks;
    }
    let program = first.executable.as_deref();
    let mut free = false;
    let mut unknown = None;
    let mut blocked = Vec::new();
    for (i, t) in first.threads.iter().enumerate() {
        match kind(t, program) {
            Ok(None) => {}
            Ok(Some(call)) => blocked.push((i, call)),
            Err(what) if what.is_empty() => free = true,
            Err(what) => {
                unknown.get_or_insert(what);
            }
        }
    }
    let in_mpi = !blocked.is_empty() || unknown.is_some();
    let level = first.mpi.thread_level;
    if free && (!in_mpi || level == Some(ThreadLevel::Multiple)) {
        return State::Running;
    }
    if blocked.is_empty() && unknown.is_none() && !free {
        return State::SelfBlocked;
    }
    let calls = blocked.iter().map(|(_, (call, _))| call.clone()).collect();
    let needs = blocked
        .into_iter()
        .map(|(i, (call, class))| {
            let args = first.threads[i].call.as_ref();
            match class {
                CallClass::BlockingReceive | CallClass::BlockingSend | CallClass::SendReceive => {
                    point_to_point(first, last, n, i, class)
                }
                CallClass::Collective => match args {
                    Some(a) if is_world(a) && !(rooted(&call) && a.root.is_none()) => {
                        let name = mqd_model::calls::canonical(&call)
                            .map_or_else(|| call.clone(), |c| c.name.to_owned());
                        Need::Collective(name, a.root, a.bytes)
                    }
                    _ => Need::Other("collectives on other communicators".into()),
                },
                _ => Need::Other(format!("ranks in {call}")),
            }
        })
        .collect();
    State::Waiting {
        needs,
        calls,
        unknown,
    }
}

/// The diagnosis of `job`.
pub fn diagnose_classes(job: &ClassJob) -> ClassDiagnosis {
    let n = job.size;
    let mut not_followed: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut running = RankSet::new();
    let mut no_stacks = RankSet::new();
    let mut self_blocked = RankSet::new();
    let mut unknown_places: Vec<(RankSet, String)> = Vec::new();
    let mut waiting = Vec::new();
    for c in &job.classes {
        match state_of(&c.first, c.last.as_ref(), n) {
            State::Running => running.union_with(&c.ranks),
            State::NoStacks => no_stacks.union_with(&c.ranks),
            State::SelfBlocked => self_blocked.union_with(&c.ranks),
            State::NotFollowed(why) => not_followed.entry(why).or_default().union_with(&c.ranks),
            State::Waiting {
                needs,
                calls,
                unknown,
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
                waiting.push((c, needs, unknown.is_some(), calls));
            }
        }
    }
    // Each collective instance on MPI_COMM_WORLD: its ranks, and who is not in it.
    let mut instances: BTreeMap<(String, Option<i64>, Option<u64>), RankSet> = BTreeMap::new();
    for (c, needs, _, _) in &waiting {
        for need in needs {
            if let Need::Collective(name, root, bytes) = need {
                instances
                    .entry((name.clone(), *root, *bytes))
                    .or_default()
                    .union_with(&c.ranks);
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
        waiting.retain(|(c, _, _, _)| !c.ranks.intersects(&ranks));
    }
    let world = RankSet::full(n);
    let mut classes = Classes {
        n,
        sets: vec![world.clone()],
        classes: Vec::new(),
    };
    // Sinks: ranks held by their own threads never act again.
    classes.classes.push(ClassPlan {
        ranks: self_blocked.clone(),
        sink: true,
        alternatives: Vec::new(),
    });
    let mut outside_of: BTreeMap<(String, Option<i64>, Option<u64>), Option<usize>> =
        BTreeMap::new();
    // Receives posted by threads in their calls: the sends they would take go on.
    let receives: Vec<(&RankSet, Rule, Option<i64>)> = waiting
        .iter()
        .flat_map(|(c, needs, _, _)| {
            needs.iter().filter_map(|need| match need {
                Need::PointToPoint(PointToPoint {
                    receive: Some((rule, tag)),
                    ..
                }) => Some((&c.ranks, *rule, *tag)),
                _ => None,
            })
        })
        .collect();
    // What each plan's ranks wait for, in words' terms (by plan index).
    let mut waits_of: Vec<(usize, Vec<(String, HeldBy)>)> = Vec::new();
    for (c, needs, unknown, calls) in &waiting {
        // The class's ranks split by which of their sends a posted receive takes.
        let mut pieces: Vec<(RankSet, Vec<bool>)> =
            vec![(c.ranks.clone(), vec![false; needs.len()])];
        for (i, need) in needs.iter().enumerate() {
            let Need::PointToPoint(PointToPoint {
                send: Some((rule, tag)),
                ..
            }) = need
            else {
                continue;
            };
            let mut taken = RankSet::new();
            for (receivers, source, receive_tag) in &receives {
                if receive_tag.is_none_or(|t| t == *tag) {
                    taken.union_with(&served(&c.ranks, *rule, receivers, *source, n));
                }
            }
            pieces = pieces
                .into_iter()
                .flat_map(|(ranks, sent)| {
                    let mut done = sent.clone();
                    done[i] = true;
                    [
                        (ranks.intersection(&taken), done),
                        (ranks.difference(&taken), sent),
                    ]
                })
                .filter(|(ranks, _)| !ranks.is_empty())
                .collect();
        }
        for (ranks, sent) in pieces {
            let mut alternatives: Vec<ClassAlternative> = needs
                .iter()
                .zip(&sent)
                .map(|(need, &sent)| match need {
                    Need::Proceeds => ClassAlternative {
                        rules: Vec::new(),
                        unknown: false,
                    },
                    Need::PointToPoint(call) => ClassAlternative {
                        rules: call
                            .receive
                            .map(|(rule, _)| rule)
                            .into_iter()
                            .chain(call.send.filter(|_| !sent).map(|(rule, _)| rule))
                            .collect(),
                        unknown: false,
                    },
                    Need::Collective(name, root, bytes) => {
                        // One set per instance, whatever the number of its classes.
                        let key = (name.clone(), *root, *bytes);
                        let index = *outside_of.entry(key.clone()).or_insert_with(|| {
                            let outside = world.difference(&instances[&key]);
                            (!outside.is_empty()).then(|| {
                                classes.sets.push(outside);
                                classes.sets.len() - 1
                            })
                        });
                        let rules = index.map(Rule::AnyIn).into_iter().collect();
                        ClassAlternative {
                            rules,
                            unknown: false,
                        }
                    }
                    Need::Other(_) => unreachable!("not followed"),
                })
                .collect();
            let waits = calls
                .iter()
                .zip(&alternatives)
                .flat_map(|(call, a)| {
                    a.rules.iter().filter_map(|rule| {
                        let by = match *rule {
                            Rule::Offset(k) => HeldBy::Neighbour(k),
                            Rule::Fixed(p) => HeldBy::Rank(p),
                            Rule::AllOf(_) => HeldBy::AnyRank,
                            Rule::AnyIn(set) => HeldBy::Outside(classes.sets[set].clone()),
                            Rule::Never => return None,
                        };
                        Some((call.clone(), by))
                    })
                })
                .collect();
            if *unknown {
                alternatives.push(ClassAlternative {
                    rules: Vec::new(),
                    unknown: true,
                });
            }
            waits_of.push((classes.classes.len(), waits));
            classes.classes.push(ClassPlan {
                ranks,
                sink: false,
                alternatives,
            });
        }
    }
    let (possibly_deadlocked, settled) = match classes.deadlocked() {
        // Only ranks held by their own threads: nothing between ranks.
        Some(d) if d.is_subset(&self_blocked) => (RankSet::new(), true),
        // Ranks held by their own threads are said apart.
        Some(d) => (d.difference(&self_blocked), true),
        None => (RankSet::new(), false),
    };
    if !settled {
        let mut ranks = RankSet::new();
        waiting
            .iter()
            .for_each(|(c, _, _, _)| ranks.union_with(&c.ranks));
        not_followed
            .entry("waits that did not settle by classes".into())
            .or_default()
            .union_with(&ranks);
    }
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
    if !possibly_deadlocked.is_empty() {
        doubts.push(Doubt::Unproven {
            ranks: possibly_deadlocked.clone(),
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
        let ranks = classes.classes[plan]
            .ranks
            .intersection(&possibly_deadlocked);
        if !ranks.is_empty() && !waits.is_empty() {
            held.entry(waits).or_default().union_with(&ranks);
        }
    }
    let held = held
        .into_iter()
        .map(|(waits, ranks)| HeldClass { ranks, waits })
        .collect();
    let findings = if not_followed.is_empty() {
        let mut findings: Vec<Finding> = instances
            .iter()
            .filter_map(|((call, _, _), ranks)| collective_wait(job, call, ranks))
            .collect();
        findings.extend(clean(job, &doubts, &possibly_deadlocked, &running));
        findings
    } else {
        Vec::new()
    };
    ClassDiagnosis {
        verdict: if doubts.is_empty() {
            Verdict::NoDeadlock
        } else {
            Verdict::Undetermined
        },
        doubts,
        possibly_deadlocked,
        running,
        not_followed,
        findings,
        held,
    }
}

/// Ranks `ranks` in collective `call` on `MPI_COMM_WORLD`, and where each class of the
/// others is (one place per class: its members are where its first is).
fn collective_wait(job: &ClassJob, call: &str, ranks: &RankSet) -> Option<Finding> {
    let absent = RankSet::full(job.size).difference(ranks);
    if absent.is_empty() {
        return None;
    }
    let mut places: BTreeMap<String, RankSet> = BTreeMap::new();
    let mut seen = RankSet::new();
    for c in &job.classes {
        let outside = c.ranks.intersection(&absent);
        let Some(thread) = main_thread(&c.first).filter(|_| !outside.is_empty()) else {
            continue;
        };
        let at = place(&thread.location_in(c.first.executable.as_deref()));
        seen.union_with(&outside);
        places.entry(at).or_default().union_with(&outside);
    }
    let unseen = absent.difference(&seen);
    if !unseen.is_empty() {
        places
            .entry("not seen".into())
            .or_default()
            .union_with(&unseen);
    }
    let mut others: Vec<(RankSet, String)> = places.into_iter().map(|(p, s)| (s, p)).collect();
    others.sort();
    let world = job
        .classes
        .iter()
        .flat_map(|c| c.first.communicators())
        .find(|c| c.name == "MPI_COMM_WORLD");
    let comm = world.map_or_else(
        || CommKey::named("MPI_COMM_WORLD", job.size.into()),
        CommKey::of,
    );
    Some(Finding::unproven_by_operations(
        FindingKind::CollectiveWait,
        Certainty::Definite,
        ranks.clone(),
        Subject::Collective {
            call: call.to_owned(),
            others,
            comm: Some(comm),
        },
    ))
}

/// Nothing held and no queue listing anything: every dumped rank is clean (the
/// per-rank analysis's summary of such a job).
fn clean(
    job: &ClassJob,
    doubts: &[Doubt],
    possibly_deadlocked: &RankSet,
    running: &RankSet,
) -> Option<Finding> {
    if !possibly_deadlocked.is_empty() {
        return None;
    }
    let mut failed = RankSet::new();
    job.failed.iter().for_each(|(r, _)| failed.union_with(r));
    let failed = failed.difference(running);
    let dumped = job.dumped();
    if dumped.is_empty() && !failed.is_empty() {
        return None;
    }
    let seen_all = crate::verdict::seen_all(doubts);
    Some(Finding::unproven_by_operations(
        FindingKind::Clean,
        Certainty::Definite,
        dumped,
        Subject::Clean {
            in_transit: false,
            failed,
            seen_all,
            running: running.clone(),
        },
    ))
}

#[cfg(test)]
mod tests;
