//! A communicator's group: the COMM_WORLD rank of each of its local ranks.
//!
//! Most groups of a large job are progressions (`COMM_WORLD` is `0, 1, ..., n-1`; a row
//! of a 2-D split is `r, r+1, ...`, a column `c, c+w, ...`), held as three numbers
//! whatever the job's size. Others are a table shared by every rank that holds it (see
//! [`GroupTable`](crate::GroupTable)), never a copy per rank.
//!
//! ```
//! use mqd_model::CommGroup;
//!
//! let world = CommGroup::from(vec![0, 1, 2, 3]);
//! assert_eq!(world.progression(), Some((0, 1, 4)));
//! assert_eq!(world.position(2), Some(2));
//! let odd = CommGroup::from(vec![3, 1]);
//! assert_eq!(odd.get(0), Some(3));
//! assert_eq!(odd.to_vec(), [3, 1]);
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The COMM_WORLD ranks of a communicator's local ranks, in local-rank order.
///
/// Equality, order and hashing depend only on the members, however they are held.
#[derive(Clone)]
pub struct CommGroup(Repr);

#[derive(Clone)]
enum Repr {
    /// `first + i * step` for `i` in `0..len` (`len >= 2`, every member an `i32`).
    Progression {
        first: i32,
        step: i32,
        len: u32,
    },
    Table(Arc<[i32]>),
}

impl CommGroup {
    /// The group `first, first + step, ...` of `len` members; `None` when a member
    /// would not be an `i32` (or `len` is not a `u32`).
    pub fn progression_of(first: i64, step: i64, len: i64) -> Option<CommGroup> {
        let len = u32::try_from(len).ok()?;
        let last = first.checked_add(step.checked_mul(i64::from(len.max(1)) - 1)?)?;
        let (first, step) = (i32::try_from(first).ok()?, i32::try_from(step).ok()?);
        i32::try_from(last).ok()?;
        Some(match len {
            0 | 1 => CommGroup(Repr::Table((0..len).map(|_| first).collect())),
            _ => CommGroup(Repr::Progression { first, step, len }),
        })
    }

    /// Its number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Progression { len, .. } => *len as usize,
            Repr::Table(t) => t.len(),
        }
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The COMM_WORLD rank of local rank `i`.
    pub fn get(&self, i: usize) -> Option<i32> {
        match &self.0 {
            Repr::Progression { first, step, len } => {
                (i < *len as usize).then(|| first + step * i as i32)
            }
            Repr::Table(t) => t.get(i).copied(),
        }
    }

    /// The local rank of COMM_WORLD rank `rank` (its first, should a table repeat it).
    pub fn position(&self, rank: i32) -> Option<usize> {
        match &self.0 {
            &Repr::Progression { first, step, len } => {
                let d = i64::from(rank) - i64::from(first);
                let step = i64::from(step);
                let i = if step == 0 {
                    (d == 0).then_some(0)?
                } else {
                    (d % step == 0).then_some(d / step)?
                };
                (0..i64::from(len)).contains(&i).then_some(i as usize)
            }
            Repr::Table(t) => t.iter().position(|&r| r == rank),
        }
    }

    /// Its members in local-rank order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = i32> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Its members, copied.
    pub fn to_vec(&self) -> Vec<i32> {
        self.iter().collect()
    }

    /// `(first, step, len)` when it is a progression of at least two members.
    pub fn progression(&self) -> Option<(i32, i32, u32)> {
        match &self.0 {
            &Repr::Progression { first, step, len } => Some((first, step, len)),
            Repr::Table(_) => None,
        }
    }

    /// Whether its members are ranks `0..n` in order.
    pub fn is_in_order(&self, n: u32) -> bool {
        match &self.0 {
            &Repr::Progression { first, step, len } => (first, step, len) == (0, 1, n),
            Repr::Table(t) => {
                t.len() == n as usize && t.iter().enumerate().all(|(i, &r)| r as usize == i)
            }
        }
    }

    /// The shared table it is held as, when it is not a progression.
    pub fn table(&self) -> Option<&Arc<[i32]>> {
        match &self.0 {
            Repr::Table(t) => Some(t),
            Repr::Progression { .. } => None,
        }
    }

    /// A group held as the given shared table (no progression is looked for).
    pub fn of_table(table: Arc<[i32]>) -> CommGroup {
        CommGroup(Repr::Table(table))
    }
}

/// Whether `ranks` is a progression of two or more members, as `(first, step)`.
fn as_progression(ranks: &[i32]) -> Option<(i32, i32)> {
    let [a, b, ..] = *ranks else { return None };
    let step = b.checked_sub(a)?;
    ranks
        .windows(2)
        .all(|w| w[1].checked_sub(w[0]) == Some(step))
        .then_some((a, step))
}

impl From<&[i32]> for CommGroup {
    /// A progression when `ranks` is one, else a table of them.
    fn from(ranks: &[i32]) -> CommGroup {
        match as_progression(ranks) {
            Some((first, step)) => CommGroup(Repr::Progression {
                first,
                step,
                len: ranks.len() as u32,
            }),
            None => CommGroup(Repr::Table(ranks.into())),
        }
    }
}

impl From<Vec<i32>> for CommGroup {
    fn from(ranks: Vec<i32>) -> CommGroup {
        match as_progression(&ranks) {
            Some(_) => CommGroup::from(&ranks[..]),
            None => CommGroup(Repr::Table(ranks.into())),
        }
    }
}

impl From<Arc<[i32]>> for CommGroup {
    fn from(ranks: Arc<[i32]>) -> CommGroup {
        match as_progression(&ranks) {
            Some(_) => CommGroup::from(&ranks[..]),
            None => CommGroup(Repr::Table(ranks)),
        }
    }
}

impl FromIterator<i32> for CommGroup {
    fn from_iter<I: IntoIterator<Item = i32>>(iter: I) -> CommGroup {
        CommGroup::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl PartialEq for CommGroup {
    fn eq(&self, other: &CommGroup) -> bool {
        match (&self.0, &other.0) {
            (Repr::Table(a), Repr::Table(b)) => a == b,
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl Eq for CommGroup {}

impl PartialOrd for CommGroup {
    fn partial_cmp(&self, other: &CommGroup) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CommGroup {
    /// As their member lists compare.
    fn cmp(&self, other: &CommGroup) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

impl PartialEq<[i32]> for CommGroup {
    fn eq(&self, other: &[i32]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl Hash for CommGroup {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        match &self.0 {
            // Like the table it stands for would hash.
            Repr::Progression { .. } => self.iter().for_each(|r| r.hash(state)),
            Repr::Table(t) => t.iter().for_each(|r| r.hash(state)),
        }
    }
}

impl fmt::Debug for CommGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Progression { first, step, len } => {
                write!(f, "[{first}, {first}+{step}.. ({len})]")
            }
            Repr::Table(ref t) => f.debug_list().entries(t.iter()).finish(),
        }
    }
}

impl Serialize for CommGroup {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for CommGroup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CommGroup, D::Error> {
        Vec::<i32>::deserialize(d).map(CommGroup::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_are_checked() {
        assert!(CommGroup::progression_of(0, 1, 1 << 31).is_some());
        assert!(CommGroup::progression_of(1, 1, 1 << 31).is_none());
        assert!(CommGroup::progression_of(0, -1, 3).is_some());
        assert!(CommGroup::progression_of(0, 1, -1).is_none());
        assert_eq!(CommGroup::progression_of(5, 9, 1).unwrap().to_vec(), [5]);
        assert!(CommGroup::progression_of(5, 9, 0).unwrap().is_empty());
        let g = CommGroup::progression_of(10, -3, 4).unwrap();
        assert_eq!(g.to_vec(), [10, 7, 4, 1]);
        assert_eq!(
            (g.position(4), g.position(5), g.position(-2)),
            (Some(2), None, None)
        );
        let same = CommGroup::progression_of(7, 0, 3).unwrap();
        assert_eq!((same.position(7), same.position(8)), (Some(0), None));
    }

    proptest! {
        /// However it is held, a group behaves as the table of its members.
        #[test]
        fn a_group_is_its_members(ranks in prop::collection::vec(-3i32..8, 0..6),
                                  first in -50i32..50, step in -4i32..5, len in 0u32..7) {
            let progression = CommGroup::progression_of(first.into(), step.into(), len.into())
                .expect("small");
            for g in [CommGroup::from(ranks.clone()), progression] {
                let table = g.to_vec();
                let held = CommGroup::of_table(table.clone().into());
                prop_assert_eq!(&g, &held);
                prop_assert_eq!(g.len(), table.len());
                for r in -60..60 {
                    prop_assert_eq!(g.position(r), table.iter().position(|&x| x == r));
                }
                use std::hash::BuildHasher;
                let state = std::collections::hash_map::RandomState::new();
                prop_assert_eq!(state.hash_one(&g), state.hash_one(&held));
                let json = serde_json::to_string(&g).unwrap();
                prop_assert_eq!(&json, &serde_json::to_string(&table).unwrap());
                prop_assert_eq!(serde_json::from_str::<CommGroup>(&json).unwrap(), g);
            }
        }
    }
}
