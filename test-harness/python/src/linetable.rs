//! The line of an instruction, from a code object's line table, in each format CPython
//! has used: 3.8/3.9's `co_lnotab` (byte offsets), 3.10's `co_linetable` (PEP 626), and
//! 3.11+'s location table (entries of code units, with columns mqd does not need).

/// A line table's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// 3.8, 3.9: (bytecode increment, signed line increment) byte pairs.
    Lnotab,
    /// 3.10: (bytecode delta, signed line delta) pairs; a line delta of -128: no line.
    Pep626,
    /// 3.11 and later: entries of a header byte and varints.
    Locations,
}

/// The line of the instruction at byte offset `offset` of a code object whose first
/// line is `first_line` and whose line table is `table`; `None` where the table says
/// the instruction has no line, or does not cover it.
pub fn line_of(format: Format, table: &[u8], first_line: i32, offset: u64) -> Option<u32> {
    let line = match format {
        Format::Lnotab => lnotab(table, first_line, offset),
        Format::Pep626 => pep626(table, first_line, offset),
        Format::Locations => locations(table, first_line, offset),
    }?;
    u32::try_from(line).ok()
}

fn lnotab(table: &[u8], first_line: i32, offset: u64) -> Option<i32> {
    let mut line = first_line;
    let mut address = 0u64;
    for pair in table.chunks_exact(2) {
        address += u64::from(pair[0]);
        if address > offset {
            break;
        }
        line = line.checked_add(i32::from(pair[1] as i8))?;
    }
    Some(line)
}

fn pep626(table: &[u8], first_line: i32, offset: u64) -> Option<i32> {
    let mut line = first_line;
    let mut end = 0u64;
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = pair[1] as i8;
        if delta != -128 {
            line = line.checked_add(i32::from(delta))?;
        }
        if (start..end).contains(&offset) {
            return (delta != -128).then_some(line);
        }
    }
    None
}

/// The kinds of a location entry (its header's bits 3-6).
const ONE_LINE0: u8 = 10;
const ONE_LINE2: u8 = 12;
const NO_COLUMNS: u8 = 13;
const LONG: u8 = 14;
const NONE: u8 = 15;

fn locations(table: &[u8], first_line: i32, offset: u64) -> Option<i32> {
    let mut line = first_line;
    let mut start = 0u64;
    let mut at = 0usize;
    while at < table.len() {
        let header = table[at];
        if header & 0x80 == 0 {
            // Not an entry's first byte: the table is not what it should be.
            return None;
        }
        let kind = (header >> 3) & 15;
        // Code units of 2 bytes.
        let end = start + 2 * (u64::from(header & 7) + 1);
        at += 1;
        let delta = match kind {
            NONE => 0,
            NO_COLUMNS | LONG => {
                let (delta, used) = svarint(&table[at..])?;
                at += used;
                delta
            }
            ONE_LINE0..=ONE_LINE2 => i32::from(kind - ONE_LINE0),
            _ => 0,
        };
        line = line.checked_add(delta)?;
        if (start..end).contains(&offset) {
            return (kind != NONE).then_some(line);
        }
        // The rest of the entry: its columns.
        at += match kind {
            NONE | NO_COLUMNS => 0,
            LONG => (0..3).try_fold(0usize, |n, _| {
                let (_, used) = varint(table.get(at + n..)?)?;
                Some(n + used)
            })?,
            ONE_LINE0..=ONE_LINE2 => 2,
            _ => 1,
        };
        start = end;
    }
    None
}

/// A varint of the location table: 6 bits a byte, low bits first, bit 6 set on every
/// byte but the last.
fn varint(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value = 0u32;
    for (i, &b) in bytes.iter().enumerate().take(6) {
        value |= u32::from(b & 63).checked_shl(6 * i as u32)?;
        if b & 64 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A signed varint: the sign in the lowest bit.
fn svarint(bytes: &[u8]) -> Option<(i32, usize)> {
    let (raw, used) = varint(bytes)?;
    let magnitude = (raw >> 1) as i32;
    Some((if raw & 1 == 1 { -magnitude } else { magnitude }, used))
}

#[cfg(test)]
mod tests;
