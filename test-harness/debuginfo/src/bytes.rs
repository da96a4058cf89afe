//! The bytes of objects and of their sections, shared without copying: a mapped file or
//! a copy of memory, a range of it or a decompressed buffer; and the checksum that links
//! an object to its separate debug file.

use std::sync::{Arc, OnceLock};

/// Section data shared by the units: the mapped file's bytes, or a section decompressed
/// once per file.
pub(crate) type Reader = gimli::EndianReader<gimli::RunTimeEndian, SectionBytes>;

/// The bytes of an object: a mapped file, or a copy of memory.
pub(crate) enum Bytes {
    /// A file mapped read-only.
    Mapped(memmap2::Mmap),
    /// A copy of memory.
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.len())
    }
}

/// What a section's bytes live in.
#[derive(Clone)]
enum Owner {
    File(Arc<Bytes>),
    Owned(Arc<Vec<u8>>),
}

/// The bytes of one section: a range of the mapped file (no copy), or a decompressed
/// buffer; cheap to clone, and the bytes never move while a clone lives.
#[derive(Clone)]
pub(crate) struct SectionBytes {
    owner: Owner,
    start: usize,
    len: usize,
}

impl SectionBytes {
    pub(crate) fn empty() -> SectionBytes {
        SectionBytes::owned(Vec::new())
    }

    pub(crate) fn owned(bytes: Vec<u8>) -> SectionBytes {
        SectionBytes {
            start: 0,
            len: bytes.len(),
            owner: Owner::Owned(Arc::new(bytes)),
        }
    }

    pub(crate) fn of_file(file: Arc<Bytes>, start: usize, len: usize) -> Option<SectionBytes> {
        file.get(start..start.checked_add(len)?)?;
        Some(SectionBytes {
            owner: Owner::File(file),
            start,
            len,
        })
    }
}

impl SectionBytes {
    /// Gives back to the kernel the pages of `range` (offsets in the section) that a
    /// mapped file put in this process, once read: they are read from the file again if
    /// touched. Nothing for bytes that exist only here (decompressed, or an object read
    /// from memory).
    pub(crate) fn release(&self, range: std::ops::Range<usize>) {
        // Only a file's mapping: heap bytes (a copy of memory, a decompressed section)
        // would read back as zeros.
        let mapped = matches!(&self.owner, Owner::File(file) if matches!(**file, Bytes::Mapped(_)));
        if !mapped || range.end > self.len {
            return;
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let base = self.as_ptr() as usize;
        let start = (base + range.start).next_multiple_of(page);
        let end = (base + range.end) / page * page;
        if start < end {
            // SAFETY: whole pages inside a read-only private file mapping that this
            // handle keeps alive and nobody writes: MADV_DONTNEED only unmaps them, and
            // a later read faults the same file bytes back in.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let all: &[u8] = match &self.owner {
            Owner::File(file) => file,
            Owner::Owned(bytes) => bytes,
        };
        // In bounds: checked when made, and the owner never changes.
        &all[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} section bytes", self.len)
    }
}

// SAFETY: the bytes are a mapping or a vector behind an `Arc` that no one mutates, so
// they stay at one address while any clone lives, whatever moves the handle.
unsafe impl gimli::StableDeref for SectionBytes {}
// SAFETY: a clone shares the same `Arc`, hence the same bytes.
unsafe impl gimli::CloneStableDeref for SectionBytes {}

/// The CRC-32 of `.gnu_debuglink` (ISO-HDLC: reflected, polynomial 0xEDB88320).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    static TABLE: OnceLock<[u32; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u32; 256];
        for (n, slot) in (0u32..).zip(table.iter_mut()) {
            let mut c = n;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        table
    });
    !data.iter().fold(!0u32, |crc, &byte| {
        table[usize::from((crc as u8) ^ byte)] ^ (crc >> 8)
    })
}
