//! Layout rules, byte order, holes, and a walk by an independent tiny reader that knows only
//! the served type names and the target memory.

use super::layout::TypeTable;
use super::*;
use mqd_target::{ByteOrder, DebugInfo, Memory, Target, TargetError};

// ---------------------------------------------------------------------------------------
// Layout rules.

#[test]
fn natural_alignment_for_both_widths() {
    for p in [4u64, 8] {
        let mut t = TypeTable::new(p);
        let c = t.scalar("char", 1);
        let s = t.scalar("short", 2);
        let i = t.scalar("int", 4);
        let l = t.scalar("long", p);
        let ll = t.scalar("long long", 8);
        let ptr = t.pointer();

        // char, int64, short: the 8-byte scalar aligns to 8 on both widths (natural rule).
        let a = t.structure(Some("a"), &[("c", c), ("x", ll), ("s", s)]);
        assert_eq!(t.field_offset(a, "c"), Some(0));
        assert_eq!(t.field_offset(a, "x"), Some(8));
        assert_eq!(t.field_offset(a, "s"), Some(16));
        assert_eq!(t.size(a), Some(24));
        assert_eq!(t.align_of(a), 8);

        // int then pointer: padding only where the pointer is 8 bytes.
        let b = t.structure(Some("b"), &[("i", i), ("p", ptr), ("l", l)]);
        assert_eq!(t.field_offset(b, "p"), Some(p));
        assert_eq!(t.field_offset(b, "l"), Some(2 * p));
        assert_eq!(t.size(b), Some(3 * p));

        // Tail padding to the struct's alignment.
        let d = t.structure(Some("d"), &[("c1", c), ("s", s), ("c2", c)]);
        assert_eq!(t.field_offset(d, "s"), Some(2));
        assert_eq!(t.field_offset(d, "c2"), Some(4));
        assert_eq!(t.size(d), Some(6));
        let e = t.structure(Some("e"), &[("p", ptr), ("c", c)]);
        assert_eq!(t.size(e), Some(2 * p));

        // Unions: size of the largest member rounded to the strictest alignment.
        let five = t.array(c, 5);
        let u = t.union(Some("u"), &[("bytes", five), ("i", i)]);
        assert_eq!(t.size(u), Some(8));
        assert_eq!(t.field_offset(u, "i"), Some(0));

        // Nested aggregates align to their own alignment; dotted paths add up.
        let outer = t.structure(Some("outer"), &[("c", c), ("inner", a), ("tail", s)]);
        assert_eq!(t.field_offset(outer, "inner"), Some(8));
        assert_eq!(t.field_offset(outer, "inner.s"), Some(24));
        assert_eq!(t.field_offset(outer, "tail"), Some(32));
        assert_eq!(t.size(outer), Some(40));
        assert_eq!(t.field_offset(outer, "inner.nope"), None);
        assert_eq!(t.field_offset(outer, "c.x"), None);

        // A flexible array member adds alignment but no size.
        let flex = t.array(ptr, 0);
        let f = t.structure(Some("f"), &[("a", i), ("b", i), ("n", i), ("table", flex)]);
        assert_eq!(
            t.field_offset(f, "table"),
            Some(if p == 8 { 16 } else { 12 })
        );
        assert_eq!(t.size(f), Some(if p == 8 { 16 } else { 12 }));

        // Typedefs resolve for sizes and members.
        let td = t.typedef("a_t", a);
        assert_eq!(t.size(td), Some(24));
        assert_eq!(t.field_offset(td, "s"), Some(16));
    }
}

#[test]
fn spec_offsets_of_debug_queue_and_comm_list() {
    // mpich-layouts.md quotes MPIR_Debugq on LP64: 0, 8, 12, 16, 24, 32, 40, 48; 56 bytes.
    let t = Layout::Debugq5.build_empty(Arch::LP64_LE);
    let fields = [
        "req",
        "tag",
        "rank",
        "context_id",
        "buf",
        "count",
        "next",
        "prev",
    ];
    let lp64: Vec<u64> = fields
        .iter()
        .map(|f| t.offset_of("MPIR_Debugq", f))
        .collect();
    assert_eq!(lp64, [0, 8, 12, 16, 24, 32, 40, 48]);
    assert_eq!(t.size_of("MPIR_Debugq"), 56);
    assert_eq!(t.offset_of("MPIR_Comm_list", "head"), 8);
    let t = Layout::Debugq4.build_empty(Arch::ILP32_BE);
    let ilp32: Vec<u64> = fields
        .iter()
        .map(|f| t.offset_of("MPIR_Debugq", f))
        .collect();
    assert_eq!(ilp32, [0, 4, 8, 12, 16, 20, 24, 28]);
    assert_eq!(t.size_of("MPIR_Debugq"), 32);
    assert_eq!(t.offset_of("MPIR_Comm_list", "head"), 4);
}

#[test]
fn typedef_sizes_per_layout() {
    for arch in Arch::ALL {
        let p = u64::from(arch.pointer_size);
        for layout in Layout::ALL {
            let t = layout.build_empty(arch);
            assert_eq!(
                t.size_of("MPIR_Context_id_t"),
                u64::from(layout.context_id_size())
            );
            assert_eq!(t.size_of("MPI_Aint"), p);
            assert_eq!(t.size_of("MPI_Status"), 20);
            assert!(t.size_of("MPIR_Comm") <= 0x400);
            // No field-order accidents: nothing the DLL reads sits at offset 0 but handle.
            assert_ne!(t.offset_of("MPIR_Comm", "name"), 0);
            assert_ne!(t.offset_of("MPIR_Request", "cc"), 0);
            assert_eq!(t.offset_of("MPIR_Comm", "handle"), 0);
        }
        let t = Layout::Ch3.build_empty(arch);
        assert_eq!(t.size_of("MPIDI_Rank_t"), 2);
        assert_eq!(t.size_of("MPII_Group_pmap_t"), 8);
        assert_eq!(t.size_of("MPIDI_Message_match"), 8);
        assert_eq!(
            t.offset_of("MPIDI_VCRT", "vcr_table"),
            if p == 8 { 16 } else { 12 }
        );
        let t = Layout::Debugq4.build_empty(arch);
        assert_eq!(t.size_of("MPII_Group_pmap_t"), 16);
        let t = Layout::Debugq5.build_empty(arch);
        assert_eq!(t.size_of("MPIR_Lpid"), 8);
        assert_eq!(t.offset_of("MPIR_Pmap", "u"), 8);
        assert_eq!(t.size_of("MPIR_Pmap"), 24);
        assert!(t.find_type("MPII_Group_pmap_t").is_none());
    }
}

impl Layout {
    fn build_empty(self, arch: Arch) -> SyntheticTarget {
        SyntheticTarget::build(&ProcessSpec::new(self, arch))
    }
}

// ---------------------------------------------------------------------------------------
// Memory: byte order, holes, hooks.

#[test]
fn scalars_follow_the_byte_order() {
    for arch in Arch::ALL {
        let mut spec = ProcessSpec::new(Layout::Debugq5, arch);
        spec.sequence_number = 0x0102_0304;
        let mut t = spec.build();
        let list = t.find_symbol("MPIR_All_communicators").unwrap();
        let mut bytes = [0u8; 4];
        t.read_memory(list, &mut bytes).unwrap();
        let expected = match arch.byte_order {
            ByteOrder::Little => [4, 3, 2, 1],
            ByteOrder::Big => [1, 2, 3, 4],
        };
        assert_eq!(bytes, expected, "{}", t.name());

        let p = usize::from(arch.pointer_size);
        t.write_pointer(list, 0x1122_3344_5566_7788).unwrap();
        let mut raw = vec![0u8; p];
        t.read_memory(list, &mut raw).unwrap();
        let want: Vec<u8> = match (arch.byte_order, p) {
            (ByteOrder::Little, 8) => vec![0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11],
            (ByteOrder::Big, 8) => vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88],
            (ByteOrder::Little, _) => vec![0x88, 0x77, 0x66, 0x55],
            (ByteOrder::Big, _) => vec![0x55, 0x66, 0x77, 0x88],
        };
        assert_eq!(raw, want);
        t.write_u16(list, 0xfffe).unwrap();
        let mut two = [0u8; 2];
        t.read_memory(list, &mut two).unwrap();
        let want = if arch.byte_order == ByteOrder::Big {
            [0xff, 0xfe]
        } else {
            [0xfe, 0xff]
        };
        assert_eq!(two, want);
        t.write_i32(list, -2).unwrap();
        assert_eq!(t.read_i32(list), Ok(-2));
    }
}

#[test]
fn reads_across_holes_fail() {
    for arch in Arch::ALL {
        let t = ProcessSpec::example(Layout::Ch3, arch).build();
        let hole = t.unmapped_address();
        let mut one = [0u8; 1];
        assert_eq!(
            t.read_memory(hole, &mut one),
            Err(TargetError::Unmapped { addr: hole, len: 1 })
        );
        assert!(t.read_memory(0, &mut one).is_err());
        assert!(t.read_memory(u64::MAX, &mut [0u8; 2]).is_err());
        if arch.pointer_size == 4 {
            assert!(hole <= u64::from(u32::MAX));
            for (base, len) in t.memory.extents() {
                assert!(base + len <= u64::from(u32::MAX));
            }
        }
        for (base, len) in t.memory.extents() {
            if len == 0 {
                continue;
            }
            let mut all = vec![0u8; len as usize];
            assert!(t.read_memory(base, &mut all).is_ok());
            // One byte before and one byte after each region are holes.
            assert!(t.read_memory(base - 1, &mut one).is_err());
            assert!(t.read_memory(base + len, &mut one).is_err());
            // A read that starts inside and ends outside fails as a whole.
            let mut two = [0u8; 2];
            assert!(matches!(
                t.read_memory(base + len - 1, &mut two),
                Err(TargetError::Unmapped { .. })
            ));
            assert!(t.read_memory(base - 1, &mut two).is_err());
        }
        assert!(!t.memory.touches_mapping(hole, 1));
        let mut t = t;
        assert!(t.write_bytes(hole, &[1]).is_err());
        assert!(t.write_i32(0, 1).is_err());
    }
}

#[test]
fn hooks_and_lookups() {
    let spec = ProcessSpec::example(Layout::Debugq5, Arch::LP64_LE);
    let mut t = spec.build();
    assert_eq!(t.name(), "synthetic debugq-5.x LP64 little-endian rank 1");
    assert_eq!(
        Layout::Ch3.build_empty(Arch::ILP32_BE).name(),
        "synthetic ch3 ILP32 big-endian"
    );
    let sizes = t.abi();
    assert_eq!(
        (
            sizes.short,
            sizes.int,
            sizes.long,
            sizes.long_long,
            sizes.pointer
        ),
        (2, 4, 8, 8, 8)
    );
    assert!(t.find_function("MPII_Wait_for_debugger").is_some());
    // The same slot gives the same address across builds, whatever else changed.
    let mut other = spec.clone();
    other.comms.remove(0);
    other.posted.clear();
    let rebuilt = other.build();
    for c in &other.comms {
        assert_eq!(rebuilt.comm_address(c.slot), t.comm_address(c.slot));
    }
    assert!(t.group_address(4, GroupSide::Remote).is_some());
    assert!(t.group_address(0, GroupSide::Remote).is_none());
    let node = t.request_node_address(QueueKind::Posted, 1).unwrap();
    let next = t.offset_of("MPIR_Debugq", "next");
    assert_eq!(
        t.read_pointer(node + next),
        Ok(t.request_node_address(QueueKind::Posted, 2).unwrap())
    );
    assert_eq!(t.request_node_address(QueueKind::Posted, 4), None);

    let clone = t.clone();
    t.write_pointer(node + next, node).unwrap();
    assert_eq!(t.read_pointer(node + next), Ok(node));
    assert_ne!(
        clone.read_pointer(node + next),
        Ok(node),
        "clones do not share writes"
    );

    assert!(t.remove_symbol("MPIR_Unexpq_head"));
    assert!(t.find_symbol("MPIR_Unexpq_head").is_none());
    assert!(t.remove_symbol("MPII_Wait_for_debugger"));
    assert!(t.find_function("MPII_Wait_for_debugger").is_none());
    assert!(t.remove_field("MPIR_Request", "cc"));
    let req = t.find_type("MPIR_Request").unwrap();
    assert!(t.field_offset(req, "cc").is_none());
    assert!(t.field_offset(req, "status").is_some());
    assert!(t.rename_type("MPIR_Comm", "MPID_Comm"));
    assert!(t.find_type("MPIR_Comm").is_none() && t.find_type("MPID_Comm").is_some());
    assert!(t.remove_type("MPIR_Debugq"));
    assert!(t.find_type("MPIR_Debugq").is_none());
    assert!(!t.remove_type("MPIR_Debugq"));
}

// ---------------------------------------------------------------------------------------
// The independent reader: names and memory only.

struct Reader<'a> {
    t: &'a SyntheticTarget,
    p: usize,
}

/// A queue entry as decoded (context id as the 32-bit value read, rank sign-extended).
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    context_id: i32,
    rank: i32,
    tag: i32,
    buffer: u64,
    count: i64,
    complete: bool,
    status: Option<(i32, i32, i64)>,
}

#[derive(Debug, PartialEq, Eq)]
struct Comm {
    addr: u64,
    name: String,
    rank: i32,
    local_size: i32,
    remote_size: i32,
    context_id: i32,
    recvcontext_id: i32,
    inter: bool,
    local_group: Option<Vec<i32>>,
    remote_group: Option<Vec<i32>>,
}

impl Reader<'_> {
    fn new(t: &SyntheticTarget) -> Reader<'_> {
        Reader {
            t,
            p: usize::from(t.abi().pointer),
        }
    }
    fn off(&self, ty: &str, field: &str) -> u64 {
        let id = self.t.find_type(ty).unwrap_or_else(|| panic!("type {ty}"));
        self.t
            .field_offset(id, field)
            .unwrap_or_else(|| panic!("{ty}.{field}"))
    }
    fn size(&self, ty: &str) -> u64 {
        self.t.type_size(self.t.find_type(ty).unwrap()).unwrap()
    }
    fn uint(&self, addr: u64, width: usize) -> u64 {
        let mut buf = [0u8; 8];
        self.t.read_memory(addr, &mut buf[..width]).unwrap();
        let b = &buf[..width];
        match self.t.byte_order() {
            ByteOrder::Little => b.iter().rev().fold(0, |v, &x| v << 8 | u64::from(x)),
            ByteOrder::Big => b.iter().fold(0, |v, &x| v << 8 | u64::from(x)),
        }
    }
    fn signed(&self, addr: u64, width: usize) -> i64 {
        let shift = 64 - 8 * width as u32;
        ((self.uint(addr, width) << shift) as i64) >> shift
    }
    fn int(&self, addr: u64) -> i32 {
        self.signed(addr, 4) as i32
    }
    fn ptr(&self, addr: u64) -> u64 {
        self.uint(addr, self.p)
    }
    fn ctx(&self, addr: u64) -> i32 {
        let width = self.size("MPIR_Context_id_t") as usize;
        self.uint(addr, width) as u32 as i32
    }

    fn comms(&self) -> (i32, Vec<Comm>) {
        let list = self.t.find_symbol("MPIR_All_communicators").unwrap();
        let seq = self.int(list + self.off("MPIR_Comm_list", "sequence_number"));
        let mut addr = self.ptr(list + self.off("MPIR_Comm_list", "head"));
        let mut out = Vec::new();
        while addr != 0 {
            let f = |field: &str| addr + self.off("MPIR_Comm", field);
            let mut name = vec![0u8; 128];
            self.t.read_memory(f("name"), &mut name).unwrap();
            let len = name.iter().position(|&b| b == 0).unwrap();
            out.push(Comm {
                addr,
                name: String::from_utf8(name[..len].to_vec()).unwrap(),
                rank: self.int(f("rank")),
                local_size: self.int(f("local_size")),
                remote_size: self.int(f("remote_size")),
                context_id: self.ctx(f("context_id")),
                recvcontext_id: self.ctx(f("recvcontext_id")),
                inter: self.int(f("comm_kind")) == 1,
                local_group: self.group(self.ptr(f("local_group"))),
                remote_group: self.group(self.ptr(f("remote_group"))),
            });
            addr = self.ptr(f("comm_next"));
        }
        (seq, out)
    }

    fn group(&self, g: u64) -> Option<Vec<i32>> {
        if g == 0 {
            return None;
        }
        let n = self.int(g + self.off("MPIR_Group", "size")) as u64;
        if self.t.find_type("MPIR_Pmap").is_some() {
            let pmap = g + self.off("MPIR_Group", "pmap");
            let use_map = self.uint(pmap + self.off("MPIR_Pmap", "use_map"), 1) != 0;
            let u = pmap + self.off("MPIR_Pmap", "u");
            let lpid = self.size("MPIR_Lpid");
            let lpids: Vec<u64> = if use_map {
                let map = self.ptr(u);
                (0..n).map(|r| self.uint(map + r * lpid, 8)).collect()
            } else {
                // The unnamed stride struct: two MPIR_Lpid in a row.
                let (offset, stride) = (self.uint(u, 8), self.uint(u + lpid, 8));
                (0..n)
                    .map(|r| offset.wrapping_add(r.wrapping_mul(stride)))
                    .collect()
            };
            assert!(lpids.iter().all(|l| l >> 32 == 0), "world index 0");
            Some(lpids.into_iter().map(|l| l as u32 as i32).collect())
        } else {
            let table = self.ptr(g + self.off("MPIR_Group", "lrank_to_lpid"));
            let e = self.size("MPII_Group_pmap_t");
            let width = if e >= 16 { 8 } else { 4 };
            let at = self.off("MPII_Group_pmap_t", "lpid");
            let ranks: Vec<i32> = (0..n)
                .map(|r| self.signed(table + r * e + at, width) as i32)
                .collect();
            // The next_lpid chain visits the ranks in increasing lpid order.
            let mut i = self.int(g + self.off("MPIR_Group", "idx_of_first_lpid"));
            let mut seen = Vec::new();
            while i >= 0 {
                seen.push(ranks[i as usize]);
                i = self.int(table + i as u64 * e + self.off("MPII_Group_pmap_t", "next_lpid"));
            }
            let mut sorted = ranks.clone();
            sorted.sort();
            assert_eq!(seen, sorted);
            Some(ranks)
        }
    }

    fn status(&self, req: u64) -> (bool, Option<(i32, i32, i64)>) {
        let cc = self.int(req + self.off("MPIR_Request", "cc"));
        if cc != 0 {
            return (false, None);
        }
        let st = req + self.off("MPIR_Request", "status");
        let lo = self.int(st + self.off("MPI_Status", "count_lo")) as u32 as i64;
        let hi = i64::from(self.int(st + self.off("MPI_Status", "count_hi_and_cancelled")) & !1);
        let source = self.int(st + self.off("MPI_Status", "MPI_SOURCE"));
        let tag = self.int(st + self.off("MPI_Status", "MPI_TAG"));
        (true, Some((source, tag, lo | hi << 31)))
    }

    /// A list of nodes starting at the pointer stored at `head`, linked at `next`.
    fn list(&self, head: u64, next: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut node = self.ptr(head);
        while node != 0 {
            assert!(out.len() < 1_000_000, "cycle");
            out.push(node);
            node = self.ptr(node + next);
        }
        out
    }

    fn debugq(&self, symbol: &str) -> Vec<Entry> {
        let head = self.t.find_symbol(symbol).unwrap();
        let nodes = self.list(head, self.off("MPIR_Debugq", "next"));
        let mut prev = 0;
        nodes
            .iter()
            .map(|&n| {
                let f = |field: &str| n + self.off("MPIR_Debugq", field);
                assert_eq!(self.ptr(f("prev")), prev);
                prev = n;
                let req = self.ptr(f("req"));
                let (complete, status) = self.status(req);
                Entry {
                    context_id: self.int(f("context_id")),
                    rank: self.int(f("rank")),
                    tag: self.int(f("tag")),
                    buffer: self.ptr(f("buf")),
                    count: self.signed(f("count"), self.size("MPI_Aint") as usize),
                    complete,
                    status,
                }
            })
            .collect()
    }

    /// ch3: request + dev + match + parts + field, chained through named types.
    fn ch3_recvq(&self, symbol: &str) -> Vec<Entry> {
        let head = self.ptr(self.t.find_symbol(symbol).unwrap());
        let dev = self.off("MPIR_Request", "dev");
        let parts =
            dev + self.off("MPIDI_Request", "match") + self.off("MPIDI_Message_match", "parts");
        let pf = |field: &str| parts + self.off("MPIDI_Message_match_parts_t", field);
        self.list(head, dev + self.off("MPIDI_Request", "next"))
            .iter()
            .map(|&r| {
                let (complete, status) = self.status(r);
                let (buffer, count) = self.ch3_buffer(r);
                Entry {
                    context_id: self.ctx(r + pf("context_id")),
                    rank: self.signed(r + pf("rank"), self.size("MPIDI_Rank_t") as usize) as i32,
                    tag: self.int(r + pf("tag")),
                    buffer,
                    count,
                    complete,
                    status,
                }
            })
            .collect()
    }

    fn ch3_buffer(&self, r: u64) -> (u64, i64) {
        let dev = r + self.off("MPIR_Request", "dev");
        let aint = self.size("MPI_Aint") as usize;
        (
            self.ptr(dev + self.off("MPIDI_Request", "user_buf")),
            self.signed(dev + self.off("MPIDI_Request", "user_count"), aint),
        )
    }

    /// ch4: the AM fields live in unnamed types, reached by dotted paths.
    fn ch4_recvq(&self, symbol: &str) -> Vec<Entry> {
        let head = self.ptr(self.t.find_symbol(symbol).unwrap());
        let nodes = self.list(head, self.off("MPIR_Request", "next"));
        if let Some(&first) = nodes.first() {
            assert_eq!(
                self.ptr(first + self.off("MPIR_Request", "prev")),
                *nodes.last().unwrap()
            );
        }
        nodes
            .iter()
            .map(|&r| {
                let am = r + self.off("MPIR_Request", "dev") + self.off("MPIDI_Devreq_t", "ch4.am");
                let f = |field: &str| am + self.off("MPIDIG_req_t", field);
                let (complete, status) = self.status(r);
                let (buffer, count) = self.ch4_buffer(r);
                Entry {
                    context_id: self.ctx(f("u.recv.context_id")),
                    rank: self.int(f("u.recv.source")),
                    tag: self.int(f("u.recv.tag")),
                    buffer,
                    count,
                    complete,
                    status,
                }
            })
            .collect()
    }

    fn ch4_buffer(&self, r: u64) -> (u64, i64) {
        let am = r + self.off("MPIR_Request", "dev") + self.off("MPIDI_Devreq_t", "ch4.am");
        let aint = self.size("MPI_Aint") as usize;
        (
            self.ptr(am + self.off("MPIDIG_req_t", "buffer")),
            self.signed(am + self.off("MPIDIG_req_t", "count"), aint),
        )
    }

    fn sendq(&self, ch3: bool) -> Vec<Entry> {
        let head = self.t.find_symbol("MPIR_Sendq_head").unwrap();
        self.list(head, self.off("MPIR_Sendq", "next"))
            .iter()
            .map(|&n| {
                let f = |field: &str| n + self.off("MPIR_Sendq", field);
                let req = self.ptr(f("sreq"));
                let (complete, status) = self.status(req);
                let (buffer, count) = if ch3 {
                    self.ch3_buffer(req)
                } else {
                    self.ch4_buffer(req)
                };
                Entry {
                    context_id: self.int(f("context_id")),
                    rank: self.int(f("rank")),
                    tag: self.int(f("tag")),
                    buffer,
                    count,
                    complete,
                    status,
                }
            })
            .collect()
    }

    fn queues(&self) -> [Vec<Entry>; 3] {
        match self.t.layout() {
            Layout::Ch3 => [
                self.ch3_recvq("MPID_Recvq_posted_head_ptr"),
                self.ch3_recvq("MPID_Recvq_unexpected_head_ptr"),
                self.sendq(true),
            ],
            Layout::Ch4Am => [
                self.ch4_recvq("MPID_Recvq_posted_head_ptr"),
                self.ch4_recvq("MPID_Recvq_unexpected_head_ptr"),
                self.sendq(false),
            ],
            Layout::Debugq4 | Layout::Debugq5 => [
                self.debugq("MPIR_Recvq_head"),
                self.debugq("MPIR_Unexpq_head"),
                self.debugq("MPIR_Sendq_head"),
            ],
        }
    }
}

/// What the reader should find for a spec entry, after the layout's narrowing.
fn expected(spec: &ProcessSpec, e: &RequestSpec, through_comm_ctx: bool) -> Entry {
    let p = u32::from(spec.arch.pointer_size);
    let narrow = |v: i64| if p == 4 { v as i32 as i64 } else { v };
    let ctx = if through_comm_ctx && spec.layout.context_id_size() == 2 {
        e.context_id as u16 as i32
    } else {
        e.context_id
    };
    Entry {
        context_id: ctx,
        rank: e.rank,
        tag: e.tag,
        buffer: if p == 4 {
            e.buffer as u32 as u64
        } else {
            e.buffer
        },
        count: narrow(e.count),
        complete: e.complete,
        status: e
            .complete
            .then_some((e.status_source, e.status_tag, e.count)),
    }
}

fn check_walk(spec: &ProcessSpec) {
    let t = spec.build();
    let r = Reader::new(&t);
    let (seq, comms) = r.comms();
    assert_eq!(seq, spec.sequence_number);
    let want: Vec<Comm> = spec
        .comms
        .iter()
        .map(|c| Comm {
            addr: t.comm_address(c.slot),
            name: c.name.clone(),
            rank: c.rank,
            local_size: c.local_size,
            remote_size: c.remote_size,
            context_id: c.context_id,
            recvcontext_id: c.recvcontext_id,
            inter: c.kind == CommKind::Inter,
            local_group: c.local_group.clone(),
            remote_group: c.remote_group.clone(),
        })
        .collect();
    assert_eq!(comms, want, "{}", t.name());
    let [posted, unexpected, sends] = r.queues();
    // Receive-queue entries of layouts A and B keep the context id in MPIR_Context_id_t.
    let narrow_rx = matches!(spec.layout, Layout::Ch3 | Layout::Ch4Am);
    let want = |q: &[RequestSpec], narrow| {
        q.iter()
            .map(|e| expected(spec, e, narrow))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        posted,
        want(&spec.posted, narrow_rx),
        "posted, {}",
        t.name()
    );
    assert_eq!(
        unexpected,
        want(&spec.unexpected, narrow_rx),
        "unexpected, {}",
        t.name()
    );
    assert_eq!(sends, want(&spec.sends, false), "sends, {}", t.name());
    for (q, kind) in [
        (&spec.posted, QueueKind::Posted),
        (&spec.unexpected, QueueKind::Unexpected),
        (&spec.sends, QueueKind::Sends),
    ] {
        for i in 0..q.len() {
            assert!(t.request_node_address(kind, i).is_some());
            assert!(t.request_address(kind, i).is_some());
        }
    }
}

#[test]
fn independent_walk_finds_the_specs_for_every_layout_and_arch() {
    for layout in Layout::ALL {
        for arch in Arch::ALL {
            check_walk(&ProcessSpec::example(layout, arch));
            check_walk(&ProcessSpec::new(layout, arch));
            check_walk(&ProcessSpec::big_queue(layout, arch, 5, 200));
        }
    }
}

#[test]
fn both_pmap_forms_are_used() {
    let spec = ProcessSpec::example(Layout::Debugq5, Arch::LP64_BE);
    for options in [
        BuildOptions::default(),
        BuildOptions {
            pmap: PmapEncoding::Map,
            ..Default::default()
        },
    ] {
        let t = SyntheticTarget::build_with(&spec, &options);
        let use_map = t.offset_of("MPIR_Group", "pmap") + t.offset_of("MPIR_Pmap", "use_map");
        let flag = |slot| {
            let mut b = [0u8; 1];
            t.read_memory(
                t.group_address(slot, GroupSide::Local).unwrap() + use_map,
                &mut b,
            )
            .unwrap();
            b[0]
        };
        // World 0..4 is a progression, COMM_SELF has one member.
        let auto = options.pmap == PmapEncoding::Auto;
        assert_eq!(flag(0), if auto { 0 } else { 1 });
        assert_eq!(flag(1), 1);
        let r = Reader::new(&t);
        assert_eq!(
            r.comms().1.last().unwrap().local_group,
            Some(vec![0, 1, 2, 3])
        );
    }
}

#[test]
fn device_mappings_and_lazy_groups() {
    let lazy = BuildOptions {
        lazy_groups: true,
        ..Default::default()
    };
    for arch in Arch::ALL {
        // ch3: vcrt = main group, local_vcrt = local group of an intercommunicator.
        let spec = ProcessSpec::example(Layout::Ch3, arch);
        let t = SyntheticTarget::build_with(&spec, &lazy);
        let r = Reader::new(&t);
        assert!(t.group_address(0, GroupSide::Local).is_none());
        let vcrt = |slot: u32, field: &str| {
            let table = r.ptr(
                t.comm_address(slot)
                    + r.off("MPIR_Comm", "dev")
                    + r.off("MPIDI_CH3I_comm_t", field),
            );
            if table == 0 {
                return None;
            }
            let n = r.int(table + r.off("MPIDI_VCRT", "size")) as u64;
            let slots = table + r.off("MPIDI_VCRT", "vcr_table");
            Some(
                (0..n)
                    .map(|i| r.int(r.ptr(slots + i * r.p as u64) + r.off("MPIDI_VC_t", "lpid")))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(vcrt(0, "vcrt"), Some(vec![0, 1, 2, 3]));
        assert_eq!(vcrt(0, "local_vcrt"), None);
        assert_eq!(
            vcrt(2, "vcrt"),
            None,
            "a NULL group in the spec leaves the vcrt NULL"
        );
        assert_eq!(vcrt(4, "vcrt"), Some(vec![0, 2]));
        assert_eq!(vcrt(4, "local_vcrt"), Some(vec![1, 3]));
        assert!(
            r.comms()
                .1
                .iter()
                .all(|c| c.local_group.is_none() && c.remote_group.is_none())
        );

        // ch4: rank maps, through the unnamed `ch4` struct.
        let mut spec = ProcessSpec::example(Layout::Ch4Am, arch);
        spec.comms
            .push(CommSpec::intra(9, "odd order", 600, 1, vec![3, 0, 2]));
        let t = SyntheticTarget::build_with(&spec, &lazy);
        let r = Reader::new(&t);
        let map = |slot: u32, field: &str| {
            let m =
                t.comm_address(slot) + r.off("MPIR_Comm", "dev") + r.off("MPIDI_Devcomm_t", field);
            let f = |name: &str| m + r.off("MPIDI_rank_map_t", name);
            let (mode, n) = (r.int(f("mode")), r.int(f("size")));
            let ranks: Vec<i32> = (0..n)
                .map(|i| match mode {
                    1 => i,
                    3 => i + r.int(f("reg.offset")),
                    5 => r.int(f("reg.stride.offset")) + i * r.int(f("reg.stride.stride")),
                    9 => r.int(r.ptr(f("irreg.lut.lpid")) + 4 * i as u64),
                    other => panic!("mode {other}"),
                })
                .collect();
            (mode, ranks)
        };
        assert_eq!(map(0, "ch4.map"), (1, vec![0, 1, 2, 3]));
        assert_eq!(map(1, "ch4.map"), (3, vec![1]));
        assert_eq!(map(3, "ch4.map"), (5, vec![1, 3]));
        assert_eq!(map(9, "ch4.map"), (9, vec![3, 0, 2]));
        assert_eq!(map(4, "ch4.local_map"), (5, vec![1, 3]));
        assert_eq!(map(2, "ch4.map"), (11, vec![]));
    }
}

#[test]
fn big_queue_builds_quickly() {
    let start = std::time::Instant::now();
    let spec = ProcessSpec::big_queue(Layout::Debugq5, Arch::LP64_LE, 64, 100_000);
    let t = spec.build();
    assert!(t.request_node_address(QueueKind::Posted, 49_999).is_some());
    assert!(t.request_node_address(QueueKind::Posted, 50_000).is_none());
    assert!(start.elapsed().as_secs() < 20);
    let r = Reader::new(&t);
    assert_eq!(
        r.list(
            t.find_symbol("MPIR_Sendq_head").unwrap(),
            r.off("MPIR_Debugq", "next")
        )
        .len(),
        25_000
    );
}
