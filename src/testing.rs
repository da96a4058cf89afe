//! In-crate tests of the safe core driven by Rust "debuggers": a fake image serving types
//! and symbols, and fake process memory, behind the same traits the C callbacks implement.
//! The layouts here are written down by hand (LP64, little-endian unless said otherwise),
//! independently of the library's discovery.

use crate::callbacks::{ImageServices, ProcessServices, TypeHandle};
use crate::error::{Error, Result};
use crate::layout::{self, Flavour, ImageQuery, Missing};
use crate::process::{Addresses, OpClass, ProcessInfo};
use crate::target::{Sizes, Target};
use mqd_abi::types::{mqs_basic_callbacks, mqs_communicator, mqs_pending_operation};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;

/// Types and symbols of a fake image.
#[derive(Default)]
struct FakeImage {
    /// name -> (sizeof, field -> offset)
    types: Vec<(&'static str, u32, HashMap<&'static str, u32>)>,
    symbols: HashMap<&'static str, u64>,
}

impl FakeImage {
    fn add_type(&mut self, name: &'static str, size: u32, fields: &[(&'static str, u32)]) {
        self.types
            .push((name, size, fields.iter().copied().collect()));
    }

    fn remove_type(&mut self, name: &str) {
        self.types.retain(|t| t.0 != name);
    }
}

impl ImageServices for FakeImage {
    fn find_type(&self, name: &CStr) -> Option<TypeHandle> {
        let i = self
            .types
            .iter()
            .position(|t| t.0.as_bytes() == name.to_bytes())?;
        NonNull::new((i + 1) as *mut c_void).map(TypeHandle)
    }

    fn field_offset(&self, ty: TypeHandle, field: &CStr) -> Option<u32> {
        let (_, _, fields) = self.types.get(ty.0.as_ptr() as usize - 1)?;
        fields.get(field.to_str().ok()?).copied()
    }

    fn size_of(&self, ty: TypeHandle) -> Option<u32> {
        Some(self.types.get(ty.0.as_ptr() as usize - 1)?.1)
    }

    fn find_symbol(&self, name: &CStr) -> Option<u64> {
        self.symbols.get(name.to_str().ok()?).copied()
    }

    fn touch_function(&self, _: &CStr) {}
}

/// Memory of a fake process: byte regions, counted reads.
#[derive(Default)]
struct FakeMemory {
    regions: BTreeMap<u64, Vec<u8>>,
    big_endian: bool,
    fetches: Cell<usize>,
}

impl FakeMemory {
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        self.regions.insert(addr, bytes.to_vec());
    }

    fn word(&self, value: u64, size: usize) -> Vec<u8> {
        let mut bytes = value.to_le_bytes()[..size].to_vec();
        if self.big_endian {
            bytes.reverse();
        }
        bytes
    }
}

impl ProcessServices for FakeMemory {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.fetches.set(self.fetches.get() + 1);
        let (start, bytes) = self
            .regions
            .range(..=addr)
            .next_back()
            .ok_or(Error::ReadFailed)?;
        let at = (addr - start) as usize;
        let src = bytes.get(at..at + buf.len()).ok_or(Error::ReadFailed)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn to_host(&self, input: &[u8], output: &mut [u8]) -> Result<()> {
        output.copy_from_slice(input);
        if self.big_endian != cfg!(target_endian = "big") {
            output.reverse();
        }
        Ok(())
    }
}

/// Allocations through Rust's allocator, each block prefixed with its size.
unsafe extern "C" fn test_malloc(size: usize) -> *mut c_void {
    let layout = std::alloc::Layout::from_size_align(size + 16, 16).expect("small block");
    // SAFETY: a non-zero size; the size goes in the first word.
    unsafe {
        let block = std::alloc::alloc(layout);
        block.cast::<usize>().write(size);
        block.add(16).cast()
    }
}

unsafe extern "C" fn test_free(ptr: *mut c_void) {
    // SAFETY: `ptr` came from test_malloc, 16 bytes past its block and size.
    unsafe {
        let block = ptr.cast::<u8>().sub(16);
        let size = block.cast::<usize>().read();
        let layout = std::alloc::Layout::from_size_align(size + 16, 16).expect("small block");
        std::alloc::dealloc(block, layout);
    }
}

static BASIC: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_malloc_fp: Some(test_malloc),
    mqs_free_fp: Some(test_free),
    mqs_dprints_fp: None,
    mqs_errorstring_fp: None,
    mqs_put_image_info_fp: None,
    mqs_get_image_info_fp: None,
    mqs_put_process_info_fp: None,
    mqs_get_process_info_fp: None,
};

/// MPICH 4.x debug queues (layout C without `MPIR_Group.pmap`), laid out by hand.
fn debugq4_image() -> FakeImage {
    let mut image = FakeImage::default();
    image.add_type("MPIR_Comm_list", 16, &[("sequence_number", 0), ("head", 8)]);
    image.add_type(
        "MPIR_Comm",
        152,
        &[
            ("comm_next", 0),
            ("rank", 8),
            ("local_size", 12),
            ("name", 16),
            ("context_id", 144),
            ("recvcontext_id", 146),
        ],
    );
    image.add_type("MPIR_Request", 64, &[("cc", 0)]);
    image.add_type(
        "MPIR_Debugq",
        48,
        &[
            ("req", 0),
            ("tag", 8),
            ("rank", 12),
            ("context_id", 16),
            ("buf", 24),
            ("count", 32),
            ("next", 40),
        ],
    );
    for (name, addr) in [
        ("MPIR_All_communicators", 0x1000),
        ("MPIR_Recvq_head", 0x3000),
        ("MPIR_Unexpq_head", 0x3008),
        ("MPIR_Sendq_head", 0x3010),
    ] {
        image.symbols.insert(name, addr);
    }
    image
}

/// COMM_WORLD of two ranks and one posted `MPI_ANY_SOURCE` receive, in `debugq4_image`'s
/// layout.
fn debugq4_memory(big_endian: bool) -> FakeMemory {
    let mut m = FakeMemory {
        big_endian,
        ..FakeMemory::default()
    };
    let mut list = m.word(1, 4);
    list.extend([0; 4]);
    list.extend(m.word(0x2000, 8));
    m.put(0x1000, &list);
    let mut comm = vec![0u8; 152];
    comm[8..12].copy_from_slice(&m.word(0, 4));
    comm[12..16].copy_from_slice(&m.word(2, 4));
    comm[16..30].copy_from_slice(b"MPI_COMM_WORLD");
    m.put(0x2000, &comm);
    let mut heads = m.word(0x4000, 8);
    heads.extend([0; 16]);
    m.put(0x3000, &heads);
    let mut node = m.word(0x5000, 8);
    node.extend(m.word(7, 4));
    node.extend(m.word(-2i64 as u64, 4));
    node.extend(m.word(0, 4));
    node.extend([0; 4]);
    node.extend(m.word(0x9000, 8));
    node.extend(m.word(3, 8));
    node.extend(m.word(0, 8));
    m.put(0x4000, &node);
    let mut request = m.word(1, 4);
    request.extend([0; 60]);
    m.put(0x5000, &request);
    m
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn layout_is_discovered_through_rust_callbacks() {
    let image = debugq4_image();
    let layout = layout::discover(&ImageQuery::new(&image)).expect("a layout");
    assert_eq!(layout.flavour, Flavour::Debugq4);
    assert_eq!(layout.comm.name, 16);
    assert_eq!(layout.comm.name_len, 128);
    let mut image = debugq4_image();
    image.remove_type("MPIR_Debugq");
    assert_eq!(
        layout::discover(&ImageQuery::new(&image)).err(),
        Some(Missing::Type(c"MPIR_Debugq"))
    );
    image.symbols.remove("MPIR_Recvq_head");
    assert!(matches!(
        layout::discover(&ImageQuery::new(&image)),
        Err(Missing::EitherSymbol(..))
    ));
}

#[test]
fn target_reads_scalars_at_the_target_width_and_order() {
    for big_endian in [false, true] {
        let mut m = FakeMemory {
            big_endian,
            ..FakeMemory::default()
        };
        let bytes = m.word(0xfffe, 2);
        m.put(0x100, &bytes);
        let target = Target {
            services: &m,
            sizes: Sizes { int: 4, pointer: 8 },
        };
        let mut buf = [0u8; 2];
        target.fetch(0x100, &mut buf).unwrap();
        assert_eq!(target.unsigned(&buf), Ok(0xfffe));
        assert_eq!(target.signed(&buf), Ok(-2));
        assert_eq!(target.fetch(0, &mut buf), Err(Error::ReadFailed));
        assert_eq!(target.fetch(u64::MAX, &mut buf), Err(Error::ReadFailed));
        assert_eq!(target.unsigned(&[0; 3]), Err(Error::UnsupportedWidth));
    }
}

#[test]
fn a_display_through_rust_callbacks() {
    crate::debugger::set_basic(&BASIC);
    for big_endian in [false, true] {
        let image = debugq4_image();
        let layout = layout::discover(&ImageQuery::new(&image)).unwrap();
        let memory = debugq4_memory(big_endian);
        let mut info = ProcessInfo::new(
            // SAFETY: a table of optional function pointers: all None.
            unsafe { std::mem::zeroed() },
            Sizes { int: 4, pointer: 8 },
            0,
        );
        info.layout = Some(layout);
        info.addresses = Some(Addresses {
            all_communicators: 0x1000,
            posted: 0x3000,
            unexpected: 0x3008,
            sends: Some(0x3010),
            self_queues: None,
            state: Default::default(),
        });
        info.update_communicators(&memory).unwrap();
        assert!(info.first_communicator().unwrap());
        // SAFETY: plain C structs, all-zero is valid.
        let mut comm: mqs_communicator = unsafe { std::mem::zeroed() };
        info.communicator(&mut comm).unwrap();
        assert_eq!(text(&comm.name), "MPI_COMM_WORLD");
        assert_eq!((comm.size, comm.local_rank, comm.unique_id), (2, 0, 0x2000));
        assert_eq!(info.group().unwrap(), Some(&[0, 1][..]));

        assert!(
            info.start_operations(&memory, OpClass::PendingReceives)
                .unwrap()
        );
        // SAFETY: as above.
        let mut op: mqs_pending_operation = unsafe { std::mem::zeroed() };
        assert!(info.next_operation(&mut op).unwrap());
        assert_eq!(op.desired_local_rank, -1, "MPI_ANY_SOURCE");
        assert_eq!(
            (op.desired_tag, op.desired_length, op.buffer),
            (7, 3, 0x9000)
        );
        assert_eq!(op.status, 0, "pending (cc 1)");
        let lines: Vec<String> = op.extra_text.iter().map(|l| text(l)).collect();
        assert_eq!(lines[0], "posted receive (MPI_Recv/MPI_Irecv)");
        assert_eq!(lines[1], "from MPI_ANY_SOURCE");
        assert!(!info.next_operation(&mut op).unwrap());
        // One read per target object: the list head, the communicator, the queue head,
        // the node and its request.
        assert_eq!(memory.fetches.get(), 5, "big-endian {big_endian}");
        assert!(
            !info
                .start_operations(&memory, OpClass::UnexpectedMessages)
                .map(|_| info.next_operation(&mut op).unwrap())
                .unwrap()
        );
        assert!(!info.next_communicator().unwrap());
    }
}

#[test]
fn operation_classes_are_converted_at_the_boundary() {
    assert_eq!(OpClass::from_c(0), Ok(OpClass::PendingSends));
    assert_eq!(OpClass::from_c(1), Ok(OpClass::PendingReceives));
    assert_eq!(OpClass::from_c(2), Ok(OpClass::UnexpectedMessages));
    assert_eq!(OpClass::from_c(3), Err(Error::BadOpClass));
    assert_eq!(OpClass::from_c(-1), Err(Error::BadOpClass));
}
