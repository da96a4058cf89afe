//! The files a core maps: the NT_FILE note that lists them, whether they are still those
//! the process ran (missing, changed), and the mappings of a core that does not list them.

use super::error::CoreError;
use super::file::*;
use super::format::*;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::path::PathBuf;

impl CoreFile {
    /// `NT_FILE`: count, page size, `count` (start, end, offset in pages), the names.
    pub(super) fn parse_file_note(
        &self,
        desc: &[u8],
    ) -> Result<(Vec<FileMapping>, u64), CoreError> {
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
            // The mapped range must lie in a file offset (off_t) can reach.
            let offset = pages
                .checked_mul(page)
                .filter(|o| {
                    o.checked_add(end - start)
                        .is_some_and(|e| e <= i64::MAX as u64)
                })
                .ok_or_else(|| {
                    bad(format!(
                        "mapping {i} at file offset {pages} pages runs past any file's end"
                    ))
                })?;
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

    /// Problems with the mapped files: missing, or changed since the crash (another
    /// build-id than the copy of their first page in the core; without build-ids, shorter
    /// than their mappings or other bytes than the core's copy of a read-only mapping). Files whose mappings
    /// the core holds entirely (shared memory) are not looked at.
    pub fn check_files(&self) -> Vec<FileProblem> {
        let mut problems = Vec::new();
        let mut by_path: BTreeMap<&Path, Vec<&FileMapping>> = BTreeMap::new();
        for m in self.file_mappings() {
            by_path.entry(&m.path).or_default().push(m);
        }
        for (mapped, group) in by_path {
            // A mapping the core holds entirely (shared memory, say) needs no file.
            if group.iter().all(|m| self.fully_dumped(m.start, m.end)) {
                continue;
            }
            let path = self
                .replaced
                .get(mapped)
                .map_or(mapped, PathBuf::as_path)
                .to_owned();
            let Some(file) = self.open_mapped(mapped) else {
                let deleted = !self.replaced.contains_key(mapped)
                    && mapped.to_str().is_some_and(|p| p.ends_with(" (deleted)"));
                problems.push(FileProblem::Missing {
                    path,
                    mapped_at: group[0].start,
                    deleted,
                });
                continue;
            };
            // The same build: whatever the mappings' sizes (the dynamic linker's first
            // mapping of a library reserves its whole span, past the end of a small file).
            match self.build_ids_differ(&file, &group) {
                Some(Some(why)) => {
                    problems.push(FileProblem::Changed { path, why });
                    continue;
                }
                Some(None) => continue,
                None => {}
            }
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let needed = group
                .iter()
                .map(|m| m.offset.saturating_add(m.end - m.start))
                .max()
                .unwrap_or(0);
            if needed > page_up(size, self.page_size) {
                problems.push(FileProblem::Changed {
                    path,
                    why: format!("it has {size} bytes, the process mapped {needed}"),
                });
                continue;
            }
            if let Some(why) = self.bytes_differ(&file, &group) {
                problems.push(FileProblem::Changed { path, why });
            }
        }
        problems
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

    /// Compares a mapped file's build-id with the one in the core's copy of its first
    /// page: `None` when either has none, else why they differ, if they do.
    fn build_ids_differ(&self, file: &File, group: &[&FileMapping]) -> Option<Option<String>> {
        let from_file = |offset: u64, len: usize| read_exact_at(file, offset, len).ok();
        let file_id = build_id(&from_file)?;
        let first = group.iter().find(|m| m.offset == 0)?;
        let (start, end) = (first.start, first.end);
        let from_core = |offset: u64, len: usize| {
            let at = start.checked_add(offset)?;
            (at.checked_add(len as u64)? <= end).then_some(())?;
            self.read_dumped(at, len)
        };
        let core_id = build_id(&from_core)?;
        Some((core_id != file_id).then(|| {
            format!(
                "build-id {} in the core, {} in the file",
                hex(&core_id),
                hex(&file_id)
            )
        }))
    }

    /// Compares the bytes of a mapped file's read-only mappings the core holds with it.
    fn bytes_differ(&self, file: &File, group: &[&FileMapping]) -> Option<String> {
        let from_file = |offset: u64, len: usize| read_exact_at(file, offset, len).ok();
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
                if elf.header.layout.little() {
                    "little-endian"
                } else {
                    "big-endian"
                },
                if self.layout.is_64 { 64 } else { 32 },
                if self.layout.little() {
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
        let bytes = mqd_target::read_c_string(self, addr, max).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
