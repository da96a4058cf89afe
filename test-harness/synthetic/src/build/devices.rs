//! What each device keeps in `MPIR_Request.dev`: ch3's match bits, buffer and message
//! state; ch4's AM request, its extension, and the self request of single-process
//! communicators.

use super::{Builder, MPI_BYTE, REQUESTS};
use crate::{QueueKind, RequestSpec};

/// Offsets into ch3's `MPIDI_Request` (`MPIR_Request.dev`).
pub(super) struct Ch3Offsets {
    tag: u64,
    rank: u64,
    ctx: u64,
    mask_tag: u64,
    mask_rank: u64,
    mask_ctx: u64,
    buf: u64,
    count: u64,
    datatype: u64,
    recv_data_sz: u64,
    state: u64,
}

/// Offsets into ch4's `MPIDI_Devreq_t` (`MPIR_Request.dev`).
pub(super) struct Ch4Offsets {
    /// `ch4.self`: buffer, count, tag and context id of a single-process communicator's
    /// request.
    self_buf: u64,
    self_count: u64,
    self_tag: u64,
    self_ctx: u64,
    /// `ch4.am.req`, the request's extension.
    extension: u64,
    /// `MPIDIG_req_ext_t.status` and the extension's size.
    ext_status: u64,
    ext_size: u64,
    is_local: u64,
    buf: u64,
    count: u64,
    datatype: u64,
    dest: u64,
    source: u64,
    ctx: u64,
    tag: u64,
}

impl Builder<'_> {
    pub(super) fn ch3_offsets(&self) -> Ch3Offsets {
        let f = |field: &str| self.off("MPIDI_Request", field);
        Ch3Offsets {
            tag: f("match.parts.tag"),
            rank: f("match.parts.rank"),
            ctx: f("match.parts.context_id"),
            mask_tag: f("mask.parts.tag"),
            mask_rank: f("mask.parts.rank"),
            mask_ctx: f("mask.parts.context_id"),
            buf: f("user_buf"),
            count: f("user_count"),
            datatype: f("datatype"),
            recv_data_sz: f("recv_data_sz"),
            state: f("state"),
        }
    }

    pub(super) fn ch3_request(
        &mut self,
        d: &Ch3Offsets,
        dev: u64,
        queue: QueueKind,
        e: &RequestSpec,
    ) {
        self.put_i32(dev + d.tag, e.tag);
        self.put(dev + d.rank, 2, u64::from(e.rank as u16));
        self.put_ctx(dev + d.ctx, e.context_id);
        // The match mask: all ones, zero where the posted receive has a wildcard.
        self.put_i32(
            dev + d.mask_tag,
            if e.tag == crate::MPI_ANY_TAG { 0 } else { -1 },
        );
        self.put(
            dev + d.mask_rank,
            2,
            if e.rank == crate::MPI_ANY_SOURCE {
                0
            } else {
                0xffff
            },
        );
        self.put_ctx(dev + d.mask_ctx, -1);
        self.put_ptr(dev + d.buf, e.buffer);
        self.put(dev + d.count, self.p, e.count as u64);
        self.put_i32(dev + d.datatype, MPI_BYTE);
        if queue == QueueKind::Unexpected {
            self.put(dev + d.recv_data_sz, self.p, e.count as u64);
        }
        // dev.state: bits 0-1 the message kind (1 eager: data here, 2 rendezvous),
        // bit 3 a synchronous send.
        let kind = if queue == QueueKind::Unexpected && !e.complete {
            2
        } else {
            1
        };
        let sync = if e.synchronous { 8 } else { 0 };
        self.put_i32(dev + d.state, 0x1000 | sync | kind);
    }

    pub(super) fn ch4_offsets(&self) -> Ch4Offsets {
        let f = |field: &str| self.off("MPIDI_Devreq_t", field);
        Ch4Offsets {
            self_buf: f("ch4.self.buf"),
            self_count: f("ch4.self.count"),
            self_tag: f("ch4.self.tag"),
            self_ctx: f("ch4.self.context_id"),
            extension: f("ch4.am.req"),
            ext_status: self.off("MPIDIG_req_ext_t", "status"),
            ext_size: self.size("MPIDIG_req_ext_t"),
            is_local: f("is_local"),
            buf: f("ch4.am.buffer"),
            count: f("ch4.am.count"),
            datatype: f("ch4.am.datatype"),
            dest: f("ch4.am.u.send.dest"),
            source: f("ch4.am.u.recv.source"),
            ctx: f("ch4.am.u.recv.context_id"),
            tag: f("ch4.am.u.recv.tag"),
        }
    }

    pub(super) fn ch4_request(
        &mut self,
        d: &Ch4Offsets,
        dev: u64,
        queue: QueueKind,
        e: &RequestSpec,
        single_process: bool,
    ) {
        if single_process {
            // ch4_self.c: the communicator's context id, never the AM fields.
            self.put_ptr(dev + d.self_buf, e.buffer);
            self.put(dev + d.self_count, self.p, e.count as u64);
            self.put_i32(dev + d.self_tag, e.tag);
            self.put_i32(dev + d.self_ctx, e.context_id);
            return;
        }
        self.put_i32(dev + d.is_local, 1);
        self.put_ptr(dev + d.buf, e.buffer);
        self.put(dev + d.count, self.p, e.count as u64);
        self.put_i32(dev + d.datatype, MPI_BYTE);
        if queue == QueueKind::Sends {
            self.put_i32(dev + d.dest, e.rank);
        } else {
            self.put_i32(dev + d.source, e.rank);
            self.put_ctx(dev + d.ctx, e.context_id);
            self.put_i32(dev + d.tag, e.tag);
        }
        if queue == QueueKind::Unexpected {
            // As CH3's state: incomplete means a rendezvous, and a synchronous sender is
            // flagged; IN_PROGRESS (bit 8) and UNEXPECTED (bit 2) as MPICH sets them.
            let ext = self.m.alloc(REQUESTS, d.ext_size, 8);
            self.put_ptr(dev + d.extension, ext);
            let rts = if e.complete { 0 } else { 1 << 7 };
            let ssend = if e.synchronous { 1 << 1 } else { 0 };
            self.put(ext + d.ext_status, 8, (1 << 8) | (1 << 2) | rts | ssend);
        }
    }
}
