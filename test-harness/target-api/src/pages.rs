//! Words of a stopped process's memory, read a page at a time.

use crate::interface::Memory;

/// Words of a stopped process's memory, read a page at a time: the arguments of a call
/// and its caller's state are words of a few stack pages, each read once.
pub struct PageReader<'a> {
    memory: &'a dyn Memory,
    /// The last page asked for, `None` where it could not be read whole.
    page: Option<(u64, Option<Box<[u8; PAGE]>>)>,
}

const PAGE: usize = 4096;

impl<'a> PageReader<'a> {
    /// A reader of `memory`.
    pub fn new(memory: &'a dyn Memory) -> PageReader<'a> {
        PageReader { memory, page: None }
    }

    /// The 8 bytes at `addr`, little-endian.
    pub fn word(&mut self, addr: u64) -> Option<u64> {
        let base = addr & !(PAGE as u64 - 1);
        let offset = (addr - base) as usize;
        if offset + 8 <= PAGE {
            if self.page.as_ref().map(|p| p.0) != Some(base) {
                let mut bytes = Box::new([0u8; PAGE]);
                let whole = self.memory.read_memory(base, &mut bytes[..]).is_ok();
                self.page = Some((base, whole.then_some(bytes)));
            }
            if let Some((_, Some(bytes))) = &self.page {
                let word: [u8; 8] = bytes[offset..offset + 8].try_into().ok()?;
                return Some(u64::from_le_bytes(word));
            }
        }
        // Across a page's end, or in a page not readable whole.
        let mut word = [0u8; 8];
        self.memory.read_memory(addr, &mut word).ok()?;
        Some(u64::from_le_bytes(word))
    }
}
