//! Sets of COMM_WORLD ranks, as runs of consecutive ranks.
//!
//! A [`RankSet`] prints as ranges, `0-5,7` (runs of three or more as `a-b`, pairs as
//! `a,b`; five or more single ranks equally apart as `a-b:step`, one column of a split's
//! rows of four as `0-4092:4`), and parses the same notation back (`a-b` for any
//! `a <= b`, `a-b:step` where `step` divides `b - a`, spaces ignored).
//!
//! ```
//! use mqd_model::RankSet;
//!
//! let a: RankSet = "0-5,7".parse().unwrap();
//! let b = RankSet::from_iter([4, 5, 6, 7, 8]);
//! assert_eq!((&a & &b).to_string(), "4,5,7");
//! assert_eq!((&a | &b).to_string(), "0-8");
//! assert_eq!(a.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5, 7]);
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Largest rank a [`RankSet`] parsed from text may hold (a guard against `0-4000000000`
/// allocating half a gigabyte).
pub const MAX_PARSED_RANK: u32 = (1 << 24) - 1;

/// A set of non-negative ranks, stored as its maximal runs of consecutive ranks: the
/// ranks of a job of a million in one state cost one run, not a million bits.
///
/// Equality, hashing and ordering depend only on the members (the runs are kept sorted,
/// disjoint and apart); sets order by their sorted member lists (so by lowest rank first).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RankSet {
    /// `[first, last]` of each run, increasing, with a gap between any two.
    runs: Vec<[u32; 2]>,
    /// The number of members.
    len: usize,
}

fn run_len([first, last]: [u32; 2]) -> usize {
    (last - first) as usize + 1
}

impl RankSet {
    /// The empty set.
    pub fn new() -> RankSet {
        RankSet::default()
    }

    /// The set of sorted, disjoint runs (adjacent ones are joined).
    fn of_sorted_runs(runs: impl IntoIterator<Item = [u32; 2]>) -> RankSet {
        let mut set = RankSet::new();
        for [first, last] in runs {
            match set.runs.last_mut() {
                Some(prev) if u64::from(first) <= u64::from(prev[1]) + 1 => {
                    if last > prev[1] {
                        set.len += (last - prev[1]) as usize;
                        prev[1] = last;
                    }
                }
                _ => {
                    set.len += run_len([first, last]);
                    set.runs.push([first, last]);
                }
            }
        }
        set
    }

    /// The ranks `0..n`.
    pub fn full(n: u32) -> RankSet {
        let mut set = RankSet::new();
        set.insert_range(0, n);
        set
    }

    /// The single rank `rank`.
    pub fn single(rank: u32) -> RankSet {
        RankSet::of_sorted_runs([[rank, rank]])
    }

    /// The non-negative members of `ranks` (negative ones, "unknown", are skipped).
    pub fn from_i32s<R: std::borrow::Borrow<i32>>(ranks: impl IntoIterator<Item = R>) -> RankSet {
        ranks
            .into_iter()
            .filter_map(|r| u32::try_from(*r.borrow()).ok())
            .collect()
    }

    /// The index of the first run that ends at or after `rank`.
    fn run_at(&self, rank: u32) -> usize {
        self.runs.partition_point(|r| r[1] < rank)
    }

    /// Adds `rank`; whether it was new.
    pub fn insert(&mut self, rank: u32) -> bool {
        // Ranks mostly come in increasing order: at the end is the common case.
        let i = match self.runs.last() {
            Some(last) if last[1] < rank => self.runs.len(),
            _ => self.run_at(rank),
        };
        if self.runs.get(i).is_some_and(|r| r[0] <= rank) {
            return false;
        }
        let joins_left = i > 0 && self.runs[i - 1][1] + 1 == rank;
        let joins_right = self.runs.get(i).is_some_and(|r| r[0] == rank + 1);
        match (joins_left, joins_right) {
            (true, true) => {
                self.runs[i - 1][1] = self.runs[i][1];
                self.runs.remove(i);
            }
            (true, false) => self.runs[i - 1][1] = rank,
            (false, true) => self.runs[i][0] = rank,
            (false, false) => self.runs.insert(i, [rank, rank]),
        }
        self.len += 1;
        true
    }

    /// Adds every rank of `start..end`.
    pub fn insert_range(&mut self, start: u32, end: u32) {
        if start < end {
            self.union_with(&RankSet::of_sorted_runs([[start, end - 1]]));
        }
    }

    /// Removes `rank`; whether it was a member.
    pub fn remove(&mut self, rank: u32) -> bool {
        let i = self.run_at(rank);
        let Some(&[first, last]) = self.runs.get(i).filter(|r| r[0] <= rank) else {
            return false;
        };
        match (first == rank, last == rank) {
            (true, true) => {
                self.runs.remove(i);
            }
            (true, false) => self.runs[i][0] = rank + 1,
            (false, true) => self.runs[i][1] = rank - 1,
            (false, false) => {
                self.runs[i][1] = rank - 1;
                self.runs.insert(i + 1, [rank + 1, last]);
            }
        }
        self.len -= 1;
        true
    }

    /// Whether `rank` is a member.
    pub fn contains(&self, rank: u32) -> bool {
        self.runs
            .get(self.run_at(rank))
            .is_some_and(|r| r[0] <= rank)
    }

    /// Whether the (possibly negative) rank `rank` is a member.
    pub fn contains_i32(&self, rank: i32) -> bool {
        u32::try_from(rank).is_ok_and(|r| self.contains(r))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The lowest member.
    pub fn first(&self) -> Option<u32> {
        self.runs.first().map(|r| r[0])
    }

    /// The highest member.
    pub fn last(&self) -> Option<u32> {
        self.runs.last().map(|r| r[1])
    }

    /// The members in increasing order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            runs: &self.runs,
            next: self.runs.first().map_or(0, |r| u64::from(r[0])),
        }
    }

    /// The members as a vector, increasing.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }

    /// Members of either set.
    pub fn union(&self, other: &RankSet) -> RankSet {
        let (mut a, mut b) = (self.runs.iter().peekable(), other.runs.iter().peekable());
        RankSet::of_sorted_runs(std::iter::from_fn(|| match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x[0] <= y[0] => a.next().copied(),
            (Some(_), Some(_)) | (None, _) => b.next().copied(),
            (Some(_), None) => a.next().copied(),
        }))
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &RankSet) -> RankSet {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while let (Some(&a), Some(&b)) = (self.runs.get(i), other.runs.get(j)) {
            let (first, last) = (a[0].max(b[0]), a[1].min(b[1]));
            if first <= last {
                out.push([first, last]);
            }
            if a[1] < b[1] {
                i += 1;
            } else {
                j += 1;
            }
        }
        RankSet::of_sorted_runs(out)
    }

    /// Members of `self` that are not in `other`.
    pub fn difference(&self, other: &RankSet) -> RankSet {
        let mut out = Vec::new();
        let mut j = 0;
        for &[first, last] in &self.runs {
            let mut from = u64::from(first);
            while let Some(&b) = other.runs.get(j) {
                if b[1] < first {
                    j += 1;
                    continue;
                }
                if b[0] > last {
                    break;
                }
                if u64::from(b[0]) > from {
                    out.push([from as u32, b[0] - 1]);
                }
                from = u64::from(b[1]) + 1;
                if b[1] > last {
                    break;
                }
                j += 1;
            }
            if from <= u64::from(last) {
                out.push([from as u32, last]);
            }
        }
        RankSet::of_sorted_runs(out)
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &RankSet) -> bool {
        self.len <= other.len
            && self.runs.iter().all(|&[first, last]| {
                other
                    .runs
                    .get(other.run_at(first))
                    .is_some_and(|r| r[0] <= first && last <= r[1])
            })
    }

    /// Whether the sets share a member.
    pub fn intersects(&self, other: &RankSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while let (Some(&a), Some(&b)) = (self.runs.get(i), other.runs.get(j)) {
            if a[0].max(b[0]) <= a[1].min(b[1]) {
                return true;
            }
            if a[1] < b[1] {
                i += 1;
            } else {
                j += 1;
            }
        }
        false
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &RankSet) {
        if other.is_empty() {
            return;
        }
        // Appending past the end is the common case, and needs no merge.
        if self.last().is_none_or(|l| other.runs[0][0] > l) {
            let runs = std::mem::take(&mut self.runs);
            *self = RankSet::of_sorted_runs(runs.into_iter().chain(other.runs.iter().copied()));
            return;
        }
        *self = self.union(other);
    }

    /// The members below `n`.
    pub fn below(&self, n: u32) -> RankSet {
        RankSet::of_sorted_runs(
            self.runs
                .iter()
                .take_while(|r| r[0] < n)
                .map(|&[first, last]| [first, last.min(n - 1)]),
        )
    }

    /// `{r : r + k in self}`.
    pub fn shifted_down(&self, k: u32) -> RankSet {
        RankSet::of_sorted_runs(
            self.runs
                .iter()
                .filter(|r| r[1] >= k)
                .map(|&[first, last]| [first.max(k) - k, last - k]),
        )
    }

    /// `{r + k : r in self}` (members that would pass `u32::MAX` are dropped).
    pub fn shifted_up(&self, k: u32) -> RankSet {
        RankSet::of_sorted_runs(
            self.runs
                .iter()
                .map_while(|&[first, last]| Some([first.checked_add(k)?, last.saturating_add(k)])),
        )
    }

    /// `{r < n : (r + k) mod n in self}`: where each rank's `k`-th right neighbour in a
    /// ring of `n` is a member (members from `n` up are not in the ring).
    pub fn rotated(&self, k: u32, n: u32) -> RankSet {
        if n == 0 {
            return RankSet::new();
        }
        let k = k % n;
        let ring = self.below(n);
        // r + k < n: r in ring - k; r + k >= n: r - (n - k) in ring below k.
        let mut out = ring.shifted_down(k);
        out.union_with(&ring.below(k).shifted_up(n - k));
        out
    }

    /// The maximal runs of consecutive members, as `start..end`.
    pub fn runs(&self) -> Vec<std::ops::Range<u32>> {
        self.runs
            .iter()
            .map(|&[first, last]| first..last.saturating_add(1))
            .collect()
    }
}

/// Iterator over the members of a [`RankSet`], increasing.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    /// The runs not yet finished, the current one first.
    runs: &'a [[u32; 2]],
    /// The next member (in the first run).
    next: u64,
}

impl Iterator for Iter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let &[_, last] = self.runs.first()?;
        let rank = self.next as u32;
        if self.next >= u64::from(last) {
            self.runs = &self.runs[1..];
            self.next = self.runs.first().map_or(0, |r| u64::from(r[0]));
        } else {
            self.next += 1;
        }
        Some(rank)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self
            .runs
            .iter()
            .enumerate()
            .map(|(i, &r)| match i {
                0 => (u64::from(r[1]) + 1 - self.next) as usize,
                _ => run_len(r),
            })
            .sum();
        (left, Some(left))
    }
}

impl<'a> IntoIterator for &'a RankSet {
    type Item = u32;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<u32> for RankSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> RankSet {
        let mut set = RankSet::new();
        set.extend(iter);
        set
    }
}

impl Extend<u32> for RankSet {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, iter: I) {
        for rank in iter {
            self.insert(rank);
        }
    }
}

impl std::ops::BitOr for &RankSet {
    type Output = RankSet;

    fn bitor(self, other: &RankSet) -> RankSet {
        self.union(other)
    }
}

impl std::ops::BitAnd for &RankSet {
    type Output = RankSet;

    fn bitand(self, other: &RankSet) -> RankSet {
        self.intersection(other)
    }
}

impl std::ops::Sub for &RankSet {
    type Output = RankSet;

    fn sub(self, other: &RankSet) -> RankSet {
        self.difference(other)
    }
}

impl PartialOrd for RankSet {
    fn partial_cmp(&self, other: &RankSet) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RankSet {
    /// As the sorted member lists compare, run by run.
    fn cmp(&self, other: &RankSet) -> Ordering {
        for (i, (a, b)) in self.runs.iter().zip(&other.runs).enumerate() {
            if a[0] != b[0] {
                return a[0].cmp(&b[0]);
            }
            if a[1] != b[1] {
                // The shorter run's list goes on with a gap (greater), or ends (less).
                let (more_of_shorter, shorter_is_self) = if a[1] < b[1] {
                    (self.runs.len() > i + 1, true)
                } else {
                    (other.runs.len() > i + 1, false)
                };
                return match (more_of_shorter, shorter_is_self) {
                    (true, true) | (false, false) => Ordering::Greater,
                    (false, true) | (true, false) => Ordering::Less,
                };
            }
        }
        self.runs.len().cmp(&other.runs.len())
    }
}

/// Fewest single ranks equally apart that print as `a-b:step`.
const MIN_STRIDED: usize = 5;

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let single = |i: usize| self.runs.get(i).filter(|r| r[0] == r[1]).map(|r| r[0]);
        let mut i = 0;
        while let Some(&[start, end]) = self.runs.get(i) {
            if i > 0 {
                f.write_str(",")?;
            }
            // Single ranks equally apart: how many follow this one.
            let strided = match (single(i), single(i + 1)) {
                (Some(a), Some(b)) => {
                    let step = b - a;
                    let mut k = 2;
                    while single(i + k).is_some_and(|c| c - step == self.runs[i + k - 1][0]) {
                        k += 1;
                    }
                    (k >= MIN_STRIDED).then_some((k, step))
                }
                _ => None,
            };
            if let Some((k, step)) = strided {
                write!(f, "{start}-{}:{step}", self.runs[i + k - 1][0])?;
                i += k;
                continue;
            }
            match end - start {
                0 => write!(f, "{start}")?,
                1 => write!(f, "{start},{end}")?,
                _ => write!(f, "{start}-{end}")?,
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RankSet({self})")
    }
}

/// Why a rank set's text did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseRankSetError {
    /// The offending element ("5-3", "x", ...).
    pub element: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for ParseRankSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad rank set element {:?}: {}",
            self.element, self.reason
        )
    }
}

impl std::error::Error for ParseRankSetError {}

impl FromStr for RankSet {
    type Err = ParseRankSetError;

    /// Parses `0-5,7` (the [`Display`](fmt::Display) form); the empty string is the empty
    /// set. Ranks above [`MAX_PARSED_RANK`] are refused.
    fn from_str(text: &str) -> Result<RankSet, ParseRankSetError> {
        let mut set = RankSet::new();
        let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if text.is_empty() {
            return Ok(set);
        }
        for element in text.split(',') {
            let error = |reason| ParseRankSetError {
                element: element.to_owned(),
                reason,
            };
            let rank = |s: &str| -> Result<u32, ParseRankSetError> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(error("not a rank (a non-negative decimal number)"));
                }
                match s.parse::<u32>() {
                    Ok(r) if r <= MAX_PARSED_RANK => Ok(r),
                    _ => Err(error("rank too large")),
                }
            };
            let (range, step) = match element.split_once(':') {
                None => (element, None),
                Some((range, step)) => match step.parse::<u32>() {
                    Ok(s) if s > 0 && step.bytes().all(|b| b.is_ascii_digit()) => (range, Some(s)),
                    _ => return Err(error("not a step (a positive decimal number)")),
                },
            };
            match (range.split_once('-'), step) {
                (None, None) => {
                    set.insert(rank(range)?);
                }
                (None, Some(_)) => return Err(error("a step needs a range (a-b:step)")),
                (Some((a, b)), step) => {
                    let (a, b) = (rank(a)?, rank(b)?);
                    if a > b {
                        return Err(error("range runs backwards"));
                    }
                    match step {
                        None | Some(1) => set.insert_range(a, b + 1),
                        Some(s) if (b - a) % s != 0 => {
                            return Err(error("the step does not divide the range"));
                        }
                        Some(s) => (a..=b).step_by(s as usize).for_each(|r| {
                            set.insert(r);
                        }),
                    }
                }
            }
        }
        Ok(set)
    }
}

/// As its text, `"0-5,7"`.
impl Serialize for RankSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RankSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ranks_equally_apart_print_with_their_step() {
        let column: RankSet = (0..1024).map(|k| 4 * k + 1).collect();
        assert_eq!(column.to_string(), "1-4093:4");
        assert_eq!("1-4093:4".parse::<RankSet>(), Ok(column));
        // Four are listed; a break in the step starts anew.
        let few: RankSet = [0, 2, 4, 6].into_iter().collect();
        assert_eq!(few.to_string(), "0,2,4,6");
        let mixed: RankSet = [0, 1, 2, 5, 8, 11, 14, 17, 19, 30].into_iter().collect();
        assert_eq!(mixed.to_string(), "0-2,5-17:3,19,30");
        assert_eq!(mixed.to_string().parse::<RankSet>(), Ok(mixed));
        for bad in ["1-4:2", "3:2", "1-5:0", "1-5:x"] {
            assert!(bad.parse::<RankSet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shifts_and_rotations_move_members() {
        let set: RankSet = "0-2,63-65,130".parse().unwrap();
        assert_eq!(set.shifted_down(1).to_string(), "0,1,62-64,129");
        assert_eq!(set.shifted_down(64).to_string(), "0,1,66");
        assert_eq!(set.shifted_up(1).to_string(), "1-3,64-66,131");
        assert_eq!(set.shifted_up(70).to_string(), "70-72,133-135,200");
        assert_eq!(set.below(64).to_string(), "0-2,63");
        // Ranks whose right neighbour (mod 131) is a member.
        let expected: RankSet = (0..131u32)
            .filter(|r| set.contains((r + 1) % 131))
            .collect();
        assert_eq!(set.rotated(1, 131), expected);
        for (k, n) in [
            (0, 131),
            (5, 131),
            (130, 131),
            (64, 200),
            (3, 64),
            (200, 131),
        ] {
            let expected: RankSet = (0..n).filter(|r| set.contains((r + k) % n)).collect();
            assert_eq!(set.rotated(k, n), expected, "{k} {n}");
        }
        assert_eq!(set.runs(), vec![0..3, 63..66, 130..131]);
    }

    #[test]
    fn display_and_parse_round_trip() {
        for (members, text) in [
            (vec![], ""),
            (vec![3], "3"),
            (vec![4, 5], "4,5"),
            (vec![0, 1, 2, 3, 4, 5, 7], "0-5,7"),
            (vec![0, 2, 63, 64, 65, 200], "0,2,63-65,200"),
        ] {
            let set: RankSet = members.iter().copied().collect();
            assert_eq!(set.to_string(), text);
            assert_eq!(text.parse::<RankSet>().unwrap(), set);
            assert_eq!(set.to_vec(), members);
            assert_eq!(set.len(), members.len());
        }
        assert_eq!(
            " 1 - 3 , 9".parse::<RankSet>().unwrap().to_string(),
            "1-3,9"
        );
        assert_eq!("4-4".parse::<RankSet>().unwrap().to_string(), "4");
        for bad in ["5-3", "x", "1,,2", "-1", "1-", "99999999999"] {
            assert!(bad.parse::<RankSet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn set_operations() {
        let a: RankSet = "0-5,7,100".parse().unwrap();
        let b: RankSet = "4-8".parse().unwrap();
        assert_eq!(a.union(&b).to_string(), "0-8,100");
        assert_eq!(a.intersection(&b).to_string(), "4,5,7");
        assert_eq!(a.difference(&b).to_string(), "0-3,100");
        assert_eq!(b.difference(&a).to_string(), "6,8");
        assert!(RankSet::single(7).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(a.intersects(&b));
        assert_eq!(a.first(), Some(0));
        assert_eq!(a.last(), Some(100));
        let mut c = a.clone();
        assert!(c.remove(100));
        assert!(!c.remove(100));
        assert_eq!(c, "0-5,7".parse().unwrap());
        assert!(c.contains(7) && !c.contains(6) && !c.contains_i32(-1));
        assert!(RankSet::new() < RankSet::single(0));
        assert!(RankSet::single(0) < RankSet::single(1));
        assert_eq!(RankSet::from_i32s([-1, 2, 3]).to_string(), "2,3");
    }

    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeSet;

        fn set_of(members: &BTreeSet<u32>) -> RankSet {
            // Inserted out of order, to go through every case of `insert`.
            let mut set = RankSet::new();
            for &r in members.iter().rev().step_by(2).chain(members) {
                set.insert(r);
            }
            set
        }

        proptest! {
            /// Every operation gives what it gives on the members themselves.
            #[test]
            fn runs_behave_as_their_members(
                a in prop::collection::btree_set(0u32..80, 0..40),
                b in prop::collection::btree_set(0u32..80, 0..40),
                k in 0u32..90, n in 0u32..90, probe in 0u32..90,
            ) {
                let (x, y) = (set_of(&a), set_of(&b));
                let of = |s: &RankSet| s.iter().collect::<BTreeSet<u32>>();
                prop_assert_eq!(of(&x), a.clone());
                prop_assert_eq!(x.len(), a.len());
                prop_assert_eq!(x.iter().size_hint().0, a.len());
                prop_assert_eq!(of(&x.union(&y)), &a | &b);
                prop_assert_eq!(of(&x.intersection(&y)), &a & &b);
                prop_assert_eq!(of(&x.difference(&y)), &a - &b);
                prop_assert_eq!(x.is_subset(&y), a.is_subset(&b));
                prop_assert_eq!(x.intersects(&y), !a.is_disjoint(&b));
                prop_assert_eq!(x.cmp(&y), a.iter().cmp(b.iter()));
                prop_assert_eq!(x == y, a == b);
                prop_assert_eq!(x.contains(probe), a.contains(&probe));
                prop_assert_eq!(of(&x.below(n)), a.iter().copied().filter(|&r| r < n).collect());
                prop_assert_eq!(
                    of(&x.shifted_down(k)),
                    a.iter().filter_map(|&r| r.checked_sub(k)).collect()
                );
                prop_assert_eq!(of(&x.shifted_up(k)), a.iter().map(|&r| r + k).collect());
                let mut z = x.clone();
                z.union_with(&y);
                prop_assert_eq!(&z, &x.union(&y));
                let mut z = x.clone();
                prop_assert_eq!(z.remove(probe), a.contains(&probe));
                let mut less = a.clone();
                less.remove(&probe);
                prop_assert_eq!(&z, &set_of(&less));
                let mut z = x.clone();
                z.insert_range(k.min(n), k.max(n));
                prop_assert_eq!(of(&z), &a | &(k.min(n)..k.max(n)).collect());
                prop_assert_eq!(x.to_string().parse::<RankSet>().unwrap(), x.clone());
            }

            /// Ranks equally apart, among others, print and parse back.
            #[test]
            fn strided_ranks_round_trip(
                first in 0u32..50, step in 2u32..6, count in 1u32..12,
                others in prop::collection::btree_set(0u32..120, 0..12),
            ) {
                let mut members = others.clone();
                members.extend((0..count).map(|k| first + k * step));
                let x = set_of(&members);
                let text = x.to_string();
                prop_assert_eq!(text.parse::<RankSet>().unwrap(), x, "{}", text);
            }
        }
    }
}
