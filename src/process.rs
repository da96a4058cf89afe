//! Per-process state and the walks of MPICH's lists.
//!
//! One display is `mqs_update_communicator_list` followed by the iterators. The
//! communicator list is rebuilt only when MPICH's `sequence_number` moved; each
//! global queue is walked at most once per display, its elements bucketed by the
//! communicator they belong to, so a display costs O(queue length) reads however
//! many communicators there are.

use crate::abi::{
    mqs_communicator, mqs_op_class, mqs_pending_operation, mqs_process_callbacks, mqs_status,
};
use crate::debugger::DebuggerVec;
use crate::error::{Error, Result};
use crate::layout::{CommLayout, Field, Flavour, GroupLayout, Layout, QueueLayout, Width};
use crate::notes::{ALL_DATA_ARRIVED, SenderNote};
use crate::target::{Block, ListGuard, Sizes, Target};
use std::ffi::c_char;
use std::io::Write;

/// No MPI job has more ranks than this; larger sizes mean corrupt memory.
pub(crate) const MAX_RANKS: i64 = 1 << 24;
/// Longest communicator list walked.
pub(crate) const MAX_COMMUNICATORS: u64 = 1 << 16;
/// Longest queue walked.
pub(crate) const MAX_QUEUE: u64 = 1 << 22;
/// Group tables are read in pieces of this many entries.
const GROUP_CHUNK: usize = 4096;

const MPI_ANY_SOURCE: i64 = -2;
const MPI_ANY_TAG: i64 = -1;

/// Addresses of MPICH's globals in this process.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Addresses {
    pub all_communicators: u64,
    /// Address of the variable holding the first posted receive.
    pub posted: u64,
    /// Address of the variable holding the first unexpected message.
    pub unexpected: u64,
    /// Address of the variable holding the first send, when MPICH records sends.
    pub sends: Option<u64>,
}

/// A range of `ProcessInfo::ranks`: world ranks of a group, when known.
#[derive(Debug, Clone, Copy, Default)]
struct GroupSpan {
    start: u32,
    len: u32,
    known: bool,
}

/// A communicator as last read.
#[derive(Clone, Copy)]
struct Comm {
    address: u64,
    local_rank: i64,
    size: i64,
    context_id: i64,
    recvcontext_id: i64,
    inter: bool,
    name: [c_char; 64],
    local: GroupSpan,
    remote: GroupSpan,
}

/// A CH4 `MPIDI_rank_map_t` as read from its communicator.
#[derive(Clone, Copy)]
struct RankMap {
    mode: i64,
    avtid: i64,
    size: i64,
    offset: i64,
    stride: i64,
    blocksize: i64,
    lut: u64,
}

impl RankMap {
    fn decode(block: &Block<'_, '_>, m: &crate::layout::RankMapLayout, at: u32) -> Result<RankMap> {
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

/// One queue element, decoded.
#[derive(Clone, Copy)]
struct Entry {
    comm: u32,
    order: i64,
    request: u64,
    peer: i64,
    tag: i64,
    count: i64,
    buffer: u64,
    data_size: Option<i64>,
    /// Bytes from the request's status, when MPICH filled it in.
    status_count: Option<i64>,
    /// CH3 message kind: 1 eager, 2 rendezvous, 3 sent to itself, 0 unknown.
    message_kind: u8,
    /// CH3: the sender used a synchronous send (it waits for the match).
    synchronous: Option<bool>,
    complete: bool,
    status: Option<(i64, i64)>,
}

/// A queue as walked for one display.
struct Snapshot {
    display: u64,
    outcome: std::result::Result<(), Error>,
    available: bool,
    entries: DebuggerVec<Entry>,
}

impl Snapshot {
    const fn new() -> Snapshot {
        Snapshot {
            display: u64::MAX,
            outcome: Ok(()),
            available: true,
            entries: DebuggerVec::new(),
        }
    }
}

/// Where the operation iterator stands.
#[derive(Clone, Copy)]
struct OperationCursor {
    class: usize,
    next: usize,
    end: usize,
}

/// Everything the library keeps about one process, in debugger memory.
pub(crate) struct ProcessInfo {
    pub callbacks: mqs_process_callbacks,
    pub sizes: Sizes,
    pub global_rank: i64,
    pub layout: Option<Layout>,
    pub addresses: Option<Addresses>,
    pub message: [c_char; 512],
    comm_sequence: Option<i64>,
    comms: DebuggerVec<Comm>,
    ranks: DebuggerVec<i32>,
    by_recvcontext: DebuggerVec<(i64, u32)>,
    by_context: DebuggerVec<(i64, u32)>,
    comm_cursor: usize,
    display: u64,
    snapshots: [Snapshot; 3],
    operations: Option<OperationCursor>,
    scratch: DebuggerVec<u8>,
    lpid_cache: DebuggerVec<(u64, i32)>,
}

impl ProcessInfo {
    pub(crate) fn new(callbacks: mqs_process_callbacks, sizes: Sizes, global_rank: i64) -> Self {
        ProcessInfo {
            callbacks,
            sizes,
            global_rank,
            layout: None,
            addresses: None,
            message: [0; 512],
            comm_sequence: None,
            comms: DebuggerVec::new(),
            ranks: DebuggerVec::new(),
            by_recvcontext: DebuggerVec::new(),
            by_context: DebuggerVec::new(),
            comm_cursor: 0,
            display: 0,
            snapshots: [Snapshot::new(), Snapshot::new(), Snapshot::new()],
            operations: None,
            scratch: DebuggerVec::new(),
            lpid_cache: DebuggerVec::new(),
        }
    }

    fn ready(&self) -> Result<(Layout, Addresses)> {
        match (self.layout, self.addresses) {
            (Some(l), Some(a)) => Ok((l, a)),
            _ => Err(Error::NoQueues),
        }
    }

    /// Reads `[addr + start, addr + end)` into the scratch buffer in one fetch.
    fn fetch_block(
        scratch: &mut DebuggerVec<u8>,
        target: &Target<'_>,
        addr: u64,
        span: (u32, u32),
    ) -> Result<()> {
        let (start, end) = span;
        scratch.resize((end - start) as usize, 0)?;
        let at = addr
            .checked_add(u64::from(start))
            .ok_or(Error::ReadFailed)?;
        target.fetch(at, scratch.as_mut_slice())
    }

    /// `mqs_update_communicator_list`: starts a display. On failure no list
    /// remains, so no iterator can show a stale one.
    pub(crate) fn update_communicators(
        &mut self,
        process: *mut crate::abi::mqs_process,
    ) -> Result<()> {
        let outcome = self.try_update(process);
        if outcome.is_err() {
            self.comm_sequence = None;
            self.comms.clear();
        }
        outcome
    }

    fn try_update(&mut self, process: *mut crate::abi::mqs_process) -> Result<()> {
        let (layout, addresses) = self.ready()?;
        let callbacks = self.callbacks;
        let target = Target {
            process,
            callbacks: &callbacks,
            sizes: self.sizes,
        };
        self.display = self.display.wrapping_add(1);
        self.operations = None;
        self.comm_cursor = 0;

        let list = &layout.comm_list;
        let span = self
            .sizes
            .span(&[Some(list.sequence_number), Some(list.head)]);
        Self::fetch_block(
            &mut self.scratch,
            &target,
            addresses.all_communicators,
            span,
        )?;
        let block = Block {
            target: &target,
            start: span.0,
            bytes: self.scratch.as_slice(),
        };
        let sequence = block.signed(list.sequence_number)?;
        let head = block.unsigned(list.head)?;

        if self.comm_sequence == Some(sequence) {
            // Unchanged list; MPI_Comm_set_name does not bump the sequence number.
            return self.refresh_names(&target, &layout.comm);
        }
        self.comm_sequence = None;
        self.rebuild(&target, &layout, head)?;
        self.comm_sequence = Some(sequence);
        Ok(())
    }

    fn refresh_names(&mut self, target: &Target<'_>, comm: &CommLayout) -> Result<()> {
        let mut name = [0u8; 65];
        for i in 0..self.comms.len() {
            let address = self.comms.as_slice()[i].address;
            let n = (comm.name_len as usize).min(name.len());
            target.fetch(
                offset_address(address, u64::from(comm.name))?,
                &mut name[..n],
            )?;
            self.comms.as_mut_slice()[i].name = communicator_name(&name[..n]);
        }
        Ok(())
    }

    fn rebuild(&mut self, target: &Target<'_>, layout: &Layout, head: u64) -> Result<()> {
        self.comms.clear();
        self.ranks.clear();
        self.lpid_cache.clear();
        let comm_layout = &layout.comm;
        let mut fields = [None; 26];
        fields[..12].copy_from_slice(&comm_layout.scalars());
        if let Some(map) = layout.rank_map {
            if let Some(at) = comm_layout.rank_map {
                fields[12..19].copy_from_slice(&map.fields_at(at));
            }
            if let Some(at) = comm_layout.local_rank_map {
                fields[19..26].copy_from_slice(&map.fields_at(at));
            }
        }
        let (start, mut end) = self.sizes.span(&fields);
        end = end.max(comm_layout.name + comm_layout.name_len);
        let span = (start, end);

        let mut guard = ListGuard::new(MAX_COMMUNICATORS);
        let mut address = head;
        while address != 0 {
            guard.visit(address)?;
            Self::fetch_block(&mut self.scratch, target, address, span)?;
            let block = Block {
                target,
                start,
                bytes: self.scratch.as_slice(),
            };
            let c = comm_layout;
            let local_size = block.signed(c.local_size)?;
            let remote_size = c.remote_size.map(|f| block.signed(f)).transpose()?;
            let inter = match c.kind {
                Some(kind) => block.signed(kind)? == 1,
                None => false,
            };
            let sizes_ok = |s: i64| (0..=MAX_RANKS).contains(&s);
            if !sizes_ok(local_size) || !remote_size.is_none_or(sizes_ok) {
                return Err(Error::ImplausibleValue);
            }
            let pointer =
                |f: Option<Field>| -> Result<u64> { f.map_or(Ok(0), |f| block.unsigned(f)) };
            let local_group = pointer(c.local_group)?;
            let remote_group = pointer(c.remote_group)?;
            let vcrt = pointer(c.vcrt)?;
            let local_vcrt = pointer(c.local_vcrt)?;
            let comm = Comm {
                address,
                local_rank: block.signed(c.rank)?,
                size: local_size,
                context_id: block.signed(c.context_id)?,
                recvcontext_id: block.signed(c.recvcontext_id)?,
                inter,
                name: communicator_name(block.raw(c.name, c.name_len)),
                local: GroupSpan::default(),
                remote: GroupSpan::default(),
            };
            let next = block.unsigned(c.next)?;
            let map_at = |at: Option<u32>| -> Result<Option<RankMap>> {
                match (layout.rank_map, at) {
                    (Some(m), Some(at)) => RankMap::decode(&block, &m, at).map(Some),
                    _ => Ok(None),
                }
            };
            let map = map_at(c.rank_map)?;
            let local_map = map_at(c.local_rank_map)?;

            let mut comm = comm;
            comm.local = self.read_group(
                target,
                layout,
                local_group,
                if inter { local_vcrt } else { vcrt },
                local_size,
            )?;
            if !comm.local.known
                && let Some(m) = if inter { local_map } else { map }
            {
                comm.local = self.read_rank_map(target, &m, local_size)?;
            }
            comm.local = self.fallback_group(comm, comm.local, self.global_rank);
            comm.remote = if inter {
                let size = remote_size.unwrap_or(-1);
                let mut remote = self.read_group(target, layout, remote_group, vcrt, size)?;
                if !remote.known
                    && let Some(m) = map
                {
                    remote = self.read_rank_map(target, &m, size)?;
                }
                remote
            } else {
                comm.local
            };
            self.comms.push(comm)?;
            address = next;
        }

        // A debugger that does not know the process's rank: COMM_WORLD tells it,
        // and with it the group of every single-process communicator.
        if self.global_rank < 0
            && let Some(world) = self.comms.as_slice().iter().find(|c| is_world(c)).copied()
        {
            for i in 0..self.comms.len() {
                let c = self.comms.as_slice()[i];
                let local = self.fallback_group(c, c.local, world.local_rank);
                let c = &mut self.comms.as_mut_slice()[i];
                c.local = local;
                if !c.inter {
                    c.remote = local;
                }
            }
        }

        // Stable, readable order: COMM_WORLD (context 0) first.
        self.comms
            .as_mut_slice()
            .sort_unstable_by_key(|c| (c.recvcontext_id, c.address));
        self.by_recvcontext.clear();
        self.by_context.clear();
        for (i, c) in self.comms.as_slice().iter().enumerate() {
            self.by_recvcontext.push((c.recvcontext_id, i as u32))?;
            self.by_context.push((c.context_id, i as u32))?;
        }
        self.by_recvcontext.as_mut_slice().sort_unstable();
        self.by_context.as_mut_slice().sort_unstable();
        Ok(())
    }

    /// COMM_WORLD and single-process communicators need no table to be known.
    fn fallback_group(&mut self, comm: Comm, found: GroupSpan, world_rank: i64) -> GroupSpan {
        if found.known || comm.inter {
            return found;
        }
        let start = self.ranks.len() as u32;
        let ok = if is_world(&comm) {
            (0..comm.size).all(|r| self.ranks.push(r as i32).is_ok())
        } else if comm.size == 1 && world_rank >= 0 {
            self.ranks.push(world_rank as i32).is_ok()
        } else {
            return found;
        };
        if !ok {
            return found;
        }
        GroupSpan {
            start,
            len: self.ranks.len() as u32 - start,
            known: true,
        }
    }

    /// World ranks of a group from `MPIR_Group` or CH3's `MPIDI_VCRT`.
    fn read_group(
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

    fn read_mpir_group(
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
    fn read_table(
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

    fn read_vcrt(
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
    fn read_rank_map(
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
    fn vc_lpid(
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

    /// `mqs_setup_communicator_iterator`.
    pub(crate) fn first_communicator(&mut self) -> Result<bool> {
        if self.comm_sequence.is_none() {
            return Err(Error::NoCommunicatorList);
        }
        self.comm_cursor = 0;
        self.operations = None;
        Ok(self.comms.len() > 0)
    }

    /// `mqs_next_communicator`.
    pub(crate) fn next_communicator(&mut self) -> Result<bool> {
        if self.comm_sequence.is_none() {
            return Err(Error::NoCommunicatorList);
        }
        self.comm_cursor = (self.comm_cursor + 1).min(self.comms.len());
        self.operations = None;
        Ok(self.comm_cursor < self.comms.len())
    }

    fn current(&self) -> Result<&Comm> {
        if self.comm_sequence.is_none() {
            return Err(Error::NoCommunicatorList);
        }
        self.comms
            .as_slice()
            .get(self.comm_cursor)
            .ok_or(Error::NoCurrentCommunicator)
    }

    /// `mqs_get_communicator`.
    pub(crate) fn communicator(&self, out: &mut mqs_communicator) -> Result<()> {
        let c = self.current()?;
        out.unique_id = c.address as crate::abi::mqs_taddr_t;
        out.local_rank = c.local_rank as crate::abi::mqs_tword_t;
        out.size = c.size as crate::abi::mqs_tword_t;
        out.name = c.name;
        Ok(())
    }

    /// `mqs_get_comm_group`: world ranks of the local group, if known.
    pub(crate) fn group(&self) -> Result<Option<&[i32]>> {
        let c = self.current()?;
        if !c.local.known {
            return Ok(None);
        }
        let ranks = self.ranks.as_slice();
        let start = c.local.start as usize;
        Ok(ranks.get(start..start + c.local.len as usize))
    }

    /// `mqs_setup_operation_iterator`.
    pub(crate) fn start_operations(
        &mut self,
        process: *mut crate::abi::mqs_process,
        class: i32,
    ) -> Result<bool> {
        let class = match class {
            c if c == mqs_op_class::mqs_pending_sends as i32 => 0usize,
            c if c == mqs_op_class::mqs_pending_receives as i32 => 1,
            c if c == mqs_op_class::mqs_unexpected_messages as i32 => 2,
            _ => return Err(Error::BadOpClass),
        };
        self.operations = None;
        let comm = self.comm_cursor;
        self.current()?;
        if self.snapshots[class].display != self.display {
            let outcome = self.walk(process, class);
            let snapshot = &mut self.snapshots[class];
            snapshot.display = self.display;
            match outcome {
                Ok(available) => {
                    snapshot.outcome = Ok(());
                    snapshot.available = available;
                }
                Err(e) => {
                    snapshot.entries.clear();
                    snapshot.outcome = Err(e);
                }
            }
        }
        let snapshot = &self.snapshots[class];
        snapshot.outcome?;
        if !snapshot.available {
            return Ok(false);
        }
        let entries = snapshot.entries.as_slice();
        let first = entries.partition_point(|e| (e.comm as usize) < comm);
        let end = entries.partition_point(|e| (e.comm as usize) <= comm);
        self.operations = Some(OperationCursor {
            class,
            next: first,
            end,
        });
        Ok(true)
    }

    /// Walks one global queue; `Ok(false)` when this MPICH does not record it.
    fn walk(&mut self, process: *mut crate::abi::mqs_process, class: usize) -> Result<bool> {
        let (layout, addresses) = self.ready()?;
        let callbacks = self.callbacks;
        let target = Target {
            process,
            callbacks: &callbacks,
            sizes: self.sizes,
        };
        let head_variable = match class {
            0 => match addresses.sends {
                Some(a) => a,
                None => return Ok(false),
            },
            1 => addresses.posted,
            _ => addresses.unexpected,
        };
        let mut entries = std::mem::replace(&mut self.snapshots[class].entries, DebuggerVec::new());
        entries.clear();
        let outcome = self.walk_into(&target, &layout, class, head_variable, &mut entries);
        entries
            .as_mut_slice()
            .sort_unstable_by_key(|e| (e.comm, e.order));
        self.snapshots[class].entries = entries;
        outcome.map(|()| true)
    }

    fn walk_into(
        &mut self,
        target: &Target<'_>,
        layout: &Layout,
        class: usize,
        head_variable: u64,
        entries: &mut DebuggerVec<Entry>,
    ) -> Result<()> {
        let sizes = self.sizes;
        let request = layout.request;
        let request_fields = [Some(request.cc), request.status_source, request.status_tag];
        let mut guard = ListGuard::new(MAX_QUEUE);
        let mut address = target.read_pointer(head_variable)?;
        // Layout C and the send queues are newest first; show oldest first,
        // the order in which MPI matches.
        let newest_first = matches!(layout.queues, QueueLayout::Debugq(_)) || class == 0;
        let mut index: i64 = 0;
        let mut request_block = [0u8; 64];

        // Completion and status of a request, in one read.
        let request_span = sizes.span(&request_fields);
        let read_request = |req: u64, buf: &mut [u8; 64]| -> Result<(bool, Option<(i64, i64)>)> {
            let len = (request_span.1 - request_span.0) as usize;
            if req == 0 {
                return Ok((false, None));
            }
            let mut big = [0u8; 4096];
            let bytes: &mut [u8] = if len <= buf.len() {
                &mut buf[..len]
            } else {
                big.get_mut(..len).ok_or(Error::UnsupportedWidth)?
            };
            target.fetch(offset_address(req, u64::from(request_span.0))?, bytes)?;
            let block = Block {
                target,
                start: request_span.0,
                bytes,
            };
            let complete = block.signed(request.cc)? == 0;
            let status = match (request.status_source, request.status_tag) {
                (Some(s), Some(t)) if complete => Some((block.signed(s)?, block.signed(t)?)),
                _ => None,
            };
            Ok((complete, status))
        };

        while address != 0 {
            guard.visit(address)?;
            let mut entry = Entry {
                comm: 0,
                order: if newest_first { -index } else { index },
                request: 0,
                peer: 0,
                tag: 0,
                count: 0,
                buffer: 0,
                data_size: None,
                status_count: None,
                message_kind: 0,
                synchronous: None,
                complete: false,
                status: None,
            };
            index += 1;
            let context: i64;
            let next: u64;
            match layout.queues {
                QueueLayout::Debugq(node) => {
                    let b = read_object(
                        &mut self.scratch,
                        target,
                        address,
                        &[
                            Some(node.request),
                            Some(node.tag),
                            Some(node.rank),
                            Some(node.context_id),
                            Some(node.buffer),
                            Some(node.count),
                            Some(node.next),
                        ],
                    )?;
                    entry.request = b.unsigned(node.request)?;
                    entry.tag = b.signed(node.tag)?;
                    entry.peer = b.signed(node.rank)?;
                    context = b.signed(node.context_id)?;
                    entry.buffer = b.unsigned(node.buffer)?;
                    entry.count = b.signed(node.count)?;
                    next = b.unsigned(node.next)?;
                    if class != 2 {
                        (entry.complete, entry.status) =
                            read_request(entry.request, &mut request_block)?;
                    }
                }
                QueueLayout::RequestLists { request: rq, .. } if class != 0 => {
                    let span = sizes.span(&[
                        Some(rq.next),
                        Some(rq.buffer),
                        Some(rq.count),
                        Some(rq.rank),
                        Some(rq.tag),
                        Some(rq.context_id),
                        rq.data_size,
                        rq.message_state,
                        Some(request.cc),
                        request.status_source,
                        request.status_tag,
                        request.status_count.map(|c| c.0),
                        request.status_count.map(|c| c.1),
                    ]);
                    Self::fetch_block(&mut self.scratch, target, address, span)?;
                    let b = Block {
                        target,
                        start: span.0,
                        bytes: self.scratch.as_slice(),
                    };
                    entry.request = address;
                    entry.tag = b.signed(rq.tag)?;
                    entry.peer = b.signed(rq.rank)?;
                    context = b.unsigned(rq.context_id)? as i64;
                    entry.buffer = b.unsigned(rq.buffer)?;
                    entry.count = b.signed(rq.count)?;
                    entry.data_size = rq.data_size.map(|f| b.signed(f)).transpose()?;
                    if let Some(f) = rq.message_state {
                        // CH3's dev.state: bits 0-1 the message kind, bit 3 "synchronous send".
                        let state = b.unsigned(f)?;
                        entry.message_kind = (state & 3) as u8;
                        entry.synchronous = Some(state & 8 != 0);
                    }
                    if let Some((lo, hi)) = request.status_count {
                        // MPICH splits the count: low 32 bits, then high bits above a cancel flag.
                        let count = b.unsigned(lo)? | (b.unsigned(hi)? >> 1) << 32;
                        entry.status_count =
                            (count > 0 && count <= i64::MAX as u64).then_some(count as i64);
                    }
                    entry.complete = b.signed(request.cc)? == 0;
                    if entry.complete
                        && let (Some(s), Some(t)) = (request.status_source, request.status_tag)
                    {
                        entry.status = Some((b.signed(s)?, b.signed(t)?));
                    }
                    next = b.unsigned(rq.next)?;
                }
                QueueLayout::RequestLists { request: rq, sendq } => {
                    let Some(sq) = sendq else { return Ok(()) };
                    let b = read_object(
                        &mut self.scratch,
                        target,
                        address,
                        &[
                            Some(sq.request),
                            Some(sq.tag),
                            Some(sq.rank),
                            Some(sq.context_id),
                            Some(sq.next),
                        ],
                    )?;
                    entry.request = b.unsigned(sq.request)?;
                    entry.tag = b.signed(sq.tag)?;
                    entry.peer = b.signed(sq.rank)?;
                    context = b.signed(sq.context_id)?;
                    next = b.unsigned(sq.next)?;
                    if entry.request != 0 {
                        let b = read_object(
                            &mut self.scratch,
                            target,
                            entry.request,
                            &[Some(rq.buffer), Some(rq.count), Some(request.cc)],
                        )?;
                        entry.buffer = b.unsigned(rq.buffer)?;
                        entry.count = b.signed(rq.count)?;
                        entry.complete = b.signed(request.cc)? == 0;
                    }
                }
            }
            if let Some(comm) = self.owner(context, class == 0) {
                entry.comm = comm;
                entries.push(entry)?;
            }
            address = next;
        }
        Ok(())
    }

    /// The communicator a queue element belongs to. Receives carry the
    /// receiver's `recvcontext_id`; sends carry it too since MPICH 4.1 and the
    /// send `context_id` before, so sends fall back to that.
    fn owner(&self, context: i64, send: bool) -> Option<u32> {
        let find = |table: &[(i64, u32)]| {
            let at = table.partition_point(|&(c, _)| c < context);
            table
                .get(at)
                .filter(|&&(c, _)| c == context)
                .map(|&(_, i)| i)
        };
        find(self.by_recvcontext.as_slice())
            .or_else(|| send.then(|| find(self.by_context.as_slice())).flatten())
    }

    /// `mqs_next_operation`: `Ok(false)` at the end of the list.
    pub(crate) fn next_operation(&mut self, out: &mut mqs_pending_operation) -> Result<bool> {
        let mut cursor = self.operations.ok_or(Error::NoOperationIterator)?;
        if cursor.next >= cursor.end {
            return Ok(false);
        }
        let flavour = self.layout.map(|l| l.flavour).ok_or(Error::NoQueues)?;
        let entry = *self.snapshots[cursor.class]
            .entries
            .as_slice()
            .get(cursor.next)
            .ok_or(Error::Internal)?;
        let comm = *self
            .comms
            .as_slice()
            .get(entry.comm as usize)
            .ok_or(Error::Internal)?;
        cursor.next += 1;
        self.operations = Some(cursor);
        self.describe(out, &entry, &comm, cursor.class, flavour);
        Ok(true)
    }

    fn world_rank(&self, comm: &Comm, rank: i64) -> i64 {
        let group = if comm.inter { comm.remote } else { comm.local };
        if !group.known || rank < 0 || rank >= i64::from(group.len) {
            return -1;
        }
        let world = self.ranks.as_slice()[group.start as usize + rank as usize];
        i64::from(world)
    }

    fn describe(
        &self,
        out: &mut mqs_pending_operation,
        e: &Entry,
        comm: &Comm,
        class: usize,
        flavour: Flavour,
    ) {
        // SAFETY: all-zero is a valid mqs_pending_operation.
        *out = unsafe { std::mem::zeroed() };
        let mut lines = ExtraText::new(&mut out.extra_text);
        out.desired_length = e.count as _;
        out.buffer = e.buffer as _;
        out.actual_local_rank = -1;
        out.actual_global_rank = -1;
        out.actual_tag = -1;
        match class {
            1 => {
                let any_source = e.peer == MPI_ANY_SOURCE;
                let any_tag = e.tag == MPI_ANY_TAG;
                out.status = if e.complete {
                    mqs_status::mqs_st_complete as i32
                } else {
                    mqs_status::mqs_st_pending as i32
                };
                out.desired_local_rank = if any_source { -1 } else { e.peer as _ };
                out.desired_global_rank = if any_source {
                    -1
                } else {
                    self.world_rank(comm, e.peer) as _
                };
                out.tag_wild = any_tag as i32;
                out.desired_tag = e.tag as _;
                if let Some((source, tag)) = e.status {
                    out.actual_local_rank = source as _;
                    out.actual_global_rank = self.world_rank(comm, source) as _;
                    out.actual_tag = tag as _;
                    out.actual_length = e.count as _;
                }
                lines.line(format_args!("posted receive (MPI_Recv/MPI_Irecv)"));
                match (any_source, any_tag) {
                    (true, true) => {
                        lines.line(format_args!("from MPI_ANY_SOURCE, tag MPI_ANY_TAG"))
                    }
                    (true, false) => lines.line(format_args!("from MPI_ANY_SOURCE")),
                    (false, true) => lines.line(format_args!("tag MPI_ANY_TAG")),
                    (false, false) => {}
                }
            }
            2 => {
                out.status = mqs_status::mqs_st_pending as i32;
                out.system_buffer = 1;
                out.desired_local_rank = e.peer as _;
                out.desired_global_rank = self.world_rank(comm, e.peer) as _;
                out.desired_tag = e.tag as _;
                out.actual_local_rank = out.desired_local_rank;
                out.actual_global_rank = out.desired_global_rank;
                out.actual_tag = out.desired_tag;
                // The status holds the size even where CH3 leaves recv_data_sz stale
                // (messages a rank sent to itself).
                let length = e.status_count.or(e.data_size).unwrap_or(e.count);
                out.desired_length = length as _;
                out.actual_length = length as _;
                lines.line(format_args!("unexpected message: no receive posted yet"));
                match (e.message_kind, e.data_size, flavour) {
                    (2, ..) => lines.line(format_args!(
                        "rendezvous: {length} bytes still at the sender"
                    )),
                    (3, ..) => lines.line(format_args!(
                        "sent to itself: {length} bytes in its send buffer"
                    )),
                    (_, Some(_), _) => lines.line(format_args!("{length} bytes buffered by MPICH")),
                    (_, None, Flavour::Ch4Am) => lines.line(format_args!("length in bytes")),
                    (_, None, Flavour::Debugq4 | Flavour::Debugq5) => {
                        lines.line(format_args!("length not recorded by this MPICH"))
                    }
                    (_, None, Flavour::Ch3) => {}
                }
            }
            _ => {
                out.status = if e.complete {
                    mqs_status::mqs_st_complete as i32
                } else {
                    mqs_status::mqs_st_pending as i32
                };
                out.desired_local_rank = e.peer as _;
                out.desired_global_rank = self.world_rank(comm, e.peer) as _;
                out.desired_tag = e.tag as _;
                out.actual_local_rank = out.desired_local_rank;
                out.actual_global_rank = out.desired_global_rank;
                out.actual_tag = out.desired_tag;
                out.actual_length = out.desired_length;
                match flavour {
                    Flavour::Ch3 | Flavour::Ch4Am => {
                        lines.line(format_args!("non-blocking send (MPI_Isend family)"))
                    }
                    Flavour::Debugq4 | Flavour::Debugq5 => {
                        lines.line(format_args!("send (blocking or non-blocking)"))
                    }
                }
            }
        }
        // CH3 says whether an unexpected message's sender waits for it (synchronous
        // send) or went on (standard eager send): what a deadlock analysis needs.
        let sender = match (class, e.synchronous, e.message_kind) {
            (2, Some(true), _) => Some(SenderNote::Waits),
            (2, Some(false), 1) => Some(SenderNote::GoneOn),
            _ => None,
        };
        if e.complete && class == 2 {
            match sender {
                Some(note) => lines.line(format_args!("{ALL_DATA_ARRIVED}; {}", note.text())),
                None => lines.line(format_args!("{ALL_DATA_ARRIVED}")),
            }
        } else if let (2, Some(note)) = (class, sender) {
            lines.line(format_args!("{}", note.text()));
        } else if e.complete {
            lines.line(format_args!("completed, not yet waited or freed"));
        }
        if e.request != 0 {
            lines.line(format_args!("request {:#x}", e.request));
        }
        if comm.inter {
            lines.line(format_args!("peer rank is in the remote group"));
        }
    }
}

/// Reads the block of the object at `address` that holds `fields`, in one fetch.
fn read_object<'a, 'b>(
    scratch: &'a mut DebuggerVec<u8>,
    target: &'a Target<'b>,
    address: u64,
    fields: &[Option<Field>],
) -> Result<Block<'a, 'b>> {
    let span = target.sizes.span(fields);
    ProcessInfo::fetch_block(scratch, target, address, span)?;
    Ok(Block {
        target,
        start: span.0,
        bytes: scratch.as_slice(),
    })
}

/// `base + offset` for a target pointer; a wrap is a corrupt pointer.
fn offset_address(base: u64, offset: u64) -> Result<u64> {
    base.checked_add(offset).ok_or(Error::ReadFailed)
}

/// COMM_WORLD: the intracommunicator with context id 0 in every MPICH.
fn is_world(comm: &Comm) -> bool {
    !comm.inter && comm.recvcontext_id == 0 && comm.context_id == 0
}

/// A lpid of MPICH 5.x carries the world index in its high half; only world 0
/// is this job's COMM_WORLD.
fn world_rank_of_lpid(lpid: i64) -> i64 {
    if lpid >> 32 == 0 { lpid } else { -1 }
}

/// The name as shown: up to 63 bytes, cut at a UTF-8 boundary, NUL-terminated.
fn communicator_name(raw: &[u8]) -> [c_char; 64] {
    let mut name = [0 as c_char; 64];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let mut len = end.min(63);
    if let Err(e) = std::str::from_utf8(&raw[..len])
        && e.error_len().is_none()
    {
        len = e.valid_up_to();
    }
    for (slot, &b) in name.iter_mut().zip(&raw[..len]) {
        *slot = b as c_char;
    }
    name
}

/// Fills the five 64-byte lines of `extra_text`, each NUL-terminated.
struct ExtraText<'a> {
    lines: &'a mut [[c_char; 64]; 5],
    used: usize,
}

impl<'a> ExtraText<'a> {
    fn new(lines: &'a mut [[c_char; 64]; 5]) -> Self {
        ExtraText { lines, used: 0 }
    }

    fn line(&mut self, text: std::fmt::Arguments<'_>) {
        let Some(slot) = self.lines.get_mut(self.used) else {
            return;
        };
        let mut bytes = [0u8; 63];
        let mut cursor = std::io::Cursor::new(&mut bytes[..]);
        // A line longer than 63 bytes is cut; the write error only says so.
        let _ = cursor.write_fmt(text);
        let len = cursor.position() as usize;
        for (dst, &b) in slot.iter_mut().zip(&bytes[..len]) {
            *dst = b as c_char;
        }
        slot[len.min(63)] = 0;
        self.used += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &[c_char; 64]) -> Vec<u8> {
        name.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    }

    #[test]
    fn long_names_are_cut_to_63_bytes_with_nul() {
        let long = [b'x'; 128];
        let name = communicator_name(&long);
        assert_eq!(text(&name).len(), 63);
        assert_eq!(name[63], 0);
        assert_eq!(
            text(&communicator_name(b"MPI_COMM_WORLD\0garbage")),
            b"MPI_COMM_WORLD"
        );
    }

    #[test]
    fn names_are_not_cut_inside_a_utf8_character() {
        let mut raw = vec![b'a'; 62];
        raw.extend_from_slice("é".as_bytes());
        raw.push(0);
        assert_eq!(text(&communicator_name(&raw)).len(), 62);
    }

    #[test]
    fn lpid_world_index() {
        assert_eq!(world_rank_of_lpid(5), 5);
        assert_eq!(world_rank_of_lpid((1 << 32) | 5), -1);
    }

    #[test]
    fn extra_text_lines_are_cut_and_terminated() {
        let mut lines = [[1 as c_char; 64]; 5];
        let mut t = ExtraText::new(&mut lines);
        t.line(format_args!("{}", "y".repeat(100)));
        t.line(format_args!("short"));
        for _ in 0..5 {
            t.line(format_args!("more"));
        }
        assert_eq!(text(&lines[0]).len(), 63);
        assert_eq!(text(&lines[1]), b"short");
        assert_eq!(text(&lines[4]), b"more");
    }
}
