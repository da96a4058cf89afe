//! Process tables decoded from synthetic targets of every width and byte order.

use super::tables::*;
use super::*;
use mqd_target::{ByteOrder, TargetAbi, TargetError};
use std::collections::HashMap;

/// A target made of a few byte ranges and symbols (layouts computed here, by hand).
struct Image {
    order: ByteOrder,
    pointer: usize,
    memory: Vec<(u64, Vec<u8>)>,
    symbols: HashMap<&'static str, u64>,
}

impl mqd_target::Memory for Image {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        for (start, bytes) in &self.memory {
            if addr >= *start && addr + buf.len() as u64 <= start + bytes.len() as u64 {
                let at = (addr - start) as usize;
                buf.copy_from_slice(&bytes[at..at + buf.len()]);
                return Ok(());
            }
        }
        Err(TargetError::Unmapped {
            addr,
            len: buf.len(),
        })
    }
}

impl mqd_target::DebugInfo for Image {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_type(&self, _: &str) -> Option<mqd_target::TypeId> {
        None
    }
    fn type_size(&self, _: mqd_target::TypeId) -> Option<u64> {
        None
    }
    fn field_offset(&self, _: mqd_target::TypeId, _: &str) -> Option<u64> {
        None
    }
    fn abi(&self) -> TargetAbi {
        TargetAbi {
            short: 2,
            int: 4,
            long: self.pointer as u8,
            long_long: 8,
            pointer: self.pointer as u8,
        }
    }
    fn byte_order(&self) -> ByteOrder {
        self.order
    }
}

impl mqd_target::Target for Image {
    fn name(&self) -> String {
        "image".into()
    }
}

fn put(order: ByteOrder, out: &mut Vec<u8>, value: u64, size: usize) {
    let le = value.to_le_bytes();
    let mut bytes = le[..size].to_vec();
    if order == ByteOrder::Big {
        bytes.reverse();
    }
    out.extend_from_slice(&bytes);
}

fn strings(base: u64, items: &[&str]) -> (Vec<u8>, Vec<u64>) {
    let mut bytes = Vec::new();
    let mut addrs = Vec::new();
    for s in items {
        addrs.push(base + bytes.len() as u64);
        bytes.extend_from_slice(s.as_bytes());
        bytes.push(0);
    }
    (bytes, addrs)
}

/// An MPIR starter image with natural `MPIR_PROCDESC` layout and no DWARF.
fn mpir_image(order: ByteOrder, pointer: usize, state: u64) -> Image {
    let (text, s) = strings(
        0x9000,
        &["node0", "/bin/a", "node1", "/bin/b", "boom", "/x.so"],
    );
    let stride = (2 * pointer + 4).next_multiple_of(pointer);
    let mut table = Vec::new();
    for (host, exe, pid) in [(s[0], s[1], 100u64), (s[2], s[3], 101)] {
        put(order, &mut table, host, pointer);
        put(order, &mut table, exe, pointer);
        put(order, &mut table, pid, 4);
        table.resize(table.len().next_multiple_of(stride), 0xee);
    }
    let mut globals = Vec::new();
    put(order, &mut globals, 0x8000, pointer); // MPIR_proctable @0x7000
    put(order, &mut globals, 2, 4); // MPIR_proctable_size @0x7000+p
    put(order, &mut globals, state, 4); // MPIR_debug_state
    put(order, &mut globals, s[4], pointer); // MPIR_debug_abort_string
    let p = pointer as u64;
    Image {
        order,
        pointer,
        memory: vec![(0x7000, globals), (0x8000, table), (0x9000, text)],
        symbols: HashMap::from([
            ("MPIR_proctable", 0x7000),
            ("MPIR_proctable_size", 0x7000 + p),
            ("MPIR_debug_state", 0x7000 + p + 4),
            ("MPIR_debug_abort_string", 0x7000 + p + 8),
            ("MPIR_dll_name", s[5]),
        ]),
    }
}

#[test]
fn mpir_tables_in_every_byte_order_and_width() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for pointer in [4, 8] {
            let image = mpir_image(order, pointer, 1);
            let published = read_mpir(&image, 1).unwrap();
            assert!(published.spawned);
            assert_eq!(
                published.ranks,
                vec![
                    RankInfo {
                        rank: 0,
                        host: "node0".into(),
                        executable: "/bin/a".into(),
                        pid: 100
                    },
                    RankInfo {
                        rank: 1,
                        host: "node1".into(),
                        executable: "/bin/b".into(),
                        pid: 101
                    },
                ],
                "{order:?} {pointer}"
            );
            assert_eq!(published.abort_message, None);
            assert_eq!(published.dll_name.as_deref(), Some("/x.so"));
            assert_eq!(read_dll_name(&image).as_deref(), Some("/x.so"));
            let aborting = read_mpir(&mpir_image(order, pointer, 2), 1).unwrap();
            assert_eq!(aborting.abort_message.as_deref(), Some("boom"));
        }
    }
}

#[test]
fn mpir_garbage_is_reported() {
    let mut image = mpir_image(ByteOrder::Little, 8, 1);
    // proctable_size = -1
    image.memory[0].1[8..12].copy_from_slice(&(-1i32).to_le_bytes());
    assert!(matches!(
        read_mpir(&image, 1),
        Err(AcquireError::BadData { .. })
    ));
    let mut image = mpir_image(ByteOrder::Little, 8, 1);
    image.memory[0].1[..8].copy_from_slice(&0x5000u64.to_le_bytes());
    assert!(matches!(
        read_mpir(&image, 1),
        Err(AcquireError::Memory { .. })
    ));
}

fn mpi2dd_image(order: ByteOrder, pointer: usize, magic: [u8; 5], state: u8) -> Image {
    let (text, s) = strings(0x9000, &["h", "/r", "/dll64.so", "aborted!", "world"]);
    let mut info = Vec::new();
    info.extend_from_slice(&magic);
    info.extend_from_slice(&[1, 1, state]);
    put(order, &mut info, 0, 4); // debugger_flags
    put(order, &mut info, 0x6, 4); // mpi_flags
    for addr in [0, s[2], 0, 0, s[3], 0x8000, 0, 0] {
        put(order, &mut info, addr, pointer);
    }
    for v in [2u64, 0, 0, 0] {
        put(order, &mut info, v, 4);
    }
    info.extend_from_slice(&[0; 32]);
    let mut table = Vec::new();
    // Listed out of rank order: rank 1 first.
    for (pid, rank) in [(201u64, 1u64), (200, 0)] {
        for addr in [s[0], s[1], 0, s[4]] {
            put(order, &mut table, addr, pointer);
        }
        put(order, &mut table, pid, 4);
        put(order, &mut table, rank, 4);
    }
    Image {
        order,
        pointer,
        memory: vec![(0x7000, info), (0x8000, table), (0x9000, text)],
        symbols: HashMap::from([("MPI2DD_info", 0x7000)]),
    }
}

#[test]
fn mpi2dd_info_in_every_byte_order_and_width() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for pointer in [4, 8] {
            let image = mpi2dd_image(order, pointer, MPI2DD_MAGIC, MPI2DD_DEBUG_START);
            let published = read_mpi2dd(&image, 1, 0x7000).unwrap();
            assert!(published.spawned);
            let ranks: Vec<(i32, i32)> = published.ranks.iter().map(|r| (r.rank, r.pid)).collect();
            assert_eq!(ranks, vec![(0, 200), (1, 201)], "{order:?} {pointer}");
            assert_eq!(published.ranks[0].executable, "/r");
            assert_eq!(published.dll_name.as_deref(), Some("/dll64.so"));
            assert_eq!(published.abort_message, None);
            assert_eq!(read_dll_name(&image).as_deref(), Some("/dll64.so"));
            let aborted = mpi2dd_image(order, pointer, MPI2DD_MAGIC, MPI2DD_DEBUG_ABORT);
            assert_eq!(
                read_mpi2dd(&aborted, 1, 0x7000)
                    .unwrap()
                    .abort_message
                    .as_deref(),
                Some("aborted!")
            );
        }
    }
    let bad = mpi2dd_image(ByteOrder::Little, 8, *b"MPI1\x7f", 1);
    assert!(matches!(
        read_mpi2dd(&bad, 1, 0x7000),
        Err(AcquireError::BadData { .. })
    ));
    assert_eq!(read_dll_name(&bad), None);
}

#[test]
fn procdesc_layout_falls_back_to_natural_c() {
    let image = mpir_image(ByteOrder::Little, 4, 1);
    let mem = Mem::new(&image, 1);
    assert_eq!(
        procdesc_layout(&image, &mem),
        ProcdescLayout {
            host_name: 0,
            executable_name: 4,
            pid: 8,
            size: 12
        }
    );
    let image = mpir_image(ByteOrder::Little, 8, 1);
    let mem = Mem::new(&image, 1);
    assert_eq!(procdesc_layout(&image, &mem).size, 24);
}
