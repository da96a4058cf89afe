//! Deadlocks by rank-set arithmetic: ranks whose plans read the same once every target is
//! written as the rank's `k`-th right neighbour (around the job) or as one fixed rank are
//! one class, and the greatest deadlocked set is computed class by class on rank sets. A
//! ring of a million ranks each waiting for its right neighbour is one class and one
//! rotation of a bitset per round, not a million nodes.
//!
//! The set is the greatest fixed point of a monotone operator (a rank stays while each of
//! its alternatives is held by a wait into the set), so iterating it on classes from the
//! whole set down reaches exactly the set the per-rank worklist reaches. A chain of ranks
//! each waiting for the next, the last one free, shrinks by one rank per round; past
//! [`MAX_ROUNDS`] the caller is told, not given a guess.

use mqd_model::RankSet;
use std::collections::HashMap;

/// Most rounds of the class iteration before it gives up (each round costs one pass over
/// the classes' rules on bitsets of the job).
pub const MAX_ROUNDS: usize = 512;

/// What holds a rank in one wait, the same for every rank of its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// Nothing deadlocked can hold it (an unknown peer, a message to itself).
    Never,
    /// Its `k`-th right neighbour in the ring of the job's ranks.
    Offset(u32),
    /// This rank.
    Fixed(u32),
    /// Every rank of the set at this index is in the set (any-source receives).
    AllOf(usize),
    /// Every rank of the set at this index but the rank itself is in the set (a loop
    /// polling for what any other rank might give). Held exactly when `AllOf` is (the
    /// rank is in the set); its edges leave the rank out.
    AllOthers(usize),
    /// A rank of the set at this index is in the set (a collective's members outside
    /// it: any one of them holds it).
    AnyIn(usize),
    /// The rank's `k`-th right neighbour is in the set for every `k` of the set at this
    /// index (a wait for any one of requests to neighbours: held while all of them are).
    AllAround(usize),
}

/// One thread that could move a rank: held when one of its rules is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassAlternative {
    /// What holds it: any one of these.
    pub rules: Vec<Rule>,
    /// It may need something unknown (held whatever the set).
    pub unknown: bool,
    /// Those of its rules that rest on weak evidence only (a message seen waiting
    /// unexpected, its send not listed): they hold, but say less of why.
    pub weak: Vec<Rule>,
}

/// Ranks with the same plan, written relative to each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassPlan {
    /// Its ranks.
    pub ranks: RankSet,
    /// They never act again (finalized, or held by their own threads).
    pub sink: bool,
    /// They go on if any of these does.
    pub alternatives: Vec<ClassAlternative>,
}

/// The classes of a plan.
#[derive(Debug, Clone, Default)]
pub struct Classes {
    /// The ring the offsets go around: one more than the highest rank named.
    pub n: u32,
    /// Sets the `AllOf` rules name.
    pub sets: Vec<RankSet>,
    /// The classes, each with its plan.
    pub classes: Vec<ClassPlan>,
}

/// Which ranks of the job a rule holds, given the deadlocked set.
enum Held {
    All,
    Nothing,
    These(RankSet),
}

impl Classes {
    fn held(&self, rule: Rule, d: &RankSet) -> Held {
        match rule {
            Rule::Never => Held::Nothing,
            Rule::Offset(k) => Held::These(d.rotated(k, self.n)),
            Rule::Fixed(t) if d.contains(t) => Held::All,
            Rule::Fixed(_) => Held::Nothing,
            Rule::AllOf(i) | Rule::AllOthers(i) if self.sets[i].is_subset(d) => Held::All,
            Rule::AllOf(_) | Rule::AllOthers(_) => Held::Nothing,
            Rule::AnyIn(i) if self.sets[i].intersects(d) => Held::All,
            Rule::AnyIn(_) => Held::Nothing,
            Rule::AllAround(i) => {
                let mut held = self.sets[i].iter().map(|k| d.rotated(k, self.n));
                match held.next() {
                    Some(first) => Held::These(held.fold(first, |a, b| a.intersection(&b))),
                    None => Held::All,
                }
            }
        }
    }

    /// The ranks of `class` that stay deadlocked if `d` is.
    fn stuck(&self, class: &ClassPlan, d: &RankSet) -> RankSet {
        let mut stay = class.ranks.intersection(d);
        if class.sink || stay.is_empty() {
            return stay;
        }
        if class.alternatives.is_empty() {
            return RankSet::new();
        }
        for a in class.alternatives.iter().filter(|a| !a.unknown) {
            let mut held = RankSet::new();
            for &rule in &a.rules {
                match self.held(rule, d) {
                    Held::All => {
                        held = stay.clone();
                        break;
                    }
                    Held::Nothing => {}
                    Held::These(set) => held.union_with(&set),
                }
            }
            stay = stay.intersection(&held);
            if stay.is_empty() {
                break;
            }
        }
        stay
    }

    /// The ranks of `class`, when its one way on is its `k`-th right neighbour, whose
    /// path along the class leads out of `d`: none of them is held, however long the
    /// chain. By pointer jumping (paths of 1, 2, 4... steps): log n rank-set steps, not
    /// a round per rank. `None` for other classes.
    fn chain_out(&self, class: &ClassPlan, d: &RankSet) -> Option<RankSet> {
        let mut known = class.alternatives.iter().filter(|a| !a.unknown);
        let (Some(a), None, false) = (known.next(), known.next(), class.sink) else {
            return None;
        };
        let [Rule::Offset(k)] = a.rules[..] else {
            return None;
        };
        let n = u64::from(self.n);
        // Ranks whose next `m` steps stay in the class and in `d`, and ranks that leave
        // `d` within `m` steps along the class.
        let mut stay = class.ranks.intersection(d);
        let mut out = stay.difference(&d.rotated(k, self.n));
        let mut m: u64 = 1;
        while m < n && !stay.is_empty() {
            let jump = (m * u64::from(k) % n) as u32;
            out.union_with(&stay.intersection(&out.rotated(jump, self.n)));
            stay = stay.intersection(&stay.rotated(jump, self.n));
            m *= 2;
        }
        Some(out)
    }

    /// [`Classes::deadlocked`] rank by rank, for plans whose classes do not settle: a
    /// worklist of the ranks a removal affects (ranks held by a set rechecked after each
    /// pass). `None` past `limit` ranks.
    pub fn deadlocked_by_ranks(&self, limit: usize) -> Option<RankSet> {
        let mut d = RankSet::new();
        for c in &self.classes {
            d.union_with(&c.ranks);
        }
        if d.len() > limit {
            return None;
        }
        let n = u64::from(self.n.max(1));
        let at = |r: u32, k: u32| ((u64::from(r) + u64::from(k)) % n) as u32;
        let mut dependents: HashMap<u32, Vec<(u32, usize)>> = HashMap::new();
        let mut by_sets: Vec<(u32, usize)> = Vec::new();
        for (ci, c) in self.classes.iter().enumerate() {
            for r in &c.ranks {
                let rules = c.alternatives.iter().flat_map(|a| &a.rules);
                let by_set =
                    |r: &Rule| matches!(r, Rule::AllOf(_) | Rule::AllOthers(_) | Rule::AnyIn(_));
                if rules.clone().any(by_set) {
                    by_sets.push((r, ci));
                }
                for &rule in rules {
                    let targets = match rule {
                        Rule::Offset(k) => vec![at(r, k)],
                        Rule::Fixed(t) => vec![t],
                        Rule::AllAround(i) => self.sets[i].iter().map(|k| at(r, k)).collect(),
                        _ => continue,
                    };
                    for target in targets {
                        dependents.entry(target).or_default().push((r, ci));
                    }
                }
            }
        }
        let holds = |r: u32, rule: Rule, d: &RankSet| match rule {
            Rule::Never => false,
            Rule::Offset(k) => d.contains(at(r, k)),
            Rule::Fixed(t) => d.contains(t),
            Rule::AllOf(i) | Rule::AllOthers(i) => self.sets[i].is_subset(d),
            Rule::AnyIn(i) => self.sets[i].intersects(d),
            Rule::AllAround(i) => self.sets[i].iter().all(|k| d.contains(at(r, k))),
        };
        let stuck = |r: u32, c: &ClassPlan, d: &RankSet| {
            c.sink
                || (!c.alternatives.is_empty()
                    && c.alternatives
                        .iter()
                        .all(|a| a.unknown || a.rules.iter().any(|&rule| holds(r, rule, d))))
        };
        let mut work: Vec<(u32, usize)> = Vec::new();
        for (ci, c) in self.classes.iter().enumerate() {
            work.extend(c.ranks.iter().map(|r| (r, ci)));
        }
        loop {
            let mut removed = false;
            while let Some((r, ci)) = work.pop() {
                if d.contains(r) && !stuck(r, &self.classes[ci], &d) {
                    d.remove(r);
                    removed = true;
                    work.extend(dependents.get(&r).into_iter().flatten().copied());
                }
            }
            if !removed {
                return Some(d);
            }
            work.extend(by_sets.iter().copied());
        }
    }

    /// The greatest set of ranks each of which is held by ranks of the set; `None` when
    /// it has not settled within [`MAX_ROUNDS`] rounds.
    pub fn deadlocked(&self) -> Option<RankSet> {
        let mut d = RankSet::new();
        for c in &self.classes {
            d.union_with(&c.ranks);
        }
        for _ in 0..MAX_ROUNDS {
            // A chain within a class goes at once (each of its ranks leads out of `d`,
            // so none is in any set held by itself: the greatest one is unchanged).
            for c in &self.classes {
                if let Some(out) = self.chain_out(c, &d).filter(|o| !o.is_empty()) {
                    d = d.difference(&out);
                }
            }
            let mut next = RankSet::new();
            for c in &self.classes {
                next.union_with(&self.stuck(c, &d));
            }
            if next == d {
                return Some(d);
            }
            d = next;
        }
        None
    }
}
