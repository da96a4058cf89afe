//! The DWARF of code: the function and inlined functions an address is in, and where
//! their parameters and variables live there (DWARF location expressions and lists).
//!
//! Loaded apart from the type index ([`crate::dwarf::DwarfInfo`]), and only for files a
//! stack's MPI call is in: location lists and ranges are sections type queries never
//! read.

use crate::bytes::Reader;
use crate::bytes::SectionBytes;
use gimli::{AttributeValue, DebuggingInformationEntry, Location, UnitOffset, constants};
use object::Object;
use std::sync::Arc;

/// A parameter or variable of a scope.
#[derive(Debug, Clone)]
pub struct Variable {
    /// Its name.
    pub name: String,
    location: AttributeValue<Reader>,
    /// Its type's size in bytes, when known.
    pub size: Option<u64>,
}

/// A function, or a function inlined into it, that contains an address.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The function's name, when its DWARF gives one.
    pub name: Option<String>,
    /// Its parameters and the variables of its blocks that contain the address.
    pub variables: Vec<Variable>,
    /// Where an inlined function was called from (file index, line).
    call: Option<(u64, u64)>,
}

/// One frame as the source has it: a function (inlined or not) and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// The function.
    pub function: Option<String>,
    /// Its source file.
    pub file: Option<String>,
    /// The line in it.
    pub line: Option<u32>,
}

/// A unit's line table: `(address, line, file index)` rows by address; line 0 ends a
/// sequence.
#[derive(Debug, Default)]
struct LineTable {
    rows: Vec<(u64, u32, u64)>,
    files: Vec<Option<String>>,
}

/// A unit, parsed (its abbreviations and line program header) on first use: a debug
/// file of a thousand units whose address ranges `.debug_aranges` gives answers a
/// stack's few addresses from a few of them.
struct LazyUnit {
    header: gimli::UnitHeader<Reader>,
    unit: std::sync::OnceLock<Option<gimli::Unit<Reader>>>,
}

/// The scopes containing an address, outermost (the function) first.
#[derive(Debug, Clone)]
pub struct Scopes {
    unit: usize,
    frame_base: Option<AttributeValue<Reader>>,
    /// The scopes, outermost first.
    pub scopes: Vec<Scope>,
    /// The parameters of the call whose return address follows the address (its
    /// `DW_TAG_call_site`), where the compiler said what the caller passed.
    pub call_parameters: Vec<CallParameter>,
}

/// Where a call passes one parameter and the expression of the value it passed there
/// (`DW_AT_call_value`), valid in the caller once the call has begun.
#[derive(Debug, Clone)]
pub struct CallParameter {
    /// Where the parameter is passed.
    pub at: ParameterPlace,
    value: AttributeValue<Reader>,
}

/// A register (DWARF number) or a stack slot (offset from the stack pointer at the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParameterPlace {
    /// In a register.
    Register(u16),
    /// In memory at the caller's stack pointer plus this offset.
    Stack(i64),
}

/// What evaluating a location needs from the stopped frame.
pub struct FrameState<'a> {
    /// Registers by DWARF number, `None` where unknown (clobbered in a caller frame).
    pub register: &'a dyn Fn(u16) -> Option<u64>,
    /// The frame's canonical frame address.
    pub cfa: Option<u64>,
    /// The object's load bias.
    pub bias: u64,
    /// Memory: the 8 bytes at an address.
    pub read: &'a dyn Fn(u64) -> Option<u64>,
}

/// Where a variable's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Located {
    /// In memory at this address.
    Memory(u64),
    /// This value (a register's, or computed).
    Value(u64),
}

/// Most DIEs one lookup walks, and most steps one expression takes.
const MAX_ENTRIES: usize = 1 << 20;
const MAX_STEPS: u32 = 10_000;

/// The code-related DWARF of one file.
pub struct CodeInfo {
    dwarf: gimli::Dwarf<Reader>,
    units: Vec<LazyUnit>,
    /// `(.debug_info offset, unit index)`, by offset.
    info_units: Vec<(usize, usize)>,
    /// `(start, end, unit index)` address ranges, by start.
    ranges: Vec<(u64, u64, usize)>,
    /// Each unit's line table, read on first use.
    lines: Vec<std::sync::OnceLock<LineTable>>,
    /// Source frames by address: every rank of a job stops at the same few.
    frames: std::sync::Mutex<std::collections::HashMap<u64, Arc<[SourceFrame]>>>,
}

impl std::fmt::Debug for CodeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeInfo")
            .field("units", &self.units.len())
            .finish()
    }
}

impl LineTable {
    /// The line and file index of an address.
    fn line_at(&self, svma: u64) -> Option<(u32, u64)> {
        let i = self.rows.partition_point(|r| r.0 <= svma);
        let &(_, line, file) = self.rows.get(i.checked_sub(1)?)?;
        (line != 0).then_some((line, file))
    }
}

impl CodeInfo {
    /// Reads the DWARF of an ELF file and the address ranges of its units.
    pub(crate) fn load(
        elf: &[u8],
        section: crate::dwarf::SectionSource,
    ) -> Result<CodeInfo, String> {
        let file = object::File::parse(elf).map_err(|e| e.to_string())?;
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, String> {
            use gimli::SectionId::*;
            let needed = matches!(
                id,
                DebugAbbrev
                    | DebugInfo
                    | DebugStr
                    | DebugStrOffsets
                    | DebugLineStr
                    | DebugLine
                    | DebugAddr
                    | DebugRanges
                    | DebugRngLists
                    | DebugLoc
                    | DebugLocLists
                    | DebugAranges
            );
            let bytes = if needed {
                section(id.name())?
            } else {
                SectionBytes::empty()
            };
            Ok(Reader::new(bytes, endian))
        })?;
        let mut units = Vec::new();
        let mut info_units = Vec::new();
        let mut ranges = Vec::new();
        let known = ranges_by_unit(&dwarf);
        let mut headers = dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            let at = header.debug_info_offset().map(|o| o.0);
            let index = units.len();
            let lazy = LazyUnit {
                header,
                unit: std::sync::OnceLock::new(),
            };
            match at.and_then(|at| known.get(&at)) {
                Some(known) => ranges.extend(known.iter().map(|&(a, b)| (a, b, index))),
                // Not in `.debug_aranges` (clang writes none): its root says.
                None => {
                    let Ok(unit) = dwarf.unit(lazy.header.clone()) else {
                        continue;
                    };
                    let root_wraps = unit
                        .entries()
                        .next_dfs()
                        .ok()
                        .flatten()
                        .is_some_and(|root| range_wraps(&dwarf, &unit, root));
                    if !root_wraps && let Ok(mut iter) = dwarf.unit_ranges(&unit) {
                        while let Ok(Some(r)) = iter.next() {
                            if r.end > r.begin {
                                ranges.push((r.begin, r.end, index));
                            }
                        }
                    }
                    let _ = lazy.unit.set(Some(unit));
                }
            }
            if let Some(at) = at {
                info_units.push((at, index));
            }
            units.push(lazy);
        }
        ranges.sort_unstable();
        let lines = units.iter().map(|_| std::sync::OnceLock::new()).collect();
        Ok(CodeInfo {
            dwarf,
            units,
            info_units,
            ranges,
            lines,
            frames: Default::default(),
        })
    }

    /// The unit of this index, parsed on first use.
    fn unit(&self, index: usize) -> Option<&gimli::Unit<Reader>> {
        let lazy = self.units.get(index)?;
        lazy.unit
            .get_or_init(|| self.dwarf.unit(lazy.header.clone()).ok())
            .as_ref()
    }

    /// The units whose ranges contain `svma`.
    fn units_at(&self, svma: u64) -> Vec<usize> {
        let end = self.ranges.partition_point(|r| r.0 <= svma);
        let mut found: Vec<usize> = self.ranges[..end]
            .iter()
            .filter(|r| svma < r.1)
            .map(|r| r.2)
            .collect();
        found.dedup();
        found
    }

    /// The function containing `svma` (an address of the file, before load bias) and the
    /// functions inlined into it there.
    pub fn scopes_at(&self, svma: u64) -> Option<Scopes> {
        self.units_at(svma)
            .into_iter()
            .find_map(|unit| self.scopes_in_unit(unit, svma))
    }

    fn scopes_in_unit(&self, index: usize, svma: u64) -> Option<Scopes> {
        let unit = self.unit(index)?;
        let mut tree = unit.entries_tree(None).ok()?;
        let root = tree.root().ok()?;
        let mut found = Scopes {
            unit: index,
            frame_base: None,
            scopes: Vec::new(),
            call_parameters: Vec::new(),
        };
        let mut budget = MAX_ENTRIES;
        self.descend(index, root, svma, &mut found, &mut budget);
        (!found.scopes.is_empty()).then_some(found)
    }

    /// Walks the children of `node`: parameters and variables go to the innermost scope
    /// found so far, and a child scope containing `svma` is entered.
    fn descend(
        &self,
        unit: usize,
        node: gimli::EntriesTreeNode<'_, '_, Reader>,
        svma: u64,
        found: &mut Scopes,
        budget: &mut usize,
    ) {
        let mut children = node.children();
        while let Ok(Some(child)) = children.next() {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let entry = child.entry().clone();
            match entry.tag() {
                constants::DW_TAG_formal_parameter | constants::DW_TAG_variable => {
                    if let Some(scope) = found.scopes.last_mut()
                        && let Some(v) = self.variable(unit, &entry)
                    {
                        scope.variables.push(v);
                    }
                }
                constants::DW_TAG_subprogram
                | constants::DW_TAG_inlined_subroutine
                | constants::DW_TAG_lexical_block
                    if self.contains(unit, &entry, svma) =>
                {
                    match entry.tag() {
                        constants::DW_TAG_lexical_block => {}
                        tag => {
                            if tag == constants::DW_TAG_subprogram {
                                found.frame_base = entry.attr_value(constants::DW_AT_frame_base);
                            }
                            let number = |attr| {
                                entry
                                    .attr_value(attr)
                                    .and_then(|v: AttributeValue<Reader>| v.udata_value())
                            };
                            let call = number(constants::DW_AT_call_file)
                                .zip(number(constants::DW_AT_call_line));
                            found.scopes.push(Scope {
                                name: self.name(unit, &entry),
                                variables: Vec::new(),
                                call,
                            });
                        }
                    }
                    self.descend(unit, child, svma, found, budget);
                }
                constants::DW_TAG_call_site | constants::DW_TAG_GNU_call_site
                    if !found.scopes.is_empty() && self.returns_to(unit, &entry, svma) =>
                {
                    self.call_parameters(child, found, budget);
                }
                constants::DW_TAG_namespace | constants::DW_TAG_module
                    if found.scopes.is_empty() =>
                {
                    self.descend(unit, child, svma, found, budget);
                }
                _ => {}
            }
        }
    }

    /// Whether a call site returns just after `svma` (a tail call returns elsewhere).
    fn returns_to(
        &self,
        unit: usize,
        entry: &DebuggingInformationEntry<Reader>,
        svma: u64,
    ) -> bool {
        let Some(u) = self.unit(unit) else {
            return false;
        };
        let tail = [
            constants::DW_AT_call_tail_call,
            constants::DW_AT_GNU_tail_call,
        ]
        .into_iter()
        .any(|a| entry.attr_value(a).is_some());
        let returns = [constants::DW_AT_call_return_pc, constants::DW_AT_low_pc]
            .into_iter()
            .find_map(|a| entry.attr_value(a))
            .and_then(|v| self.dwarf.attr_address(u, v).ok().flatten());
        !tail && returns == svma.checked_add(1)
    }

    /// The parameters of a call site: where each is passed and what was passed.
    fn call_parameters(
        &self,
        node: gimli::EntriesTreeNode<'_, '_, Reader>,
        found: &mut Scopes,
        budget: &mut usize,
    ) {
        let mut children = node.children();
        while let Ok(Some(child)) = children.next() {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let entry = child.entry();
            if !matches!(
                entry.tag(),
                constants::DW_TAG_call_site_parameter | constants::DW_TAG_GNU_call_site_parameter
            ) {
                continue;
            }
            let value = [
                constants::DW_AT_call_value,
                constants::DW_AT_GNU_call_site_value,
            ]
            .into_iter()
            .find_map(|a| entry.attr_value(a));
            let at = match entry.attr_value(constants::DW_AT_location) {
                Some(AttributeValue::Exprloc(e)) => parameter_place(&e),
                _ => None,
            };
            if let (Some(at), Some(value)) = (at, value) {
                found.call_parameters.push(CallParameter { at, value });
            }
        }
    }

    fn contains(&self, unit: usize, entry: &DebuggingInformationEntry<Reader>, svma: u64) -> bool {
        let Some(u) = self.unit(unit) else {
            return false;
        };
        if range_wraps(&self.dwarf, u, entry) {
            return false;
        }
        let Ok(mut ranges) = self.dwarf.die_ranges(u, entry) else {
            return false;
        };
        while let Ok(Some(r)) = ranges.next() {
            if r.begin <= svma && svma < r.end {
                return true;
            }
        }
        false
    }

    /// A DIE by reference from unit `unit`.
    fn resolve(
        &self,
        unit: usize,
        value: AttributeValue<Reader>,
    ) -> Option<(usize, DebuggingInformationEntry<Reader>)> {
        let (index, offset) = match value {
            AttributeValue::UnitRef(offset) => (unit, offset),
            AttributeValue::DebugInfoRef(offset) => {
                let (index, relative) = crate::dwarf::unit_of_offset(&self.info_units, offset.0)?;
                (index, UnitOffset(relative))
            }
            _ => return None,
        };
        let entry = self.unit(index)?.entry(offset).ok()?;
        Some((index, entry))
    }

    /// An attribute of a DIE or of the DIEs it stands for (`DW_AT_abstract_origin`,
    /// `DW_AT_specification`), with the unit it was found in.
    fn inherited(
        &self,
        unit: usize,
        entry: &DebuggingInformationEntry<Reader>,
        attr: constants::DwAt,
    ) -> Option<(usize, AttributeValue<Reader>)> {
        let (mut unit, mut entry) = (unit, entry.clone());
        for _ in 0..4 {
            if let Some(value) = entry.attr_value(attr) {
                return Some((unit, value));
            }
            let origin = entry
                .attr_value(constants::DW_AT_abstract_origin)
                .or_else(|| entry.attr_value(constants::DW_AT_specification))?;
            (unit, entry) = self.resolve(unit, origin)?;
        }
        None
    }

    fn name(&self, unit: usize, entry: &DebuggingInformationEntry<Reader>) -> Option<String> {
        let (unit, value) = self.inherited(unit, entry, constants::DW_AT_name)?;
        let s = self.dwarf.attr_string(self.unit(unit)?, value).ok()?;
        Some(String::from_utf8_lossy(s.bytes()).into_owned())
    }

    fn variable(&self, unit: usize, entry: &DebuggingInformationEntry<Reader>) -> Option<Variable> {
        let name = self.name(unit, entry)?;
        let location = entry.attr_value(constants::DW_AT_location)?;
        let size = self
            .inherited(unit, entry, constants::DW_AT_type)
            .and_then(|(u, ty)| self.type_size(u, ty));
        Some(Variable {
            name,
            location,
            size,
        })
    }

    /// The size of a type, through typedefs and qualifiers.
    fn type_size(&self, unit: usize, ty: AttributeValue<Reader>) -> Option<u64> {
        let (mut unit, mut entry) = self.resolve(unit, ty)?;
        for _ in 0..16 {
            if let Some(size) = entry
                .attr_value(constants::DW_AT_byte_size)
                .and_then(|v| v.udata_value())
            {
                return Some(size);
            }
            match entry.tag() {
                constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type => {
                    return Some(u64::from(self.unit(unit)?.header.address_size()));
                }
                constants::DW_TAG_typedef
                | constants::DW_TAG_const_type
                | constants::DW_TAG_volatile_type
                | constants::DW_TAG_restrict_type => {
                    let next = entry.attr_value(constants::DW_AT_type)?;
                    (unit, entry) = self.resolve(unit, next)?;
                }
                _ => return None,
            }
        }
        None
    }

    /// The source frames at `svma`, innermost first: the functions inlined there, then
    /// the function, each with the line it is at.
    pub fn source_frames(&self, svma: u64) -> Arc<[SourceFrame]> {
        let cached = self
            .frames
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&svma)
            .cloned();
        if let Some(found) = cached {
            return found;
        }
        let found: Arc<[SourceFrame]> = self.read_source_frames(svma).into();
        self.frames
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(svma, found.clone());
        found
    }

    fn read_source_frames(&self, svma: u64) -> Vec<SourceFrame> {
        let Some(scopes) = self.scopes_at(svma) else {
            // A function no scope walk reaches (gcc nests an OpenMP region's outlined
            // body in its parent's DIE): the line table still places the address.
            let line = |unit: usize| {
                let table = self.line_table(unit);
                let (line, f) = table.line_at(svma)?;
                let file = table.files.get(f as usize).cloned().flatten();
                Some(SourceFrame {
                    function: None,
                    file,
                    line: Some(line),
                })
            };
            return self
                .units_at(svma)
                .into_iter()
                .find_map(line)
                .into_iter()
                .collect();
        };
        let table = self.line_table(scopes.unit);
        let file = |index: u64| table.files.get(index as usize).cloned().flatten();
        let mut here = table.line_at(svma).map(|(line, f)| (file(f), line));
        let mut out = Vec::new();
        for scope in scopes.scopes.iter().rev() {
            let (file_name, line) = match here.take() {
                Some((f, l)) => (f, Some(l)),
                None => (None, None),
            };
            out.push(SourceFrame {
                function: scope.name.clone(),
                file: file_name,
                line,
            });
            // The function it is inlined into is at the call's line.
            here = scope
                .call
                .map(|(f, l)| (file(f), u32::try_from(l).unwrap_or(u32::MAX)));
        }
        out
    }

    fn line_table(&self, unit: usize) -> &LineTable {
        self.lines[unit].get_or_init(|| self.read_line_table(unit).unwrap_or_default())
    }

    fn read_line_table(&self, index: usize) -> Option<LineTable> {
        let unit = self.unit(index)?;
        let program = unit.line_program.clone()?;
        let header = program.header().clone();
        // DWARF 5 numbers files from 0, earlier versions from 1.
        let mut files = if header.version() >= 5 {
            Vec::new()
        } else {
            vec![None]
        };
        for entry in header.file_names() {
            let name = self
                .dwarf
                .attr_string(unit, entry.path_name())
                .ok()
                .map(|s| String::from_utf8_lossy(s.bytes()).into_owned());
            files.push(name);
        }
        let mut rows = Vec::new();
        let mut iter = program.rows();
        while let Ok(Some((_, row))) = iter.next_row() {
            let line = if row.end_sequence() {
                0
            } else {
                row.line()
                    .map_or(0, |l| u32::try_from(l.get()).unwrap_or(u32::MAX))
            };
            rows.push((row.address(), line, row.file_index()));
        }
        // Stable: within an address, the last row of the program wins.
        rows.sort_by_key(|r| r.0);
        Some(LineTable { rows, files })
    }

    /// Where `variable` of `scopes` is when the frame is at `svma`, or `None` when the
    /// DWARF says it is optimized out there or needs what the frame does not have (an
    /// entry value, a clobbered register).
    pub fn locate(
        &self,
        scopes: &Scopes,
        variable: &Variable,
        svma: u64,
        frame: &FrameState,
    ) -> Option<Located> {
        let expression = self.expression_at(scopes.unit, variable.location.clone(), svma)?;
        let frame_base = || -> Option<u64> {
            let value = scopes.frame_base.clone()?;
            let expression = self.expression_at(scopes.unit, value, svma)?;
            match self.evaluate(scopes.unit, expression, frame, None)? {
                Located::Memory(a) | Located::Value(a) => Some(a),
            }
        };
        self.evaluate(scopes.unit, expression, frame, Some(&frame_base))
    }

    /// The value a call passed as `parameter` (of `scopes`, found at `svma` just before
    /// the call's return address), evaluated in the caller's `frame`.
    pub fn call_value(
        &self,
        scopes: &Scopes,
        parameter: &CallParameter,
        svma: u64,
        frame: &FrameState,
    ) -> Option<u64> {
        let AttributeValue::Exprloc(expression) = parameter.value.clone() else {
            return None;
        };
        let frame_base = || -> Option<u64> {
            let value = scopes.frame_base.clone()?;
            let expression = self.expression_at(scopes.unit, value, svma)?;
            match self.evaluate(scopes.unit, expression, frame, None)? {
                Located::Memory(a) | Located::Value(a) => Some(a),
            }
        };
        // A call value is the value itself (a `DW_OP_stack_value` without saying so).
        match self.evaluate(scopes.unit, expression, frame, Some(&frame_base))? {
            Located::Memory(a) | Located::Value(a) => Some(a),
        }
    }

    /// The expression of a location attribute that holds at `svma`.
    fn expression_at(
        &self,
        unit: usize,
        value: AttributeValue<Reader>,
        svma: u64,
    ) -> Option<gimli::Expression<Reader>> {
        if let AttributeValue::Exprloc(e) = value {
            return Some(e);
        }
        let u = self.unit(unit)?;
        let mut list = self.dwarf.attr_locations(u, value).ok()??;
        while let Ok(Some(entry)) = list.next() {
            if entry.range.begin <= svma && svma < entry.range.end {
                return Some(entry.data);
            }
        }
        None
    }

    fn evaluate(
        &self,
        unit: usize,
        expression: gimli::Expression<Reader>,
        frame: &FrameState,
        frame_base: Option<&dyn Fn() -> Option<u64>>,
    ) -> Option<Located> {
        use gimli::EvaluationResult as R;
        let encoding = self.unit(unit)?.encoding();
        let mut eval = expression.evaluation(encoding);
        eval.set_max_iterations(MAX_STEPS);
        let mut state = eval.evaluate().ok()?;
        loop {
            state = match state {
                R::Complete => break,
                R::RequiresMemory { address, size, .. } => {
                    let word = (frame.read)(address)?;
                    let value = if size >= 8 {
                        word
                    } else {
                        word & ((1u64 << (u32::from(size) * 8)) - 1)
                    };
                    eval.resume_with_memory(gimli::Value::Generic(value)).ok()?
                }
                R::RequiresRegister { register, .. } => {
                    let value = (frame.register)(register.0)?;
                    eval.resume_with_register(gimli::Value::Generic(value))
                        .ok()?
                }
                R::RequiresFrameBase => eval.resume_with_frame_base(frame_base?()?).ok()?,
                R::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(frame.cfa?).ok()?,
                R::RequiresRelocatedAddress(a) => eval
                    .resume_with_relocated_address(a.wrapping_add(frame.bias))
                    .ok()?,
                // Entry values, TLS, base types...: not known in a stopped frame.
                _ => return None,
            };
        }
        let pieces = eval.result();
        let piece = pieces.first()?;
        match &piece.location {
            Location::Address { address } => Some(Located::Memory(*address)),
            Location::Register { register } => (frame.register)(register.0).map(Located::Value),
            Location::Value { value } => value.to_u64(u64::MAX).ok().map(Located::Value),
            Location::Bytes { value } => {
                let bytes = gimli::Reader::to_slice(value).ok()?;
                let mut word = [0u8; 8];
                let n = bytes.len().min(8);
                word[..n].copy_from_slice(&bytes[..n]);
                Some(Located::Value(u64::from_le_bytes(word)))
            }
            _ => None,
        }
    }
}

/// A call site parameter's `DW_AT_location`: `DW_OP_reg0`..`DW_OP_reg31`, `DW_OP_regx`,
/// or `DW_OP_breg7` (rsp) with an offset for a stack slot.
fn parameter_place(expression: &gimli::Expression<Reader>) -> Option<ParameterPlace> {
    let mut bytes = expression.0.clone();
    let op = gimli::Reader::read_u8(&mut bytes).ok()?;
    let place = match op {
        0x50..=0x6f => ParameterPlace::Register(u16::from(op - 0x50)),
        0x90 => ParameterPlace::Register(
            u16::try_from(gimli::Reader::read_uleb128(&mut bytes).ok()?).ok()?,
        ),
        0x77 => ParameterPlace::Stack(gimli::Reader::read_sleb128(&mut bytes).ok()?),
        _ => return None,
    };
    gimli::Reader::is_empty(&bytes).then_some(place)
}

/// The address ranges `.debug_aranges` gives, by the `.debug_info` offset of their
/// unit; ranges that would wrap are left out (damaged, they cover nothing), and a unit
/// whose table cannot be read is left to its root DIE.
fn ranges_by_unit(
    dwarf: &gimli::Dwarf<Reader>,
) -> std::collections::HashMap<usize, Vec<(u64, u64)>> {
    let mut known = std::collections::HashMap::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Ok(Some(header)) = headers.next() {
        let mut ranges = Vec::new();
        let mut entries = header.entries();
        let whole = loop {
            match entries.next() {
                Ok(Some(e)) => {
                    if let Some(end) = e.address().checked_add(e.length())
                        && end > e.address()
                    {
                        ranges.push((e.address(), end));
                    }
                }
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        if whole {
            known.insert(header.debug_info_offset().0, ranges);
        }
    }
    known
}

/// Whether gimli's range of `entry` would wrap: it adds `DW_AT_high_pc`'s length to
/// `DW_AT_low_pc` unchecked (a debug build panics, a release one wraps). Damaged DWARF
/// (found by fuzzing); such an entry covers no address. As gimli does, the last of
/// repeated attributes counts.
fn range_wraps(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    entry: &DebuggingInformationEntry<Reader>,
) -> bool {
    let (mut low, mut len) = (None, None);
    for attr in entry.attrs() {
        match (attr.name(), attr.value()) {
            (constants::DW_AT_low_pc, v) => low = dwarf.attr_address(unit, v).ok().flatten(),
            (constants::DW_AT_high_pc, AttributeValue::Udata(n)) => len = Some(n),
            (constants::DW_AT_high_pc, _) => len = None,
            _ => {}
        }
    }
    low.zip(len)
        .is_some_and(|(low, len)| low.checked_add(len).is_none())
}

#[cfg(test)]
mod tests;
