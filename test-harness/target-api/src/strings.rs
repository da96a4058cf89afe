//! NUL-terminated strings in a target's memory, read in chunks that still find a string
//! at the end of a mapping.

use crate::interface::{Memory, TargetError};

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
