//! The region decoded from bytes as a reader finds them: whole, torn mid-write, damaged
//! or foreign. Damage is an error or a torn record, never a panic and never a fact.

use mqd_recording::{
    ABSENT, COMM_FIELD_COUNT, COMM_FREED, COMM_INTER, COMM_LIVE, COMM_WORLD_ORDER, CommField,
    CommRecord, Damage, FIELD_COUNT, HEADER_WORDS, HeaderWord, LINEAGE_WORLD, MAGIC,
    REQUEST_FIELD_COUNT, TRAFFIC_FIELD_COUNT, ThreadField, ThreadRecord, VERSION, decode_comms,
    decode_header, decode_threads, lineage,
};
use proptest::prelude::*;

const SLOT: usize = 128;

fn header(slots: u64) -> Vec<u8> {
    let mut w = [0u64; HEADER_WORDS];
    w[HeaderWord::Magic as usize] = u64::from_le_bytes(MAGIC);
    w[HeaderWord::Version as usize] = VERSION;
    w[HeaderWord::HeaderSize as usize] = (HEADER_WORDS * 8) as u64;
    w[HeaderWord::Abi as usize] = 1;
    w[HeaderWord::WorldRank as usize] = 2;
    w[HeaderWord::WorldSize as usize] = u64::MAX; // -1: not known yet
    w[HeaderWord::Names as usize] = 0x1000;
    w[HeaderWord::NamesLength as usize] = 18;
    w[HeaderWord::Procedures as usize] = 2;
    w[HeaderWord::Threads as usize] = 0x2000;
    w[HeaderWord::ThreadSlots as usize] = slots;
    w[HeaderWord::ThreadSlotSize as usize] = SLOT as u64;
    w[HeaderWord::ThreadFields as usize] = 0x3000;
    w[HeaderWord::ThreadFieldCount as usize] = FIELD_COUNT as u64;
    w[HeaderWord::Comms as usize] = 0x4000;
    w[HeaderWord::CommSlots as usize] = 4;
    w[HeaderWord::CommSlotSize as usize] = COMM_SLOT as u64;
    w[HeaderWord::CommFields as usize] = 0x5000;
    w[HeaderWord::CommFieldCount as usize] = COMM_FIELD_COUNT as u64;
    w[HeaderWord::Members as usize] = 0x6000;
    w[HeaderWord::MemberCapacity as usize] = 1024;
    w[HeaderWord::MembersUsed as usize] = 4;
    w[HeaderWord::Traffic as usize] = 0x7000;
    w[HeaderWord::TrafficSlots as usize] = 4;
    w[HeaderWord::TrafficSlotSize as usize] = 32;
    w[HeaderWord::TrafficFields as usize] = 0x8000;
    w[HeaderWord::TrafficFieldCount as usize] = TRAFFIC_FIELD_COUNT as u64;
    w[HeaderWord::Requests as usize] = 0x9000;
    w[HeaderWord::RequestSlots as usize] = 4;
    w[HeaderWord::RequestSlotSize as usize] = 64;
    w[HeaderWord::RequestFields as usize] = 0xa000;
    w[HeaderWord::RequestFieldCount as usize] = REQUEST_FIELD_COUNT as u64;
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const COMM_SLOT: usize = 128;

fn comm_offsets() -> Vec<u8> {
    (0..COMM_FIELD_COUNT as u64)
        .flat_map(|i| (i * 8).to_le_bytes())
        .collect()
}

fn comm_slot(fields: &[(CommField, u64)]) -> Vec<u8> {
    let mut w = [0u64; COMM_SLOT / 8];
    w[CommField::Sequence as usize] = 2;
    w[CommField::LastRoot as usize] = ABSENT;
    w[CommField::Sources as usize] = ABSENT;
    for &(f, v) in fields {
        w[f as usize] = v;
    }
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The pool: a row of two (world ranks 4, 5) at 0, then 6, 7.
fn members() -> Vec<u8> {
    [4i32, 5, 6, 7]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect()
}

#[test]
fn communicators_give_their_members_and_collectives() {
    let mut bytes = header(1);
    let at = HeaderWord::WorldSize as usize * 8;
    bytes[at..at + 8].copy_from_slice(&8u64.to_le_bytes());
    let h = decode_header(&bytes).unwrap();
    let mut table = comm_slot(&[
        (CommField::Handle, 0x4400_0000),
        (CommField::Flags, COMM_LIVE | COMM_WORLD_ORDER),
        (CommField::Size, 8),
        (CommField::Collectives, 3),
        (CommField::LastCall, 1),
        (CommField::Lineage, LINEAGE_WORLD),
    ]);
    table.extend(comm_slot(&[
        (CommField::Handle, 0x8400_0001),
        (CommField::Flags, COMM_LIVE),
        (CommField::Size, 2),
        (CommField::Members, 2),
        (CommField::Collectives, 1),
        (CommField::LastCall, 2),
        (CommField::LastRoot, 1),
        (CommField::Lineage, lineage(LINEAGE_WORLD, 2)),
        // A topology's: it receives from world rank 4 in a neighbourhood collective.
        (CommField::Sources, 0),
        (CommField::SourceCount, 1),
    ]));
    // Freed; another whose members are beyond what was taken; one being written; free.
    table.extend(comm_slot(&[
        (CommField::Handle, 0x8400_0002),
        (CommField::Flags, COMM_LIVE | COMM_FREED),
        (CommField::Size, 2),
        (CommField::Members, 3),
    ]));
    table.extend(comm_slot(&[
        (CommField::Handle, 0x8400_0003),
        (CommField::Sequence, 5),
    ]));
    let comms = decode_comms(&h, &comm_offsets(), NAMES, &table, &members()).unwrap();
    assert_eq!(
        comms,
        [
            CommRecord::Whole {
                handle: 0x4400_0000,
                freed: false,
                inter: false,
                remote: None,
                window: false,
                size: 8,
                members: Some((0..8).collect()),
                collectives: 3,
                last: Some(("MPI_Recv".into(), None)),
                lineage: LINEAGE_WORLD,
                sources: None,
            },
            CommRecord::Whole {
                handle: 0x8400_0001,
                freed: false,
                inter: false,
                remote: None,
                window: false,
                size: 2,
                members: Some(vec![6, 7]),
                collectives: 1,
                last: Some(("MPI_Send".into(), Some(1))),
                lineage: lineage(LINEAGE_WORLD, 2),
                sources: Some(vec![4]),
            },
            CommRecord::Whole {
                handle: 0x8400_0002,
                freed: true,
                inter: false,
                remote: None,
                window: false,
                size: 2,
                members: None,
                collectives: 0,
                last: None,
                lineage: 0,
                sources: None,
            },
            CommRecord::Torn {
                handle: 0x8400_0003
            },
        ]
    );
}

/// An intercommunicator gives its local group as members and its remote group apart, both
/// from the pool; a remote run on a communicator not marked inter is not believed.
#[test]
fn an_intercommunicator_gives_its_remote_group() {
    let h = decode_header(&header(1)).unwrap();
    let mut table = comm_slot(&[
        (CommField::Handle, 0x8400_0004),
        (CommField::Flags, COMM_LIVE | COMM_INTER),
        (CommField::Size, 2),
        (CommField::Members, 0),
        (CommField::Remote, 2),
        (CommField::RemoteSize, 2),
    ]);
    table.extend(comm_slot(&[
        (CommField::Handle, 0x8400_0005),
        (CommField::Flags, COMM_LIVE),
        (CommField::Size, 2),
        (CommField::Members, 0),
        (CommField::Remote, 2),
        (CommField::RemoteSize, 2),
    ]));
    // Its remote group runs beyond what was read: unknown, not cut short.
    table.extend(comm_slot(&[
        (CommField::Handle, 0x8400_0006),
        (CommField::Flags, COMM_LIVE | COMM_INTER),
        (CommField::Size, 2),
        (CommField::Members, 0),
        (CommField::Remote, 3),
        (CommField::RemoteSize, 2),
    ]));
    let comms = decode_comms(&h, &comm_offsets(), NAMES, &table, &members()).unwrap();
    let remotes: Vec<_> = comms
        .iter()
        .map(|c| match c {
            CommRecord::Whole {
                inter,
                members,
                remote,
                ..
            } => (*inter, members.clone(), remote.clone()),
            CommRecord::Torn { .. } => panic!("no slot here is torn: {c:?}"),
        })
        .collect();
    assert_eq!(
        remotes,
        [
            (true, Some(vec![4, 5]), Some(vec![6, 7])),
            (false, Some(vec![4, 5]), None),
            (true, Some(vec![4, 5]), None),
        ]
    );
}

/// A communicator in the world's order of another size than the world's (or of an
/// unknown world) has no members: never billions made up from one damaged word.
#[test]
fn a_world_order_beyond_the_world_is_not_believed() {
    let h = decode_header(&header(1)).unwrap();
    let table = comm_slot(&[
        (CommField::Handle, 0x4400_0000),
        (CommField::Flags, COMM_LIVE | COMM_WORLD_ORDER),
        (CommField::Size, 1 << 31),
    ]);
    let comms = decode_comms(&h, &comm_offsets(), NAMES, &table, &members()).unwrap();
    assert!(
        matches!(&comms[0], CommRecord::Whole { members: None, .. }),
        "{comms:?}"
    );
}

#[test]
fn a_communicator_naming_a_call_beyond_the_names_is_damage() {
    let h = decode_header(&header(1)).unwrap();
    let table = comm_slot(&[
        (CommField::Handle, 0x4400_0000),
        (CommField::Flags, COMM_LIVE),
        (CommField::Size, 1),
        (CommField::LastCall, 99),
    ]);
    assert!(decode_comms(&h, &comm_offsets(), NAMES, &table, &members()).is_err());
    // Field offsets beyond a slot.
    let mut bad = comm_offsets();
    bad[8..16].copy_from_slice(&4096u64.to_le_bytes());
    assert!(decode_comms(&h, &bad, NAMES, &table, &members()).is_err());
}

fn offsets() -> Vec<u8> {
    (0..FIELD_COUNT as u64)
        .flat_map(|i| (i * 8).to_le_bytes())
        .collect()
}

const NAMES: &[u8] = b"MPI_Recv\0MPI_Send\0";

fn slot(fields: &[(ThreadField, u64)]) -> Vec<u8> {
    let mut w = [ABSENT; SLOT / 8];
    w[ThreadField::Sequence as usize] = 4;
    w[ThreadField::Calls as usize] = 9;
    w[ThreadField::RequestCount as usize] = 0;
    for &(f, v) in fields {
        w[f as usize] = v;
    }
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn a_whole_slot_gives_its_call_and_envelope_and_absent_fields_are_none() {
    let h = decode_header(&header(3)).unwrap();
    assert_eq!((h.abi, h.world_rank, h.world_size), (1, Some(2), None));
    let mut table = slot(&[
        (ThreadField::Thread, 77),
        (ThreadField::Call, 2),
        (ThreadField::Peer, 1),
        (ThreadField::Tag, -1i64 as u64),
    ]);
    table.extend(slot(&[(ThreadField::Thread, 0)])); // free
    table.extend(slot(&[(ThreadField::Thread, 78), (ThreadField::Call, 0)]));
    let threads = decode_threads(&h, &offsets(), NAMES, &table).unwrap();
    assert_eq!(threads.len(), 2);
    let ThreadRecord::Whole {
        thread,
        calls,
        call: Some(call),
    } = &threads[0]
    else {
        panic!("{threads:?}")
    };
    assert_eq!((*thread, *calls, call.name.as_str()), (77, 9, "MPI_Send"));
    assert_eq!(
        (call.peer, call.tag, call.comm, call.count),
        (Some(1), Some(-1), None, None)
    );
    assert!(matches!(
        threads[1],
        ThreadRecord::Whole {
            thread: 78,
            call: None,
            ..
        }
    ));
}

#[test]
fn a_slot_caught_mid_write_is_torn_not_read() {
    let h = decode_header(&header(1)).unwrap();
    let table = slot(&[
        (ThreadField::Thread, 5),
        (ThreadField::Sequence, 7),
        (ThreadField::Call, 1),
    ]);
    let threads = decode_threads(&h, &offsets(), NAMES, &table).unwrap();
    assert_eq!(threads, vec![ThreadRecord::Torn { thread: 5 }]);
}

#[test]
fn damaged_headers_and_tables_are_said() {
    let mut no_magic = header(1);
    no_magic[0] ^= 1;
    assert_eq!(decode_header(&no_magic), Err(Damage::NoMagic));
    let mut version = header(1);
    version[8] = 9;
    assert_eq!(decode_header(&version), Err(Damage::Version(9)));
    assert!(matches!(
        decode_header(&header(1_000_000)),
        Err(Damage::OutOfBounds(..))
    ));
    assert!(decode_header(&header(1)[..40]).is_err());
    let h = decode_header(&header(1)).unwrap();
    let bad_call = slot(&[(ThreadField::Thread, 5), (ThreadField::Call, 3)]);
    assert!(matches!(
        decode_threads(&h, &offsets(), NAMES, &bad_call),
        Err(Damage::OutOfBounds(..))
    ));
    let mut bad_offsets = offsets();
    bad_offsets[8] = 200;
    assert!(decode_threads(&h, &bad_offsets, NAMES, &slot(&[])).is_err());
}

proptest! {
    /// Any bytes: an answer or an error, never a panic.
    #[test]
    fn any_bytes_decode_or_are_refused(
        flips in proptest::collection::vec((0usize..HEADER_WORDS * 8, any::<u8>()), 0..6),
        table in proptest::collection::vec(any::<u8>(), 0..400),
        names in proptest::collection::vec(any::<u8>(), 0..40),
        offsets_bytes in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = header(3);
        for (at, b) in flips {
            bytes[at] = b;
        }
        if let Ok(h) = decode_header(&bytes) {
            let _ = decode_threads(&h, &offsets_bytes, &names, &table);
            let _ = decode_threads(&h, &offsets(), &names, &table);
        }
    }
}

/// A region read before the dynamic linker relocated the library (its tables' addresses
/// still null, as in the file): said so, never read from address 0.
#[test]
fn a_region_not_yet_relocated_is_said_so() {
    let mut bytes = header(1);
    let at = HeaderWord::Threads as usize * 8;
    bytes[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    assert_eq!(decode_header(&bytes), Err(Damage::NotRelocated));
    assert!(Damage::NotRelocated.to_string().contains("still starting"));
}
