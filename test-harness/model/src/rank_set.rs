//! Sets of COMM_WORLD ranks, as PTP's `BitList` addresses processes: one bit per rank.
//!
//! A [`RankSet`] prints as ranges, `0-5,7` (runs of three or more as `a-b`, pairs as
//! `a,b`), and parses the same notation back (`a-b` for any `a <= b`, spaces ignored).
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

/// A set of non-negative ranks, stored as a bitset (64 ranks per word).
///
/// Equality, hashing and ordering depend only on the members (trailing empty words are
/// never kept); sets order by their sorted member lists (so by lowest rank first).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RankSet {
    words: Vec<u64>,
}

impl RankSet {
    /// The empty set.
    pub fn new() -> RankSet {
        RankSet::default()
    }

    /// The ranks `0..n`.
    pub fn full(n: u32) -> RankSet {
        let mut set = RankSet::new();
        set.insert_range(0, n);
        set
    }

    /// The single rank `rank`.
    pub fn single(rank: u32) -> RankSet {
        let mut set = RankSet::new();
        set.insert(rank);
        set
    }

    /// The non-negative members of `ranks` (negative ones, "unknown", are skipped).
    pub fn from_i32s<'a>(ranks: impl IntoIterator<Item = &'a i32>) -> RankSet {
        ranks
            .into_iter()
            .filter_map(|&r| u32::try_from(r).ok())
            .collect()
    }

    /// Adds `rank`; whether it was new.
    pub fn insert(&mut self, rank: u32) -> bool {
        let (word, bit) = ((rank / 64) as usize, rank % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let new = self.words[word] & (1 << bit) == 0;
        self.words[word] |= 1 << bit;
        new
    }

    /// Adds every rank of `start..end`.
    pub fn insert_range(&mut self, start: u32, end: u32) {
        for rank in start..end {
            self.insert(rank);
        }
    }

    /// Removes `rank`; whether it was a member.
    pub fn remove(&mut self, rank: u32) -> bool {
        let (word, bit) = ((rank / 64) as usize, rank % 64);
        let Some(w) = self.words.get_mut(word) else {
            return false;
        };
        let was = *w & (1 << bit) != 0;
        *w &= !(1 << bit);
        self.trim();
        was
    }

    /// Whether `rank` is a member.
    pub fn contains(&self, rank: u32) -> bool {
        self.words
            .get((rank / 64) as usize)
            .is_some_and(|w| w & (1 << (rank % 64)) != 0)
    }

    /// Whether the (possibly negative) rank `rank` is a member.
    pub fn contains_i32(&self, rank: i32) -> bool {
        u32::try_from(rank).is_ok_and(|r| self.contains(r))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest member.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The highest member.
    pub fn last(&self) -> Option<u32> {
        let (i, w) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        Some(i as u32 * 64 + 63 - w.leading_zeros())
    }

    /// The members in increasing order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: &self.words,
            index: 0,
            current: self.words.first().copied().unwrap_or(0),
        }
    }

    /// The members as a vector, increasing.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }

    /// Members of either set.
    pub fn union(&self, other: &RankSet) -> RankSet {
        let (long, short) = if self.words.len() >= other.words.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut words = long.words.clone();
        for (w, o) in words.iter_mut().zip(&short.words) {
            *w |= o;
        }
        RankSet { words }
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &RankSet) -> RankSet {
        let mut set = RankSet {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(a, b)| a & b)
                .collect(),
        };
        set.trim();
        set
    }

    /// Members of `self` that are not in `other`.
    pub fn difference(&self, other: &RankSet) -> RankSet {
        let mut words = self.words.clone();
        for (w, o) in words.iter_mut().zip(&other.words) {
            *w &= !o;
        }
        let mut set = RankSet { words };
        set.trim();
        set
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &RankSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Whether the sets share a member.
    pub fn intersects(&self, other: &RankSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &RankSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// The members below `n`.
    pub fn below(&self, n: u32) -> RankSet {
        let n = n as usize;
        let mut words: Vec<u64> = self.words.iter().take(n.div_ceil(64)).copied().collect();
        if !n.is_multiple_of(64)
            && let Some(last) = words.get_mut(n / 64)
        {
            *last &= (1u64 << (n % 64)) - 1;
        }
        let mut set = RankSet { words };
        set.trim();
        set
    }

    /// `{r : r + k in self}`.
    pub fn shifted_down(&self, k: u32) -> RankSet {
        let (skip, bits) = ((k / 64) as usize, k % 64);
        let src = self.words.get(skip..).unwrap_or_default();
        let mut words: Vec<u64> = (0..src.len())
            .map(|i| {
                let low = src[i] >> bits;
                let high = match (bits, src.get(i + 1)) {
                    (0, _) | (_, None) => 0,
                    (_, Some(next)) => next << (64 - bits),
                };
                low | high
            })
            .collect();
        words.truncate(src.len());
        let mut set = RankSet { words };
        set.trim();
        set
    }

    /// `{r + k : r in self}`.
    pub fn shifted_up(&self, k: u32) -> RankSet {
        if self.words.is_empty() {
            return RankSet::new();
        }
        let (skip, bits) = ((k / 64) as usize, k % 64);
        let mut words = vec![0u64; skip + self.words.len() + 1];
        for (i, &w) in self.words.iter().enumerate() {
            words[skip + i] |= w << bits;
            if bits != 0 {
                words[skip + i + 1] |= w >> (64 - bits);
            }
        }
        let mut set = RankSet { words };
        set.trim();
        set
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
        let mut out: Vec<std::ops::Range<u32>> = Vec::new();
        for r in self {
            match out.last_mut() {
                Some(run) if run.end == r => run.end = r + 1,
                _ => out.push(r..r + 1),
            }
        }
        out
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

/// Iterator over the members of a [`RankSet`], increasing.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    words: &'a [u64],
    index: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros();
                self.current &= self.current - 1;
                return Some(self.index as u32 * 64 + bit);
            }
            self.index += 1;
            self.current = *self.words.get(self.index)?;
        }
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
    fn cmp(&self, other: &RankSet) -> Ordering {
        self.iter().cmp(other.iter())
    }
}

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut members = self.iter().peekable();
        while let Some(start) = members.next() {
            let mut end = start;
            while members.peek() == Some(&(end + 1)) {
                end += 1;
                members.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            match end - start {
                0 => write!(f, "{start}")?,
                1 => write!(f, "{start},{end}")?,
                _ => write!(f, "{start}-{end}")?,
            }
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
            match element.split_once('-') {
                None => {
                    set.insert(rank(element)?);
                }
                Some((a, b)) => {
                    let (a, b) = (rank(a)?, rank(b)?);
                    if a > b {
                        return Err(error("range runs backwards"));
                    }
                    set.insert_range(a, b + 1);
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
        assert_eq!(RankSet::from_i32s(&[-1, 2, 3]).to_string(), "2,3");
    }
}
