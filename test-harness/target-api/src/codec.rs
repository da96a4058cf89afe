//! The one place target scalars are decoded: byte order as a value (a 64-bit debugger
//! reads 32-bit and big-endian targets too).

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
}
