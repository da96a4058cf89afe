//! MPICH's C declarations, transcribed member by member for each layout, laid out by
//! [`super::layout`].
//!
//! The member lists follow MPICH's headers (`mpir_comm.h`, `mpir_request.h`, `mpir_group.h`,
//! ch3's `mpidpre.h` and `mpidi_ch3_pre.h`, ch4's `mpidpre.h` and `ch4_types.h`,
//! `dbginit.c`), shortened where the remaining members change no offset that matters, so that
//! offsets are realistic: `name` is deep inside `MPIR_Comm`, `cc` is not at offset 0, and
//! the receive-queue link of ch3 sits at the end of the device part of the request.

use super::layout::TypeTable;
use super::{Arch, Layout};

/// Members a struct gets; a shorthand for the tables below.
type M<'a> = &'a [(&'a str, usize)];

/// The complete type table of one layout on one architecture.
pub(crate) fn mpich_types(layout: Layout, arch: Arch) -> TypeTable {
    let p = u64::from(arch.pointer_size);
    let mut t = TypeTable::new(p);

    // Basic types and the typedefs MPICH builds on.
    let char_ = t.scalar("char", 1);
    let bool_ = t.scalar("_Bool", 1);
    let short = t.scalar("short", 2);
    let ushort = t.scalar("unsigned short", 2);
    let int = t.scalar("int", 4);
    let uint = t.scalar("unsigned int", 4);
    let long = t.scalar("long", p);
    let ulong = t.scalar("unsigned long", p);
    let llong = t.scalar("long long", 8);
    let ullong = t.scalar("unsigned long long", 8);
    let ptr = t.pointer();
    let int16 = t.typedef("int16_t", short);
    let uint16 = t.typedef("uint16_t", ushort);
    let int32 = t.typedef("int32_t", int);
    t.typedef("uint32_t", uint);
    let int64 = t.typedef("int64_t", if p == 8 { long } else { llong });
    let uint64 = t.typedef("uint64_t", if p == 8 { ulong } else { ullong });
    let intptr = t.typedef("intptr_t", long);
    t.typedef("uintptr_t", ulong);
    t.typedef("size_t", ulong);
    let aint = t.typedef("MPI_Aint", if p == 8 { long } else { int });
    let datatype = t.typedef("MPI_Datatype", int);
    let mpi_request = t.typedef("MPI_Request", int);
    let ctx = if layout == Layout::Debugq5 {
        t.typedef("MPIR_Context_id_t", int)
    } else {
        t.typedef("MPIR_Context_id_t", uint16)
    };
    // glibc's pthread_mutex_t: a 40-byte blob on LP64, 24 bytes on ILP32.
    let mutex_bytes = t.array(char_, if p == 8 { 40 } else { 24 });
    let pthread_mutex = t.union(
        Some("pthread_mutex_t"),
        &[("__size", mutex_bytes), ("__align", long)],
    );
    let thread_mutex = t.structure(
        Some("MPIDU_Thread_mutex_t"),
        &[("mutex", pthread_mutex), ("num_queued_threads", int)],
    );
    let mutex = t.typedef("MPID_Thread_mutex_t", thread_mutex);
    let comm_kind = t.scalar("MPIR_Comm_kind_t", 4);
    let hierarchy_kind = t.scalar("MPIR_Comm_hierarchy_kind_t", 4);
    let request_kind = t.scalar("MPIR_Request_kind_t", 4);

    let status = t.structure(
        Some("MPI_Status"),
        &[
            ("count_lo", int),
            ("count_hi_and_cancelled", int),
            ("MPI_SOURCE", int),
            ("MPI_TAG", int),
            ("MPI_ERROR", int),
        ],
    );
    t.structure(
        Some("MPIR_Comm_list"),
        &[("sequence_number", int), ("head", ptr)],
    );

    // Groups.
    match layout {
        Layout::Debugq5 => {
            let lpid = t.typedef("MPIR_Lpid", int64);
            let stride = t.structure(None, &[("offset", lpid), ("stride", lpid)]);
            let u = t.union(None, &[("map", ptr), ("stride", stride)]);
            let pmap = t.structure(Some("MPIR_Pmap"), &[("use_map", bool_), ("u", u)]);
            t.structure(
                Some("MPIR_Group"),
                &[
                    ("handle", int),
                    ("ref_count", int),
                    ("size", int),
                    ("rank", int),
                    ("pmap", pmap),
                    ("session_ptr", ptr),
                ],
            );
        }
        _ => {
            // 4.0.x has `int lpid`, 4.1 and later `uint64_t lpid`.
            let lpid = if layout == Layout::Debugq4 {
                uint64
            } else {
                int
            };
            let pmap_t = t.structure(None, &[("lpid", lpid), ("next_lpid", int)]);
            t.typedef("MPII_Group_pmap_t", pmap_t);
            t.structure(
                Some("MPIR_Group"),
                &[
                    ("handle", int),
                    ("ref_count", int),
                    ("size", int),
                    ("rank", int),
                    ("idx_of_first_lpid", int),
                    ("lrank_to_lpid", ptr),
                    ("is_local_dense_monotonic", int),
                ],
            );
        }
    }

    // Device parts of MPIR_Comm and MPIR_Request, and the device's queue heads.
    let (comm_dev, request_dev) = match layout {
        Layout::Ch3 => ch3_types(
            &mut t,
            ctx,
            int16,
            int32,
            uint64,
            aint,
            datatype,
            mpi_request,
            intptr,
            uint,
            int,
            ptr,
        ),
        Layout::Ch4Am => ch4_types(&mut t, ctx, aint, datatype, mutex, uint64, int, char_, ptr),
        Layout::Debugq4 | Layout::Debugq5 => {
            let blob = t.array(char_, 48);
            let comm_dev = t.structure(
                Some("MPIDI_Devcomm_t"),
                &[("opaque", blob), ("csel_comm", ptr)],
            );
            let ch4 = t.union(None, &[("opaque", blob), ("command", ptr)]);
            let request_dev = t.structure(
                Some("MPIDI_Devreq_t"),
                &[
                    ("is_local", int),
                    ("anysource_partner_request", ptr),
                    ("ch4", ch4),
                ],
            );
            (comm_dev, request_dev)
        }
    };

    match layout {
        Layout::Ch3 | Layout::Ch4Am => {
            t.structure(
                Some("MPIR_Sendq"),
                &[
                    ("sreq", ptr),
                    ("tag", int),
                    ("rank", int),
                    ("context_id", int),
                    ("next", ptr),
                    ("prev", ptr),
                ],
            );
        }
        Layout::Debugq4 | Layout::Debugq5 => {
            t.structure(
                Some("MPIR_Debugq"),
                &[
                    ("req", ptr),
                    ("tag", int),
                    ("rank", int),
                    ("context_id", int),
                    ("buf", ptr),
                    ("count", aint),
                    ("next", ptr),
                    ("prev", ptr),
                ],
            );
        }
    }

    // MPIR_Comm (mpir_comm.h, 4.x; 5.x adds session_ptr and widens the context ids).
    let name = t.array(char_, 128);
    let hints = t.array(int, 8);
    let mut comm: Vec<(&str, usize)> = vec![("handle", int), ("ref_count", int), ("mutex", mutex)];
    if layout == Layout::Debugq5 {
        comm.push(("session_ptr", ptr));
    }
    comm.extend_from_slice(&[
        ("context_id", ctx),
        ("recvcontext_id", ctx),
        ("remote_size", int),
        ("rank", int),
        ("attributes", ptr),
        ("local_size", int),
        ("local_group", ptr),
        ("remote_group", ptr),
        ("comm_kind", comm_kind),
        ("name", name),
        ("errhandler", ptr),
        ("local_comm", ptr),
        ("hierarchy_kind", hierarchy_kind),
        ("node_comm", ptr),
        ("node_roots_comm", ptr),
        ("intranode_table", ptr),
        ("internode_table", ptr),
        ("is_low_group", int),
        ("comm_next", ptr),
        ("hints", hints),
        ("info", ptr),
        ("seq", int),
        ("tainted", int),
        ("topo_fns", ptr),
        ("csel_comm", ptr),
        ("dev", comm_dev),
    ]);
    t.structure(Some("MPIR_Comm"), &comm);

    // MPIR_Request (mpir_request.h).
    let greq = t.structure(None, &[("greq_fns", ptr)]);
    let coll = t.structure(
        None,
        &[
            ("host_sendbuf", ptr),
            ("host_recvbuf", ptr),
            ("datatype", datatype),
        ],
    );
    let nbc = t.structure(None, &[("coll", coll), ("sched", ptr)]);
    let persist = t.structure(None, &[("real_request", ptr)]);
    let u = t.union(None, &[("ureq", greq), ("nbc", nbc), ("persist", persist)]);
    let mut request: Vec<(&str, usize)> = vec![
        ("handle", int),
        ("ref_count", int),
        ("kind", request_kind),
        ("cc", int),
        ("cc_ptr", ptr),
        ("comm", ptr),
        ("status", status),
        ("u", u),
        ("completion_notification", ptr),
    ];
    if matches!(layout, Layout::Debugq4 | Layout::Debugq5) {
        request.extend_from_slice(&[("send", ptr), ("recv", ptr), ("unexp", ptr)]);
    }
    request.extend_from_slice(&[("next", ptr), ("prev", ptr), ("dev", request_dev)]);
    t.structure(Some("MPIR_Request"), &request);
    t
}

/// ch3 (layout A): `MPIDI_Request`, the match union, the VC reference tables.
#[allow(clippy::too_many_arguments)]
fn ch3_types(
    t: &mut TypeTable,
    ctx: usize,
    int16: usize,
    int32: usize,
    uint64: usize,
    aint: usize,
    datatype: usize,
    mpi_request: usize,
    intptr: usize,
    uint: usize,
    int: usize,
    ptr: usize,
) -> (usize, usize) {
    let rank_t = t.typedef("MPIDI_Rank_t", int16);
    let parts = t.structure(
        None,
        &[("tag", int32), ("rank", rank_t), ("context_id", ctx)],
    );
    let parts = t.typedef("MPIDI_Message_match_parts_t", parts);
    let matcher = t.union(None, &[("parts", parts), ("whole", uint64)]);
    let matcher = t.typedef("MPIDI_Message_match", matcher);
    let members: M = &[
        ("match", matcher),
        ("mask", matcher),
        ("user_buf", ptr),
        ("user_count", aint),
        ("datatype", datatype),
        ("drop_data", int),
        ("segment_ptr", ptr),
        ("segment_first", intptr),
        ("segment_size", intptr),
        ("datatype_ptr", ptr),
        ("tmpbuf", ptr),
        ("tmpbuf_off", intptr),
        ("tmpbuf_sz", intptr),
        ("recv_data_sz", intptr),
        ("sender_req_id", mpi_request),
        ("state", uint),
        ("cancel_pending", int),
        ("iov_count", int),
        ("iov_offset", int),
        ("OnDataAvail", ptr),
        ("OnFinal", ptr),
        ("next", ptr),
    ];
    let request_dev = t.structure(Some("MPIDI_Request"), members);

    let vc_state = t.scalar("MPIDI_VC_State_t", 4);
    let ch = t.array(ptr, 4);
    t.structure(
        Some("MPIDI_VC_t"),
        &[
            ("handle", int),
            ("ref_count", int),
            ("state", vc_state),
            ("pg", ptr),
            ("pg_rank", int),
            ("lpid", int),
            ("node_id", int),
            ("port_name_tag", int),
            ("sendNoncontig_fn", ptr),
            ("rndvSend_fn", ptr),
            ("rndvRecv_fn", ptr),
            ("eager_max_msg_sz", int),
            ("ready_eager_max_msg_sz", int),
            ("ch", ch),
        ],
    );
    let table = t.array(ptr, 0);
    t.structure(
        Some("MPIDI_VCRT"),
        &[
            ("handle", int),
            ("ref_count", int),
            ("size", int),
            ("vcr_table", table),
        ],
    );
    let comm_dev = t.structure(
        Some("MPIDI_CH3I_comm_t"),
        &[
            ("eager_max_msg_sz", int),
            ("anysource_enabled", int),
            ("last_ack_rank", int),
            ("waiting_for_revoke", int),
            ("vcrt", ptr),
            ("local_vcrt", ptr),
            ("next", ptr),
            ("prev", ptr),
        ],
    );
    (comm_dev, request_dev)
}

/// ch4 (layout B): `MPIDI_Devreq_t` / `MPIDIG_req_t`, the rank maps, the per-VCI queues.
#[allow(clippy::too_many_arguments)]
fn ch4_types(
    t: &mut TypeTable,
    ctx: usize,
    aint: usize,
    datatype: usize,
    mutex: usize,
    uint64: usize,
    int: usize,
    char_: usize,
    ptr: usize,
) -> (usize, usize) {
    // MPIDIG_req_t: the AM fields; rank, tag and context id live in the unnamed `u.recv`.
    let netmod_am_bytes = t.array(ptr, 3);
    let netmod_am = t.union(None, &[("ofi", netmod_am_bytes)]);
    let shm_am = t.structure(None, &[("status", uint64), ("pack_buffer", ptr)]);
    let send = t.structure(None, &[("dest", int)]);
    let recv = t.structure(None, &[("source", int), ("context_id", ctx), ("tag", int)]);
    let origin = t.structure(None, &[("target_rank", int), ("target_datatype", datatype)]);
    let target = t.structure(None, &[("origin_rank", int)]);
    let u = t.union(
        None,
        &[
            ("send", send),
            ("recv", recv),
            ("origin", origin),
            ("target", target),
        ],
    );
    let am = t.structure(
        Some("MPIDIG_req_t"),
        &[
            ("netmod_am", netmod_am),
            ("shm_am", shm_am),
            ("req", ptr),
            ("rndv_hdr", ptr),
            ("buffer", ptr),
            ("count", aint),
            ("datatype", datatype),
            ("u", u),
        ],
    );
    let preq = t.structure(
        Some("MPIDI_prequest_t"),
        &[
            ("p_type", int),
            ("buffer", ptr),
            ("count", aint),
            ("rank", int),
            ("tag", int),
            ("context_id", ctx),
            ("datatype", datatype),
        ],
    );
    let netmod_bytes = t.array(ptr, 12);
    let netmod = t.union(None, &[("ofi", netmod_bytes)]);
    let shm_bytes = t.array(ptr, 2);
    let shm = t.union(None, &[("posix", shm_bytes)]);
    // Requests of single-process communicators (ch4_self.c) use these in place of `am`.
    let self_request = t.structure(
        Some("MPIDI_self_request_t"),
        &[
            ("buf", ptr),
            ("count", aint),
            ("datatype", datatype),
            ("tag", int),
            ("context_id", int),
            ("match_req", ptr),
        ],
    );
    let ch4 = t.union(
        None,
        &[
            ("am", am),
            ("preq", preq),
            ("self", self_request),
            ("netmod", netmod),
            ("shm", shm),
        ],
    );
    let request_dev = t.structure(
        Some("MPIDI_Devreq_t"),
        &[
            ("is_local", int),
            ("anysource_partner_request", ptr),
            ("ch4", ch4),
        ],
    );

    // The request's extension (`am.req`): its `status` flags say a synchronous sender
    // (PEER_SSEND, bit 1) or a rendezvous (RTS, bit 7).
    t.structure(
        Some("MPIDIG_req_ext_t"),
        &[
            ("rreq", netmod_am_bytes),
            ("local_vci", char_),
            ("remote_vci", char_),
            ("iov", ptr),
            ("target_cmpl_cb", ptr),
            ("seq_no", uint64),
            ("request", ptr),
            ("status", uint64),
            ("next", ptr),
            ("prev", ptr),
        ],
    );

    // Rank maps (ch4_types.h / mpidpre.h).
    t.typedef("MPIDI_lpid_t", int);
    let mode = t.scalar("MPIDI_rank_map_mode", 4);
    let lut_lpids = t.array(int, 0);
    t.structure(
        Some("MPIDI_rank_map_lut_t"),
        &[("handle", int), ("ref_count", int), ("lpid", lut_lpids)],
    );
    let stride = t.structure(
        None,
        &[("offset", int), ("stride", int), ("blocksize", int)],
    );
    let reg = t.union(None, &[("offset", int), ("stride", stride)]);
    let lut = t.structure(None, &[("t", ptr), ("lpid", ptr)]);
    let mlut = t.structure(None, &[("t", ptr), ("gpid", ptr)]);
    let irreg = t.union(None, &[("lut", lut), ("mlut", mlut)]);
    let map = t.structure(
        Some("MPIDI_rank_map_t"),
        &[
            ("mode", mode),
            ("avtid", int),
            ("size", int),
            ("reg", reg),
            ("irreg", irreg),
        ],
    );
    let am_comm = t.structure(
        Some("MPIDIG_comm_t"),
        &[
            ("posted_head_ptr", ptr),
            ("unexp_head_ptr", ptr),
            ("window_instance", int),
        ],
    );
    let comm_netmod_bytes = t.array(ptr, 6);
    let comm_netmod = t.union(None, &[("ofi", comm_netmod_bytes)]);
    let comm_shm_bytes = t.array(char_, 24);
    let comm_shm = t.union(None, &[("posix", comm_shm_bytes)]);
    let comm_ch4 = t.structure(
        None,
        &[
            ("am", am_comm),
            ("netmod", comm_netmod),
            ("shm", comm_shm),
            ("map", map),
            ("local_map", map),
            ("csel_comm", ptr),
        ],
    );
    let comm_dev = t.structure(Some("MPIDI_Devcomm_t"), &[("ch4", comm_ch4)]);

    // The per-VCI queue heads that MPID_Recvq_*_head_ptr point into.
    let per_vci = t.structure(
        Some("MPIDI_per_vci_t"),
        &[
            ("lock", mutex),
            ("posted_list", ptr),
            ("unexp_list", ptr),
            ("cmpl_list", ptr),
            ("progress_count", int),
        ],
    );
    let vcis = t.array(per_vci, 2);
    t.structure(
        Some("MPIDI_CH4_Global_t"),
        &[
            ("is_initialized", int),
            ("pname_set", int),
            ("comm_req_lists", ptr),
            ("per_vci", vcis),
            ("n_vcis", int),
        ],
    );
    (comm_dev, request_dev)
}
