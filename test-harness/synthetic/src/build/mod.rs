//! Writes a [`ProcessSpec`] into a fresh address space, MPICH object by MPICH object.
//!
//! Address plan (one region per heap, unmapped holes between them):
//!
//! | heap      | LP64 base             | ILP32 base    | holds                                  |
//! |-----------|-----------------------|---------------|----------------------------------------|
//! | text      | `0x5555_5555_4000`    | `0x0804_8000` | `MPII_Wait_for_debugger`, ...          |
//! | globals   | `0x5555_5576_0000`    | `0x0806_0000` | symbols: list and queue heads          |
//! | comms     | `0x7f3a_1000_0000`    | `0x0900_0000` | `MPIR_Comm`, one 1 KiB slot each       |
//! | groups    | `0x7f3a_2000_0000`    | `0x1000_0000` | groups, lpid maps, VCRTs, VCs, LUTs    |
//! | requests  | `0x7f3a_4000_0000`    | `0x2000_0000` | `MPIR_Request`s, contiguous like a pool|
//! | nodes     | `0x7f3c_0000_0000`    | `0xa000_0000` | `MPIR_Sendq` / `MPIR_Debugq` nodes     |
//!
//! LP64 heaps live above 4 GiB so that a pointer truncated to 32 bits lands in a hole.

use super::layout::{TypeTable, round_up};
use super::memory::Memory;
use super::types::mpich_types;
use super::{
    BuildOptions, CommKind, GroupSide, Index, Layout, PmapEncoding, ProcessSpec, QueueKind,
    RequestSpec, SyntheticTarget,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod devices;

const TEXT: usize = 0;
const GLOBALS: usize = 1;
const COMMS: usize = 2;
const GROUPS: usize = 3;
const REQUESTS: usize = 4;
const NODES: usize = 5;

/// Bytes between two communicator slots.
const COMM_STRIDE: u64 = 0x400;
/// `MPI_UNDEFINED`: the `rank` of a group the process is not in.
const MPI_UNDEFINED: i32 = -32766;
/// `MPI_BYTE`'s handle: requests use it, so element counts are byte counts.
const MPI_BYTE: i32 = 0x4c00_010d;

/// `(base, limit)` of each heap, and an address in a hole.
fn plan(pointer_size: u8) -> ([(u64, u64); 6], u64) {
    if pointer_size == 8 {
        (
            [
                (0x5555_5555_4000, 0x5555_5565_4000),
                (0x5555_5576_0000, 0x5555_5586_0000),
                (0x7f3a_1000_0000, 0x7f3a_1f00_0000),
                (0x7f3a_2000_0000, 0x7f3a_3f00_0000),
                (0x7f3a_4000_0000, 0x7f3b_ff00_0000),
                (0x7f3c_0000_0000, 0x7f3c_ff00_0000),
            ],
            0x7f3a_1f80_0000,
        )
    } else {
        (
            [
                (0x0804_8000, 0x0805_0000),
                (0x0806_0000, 0x0808_0000),
                (0x0900_0000, 0x0f00_0000),
                (0x1000_0000, 0x1f00_0000),
                (0x2000_0000, 0x9f00_0000),
                (0xa000_0000, 0xef00_0000),
            ],
            0x0f80_0000,
        )
    }
}

/// Offsets into `MPIR_Request` and the queue nodes, looked up once per build.
struct RequestOffsets {
    size: u64,
    align: u64,
    handle: u64,
    ref_count: u64,
    kind: u64,
    cc: u64,
    cc_ptr: u64,
    comm: u64,
    count_lo: u64,
    count_hi: u64,
    source: u64,
    tag: u64,
    error: u64,
    next: u64,
    prev: u64,
    dev: u64,
}

struct Builder<'a> {
    spec: &'a ProcessSpec,
    options: &'a BuildOptions,
    t: TypeTable,
    m: Memory,
    p: u64,
    symbols: HashMap<String, u64>,
    functions: HashMap<String, u64>,
    index: Index,
    group_handles: i32,
    vcs: HashMap<i32, u64>,
    pg: u64,
}

pub(super) fn build(spec: &ProcessSpec, options: &BuildOptions) -> SyntheticTarget {
    assert!(
        matches!(spec.arch.pointer_size, 4 | 8),
        "synthetic targets have 4- or 8-byte pointers, not {}",
        spec.arch.pointer_size
    );
    let (regions, unmapped) = plan(spec.arch.pointer_size);
    let mut b = Builder {
        spec,
        options,
        t: mpich_types(spec.layout, spec.arch),
        m: Memory::new(&regions, spec.arch.pointer_size, spec.arch.byte_order),
        p: u64::from(spec.arch.pointer_size),
        symbols: HashMap::new(),
        functions: HashMap::new(),
        index: Index {
            unmapped,
            comm_stride: COMM_STRIDE,
            comm_base: regions[COMMS].0,
            ..Index::default()
        },
        group_handles: 0,
        vcs: HashMap::new(),
        pg: 0,
    };
    b.text();
    let heads = b.globals();
    b.comms(heads.comm_list);
    b.queues(&heads);
    SyntheticTarget {
        layout: spec.layout,
        arch: spec.arch,
        world_rank: spec
            .comms
            .iter()
            .find(|c| c.name == "MPI_COMM_WORLD")
            .map(|c| c.rank),
        memory: b.m,
        types: b.t,
        symbols: b.symbols,
        functions: b.functions,
        index: Arc::new(b.index),
    }
}

/// Addresses of the variables the walks start from.
struct Heads {
    comm_list: u64,
    /// Variable holding the first entry of each queue (per [`QueueKind::index`]).
    queues: [u64; 3],
    /// ch4: the variables holding the first posted receive and the first unreceived send of
    /// single-process communicators (`self_recv_queue`, `self_send_queue`).
    single_process: Option<(u64, u64)>,
}

impl Builder<'_> {
    fn off(&self, ty: &str, field: &str) -> u64 {
        self.t
            .offset_by_name(ty, field)
            .unwrap_or_else(|| panic!("internal: no {ty}.{field}"))
    }

    fn size(&self, ty: &str) -> u64 {
        self.t
            .size_by_name(ty)
            .unwrap_or_else(|| panic!("internal: no type {ty}"))
    }

    fn put(&mut self, addr: u64, width: u64, value: u64) {
        self.m
            .write_uint(addr, width, value)
            .expect("internal: write inside an allocation");
    }

    fn put_i32(&mut self, addr: u64, value: i32) {
        self.put(addr, 4, u64::from(value as u32));
    }

    fn put_ptr(&mut self, addr: u64, value: u64) {
        self.put(addr, self.p, value);
    }

    /// A `MPIR_Context_id_t` value: 16 or 32 bits depending on the layout.
    fn put_ctx(&mut self, addr: u64, value: i32) {
        let width = u64::from(self.spec.layout.context_id_size());
        self.put(addr, width, u64::from(value as u32));
    }

    fn text(&mut self) {
        for name in ["MPII_Wait_for_debugger", "MPIR_Breakpoint"] {
            let addr = self.m.alloc(TEXT, 32, 16);
            // push; mov; pop; ret; then int3 padding: any plausible code will do.
            let mut code = [0xccu8; 32];
            code[..5].copy_from_slice(&[0x55, 0x48, 0x89, 0xe5, 0x5d]);
            code[5] = 0xc3;
            self.m.write(addr, &code).expect("internal: text");
            self.functions.insert(name.to_owned(), addr);
        }
    }

    /// A global variable with a small unnamed neighbour before it, like real `.data`.
    fn global(&mut self, name: &str, size: u64, align: u64) -> u64 {
        let neighbour = self.m.alloc(GLOBALS, 12, 4);
        self.put_i32(neighbour, 0x5a5a_5a5a);
        let addr = self.m.alloc(GLOBALS, size, align);
        self.symbols.insert(name.to_owned(), addr);
        addr
    }

    fn globals(&mut self) -> Heads {
        let p = self.p;
        for name in ["MPIR_being_debugged", "MPIR_debug_gate"] {
            let addr = self.global(name, 4, 4);
            self.put_i32(addr, 1);
        }
        let list_size = self.size("MPIR_Comm_list");
        let comm_list = self.global("MPIR_All_communicators", list_size, p);
        let seq = self.off("MPIR_Comm_list", "sequence_number");
        self.put_i32(comm_list + seq, self.spec.sequence_number);
        let single_process = (self.spec.layout == Layout::Ch4Am).then(|| {
            (
                self.global("self_recv_queue", p, p),
                self.global("self_send_queue", p, p),
            )
        });
        let queues = match self.spec.layout {
            Layout::Ch3 => {
                // Static heads in ch3_progress.c / mpid_recvq.c, published through pointers.
                let posted = self.global("recvq_posted_head", p, p);
                let unexpected = self.global("recvq_unexpected_head", p, p);
                let posted_ptr = self.global("MPID_Recvq_posted_head_ptr", p, p);
                self.put_ptr(posted_ptr, posted);
                let unexpected_ptr = self.global("MPID_Recvq_unexpected_head_ptr", p, p);
                self.put_ptr(unexpected_ptr, unexpected);
                let sends = self.global("MPIR_Sendq_head", p, p);
                [posted, unexpected, sends]
            }
            Layout::Ch4Am => {
                let size = self.size("MPIDI_CH4_Global_t");
                let global = self.global("MPIDI_global", size, p);
                let is_initialized = self.off("MPIDI_CH4_Global_t", "is_initialized");
                self.put_i32(global + is_initialized, 1);
                let n_vcis = self.off("MPIDI_CH4_Global_t", "n_vcis");
                self.put_i32(global + n_vcis, 1);
                let vci0 = global + self.off("MPIDI_CH4_Global_t", "per_vci");
                let posted = vci0 + self.off("MPIDI_per_vci_t", "posted_list");
                let unexpected = vci0 + self.off("MPIDI_per_vci_t", "unexp_list");
                let posted_ptr = self.global("MPID_Recvq_posted_head_ptr", p, p);
                self.put_ptr(posted_ptr, posted);
                let unexpected_ptr = self.global("MPID_Recvq_unexpected_head_ptr", p, p);
                self.put_ptr(unexpected_ptr, unexpected);
                let sends = self.global("MPIR_Sendq_head", p, p);
                [posted, unexpected, sends]
            }
            Layout::Debugq4 | Layout::Debugq5 => [
                self.global("MPIR_Recvq_head", p, p),
                self.global("MPIR_Unexpq_head", p, p),
                self.global("MPIR_Sendq_head", p, p),
            ],
        };
        Heads {
            comm_list,
            queues,
            single_process,
        }
    }

    fn comms(&mut self, comm_list: u64) {
        let spec = self.spec;
        let mut slots = HashSet::new();
        for c in &spec.comms {
            assert!(slots.insert(c.slot), "two communicators in slot {}", c.slot);
        }
        let comm_size = self.size("MPIR_Comm");
        assert!(
            comm_size <= COMM_STRIDE,
            "internal: MPIR_Comm ({comm_size}) exceeds its slot"
        );
        if let Some(max) = spec.comms.iter().map(|c| c.slot).max() {
            let base = self.m.alloc(COMMS, (u64::from(max) + 1) * COMM_STRIDE, 64);
            debug_assert_eq!(base, self.index.comm_base);
        }
        let head = self.off("MPIR_Comm_list", "head");
        let first = spec.comms.first().map_or(0, |c| {
            self.index.comm_base + u64::from(c.slot) * COMM_STRIDE
        });
        self.put_ptr(comm_list + head, first);

        let f = |field: &str| self.off("MPIR_Comm", field);
        let (handle, ref_count, context_id, recvcontext_id) = (
            f("handle"),
            f("ref_count"),
            f("context_id"),
            f("recvcontext_id"),
        );
        let (remote_size, rank, local_size, local_group, remote_group) = (
            f("remote_size"),
            f("rank"),
            f("local_size"),
            f("local_group"),
            f("remote_group"),
        );
        let (comm_kind, name, comm_next, errhandler, seq, hints, dev) = (
            f("comm_kind"),
            f("name"),
            f("comm_next"),
            f("errhandler"),
            f("seq"),
            f("hints"),
            f("dev"),
        );
        let device_groups = matches!(spec.layout, Layout::Ch3 | Layout::Ch4Am);
        for (i, c) in spec.comms.iter().enumerate() {
            let addr = self.index.comm_base + u64::from(c.slot) * COMM_STRIDE;
            self.put_i32(addr + handle, c.handle);
            self.put_i32(addr + ref_count, 1);
            self.put_ctx(addr + context_id, c.context_id);
            self.put_ctx(addr + recvcontext_id, c.recvcontext_id);
            self.put_i32(addr + remote_size, c.remote_size);
            self.put_i32(addr + rank, c.rank);
            self.put_i32(addr + local_size, c.local_size);
            self.put_i32(
                addr + comm_kind,
                if c.kind == CommKind::Inter { 1 } else { 0 },
            );
            let mut bytes = c.name.as_bytes()[..c.name.len().min(127)].to_vec();
            bytes.push(0);
            self.m.write(addr + name, &bytes).expect("internal: name");
            // Non-zero neighbours, so that a wrong offset reads something visibly wrong.
            self.put_ptr(addr + errhandler, 0x1400_0000);
            self.put_i32(addr + seq, i as i32);
            for h in 0..8 {
                self.put_i32(addr + hints + 4 * h, -1);
            }
            let next = spec.comms.get(i + 1).map_or(0, |n| {
                self.index.comm_base + u64::from(n.slot) * COMM_STRIDE
            });
            self.put_ptr(addr + comm_next, next);

            let keep_groups = !(self.options.lazy_groups && device_groups);
            if let (Some(g), true) = (&c.local_group, keep_groups) {
                let group = self.group(g, c.rank);
                self.put_ptr(addr + local_group, group);
                self.index.groups.insert((c.slot, GroupSide::Local), group);
            }
            if let (Some(g), true) = (&c.remote_group, keep_groups) {
                let group = self.group(g, MPI_UNDEFINED);
                self.put_ptr(addr + remote_group, group);
                self.index.groups.insert((c.slot, GroupSide::Remote), group);
            }
            // The device's own view: for an intercommunicator the main table is the remote
            // group and the local one is kept aside.
            let (main, aside) = match c.kind {
                CommKind::Intra => (c.local_group.as_deref(), None),
                CommKind::Inter => (c.remote_group.as_deref(), c.local_group.as_deref()),
            };
            match spec.layout {
                Layout::Ch3 => {
                    let d = |field: &str| self.off("MPIDI_CH3I_comm_t", field);
                    let (eager, anysource, last_ack, vcrt, local_vcrt) = (
                        d("eager_max_msg_sz"),
                        d("anysource_enabled"),
                        d("last_ack_rank"),
                        d("vcrt"),
                        d("local_vcrt"),
                    );
                    self.put_i32(addr + dev + eager, 131_072);
                    self.put_i32(addr + dev + anysource, 1);
                    self.put_i32(addr + dev + last_ack, -1);
                    if let Some(g) = main {
                        let table = self.vcrt(g);
                        self.put_ptr(addr + dev + vcrt, table);
                    }
                    if let Some(g) = aside {
                        let table = self.vcrt(g);
                        self.put_ptr(addr + dev + local_vcrt, table);
                    }
                }
                Layout::Ch4Am => {
                    let map = addr + dev + self.off("MPIDI_Devcomm_t", "ch4.map");
                    let local_map = addr + dev + self.off("MPIDI_Devcomm_t", "ch4.local_map");
                    self.rank_map(map, main);
                    self.rank_map(local_map, aside);
                }
                Layout::Debugq4 | Layout::Debugq5 => {}
            }
        }
    }

    fn next_group_handle(&mut self) -> i32 {
        self.group_handles += 1;
        0x8800_0000u32 as i32 | self.group_handles
    }

    /// An `MPIR_Group` over the world ranks `ranks`, in the layout's representation.
    fn group(&mut self, ranks: &[i32], my_rank: i32) -> u64 {
        let size = self.size("MPIR_Group");
        let g = self.m.alloc(GROUPS, size, 16);
        let handle = self.next_group_handle();
        let f = |field: &str| self.off("MPIR_Group", field);
        let (h, rc, sz, rk) = (f("handle"), f("ref_count"), f("size"), f("rank"));
        self.put_i32(g + h, handle);
        self.put_i32(g + rc, 2);
        self.put_i32(g + sz, ranks.len() as i32);
        self.put_i32(g + rk, my_rank);
        let n = ranks.len() as u64;
        if self.spec.layout == Layout::Debugq5 {
            let pmap = self.off("MPIR_Group", "pmap");
            let use_map = g + pmap + self.off("MPIR_Pmap", "use_map");
            let step = if ranks.len() >= 2 {
                ranks[1] - ranks[0]
            } else {
                0
            };
            let progression = step != 0 && ranks.windows(2).all(|w| w[1] - w[0] == step);
            if self.options.pmap == PmapEncoding::Auto && progression {
                let offset = g + pmap + self.off("MPIR_Pmap", "u.stride.offset");
                let stride = g + pmap + self.off("MPIR_Pmap", "u.stride.stride");
                self.put(use_map, 1, 0);
                self.put(offset, 8, lpid(ranks[0]));
                self.put(stride, 8, i64::from(step) as u64);
            } else {
                let map = g + pmap + self.off("MPIR_Pmap", "u.map");
                let lpid_size = self.size("MPIR_Lpid");
                let array = if n == 0 {
                    0
                } else {
                    self.m.alloc(GROUPS, lpid_size * n, 16)
                };
                for (i, &r) in ranks.iter().enumerate() {
                    self.put(array + lpid_size * i as u64, 8, lpid(r));
                }
                self.put(use_map, 1, 1);
                self.put_ptr(map, array);
            }
        } else {
            // lrank_to_lpid, with the next_lpid chain in increasing lpid order.
            let e = self.size("MPII_Group_pmap_t");
            let lpid_at = self.off("MPII_Group_pmap_t", "lpid");
            let next_at = self.off("MPII_Group_pmap_t", "next_lpid");
            let width = if self.spec.layout == Layout::Debugq4 {
                8
            } else {
                4
            };
            let array = if n == 0 {
                0
            } else {
                self.m.alloc(GROUPS, e * n, 16)
            };
            let mut order: Vec<usize> = (0..ranks.len()).collect();
            order.sort_by_key(|&i| ranks[i]);
            for (k, &i) in order.iter().enumerate() {
                let entry = array + e * i as u64;
                self.put(entry + lpid_at, width, i64::from(ranks[i]) as u64);
                let next = order.get(k + 1).map_or(-1, |&j| j as i32);
                self.put_i32(entry + next_at, next);
            }
            let first = order.first().map_or(-1, |&i| i as i32);
            let dense = ranks
                .iter()
                .enumerate()
                .all(|(i, &r)| r == ranks[0] + i as i32);
            let idx = self.off("MPIR_Group", "idx_of_first_lpid");
            let table = self.off("MPIR_Group", "lrank_to_lpid");
            let dense_at = self.off("MPIR_Group", "is_local_dense_monotonic");
            self.put_i32(g + idx, first);
            self.put_ptr(g + table, array);
            self.put_i32(g + dense_at, i32::from(dense));
        }
        g
    }

    /// A ch3 `MPIDI_VC_t` for a world rank, one per rank, shared by every table.
    fn vc(&mut self, world_rank: i32) -> u64 {
        if let Some(&vc) = self.vcs.get(&world_rank) {
            return vc;
        }
        if self.pg == 0 {
            // The process group object: opaque here, but VCs point at it.
            self.pg = self.m.alloc(GROUPS, 64, 16);
            self.put_i32(self.pg, 1);
        }
        let size = self.size("MPIDI_VC_t");
        let vc = self.m.alloc(GROUPS, size, 16);
        let f = |field: &str| self.off("MPIDI_VC_t", field);
        let (handle, ref_count, state, pg, pg_rank, lpid, node_id, eager) = (
            f("handle"),
            f("ref_count"),
            f("state"),
            f("pg"),
            f("pg_rank"),
            f("lpid"),
            f("node_id"),
            f("eager_max_msg_sz"),
        );
        self.put_i32(vc + handle, 0x6c00_0000 | world_rank);
        self.put_i32(vc + ref_count, 1);
        self.put_i32(vc + state, 1);
        self.put_ptr(vc + pg, self.pg);
        self.put_i32(vc + pg_rank, world_rank);
        self.put_i32(vc + lpid, world_rank);
        self.put_i32(vc + node_id, world_rank / 2);
        self.put_i32(vc + eager, 131_072);
        self.vcs.insert(world_rank, vc);
        vc
    }

    /// A ch3 `MPIDI_VCRT` over world ranks (flexible `vcr_table` of VC pointers).
    fn vcrt(&mut self, ranks: &[i32]) -> u64 {
        let table_at = self.off("MPIDI_VCRT", "vcr_table");
        let n = ranks.len() as u64;
        let size = self.size("MPIDI_VCRT").max(table_at + self.p * n);
        let vcrt = self.m.alloc(GROUPS, size, 16);
        let (ref_count, sz) = (
            self.off("MPIDI_VCRT", "ref_count"),
            self.off("MPIDI_VCRT", "size"),
        );
        self.put_i32(vcrt + ref_count, 1);
        self.put_i32(vcrt + sz, n as i32);
        for (i, &r) in ranks.iter().enumerate() {
            let vc = self.vc(r);
            self.put_ptr(vcrt + table_at + self.p * i as u64, vc);
        }
        vcrt
    }

    /// A ch4 `MPIDI_rank_map_t` at `map`: the simplest mode that describes `ranks`, or mode
    /// NONE when the group is unknown.
    fn rank_map(&mut self, map: u64, ranks: Option<&[i32]>) {
        const DIRECT_INTRA: i32 = 1;
        const OFFSET_INTRA: i32 = 3;
        const STRIDE_INTRA: i32 = 5;
        const LUT_INTRA: i32 = 9;
        const NONE: i32 = 11;
        let f = |field: &str| self.off("MPIDI_rank_map_t", field);
        let (mode, avtid, size) = (f("mode"), f("avtid"), f("size"));
        let (reg_offset, stride_offset, stride_stride, stride_blocksize) = (
            f("reg.offset"),
            f("reg.stride.offset"),
            f("reg.stride.stride"),
            f("reg.stride.blocksize"),
        );
        let (lut_t, lut_lpid) = (f("irreg.lut.t"), f("irreg.lut.lpid"));
        let Some(ranks) = ranks else {
            self.put_i32(map + mode, NONE);
            return;
        };
        self.put_i32(map + avtid, 0);
        self.put_i32(map + size, ranks.len() as i32);
        let step = if ranks.len() >= 2 {
            ranks[1] - ranks[0]
        } else {
            1
        };
        let progression = !ranks.is_empty() && ranks.windows(2).all(|w| w[1] - w[0] == step);
        if progression && step == 1 && ranks[0] == 0 {
            self.put_i32(map + mode, DIRECT_INTRA);
        } else if progression && step == 1 {
            self.put_i32(map + mode, OFFSET_INTRA);
            self.put_i32(map + reg_offset, ranks[0]);
        } else if progression && step > 1 {
            self.put_i32(map + mode, STRIDE_INTRA);
            self.put_i32(map + stride_offset, ranks[0]);
            self.put_i32(map + stride_stride, step);
            self.put_i32(map + stride_blocksize, 1);
        } else {
            self.put_i32(map + mode, LUT_INTRA);
            let lpid_at = self.off("MPIDI_rank_map_lut_t", "lpid");
            let lut_size = self
                .size("MPIDI_rank_map_lut_t")
                .max(lpid_at + 4 * ranks.len() as u64);
            let lut = self.m.alloc(GROUPS, lut_size, 16);
            let ref_count = self.off("MPIDI_rank_map_lut_t", "ref_count");
            self.put_i32(lut + ref_count, 1);
            for (i, &r) in ranks.iter().enumerate() {
                self.put_i32(lut + lpid_at + 4 * i as u64, r);
            }
            self.put_ptr(map + lut_t, lut);
            self.put_ptr(map + lut_lpid, lut + lpid_at);
        }
    }

    fn request_offsets(&self) -> RequestOffsets {
        let f = |field: &str| self.off("MPIR_Request", field);
        let id = self
            .t
            .lookup("MPIR_Request")
            .expect("internal: MPIR_Request");
        RequestOffsets {
            size: self.size("MPIR_Request"),
            align: self.t.align_of(id),
            handle: f("handle"),
            ref_count: f("ref_count"),
            kind: f("kind"),
            cc: f("cc"),
            cc_ptr: f("cc_ptr"),
            comm: f("comm"),
            count_lo: f("status.count_lo"),
            count_hi: f("status.count_hi_and_cancelled"),
            source: f("status.MPI_SOURCE"),
            tag: f("status.MPI_TAG"),
            error: f("status.MPI_ERROR"),
            next: f("next"),
            prev: f("prev"),
            dev: f("dev"),
        }
    }

    /// Per queue, context id -> the communicator MPICH's request `comm` would point to:
    /// receives match `recvcontext_id`, sends `context_id` first; unexpected messages have
    /// no communicator yet.
    fn owners(&self) -> [HashMap<i32, u64>; 3] {
        let addr = |c: &super::CommSpec| self.index.comm_base + u64::from(c.slot) * COMM_STRIDE;
        let mut posted = HashMap::new();
        let mut sends = HashMap::new();
        for c in &self.spec.comms {
            posted.entry(c.recvcontext_id).or_insert(addr(c));
        }
        for c in &self.spec.comms {
            sends.entry(c.context_id).or_insert(addr(c));
        }
        for c in &self.spec.comms {
            sends.entry(c.recvcontext_id).or_insert(addr(c));
        }
        [posted, HashMap::new(), sends]
    }

    fn queues(&mut self, heads: &Heads) {
        let spec = self.spec;
        let o = self.request_offsets();
        let queues = [
            (QueueKind::Posted, &spec.posted),
            (QueueKind::Unexpected, &spec.unexpected),
            (QueueKind::Sends, &spec.sends),
        ];
        let total: usize = queues.iter().map(|(_, q)| q.len()).sum();
        let stride = round_up(o.size, o.align.max(8));
        self.m.reserve(REQUESTS, total * stride as usize);
        let node_type = match spec.layout {
            Layout::Ch3 | Layout::Ch4Am => "MPIR_Sendq",
            Layout::Debugq4 | Layout::Debugq5 => "MPIR_Debugq",
        };
        let node_size = round_up(self.size(node_type), 16);
        self.m.reserve(NODES, total * node_size as usize);

        // Allocate every request first, so that links can point forward.
        for (queue, entries) in queues {
            let addrs: Vec<u64> = entries
                .iter()
                .map(|_| self.m.alloc(REQUESTS, o.size, o.align.max(8)))
                .collect();
            self.index.requests[queue.index()] = addrs;
        }
        let ch3 = (spec.layout == Layout::Ch3).then(|| self.ch3_offsets());
        let ch4 = (spec.layout == Layout::Ch4Am).then(|| self.ch4_offsets());
        let owners = self.owners();
        let mut handle = 0;
        for (queue, entries) in queues {
            for (j, e) in entries.iter().enumerate() {
                let req = self.index.requests[queue.index()][j];
                handle += 1;
                let owner = owners[queue.index()]
                    .get(&e.context_id)
                    .copied()
                    .unwrap_or(0);
                self.common_request(&o, req, queue, e, handle, owner);
                if let Some(d) = &ch3 {
                    self.ch3_request(d, req + o.dev, queue, e);
                }
                if let Some(d) = &ch4 {
                    let single = spec.single_process_context(e.context_id);
                    self.ch4_request(d, req + o.dev, queue, e, single);
                }
            }
        }

        match spec.layout {
            Layout::Ch3 | Layout::Ch4Am => {
                // Receive queues: the requests themselves. ch4 keeps those of
                // single-process communicators in queues of their own.
                for queue in [QueueKind::Posted, QueueKind::Unexpected] {
                    let all = self.index.requests[queue.index()].clone();
                    let entries = if queue == QueueKind::Posted {
                        &spec.posted
                    } else {
                        &spec.unexpected
                    };
                    let single = |j: usize| {
                        spec.layout == Layout::Ch4Am
                            && spec.single_process_context(entries[j].context_id)
                    };
                    let reqs: Vec<u64> = (0..all.len())
                        .filter(|&j| !single(j))
                        .map(|j| all[j])
                        .collect();
                    if let Some((self_recv, self_send)) = heads.single_process {
                        let own: Vec<u64> = (0..all.len())
                            .filter(|&j| single(j))
                            .map(|j| all[j])
                            .collect();
                        let head = if queue == QueueKind::Posted {
                            self_recv
                        } else {
                            self_send
                        };
                        self.link_requests(&own, &o, head);
                    }
                    // CH3 links through MPIDI_Request.next up to MPICH 3.x and through
                    // MPIR_Request.next in 4.x; the image keeps both, as a library may
                    // know either.
                    let ch3_link = (spec.layout == Layout::Ch3)
                        .then(|| o.dev + self.off("MPIDI_Request", "next"));
                    for (j, &req) in reqs.iter().enumerate() {
                        let next = reqs.get(j + 1).copied().unwrap_or(0);
                        self.put_ptr(req + o.next, next);
                        if let Some(link) = ch3_link {
                            self.put_ptr(req + link, next);
                        }
                        if spec.layout == Layout::Ch4Am {
                            // utlist's DL lists: the head's prev is the tail.
                            let prev = if j == 0 {
                                *reqs.last().unwrap()
                            } else {
                                reqs[j - 1]
                            };
                            self.put_ptr(req + o.prev, prev);
                        }
                    }
                    self.put_ptr(
                        heads.queues[queue.index()],
                        reqs.first().copied().unwrap_or(0),
                    );
                    self.index.nodes[queue.index()] = reqs;
                }
                self.nodes(QueueKind::Sends, heads.queues[2], &spec.sends);
            }
            Layout::Debugq4 | Layout::Debugq5 => {
                let back = [
                    self.off("MPIR_Request", "recv"),
                    self.off("MPIR_Request", "unexp"),
                    self.off("MPIR_Request", "send"),
                ];
                for (queue, entries) in queues {
                    self.nodes(queue, heads.queues[queue.index()], entries);
                    let (reqs, nodes) = (
                        &self.index.requests[queue.index()],
                        &self.index.nodes[queue.index()],
                    );
                    let pairs: Vec<(u64, u64)> =
                        reqs.iter().copied().zip(nodes.iter().copied()).collect();
                    for (req, node) in pairs {
                        self.put_ptr(req + back[queue.index()], node);
                    }
                }
            }
        }
    }

    /// Links ch4 requests into a utlist DL list (the head's prev is the tail) at `head`.
    fn link_requests(&mut self, reqs: &[u64], o: &RequestOffsets, head: u64) {
        for (j, &req) in reqs.iter().enumerate() {
            self.put_ptr(req + o.next, reqs.get(j + 1).copied().unwrap_or(0));
            let prev = if j == 0 {
                reqs[reqs.len() - 1]
            } else {
                reqs[j - 1]
            };
            self.put_ptr(req + o.prev, prev);
        }
        self.put_ptr(head, reqs.first().copied().unwrap_or(0));
    }

    fn common_request(
        &mut self,
        o: &RequestOffsets,
        req: u64,
        queue: QueueKind,
        e: &RequestSpec,
        handle: u32,
        comm: u64,
    ) {
        self.put_i32(
            req + o.handle,
            (0xac00_0000 | (handle & 0x03ff_ffff)) as i32,
        );
        self.put_i32(req + o.ref_count, 1);
        self.put_i32(req + o.kind, if queue == QueueKind::Sends { 1 } else { 2 });
        self.put_i32(req + o.cc, i32::from(!e.complete));
        self.put_ptr(req + o.cc_ptr, req + o.cc);
        self.put_ptr(req + o.comm, comm);
        if e.complete {
            // MPIR_STATUS_SET_COUNT: low 32 bits, then bits 31.. shifted into the upper word
            // whose lowest bit is the cancelled flag.
            self.put_i32(req + o.count_lo, e.count as i32);
            self.put_i32(req + o.count_hi, ((e.count as u64 >> 31) as i32) & !1);
            self.put_i32(req + o.source, e.status_source);
            self.put_i32(req + o.tag, e.status_tag);
            self.put_i32(req + o.error, 0);
        }
    }

    /// The `MPIR_Sendq` (A, B) or `MPIR_Debugq` (C) list of a queue, newest first, prepended
    /// by hand in MPICH: the head's prev is NULL, the tail's next is NULL.
    fn nodes(&mut self, queue: QueueKind, head: u64, entries: &[RequestSpec]) {
        let debugq = matches!(self.spec.layout, Layout::Debugq4 | Layout::Debugq5);
        let ty = if debugq { "MPIR_Debugq" } else { "MPIR_Sendq" };
        let size = self.size(ty);
        let f = |field: &str| self.off(ty, field);
        let (req_at, tag, rank, ctx, next, prev) = (
            f(if debugq { "req" } else { "sreq" }),
            f("tag"),
            f("rank"),
            f("context_id"),
            f("next"),
            f("prev"),
        );
        let (buf, count) = if debugq {
            (f("buf"), f("count"))
        } else {
            (0, 0)
        };
        let nodes: Vec<u64> = entries
            .iter()
            .map(|_| self.m.alloc(NODES, size, 16))
            .collect();
        for (j, e) in entries.iter().enumerate() {
            let node = nodes[j];
            let req = self.index.requests[queue.index()][j];
            self.put_ptr(node + req_at, req);
            self.put_i32(node + tag, e.tag);
            self.put_i32(node + rank, e.rank);
            self.put_i32(node + ctx, e.context_id);
            if debugq {
                self.put_ptr(node + buf, e.buffer);
                self.put(node + count, self.p, e.count as u64);
            }
            self.put_ptr(node + next, nodes.get(j + 1).copied().unwrap_or(0));
            self.put_ptr(node + prev, if j == 0 { 0 } else { nodes[j - 1] });
        }
        self.put_ptr(head, nodes.first().copied().unwrap_or(0));
        self.index.nodes[queue.index()] = nodes;
    }
}

/// An `MPIR_Lpid` of COMM_WORLD (world index 0 in the high 32 bits).
fn lpid(world_rank: i32) -> u64 {
    u64::from(world_rank as u32)
}
