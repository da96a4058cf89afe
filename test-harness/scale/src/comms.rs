//! Communicators as a class's members hold them. Every member of a class holds its
//! communicators alike: the same members in each (`MPI_COMM_WORLD`, a fixed group), or
//! members that move with the member's rank (a split's rows of four: rank `r`'s row
//! begins at `r - r % 4`, the same distance from `r` in every member of a class of one
//! column). Such communicators get one index for all their instances, keyed by their
//! identity and their shape (members less the first), not their members.
//!
//! One index for all rows is sound because a process's communicators have distinct
//! context ids: a message from a rank to a member of its row on the row's context id is
//! on the row both hold. What must hold for that is checked over the whole job
//! ([`CommIndex::overlapping`]): the instances of one context id and shape never share
//! a member unless they are the same. Communicators known only by name and size are
//! keyed by them.

use mqd_model::{CommGroup, CommKey, RankSet};

/// Where a class's members' instances of a communicator begin (their first member's
/// COMM_WORLD rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// At this rank, in every member.
    At(i32),
    /// At each member's own rank plus this.
    From(i64),
}

/// A communicator's key with its members replaced by its shape ([`CommKey::shaped`]),
/// where its group is known.
pub(super) fn shape_key(key: CommKey, group: Option<&CommGroup>) -> CommKey {
    match group {
        Some(g) => key.shaped(g),
        None => key,
    }
}

/// Where a class's instances of one communicator begin, from its first member's group
/// (the member's rank `r0`) and its last one's: `None` when they begin neither at one
/// rank nor at one distance from the member.
pub(super) fn start_of(first: (&CommGroup, i32), last: Option<(&CommGroup, i32)>) -> Option<Start> {
    let g0 = first.0.get(0)?;
    let Some((lg, r1)) = last else {
        return Some(Start::At(g0));
    };
    let g1 = lg.get(0)?;
    if g1 == g0 {
        Some(Start::At(g0))
    } else {
        let d = i64::from(g0) - i64::from(first.1);
        (i64::from(g1) - i64::from(r1) == d).then_some(Start::From(d))
    }
}

/// The first members (COMM_WORLD ranks) of the instances a class's `members` hold.
fn starts(start: Start, members: &RankSet) -> RankSet {
    match start {
        Start::At(g) => u32::try_from(g).map_or_else(|_| RankSet::new(), RankSet::single),
        Start::From(d) if d >= 0 => members.shifted_up(d as u32),
        Start::From(d) => members.shifted_down(d.unsigned_abs() as u32),
    }
}

/// One index per communicator of the job's classes, with the instances each holds.
#[derive(Debug, Default)]
pub(super) struct CommIndex {
    keys: Vec<CommKey>,
    /// Per index: one instance's members, where its key has a context id.
    groups: Vec<Option<CommGroup>>,
    /// Per index: the first members of every instance held.
    starts: Vec<RankSet>,
    /// Per index: the classes that hold it.
    holders: Vec<Vec<usize>>,
}

impl CommIndex {
    /// The index of `key`, registered when new; `class` (its `members`) holds the
    /// instances of `group` that begin at `start`.
    pub(super) fn index(
        &mut self,
        key: CommKey,
        held: Option<(&CommGroup, Start)>,
        (class, members): (usize, &RankSet),
    ) -> usize {
        let i = match self.keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.groups.push(None);
                self.starts.push(RankSet::new());
                self.holders.push(Vec::new());
                self.keys.push(key);
                self.keys.len() - 1
            }
        };
        if !self.holders[i].contains(&class) {
            self.holders[i].push(class);
        }
        if let Some((group, start)) = held.filter(|_| self.keys[i].context.is_some()) {
            self.groups[i].get_or_insert_with(|| group.clone());
            self.starts[i].union_with(&starts(start, members));
        }
        i
    }

    /// The classes holding a communicator whose instances of one key share a member
    /// without being the same: the dump is not what MPI makes (or a start could not be
    /// checked), and one index for them would match messages across them.
    pub(super) fn overlapping(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, starts) in self.starts.iter().enumerate() {
            let Some(group) = &self.groups[i] else {
                continue;
            };
            if starts.len() > 1 && !disjoint(group, starts) {
                out.extend(self.holders[i].iter().copied());
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Most pairs of instances [`disjoint`] looks at before it gives up.
const MAX_PAIRS: usize = 1 << 20;

/// Whether the instances of `group`'s shape that begin at `starts` are pairwise
/// disjoint: two beginning `d` apart share a member when `d` is a distance between
/// two members.
fn disjoint(group: &CommGroup, starts: &RankSet) -> bool {
    let members = RankSet::from_i32s(group.iter());
    if members.len() != group.len() {
        // A rank twice in one group: not what MPI makes.
        return false;
    }
    let (Some(lo), Some(hi)) = (members.first(), members.last()) else {
        return true;
    };
    let span = hi - lo;
    let mut tried: Vec<u32> = Vec::new();
    let mut pairs = 0;
    let all: Vec<u32> = starts.iter().collect();
    for (x, &a) in all.iter().enumerate() {
        for &b in all[x + 1..].iter().take_while(|&&b| b - a <= span) {
            pairs += 1;
            if pairs > MAX_PAIRS {
                return false;
            }
            let d = b - a;
            if tried.contains(&d) {
                continue;
            }
            if members.intersects(&members.shifted_up(d)) {
                return false;
            }
            tried.push(d);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(r: i32) -> CommGroup {
        let b = r - r % 4;
        (b..b + 4).collect()
    }

    #[test]
    fn a_splits_rows_are_one_communicator_that_moves_with_the_rank() {
        let key = |g: &CommGroup| {
            let mut k = CommKey::of_members(7, &g.to_vec());
            k.name = "row".into();
            shape_key(k, Some(g))
        };
        assert_eq!(key(&row(1)), key(&row(9)));
        // The first column's ranks 0, 4, .., 28: each row begins at its own rank.
        assert_eq!(
            start_of((&row(0), 0), Some((&row(28), 28))),
            Some(Start::From(0))
        );
        assert_eq!(
            start_of((&row(1), 1), Some((&row(29), 29))),
            Some(Start::From(-1))
        );
        // Ranks of two columns hold their rows otherwise.
        assert_eq!(start_of((&row(0), 0), Some((&row(5), 5))), None);
        // One row for all.
        assert_eq!(
            start_of((&row(0), 0), Some((&row(3), 3))),
            Some(Start::At(0))
        );
        let mut index = CommIndex::default();
        let column = |c: u32| RankSet::from_i32s((0..8).map(|r| (4 * r + c) as i32));
        for c in 0..4u32 {
            let i = index.index(
                key(&row(c as i32)),
                Some((&row(c as i32), Start::From(-i64::from(c)))),
                (c as usize, &column(c)),
            );
            assert_eq!(i, 0);
        }
        assert!(index.overlapping().is_empty());
        // A class whose rows would begin one rank later overlaps the others.
        index.index(
            key(&row(0)),
            Some((&row(0), Start::From(1))),
            (4, &RankSet::single(0)),
        );
        assert_eq!(index.overlapping(), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn interleaved_groups_do_not_overlap() {
        // The ranks of each parity among 10: instances beginning at 0 and 1.
        let evens: CommGroup = (0..10).step_by(2).collect();
        assert!(disjoint(&evens, &RankSet::from_i32s([0, 1])));
        assert!(!disjoint(&evens, &RankSet::from_i32s([0, 2])));
    }
}
