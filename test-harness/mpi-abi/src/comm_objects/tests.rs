use super::mpich;
use super::open_mpi;
use std::collections::BTreeMap;

/// A sparse memory of written bytes; reads of unwritten bytes fail.
#[derive(Default)]
struct Memory(BTreeMap<u64, u8>);

impl Memory {
    fn put(&mut self, a: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.0.insert(a + i as u64, *b);
        }
    }
    fn i32(&mut self, a: u64, v: i32) {
        self.put(a, &v.to_le_bytes());
    }
    fn u64(&mut self, a: u64, v: u64) {
        self.put(a, &v.to_le_bytes());
    }
    /// Zeroes `a..a + len` (an object's untouched bytes).
    fn zero(&mut self, a: u64, len: u64) {
        for x in a..a + len {
            self.0.insert(x, 0);
        }
    }
    fn reader(&self) -> impl FnMut(u64) -> Option<u64> + '_ {
        |a| {
            let mut word = [0u8; 8];
            for (i, b) in word.iter_mut().enumerate() {
                *b = *self.0.get(&(a + i as u64))?;
            }
            Some(u64::from_le_bytes(word))
        }
    }
}

const DATA: u64 = 0x10_0000;
const BSS: u64 = 0x20_0000;
const BSS_END: u64 = 0x30_0000;

/// An MPICH whose allocator (4.0's shape, or 5.0's) holds 8 direct objects of `size`
/// bytes at `BSS`, among other allocators.
fn mpich_memory(size: u64, five: bool) -> Memory {
    let mut m = Memory::default();
    m.zero(DATA, 0x400);
    // Another kind's allocator first: not communicators.
    let other = DATA + 0x40;
    m.i32(other + 28, 3);
    m.i32(other + 32, 280);
    m.u64(other + 40, BSS + 0x8_0000);
    m.i32(other + 48, 8);
    let at = DATA + 0x100;
    let (kind, size_at) = if five { (32, 36) } else { (28, 32) };
    m.i32(at + kind, 1);
    m.i32(at + size_at, size as i32);
    m.u64(at + 40, BSS);
    m.i32(at + 48, 8);
    m.zero(BSS, size * 8);
    for i in 0..8 {
        m.i32(BSS + i * size, 0x8400_0000u32 as i32 | i as i32);
    }
    m
}

fn mpich_objects() -> mpich::Objects {
    mpich::Objects::at(None, DATA..DATA + 0x400, BSS..BSS_END)
}

/// MPICH 4.0's comm object `index`: rank `rank` of `size`, context 480, its rank map.
fn mpich4_comm(m: &mut Memory, index: u64, rank: i32, size: i32, map: [i32; 6]) -> u64 {
    let object = BSS + index * 872;
    m.i32(object + 4, 1);
    m.put(object + 64, &480u16.to_le_bytes());
    m.i32(object + 72, rank);
    m.i32(object + 88, size);
    for (i, v) in map.iter().enumerate() {
        m.i32(object + 784 + 4 * i as u64, *v);
    }
    object
}

#[test]
fn mpich_4_rank_maps_name_the_members() {
    let mut m = mpich_memory(872, false);
    // A column {1, 3}: STRIDE_INTRA, offset 1, stride 2.
    let object = mpich4_comm(&mut m, 1, 1, 2, [5, 0, 2, 1, 2, 1]);
    // A table {3, 0, 2}: LUT_INTRA.
    let table = BSS + 0x9_0000;
    m.put(table, &[3i32, 0, 2].map(i32::to_le_bytes).concat());
    m.put(table + 12, &[0u8; 4]);
    let lut = mpich4_comm(&mut m, 2, 1, 3, [9, 0, 3, 0, 0, 0]);
    m.u64(lut + 784 + 32, table);
    // An indirect handle: object 1 of block 0 of the allocator's blocks.
    let blocks = BSS + 0xd_0000;
    let block = BSS + 0xc_0000;
    m.u64(DATA + 0x100 + 16, blocks);
    m.i32(DATA + 0x100 + 24, 1);
    m.u64(blocks, block);
    let indirect = block + 872;
    m.zero(indirect, 872);
    m.i32(indirect, 0xc400_0001u32 as i32);
    m.i32(indirect + 4, 1);
    m.i32(indirect + 72, 0);
    m.i32(indirect + 88, 1);
    m.put(
        indirect + 784,
        &[3i32, 0, 1, 2].map(i32::to_le_bytes).concat(),
    );
    let objects = mpich_objects();
    let mut read = m.reader();
    let single = objects.read(0xc400_0001, Some(2), &mut read).unwrap();
    assert_eq!((single.members, single.address), (vec![2], indirect));
    let column = objects.read(0x8400_0001, Some(3), &mut read).unwrap();
    assert_eq!(column.members, vec![1, 3]);
    assert_eq!(column.context_id, 480);
    assert_eq!(column.address, object);
    let lut = objects.read(0x8400_0002, Some(0), &mut read).unwrap();
    assert_eq!(lut.members, vec![3, 0, 2]);
    // This process is rank 3 of COMM_WORLD, which the column says is at local rank 1;
    // a process that is rank 2 would contradict the layout.
    let wrong = objects.read(0x8400_0001, Some(2), &mut read).unwrap_err();
    assert!(wrong.contains("not the library's layout"), "{wrong}");
}

#[test]
fn mpich_objects_that_do_not_say_what_they_must_are_unknown() {
    let mut m = mpich_memory(872, false);
    mpich4_comm(&mut m, 1, 0, 2, [1, 0, 2, 0, 0, 0]);
    // Freed: ref_count 0.
    let freed = mpich4_comm(&mut m, 2, 0, 2, [1, 0, 2, 0, 0, 0]);
    m.i32(freed + 4, 0);
    // An intercommunicator.
    let inter = mpich4_comm(&mut m, 3, 0, 2, [1, 0, 2, 0, 0, 0]);
    m.i32(inter + 112, 1);
    // Members of another job (a spawned world's process table).
    mpich4_comm(&mut m, 4, 0, 2, [2, 1, 2, 0, 0, 0]);
    // A map that disagrees with the size.
    mpich4_comm(&mut m, 5, 0, 2, [1, 0, 3, 0, 0, 0]);
    let objects = mpich_objects();
    let mut read = m.reader();
    assert_eq!(
        objects
            .read(0x8400_0001, Some(0), &mut read)
            .unwrap()
            .members,
        vec![0, 1]
    );
    for (handle, why) in [
        (0x8400_0002u64, "freed"),
        (0x8400_0003, "intercommunicator"),
        (0x8400_0004, "another MPI job"),
        (0x8400_0005, "entries for 2 members"),
        (0x8400_0009, "past the library's 8 direct"),
        (0xc400_0001, "of the library's 0 blocks"),
        (0x4400_0000, "predefined"),
        (0x8c00_0001, "not a communicator's handle"),
    ] {
        let err = objects.read(handle, Some(0), &mut read).unwrap_err();
        assert!(err.contains(why), "{handle:#x}: {err}");
    }
    drop(read);
    // The object holds another handle: the slots are not where the layout says.
    m.i32(BSS + 872, 0x8400_0007u32 as i32);
    let objects = mpich_objects();
    let err = objects
        .read(0x8400_0001, Some(0), &mut m.reader())
        .unwrap_err();
    assert!(err.contains("holds handle 0x84000007"), "{err}");
}

#[test]
fn mpich_5_groups_name_the_members() {
    let mut m = mpich_memory(1832, true);
    let group = BSS + 0xa_0000;
    let object = BSS + 1832;
    m.i32(object + 4, 1);
    m.i32(object + 12, 496);
    m.i32(object + 20, 0);
    m.i32(object + 24, 2);
    m.u64(object + 32, group);
    m.zero(group, 48);
    m.i32(group + 8, 2);
    m.i32(group + 12, 0);
    // Offset 2, stride 1: {2, 3}.
    m.u64(group + 24, 2);
    m.u64(group + 32, 1);
    let objects = mpich_objects();
    let row = objects.read(0x8400_0001, Some(2), &mut m.reader()).unwrap();
    assert_eq!((row.members, row.context_id), (vec![2, 3], 496));
    // A table of process ids, one of another world (its index in the high half).
    let table = BSS + 0xb_0000;
    m.put(group + 16, &[1]);
    m.u64(group + 24, table);
    m.u64(table, 2);
    m.u64(table + 8, (1 << 32) | 3);
    let objects = mpich_objects();
    let err = objects
        .read(0x8400_0001, Some(2), &mut m.reader())
        .unwrap_err();
    assert!(err.contains("another MPI job"), "{err}");
    m.u64(table + 8, 0);
    let objects = mpich_objects();
    let table_row = objects.read(0x8400_0001, Some(2), &mut m.reader()).unwrap();
    assert_eq!(table_row.members, vec![2, 0]);
}

#[test]
fn an_mpich_of_an_unknown_layout_is_said() {
    let m = mpich_memory(900, false);
    let err = mpich_objects()
        .read(0x8400_0001, Some(0), &mut m.reader())
        .unwrap_err();
    assert!(err.contains("objects of 900 bytes"), "{err}");
    assert!(err.contains("MPICH 4.0 (ch4) (872 bytes)"), "{err}");
    // No allocator at all.
    let mut empty = Memory::default();
    empty.zero(DATA, 0x400);
    let err = mpich_objects()
        .read(0x8400_0001, Some(0), &mut empty.reader())
        .unwrap_err();
    assert!(err.contains("no communicator allocator"), "{err}");
}

const WORLD: u64 = 0x40_0000;
const JOBID: u32 = 0x5d0c_0001;

/// An Open MPI job of 4 ranks, this process rank `rank`, its world in `layout`'s shape
/// (`inline` name, group at `group_at`); process objects for ranks 0 and 1, sentinels
/// for 2 and 3.
fn open_mpi_memory(rank: i32, inline: bool, my_rank_at: u64, group_at: u64) -> Memory {
    let mut m = Memory::default();
    m.zero(WORLD, 512);
    if inline {
        m.put(WORLD + 160, b"MPI_COMM_WORLD\0");
    } else {
        let name = WORLD + 0x1000;
        m.put(name, b"MPI_COMM_WORLD\0\0");
        m.u64(WORLD + 160, name);
    }
    let group = WORLD + 0x2000;
    let procs = WORLD + 0x3000;
    m.u64(WORLD + group_at, group);
    m.u64(WORLD + group_at + 8, group);
    m.i32(WORLD + my_rank_at, rank);
    m.zero(group, 64);
    m.i32(group + 16, 4);
    m.i32(group + 20, rank);
    m.u64(group + 32, procs);
    for vpid in 0..4u64 {
        let entry = if vpid < 2 {
            let proc = WORLD + 0x4000 + vpid * 0x100;
            m.zero(proc, 0x80);
            m.u64(proc + 40, u64::from(JOBID) | (vpid << 32));
            proc
        } else {
            let family = u64::from(JOBID >> 16);
            let local = u64::from(JOBID & 0x7fff);
            (vpid << 32) | (family << 16) | (local << 1) | 1
        };
        m.u64(procs + 8 * vpid, entry);
    }
    m
}

/// A split communicator at `object` holding world ranks `members`, this process at
/// `my_rank`.
fn open_mpi_comm(m: &mut Memory, object: u64, members: &[u64], my_rank: i32, layout: (u64, u64)) {
    let (my_rank_at, group_at) = layout;
    let group = object + 0x800;
    let procs = object + 0x900;
    m.zero(object, 512);
    m.u64(object + group_at, group);
    m.u64(object + group_at + 8, group);
    m.i32(object + my_rank_at, my_rank);
    m.zero(group, 64);
    m.i32(group + 16, members.len() as i32);
    m.i32(group + 20, my_rank);
    m.u64(group + 32, procs);
    for (i, &vpid) in members.iter().enumerate() {
        // World's own entries: the same process objects and sentinels.
        let entry = {
            let mut read = m.reader();
            read(WORLD + 0x3000 + 8 * vpid).unwrap()
        };
        m.u64(procs + 8 * i as u64, entry);
    }
}

#[test]
fn open_mpi_4_members_are_read_after_the_world_reads_as_itself() {
    let mut m = open_mpi_memory(3, true, 228, 248);
    let comm = 0x50_0000;
    open_mpi_comm(&mut m, comm, &[1, 3], 1, (228, 248));
    m.i32(comm + 224, 3);
    let objects = open_mpi::Objects::at(WORLD);
    let read = objects.read(comm, Some(3), &mut m.reader()).unwrap();
    assert_eq!((read.members, read.context_id), (vec![1, 3], 3));
    // The launcher's rank must be MPI's.
    let objects = open_mpi::Objects::at(WORLD);
    let err = objects.read(comm, Some(2), &mut m.reader()).unwrap_err();
    assert!(err.contains("is rank 3, not 2"), "{err}");
}

#[test]
fn open_mpi_5_layouts_are_told_apart_by_the_world() {
    // 5.0.7 and later with fault tolerance: the group at 264, the name a pointer.
    let mut m = open_mpi_memory(0, false, 220, 264);
    let comm = 0x50_0000;
    open_mpi_comm(&mut m, comm, &[0, 2], 0, (220, 264));
    m.u64(comm + 176, 3);
    let objects = open_mpi::Objects::at(WORLD);
    let read = objects.read(comm, Some(0), &mut m.reader()).unwrap();
    assert_eq!((read.members, read.context_id), (vec![0, 2], 3));
    // An intercommunicator: its remote group is another.
    m.u64(comm + 272, comm + 0x700);
    let err = objects.read(comm, Some(0), &mut m.reader()).unwrap_err();
    assert!(err.contains("intercommunicator"), "{err}");
    // A world that reads as itself in no layout.
    let mut m = open_mpi_memory(0, false, 220, 280);
    open_mpi_comm(&mut m, comm, &[0, 2], 0, (220, 280));
    let err = open_mpi::Objects::at(WORLD)
        .read(comm, Some(0), &mut m.reader())
        .unwrap_err();
    assert!(err.contains("none of the layouts"), "{err}");
}

#[test]
fn open_mpi_members_of_another_job_are_unknown() {
    let mut m = open_mpi_memory(1, true, 228, 248);
    let comm = 0x50_0000;
    open_mpi_comm(&mut m, comm, &[1, 2], 0, (228, 248));
    // The second member's sentinel names another job family.
    let procs = comm + 0x900;
    m.u64(procs + 8, (2u64 << 32) | (0x1234 << 16) | (1 << 1) | 1);
    let err = open_mpi::Objects::at(WORLD)
        .read(comm, Some(1), &mut m.reader())
        .unwrap_err();
    assert!(err.contains("another MPI job"), "{err}");
}
