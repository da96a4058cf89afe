//! The one place target scalars and strings are decoded: byte order as a value (a 64-bit
//! debugger reads 32-bit and big-endian targets too), and NUL-terminated strings read in
//! chunks that still find a string at the end of a mapping.

use super::{Memory, TargetError};

/// Byte order of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// The byte order of the machine running the debugger.
    pub fn host() -> ByteOrder {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    /// The unsigned value of 1 to 8 bytes in this order (longer inputs keep their low 8).
    pub fn unsigned(self, bytes: &[u8]) -> u64 {
        let fold = |value: u64, &b: &u8| value << 8 | u64::from(b);
        match self {
            ByteOrder::Little => bytes.iter().rev().fold(0, fold),
            ByteOrder::Big => bytes.iter().fold(0, fold),
        }
    }

    /// The signed value of 1 to 8 bytes in this order, sign-extended.
    pub fn signed(self, bytes: &[u8]) -> i64 {
        let value = self.unsigned(bytes);
        let bits = 8 * bytes.len().clamp(1, 8) as u32;
        let shift = 64 - bits;
        ((value << shift) as i64) >> shift
    }

    /// The unsigned value of `size` bytes at `at` in `bytes`, if they are there.
    pub fn unsigned_at(self, bytes: &[u8], at: usize, size: usize) -> Option<u64> {
        Some(self.unsigned(bytes.get(at..at.checked_add(size)?)?))
    }

    /// `value` as `size` bytes (1 to 8) in this order.
    pub fn encode(self, value: u64, size: usize) -> Vec<u8> {
        let mut bytes = value.to_le_bytes()[..size.min(8)].to_vec();
        if self == ByteOrder::Big {
            bytes.reverse();
        }
        bytes
    }

    /// Copies one scalar to host byte order: reversed when the orders differ.
    /// `input` and `output` have the same length.
    pub fn to_host(self, input: &[u8], output: &mut [u8]) {
        output.copy_from_slice(input);
        if self != ByteOrder::host() {
            output.reverse();
        }
    }
}

/// A NUL-terminated string at `addr`, at most `max` bytes (without the NUL): the bytes up
/// to the NUL, or `max` bytes, or up to the end of readable memory. Reads go in chunks
/// that do not cross a 256-byte boundary needlessly; nothing readable at `addr` at all is
/// an error.
pub fn read_c_string(
    memory: &(impl Memory + ?Sized),
    addr: u64,
    max: usize,
) -> Result<Vec<u8>, TargetError> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let to_boundary = 256 - (at % 256) as usize;
        let want = to_boundary.min(max - out.len());
        let mut chunk = vec![0u8; want];
        let n = memory.read_partial(at, &mut chunk)?;
        if let Some(nul) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..nul]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk[..n]);
        if n < want {
            if out.is_empty() {
                return Err(TargetError::Unmapped { addr, len: 1 });
            }
            return Ok(out);
        }
        at = match at.checked_add(n as u64) {
            Some(next) => next,
            None => return Ok(out),
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_in_both_orders() {
        assert_eq!(ByteOrder::Little.unsigned(&[1, 2, 3, 4]), 0x0403_0201);
        assert_eq!(ByteOrder::Big.unsigned(&[1, 2, 3, 4]), 0x0102_0304);
        assert_eq!(ByteOrder::Little.signed(&[0xfe, 0xff]), -2);
        assert_eq!(ByteOrder::Big.signed(&[0xff, 0xff, 0xff, 0xfe]), -2);
        assert_eq!(ByteOrder::Little.signed(&[0x7f]), 127);
        assert_eq!(ByteOrder::Big.encode(0x0102, 4), [0, 0, 1, 2]);
        assert_eq!(ByteOrder::Little.encode(0x0102, 2), [2, 1]);
        assert_eq!(ByteOrder::Big.unsigned_at(&[9, 0, 5], 1, 2), Some(5));
        assert_eq!(ByteOrder::Big.unsigned_at(&[9, 0, 5], 2, 2), None);
        let mut host = [0u8; 2];
        let other = match ByteOrder::host() {
            ByteOrder::Little => ByteOrder::Big,
            ByteOrder::Big => ByteOrder::Little,
        };
        other.to_host(&[0x11, 0x22], &mut host);
        assert_eq!(host, [0x22, 0x11]);
        ByteOrder::host().to_host(&[0x11, 0x22], &mut host);
        assert_eq!(host, [0x11, 0x22]);
    }

    /// Memory of `len` readable bytes at 0x1000 holding `text`.
    struct Bytes(Vec<u8>);

    impl Memory for Bytes {
        fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            let start = addr.checked_sub(0x1000).map(|s| s as usize);
            match start.and_then(|s| self.0.get(s..s + buf.len())) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(())
                }
                None => Err(TargetError::Unmapped {
                    addr,
                    len: buf.len(),
                }),
            }
        }
    }

    #[test]
    fn strings_end_at_nul_at_max_or_at_the_end_of_memory() {
        let m = Bytes(b"hello\0world".to_vec());
        assert_eq!(read_c_string(&m, 0x1000, 100).unwrap(), b"hello");
        assert_eq!(read_c_string(&m, 0x1000, 3).unwrap(), b"hel");
        assert_eq!(read_c_string(&m, 0x1006, 100).unwrap(), b"world");
        assert!(read_c_string(&m, 0x2000, 10).is_err());
        let long = Bytes(vec![b'x'; 1000]);
        assert_eq!(read_c_string(&long, 0x1000, 4096).unwrap().len(), 1000);
    }
}
