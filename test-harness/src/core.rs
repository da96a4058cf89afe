//! Core files: a crashed or `gcore`d process as a [`Target`], post mortem.
//!
//! [`CoreFile`] reads an ELF core (`ET_CORE`, 32 or 64 bits, either byte order) the way
//! a debugger does:
//!
//! - memory from its `PT_LOAD` segments. Dumpers leave out what the files hold: the
//!   kernel writes only the first page of a read-only file-backed mapping (`p_filesz`
//!   one page, `p_memsz` the whole mapping), `gcore` leaves such mappings out entirely.
//!   Those bytes (the code and constants of the program and of `libmpi.so`) are read
//!   from the mapped file, at the offset the `NT_FILE` note gives. The part of a segment
//!   beyond `p_filesz` reads as zeros only when no file backs it (anonymous memory the
//!   process never touched); an anonymous mapping the dumper skipped altogether
//!   (`p_filesz` 0: `MADV_DONTDUMP`, `coredump_filter`) is unreadable, not zero;
//! - the notes: `NT_PRSTATUS` (threads, signal), `NT_PRPSINFO` (pid, program name and
//!   arguments, state), `NT_FILE` (the file mappings, which become
//!   [`crate::debuginfo::Mapping`]s for an [`AddressSpace`]) and `NT_AUXV` (where the
//!   program's headers are, hence which file is the main executable).
//!
//! [`CoreTarget`] adds the symbols and DWARF types of the mapped files, read by
//! [`AddressSpace::from_mappings_with`] exactly as for a live process. For a core
//! without `NT_FILE` (Linux before 3.7, some dumpers) the executable must be given; the
//! shared libraries are then found the way the dynamic linker lists them (`DT_DEBUG` ->
//! `r_debug` -> `link_map`), in the core's memory.
//!
//! Files mapped by the process that are missing or changed since the crash (build-id,
//! else size and the bytes the core holds of them) give warnings
//! ([`CoreTarget::warnings`]), not errors: the core still has the data segments, and
//! only what would be read from such a file is unreliable.
//!
//! ```no_run
//! use mqd_harness::core::CoreTarget;
//! use mqd_harness::target::Target;
//! let target = CoreTarget::open("core.1234".as_ref(), None)?;
//! println!("{} (pid {:?})", target.name(), target.pid());
//! let head = target.find_symbol("MPIR_All_communicators");
//! # Ok::<(), mqd_harness::core::CoreError>(())
//! ```

use crate::debuginfo::{AddressSpace, DebugInfoError, Mapping, SearchOptions};
use crate::target::{ByteOrder, Target, TargetError, TypeId};
use mqd_mpich::abi::mqs_target_type_sizes;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ET_CORE: u16 = 4;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_NOTE: u32 = 4;
const PT_PHDR: u32 = 6;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;
/// `e_phnum` saying that the count is in `sh_info` of section header 0.
const PN_XNUM: u16 = 0xffff;
const NT_PRSTATUS: u32 = 1;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_GNU_BUILD_ID: u32 = 3;
const NT_FILE: u32 = 0x4649_4c45;
const NT_SIGINFO: u32 = 0x5349_4749;
const AT_NULL: u64 = 0;
const AT_PHDR: u64 = 3;
const AT_PAGESZ: u64 = 6;
const AT_ENTRY: u64 = 9;
const DT_NULL: u64 = 0;
const DT_DEBUG: u64 = 21;
/// Bounds on what a (possibly corrupt) core makes us read.
const MAX_PROGRAM_HEADERS: u64 = 1 << 20;
const MAX_NOTES_BYTES: u64 = 256 << 20;
const MAX_DYNAMIC_ENTRIES: usize = 4096;
const MAX_LINK_MAP: usize = 4096;
const MAX_PATH: usize = 4096;
/// The pages compared between the core and a mapped file to tell that it changed.
const COMPARE_BYTES: usize = 4096;

/// Why a core file cannot be used. Every message is one line naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The core file cannot be opened or read.
    Io {
        /// The core file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// Not an ELF file at all.
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// An ELF file, but not a core (`e_type` is not `ET_CORE`).
    NotCore {
        /// The file.
        path: PathBuf,
        /// Its `e_type`.
        elf_type: u16,
    },
    /// A `PT_LOAD` or `PT_NOTE` segment (or the program header table) extends beyond
    /// the end of the file.
    Truncated {
        /// The core file.
        path: PathBuf,
        /// What is cut: "segment at 0x7f...", "notes segment at offset 0x...",
        /// "program header table".
        what: String,
        /// Bytes the file must have for it (`p_offset + p_filesz`).
        needs: u64,
        /// Bytes it has.
        has: u64,
    },
    /// The ELF header or program headers make no sense.
    Malformed {
        /// The core file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A note runs past its segment, or a known note has an impossible size or content.
    CorruptNotes {
        /// The core file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No `NT_FILE` note and no executable given: nothing says which files were mapped.
    NoFileMappings {
        /// The core file.
        path: PathBuf,
    },
    /// The executable given cannot be placed in the core's address space.
    Executable {
        /// The core file.
        path: PathBuf,
        /// The executable.
        exe: PathBuf,
        /// Why.
        message: String,
    },
    /// The mapped files give no symbols at all (all missing, none ELF).
    DebugInfo {
        /// The core file.
        path: PathBuf,
        /// What the address space said.
        error: DebugInfoError,
    },
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::Io { path, message } => {
                write!(f, "cannot read core file {}: {message}", path.display())
            }
            CoreError::NotElf { path } => {
                write!(
                    f,
                    "not an ELF core file: {} is not an ELF file",
                    path.display()
                )
            }
            CoreError::NotCore { path, elf_type } => {
                let kind = match *elf_type {
                    ET_REL => "a relocatable object",
                    ET_EXEC => "an executable",
                    ET_DYN => "a shared object or position-independent executable",
                    _ => "an ELF file of another type",
                };
                write!(
                    f,
                    "not an ELF core file: {} is {kind} (e_type {elf_type}, a core has 4)",
                    path.display()
                )
            }
            CoreError::Truncated {
                path,
                what,
                needs,
                has,
            } => write!(
                f,
                "truncated core file: {what} needs {needs} bytes, file has {has} ({}: the dump \
                 was cut short, e.g. by ulimit -c or a full disk)",
                path.display()
            ),
            CoreError::Malformed { path, message } => {
                write!(f, "malformed core file {}: {message}", path.display())
            }
            CoreError::CorruptNotes { path, message } => {
                write!(
                    f,
                    "corrupt notes in core file {}: {message}",
                    path.display()
                )
            }
            CoreError::NoFileMappings { path } => write!(
                f,
                "core file {} lacks file mappings (no NT_FILE note, as written by Linux before 3.7 \
                 and some dumpers): pass --exe with the crashed program's executable",
                path.display()
            ),
            CoreError::Executable { path, exe, message } => write!(
                f,
                "cannot place executable {} in core file {}: {message}",
                exe.display(),
                path.display()
            ),
            CoreError::DebugInfo { path, error } => {
                write!(f, "core file {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for CoreError {}

/// Class and byte order of an ELF file: how to read its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    is_64: bool,
    little: bool,
}

impl Layout {
    fn word_size(self) -> usize {
        if self.is_64 { 8 } else { 4 }
    }
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let raw: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(if self.little {
            u16::from_le_bytes(raw)
        } else {
            u16::from_be_bytes(raw)
        })
    }
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let raw: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.little {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        })
    }
    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let raw: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.little {
            u64::from_le_bytes(raw)
        } else {
            u64::from_be_bytes(raw)
        })
    }
    /// An address-sized word.
    fn word(self, b: &[u8], at: usize) -> Option<u64> {
        if self.is_64 {
            self.u64(b, at)
        } else {
            self.u32(b, at).map(u64::from)
        }
    }
}

/// The ELF header fields used here.
#[derive(Debug, Clone, Copy)]
struct ElfHeader {
    layout: Layout,
    elf_type: u16,
    machine: u16,
    entry: u64,
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    shoff: u64,
}

/// One program header.
#[derive(Debug, Clone, Copy)]
struct ProgramHeader {
    p_type: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

/// Why the ELF header could not be read.
enum HeaderError {
    NotElf,
    Malformed(String),
}

fn parse_elf_header(b: &[u8]) -> Result<ElfHeader, HeaderError> {
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
    let layout = Layout { is_64, little };
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

fn parse_program_header(layout: Layout, b: &[u8]) -> Option<ProgramHeader> {
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

fn phentsize(layout: Layout) -> u16 {
    if layout.is_64 { 56 } else { 32 }
}

/// One note: owner name, type and descriptor.
struct Note<'a> {
    name: &'a [u8],
    n_type: u32,
    desc: &'a [u8],
}

/// Splits a notes segment; `Err` says where it stops making sense.
fn parse_notes(layout: Layout, data: &[u8], align: u64) -> Result<Vec<Note<'_>>, String> {
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

/// A `PT_LOAD` segment of the core: process memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First address (`p_vaddr`).
    pub vaddr: u64,
    /// Size in memory (`p_memsz`).
    pub memsz: u64,
    /// Where its bytes are in the core (`p_offset`).
    pub offset: u64,
    /// How many bytes the core holds (`p_filesz`); the rest is in the mapped file, or
    /// zero for anonymous memory.
    pub filesz: u64,
    /// `p_flags`: `PF_R` 4, `PF_W` 2, `PF_X` 1.
    pub flags: u32,
}

impl Segment {
    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.vaddr.saturating_add(self.memsz)
    }

    /// Permissions as `/proc/PID/maps` prints them, e.g. `r-xp`.
    pub fn perms(&self) -> String {
        perms(self.flags)
    }
}

fn perms(flags: u32) -> String {
    let mut s = String::with_capacity(4);
    s.push(if flags & PF_R != 0 { 'r' } else { '-' });
    s.push(if flags & PF_W != 0 { 'w' } else { '-' });
    s.push(if flags & PF_X != 0 { 'x' } else { '-' });
    s.push('p');
    s
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

/// What `NT_PRPSINFO` says of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Process id (thread group id).
    pub pid: i32,
    /// Parent's process id.
    pub ppid: i32,
    /// State letter as in `/proc/PID/stat` (`R`, `S`, `D`, `T`, `Z`, ...).
    pub state: char,
    /// The program's name (`comm`, at most 15 bytes).
    pub program: String,
    /// The start of its command line (at most 80 bytes, arguments separated by spaces).
    pub arguments: String,
}

/// An ELF core file: its memory segments and what its notes say.
pub struct CoreFile {
    path: PathBuf,
    file: File,
    len: u64,
    layout: Layout,
    machine: u16,
    /// Sorted by address.
    segments: Vec<Segment>,
    threads: Vec<i32>,
    signal: Option<i32>,
    info: Option<ProcessInfo>,
    auxv: Vec<(u64, u64)>,
    /// `NT_FILE`, sorted by address; `None` when the core has no such note.
    files: Option<Vec<FileMapping>>,
    page_size: u64,
    root: Option<PathBuf>,
    /// Paths read in place of others (an executable that moved).
    replaced: HashMap<PathBuf, PathBuf>,
    /// Mapped files opened for reading, by the path the mappings give.
    opened: Mutex<HashMap<PathBuf, Option<Arc<File>>>>,
}

impl fmt::Debug for CoreFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreFile")
            .field("path", &self.path)
            .field("pid", &self.pid())
            .field("is_64", &self.layout.is_64)
            .field("byte_order", &self.byte_order())
            .field("segments", &self.segments.len())
            .field("file_mappings", &self.files.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

fn read_exact_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Reads as much as there is of `buf` at `offset`; the count read (short at end of file).
fn read_some_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
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

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn page_down(v: u64, page: u64) -> u64 {
    v & !(page - 1)
}

fn page_up(v: u64, page: u64) -> u64 {
    v.saturating_add(page - 1) & !(page - 1)
}

/// Why one piece of a read failed.
enum PieceError {
    Unmapped,
    Io(String),
}

impl CoreFile {
    /// Opens and checks a core file: the ELF header, every `PT_LOAD` and `PT_NOTE`
    /// within the file, the notes well formed. Memory is read from the file on demand.
    pub fn open(path: &Path) -> Result<CoreFile, CoreError> {
        let io = |e: std::io::Error| CoreError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(CoreError::Io {
                path: path.to_owned(),
                message: "is a directory".into(),
            });
        }
        let len = meta.len();
        let mut head = vec![0u8; 64];
        let got = read_some_at(&file, 0, &mut head).map_err(io)?;
        head.truncate(got);
        let malformed = |message: String| CoreError::Malformed {
            path: path.to_owned(),
            message,
        };
        let header = parse_elf_header(&head).map_err(|e| match e {
            HeaderError::NotElf => CoreError::NotElf {
                path: path.to_owned(),
            },
            HeaderError::Malformed(m) => malformed(m),
        })?;
        let layout = header.layout;
        if header.elf_type != ET_CORE {
            return Err(CoreError::NotCore {
                path: path.to_owned(),
                elf_type: header.elf_type,
            });
        }
        if header.phentsize != phentsize(layout) {
            return Err(malformed(format!(
                "program headers of {} bytes (ELFCLASS{} has {})",
                header.phentsize,
                if layout.is_64 { 64 } else { 32 },
                phentsize(layout)
            )));
        }
        let mut phnum = u64::from(header.phnum);
        if header.phnum == PN_XNUM {
            // More than 65534 segments: the count is in section header 0's sh_info.
            let (at, size) = if layout.is_64 { (44, 64) } else { (28, 40) };
            let sh0 = read_exact_at(&file, header.shoff, size).map_err(|_| {
                malformed(format!(
                    "e_phnum is PN_XNUM but section header 0 at {:#x} is beyond the end of the file",
                    header.shoff
                ))
            })?;
            phnum = u64::from(layout.u32(&sh0, at).unwrap_or(0));
        }
        if phnum == 0 {
            return Err(malformed("no program headers".into()));
        }
        if phnum > MAX_PROGRAM_HEADERS {
            return Err(malformed(format!("{phnum} program headers")));
        }
        let table_len = phnum * u64::from(header.phentsize);
        let table_end = header.phoff.saturating_add(table_len);
        if table_end > len {
            return Err(CoreError::Truncated {
                path: path.to_owned(),
                what: "program header table".into(),
                needs: table_end,
                has: len,
            });
        }
        let table = read_exact_at(&file, header.phoff, table_len as usize).map_err(io)?;
        let headers: Vec<ProgramHeader> = table
            .chunks_exact(usize::from(header.phentsize))
            .filter_map(|b| parse_program_header(layout, b))
            .collect();
        let truncated = |ph: &ProgramHeader, notes: bool| {
            let needs = ph.offset.saturating_add(ph.filesz);
            (needs > len).then(|| CoreError::Truncated {
                path: path.to_owned(),
                what: if notes {
                    format!("notes segment at offset {:#x}", ph.offset)
                } else {
                    format!("segment at {:#x}", ph.vaddr)
                },
                needs,
                has: len,
            })
        };
        let mut segments = Vec::new();
        for ph in headers.iter().filter(|ph| ph.p_type == PT_LOAD) {
            if let Some(e) = truncated(ph, false) {
                return Err(e);
            }
            if ph.filesz > ph.memsz {
                return Err(malformed(format!(
                    "segment at {:#x} holds {} bytes of a {}-byte range",
                    ph.vaddr, ph.filesz, ph.memsz
                )));
            }
            if ph.vaddr.checked_add(ph.memsz).is_none() {
                return Err(malformed(format!(
                    "segment at {:#x} of {} bytes wraps around the address space",
                    ph.vaddr, ph.memsz
                )));
            }
            if ph.memsz > 0 {
                segments.push(Segment {
                    vaddr: ph.vaddr,
                    memsz: ph.memsz,
                    offset: ph.offset,
                    filesz: ph.filesz,
                    flags: ph.flags,
                });
            }
        }
        segments.sort_by_key(|s| s.vaddr);
        if let Some(w) = segments.windows(2).find(|w| w[0].end() > w[1].vaddr) {
            return Err(malformed(format!(
                "segments at {:#x} and {:#x} overlap",
                w[0].vaddr, w[1].vaddr
            )));
        }
        let mut core = CoreFile {
            path: path.to_owned(),
            file,
            len,
            layout,
            machine: header.machine,
            segments,
            threads: Vec::new(),
            signal: None,
            info: None,
            auxv: Vec::new(),
            files: None,
            page_size: 4096,
            root: None,
            replaced: HashMap::new(),
            opened: Mutex::new(HashMap::new()),
        };
        for ph in headers.iter().filter(|ph| ph.p_type == PT_NOTE) {
            if let Some(e) = truncated(ph, true) {
                return Err(e);
            }
            if ph.filesz > MAX_NOTES_BYTES {
                return Err(core.corrupt(format!("a notes segment of {} bytes", ph.filesz)));
            }
            let data = read_exact_at(&core.file, ph.offset, ph.filesz as usize).map_err(io)?;
            let notes = parse_notes(layout, &data, ph.align).map_err(|m| core.corrupt(m))?;
            for note in notes {
                core.take_note(&note)?;
            }
        }
        if let Some(page) = core
            .aux(AT_PAGESZ)
            .filter(|p| p.is_power_of_two() && *p >= 1024)
        {
            core.page_size = page;
        }
        Ok(core)
    }

    fn corrupt(&self, message: String) -> CoreError {
        CoreError::CorruptNotes {
            path: self.path.clone(),
            message,
        }
    }

    fn take_note(&mut self, note: &Note<'_>) -> Result<(), CoreError> {
        let layout = self.layout;
        let word = layout.word_size();
        let core_owner = note.name == b"CORE";
        match note.n_type {
            NT_PRSTATUS if core_owner => {
                // struct elf_prstatus: elf_siginfo (3 ints), short pr_cursig, then
                // pr_sigpend and pr_sighold (unsigned long), then pr_pid.
                let pid_at = 16 + 2 * word;
                let pid = layout.u32(note.desc, pid_at).ok_or_else(|| {
                    self.corrupt(format!(
                        "NT_PRSTATUS of {} bytes has no pr_pid (at {pid_at})",
                        note.desc.len()
                    ))
                })? as i32;
                if self.threads.is_empty() {
                    self.signal = layout
                        .u16(note.desc, 12)
                        .map(i32::from)
                        .filter(|&s| s != 0)
                        .or(self.signal);
                }
                self.threads.push(pid);
            }
            NT_PRPSINFO if core_owner => {
                // struct elf_prpsinfo ends with pr_fname[16], pr_psargs[80], after
                // pr_pid, pr_ppid, pr_pgrp, pr_sid.
                let n = note.desc.len();
                if n < 4 + 96 + 16 {
                    return Err(self.corrupt(format!("NT_PRPSINFO of {n} bytes is too short")));
                }
                let fname = n - 96;
                let pid = layout.u32(note.desc, fname - 16).unwrap_or(0) as i32;
                let ppid = layout.u32(note.desc, fname - 12).unwrap_or(0) as i32;
                let sname = note.desc[1];
                self.info = Some(ProcessInfo {
                    pid,
                    ppid,
                    state: if sname.is_ascii_graphic() {
                        char::from(sname)
                    } else {
                        '?'
                    },
                    program: c_string(&note.desc[fname..fname + 16]),
                    arguments: c_string(&note.desc[fname + 16..]).trim_end().to_owned(),
                });
            }
            NT_SIGINFO if core_owner => {
                if let Some(signo) = layout.u32(note.desc, 0).filter(|&s| s != 0) {
                    self.signal = Some(signo as i32);
                }
            }
            NT_AUXV if core_owner => {
                let mut auxv = Vec::new();
                for pair in note.desc.chunks_exact(2 * word) {
                    let key = layout.word(pair, 0).unwrap_or(AT_NULL);
                    if key == AT_NULL {
                        break;
                    }
                    auxv.push((key, layout.word(pair, word).unwrap_or(0)));
                }
                self.auxv = auxv;
            }
            NT_FILE if core_owner => {
                let (files, page) = self.parse_file_note(note.desc)?;
                self.files = Some(files);
                self.page_size = page;
            }
            _ => {}
        }
        Ok(())
    }

    /// `NT_FILE`: count, page size, `count` (start, end, offset in pages), the names.
    fn parse_file_note(&self, desc: &[u8]) -> Result<(Vec<FileMapping>, u64), CoreError> {
        let layout = self.layout;
        let word = layout.word_size();
        let bad = |what: String| self.corrupt(format!("NT_FILE: {what}"));
        let count = layout.word(desc, 0).ok_or_else(|| bad("no count".into()))?;
        let page = layout
            .word(desc, word)
            .ok_or_else(|| bad("no page size".into()))?;
        let table_end = count
            .checked_mul(3 * word as u64)
            .and_then(|t| t.checked_add(2 * word as u64))
            .filter(|&e| e <= desc.len() as u64)
            .ok_or_else(|| {
                bad(format!(
                    "{count} mappings do not fit in {} bytes",
                    desc.len()
                ))
            })? as usize;
        if page == 0 || !page.is_power_of_two() {
            return Err(bad(format!("page size {page}")));
        }
        let mut names = desc[table_end..].split(|&b| b == 0);
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = 2 * word + i * 3 * word;
            let start = layout.word(desc, at).unwrap_or(0);
            let end = layout.word(desc, at + word).unwrap_or(0);
            let pages = layout.word(desc, at + 2 * word).unwrap_or(0);
            let name = names
                .next()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| bad(format!("mapping {i} of {count} has no file name")))?;
            if end < start {
                return Err(bad(format!(
                    "mapping {i} ends at {end:#x} before its start {start:#x}"
                )));
            }
            let offset = pages
                .checked_mul(page)
                .ok_or_else(|| bad(format!("mapping {i} has file offset {pages} pages")))?;
            use std::os::unix::ffi::OsStrExt;
            out.push(FileMapping {
                start,
                end,
                offset,
                path: PathBuf::from(std::ffi::OsStr::from_bytes(name)),
            });
        }
        out.sort_by_key(|m| m.start);
        Ok((out, page))
    }

    /// The core file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the core file in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the core file is empty (never, once opened).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// ELFCLASS64.
    pub fn is_64(&self) -> bool {
        self.layout.is_64
    }

    /// Byte order of the crashed process.
    pub fn byte_order(&self) -> ByteOrder {
        if self.layout.little {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }

    /// `e_machine` (62 for x86-64).
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// The process id: `NT_PRPSINFO`'s, else the first `NT_PRSTATUS`'s (the thread
    /// that took the signal).
    pub fn pid(&self) -> Option<i32> {
        self.info
            .as_ref()
            .map(|i| i.pid)
            .filter(|&p| p > 0)
            .or_else(|| self.threads.first().copied())
    }

    /// Thread ids, one per `NT_PRSTATUS`, the one that took the signal first.
    pub fn threads(&self) -> &[i32] {
        &self.threads
    }

    /// The signal that ended the process (`NT_SIGINFO`, else `pr_cursig`), if any.
    pub fn signal(&self) -> Option<i32> {
        self.signal
    }

    /// What `NT_PRPSINFO` says (name, arguments, state).
    pub fn process_info(&self) -> Option<&ProcessInfo> {
        self.info.as_ref()
    }

    /// The auxiliary vector (`NT_AUXV`), `AT_NULL` excluded.
    pub fn auxv(&self) -> &[(u64, u64)] {
        &self.auxv
    }

    /// The value of auxiliary vector entry `key` (`AT_PHDR` 3, `AT_ENTRY` 9, ...).
    pub fn aux(&self, key: u64) -> Option<u64> {
        self.auxv.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// Page size (`NT_FILE`'s, else `AT_PAGESZ`, else 4096).
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The memory segments, by address.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether the core has an `NT_FILE` note (or mappings were reconstructed with
    /// [`Self::reconstruct_mappings`]).
    pub fn has_file_mappings(&self) -> bool {
        self.files.is_some()
    }

    /// The file mappings (`NT_FILE`), by address; empty without the note.
    pub fn file_mappings(&self) -> &[FileMapping] {
        self.files.as_deref().unwrap_or(&[])
    }

    /// The file mappings as [`Mapping`]s for [`AddressSpace::from_mappings_with`]:
    /// permissions from the segment that dumps the range, else `r--p` (dumpers leave out
    /// read-only file mappings only); paths replaced by [`Self::replace_file`] are given
    /// replaced.
    pub fn mappings(&self) -> Vec<Mapping> {
        self.file_mappings()
            .iter()
            .map(|m| Mapping {
                start: m.start,
                end: m.end,
                offset: m.offset,
                perms: self
                    .segment_at(m.start)
                    .map_or_else(|| "r--p".to_owned(), Segment::perms),
                path: Some(
                    self.replaced
                        .get(&m.path)
                        .cloned()
                        .unwrap_or_else(|| m.path.clone()),
                ),
            })
            .collect()
    }

    /// The path of the main executable as the mappings name it: the file mapped where
    /// the auxiliary vector says the program headers (`AT_PHDR`) or the entry point
    /// (`AT_ENTRY`) are.
    pub fn original_executable(&self) -> Option<PathBuf> {
        [AT_PHDR, AT_ENTRY].iter().find_map(|&key| {
            let addr = self.aux(key)?;
            self.file_mapping_at(addr).map(|m| m.path.clone())
        })
    }

    /// Files are opened below `root` first (a sysroot, for a core from another machine).
    pub fn set_sysroot(&mut self, root: Option<PathBuf>) {
        self.root = root;
        self.opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Reads the mappings of `original` (as `NT_FILE` names it) from `replacement`: an
    /// executable or library that moved since the crash.
    pub fn replace_file(&mut self, original: &Path, replacement: &Path) {
        self.replaced
            .insert(original.to_owned(), replacement.to_owned());
        self.opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(original);
    }

    fn segment_at(&self, addr: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.vaddr <= addr);
        let seg = self.segments.get(i.checked_sub(1)?)?;
        (addr < seg.end()).then_some(seg)
    }

    fn file_mapping_at(&self, addr: u64) -> Option<&FileMapping> {
        let files = self.files.as_deref()?;
        let i = files.partition_point(|m| m.start <= addr);
        let m = files.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    /// Where a mapped file is read from: the replacement if any, below the sysroot
    /// first, without the ` (deleted)` suffix.
    fn candidates(&self, mapped: &Path) -> Vec<PathBuf> {
        let path = self.replaced.get(mapped).cloned().unwrap_or_else(|| {
            match mapped.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
                Some(p) => PathBuf::from(p),
                None => mapped.to_owned(),
            }
        });
        let mut out = Vec::new();
        if let Some(root) = &self.root {
            out.push(root.join(path.strip_prefix("/").unwrap_or(&path)));
        }
        out.push(path);
        out
    }

    fn open_mapped(&self, mapped: &Path) -> Option<Arc<File>> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = opened.get(mapped) {
            return file.clone();
        }
        let file = self
            .candidates(mapped)
            .iter()
            .find_map(|p| {
                File::open(p)
                    .ok()
                    .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
            })
            .map(Arc::new);
        opened.insert(mapped.to_owned(), file.clone());
        file
    }

    /// Reads `out` from the file of mapping `m` at address `at`; the count read. The
    /// part of the last page beyond the end of the file reads as zeros, as in memory.
    fn read_mapped_file(
        &self,
        m: &FileMapping,
        at: u64,
        out: &mut [u8],
    ) -> Result<usize, PieceError> {
        let Some(file) = self.open_mapped(&m.path) else {
            return Err(PieceError::Io(format!(
                "{at:#x} is in {}, which is missing (the core holds no copy of it)",
                m.path.display()
            )));
        };
        let offset = m.offset + (at - m.start);
        let n = read_some_at(&file, offset, out).map_err(|e| {
            PieceError::Io(format!(
                "cannot read {} at {offset:#x}: {e}",
                m.path.display()
            ))
        })?;
        if n == out.len() {
            return Ok(n);
        }
        let file_len = offset + n as u64;
        let page_end = page_up(file_len, self.page_size);
        let zeros = ((page_end - file_len) as usize).min(out.len() - n);
        out[n..n + zeros].fill(0);
        if n + zeros == 0 {
            return Err(PieceError::Io(format!(
                "{at:#x} is beyond the end of {} (changed since the crash?)",
                m.path.display()
            )));
        }
        Ok(n + zeros)
    }

    /// Bytes at `at`, at most `out.len()`, from one segment or one mapped file.
    fn read_piece(&self, at: u64, out: &mut [u8]) -> Result<usize, PieceError> {
        if let Some(seg) = self.segment_at(at) {
            let off = at - seg.vaddr;
            let want = (out.len() as u64).min(seg.memsz - off) as usize;
            if off < seg.filesz {
                let n = (want as u64).min(seg.filesz - off) as usize;
                self.file
                    .read_exact_at(&mut out[..n], seg.offset + off)
                    .map_err(|e| PieceError::Io(format!("cannot read the core file: {e}")))?;
                return Ok(n);
            }
            if let Some(m) = self.file_mapping_at(at) {
                let want = want.min((m.end - at) as usize);
                return self.read_mapped_file(m, at, &mut out[..want]);
            }
            if seg.filesz == 0 {
                // Left out on purpose (MADV_DONTDUMP, coredump_filter): not zeros.
                return Err(PieceError::Io(format!(
                    "{at:#x} is in memory the core does not hold (excluded from the dump)"
                )));
            }
            // Anonymous memory the process never touched.
            out[..want].fill(0);
            return Ok(want);
        }
        if let Some(m) = self.file_mapping_at(at) {
            let i = self.segments.partition_point(|s| s.vaddr <= at);
            let next = self.segments.get(i).map_or(u64::MAX, |s| s.vaddr);
            let want = (out.len() as u64).min(m.end - at).min(next - at) as usize;
            return self.read_mapped_file(m, at, &mut out[..want]);
        }
        Err(PieceError::Unmapped)
    }

    /// Fills `buf` with the process's memory at `addr`, all or nothing: from the core's
    /// segments, else from the mapped files (code and read-only data the dumper left
    /// out).
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let len = buf.len();
        if addr.checked_add(len as u64).is_none() {
            return Err(TargetError::Unmapped { addr, len });
        }
        let mut done = 0;
        while done < len {
            let at = addr + done as u64;
            match self.read_piece(at, &mut buf[done..]) {
                Ok(0) => return Err(TargetError::Unmapped { addr, len }),
                Ok(n) => done += n,
                Err(PieceError::Unmapped) => return Err(TargetError::Unmapped { addr, len }),
                Err(PieceError::Io(why)) => return Err(TargetError::Io(why)),
            }
        }
        Ok(())
    }

    /// Reads only bytes the core itself holds (no mapped file, no zero fill).
    fn read_dumped(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let seg = self.segment_at(addr)?;
        let off = addr - seg.vaddr;
        if off.checked_add(len as u64)? > seg.filesz {
            return None;
        }
        read_exact_at(&self.file, seg.offset + off, len).ok()
    }

    /// Problems with the mapped files: missing, shorter than their mappings, or changed
    /// since the crash (another build-id than the copy of their first page in the core,
    /// or other bytes than the core's copy of a read-only mapping). One line each. Files
    /// whose mappings the core holds entirely (shared memory) are not looked at.
    pub fn check_files(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut by_path: BTreeMap<&Path, Vec<&FileMapping>> = BTreeMap::new();
        for m in self.file_mappings() {
            by_path.entry(&m.path).or_default().push(m);
        }
        for (mapped, group) in by_path {
            // A mapping the core holds entirely (shared memory, say) needs no file.
            if group.iter().all(|m| self.fully_dumped(m.start, m.end)) {
                continue;
            }
            let shown = self.replaced.get(mapped).map_or(mapped, PathBuf::as_path);
            let Some(file) = self.open_mapped(mapped) else {
                let deleted = !self.replaced.contains_key(mapped)
                    && mapped.to_str().is_some_and(|p| p.ends_with(" (deleted)"));
                warnings.push(format!(
                    "{} (mapped at {:#x}) is missing{}: what the core does not hold of it \
                     (code, constants, its symbols and types) is not available",
                    shown.display(),
                    group[0].start,
                    if deleted {
                        " (deleted while the process ran)"
                    } else {
                        ""
                    }
                ));
                continue;
            };
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let needed = group
                .iter()
                .map(|m| m.offset.saturating_add(m.end - m.start))
                .max()
                .unwrap_or(0);
            if needed > page_up(size, self.page_size) {
                warnings.push(format!(
                    "{} has changed since the crash: it has {size} bytes, the process mapped \
                     {needed}",
                    shown.display()
                ));
                continue;
            }
            if let Some(why) = self.file_differs(&file, &group) {
                warnings.push(format!(
                    "{} has changed since the crash: {why}",
                    shown.display()
                ));
            }
        }
        warnings
    }

    /// Whether the core holds every byte of `[start, end)`.
    fn fully_dumped(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        while at < end {
            match self.segment_at(at) {
                Some(seg) if at - seg.vaddr < seg.filesz => at = seg.vaddr + seg.filesz,
                _ => return false,
            }
        }
        true
    }

    /// Compares a mapped file with the core: build-ids first, else the bytes of the
    /// read-only mappings the core holds.
    fn file_differs(&self, file: &File, group: &[&FileMapping]) -> Option<String> {
        let from_file = |offset: u64, len: usize| read_exact_at(file, offset, len).ok();
        let file_id = build_id(&from_file);
        if let Some(first) = group.iter().find(|m| m.offset == 0) {
            let start = first.start;
            let end = first.end;
            let from_core = |offset: u64, len: usize| {
                let at = start.checked_add(offset)?;
                (at.checked_add(len as u64)? <= end).then_some(())?;
                self.read_dumped(at, len)
            };
            if let (Some(core_id), Some(file_id)) = (build_id(&from_core), &file_id) {
                return (&core_id != file_id).then(|| {
                    format!(
                        "build-id {} in the core, {} in the file",
                        hex(&core_id),
                        hex(file_id)
                    )
                });
            }
        }
        for m in group {
            let Some(seg) = self.segment_at(m.start) else {
                continue;
            };
            if seg.flags & PF_W != 0 || seg.filesz == 0 || seg.vaddr != m.start {
                continue;
            }
            let len = (seg.filesz as usize).min(COMPARE_BYTES);
            let (Some(core), Some(disk)) =
                (self.read_dumped(m.start, len), from_file(m.offset, len))
            else {
                continue;
            };
            if core != disk {
                return Some(format!(
                    "its bytes at offset {:#x} differ from the core's copy (mapped at {:#x})",
                    m.offset, m.start
                ));
            }
        }
        None
    }

    /// For a core without `NT_FILE`: the mappings of `exe` (placed by the auxiliary
    /// vector's `AT_PHDR` or `AT_ENTRY`) and of the shared libraries the dynamic linker
    /// lists (`DT_DEBUG` -> `r_debug.r_map` -> `link_map`, read in the core), which then
    /// serve as the file mappings.
    pub fn reconstruct_mappings(&mut self, exe: &Path) -> Result<(), CoreError> {
        let core_path = self.path.clone();
        let fail = |message: String| CoreError::Executable {
            path: core_path.clone(),
            exe: exe.to_owned(),
            message,
        };
        let file = File::open(exe).map_err(|e| fail(e.to_string()))?;
        let elf = LoadedElf::read(&file).map_err(&fail)?;
        if elf.header.layout != self.layout {
            return Err(fail(format!(
                "it is ELFCLASS{} {}, the core is ELFCLASS{} {}",
                if elf.header.layout.is_64 { 64 } else { 32 },
                if elf.header.layout.little {
                    "little-endian"
                } else {
                    "big-endian"
                },
                if self.layout.is_64 { 64 } else { 32 },
                if self.layout.little {
                    "little-endian"
                } else {
                    "big-endian"
                },
            )));
        }
        let phdr = elf.headers.iter().find(|p| p.p_type == PT_PHDR);
        let bias = match (self.aux(AT_PHDR), phdr, self.aux(AT_ENTRY)) {
            (Some(at), Some(ph), _) => at.wrapping_sub(ph.vaddr),
            (_, _, Some(entry)) => entry.wrapping_sub(elf.header.entry),
            _ if elf.header.elf_type == ET_EXEC => 0,
            _ => {
                return Err(fail(
                    "the core has no auxiliary vector (NT_AUXV) to say where a \
                     position-independent executable was loaded"
                        .into(),
                ));
            }
        };
        let page = self.page_size;
        let mut files = elf.mappings(exe, bias, page);
        if files.is_empty() {
            return Err(fail("it has no loadable segment".into()));
        }
        self.files = Some(files.clone());
        // The libraries, from the dynamic linker's list in the core's memory.
        let word = self.layout.word_size();
        let mut libraries = Vec::new();
        if let Some(dynamic) = elf.headers.iter().find(|p| p.p_type == PT_DYNAMIC) {
            let at = bias.wrapping_add(dynamic.vaddr);
            let mut r_debug = None;
            for i in 0..MAX_DYNAMIC_ENTRIES {
                let mut entry = vec![0u8; 2 * word];
                if self
                    .read_memory(at + (i * 2 * word) as u64, &mut entry)
                    .is_err()
                {
                    break;
                }
                let tag = self.layout.word(&entry, 0).unwrap_or(DT_NULL);
                if tag == DT_NULL {
                    break;
                }
                if tag == DT_DEBUG {
                    r_debug = self.layout.word(&entry, word).filter(|&v| v != 0);
                }
            }
            let read_word = |addr: u64| {
                let mut b = vec![0u8; word];
                self.read_memory(addr, &mut b).ok()?;
                self.layout.word(&b, 0)
            };
            let mut next = r_debug.and_then(|r| read_word(r + word as u64));
            let mut seen = HashSet::new();
            while let Some(link) = next.filter(|&l| l != 0) {
                if !seen.insert(link) || seen.len() > MAX_LINK_MAP {
                    break;
                }
                let w = word as u64;
                let (Some(l_addr), Some(l_name)) = (read_word(link), read_word(link + w)) else {
                    break;
                };
                next = read_word(link + 3 * w);
                let name = self.read_c_string(l_name, MAX_PATH);
                if name.starts_with('/') {
                    libraries.push((PathBuf::from(name), l_addr));
                }
            }
        }
        for (library, l_addr) in libraries {
            let Some(file) = self
                .candidates(&library)
                .iter()
                .find_map(|p| File::open(p).ok())
            else {
                // Reported by check_files as missing.
                files.push(FileMapping {
                    start: l_addr,
                    end: l_addr.saturating_add(page),
                    offset: 0,
                    path: library,
                });
                continue;
            };
            if let Ok(elf) = LoadedElf::read(&file) {
                files.extend(elf.mappings(&library, l_addr, page));
            }
        }
        files.sort_by_key(|m| m.start);
        files.dedup_by(|later, earlier| later.start < earlier.end);
        self.files = Some(files);
        self.opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }

    fn read_c_string(&self, addr: u64, max: usize) -> String {
        let mut out = Vec::new();
        let mut byte = [0u8; 1];
        while out.len() < max {
            if self
                .read_memory(addr + out.len() as u64, &mut byte)
                .is_err()
                || byte[0] == 0
            {
                break;
            }
            out.push(byte[0]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `NT_GNU_BUILD_ID` of an ELF image read through `read(offset, len)` (file
/// offsets), from its `PT_NOTE` segments.
fn build_id(read: &dyn Fn(u64, usize) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
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
struct LoadedElf {
    header: ElfHeader,
    headers: Vec<ProgramHeader>,
}

impl LoadedElf {
    fn read(file: &File) -> Result<LoadedElf, String> {
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
    fn mappings(&self, path: &Path, bias: u64, page: u64) -> Vec<FileMapping> {
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

/// A core file as a [`Target`]: memory from [`CoreFile`], symbols and types from the
/// mapped files through an [`AddressSpace`].
pub struct CoreTarget {
    /// The core.
    pub core: CoreFile,
    /// Its loaded objects, symbols and types.
    pub space: AddressSpace,
    name: String,
    warnings: Vec<String>,
}

impl fmt::Debug for CoreTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreTarget")
            .field("name", &self.name)
            .field("core", &self.core)
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl CoreTarget {
    /// Opens a core file and reads the symbols and types of the files it maps. `exe`
    /// names the program's executable when the core does not (no `NT_FILE`) or when it
    /// moved since the crash; it then replaces the executable the core names.
    pub fn open(path: &Path, exe: Option<&Path>) -> Result<CoreTarget, CoreError> {
        let options = SearchOptions {
            executable: exe.map(Path::to_owned),
            ..SearchOptions::default()
        };
        CoreTarget::open_with(path, &options)
    }

    /// [`Self::open`] with every search option: `options.executable` is the executable
    /// override, `options.root` a sysroot under which the mapped files (and their debug
    /// files) are looked for first, `options.debug_dirs` the global debug directories.
    pub fn open_with(path: &Path, options: &SearchOptions) -> Result<CoreTarget, CoreError> {
        let mut core = CoreFile::open(path)?;
        core.set_sysroot(options.root.clone());
        let exe = options.executable.as_deref();
        let main = match (core.has_file_mappings(), exe) {
            (false, None) => {
                return Err(CoreError::NoFileMappings {
                    path: path.to_owned(),
                });
            }
            (false, Some(exe)) => {
                core.reconstruct_mappings(exe)?;
                Some(exe.to_owned())
            }
            (true, Some(exe)) => {
                let original = core
                    .original_executable()
                    .ok_or_else(|| CoreError::Executable {
                        path: path.to_owned(),
                        exe: exe.to_owned(),
                        message:
                            "the core does not say which of its mapped files is the executable \
                              (no AT_PHDR or AT_ENTRY in NT_AUXV)"
                                .into(),
                    })?;
                if original != exe {
                    core.replace_file(&original, exe);
                }
                Some(exe.to_owned())
            }
            (true, None) => core.original_executable(),
        };
        let warnings = core.check_files();
        let mappings = core.mappings();
        let space_options = SearchOptions {
            root: options.root.clone(),
            debug_dirs: options.debug_dirs.clone(),
            executable: main.map(|p| strip_deleted(&p)),
            pid: None,
        };
        let space =
            AddressSpace::from_mappings_with(&mappings, &space_options).map_err(|error| {
                CoreError::DebugInfo {
                    path: path.to_owned(),
                    error,
                }
            })?;
        let exe_name = space
            .main_executable()
            .map(|p| p.display().to_string())
            .or_else(|| core.process_info().map(|i| i.program.clone()))
            .unwrap_or_else(|| "?".into());
        let name = match core.pid() {
            Some(pid) => format!("core {} (pid {pid}, {exe_name})", path.display()),
            None => format!("core {} ({exe_name})", path.display()),
        };
        Ok(CoreTarget {
            core,
            space,
            name,
            warnings,
        })
    }

    /// The crashed process's id.
    pub fn pid(&self) -> Option<i32> {
        self.core.pid()
    }

    /// The main executable's path: the one given to [`Self::open`], else the one the
    /// core maps where its program headers are.
    pub fn executable(&self) -> Option<PathBuf> {
        self.space.main_executable()
    }

    /// Mapped files that are missing or changed since the crash (see
    /// [`CoreFile::check_files`]). Files whose symbols or types could not be read are
    /// in `self.space.problems()`, as for a live process.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

fn strip_deleted(path: &Path) -> PathBuf {
    match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(p) => PathBuf::from(p),
        None => path.to_owned(),
    }
}

impl Target for CoreTarget {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.core.read_memory(addr, buf)
    }
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.space.find_symbol(name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.space.find_function(name)
    }
    fn find_type(&self, name: &str) -> Option<TypeId> {
        self.space.find_type(name)
    }
    fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.space.type_size(ty)
    }
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        self.space.field_offset(ty, field)
    }
    fn type_sizes(&self) -> mqs_target_type_sizes {
        self.space.type_sizes()
    }
    fn byte_order(&self) -> ByteOrder {
        self.core.byte_order()
    }
    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made core: one class and byte order, a few segments and notes.
    struct Builder {
        layout: Layout,
        loads: Vec<(u64, Vec<u8>, u64, u32)>,
        notes: Vec<(Vec<u8>, u32, Vec<u8>)>,
    }

    impl Builder {
        fn new(is_64: bool, little: bool) -> Builder {
            Builder {
                layout: Layout { is_64, little },
                loads: Vec::new(),
                notes: Vec::new(),
            }
        }
        fn put(&self, out: &mut Vec<u8>, v: u64, size: usize) {
            let bytes = v.to_le_bytes();
            let mut b = bytes[..size].to_vec();
            if !self.layout.little {
                b.reverse();
            }
            out.extend_from_slice(&b);
        }
        fn word(&self, out: &mut Vec<u8>, v: u64) {
            self.put(out, v, self.layout.word_size());
        }
        fn build(&self) -> Vec<u8> {
            let l = self.layout;
            let ehsize = if l.is_64 { 64 } else { 52 };
            let phsize = usize::from(phentsize(l));
            let phnum = 1 + self.loads.len();
            let mut notes = Vec::new();
            for (name, ty, desc) in &self.notes {
                self.put(&mut notes, name.len() as u64 + 1, 4);
                self.put(&mut notes, desc.len() as u64, 4);
                self.put(&mut notes, u64::from(*ty), 4);
                notes.extend_from_slice(name);
                notes.push(0);
                while notes.len() % 4 != 0 {
                    notes.push(0);
                }
                notes.extend_from_slice(desc);
                while notes.len() % 4 != 0 {
                    notes.push(0);
                }
            }
            let notes_at = ehsize + phsize * phnum;
            let mut data_at = notes_at + notes.len();
            let mut out = Vec::new();
            out.extend_from_slice(b"\x7fELF");
            out.push(if l.is_64 { 2 } else { 1 });
            out.push(if l.little { 1 } else { 2 });
            out.push(1);
            out.resize(16, 0);
            self.put(&mut out, u64::from(ET_CORE), 2);
            self.put(&mut out, 62, 2);
            self.put(&mut out, 1, 4);
            self.word(&mut out, 0); // entry
            self.word(&mut out, ehsize as u64); // phoff
            self.word(&mut out, 0); // shoff
            self.put(&mut out, 0, 4); // flags
            self.put(&mut out, ehsize as u64, 2);
            self.put(&mut out, phsize as u64, 2);
            self.put(&mut out, phnum as u64, 2);
            self.put(&mut out, 0, 6);
            assert_eq!(out.len(), ehsize);
            let ph = |out: &mut Vec<u8>,
                      ty: u32,
                      flags: u32,
                      offset: u64,
                      vaddr: u64,
                      filesz: u64,
                      memsz: u64| {
                if l.is_64 {
                    self.put(out, u64::from(ty), 4);
                    self.put(out, u64::from(flags), 4);
                    for v in [offset, vaddr, 0, filesz, memsz, 4] {
                        self.put(out, v, 8);
                    }
                } else {
                    for v in [
                        u64::from(ty),
                        offset,
                        vaddr,
                        0,
                        filesz,
                        memsz,
                        u64::from(flags),
                        4,
                    ] {
                        self.put(out, v, 4);
                    }
                }
            };
            ph(
                &mut out,
                PT_NOTE,
                0,
                notes_at as u64,
                0,
                notes.len() as u64,
                0,
            );
            for (vaddr, bytes, memsz, flags) in &self.loads {
                ph(
                    &mut out,
                    PT_LOAD,
                    *flags,
                    data_at as u64,
                    *vaddr,
                    bytes.len() as u64,
                    *memsz,
                );
                data_at += bytes.len();
            }
            out.extend_from_slice(&notes);
            for (_, bytes, _, _) in &self.loads {
                out.extend_from_slice(bytes);
            }
            out
        }
    }

    fn write(bytes: &[u8]) -> (tempdir::Dir, PathBuf) {
        let dir = tempdir::Dir::new();
        let path = dir.0.join("core");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    mod tempdir {
        use std::path::PathBuf;
        use std::sync::atomic::{AtomicUsize, Ordering};
        pub struct Dir(pub PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: AtomicUsize = AtomicUsize::new(0);
                let p = std::env::temp_dir().join(format!(
                    "mqd-core-unit-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn prstatus(b: &Builder, pid: u32, signal: u16) -> Vec<u8> {
        let word = b.layout.word_size();
        let mut d = vec![0u8; 16 + 2 * word];
        let mut sig = Vec::new();
        b.put(&mut sig, u64::from(signal), 2);
        d[12..14].copy_from_slice(&sig);
        b.put(&mut d, u64::from(pid), 4);
        d.resize(if b.layout.is_64 { 336 } else { 144 }, 0);
        d
    }

    fn prpsinfo(b: &Builder, pid: u32, name: &str, args: &str) -> Vec<u8> {
        let mut d = vec![0u8; if b.layout.is_64 { 24 } else { 12 }];
        d[0] = 1;
        d[1] = b'S';
        b.put(&mut d, u64::from(pid), 4);
        b.put(&mut d, 1, 4);
        b.put(&mut d, 0, 8);
        let mut fname = name.as_bytes().to_vec();
        fname.resize(16, 0);
        d.extend_from_slice(&fname);
        let mut psargs = args.as_bytes().to_vec();
        psargs.resize(80, 0);
        d.extend_from_slice(&psargs);
        d
    }

    fn file_note(b: &Builder, page: u64, maps: &[(u64, u64, u64, &str)]) -> Vec<u8> {
        let mut d = Vec::new();
        b.word(&mut d, maps.len() as u64);
        b.word(&mut d, page);
        for (start, end, pages, _) in maps {
            b.word(&mut d, *start);
            b.word(&mut d, *end);
            b.word(&mut d, *pages);
        }
        for (_, _, _, name) in maps {
            d.extend_from_slice(name.as_bytes());
            d.push(0);
        }
        d
    }

    fn sample(is_64: bool, little: bool, mapped: &Path) -> Builder {
        let mut b = Builder::new(is_64, little);
        b.loads
            .push((0x10000, vec![0xaa; 0x1000], 0x3000, PF_R | PF_W));
        b.loads.push((0x20000, vec![0xbb; 0x1000], 0x1000, PF_R));
        b.loads.push((0x40000, Vec::new(), 0x1000, PF_R | PF_W));
        let ps = prstatus(&b, 4242, 3);
        let info = prpsinfo(&b, 4242, "a.out", "./a.out -v");
        let files = file_note(
            &b,
            0x1000,
            &[
                (0x20000, 0x23000, 0, mapped.to_str().unwrap()),
                // Held entirely by the core: needs no file.
                (0x10000, 0x11000, 0, "/dev/shm/gone (deleted)"),
            ],
        );
        b.notes.push((b"CORE".to_vec(), NT_PRSTATUS, ps));
        b.notes.push((b"CORE".to_vec(), NT_PRPSINFO, info));
        b.notes.push((b"CORE".to_vec(), NT_FILE, files));
        b
    }

    #[test]
    fn every_class_and_byte_order() {
        for (is_64, little) in [(true, true), (false, true), (true, false), (false, false)] {
            let dir = tempdir::Dir::new();
            let mapped = dir.0.join("lib.so");
            // Two pages and a half: the mapping's third page is half file, half zeros.
            let mut contents: Vec<u8> = (0..0x2800u32).map(|i| (i % 251) as u8).collect();
            contents[..0x1000].fill(0xbb);
            std::fs::write(&mapped, &contents).unwrap();
            let b = sample(is_64, little, &mapped);
            let path = dir.0.join("core");
            std::fs::write(&path, b.build()).unwrap();
            let core = CoreFile::open(&path).unwrap();
            let what = format!("is_64 {is_64} little {little}");
            assert_eq!(core.is_64(), is_64, "{what}");
            assert_eq!(core.byte_order() == ByteOrder::Little, little, "{what}");
            assert_eq!(core.pid(), Some(4242), "{what}");
            assert_eq!(core.threads(), &[4242], "{what}");
            assert_eq!(core.signal(), Some(3), "{what}");
            let info = core.process_info().unwrap();
            assert_eq!(
                (info.program.as_str(), info.arguments.as_str(), info.state),
                ("a.out", "./a.out -v", 'S'),
                "{what}"
            );
            assert_eq!(core.file_mappings().len(), 2, "{what}");
            assert_eq!(core.mappings()[0].perms, "rw-p", "{what}");
            assert_eq!(core.mappings()[1].perms, "r--p", "{what}");
            let mut buf = [0u8; 8];
            // Dumped bytes, then the untouched anonymous tail reads as zeros.
            core.read_memory(0x10ff8, &mut buf).unwrap();
            assert_eq!(
                buf,
                [0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa],
                "{what}"
            );
            core.read_memory(0x10ffc, &mut buf).unwrap();
            assert_eq!(buf, [0xaa, 0xaa, 0xaa, 0xaa, 0, 0, 0, 0], "{what}");
            // The file-backed mapping: first page in the core, the rest from the file.
            core.read_memory(0x20ffc, &mut buf).unwrap();
            assert_eq!(&buf[..4], &[0xbb; 4], "{what}");
            assert_eq!(&buf[4..], &contents[0x1000..0x1004], "{what}");
            core.read_memory(0x227fc, &mut buf).unwrap();
            assert_eq!(&buf[..4], &contents[0x27fc..0x2800], "{what}");
            assert_eq!(&buf[4..], &[0; 4], "{what}");
            // Memory left out of the dump is an error, not zeros; unmapped is unmapped.
            assert!(
                matches!(core.read_memory(0x40000, &mut buf), Err(TargetError::Io(_))),
                "{what}"
            );
            assert_eq!(
                core.read_memory(0x30000, &mut buf),
                Err(TargetError::Unmapped {
                    addr: 0x30000,
                    len: 8
                }),
                "{what}"
            );
            assert!(core.read_memory(u64::MAX - 3, &mut buf).is_err(), "{what}");
            assert_eq!(core.check_files(), Vec::<String>::new(), "{what}");
            // A changed file is noticed from the core's copy of its first page.
            contents[..16].fill(0xcc);
            std::fs::write(&mapped, &contents).unwrap();
            let core = CoreFile::open(&path).unwrap();
            let warnings = core.check_files();
            assert!(
                warnings.len() == 1 && warnings[0].contains("changed since the crash"),
                "{what}: {warnings:?}"
            );
            std::fs::remove_file(&mapped).unwrap();
            let core = CoreFile::open(&path).unwrap();
            let warnings = core.check_files();
            assert!(
                warnings.len() == 1 && warnings[0].contains("is missing"),
                "{what}: {warnings:?}"
            );
            assert!(
                matches!(core.read_memory(0x21000, &mut buf), Err(TargetError::Io(m)) if m.contains("missing")),
                "{what}"
            );
        }
    }

    #[test]
    fn clear_errors() {
        let dir = tempdir::Dir::new();
        let mapped = dir.0.join("lib.so");
        std::fs::write(&mapped, [0u8; 0x3000]).unwrap();
        let good = sample(true, true, &mapped).build();
        let err = |bytes: &[u8]| {
            let (_dir, path) = write(bytes);
            CoreFile::open(&path).unwrap_err().to_string()
        };
        assert!(err(b"").starts_with("not an ELF core file"));
        assert!(err(b"hello world, this is text").starts_with("not an ELF core file"));
        let mut exec = good.clone();
        exec[16] = ET_EXEC as u8;
        assert!(err(&exec).contains("is an executable"), "{}", err(&exec));
        let cut = err(&good[..good.len() / 2]);
        assert!(
            cut.starts_with("truncated core file: segment at 0x"),
            "{cut}"
        );
        assert!(cut.contains("needs") && cut.contains("file has"), "{cut}");
        assert!(
            err(&good[..40]).starts_with("malformed core file"),
            "{}",
            err(&good[..40])
        );
        // Garbage over the notes.
        let notes_at = 64 + 56 * 4;
        let mut garbage = good.clone();
        for (i, b) in garbage[notes_at..notes_at + 64].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(97).wrapping_add(200);
        }
        assert!(
            err(&garbage).starts_with("corrupt notes in core file"),
            "{}",
            err(&garbage)
        );
        // No NT_FILE: the target needs the executable.
        let mut b = sample(true, true, &mapped);
        b.notes.retain(|n| n.1 != NT_FILE);
        let (_d, path) = write(&b.build());
        let e = CoreTarget::open(&path, None).unwrap_err().to_string();
        assert!(
            e.contains("lacks file mappings") && e.contains("--exe"),
            "{e}"
        );
    }

    #[test]
    fn never_panics_on_mutations() {
        let dir = tempdir::Dir::new();
        let mapped = dir.0.join("lib.so");
        std::fs::write(&mapped, [7u8; 0x3000]).unwrap();
        let good = sample(true, true, &mapped).build();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let path = dir.0.join("mutant");
        for _ in 0..500 {
            let mut bytes = good.clone();
            for _ in 0..(next() % 8 + 1) {
                let at = (next() as usize) % bytes.len().min(0x200);
                bytes[at] = next() as u8;
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(core) = CoreFile::open(&path) {
                let mut buf = [0u8; 64];
                for addr in [0x10000u64, 0x20000, 0x21000, 0x40000, 0] {
                    let _ = core.read_memory(addr, &mut buf);
                }
                let _ = core.check_files();
                let _ = core.mappings();
            }
        }
    }
}
