//! The fields glibc describes for debuggers: each `_thread_db_NAME` symbol of the C
//! library is three `u32`s, the field's size in bits, its count (0: an array) and its
//! offset in its structure. They say where a thread descriptor keeps its kernel id, its
//! DTV, and where a `link_map` keeps its TLS module id, without glibc's headers.

use crate::interface::Memory;

/// One described field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadDbField {
    /// Its size in bits (of one element, for an array).
    pub bits: u32,
    /// How many there are (0: an array of unknown length).
    pub count: u32,
    /// Its offset in its structure.
    pub offset: u32,
}

impl ThreadDbField {
    /// The description at `at` (a `_thread_db_*` symbol's address) in `memory`.
    pub fn read(memory: &dyn Memory, at: u64) -> Option<ThreadDbField> {
        let mut b = [0u8; 12];
        memory.read_memory(at, &mut b).ok()?;
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(ThreadDbField {
            bits: word(0),
            count: word(4),
            offset: word(8),
        })
    }
}
