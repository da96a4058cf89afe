//! Ranks of many hosts merged by state, as relays forward them: what goes up the tree
//! grows with the distinct states of the job, not with its ranks or hosts.
//!
//! Each agent writes its ranks as lines of a template and differences ([`wire`]). Two
//! lines of different templates are one *class* when every number they rebuild is the
//! same function of the rank, the pid and the rank's slides: a number tied to the rank
//! (`Rank`, `Wrap`) is written as its distance from the template's rank, one tied to the
//! pid as its distance from the template's pid, one moved by a slide as the template's,
//! and every other as the value the line gives it. Lines with the same class key become
//! one line of the first one's template and differences, their ranks, pids, hosts and
//! slides joined in rank order: every rank still rebuilds exactly.

use crate::wire::{self, HostRuns, PidRuns, RanksRecord, Record, StateRecord, StreamError, Token};
use mqd_model::RankSet;
use std::collections::HashMap;

/// What a number of a class is, whatever the template it is written against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Tie {
    Value(i128),
    Rank(i128),
    Wrap(i128, i64),
    Pid(i128),
    /// The slide, and the distance from its base.
    Slide(u8, i128),
}

/// A line's differences from its template, in runs.
type Delta = Vec<(Token, u32)>;

/// A class: the template's shape and what each of its numbers is.
type ClassKey = (String, Vec<Tie>);

/// Each slide's base: the template's first number that slide moves. A number moved by a
/// slide is keyed by its distance from the base, so templates of processes the layout
/// placed differently are one class, their members' slides moved by the bases' distance.
type Bases = Vec<Option<i128>>;

/// A template as the merger keeps it.
struct Template {
    record: StateRecord,
    shape: String,
    numbers: Vec<i128>,
    /// Its number in the merged stream, once a line uses it.
    out: Option<u32>,
}

/// One member of a merged line.
struct Member {
    rank: u32,
    pid: Option<i32>,
    host: u32,
    slides: Vec<i64>,
}

/// Members of a line kept as they came, in runs (no slides): a host's ranks cost their
/// runs, not an entry each.
struct Segment {
    runs: Vec<std::ops::Range<u32>>,
    pids: PidRuns,
    hosts: HostRuns,
}

impl Segment {
    fn first(&self) -> u32 {
        self.runs.first().map_or(0, |r| r.start)
    }

    fn last(&self) -> u32 {
        self.runs.last().map_or(0, |r| r.end - 1)
    }

    fn members(&self) -> impl Iterator<Item = Member> + '_ {
        self.runs
            .iter()
            .flat_map(|r| r.clone())
            .zip(self.pids.iter())
            .zip(self.hosts.iter())
            .map(|((rank, pid), host)| Member {
                rank,
                pid,
                host,
                slides: Vec::new(),
            })
    }
}

struct Line {
    /// The template (index into `templates`) and differences the merged line keeps.
    template: usize,
    delta: Vec<(Token, u32)>,
    /// Members one by one (with slides, or given twice), and in runs.
    members: Vec<Member>,
    segments: Vec<Segment>,
    ranks: RankSet,
    bases: Bases,
    /// What its numbers are (its class key's).
    ties: Vec<Tie>,
}

impl Line {
    fn new(template: usize, delta: &[(Token, u32)], key: &ClassKey, bases: &Bases) -> Line {
        Line {
            template,
            delta: delta.to_vec(),
            members: Vec::new(),
            segments: Vec::new(),
            ranks: RankSet::new(),
            bases: bases.clone(),
            ties: key.1.clone(),
        }
    }

    fn count(&self) -> usize {
        self.members.len() + self.segments.iter().map(|s| s.pids.len()).sum::<usize>()
    }

    /// Its one member, for a line of one.
    fn only(&self) -> Option<Member> {
        match (self.members.as_slice(), self.segments.as_slice()) {
            ([m], []) => Some(Member {
                slides: m.slides.clone(),
                ..*m
            }),
            ([], [s]) if s.pids.len() == 1 => s.members().next(),
            _ => None,
        }
    }

    /// Adds `member`: in runs when it has no slides.
    fn push(&mut self, member: Member) {
        self.ranks.insert(member.rank);
        if !member.slides.is_empty() {
            self.members.push(member);
            return;
        }
        let mut pids = PidRuns::default();
        pids.push(member.pid);
        let mut hosts = HostRuns::default();
        hosts.push(member.host);
        self.segments.push(Segment {
            runs: std::iter::once(member.rank..member.rank + 1).collect(),
            pids,
            hosts,
        });
    }

    /// Its members in rank order, as the line's pids, hosts and slides.
    fn lists(self) -> (RankSet, PidRuns, HostRuns, Vec<Vec<i64>>) {
        let mut segments = self.segments;
        segments.sort_by_key(Segment::first);
        let apart = segments.windows(2).all(|w| w[0].last() < w[1].first());
        if self.members.is_empty() && apart {
            let (mut pids, mut hosts) = (PidRuns::default(), HostRuns::default());
            for s in &segments {
                pids.append(&s.pids);
                hosts.append(&s.hosts);
            }
            return (self.ranks, pids, hosts, Vec::new());
        }
        // Interleaved (ranks placed round-robin on hosts) or with slides: one by one.
        let mut members = self.members;
        for s in &segments {
            members.extend(s.members());
        }
        members.sort_by_key(|m| m.rank);
        let mut hosts = HostRuns::default();
        members.iter().for_each(|m| hosts.push(m.host));
        let slides = if members.iter().all(|m| m.slides.is_empty()) {
            Vec::new()
        } else {
            members.iter().map(|m| m.slides.clone()).collect()
        };
        let pids = members.iter().map(|m| m.pid).collect();
        (self.ranks, pids, hosts, slides)
    }

    /// The slides with which `rank` and `pid` rebuild `numbers` in this class, if any.
    fn fit(&self, numbers: &[i128], rank: u32, pid: Option<i32>) -> Option<Vec<i64>> {
        if numbers.len() != self.ties.len() || self.ranks.contains(rank) {
            return None;
        }
        let rank = i128::from(rank);
        let mut slides: Vec<Option<i128>> = vec![None; self.bases.len()];
        for (tie, &v) in self.ties.iter().zip(numbers) {
            let fits = match *tie {
                Tie::Value(c) => v == c,
                Tie::Rank(c) => v == c + rank,
                Tie::Wrap(c, m) => v == (c + rank).rem_euclid(i128::from(m)),
                Tie::Pid(c) => pid.is_some_and(|p| v == c + i128::from(p)),
                Tie::Slide(k, d) => {
                    let k = usize::from(k);
                    let at = self.bases.get(k).copied().flatten()? + d;
                    *slides[k].get_or_insert(v - at) == v - at
                }
            };
            if !fits {
                return None;
            }
        }
        slides
            .into_iter()
            .map(|s| i64::try_from(s.unwrap_or(0)).ok())
            .collect()
    }
}

/// Lines of many streams, merged by class.
#[derive(Default)]
pub struct Merger {
    templates: Vec<Template>,
    /// (stream, its state id) -> template index.
    by_source: HashMap<(usize, u32), usize>,
    lines: Vec<Line>,
    by_class: HashMap<ClassKey, usize>,
    /// Lines of processes of unknown rank: not merged.
    unranked: Vec<(usize, RanksRecord)>,
}

impl Merger {
    /// Nothing merged yet.
    pub fn new() -> Merger {
        Merger::default()
    }

    /// A template of `stream`.
    pub fn add_state(&mut self, stream: usize, state: StateRecord) {
        let (shape, numbers) = wire::shape_and_numbers(&state.dump);
        self.by_source
            .insert((stream, state.id), self.templates.len());
        self.templates.push(Template {
            record: state,
            shape,
            numbers,
            out: None,
        });
    }

    /// A line of `stream`, its hosts already numbered as the merged stream numbers them.
    pub fn add_line(&mut self, stream: usize, line: RanksRecord) -> Result<(), StreamError> {
        let &template = self
            .by_source
            .get(&(stream, line.state))
            .ok_or(StreamError::UnknownState(line.state))?;
        let count = line.pids.len();
        for (what, len) in [
            ("pids", count),
            ("hosts", line.hosts.len()),
            ("lists of slides", line.slides.len()),
        ] {
            let expected = if what == "pids" {
                line.ranks.len().max(usize::from(line.ranks.is_empty()))
            } else {
                count
            };
            if len != expected && !(len == 0 && what != "pids") {
                return Err(StreamError::Lengths {
                    ranks: expected,
                    other: len,
                    what,
                });
            }
        }
        if line.ranks.is_empty() {
            self.unranked.push((template, line));
            return Ok(());
        }
        let (key, bases) = self.class_key(template, &line.delta)?;
        let index = match self.by_class.get(&key) {
            Some(&i) => i,
            None => {
                self.lines
                    .push(Line::new(template, &line.delta, &key, &bases));
                self.by_class.insert(key, self.lines.len() - 1);
                self.lines.len() - 1
            }
        };
        let target = &mut self.lines[index];
        if line.slides.is_empty() && !target.ranks.intersects(&line.ranks) {
            // The usual case: a host's ranks, kept in runs.
            target.ranks.union_with(&line.ranks);
            let hosts = if line.hosts.is_empty() {
                let mut hosts = HostRuns::default();
                hosts.push_many(line.host, count);
                hosts
            } else {
                line.hosts
            };
            target.segments.push(Segment {
                runs: line.ranks.runs(),
                pids: line.pids,
                hosts,
            });
            return Ok(());
        }
        // What the members' slides move by, written against the class's template.
        let moves: Vec<i128> = bases
            .iter()
            .zip(&self.lines[index].bases)
            .map(|(b, own)| b.unwrap_or(0) - own.unwrap_or(0))
            .collect();
        let mut hosts = line.hosts.iter();
        for (i, (rank, pid)) in line.ranks.iter().zip(line.pids.iter()).enumerate() {
            let slides: Option<Vec<i64>> = match line.slides.get(i) {
                None => Some(Vec::new()),
                Some(own) => own
                    .iter()
                    .enumerate()
                    .map(|(k, &s)| {
                        i64::try_from(i128::from(s) + moves.get(k).copied().unwrap_or(0)).ok()
                    })
                    .collect(),
            };
            let unmoved = || line.slides.get(i).cloned().unwrap_or_default();
            let member = Member {
                rank,
                pid,
                host: hosts.next().unwrap_or(line.host),
                slides: slides.clone().unwrap_or_else(unmoved),
            };
            // A rank listed twice (two processes claim it), or whose slides do not fit
            // once moved, keeps a line of its own.
            let target = if self.lines[index].ranks.contains(rank) || slides.is_none() {
                let ties = self.lines[index].ties.clone();
                let key = (String::new(), ties);
                self.lines
                    .push(Line::new(template, &line.delta, &key, &bases));
                self.lines.len() - 1
            } else {
                index
            };
            self.lines[target].push(member);
        }
        Ok(())
    }

    fn class_key(
        &self,
        template: usize,
        delta: &[(Token, u32)],
    ) -> Result<(ClassKey, Bases), StreamError> {
        let t = &self.templates[template];
        let mut tokens = delta
            .iter()
            .flat_map(|&(token, n)| std::iter::repeat_n(token, n as usize));
        let rank = i128::from(t.record.rank);
        let pid = t.record.pid.map(i128::from);
        let mut ties = Vec::with_capacity(t.numbers.len());
        let mut bases: Bases = Vec::new();
        for &v in &t.numbers {
            let token = if delta.is_empty() {
                Token::By(0)
            } else {
                tokens.next().ok_or(StreamError::FewerDifferences)?
            };
            ties.push(match token {
                Token::By(d) => Tie::Value(v + i128::from(d)),
                Token::Is(x) => Tie::Value(x),
                Token::Rank => Tie::Rank(v - rank),
                Token::RankBy(e) => Tie::Rank(v - rank + i128::from(e)),
                Token::Wrap => match t.record.modulus {
                    Some(m) if m > 0 => Tie::Wrap((v - rank).rem_euclid(i128::from(m)), m),
                    _ => return Err(StreamError::WrapWithoutSize),
                },
                Token::Pid => match pid {
                    Some(p) => Tie::Pid(v - p),
                    None => Tie::Value(v),
                },
                Token::Slide(k) => {
                    let k_index = usize::from(k);
                    if bases.len() <= k_index {
                        bases.resize(k_index + 1, None);
                    }
                    let base = *bases[k_index].get_or_insert(v);
                    Tie::Slide(k, v - base)
                }
            });
        }
        if tokens.next().is_some() {
            return Err(StreamError::MoreDifferences);
        }
        Ok(((t.shape.clone(), ties), bases))
    }

    /// Moves each line of one rank whose numbers are all its own (a host with one rank
    /// in that state: its template, no differences) into a class of its shape that
    /// rebuilds it; failing that, makes it and a later such line of its shape one class
    /// where their numbers are the same, or the same distance from their ranks (around
    /// the job) or pids (deviants of one kind on different hosts).
    fn absorb_lone_ranks(&mut self) {
        let lone = |l: &Line| l.count() == 1 && l.ties.iter().all(|t| matches!(t, Tie::Value(_)));
        let mut i = 0;
        while i < self.lines.len() {
            let Some(m) = lone(&self.lines[i]).then(|| self.lines[i].only()).flatten() else {
                i += 1;
                continue;
            };
            let t = &self.templates[self.lines[i].template];
            let home = self.lines.iter().enumerate().find_map(|(j, other)| {
                let same_shape = self.templates[other.template].shape == t.shape;
                (j != i && same_shape && !lone(other))
                    .then(|| other.fit(&t.numbers, m.rank, m.pid))
                    .flatten()
                    .map(|slides| (j, slides))
            });
            if let Some((j, slides)) = home {
                self.lines.remove(i);
                let j = if j > i { j - 1 } else { j };
                self.lines[j].push(Member { slides, ..m });
                continue;
            }
            let pair = m
                .slides
                .is_empty()
                .then(|| {
                    (i + 1..self.lines.len()).find_map(|j| {
                        let b = &self.lines[j];
                        let tb = &self.templates[b.template];
                        let other = lone(b).then(|| b.only()).flatten()?;
                        (other.slides.is_empty() && tb.shape == t.shape)
                            .then(|| pair_ties(t, &m, tb, &other))
                            .flatten()
                            .map(|ties| (j, other, ties))
                    })
                })
                .flatten();
            if let Some((j, other, (ties, delta))) = pair {
                self.lines.remove(j);
                let line = &mut self.lines[i];
                line.ties = ties;
                line.delta = delta;
                line.push(other);
            }
            i += 1;
        }
    }

    /// The merged records: each template a line uses (numbered from `first_state`), then
    /// the lines, each ranks in rank order.
    pub fn records(mut self, first_state: u32) -> Vec<Record> {
        self.absorb_lone_ranks();
        let mut out = Vec::new();
        let mut next = first_state;
        let mut state_of = |templates: &mut Vec<Template>, out: &mut Vec<Record>, i: usize| {
            if let Some(id) = templates[i].out {
                return id;
            }
            let id = next;
            next += 1;
            templates[i].out = Some(id);
            out.push(Record::State(StateRecord {
                id,
                ..templates[i].record.clone()
            }));
            id
        };
        for mut line in std::mem::take(&mut self.lines) {
            let state = state_of(&mut self.templates, &mut out, line.template);
            let delta = std::mem::take(&mut line.delta);
            let (ranks, pids, hosts, slides) = line.lists();
            let host = hosts.iter().next().unwrap_or(0);
            out.push(Record::Ranks(RanksRecord {
                host,
                state,
                ranks,
                pids,
                hosts: if hosts.single() {
                    HostRuns::default()
                } else {
                    hosts
                },
                delta,
                slides,
            }));
        }
        for (template, line) in std::mem::take(&mut self.unranked) {
            let state = state_of(&mut self.templates, &mut out, template);
            out.push(Record::Ranks(RanksRecord { state, ..line }));
        }
        out
    }

    /// How many classes of ranked processes it holds.
    pub fn classes(&self) -> usize {
        self.lines.len()
    }
}

/// The ties and differences (against `ta`) under which the numbers of templates `ta`
/// and `tb`, each one member's own, are one class: numbers equal, or the same distance
/// from each member's rank (around the job) or pid.
fn pair_ties(ta: &Template, a: &Member, tb: &Template, b: &Member) -> Option<(Vec<Tie>, Delta)> {
    if ta.numbers.len() != tb.numbers.len() || a.rank == b.rank {
        return None;
    }
    let (ra, rb) = (i128::from(a.rank), i128::from(b.rank));
    let pids = a
        .pid
        .zip(b.pid)
        .map(|(p, q)| (i128::from(p), i128::from(q)));
    let modulus = ta
        .record
        .modulus
        .filter(|&m| m > 0 && tb.record.modulus == Some(m));
    let mut ties = Vec::with_capacity(ta.numbers.len());
    let mut delta: Vec<(Token, u32)> = Vec::new();
    for (&x, &y) in ta.numbers.iter().zip(&tb.numbers) {
        let wrap = modulus.map(i128::from).filter(|&m| {
            (0..m).contains(&x)
                && (0..m).contains(&y)
                && (x - ra).rem_euclid(m) == (y - rb).rem_euclid(m)
        });
        let (tie, token) = if x == y {
            (Tie::Value(x), Token::By(0))
        } else if let (Some(m), Some(m64)) = (wrap, modulus) {
            (Tie::Wrap((x - ra).rem_euclid(m), m64), Token::Wrap)
        } else if x - ra == y - rb {
            (Tie::Rank(x - ra), Token::Rank)
        } else if let Some((p, q)) = pids.filter(|(p, q)| x - p == y - q) {
            let _ = q;
            (Tie::Pid(x - p), Token::Pid)
        } else {
            return None;
        };
        ties.push(tie);
        match delta.last_mut() {
            Some((last, n)) if *last == token => *n += 1,
            _ => delta.push((token, 1)),
        }
    }
    Some((ties, delta))
}

#[cfg(test)]
mod tests;
