//! The answers one file's DWARF gave to type queries, kept on disk between runs.
//!
//! An MQD library asks about 20 type names, their sizes and 50 field offsets; on a cold
//! start each miss or hit costs an index of the file's DWARF. The answers depend only on
//! the file, so they are kept per file under the user's cache directory, keyed by its
//! build-id and size (else its path, size, inode and modification time), and the next
//! `mqd` on the same `libmpi.so` answers them without reading any DWARF.
//!
//! Only answers that stayed within the file are kept (a declaration resolved in another
//! object is not). The file is text, one answer per line, checked by a trailer with a
//! line count and CRC-32: a truncated, corrupt or foreign file is ignored and rewritten.
//! Writers merge with what is there, write a private temporary file and rename it over
//! the old one, so concurrent `mqd`s never read half a file; the last one wins, which
//! at worst forgets answers that will be found again.

use crate::bytes::crc32;
use crate::dwarf::{DieRef, NameKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bumped whenever what a line means changes (a [`DieRef`]'s unit numbering, say).
const FORMAT: &str = "mqd-type-answers 1";

/// The default cache directory: `$MQD_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/mqd/types`, else
/// `$HOME/.cache/mqd/types`.
pub fn default_directory() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("MQD_CACHE_DIR") {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".cache"),
    };
    Some(base.join("mqd").join("types"))
}

/// What identifies the file's contents, as part of a file name: its build-id and size
/// (a file rewritten after the link keeps its build-id: `objcopy`, `dwz` and
/// `gdb-add-index` change its DWARF or its size), else its path, inode, size and
/// modification time.
pub(crate) fn key_of(build_id: Option<&[u8]>, path: &Path, stat: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    match build_id {
        Some(id) if !id.is_empty() => {
            let mut key = String::from("id-");
            for byte in id {
                let _ = write!(key, "{byte:02x}");
            }
            let _ = write!(key, "-{}", stat.len());
            key
        }
        _ => {
            let identity = format!(
                "{}\0{}\0{}\0{}\0{}\0{}",
                path.display(),
                stat.dev(),
                stat.ino(),
                stat.len(),
                stat.mtime(),
                stat.mtime_nsec()
            );
            format!("file-{:08x}-{}", crc32(identity.as_bytes()), identity.len())
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
struct Answers {
    names: BTreeMap<(u8, Vec<u8>), Option<DieRef>>,
    sizes: BTreeMap<DieRef, Option<u64>>,
    fields: BTreeMap<(DieRef, String), Option<u64>>,
}

fn kind_code(kind: NameKind) -> u8 {
    match kind {
        NameKind::Struct => b'S',
        NameKind::Union => b'U',
        NameKind::Enum => b'E',
        NameKind::Plain => b'P',
        NameKind::Base => b'B',
    }
}

/// Answers of one file, loaded from disk on first use and written back when dropped
/// with new ones.
#[derive(Debug)]
pub(crate) struct Memo {
    key: String,
    /// The cache directory when it was made; `None`: remember for this run only.
    dir: Option<PathBuf>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    loaded: bool,
    answers: Answers,
    /// Answers learnt since loading.
    fresh: Answers,
}

impl Memo {
    pub(crate) fn in_dir(key: String, dir: Option<PathBuf>) -> Memo {
        Memo {
            key,
            dir,
            state: Mutex::new(State::default()),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.loaded {
            state.loaded = true;
            if let Some(path) = self.path() {
                state.answers = read(&path, &self.key).unwrap_or_default();
            }
        }
        f(&mut state)
    }

    fn path(&self) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{}.answers", self.key)))
    }

    /// What names this file's entries in the cache, and the cache's directory.
    pub(crate) fn place(&self) -> (&str, Option<&Path>) {
        (&self.key, self.dir.as_deref())
    }

    /// Whether no answer is known yet (none on disk either).
    pub(crate) fn is_empty(&self) -> bool {
        self.with(|s| s.answers == Answers::default())
    }

    /// A remembered lookup: `Some(answer)` when known.
    pub(crate) fn name(&self, kind: NameKind, name: &[u8]) -> Option<Option<DieRef>> {
        let key = (kind_code(kind), name.to_vec());
        self.with(|s| s.answers.names.get(&key).copied())
    }

    pub(crate) fn remember_name(&self, kind: NameKind, name: &[u8], die: Option<DieRef>) {
        if !storable(name) {
            return;
        }
        let key = (kind_code(kind), name.to_vec());
        self.with(|s| {
            s.answers.names.insert(key.clone(), die);
            s.fresh.names.insert(key, die);
        });
    }

    pub(crate) fn size(&self, die: DieRef) -> Option<Option<u64>> {
        self.with(|s| s.answers.sizes.get(&die).copied())
    }

    pub(crate) fn remember_size(&self, die: DieRef, size: Option<u64>) {
        self.with(|s| {
            s.answers.sizes.insert(die, size);
            s.fresh.sizes.insert(die, size);
        });
    }

    pub(crate) fn field(&self, die: DieRef, path: &str) -> Option<Option<u64>> {
        let key = (die, path.to_owned());
        self.with(|s| s.answers.fields.get(&key).copied())
    }

    pub(crate) fn remember_field(&self, die: DieRef, path: &str, offset: Option<u64>) {
        if !storable(path.as_bytes()) {
            return;
        }
        let key = (die, path.to_owned());
        self.with(|s| {
            s.answers.fields.insert(key.clone(), offset);
            s.fresh.fields.insert(key, offset);
        });
    }

    /// Writes the new answers, merged with what is on disk now. Errors are ignored:
    /// without a cache the next run is only slower.
    pub(crate) fn save(&self) {
        let Some(path) = self.path() else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = std::mem::take(&mut state.fresh);
        if fresh == Answers::default() {
            return;
        }
        let mut merged = read(&path, &self.key).unwrap_or_default();
        merged.names.extend(fresh.names);
        merged.sizes.extend(fresh.sizes);
        merged.fields.extend(fresh.fields);
        let _ = write(&path, &self.key, &merged);
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        self.save();
    }
}

/// Names and paths that fit on a line of the file.
fn storable(text: &[u8]) -> bool {
    !text.is_empty() && !text.iter().any(|&b| b == b'\n' || b == b'\r' || b == 0)
}

fn render(key: &str, answers: &Answers) -> String {
    let mut body = String::new();
    let die = |d: &Option<DieRef>| match d {
        Some(d) => format!("{} {}", d.unit, d.offset),
        None => "- -".to_owned(),
    };
    let number = |n: &Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    for ((kind, name), found) in &answers.names {
        // Names are bytes; those that are not UTF-8 are not kept.
        if let Ok(name) = std::str::from_utf8(name) {
            let _ = writeln!(body, "N {} {} {name}", *kind as char, die(found));
        }
    }
    for (at, size) in &answers.sizes {
        let _ = writeln!(body, "S {} {} {}", at.unit, at.offset, number(size));
    }
    for ((at, path), offset) in &answers.fields {
        let _ = writeln!(
            body,
            "F {} {} {} {path}",
            at.unit,
            at.offset,
            number(offset)
        );
    }
    let lines = body.lines().count();
    format!(
        "{FORMAT} {key}\n{body}end {lines} {:08x}\n",
        crc32(body.as_bytes())
    )
}

/// The answers in `text`, if it is a whole, intact file for `key`.
fn parse(text: &str, key: &str) -> Option<Answers> {
    let header = format!("{FORMAT} {key}\n");
    let rest = text.strip_prefix(&header)?;
    let body_end = rest.strip_suffix('\n')?.rfind('\n').map_or(0, |at| at + 1);
    let (body, trailer) = rest.split_at(body_end);
    let mut trailer = trailer.trim_end_matches('\n').split(' ');
    if trailer.next()? != "end" {
        return None;
    }
    let lines: usize = trailer.next()?.parse().ok()?;
    let crc = u32::from_str_radix(trailer.next()?, 16).ok()?;
    if trailer.next().is_some() || lines != body.lines().count() || crc != crc32(body.as_bytes()) {
        return None;
    }
    let mut answers = Answers::default();
    for line in body.lines() {
        let mut words = line.splitn(5, ' ');
        let what = words.next()?;
        match what {
            "N" => {
                let kind = *words.next()?.as_bytes().first()?;
                let found = die(words.next()?, words.next()?)?;
                answers
                    .names
                    .insert((kind, words.next()?.as_bytes().to_vec()), found);
            }
            "S" => {
                let at = die(words.next()?, words.next()?)??;
                answers.sizes.insert(at, number(words.next()?)?);
            }
            "F" => {
                let at = die(words.next()?, words.next()?)??;
                let offset = number(words.next()?)?;
                answers
                    .fields
                    .insert((at, words.next()?.to_owned()), offset);
            }
            _ => return None,
        }
    }
    Some(answers)
}

/// `"U O"` -> a DIE, `"- -"` -> none; anything else is corrupt.
fn die(unit: &str, offset: &str) -> Option<Option<DieRef>> {
    if unit == "-" && offset == "-" {
        return Some(None);
    }
    Some(Some(DieRef {
        unit: unit.parse().ok()?,
        offset: offset.parse().ok()?,
    }))
}

fn number(text: &str) -> Option<Option<u64>> {
    if text == "-" {
        return Some(None);
    }
    Some(Some(text.parse().ok()?))
}

fn read(path: &Path, key: &str) -> Option<Answers> {
    // Far more than any real file: a bigger one is not ours.
    const LIMIT: u64 = 16 << 20;
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > LIMIT {
        return None;
    }
    let text = std::io::read_to_string(file).ok()?;
    parse(&text, key)
}

fn write(path: &Path, key: &str, answers: &Answers) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{}.{}.{nanos}.tmp", key, std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(render(key, answers).as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests;
