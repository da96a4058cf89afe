//! Groups: COMM_WORLD ranks from `MPIR_Group` (lrank_to_lpid or pmap), CH3's virtual
//! connection tables, or CH4's rank maps, read in a few large fetches.

use super::*;

/// A CH4 `MPIDI_rank_map_t` as read from its communicator.
#[derive(Clone, Copy)]
pub(super) struct RankMap {
    mode: i64,
    avtid: i64,
    size: i64,
    offset: i64,
    stride: i64,
    blocksize: i64,
    lut: u64,
}

impl RankMap {
    pub(super) fn decode(
        block: &Block<'_, '_>,
        m: &crate::layout::RankMapLayout,
        at: u32,
    ) -> Result<RankMap> {
        let f = |f: Field| Field {
            offset: at + f.offset,
            width: f.width,
        };
        Ok(RankMap {
            mode: block.signed(f(m.mode))?,
            avtid: block.signed(f(m.avtid))?,
            size: block.signed(f(m.size))?,
            offset: block.signed(f(m.offset))?,
            stride: block.signed(f(m.stride))?,
            blocksize: block.signed(f(m.blocksize))?,
            lut: block.unsigned(f(m.lut))?,
        })
    }
}

impl ProcessInfo {
    /// World ranks of a group from `MPIR_Group` or CH3's `MPIDI_VCRT`.
    pub(super) fn read_group(
        &mut self,
        target: &Target<'_>,
        layout: &Layout,
        group: u64,
        vcrt: u64,
        expected: i64,
    ) -> Result<GroupSpan> {
        let start = self.ranks.len() as u32;
        let outcome = if group != 0
            && let Some(g) = layout.group
        {
            self.read_mpir_group(target, &g, group, expected)
        } else if vcrt != 0
            && let Some(v) = layout.vcrt
        {
            self.read_vcrt(target, &v, vcrt, expected)
        } else {
            return Ok(GroupSpan::default());
        };
        match outcome {
            Ok(true) => Ok(GroupSpan {
                start,
                len: self.ranks.len() as u32 - start,
                known: true,
            }),
            Ok(false) => {
                self.ranks.resize(start as usize, 0)?;
                Ok(GroupSpan::default())
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn read_mpir_group(
        &mut self,
        target: &Target<'_>,
        group: &GroupLayout,
        address: u64,
        expected: i64,
    ) -> Result<bool> {
        match *group {
            GroupLayout::LrankToLpid {
                size,
                table,
                stride,
                lpid,
            } => {
                let span = self.sizes.span(&[Some(size), Some(table)]);
                Self::fetch_block(&mut self.scratch, target, address, span)?;
                let block = Block {
                    target,
                    start: span.0,
                    bytes: self.scratch.as_slice(),
                };
                let n = block.signed(size)?;
                let table = block.unsigned(table)?;
                if n != expected || table == 0 {
                    return Ok(false);
                }
                let width = self.sizes.bytes(lpid.width);
                self.read_table(target, table, n as usize, stride as usize, |t, bytes| {
                    let at = lpid.offset as usize;
                    t.signed(bytes.get(at..at + width).ok_or(Error::UnsupportedWidth)?)
                })?;
                Ok(true)
            }
            GroupLayout::Pmap {
                size,
                use_map,
                union_at,
                lpid_width,
            } => {
                let w = u32::from(lpid_width);
                let span = (
                    size.offset.min(use_map).min(union_at),
                    (size.offset + 4).max(use_map + 1).max(union_at + 2 * w),
                );
                Self::fetch_block(&mut self.scratch, target, address, span)?;
                let block = Block {
                    target,
                    start: span.0,
                    bytes: self.scratch.as_slice(),
                };
                let n = block.signed(size)?;
                if n != expected {
                    return Ok(false);
                }
                let mapped = block.raw(use_map, 1).first().copied().unwrap_or(0) != 0;
                let value = |offset: u32| {
                    block.signed(Field {
                        offset,
                        width: Width::Bytes(lpid_width),
                    })
                };
                if mapped {
                    let map = block.unsigned(Field {
                        offset: union_at,
                        width: Width::Pointer,
                    })?;
                    let w = usize::from(lpid_width);
                    self.read_table(target, map, n as usize, w, |t, bytes| {
                        Ok(world_rank_of_lpid(t.signed(&bytes[..w])?))
                    })?;
                } else {
                    let offset = value(union_at)?;
                    let stride = value(union_at + w)?;
                    for r in 0..n {
                        let lpid = offset.saturating_add(r.saturating_mul(stride));
                        self.ranks.push(world_rank_of_lpid(lpid) as i32)?;
                    }
                }
                Ok(true)
            }
        }
    }

    /// Reads `count` entries of `stride` bytes at `table`, in a few large fetches.
    pub(super) fn read_table(
        &mut self,
        target: &Target<'_>,
        table: u64,
        count: usize,
        stride: usize,
        decode: impl Fn(&Target<'_>, &[u8]) -> Result<i64>,
    ) -> Result<()> {
        let mut done = 0usize;
        while done < count {
            let chunk = (count - done).min(GROUP_CHUNK);
            self.scratch.resize(chunk * stride, 0)?;
            let at = table
                .checked_add((done * stride) as u64)
                .ok_or(Error::ReadFailed)?;
            target.fetch(at, self.scratch.as_mut_slice())?;
            for i in 0..chunk {
                let bytes = &self.scratch.as_slice()[i * stride..(i + 1) * stride];
                let rank = decode(target, bytes)?;
                let rank = if (0..=i64::from(i32::MAX)).contains(&rank) {
                    rank
                } else {
                    -1
                };
                self.ranks.push(rank as i32)?;
            }
            done += chunk;
        }
        Ok(())
    }

    pub(super) fn read_vcrt(
        &mut self,
        target: &Target<'_>,
        vcrt: &crate::layout::VcrtLayout,
        address: u64,
        expected: i64,
    ) -> Result<bool> {
        let span = self.sizes.span(&[Some(vcrt.size)]);
        Self::fetch_block(&mut self.scratch, target, address, span)?;
        let n = Block {
            target,
            start: span.0,
            bytes: self.scratch.as_slice(),
        }
        .signed(vcrt.size)?;
        if n != expected {
            return Ok(false);
        }
        let pointer = usize::from(self.sizes.pointer);
        let mut done = 0usize;
        let count = n as usize;
        let mut vcs = [0u64; 256];
        while done < count {
            let chunk = (count - done).min(vcs.len());
            self.scratch.resize(chunk * pointer, 0)?;
            let at = offset_address(address, u64::from(vcrt.table) + (done * pointer) as u64)?;
            target.fetch(at, self.scratch.as_mut_slice())?;
            for (i, vc) in vcs.iter_mut().take(chunk).enumerate() {
                *vc = target.unsigned(&self.scratch.as_slice()[i * pointer..(i + 1) * pointer])?;
            }
            for &vc in &vcs[..chunk] {
                let rank = self.vc_lpid(target, vcrt, vc)?;
                self.ranks.push(rank)?;
            }
            done += chunk;
        }
        Ok(true)
    }

    /// World ranks from a CH4 rank map; unknown for modes this library cannot
    /// resolve and for processes of other worlds (avtid != 0).
    pub(super) fn read_rank_map(
        &mut self,
        target: &Target<'_>,
        map: &RankMap,
        expected: i64,
    ) -> Result<GroupSpan> {
        const DIRECT: i64 = 0;
        const OFFSET: i64 = 2;
        const STRIDE: i64 = 4;
        const STRIDE_BLOCK: i64 = 6;
        const LUT: i64 = 8;
        if map.size != expected
            || !(0..=MAX_RANKS).contains(&map.size)
            || !(0..=9).contains(&map.mode)
        {
            return Ok(GroupSpan::default());
        }
        // Even modes name the address table in `avtid`; odd "_INTRA" ones use table 0.
        let intra = map.mode % 2 == 1;
        if !intra && map.avtid != 0 {
            return Ok(GroupSpan::default());
        }
        let start = self.ranks.len() as u32;
        let n = map.size;
        match map.mode - map.mode % 2 {
            LUT => {
                let width = usize::from(self.sizes.int);
                self.read_table(target, map.lut, n as usize, width, |t, bytes| {
                    t.signed(bytes)
                })?;
            }
            mode => {
                for r in 0..n {
                    let index = match mode {
                        DIRECT => r,
                        OFFSET => r + map.offset,
                        STRIDE => r * map.stride + map.offset,
                        STRIDE_BLOCK if map.blocksize > 0 => {
                            r / map.blocksize * (map.stride - map.blocksize) + r + map.offset
                        }
                        _ => {
                            self.ranks.resize(start as usize, 0)?;
                            return Ok(GroupSpan::default());
                        }
                    };
                    let index = if (0..=i64::from(i32::MAX)).contains(&index) {
                        index
                    } else {
                        -1
                    };
                    self.ranks.push(index as i32)?;
                }
            }
        }
        Ok(GroupSpan {
            start,
            len: self.ranks.len() as u32 - start,
            known: true,
        })
    }

    /// A virtual connection's lpid, read once per rebuild (VCs are shared).
    pub(super) fn vc_lpid(
        &mut self,
        target: &Target<'_>,
        vcrt: &crate::layout::VcrtLayout,
        vc: u64,
    ) -> Result<i32> {
        let cache = self.lpid_cache.as_slice();
        let slot = cache.partition_point(|&(a, _)| a < vc);
        if let Some(&(a, lpid)) = cache.get(slot)
            && a == vc
        {
            return Ok(lpid);
        }
        let mut buf = [0u8; 8];
        let w = usize::from(self.sizes.int);
        target.fetch(
            offset_address(vc, u64::from(vcrt.vc_lpid.offset))?,
            &mut buf[..w],
        )?;
        let lpid = target.signed(&buf[..w])?;
        let lpid = if (0..=i64::from(i32::MAX)).contains(&lpid) {
            lpid as i32
        } else {
            -1
        };
        // Keep the cache sorted for the lookup above.
        self.lpid_cache.push((vc, lpid))?;
        let cache = self.lpid_cache.as_mut_slice();
        cache[slot..].rotate_right(1);
        Ok(lpid)
    }
}

/// A lpid of MPICH 5.x carries the world index in its high half; only world 0
/// is this job's COMM_WORLD.
pub(super) fn world_rank_of_lpid(lpid: i64) -> i64 {
    if lpid >> 32 == 0 { lpid } else { -1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lpid_world_index() {
        assert_eq!(world_rank_of_lpid(5), 5);
        assert_eq!(world_rank_of_lpid((1 << 32) | 5), -1);
    }
}
