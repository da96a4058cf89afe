//! ELF object files: the parse kept per file, shared by every address space that maps
//! it, with its symbol tables and DWARF built on first use.

use crate::absent;
use crate::bytes::{Bytes, SectionBytes, crc32};
use crate::code::CodeInfo;
use crate::dwarf::DwarfInfo;
use crate::error::DebugInfoError;
use crate::inflated;
use crate::maps::LoadSegment;
use crate::memo::{self, Memo};
use object::{
    Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SectionKind, SymbolKind,
};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What identifies one version of one file: the cache key. The canonical path alone
/// would confuse a library rebuilt in place with its old copy still mapped by a
/// running job, hence the inode and modification time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
    size: u64,
    /// Where its type answers are kept: one parse per cache, so that two
    /// configurations never share answers.
    type_cache: Option<PathBuf>,
}

/// Files parsed by this process. Weak, so a file is unmapped once no address space
/// uses it; while several ranks of one job are open they share one parse.
fn cache() -> &'static Mutex<HashMap<FileKey, Weak<ElfObject>>> {
    static CACHE: OnceLock<Mutex<HashMap<FileKey, Weak<ElfObject>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether the symbol is a variable or a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SymbolClass {
    /// `STT_OBJECT`, `STT_COMMON` or `STT_NOTYPE`.
    Data,
    /// `STT_FUNC` (or `STT_GNU_IFUNC`).
    Function,
    /// `STT_TLS`: its value is an offset in its object's TLS block.
    Tls,
}

/// One defined symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Symbol {
    /// `st_value`: a link-time address unless `absolute`.
    pub value: u64,
    /// `STB_GLOBAL`, `STB_WEAK` or `STB_GNU_UNIQUE`, as opposed to `STB_LOCAL`.
    pub global: bool,
    /// Defined against `SHN_ABS`: the value is not relocated by the load bias.
    pub absolute: bool,
}

/// The functions of `.symtab` and `.dynsym` by link-time address, for symbolising.
#[derive(Debug, Default)]
pub(crate) struct FunctionTable {
    /// (start, size, name), sorted by start; one name per start (a global one first).
    entries: Vec<(u64, u64, Box<str>)>,
}

impl FunctionTable {
    fn build(file: &object::File<'_>) -> FunctionTable {
        let mut entries: Vec<(u64, u64, bool, Box<str>)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok().filter(|n| !n.is_empty())?;
                // `.symtab` of a debug file spells versions: "__libc_start_main@@GLIBC_2.34".
                let name = name.split('@').next().unwrap_or(name);
                Some((s.address(), s.size(), !s.is_global(), name.into()))
            })
            .collect();
        // Per address: a global name before a local one, a sized one, the name with the
        // fewest leading underscores (`sigsuspend`, not `__sigsuspend`).
        let key = |e: &(u64, u64, bool, Box<str>)| {
            let underscores = e.3.len() - e.3.trim_start_matches('_').len();
            (e.0, e.2, e.1 == 0, underscores)
        };
        entries.sort_by_key(key);
        entries.dedup_by_key(|e| e.0);
        FunctionTable {
            entries: entries.into_iter().map(|(a, s, _, n)| (a, s, n)).collect(),
        }
    }

    /// The function containing the link-time address `svma` and the offset in it.
    pub(crate) fn lookup(&self, svma: u64) -> Option<(&str, u64)> {
        let i = self.entries.partition_point(|e| e.0 <= svma);
        let (start, size, name) = self.entries.get(i.checked_sub(1)?)?;
        let offset = svma - start;
        // A sized symbol covers only its bytes; an unsized one up to the next symbol.
        (*size == 0 || offset < *size).then_some((&**name, offset))
    }
}

/// `.symtab` and `.dynsym` merged, by name, one table per class.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    data: HashMap<Box<[u8]>, Symbol>,
    functions: HashMap<Box<[u8]>, Symbol>,
    tls: HashMap<Box<[u8]>, Symbol>,
}

impl SymbolTable {
    fn build(file: &object::File<'_>) -> SymbolTable {
        let mut table = SymbolTable::default();
        for symbol in file.symbols().chain(file.dynamic_symbols()) {
            if symbol.is_undefined() {
                continue;
            }
            let class = match symbol.kind() {
                SymbolKind::Data | SymbolKind::Unknown => SymbolClass::Data,
                SymbolKind::Text => SymbolClass::Function,
                SymbolKind::Tls => SymbolClass::Tls,
                _ => continue,
            };
            let Ok(name) = symbol.name_bytes() else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let entry = Symbol {
                value: symbol.address(),
                global: !symbol.is_local(),
                absolute: matches!(symbol.section(), object::SymbolSection::Absolute),
            };
            let map = match class {
                SymbolClass::Data => &mut table.data,
                SymbolClass::Function => &mut table.functions,
                SymbolClass::Tls => &mut table.tls,
            };
            match map.get_mut(name) {
                // A global definition hides a local one of the same name (a `static`
                // in some other translation unit); otherwise the first one stays.
                Some(existing) if entry.global && !existing.global => *existing = entry,
                Some(_) => {}
                None => {
                    map.insert(name.into(), entry);
                }
            }
        }
        table
    }

    /// The symbol of that name and class.
    pub fn get(&self, name: &str, class: SymbolClass) -> Option<Symbol> {
        let map = match class {
            SymbolClass::Data => &self.data,
            SymbolClass::Function => &self.functions,
            SymbolClass::Tls => &self.tls,
        };
        map.get(name.as_bytes()).copied()
    }
}

/// One ELF file, mapped read-only, with what attach needs parsed eagerly (headers,
/// segments, notes) and the rest (symbols, DWARF) parsed on first use.
pub(crate) struct ElfObject {
    /// The canonical path it was opened by.
    pub path: PathBuf,
    dev: u64,
    ino: u64,
    map: Arc<Bytes>,
    /// ELFCLASS64.
    pub is_64: bool,
    /// ELFDATA2LSB.
    pub little_endian: bool,
    /// `ET_EXEC`.
    pub is_executable: bool,
    /// Has a `PT_INTERP`: a dynamically linked program (a PIE is `ET_DYN` like a library).
    pub has_interp: bool,
    /// The `PT_LOAD` segments.
    pub loads: Vec<LoadSegment>,
    /// `DT_SONAME`, and the `DT_NEEDED` names in order: the dynamic loader's search.
    pub dynamic: Dynamic,
    /// `NT_GNU_BUILD_ID`.
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: file name and CRC-32 of the separate debug file.
    pub debuglink: Option<(Vec<u8>, u32)>,
    /// Has a non-empty `.symtab` (not stripped).
    pub has_symtab: bool,
    /// Has a non-empty `.debug_info`.
    pub has_dwarf: bool,
    symbols: OnceLock<SymbolTable>,
    functions: OnceLock<FunctionTable>,
    dwarf: OnceLock<Result<Arc<DwarfInfo>, String>>,
    /// [`absent::inline_type_names`] of its `.debug_abbrev`.
    inline_type_names: OnceLock<bool>,
    /// The answers its DWARF gave, kept between runs; none for a copy of memory.
    pub(crate) memo: Option<Memo>,
    /// [`Self::warm_up`] was started.
    warming: std::sync::atomic::AtomicBool,
    code: OnceLock<Result<Arc<CodeInfo>, String>>,
    /// The imported functions' GOT slots, from the dynamic relocations.
    imports: OnceLock<HashMap<u64, Box<str>>>,
    /// Section bytes, decompressed once for the type index and the code DWARF alike.
    sections: Mutex<HashMap<String, SectionBytes>>,
    /// Whether its `.eh_frame_hdr` search table may be trusted, once checked.
    search_table_sound: OnceLock<bool>,
}

impl std::fmt::Debug for ElfObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfObject")
            .field("path", &self.path)
            .field("is_64", &self.is_64)
            .field("has_symtab", &self.has_symtab)
            .field("has_dwarf", &self.has_dwarf)
            .finish_non_exhaustive()
    }
}

/// Why a candidate file could not be used.
pub(crate) fn io_error(path: &Path, err: &io::Error) -> DebugInfoError {
    match err.kind() {
        io::ErrorKind::PermissionDenied => DebugInfoError::PermissionDenied {
            path: path.to_owned(),
        },
        _ => DebugInfoError::Io {
            path: path.to_owned(),
            message: err.to_string(),
        },
    }
}

impl ElfObject {
    /// Opens `path` (named by its canonical path), or returns the parse another address
    /// space already made of the same file (device, inode, size and modification time); its type answers are
    /// kept in `type_cache` (none: for this run only).
    pub fn open(path: &Path, type_cache: Option<&Path>) -> Result<Arc<ElfObject>, DebugInfoError> {
        let file = File::open(path).map_err(|e| io_error(path, &e))?;
        let meta = file.metadata().map_err(|e| io_error(path, &e))?;
        if !meta.is_file() {
            return Err(DebugInfoError::NotElf {
                path: path.to_owned(),
            });
        }
        // The file, whatever its spelling (a rank's files are opened through its
        // `/proc/PID/root`): canonicalising costs a readlink per component, once a file.
        let key = FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
            size: meta.len(),
            type_cache: type_cache.map(Path::to_owned),
        };
        // Held across the parse so that ranks attached from several threads parse a
        // file once; the eager part is headers only, so this is short.
        let mut cache = cache().lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(object) = cache.get(&key).and_then(Weak::upgrade) {
            return Ok(object);
        }
        cache.retain(|_, weak| weak.strong_count() > 0);
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let object = Arc::new(ElfObject::parse(canonical, &file, &meta, type_cache)?);
        cache.insert(key, Arc::downgrade(&object));
        Ok(object)
    }

    /// An object read from a process's memory (its vDSO), named `name`.
    pub fn from_memory(name: PathBuf, bytes: Vec<u8>) -> Result<Arc<ElfObject>, DebugInfoError> {
        Ok(Arc::new(ElfObject::parse_bytes(
            name,
            Bytes::Owned(bytes),
            0,
            0,
        )?))
    }

    fn parse(
        path: PathBuf,
        file: &File,
        meta: &std::fs::Metadata,
        type_cache: Option<&Path>,
    ) -> Result<Self, DebugInfoError> {
        if meta.len() < 16 {
            return Err(DebugInfoError::NotElf { path });
        }
        // SAFETY: the map is read-only and private. Another process truncating or
        // rewriting the file while it is mapped would change or fault these bytes; every
        // debugger accepts that risk for the files of the process it examines, and a
        // rebuilt library gets a new inode in the usual install flow.
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| io_error(&path, &e))?;
        let mut object = ElfObject::parse_bytes(path, Bytes::Mapped(map), meta.dev(), meta.ino())?;
        if object.has_dwarf {
            let key = memo::key_of(object.build_id.as_deref(), &object.path, meta);
            object.memo = Some(Memo::in_dir(key, type_cache.map(Path::to_owned)));
        }
        Ok(object)
    }

    fn parse_bytes(path: PathBuf, map: Bytes, dev: u64, ino: u64) -> Result<Self, DebugInfoError> {
        let not_elf = || DebugInfoError::NotElf { path: path.clone() };
        if map.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err(not_elf());
        }
        let malformed = |what: object::Error| DebugInfoError::Malformed {
            path: path.clone(),
            message: what.to_string(),
        };
        let parsed = object::File::parse(&*map).map_err(malformed)?;
        let loads = parsed
            .segments()
            .map(|segment| LoadSegment {
                vaddr: segment.address(),
                offset: segment.file_range().0,
                filesz: segment.file_range().1,
            })
            .collect();
        let has_interp = match &parsed {
            object::File::Elf32(elf) => has_interp(elf),
            object::File::Elf64(elf) => has_interp(elf),
            _ => false,
        };
        let dynamic = Dynamic::of(&parsed).unwrap_or_default();
        let has_dwarf = parsed
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0 && s.kind() != SectionKind::UninitializedData);
        let build_id = parsed.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = parsed
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, crc)| (name.to_vec(), crc));
        let (is_64, little_endian) = (parsed.is_64(), parsed.is_little_endian());
        let is_executable = parsed.kind() == object::ObjectKind::Executable;
        let has_symtab = parsed.symbol_table().is_some();
        drop(parsed);
        let memo = None;
        Ok(ElfObject {
            path,
            dev,
            ino,
            map: Arc::new(map),
            is_64,
            little_endian,
            is_executable,
            has_interp,
            loads,
            dynamic,
            build_id,
            debuglink,
            has_symtab,
            has_dwarf,
            symbols: OnceLock::new(),
            functions: OnceLock::new(),
            dwarf: OnceLock::new(),
            inline_type_names: OnceLock::new(),
            memo,
            warming: Default::default(),
            code: OnceLock::new(),
            imports: OnceLock::new(),
            sections: Mutex::new(HashMap::new()),
            search_table_sound: OnceLock::new(),
        })
    }

    /// The file's bytes.
    pub fn data(&self) -> &[u8] {
        &self.map
    }

    /// Whether `other` is this very file (same device and inode).
    pub fn same_file(&self, other: &ElfObject) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }

    /// `.symtab` and `.dynsym`, parsed on first use.
    pub fn symbols(&self) -> &SymbolTable {
        self.symbols
            .get_or_init(|| match object::File::parse(self.data()) {
                Ok(file) => SymbolTable::build(&file),
                Err(_) => SymbolTable::default(),
            })
    }

    /// The symbol whose address the dynamic loader writes at the link-time address
    /// `slot` (a GOT entry: `R_X86_64_JUMP_SLOT` of a PLT, `R_X86_64_GLOB_DAT`).
    pub(crate) fn import_at(&self, slot: u64) -> Option<&str> {
        self.imports
            .get_or_init(|| {
                let Ok(file) = object::File::parse(self.data()) else {
                    return HashMap::new();
                };
                let Some(relocations) = file.dynamic_relocations() else {
                    return HashMap::new();
                };
                let symbols = file.dynamic_symbol_table();
                relocations
                    .filter_map(|(offset, r)| {
                        let object::RelocationTarget::Symbol(index) = r.target() else {
                            return None;
                        };
                        let symbol = symbols.as_ref()?.symbol_by_index(index).ok()?;
                        let name = symbol.name().ok().filter(|n| !n.is_empty())?;
                        Some((offset, name.split('@').next().unwrap_or(name).into()))
                    })
                    .collect()
            })
            .get(&slot)
            .map(|n| &**n)
    }

    /// The file's bytes at link-time addresses `svma..svma + len`, where a loaded
    /// segment holds them.
    pub(crate) fn bytes_at(&self, svma: u64, len: u64) -> Option<&[u8]> {
        let segment = self.loads.iter().find(|l| {
            l.vaddr <= svma
                && svma
                    .checked_add(len)
                    .zip(l.vaddr.checked_add(l.filesz))
                    .is_some_and(|(end, limit)| end <= limit)
        })?;
        let start = usize::try_from(segment.offset.checked_add(svma - segment.vaddr)?).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        self.data().get(start..end)
    }

    /// Its functions by address, sorted on first use and shared by every process that
    /// maps this file.
    pub(crate) fn functions(&self) -> &FunctionTable {
        self.functions
            .get_or_init(|| match object::File::parse(self.data()) {
                Ok(file) => FunctionTable::build(&file),
                Err(_) => FunctionTable::default(),
            })
    }

    /// The DWARF of this file, indexed on first use; `None` without `.debug_info`.
    pub fn dwarf(&self) -> Option<&Arc<DwarfInfo>> {
        if !self.has_dwarf {
            return None;
        }
        self.dwarf
            .get_or_init(|| {
                DwarfInfo::load(self.data(), &|n| self.section(n), &self.path).map(Arc::new)
            })
            .as_ref()
            .ok()
    }

    /// `false` only when its DWARF surely defines no type called `name`: answered from
    /// the string sections (and abbreviations) without indexing, unless it is indexed.
    pub(crate) fn may_define_type(&self, name: &[u8]) -> bool {
        if !self.has_dwarf {
            return false;
        }
        if self.dwarf.get().is_some() {
            return true;
        }
        let section = |name: &str| self.section(name);
        let inline_names = || {
            *self.inline_type_names.get_or_init(|| {
                self.section(".debug_abbrev")
                    .map_or(true, |abbrev| absent::inline_type_names(&abbrev))
            })
        };
        absent::may_define(
            &absent::Sections {
                section: &section,
                inline_names: &inline_names,
            },
            name,
        )
    }

    /// Reads, in a thread of its own, what [`Self::may_define_type`] reads, when no
    /// answers of this file are kept: a cold start then decompresses a large debug file
    /// while the process is being attached and other files indexed. Once per file.
    pub(crate) fn warm_up(self: &Arc<Self>) {
        if !self.has_dwarf
            || self
                .warming
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            || self.memo.as_ref().is_some_and(|m| !m.is_empty())
        {
            return;
        }
        let object = self.clone();
        let _ = std::thread::Builder::new()
            .name("mqd-warm-up".into())
            .spawn(move || {
                // Never the answer to a real query: a doubt only.
                object.may_define_type(b"\x01");
            });
    }

    /// Whether its `.eh_frame_hdr` search table may be trusted: `check` (a walk of the
    /// whole table) the first time, for every process that maps the file.
    pub(crate) fn search_table_is_sound(&self, check: impl FnOnce() -> bool) -> bool {
        *self.search_table_sound.get_or_init(check)
    }

    /// A section's bytes, shared by every reader of this file: the mapping itself, or
    /// the section decompressed once; empty when the file has no such section.
    pub(crate) fn section(&self, name: &str) -> Result<SectionBytes, String> {
        let mut cache = self.sections.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bytes) = cache.get(name) {
            return Ok(bytes.clone());
        }
        let file = object::File::parse(self.data()).map_err(|e| e.to_string())?;
        let bytes = match file.section_by_name(name) {
            None => SectionBytes::empty(),
            Some(section) => {
                let range = section
                    .compressed_file_range()
                    .map_err(|e| format!("{name}: {e}"))?;
                if range.format == object::CompressionFormat::None {
                    let start = usize::try_from(range.offset).map_err(|e| e.to_string())?;
                    let len =
                        usize::try_from(range.uncompressed_size).map_err(|e| e.to_string())?;
                    SectionBytes::of_file(self.map.clone(), start, len)
                        .ok_or_else(|| format!("{name}: extends past the end of the file"))?
                } else {
                    let (key, dir) = self.memo.as_ref().map_or(("", None), Memo::place);
                    inflated::section(dir, key, name, range.uncompressed_size, || {
                        if range.format == object::CompressionFormat::Zlib {
                            inflate(&self.map, &range)
                        } else {
                            section
                                .uncompressed_data()
                                .map(std::borrow::Cow::into_owned)
                                .map_err(|e| e.to_string())
                        }
                    })
                    .map_err(|e| format!("{name}: {e}"))?
                }
            }
        };
        cache.insert(name.to_owned(), bytes.clone());
        Ok(bytes)
    }

    /// The DWARF of its code (scopes and variable locations), read on first use; `None`
    /// without `.debug_info`.
    pub(crate) fn code(&self) -> Option<&Arc<CodeInfo>> {
        if !self.has_dwarf {
            return None;
        }
        self.code
            .get_or_init(|| CodeInfo::load(self.data(), &|n| self.section(n)).map(Arc::new))
            .as_ref()
            .ok()
    }

    /// Whether the file has DWARF (`.debug_info`).
    pub(crate) fn has_dwarf(&self) -> bool {
        self.has_dwarf
    }

    /// Why the DWARF could not be read, once [`Self::dwarf`] was asked.
    pub fn dwarf_error(&self) -> Option<String> {
        self.dwarf.get().and_then(|r| r.as_ref().err().cloned())
    }
}

/// What the dynamic section says about loading: the object's own name, the libraries it
/// needs and where it asks for them to be looked for.
#[derive(Debug, Default, Clone)]
pub struct Dynamic {
    /// `DT_SONAME`.
    pub soname: Option<Vec<u8>>,
    /// The `DT_NEEDED` names, in order.
    pub needed: Vec<Vec<u8>>,
    /// `DT_RUNPATH` and `DT_RPATH`, as written (`$ORIGIN` unexpanded).
    pub run_path: Vec<Vec<u8>>,
}

impl Dynamic {
    /// The dynamic section of the ELF file at `path`; `None` where it has none or is no
    /// ELF file.
    pub fn read(path: &Path) -> Option<Dynamic> {
        let file = File::open(path).ok()?;
        // SAFETY: read only; a file changed under the map changes what is read, nothing else.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        Dynamic::of(&object::File::parse(&*map).ok()?)
    }

    /// Read from `.dynamic` and `.dynstr`; `None` when there are none or they are
    /// malformed (the object is then ordered by address only).
    fn of(file: &object::File<'_>) -> Option<Dynamic> {
        let dynamic = file.section_by_name(".dynamic")?;
        let data = dynamic.data().ok()?;
        let strings = file.section_by_name(".dynstr")?.data().ok()?;
        let string = |offset: u64| -> Option<Vec<u8>> {
            let tail = strings.get(usize::try_from(offset).ok()?..)?;
            Some(tail[..tail.iter().position(|&b| b == 0)?].to_vec())
        };
        let word = if file.is_64() { 8 } else { 4 };
        let read = |bytes: &[u8]| -> u64 {
            let mut value = [0u8; 8];
            if file.is_little_endian() {
                value[..word].copy_from_slice(bytes);
                u64::from_le_bytes(value)
            } else {
                value[8 - word..].copy_from_slice(bytes);
                u64::from_be_bytes(value)
            }
        };
        let mut out = Dynamic::default();
        for entry in data.chunks_exact(2 * word) {
            let (tag, value) = (read(&entry[..word]), read(&entry[word..]));
            match tag {
                0 => break,
                1 => out.needed.push(string(value)?),
                14 => out.soname = Some(string(value)?),
                15 | 29 => out.run_path.push(string(value)?),
                _ => {}
            }
        }
        Some(out)
    }
}

fn has_interp<Elf: object::read::elf::FileHeader<Endian = object::Endianness>>(
    elf: &object::read::elf::ElfFile<'_, Elf>,
) -> bool {
    use object::read::elf::ProgramHeader;
    elf.elf_program_headers()
        .iter()
        .any(|ph| ph.p_type(elf.endian()) == object::elf::PT_INTERP)
}

/// Where to look for the separate debug file of an object, in gdb's order: by build-id
/// under each debug directory, then by `.gnu_debuglink` beside the object, in its
/// `.debug/` subdirectory, and under each debug directory followed by the object's
/// directory. `root` prefixes the target's paths (`/proc/PID/root`, a core's sysroot);
/// each debug directory is tried below it first, then as is.
pub(crate) fn find_debug_file(
    object: &ElfObject,
    target_path: &Path,
    root: Option<&Path>,
    debug_dirs: &[PathBuf],
    type_cache: Option<&Path>,
) -> Option<Arc<ElfObject>> {
    let rooted = |dir: &Path| -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(root) = root {
            dirs.push(root.join(dir.strip_prefix("/").unwrap_or(dir)));
        }
        dirs.push(dir.to_owned());
        dirs
    };
    let usable = |candidate: &Arc<ElfObject>| {
        !candidate.same_file(object) && (candidate.has_dwarf || candidate.has_symtab)
    };
    if let Some(id) = object.build_id.as_ref().filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let relative = Path::new(".build-id")
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..]));
        for dir in debug_dirs.iter().flat_map(|d| rooted(d)) {
            let candidate = dir.join(&relative);
            if let Ok(debug) = ElfObject::open(&candidate, type_cache)
                && debug.build_id.as_ref() == Some(id)
                && usable(&debug)
            {
                return Some(debug);
            }
        }
    }
    let (name, crc) = object.debuglink.as_ref()?;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    if name.components().count() != 1 {
        return None;
    }
    // The object's directory: where the file really is (canonical path), and where
    // the target sees it (which differs for a file read through /proc/PID/map_files).
    let mut object_dirs: Vec<PathBuf> = object
        .path
        .parent()
        .map(Path::to_owned)
        .into_iter()
        .collect();
    if let Some(dir) = target_path.parent() {
        object_dirs.extend(rooted(dir));
    }
    let mut candidates = Vec::new();
    for dir in &object_dirs {
        candidates.push(dir.join(name));
        candidates.push(dir.join(".debug").join(name));
    }
    if let Some(dir) = target_path.parent() {
        let relative = dir.strip_prefix("/").unwrap_or(dir);
        for debug_dir in debug_dirs.iter().flat_map(|d| rooted(d)) {
            candidates.push(debug_dir.join(relative).join(name));
        }
    }
    candidates.into_iter().find_map(|candidate| {
        let debug = ElfObject::open(&candidate, type_cache).ok()?;
        // Matching build-ids prove the pair cheaply; the CRC (what the link records)
        // is read only when either side has no build-id.
        let matches = match (&object.build_id, &debug.build_id) {
            (Some(a), Some(b)) => a == b,
            _ => crc32(debug.data()) == *crc,
        };
        (matches && usable(&debug)).then_some(debug)
    })
}

/// A zlib-compressed section (`ELFCOMPRESS_ZLIB`): zlib-rs inflates a distribution's
/// debug files two to three times faster than the decompressor `object` brings.
fn inflate(file: &[u8], range: &object::CompressedFileRange) -> Result<Vec<u8>, String> {
    // No zlib stream expands more than 1032 times: a larger claim is a corrupt header.
    const MAX_RATIO: u64 = 1032;
    let input = usize::try_from(range.offset)
        .ok()
        .zip(usize::try_from(range.compressed_size).ok())
        .and_then(|(start, len)| file.get(start..start.checked_add(len)?))
        .ok_or("compressed data past the end of the file")?;
    if range.uncompressed_size > range.compressed_size.saturating_mul(MAX_RATIO) {
        return Err(format!(
            "claims {} bytes uncompressed from {}: corrupt",
            range.uncompressed_size, range.compressed_size
        ));
    }
    let size = usize::try_from(range.uncompressed_size).map_err(|e| e.to_string())?;
    let mut out = vec![0u8; size];
    let (inflated, code) =
        zlib_rs::decompress_slice(&mut out, input, zlib_rs::InflateConfig::default());
    if code != zlib_rs::ReturnCode::Ok || inflated.len() != size {
        return Err(format!("cannot be inflated ({code:?})"));
    }
    Ok(out)
}
