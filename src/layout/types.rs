//! The layout types discovery fills in, the global symbols it looks for, and what it
//! names as missing when an image lacks something.

use std::ffi::CStr;

/// Width of a scalar field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// The target's `int`.
    Int,
    /// The target's pointer.
    Pointer,
    /// A width known from the type information.
    Bytes(u8),
}

/// A scalar inside a target object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub offset: u32,
    pub width: Width,
}

impl Field {
    pub(crate) fn int(offset: u32) -> Field {
        Field {
            offset,
            width: Width::Int,
        }
    }
    pub(super) fn pointer(offset: u32) -> Field {
        Field {
            offset,
            width: Width::Pointer,
        }
    }
}

/// Which MPICH queue layout an image has (see spec/mpich-layouts.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// Layout A: CH3 device queues of `MPIR_Request`.
    Ch3,
    /// Layout B: CH4 active-message queues of `MPIR_Request`.
    Ch4Am,
    /// Layout C with 16-bit context ids and `lrank_to_lpid` groups (4.0.3–4.3).
    Debugq4,
    /// Layout C with int context ids and `pmap` groups (5.x).
    Debugq5,
}

impl Flavour {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Flavour::Ch3 => "MPICH ch3 device queues",
            Flavour::Ch4Am => "MPICH ch4 active-message queues",
            Flavour::Debugq4 => "MPICH 4.x debug queues",
            Flavour::Debugq5 => "MPICH 5.x debug queues",
        }
    }
}

/// `MPIR_All_communicators`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommListLayout {
    pub sequence_number: Field,
    pub head: Field,
}

/// The fields of `MPIR_Comm` the library reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommLayout {
    pub next: Field,
    pub name: u32,
    pub name_len: u32,
    pub rank: Field,
    /// The size shown: `local_size`, else `remote_size` (see [`Lacks::LOCAL_SIZE`]).
    pub local_size: Field,
    pub remote_size: Option<Field>,
    pub context_id: Field,
    pub recvcontext_id: Field,
    pub kind: Option<Field>,
    pub local_group: Option<Field>,
    pub remote_group: Option<Field>,
    /// CH3: `dev.vcrt` (remote group of an intercommunicator, else the group).
    pub vcrt: Option<Field>,
    /// CH3: `dev.local_vcrt` (local group of an intercommunicator).
    pub local_vcrt: Option<Field>,
    /// CH4: `dev.ch4.map` (remote group of an intercommunicator, else the group).
    pub rank_map: Option<u32>,
    /// CH4: `dev.ch4.local_map` (local group of an intercommunicator).
    pub local_rank_map: Option<u32>,
}

impl CommLayout {
    pub(crate) fn scalars(&self) -> [Option<Field>; 12] {
        [
            Some(self.next),
            Some(self.rank),
            Some(self.local_size),
            self.remote_size,
            Some(self.context_id),
            Some(self.recvcontext_id),
            self.kind,
            self.local_group,
            self.remote_group,
            self.vcrt,
            self.local_vcrt,
            Some(Field {
                offset: self.name,
                width: Width::Bytes(1),
            }),
        ]
    }
}

/// How `MPIR_Group` maps local ranks to process ids.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GroupLayout {
    /// MPICH <= 4.3: an array of `MPII_Group_pmap_t`.
    LrankToLpid {
        size: Field,
        table: Field,
        stride: u32,
        lpid: Field,
    },
    /// MPICH 5.x: `MPIR_Pmap`, either an explicit map or offset + rank * stride.
    Pmap {
        size: Field,
        use_map: u32,
        /// Offset of the union `u`: `map` pointer, or `stride.offset`.
        union_at: u32,
        lpid_width: u8,
    },
}

/// CH4's `MPIDI_rank_map_t`, which maps a communicator's ranks to process ids.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankMapLayout {
    pub mode: Field,
    pub avtid: Field,
    pub size: Field,
    pub offset: Field,
    pub stride: Field,
    pub blocksize: Field,
    pub lut: Field,
}

impl RankMapLayout {
    /// The fields of a map stored at `base` within an object.
    pub(crate) fn fields_at(&self, base: u32) -> [Option<Field>; 7] {
        let at = |f: Field| {
            Some(Field {
                offset: base + f.offset,
                width: f.width,
            })
        };
        [
            at(self.mode),
            at(self.avtid),
            at(self.size),
            at(self.offset),
            at(self.stride),
            at(self.blocksize),
            at(self.lut),
        ]
    }
}

/// CH3's virtual connection tables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VcrtLayout {
    pub size: Field,
    pub table: u32,
    pub vc_lpid: Field,
}

/// The fields of `MPIR_Request` read for completion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestLayout {
    pub cc: Option<Field>,
    pub status_source: Option<Field>,
    pub status_tag: Option<Field>,
    /// `status.count_lo` and `status.count_hi_and_cancelled`: bytes received.
    pub status_count: Option<(Field, Field)>,
}

/// Queues made of requests linked to each other (layouts A and B).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestQueueLayout {
    pub next: Field,
    pub buffer: Field,
    pub count: Field,
    pub rank: Field,
    pub tag: Field,
    pub context_id: Field,
    pub data_size: Option<Field>,
    /// CH3's `dev.state`, whose low two bits say eager, rendezvous or self message.
    pub message_state: Option<Field>,
    /// CH4's `am.req`, the request's extension, and in it the `status` flags that say a
    /// synchronous sender (`MPIDIG_REQ_PEER_SSEND`) or a rendezvous (`MPIDIG_REQ_RTS`).
    pub am_status: Option<AmStatus>,
    /// CH4's `dev.ch4.self`: what a request on a single-process communicator holds, in
    /// place of the AM fields; with it, the self queues are listed too.
    pub self_request: Option<SelfRequestLayout>,
}

/// CH4's `MPIDI_self_request_t` inside a request: communicators of one process (COMM_SELF
/// and every other intracommunicator of size 1) bypass the AM queues.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SelfRequestLayout {
    pub buffer: Field,
    pub count: Field,
    pub tag: Field,
    /// The communicator's `context_id` (an int).
    pub context_id: Field,
}

/// Where CH4 keeps the message state of a request: behind a pointer, in its extension.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AmStatus {
    /// `MPIDIG_req_t.req`, as an offset in the request.
    pub extension: Field,
    /// `MPIDIG_req_ext_t.status` (a `uint64_t`), as an offset in the extension.
    pub status: Field,
}

impl AmStatus {
    /// `MPIDIG_REQ_PEER_SSEND`: the sender waits for the match (MPICH 3.4 to 4.0.2).
    pub const PEER_SSEND: u64 = 1 << 1;
    /// `MPIDIG_REQ_RTS`: a rendezvous, the data still at the sender.
    pub const RTS: u64 = 1 << 7;
}

/// `MPIR_Sendq` nodes (layouts A and B).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendqLayout {
    pub request: Field,
    pub tag: Field,
    pub rank: Field,
    pub context_id: Field,
    pub next: Field,
}

/// `MPIR_Debugq` nodes (layout C).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DebugqLayout {
    pub request: Field,
    pub tag: Field,
    pub rank: Field,
    pub context_id: Field,
    pub buffer: Field,
    pub count: Field,
    pub next: Field,
}

/// Where the queues live and how their elements look.
#[derive(Debug, Clone, Copy)]
pub(crate) enum QueueLayout {
    /// Layouts A and B.
    RequestLists {
        request: RequestQueueLayout,
        sendq: Option<SendqLayout>,
    },
    /// Layout C.
    Debugq(DebugqLayout),
}

/// Optional pieces of MPICH's type information the image (or the debugger) lacks, and so
/// what the library shows less of: each has a documented fallback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lacks(u16);

impl Lacks {
    /// `MPIR_Comm.local_size`: sizes come from `remote_size`, the same on an
    /// intracommunicator; an intercommunicator shows its remote group's size.
    pub const LOCAL_SIZE: Lacks = Lacks(1);
    /// `MPIR_Comm.comm_kind`: intercommunicators are told apart by their two context ids,
    /// which differ unless the peer's happens to equal the local one.
    pub const COMM_KIND: Lacks = Lacks(1 << 1);
    /// Every group source (`MPIR_Group`, ch3's VC tables, ch4's rank maps): world ranks
    /// are known only for COMM_WORLD and single-process communicators.
    pub const GROUPS: Lacks = Lacks(1 << 2);
    /// `MPIR_Request.status` or `MPI_Status`: matched sources and tags of completed
    /// receives are unknown, and unexpected sizes come from the request's own count.
    pub const STATUS: Lacks = Lacks(1 << 3);
    /// `MPIR_Request.cc`: completion is unknown, every entry is shown pending.
    pub const COMPLETION: Lacks = Lacks(1 << 4);
    /// `MPIR_Sendq`: sends are not listed.
    pub const SEND_QUEUE: Lacks = Lacks(1 << 5);
    /// CH3's `MPIDI_Request.state` or CH4's `MPIDIG_req_ext_t.status`: eager, rendezvous
    /// and synchronous messages are not told apart.
    pub const MESSAGE_STATE: Lacks = Lacks(1 << 6);
    /// The debugger answers for types it does not know (a stub with a fixed table, as
    /// MPICH's own tvtest): it is asked only what MPICH's own library asks.
    pub const PARTIAL_DEBUGGER: Lacks = Lacks(1 << 7);
    /// CH4's `MPIDI_self_request_t` or its queues: operations on single-process
    /// communicators are not listed, and their sends show no buffer or count.
    pub const SELF_QUEUES: Lacks = Lacks(1 << 8);

    const ALL: [(Lacks, &'static str); 9] = [
        (
            Lacks::PARTIAL_DEBUGGER,
            "the debugger answers for types it does not know, so only what MPICH's own library needs was asked",
        ),
        (
            Lacks::LOCAL_SIZE,
            "sizes from remote_size (MPIR_Comm.local_size not described)",
        ),
        (
            Lacks::COMM_KIND,
            "intercommunicators told apart by their context ids only (MPIR_Comm.comm_kind not described)",
        ),
        (
            Lacks::GROUPS,
            "world ranks unknown but for COMM_WORLD and single-process communicators (MPIR_Group not described)",
        ),
        (
            Lacks::COMPLETION,
            "completion unknown, every entry shown pending (MPIR_Request.cc not described)",
        ),
        (
            Lacks::STATUS,
            "sources and tags of completed receives unknown (MPI_Status not described)",
        ),
        (
            Lacks::SEND_QUEUE,
            "sends not listed (MPIR_Sendq not described)",
        ),
        (
            Lacks::MESSAGE_STATE,
            "eager, rendezvous and synchronous messages not told apart (the request's message state not described)",
        ),
        (
            Lacks::SELF_QUEUES,
            "operations on single-process communicators not listed (CH4's self queues not described)",
        ),
    ];

    pub(crate) fn insert(&mut self, other: Lacks) {
        self.0 |= other.0;
    }

    pub(crate) fn contains(self, other: Lacks) -> bool {
        self.0 & other.0 == other.0
    }

    /// What each lack costs, in words, most important first.
    pub(crate) fn costs(self) -> impl Iterator<Item = &'static str> {
        Lacks::ALL
            .into_iter()
            .filter(move |(l, _)| self.contains(*l))
            .map(|(_, text)| text)
    }
}

/// Everything the library knows about an image's MPICH.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub flavour: Flavour,
    pub comm_list: CommListLayout,
    pub comm: CommLayout,
    pub group: Option<GroupLayout>,
    pub vcrt: Option<VcrtLayout>,
    pub rank_map: Option<RankMapLayout>,
    pub request: RequestLayout,
    pub queues: QueueLayout,
    /// Where MPICH keeps the process's own state, when the debug information says.
    pub state: StateLayout,
    /// What it shows less of, and why.
    pub lacks: Lacks,
}

/// MPICH's record of the process: `MPIR_Process.mpich_state` (with MPICH 4's
/// `MPIR_world_model_state`) and `MPIR_ThreadInfo.thread_provided`. Neither is asked of a
/// debugger that answers like MPICH's stub.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StateLayout {
    /// `mpich_state` in `MPIR_Process_t`.
    pub phase: Option<Field>,
    /// `thread_provided` in `MPIR_Thread_info_t`.
    pub thread_level: Option<Field>,
    /// MPICH 4's encoding (it has sessions): `mpich_state` returns to 0 after
    /// finalization, which `MPIR_world_model_state` records.
    pub sessions: bool,
}

/// Global symbols of each flavour.
pub(crate) const SYM_ALL_COMMUNICATORS: &CStr = c"MPIR_All_communicators";
pub(crate) const SYM_PROCESS: &CStr = c"MPIR_Process";
pub(crate) const SYM_THREAD_INFO: &CStr = c"MPIR_ThreadInfo";
pub(crate) const SYM_WORLD_MODEL: &CStr = c"MPIR_world_model_state";
pub(crate) const SYM_POSTED_HEAD_PTR: &CStr = c"MPID_Recvq_posted_head_ptr";
pub(crate) const SYM_UNEXPECTED_HEAD_PTR: &CStr = c"MPID_Recvq_unexpected_head_ptr";
pub(crate) const SYM_SENDQ_HEAD: &CStr = c"MPIR_Sendq_head";
pub(crate) const SYM_RECVQ_HEAD: &CStr = c"MPIR_Recvq_head";
pub(crate) const SYM_UNEXPQ_HEAD: &CStr = c"MPIR_Unexpq_head";
/// CH4's queues of single-process communicators: receives posted before their send, and
/// sends not yet received (static variables of `ch4_self.c`).
pub(crate) const SYM_SELF_RECV_QUEUE: &CStr = c"self_recv_queue";
pub(crate) const SYM_SELF_SEND_QUEUE: &CStr = c"self_send_queue";

/// Something the image lacks, named for the has-queues message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    Symbol(&'static CStr),
    Type(&'static CStr),
    Field(&'static CStr, &'static CStr),
    Width(&'static CStr),
    /// Neither of two alternatives (one per MPICH generation or device).
    EitherSymbol(&'static CStr, &'static CStr),
    /// Neither of two alternative types.
    EitherType(&'static CStr, &'static CStr),
    /// Neither of two alternative fields of a type.
    EitherField(&'static CStr, &'static CStr, &'static CStr),
    /// A field the debugger places past any MPICH object: damaged type information.
    Misplaced(&'static CStr, &'static CStr),
}

impl Missing {
    pub(crate) fn error(self) -> crate::error::Error {
        use crate::error::Error;
        match self {
            Missing::Symbol(_) | Missing::EitherSymbol(..) => Error::MissingSymbol,
            Missing::EitherType(..) => Error::MissingType,
            Missing::Type(_) => Error::MissingType,
            Missing::Field(..) | Missing::EitherField(..) => Error::MissingField,
            Missing::Width(_) => Error::UnsupportedWidth,
            Missing::Misplaced(..) => Error::ImplausibleValue,
        }
    }
}
