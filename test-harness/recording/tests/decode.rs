//! The region decoded from bytes as a reader finds them: whole, torn mid-write, damaged
//! or foreign. Damage is an error or a torn record, never a panic and never a fact.

use mqd_recording::{
    ABSENT, Damage, FIELD_COUNT, HEADER_WORDS, HeaderWord, MAGIC, ThreadField, ThreadRecord,
    VERSION, decode_header, decode_threads,
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
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
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
