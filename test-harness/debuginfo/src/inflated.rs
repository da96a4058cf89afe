//! Compressed debug sections kept inflated on disk between runs, beside the type answers.
//!
//! Distributions compress their debug files: libc's 4 MB debug file inflates to about
//! 12 MB, and every stack's bottom frames are libc's. Each `mqd` that named such a frame
//! inflated the sections into fresh heap: once per agent, per host, per snapshot of
//! `watch` and `run`. The bytes depend only on the file, so they are kept under the same
//! key as its type answers; later runs map them (the page cache is shared, nothing is
//! inflated). A file holds the section's bytes and a trailer (a magic, the length and a
//! fingerprint of the bytes, checked on every read: a damaged file is inflated again and
//! replaced), is written privately and renamed into place, so no reader sees half of one;
//! concurrent first runs wait a bounded time for the one inflating (a lock on the
//! directory itself, so the cache holds nothing else), then inflate themselves.

use crate::bytes::{Bytes, SectionBytes};
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ends each file: the format, then the section's length and its fingerprint.
const MAGIC: &[u8; 8] = b"mqdinfl2";
const TRAILER: usize = MAGIC.len() + 16;
/// Smaller sections inflate faster than a file is opened.
const SMALLEST: u64 = 64 * 1024;
/// How long a first run waits for another to finish inflating the same file.
const WAIT: Duration = Duration::from_secs(3);

/// The section `name` of the file whose cache key is `key`, `size` bytes once inflated:
/// from `dir` if a run kept it, else from `inflate` (and kept for the next run). Without
/// a directory, for a small section, or where the cache cannot be used, `inflate` alone.
pub(crate) fn section(
    dir: Option<&Path>,
    key: &str,
    name: &str,
    size: u64,
    inflate: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<SectionBytes, String> {
    let Some(dir) = dir.filter(|_| size >= SMALLEST && is_plain(name)) else {
        return inflate().map(SectionBytes::owned);
    };
    let path = dir.join(format!("{key}{name}"));
    if let Some(kept) = read(&path, size) {
        return Ok(kept);
    }
    let lock = Lock::take(dir);
    // Another run may have written it while this one waited.
    if lock.is_some()
        && let Some(kept) = read(&path, size)
    {
        return Ok(kept);
    }
    let bytes = inflate()?;
    if lock.is_some() && bytes.len() as u64 == size {
        // A cache that cannot be written only costs the next run its speed.
        let _ = write(&path, &bytes);
    }
    drop(lock);
    Ok(SectionBytes::owned(bytes))
}

/// Section names become file names: only those a toolchain writes (`.debug_info`).
fn is_plain(name: &str) -> bool {
    name.starts_with('.')
        && name.len() > 1
        && name[1..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// The kept bytes, mapped, if the file is whole and of this section's length.
fn read(path: &Path, size: u64) -> Option<SectionBytes> {
    let file = std::fs::File::open(path).ok()?;
    let len = usize::try_from(size).ok()?;
    if file.metadata().ok()?.len() != size.checked_add(TRAILER as u64)? {
        return None;
    }
    // Populated at once: the fingerprint reads every page.
    // SAFETY: read-only private mapping of a file only ever replaced by rename, never
    // written in place; the trailer is checked before the bytes are used.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.ok()?;
    let (bytes, trailer) = map.split_at_checked(len)?;
    let mut expected = MAGIC.to_vec();
    expected.extend_from_slice(&size.to_le_bytes());
    expected.extend_from_slice(&fingerprint(bytes).to_le_bytes());
    (trailer == expected).then_some(())?;
    SectionBytes::of_file(Arc::new(Bytes::Mapped(map)), 0, len)
}

fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.write_all(MAGIC)?;
        file.write_all(&(bytes.len() as u64).to_le_bytes())?;
        file.write_all(&fingerprint(bytes).to_le_bytes())?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// A fingerprint of a section's bytes that any damage short of a deliberate forgery
/// changes: four lanes of multiply and shift over little-endian words (several
/// gigabytes a second), their length folded in.
fn fingerprint(bytes: &[u8]) -> u64 {
    const K: u64 = 0xff51_afd7_ed55_8ccd;
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(K);
        h ^ (h >> 29)
    };
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or_default());
    let mut lanes = [1u64, 2, 3, 4].map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane = mix(*lane, word(w));
        }
    }
    let mut tail = [0u8; 32];
    tail[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
    for (lane, w) in lanes.iter_mut().zip(tail.chunks_exact(8)) {
        *lane = mix(*lane, word(w));
    }
    lanes
        .iter()
        .fold(bytes.len() as u64, |h, &lane| mix(h.rotate_left(17), lane))
}

/// An exclusive `flock` on the cache directory, released when dropped.
struct Lock(std::fs::File);

impl Lock {
    /// `None` if the directory cannot be made or opened, or another run held it all of
    /// [`WAIT`].
    fn take(dir: &Path) -> Option<Lock> {
        std::fs::create_dir_all(dir).ok()?;
        let file = std::fs::File::open(dir).ok()?;
        let deadline = Instant::now() + WAIT;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Some(Lock(file));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: unlocks the descriptor this lock owns (closing it would too).
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn a_section_is_inflated_once_then_mapped() {
        let dir = tempdir();
        let want = bytes(SMALLEST as usize + 3);
        let calls = std::cell::Cell::new(0);
        let inflate = || {
            calls.set(calls.get() + 1);
            Ok(want.clone())
        };
        let size = want.len() as u64;
        let first = section(Some(&dir), "id-ab-1", ".debug_info", size, inflate).unwrap();
        let second = section(Some(&dir), "id-ab-1", ".debug_info", size, inflate).unwrap();
        assert_eq!((&*first, &*second), (&want[..], &want[..]));
        assert_eq!(calls.get(), 1, "the second run maps what the first kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_inflated_again_and_replaced() {
        let dir = tempdir();
        let want = bytes(SMALLEST as usize);
        let size = want.len() as u64;
        let path = dir.join("id-cd-2.debug_line");
        let mut whole = want.clone();
        whole.extend_from_slice(MAGIC);
        whole.extend_from_slice(&size.to_le_bytes());
        whole.extend_from_slice(&fingerprint(&want).to_le_bytes());
        let mut flipped = whole.clone();
        flipped[size as usize / 3] ^= 0x20;
        for damaged in [
            whole[..whole.len() - 1].to_vec(),         // truncated
            [&whole[..], b"x"].concat(),               // longer
            [&want[..], &[0u8; TRAILER][..]].concat(), // no magic
            flipped,                                   // a byte changed
        ] {
            std::fs::write(&path, &damaged).unwrap();
            let got = section(Some(&dir), "id-cd-2", ".debug_line", size, || {
                Ok(want.clone())
            });
            assert_eq!(&*got.unwrap(), &want[..]);
            assert_eq!(std::fs::read(&path).unwrap(), whole, "rewritten whole");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn small_sections_odd_names_and_no_directory_leave_nothing_on_disk() {
        let dir = tempdir();
        let small = bytes(100);
        let got = section(Some(&dir), "k", ".debug_str", 100, || Ok(small.clone())).unwrap();
        assert_eq!(&*got, &small[..]);
        let big = bytes(SMALLEST as usize);
        let n = big.len() as u64;
        for name in ["../../etc/x", ".a/b", ""] {
            assert!(section(Some(&dir), "k", name, n, || Ok(big.clone())).is_ok());
        }
        assert!(section(None, "k", ".debug_info", n, || Ok(big.clone())).is_ok());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert!(left.is_empty(), "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_cache_and_a_failed_inflate_are_said() {
        let file = tempdir().join("not-a-directory");
        std::fs::write(&file, b"").unwrap();
        let big = bytes(SMALLEST as usize);
        let n = big.len() as u64;
        let got = section(Some(&file), "k", ".debug_info", n, || Ok(big.clone()));
        assert_eq!(&*got.unwrap(), &big[..]);
        let err = section(Some(&file), "k", ".debug_info", n, || Err("corrupt".into()));
        assert_eq!(err.err().as_deref(), Some("corrupt"));
        let _ = std::fs::remove_dir_all(file.parent().unwrap());
    }

    fn tempdir() -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqd-inflated-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
