//! Layout discovery: which MPICH generation and device an image holds, and where every
//! field the walks read sits, from the debugger's type information only.

use super::query::{Found, ImageQuery, Type};
use super::*;
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

    let list_ty = q.find_type(c"MPIR_Comm_list")?;
    let comm_list = CommListLayout {
        sequence_number: Field::int(q.field_offset(list_ty, c"sequence_number")?),
        head: Field::pointer(q.field_offset(list_ty, c"head")?),
    };

    let debugq = q.has_symbol(SYM_RECVQ_HEAD);
    if !debugq && !q.has_symbol(SYM_POSTED_HEAD_PTR) {
        return Err(Missing::EitherSymbol(SYM_RECVQ_HEAD, SYM_POSTED_HEAD_PTR));
    }
    if !q.has_symbol(SYM_ALL_COMMUNICATORS) {
        return Err(Missing::Symbol(SYM_ALL_COMMUNICATORS));
    }

    let group_ty = q.lookup_type(c"MPIR_Group");
    let pmap_groups = group_ty.is_some_and(|g| q.offset_of(g, c"pmap").is_some());
    let context_default = if pmap_groups {
        Width::Int
    } else {
        Width::Bytes(2)
    };
    let widths = Widths {
        context: width_of(
            q.typedef_size(c"MPIR_Context_id_t"),
            context_default,
            c"MPIR_Context_id_t",
        )?,
        aint: width_of(q.typedef_size(c"MPI_Aint"), Width::Pointer, c"MPI_Aint")?,
        pmap_groups,
    };

    let comm_ty = q.find_type_named(&[c"MPIR_Comm", c"MPID_Comm"])?;
    let mut comm = discover_comm(q, comm_ty, widths)?;
    let group = match group_ty {
        Some(g) => discover_group(q, g)?,
        None => None,
    };
    let request_ty = q.find_type_named(&[c"MPIR_Request", c"MPID_Request"])?;
    let request = discover_request(q, request_ty)?;
    let device = if debugq {
        discover_debugq(q, widths)?
    } else if let Some(dev_ty) = q.lookup_type(c"MPIDI_Request") {
        discover_ch3(q, request_ty, dev_ty, comm_ty, &mut comm, widths)?
    } else {
        discover_ch4(q, request_ty, comm_ty, &mut comm, widths)?
    };
    Ok(Layout {
        flavour: device.flavour,
        comm_list,
        comm,
        group,
        vcrt: device.vcrt,
        rank_map: device.rank_map,
        request,
        queues: device.queues,
    })
}

/// The fields of `MPIR_Comm`.
fn discover_comm(q: &ImageQuery<'_>, comm_ty: Type, widths: Widths) -> Found<CommLayout> {
    let comm_size = q.size_of(comm_ty);
    let name = q.field_offset(comm_ty, c"name")?;
    // MPI_MAX_OBJECT_NAME bytes, never past the end of the struct.
    let name_len = comm_size.map_or(128, |s| s.saturating_sub(name).min(128));
    let optional = |field| q.offset_of(comm_ty, field);
    let context = |field| -> Found<Field> {
        Ok(Field {
            offset: q.field_offset(comm_ty, field)?,
            width: widths.context,
        })
    };
    Ok(CommLayout {
        next: Field::pointer(q.field_offset(comm_ty, c"comm_next")?),
        name,
        name_len,
        rank: Field::int(q.field_offset(comm_ty, c"rank")?),
        local_size: Field::int(q.field_offset(comm_ty, c"local_size")?),
        remote_size: optional(c"remote_size").map(Field::int),
        context_id: context(c"context_id")?,
        recvcontext_id: context(c"recvcontext_id")?,
        kind: optional(c"comm_kind").map(Field::int),
        local_group: optional(c"local_group").map(Field::pointer),
        remote_group: optional(c"remote_group").map(Field::pointer),
        vcrt: None,
        local_vcrt: None,
        rank_map: None,
        local_rank_map: None,
    })
}

/// Completion and status of `MPIR_Request`.
fn discover_request(q: &ImageQuery<'_>, request_ty: Type) -> Found<RequestLayout> {
    let status = q.offset_of(request_ty, c"status").and_then(|at| {
        let status_ty = q.lookup_type(c"MPI_Status")?;
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
    Ok(RequestLayout {
        cc: Field::int(q.field_offset(request_ty, c"cc")?),
        status_source: status.map(|s| s.0),
        status_tag: status.map(|s| s.1),
        status_count: status.and_then(|s| s.2),
    })
}

/// `MPIR_Sendq`, where this MPICH records sends (layouts A and B).
fn discover_sendq(q: &ImageQuery<'_>) -> Found<Option<SendqLayout>> {
    let Some(ty) = q.lookup_type(c"MPIR_Sendq") else {
        return Ok(None);
    };
    Ok(Some(SendqLayout {
        request: Field::pointer(q.field_offset(ty, c"sreq")?),
        tag: Field::int(q.field_offset(ty, c"tag")?),
        rank: Field::int(q.field_offset(ty, c"rank")?),
        context_id: Field::int(q.field_offset(ty, c"context_id")?),
        next: Field::pointer(q.field_offset(ty, c"next")?),
    }))
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
    Ok(Device {
        flavour: if widths.pmap_groups {
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
    let request = RequestQueueLayout {
        // Through MPIDI_Request.next up to MPICH 3.x, MPIR_Request.next in 4.x.
        next: Field::pointer(
            q.offset_of(dev_ty, c"next")
                .map(|at| dev + at)
                .or_else(|| q.offset_of(request_ty, c"next"))
                .ok_or(Missing::Field(c"MPIR_Request", c"next"))?,
        ),
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
        data_size: q.offset_of(dev_ty, c"recv_data_sz").map(|at| Field {
            offset: dev + at,
            width: aint_width,
        }),
        message_state: q.offset_of(dev_ty, c"state").map(|at| Field::int(dev + at)),
    };
    let vcrt = discover_vcrt(q, comm_ty, comm);
    Ok(Device {
        flavour: Flavour::Ch3,
        queues: QueueLayout::RequestLists {
            request,
            sendq: discover_sendq(q)?,
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
) -> Found<Device> {
    let context_width = widths.context;
    let aint_width = widths.aint;
    let dev = q.field_offset(request_ty, c"dev")?;
    let devreq_ty = q
        .lookup_type(c"MPIDI_Devreq_t")
        .ok_or(Missing::EitherType(c"MPIDI_Request", c"MPIDI_Devreq_t"))?;
    let am = q
        .offset_of(devreq_ty, c"ch4.am")
        .or_else(|| q.offset_of(devreq_ty, c"am"))
        // `ch4` is a union: each member, `am` included, starts at its offset.
        .or_else(|| q.offset_of(devreq_ty, c"ch4"))
        .ok_or(Missing::Field(c"MPIDI_Devreq_t", c"ch4.am"))?;
    let am_at = dev + am;
    let am_ty = q.find_type(c"MPIDIG_req_t")?;
    let recv = |path: &'static CStr, flat: &'static CStr| {
        q.offset_of(am_ty, path)
            .or_else(|| q.offset_of(am_ty, flat))
    };
    // The members of `u.recv` live in an anonymous struct; when the debugger
    // cannot resolve the dotted path, place them by C's rules from the
    // declaration { int source; MPIR_Context_id_t context_id; int tag; }.
    let u = q.offset_of(am_ty, c"u");
    let int_bytes = 4u32;
    let ctx_bytes = match context_width {
        Width::Bytes(n) => u32::from(n),
        _ => int_bytes,
    };
    let tag_in_recv = (int_bytes + ctx_bytes).div_ceil(int_bytes) * int_bytes;
    let source = recv(c"u.recv.source", c"rank")
        .or(u)
        .ok_or(Missing::Field(c"MPIDIG_req_t", c"u.recv.source"))?;
    let context_id = recv(c"u.recv.context_id", c"context_id")
        .or(u.map(|u| u + int_bytes))
        .ok_or(Missing::Field(c"MPIDIG_req_t", c"u.recv.context_id"))?;
    let tag = recv(c"u.recv.tag", c"tag")
        .or(u.map(|u| u + tag_in_recv))
        .ok_or(Missing::Field(c"MPIDIG_req_t", c"u.recv.tag"))?;
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
    };
    let rank_map = discover_rank_map(q, comm_ty, comm);
    Ok(Device {
        flavour: Flavour::Ch4Am,
        queues: QueueLayout::RequestLists {
            request,
            sendq: discover_sendq(q)?,
        },
        vcrt: None,
        rank_map,
    })
}

/// `MPIR_Group`'s rank map, when its types are complete enough to use.
fn discover_group(q: &ImageQuery<'_>, g: Type) -> Found<Option<GroupLayout>> {
    let Some(size) = q.offset_of(g, c"size").map(Field::int) else {
        return Ok(None);
    };
    if let Some(pmap) = q.offset_of(g, c"pmap") {
        let pmap_ty = q.find_type(c"MPIR_Pmap")?;
        let lpid_width = match q.typedef_size(c"MPIR_Lpid") {
            Some(n @ (4 | 8)) => n as u8,
            None => 8,
            Some(_) => return Err(Missing::Width(c"MPIR_Lpid")),
        };
        return Ok(Some(GroupLayout::Pmap {
            size,
            use_map: pmap + q.field_offset(pmap_ty, c"use_map")?,
            union_at: pmap + q.field_offset(pmap_ty, c"u")?,
            lpid_width,
        }));
    }
    let (Some(table), Some(entry_ty)) = (
        q.offset_of(g, c"lrank_to_lpid"),
        q.lookup_type(c"MPII_Group_pmap_t"),
    ) else {
        return Ok(None);
    };
    let lpid = q.field_offset(entry_ty, c"lpid")?;
    let next = q.offset_of(entry_ty, c"next_lpid");
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
        .or(next.map(|n| (n + 4).div_ceil(align) * align))
        .ok_or(Missing::Width(c"MPII_Group_pmap_t"))?;
    Ok(Some(GroupLayout::LrankToLpid {
        size,
        table: Field::pointer(table),
        stride,
        lpid: Field {
            offset: lpid,
            width: lpid_width,
        },
    }))
}

/// CH4's rank maps inside `MPIR_Comm.dev.ch4`, reached through members of
/// unnamed types, so by dotted paths.
fn discover_rank_map(
    q: &ImageQuery<'_>,
    comm_ty: Type,
    comm: &mut CommLayout,
) -> Option<RankMapLayout> {
    let dev = q.offset_of(comm_ty, c"dev")?;
    let dev_ty = q.lookup_type(c"MPIDI_Devcomm_t")?;
    let map_ty = q.lookup_type(c"MPIDI_rank_map_t")?;
    let map = dev + q.offset_of(dev_ty, c"ch4.map")?;
    comm.rank_map = Some(map);
    comm.local_rank_map = q.offset_of(dev_ty, c"ch4.local_map").map(|at| dev + at);
    let int = |path| q.offset_of(map_ty, path).map(Field::int);
    let layout = RankMapLayout {
        mode: int(c"mode")?,
        avtid: int(c"avtid")?,
        size: int(c"size")?,
        offset: int(c"reg.offset")?,
        stride: int(c"reg.stride.stride")?,
        blocksize: int(c"reg.stride.blocksize")?,
        lut: Field::pointer(q.offset_of(map_ty, c"irreg.lut.lpid")?),
    };
    Some(layout)
}

/// CH3's per-communicator connection tables, which hold each rank's lpid.
fn discover_vcrt(q: &ImageQuery<'_>, comm_ty: Type, comm: &mut CommLayout) -> Option<VcrtLayout> {
    let dev = q.offset_of(comm_ty, c"dev")?;
    let dev_ty = q.lookup_type(c"MPIDI_CH3I_comm_t")?;
    let vcrt = q.offset_of(dev_ty, c"vcrt")?;
    comm.vcrt = Some(Field::pointer(dev + vcrt));
    comm.local_vcrt = q
        .offset_of(dev_ty, c"local_vcrt")
        .map(|at| Field::pointer(dev + at));
    let vcrt_ty = q.lookup_type(c"MPIDI_VCRT")?;
    let vc_ty = q.lookup_type(c"MPIDI_VC_t")?;
    let lpid = q.offset_of(vc_ty, c"lpid")?;
    Some(VcrtLayout {
        size: Field::int(q.offset_of(vcrt_ty, c"size")?),
        table: q.offset_of(vcrt_ty, c"vcr_table")?,
        vc_lpid: Field::int(lpid),
    })
}
