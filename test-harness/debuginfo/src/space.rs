//! An [`AddressSpace`]: the ELF objects a process maps, at their load bias, searched for
//! symbols and types the way a debugger searches them (see the crate's documentation).

use crate::dwarf::{DieRef, DwarfInfo, Member, NameKind};
use crate::elf::{ElfObject, Symbol, SymbolClass, SymbolTable};
use crate::error::DebugInfoError;
use crate::maps::{Mapping, parse_proc_maps};
use crate::{bytes, dwarf, elf, maps, memo};
use gimli::constants;
use mqd_target::{ByteOrder, TargetAbi, TypeId};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The files whose DWARF type index this process built so far (the others' answers
/// came from the cache, or were not asked).
pub fn indexed_files() -> Vec<PathBuf> {
    dwarf::indexed()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Where an [`AddressSpace`] looks for files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    /// Prefix of the target's paths: `/proc/PID/root` for a live process (a process in
    /// a container sees other files than ours), a sysroot for a core from elsewhere.
    /// Paths are tried below it first, then as they are.
    pub root: Option<PathBuf>,
    /// Global debug directories, like gdb's `debug-file-directory`. Default:
    /// `$MQD_DEBUG_DIRS` (colon-separated) if set, else `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
    /// The main executable's path as the mappings spell it, when known
    /// (`/proc/PID/exe`); otherwise the first executable (`ET_EXEC`, or `ET_DYN` with
    /// `PT_INTERP`) of the mappings is taken.
    pub executable: Option<PathBuf>,
    /// The process, for `/proc/PID/map_files/` when a mapped file has been deleted.
    pub pid: Option<i32>,
    /// Where the answers of type queries are kept between runs (none: not kept).
    /// Default: [`memo::default_directory`].
    pub type_cache: Option<PathBuf>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            root: None,
            debug_dirs: default_debug_dirs(),
            executable: None,
            pid: None,
            type_cache: memo::default_directory(),
        }
    }
}

/// `$MQD_DEBUG_DIRS` split at `:`, else `/usr/lib/debug`.
pub fn default_debug_dirs() -> Vec<PathBuf> {
    match std::env::var_os("MQD_DEBUG_DIRS") {
        Some(dirs) => std::env::split_paths(&dirs)
            .filter(|d| !d.as_os_str().is_empty())
            .collect(),
        None => vec![PathBuf::from("/usr/lib/debug")],
    }
}

/// One ELF object of the address space.
struct LoadedObject {
    /// Its path as the mappings give it (without ` (deleted)`).
    path: PathBuf,
    bias: u64,
    elf: Arc<ElfObject>,
    /// The separate debug file, looked for on first need.
    debug: OnceLock<Option<Arc<ElfObject>>>,
}

/// A type DIE in the DWARF of one object of the address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TypeLoc {
    object: usize,
    die: DieRef,
}

/// The [`TypeId`]s handed out: indexes into `locs`.
#[derive(Default)]
struct TypeTable {
    locs: Vec<TypeLoc>,
    ids: HashMap<TypeLoc, usize>,
    offsets: HashMap<(usize, String), Option<u64>>,
}

/// Typedef chains and qualifiers longer than this are taken for a reference loop.
const MAX_CHAIN: usize = 64;
/// Anonymous members nested deeper than this are not searched.
const MAX_NESTING: usize = 16;

/// The ELF objects mapped in one process, with their symbols and types.
///
/// `Send + Sync`: the queries take `&self`, and [`TypeId`]s are indexes into a table
/// behind a mutex, stable for the life of the address space.
pub struct AddressSpace {
    /// The main executable first, then the libraries in the loader's order ([`load_order`]).
    objects: Vec<LoadedObject>,
    has_main: bool,
    root: Option<PathBuf>,
    debug_dirs: Vec<PathBuf>,
    type_cache: Option<PathBuf>,
    problems: Vec<String>,
    types: Mutex<TypeTable>,
}

impl fmt::Debug for AddressSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressSpace")
            .field("objects", &self.objects())
            .field("main_executable", &self.main_executable())
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

fn strip_deleted(path: &Path) -> (PathBuf, bool) {
    match path
        .to_str()
        .and_then(|p| p.strip_suffix(maps::DELETED_SUFFIX))
    {
        Some(stripped) => (PathBuf::from(stripped), true),
        None => (path.to_owned(), false),
    }
}

/// Puts the objects after the main program (first) in the dynamic loader's order, the
/// order of its link map that gdb searches: the program's `DT_NEEDED` libraries, then
/// theirs, breadth first, each once. Objects no one needs (opened with `dlopen`) follow
/// in address order.
fn load_order(objects: &mut Vec<LoadedObject>) {
    let mut placed = 1;
    let mut next = 0;
    while next < placed && placed < objects.len() {
        let needed = objects[next].elf.dynamic.needed.clone();
        next += 1;
        for name in needed {
            let found = objects[placed..].iter().position(|o| {
                o.elf.dynamic.soname.as_deref() == Some(&name[..])
                    || o.path.file_name().map(|f| f.as_encoded_bytes()) == Some(&name[..])
            });
            if let Some(at) = found {
                let object = objects.remove(placed + at);
                objects.insert(placed, object);
                placed += 1;
            }
        }
    }
}

/// `"struct X"` -> (Struct, "X"), `"X"` -> (Plain, "X").
fn parse_type_name(name: &str) -> (NameKind, &str) {
    let name = name.trim();
    for (prefix, kind) in [
        ("struct ", NameKind::Struct),
        ("union ", NameKind::Union),
        ("enum ", NameKind::Enum),
    ] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return (kind, rest.trim_start());
        }
    }
    (NameKind::Plain, name)
}

fn is_aggregate(tag: constants::DwTag) -> bool {
    matches!(
        tag,
        constants::DW_TAG_structure_type
            | constants::DW_TAG_union_type
            | constants::DW_TAG_class_type
    )
}

impl AddressSpace {
    /// The address space of a live process, from `/proc/PID/maps`; files are opened
    /// through `/proc/PID/root` (the process's view, also inside a container), else by
    /// their path.
    pub fn from_pid(pid: i32) -> Result<AddressSpace, DebugInfoError> {
        AddressSpace::from_pid_with(pid, &SearchOptions::default())
    }

    /// [`Self::from_pid`] with other debug directories (`root`, `executable` and `pid`
    /// of `options` are filled in from `/proc/PID` when `None`).
    pub fn from_pid_with(
        pid: i32,
        options: &SearchOptions,
    ) -> Result<AddressSpace, DebugInfoError> {
        if pid <= 0 {
            return Err(DebugInfoError::NoSuchProcess { pid });
        }
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let maps_path = proc.join("maps");
        let text = std::fs::read_to_string(&maps_path).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => DebugInfoError::NoSuchProcess { pid },
            _ => elf::io_error(&maps_path, &err),
        })?;
        let mut options = options.clone();
        options.pid.get_or_insert(pid);
        if options.root.is_none() {
            options.root = Some(proc.join("root"));
        }
        if options.executable.is_none() {
            options.executable = std::fs::read_link(proc.join("exe"))
                .ok()
                .map(|exe| strip_deleted(&exe).0);
        }
        AddressSpace::from_mappings_with(&parse_proc_maps(&text), &options)
    }

    /// The address space described by `mappings`; files are opened below `root` first
    /// when given, else by their path.
    pub fn from_mappings(
        mappings: &[Mapping],
        root: Option<&Path>,
    ) -> Result<AddressSpace, DebugInfoError> {
        let options = SearchOptions {
            root: root.map(Path::to_owned),
            ..SearchOptions::default()
        };
        AddressSpace::from_mappings_with(mappings, &options)
    }

    /// [`Self::from_mappings`] with all the search options.
    pub fn from_mappings_with(
        mappings: &[Mapping],
        options: &SearchOptions,
    ) -> Result<AddressSpace, DebugInfoError> {
        let mut groups: Vec<(&Path, Vec<&Mapping>)> = Vec::new();
        for mapping in mappings {
            let Some(path) = mapping.path.as_deref().filter(|p| p.is_absolute()) else {
                continue;
            };
            match groups.iter_mut().find(|(p, _)| *p == path) {
                Some((_, group)) => group.push(mapping),
                None => groups.push((path, vec![mapping])),
            }
        }
        let mut objects = Vec::new();
        let mut problems = Vec::new();
        let mut first_error = None;
        let mut not_elf = None;
        for (mapped, group) in groups {
            let (path, deleted) = strip_deleted(mapped);
            let mut candidates = Vec::new();
            if let Some(root) = &options.root {
                candidates.push(root.join(path.strip_prefix("/").unwrap_or(&path)));
            }
            candidates.push(path.clone());
            if let (true, Some(pid), Some(first)) = (deleted, options.pid, group.first()) {
                candidates.insert(
                    0,
                    PathBuf::from(format!(
                        "/proc/{pid}/map_files/{:x}-{:x}",
                        first.start, first.end
                    )),
                );
            }
            let mut opened = None;
            let mut error = None;
            for candidate in &candidates {
                match ElfObject::open(candidate, options.type_cache.as_deref()) {
                    Ok(object) => {
                        opened = Some(object);
                        break;
                    }
                    Err(err) => error = error.or(Some(err)),
                }
            }
            let Some(elf) = opened else {
                match error {
                    // Data files (locale archives, shared memory) are mapped too.
                    Some(err @ DebugInfoError::NotElf { .. }) => {
                        not_elf.get_or_insert(err);
                    }
                    None => {}
                    Some(err) => {
                        problems.push(err.to_string());
                        first_error.get_or_insert(err);
                    }
                }
                continue;
            };
            // An ELF file mapped as plain data (not by segments) is not a loaded object.
            let Some(bias) = maps::load_bias(&group, &elf.loads) else {
                continue;
            };
            objects.push(LoadedObject {
                path,
                bias,
                elf,
                debug: OnceLock::new(),
            });
        }
        if objects.is_empty() {
            return Err(first_error.or(not_elf).unwrap_or(DebugInfoError::NoObjects));
        }
        let main = match &options.executable {
            Some(exe) => objects.iter().position(|o| &o.path == exe),
            None => objects
                .iter()
                .position(|o| o.elf.is_executable || o.elf.has_interp),
        };
        if let Some(main) = main {
            let object = objects.remove(main);
            objects.insert(0, object);
            load_order(&mut objects);
        }
        let space = AddressSpace {
            objects,
            has_main: main.is_some(),
            root: options.root.clone(),
            debug_dirs: options.debug_dirs.clone(),
            type_cache: options.type_cache.clone(),
            problems,
            types: Mutex::new(TypeTable::default()),
        };
        for index in 0..space.objects.len() {
            if let Some(file) = space.dwarf_file(index) {
                file.warm_up();
            }
        }
        Ok(space)
    }

    /// An address space of one ELF image held in memory (the main executable, at bias
    /// 0): for checking what its symbols and DWARF answer without a file or a process.
    pub fn from_elf_image(name: &str, bytes: Vec<u8>) -> Result<AddressSpace, DebugInfoError> {
        let elf = ElfObject::from_memory(PathBuf::from(name), bytes)?;
        Ok(AddressSpace {
            objects: vec![LoadedObject {
                path: PathBuf::from(name),
                bias: 0,
                elf,
                debug: OnceLock::from(None),
            }],
            has_main: true,
            root: None,
            debug_dirs: Vec::new(),
            type_cache: None,
            problems: Vec::new(),
            types: Mutex::new(TypeTable::default()),
        })
    }

    /// The ELF objects and their load bias, the main executable first.
    pub fn objects(&self) -> Vec<(PathBuf, u64)> {
        self.objects
            .iter()
            .map(|o| (o.path.clone(), o.bias))
            .collect()
    }

    /// The ELF objects with their load bias and parsed file.
    pub(crate) fn loaded_objects(&self) -> Vec<(PathBuf, u64, Arc<elf::ElfObject>)> {
        self.objects
            .iter()
            .map(|o| (o.path.clone(), o.bias, o.elf.clone()))
            .collect()
    }

    /// The main executable's path.
    pub fn main_executable(&self) -> Option<PathBuf> {
        self.has_main.then(|| self.objects[0].path.clone())
    }

    /// What could not be read: files of the mappings (permission, I/O, malformed ELF),
    /// whose symbols and types are missing, and DWARF found unreadable by a type query.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.problems.clone();
        for object in &self.objects {
            let files =
                std::iter::once(&object.elf).chain(object.debug.get().and_then(Option::as_ref));
            for file in files {
                if let Some(error) = file.dwarf_error() {
                    problems.push(format!("{}: {error}", file.path.display()));
                }
            }
        }
        problems
    }

    /// Where this space's objects keep their type answers between runs.
    pub fn type_cache(&self) -> Option<&Path> {
        self.type_cache.as_deref()
    }

    /// The separate debug file used for the object mapped from `object` (as
    /// [`Self::objects`] names it), if there is one.
    pub fn debug_file(&self, object: &Path) -> Option<PathBuf> {
        let loaded = self.objects.iter().find(|o| o.path == object)?;
        self.debug_of(loaded).map(|d| d.path.clone())
    }

    fn debug_of<'a>(&self, object: &'a LoadedObject) -> Option<&'a Arc<ElfObject>> {
        object
            .debug
            .get_or_init(|| {
                elf::find_debug_file(
                    &object.elf,
                    &object.path,
                    self.root.as_deref(),
                    &self.debug_dirs,
                    self.type_cache.as_deref(),
                )
            })
            .as_ref()
    }

    /// The DWARF of object `index`: its separate debug file's if it has one (an object
    /// may keep a little DWARF of its start files), else its own.
    fn dwarf_of(&self, index: usize) -> Option<&Arc<DwarfInfo>> {
        let object = self.objects.get(index)?;
        self.debug_of(object)
            .and_then(|debug| debug.dwarf())
            .or_else(|| object.elf.dwarf())
    }

    /// The DWARF of object `index` to look `name` up in: `None` when it surely has no
    /// type of that name, found without indexing it.
    fn dwarf_naming(&self, index: usize, name: &[u8]) -> Option<&Arc<DwarfInfo>> {
        if !self.dwarf_file(index)?.may_define_type(name) {
            return None;
        }
        self.dwarf_of(index)
    }

    /// The file whose DWARF describes object `index`: its debug file's, else its own.
    fn dwarf_file(&self, index: usize) -> Option<&Arc<ElfObject>> {
        let object = self.objects.get(index)?;
        match self.debug_of(object) {
            Some(debug) if debug.has_dwarf() => Some(debug),
            _ => object.elf.has_dwarf().then_some(&object.elf),
        }
    }

    /// The answers kept for object `index`'s DWARF.
    fn memo_of(&self, index: usize) -> Option<&memo::Memo> {
        self.dwarf_file(index)?.memo.as_ref()
    }

    /// The first definition of `name` in object `index`, remembered across runs.
    fn lookup_in(&self, index: usize, kind: NameKind, name: &[u8]) -> Option<DieRef> {
        let memo = self.memo_of(index);
        if let Some(answer) = memo.and_then(|m| m.name(kind, name)) {
            return answer;
        }
        let answer = self
            .dwarf_naming(index, name)
            .and_then(|dwarf| dwarf.lookup(name, kind));
        if let Some(memo) = memo {
            memo.remember_name(kind, name, answer);
        }
        answer
    }

    fn symbol_tables<'a>(
        &'a self,
        object: &'a LoadedObject,
    ) -> impl Iterator<Item = &'a SymbolTable> {
        let own = object.elf.symbols();
        // A stripped object keeps `.dynsym` only; its `.symtab` is in the debug file.
        let debug = (!object.elf.has_symtab)
            .then(|| self.debug_of(object))
            .flatten()
            .map(|debug| debug.symbols());
        std::iter::once(own).chain(debug)
    }

    fn lookup_symbol(&self, name: &str, class: SymbolClass) -> Option<u64> {
        let (object, symbol) = self.lookup(name, class)?;
        Some(match symbol.absolute {
            true => symbol.value,
            false => symbol.value.wrapping_add(object.bias),
        })
    }

    /// The definition of `name`: the first global one, else the first local one.
    fn lookup(&self, name: &str, class: SymbolClass) -> Option<(&LoadedObject, Symbol)> {
        let mut local = None;
        for object in &self.objects {
            for table in self.symbol_tables(object) {
                match table.get(name, class) {
                    Some(symbol) if symbol.global => return Some((object, symbol)),
                    Some(symbol) => {
                        local.get_or_insert((object, symbol));
                    }
                    None => {}
                }
            }
        }
        local
    }

    /// The object that defines the function `function` (its path as mapped).
    pub fn definer(&self, function: &str) -> Option<PathBuf> {
        self.defining(function).map(|o| o.path.clone())
    }

    fn defining(&self, function: &str) -> Option<&LoadedObject> {
        let defines = |t: &SymbolTable| {
            let found = t.get(function, SymbolClass::Function);
            found.is_some_and(|s| !s.absolute)
        };
        self.objects
            .iter()
            .find(|o| self.symbol_tables(o).any(defines))
    }

    /// The run-time address range of section `section` (`.data`, `.bss`) of the first
    /// object that defines the function `function`: where a library keeps its state when
    /// no symbol names it.
    pub fn section_of_definer(&self, function: &str, section: &str) -> Option<Range<u64>> {
        use object::{Object, ObjectSection};
        let object = self.defining(function)?;
        let file = object::File::parse(object.elf.data()).ok()?;
        let found = file.section_by_name(section)?;
        let start = found.address().wrapping_add(object.bias);
        Some(start..start.checked_add(found.size())?)
    }

    /// Run-time address of a variable (`STT_OBJECT`, `STT_COMMON` or `STT_NOTYPE`) from
    /// `.symtab` and `.dynsym` of every object, the main executable first. A global
    /// definition anywhere wins over a local one; local (`static`) symbols are found
    /// when no global has the name.
    pub fn find_symbol(&self, name: &str) -> Option<u64> {
        self.lookup_symbol(name, SymbolClass::Data)
    }

    /// A thread-local variable (`STT_TLS`): the object that defines it, that object's
    /// load bias (which names its `link_map`), and the variable's offset in the object's
    /// TLS block; a global definition first, as [`Self::find_symbol`].
    pub fn find_tls_symbol(&self, name: &str) -> Option<(PathBuf, u64, u64)> {
        let (object, symbol) = self.lookup(name, SymbolClass::Tls)?;
        Some((object.path.clone(), object.bias, symbol.value))
    }

    /// Run-time address of a function (`STT_FUNC`), searched like [`Self::find_symbol`].
    pub fn find_function(&self, name: &str) -> Option<u64> {
        self.lookup_symbol(name, SymbolClass::Function)
    }

    fn intern(&self, loc: TypeLoc) -> TypeId {
        let mut table = self.types.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = table.ids.get(&loc) {
            return TypeId(id);
        }
        let id = table.locs.len();
        table.locs.push(loc);
        table.ids.insert(loc, id);
        TypeId(id)
    }

    fn loc(&self, ty: TypeId) -> Option<TypeLoc> {
        let table = self.types.lock().unwrap_or_else(|p| p.into_inner());
        table.locs.get(ty.0).copied()
    }

    /// A type by name: a typedef, struct, union or enum tag, or base type (`"long int"`);
    /// `"struct X"`, `"union X"` and `"enum X"` look in the tag namespace only. The
    /// objects are searched in order, main executable first; declarations are skipped.
    /// The first query of an object indexes its DWARF.
    pub fn find_type(&self, name: &str) -> Option<TypeId> {
        let (kind, bare) = parse_type_name(name);
        if bare.is_empty() {
            return None;
        }
        (0..self.objects.len()).find_map(|object| {
            let die = self.lookup_in(object, kind, bare.as_bytes())?;
            Some(self.intern(TypeLoc { object, die }))
        })
    }

    /// A definition of a struct, union or enum seen only declared: in the same object
    /// first, then in the others.
    /// An answer that looked beyond `prefer` (found elsewhere, or nowhere) is marked
    /// `crossed`: it depends on other files than the one it started in.
    fn definition(
        &self,
        kind: NameKind,
        name: &[u8],
        prefer: usize,
        crossed: &Cell<bool>,
    ) -> Option<TypeLoc> {
        let found = std::iter::once(prefer)
            .chain((0..self.objects.len()).filter(|&i| i != prefer))
            .find_map(|object| {
                let die = self.lookup_in(object, kind, name)?;
                Some(TypeLoc { object, die })
            });
        if found.is_none_or(|loc| loc.object != prefer) {
            crossed.set(true);
        }
        found
    }

    /// Follows typedefs and qualifiers to the type that has a layout, and a declaration
    /// to its definition. Returns the DIE and its tag.
    fn concrete(
        &self,
        mut loc: TypeLoc,
        crossed: &Cell<bool>,
    ) -> Option<(TypeLoc, constants::DwTag)> {
        for _ in 0..MAX_CHAIN {
            let dwarf = self.dwarf_of(loc.object)?;
            let entry = dwarf.entry(loc.die)?;
            let tag = entry.tag();
            match tag {
                constants::DW_TAG_typedef
                | constants::DW_TAG_const_type
                | constants::DW_TAG_volatile_type
                | constants::DW_TAG_restrict_type
                | constants::DW_TAG_atomic_type
                | constants::DW_TAG_immutable_type => {
                    // A typedef of nothing is `void`: no layout.
                    loc.die = dwarf.follow(loc.die.unit, &entry, constants::DW_AT_type)?;
                }
                constants::DW_TAG_structure_type
                | constants::DW_TAG_class_type
                | constants::DW_TAG_union_type
                | constants::DW_TAG_enumeration_type
                    if matches!(
                        entry.attr_value(constants::DW_AT_declaration),
                        Some(gimli::AttributeValue::Flag(true))
                    ) =>
                {
                    if let Some(die) =
                        dwarf.follow(loc.die.unit, &entry, constants::DW_AT_signature)
                    {
                        loc.die = die;
                        continue;
                    }
                    let name = dwarf.name(loc.die.unit, &entry)?;
                    let kind = match tag {
                        constants::DW_TAG_union_type => NameKind::Union,
                        constants::DW_TAG_enumeration_type => NameKind::Enum,
                        _ => NameKind::Struct,
                    };
                    loc = self.definition(kind, &name, loc.object, crossed)?;
                }
                _ => return Some((loc, tag)),
            }
        }
        None
    }

    /// `sizeof` a concrete type.
    fn size_of(
        &self,
        loc: TypeLoc,
        tag: constants::DwTag,
        depth: usize,
        crossed: &Cell<bool>,
    ) -> Option<u64> {
        if depth > MAX_NESTING {
            return None;
        }
        let dwarf = self.dwarf_of(loc.object)?;
        let entry = dwarf.entry(loc.die)?;
        if let Some(size) = entry.attr_value(constants::DW_AT_byte_size) {
            return size.udata_value();
        }
        let element = |entry: &gimli::DebuggingInformationEntry<bytes::Reader>| -> Option<u64> {
            let die = dwarf.follow(loc.die.unit, entry, constants::DW_AT_type)?;
            let (inner, inner_tag) = self.concrete(
                TypeLoc {
                    object: loc.object,
                    die,
                },
                crossed,
            )?;
            self.size_of(inner, inner_tag, depth + 1, crossed)
        };
        match tag {
            constants::DW_TAG_pointer_type
            | constants::DW_TAG_reference_type
            | constants::DW_TAG_rvalue_reference_type
            | constants::DW_TAG_ptr_to_member_type => dwarf.address_size(loc.die.unit),
            constants::DW_TAG_enumeration_type => element(&entry),
            constants::DW_TAG_array_type => {
                let mut count = 1u64;
                let mut dimensions = 0;
                for child in dwarf.children(loc.die)? {
                    if child.tag() != constants::DW_TAG_subrange_type {
                        continue;
                    }
                    dimensions += 1;
                    let length = match child.attr_value(constants::DW_AT_count) {
                        Some(n) => n.udata_value()?,
                        None => {
                            // A flexible array member has no bound: no size.
                            let upper = child
                                .attr_value(constants::DW_AT_upper_bound)?
                                .udata_value()?;
                            let lower = child
                                .attr_value(constants::DW_AT_lower_bound)
                                .and_then(|v| v.udata_value())
                                .unwrap_or(0);
                            (upper + 1).checked_sub(lower)?
                        }
                    };
                    count = count.checked_mul(length)?;
                }
                if dimensions == 0 {
                    return None;
                }
                element(&entry)?.checked_mul(count)
            }
            _ => None,
        }
    }

    /// `sizeof` the type, through typedefs and qualifiers; `None` for an incomplete type
    /// (a declaration with no definition anywhere, `void`, a flexible array).
    pub fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.size_at(self.loc(ty)?)
    }

    /// `sizeof` the type at `start`, remembered across runs when its answer stayed in
    /// its file.
    fn size_at(&self, start: TypeLoc) -> Option<u64> {
        let memo = self.memo_of(start.object);
        if let Some(answer) = memo.and_then(|m| m.size(start.die)) {
            return answer;
        }
        let crossed = Cell::new(false);
        let answer = self
            .concrete(start, &crossed)
            .and_then(|(loc, tag)| self.size_of(loc, tag, 0, &crossed));
        if let (Some(memo), false) = (memo, crossed.get()) {
            memo.remember_size(start.die, answer);
        }
        answer
    }

    /// The member `name` of the concrete struct or union `aggregate`, searched among its
    /// direct members, then inside its anonymous struct and union members: its offset
    /// and its type.
    fn find_member(
        &self,
        aggregate: TypeLoc,
        name: &[u8],
        depth: usize,
        crossed: &Cell<bool>,
    ) -> Option<(u64, TypeLoc)> {
        if depth > MAX_NESTING {
            return None;
        }
        let members: Vec<Member> = self.dwarf_of(aggregate.object)?.members(aggregate.die)?;
        let at = |die: DieRef| TypeLoc {
            object: aggregate.object,
            die,
        };
        if let Some(member) = members.iter().find(|m| m.name.as_deref() == Some(name)) {
            return Some((member.offset?, at(member.ty?)));
        }
        members
            .iter()
            .filter(|m| m.name.is_none())
            .find_map(|member| {
                let (inner, tag) = self.concrete(at(member.ty?), crossed)?;
                if !is_aggregate(tag) {
                    return None;
                }
                let (offset, ty) = self.find_member(inner, name, depth + 1, crossed)?;
                Some((member.offset?.checked_add(offset)?, ty))
            })
    }

    fn compute_field_offset(
        &self,
        start: TypeLoc,
        path: &str,
        crossed: &Cell<bool>,
    ) -> Option<u64> {
        let mut current = start;
        let mut total = 0u64;
        for component in path.split('.') {
            let component = component.trim();
            if component.is_empty() {
                return None;
            }
            let (aggregate, tag) = self.concrete(current, crossed)?;
            if !is_aggregate(tag) {
                return None;
            }
            let (offset, member_type) =
                self.find_member(aggregate, component.as_bytes(), 0, crossed)?;
            total = total.checked_add(offset)?;
            current = member_type;
        }
        Some(total)
    }

    /// Byte offset of a member of a struct or union type (through typedefs): a member
    /// name, possibly one of an anonymous struct or union member, or a dotted path
    /// `"a.b.c"` through named struct and union members. Offsets are added along the
    /// path. A bit-field gives the byte holding its first bit.
    pub fn field_offset(&self, ty: TypeId, path: &str) -> Option<u64> {
        let key = (ty.0, path.to_owned());
        {
            let table = self.types.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(&cached) = table.offsets.get(&key) {
                return cached;
            }
        }
        let offset = self.loc(ty).and_then(|start| self.offset_at(start, path));
        let mut table = self.types.lock().unwrap_or_else(|p| p.into_inner());
        table.offsets.insert(key, offset);
        offset
    }

    /// The offset of `path` in the type at `start`, remembered across runs when its
    /// answer stayed in its file.
    fn offset_at(&self, start: TypeLoc, path: &str) -> Option<u64> {
        let memo = self.memo_of(start.object);
        if let Some(answer) = memo.and_then(|m| m.field(start.die, path)) {
            return answer;
        }
        let crossed = Cell::new(false);
        let answer = self.compute_field_offset(start, path, &crossed);
        if let (Some(memo), false) = (memo, crossed.get()) {
            memo.remember_field(start.die, path, answer);
        }
        answer
    }

    /// The ELF object whose class and byte order describe the process.
    fn primary(&self) -> &ElfObject {
        &self.objects[0].elf
    }

    /// Size of a base type of the DWARF, the main executable's first.
    fn base_type_size(&self, name: &str) -> Option<u64> {
        (0..self.objects.len()).find_map(|object| {
            let die = self.lookup_in(object, NameKind::Base, name.as_bytes())?;
            self.size_at(TypeLoc { object, die })
        })
    }

    /// Sizes of the C types: the DWARF base types `short int`, `int`, `long int` and
    /// `long long int` when the debug information has them, else the defaults of the
    /// ELF class (LP64 for ELFCLASS64, ILP32 for ELFCLASS32); pointers from the class.
    pub fn abi(&self) -> TargetAbi {
        let wide = self.primary().is_64;
        let word = if wide { 8 } else { 4 };
        let size = |name: &str, default: u8| {
            self.base_type_size(name)
                .and_then(|s| u8::try_from(s).ok())
                .unwrap_or(default)
        };
        TargetAbi {
            short: size("short int", 2),
            int: size("int", 4),
            long: size("long int", word),
            long_long: size("long long int", 8),
            pointer: word,
        }
    }

    /// Byte order from the ELF header of the main executable.
    pub fn byte_order(&self) -> ByteOrder {
        if self.primary().little_endian {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }

    /// Whether any object (main executable or library) has DWARF, in itself or in a
    /// separate debug file.
    pub fn has_debug_info(&self) -> bool {
        self.objects
            .iter()
            .any(|o| o.elf.has_dwarf || self.debug_of(o).is_some_and(|d| d.has_dwarf))
    }
}

#[cfg(test)]
mod tests;
