//! The agents' stream: one JSON object per line, the compact form of the ranks of a host.
//!
//! Ranks of a host are mostly alike: the same communicators, the same kind of wait, the
//! same stack. A rank is sent as the number of a *state* (a template dump, sent once)
//! and the differences of its numbers from the template's, run-length coded, where a
//! difference that is the rank's own distance from the template's rank (its rank in
//! COMM_WORLD, a peer next to it) or its pid's (a thread id) is one token. Ranks whose
//! differences read the same share one line and a rank set: a thousand ranks in the same
//! collective cost one template and one line of pids. Nothing is lost: every field of
//! every rank is rebuilt exactly.

use mqd_model::{CommGroup, LibraryInfo, RankDump, RankSet};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};
use std::collections::HashMap;

/// Why ranks cannot be written to the stream or read from it.
#[derive(Debug)]
pub enum StreamError {
    /// A rank's dump could not be made a template.
    Encode(serde_json::Error),
    /// Ranks of a state whose template has not come.
    UnknownState(u32),
    /// A line's ranks and its other lists differ in length.
    Lengths {
        /// Its ranks.
        ranks: usize,
        /// The other list's length.
        other: usize,
        /// Which list.
        what: &'static str,
    },
    /// Fewer differences than the template has numbers.
    FewerDifferences,
    /// More differences than the template has numbers.
    MoreDifferences,
    /// A number that does not fit where it goes (beyond 64 bits, or negative in text).
    Number(i128),
    /// A string's pattern cut short.
    Pattern,
    /// A range that is not start, step and length, or longer than any job.
    Range(i64),
    /// A difference that wraps without the job's size.
    WrapWithoutSize,
    /// A slide the rank does not have.
    MissingSlide(u8),
    /// Ranks of a host the stream did not announce.
    UnknownHost,
    /// What the stream's numbers made is not a rank.
    NotARank(serde_json::Error),
    /// A template that is not a rank.
    Template(Box<StreamError>),
    /// A template with a rank's differences that does not make a rank.
    Differences(Box<StreamError>),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Encode(e) => write!(f, "a rank that cannot be a template: {e}"),
            StreamError::UnknownState(id) => write!(f, "ranks of state {id} before its template"),
            StreamError::Lengths { ranks, other, what } => {
                write!(f, "{ranks} ranks with {other} {what}")
            }
            StreamError::FewerDifferences => f.write_str("fewer differences than numbers"),
            StreamError::MoreDifferences => f.write_str("more differences than numbers"),
            StreamError::Number(v) => write!(f, "{v} does not fit where it goes"),
            StreamError::Pattern => f.write_str("a string pattern that is cut short"),
            StreamError::Range(n) => write!(f, "a range of {n} values"),
            StreamError::WrapWithoutSize => f.write_str("a wrap without the job's size"),
            StreamError::MissingSlide(k) => write!(f, "slide {k}, which the rank does not have"),
            StreamError::UnknownHost => f.write_str("ranks of a host it did not announce"),
            StreamError::NotARank(e) => write!(f, "{e}"),
            StreamError::Template(e) => write!(f, "a template that is not a rank: {e}"),
            StreamError::Differences(e) => write!(f, "differences that do not make a rank: {e}"),
        }
    }
}

impl std::error::Error for StreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StreamError::Encode(e) | StreamError::NotARank(e) => Some(e),
            StreamError::Template(e) | StreamError::Differences(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// Version of the stream; an agent and a front end of different versions refuse each
/// other at the handshake.
pub const PROTOCOL: u32 = 4;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// The first line of every agent's stream: who speaks.
    Hello(Hello),
    /// A host of the job this stream reports on (its own or, for a relay, one below it).
    Host(HostRecord),
    /// The library that read the queues of a host.
    Library {
        /// The host's number.
        host: u32,
        /// The library.
        library: LibraryInfo,
    },
    /// Every rank of a host that could be attached is stopped, and held until the front
    /// end closes the agent's standard input (every host stopped: one consistent cut).
    Stopped {
        /// The host's number.
        host: u32,
    },
    /// A template dump.
    State(StateRecord),
    /// Ranks in a state.
    Ranks(RanksRecord),
    /// A host whose ranks could not be reported (its agent could not be started, died,
    /// timed out or refused): each of its ranks not yet reported failed for this reason.
    HostFailed {
        /// The host's number.
        host: u32,
        /// Why.
        why: String,
    },
    /// Every rank of the host has been reported.
    HostDone {
        /// The host's number.
        host: u32,
        /// The job's size its ranks' launcher environment gives, when it does.
        job_size: Option<u32>,
    },
    /// The agent refuses the task (a version mismatch, a bad task): nothing follows.
    Refused {
        /// Why.
        why: String,
    },
    /// The stream is complete.
    End,
}

/// Who speaks, and in which version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// The version of the `mqd` that runs the agent.
    pub mqd: String,
    /// The host name the agent's machine gives itself.
    pub host: String,
    /// The agent's pid there.
    pub pid: u32,
}

/// A host of the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// Its number in this stream.
    pub id: u32,
    /// Its name in the job's process table.
    pub name: String,
    /// The name its machine gives itself (from its agent).
    pub agent_host: Option<String>,
}

/// A template: one rank's dump without its rank, pid and host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateRecord {
    /// Its number in this stream.
    pub id: u32,
    /// The template rank's rank (-1: unknown).
    pub rank: i32,
    /// The template rank's pid.
    pub pid: Option<i32>,
    /// The job's size, for [`Token::Wrap`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modulus: Option<i64>,
    /// The dump, as the `mqd/3` document has a rank.
    pub dump: Value,
}

/// Ranks in a state, each rebuilt from the template with the same differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanksRecord {
    /// The host's number.
    pub host: u32,
    /// The state's number.
    pub state: u32,
    /// The ranks (empty for a process of unknown rank).
    pub ranks: RankSet,
    /// Their pids, in rank order (one for a process of unknown rank).
    pub pids: PidRuns,
    /// Their hosts, in rank order, where a relay merged ranks of several hosts into
    /// the line (empty: all of them on `host`).
    #[serde(default, skip_serializing_if = "HostRuns::is_empty")]
    pub hosts: HostRuns,
    /// The differences of each number from the template's, in the template's order:
    /// runs of one token. Empty: the same numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delta: Vec<(Token, u32)>,
    /// Each rank's slides, in pid order, for [`Token::Slide`] (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slides: Vec<Vec<i64>>,
}

/// Pids in rank order as runs `[first, count]`: `first`, `first + 1`... (a host's ranks
/// started one after another cost one run), `[null, count]` for unknown ones.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PidRuns(Vec<(Option<i32>, u32)>);

impl PidRuns {
    /// How many pids.
    pub fn len(&self) -> usize {
        self.0.iter().map(|&(_, n)| n as usize).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends one pid.
    pub fn push(&mut self, pid: Option<i32>) {
        if let Some((first, n)) = self.0.last_mut() {
            let next = first.and_then(|f| f.checked_add(i32::try_from(*n).ok()?));
            if (first.is_none() && pid.is_none()) || (pid.is_some() && next == pid) {
                *n += 1;
                return;
            }
        }
        self.0.push((pid, 1));
    }

    /// Appends `other`'s pids.
    pub fn append(&mut self, other: &PidRuns) {
        for &(first, n) in &other.0 {
            match (self.0.last_mut(), first) {
                (Some((None, m)), None) => *m += n,
                (Some((Some(f), m)), Some(p))
                    if f.checked_add(i32::try_from(*m).unwrap_or(i32::MAX)) == Some(p) =>
                {
                    *m += n
                }
                _ => self.0.push((first, n)),
            }
        }
    }

    /// The pids, in order.
    pub fn iter(&self) -> impl Iterator<Item = Option<i32>> + '_ {
        self.0
            .iter()
            .flat_map(|&(first, n)| (0..n).map(move |i| first.map(|f| f.wrapping_add(i as i32))))
    }
}

impl FromIterator<Option<i32>> for PidRuns {
    fn from_iter<I: IntoIterator<Item = Option<i32>>>(iter: I) -> PidRuns {
        let mut runs = PidRuns::default();
        iter.into_iter().for_each(|p| runs.push(p));
        runs
    }
}

/// Host numbers in rank order as runs `[host, count]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostRuns(Vec<(u32, u32)>);

impl HostRuns {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many hosts.
    pub fn len(&self) -> usize {
        self.0.iter().map(|&(_, n)| n as usize).sum()
    }

    /// Appends one host.
    pub fn push(&mut self, host: u32) {
        self.push_many(host, 1);
    }

    /// Appends `count` of one host.
    pub fn push_many(&mut self, host: u32, count: usize) {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        match self.0.last_mut() {
            Some((h, n)) if *h == host => *n += count,
            _ if count > 0 => self.0.push((host, count)),
            _ => {}
        }
    }

    /// Appends `other`'s hosts.
    pub fn append(&mut self, other: &HostRuns) {
        for &(h, n) in &other.0 {
            self.push_many(h, n as usize);
        }
    }

    /// Whether every entry is one host.
    pub fn single(&self) -> bool {
        self.0.len() <= 1
    }

    /// The hosts, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0
            .iter()
            .flat_map(|&(h, n)| std::iter::repeat_n(h, n as usize))
    }

    /// Renumbers every host.
    pub fn renumber(&mut self, mut f: impl FnMut(u32) -> Option<u32>) -> Option<()> {
        for (h, _) in &mut self.0 {
            *h = f(*h)?;
        }
        Some(())
    }
}

/// Most slides a rank has: its executable, libc, libmpi, heap, stacks..., and its
/// threads' ids.
const MAX_SLIDES: usize = 16;

/// How one number differs from the template's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Token {
    /// By this much.
    By(i64),
    /// By the rank's distance from the template's rank.
    Rank,
    /// By the rank's distance from the template's rank and this much: a number each
    /// rank holds at its own distance from itself where the template's is another (the
    /// first member of its row, for a rank of another column than the template's).
    RankBy(i64),
    /// By the pid's distance from the template's pid.
    Pid,
    /// The template's value moved by the rank's distance, around the job's size (a
    /// neighbour in a ring: rank 0's left is N-1, rank 1's is 0).
    Wrap,
    /// By the rank's own slide of this number (its place in the rank's `slides`): where
    /// address space layout randomisation put a library, the heap or a stack.
    Slide(u8),
    /// This value, whatever the template's (a difference beyond 64 bits).
    Is(i128),
}

impl Serialize for Token {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Token::By(d) => s.serialize_i64(d),
            Token::Rank => s.serialize_str("r"),
            Token::RankBy(e) => s.serialize_str(&format!("r{e}")),
            Token::Pid => s.serialize_str("p"),
            Token::Slide(k) => s.serialize_str(&format!("s{k}")),
            Token::Wrap => s.serialize_str("w"),
            Token::Is(v) => [v].serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_i64()
                .map(Token::By)
                .ok_or_else(|| serde::de::Error::custom("a difference beyond 64 bits")),
            Value::String(s) if s == "r" => Ok(Token::Rank),
            Value::String(s) if s.starts_with('r') => s[1..]
                .parse::<i64>()
                .ok()
                .filter(|&e| e != 0)
                .map(Token::RankBy)
                .ok_or_else(|| serde::de::Error::custom(format!("not a token: {s}"))),
            Value::String(s) if s == "p" => Ok(Token::Pid),
            Value::String(s) if s == "w" => Ok(Token::Wrap),
            Value::String(s) if s.starts_with('s') => s[1..]
                .parse::<u8>()
                .ok()
                .filter(|&k| usize::from(k) < MAX_SLIDES)
                .map(Token::Slide)
                .ok_or_else(|| serde::de::Error::custom(format!("not a token: {s}"))),
            Value::Array(a) if a.len() == 1 => integer(&a[0])
                .map(Token::Is)
                .ok_or_else(|| serde::de::Error::custom("not an integer")),
            other => Err(serde::de::Error::custom(format!("not a token: {other}"))),
        }
    }
}

/// A JSON integer as i128 (it is an i64 or a u64); `None` for a fraction.
fn integer(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    }
}

fn number(value: i128) -> Option<Number> {
    u64::try_from(value)
        .map(Number::from)
        .ok()
        .or_else(|| i64::try_from(value).ok().map(Number::from))
}

/// Top-level fields a rank's own line carries, not its state.
const OWN_FIELDS: [&str; 3] = ["rank", "pid", "host"];

/// A template's shape (its text with every number a placeholder) and its numbers.
pub(crate) fn shape_and_numbers(value: &Value) -> (String, Vec<i128>) {
    let mut numbers = Vec::new();
    integers(value, &mut numbers);
    (shape(value).to_string(), numbers)
}

/// The integers of a value in a fixed order (objects' keys sorted, as serde_json keeps
/// them), numbers written inside strings included ("pid 4711", "request 0x55ab7000"),
/// for templates and ranks of the same shape to pair number by number.
fn integers(value: &Value, out: &mut Vec<i128>) {
    match value {
        Value::Number(_) => out.extend(integer(value)),
        Value::String(text) => out.extend(split_text(text).1),
        Value::Array(items) => items.iter().for_each(|v| integers(v, out)),
        Value::Object(map) => map.values().for_each(|v| integers(v, out)),
        _ => {}
    }
}

/// The value with every integer zeroed and every number in a string replaced by a
/// placeholder: ranks of one shape differ only in numbers.
fn shape(value: &Value) -> Value {
    match value {
        Value::Number(_) if integer(value).is_some() => Value::from(0),
        Value::String(text) => Value::String(split_text(text).0),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        other => other.clone(),
    }
}

/// Rewrites the integers of `value`, in [`integers`] order, from `values`.
fn set_integers(
    value: &mut Value,
    values: &mut impl Iterator<Item = i128>,
) -> Result<(), StreamError> {
    match value {
        Value::Number(_) if integer(value).is_some() => {
            let v = values.next().ok_or(StreamError::FewerDifferences)?;
            *value = Value::Number(number(v).ok_or(StreamError::Number(v))?);
        }
        Value::String(text) => *text = join_text(&split_text(text).0, values)?,
        Value::Array(items) => {
            for v in items {
                set_integers(v, values)?;
            }
        }
        Value::Object(map) => {
            for v in map.values_mut() {
                set_integers(v, values)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Marks a placeholder in a string's pattern (and, doubled, itself).
const MARK: char = '\u{1}';

/// A string as a pattern and the numbers taken out of it: decimal numbers (no leading
/// zero, at most 18 digits) and `0x` hexadecimal ones (lower case, no leading zero, at
/// most 16 digits), each of which [`join_text`] writes back exactly as it was.
fn split_text(text: &str) -> (String, Vec<i128>) {
    let bytes = text.as_bytes();
    let mut pattern = String::with_capacity(text.len());
    let mut numbers = Vec::new();
    let mut i = 0;
    let mut literal = 0;
    while i < bytes.len() {
        let after_digit = i > 0 && bytes[i - 1].is_ascii_alphanumeric();
        let taken = if after_digit {
            None
        } else if bytes[i..].starts_with(b"0x") {
            let digits = bytes[i + 2..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                .count();
            let run = &text[i + 2..i + 2 + digits];
            let end = i + 2 + digits;
            let clean = (1..=16).contains(&digits)
                && (digits == 1 || !run.starts_with('0'))
                && !bytes.get(end).is_some_and(u8::is_ascii_alphanumeric);
            clean
                .then(|| u64::from_str_radix(run, 16).ok())
                .flatten()
                .map(|v| (end, i128::from(v), 'x'))
        } else if bytes[i].is_ascii_digit() {
            let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            let run = &text[i..i + digits];
            let end = i + digits;
            let clean = digits <= 18
                && (digits == 1 || !run.starts_with('0'))
                && !bytes.get(end).is_some_and(u8::is_ascii_alphabetic);
            clean
                .then(|| run.parse::<i128>().ok())
                .flatten()
                .map(|v| (end, v, 'd'))
        } else {
            None
        };
        match taken {
            Some((end, value, kind)) => {
                push_literal(&mut pattern, &text[literal..i]);
                pattern.push(MARK);
                pattern.push(kind);
                numbers.push(value);
                i = end;
                literal = end;
            }
            None => i += 1,
        }
    }
    push_literal(&mut pattern, &text[literal..]);
    (pattern, numbers)
}

fn push_literal(pattern: &mut String, literal: &str) {
    for c in literal.chars() {
        if c == MARK {
            pattern.push(MARK);
        }
        pattern.push(c);
    }
}

/// The string of a [`split_text`] pattern with `values` in its placeholders.
fn join_text(
    pattern: &str,
    values: &mut impl Iterator<Item = i128>,
) -> Result<String, StreamError> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != MARK {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(MARK) => out.push(MARK),
            Some(kind @ ('d' | 'x')) => {
                let v = values.next().ok_or(StreamError::FewerDifferences)?;
                if kind == 'd' && v >= 0 {
                    out.push_str(&v.to_string());
                } else if kind == 'x' && (0..=i128::from(u64::MAX)).contains(&v) {
                    out.push_str(&format!("{v:#x}"));
                } else {
                    return Err(StreamError::Number(v));
                }
            }
            _ => return Err(StreamError::Pattern),
        }
    }
    Ok(out)
}

/// A rank's dump as a template would hold it: no rank, pid or host. Groups in
/// progression (`0..N`) are written as ranges without becoming JSON first: a job of a
/// million ranks costs no million-element value per rank.
fn state_value(dump: &RankDump) -> Result<Value, StreamError> {
    let progression = |group: Option<&CommGroup>| {
        let (first, step, len) = group?.progression()?;
        (len as usize >= RANGE_AT_LEAST).then(|| [first.into(), step.into(), len.into()])
    };
    let mut ranges: Vec<Option<[i64; 3]>> = Vec::new();
    let mut light;
    let dump = match &dump.outcome {
        Ok(comms)
            if comms
                .iter()
                .any(|c| progression(c.group.as_ref()).is_some()) =>
        {
            light = dump.clone();
            if let Ok(comms) = &mut light.outcome {
                for c in comms {
                    let range = progression(c.group.as_ref());
                    if range.is_some() {
                        c.group = None;
                    }
                    ranges.push(range);
                }
            }
            &light
        }
        _ => dump,
    };
    let mut value = serde_json::to_value(dump).map_err(StreamError::Encode)?;
    if let Value::Object(map) = &mut value {
        for field in OWN_FIELDS {
            map.remove(field);
        }
    }
    let mut value = compact(value);
    if let Some(comms) = value.get_mut("communicators").and_then(Value::as_array_mut) {
        for (c, range) in comms.iter_mut().zip(&ranges) {
            if let (Some(range), Some(group)) = (range, c.get_mut("group")) {
                let mut map = serde_json::Map::new();
                map.insert(RANGE.into(), Value::from(range.to_vec()));
                *group = Value::Object(map);
            }
        }
    }
    Ok(value)
}

/// A group in arithmetic progression, as [`compact`] writes it: start, step, length.
/// The key of an arithmetic progression written as its start, step and length.
const RANGE: &str = "\u{1}range";
/// Shortest list of integers written as a progression.
const RANGE_AT_LEAST: usize = 4;

/// The value with each long list of integers in arithmetic progression (a group of
/// ranks `0..N`) as `{RANGE: [start, step, length]}`: a job's size costs nothing.
fn compact(value: Value) -> Value {
    match value {
        Value::Array(items) => {
            let ints: Option<Vec<i64>> = items.iter().map(Value::as_i64).collect();
            if let Some(ints) = ints.filter(|v| v.len() >= RANGE_AT_LEAST) {
                let step = ints[1].wrapping_sub(ints[0]);
                let progression = ints
                    .windows(2)
                    .all(|w| w[0].checked_add(step) == Some(w[1]));
                if progression {
                    let mut range = serde_json::Map::new();
                    range.insert(
                        RANGE.into(),
                        Value::from(vec![ints[0], step, ints.len() as i64]),
                    );
                    return Value::Object(range);
                }
            }
            Value::Array(items.into_iter().map(compact).collect())
        }
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, compact(v))).collect())
        }
        other => other,
    }
}

/// A range's start, step and length; one too long for any job is an error, not an
/// allocation.
fn range_spec(spec: &Value) -> Result<[i64; 3], StreamError> {
    let spec: Vec<i64> = spec
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let [start, step, length] = spec[..] else {
        return Err(StreamError::Range(spec.len() as i64));
    };
    if !(0..=MAX_RANGE).contains(&length) {
        return Err(StreamError::Range(length));
    }
    Ok([start, step, length])
}

/// Undoes [`compact`]; a range too long for the job is an error, not an allocation.
fn expand(value: Value) -> Result<Value, StreamError> {
    Ok(match value {
        Value::Object(map) if map.len() == 1 && map.contains_key(RANGE) => {
            let [start, step, length] = range_spec(&map[RANGE])?;
            let mut items = Vec::with_capacity(length as usize);
            let mut v = start;
            for _ in 0..length {
                items.push(Value::from(v));
                v = v
                    .checked_add(step)
                    .ok_or(StreamError::Number(i128::from(v) + i128::from(step)))?;
            }
            Value::Array(items)
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(expand).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| Ok((k, expand(v)?)))
                .collect::<Result<_, StreamError>>()?,
        ),
        other => other,
    })
}

/// Longest range rebuilt: the most ranks a process table may list.
const MAX_RANGE: i64 = 1 << 22;

/// A template's value as a rank (its own fields filled in later).
fn rank_dump(mut value: Value) -> Result<RankDump, StreamError> {
    // Groups written as ranges are built as groups, not as JSON values first.
    let mut ranges: Vec<Option<Value>> = Vec::new();
    if let Some(comms) = value.get_mut("communicators").and_then(Value::as_array_mut) {
        for c in comms {
            let range = c
                .get_mut("group")
                .filter(|g| g.get(RANGE).is_some())
                .map(Value::take);
            ranges.push(range);
        }
    }
    let mut value = expand(value)?;
    if let Value::Object(map) = &mut value {
        map.insert("rank".into(), Value::from(-1));
        map.insert("pid".into(), Value::Null);
        map.insert("host".into(), Value::Null);
    }
    let mut dump: RankDump = serde_json::from_value(value).map_err(StreamError::NotARank)?;
    if let Ok(comms) = &mut dump.outcome {
        for (c, range) in comms.iter_mut().zip(ranges) {
            if let Some(range) = range {
                c.group = Some(group_of(&range)?);
            }
        }
    }
    Ok(dump)
}

/// The group a range value stands for (held as the progression it is).
fn group_of(range: &Value) -> Result<CommGroup, StreamError> {
    let [start, step, length] = range_spec(&range[RANGE])?;
    CommGroup::progression_of(start, step, length).ok_or_else(|| {
        let last = i128::from(start) + i128::from(length - 1) * i128::from(step);
        StreamError::Number(if i32::try_from(start).is_err() {
            start.into()
        } else {
            last
        })
    })
}

/// A template as the encoder compares ranks with it.
#[derive(Debug)]
struct Template {
    numbers: Vec<i128>,
    /// The ids of its threads but the main one.
    tids: Vec<i128>,
    rank: i32,
    pid: Option<i32>,
    modulus: Option<i64>,
    id: u32,
}

/// The size of a rank's MPI_COMM_WORLD.
fn world_size(dump: &RankDump) -> Option<i64> {
    dump.communicators()
        .iter()
        .find(|c| c.name == "MPI_COMM_WORLD")
        .map(|c| c.size)
        .filter(|&n| n > 0)
}

/// A rank written against its template, before its line is found.
struct Encoded {
    state: u32,
    rank: i32,
    /// Its rank's distance from its template's (`None`: a rank not known).
    by_rank: Option<i128>,
    /// Each number's difference from the template's (empty for the template's own).
    ds: Vec<i128>,
    pid: Option<i32>,
    delta: Vec<(Token, u32)>,
    slides: Vec<i64>,
}

/// Each number written as what the ranks of one template hold alike: where they hold
/// fewer distances from their own ranks than values (`By` 4 for rank 5 and `By` 8 for
/// rank 9 against rank 0: the first member of each one's row), as `RankBy` (here -1 for
/// both); where fewer values than distances (a local rank of 1 read as `Rank` for rank
/// 1 and as `By` 1 for rank 5, or as `Pid` where pids wrapped around to near it), as
/// `By`. Ranks of one column of a split's rows are then one line, whichever rank is
/// their template.
fn tie_to_ranks(encoded: &mut [Encoded]) {
    let mut by_state: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, e) in encoded.iter().enumerate() {
        if e.by_rank.is_some() && !e.delta.is_empty() {
            by_state.entry(e.state).or_default().push(i);
        }
    }
    for members in by_state.values().filter(|m| m.len() > 1) {
        let tokens: Vec<Vec<Token>> = members
            .iter()
            .map(|&i| {
                encoded[i]
                    .delta
                    .iter()
                    .flat_map(|&(t, n)| std::iter::repeat_n(t, n as usize))
                    .collect()
            })
            .collect();
        let width = tokens[0].len();
        if tokens
            .iter()
            .zip(members)
            .any(|(t, &i)| t.len() != width || encoded[i].ds.len() != width)
        {
            continue;
        }
        // Per number: a distance from the rank (`Some(true)`) or a value (`Some(false)`)
        // where the ranks hold fewer of one than of the other.
        let mut tie: Vec<Option<bool>> = vec![None; width];
        for (at, tie) in tie.iter_mut().enumerate() {
            let mut values = std::collections::HashSet::new();
            let mut distances = std::collections::HashSet::new();
            for (t, &i) in tokens.iter().zip(members) {
                let by = encoded[i].by_rank.unwrap_or(0);
                if !matches!(t[at], Token::By(_) | Token::Rank | Token::Wrap | Token::Pid) {
                    continue;
                }
                let d = encoded[i].ds[at];
                values.insert(d);
                distances.insert(d - by);
            }
            *tie = match distances.len().cmp(&values.len()) {
                std::cmp::Ordering::Less => Some(true),
                std::cmp::Ordering::Greater => Some(false),
                std::cmp::Ordering::Equal => None,
            };
        }
        if tie.iter().all(Option::is_none) {
            continue;
        }
        // Distances from the rank some ranks hold at their own distance (`RankBy`): the
        // ranks that read as `Wrap` there without wrapping around are written `Rank`,
        // as those of other templates are (a ring, all `Wrap`, stays as it is).
        let by_own: Vec<bool> = (0..width)
            .map(|at| {
                tie[at] == Some(true)
                    && tokens.iter().zip(members).any(|(t, &i)| {
                        matches!(t[at], Token::By(_))
                            && Some(encoded[i].ds[at]) != encoded[i].by_rank
                    })
            })
            .collect();
        for (t, &i) in tokens.into_iter().zip(members) {
            let by = encoded[i].by_rank.unwrap_or(0);
            let mut runs: Vec<(Token, u32)> = Vec::new();
            for (at, token) in t.into_iter().enumerate() {
                let token = match (token, tie[at]) {
                    (Token::By(d), Some(true)) => match i64::try_from(i128::from(d) - by) {
                        Ok(0) => Token::Rank,
                        Ok(e) => Token::RankBy(e),
                        Err(_) => token,
                    },
                    (Token::Rank | Token::Wrap | Token::Pid, Some(false)) => {
                        i64::try_from(encoded[i].ds[at]).map_or(token, Token::By)
                    }
                    (Token::Wrap, Some(true)) if by_own[at] && encoded[i].ds[at] == by => {
                        Token::Rank
                    }
                    _ => token,
                };
                match runs.last_mut() {
                    Some((last, count)) if *last == token => *count += 1,
                    _ => runs.push((token, 1)),
                }
            }
            encoded[i].delta = runs;
        }
    }
}

/// A line of ranks being gathered.
struct Line {
    state: u32,
    delta: Vec<(Token, u32)>,
    members: Vec<(i32, Option<i32>, Vec<i64>)>,
}

/// Turns a host's dumps into records, templates first seen sent once per stream.
#[derive(Debug, Default)]
pub struct Encoder {
    /// Each shape's templates.
    states: HashMap<String, Vec<Template>>,
    next_state: u32,
}

impl Encoder {
    /// A fresh stream.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// The records of `dumps`, ranks of host `host`.
    pub fn encode(&mut self, host: u32, dumps: &[RankDump]) -> Result<Vec<Record>, StreamError> {
        let mut out = Vec::new();
        // Lines in order of first appearance, ranks with equal state and differences merged.
        let mut lines: Vec<Line> = Vec::new();
        let mut line_of: HashMap<(u32, Vec<(Token, u32)>), usize> = HashMap::new();
        let mut placed: std::collections::HashSet<(usize, i32)> = Default::default();
        let mut encoded: Vec<Encoded> = Vec::with_capacity(dumps.len());
        for dump in dumps {
            let value = state_value(dump)?;
            let mut numbers = Vec::new();
            integers(&value, &mut numbers);
            let key = shape(&value).to_string();
            // What a template costs on the wire, roughly; a run of differences ~12 bytes.
            let template_bytes = key.len();
            let candidates = self.states.entry(key).or_default();
            // The template with the fewest runs of differences.
            let best = candidates
                .iter()
                .map(|t| (delta(&numbers, t, dump), t.id))
                .min_by_key(|((d, _), _)| d.len());
            let ranked = |t: &Template| {
                (dump.rank >= 0 && t.rank >= 0).then(|| i128::from(dump.rank) - i128::from(t.rank))
            };
            let ((delta, slides), state, ds, by_rank) = match best {
                Some((d, id))
                    if d.0.len() * 12 <= template_bytes / 2
                        || candidates.len() >= MAX_TEMPLATES_PER_SHAPE =>
                {
                    // Each number's difference from the template's.
                    let t = candidates.iter().find(|t| t.id == id);
                    let ds = t
                        .map(|t| numbers.iter().zip(&t.numbers).map(|(n, t)| n - t).collect())
                        .unwrap_or_default();
                    (d, id, ds, t.and_then(ranked))
                }
                _ => {
                    let id = self.next_state;
                    self.next_state += 1;
                    let modulus = world_size(dump);
                    candidates.push(Template {
                        numbers,
                        tids: thread_ids(dump),
                        rank: dump.rank,
                        pid: dump.pid,
                        modulus,
                        id,
                    });
                    out.push(Record::State(StateRecord {
                        id,
                        rank: dump.rank,
                        pid: dump.pid,
                        modulus,
                        dump: value,
                    }));
                    // Its own template: no distance.
                    let own = (dump.rank >= 0).then_some(0);
                    ((Vec::new(), Vec::new()), id, Vec::new(), own)
                }
            };
            encoded.push(Encoded {
                state,
                rank: dump.rank,
                by_rank,
                ds,
                pid: dump.pid,
                delta,
                slides,
            });
        }
        tie_to_ranks(&mut encoded);
        for Encoded {
            state,
            rank,
            pid,
            delta,
            slides,
            ..
        } in encoded
        {
            // A process of unknown rank, or a rank given twice, has a line of its own.
            let shared = line_of
                .get(&(state, delta.clone()))
                .copied()
                .filter(|&i| rank >= 0 && !placed.contains(&(i, rank)));
            let index = match shared {
                Some(i) => i,
                None => {
                    lines.push(Line {
                        state,
                        delta: delta.clone(),
                        members: Vec::new(),
                    });
                    if rank >= 0 {
                        line_of.insert((state, delta), lines.len() - 1);
                    }
                    lines.len() - 1
                }
            };
            placed.insert((index, rank));
            lines[index].members.push((rank, pid, slides));
        }
        absorb_templates(&mut lines);
        for Line {
            state,
            delta,
            mut members,
        } in lines
        {
            members.sort_by_key(|&(rank, _, _)| rank);
            let slides = if members.iter().all(|m| m.2.is_empty()) {
                Vec::new()
            } else {
                members.iter().map(|m| m.2.clone()).collect()
            };
            out.push(Record::Ranks(RanksRecord {
                host,
                state,
                ranks: members
                    .iter()
                    .filter_map(|m| u32::try_from(m.0).ok())
                    .collect(),
                pids: members.iter().map(|m| m.1).collect(),
                hosts: HostRuns::default(),
                delta,
                slides,
            }));
        }
        Ok(out)
    }
}

/// Moves each template's own rank into a line of its state whose differences are only
/// distances of rank and pid and slides: all zero for it, so the line rebuilds it exactly.
fn absorb_templates(lines: &mut Vec<Line>) {
    let relative = |delta: &[(Token, u32)]| {
        !delta.is_empty()
            && delta.iter().all(|(t, _)| {
                matches!(
                    t,
                    Token::By(0) | Token::Rank | Token::Pid | Token::Wrap | Token::Slide(_)
                )
            })
    };
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let alone = line.delta.is_empty() && line.members.len() == 1 && line.members[0].0 >= 0;
        let target = alone
            .then(|| {
                let (state, rank) = (line.state, line.members[0].0);
                lines.iter().position(|l| {
                    l.state == state && relative(&l.delta) && !l.members.iter().any(|m| m.0 == rank)
                })
            })
            .flatten();
        match target {
            Some(t) => {
                let mut members = lines.remove(i).members;
                let t = if t > i { t - 1 } else { t };
                let slides = lines[t]
                    .delta
                    .iter()
                    .filter_map(|(token, _)| match token {
                        Token::Slide(k) => Some(usize::from(*k) + 1),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                for m in &mut members {
                    m.2 = vec![0; slides];
                }
                lines[t].members.extend(members);
            }
            None => i += 1,
        }
    }
}

/// Beyond this many templates of one shape, ranks take the nearest one: a template
/// costs its whole dump, a long difference only its runs.
const MAX_TEMPLATES_PER_SHAPE: usize = 8;

/// The run-length coded differences of `numbers` from `template`'s.
fn delta(numbers: &[i128], template: &Template, dump: &RankDump) -> (Vec<(Token, u32)>, Vec<i64>) {
    let (t_rank, t_pid) = (template.rank, template.pid);
    let modulus = template.modulus.map(i128::from);
    let mut slides: Vec<i64> = Vec::new();
    let by_rank = i128::from(dump.rank) - i128::from(t_rank);
    let by_pid = match (dump.pid, t_pid) {
        (Some(p), Some(t)) => Some(i128::from(p) - i128::from(t)),
        _ => None,
    };
    let mut runs: Vec<(Token, u32)> = Vec::new();
    let ranked = dump.rank >= 0 && t_rank >= 0;
    let tids = thread_ids(dump);
    for (&n, &t) in numbers.iter().zip(&template.numbers) {
        let d = n - t;
        // Where the pid and the rank move alike (pids started in rank order), a number
        // nearer the template's pid than its rank is a pid or a thread id: read as the
        // rank's, it would tie ranks of other hosts to this host's pids.
        let near_pid =
            t_pid.is_some_and(|p| (t - i128::from(p)).abs() < (t - i128::from(t_rank)).abs());
        let token = if template.tids.contains(&t) && tids.contains(&n) && slides.len() < MAX_SLIDES
        {
            // A thread's id, each a slide of its own (even where it moved as the pid
            // did, or not at all, or wrapped around at pid_max): ranks whose threads the
            // kernel numbered otherwise are one line.
            slides.push(d as i64);
            Token::Slide((slides.len() - 1) as u8)
        } else if d == 0 {
            Token::By(0)
        } else if near_pid && Some(d) == by_pid {
            Token::Pid
        } else if ranked
            && modulus.is_some_and(|m| (0..m).contains(&t) && (t + by_rank).rem_euclid(m) == n)
        {
            // Before Rank: a ring's neighbours read the same at its ends as in between.
            Token::Wrap
        } else if d == by_rank && ranked {
            Token::Rank
        } else if Some(d) == by_pid {
            Token::Pid
        } else {
            match i64::try_from(d) {
                // An address moved by the layout: the same move as others of the rank.
                Ok(d) if d.unsigned_abs() >= SLIDE_AT_LEAST => {
                    match slides.iter().position(|&s| s == d) {
                        Some(k) => Token::Slide(k as u8),
                        None if slides.len() < MAX_SLIDES => {
                            slides.push(d);
                            Token::Slide((slides.len() - 1) as u8)
                        }
                        None => Token::By(d),
                    }
                }
                Ok(d) => Token::By(d),
                Err(_) => Token::Is(n),
            }
        };
        match runs.last_mut() {
            Some((last, count)) if *last == token => *count += 1,
            _ => runs.push((token, 1)),
        }
    }
    if runs.len() == 1 && runs[0].0 == Token::By(0) {
        runs.clear();
    }
    (runs, slides)
}

/// The ids of `dump`'s threads but its main one (whose id is its pid): what the kernel
/// gave them, nothing of the rank's state.
fn thread_ids(dump: &RankDump) -> Vec<i128> {
    dump.threads
        .iter()
        .map(|t| i128::from(t.tid))
        .filter(|&t| dump.pid.is_none_or(|p| i128::from(p) != t))
        .collect()
}

/// Differences this large are taken for moved addresses (a page or more).
const SLIDE_AT_LEAST: u64 = 1 << 12;

/// The communicators (by index) whose group in `value` is the template's: each is set
/// to null in `value`, for the caller to copy the template's decoded group instead.
fn shared_groups(value: &mut Value, template: &Value) -> Vec<usize> {
    let (Some(comms), Some(templates)) = (
        value.get_mut("communicators").and_then(Value::as_array_mut),
        template.get("communicators").and_then(Value::as_array),
    ) else {
        return Vec::new();
    };
    let mut shared = Vec::new();
    for (i, (c, t)) in comms.iter_mut().zip(templates).enumerate() {
        let (Some(group), Some(t_group)) = (c.get_mut("group"), t.get("group")) else {
            continue;
        };
        if !group.is_null() && group == t_group {
            *group = Value::Null;
            shared.push(i);
        }
    }
    shared
}

/// Rebuilds ranks from records: one per stream.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Each template, with its numbers in [`integers`] order.
    states: HashMap<u32, (StateRecord, Vec<i128>)>,
}

impl Decoder {
    /// A fresh stream.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Takes a template.
    pub fn add_state(&mut self, state: StateRecord) {
        let mut numbers = Vec::new();
        integers(&state.dump, &mut numbers);
        self.states.insert(state.id, (state, numbers));
    }

    /// The ranks of a line, in its order; `host_name` names each host number.
    pub fn ranks(
        &self,
        line: &RanksRecord,
        host_name: impl Fn(u32) -> String,
    ) -> Result<Vec<RankDump>, StreamError> {
        let (state, template_numbers) = self
            .states
            .get(&line.state)
            .ok_or(StreamError::UnknownState(line.state))?;
        let members: Vec<i32> = if line.ranks.is_empty() {
            vec![-1; line.pids.len()]
        } else {
            line.ranks.iter().map(|r| r as i32).collect()
        };
        if members.len() != line.pids.len() {
            return Err(StreamError::Lengths {
                ranks: members.len(),
                other: line.pids.len(),
                what: "pids",
            });
        }
        if !line.hosts.is_empty() && line.hosts.len() != members.len() {
            return Err(StreamError::Lengths {
                ranks: members.len(),
                other: line.hosts.len(),
                what: "hosts",
            });
        }
        let mut hosts: Box<dyn Iterator<Item = u32>> = if line.hosts.is_empty() {
            Box::new(std::iter::repeat(line.host))
        } else {
            Box::new(line.hosts.iter())
        };
        let mut names: HashMap<u32, String> = HashMap::new();
        let mut plain: Option<RankDump> = None;
        if !line.slides.is_empty() && line.slides.len() != members.len() {
            return Err(StreamError::Lengths {
                ranks: members.len(),
                other: line.slides.len(),
                what: "lists of slides",
            });
        }
        let mut out = Vec::with_capacity(members.len());
        for (i, (&rank, pid)) in members.iter().zip(line.pids.iter()).enumerate() {
            let slides = line.slides.get(i).map(Vec::as_slice).unwrap_or_default();
            let mut dump = if line.delta.is_empty() {
                // The template's numbers: decoded once for the whole line.
                match &plain {
                    Some(d) => d.clone(),
                    None => {
                        let d = rank_dump(state.dump.clone())
                            .map_err(|e| StreamError::Template(Box::new(e)))?;
                        plain = Some(d.clone());
                        d
                    }
                }
            } else {
                let by_rank = i128::from(rank) - i128::from(state.rank);
                let by_pid = match (pid, state.pid) {
                    (Some(p), Some(t)) => i128::from(p) - i128::from(t),
                    _ => 0,
                };
                let mut runs = line
                    .delta
                    .iter()
                    .flat_map(|&(token, n)| std::iter::repeat_n(token, n as usize));
                let mut values = Vec::with_capacity(template_numbers.len());
                for &t in template_numbers {
                    let token = runs.next().ok_or(StreamError::FewerDifferences)?;
                    values.push(match token {
                        Token::By(d) => t + i128::from(d),
                        Token::Rank => t + by_rank,
                        Token::RankBy(e) => t + by_rank + i128::from(e),
                        Token::Pid => t + by_pid,
                        Token::Wrap => match state.modulus {
                            Some(m) if m > 0 => (t + by_rank).rem_euclid(i128::from(m)),
                            _ => return Err(StreamError::WrapWithoutSize),
                        },
                        Token::Slide(k) => {
                            let slide = slides
                                .get(usize::from(k))
                                .ok_or(StreamError::MissingSlide(k))?;
                            t + i128::from(*slide)
                        }
                        Token::Is(v) => v,
                    });
                }
                if runs.next().is_some() {
                    return Err(StreamError::MoreDifferences);
                }
                let mut value = state.dump.clone();
                set_integers(&mut value, &mut values.into_iter())?;
                // Groups the rank shares with the template (COMM_WORLD's 0..N) are
                // copied from the template decoded once, not rebuilt number by number.
                let shared = shared_groups(&mut value, &state.dump);
                let mut dump =
                    rank_dump(value).map_err(|e| StreamError::Differences(Box::new(e)))?;
                if !shared.is_empty() {
                    if plain.is_none() {
                        plain = Some(
                            rank_dump(state.dump.clone())
                                .map_err(|e| StreamError::Template(Box::new(e)))?,
                        );
                    }
                    let base = plain
                        .as_ref()
                        .map(RankDump::communicators)
                        .unwrap_or_default();
                    if let Ok(comms) = &mut dump.outcome {
                        for i in shared {
                            if let (Some(c), Some(b)) = (comms.get_mut(i), base.get(i)) {
                                c.group.clone_from(&b.group);
                            }
                        }
                    }
                }
                dump
            };
            dump.rank = rank;
            dump.pid = pid;
            let host = hosts.next().unwrap_or(line.host);
            dump.host = Some(names.entry(host).or_insert_with(|| host_name(host)).clone());
            out.push(dump);
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests;
