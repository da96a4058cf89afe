//! What a correct dump must show of each model, per layout.

use crate::*;

// ------------------------------------------------------------------ derived expectations

pub(crate) fn is_debugq(layout: Layout) -> bool {
    matches!(layout, Layout::Debugq4 | Layout::Debugq5)
}

/// The DLL's has-queues message names the layout.
pub(crate) fn flavour_text(layout: Layout) -> &'static str {
    match layout {
        Layout::Ch3 => "MPICH ch3 device queues",
        Layout::Ch4Am => "MPICH ch4 active-message queues",
        Layout::Debugq4 => "MPICH 4.x debug queues",
        Layout::Debugq5 => "MPICH 5.x debug queues",
    }
}

/// The local group as the process lets a debugger know it.
pub(crate) fn visible_group(layout: Layout, c: &CommModel, world_size: usize) -> Option<Vec<i32>> {
    let inter = c.remote.is_some();
    let has_group_object = !c.dup || layout == Layout::Debugq5;
    // ch3: MPIR_Comm.dev.vcrt / local_vcrt; ch4: dev.ch4.map / local_map; for every
    // communicator, dups included.
    let device_tables = matches!(layout, Layout::Ch3 | Layout::Ch4Am);
    // COMM_WORLD is 0..N-1 and a one-process intracommunicator holds this rank alone.
    let needs_no_table = !inter
        && ((c.context_id == 0 && c.recvcontext_id == 0 && c.local.len() == world_size)
            || c.local.len() == 1);
    (has_group_object || device_tables || needs_no_table).then(|| c.local.clone())
}

/// The group an entry's peer rank is a rank of.
pub(crate) fn peer_group(layout: Layout, c: &CommModel, world_size: usize) -> Option<Vec<i32>> {
    match &c.remote {
        // Intercommunicators always have their remote MPIR_Group.
        Some(remote) => Some(remote.clone()),
        None => visible_group(layout, c, world_size),
    }
}

/// Whether the layout's queues list the entry at all.
pub(crate) fn listed(layout: Layout, e: &EntryModel) -> bool {
    if e.freed {
        return false;
    }
    match e.kind {
        // ch3/ch4: a matched receive leaves the posted queue; the debug queue keeps it.
        Kind::Receive => !e.complete || is_debugq(layout),
        Kind::Unexpected => true,
        // ch3/ch4 MPIR_Sendq: non-blocking sends only.
        Kind::Send { blocking } => !blocking || is_debugq(layout),
    }
}

/// The context id the layout records in a queue entry on `c`.
pub(crate) fn recorded_context(layout: Layout, kind: Kind, c: &CommModel) -> i32 {
    match kind {
        Kind::Send { .. } if !is_debugq(layout) => c.context_id,
        _ => c.recvcontext_id,
    }
}

/// The communicator a recorded context id belongs to: the one receiving on it; for a send
/// (the send context before MPICH 4.1) else the one sending on it.
pub(crate) fn owner(comms: &[CommModel], context: i32, send: bool) -> Option<usize> {
    let alive = |i: &usize| !comms[*i].freed;
    (0..comms.len())
        .filter(alive)
        .find(|&i| comms[i].recvcontext_id == context)
        .or_else(|| {
            if send {
                (0..comms.len())
                    .filter(alive)
                    .find(|&i| comms[i].context_id == context)
            } else {
                None
            }
        })
}

/// An operation as the dump must show it.
#[derive(Debug)]
pub(crate) struct ExpectedOp {
    /// Every field but `extra_text`.
    pub(crate) fields: Value,
    /// Lines `extra_text` must hold.
    pub(crate) lines: Vec<String>,
    /// Lines it must not hold.
    pub(crate) absent: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct ExpectedComm {
    pub(crate) name: String,
    pub(crate) size: i64,
    pub(crate) local_rank: i64,
    pub(crate) group: Option<Vec<i32>>,
    /// Indices into `RankModel::entries`, oldest first, per queue.
    pub(crate) receives: Vec<usize>,
    pub(crate) unexpected: Vec<usize>,
    pub(crate) sends: Vec<usize>,
}

pub(crate) const COMPLETED: &str = "completed, not yet waited or freed";
pub(crate) const REMOTE_GROUP: &str = "peer rank is in the remote group";
pub(crate) const ALL_DATA_ARRIVED: &str = "all data arrived";

pub(crate) fn expected_comms(
    layout: Layout,
    m: &RankModel,
    world_size: usize,
) -> Vec<ExpectedComm> {
    let mut order: Vec<usize> = (0..m.comms.len()).filter(|&i| !m.comms[i].freed).collect();
    order.sort_by_key(|&i| m.comms[i].recvcontext_id);
    let contexts: HashSet<i32> = order.iter().map(|&i| m.comms[i].recvcontext_id).collect();
    assert_eq!(
        contexts.len(),
        order.len(),
        "model: live communicators have distinct recvcontext_ids"
    );
    let mut out: Vec<ExpectedComm> = order
        .iter()
        .map(|&i| {
            let c = &m.comms[i];
            ExpectedComm {
                name: c.name.bytes().take(63).map(char::from).collect(),
                size: c.local.len() as i64,
                local_rank: i64::from(c.rank),
                group: visible_group(layout, c, world_size),
                receives: Vec::new(),
                unexpected: Vec::new(),
                sends: Vec::new(),
            }
        })
        .collect();
    // Entries in creation order: the order the dump lists them in, for every layout.
    for (i, e) in m.entries.iter().enumerate() {
        if !listed(layout, e) {
            continue;
        }
        let send = matches!(e.kind, Kind::Send { .. });
        let context = recorded_context(layout, e.kind, &m.comms[e.comm]);
        let owner = owner(&m.comms, context, send);
        // scenario.c's context ids never make an entry look like another communicator's.
        assert_eq!(
            owner,
            Some(e.comm),
            "model: context {context} of entry {e:?} is its communicator's"
        );
        let slot = order
            .iter()
            .position(|&c| c == e.comm)
            .expect("live communicator");
        match e.kind {
            Kind::Receive => out[slot].receives.push(i),
            Kind::Unexpected => out[slot].unexpected.push(i),
            Kind::Send { .. } => out[slot].sends.push(i),
        }
    }
    out
}

pub(crate) fn expected_op(
    layout: Layout,
    m: &RankModel,
    e: &EntryModel,
    world_size: usize,
) -> ExpectedOp {
    let c = &m.comms[e.comm];
    let group = peer_group(layout, c, world_size);
    let world = |rank: i32| -> i64 {
        group
            .as_ref()
            .and_then(|g| usize::try_from(rank).ok().and_then(|r| g.get(r)))
            .map_or(-1, |&w| i64::from(w))
    };
    let mut lines = Vec::new();
    let mut absent = Vec::new();
    let status = if e.complete && e.kind != Kind::Unexpected {
        "complete"
    } else {
        "pending"
    };
    let fields = match e.kind {
        Kind::Receive => {
            assert!(!e.complete, "model: no scenario leaves a completed receive");
            let any_source = e.peer == ANY_SOURCE;
            let any_tag = e.tag == ANY_TAG;
            lines.push("posted receive (MPI_Recv/MPI_Irecv)".to_owned());
            match (any_source, any_tag) {
                (true, true) => lines.push("from MPI_ANY_SOURCE, tag MPI_ANY_TAG".into()),
                (true, false) => lines.push("from MPI_ANY_SOURCE".into()),
                (false, true) => lines.push("tag MPI_ANY_TAG".into()),
                (false, false) => {}
            }
            json!({
                "status": status,
                "desired_local_rank": if any_source { -1 } else { i64::from(e.peer) },
                "desired_global_rank": if any_source { -1 } else { world(e.peer) },
                "tag_wild": any_tag,
                "desired_tag": e.tag,
                "desired_length": e.count,
                "system_buffer": false,
                "buffer": e.buffer,
                "actual_local_rank": -1,
                "actual_global_rank": -1,
                "actual_tag": -1,
                "actual_length": 0,
                "sender": null,
            })
        }
        Kind::Unexpected => {
            // ch3: dev.recv_data_sz; ch4: am.count in bytes; the debug queues record no size.
            let length = if is_debugq(layout) { 0 } else { e.count };
            lines.push("unexpected message: no receive posted yet".into());
            lines.push(match layout {
                // CH3's dev.state says eager (data buffered) or rendezvous (data at the sender).
                Layout::Ch3 if e.complete => format!("{} bytes buffered by MPICH", e.count),
                Layout::Ch3 => format!("rendezvous: {} bytes still at the sender", e.count),
                Layout::Ch4Am => "length in bytes".into(),
                Layout::Debugq4 | Layout::Debugq5 => "length not recorded by this MPICH".into(),
            });
            if !is_debugq(layout) {
                if e.complete {
                    lines.push(ALL_DATA_ARRIVED.into())
                } else {
                    absent.push(ALL_DATA_ARRIVED.into())
                }
            }
            json!({
                "status": "pending",
                "desired_local_rank": e.peer,
                "desired_global_rank": world(e.peer),
                "tag_wild": false,
                "desired_tag": e.tag,
                "desired_length": length,
                "system_buffer": true,
                "buffer": 0,
                "actual_local_rank": e.peer,
                "actual_global_rank": world(e.peer),
                "actual_tag": e.tag,
                "actual_length": length,
                // The fixtures' ch3 state says eager (its sender has gone on) or
                // rendezvous (its data waits at the sender for the match).
                "sender": match (layout, e.complete) {
                    (Layout::Ch3, true) => json!("gone_on"),
                    (Layout::Ch3, false) => json!("waits"),
                    _ => Value::Null,
                },
            })
        }
        Kind::Send { .. } => {
            lines.push(
                if is_debugq(layout) {
                    "send (blocking or non-blocking)"
                } else {
                    "non-blocking send (MPI_Isend family)"
                }
                .into(),
            );
            json!({
                "status": status,
                "desired_local_rank": e.peer,
                "desired_global_rank": world(e.peer),
                "tag_wild": false,
                "desired_tag": e.tag,
                "desired_length": e.count,
                "system_buffer": false,
                "buffer": e.buffer,
                "actual_local_rank": e.peer,
                "actual_global_rank": world(e.peer),
                "actual_tag": e.tag,
                "actual_length": e.count,
                "sender": null,
            })
        }
    };
    if e.complete && e.kind != Kind::Unexpected {
        lines.push(COMPLETED.into());
    } else {
        absent.push(COMPLETED.into());
    }
    if c.remote.is_some() {
        lines.push(REMOTE_GROUP.into());
    } else {
        absent.push(REMOTE_GROUP.into());
    }
    ExpectedOp {
        fields,
        lines,
        absent,
    }
}
