//! The fuzz targets: arbitrary bytes in, one part of mqd run on them, a panic when an
//! invariant breaks.

use mqd_debuginfo::AddressSpace;
use mqd_debuginfo::cfi::Registers;
use mqd_debuginfo::stack::MAX_FRAMES;
use mqd_job::acquire;
use mqd_job::stacks::MpiStacks;
use mqd_library_host::library::MqsLibrary;
use mqd_library_host::session::{MqsError, Session, SessionOptions};
use mqd_model::ThreadStack;
use mqd_mpich::error::Error;
use mqd_process::core::CoreFile;
use mqd_synthetic::{Arch, GroupSide, Layout, ProcessSpec, QueueKind, SyntheticTarget};
use mqd_target::{ByteOrder, DebugInfo, Memory, Target as DebugTarget, TargetAbi};
use mqd_target::{TargetError, TypeId};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// One surface that reads untrusted bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The MQD library over a damaged synthetic MPICH image.
    Dll,
    /// ELF symbols and DWARF type lookups.
    Elf,
    /// The core-file reader.
    Core,
    /// MPIR and MPI2DD starter tables.
    Tables,
    /// The stack unwinder: CFI, frame pointers, symbols, inlined frames and the MPI
    /// call's arguments.
    Stack,
    /// The hang recorder's region in a rank's memory, and the calls taken from it.
    Records,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 6] = [
        Target::Dll,
        Target::Elf,
        Target::Core,
        Target::Tables,
        Target::Stack,
        Target::Records,
    ];

    /// Its name on command lines and in the seed directories.
    pub fn name(self) -> &'static str {
        match self {
            Target::Dll => "dll",
            Target::Elf => "elf",
            Target::Core => "core",
            Target::Tables => "tables",
            Target::Stack => "stack",
            Target::Records => "records",
        }
    }

    /// The target of that name.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Runs `target` on `data`; panics when an invariant breaks.
pub fn run(target: Target, data: &[u8]) {
    match target {
        Target::Dll => dll(data),
        Target::Elf => elf(data),
        Target::Core => core(data),
        Target::Tables => tables(data),
        Target::Stack => stack(data),
        Target::Records => records(data),
    }
}

/// The input, consumed from the front; zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn u8(&mut self) -> u8 {
        let (&first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        first
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, i| v | u64::from(self.u8()) << (8 * i))
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, tail) = self.0.split_at(n.min(self.0.len()));
        self.0 = tail;
        head
    }
}

// ---------------------------------------------------------------------------------------
// The MQD library.

/// Most reads a session over the small example image may make, however damaged.
const DLL_READS: u64 = 10_000;

/// Largest single read a session may make: a chunk of 4,096 group-table entries of at
/// most 64 bytes (objects are at most 64 KiB), never a size or offset taken on trust from
/// a damaged type table or memory.
const DLL_LARGEST_FETCH: u64 = 4096 * 64;

fn library() -> Arc<MqsLibrary> {
    static LIBRARY: OnceLock<Arc<MqsLibrary>> = OnceLock::new();
    LIBRARY
        .get_or_init(|| {
            let path = mqd_library_host::library::bundled_library()
                .expect("libmqd_mpich.so: build it (cargo build -p mqd-mpich) or set MQD_DLL");
            Arc::new(MqsLibrary::load(&path).expect("load libmqd_mpich.so"))
        })
        .clone()
}

/// The objects of the example image worth damaging: `(address, size)`.
fn objects(spec: &ProcessSpec, t: &SyntheticTarget) -> Vec<(u64, u64)> {
    let mut objects = Vec::new();
    if let Some(list) = t.find_symbol("MPIR_All_communicators") {
        objects.push((list, t.size_of("MPIR_Comm_list")));
    }
    for c in &spec.comms {
        objects.push((t.comm_address(c.slot), t.size_of("MPIR_Comm")));
        for side in [GroupSide::Local, GroupSide::Remote] {
            if let Some(g) = t.group_address(c.slot, side) {
                objects.push((g, t.size_of("MPIR_Group")));
            }
        }
    }
    for kind in [QueueKind::Posted, QueueKind::Unexpected, QueueKind::Sends] {
        let mut i = 0;
        while let Some(request) = t.request_address(kind, i) {
            objects.push((request, t.size_of("MPIR_Request")));
            i += 1;
        }
    }
    objects
}

/// The example image of a layout and architecture (by index), and its objects worth
/// damaging: built once, cloned per input (regions are shared until written).
fn example(layout: usize, arch: usize) -> (SyntheticTarget, &'static [(u64, u64)]) {
    type Example = (SyntheticTarget, Vec<(u64, u64)>);
    static IMAGES: OnceLock<Vec<Example>> = OnceLock::new();
    let images = IMAGES.get_or_init(|| {
        let mut images = Vec::new();
        for layout in Layout::ALL {
            for arch in Arch::ALL {
                let spec = ProcessSpec::example(layout, arch);
                let t = spec.build();
                let objects = objects(&spec, &t);
                images.push((t, objects));
            }
        }
        images
    });
    let (t, objects) = &images[layout * Arch::ALL.len() + arch];
    (t.clone(), objects)
}

/// A session over the example image of the layout and architecture the input picks,
/// whose objects the rest of the input overwrites (raw bytes, pointers to other objects,
/// wild pointers, integers): displays succeed or fail with a corruption code, reads
/// stay bounded, and nothing the library allocated outlives its session.
fn dll(data: &[u8]) {
    let mut input = Input(data);
    let layout = usize::from(input.u8()) % Layout::ALL.len();
    let arch = usize::from(input.u8()) % Arch::ALL.len();
    let (mut t, objects) = example(layout, arch);
    let pointer = u64::from(t.arch().pointer_size);
    let type_edits = edit_types(&mut input, &mut t);
    for _ in 0..32 {
        if input.is_empty() || objects.is_empty() {
            break;
        }
        let (base, size) = objects[usize::from(input.u16()) % objects.len()];
        let at = base + u64::from(input.u16()) % size.max(1);
        // Writes that would cross into a hole are not made.
        let _ = match input.u8() % 4 {
            0 => {
                let len = usize::from(input.u8() % 24) + 1;
                let bytes = input.take(len).to_vec();
                t.write_bytes(at, &bytes)
            }
            1 => {
                let (to, _) = objects[usize::from(input.u16()) % objects.len()];
                t.write_pointer(at / pointer * pointer, to + u64::from(input.u8()))
            }
            2 => t.write_pointer(at / pointer * pointer, input.u64()),
            _ => t.write_i32(at / 4 * 4, input.u64() as i32),
        };
    }
    let mut dbg = Session::new(library(), SessionOptions::default());
    let handle = dbg.counter_handle();
    let setup = dbg.add_process(Box::new(t), 1);
    let mut errors: Vec<MqsError> = Vec::new();
    if let Err(e) = &setup {
        errors.push(e.clone());
    }
    let p = dbg.processes()[0];
    for _ in 0..2 {
        match dbg.display(p) {
            Err(e) => errors.push(e),
            Ok(d) => {
                for c in &d.communicators {
                    errors.extend(c.group_error.clone());
                    for q in [
                        &c.pending_receives,
                        &c.unexpected_messages,
                        &c.pending_sends,
                    ] {
                        errors.extend(q.error().cloned());
                    }
                }
            }
        }
        if setup.is_err() {
            break;
        }
    }
    let counters = dbg.counters();
    drop(dbg);
    let after = handle.snapshot();
    // Memory damage alone never stops setup; a damaged type table may.
    assert!(
        setup.is_ok() || type_edits,
        "setup of a damaged image failed: {setup:?}"
    );
    assert!(counters.fetches <= DLL_READS, "{} reads", counters.fetches);
    assert!(
        counters.largest_fetch <= DLL_LARGEST_FETCH,
        "a fetch of {} bytes",
        counters.largest_fetch
    );
    assert_eq!(counters.failed_mallocs, 0, "allocations refused");
    assert_eq!(counters.bad_frees, 0, "bad frees");
    assert_eq!(counters.bad_handles, 0, "bad handles");
    assert_eq!(counters.callback_panics, 0, "callbacks panicked");
    assert_eq!(after.outstanding_allocations, 0, "allocations left");
    let corruption = [
        Error::ReadFailed,
        Error::ListCycle,
        Error::ListTooLong,
        Error::ImplausibleValue,
    ];
    // What a type table can lack or get wrong.
    let types = [
        Error::MissingType,
        Error::MissingField,
        Error::UnsupportedWidth,
        Error::NoQueues,
    ];
    for e in &errors {
        let code = Error::from_code(e.code);
        assert!(
            code.is_some_and(|c| corruption.contains(&c) || type_edits && types.contains(&c)),
            "not a corruption error: {e}"
        );
    }
}

/// Damages the image's type table as the input says (types and fields removed or renamed,
/// fields moved, sizes changed, anywhere up to 64-bit values); returns whether it did.
fn edit_types(input: &mut Input<'_>, t: &mut SyntheticTarget) -> bool {
    let edits = input.u8() % 4;
    let names = t.type_names();
    for _ in 0..edits {
        let name = &names[usize::from(input.u16()) % names.len()];
        let members = t.members_of(name);
        let member = (!members.is_empty())
            .then(|| members[usize::from(input.u8()) % members.len()].0.clone());
        let value = match input.u8() % 3 {
            0 => u64::from(input.u8()),
            1 => u64::from(input.u16()),
            _ => input.u64(),
        };
        match (input.u8() % 5, member) {
            (0, _) => t.remove_type(name),
            (1, Some(m)) => t.remove_field(name, &m),
            (2, Some(m)) => t.set_member_offset(name, &m, value),
            (3, _) => t.set_type_size(name, value),
            (4, _) => t.rename_type(name, &names[value as usize % names.len()]),
            _ => false,
        };
    }
    edits > 0
}

// ---------------------------------------------------------------------------------------
// ELF and DWARF.

const TYPE_NAMES: [&str; 12] = [
    "int",
    "long int",
    "char",
    "struct node",
    "node_t",
    "union number",
    "enum color",
    "struct outer",
    "outer3_t",
    "MPIR_Comm",
    "struct opaque",
    "<not a type>",
];
const FIELD_PATHS: [&str; 6] = ["key", "next", "in.l", "named.y", "d", "tail"];

/// An ELF image's symbols and types, as a library asks for them.
fn elf(data: &[u8]) {
    let Ok(space) = AddressSpace::from_elf_image("fuzz", data.to_vec()) else {
        return;
    };
    let _ = (space.abi(), space.byte_order(), space.has_debug_info());
    for name in ["main", "main_global", "the_opaque", "_start"] {
        let _ = (space.find_symbol(name), space.find_function(name));
    }
    for name in TYPE_NAMES {
        let Some(ty) = space.find_type(name) else {
            continue;
        };
        let _ = space.type_size(ty);
        for path in FIELD_PATHS {
            let _ = space.field_offset(ty, path);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Stacks.

/// Most words one walk may read: 256 frames of CFI rules and a call's arguments.
const STACK_READS: u64 = 64 * 1024;

/// A thread's stack unwound and symbolised: the input is an ELF program (its CFI, symbols
/// and DWARF), the thread's registers, and its stack memory. Walks stay bounded.
fn stack(data: &[u8]) {
    let Some((stack, reads)) = unwound_stack(data) else {
        return;
    };
    assert!(reads <= STACK_READS, "{reads} reads of the stack");
    // Inlined frames come on top of at most MAX_FRAMES stepped ones.
    let stepped = stack.frames.iter().filter(|f| !f.inlined).count();
    assert!(stepped <= MAX_FRAMES, "{stepped} frames");
}

/// The stack a `stack` input describes, and the words read to unwind it; `None` when its
/// ELF file is rejected.
///
/// Layout: u32 length, the ELF file (mapped at its link addresses), 17 u64 registers by
/// DWARF number (16 is the pc), the u64 address of the stack, then the stack's bytes.
pub fn unwound_stack(data: &[u8]) -> Option<(ThreadStack, u64)> {
    let mut input = Input(data);
    let len = u32::from_le_bytes([input.u8(), input.u8(), input.u8(), input.u8()]);
    let image = input.take(len as usize).to_vec();
    let space = AddressSpace::from_elf_image("fuzz", image).ok()?;
    let mut regs = Registers::default();
    for r in regs.0.iter_mut() {
        *r = Some(input.u64());
    }
    let base = input.u64();
    let memory = input.0;
    let mut reads = 0u64;
    let mut read = |addr: u64| {
        reads += 1;
        let start = usize::try_from(addr.checked_sub(base)?).ok()?;
        let word = memory.get(start..start.checked_add(8)?)?;
        Some(u64::from_le_bytes(word.try_into().ok()?))
    };
    let stacks = MpiStacks::new(&space);
    let stack = stacks.reader().unwind(1, &regs, &mut read);
    let stack = stacks.thread(stack, Some(0), &mut read);
    Some((stack, reads))
}

// ---------------------------------------------------------------------------------------
// Core files.

/// Most bytes read from one segment.
const CORE_READ: usize = 4096;

/// A core file's headers, notes and mappings, and reads at both ends of its segments.
fn core(data: &[u8]) {
    // SAFETY: a new anonymous file, closed below.
    let fd = unsafe { libc::memfd_create(c"mqd-fuzz-core".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: fd is ours and open; File closes it when dropped.
    let file: std::fs::File = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    std::io::Write::write_all(&mut &file, data).expect("write the core");
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
    if let Ok(core) = CoreFile::open(&path) {
        let _ = (core.pid(), core.signal(), core.process_info(), core.auxv());
        let _ = (core.threads(), core.page_size(), core.file_mappings());
        let _ = core.mappings();
        let mut buf = vec![0u8; CORE_READ];
        for segment in core.segments().iter().take(16) {
            let len = usize::try_from(segment.end() - segment.vaddr)
                .unwrap_or(CORE_READ)
                .min(CORE_READ);
            let _ = core.read_memory(segment.vaddr, &mut buf[..len]);
            let _ = core.read_memory(segment.end().saturating_sub(len as u64), &mut buf[..len]);
        }
    }
    drop(file);
}

// ---------------------------------------------------------------------------------------
// Starter tables.

/// Where the image's bytes are mapped.
const TABLES_BASE: u64 = 0x100;
/// Most reads one table read may make, however large the table claims to be.
const TABLES_READS: u64 = 100_000;

/// A starter's memory: the input's bytes at [`TABLES_BASE`], its symbols at fixed
/// places in it, in the byte order and pointer size the input picks.
struct Image {
    order: ByteOrder,
    pointer: u8,
    memory: Vec<u8>,
    symbols: HashMap<&'static str, u64>,
    reads: Cell<u64>,
}

impl Memory for Image {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.reads.set(self.reads.get() + 1);
        assert!(
            self.reads.get() <= TABLES_READS,
            "more than {TABLES_READS} reads of a starter's tables"
        );
        read_mapped(&self.memory, TABLES_BASE, addr, buf)
    }
}

/// Fills `buf` from `memory` mapped at `base`: all of it, or unmapped.
fn read_mapped(memory: &[u8], base: u64, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
    let unmapped = TargetError::Unmapped {
        addr,
        len: buf.len(),
    };
    let start = usize::try_from(addr.checked_sub(base).ok_or(unmapped.clone())?)
        .map_err(|_| unmapped.clone())?;
    let bytes = start
        .checked_add(buf.len())
        .and_then(|end| memory.get(start..end))
        .ok_or(unmapped)?;
    buf.copy_from_slice(bytes);
    Ok(())
}

impl DebugInfo for Image {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_type(&self, _: &str) -> Option<TypeId> {
        None
    }
    fn type_size(&self, _: TypeId) -> Option<u64> {
        None
    }
    fn field_offset(&self, _: TypeId, _: &str) -> Option<u64> {
        None
    }
    fn abi(&self) -> TargetAbi {
        TargetAbi {
            short: 2,
            int: 4,
            long: self.pointer,
            long_long: 8,
            pointer: self.pointer,
        }
    }
    fn byte_order(&self) -> ByteOrder {
        self.order
    }
}

impl DebugTarget for Image {
    fn name(&self) -> String {
        "fuzzed starter".into()
    }
}

/// The symbols a starter may have, and where they are in the image.
const TABLE_SYMBOLS: [(&str, u64); 9] = [
    ("MPIR_proctable", 0x00),
    ("MPIR_proctable_size", 0x08),
    ("MPIR_debug_state", 0x10),
    ("MPIR_debug_abort_string", 0x18),
    ("MPIR_dll_name", 0x20),
    ("MPIR_i_am_starter", 0x28),
    ("MPIR_Breakpoint", 0x30),
    ("MPI2DD_info", 0x40),
    ("MPI2DD_breakpoint", 0x38),
];

/// The MPIR or MPI2DD tables of a starter image: the reader returns the job or an
/// error, within a bounded number of reads.
/// Where the records target's input is mapped: the region's header first.
pub const RECORDS_BASE: u64 = 0x10_0000;

/// A rank's memory that is the input, at [`RECORDS_BASE`]; every read counted.
struct RecordsImage<'a> {
    memory: &'a [u8],
    largest: Cell<usize>,
}

impl Memory for RecordsImage<'_> {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.largest.set(self.largest.get().max(buf.len()));
        read_mapped(self.memory, RECORDS_BASE, addr, buf)
    }
}

/// What the records target reads from `data`: the region, or why not.
pub fn recording(data: &[u8]) -> Result<mqd_recording::Recording, mqd_recording::Damage> {
    let image = RecordsImage {
        memory: data,
        largest: Cell::new(0),
    };
    let read = mqd_job::records::Records::at(RECORDS_BASE).read(&image);
    // The decoder's own bounds: 64 KiB of names, 4,096 slots of at most 4 KiB.
    assert!(
        image.largest.get() <= 4096 * 4096,
        "a read of {} bytes",
        image.largest.get()
    );
    read
}

fn records(data: &[u8]) {
    let Ok(recording) = recording(data) else {
        return;
    };
    let abi = mqd_mpi_abi::tables::Abi::new(mqd_mpi_abi::tables::Family::Mpich);
    for thread in &recording.threads {
        if let mqd_recording::ThreadRecord::Whole {
            call: Some(call), ..
        } = thread
        {
            let args = mqd_job::records::call_arguments(call, &abi, &recording.comms);
            assert_eq!(args.called.as_deref(), Some(call.name.as_str()));
            let merged = mqd_job::records::merge(args.clone(), Some(args.clone()));
            assert_eq!(merged, args, "a call merged with itself is itself");
        }
    }
}

fn tables(data: &[u8]) {
    let _ = starter_tables(data);
}

/// What the tables target reads from `data`: the job, or why not.
pub fn starter_tables(data: &[u8]) -> Result<acquire::StarterTables, acquire::AcquireError> {
    let mut input = Input(data);
    let flags = input.u8();
    let present = input.u16();
    let image = Image {
        order: if flags & 1 == 0 {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        },
        pointer: if flags & 2 == 0 { 8 } else { 4 },
        memory: input.take(usize::MAX).to_vec(),
        symbols: TABLE_SYMBOLS
            .iter()
            .enumerate()
            .filter(|(i, _)| present & (1 << i) != 0)
            .map(|(_, &(name, at))| (name, TABLES_BASE + at))
            .collect(),
        reads: Cell::new(0),
    };
    let tables = acquire::read_tables(&image, 1);
    if let Ok(tables) = &tables {
        // A table is never larger than the memory that holds it.
        assert!(
            tables.ranks.len() <= image.memory.len(),
            "{} ranks from {} bytes",
            tables.ranks.len(),
            image.memory.len()
        );
    }
    tables
}
