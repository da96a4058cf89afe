//! Synthetic MPICH processes: real-looking MPICH data structures laid out in a fake address
//! space, with the debug type information a debugger would serve for them.
//!
//! A [`ProcessSpec`] says what the process holds (communicators, posted receives, unexpected
//! messages, pending sends) and which MPICH generation lays it out ([`Layout`]) on which ABI
//! ([`Arch`]: 4- or 8-byte pointers, either byte order). [`SyntheticTarget::build`] computes
//! every C struct layout itself (natural alignment, see `layout.rs`), writes the objects into
//! separate heaps with unmapped holes between them, and serves the result through
//! [`Target`]. Nothing is shared with the DLL's layout code, so a DLL bug cannot be mirrored
//! here.
//!
//! ```
//! use mqd_synthetic::{Arch, CommSpec, Layout, ProcessSpec, RequestSpec, SyntheticTarget};
//! use mqd_target::DebugInfo;
//!
//! let mut spec = ProcessSpec::new(Layout::Debugq5, Arch::LP64_LE);
//! spec.comms = vec![CommSpec::world(4, 1), CommSpec::self_comm(1)];
//! spec.posted = vec![RequestSpec::recv(0, 2, 17, 0x7ffd_0000, 10)];
//! let target = SyntheticTarget::build(&spec);
//! assert!(target.find_symbol("MPIR_Recvq_head").is_some());
//! let debugq = target.find_type("MPIR_Debugq").unwrap();
//! assert_eq!(target.type_size(debugq), Some(56));
//! ```
//!
//! Tests corrupt a built image through the hooks on [`SyntheticTarget`] (`write_*`,
//! `remove_*`) and find objects with its lookups (`comm_address`, `request_node_address`,
//! `group_address`, `offset_of`).

#![deny(missing_docs)]

mod build;
mod layout;
mod memory;
#[cfg(test)]
mod tests;
mod types;

use layout::TypeTable;
use memory::Memory;
use mqd_target::{ByteOrder, DebugInfo, Target, TargetAbi, TargetError, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// `MPI_ANY_SOURCE` in MPICH.
pub const MPI_ANY_SOURCE: i32 = -2;
/// `MPI_ANY_TAG` in MPICH.
pub const MPI_ANY_TAG: i32 = -1;

/// Which generation of MPICH data structures the image holds (see spec/mpich-layouts.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Layout A: ch3 device receive queues (`MPID_Recvq_*_head_ptr`, requests linked through
    /// `dev.next`), `MPIR_Sendq`, 16-bit context ids, `lrank_to_lpid` groups with `int lpid`,
    /// VC reference tables under `MPIR_Comm.dev`.
    Ch3,
    /// Layout B: ch4 active-message queues (`MPID_Recvq_*_head_ptr` pointing into
    /// `MPIDI_global.per_vci[0]`, requests linked through the top-level `MPIR_Request.next`,
    /// match data in `dev.ch4.am`), `MPIR_Sendq`, 16-bit context ids, `lrank_to_lpid` groups
    /// with `int lpid`, rank maps under `MPIR_Comm.dev.ch4`.
    Ch4Am,
    /// Layout C as in MPICH 4.0.3–4.3: `MPIR_Debugq` lists, 16-bit context ids,
    /// `lrank_to_lpid` groups with `uint64_t lpid`.
    Debugq4,
    /// Layout C as in MPICH 5.x: `MPIR_Debugq` lists, `int` context ids, `pmap` groups.
    Debugq5,
}

impl Layout {
    /// Every layout, for tests that run over all of them.
    pub const ALL: [Layout; 4] = [Layout::Ch3, Layout::Ch4Am, Layout::Debugq4, Layout::Debugq5];

    /// A short name: `ch3`, `ch4-am`, `debugq-4.x`, `debugq-5.x`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Ch3 => "ch3",
            Layout::Ch4Am => "ch4-am",
            Layout::Debugq4 => "debugq-4.x",
            Layout::Debugq5 => "debugq-5.x",
        }
    }

    /// `sizeof(MPIR_Context_id_t)` in this layout.
    pub fn context_id_size(self) -> u8 {
        if self == Layout::Debugq5 { 4 } else { 2 }
    }
}

/// The target ABI: pointer width and byte order. `long` is as wide as a pointer; every
/// scalar aligns to its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch {
    /// `sizeof(void *)`: 4 or 8.
    pub pointer_size: u8,
    /// Byte order of scalars.
    pub byte_order: ByteOrder,
}

impl Arch {
    /// 64-bit little-endian (x86-64, aarch64).
    pub const LP64_LE: Arch = Arch {
        pointer_size: 8,
        byte_order: ByteOrder::Little,
    };
    /// 32-bit little-endian (i386-like, with natural alignment of 8-byte scalars).
    pub const ILP32_LE: Arch = Arch {
        pointer_size: 4,
        byte_order: ByteOrder::Little,
    };
    /// 64-bit big-endian (ppc64, s390x).
    pub const LP64_BE: Arch = Arch {
        pointer_size: 8,
        byte_order: ByteOrder::Big,
    };
    /// 32-bit big-endian.
    pub const ILP32_BE: Arch = Arch {
        pointer_size: 4,
        byte_order: ByteOrder::Big,
    };
    /// The four combinations, for tests that run over all of them.
    pub const ALL: [Arch; 4] = [Arch::LP64_LE, Arch::ILP32_LE, Arch::LP64_BE, Arch::ILP32_BE];

    /// `LP64 little-endian`, `ILP32 big-endian`, ...
    pub fn name(self) -> String {
        let model = if self.pointer_size == 8 {
            "LP64"
        } else {
            "ILP32"
        };
        let order = match self.byte_order {
            ByteOrder::Little => "little-endian",
            ByteOrder::Big => "big-endian",
        };
        format!("{model} {order}")
    }
}

/// Intra- or intercommunicator (`MPIR_Comm.comm_kind`: 0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommKind {
    /// `MPIR_COMM_KIND__INTRACOMM` (0).
    Intra,
    /// `MPIR_COMM_KIND__INTERCOMM` (1).
    Inter,
}

/// One communicator of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommSpec {
    /// Fixes the address of the `MPIR_Comm`: the same slot gives the same address in every
    /// build of the same layout and arch, so a rebuilt image keeps communicator identities.
    /// Slots must be distinct within a spec.
    pub slot: u32,
    /// `MPIR_Comm.handle`.
    pub handle: i32,
    /// `MPIR_Comm.name`; at most 127 bytes are stored (then a NUL), longer names are cut.
    pub name: String,
    /// `MPIR_Comm.rank`: this process's rank in the (local) group.
    pub rank: i32,
    /// `MPIR_Comm.local_size`.
    pub local_size: i32,
    /// `MPIR_Comm.remote_size` (equal to `local_size` for an intracommunicator).
    pub remote_size: i32,
    /// `MPIR_Comm.context_id` (truncated to 16 bits where `MPIR_Context_id_t` is 16 bits).
    pub context_id: i32,
    /// `MPIR_Comm.recvcontext_id` (equal to `context_id` for an intracommunicator).
    pub recvcontext_id: i32,
    /// `MPIR_Comm.comm_kind`.
    pub kind: CommKind,
    /// COMM_WORLD ranks of the local group, rank order; `None` leaves `local_group` NULL
    /// (and, in layouts A and B, the device's mapping empty too).
    pub local_group: Option<Vec<i32>>,
    /// COMM_WORLD ranks of the remote group of an intercommunicator; `None` leaves
    /// `remote_group` NULL.
    pub remote_group: Option<Vec<i32>>,
}

impl CommSpec {
    /// `MPI_COMM_WORLD` of `size` processes seen from world rank `rank`: slot 0, handle
    /// 0x44000000, context id 0, group `0..size`.
    pub fn world(size: i32, rank: i32) -> CommSpec {
        CommSpec {
            slot: 0,
            handle: 0x4400_0000,
            name: "MPI_COMM_WORLD".into(),
            rank,
            local_size: size,
            remote_size: size,
            context_id: 0,
            recvcontext_id: 0,
            kind: CommKind::Intra,
            local_group: Some((0..size).collect()),
            remote_group: None,
        }
    }

    /// `MPI_COMM_SELF` of the process with COMM_WORLD rank `world_rank`: slot 1, handle
    /// 0x44000001, context id 16, group `[world_rank]`.
    pub fn self_comm(world_rank: i32) -> CommSpec {
        CommSpec {
            slot: 1,
            handle: 0x4400_0001,
            name: "MPI_COMM_SELF".into(),
            rank: 0,
            local_size: 1,
            remote_size: 1,
            context_id: 16,
            recvcontext_id: 16,
            kind: CommKind::Intra,
            local_group: Some(vec![world_rank]),
            remote_group: None,
        }
    }

    /// A user intracommunicator over the COMM_WORLD ranks `group`, in which this process has
    /// rank `rank`; handle `0x84000000 | slot`.
    pub fn intra(slot: u32, name: &str, context_id: i32, rank: i32, group: Vec<i32>) -> CommSpec {
        let size = group.len() as i32;
        CommSpec {
            slot,
            handle: 0x8400_0000u32 as i32 | slot as i32,
            name: name.into(),
            rank,
            local_size: size,
            remote_size: size,
            context_id,
            recvcontext_id: context_id,
            kind: CommKind::Intra,
            local_group: Some(group),
            remote_group: None,
        }
    }

    /// A user intercommunicator: sends use `context_id`, receives match `recvcontext_id`.
    pub fn inter(
        slot: u32,
        name: &str,
        context_id: i32,
        recvcontext_id: i32,
        rank: i32,
        local: Vec<i32>,
        remote: Vec<i32>,
    ) -> CommSpec {
        CommSpec {
            slot,
            handle: 0x8400_0000u32 as i32 | slot as i32,
            name: name.into(),
            rank,
            local_size: local.len() as i32,
            remote_size: remote.len() as i32,
            context_id,
            recvcontext_id,
            kind: CommKind::Inter,
            local_group: Some(local),
            remote_group: Some(remote),
        }
    }
}

/// One queue entry: a posted receive, an unexpected message or a pending send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    /// Context id the entry records (a receiver's `recvcontext_id`, a sender's context id).
    pub context_id: i32,
    /// Source (receives; [`MPI_ANY_SOURCE`] allowed), sender (unexpected) or destination
    /// (sends), as a rank of the communicator.
    pub rank: i32,
    /// Tag; [`MPI_ANY_TAG`] allowed for receives.
    pub tag: i32,
    /// User buffer address (stored pointer-wide).
    pub buffer: u64,
    /// Element count (stored as `MPI_Aint`, pointer-wide).
    pub count: i64,
    /// Completion counter `cc` is 0 (complete) rather than 1.
    pub complete: bool,
    /// `status.MPI_SOURCE`, written only when complete.
    pub status_source: i32,
    /// `status.MPI_TAG`, written only when complete.
    pub status_tag: i32,
    /// The message came from a synchronous send (`MPI_Ssend`/`MPI_Issend`): CH3 marks
    /// its unexpected request so (bit 3 of `dev.state`).
    pub synchronous: bool,
}

impl RequestSpec {
    /// A pending receive.
    pub fn recv(context_id: i32, rank: i32, tag: i32, buffer: u64, count: i64) -> RequestSpec {
        RequestSpec {
            context_id,
            rank,
            tag,
            buffer,
            count,
            complete: false,
            status_source: 0,
            status_tag: 0,
            synchronous: false,
        }
    }

    /// An unexpected message from `rank` (buffer NULL, as MPICH records them).
    pub fn unexpected(context_id: i32, rank: i32, tag: i32, count: i64) -> RequestSpec {
        RequestSpec {
            context_id,
            rank,
            tag,
            buffer: 0,
            count,
            complete: false,
            status_source: rank,
            status_tag: tag,
            synchronous: false,
        }
    }

    /// A pending send to `rank`.
    pub fn send(context_id: i32, rank: i32, tag: i32, buffer: u64, count: i64) -> RequestSpec {
        RequestSpec::recv(context_id, rank, tag, buffer, count)
    }

    /// The same entry, sent by a synchronous send.
    pub fn synchronous(mut self) -> RequestSpec {
        self.synchronous = true;
        self
    }

    /// The same entry, completed (`cc` 0) with the given status source and tag.
    pub fn completed(mut self, status_source: i32, status_tag: i32) -> RequestSpec {
        self.complete = true;
        self.status_source = status_source;
        self.status_tag = status_tag;
        self
    }
}

/// Everything one synthetic process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// MPICH generation.
    pub layout: Layout,
    /// Target ABI.
    pub arch: Arch,
    /// `MPIR_All_communicators.sequence_number`.
    pub sequence_number: i32,
    /// Communicators; element 0 is the head of `MPIR_All_communicators` (newest first).
    pub comms: Vec<CommSpec>,
    /// Posted receives; element 0 is the head of the list in memory.
    pub posted: Vec<RequestSpec>,
    /// Unexpected messages; element 0 is the head of the list in memory.
    pub unexpected: Vec<RequestSpec>,
    /// Pending sends; element 0 is the head of the list in memory.
    pub sends: Vec<RequestSpec>,
}

impl ProcessSpec {
    /// An empty process (no communicators, no queue entries, sequence number 0).
    pub fn new(layout: Layout, arch: Arch) -> ProcessSpec {
        ProcessSpec {
            layout,
            arch,
            sequence_number: 0,
            comms: Vec::new(),
            posted: Vec::new(),
            unexpected: Vec::new(),
            sends: Vec::new(),
        }
    }

    /// Whether `context` is a single-process intracommunicator's (whose traffic ch4 keeps
    /// in its self queues).
    pub fn single_process_context(&self, context: i32) -> bool {
        self.comms
            .iter()
            .any(|c| c.kind == CommKind::Intra && c.remote_size == 1 && c.recvcontext_id == context)
    }

    /// World rank 1 of 4 with a bit of everything: COMM_WORLD (slot 0), COMM_SELF (1), a dup
    /// of world (2, context 480; `local_group` NULL except in 5.x), an even/odd split (3,
    /// group `[1, 3]`, context 496) and an intercommunicator (4, local `[1, 3]`, remote
    /// `[0, 2]`, contexts 512/528); wildcard and completed receives, unexpected messages,
    /// sends, on several communicators.
    pub fn example(layout: Layout, arch: Arch) -> ProcessSpec {
        let mut dup = CommSpec::intra(2, "Dup of comm world", 480, 1, (0..4).collect());
        if layout != Layout::Debugq5 {
            dup.local_group = None;
        }
        ProcessSpec {
            layout,
            arch,
            sequence_number: 5,
            comms: vec![
                CommSpec::inter(4, "inter", 512, 528, 0, vec![1, 3], vec![0, 2]),
                CommSpec::intra(3, "split", 496, 0, vec![1, 3]),
                dup,
                CommSpec::self_comm(1),
                CommSpec::world(4, 1),
            ],
            posted: vec![
                RequestSpec::recv(528, 1, 5, 0x7ffd_1000, 3),
                RequestSpec::recv(480, MPI_ANY_SOURCE, 19, 0x7ffd_2000, 10),
                RequestSpec::recv(480, 2, 17, 0x7ffd_3000, 10),
                RequestSpec::recv(0, 0, MPI_ANY_TAG, 0x7ffd_4000, 1 << 33).completed(0, 77),
            ],
            unexpected: vec![
                RequestSpec::unexpected(496, 1, 7, 16),
                RequestSpec::unexpected(0, 3, 42, 4).completed(3, 42),
            ],
            sends: vec![
                RequestSpec::send(512, 0, 9, 0x7ffd_5000, 3),
                RequestSpec::send(0, 0, 18, 0x7ffd_6000, 100),
            ],
        }
    }

    /// A big image for benchmarks: COMM_WORLD of 64 (rank 0) plus `comms - 1` user
    /// intracommunicators over the same group (context id `4 * i` for communicator `i`), and
    /// `requests` queue entries spread round-robin over the communicators: half posted
    /// receives, a quarter unexpected messages, the rest sends; some wildcards and completed
    /// ones among them.
    ///
    /// # Panics
    /// If `comms` is 0, or too many for the 16-bit context ids of layouts A, B and C-4.x.
    pub fn big_queue(layout: Layout, arch: Arch, comms: usize, requests: usize) -> ProcessSpec {
        assert!(comms >= 1, "big_queue needs at least COMM_WORLD");
        assert!(
            layout == Layout::Debugq5 || comms * 4 <= 0x1_0000,
            "too many communicators for 16-bit context ids"
        );
        let mut spec = ProcessSpec::new(layout, arch);
        spec.sequence_number = comms as i32;
        spec.comms.push(CommSpec::world(64, 0));
        for i in 1..comms {
            let name = format!("big {i}");
            spec.comms.push(CommSpec::intra(
                i as u32,
                &name,
                4 * i as i32,
                0,
                (0..64).collect(),
            ));
        }
        let ctx = |j: usize| 4 * (j % comms) as i32;
        let posted = requests / 2;
        let unexpected = requests / 4;
        let sends = requests - posted - unexpected;
        spec.posted = (0..posted)
            .map(|j| {
                let rank = if j % 7 == 3 {
                    MPI_ANY_SOURCE
                } else {
                    (j % 64) as i32
                };
                let tag = if j % 11 == 5 {
                    MPI_ANY_TAG
                } else {
                    (j % 1000) as i32
                };
                let r = RequestSpec::recv(
                    ctx(j),
                    rank,
                    tag,
                    0x1000_0000 + 64 * j as u64,
                    (j % 100) as i64,
                );
                if j % 13 == 0 {
                    r.completed((j % 64) as i32, (j % 1000) as i32)
                } else {
                    r
                }
            })
            .collect();
        spec.unexpected = (0..unexpected)
            .map(|j| {
                RequestSpec::unexpected(ctx(j), (j % 64) as i32, (j % 1000) as i32, (j % 50) as i64)
            })
            .collect();
        spec.sends = (0..sends)
            .map(|j| {
                RequestSpec::send(
                    ctx(j),
                    (j % 64) as i32,
                    (j % 1000) as i32,
                    0x2000_0000 + 64 * j as u64,
                    8,
                )
            })
            .collect();
        spec
    }

    /// Builds the image (same as [`SyntheticTarget::build`]).
    pub fn build(&self) -> SyntheticTarget {
        SyntheticTarget::build(self)
    }
}

/// How MPICH 5.x groups encode their `pmap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PmapEncoding {
    /// The stride form (`use_map` false, `u.stride`) when the ranks form an arithmetic
    /// progression of at least 2 with a non-zero step, else the `u.map` array.
    #[default]
    Auto,
    /// Always `use_map` true with a `u.map` array.
    Map,
}

/// Build choices that are not part of what the process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BuildOptions {
    /// Encoding of 5.x groups.
    pub pmap: PmapEncoding,
    /// Layouts A and B: leave `MPIR_Comm.local_group`/`remote_group` NULL even when the spec
    /// gives the groups, keeping them only in the device's mapping (ch3 VC reference tables,
    /// ch4 rank maps), as MPICH does until `MPI_Comm_group` is called. No effect in C layouts.
    pub lazy_groups: bool,
}

/// A queue of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// Posted receives.
    Posted,
    /// Unexpected messages.
    Unexpected,
    /// Pending sends.
    Sends,
}

impl QueueKind {
    fn index(self) -> usize {
        match self {
            QueueKind::Posted => 0,
            QueueKind::Unexpected => 1,
            QueueKind::Sends => 2,
        }
    }
}

/// Which group of a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupSide {
    /// `MPIR_Comm.local_group`.
    Local,
    /// `MPIR_Comm.remote_group`.
    Remote,
}

/// Addresses of what the build placed, for the lookups.
#[derive(Debug, Default)]
struct Index {
    comm_base: u64,
    comm_stride: u64,
    groups: HashMap<(u32, GroupSide), u64>,
    /// The `MPIR_Request` of each entry, per [`QueueKind::index`].
    requests: [Vec<u64>; 3],
    /// The object holding each entry's next link, per [`QueueKind::index`].
    nodes: [Vec<u64>; 3],
    unmapped: u64,
}

/// A built synthetic MPICH process; implements [`Target`]. Cheap to clone (memory regions
/// are shared until written).
#[derive(Clone)]
pub struct SyntheticTarget {
    layout: Layout,
    arch: Arch,
    world_rank: Option<i32>,
    memory: Memory,
    types: TypeTable,
    symbols: HashMap<String, u64>,
    functions: HashMap<String, u64>,
    index: Arc<Index>,
}

impl fmt::Debug for SyntheticTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyntheticTarget")
            .field("name", &self.name())
            .field("regions", &self.memory.extents())
            .field("symbols", &self.symbols)
            .finish_non_exhaustive()
    }
}

impl SyntheticTarget {
    /// Lays out `spec` with default [`BuildOptions`].
    ///
    /// # Panics
    /// On a spec that cannot be laid out: two communicators with the same slot, or far more
    /// objects than the address plan holds (millions of communicator slots).
    pub fn build(spec: &ProcessSpec) -> SyntheticTarget {
        SyntheticTarget::build_with(spec, &BuildOptions::default())
    }

    /// Lays out `spec` with the given options. Panics as [`SyntheticTarget::build`].
    pub fn build_with(spec: &ProcessSpec, options: &BuildOptions) -> SyntheticTarget {
        build::build(spec, options)
    }

    /// The layout this image was built with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The ABI this image was built for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Address of the `MPIR_Comm` of the communicator in `slot` (a pure function of the slot,
    /// layout and arch; unmapped if no heap covers the slot).
    pub fn comm_address(&self, slot: u32) -> u64 {
        self.index.comm_base + u64::from(slot) * self.index.comm_stride
    }

    /// Address of the `index`-th `MPIR_Request` of a queue (0 = head).
    pub fn request_address(&self, queue: QueueKind, index: usize) -> Option<u64> {
        self.index.requests[queue.index()].get(index).copied()
    }

    /// Address of the object that holds the next link of the `index`-th entry of a queue:
    /// the `MPIR_Request` for receive queues of layouts A and B, the `MPIR_Sendq` node for
    /// their sends, the `MPIR_Debugq` node in layout C.
    pub fn request_node_address(&self, queue: QueueKind, index: usize) -> Option<u64> {
        self.index.nodes[queue.index()].get(index).copied()
    }

    /// Address of the `MPIR_Group` of a communicator, `None` when it was left NULL.
    pub fn group_address(&self, slot: u32, side: GroupSide) -> Option<u64> {
        self.index.groups.get(&(slot, side)).copied()
    }

    /// The bytes its memory maps.
    pub fn mapped_bytes(&self) -> u64 {
        self.memory.extents().iter().map(|&(_, len)| len).sum()
    }

    /// An address that no region maps (in a hole between two heaps; fits in 32 bits on
    /// 4-byte-pointer targets).
    pub fn unmapped_address(&self) -> u64 {
        self.index.unmapped
    }

    /// Offset of `field` (a member name or a dotted path) in the type named `ty`.
    ///
    /// # Panics
    /// If the type or field is not (or no longer) in the table.
    pub fn offset_of(&self, ty: &str, field: &str) -> u64 {
        self.types
            .offset_by_name(ty, field)
            .unwrap_or_else(|| panic!("synthetic {}: no field {ty}.{field}", self.layout.name()))
    }

    /// `sizeof` the type named `ty`.
    ///
    /// # Panics
    /// If the type is not (or no longer) in the table.
    pub fn size_of(&self, ty: &str) -> u64 {
        self.types
            .size_by_name(ty)
            .unwrap_or_else(|| panic!("synthetic {}: no type {ty}", self.layout.name()))
    }

    /// Every type name the table serves, sorted.
    pub fn type_names(&self) -> Vec<String> {
        self.types.names()
    }

    /// The direct members of the type named `ty` (through typedefs) with their offsets.
    pub fn members_of(&self, ty: &str) -> Vec<(String, u64)> {
        self.types.members(ty)
    }

    /// Every global variable symbol, sorted.
    pub fn symbol_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.symbols.keys().cloned().collect();
        names.sort();
        names
    }

    /// Every function symbol, sorted.
    pub fn function_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.functions.keys().cloned().collect();
        names.sort();
        names
    }

    /// Overwrites target memory (all or nothing; fails on unmapped bytes).
    pub fn write_bytes(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TargetError> {
        self.memory.write(addr, bytes)
    }

    /// Writes a pointer-wide value in the target byte order (the low bytes on 4-byte targets).
    pub fn write_pointer(&mut self, addr: u64, value: u64) -> Result<(), TargetError> {
        self.memory.write_pointer(addr, value)
    }

    /// Writes a 4-byte `int`.
    pub fn write_i32(&mut self, addr: u64, value: i32) -> Result<(), TargetError> {
        self.memory.write_uint(addr, 4, u64::from(value as u32))
    }

    /// Writes a 2-byte integer.
    pub fn write_u16(&mut self, addr: u64, value: u16) -> Result<(), TargetError> {
        self.memory.write_uint(addr, 2, u64::from(value))
    }

    /// Writes an 8-byte integer.
    pub fn write_i64(&mut self, addr: u64, value: i64) -> Result<(), TargetError> {
        self.memory.write_uint(addr, 8, value as u64)
    }

    /// Reads a pointer-wide value.
    pub fn read_pointer(&self, addr: u64) -> Result<u64, TargetError> {
        self.memory
            .read_uint(addr, usize::from(self.arch.pointer_size))
    }

    /// Reads a 4-byte `int`.
    pub fn read_i32(&self, addr: u64) -> Result<i32, TargetError> {
        Ok(self.memory.read_uint(addr, 4)? as u32 as i32)
    }

    /// Removes a global variable or function symbol; returns whether it existed.
    pub fn remove_symbol(&mut self, name: &str) -> bool {
        let symbol = self.symbols.remove(name).is_some();
        let function = self.functions.remove(name).is_some();
        symbol || function
    }

    /// Adds (or moves) a global variable symbol.
    pub fn add_symbol(&mut self, name: &str, addr: u64) {
        self.symbols.insert(name.to_owned(), addr);
    }

    /// Stops serving the type named `name`; returns whether it was served.
    pub fn remove_type(&mut self, name: &str) -> bool {
        self.types.remove_type(name)
    }

    /// Serves the type named `from` as `to` instead (e.g. `MPIR_Comm` as the pre-3.3 name
    /// `MPID_Comm`); returns whether `from` was served.
    pub fn rename_type(&mut self, from: &str, to: &str) -> bool {
        self.types.rename_type(from, to)
    }

    /// Moves a direct member of the type named `ty` to `offset`; returns whether it existed.
    pub fn set_member_offset(&mut self, ty: &str, field: &str, offset: u64) -> bool {
        self.types.set_member_offset(ty, field, offset)
    }

    /// Makes the type named `ty` `size` bytes; returns whether it was served.
    pub fn set_type_size(&mut self, ty: &str, size: u64) -> bool {
        self.types.set_size(ty, size)
    }

    /// Removes a direct member of the type named `ty`; returns whether it existed.
    pub fn remove_field(&mut self, ty: &str, field: &str) -> bool {
        self.types.remove_field(ty, field)
    }
}

impl mqd_target::Memory for SyntheticTarget {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.memory.read(addr, buf)
    }
}

impl DebugInfo for SyntheticTarget {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        self.functions.get(name).copied()
    }

    fn find_type(&self, name: &str) -> Option<TypeId> {
        self.types.lookup(name).map(TypeId)
    }

    fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.types.size(ty.0)
    }

    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        self.types.field_offset(ty.0, field)
    }

    fn abi(&self) -> TargetAbi {
        let p = self.arch.pointer_size;
        TargetAbi {
            short: 2,
            int: 4,
            long: p,
            long_long: 8,
            pointer: p,
        }
    }

    fn byte_order(&self) -> ByteOrder {
        self.arch.byte_order
    }
}

impl Target for SyntheticTarget {
    fn name(&self) -> String {
        let mut name = format!("synthetic {} {}", self.layout.name(), self.arch.name());
        if let Some(rank) = self.world_rank {
            name.push_str(&format!(" rank {rank}"));
        }
        name
    }
}
