//! `/proc/PID/maps` lines and the load bias of an ELF object mapped by them.

use std::path::PathBuf;

/// One line of `/proc/PID/maps`: a range of the address space and what backs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the range.
    pub start: u64,
    /// One past the last address of the range.
    pub end: u64,
    /// Offset in the backing file of `start`.
    pub offset: u64,
    /// Permissions as the kernel prints them, e.g. `r-xp`.
    pub perms: String,
    /// The backing file (absolute), a pseudo name such as `[heap]` or `[vdso]`, or
    /// `None` for an anonymous mapping. A file deleted since it was mapped keeps the
    /// kernel's ` (deleted)` suffix.
    pub path: Option<PathBuf>,
}

/// Suffix the kernel appends to the path of a file unlinked after it was mapped.
pub(crate) const DELETED_SUFFIX: &str = " (deleted)";

/// Parses the text of `/proc/PID/maps`; lines that do not have the kernel's format are
/// skipped.
///
/// ```
/// use mqd_debuginfo::parse_proc_maps;
/// let maps = parse_proc_maps(
///     "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234   /usr/bin/my prog\n\
///      7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0      [stack]\n\
///      7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n",
/// );
/// assert_eq!(maps.len(), 3);
/// assert_eq!(maps[0].path.as_deref(), Some(std::path::Path::new("/usr/bin/my prog")));
/// assert_eq!(maps[2].path, None);
/// ```
pub fn parse_proc_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    // Five space-separated fields, then the path, which may itself contain spaces.
    let mut rest = line;
    let mut fields = [""; 5];
    for field in &mut fields {
        rest = rest.trim_start_matches([' ', '\t']);
        let end = rest.find([' ', '\t']).unwrap_or(rest.len());
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let [range, perms, offset, dev, inode] = fields;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let offset = u64::from_str_radix(offset, 16).ok()?;
    if end < start || perms.len() != 4 || !dev.contains(':') || inode.parse::<u64>().is_err() {
        return None;
    }
    let path = rest.trim_start_matches([' ', '\t']);
    Some(Mapping {
        start,
        end,
        offset,
        perms: perms.to_owned(),
        path: (!path.is_empty()).then(|| PathBuf::from(path)),
    })
}

/// A `PT_LOAD` program header: where a piece of the file lands in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadSegment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`.
    pub filesz: u64,
}

/// The load bias of an object from the mappings of its file: the amount added to its
/// link-time addresses (`p_vaddr`, `st_value`, DWARF addresses) at run time. 0 for a
/// non-PIE executable.
///
/// The kernel and the dynamic loader map each `PT_LOAD` segment from the page that holds
/// its first byte: a mapping at `start` of file offset `off <= p_offset` (less than a
/// page below it) holds the segment's first byte at `start + (p_offset - off)`, which is
/// `bias + p_vaddr`. The mappings are tried from the lowest address, the first one
/// normally being the first page of the file; for each, the segment that starts closest
/// after its offset is the one it maps (a mapping that starts inside a segment because
/// `mprotect` split it is only looked at when no earlier mapping matched).
pub(crate) fn load_bias(mappings: &[&Mapping], loads: &[LoadSegment]) -> Option<u64> {
    // The largest page size of the ELF ABIs we may meet (aarch64, ppc64 with 64 KiB).
    const MAX_PAGE: u64 = 64 * 1024;
    let mut ordered: Vec<&Mapping> = mappings.to_vec();
    ordered.sort_by_key(|mapping| mapping.start);
    ordered.iter().find_map(|mapping| {
        loads
            .iter()
            .filter(|seg| {
                seg.filesz > 0
                    && seg.offset >= mapping.offset
                    && seg.offset - mapping.offset < MAX_PAGE
            })
            .min_by_key(|seg| seg.offset)
            .map(|seg| {
                mapping
                    .start
                    .wrapping_add(seg.offset - mapping.offset)
                    .wrapping_sub(seg.vaddr)
            })
    })
}
