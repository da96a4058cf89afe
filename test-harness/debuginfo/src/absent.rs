//! Proving that a file's DWARF defines no type of a given name without indexing it.
//!
//! An MQD library asks for names that most objects lack: types of other MPICH layouts,
//! and a name no type has (to spot debuggers that invent types). Each such miss would
//! index every object's DWARF, a distribution's C library (compressed, 10 MB) included.
//! The index knows a type only by a `DW_AT_name` string that is either in `.debug_str`
//! or `.debug_line_str`, or inline in `.debug_info`/`.debug_types`. So a name that is in
//! neither string section, in a file whose abbreviations give no type tag an inline
//! name, is not there; nor is one that is also nowhere in the DIE sections. Any doubt
//! (a malformed abbreviation table) answers "maybe", and the file is indexed.

use crate::bytes::SectionBytes;
use gimli::constants;

/// The DIEs the name index records: typedefs, struct, class, union and enum tags, and
/// base types.
pub(crate) fn indexed_tag(tag: constants::DwTag) -> bool {
    matches!(
        tag,
        constants::DW_TAG_typedef
            | constants::DW_TAG_structure_type
            | constants::DW_TAG_class_type
            | constants::DW_TAG_union_type
            | constants::DW_TAG_enumeration_type
            | constants::DW_TAG_base_type
    )
}

/// Whether the string `name` (NUL-terminated: whole, or the tail of a longer string)
/// occurs in `bytes`.
pub(crate) fn holds_string(bytes: &[u8], name: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, name).any(|at| bytes.get(at + name.len()) == Some(&0))
}

/// Whether some abbreviation of a type the index records (typedef, struct, class,
/// union, enum, base type) names it inline (`DW_FORM_string`). `true` too when the
/// section cannot be parsed to the end.
pub(crate) fn inline_type_names(abbrev: &[u8]) -> bool {
    scan_abbreviations(abbrev).unwrap_or(true)
}

fn scan_abbreviations(mut bytes: &[u8]) -> Option<bool> {
    while !bytes.is_empty() {
        let code = uleb(&mut bytes)?;
        if code == 0 {
            // The end of one unit's table; the next table follows.
            continue;
        }
        let tag = constants::DwTag(u16::try_from(uleb(&mut bytes)?).ok()?);
        let (_, rest) = bytes.split_first()?;
        bytes = rest;
        let indexed = indexed_tag(tag);
        loop {
            let name = uleb(&mut bytes)?;
            let form = uleb(&mut bytes)?;
            if name == 0 && form == 0 {
                break;
            }
            if form == u64::from(constants::DW_FORM_implicit_const.0) {
                sleb(&mut bytes)?;
            }
            if indexed
                && name == u64::from(constants::DW_AT_name.0)
                && form == u64::from(constants::DW_FORM_string.0)
            {
                return Some(true);
            }
        }
    }
    Some(false)
}

fn uleb(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn sleb(bytes: &mut &[u8]) -> Option<()> {
    for _ in 0..10 {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        if byte & 0x80 == 0 {
            return Some(());
        }
    }
    None
}

/// The sections that decide, read on demand (`.debug_info` only when inline names are
/// possible).
pub(crate) struct Sections<'a> {
    pub section: &'a dyn Fn(&str) -> Result<SectionBytes, String>,
    /// [`inline_type_names`] of the file's `.debug_abbrev`, computed once per file.
    pub inline_names: &'a dyn Fn() -> bool,
}

/// `false` only when the file surely defines no type called `name`.
pub(crate) fn may_define(sections: &Sections, name: &[u8]) -> bool {
    if name.is_empty() || name.contains(&0) {
        return false;
    }
    let holds = |section: &str| match (sections.section)(section) {
        Ok(bytes) => holds_string(&bytes, name),
        // Unreadable: the index would not have it either, but let it say so.
        Err(_) => true,
    };
    if holds(".debug_str") || holds(".debug_line_str") {
        return true;
    }
    (sections.inline_names)() && (holds(".debug_info") || holds(".debug_types"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An abbreviation: code, tag, children, (attribute, form) pairs.
    type Entry<'a> = (u8, u16, u8, &'a [(u16, u8)]);

    /// One abbreviation table.
    fn table(entries: &[Entry]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(code, tag, children, attrs) in entries {
            out.push(code);
            // Tags above 0x7f take two LEB bytes.
            out.extend(leb(u64::from(tag)));
            out.push(children);
            for &(name, form) in attrs {
                out.extend(leb(u64::from(name)));
                out.push(form);
                if u16::from(form) == constants::DW_FORM_implicit_const.0 {
                    out.push(0x7f);
                }
            }
            out.extend([0, 0]);
        }
        out.push(0);
        out
    }

    fn leb(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    const NAME: u16 = constants::DW_AT_name.0;
    const STRING: u8 = constants::DW_FORM_string.0 as u8;
    const STRP: u8 = constants::DW_FORM_strp.0 as u8;
    const STRUCT: u16 = constants::DW_TAG_structure_type.0;
    const VARIABLE: u16 = constants::DW_TAG_variable.0;

    #[test]
    fn an_inline_type_name_anywhere_is_found_in_any_table() {
        let mut abbrev = table(&[(1, VARIABLE, 0, &[(NAME, STRING)])]);
        assert!(
            !inline_type_names(&abbrev),
            "a variable's inline name is no type's"
        );
        abbrev.extend(table(&[
            (1, STRUCT, 1, &[(NAME, STRP)]),
            (
                2,
                constants::DW_TAG_base_type.0,
                0,
                &[(0x0b, 0x0b), (NAME, STRING)],
            ),
        ]));
        assert!(inline_type_names(&abbrev));
    }

    #[test]
    fn types_named_only_through_string_sections_need_no_dies() {
        let abbrev = table(&[
            (1, STRUCT, 1, &[(NAME, STRP), (0x0b, 0x0b)]),
            (
                2,
                constants::DW_TAG_typedef.0,
                0,
                &[(NAME, STRP), (0x88, 0x21)],
            ),
            (3, constants::DW_TAG_member.0, 0, &[(NAME, STRING)]),
        ]);
        assert!(!inline_type_names(&abbrev));
    }

    #[test]
    fn a_truncated_or_malformed_table_is_a_doubt() {
        let abbrev = table(&[(1, STRUCT, 1, &[(NAME, STRP)])]);
        assert!(inline_type_names(&abbrev[..abbrev.len() - 3]));
        assert!(inline_type_names(&[1, 0xff, 0xff, 0xff, 0xff]));
        assert!(!inline_type_names(&[]));
    }

    #[test]
    fn strings_are_matched_whole_or_as_a_tail_only() {
        let strings = b"\0MPIR_Comm\0long_MPIR_Request\0";
        assert!(holds_string(strings, b"MPIR_Comm"));
        assert!(
            holds_string(strings, b"MPIR_Request"),
            "the tail of a longer string"
        );
        assert!(
            !holds_string(strings, b"MPIR_Com"),
            "a prefix is not a string"
        );
        assert!(!holds_string(b"MPIR_Comm", b"MPIR_Comm"), "no terminator");
    }

    #[test]
    fn a_name_is_absent_only_when_no_section_can_hold_it() {
        let sections = |strings: &'static [u8], info: &'static [u8], inline: bool| {
            move |name: &[u8]| {
                let section = move |which: &str| -> Result<SectionBytes, String> {
                    Ok(SectionBytes::owned(match which {
                        ".debug_str" => strings.to_vec(),
                        ".debug_info" => info.to_vec(),
                        _ => Vec::new(),
                    }))
                };
                let inline_names = move || inline;
                may_define(
                    &Sections {
                        section: &section,
                        inline_names: &inline_names,
                    },
                    name,
                )
            }
        };
        let strp_only = sections(b"\0MPIR_Comm\0", b"\x01int\0", false);
        assert!(strp_only(b"MPIR_Comm"));
        assert!(!strp_only(b"int"), "inline strings cannot name types here");
        assert!(!strp_only(b"MPIDIG_req_t"));
        let inline = sections(b"\0MPIR_Comm\0", b"\x01int\0", true);
        assert!(inline(b"int"));
        assert!(!inline(b"MPIDIG_req_t"));
        assert!(!inline(b""), "no type has an empty name");
    }
}
