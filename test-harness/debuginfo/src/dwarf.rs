//! The DWARF of one ELF file: its units, a name index of the types declared at the top
//! level of each unit, and readers for the few DIEs a type query touches.
//!
//! Attach must stay fast with a 20 MB `.debug_info`, so the index walks only the
//! top-level DIEs of each unit, jumping over their children with `DW_AT_sibling` (and
//! skipping attributes without decoding them when a DIE has none); member DIEs are read
//! only when a field of that very type is asked for.

use crate::absent::indexed_tag;
use crate::accel::Accelerator;
use crate::bytes::{Reader, SectionBytes};
use gimli::Section as _;
use gimli::{
    AttributeValue, DebuggingInformationEntry, Operation, UnitOffset, UnitType, constants,
};
use object::Object;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::PathBuf;
use std::sync::Mutex;

/// The unit a `.debug_info` offset falls in, and the offset within it, from the units'
/// `(start offset, unit index)` by start.
pub(crate) fn unit_of_offset(
    info_units: &[(usize, usize)],
    offset: usize,
) -> Option<(usize, usize)> {
    let at = info_units.partition_point(|&(start, _)| start <= offset);
    let (start, index) = *info_units.get(at.checked_sub(1)?)?;
    Some((index, offset - start))
}

/// A file's section bytes by name (empty when it has none).
pub(crate) type SectionSource<'a> = &'a dyn Fn(&str) -> Result<SectionBytes, String>;

/// The files whose units this process scanned for type names, in order: a diagnostic
/// of the cache and of accelerator tables.
pub(crate) fn indexed() -> &'static Mutex<Vec<PathBuf>> {
    static INDEXED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    &INDEXED
}

/// A DIE of one file's DWARF: unit index and offset in the unit. Ordered as a walk of
/// the units meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct DieRef {
    /// Index in [`DwarfInfo`]'s units.
    pub unit: usize,
    /// Offset of the DIE in its unit.
    pub offset: usize,
}

/// Which C namespace a name is looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameKind {
    /// `struct NAME` (or a C++ class).
    Struct,
    /// `union NAME`.
    Union,
    /// `enum NAME`.
    Enum,
    /// A plain identifier: a typedef, else a tag, else a base type such as `long int`.
    Plain,
    /// A base type only (`int`, `long int`).
    Base,
}

/// The first definition of a name in each namespace.
#[derive(Debug, Default, Clone, Copy)]
struct NameSlots {
    typedef: Option<DieRef>,
    structure: Option<DieRef>,
    union: Option<DieRef>,
    enumeration: Option<DieRef>,
    base: Option<DieRef>,
}

impl NameSlots {
    /// Keeps, in each namespace, the earlier of two definitions.
    fn merge(&mut self, other: &NameSlots) {
        let first = |a: Option<DieRef>, b: Option<DieRef>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.typedef = first(self.typedef, other.typedef);
        self.structure = first(self.structure, other.structure);
        self.union = first(self.union, other.union);
        self.enumeration = first(self.enumeration, other.enumeration);
        self.base = first(self.base, other.base);
    }
}

/// Marks a `.debug_line_str` offset among the `.debug_str` ones.
const LINE_STR: u64 = 1 << 63;

/// The named top-level types of a file. A name kept in a string section is keyed by
/// its offset there, so indexing neither reads nor copies it; a lookup finds the
/// name's offsets in the (small) string sections instead. Only names written inline
/// in a DIE are stored as bytes.
#[derive(Debug, Default)]
struct NameIndex {
    by_offset: HashMap<u64, NameSlots, BuildHasherDefault<FxHasher>>,
    inline: HashMap<Box<[u8]>, NameSlots, BuildHasherDefault<FxHasher>>,
}

impl NameIndex {
    fn slots(&mut self, key: NameKey) -> Option<&mut NameSlots> {
        match key {
            NameKey::Offset(offset) => Some(self.by_offset.entry(offset).or_default()),
            NameKey::Inline(reader) => {
                let name = reader.bytes();
                if !self.inline.contains_key(name) {
                    self.inline.insert(name.into(), NameSlots::default());
                }
                self.inline.get_mut(name)
            }
        }
    }

    /// Adds the names of other units.
    fn absorb(&mut self, later: NameIndex) {
        for (offset, slots) in later.by_offset {
            self.by_offset.entry(offset).or_default().merge(&slots);
        }
        for (name, slots) in later.inline {
            self.inline.entry(name).or_default().merge(&slots);
        }
    }
}

/// Where a DIE's name is: an offset in a string section, or inline.
enum NameKey {
    Offset(u64),
    Inline(Reader),
}

/// A small, fast hash for the index's keys (offsets and short names): the index is
/// built on every cold attach, and nothing hostile chooses its keys' collisions that
/// would cost more than a slow lookup.
#[derive(Default)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A member of a struct or union (or a base class).
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// `DW_AT_name`, absent for an anonymous struct or union member.
    pub name: Option<Vec<u8>>,
    /// Byte offset in the enclosing type; `None` when its location is an expression
    /// more complex than a constant offset.
    pub offset: Option<u64>,
    /// `DW_AT_type`.
    pub ty: Option<DieRef>,
}

/// A unit header, and the unit made from it on first need (`None`: it cannot be made).
struct UnitSlot {
    header: gimli::UnitHeader<Reader>,
    unit: std::sync::OnceLock<Option<gimli::Unit<Reader>>>,
}

/// Parsed units and the name index of one file's DWARF.
pub(crate) struct DwarfInfo {
    dwarf: gimli::Dwarf<Reader>,
    /// Every unit's header, by position; a unit itself (its abbreviations) is made
    /// again when a type query needs it, so the index holds no unit's abbreviations.
    units: Vec<UnitSlot>,
    /// `(.debug_info offset, unit index)` of the units in `.debug_info`, by offset, to
    /// resolve `DW_FORM_ref_addr`.
    info_units: Vec<(usize, usize)>,
    /// Type units by signature, to resolve `DW_FORM_ref_sig8` and `DW_AT_signature`.
    signatures: HashMap<u64, DieRef>,
    /// The names of all units, from a scan of them: built at load unless the file's
    /// accelerator table answers.
    names: std::sync::OnceLock<NameIndex>,
    /// The file's `.debug_names`, when it covers every unit.
    accelerator: Option<Accelerator>,
    /// Some type DIE of the file has its name inline, where no accelerator table can
    /// point ([`crate::absent::inline_type_names`]).
    inline_names: bool,
    /// `.debug_info` itself, to release its mapped pages once indexed.
    info_bytes: SectionBytes,
    /// The file, to list it among those scanned ([`crate::indexed_files`]).
    path: std::path::PathBuf,
}

impl std::fmt::Debug for DwarfInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DwarfInfo")
            .field("units", &self.units.len())
            .field(
                "names",
                &self.names.get().map(|n| n.by_offset.len() + n.inline.len()),
            )
            .field("accelerator", &self.accelerator)
            .finish_non_exhaustive()
    }
}

/// The sections read: what type queries need (strings, abbreviations, units). Not the
/// line tables: units are made without their line program ([`lean_unit`]).
fn needed(id: gimli::SectionId) -> bool {
    use gimli::SectionId::*;
    matches!(
        id,
        DebugAbbrev
            | DebugInfo
            | DebugTypes
            | DebugStr
            | DebugStrOffsets
            | DebugLineStr
            | DebugAddr
            | DebugNames
    )
}

/// A unit as `gimli::Unit::new` makes it, without parsing its line program (its file
/// names cost as much as the type index and no type query needs them): the bases its
/// attributes need, from its root DIE.
fn lean_unit(
    dwarf: &gimli::Dwarf<Reader>,
    header: gimli::UnitHeader<Reader>,
) -> gimli::Result<gimli::Unit<Reader>> {
    use gimli::{DebugAddrBase, DebugLocListsBase, DebugRngListsBase, DebugStrOffsetsBase};
    let abbreviations = dwarf.abbreviations(&header)?;
    let encoding = header.encoding();
    let mut unit = gimli::Unit {
        abbreviations,
        name: None,
        comp_dir: None,
        low_pc: 0,
        str_offsets_base: DebugStrOffsetsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        addr_base: DebugAddrBase(0),
        loclists_base: DebugLocListsBase::default_for_encoding_and_file(encoding, dwarf.file_type),
        rnglists_base: DebugRngListsBase::default_for_encoding_and_file(encoding, dwarf.file_type),
        line_program: None,
        dwo_id: match header.type_() {
            UnitType::Skeleton(id) | UnitType::SplitCompilation(id) => Some(id),
            _ => None,
        },
        header,
    };
    let mut cursor = unit.header.entries(&unit.abbreviations);
    cursor.next_dfs()?;
    let root = cursor.current().ok_or(gimli::Error::MissingUnitDie)?;
    let mut bases = (
        unit.str_offsets_base,
        unit.addr_base,
        unit.loclists_base,
        unit.rnglists_base,
    );
    for attr in root.attrs() {
        match attr.value() {
            AttributeValue::DebugStrOffsetsBase(base) => bases.0 = base,
            AttributeValue::DebugAddrBase(base) => bases.1 = base,
            AttributeValue::DebugLocListsBase(base) => bases.2 = base,
            AttributeValue::DebugRngListsBase(base) => bases.3 = base,
            _ => {}
        }
    }
    (
        unit.str_offsets_base,
        unit.addr_base,
        unit.loclists_base,
        unit.rnglists_base,
    ) = bases;
    Ok(unit)
}

impl DwarfInfo {
    /// Reads the DWARF sections of an ELF file and indexes its type names.
    pub fn load(
        elf: &[u8],
        section: SectionSource,
        path: &std::path::Path,
    ) -> Result<DwarfInfo, String> {
        let file = object::File::parse(elf).map_err(|e| e.to_string())?;
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let empty = SectionBytes::empty();
        let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, String> {
            let bytes = if needed(id) {
                section(id.name())?
            } else {
                empty.clone()
            };
            Ok(Reader::new(bytes, endian))
        })?;
        let mut headers = Vec::new();
        let mut walk = dwarf.units();
        while let Some(header) = walk.next().map_err(|e| format!("DWARF: {e}"))? {
            headers.push(header);
        }
        let mut walk = dwarf.type_units();
        while let Some(header) = walk.next().map_err(|e| format!("DWARF: {e}"))? {
            headers.push(header);
        }
        let mut info = DwarfInfo {
            dwarf,
            units: Vec::new(),
            info_units: Vec::new(),
            signatures: HashMap::new(),
            names: std::sync::OnceLock::new(),
            accelerator: None,
            inline_names: true,
            info_bytes: section(".debug_info")?,
            path: path.to_owned(),
        };
        for (position, header) in headers.into_iter().enumerate() {
            if let Some(at) = header.debug_info_offset() {
                info.info_units.push((at.0, position));
            }
            if let UnitType::Type {
                type_signature,
                type_offset,
            }
            | UnitType::SplitType {
                type_signature,
                type_offset,
            } = header.type_()
            {
                info.signatures.insert(
                    type_signature.0,
                    DieRef {
                        unit: position,
                        offset: type_offset.0,
                    },
                );
            }
            info.units.push(UnitSlot {
                header,
                unit: std::sync::OnceLock::new(),
            });
        }
        let unit_offsets: Vec<usize> = info.info_units.iter().map(|&(at, _)| at).collect();
        info.accelerator = Accelerator::of(&info.dwarf, &unit_offsets);
        info.inline_names = crate::absent::inline_type_names(&section(".debug_abbrev")?);
        if info.accelerator.is_none() {
            info.scanned();
        }
        Ok(info)
    }

    /// The names of every unit, scanned once.
    fn scanned(&self) -> &NameIndex {
        self.names.get_or_init(|| {
            indexed()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.path.clone());
            let headers: Vec<gimli::UnitHeader<Reader>> =
                self.units.iter().map(|slot| slot.header.clone()).collect();
            self.index_names(&headers)
        })
    }

    /// Unit `index`, made on first use.
    fn unit(&self, index: usize) -> Option<&gimli::Unit<Reader>> {
        let slot = self.units.get(index)?;
        slot.unit
            .get_or_init(|| lean_unit(&self.dwarf, slot.header.clone()).ok())
            .as_ref()
    }

    /// Indexes the names of every unit. A large file is cut into runs of consecutive
    /// units of about equal size that all cores take in turn; since each namespace keeps
    /// the earliest definition, the order runs finish in does not matter. Each unit is
    /// made, indexed and dropped.
    fn index_names(&self, headers: &[gimli::UnitHeader<Reader>]) -> NameIndex {
        // Below this, starting threads costs more than it saves.
        const PARALLEL_BYTES: usize = 4 << 20;
        let threads = std::env::var("MQD_INDEX_THREADS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .clamp(1, 8);
        let size: usize = headers.iter().map(|h| h.length_including_self()).sum();
        let threads = if size < PARALLEL_BYTES { 1 } else { threads };
        // A few runs per thread, so that one large unit does not leave the others idle.
        let per_run = size.div_ceil(threads * 8).max(1);
        let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (at, header) in headers.iter().enumerate() {
            bytes += header.length_including_self();
            if bytes >= per_run {
                runs.push(start..at + 1);
                (start, bytes) = (at + 1, 0);
            }
        }
        if start < headers.len() {
            runs.push(start..headers.len());
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || {
            let mut names = NameIndex::default();
            while let Some(range) =
                runs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            {
                for position in range.clone() {
                    // A unit we cannot walk loses its names, not the whole file.
                    if let Ok(unit) = lean_unit(&self.dwarf, headers[position].clone()) {
                        let _ = self.index_unit(&unit, position, &mut names);
                    }
                }
                // The run's pages of a mapped file are not kept resident for the few
                // DIEs that queries read later.
                self.release(&headers[range.clone()]);
            }
            names
        };
        if threads < 2 || runs.len() < 2 {
            return work();
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            let mut names = NameIndex::default();
            for part in handles.into_iter().filter_map(|h| h.join().ok()) {
                names.absorb(part);
            }
            names
        })
    }

    /// Releases the mapped pages of consecutive units of `.debug_info`.
    fn release(&self, units: &[gimli::UnitHeader<Reader>]) {
        let (Some(first), Some(last)) = (units.first(), units.last()) else {
            return;
        };
        let (Some(start), Some(end)) = (
            first.debug_info_offset(),
            last.debug_info_offset()
                .map(|o| o.0 + last.length_including_self()),
        ) else {
            return;
        };
        self.info_bytes.release(start.0..end);
    }

    /// Records the named types among the top-level DIEs of one unit.
    fn index_unit(
        &self,
        unit: &gimli::Unit<Reader>,
        index: usize,
        names: &mut NameIndex,
    ) -> gimli::Result<()> {
        let mut raw = unit.entries_raw(None)?;
        let Some(root) = raw.read_abbreviation()? else {
            return Ok(());
        };
        raw.skip_attributes(root.attributes())?;
        if !root.has_children() {
            return Ok(());
        }
        // Depth of the top-level DIEs in `raw`'s count; reset when jumping.
        let mut top = raw.next_depth();
        while !raw.is_empty() && raw.next_depth() >= top {
            let depth = raw.next_depth();
            let offset = raw.next_offset();
            let Some(abbrev) = raw.read_abbreviation()? else {
                continue;
            };
            if depth != top {
                raw.skip_attributes(abbrev.attributes())?;
                continue;
            }
            let tag = abbrev.tag();
            let interesting = indexed_tag(tag);
            // Other DIEs are read only for a DW_AT_sibling that jumps over their children.
            let jumps = abbrev.has_children()
                && abbrev
                    .attributes()
                    .iter()
                    .any(|spec| spec.name() == constants::DW_AT_sibling);
            if !interesting && !jumps {
                raw.skip_attributes(abbrev.attributes())?;
                continue;
            }
            // Only the three attributes the index uses are decoded; runs of the others
            // are skipped (a function's many attributes, for its sibling alone).
            let mut name = None;
            let mut declaration = false;
            let mut sibling = None;
            let specs = abbrev.attributes();
            let mut skipped = 0;
            for (at, spec) in specs.iter().enumerate() {
                let wanted = match spec.name() {
                    constants::DW_AT_name => interesting,
                    constants::DW_AT_declaration | constants::DW_AT_sibling => true,
                    _ => false,
                };
                if !wanted {
                    continue;
                }
                raw.skip_attributes(&specs[skipped..at])?;
                skipped = at + 1;
                let attr = raw.read_attribute(*spec)?;
                match attr.name() {
                    constants::DW_AT_name => name = Some(attr.value()),
                    constants::DW_AT_declaration => {
                        declaration = matches!(attr.value(), AttributeValue::Flag(true))
                    }
                    _ => {
                        if let AttributeValue::UnitRef(to) = attr.value()
                            && to.0 > offset.0
                        {
                            sibling = Some(to);
                        }
                    }
                }
            }
            raw.skip_attributes(&specs[skipped..])?;
            if let (Some(name), false) = (name, declaration)
                && let Some(key) = self.name_key(unit, name)
            {
                let die = DieRef {
                    unit: index,
                    offset: offset.0,
                };
                if let Some(slots) = names.slots(key) {
                    let slot = match tag {
                        constants::DW_TAG_typedef => &mut slots.typedef,
                        constants::DW_TAG_union_type => &mut slots.union,
                        constants::DW_TAG_enumeration_type => &mut slots.enumeration,
                        constants::DW_TAG_base_type => &mut slots.base,
                        _ => &mut slots.structure,
                    };
                    slot.get_or_insert(die);
                }
            }
            if abbrev.has_children()
                && let Some(sibling) = sibling
            {
                raw = unit.entries_raw(Some(sibling))?;
                top = raw.next_depth();
            }
        }
        Ok(())
    }

    /// Where a name attribute's string is, without reading it.
    fn name_key(
        &self,
        unit: &gimli::Unit<Reader>,
        value: AttributeValue<Reader>,
    ) -> Option<NameKey> {
        match value {
            AttributeValue::DebugStrRef(offset) => Some(NameKey::Offset(offset.0 as u64)),
            AttributeValue::DebugStrOffsetsIndex(index) => {
                let offset = self
                    .dwarf
                    .debug_str_offsets
                    .get_str_offset(unit.header.format(), unit.str_offsets_base, index)
                    .ok()?;
                Some(NameKey::Offset(offset.0 as u64))
            }
            AttributeValue::DebugLineStrRef(offset) => {
                Some(NameKey::Offset(offset.0 as u64 | LINE_STR))
            }
            AttributeValue::String(bytes) => Some(NameKey::Inline(bytes)),
            // A supplementary file's strings (dwz) are not read.
            _ => None,
        }
    }

    /// The definitions of `name` under every spelling of it the index has: inline, and
    /// at each offset where the string sections hold it.
    fn slots_of(&self, name: &[u8]) -> Option<NameSlots> {
        // A name that may be written inline in some DIE is not in the table: the
        // units are scanned for it, as for a table that does not parse there.
        let maybe_inline =
            || self.inline_names && crate::absent::holds_string(self.info_bytes.as_ref(), name);
        if let Some(accelerator) = &self.accelerator
            && !maybe_inline()
            && let Ok(found) = accelerator.named(name, &self.dwarf.debug_str)
        {
            return self.definitions(found);
        }
        let names = self.scanned();
        let mut found: Option<NameSlots> = names.inline.get(name).copied();
        let sections = [
            (self.dwarf.debug_str.reader(), 0),
            (self.dwarf.debug_line_str.reader(), LINE_STR),
        ];
        for (section, tag) in sections {
            let bytes: &[u8] = section.bytes();
            for at in memchr::memmem::find_iter(bytes, name) {
                // A whole string, or the tail of one (the linker shares tails).
                if bytes.get(at + name.len()) != Some(&0) {
                    continue;
                }
                if let Some(slots) = names.by_offset.get(&(at as u64 | tag)) {
                    found.get_or_insert_with(NameSlots::default).merge(slots);
                }
            }
        }
        found
    }

    /// The first definition in each namespace among DIEs an accelerator table named:
    /// top-level type DIEs that are not declarations, as the scan keeps.
    fn definitions(&self, named: Vec<(constants::DwTag, usize)>) -> Option<NameSlots> {
        let mut slots = NameSlots::default();
        let mut any = false;
        for (tag, offset) in named {
            let Some((unit, at)) = unit_of_offset(&self.info_units, offset) else {
                continue;
            };
            let die = DieRef { unit, offset: at };
            let Some(entry) = self.entry(die) else {
                continue;
            };
            if entry.tag() != tag
                || matches!(
                    entry.attr_value(constants::DW_AT_declaration),
                    Some(AttributeValue::Flag(true))
                )
            {
                continue;
            }
            let slot = match tag {
                constants::DW_TAG_typedef => &mut slots.typedef,
                constants::DW_TAG_structure_type | constants::DW_TAG_class_type => {
                    &mut slots.structure
                }
                constants::DW_TAG_union_type => &mut slots.union,
                constants::DW_TAG_enumeration_type => &mut slots.enumeration,
                constants::DW_TAG_base_type => &mut slots.base,
                _ => continue,
            };
            *slot = Some(slot.map_or(die, |earlier| earlier.min(die)));
            any = true;
        }
        any.then_some(slots)
    }

    /// The first definition of `name` in that namespace (a plain name prefers a typedef,
    /// then a struct, union or enum tag, then a base type).
    pub fn lookup(&self, name: &[u8], kind: NameKind) -> Option<DieRef> {
        if name.is_empty() || name.contains(&0) {
            return None;
        }
        let slots = self.slots_of(name)?;
        match kind {
            NameKind::Struct => slots.structure,
            NameKind::Union => slots.union,
            NameKind::Enum => slots.enumeration,
            NameKind::Plain => slots
                .typedef
                .or(slots.structure)
                .or(slots.union)
                .or(slots.enumeration)
                .or(slots.base),
            NameKind::Base => slots.base,
        }
    }

    /// The DIE itself, with its attributes.
    pub fn entry(&self, die: DieRef) -> Option<DebuggingInformationEntry<Reader>> {
        self.unit(die.unit)?.entry(UnitOffset(die.offset)).ok()
    }

    /// `DW_AT_name` of a DIE of unit `unit`.
    pub fn name(&self, unit: usize, entry: &DebuggingInformationEntry<Reader>) -> Option<Vec<u8>> {
        let value = entry.attr_value(constants::DW_AT_name)?;
        let unit = self.unit(unit)?;
        let string = self.dwarf.attr_string(unit, value).ok()?;
        Some(string.bytes().to_vec())
    }

    /// Resolves a reference attribute of a DIE of unit `unit`.
    pub fn reference(&self, unit: usize, value: AttributeValue<Reader>) -> Option<DieRef> {
        match value {
            AttributeValue::UnitRef(offset) => Some(DieRef {
                unit,
                offset: offset.0,
            }),
            AttributeValue::DebugInfoRef(offset) => {
                let (index, relative) = unit_of_offset(&self.info_units, offset.0)?;
                let unit = self.unit(index)?;
                UnitOffset(relative)
                    .is_in_bounds(&unit.header)
                    .then_some(DieRef {
                        unit: index,
                        offset: relative,
                    })
            }
            AttributeValue::DebugTypesRef(signature) => self.signatures.get(&signature.0).copied(),
            _ => None,
        }
    }

    /// The DIE named by an attribute of a DIE (`DW_AT_type`, `DW_AT_signature`).
    pub fn follow(
        &self,
        unit: usize,
        entry: &DebuggingInformationEntry<Reader>,
        attr: constants::DwAt,
    ) -> Option<DieRef> {
        self.reference(unit, entry.attr_value(attr)?)
    }

    /// Pointer size of a unit.
    pub fn address_size(&self, unit: usize) -> Option<u64> {
        Some(u64::from(self.units.get(unit)?.header.address_size()))
    }

    /// The children of a DIE (a struct's members, an array's subranges), in order.
    pub fn children(&self, die: DieRef) -> Option<Vec<DebuggingInformationEntry<Reader>>> {
        let unit = self.unit(die.unit)?;
        let mut tree = unit.entries_tree(Some(UnitOffset(die.offset))).ok()?;
        let root = tree.root().ok()?;
        let mut iter = root.children();
        let mut children = Vec::new();
        while let Some(child) = iter.next().ok()? {
            children.push(child.entry().clone());
        }
        Some(children)
    }

    /// The members of a struct or union DIE (and base classes, as unnamed members).
    pub fn members(&self, die: DieRef) -> Option<Vec<Member>> {
        let unit = self.unit(die.unit)?;
        let mut members = Vec::new();
        for child in self.children(die)? {
            let inheritance = match child.tag() {
                constants::DW_TAG_member => false,
                constants::DW_TAG_inheritance => true,
                _ => continue,
            };
            let name = if inheritance {
                None
            } else {
                self.name(die.unit, &child)
            };
            let offset = match child.attr_value(constants::DW_AT_data_member_location) {
                Some(location) => member_location(location, unit.encoding()),
                None => Some(
                    child
                        .attr_value(constants::DW_AT_data_bit_offset)
                        .and_then(|v| v.udata_value())
                        .map_or(0, |bits| bits / 8),
                ),
            };
            members.push(Member {
                name,
                offset,
                ty: self.follow(die.unit, &child, constants::DW_AT_type),
            });
        }
        Some(members)
    }
}

/// `DW_AT_data_member_location`: a constant, or the DWARF 2 style expression that adds
/// a constant to the address of the enclosing object (`DW_OP_plus_uconst N`).
fn member_location(value: AttributeValue<Reader>, encoding: gimli::Encoding) -> Option<u64> {
    if let Some(constant) = value.udata_value() {
        return Some(constant);
    }
    let AttributeValue::Exprloc(expression) = value else {
        return None;
    };
    let mut bytes = expression.0;
    // The expression starts with the enclosing object's address on the stack: 0 here.
    let mut stack = vec![0u64];
    while !gimli::Reader::is_empty(&bytes) {
        match Operation::parse(&mut bytes, encoding).ok()? {
            Operation::PlusConstant { value } => {
                let top = stack.last_mut()?;
                *top = top.checked_add(value)?;
            }
            Operation::UnsignedConstant { value } => stack.push(value),
            Operation::Plus => {
                let b = stack.pop()?;
                let a = stack.pop()?;
                stack.push(a.checked_add(b)?);
            }
            _ => return None,
        }
    }
    stack.last().copied()
}
