//! Layout discovery: which MPICH generation and device an image holds, and where every
//! field the walks read sits, from the debugger's type information only.
//!
//! Required is only what the walks cannot do without, and never more than MPICH's own
//! library asks for the same layout (see `Required` in docs/library.md). Everything else is
//! optional: when present it makes the answer better, when absent a documented fallback
//! applies and [`Lacks`] says what it costs.

use super::query::{Found, ImageQuery, Type};
use super::types::*;
use std::ffi::CStr;

fn width_of(size: Option<u32>, fallback: Width, what: &'static CStr) -> Found<Width> {
    match size {
        None => Ok(fallback),
        Some(n @ (1 | 2 | 4 | 8)) => Ok(Width::Bytes(n as u8)),
        Some(_) => Err(Missing::Width(what)),
    }
}

/// The widths of MPICH's scalar typedefs, and which group layout it has.
#[derive(Clone, Copy)]
struct Widths {
    context: Width,
    aint: Width,
    /// MPICH 5.x: `MPIR_Group.pmap`.
    pmap_groups: bool,
}

/// Where the device keeps its queues and its rank tables.
struct Device {
    flavour: Flavour,
    queues: QueueLayout,
    vcrt: Option<VcrtLayout>,
    rank_map: Option<RankMapLayout>,
}

/// Learns the image's layout, or names the first thing missing.
pub(crate) fn discover(q: &ImageQuery<'_>) -> Found<Layout> {
    q.touch_function(c"MPII_Wait_for_debugger");
    let mut lacks = Lacks::default();
    if q.conservative {
        lacks.insert(Lacks::PARTIAL_DEBUGGER);
    }

    let list_ty = q.find_type(c"MPIR_Comm_list")?;
    let comm_list = CommListLayout {
        sequence_number: Field::int(q.field_offset(list_ty, c"sequence_number")?),
        head: Field::pointer(q.field_offset(list_ty, c"head")?),
    };

    // Layout C describes its debug-queue nodes; A and B do not. Asking a field of a type
    // the debugger may not know costs nothing, even with a stub.
    let debugq = q
        .lookup_type(c"MPIR_Debugq")
        .and_then(|t| q.offset_of(t, c"req"))
        .is_some();
    let (first, second) = if debugq {
        (SYM_RECVQ_HEAD, SYM_POSTED_HEAD_PTR)
    } else {
        (SYM_POSTED_HEAD_PTR, SYM_RECVQ_HEAD)
    };
    if !q.has_symbol(first) {
        return Err(match (q.has_symbol(second), debugq) {
            // Layout C's globals without its node type (or its `req`) described.
            (true, false) => match q.lookup_type(c"MPIR_Debugq") {
                Some(_) if !q.conservative => q.missing_field(c"MPIR_Debugq", c"req"),
                _ => Missing::Type(c"MPIR_Debugq"),
            },
            (true, true) => Missing::Symbol(first),
            (false, _) => Missing::EitherSymbol(SYM_RECVQ_HEAD, SYM_POSTED_HEAD_PTR),
        });
    }
    if !q.has_symbol(SYM_ALL_COMMUNICATORS) {
        return Err(Missing::Symbol(SYM_ALL_COMMUNICATORS));
    }

    let comm_ty = q.find_type_named(&[c"MPIR_Comm", c"MPID_Comm"])?;
    let group_ty = q.extra_type(c"MPIR_Group");
    let pmap_groups = group_ty.is_some_and(|g| q.extra_offset(g, c"pmap").is_some());
    let widths = Widths {
        context: context_width(q, comm_ty, pmap_groups)?,
        aint: width_of(q.typedef_size(c"MPI_Aint"), Width::Pointer, c"MPI_Aint")?,
        pmap_groups,
    };
    let mut comm = discover_comm(q, comm_ty, widths, &mut lacks)?;
    let group = match group_ty {
        Some(g) => discover_group(q, g),
        None => None,
    };
    let request_ty = q.find_type_named(&[c"MPIR_Request", c"MPID_Request"])?;
    // MPICH's own library reads the status only in layouts A and B: a stub debugger of
    // layout C may not know the field.
    let ask_status = !(debugq && q.conservative);
    let request = discover_request(q, request_ty, ask_status, &mut lacks);
    // CH3 describes `MPIDI_Request.match`, CH4 `MPIDI_Devreq_t.am`: a stub may know both
    // type names, not both fields.
    let ch3 = q
        .lookup_type(c"MPIDI_Request")
        .filter(|&t| q.offset_of(t, c"match").is_some());
    let device = if debugq {
        discover_debugq(q, widths)?
    } else if let Some(dev_ty) = ch3 {
        discover_ch3(
            q, request_ty, dev_ty, comm_ty, &mut comm, widths, &mut lacks,
        )?
    } else {
        discover_ch4(q, request_ty, comm_ty, &mut comm, widths, &mut lacks)?
    };
    if let QueueLayout::RequestLists { sendq: None, .. } = device.queues {
        lacks.insert(Lacks::SEND_QUEUE);
    }
    if group.is_none() && device.vcrt.is_none() && device.rank_map.is_none() {
        lacks.insert(Lacks::GROUPS);
    }
    let state = discover_state(q);
    Ok(Layout {
        flavour: device.flavour,
        state,
        comm_list,
        comm,
        group,
        vcrt: device.vcrt,
        rank_map: device.rank_map,
        request,
        queues: device.queues,
        lacks,
    })
}

/// Where MPICH records the process's phase and thread level (never asked of a stub).
fn discover_state(q: &ImageQuery<'_>) -> StateLayout {
    let int = |ty: &'static CStr, field: &'static CStr| {
        let t = q.extra_type(ty)?;
        q.extra_offset(t, field).map(Field::int)
    };
    StateLayout {
        phase: int(c"MPIR_Process_t", c"mpich_state"),
        thread_level: int(c"MPIR_Thread_info_t", c"thread_provided"),
        sessions: q.extra_type(c"MPIR_Session").is_some(),
    }
}

/// `MPIR_Context_id_t`: its size, else the gap between `context_id` and the
/// `recvcontext_id` declared right after it, else 2 bytes before MPICH 5 (no
/// `MPIR_Group.pmap`) and an int after.
fn context_width(q: &ImageQuery<'_>, comm_ty: Type, pmap_groups: bool) -> Found<Width> {
    let gap = match (
        q.offset_of(comm_ty, c"context_id"),
        q.offset_of(comm_ty, c"recvcontext_id"),
    ) {
        (Some(a), Some(b)) if b == a + 2 => Some(Width::Bytes(2)),
        (Some(a), Some(b)) if b == a + 4 => Some(Width::Int),
        _ => None,
    };
    let fallback = gap.unwrap_or(if pmap_groups {
        Width::Int
    } else {
        Width::Bytes(2)
    });
    width_of(
        q.typedef_size(c"MPIR_Context_id_t"),
        fallback,
        c"MPIR_Context_id_t",
    )
}

/// The fields of `MPIR_Comm`.
fn discover_comm(
    q: &ImageQuery<'_>,
    comm_ty: Type,
    widths: Widths,
    lacks: &mut Lacks,
) -> Found<CommLayout> {
    let name = q.field_offset(comm_ty, c"name")?;
    // MPI_MAX_OBJECT_NAME bytes, never past the end of the struct.
    let name_len = q
        .size_of(comm_ty)
        .map_or(128, |s| s.saturating_sub(name).min(128));
    let extra = |field| q.extra_offset(comm_ty, field);
    let context = |field| -> Found<Field> {
        Ok(Field {
            offset: q.field_offset(comm_ty, field)?,
            width: widths.context,
        })
    };
    let remote_size = q.offset_of(comm_ty, c"remote_size").map(Field::int);
    // MPI_Comm_size is the local group's; MPICH's own library shows remote_size, the
    // same on an intracommunicator.
    let local_size = match (extra(c"local_size").map(Field::int), remote_size) {
        (Some(f), _) => f,
        (None, Some(f)) => {
            lacks.insert(Lacks::LOCAL_SIZE);
            f
        }
        (None, None) => {
            return Err(Missing::EitherField(
                c"MPIR_Comm",
                c"local_size",
                c"remote_size",
            ));
        }
    };
    let kind = extra(c"comm_kind").map(Field::int);
    if kind.is_none() {
        lacks.insert(Lacks::COMM_KIND);
    }
    Ok(CommLayout {
        next: Field::pointer(q.field_offset(comm_ty, c"comm_next")?),
        name,
        name_len,
        rank: Field::int(q.field_offset(comm_ty, c"rank")?),
        local_size,
        remote_size,
        context_id: context(c"context_id")?,
        recvcontext_id: context(c"recvcontext_id")?,
        kind,
        local_group: extra(c"local_group").map(Field::pointer),
        remote_group: extra(c"remote_group").map(Field::pointer),
        vcrt: None,
        local_vcrt: None,
        rank_map: None,
        local_rank_map: None,
    })
}

/// Completion and status of `MPIR_Request`: both optional.
fn discover_request(
    q: &ImageQuery<'_>,
    request_ty: Type,
    ask_status: bool,
    lacks: &mut Lacks,
) -> RequestLayout {
    let status_at = if ask_status {
        q.offset_of(request_ty, c"status")
    } else {
        None
    };
    let status = status_at.and_then(|at| {
        let status_ty = q.extra_type(c"MPI_Status")?;
        let count = match (
            q.offset_of(status_ty, c"count_lo"),
            q.offset_of(status_ty, c"count_hi_and_cancelled"),
        ) {
            (Some(lo), Some(hi)) => Some((Field::int(at + lo), Field::int(at + hi))),
            _ => None,
        };
        Some((
            Field::int(at + q.offset_of(status_ty, c"MPI_SOURCE")?),
            Field::int(at + q.offset_of(status_ty, c"MPI_TAG")?),
            count,
        ))
    });
    if status.is_none() {
        lacks.insert(Lacks::STATUS);
    }
    let cc = q.offset_of(request_ty, c"cc").map(Field::int);
    if cc.is_none() {
        lacks.insert(Lacks::COMPLETION);
    }
    RequestLayout {
        cc,
        status_source: status.map(|s| s.0),
        status_tag: status.map(|s| s.1),
        status_count: status.and_then(|s| s.2),
    }
}

/// `MPIR_Sendq`, where this MPICH records sends (layouts A and B); without it (or any
/// of its fields) sends are not listed.
fn discover_sendq(q: &ImageQuery<'_>) -> Option<SendqLayout> {
    let ty = q.lookup_type(c"MPIR_Sendq")?;
    Some(SendqLayout {
        request: Field::pointer(q.offset_of(ty, c"sreq")?),
        tag: Field::int(q.offset_of(ty, c"tag")?),
        rank: Field::int(q.offset_of(ty, c"rank")?),
        context_id: Field::int(q.offset_of(ty, c"context_id")?),
        next: Field::pointer(q.offset_of(ty, c"next")?),
    })
}

/// Layout C: the `MPIR_Debugq` nodes of MPICH 4.0.3 and later.
fn discover_debugq(q: &ImageQuery<'_>, widths: Widths) -> Found<Device> {
    let ty = q.find_type(c"MPIR_Debugq")?;
    let node = DebugqLayout {
        request: Field::pointer(q.field_offset(ty, c"req")?),
        tag: Field::int(q.field_offset(ty, c"tag")?),
        rank: Field::int(q.field_offset(ty, c"rank")?),
        context_id: Field::int(q.field_offset(ty, c"context_id")?),
        buffer: Field::pointer(q.field_offset(ty, c"buf")?),
        count: Field {
            offset: q.field_offset(ty, c"count")?,
            width: widths.aint,
        },
        next: Field::pointer(q.field_offset(ty, c"next")?),
    };
    // 5.x has int context ids (and pmap groups), 4.x 16-bit ones.
    let five = widths.pmap_groups || widths.context == Width::Int;
    Ok(Device {
        flavour: if five {
            Flavour::Debugq5
        } else {
            Flavour::Debugq4
        },
        queues: QueueLayout::Debugq(node),
        vcrt: None,
        rank_map: None,
    })
}

/// Layout A: CH3 keeps match bits, buffer and link inside `dev`.
fn discover_ch3(
    q: &ImageQuery<'_>,
    request_ty: Type,
    dev_ty: Type,
    comm_ty: Type,
    comm: &mut CommLayout,
    widths: Widths,
    lacks: &mut Lacks,
) -> Found<Device> {
    let (context_width, aint_width) = (widths.context, widths.aint);
    let dev = q.field_offset(request_ty, c"dev")?;
    let match_at = dev + q.field_offset(dev_ty, c"match")?;
    let match_ty = q.find_type(c"MPIDI_Message_match")?;
    let parts_at = match_at + q.field_offset(match_ty, c"parts")?;
    let parts_ty = q.find_type(c"MPIDI_Message_match_parts_t")?;
    let rank_width = width_of(
        q.typedef_size(c"MPIDI_Rank_t"),
        Width::Bytes(2),
        c"MPIDI_Rank_t",
    )?;
    // Through MPIDI_Request.next up to MPICH 3.x, MPIR_Request.next in 4.x (the one
    // MPICH's own 4.x library asks for).
    let next = q
        .extra_offset(dev_ty, c"next")
        .map(|at| dev + at)
        .or_else(|| q.offset_of(request_ty, c"next"))
        .ok_or_else(|| q.missing_field(c"MPIR_Request", c"next"))?;
    let data_size = q.extra_offset(dev_ty, c"recv_data_sz").map(|at| Field {
        offset: dev + at,
        width: aint_width,
    });
    let message_state = q
        .extra_offset(dev_ty, c"state")
        .map(|at| Field::int(dev + at));
    if message_state.is_none() {
        lacks.insert(Lacks::MESSAGE_STATE);
    }
    let request = RequestQueueLayout {
        next: Field::pointer(next),
        buffer: Field::pointer(dev + q.field_offset(dev_ty, c"user_buf")?),
        count: Field {
            offset: dev + q.field_offset(dev_ty, c"user_count")?,
            width: aint_width,
        },
        rank: Field {
            offset: parts_at + q.field_offset(parts_ty, c"rank")?,
            width: rank_width,
        },
        tag: Field::int(parts_at + q.field_offset(parts_ty, c"tag")?),
        context_id: Field {
            offset: parts_at + q.field_offset(parts_ty, c"context_id")?,
            width: context_width,
        },
        data_size,
        message_state,
        am_status: None,
        self_request: None,
    };
    let vcrt = discover_vcrt(q, comm_ty, comm);
    Ok(Device {
        flavour: Flavour::Ch3,
        queues: QueueLayout::RequestLists {
            request,
            sendq: discover_sendq(q),
        },
        vcrt,
        rank_map: None,
    })
}

/// Layout B: CH4 keeps the match data in `dev.ch4.am`, the link in the request.
fn discover_ch4(
    q: &ImageQuery<'_>,
    request_ty: Type,
    comm_ty: Type,
    comm: &mut CommLayout,
    widths: Widths,
    lacks: &mut Lacks,
) -> Found<Device> {
    let context_width = widths.context;
    let aint_width = widths.aint;
    let dev = q.field_offset(request_ty, c"dev")?;
    let devreq_ty = q.lookup_type(c"MPIDI_Devreq_t").ok_or_else(|| {
        // A CH3 image whose request type lacks its match bits.
        match q.lookup_type(c"MPIDI_Request") {
            Some(_) if !q.conservative => q.missing_field(c"MPIDI_Request", c"match"),
            _ => Missing::EitherType(c"MPIDI_Request", c"MPIDI_Devreq_t"),
        }
    })?;
    // MPICH's own library asks for `am`; a debugger that resolves members of members
    // knows `ch4.am`; `ch4` is a union, so `am` starts where it does.
    let am = q
        .offset_of(devreq_ty, c"am")
        .or_else(|| q.extra_offset(devreq_ty, c"ch4.am"))
        .or_else(|| q.extra_offset(devreq_ty, c"ch4"))
        .ok_or_else(|| q.missing_field(c"MPIDI_Devreq_t", c"am"))?;
    let am_at = dev + am;
    let am_ty = q.find_type(c"MPIDIG_req_t")?;
    // MPICH's own library's names first (a stub maps them to `u.recv.*`), then the
    // dotted paths into the anonymous struct `u.recv`.
    let recv = |flat: &'static CStr, path: &'static CStr| {
        q.offset_of(am_ty, flat)
            .or_else(|| q.extra_offset(am_ty, path))
    };
    // When the debugger resolves neither, place them by C's rules from the declaration
    // { int source; MPIR_Context_id_t context_id; int tag; } at `u`.
    let u = || q.extra_offset(am_ty, c"u");
    let int_bytes = 4u32;
    let ctx_bytes = match context_width {
        Width::Bytes(n) => u32::from(n),
        _ => int_bytes,
    };
    let tag_in_recv = (int_bytes + ctx_bytes).div_ceil(int_bytes) * int_bytes;
    let source = recv(c"rank", c"u.recv.source")
        .or_else(u)
        .ok_or_else(|| q.missing_field(c"MPIDIG_req_t", c"rank"))?;
    let context_id = recv(c"context_id", c"u.recv.context_id")
        .or_else(|| u().map(|u| u + int_bytes))
        .ok_or_else(|| q.missing_field(c"MPIDIG_req_t", c"context_id"))?;
    let tag = recv(c"tag", c"u.recv.tag")
        .or_else(|| u().map(|u| u + tag_in_recv))
        .ok_or_else(|| q.missing_field(c"MPIDIG_req_t", c"tag"))?;
    let request = RequestQueueLayout {
        next: Field::pointer(q.field_offset(request_ty, c"next")?),
        buffer: Field::pointer(am_at + q.field_offset(am_ty, c"buffer")?),
        count: Field {
            offset: am_at + q.field_offset(am_ty, c"count")?,
            width: aint_width,
        },
        rank: Field::int(am_at + source),
        tag: Field::int(am_at + tag),
        context_id: Field {
            offset: am_at + context_id,
            width: context_width,
        },
        data_size: None,
        message_state: None,
        am_status: discover_am_status(q, am_at, am_ty),
        self_request: discover_self_request(q, dev, devreq_ty, am_at, widths),
    };
    if request.am_status.is_none() {
        lacks.insert(Lacks::MESSAGE_STATE);
    }
    if request.self_request.is_none() {
        lacks.insert(Lacks::SELF_QUEUES);
    }
    let rank_map = discover_rank_map(q, comm_ty, comm);
    Ok(Device {
        flavour: Flavour::Ch4Am,
        queues: QueueLayout::RequestLists {
            request,
            sendq: discover_sendq(q),
        },
        vcrt: None,
        rank_map,
    })
}

/// CH4's message state: `MPIDIG_req_t.req` points to an `MPIDIG_req_ext_t` whose
/// `uint64_t status` holds the flags.
fn discover_am_status(q: &ImageQuery<'_>, am_at: u32, am_ty: Type) -> Option<AmStatus> {
    let extension = Field::pointer(am_at + q.extra_offset(am_ty, c"req")?);
    let ext_ty = q.extra_type(c"MPIDIG_req_ext_t")?;
    let status = Field {
        offset: q.extra_offset(ext_ty, c"status")?,
        width: Width::Bytes(8),
    };
    Some(AmStatus { extension, status })
}

/// CH4's `dev.ch4.self` (a member of the union that starts with `am`), usable only when
/// the self queues it describes are found too.
fn discover_self_request(
    q: &ImageQuery<'_>,
    dev: u32,
    devreq_ty: Type,
    am_at: u32,
    widths: Widths,
) -> Option<SelfRequestLayout> {
    let self_ty = q.extra_type(c"MPIDI_self_request_t")?;
    let at = q
        .extra_offset(devreq_ty, c"ch4.self")
        .map_or(am_at, |at| dev + at);
    let field = |name| q.extra_offset(self_ty, name).map(|off| at + off);
    let layout = SelfRequestLayout {
        buffer: Field::pointer(field(c"buf")?),
        count: Field {
            offset: field(c"count")?,
            width: widths.aint,
        },
        tag: Field::int(field(c"tag")?),
        context_id: Field::int(field(c"context_id")?),
    };
    (q.has_symbol(SYM_SELF_RECV_QUEUE) && q.has_symbol(SYM_SELF_SEND_QUEUE)).then_some(layout)
}

/// Largest `MPII_Group_pmap_t` this library believes (it is 16 or 24 bytes).
const MAX_GROUP_ENTRY_BYTES: u32 = 64;

/// `MPIR_Group`'s rank map, when its types are complete enough to use.
fn discover_group(q: &ImageQuery<'_>, g: Type) -> Option<GroupLayout> {
    let size = q.extra_offset(g, c"size").map(Field::int)?;
    if let Some(pmap) = q.extra_offset(g, c"pmap") {
        let pmap_ty = q.extra_type(c"MPIR_Pmap")?;
        let lpid_width = match q.typedef_size(c"MPIR_Lpid") {
            Some(n @ (4 | 8)) => n as u8,
            None => 8,
            Some(_) => return None,
        };
        return Some(GroupLayout::Pmap {
            size,
            use_map: pmap + q.extra_offset(pmap_ty, c"use_map")?,
            union_at: pmap + q.extra_offset(pmap_ty, c"u")?,
            lpid_width,
        });
    }
    let table = q.extra_offset(g, c"lrank_to_lpid")?;
    let entry_ty = q.extra_type(c"MPII_Group_pmap_t")?;
    let lpid = q.extra_offset(entry_ty, c"lpid")?;
    let next = q.extra_offset(entry_ty, c"next_lpid");
    // `lpid` is an int before 4.1 and a uint64_t after; the gap to the next
    // member tells which when the debugger cannot size fields.
    let lpid_width = match next.map(|n| n.saturating_sub(lpid)) {
        Some(8) => Width::Bytes(8),
        _ => Width::Int,
    };
    // Without sizeof, C's rules: the struct is padded to its widest member.
    let align = if lpid_width == Width::Bytes(8) { 8 } else { 4 };
    let stride = q
        .size_of(entry_ty)
        .or(next.map(|n| (n + 4).div_ceil(align) * align))?;
    // An entry is two or three integers: a stride past that is damaged type information,
    // and would make every table read that many times larger.
    if !(lpid + 4..=MAX_GROUP_ENTRY_BYTES).contains(&stride) {
        return None;
    }
    Some(GroupLayout::LrankToLpid {
        size,
        table: Field::pointer(table),
        stride,
        lpid: Field {
            offset: lpid,
            width: lpid_width,
        },
    })
}

/// CH4's rank maps inside `MPIR_Comm.dev.ch4`, reached through members of
/// unnamed types, so by dotted paths.
fn discover_rank_map(
    q: &ImageQuery<'_>,
    comm_ty: Type,
    comm: &mut CommLayout,
) -> Option<RankMapLayout> {
    let dev = q.extra_offset(comm_ty, c"dev")?;
    let dev_ty = q.extra_type(c"MPIDI_Devcomm_t")?;
    let map_ty = q.extra_type(c"MPIDI_rank_map_t")?;
    let map = dev + q.extra_offset(dev_ty, c"ch4.map")?;
    let int = |path| q.extra_offset(map_ty, path).map(Field::int);
    let layout = RankMapLayout {
        mode: int(c"mode")?,
        avtid: int(c"avtid")?,
        size: int(c"size")?,
        offset: int(c"reg.offset")?,
        stride: int(c"reg.stride.stride")?,
        blocksize: int(c"reg.stride.blocksize")?,
        lut: Field::pointer(q.extra_offset(map_ty, c"irreg.lut.lpid")?),
    };
    comm.rank_map = Some(map);
    comm.local_rank_map = q.extra_offset(dev_ty, c"ch4.local_map").map(|at| dev + at);
    Some(layout)
}

/// CH3's per-communicator connection tables, which hold each rank's lpid.
fn discover_vcrt(q: &ImageQuery<'_>, comm_ty: Type, comm: &mut CommLayout) -> Option<VcrtLayout> {
    let dev = q.extra_offset(comm_ty, c"dev")?;
    let dev_ty = q.extra_type(c"MPIDI_CH3I_comm_t")?;
    let vcrt = q.extra_offset(dev_ty, c"vcrt")?;
    let vcrt_ty = q.extra_type(c"MPIDI_VCRT")?;
    let vc_ty = q.extra_type(c"MPIDI_VC_t")?;
    let layout = VcrtLayout {
        size: Field::int(q.extra_offset(vcrt_ty, c"size")?),
        table: q.extra_offset(vcrt_ty, c"vcr_table")?,
        vc_lpid: Field::int(q.extra_offset(vc_ty, c"lpid")?),
    };
    comm.vcrt = Some(Field::pointer(dev + vcrt));
    comm.local_vcrt = q
        .extra_offset(dev_ty, c"local_vcrt")
        .map(|at| Field::pointer(dev + at));
    Some(layout)
}
