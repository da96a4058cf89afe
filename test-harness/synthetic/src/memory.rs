//! The fake address space: a few regions (one per heap) separated by unmapped holes.
//!
//! Each region is one `Vec<u8>` behind an `Arc`, so cloning a target is cheap and a
//! corruption hook copies only the region it writes to.

use mqd_target::{ByteOrder, TargetError};
use std::sync::Arc;

/// One mapped range `[base, base + bytes.len())`, growable during the build up to `limit`.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub base: u64,
    pub limit: u64,
    pub bytes: Arc<Vec<u8>>,
}

/// All regions of one image, sorted by base, never overlapping.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    regions: Vec<Region>,
    pointer_size: u8,
    byte_order: ByteOrder,
}

impl Memory {
    /// An address space for the given pointer width and byte order, with one empty region per
    /// `(base, limit)` pair (sorted, disjoint); each region may grow up to its limit.
    pub fn new(bases: &[(u64, u64)], pointer_size: u8, byte_order: ByteOrder) -> Memory {
        let regions = bases
            .iter()
            .map(|&(base, limit)| Region {
                base,
                limit,
                bytes: Arc::new(Vec::new()),
            })
            .collect();
        Memory {
            regions,
            pointer_size,
            byte_order,
        }
    }

    /// Index of the region whose mapped bytes contain `[addr, addr + len)`.
    fn find(&self, addr: u64, len: usize) -> Option<usize> {
        let i = self
            .regions
            .partition_point(|r| r.base <= addr)
            .checked_sub(1)?;
        let r = &self.regions[i];
        let end = addr.checked_add(len as u64)?;
        (end <= r.base + r.bytes.len() as u64).then_some(i)
    }

    /// Reserves `additional` more bytes in region `region` (avoids regrowth for big images).
    pub fn reserve(&mut self, region: usize, additional: usize) {
        Arc::make_mut(&mut self.regions[region].bytes).reserve_exact(additional);
    }

    /// Allocates `size` zeroed bytes aligned to `align` at the end of region `region`.
    ///
    /// # Panics
    /// When the region would grow past its limit (a spec far too big for the address plan).
    pub fn alloc(&mut self, region: usize, size: u64, align: u64) -> u64 {
        let r = &mut self.regions[region];
        let start = super::layout::round_up(r.base + r.bytes.len() as u64, align.max(1));
        let end = start + size;
        assert!(
            end <= r.limit,
            "synthetic heap at {:#x} overflows its limit {:#x}",
            r.base,
            r.limit
        );
        Arc::make_mut(&mut r.bytes).resize((end - r.base) as usize, 0);
        start
    }

    /// Copies target bytes into `buf`, all or nothing.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if buf.is_empty() {
            return Ok(());
        }
        let i = self.find(addr, buf.len()).ok_or(TargetError::Unmapped {
            addr,
            len: buf.len(),
        })?;
        let r = &self.regions[i];
        let start = (addr - r.base) as usize;
        buf.copy_from_slice(&r.bytes[start..start + buf.len()]);
        Ok(())
    }

    /// Overwrites target bytes, all or nothing.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), TargetError> {
        if data.is_empty() {
            return Ok(());
        }
        let i = self.find(addr, data.len()).ok_or(TargetError::Unmapped {
            addr,
            len: data.len(),
        })?;
        let r = &mut self.regions[i];
        let start = (addr - r.base) as usize;
        Arc::make_mut(&mut r.bytes)[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Writes the low `width` bytes of `value` in the target's byte order.
    pub fn write_uint(&mut self, addr: u64, width: u64, value: u64) -> Result<(), TargetError> {
        let bytes = self.byte_order.encode(value, width as usize);
        self.write(addr, &bytes)
    }

    /// Writes a pointer-sized value.
    pub fn write_pointer(&mut self, addr: u64, value: u64) -> Result<(), TargetError> {
        self.write_uint(addr, u64::from(self.pointer_size), value)
    }

    /// Reads an unsigned value of `width` bytes in the target's byte order.
    pub fn read_uint(&self, addr: u64, width: usize) -> Result<u64, TargetError> {
        let mut buf = [0u8; 8];
        self.read(addr, &mut buf[..width])?;
        Ok(self.byte_order.unsigned(&buf[..width]))
    }

    /// Whether any byte of `[addr, addr + len)` is mapped.
    #[cfg(test)]
    pub fn touches_mapping(&self, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len);
        self.regions
            .iter()
            .any(|r| r.base < end && addr < r.base + r.bytes.len() as u64)
    }

    /// `(base, mapped length)` of each region.
    pub fn extents(&self) -> Vec<(u64, u64)> {
        self.regions
            .iter()
            .map(|r| (r.base, r.bytes.len() as u64))
            .collect()
    }
}
