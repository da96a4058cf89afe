//! What the hang recorder (`libmqd_recorder.so`, preloaded into the ranks) kept in a
//! rank's memory: each thread's MPI call in progress with its envelope, exact at any
//! optimisation level and in any language. Found by the region's symbol; a region that
//! cannot be read, or a thread's record caught mid-write, is unknown and said so.

use mqd_debuginfo::AddressSpace;
use mqd_model::{CallArguments, CallClass};
use mqd_mpi_abi::tables::{Abi, Family};
use mqd_recording::{CommRecord, Damage, Recording, RequestRecord, ThreadCall, ThreadRecord};
use mqd_target::Memory;

/// Where a process keeps its records: the address of `mqd_recorder_region`.
#[derive(Debug, Clone, Copy)]
pub struct Records {
    at: u64,
}

/// Where the recorder's values come from, as a call's `sources` say it.
const SOURCE: &str = "the hang recorder";

impl Records {
    /// The records of the process of `space`, if the recorder is loaded in it.
    pub fn of(space: &AddressSpace) -> Option<Records> {
        space
            .find_symbol(mqd_recording::SYMBOL)
            .map(|at| Records { at })
    }

    /// The records of a region whose header is at `at` (a fuzzer's or a test's image).
    pub fn at(at: u64) -> Records {
        Records { at }
    }

    /// Reads the region: the header, then its names, field offsets, thread slots,
    /// communicator slots, members taken, accounting and requests (one read each).
    pub fn read(&self, memory: &dyn Memory) -> Result<Recording, Damage> {
        let bytes = |at: u64, len: usize| {
            let mut buf = vec![0u8; len];
            memory
                .read_memory(at, &mut buf)
                .map(|()| buf)
                .map_err(|_| Damage::Unreadable(at))
        };
        let header =
            mqd_recording::decode_header(&bytes(self.at, mqd_recording::HEADER_WORDS * 8)?)?;
        let (names_at, names_len) = header.names();
        let (fields_at, fields_len) = header.field_offsets();
        let (table_at, table_len) = header.thread_table();
        let names = bytes(names_at, names_len)?;
        let threads = mqd_recording::decode_threads(
            &header,
            &bytes(fields_at, fields_len)?,
            &names,
            &bytes(table_at, table_len)?,
        )?;
        let (offsets_at, offsets_len) = header.comm_field_offsets();
        let (comms_at, comms_len) = header.comm_table();
        let (members_at, members_len) = header.members();
        let comms = mqd_recording::decode_comms(
            &header,
            &bytes(offsets_at, offsets_len)?,
            &names,
            &bytes(comms_at, comms_len)?,
            &bytes(members_at, members_len)?,
        )?;
        let (offsets_at, offsets_len) = header.traffic_field_offsets();
        let (traffic_at, traffic_len) = header.traffic_table();
        let (traffic, traffic_torn) = mqd_recording::decode_traffic(
            &header,
            &bytes(offsets_at, offsets_len)?,
            &bytes(traffic_at, traffic_len)?,
        )?;
        let (offsets_at, offsets_len) = header.request_field_offsets();
        let (requests_at, requests_len) = header.request_table();
        let requests = mqd_recording::decode_requests(
            &header,
            &bytes(offsets_at, offsets_len)?,
            &bytes(requests_at, requests_len)?,
        )?;
        Ok(Recording {
            header,
            threads,
            comms,
            traffic,
            traffic_torn,
            requests,
        })
    }
}

/// The handles' ABI a region says, where the process's own objects did not say it.
pub fn abi_of(recording: &Recording) -> Option<Abi> {
    match recording.header.abi {
        1 => Some(Abi::new(Family::Mpich)),
        _ => None,
    }
}

/// The record of thread `tid`, if it has one.
pub fn thread_record(recording: &Recording, tid: i32) -> Option<&ThreadRecord> {
    recording.threads.iter().find(|t| match t {
        ThreadRecord::Whole { thread, .. } | ThreadRecord::Torn { thread } => *thread == tid as u64,
    })
}

/// The communicator the recorder noted with `handle`, in use.
fn comm_record(recording: &Recording, handle: u64) -> Option<&CommRecord> {
    recording
        .comms
        .iter()
        .find(|c| matches!(c, CommRecord::Whole { handle: h, freed: false, .. } if *h == handle))
}

/// A recorded call's arguments in the model's spelling (MPICH's special ranks and tags),
/// each said to come from the recorder; its communicator's members where the recorder
/// noted them.
pub fn call_arguments(call: &ThreadCall, abi: &Abi, recording: &Recording) -> CallArguments {
    let mut args = CallArguments {
        function: call.name.clone(),
        called: Some(call.name.clone()),
        ..CallArguments::default()
    };
    let mut from = |name: &str| {
        args.sources.insert(name.to_owned(), SOURCE.to_owned());
    };
    let rooted = CallClass::of(&call.name) == CallClass::Collective;
    let peer = call.peer.map(|p| abi.rank(p as u64));
    let mut put = Vec::new();
    if let Some(comm) = call.comm {
        put.push("comm");
        args.comm = Some(abi.handle(comm));
        args.predefined = abi.predefined_comm(comm).map(str::to_owned);
        if let Some(CommRecord::Whole {
            members: Some(members),
            inter: false,
            lineage,
            ..
        }) = comm_record(recording, comm)
            && members.iter().all(|&m| m >= 0)
        {
            put.push("members");
            args.members = Some(members.clone());
            if *lineage != 0 {
                put.push("lineage");
                args.lineage = Some(*lineage);
            }
        }
    }
    if let Some(n) = call.collective {
        put.push("collective");
        args.collective = Some(n);
    }
    match (peer, rooted) {
        (Some(root), true) => {
            put.push("root");
            args.root = Some(root);
        }
        (Some(peer), false) => {
            put.push("peer");
            args.peer = Some(peer);
        }
        (None, _) => {}
    }
    if let Some(tag) = call.tag {
        put.push("tag");
        args.tag = Some(abi.tag(tag as u64));
    }
    if let Some(source) = call.peer2 {
        put.push("recv_peer");
        args.recv_peer = Some(abi.rank(source as u64));
    }
    if let Some(tag) = call.tag2 {
        put.push("recv_tag");
        args.recv_tag = Some(abi.tag(tag as u64));
    }
    let size = call.datatype.and_then(|d| abi.datatype_size(d));
    if let Some(bytes) = call.count.zip(size).and_then(|(n, s)| n.checked_mul(s)) {
        put.push("bytes");
        args.bytes = Some(bytes);
    }
    for name in put {
        from(name);
    }
    args
}

/// `recorded` completed with what the frames gave (`read`) and the recorder does not
/// keep (the communicator's object and context id, its members, request objects); where
/// both say a value and they differ, the recorder's is kept and the difference said in
/// the call's `sources`.
pub fn merge(mut recorded: CallArguments, read: Option<CallArguments>) -> CallArguments {
    let Some(read) = read else {
        return recorded;
    };
    recorded.comm_address = recorded.comm_address.or(read.comm_address);
    recorded.context_id = recorded.context_id.or(read.context_id);
    recorded.members = recorded.members.take().or(read.members);
    if recorded.requests.is_empty() {
        recorded.requests = read.requests;
    }
    let mut differ = Vec::new();
    let mut filled = Vec::new();
    for (name, ours, theirs) in [
        ("peer", &mut recorded.peer, read.peer),
        ("tag", &mut recorded.tag, read.tag),
        ("root", &mut recorded.root, read.root),
        ("recv_peer", &mut recorded.recv_peer, read.recv_peer),
        ("recv_tag", &mut recorded.recv_tag, read.recv_tag),
    ] {
        match (*ours, theirs) {
            (Some(a), Some(b)) if a != b => differ.push((name, b)),
            (None, Some(_)) => {
                *ours = theirs;
                filled.push(name);
            }
            _ => {}
        }
    }
    for (name, theirs) in differ {
        recorded.sources.insert(
            name.to_owned(),
            format!("{SOURCE} (its frame said {theirs}: the record is the call's own)"),
        );
    }
    for name in filled {
        if let Some(source) = read.sources.get(name) {
            recorded.sources.insert(name.to_owned(), source.clone());
        }
    }
    if recorded.bytes.is_none() {
        recorded.bytes = read.bytes;
    }
    recorded
}

/// Where the rank is in MPI's life as the recorder saw it: in or past `MPI_Finalize`.
pub fn phase_of(recording: &Recording) -> Option<mqd_model::MpiPhase> {
    match recording.header.finalize {
        mqd_recording::FINALIZE_ENTERED => Some(mqd_model::MpiPhase::Finalizing),
        mqd_recording::FINALIZE_RETURNED => Some(mqd_model::MpiPhase::Finalized),
        _ => None,
    }
}

/// The communicators every member names alike (a lineage, members known), with the
/// collectives entered on each; handles as `abi` spells them in calls' arguments.
fn comm_counts(recording: &Recording, abi: &Abi) -> Vec<mqd_model::CommCount> {
    let world = recording.header.world_size;
    recording
        .comms
        .iter()
        .filter_map(|c| match c {
            CommRecord::Whole {
                handle,
                freed: false,
                inter: false,
                size,
                members: Some(members),
                collectives,
                last,
                lineage,
            } if *lineage != 0 => {
                let in_order = world == Some(*size as i64)
                    && members.iter().enumerate().all(|(i, &m)| m == i as i32);
                Some(mqd_model::CommCount {
                    handle: abi.handle(*handle),
                    lineage: *lineage,
                    members: (!in_order).then(|| members.clone()),
                    size: *size,
                    entered: *collectives,
                    last: last.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

/// The receive requests started and not completed, their sources as `MPI_COMM_WORLD`
/// ranks where their communicator's members are kept.
fn posted_receives(recording: &Recording, abi: &Abi) -> Vec<mqd_model::PostedReceive> {
    let any_source = -2; // MPICH's spelling, which `abi.rank` gives every ABI's.
    let any_tag = -1;
    recording
        .requests
        .iter()
        .filter_map(|r| match r {
            RequestRecord::Whole {
                kind,
                comm,
                peer,
                tag,
                ..
            } if kind & mqd_recording::REQUEST_RECEIVE != 0
                && kind & mqd_recording::REQUEST_ACTIVE != 0 =>
            {
                let record = comm.and_then(|c| comm_record(recording, c));
                let (lineage, members) = match record {
                    Some(CommRecord::Whole {
                        lineage,
                        members,
                        inter: false,
                        ..
                    }) => (*lineage, members.as_ref()),
                    _ => (0, None),
                };
                let source = peer
                    .map(|p| abi.rank(p as u64))
                    .filter(|&p| p != any_source)
                    .and_then(|p| members?.get(usize::try_from(p).ok()?).copied())
                    .filter(|_| lineage != 0);
                let tag = tag
                    .map(|t| abi.tag(t as u64))
                    .filter(|&t| t != any_tag)
                    .and_then(|t| i32::try_from(t).ok());
                Some(mqd_model::PostedReceive {
                    lineage,
                    source,
                    tag,
                })
            }
            _ => None,
        })
        .collect()
}

/// The messages and collectives the recorder counted; `seen`: no binding of the MPI
/// bypasses it.
pub fn traffic_of(
    recording: &Recording,
    abi: &Abi,
    seen: bool,
    notes: &mut Vec<String>,
) -> mqd_model::Traffic {
    let overflow = recording.header.overflow;
    let lost = overflow & (mqd_recording::OVERFLOW_TRAFFIC | mqd_recording::OVERFLOW_THREADS)
        | u64::from(recording.traffic_torn);
    if lost != 0 {
        notes.push("the hang recorder could not count every message sent (a table ran out; a send on an intercommunicator, of a partitioned request, or on a communicator whose members it could not ask): its counts prove nothing".into());
    }
    let mut counts: Vec<mqd_model::TrafficCount> = recording
        .traffic
        .iter()
        .map(|t| mqd_model::TrafficCount {
            peer: t.peer,
            tag: t.tag,
            lineage: t.lineage,
            sent: t.sent,
            received: t.received,
        })
        .collect();
    // By distance to the right, so that the ranks of a regular pattern (a ring, a grid)
    // list their neighbours in the same order: alike, and one class.
    let rank = recording.header.world_rank.unwrap_or(0);
    let size = recording.header.world_size.filter(|&n| n > 0).unwrap_or(1);
    counts.sort_by_key(|c| {
        let distance = (i64::from(c.peer) - rank).rem_euclid(size);
        (distance, c.peer, c.tag, c.lineage)
    });
    mqd_model::Traffic {
        rank: recording
            .header
            .world_rank
            .and_then(|r| i32::try_from(r).ok())
            .unwrap_or(-1),
        sends_complete: seen && lost == 0 && recording.header.abi != 0,
        counts,
        collectives_complete: seen && recording.header.abi != 0,
        comms: comm_counts(recording, abi),
        requests_complete: seen
            && recording.header.abi != 0
            && overflow & mqd_recording::OVERFLOW_REQUESTS == 0
            && !recording.requests.contains(&RequestRecord::Torn),
        posted: posted_receives(recording, abi),
    }
}

/// For a recorded `MPI_Wait` on one request, `handle` (read where the call's argument
/// points): the receive or synchronous send it waits for, where the request table keeps
/// it active and not cancelled, as a call of the same name with its envelope; and
/// whether it is the send.
pub fn waited_request(
    call: &ThreadCall,
    recording: &Recording,
    handle: u64,
) -> Option<(ThreadCall, bool)> {
    if call.name != "MPI_Wait" || call.request_count != 1 {
        return None;
    }
    // A slot caught mid-write may be this request's: then it is not known.
    if recording.requests.contains(&RequestRecord::Torn) {
        return None;
    }
    let mut kept = recording.requests.iter().filter_map(|r| match r {
        RequestRecord::Whole {
            handle: h,
            kind,
            comm,
            peer,
            tag,
        } if *h == handle => Some((*kind, *comm, *peer, *tag)),
        _ => None,
    });
    let (kind, comm, peer, tag) = kept.next()?;
    let synchronous =
        kind & mqd_recording::REQUEST_SYNCHRONOUS != 0 && kind & mqd_recording::REQUEST_SEND != 0;
    let waited = (kind & mqd_recording::REQUEST_RECEIVE != 0 || synchronous)
        && kind & mqd_recording::REQUEST_ACTIVE != 0
        && kind & mqd_recording::REQUEST_CANCELLED == 0;
    let call = (waited && kept.next().is_none()).then(|| ThreadCall {
        name: call.name.clone(),
        comm,
        peer,
        tag,
        count: None,
        datatype: None,
        peer2: None,
        tag2: None,
        requests: call.requests,
        request_count: 1,
        collective: None,
    });
    call.map(|c| (c, synchronous))
}
