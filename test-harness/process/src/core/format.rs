//! The parts of ELF a core reader needs: headers, program headers, notes, build-ids,
//! and the loadable segments of a mapped file.

use mqd_target::ByteOrder;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;

pub(super) const ET_REL: u16 = 1;
pub(super) const ET_EXEC: u16 = 2;
pub(super) const ET_DYN: u16 = 3;
pub(super) const ET_CORE: u16 = 4;
pub(super) const PT_LOAD: u32 = 1;
pub(super) const PT_DYNAMIC: u32 = 2;
pub(super) const PT_NOTE: u32 = 4;
pub(super) const PT_PHDR: u32 = 6;
pub(super) const PF_X: u32 = 1;
pub(super) const PF_W: u32 = 2;
pub(super) const PF_R: u32 = 4;
/// `e_phnum` saying that the count is in `sh_info` of section header 0.
pub(super) const PN_XNUM: u16 = 0xffff;
pub(super) const NT_PRSTATUS: u32 = 1;
pub(super) const NT_PRPSINFO: u32 = 3;
pub(super) const NT_AUXV: u32 = 6;
pub(super) const NT_GNU_BUILD_ID: u32 = 3;
pub(super) const NT_FILE: u32 = 0x4649_4c45;
pub(super) const NT_SIGINFO: u32 = 0x5349_4749;
pub(super) const AT_NULL: u64 = 0;
pub(super) const AT_PHDR: u64 = 3;
pub(super) const AT_PAGESZ: u64 = 6;
pub(super) const AT_ENTRY: u64 = 9;
pub(super) const DT_NULL: u64 = 0;
pub(super) const DT_DEBUG: u64 = 21;
/// Bounds on what a (possibly corrupt) core makes us read.
pub(super) const MAX_PROGRAM_HEADERS: u64 = 1 << 20;
pub(super) const MAX_NOTES_BYTES: u64 = 256 << 20;
pub(super) const MAX_DYNAMIC_ENTRIES: usize = 4096;
pub(super) const MAX_LINK_MAP: usize = 4096;
pub(super) const MAX_PATH: usize = 4096;
/// The pages compared between the core and a mapped file to tell that it changed.
pub(super) const COMPARE_BYTES: usize = 4096;

/// Class and byte order of an ELF file: how to read its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) is_64: bool,
    pub(super) order: ByteOrder,
}

impl Layout {
    pub(super) fn new(is_64: bool, little: bool) -> Layout {
        let order = if little {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        };
        Layout { is_64, order }
    }
    pub(super) fn little(self) -> bool {
        self.order == ByteOrder::Little
    }
    pub(super) fn word_size(self) -> usize {
        if self.is_64 { 8 } else { 4 }
    }
    pub(super) fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        self.order.unsigned_at(b, at, 2).map(|v| v as u16)
    }
    pub(super) fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        self.order.unsigned_at(b, at, 4).map(|v| v as u32)
    }
    pub(super) fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        self.order.unsigned_at(b, at, 8)
    }
    /// An address-sized word.
    pub(super) fn word(self, b: &[u8], at: usize) -> Option<u64> {
        self.order.unsigned_at(b, at, self.word_size())
    }
}

/// The ELF header fields used here.
#[derive(Debug, Clone, Copy)]
pub(super) struct ElfHeader {
    pub(super) layout: Layout,
    pub(super) elf_type: u16,
    pub(super) machine: u16,
    pub(super) entry: u64,
    pub(super) phoff: u64,
    pub(super) phentsize: u16,
    pub(super) phnum: u16,
    pub(super) shoff: u64,
}

/// One program header.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProgramHeader {
    pub(super) p_type: u32,
    pub(super) flags: u32,
    pub(super) offset: u64,
    pub(super) vaddr: u64,
    pub(super) filesz: u64,
    pub(super) memsz: u64,
    pub(super) align: u64,
}

/// Why the ELF header could not be read.
pub(super) enum HeaderError {
    NotElf,
    Malformed(String),
}

pub(super) fn parse_elf_header(b: &[u8]) -> Result<ElfHeader, HeaderError> {
    if b.len() < 16 || &b[..4] != b"\x7fELF" {
        return Err(HeaderError::NotElf);
    }
    let is_64 = match b[4] {
        1 => false,
        2 => true,
        other => return Err(HeaderError::Malformed(format!("unknown ELF class {other}"))),
    };
    let little = match b[5] {
        1 => true,
        2 => false,
        other => {
            return Err(HeaderError::Malformed(format!(
                "unknown ELF byte order {other}"
            )));
        }
    };
    let layout = Layout::new(is_64, little);
    let size = if is_64 { 64 } else { 52 };
    if b.len() < size {
        return Err(HeaderError::Malformed(format!(
            "the ELF header needs {size} bytes, the file has {}",
            b.len()
        )));
    }
    let short = || HeaderError::Malformed("short ELF header".into());
    let (entry, phoff, shoff, rest) = if is_64 {
        (layout.u64(b, 24), layout.u64(b, 32), layout.u64(b, 40), 52)
    } else {
        (
            layout.u32(b, 24).map(u64::from),
            layout.u32(b, 28).map(u64::from),
            layout.u32(b, 32).map(u64::from),
            40,
        )
    };
    Ok(ElfHeader {
        layout,
        elf_type: layout.u16(b, 16).ok_or_else(short)?,
        machine: layout.u16(b, 18).ok_or_else(short)?,
        entry: entry.ok_or_else(short)?,
        phoff: phoff.ok_or_else(short)?,
        shoff: shoff.ok_or_else(short)?,
        phentsize: layout.u16(b, rest + 2).ok_or_else(short)?,
        phnum: layout.u16(b, rest + 4).ok_or_else(short)?,
    })
}

pub(super) fn parse_program_header(layout: Layout, b: &[u8]) -> Option<ProgramHeader> {
    if layout.is_64 {
        Some(ProgramHeader {
            p_type: layout.u32(b, 0)?,
            flags: layout.u32(b, 4)?,
            offset: layout.u64(b, 8)?,
            vaddr: layout.u64(b, 16)?,
            filesz: layout.u64(b, 32)?,
            memsz: layout.u64(b, 40)?,
            align: layout.u64(b, 48)?,
        })
    } else {
        Some(ProgramHeader {
            p_type: layout.u32(b, 0)?,
            offset: u64::from(layout.u32(b, 4)?),
            vaddr: u64::from(layout.u32(b, 8)?),
            filesz: u64::from(layout.u32(b, 16)?),
            memsz: u64::from(layout.u32(b, 20)?),
            flags: layout.u32(b, 24)?,
            align: u64::from(layout.u32(b, 28)?),
        })
    }
}

pub(super) fn phentsize(layout: Layout) -> u16 {
    if layout.is_64 { 56 } else { 32 }
}

/// One note: owner name, type and descriptor.
pub(super) struct Note<'a> {
    pub(super) name: &'a [u8],
    pub(super) n_type: u32,
    pub(super) desc: &'a [u8],
}

/// Splits a notes segment; `Err` says where it stops making sense.
pub(super) fn parse_notes(
    layout: Layout,
    data: &[u8],
    align: u64,
) -> Result<Vec<Note<'_>>, String> {
    let align = if align == 8 { 8usize } else { 4 };
    let pad = |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    let mut notes = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let left = data.len() - at;
        if left < 12 {
            // Trailing padding shorter than a header is tolerated when it is zero.
            if data[at..].iter().all(|&b| b == 0) {
                break;
            }
            return Err(format!(
                "note {} at offset {at:#x} has a {left}-byte header (12 needed)",
                notes.len()
            ));
        }
        let namesz = layout.u32(data, at).unwrap_or(0) as usize;
        let descsz = layout.u32(data, at + 4).unwrap_or(0) as usize;
        let n_type = layout.u32(data, at + 8).unwrap_or(0);
        let name_start = at + 12;
        let desc_start = pad(namesz)
            .and_then(|n| name_start.checked_add(n))
            .filter(|&s| s <= data.len());
        let end = desc_start
            .and_then(|s| s.checked_add(descsz))
            .filter(|&e| e <= data.len());
        let (Some(desc_start), Some(end)) = (desc_start, end) else {
            return Err(format!(
                "note {} at offset {at:#x} (type {n_type:#x}) claims {namesz} bytes of name and \
                 {descsz} of data, {} are left in the notes segment",
                notes.len(),
                left - 12
            ));
        };
        let mut name = &data[name_start..name_start + namesz];
        if let Some(nul) = name.iter().position(|&b| b == 0) {
            name = &name[..nul];
        }
        notes.push(Note {
            name,
            n_type,
            desc: &data[desc_start..end],
        });
        at = pad(end).unwrap_or(data.len()).min(data.len());
    }
    Ok(notes)
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `NT_GNU_BUILD_ID` of an ELF image read through `read(offset, len)` (file
/// offsets), from its `PT_NOTE` segments.
pub(super) fn build_id(read: &dyn Fn(u64, usize) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    let header = parse_elf_header(&read(0, 52).and_then(|mut h| {
        if h.get(4) == Some(&2) {
            h = read(0, 64)?;
        }
        Some(h)
    })?)
    .ok()?;
    if header.phentsize != phentsize(header.layout) || header.phnum == 0 || header.phnum == PN_XNUM
    {
        return None;
    }
    let table = read(
        header.phoff,
        usize::from(header.phnum) * usize::from(header.phentsize),
    )?;
    for b in table.chunks_exact(usize::from(header.phentsize)) {
        let ph = parse_program_header(header.layout, b)?;
        if ph.p_type != PT_NOTE || ph.filesz == 0 || ph.filesz > 1 << 16 {
            continue;
        }
        let Some(data) = read(ph.offset, ph.filesz as usize) else {
            continue;
        };
        let Ok(notes) = parse_notes(header.layout, &data, ph.align) else {
            continue;
        };
        if let Some(note) = notes
            .iter()
            .find(|n| n.n_type == NT_GNU_BUILD_ID && n.name == b"GNU" && !n.desc.is_empty())
        {
            return Some(note.desc.to_vec());
        }
    }
    None
}

/// An ELF executable or library on disk: its header and program headers.
pub(super) struct LoadedElf {
    pub(super) header: ElfHeader,
    pub(super) headers: Vec<ProgramHeader>,
}

impl LoadedElf {
    pub(super) fn read(file: &File) -> Result<LoadedElf, String> {
        let mut head = vec![0u8; 64];
        let n = read_some_at(file, 0, &mut head).map_err(|e| e.to_string())?;
        head.truncate(n);
        let header = parse_elf_header(&head).map_err(|e| match e {
            HeaderError::NotElf => "not an ELF file".to_owned(),
            HeaderError::Malformed(m) => m,
        })?;
        if header.elf_type == ET_CORE {
            return Err("it is a core file".into());
        }
        if header.phentsize != phentsize(header.layout) || header.phnum == PN_XNUM {
            return Err("unreadable program headers".into());
        }
        let table = read_exact_at(
            file,
            header.phoff,
            usize::from(header.phnum) * usize::from(header.phentsize),
        )
        .map_err(|e| format!("program headers: {e}"))?;
        let headers = table
            .chunks_exact(usize::from(header.phentsize))
            .filter_map(|b| parse_program_header(header.layout, b))
            .collect();
        Ok(LoadedElf { header, headers })
    }

    /// The file mappings its `PT_LOAD` segments make when loaded with `bias`.
    pub(super) fn mappings(&self, path: &Path, bias: u64, page: u64) -> Vec<FileMapping> {
        self.headers
            .iter()
            .filter(|p| p.p_type == PT_LOAD && p.filesz > 0)
            .map(|p| {
                let at = bias.wrapping_add(p.vaddr);
                let start = page_down(at, page);
                FileMapping {
                    start,
                    end: page_up(at.saturating_add(p.filesz), page),
                    offset: page_down(p.offset, page),
                    path: path.to_owned(),
                }
            })
            .collect()
    }
}

/// One entry of the `NT_FILE` note: a range of the address space and the file behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`, in bytes.
    pub offset: u64,
    /// The file, as the process named it (a file deleted since keeps ` (deleted)`).
    pub path: PathBuf,
}

pub(super) fn read_exact_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Reads as much as there is of `buf` at `offset`; the count read (short at end of file).
pub(super) fn read_some_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

pub(super) fn page_down(v: u64, page: u64) -> u64 {
    v & !(page - 1)
}

pub(super) fn page_up(v: u64, page: u64) -> u64 {
    v.saturating_add(page - 1) & !(page - 1)
}
