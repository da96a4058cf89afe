//! Per-process state and the walks of MPICH's lists.
//!
//! One display is `mqs_update_communicator_list` followed by the iterators. The
//! communicator list is rebuilt only when MPICH's `sequence_number` moved
//! ([`communicators`]); each global queue is walked at most once per display, its
//! elements bucketed by the communicator they belong to ([`queues`]), so a display costs
//! O(queue length) reads however many communicators there are; groups come from MPICH's
//! group and device tables ([`groups`]); [`describe`] turns an element into an
//! `mqs_pending_operation`.

mod communicators;
mod describe;
mod groups;
mod queues;

use crate::callbacks::ProcessServices;
use crate::debugger::DebuggerVec;
use crate::error::{Error, Result};
use crate::layout::{
    AmStatus, CommLayout, Field, Flavour, GroupLayout, Layout, QueueLayout, Width,
};
use crate::target::{Block, ListGuard, Sizes, Target};
use mqd_abi::notes::{ALL_DATA_ARRIVED, SenderNote};
use mqd_abi::types::{
    mqs_communicator, mqs_op_class, mqs_pending_operation, mqs_process_callbacks, mqs_status,
};
use std::ffi::{c_char, c_int};
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
    /// CH4: the variables holding the first receive and the first send of the queues of
    /// single-process communicators.
    pub self_queues: Option<(u64, u64)>,
    /// Where MPICH records the process's phase and thread level.
    pub state: StateAddresses,
}

/// `MPIR_Process` and `MPIR_ThreadInfo`, when the layout says where their fields are, and
/// MPICH 4's `MPIR_world_model_state`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StateAddresses {
    pub process: Option<u64>,
    pub thread_info: Option<u64>,
    pub world_model: Option<u64>,
}

/// The phase (0 before `MPI_Init`, 1 inside it, 2 initialized, 3 finalized, -1 unknown)
/// from MPICH 4's `mpich_state` (0 uninitialized, 1 initializing, 2 initialized) and
/// `MPIR_world_model_state` (0, 1 initialized, 2 finalized; -1 unread).
fn phase_with_sessions(state: i64, world: i64) -> i64 {
    match (state, world) {
        (_, 2) => 3,
        // Initialized, or inside MPI_Finalize after MPICH's teardown.
        (2, _) | (0, 1) => 2,
        (1, _) => 1,
        (0, 0) => 0,
        // A 0 without the world model: before MPI_Init or after MPI_Finalize.
        _ => -1,
    }
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

impl Comm {
    /// CH4 routes a single-process intracommunicator's traffic through its self queues.
    fn single_process(&self) -> bool {
        self.size == 1 && !self.inter
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
    /// CH4: from a queue of a single-process communicator, where the count is the
    /// sender's element count and the buffer its send buffer.
    single_process: bool,
    /// A message of a collective's own algorithm (context id + 1).
    collective: bool,
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

/// `mqs_op_class`, converted at the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpClass {
    /// `mqs_pending_sends`.
    PendingSends,
    /// `mqs_pending_receives`.
    PendingReceives,
    /// `mqs_unexpected_messages`.
    UnexpectedMessages,
}

impl OpClass {
    /// The class of a C value; anything else is [`Error::BadOpClass`].
    pub(crate) fn from_c(class: c_int) -> Result<OpClass> {
        match class {
            c if c == mqs_op_class::mqs_pending_sends as c_int => Ok(OpClass::PendingSends),
            c if c == mqs_op_class::mqs_pending_receives as c_int => Ok(OpClass::PendingReceives),
            c if c == mqs_op_class::mqs_unexpected_messages as c_int => {
                Ok(OpClass::UnexpectedMessages)
            }
            _ => Err(Error::BadOpClass),
        }
    }

    /// Its slot among the per-display snapshots.
    fn index(self) -> usize {
        match self {
            OpClass::PendingSends => 0,
            OpClass::PendingReceives => 1,
            OpClass::UnexpectedMessages => 2,
        }
    }
}

/// Where the operation iterator stands.
#[derive(Clone, Copy)]
struct OperationCursor {
    class: OpClass,
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
    pub message: [c_char; 1024],
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
            message: [0; 1024],
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
        out.unique_id = c.address as mqd_abi::types::mqs_taddr_t;
        out.local_rank = c.local_rank as mqd_abi::types::mqs_tword_t;
        out.size = c.size as mqd_abi::types::mqs_tword_t;
        out.name = c.name;
        Ok(())
    }

    /// mqd's extension: MPICH's phase of the process (0 before `MPI_Init`, 1 inside it,
    /// 2 initialized, 3 finalized) and its thread level, each -1 when unknown; `None` when
    /// neither is. Before MPICH 4, `mpich_state` is that phase. From MPICH 4 (sessions) it
    /// is 0 before initialization and again after finalization, 1 while initializing, 2
    /// initialized, and `MPIR_world_model_state` (0, 1 initialized, 2 finalized) tells
    /// the two zeros apart; without it a 0 is unknown.
    pub(crate) fn mpi_state(&self, services: &dyn ProcessServices) -> Result<Option<(i64, i64)>> {
        let (layout, addresses) = self.ready()?;
        let target = Target {
            services,
            sizes: self.sizes,
        };
        let read = |at: Option<u64>, field: Option<Field>, max: i64| -> Result<i64> {
            let (Some(base), Some(field)) = (at, field) else {
                return Ok(-1);
            };
            let mut bytes = [0u8; 8];
            let len = self.sizes.bytes(field.width);
            let buf = bytes.get_mut(..len).ok_or(Error::UnsupportedWidth)?;
            target.fetch(offset_address(base, u64::from(field.offset))?, buf)?;
            let value = target.signed(buf)?;
            // Anything else is corrupt memory: unknown, not a phase.
            Ok(if (0..=max).contains(&value) {
                value
            } else {
                -1
            })
        };
        let at = addresses.state;
        let level = read(at.thread_info, layout.state.thread_level, 3)?;
        let phase = if layout.state.sessions {
            let state = read(at.process, layout.state.phase, 2)?;
            let world = read(at.world_model, Some(Field::int(0)), 2)?;
            phase_with_sessions(state, world)
        } else {
            read(at.process, layout.state.phase, 3)?
        };
        Ok((phase >= 0 || level >= 0).then_some((phase, level)))
    }

    /// mqd's extension: the current communicator's context ids (send, receive).
    pub(crate) fn context_ids(&self) -> Result<(i64, i64)> {
        let c = self.current()?;
        Ok((c.context_id, c.recvcontext_id))
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
        services: &dyn ProcessServices,
        class: OpClass,
    ) -> Result<bool> {
        self.operations = None;
        let comm = self.comm_cursor;
        self.current()?;
        if self.snapshots[class.index()].display != self.display {
            let outcome = self.walk(services, class);
            let snapshot = &mut self.snapshots[class.index()];
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
        let snapshot = &self.snapshots[class.index()];
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

    /// `mqs_next_operation`: `Ok(false)` at the end of the list.
    pub(crate) fn next_operation(&mut self, out: &mut mqs_pending_operation) -> Result<bool> {
        let mut cursor = self.operations.ok_or(Error::NoOperationIterator)?;
        if cursor.next >= cursor.end {
            return Ok(false);
        }
        let flavour = self.layout.map(|l| l.flavour).ok_or(Error::NoQueues)?;
        let entry = *self.snapshots[cursor.class.index()]
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

    /// The COMM_WORLD rank of a peer of `comm` (-1 when unknown).
    fn world_rank(&self, comm: &Comm, rank: i64) -> i64 {
        let group = if comm.inter { comm.remote } else { comm.local };
        if !group.known || rank < 0 || rank >= i64::from(group.len) {
            return -1;
        }
        let world = self.ranks.as_slice()[group.start as usize + rank as usize];
        i64::from(world)
    }
}

/// `base + offset` for a target pointer; a wrap is a corrupt pointer.
fn offset_address(base: u64, offset: u64) -> Result<u64> {
    base.checked_add(offset).ok_or(Error::ReadFailed)
}

#[cfg(test)]
mod tests {
    use super::phase_with_sessions;

    #[test]
    fn mpich_4_phases() {
        // Finalized: the world model says so, whatever mpich_state went back to.
        assert_eq!(phase_with_sessions(0, 2), 3);
        assert_eq!(phase_with_sessions(2, 2), 3);
        assert_eq!(phase_with_sessions(2, 1), 2);
        assert_eq!(phase_with_sessions(2, 0), 2);
        assert_eq!(phase_with_sessions(0, 1), 2);
        assert_eq!(phase_with_sessions(1, 0), 1);
        assert_eq!(phase_with_sessions(0, 0), 0);
        // Without the world model a 0 may be either end of MPI's life: unknown.
        assert_eq!(phase_with_sessions(0, -1), -1);
        assert_eq!(phase_with_sessions(-1, -1), -1);
    }
}
