//! What the hang recorder (`libmqd_recorder.so`, preloaded into the ranks) kept in a
//! rank's memory: each thread's MPI call in progress with its envelope, exact at any
//! optimisation level and in any language. Found by the region's symbol; a region that
//! cannot be read, or a thread's record caught mid-write, is unknown and said so.

use mqd_debuginfo::AddressSpace;
use mqd_model::{CallArguments, CallClass};
use mqd_mpi_abi::tables::{Abi, Family};
use mqd_recording::{
    CommRecord, Damage, Header, Recording, RequestRecord, ThreadCall, ThreadRecord,
};
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

    /// Reads the header, the names and the thread slots only: what each thread is in
    /// and how many calls it made (four reads).
    pub fn read_threads(
        &self,
        memory: &dyn Memory,
    ) -> Result<(Header, Vec<u8>, Vec<ThreadRecord>), Damage> {
        let header = mqd_recording::decode_header(&bytes(
            memory,
            self.at,
            mqd_recording::HEADER_WORDS * 8,
        )?)?;
        let (names_at, names_len) = header.names();
        let (fields_at, fields_len) = header.field_offsets();
        let (table_at, table_len) = header.thread_table();
        let names = bytes(memory, names_at, names_len)?;
        let threads = mqd_recording::decode_threads(
            &header,
            &bytes(memory, fields_at, fields_len)?,
            &names,
            &bytes(memory, table_at, table_len)?,
        )?;
        Ok((header, names, threads))
    }

    /// Reads the region: the header, then its names, field offsets, thread slots,
    /// communicator slots, members taken, accounting and requests (one read each).
    pub fn read(&self, memory: &dyn Memory) -> Result<Recording, Damage> {
        let bytes = |at: u64, len: usize| bytes(memory, at, len);
        let (header, names, threads) = self.read_threads(memory)?;
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
            &names,
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

/// `len` bytes of `memory` at `at`.
fn bytes(memory: &dyn Memory, at: u64, len: usize) -> Result<Vec<u8>, Damage> {
    let mut buf = vec![0u8; len];
    memory
        .read_memory(at, &mut buf)
        .map(|()| buf)
        .map_err(|_| Damage::Unreadable(at))
}

/// The handles' ABI a region says, where the process's own objects did not say it.
pub fn abi_of(recording: &Recording) -> Option<Abi> {
    match recording.header.abi {
        1 => Some(Abi::new(Family::Mpich)),
        3 => Some(Abi::new(Family::Standard)),
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
fn comm_record(comms: &[CommRecord], handle: u64) -> Option<&CommRecord> {
    comms
        .iter()
        .find(|c| matches!(c, CommRecord::Whole { handle: h, freed: false, .. } if *h == handle))
}

/// Whether `call`, where it is `MPI_Win_fence`, waits for every member of its window's
/// group: in the MPICH family and Open MPI a fence always ends in a barrier over it,
/// except MPICH's ch3 given `MPI_MODE_NOPRECEDE` (which this ABI's spelling of it, when
/// known, rules out). Any other call: true.
fn fence_synchronises(call: &ThreadCall, abi: &Abi) -> bool {
    if call.name != "MPI_Win_fence" {
        return true;
    }
    let noprecede = match abi.family {
        Family::Mpich => 8192,
        Family::OpenMpi => 2,
        Family::Standard => return false,
    };
    call.assert.is_some_and(|a| a & noprecede == 0)
}

/// A recorded call's arguments in the model's spelling (MPICH's special ranks and tags),
/// each said to come from the recorder; its communicator's members where the recorder
/// noted them (`comms`).
pub fn call_arguments(call: &ThreadCall, abi: &Abi, comms: &[CommRecord]) -> CallArguments {
    let mut args = CallArguments {
        function: call.name.clone(),
        called: Some(call.name.clone()),
        ..CallArguments::default()
    };
    let mut from = |name: &str| {
        args.sources.insert(name.to_owned(), SOURCE.to_owned());
    };
    // A collective's rank is its root (a nonblocking one's too: the recorder gives
    // every collective its place on its communicator).
    let rooted = CallClass::of(&call.name) == CallClass::Collective || call.collective.is_some();
    let peer = call.peer.map(|p| abi.rank(p as u64));
    let mut put = Vec::new();
    if let Some(comm) = call.comm {
        put.push("comm");
        args.comm = Some(abi.handle(comm));
        args.predefined = abi.predefined_comm(comm).map(str::to_owned);
        if let Some(CommRecord::Whole {
            members: Some(members),
            inter,
            remote,
            lineage,
            ..
        }) = comm_record(comms, comm)
            && members.iter().all(|&m| m >= 0)
            && (!inter || remote.is_some())
        {
            put.push("members");
            args.members = Some(members.clone());
            if *inter {
                put.push("remote");
                args.remote = remote.clone();
            }
            if *lineage != 0 {
                put.push("lineage");
                args.lineage = Some(*lineage);
            }
        }
    }
    // A fence that may not synchronise is no collective the members wait in.
    if let Some(n) = call.collective.filter(|_| fence_synchronises(call, abi)) {
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
    match call.peer2 {
        // The recorder keeps it as a MPI_COMM_WORLD rank (a peer communicator's rank
        // says nothing without it).
        Some(leader) if call.name == "MPI_Intercomm_create" => {
            put.push("remote_leader");
            args.remote_leader = i32::try_from(leader).ok();
        }
        Some(source) => {
            put.push("recv_peer");
            args.recv_peer = Some(abi.rank(source as u64));
        }
        None => {}
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
                remote: _,
                window: _,
                size,
                members: Some(members),
                collectives,
                last,
                lineage,
                sources,
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
                    sources: sources.clone(),
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
                let record = comm.and_then(|c| comm_record(&recording.comms, c));
                // Its source names a rank of the remote group on an intercommunicator.
                let (lineage, members) = match record {
                    Some(CommRecord::Whole {
                        lineage,
                        members,
                        inter: false,
                        ..
                    }) => (*lineage, members.as_ref()),
                    Some(CommRecord::Whole {
                        lineage,
                        remote,
                        inter: true,
                        ..
                    }) => (*lineage, remote.as_ref()),
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
        notes.push("the hang recorder could not count every message sent (a table ran out; a send on an intercommunicator whose groups it could not ask, of a partitioned request, or on a communicator whose members it could not ask): its counts prove nothing".into());
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

/// The most requests of one wait whose handles are read: a longer wait is left to the
/// frames.
pub const WAITED_REQUESTS: u64 = 64;

/// What a wait waits for, by the request table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// A receive.
    Receive,
    /// A synchronous send: it completes only once a receive takes it.
    SynchronousSend,
    /// A nonblocking collective (the procedure that started it).
    Collective(String),
}

/// What one request of a wait is, as the request table keeps it.
enum Kept {
    /// An active receive, or an active synchronous send (`true`): its envelope.
    Waits(u64, i64, i64, bool),
    /// An active nonblocking collective: its communicator, root, procedure and which
    /// collective on the communicator it is.
    Collective(u64, Option<i64>, String, u64),
    /// Inactive (a persistent request not started): the wait does not wait for it.
    Inactive,
    /// It may complete without a peer (a standard or buffered send: the MPI may buffer
    /// it; a cancelled one), or it is not kept (another kind, or no such handle).
    Unknown,
}

fn kept(requests: &[RequestRecord], handle: u64) -> Kept {
    let mut found = requests.iter().filter_map(|r| match r {
        RequestRecord::Whole {
            handle: h,
            kind,
            comm,
            peer,
            tag,
            collective,
        } if *h == handle => Some((*kind, *comm, *peer, *tag, collective)),
        _ => None,
    });
    let (Some((kind, comm, peer, tag, collective)), None) = (found.next(), found.next()) else {
        return Kept::Unknown;
    };
    let has = |bit| kind & bit != 0;
    if let (Some((name, k)), Some(c), true) =
        (collective, comm, has(mqd_recording::REQUEST_COLLECTIVE))
    {
        return if has(mqd_recording::REQUEST_ACTIVE) {
            Kept::Collective(c, peer, name.clone(), *k)
        } else {
            Kept::Unknown
        };
    }
    let synchronous = has(mqd_recording::REQUEST_SYNCHRONOUS) && has(mqd_recording::REQUEST_SEND);
    if !has(mqd_recording::REQUEST_RECEIVE) && !synchronous {
        return Kept::Unknown;
    }
    if has(mqd_recording::REQUEST_CANCELLED) {
        return Kept::Unknown;
    }
    if !has(mqd_recording::REQUEST_ACTIVE) {
        return Kept::Inactive;
    }
    match (comm, peer, tag) {
        (Some(c), Some(p), Some(t)) => Kept::Waits(c, p, t, synchronous),
        _ => Kept::Unknown,
    }
}

/// For a recorded wait on requests, `handles` (read where the call's argument points),
/// by the `requests` the request table keeps: what it waits for, where the table says so
/// for certain, as a call with that envelope (named as the collective, for one).
///
/// `MPI_Wait` and `MPI_Waitall` return only once every request completed: they wait at
/// least for one active receive, synchronous send or nonblocking collective among them
/// (the first), whatever the others are. `MPI_Waitany` and `MPI_Waitsome` return once
/// one completes: only where every active request is a receive on one communicator do
/// they wait as one receive, from the source and with the tag they share (else from any
/// source, with any tag, which waits for more: what holds that holds them).
pub fn waited_request(
    call: &ThreadCall,
    requests: &[RequestRecord],
    handles: &[u64],
    abi: &Abi,
) -> Option<(ThreadCall, Waited)> {
    // A slot caught mid-write may be one of these requests: then they are not known.
    if handles.is_empty() || requests.contains(&RequestRecord::Torn) {
        return None;
    }
    let kept: Vec<Kept> = handles.iter().map(|&h| kept(requests, h)).collect();
    let waited = |comm, peer, tag, collective| ThreadCall {
        name: call.name.clone(),
        comm: Some(comm),
        peer,
        tag,
        count: None,
        datatype: None,
        peer2: None,
        tag2: None,
        requests: call.requests,
        request_count: call.request_count,
        collective,
        assert: None,
    };
    match call.name.as_str() {
        "MPI_Wait" | "MPI_Waitall" => kept.into_iter().find_map(|k| match k {
            Kept::Waits(c, p, t, synchronous) => Some((
                waited(c, Some(p), Some(t), None),
                if synchronous {
                    Waited::SynchronousSend
                } else {
                    Waited::Receive
                },
            )),
            Kept::Collective(c, root, name, k) => Some((
                ThreadCall {
                    name: name.clone(),
                    ..waited(c, root, None, Some(k))
                },
                Waited::Collective(name),
            )),
            _ => None,
        }),
        "MPI_Waitany" | "MPI_Waitsome" => {
            let mut active = Vec::new();
            for k in &kept {
                match *k {
                    Kept::Waits(c, p, t, false) => active.push((c, p, t)),
                    Kept::Inactive => {}
                    _ => return None,
                }
            }
            let &(comm, first_peer, first_tag) = active.first()?;
            if active.iter().any(|a| a.0 != comm) {
                return None;
            }
            let specials = abi.specials();
            let peer = if active.iter().all(|a| a.1 == first_peer) {
                first_peer
            } else {
                specials.any_source
            };
            let tag = if active.iter().all(|a| a.2 == first_tag) {
                first_tag
            } else {
                specials.any_tag
            };
            Some((waited(comm, Some(peer), Some(tag), None), Waited::Receive))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_recording::{
        REQUEST_ACTIVE, REQUEST_COLLECTIVE, REQUEST_RECEIVE, REQUEST_SEND, REQUEST_SYNCHRONOUS,
    };

    const WORLD: u64 = 0x4400_0000;
    const RECEIVE: u64 = REQUEST_RECEIVE | REQUEST_ACTIVE;
    const SEND: u64 = REQUEST_SEND | REQUEST_ACTIVE;

    fn request(handle: u64, kind: u64, peer: i64, tag: i64) -> RequestRecord {
        RequestRecord::Whole {
            handle,
            kind,
            comm: Some(WORLD),
            peer: Some(peer),
            tag: Some(tag),
            collective: None,
        }
    }

    fn wait(name: &str, n: u64) -> ThreadCall {
        ThreadCall {
            name: name.into(),
            comm: None,
            peer: None,
            tag: None,
            count: None,
            datatype: None,
            peer2: None,
            tag2: None,
            requests: Some(0x7ff0_0000),
            request_count: n,
            collective: None,
            assert: None,
        }
    }

    #[test]
    fn a_fence_is_counted_as_a_collective_only_where_it_synchronises() {
        let fence = |assert: Option<i64>| ThreadCall {
            name: "MPI_Win_fence".into(),
            comm: Some(0xa000_0000),
            collective: Some(3),
            assert,
            ..wait("MPI_Win_fence", 0)
        };
        let (mpich, open) = (Abi::new(Family::Mpich), Abi::new(Family::OpenMpi));
        let counted = |call: &ThreadCall, abi: &Abi| call_arguments(call, abi, &[]).collective;
        assert_eq!(counted(&fence(Some(0)), &mpich), Some(3));
        // MPI_MODE_NOPRECEDE: MPICH's ch3 starts a barrier it does not wait for.
        assert_eq!(counted(&fence(Some(8192)), &mpich), None);
        assert_eq!(counted(&fence(Some(8192 | 4096)), &mpich), None);
        assert_eq!(counted(&fence(Some(2)), &open), None);
        assert_eq!(counted(&fence(Some(8192)), &open), Some(3));
        assert_eq!(counted(&fence(None), &mpich), None, "an assertion not kept");
        assert_eq!(counted(&fence(Some(0)), &Abi::new(Family::Standard)), None);
        // Another collective is counted whatever its assertion field.
        let barrier = ThreadCall {
            name: "MPI_Barrier".into(),
            ..fence(None)
        };
        assert_eq!(counted(&barrier, &mpich), Some(3));
    }

    fn envelope(found: Option<(ThreadCall, Waited)>) -> Option<(i64, i64, bool)> {
        found.map(|(c, w)| {
            (
                c.peer.unwrap(),
                c.tag.unwrap(),
                w == Waited::SynchronousSend,
            )
        })
    }

    #[test]
    fn waitall_waits_at_least_for_its_first_receive_or_synchronous_send() {
        let abi = Abi::new(Family::Mpich);
        // A standard send may complete by itself (the MPI may buffer it): the receive.
        let table = [request(1, SEND, 3, 2), request(2, RECEIVE, 1, 1)];
        let all = wait("MPI_Waitall", 2);
        assert_eq!(
            envelope(waited_request(&all, &table, &[1, 2], &abi)),
            Some((1, 1, false))
        );
        let table = [
            request(1, SEND | REQUEST_SYNCHRONOUS, 3, 2),
            request(2, RECEIVE, 1, 1),
        ];
        assert_eq!(
            envelope(waited_request(&all, &table, &[1, 2], &abi)),
            Some((3, 2, true))
        );
        // Only standard sends, or requests not kept: nothing certain.
        let table = [request(1, SEND, 3, 2)];
        assert_eq!(waited_request(&all, &table, &[1, 9], &abi), None);
        // A request being written may be any of them.
        let torn = [request(2, RECEIVE, 1, 1), RequestRecord::Torn];
        assert_eq!(waited_request(&all, &torn, &[1, 2], &abi), None);
        // A persistent receive not started is not waited for.
        let table = [request(2, REQUEST_RECEIVE, 1, 1)];
        assert_eq!(waited_request(&all, &table, &[2], &abi), None);
    }

    #[test]
    fn a_wait_on_a_nonblocking_collective_waits_as_that_collective() {
        let abi = Abi::new(Family::Mpich);
        let ibcast = RequestRecord::Whole {
            handle: 4,
            kind: REQUEST_COLLECTIVE | REQUEST_ACTIVE,
            comm: Some(WORLD),
            peer: Some(2),
            tag: None,
            collective: Some(("MPI_Ibcast".into(), 5)),
        };
        let (call, waited) = waited_request(
            &wait("MPI_Wait", 1),
            std::slice::from_ref(&ibcast),
            &[4],
            &abi,
        )
        .unwrap();
        assert_eq!(waited, Waited::Collective("MPI_Ibcast".into()));
        assert_eq!(call.name, "MPI_Ibcast");
        assert_eq!(
            (call.comm, call.peer, call.collective),
            (Some(WORLD), Some(2), Some(5))
        );
        let args = call_arguments(&call, &abi, &[]);
        assert_eq!(
            (args.root, args.peer, args.collective),
            (Some(2), None, Some(5))
        );
        // In MPI_Waitany, it may complete first: not one receive.
        let table = [ibcast, request(1, RECEIVE, 3, 7)];
        assert_eq!(
            waited_request(&wait("MPI_Waitany", 2), &table, &[1, 4], &abi),
            None
        );
    }

    #[test]
    fn waitany_waits_as_one_receive_only_where_every_active_request_is_one() {
        let abi = Abi::new(Family::Mpich);
        let any = wait("MPI_Waitany", 2);
        let table = [request(1, RECEIVE, 3, 7), request(2, RECEIVE, 1, 7)];
        // From either source: as a receive from any, with their one tag.
        assert_eq!(
            envelope(waited_request(&any, &table, &[1, 2], &abi)),
            Some((-2, 7, false))
        );
        let table = [request(1, RECEIVE, 3, 7), request(2, RECEIVE, 3, 8)];
        assert_eq!(
            envelope(waited_request(&any, &table, &[1, 2], &abi)),
            Some((3, -1, false))
        );
        // Open MPI spells MPI_ANY_SOURCE -1.
        let open = Abi::new(Family::OpenMpi);
        let table = [request(1, RECEIVE, 3, 7), request(2, RECEIVE, 1, 7)];
        assert_eq!(
            envelope(waited_request(&any, &table, &[1, 2], &open)),
            Some((-1, 7, false))
        );
        // An inactive one is left out; a send, or one not kept, may complete it.
        let table = [request(1, RECEIVE, 3, 7), request(2, REQUEST_RECEIVE, 1, 8)];
        assert_eq!(
            envelope(waited_request(&any, &table, &[1, 2], &abi)),
            Some((3, 7, false))
        );
        let table = [
            request(1, RECEIVE, 3, 7),
            request(2, SEND | REQUEST_SYNCHRONOUS, 1, 7),
        ];
        assert_eq!(waited_request(&any, &table, &[1, 2], &abi), None);
        let table = [request(1, RECEIVE, 3, 7)];
        assert_eq!(waited_request(&any, &table, &[1, 5], &abi), None);
        // Receives on two communicators are no one receive.
        let mut table = vec![request(1, RECEIVE, 3, 7), request(2, RECEIVE, 3, 7)];
        if let RequestRecord::Whole { comm, .. } = &mut table[1] {
            *comm = Some(WORLD + 1);
        }
        assert_eq!(waited_request(&any, &table, &[1, 2], &abi), None);
        // No active request: it returns at once.
        let table = [request(1, REQUEST_RECEIVE, 3, 7)];
        assert_eq!(waited_request(&any, &table, &[1], &abi), None);
    }
}
