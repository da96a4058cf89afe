//! Reading the target: every byte comes from the debugger's `fetch_data`, every scalar
//! goes through its `target_to_host` at the target's own width.

use crate::callbacks::ProcessServices;
use crate::error::{Error, Result};
use crate::layout::{Field, Width};
use mqd_abi::types::mqs_target_type_sizes;

/// Widths of the target's ABI that the layouts refer to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub int: u8,
    pub pointer: u8,
}

impl Sizes {
    pub(crate) fn from_target(sizes: &mqs_target_type_sizes) -> Result<Sizes> {
        let int = match sizes.int_size {
            n @ (2 | 4 | 8) => n as u8,
            _ => return Err(Error::UnsupportedWidth),
        };
        let pointer = match sizes.pointer_size {
            n @ (4 | 8) => n as u8,
            _ => return Err(Error::UnsupportedWidth),
        };
        Ok(Sizes { int, pointer })
    }

    pub(crate) fn bytes(&self, width: Width) -> usize {
        match width {
            Width::Int => usize::from(self.int),
            Width::Pointer => usize::from(self.pointer),
            Width::Bytes(n) => usize::from(n),
        }
    }

    /// The smallest block `[start, end)` covering every given field.
    pub(crate) fn span(&self, fields: &[Option<Field>]) -> (u32, u32) {
        let mut start = u32::MAX;
        let mut end = 0u32;
        for f in fields.iter().flatten() {
            start = start.min(f.offset);
            end = end.max(f.offset.saturating_add(self.bytes(f.width) as u32));
        }
        if start > end { (0, 0) } else { (start, end) }
    }
}

/// One process's memory as the debugger serves it.
pub(crate) struct Target<'a> {
    pub services: &'a dyn ProcessServices,
    pub sizes: Sizes,
}

impl Target<'_> {
    /// Fills `buf` from `addr` in one debugger call; NULL and wrapping ranges are
    /// corrupt pointers, not reads.
    pub(crate) fn fetch(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if i32::try_from(buf.len()).is_err() {
            return Err(Error::ImplausibleValue);
        }
        if addr == 0 || addr.checked_add(buf.len() as u64).is_none() {
            return Err(Error::ReadFailed);
        }
        if self.sizes.pointer == 4 && addr + buf.len() as u64 > 1 << 32 {
            return Err(Error::ReadFailed);
        }
        self.services.fetch(addr, buf)
    }

    /// Converts an unsigned target scalar of 1, 2, 4 or 8 bytes.
    pub(crate) fn unsigned(&self, bytes: &[u8]) -> Result<u64> {
        let n = bytes.len();
        if !matches!(n, 1 | 2 | 4 | 8) {
            return Err(Error::UnsupportedWidth);
        }
        let mut host = [0u8; 8];
        self.services.to_host(bytes, &mut host[..n])?;
        Ok(match n {
            1 => u64::from(host[0]),
            2 => u64::from(u16::from_ne_bytes([host[0], host[1]])),
            4 => u64::from(u32::from_ne_bytes([host[0], host[1], host[2], host[3]])),
            _ => u64::from_ne_bytes(host),
        })
    }

    /// Converts a signed target scalar, sign-extending it.
    pub(crate) fn signed(&self, bytes: &[u8]) -> Result<i64> {
        let value = self.unsigned(bytes)?;
        let bits = bytes.len() * 8;
        Ok(if bits == 64 {
            value as i64
        } else {
            let shift = 64 - bits;
            ((value << shift) as i64) >> shift
        })
    }

    /// Reads one target pointer stored at `addr`.
    pub(crate) fn read_pointer(&self, addr: u64) -> Result<u64> {
        let mut buf = [0u8; 8];
        let n = usize::from(self.sizes.pointer);
        self.fetch(addr, &mut buf[..n])?;
        self.unsigned(&buf[..n])
    }
}

/// A block of target bytes fetched at once, holding several fields of one object.
pub(crate) struct Block<'a, 'b> {
    pub target: &'a Target<'b>,
    /// Offset within the object of `bytes[0]`.
    pub start: u32,
    pub bytes: &'a [u8],
}

impl Block<'_, '_> {
    fn slice(&self, field: Field) -> Result<&[u8]> {
        let n = self.target.sizes.bytes(field.width);
        let at = field
            .offset
            .checked_sub(self.start)
            .ok_or(Error::Internal)? as usize;
        self.bytes.get(at..at + n).ok_or(Error::Internal)
    }

    pub(crate) fn signed(&self, field: Field) -> Result<i64> {
        self.target.signed(self.slice(field)?)
    }

    pub(crate) fn unsigned(&self, field: Field) -> Result<u64> {
        self.target.unsigned(self.slice(field)?)
    }

    /// Raw bytes `[offset, offset + len)` of the object, clipped to the block.
    pub(crate) fn raw(&self, offset: u32, len: u32) -> &[u8] {
        let Some(at) = offset.checked_sub(self.start) else {
            return &[];
        };
        let at = at as usize;
        let end = (at + len as usize).min(self.bytes.len());
        self.bytes.get(at..end).unwrap_or(&[])
    }
}

/// Brent's cycle detection: no extra reads, no memory, and a hard length cap.
pub(crate) struct ListGuard {
    saved: u64,
    power: u64,
    steps_since_save: u64,
    visited: u64,
    limit: u64,
}

impl ListGuard {
    pub(crate) fn new(limit: u64) -> ListGuard {
        ListGuard {
            saved: 0,
            power: 1,
            steps_since_save: 0,
            visited: 0,
            limit,
        }
    }

    /// Records a visit of `addr`; fails on a loop or an absurd length.
    pub(crate) fn visit(&mut self, addr: u64) -> Result<()> {
        if addr == self.saved {
            return Err(Error::ListCycle);
        }
        self.visited += 1;
        if self.visited > self.limit {
            return Err(Error::ListTooLong);
        }
        self.steps_since_save += 1;
        if self.steps_since_save == self.power {
            self.saved = addr;
            self.power = self.power.saturating_mul(2);
            self.steps_since_save = 0;
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn visited(&self) -> u64 {
        self.visited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_finds_cycles_within_a_bounded_number_of_steps() {
        for tail in 0..20u64 {
            for cycle in 1..40u64 {
                let mut guard = ListGuard::new(u64::MAX);
                let mut node = 0u64;
                let mut steps = 0;
                let err = loop {
                    let addr = 0x1000 + node * 16;
                    if let Err(e) = guard.visit(addr) {
                        break e;
                    }
                    steps += 1;
                    node = if node + 1 == tail + cycle {
                        tail
                    } else {
                        node + 1
                    };
                    assert!(steps < 4 * (tail + cycle) + 4, "tail {tail} cycle {cycle}");
                };
                assert_eq!(err, Error::ListCycle);
            }
        }
    }

    #[test]
    fn guard_caps_long_lists() {
        let mut guard = ListGuard::new(100);
        let err = (0..1000u64)
            .map(|i| guard.visit(0x1000 + i * 8))
            .find_map(|r| r.err());
        assert_eq!(err, Some(Error::ListTooLong));
        assert_eq!(guard.visited(), 101);
    }

    #[test]
    fn span_covers_fields() {
        let sizes = Sizes { int: 4, pointer: 8 };
        let f = |offset, width| Some(Field { offset, width });
        assert_eq!(
            sizes.span(&[
                f(16, Width::Int),
                f(40, Width::Pointer),
                None,
                f(8, Width::Bytes(2))
            ]),
            (8, 48)
        );
        assert_eq!(sizes.span(&[None]), (0, 0));
    }
}
