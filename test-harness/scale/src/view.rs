//! The job's classes as the queues' matching sees them: what each class's receives,
//! sends and waits need, member by member as rank sets, and what the queues show.

use super::diagnosis::WORLD;
use super::queues::{
    ByClass, ClassQueues, Matching, Peer, Taken, image, reaching, refine, same_rank,
};
use super::stacks::Request;
use crate::waits;
use mqd_graph::{ClassAlternative, Rule};
use mqd_model::diagnosis::RankFacts;
use mqd_model::{FindingKind, RankSet, Wait};

/// The rule a peer is for the deadlock sets.
pub(super) fn rule(peer: Peer) -> Rule {
    match peer {
        Peer::Off(k) => Rule::Offset(k),
        Peer::Abs(p) => Rule::Fixed(p),
        Peer::Any => Rule::AllOf(WORLD),
    }
}

/// Whether some member of `members` names, by `to`, a rank of `at` that names it back by
/// `back` (or any rank, for a receive from any source): a cheap test before the sets.
fn reaches(members: &RankSet, to: Peer, at: &RankSet, back: Peer) -> bool {
    match (to, back) {
        (Peer::Abs(d), _) => at.contains(d),
        (_, Peer::Abs(s)) => members.contains(s),
        _ => true,
    }
}

/// The job's classes as the queues' matching sees them.
pub(super) struct Job<'a> {
    pub(super) n: u32,
    /// Each class's ranks and queues (`None`: not followed).
    pub(super) classes: Vec<(&'a RankSet, Option<ClassQueues>)>,
    /// Index of each followed class in the matching.
    pub(super) matched: Vec<Option<usize>>,
    /// The class at each index of the matching (what `matched` maps back).
    by_match: Vec<usize>,
    pub(super) matching: Matching,
    /// Receives posted by threads in their calls: ranks, communicator, source, tag.
    pub(super) called: Vec<(&'a RankSet, usize, Peer, Option<i64>)>,
    /// The class of each rank (`u32::MAX`: none).
    by_rank: Vec<u32>,
    /// (matching index, message) of the messages waiting unexpected that each class's
    /// ranks may have sent.
    sent_by: ByClass,
}

impl<'a> Job<'a> {
    pub(super) fn new(
        n: u32,
        classes: Vec<(&'a RankSet, Option<ClassQueues>)>,
        matched: Vec<Option<usize>>,
        matching: Matching,
        called: Vec<(&'a RankSet, usize, Peer, Option<i64>)>,
    ) -> Job<'a> {
        let mut by_match = Vec::new();
        for (ci, mi) in matched.iter().enumerate() {
            if let Some(mi) = *mi {
                by_match.resize(by_match.len().max(mi + 1), 0);
                by_match[mi] = ci;
            }
        }
        let mut by_rank = vec![u32::MAX; n as usize];
        for (ci, (ranks, _)) in classes.iter().enumerate() {
            for r in ranks.iter().take_while(|&r| r < n) {
                by_rank[r as usize] = ci as u32;
            }
        }
        let size = classes.len();
        let mut sent_by = ByClass::new(size);
        let class_of = |p: u32| {
            let at = by_rank.get(p as usize).copied().unwrap_or(u32::MAX);
            (at != u32::MAX).then_some(at as usize)
        };
        for (ci, (_, q)) in classes.iter().enumerate() {
            let (Some(mi), Some(q)) = (matched[ci], q.as_ref()) else {
                continue;
            };
            for (j, u) in q.unexpected.iter().enumerate() {
                match u.peer {
                    Peer::Abs(p) => class_of(p)
                        .into_iter()
                        .for_each(|at| sent_by.add(Some(at), (mi, j))),
                    Peer::Off(_) => sent_by.add(None, (mi, j)),
                    // A message from any rank names no sender.
                    Peer::Any => {}
                }
            }
        }
        Job {
            n,
            classes,
            matched,
            by_match,
            matching,
            called,
            by_rank,
            sent_by,
        }
    }
}

impl Job<'_> {
    pub(super) fn queues(&self) -> impl Iterator<Item = (usize, &RankSet, &ClassQueues)> {
        self.classes
            .iter()
            .enumerate()
            .filter_map(|(ci, (ranks, q))| Some((self.matched[ci]?, *ranks, q.as_ref()?)))
    }

    /// The queues of the classes whose ranks a peer `to` of members can name: the one
    /// class of an absolute peer, every class otherwise.
    pub(super) fn queues_at(&self, to: Peer) -> Vec<(usize, &RankSet, &ClassQueues)> {
        match to {
            Peer::Abs(p) => {
                let at = self.by_rank.get(p as usize).copied().unwrap_or(u32::MAX);
                let Some((ranks, q)) = self.classes.get(at as usize) else {
                    return Vec::new();
                };
                match (self.matched[at as usize], q.as_ref()) {
                    (Some(mi), Some(q)) => vec![(mi, *ranks, q)],
                    _ => Vec::new(),
                }
            }
            _ => self.queues().collect(),
        }
    }

    /// Members of `members` (of class index `mi` in the matching) whose receive from
    /// `source` with `tag` on `comm` proceeds: a listed receive of theirs a message
    /// takes, or (the tag known) a message to them it takes.
    pub(super) fn receive_proceeds(
        &self,
        mi: Option<usize>,
        q: Option<&ClassQueues>,
        members: &RankSet,
        comm: usize,
        (source, tag, known): (Peer, Option<i64>, bool),
    ) -> RankSet {
        let n = self.n;
        let mut done = RankSet::new();
        let (Some(mi), Some(q)) = (mi, q) else {
            return done;
        };
        let m = &self.matching;
        // The first listed receive with the call's source and tag is the call's own.
        let mut left = members.clone();
        for (r, recv) in q.receives.iter().enumerate() {
            if recv.comm == comm && recv.tag == tag {
                let same = same_rank(recv.peer, source, &left, n);
                done.union_with(&same.intersection(&m.receive_taken[mi][r]));
                left = left.difference(&same);
            }
        }
        if !known {
            return done;
        }
        let takes = |t: Option<i64>| tag.is_none_or(|x| Some(x) == t);
        for (j, u) in q.unexpected.iter().enumerate() {
            if u.comm == comm && takes(u.tag) {
                let from = match source {
                    Peer::Any => members.clone(),
                    _ => same_rank(u.peer, source, members, n),
                };
                done.union_with(&from.difference(&m.unexpected_taken[mi][j]));
            }
        }
        for (qi, ranks, sq) in self.queues_at(source) {
            for (i, s) in sq.sends.iter().enumerate() {
                if s.comm != comm || !takes(s.tag) || !reaches(members, source, ranks, s.peer) {
                    continue;
                }
                let open = ranks
                    .difference(&m.send_paired[qi][i])
                    .difference(&m.send_taken[qi][i]);
                let to = match source {
                    Peer::Any => image(&open, s.peer, n).intersection(members),
                    _ => reaching(members, source, &open, s.peer, n),
                };
                done.union_with(&to);
            }
        }
        done
    }

    /// Members of `members` whose send to `dest` with `tag` on `comm` a receive at the
    /// destination takes (listed and not taken, or posted by a thread in its call).
    pub(super) fn send_taken(
        &self,
        members: &RankSet,
        comm: usize,
        (dest, tag): (Peer, i64),
    ) -> RankSet {
        let n = self.n;
        let mut done = RankSet::new();
        for (qi, ranks, q) in self.queues_at(dest) {
            for (r, recv) in q.receives.iter().enumerate() {
                if recv.comm == comm
                    && recv.tag.is_none_or(|t| t == tag)
                    && reaches(members, dest, ranks, recv.peer)
                {
                    let open = ranks.difference(&self.matching.receive_taken[qi][r]);
                    done.union_with(&reaching(members, dest, &open, recv.peer, n));
                }
            }
        }
        for &(ranks, c, source, t) in &self.called {
            if c == comm && t.is_none_or(|t| t == tag) {
                done.union_with(&reaching(members, dest, ranks, source, n));
            }
        }
        done
    }

    /// Members of `members` whose send to `dest` with `tag` is proven to wait: its
    /// message waits unexpected at the destination, not taken, and the send is
    /// synchronous, the library says its sender waits or the destination finalized (the
    /// members `to_finalized`). And those of them whose sender does not list that
    /// message (weak evidence: it holds nothing at the rank itself).
    pub(super) fn send_proven(
        &self,
        members: &RankSet,
        comm: usize,
        (dest, tag): (Peer, i64),
        synchronous: bool,
        to_finalized: &RankSet,
    ) -> (RankSet, RankSet) {
        let mut left = members.clone();
        let mut proven = RankSet::new();
        let mut weak = RankSet::new();
        for (qi, ranks, q) in self.queues_at(dest) {
            for (j, u) in q.unexpected.iter().enumerate() {
                if u.comm != comm || u.tag != Some(tag) || !reaches(&left, dest, ranks, u.peer) {
                    continue;
                }
                let open = ranks.difference(&self.matching.unexpected_taken[qi][j]);
                // The first such message at the destination is the one its sender sees.
                let hit = reaching(&left, dest, &open, u.peer, self.n);
                let waits = if synchronous || u.sender_waits {
                    hit.clone()
                } else {
                    hit.intersection(to_finalized)
                };
                let paired = &self.matching.unexpected_paired[qi][j];
                let listed = reaching(&waits, dest, paired, Peer::Any, self.n);
                weak.union_with(&waits.difference(&listed));
                proven.union_with(&waits);
                left = left.difference(&hit);
            }
        }
        (proven, weak)
    }

    /// For each request of a wait of class `mi`'s `members`: the rule of its
    /// operation's peer (`None`: not known), the members for which it is done (taken, or complete), and
    /// those for which its wait is proven (a send whose message waits unexpected at its
    /// destination, whose library says the sender waits).
    pub(super) fn request_sets(
        &self,
        mi: usize,
        q: &ClassQueues,
        members: &RankSet,
        items: &[Request],
        finalized: &RankSet,
    ) -> Vec<(Option<Rule>, RankSet, RankSet)> {
        let m = &self.matching;
        // Members whose operation's peer finalized: it waits for good.
        let gone = |peer: Peer| reaching(members, peer, finalized, Peer::Any, self.n);
        items
            .iter()
            .map(|item| match *item {
                Request::Done => (Some(Rule::Never), members.clone(), RankSet::new()),
                Request::Unknown => (None, RankSet::new(), RankSet::new()),
                Request::Receive(r) => {
                    let taken = members.intersection(&m.receive_taken[mi][r]);
                    let peer = q.receives[r].peer;
                    (
                        Some(rule(peer)),
                        taken.clone(),
                        gone(peer).difference(&taken),
                    )
                }
                Request::Send(i) => {
                    let taken = members.intersection(&m.send_taken[mi][i]);
                    let mut proven = gone(q.sends[i].peer);
                    for (_, _, ci, j, senders) in m.pairs.iter().filter(|p| (p.0, p.1) == (mi, i)) {
                        if self.classes_queues(*ci).unexpected[*j].sender_waits {
                            proven.union_with(senders);
                        }
                    }
                    (
                        Some(rule(q.sends[i].peer)),
                        taken.clone(),
                        proven.difference(&taken),
                    )
                }
            })
            .collect()
    }

    /// What the queues of class `ci`, a class of one rank, hold that the deadlock
    /// findings say (receives and sends nothing takes, queues not read).
    pub(super) fn rank_facts(&self, ci: usize) -> RankFacts {
        let mut facts = RankFacts::default();
        let (members, q) = (&self.classes[ci].0, self.classes[ci].1.as_ref());
        let (Some(mi), Some(q), Some(r)) = (self.matched[ci], q, members.first()) else {
            return facts;
        };
        let m = &self.matching;
        facts.unreadable = q.unreadable;
        facts.receives = q.unresolved.receives.len()
            + (0..q.receives.len())
                .filter(|&i| !m.receive_taken[mi][i].contains(r))
                .count();
        facts.sends = q.unresolved.sends.len()
            + (0..q.sends.len())
                .filter(|&i| !m.send_taken[mi][i].contains(r))
                .count();
        facts
    }

    /// The wait of send `i` of the class at index `mi` of the matching, as its first
    /// member has it: with its copy waiting unexpected at its destination, when paired.
    pub(super) fn message_wait(&self, mi: usize, i: usize) -> Wait {
        let send = &self.classes_queues(mi).sends[i].wait;
        match self.matching.pairs.iter().find(|p| (p.0, p.1) == (mi, i)) {
            Some(&(_, _, ci, j, _)) => {
                waits::paired(send, &self.classes_queues(ci).unexpected[j].wait)
            }
            None => send.clone(),
        }
    }

    /// The wait of unexpected message `j` of the class at index `mi` of the matching, as
    /// its first member has it: with its send, when its sender lists it.
    pub(super) fn unexpected_wait(&self, mi: usize, j: usize) -> Wait {
        let copy = &self.classes_queues(mi).unexpected[j].wait;
        match self.matching.pairs.iter().find(|p| (p.2, p.3) == (mi, j)) {
            Some(&(qi, i, ..)) => waits::paired(&self.classes_queues(qi).sends[i].wait, copy),
            None => copy.clone(),
        }
    }

    /// The waits of requests `items` of class `mi`'s first member (`None`: done, or not
    /// known).
    pub(super) fn request_waits(&self, mi: usize, items: &[Request]) -> Vec<Option<Wait>> {
        let q = self.classes_queues(mi);
        items
            .iter()
            .map(|item| match *item {
                Request::Done | Request::Unknown => None,
                Request::Receive(r) => Some(q.receives[r].wait.clone()),
                Request::Send(i) => Some(self.message_wait(mi, i)),
            })
            .collect()
    }

    /// The evidence of the receive rank `at` (of class `mi`) posted for its call from
    /// `source` with `tag` on `comm`: its first listed receive with them.
    pub(super) fn call_receive(
        &self,
        mi: Option<usize>,
        at: u32,
        comm: usize,
        (source, tag): (Peer, Option<i64>),
    ) -> Vec<mqd_model::Evidence> {
        let Some(mi) = mi else { return Vec::new() };
        let one = RankSet::single(at);
        self.classes_queues(mi)
            .receives
            .iter()
            .find(|recv| {
                recv.comm == comm
                    && recv.tag == tag
                    && !same_rank(recv.peer, source, &one, self.n).is_empty()
            })
            .map(|recv| recv.wait.evidence.clone())
            .unwrap_or_default()
    }

    /// The message rank `at` sent to `dest` with `tag` on `comm` that waits unexpected
    /// there, not taken: the first, as the destination lists it, with its send when its
    /// sender lists it.
    pub(super) fn seen_message(
        &self,
        at: u32,
        comm: usize,
        (dest, tag): (Peer, i64),
    ) -> Option<(Wait, bool)> {
        let d = dest.at(at, self.n)?;
        let (mi, _, q) = self.queues_at(Peer::Abs(d)).into_iter().next()?;
        let j = q.unexpected.iter().enumerate().position(|(j, u)| {
            u.comm == comm
                && u.tag == Some(tag)
                && u.peer.at(d, self.n) == Some(at)
                && !self.matching.unexpected_taken[mi][j].contains(d)
        })?;
        let copy = &q.unexpected[j].wait;
        let pair = self
            .matching
            .pairs
            .iter()
            .find(|p| (p.2, p.3) == (mi, j) && p.4.contains(at));
        Some(match pair {
            Some(&(si, i, ..)) => (
                waits::paired(&self.classes_queues(si).sends[i].wait, copy),
                true,
            ),
            None => (copy.clone(), false),
        })
    }

    /// The waits of the members of class `ci` without stacks, by piece: each pending
    /// operation of theirs no receive takes, each message of theirs waiting unexpected
    /// that none takes (unless its sender went on), each posted receive that takes none.
    pub(super) fn queue_rules(
        &self,
        ci: usize,
        sets: &mut Vec<RankSet>,
    ) -> Vec<(RankSet, ClassAlternative, Vec<Wait>)> {
        let n = self.n;
        let (members, q) = (&self.classes[ci].0, self.classes[ci].1.as_ref());
        let (Some(mi), Some(q)) = (self.matched[ci], q) else {
            return vec![((*members).clone(), ClassAlternative::default(), Vec::new())];
        };
        let m = &self.matching;
        // The waits themselves, for a class of one.
        let one = members.len() == 1;
        let label = |make: &dyn Fn() -> Wait| one.then(make);
        // (members, rule, whether it rests on weak evidence only, the wait)
        let mut conditions: Vec<(RankSet, Rule, bool, Option<Wait>)> = Vec::new();
        for (i, s) in q.sends.iter().enumerate() {
            conditions.push((
                members.difference(&m.send_taken[mi][i]),
                rule(s.peer),
                false,
                label(&|| self.message_wait(mi, i)),
            ));
        }
        for (r, recv) in q.receives.iter().enumerate() {
            let open = members.difference(&m.receive_taken[mi][r]);
            conditions.push((open, rule(recv.peer), false, label(&|| recv.wait.clone())));
        }
        if !q.lists_every_send {
            for (di, j) in self.sent_by.of(ci) {
                let ranks = self.classes[self.by_match[di]].0;
                let u = &self.classes_queues(di).unexpected[j];
                {
                    if u.sender_free {
                        continue;
                    }
                    let open = ranks
                        .difference(&m.unexpected_taken[di][j])
                        .difference(&m.unexpected_paired[di][j]);
                    let senders = image(&open, u.peer, n).intersection(members);
                    if senders.is_empty() {
                        continue;
                    }
                    // A message waiting at its own sender holds nothing (weak).
                    let held = match u.peer {
                        Peer::Off(k) if k % n == 0 => Rule::Never,
                        Peer::Off(k) => Rule::Offset(n - k % n),
                        Peer::Abs(p) => {
                            let to = open.difference(&RankSet::single(p));
                            match (to.first(), to.len()) {
                                (None, _) => Rule::Never,
                                (Some(t), 1) => Rule::Fixed(t),
                                _ => {
                                    sets.push(to);
                                    Rule::AnyIn(sets.len() - 1)
                                }
                            }
                        }
                        Peer::Any => Rule::Never,
                    };
                    conditions.push((senders, held, true, label(&|| u.wait.clone())));
                }
            }
        }
        let by: Vec<RankSet> = conditions.iter().map(|(s, ..)| s.clone()).collect();
        refine(vec![(*members).clone()], &by)
            .into_iter()
            .map(|piece| {
                let at = piece.first().unwrap_or(0);
                let here = || conditions.iter().filter(|(s, ..)| s.contains(at));
                let mut rules: Vec<Rule> = here().map(|c| c.1).collect();
                rules.sort_unstable();
                rules.dedup();
                let strong: Vec<Rule> = here().filter(|c| !c.2).map(|c| c.1).collect();
                let mut weak: Vec<Rule> = here()
                    .filter(|c| c.2 && !strong.contains(&c.1))
                    .map(|c| c.1)
                    .collect();
                let mut waits: Vec<Wait> = here().filter_map(|c| c.3.clone()).collect();
                if one {
                    // Receives and sends with peers nobody can name: they hold nothing.
                    let u = &q.unresolved;
                    waits.extend(u.receives.iter().chain(&u.sends).cloned());
                }
                weak.sort_unstable();
                weak.dedup();
                let alternative = ClassAlternative {
                    rules,
                    unknown: false,
                    weak,
                };
                (piece, alternative, waits)
            })
            .collect()
    }

    /// Ranks a queue of which could not be read.
    pub(super) fn unreadable(&self) -> RankSet {
        self.ranks_where(|q| q.unreadable)
    }

    /// Ranks with an operation whose peer nobody can name.
    pub(super) fn unresolved(&self) -> RankSet {
        self.ranks_where(|q| q.unresolved.any())
    }

    fn ranks_where(&self, has: impl Fn(&ClassQueues) -> bool) -> RankSet {
        let mut out = RankSet::new();
        for (_, ranks, _) in self.queues().filter(|(_, _, q)| has(q)) {
            out.union_with(ranks);
        }
        out
    }

    pub(super) fn queue_facts(&self) -> QueueFacts {
        let n = self.n;
        let m = &self.matching;
        let mut f = QueueFacts {
            unreadable: self.unreadable(),
            unresolved: self.unresolved(),
            ..QueueFacts::default()
        };
        // A receive or send with a peer nobody can name waits.
        f.waiting
            .union_with(&self.ranks_where(|q| q.unresolved.waits()));
        // Ranks that list every send they have pending, as one set.
        let mut every_send = RankSet::new();
        self.classes
            .iter()
            .filter(|(_, q)| q.as_ref().is_some_and(|q| q.lists_every_send))
            .for_each(|(r, _)| every_send.union_with(r));
        // A wait of `from` for `peer(from)`, not counting a rank waiting for itself.
        let waits_for = |from: &RankSet, peer: Peer, f: &mut QueueFacts| {
            if from.is_empty() {
                return;
            }
            f.waiting.union_with(from);
            match peer {
                Peer::Any => f.any_waiting.union_with(from),
                Peer::Off(k) if k % n == 0 => {}
                Peer::Off(_) => f.waited.union_with(&image(from, peer, n)),
                Peer::Abs(p) if !from.difference(&RankSet::single(p)).is_empty() => {
                    f.waited.insert(p);
                }
                Peer::Abs(_) => {}
            }
        };
        for (mi, ranks, q) in self.queues() {
            if q.transit {
                f.in_transit.union_with(ranks);
                f.transit.union_with(ranks);
            }
            for (i, s) in q.sends.iter().enumerate() {
                waits_for(&ranks.difference(&m.send_taken[mi][i]), s.peer, &mut f);
                f.transit.union_with(&m.send_taken[mi][i]);
            }
            for (r, recv) in q.receives.iter().enumerate() {
                let taken = &m.receive_taken[mi][r];
                f.in_transit.union_with(taken);
                f.transit.union_with(taken);
                waits_for(&ranks.difference(taken), recv.peer, &mut f);
            }
            for (j, u) in q.unexpected.iter().enumerate() {
                // A message taken: its sender's transit too.
                f.transit
                    .union_with(&image(&m.unexpected_taken[mi][j], u.peer, n));
                if u.sender_free {
                    continue;
                }
                // An unpaired message nobody takes: its sender waits for its destination.
                let open = ranks
                    .difference(&m.unexpected_taken[mi][j])
                    .difference(&m.unexpected_paired[mi][j]);
                let senders = image(&open, u.peer, n).difference(&every_send);
                if senders.is_empty() {
                    continue;
                }
                // The destinations of the senders that wait.
                let back = match u.peer {
                    Peer::Off(k) => Peer::Off((n - k % n) % n),
                    _ => Peer::Any,
                };
                let at = match u.peer {
                    Peer::Off(_) => image(&senders, back, n),
                    _ => open.clone(),
                };
                f.waiting.union_with(&senders);
                let to_others = match u.peer {
                    Peer::Off(k) if k % n == 0 => RankSet::new(),
                    Peer::Abs(p) => at.difference(&RankSet::single(p)),
                    _ => at,
                };
                f.waited.union_with(&to_others);
            }
        }
        f.mismatched = self.mismatches();
        f
    }

    /// Ranks with a receive nobody's message takes that a message waiting for it would
    /// match but for its tag, its source or its communicator, by kind: examined as a
    /// reader of one rank's queues would, the messages to the rank in its order (waiting unexpected,
    /// then sends by their senders' ranks), the first four that mismatch. Worked out for
    /// the first member of each piece of the class to which the same messages come.
    /// In the scan's order: by receive, then by message.
    pub(super) fn mismatches(&self) -> Vec<Mismatch> {
        const PER_RECEIVE: usize = 4;
        // Most mismatches (pieces of classes) reported in all.
        const TOTAL: usize = 256;
        let n = self.n;
        let m = &self.matching;
        let mut out: Vec<Mismatch> = Vec::new();
        for (ci, c_ranks, c) in self.queues() {
            for (r, recv) in c.receives.iter().enumerate() {
                if out.len() >= TOTAL {
                    return out;
                }
                let open = c_ranks.difference(&m.receive_taken[ci][r]);
                if open.is_empty() {
                    continue;
                }
                let mut by: Vec<RankSet> = Vec::new();
                for (j, u) in c.unexpected.iter().enumerate() {
                    by.push(m.unexpected_taken[ci][j].clone());
                    by.extend(recv.peer.meets(u.peer, n));
                }
                let mut sends: Vec<(usize, usize, RankSet)> = Vec::new();
                for (qi, i) in m.sends_to.of(ci) {
                    let q_ranks = self.classes[self.by_match[qi]].0;
                    let s = &self.classes_queues(qi).sends[i];
                    {
                        let senders = q_ranks
                            .difference(&m.send_paired[qi][i])
                            .difference(&m.send_taken[qi][i]);
                        let reach = image(&senders, s.peer, n).intersection(&open);
                        if reach.is_empty() {
                            continue;
                        }
                        by.push(reach);
                        if let Peer::Off(k) = s.peer {
                            by.push(RankSet::full(k.min(n)));
                            by.extend(recv.peer.meets(Peer::Off((n - k % n) % n), n));
                        }
                        sends.push((qi, i, senders));
                    }
                }
                for piece in refine(vec![open], &by) {
                    let Some(d) = piece.first() else { continue };
                    let source = recv.peer.at(d, n);
                    // (sender, tag, communicator, message), in the scan's order.
                    let mut candidates: Vec<(u32, Option<i64>, usize, Taken)> = c
                        .unexpected
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| !m.unexpected_taken[ci][*j].contains(d))
                        .filter_map(|(j, u)| {
                            Some((u.peer.at(d, n)?, u.tag, u.comm, Taken::Unexpected(j)))
                        })
                        .collect();
                    let mut coming: Vec<(u32, usize, usize, Option<i64>, usize)> = Vec::new();
                    for &(qi, i, ref senders) in &sends {
                        let s = &self.classes_queues(qi).sends[i];
                        match s.peer {
                            Peer::Off(k) => {
                                let from = ((u64::from(d) + u64::from(n) - u64::from(k % n))
                                    % u64::from(n))
                                    as u32;
                                if senders.contains(from) {
                                    coming.push((from, i, qi, s.tag, s.comm));
                                }
                            }
                            Peer::Abs(to) if to == d => {
                                // Only the source can read otherwise than the rest: the
                                // first five and it decide the first four mismatches.
                                let own = source.filter(|&x| senders.contains(x));
                                for from in senders.iter().take(PER_RECEIVE + 1).chain(own) {
                                    coming.push((from, i, qi, s.tag, s.comm));
                                }
                            }
                            _ => {}
                        }
                    }
                    coming.sort_unstable();
                    coming.dedup();
                    candidates.extend(coming.into_iter().map(|(from, send, class, tag, comm)| {
                        (from, tag, comm, Taken::Send { class, send, from })
                    }));
                    let takes = |tag: Option<i64>| recv.tag.is_none_or(|t| Some(t) == tag);
                    let mut found = 0;
                    for (from, tag, comm, message) in candidates {
                        if found >= PER_RECEIVE {
                            break;
                        }
                        let source_ok = source.is_none_or(|s| s == from);
                        let kind = if comm == recv.comm {
                            match (source_ok, takes(tag)) {
                                (true, false) => FindingKind::TagMismatch,
                                (false, true) => FindingKind::SourceMismatch,
                                _ => continue,
                            }
                        } else if source_ok
                            && takes(tag)
                            && (source.is_some() || recv.tag.is_some())
                        {
                            FindingKind::CommunicatorMismatch
                        } else {
                            continue;
                        };
                        found += 1;
                        out.push(Mismatch {
                            kind,
                            members: piece.clone(),
                            class: ci,
                            receive: r,
                            message,
                        });
                    }
                }
            }
        }
        out
    }

    /// The ranks of the class at index `mi` of the matching.
    pub(super) fn class_ranks(&self, mi: usize) -> &RankSet {
        self.classes[self.by_match[mi]].0
    }

    /// The queues of the class at index `mi` of the matching.
    pub(super) fn classes_queues(&self, mi: usize) -> &ClassQueues {
        self.classes[self.by_match[mi]]
            .1
            .as_ref()
            .expect("a class of the matching has queues")
    }
}

/// A posted receive of a class nobody's message takes that a message to its members
/// would match but for one thing.
#[derive(Debug, Clone)]
pub(super) struct Mismatch {
    /// The thing: the tag, the source or the communicator.
    pub(super) kind: FindingKind,
    /// The members at which it does.
    pub(super) members: RankSet,
    /// The receive's class (its index in the matching), and the receive.
    pub(super) class: usize,
    pub(super) receive: usize,
    /// The message, as the first of those members has it.
    pub(super) message: Taken,
}

/// The queues' waits and facts, by rank set.
#[derive(Default)]
pub(super) struct QueueFacts {
    /// Ranks a wait of the queues starts at.
    pub(super) waiting: RankSet,
    /// Ranks with a receive from any source nobody's message takes.
    pub(super) any_waiting: RankSet,
    /// Ranks a wait names (a rank waiting for itself not counted), any source apart.
    pub(super) waited: RankSet,
    /// Ranks with an operation in transit (matched, or a message a receive takes).
    pub(super) in_transit: RankSet,
    /// Ranks with something in transit, its senders' too.
    pub(super) transit: RankSet,
    /// Receives that match a message but for one thing.
    pub(super) mismatched: Vec<Mismatch>,
    /// Ranks a queue of which could not be read.
    pub(super) unreadable: RankSet,
    /// Ranks with an operation whose peer nobody can name.
    pub(super) unresolved: RankSet,
}
