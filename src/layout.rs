//! Layout discovery: which MPICH data structures an image holds, and where every
//! field sits, learnt only from the debugger's symbols and type information.
//!
//! Offsets are cached per image (they are the same in every process running it);
//! scalar widths that depend on the target ABI (`int`, pointers) are resolved per
//! process from `mqs_get_type_sizes`.

use crate::abi::{mqs_image, mqs_image_callbacks, mqs_lang_code, mqs_ok, mqs_taddr_t, mqs_type};
use std::ffi::{CStr, c_char};
use std::ptr;

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
    fn int(offset: u32) -> Field {
        Field {
            offset,
            width: Width::Int,
        }
    }
    fn pointer(offset: u32) -> Field {
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
    pub cc: Field,
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
}

/// Global symbols of each flavour.
pub(crate) const SYM_ALL_COMMUNICATORS: &CStr = c"MPIR_All_communicators";
pub(crate) const SYM_POSTED_HEAD_PTR: &CStr = c"MPID_Recvq_posted_head_ptr";
pub(crate) const SYM_UNEXPECTED_HEAD_PTR: &CStr = c"MPID_Recvq_unexpected_head_ptr";
pub(crate) const SYM_SENDQ_HEAD: &CStr = c"MPIR_Sendq_head";
pub(crate) const SYM_RECVQ_HEAD: &CStr = c"MPIR_Recvq_head";
pub(crate) const SYM_UNEXPQ_HEAD: &CStr = c"MPIR_Unexpq_head";

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
}

impl Missing {
    pub(crate) fn error(self) -> crate::error::Error {
        use crate::error::Error;
        match self {
            Missing::Symbol(_) | Missing::EitherSymbol(..) => Error::MissingSymbol,
            Missing::EitherType(..) => Error::MissingType,
            Missing::Type(_) => Error::MissingType,
            Missing::Field(..) => Error::MissingField,
            Missing::Width(_) => Error::UnsupportedWidth,
        }
    }
}

type Found<T> = std::result::Result<T, Missing>;

/// The debugger's image callbacks for one image.
pub(crate) struct ImageQuery<'a> {
    pub image: *mut mqs_image,
    pub callbacks: &'a mqs_image_callbacks,
}

/// A type the debugger found, with the name it was found under.
#[derive(Clone, Copy)]
struct Type {
    handle: *mut mqs_type,
    name: &'static CStr,
}

impl ImageQuery<'_> {
    fn lookup_type(&self, name: &'static CStr) -> Option<Type> {
        let find = self.callbacks.mqs_find_type_fp?;
        // SAFETY: debugger callback; the name is NUL-terminated and not written to.
        let handle = unsafe {
            find(
                self.image,
                name.as_ptr().cast_mut(),
                mqs_lang_code::mqs_lang_c as i32,
            )
        };
        (!handle.is_null()).then_some(Type { handle, name })
    }

    fn find_type(&self, name: &'static CStr) -> Found<Type> {
        self.lookup_type(name).ok_or(Missing::Type(name))
    }

    /// The first of several historical names of a type.
    fn find_type_named(&self, names: &[&'static CStr]) -> Found<Type> {
        names
            .iter()
            .find_map(|n| self.lookup_type(n))
            .ok_or(Missing::Type(names[0]))
    }

    fn offset_of(&self, ty: Type, field: &'static CStr) -> Option<u32> {
        let offset = self.callbacks.mqs_field_offset_fp?;
        // SAFETY: debugger callback with a handle it gave us.
        let at = unsafe { offset(ty.handle, field.as_ptr().cast_mut()) };
        u32::try_from(at).ok()
    }

    fn field_offset(&self, ty: Type, field: &'static CStr) -> Found<u32> {
        self.offset_of(ty, field)
            .ok_or(Missing::Field(ty.name, field))
    }

    fn size_of(&self, ty: Type) -> Option<u32> {
        let size = self.callbacks.mqs_sizeof_fp?;
        // SAFETY: debugger callback with a handle it gave us.
        let n = unsafe { size(ty.handle) };
        u32::try_from(n).ok().filter(|&n| n > 0)
    }

    /// `sizeof` a typedef such as `MPIR_Context_id_t`, if the debugger can say.
    fn typedef_size(&self, name: &'static CStr) -> Option<u32> {
        self.lookup_type(name).and_then(|t| self.size_of(t))
    }

    pub(crate) fn has_symbol(&self, name: &CStr) -> bool {
        let Some(find) = self.callbacks.mqs_find_symbol_fp else {
            return false;
        };
        let mut addr: mqs_taddr_t = 0;
        // SAFETY: debugger callback; `addr` is a valid out pointer.
        let rc = unsafe { find(self.image, name.as_ptr().cast_mut(), &mut addr) };
        rc == mqs_ok
    }

    /// Makes a lazily loading debugger read the unit that defines MPICH's types.
    fn touch_function(&self, name: &CStr) {
        if let Some(find) = self.callbacks.mqs_find_function_fp {
            // SAFETY: debugger callback; NULL address is allowed by the interface.
            unsafe {
                find(
                    self.image,
                    name.as_ptr().cast_mut(),
                    mqs_lang_code::mqs_lang_c as i32,
                    ptr::null_mut(),
                )
            };
        }
    }
}

fn width_of(size: Option<u32>, fallback: Width, what: &'static CStr) -> Found<Width> {
    match size {
        None => Ok(fallback),
        Some(n @ (1 | 2 | 4 | 8)) => Ok(Width::Bytes(n as u8)),
        Some(_) => Err(Missing::Width(what)),
    }
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
    let context_width = width_of(
        q.typedef_size(c"MPIR_Context_id_t"),
        context_default,
        c"MPIR_Context_id_t",
    )?;
    let aint_width = width_of(q.typedef_size(c"MPI_Aint"), Width::Pointer, c"MPI_Aint")?;

    let comm_ty = q.find_type_named(&[c"MPIR_Comm", c"MPID_Comm"])?;
    let comm_size = q.size_of(comm_ty);
    let name = q.field_offset(comm_ty, c"name")?;
    // MPI_MAX_OBJECT_NAME bytes, never past the end of the struct.
    let name_len = comm_size.map_or(128, |s| s.saturating_sub(name).min(128));
    let optional = |field| q.offset_of(comm_ty, field);
    let context = |field| -> Found<Field> {
        Ok(Field {
            offset: q.field_offset(comm_ty, field)?,
            width: context_width,
        })
    };
    let mut comm = CommLayout {
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
    };

    let group = match group_ty {
        Some(g) => discover_group(q, g)?,
        None => None,
    };

    let request_ty = q.find_type_named(&[c"MPIR_Request", c"MPID_Request"])?;
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
    let request = RequestLayout {
        cc: Field::int(q.field_offset(request_ty, c"cc")?),
        status_source: status.map(|s| s.0),
        status_tag: status.map(|s| s.1),
        status_count: status.and_then(|s| s.2),
    };

    let sendq = || -> Found<Option<SendqLayout>> {
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
    };

    let mut vcrt = None;
    let mut rank_map = None;
    let (flavour, queues) = if debugq {
        let ty = q.find_type(c"MPIR_Debugq")?;
        let node = DebugqLayout {
            request: Field::pointer(q.field_offset(ty, c"req")?),
            tag: Field::int(q.field_offset(ty, c"tag")?),
            rank: Field::int(q.field_offset(ty, c"rank")?),
            context_id: Field::int(q.field_offset(ty, c"context_id")?),
            buffer: Field::pointer(q.field_offset(ty, c"buf")?),
            count: Field {
                offset: q.field_offset(ty, c"count")?,
                width: aint_width,
            },
            next: Field::pointer(q.field_offset(ty, c"next")?),
        };
        let flavour = if pmap_groups {
            Flavour::Debugq5
        } else {
            Flavour::Debugq4
        };
        (flavour, QueueLayout::Debugq(node))
    } else if let Some(dev_ty) = q.lookup_type(c"MPIDI_Request") {
        // Layout A: CH3 keeps match bits, buffer and link inside `dev`.
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
        vcrt = discover_vcrt(q, comm_ty, &mut comm);
        (
            Flavour::Ch3,
            QueueLayout::RequestLists {
                request,
                sendq: sendq()?,
            },
        )
    } else {
        // Layout B: CH4 keeps the match data in `dev.ch4.am`, link in the request.
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
        rank_map = discover_rank_map(q, comm_ty, &mut comm);
        (
            Flavour::Ch4Am,
            QueueLayout::RequestLists {
                request,
                sendq: sendq()?,
            },
        )
    };

    Ok(Layout {
        flavour,
        comm_list,
        comm,
        group,
        vcrt,
        rank_map,
        request,
        queues,
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

/// Writes the has-queues message for `missing` into `out` (NUL-terminated,
/// a printf template with one `%s` for the image name).
pub(crate) fn describe_missing(missing: Missing, out: &mut [c_char]) {
    let mut text = MessageWriter::new(out);
    text.push("mqd: no message queues in '%s': ");
    match missing {
        Missing::Symbol(name) => {
            text.push("symbol ");
            text.push_name(name);
            text.push(" not found");
        }
        Missing::Type(name) => {
            text.push("type ");
            text.push_name(name);
            text.push(" unknown to the debugger");
        }
        Missing::Field(ty, field) => {
            text.push("field ");
            text.push_name(ty);
            text.push(".");
            text.push_name(field);
            text.push(" not found");
        }
        Missing::EitherSymbol(a, b) => {
            text.push("neither symbol ");
            text.push_name(a);
            text.push(" (MPICH 4.0.3 and later) nor ");
            text.push_name(b);
            text.push(" (MPICH 4.0.2 and earlier) found");
        }
        Missing::EitherType(a, b) => {
            text.push("neither type ");
            text.push_name(a);
            text.push(" (ch3 device) nor ");
            text.push_name(b);
            text.push(" (ch4 device) is known to the debugger");
        }
        Missing::Width(name) => {
            text.push("type ");
            text.push_name(name);
            text.push(" has an unsupported size");
        }
    }
    text.push(
        ". Likely cause: MPICH built without --enable-debuginfo, libmpi stripped of its debug \
         information, or an MPICH version this library does not know.",
    );
}

/// Writes the success message naming the layout found.
pub(crate) fn describe_layout(flavour: Flavour, out: &mut [c_char]) {
    let mut text = MessageWriter::new(out);
    text.push("mqd: '%s' has ");
    text.push(flavour.describe());
}

/// Appends text to a fixed C buffer, always leaving it NUL-terminated.
pub(crate) struct MessageWriter<'a> {
    out: &'a mut [c_char],
    len: usize,
}

impl<'a> MessageWriter<'a> {
    pub(crate) fn new(out: &'a mut [c_char]) -> Self {
        if let Some(first) = out.first_mut() {
            *first = 0;
        }
        MessageWriter { out, len: 0 }
    }

    pub(crate) fn push(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if self.len + 1 >= self.out.len() {
                break;
            }
            self.out[self.len] = b as c_char;
            self.len += 1;
        }
        if let Some(end) = self.out.get_mut(self.len) {
            *end = 0;
        }
    }

    /// A name from the target side: `%` is doubled so the template stays safe.
    fn push_name(&mut self, name: &CStr) {
        for part in name.to_string_lossy().split_inclusive('%') {
            self.push(part);
            if part.ends_with('%') {
                self.push("%");
            }
        }
    }
}
