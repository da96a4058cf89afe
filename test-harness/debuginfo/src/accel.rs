//! Type lookups through a file's `.debug_names` accelerator table (DWARF 5; written by
//! clang with `-gpubnames`, lld, and `gdb-add-index -dwarf-5`), when it indexes every
//! unit: a name is then found by its hash, and no unit is scanned.

use crate::bytes::Reader;
use gimli::constants;

/// The name indexes of one file, known to cover all its units.
pub(crate) struct Accelerator {
    indexes: Vec<gimli::NameIndex<Reader>>,
}

impl std::fmt::Debug for Accelerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Accelerator({} name indexes)", self.indexes.len())
    }
}

/// The hash `.debug_names` buckets names by (DWARF 5, 6.1.1.4.5: Bernstein's).
fn hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &b| {
        h.wrapping_mul(33).wrapping_add(u32::from(b))
    })
}

impl Accelerator {
    /// The table of `dwarf`, if it has one that lists every unit of `.debug_info`
    /// (`units`: their offsets) and the file has no `.debug_types` (which a name index
    /// cannot describe). Anything less, or a table that does not parse, is not used.
    pub(crate) fn of(dwarf: &gimli::Dwarf<Reader>, units: &[usize]) -> Option<Accelerator> {
        use gimli::Reader as _;
        use gimli::Section as _;
        if dwarf.debug_names.reader().is_empty() || !dwarf.debug_types.reader().is_empty() {
            return None;
        }
        let mut indexes = Vec::new();
        let mut covered = std::collections::HashSet::new();
        let mut headers = dwarf.debug_names.headers();
        while let Some(header) = headers.next().ok()? {
            // gdb's tables (`gdb-add-index -dwarf-5`) name units, not DIEs, and spell
            // names its own way ("unsigned long"): a lookup by DWARF name could miss.
            if header
                .augmentation_string()
                .is_some_and(|a| a.to_slice().is_ok_and(|a| a.starts_with(b"GDB")))
            {
                return None;
            }
            let index = header.index().ok()?;
            let precise = index.abbreviations().abbreviations().iter().all(|a| {
                a.attributes()
                    .iter()
                    .any(|spec| spec.name() == constants::DW_IDX_die_offset)
            });
            if !index.has_hash_table() || !precise {
                return None;
            }
            for i in 0..index.compile_unit_count() {
                covered.insert(index.compile_unit(i).ok()?.0);
            }
            for i in 0..index.local_type_unit_count() {
                covered.insert(index.local_type_unit(i).ok()?.0);
            }
            indexes.push(index);
        }
        if indexes.is_empty() || !units.iter().all(|u| covered.contains(u)) {
            return None;
        }
        Some(Accelerator { indexes })
    }

    /// The `.debug_info` offsets and tags of the DIEs named `name` (definitions and
    /// whatever else the producer listed), or an error for a malformed table.
    pub(crate) fn named(
        &self,
        name: &[u8],
        debug_str: &gimli::DebugStr<Reader>,
    ) -> gimli::Result<Vec<(constants::DwTag, usize)>> {
        use gimli::Reader as _;
        let mut found = Vec::new();
        // The standard hash, and the case-folded one gdb writes (and LLVM reads too).
        let hashes = [hash(name), hash(&name.to_ascii_lowercase())];
        let hashes = if hashes[0] == hashes[1] {
            &hashes[..1]
        } else {
            &hashes[..]
        };
        for index in &self.indexes {
            let mut seen = Vec::new();
            for &hash in hashes {
                let mut candidates = index.find_by_hash(hash)?;
                while let Some(at) = candidates.next()? {
                    if seen.contains(&at.0) {
                        continue;
                    }
                    seen.push(at.0);
                    if index.name_string(at, debug_str)?.to_slice()?.as_ref() != name {
                        continue;
                    }
                    let mut entries = index.name_entries(at)?;
                    while let Some(entry) = entries.next()? {
                        let unit = match entry.type_unit(index)? {
                            Some(gimli::NameTypeUnit::Local(unit)) => Some(unit),
                            // Another file's type unit: not here.
                            Some(gimli::NameTypeUnit::Foreign(_)) => continue,
                            None => match entry.compile_unit(index)? {
                                Some(unit) => Some(unit),
                                None => index.default_compile_unit()?,
                            },
                        };
                        // A type nested in another indexed DIE (a function's, a namespace's)
                        // is not one the unit scan would see at the top level either.
                        if matches!(entry.parent()?, Some(Some(_))) {
                            continue;
                        }
                        if let (Some(unit), Some(die)) = (unit, entry.die_offset()?) {
                            found.push((entry.tag, unit.0 + die.0));
                        }
                    }
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_hash_as_dwarf_5_says() {
        // DJB hash values of the specification's algorithm, computed by hand.
        assert_eq!(super::hash(b""), 5381);
        assert_eq!(super::hash(b"a"), 5381 * 33 + 97);
        assert_eq!(super::hash(b"int"), 193_495_088);
    }
}
