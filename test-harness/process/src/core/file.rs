//! A core file: its segments, its notes (threads, registers, the process, the files it
//! mapped), and the process's memory read from it and from those files.

use super::error::CoreError;
use super::format::{Layout, Note, ProgramHeader, *};
use mqd_debuginfo::Mapping;
use mqd_target::{ByteOrder, TargetError};
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
    /// How many of those the file really has: fewer when the core was cut short (a
    /// full disk, `ulimit -c`); reads into the rest fail.
    pub present: u64,
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

pub(super) fn perms(flags: u32) -> String {
    let mut s = String::with_capacity(4);
    s.push(if flags & PF_R != 0 { 'r' } else { '-' });
    s.push(if flags & PF_W != 0 { 'w' } else { '-' });
    s.push(if flags & PF_X != 0 { 'x' } else { '-' });
    s.push('p');
    s
}

/// What `NT_PRPSINFO` says of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreProcessInfo {
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
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) layout: Layout,
    pub(super) machine: u16,
    /// Sorted by address.
    pub(super) segments: Vec<Segment>,
    pub(super) threads: Vec<i32>,
    /// Each thread's instruction, stack and frame pointers (x86_64 cores), in
    /// `threads` order.
    pub(super) registers: Vec<Option<mqd_debuginfo::cfi::Registers>>,
    /// Each thread's thread pointer (`fs_base`), in the order of `threads`.
    pub(super) thread_pointers: Vec<Option<u64>>,
    pub(super) signal: Option<i32>,
    pub(super) info: Option<CoreProcessInfo>,
    pub(super) auxv: Vec<(u64, u64)>,
    /// `NT_FILE`, sorted by address; `None` when the core has no such note.
    pub(super) files: Option<Vec<FileMapping>>,
    pub(super) page_size: u64,
    pub(super) root: Option<PathBuf>,
    /// Paths read in place of others (an executable that moved).
    pub(super) replaced: HashMap<PathBuf, PathBuf>,
    /// Mapped files opened for reading, by the path the mappings give.
    pub(super) opened: Mutex<HashMap<PathBuf, Option<Arc<File>>>>,
    /// What [`CoreFile::check_files`] found when the core was opened as a target.
    pub(super) problems: Vec<FileProblem>,
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

pub(super) fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
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
                    // What a truncated core still has (gdb reads as far as it goes).
                    present: ph.filesz.min(len.saturating_sub(ph.offset)),
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
            registers: Vec::new(),
            thread_pointers: Vec::new(),
            signal: None,
            info: None,
            auxv: Vec::new(),
            files: None,
            page_size: 4096,
            root: None,
            replaced: HashMap::new(),
            opened: Mutex::new(HashMap::new()),
            problems: Vec::new(),
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

    pub(super) fn corrupt(&self, message: String) -> CoreError {
        CoreError::CorruptNotes {
            path: self.path.clone(),
            message,
        }
    }

    pub(super) fn take_note(&mut self, note: &Note<'_>) -> Result<(), CoreError> {
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
                // pr_reg (user_regs_struct, 27 words) at 112 on x86_64.
                let word_at = |i: usize| layout.u64(note.desc, 112 + 8 * i);
                const EM_X86_64: u16 = 62;
                let registers = (self.machine == EM_X86_64 && word == 8)
                    .then(|| {
                        let words: Option<Vec<u64>> = (0..21).map(word_at).collect();
                        mqd_debuginfo::cfi::Registers::from_user_regs(&words?)
                    })
                    .flatten();
                self.registers.push(registers);
                // fs_base is word 21 of user_regs_struct.
                let pointer = (self.machine == EM_X86_64 && word == 8)
                    .then(|| word_at(21))
                    .flatten()
                    .filter(|&p| p != 0);
                self.thread_pointers.push(pointer);
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
                self.info = Some(CoreProcessInfo {
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
        self.layout.order
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
    pub fn process_info(&self) -> Option<&CoreProcessInfo> {
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

    pub(super) fn segment_at(&self, addr: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.vaddr <= addr);
        let seg = self.segments.get(i.checked_sub(1)?)?;
        (addr < seg.end()).then_some(seg)
    }

    pub(super) fn file_mapping_at(&self, addr: u64) -> Option<&FileMapping> {
        let files = self.files.as_deref()?;
        let i = files.partition_point(|m| m.start <= addr);
        let m = files.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    /// Where a mapped file is read from: the replacement if any, below the sysroot
    /// first, without the ` (deleted)` suffix.
    pub(super) fn candidates(&self, mapped: &Path) -> Vec<PathBuf> {
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

    pub(super) fn open_mapped(&self, mapped: &Path) -> Option<Arc<File>> {
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
                if off >= seg.present {
                    return Err(PieceError::Io(format!(
                        "{at:#x} is in the part of {} that is missing (the core file was cut short)",
                        self.path.display()
                    )));
                }
                let n = (want as u64).min(seg.present - off) as usize;
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
                Err(PieceError::Io(why)) => return Err(TargetError::Unavailable { addr: at, why }),
            }
        }
        Ok(())
    }

    /// Reads only bytes the core itself holds (no mapped file, no zero fill).
    pub(super) fn read_dumped(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let seg = self.segment_at(addr)?;
        let off = addr - seg.vaddr;
        if off.checked_add(len as u64)? > seg.present {
            return None;
        }
        read_exact_at(&self.file, seg.offset + off, len).ok()
    }
}

impl mqd_target::Memory for CoreFile {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        CoreFile::read_memory(self, addr, buf)
    }

    fn image_byte_order(&self) -> Option<ByteOrder> {
        Some(self.byte_order())
    }
}

/// A file the core maps that is not what the process ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// The file is gone: what the core does not hold of it is not available.
    Missing {
        /// Where it was (or its replacement).
        path: PathBuf,
        /// Its first mapping's address.
        mapped_at: u64,
        /// It was deleted while the process ran.
        deleted: bool,
    },
    /// The file is another one now.
    Changed {
        /// Where it is.
        path: PathBuf,
        /// How it differs.
        why: String,
    },
}

impl FileProblem {
    /// Whether the file is gone (an executable that moved: `--exe` tells where it is).
    pub fn is_missing(&self) -> bool {
        matches!(self, FileProblem::Missing { .. })
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::Missing {
                path,
                mapped_at,
                deleted,
            } => write!(
                f,
                "{} (mapped at {mapped_at:#x}) is missing{}: what the core does not hold of it \
                 (code, constants, its symbols and types) is not available",
                path.display(),
                if *deleted {
                    " (deleted while the process ran)"
                } else {
                    ""
                }
            ),
            FileProblem::Changed { path, why } => {
                write!(f, "{} has changed since the crash: {why}", path.display())
            }
        }
    }
}
