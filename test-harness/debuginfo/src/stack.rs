//! Stacks: from a thread's registers and its stack memory to frames named by function.
//!
//! Unwinding is framehop's (DWARF CFI from `.eh_frame`, `.eh_frame_hdr` and
//! `.debug_frame`, frame pointers where there is none), over the objects of an
//! [`AddressSpace`]; symbols come from each object's `.symtab` and `.dynsym`, sorted once
//! per file and shared by every process that maps it. Walks are bounded: at most
//! [`MAX_FRAMES`] frames, every address checked against the mapped objects, and a walk
//! that cannot go on ends with a note, never a panic.

use crate::cfi::{self, FrameTables, Registers};
use crate::code::CodeInfo;
use crate::elf::ElfObject;
use crate::space::AddressSpace;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};
use serde::{Deserialize, Serialize};
use std::ops::{Deref, Range};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Libraries a runtime library needs that are the system's, not the runtime's: frames in
/// them are the program's or the C runtime's.
pub const SYSTEM_LIBRARIES: &[&str] = &[
    "libc.so",
    "libm.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "ld-linux",
    "libgcc_s.so",
    "libstdc++.so",
    "libz.so",
    "libgfortran.so",
    "libquadmath.so",
    "libgomp.so",
    "libomp.so",
    "libiomp5.so",
    "libcrypt.so",
    "libutil.so",
];

/// A runtime library whose frames a stack marks ([`Frame::runtime`]): the objects that
/// define one of `entry_points`, the libraries they need (transitively, `system`
/// excepted), and plugins loaded from below their directories. For MPI (`mqd-job`):
/// the objects defining `PMPI_Init`, with their transports and process-manager clients.
#[derive(Debug, Clone, Copy)]
pub struct Runtime {
    /// Functions only the runtime's own objects define.
    pub entry_points: &'static [&'static str],
    /// Libraries that are never the runtime's (prefixes of file names).
    pub system: &'static [&'static str],
}

impl Runtime {
    /// No runtime: no frame is marked.
    pub const NONE: Runtime = Runtime {
        entry_points: &[],
        system: SYSTEM_LIBRARIES,
    };
}

/// Which of the loaded objects (path, bias, file) are `runtime`'s. The program itself
/// (first) never is, even where it defines functions named as the runtime's.
fn runtime_objects(objects: &[(PathBuf, u64, Arc<ElfObject>)], runtime: &Runtime) -> Vec<bool> {
    use crate::elf::SymbolClass;
    let file_name = |p: &PathBuf| {
        p.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let system = |p: &PathBuf| {
        let name = file_name(p);
        runtime.system.iter().any(|s| name.starts_with(s))
    };
    let mut mpi: Vec<bool> = objects
        .iter()
        .enumerate()
        .map(|(i, (_, _, file))| {
            i > 0
                && !file.is_executable
                && runtime
                    .entry_points
                    .iter()
                    .any(|name| file.symbols().get(name, SymbolClass::Function).is_some())
        })
        .collect();
    if !mpi.iter().any(|&m| m) {
        return mpi;
    }
    // The libraries they need, breadth first.
    let mut work: Vec<usize> = (0..objects.len()).filter(|&i| mpi[i]).collect();
    while let Some(i) = work.pop() {
        for name in &objects[i].2.dynamic.needed {
            for (j, (path, _, file)) in objects.iter().enumerate() {
                let named = file.dynamic.soname.as_deref() == Some(&name[..])
                    || path.file_name().map(|f| f.as_encoded_bytes()) == Some(&name[..]);
                if named && !mpi[j] && j > 0 && !system(path) {
                    mpi[j] = true;
                    work.push(j);
                }
            }
        }
    }
    // Plugins of the runtime: loaded from below its directories; not a Python
    // extension module that happens to be installed there (a virtual environment's
    // `lib/` holds PyPI's MPI and `lib/python3.X/site-packages`).
    let extension = |p: &PathBuf| {
        let name = file_name(p);
        name.contains(".cpython-") || name.ends_with(".abi3.so") || name.contains(".pypy")
    };
    let dirs: Vec<PathBuf> = objects
        .iter()
        .zip(&mpi)
        .filter(|(_, m)| **m)
        .filter_map(|((p, _, _), _)| p.parent().map(PathBuf::from))
        .collect();
    for (j, (path, _, _)) in objects.iter().enumerate() {
        let under = path
            .parent()
            .is_some_and(|d| dirs.iter().any(|m| d != m.as_path() && d.starts_with(m)));
        if j > 0 && under && !system(path) && !extension(path) {
            mpi[j] = true;
        }
    }
    mpi
}

/// One frame of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The instruction address (for a caller, its return address).
    pub address: u64,
    /// The function containing it, from the object's symbol tables (for an inlined
    /// frame, from its DWARF).
    pub function: Option<String>,
    /// The object (executable or shared library) it is in.
    pub object: Option<String>,
    /// The address's offset from the function's start.
    pub offset: u64,
    /// The source file, from the object's DWARF line table.
    pub file: Option<String>,
    /// The source line.
    pub line: Option<u32>,
    /// A function inlined at this address into the frame that follows: no frame of its
    /// own on the stack.
    pub inlined: bool,
    /// The frame is in the runtime the reader marks ([`Runtime`]).
    pub runtime: bool,
}

/// The stack of one thread.
#[derive(Debug, Clone)]
pub struct ThreadStack {
    /// Its thread id.
    pub tid: i32,
    /// Its frames, innermost first.
    pub frames: Vec<Frame>,
    /// Why the walk ended before the stack's base, if it did (a corrupt stack, an
    /// address outside every object, the depth cap, no registers).
    pub truncated: Option<String>,
    /// The registers the walk started from (the innermost frame's), when there were.
    pub registers: Option<Registers>,
    /// The thread pointer (x86_64's `fs_base`): glibc's `pthread_t` of the thread, and
    /// where its TLS is found; set by the caller that read the registers.
    pub thread_pointer: Option<u64>,
}

impl ThreadStack {
    /// A thread whose stack could not be walked, and why.
    pub fn unwalked(tid: i32, why: impl Into<String>) -> ThreadStack {
        ThreadStack {
            tid,
            frames: Vec::new(),
            truncated: Some(why.into()),
            registers: None,
            thread_pointer: None,
        }
    }
}

/// Most frames a walk goes: deeper stacks are cut with a note.
pub const MAX_FRAMES: usize = 256;

/// A section of a mapped ELF file, borrowed for as long as the file is open.
#[derive(Clone)]
struct Section {
    file: Arc<ElfObject>,
    range: Range<usize>,
}

impl Deref for Section {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.file.data()[self.range.clone()]
    }
}

/// One mapped object, for symbolising.
struct Placed {
    path: PathBuf,
    /// The mapped file.
    file: Arc<ElfObject>,
    /// Where its function symbols come from: the file, or its separate debug file when
    /// the file has no `.symtab` (a distribution's stripped libc).
    symbols: Arc<ElfObject>,
    /// Its DWARF: the file's, or its separate debug file's.
    dwarf: Option<Arc<ElfObject>>,
    bias: u64,
    range: Range<u64>,
    /// Its CFI tables, for recovering every register of a frame.
    tables: OnceLock<Option<FrameTables>>,
    /// It is part of the runtime ([`runtime_objects`]).
    runtime: bool,
}

/// What [`StackReader::placed_at`] gives of one mapped object.
pub(crate) struct PlacedObject<'a> {
    pub file: &'a Arc<ElfObject>,
    pub symbols: &'a Arc<ElfObject>,
    pub code: Option<&'a Arc<CodeInfo>>,
    pub bias: u64,
    pub tables: Option<&'a FrameTables>,
}

/// Unwinds and symbolises the threads of one address space.
pub struct StackReader {
    unwinder: UnwinderX86_64<Section>,
    objects: Vec<Placed>,
}

impl StackReader {
    /// The reader of the objects of `space` (every mapped ELF file with its load bias),
    /// marking the frames of `runtime`.
    pub fn new(space: &AddressSpace, runtime: &Runtime) -> StackReader {
        let mut unwinder = UnwinderX86_64::new();
        let mut objects = Vec::new();
        let loaded = space.loaded_objects();
        let marked = runtime_objects(&loaded, runtime);
        for ((path, bias, file), runtime) in loaded.into_iter().zip(marked) {
            let Some((module, range)) = module_of(&path, bias, &file) else {
                continue;
            };
            unwinder.add_module(module);
            let debug = || {
                space
                    .debug_file(&path)
                    .and_then(|debug| ElfObject::open(&debug, space.type_cache()).ok())
            };
            let symbols = if file.has_symtab {
                file.clone()
            } else {
                debug().unwrap_or_else(|| file.clone())
            };
            let dwarf = if file.has_dwarf() {
                Some(file.clone())
            } else {
                debug().filter(|d| d.has_dwarf())
            };
            objects.push(Placed {
                path,
                file,
                symbols,
                dwarf,
                bias,
                range,
                tables: OnceLock::new(),
                runtime,
            });
        }
        objects.sort_by_key(|o| o.range.start);
        StackReader { unwinder, objects }
    }

    /// The reader of a process's objects and of its vDSO (the kernel's code that
    /// `clock_gettime` runs in, found through `AT_SYSINFO_EHDR` of `auxv`): a thread
    /// stopped there unwinds through its CFI like any library.
    pub fn for_process(
        space: &AddressSpace,
        runtime: &Runtime,
        auxv: &[(u64, u64)],
        memory: &dyn mqd_target::Memory,
    ) -> StackReader {
        let mut reader = StackReader::new(space, runtime);
        if let Some((base, image)) = vdso_image(auxv, memory) {
            reader.add_vdso(base, image);
        }
        reader
    }

    fn add_vdso(&mut self, base: u64, image: Vec<u8>) {
        let path = PathBuf::from("[vdso]");
        let Ok(file) = ElfObject::from_memory(path.clone(), image) else {
            return;
        };
        let Some(first) = file.loads.iter().map(|l| l.vaddr).min() else {
            return;
        };
        let bias = base.wrapping_sub(first & !0xfff);
        let Some((module, range)) = module_of(&path, bias, &file) else {
            return;
        };
        // Never over a mapped file: the auxiliary vector may lie in a core.
        if self.object_at(range.start).is_some() || self.object_at(range.end - 1).is_some() {
            return;
        }
        self.unwinder.add_module(module);
        self.objects.push(Placed {
            path,
            file: file.clone(),
            symbols: file,
            dwarf: None,
            bias,
            range,
            runtime: false,
            tables: OnceLock::new(),
        });
        self.objects.sort_by_key(|o| o.range.start);
    }

    /// The CFI tables of the object that maps `address`.
    pub fn tables_at(&self, address: u64) -> Option<&FrameTables> {
        let o = self.object_at(address)?;
        o.tables
            .get_or_init(|| FrameTables::new(o.file.clone(), o.bias))
            .as_ref()
    }

    /// The code DWARF of the object that maps `address`, and its load bias.
    pub fn code_at(&self, address: u64) -> Option<(&Arc<CodeInfo>, u64)> {
        let o = self.object_at(address)?;
        Some((o.dwarf.as_ref()?.code()?, o.bias))
    }

    /// The object that maps `address`: its file, the file of its symbols, its DWARF's,
    /// its load bias and its CFI tables.
    pub(crate) fn placed_at(&self, address: u64) -> Option<PlacedObject<'_>> {
        let o = self.object_at(address)?;
        Some(PlacedObject {
            file: &o.file,
            symbols: &o.symbols,
            code: o.dwarf.as_ref().and_then(|d| d.code()),
            bias: o.bias,
            tables: self.tables_at(address),
        })
    }

    /// The object that maps `address`.
    fn object_at(&self, address: u64) -> Option<&Placed> {
        let i = self.objects.partition_point(|o| o.range.start <= address);
        let o = self.objects.get(i.checked_sub(1)?)?;
        o.range.contains(&address).then_some(o)
    }

    /// The frames of a code address, innermost first: the functions its DWARF says are
    /// inlined there, then its function; `call_site` looks up a return address one byte
    /// back (inside the call, not at the next function).
    pub fn frames_at(&self, address: u64, call_site: bool) -> Vec<Frame> {
        let lookup = if call_site {
            address.saturating_sub(1)
        } else {
            address
        };
        let Some(o) = self.object_at(lookup) else {
            return vec![Frame {
                address,
                ..Frame::default()
            }];
        };
        let svma = lookup.wrapping_sub(o.bias);
        let object = Some(o.path.display().to_string());
        let mut physical = match o.symbols.functions().lookup(svma) {
            Some((name, offset)) => Frame {
                address,
                function: Some(name.to_owned()),
                object: object.clone(),
                offset: offset + u64::from(call_site),
                runtime: o.runtime,
                ..Frame::default()
            },
            None => Frame {
                address,
                object: object.clone(),
                offset: address.wrapping_sub(o.bias),
                runtime: o.runtime,
                ..Frame::default()
            },
        };
        let source = match o.dwarf.as_ref().and_then(|d| d.code()) {
            Some(code) => code.source_frames(svma),
            None => return vec![physical],
        };
        let Some((outer, inlined)) = source.split_last() else {
            return vec![physical];
        };
        physical.file.clone_from(&outer.file);
        physical.line = outer.line;
        // gfortran's main program is `MAIN__` to the linker, its PROGRAM's name to DWARF.
        if (physical.function.is_none() || physical.function.as_deref() == Some("MAIN__"))
            && outer.function.is_some()
        {
            physical.function.clone_from(&outer.function);
        }
        let mut frames: Vec<Frame> = inlined
            .iter()
            .map(|f| Frame {
                address,
                function: f.function.clone(),
                object: object.clone(),
                offset: physical.offset,
                file: f.file.clone(),
                line: f.line,
                inlined: true,
                runtime: o.runtime,
            })
            .collect();
        frames.push(physical);
        frames
    }

    /// The stack of one thread from its registers; `read` gives the 8 bytes at an
    /// address of its memory.
    pub fn unwind(
        &self,
        tid: i32,
        regs: &Registers,
        mut read: impl FnMut(u64) -> Option<u64>,
    ) -> ThreadStack {
        let (Some(pc), Some(sp), Some(fp)) = (regs.pc(), regs.get(7), regs.get(6)) else {
            return ThreadStack {
                tid,
                frames: Vec::new(),
                truncated: Some("no instruction, stack or frame pointer to start from".into()),
                registers: Some(*regs),
                thread_pointer: None,
            };
        };
        let mut cache = CacheX86_64::new();
        let mut read_stack = |addr: u64| read(addr).ok_or(());
        let mut frames = Vec::new();
        let mut truncated = None;
        let mut walk = self.unwinder.iter_frames(
            pc,
            UnwindRegsX86_64::new(pc, sp, fp),
            &mut cache,
            &mut read_stack,
        );
        loop {
            if frames.len() == MAX_FRAMES {
                truncated = Some(format!("cut at {MAX_FRAMES} frames"));
                break;
            }
            match walk.next() {
                Ok(Some(FrameAddress::InstructionPointer(pc))) => {
                    frames.extend(self.frames_at(pc, false))
                }
                Ok(Some(FrameAddress::ReturnAddress(ra))) => {
                    let ra = ra.get();
                    if self.object_at(ra - 1).is_none() {
                        truncated = Some(format!(
                            "return address {ra:#x} is in no mapped object: the stack above is corrupt or not unwindable"
                        ));
                        break;
                    }
                    frames.extend(self.frames_at(ra, true));
                }
                Ok(None) => break,
                Err(e) => {
                    truncated = Some(format!("unwinding stopped: {e}"));
                    break;
                }
            }
        }
        ThreadStack {
            tid,
            frames,
            truncated,
            registers: Some(*regs),
            thread_pointer: None,
        }
    }
}

/// A framehop module for one mapped object, and the addresses it covers.
fn module_of(
    path: &std::path::Path,
    bias: u64,
    file: &Arc<ElfObject>,
) -> Option<(Module<Section>, Range<u64>)> {
    let elf = object::File::parse(file.data()).ok()?;
    let loads: Vec<(u64, u64)> = elf
        .segments()
        .filter_map(|s| Some((s.address(), s.address().checked_add(s.size())?)))
        .filter(|(start, end)| end > start)
        .collect();
    let base_svma = loads.iter().map(|l| l.0).min()? & !0xfff;
    let end_svma = loads.iter().map(|l| l.1).max()?;
    // framehop adds addresses inside the module to its base: no wrapping around.
    let range = bias.checked_add(base_svma)?..bias.checked_add(end_svma)?;
    let section = |name: &str| -> Option<(Range<u64>, Section)> {
        let s = elf.section_by_name(name)?;
        let (offset, size) = s.file_range()?;
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        let svma = s.address()..s.address().checked_add(s.size())?;
        (end <= file.data().len()).then(|| {
            (
                svma,
                Section {
                    file: file.clone(),
                    range: start..end,
                },
            )
        })
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr").filter(|(svma, hdr)| {
        eh_frame.as_ref().is_some_and(|(frames, _)| {
            file.search_table_is_sound(|| cfi::search_table_is_sound(hdr, svma.start, frames))
        })
    });
    let debug_frame = section(".debug_frame");
    let info = ExplicitModuleSectionInfo {
        base_svma,
        text_svma: text.as_ref().map(|t| t.0.clone()),
        text: text.map(|t| t.1),
        eh_frame_svma: eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: eh_frame.map(|t| t.1),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|t| t.1),
        debug_frame: debug_frame.map(|t| t.1),
        stubs_svma: None,
        stub_helper_svma: None,
        got_svma: None,
        unwind_info: None,
        text_segment_svma: None,
        text_segment: None,
    };
    let module = Module::new(
        path.display().to_string(),
        range.clone(),
        bias.wrapping_add(base_svma),
        info,
    );
    Some((module, range))
}

/// Most bytes of a vDSO image read.
const MAX_VDSO: u64 = 1 << 20;

/// The vDSO's base address and image, read from memory: its ELF header says how far
/// its program and section headers reach.
fn vdso_image(auxv: &[(u64, u64)], memory: &dyn mqd_target::Memory) -> Option<(u64, Vec<u8>)> {
    const AT_SYSINFO_EHDR: u64 = 33;
    let base = auxv
        .iter()
        .find(|(key, _)| *key == AT_SYSINFO_EHDR)
        .map(|&(_, value)| value)
        .filter(|&b| b != 0)?;
    let mut header = [0u8; 64];
    memory.read_memory(base, &mut header).ok()?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([header[at], header[at + 1]]));
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or_default());
    let (phoff, shoff) = (u64_at(0x20), u64_at(0x28));
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    let (shentsize, shnum) = (u16_at(0x3a), u16_at(0x3c));
    let mut size = shoff
        .checked_add(shentsize.checked_mul(shnum)?)?
        .max(phoff.checked_add(phentsize.checked_mul(phnum)?)?);
    let mut phdrs = vec![0u8; usize::try_from(phentsize * phnum).ok()?];
    memory
        .read_memory(base.checked_add(phoff)?, &mut phdrs)
        .ok()?;
    for ph in phdrs.chunks_exact(usize::try_from(phentsize).ok()?.max(1)) {
        if ph.len() >= 0x28 {
            let offset = u64::from_le_bytes(ph[8..16].try_into().ok()?);
            let filesz = u64::from_le_bytes(ph[0x20..0x28].try_into().ok()?);
            size = size.max(offset.checked_add(filesz)?);
        }
    }
    if size > MAX_VDSO {
        return None;
    }
    let mut image = vec![0u8; usize::try_from(size).ok()?];
    memory.read_memory(base, &mut image).ok()?;
    Some((base, image))
}
