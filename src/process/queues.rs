//! The queue walks: each global queue once per display, one read per target object,
//! every element bucketed by the communicator it belongs to.

use super::*;
use crate::callbacks::ProcessServices;

impl ProcessInfo {
    /// Walks one global queue; `Ok(false)` when this MPICH does not record it.
    pub(super) fn walk(&mut self, services: &dyn ProcessServices, class: OpClass) -> Result<bool> {
        let (layout, addresses) = self.ready()?;
        let target = Target {
            services,
            sizes: self.sizes,
        };
        let head_variable = match class {
            OpClass::PendingSends => match addresses.sends {
                Some(a) => a,
                None => return Ok(false),
            },
            OpClass::PendingReceives => addresses.posted,
            OpClass::UnexpectedMessages => addresses.unexpected,
        };
        let mut entries = std::mem::replace(
            &mut self.snapshots[class.index()].entries,
            DebuggerVec::new(),
        );
        entries.clear();
        let mut outcome = self.walk_into(&target, &layout, class, head_variable, &mut entries);
        let single_process = match (addresses.self_queues, class) {
            (Some((posted, _)), OpClass::PendingReceives) => Some(posted),
            (Some((_, sent)), OpClass::UnexpectedMessages) => Some(sent),
            _ => None,
        };
        if let (Ok(()), Some(head)) = (&outcome, single_process) {
            outcome = self.walk_single_process_into(&target, &layout, class, head, &mut entries);
        }
        entries
            .as_mut_slice()
            .sort_unstable_by_key(|e| (e.comm, e.order));
        self.snapshots[class.index()].entries = entries;
        outcome.map(|()| true)
    }

    pub(super) fn walk_into(
        &mut self,
        target: &Target<'_>,
        layout: &Layout,
        class: OpClass,
        head_variable: u64,
        entries: &mut DebuggerVec<Entry>,
    ) -> Result<()> {
        let sizes = self.sizes;
        let request = layout.request;
        let request_fields = [request.cc, request.status_source, request.status_tag];
        let mut guard = ListGuard::new(MAX_QUEUE);
        let mut address = target.read_pointer(head_variable)?;
        // Layout C and the send queues are newest first; show oldest first,
        // the order in which MPI matches.
        let newest_first =
            matches!(layout.queues, QueueLayout::Debugq(_)) || class == OpClass::PendingSends;
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
            let complete = is_complete(&block, request.cc)?;
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
                single_process: false,
                collective: false,
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
                    if class != OpClass::UnexpectedMessages {
                        (entry.complete, entry.status) =
                            read_request(entry.request, &mut request_block)?;
                    }
                }
                QueueLayout::RequestLists { request: rq, .. } if class != OpClass::PendingSends => {
                    let span = sizes.span(&[
                        Some(rq.next),
                        Some(rq.buffer),
                        Some(rq.count),
                        Some(rq.rank),
                        Some(rq.tag),
                        Some(rq.context_id),
                        rq.data_size,
                        rq.message_state,
                        rq.am_status.map(|a| a.extension),
                        request.cc,
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
                    let extension = match rq.am_status {
                        Some(a) if class == OpClass::UnexpectedMessages => {
                            Some((b.unsigned(a.extension)?, a.status))
                        }
                        _ => None,
                    };
                    if let Some((lo, hi)) = request.status_count {
                        // MPICH splits the count: low 32 bits, then high bits above a cancel flag.
                        let count = b.unsigned(lo)? | (b.unsigned(hi)? >> 1) << 32;
                        entry.status_count =
                            (count > 0 && count <= i64::MAX as u64).then_some(count as i64);
                    }
                    entry.complete = is_complete(&b, request.cc)?;
                    if entry.complete
                        && let (Some(s), Some(t)) = (request.status_source, request.status_tag)
                    {
                        entry.status = Some((b.signed(s)?, b.signed(t)?));
                    }
                    next = b.unsigned(rq.next)?;
                    if let Some((at, status)) = extension.filter(|&(at, _)| at != 0) {
                        // CH4's flags, in the request's extension: one more read.
                        let mut bytes = [0u8; 8];
                        let width = sizes.bytes(status.width);
                        let bytes = bytes.get_mut(..width).ok_or(Error::UnsupportedWidth)?;
                        target.fetch(offset_address(at, u64::from(status.offset))?, bytes)?;
                        let flags = target.unsigned(bytes)?;
                        entry.message_kind = if flags & AmStatus::RTS != 0 { 2 } else { 1 };
                        entry.synchronous = Some(flags & AmStatus::PEER_SSEND != 0);
                    }
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
                    // CH4 keeps a single-process communicator's send in `dev.ch4.self`.
                    let single = rq.self_request.filter(|_| {
                        self.owner(context, true).is_some_and(|(c, _)| {
                            self.comms.as_slice()[c as usize].single_process()
                        })
                    });
                    let (buffer, count) = match single {
                        Some(s) => (s.buffer, s.count),
                        None => (rq.buffer, rq.count),
                    };
                    if entry.request != 0 {
                        let b = read_object(
                            &mut self.scratch,
                            target,
                            entry.request,
                            &[Some(buffer), Some(count), request.cc],
                        )?;
                        entry.buffer = b.unsigned(buffer)?;
                        entry.count = b.signed(count)?;
                        entry.complete = is_complete(&b, request.cc)?;
                    }
                }
            }
            if let Some((comm, collective)) = self.owner(context, class == OpClass::PendingSends) {
                entry.comm = comm;
                entry.collective = collective;
                entries.push(entry)?;
            }
            address = next;
        }
        Ok(())
    }

    /// CH4's queue of single-process communicators for `class`: receives posted before
    /// their send, or sends not yet received (the receiver's unexpected messages). Their
    /// one peer is the process itself, rank 0.
    pub(super) fn walk_single_process_into(
        &mut self,
        target: &Target<'_>,
        layout: &Layout,
        class: OpClass,
        head_variable: u64,
        entries: &mut DebuggerVec<Entry>,
    ) -> Result<()> {
        let QueueLayout::RequestLists { request: rq, .. } = layout.queues else {
            return Ok(());
        };
        let Some(own) = rq.self_request else {
            return Ok(());
        };
        let cc = layout.request.cc;
        let mut guard = ListGuard::new(MAX_QUEUE);
        let mut address = target.read_pointer(head_variable)?;
        // After the AM queue's entries, in queue order (appended, oldest first).
        let mut order = entries.len() as i64;
        while address != 0 {
            guard.visit(address)?;
            let b = read_object(
                &mut self.scratch,
                target,
                address,
                &[
                    Some(rq.next),
                    Some(own.buffer),
                    Some(own.count),
                    Some(own.tag),
                    Some(own.context_id),
                    cc,
                ],
            )?;
            let entry = Entry {
                comm: 0,
                order,
                request: address,
                peer: 0,
                tag: b.signed(own.tag)?,
                count: b.signed(own.count)?,
                buffer: b.unsigned(own.buffer)?,
                data_size: None,
                status_count: None,
                message_kind: if class == OpClass::UnexpectedMessages {
                    3
                } else {
                    0
                },
                synchronous: None,
                single_process: true,
                collective: false,
                complete: is_complete(&b, cc)?,
                status: None,
            };
            let context = b.signed(own.context_id)?;
            let next = b.unsigned(rq.next)?;
            order += 1;
            if let Some((comm, collective)) = self.owner(context, true) {
                entries.push(Entry {
                    comm,
                    collective,
                    ..entry
                })?;
            }
            address = next;
        }
        Ok(())
    }

    /// The communicator a queue element belongs to, and whether the element is a
    /// message of a collective's own algorithm. Receives carry the receiver's
    /// `recvcontext_id`; sends carry it too since MPICH 4.1 and the send `context_id`
    /// before, so sends fall back to that. Collectives communicate on the context id
    /// with its lowest bit set (`MPIR_CONTEXT_INTRA_COLL`/`_INTER_COLL`), which no
    /// communicator has.
    pub(super) fn owner(&self, context: i64, send: bool) -> Option<(u32, bool)> {
        let exact = |context: i64| {
            let find = |table: &[(i64, u32)]| {
                let at = table.partition_point(|&(c, _)| c < context);
                table
                    .get(at)
                    .filter(|&&(c, _)| c == context)
                    .map(|&(_, i)| i)
            };
            find(self.by_recvcontext.as_slice())
                .or_else(|| send.then(|| find(self.by_context.as_slice())).flatten())
        };
        exact(context).map(|c| (c, false)).or_else(|| {
            (context & COLLECTIVE_CONTEXT_BIT != 0)
                .then(|| exact(context & !COLLECTIVE_CONTEXT_BIT))
                .flatten()
                .map(|c| (c, true))
        })
    }
}

/// The bit MPICH sets in a communicator's context id for its collectives' messages.
const COLLECTIVE_CONTEXT_BIT: i64 = 1;

/// Reads the block of the object at `address` that holds `fields`, in one fetch.
pub(super) fn read_object<'a, 'b>(
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

/// Whether a request's completion counter reached zero; without `cc` in the
/// layout completion is unknown and the entry is shown pending.
fn is_complete(block: &Block<'_, '_>, cc: Option<Field>) -> Result<bool> {
    Ok(cc.map(|f| block.signed(f)).transpose()? == Some(0))
}
