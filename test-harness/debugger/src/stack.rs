//! Stacks: from a thread's registers and its stack memory to frames named by function.
//!
//! Unwinding is framehop's (DWARF CFI from `.eh_frame`, `.eh_frame_hdr` and
//! `.debug_frame`, frame pointers where there is none), over the objects of an
//! [`AddressSpace`]; symbols come from each object's `.symtab` and `.dynsym`, sorted once
//! per file and shared by every process that maps it. Walks are bounded: at most
//! [`MAX_FRAMES`] frames, every address checked against the mapped objects, and a walk
//! that cannot go on ends with a note, never a panic.

use crate::debuginfo::AddressSpace;
use crate::debuginfo::elf::ElfObject;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use mqd_model::{Frame, ThreadStack};
use object::{Object, ObjectSection, ObjectSegment};
use std::ops::{Deref, Range};
use std::path::PathBuf;
use std::sync::Arc;

/// Most frames a walk goes: deeper stacks are cut with a note.
pub const MAX_FRAMES: usize = 256;

/// The registers an unwind starts from (x86_64: rip, rsp, rbp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartRegs {
    /// Instruction pointer.
    pub pc: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer.
    pub fp: u64,
}

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
    /// Where its function symbols come from: the file, or its separate debug file when
    /// the file has no `.symtab` (a distribution's stripped libc).
    symbols: Arc<ElfObject>,
    bias: u64,
    range: Range<u64>,
}

/// Unwinds and symbolises the threads of one address space.
pub struct StackReader {
    unwinder: UnwinderX86_64<Section>,
    objects: Vec<Placed>,
}

impl StackReader {
    /// The reader of the objects of `space` (every mapped ELF file with its load bias).
    pub fn new(space: &AddressSpace) -> StackReader {
        let mut unwinder = UnwinderX86_64::new();
        let mut objects = Vec::new();
        for (path, bias, file) in space.loaded_objects() {
            let Some((module, range)) = module_of(&path, bias, &file) else {
                continue;
            };
            unwinder.add_module(module);
            let symbols = if file.has_symtab {
                file
            } else {
                space
                    .debug_file(&path)
                    .and_then(|debug| ElfObject::open(&debug).ok())
                    .unwrap_or(file)
            };
            objects.push(Placed {
                path,
                symbols,
                bias,
                range,
            });
        }
        objects.sort_by_key(|o| o.range.start);
        StackReader { unwinder, objects }
    }

    /// The object that maps `address`.
    fn object_at(&self, address: u64) -> Option<&Placed> {
        let i = self.objects.partition_point(|o| o.range.start <= address);
        let o = self.objects.get(i.checked_sub(1)?)?;
        o.range.contains(&address).then_some(o)
    }

    /// The frame of a code address; `call_site` looks up a return address one byte back
    /// (inside the call, not at the next function).
    pub fn frame(&self, address: u64, call_site: bool) -> Frame {
        let lookup = if call_site {
            address.saturating_sub(1)
        } else {
            address
        };
        let Some(o) = self.object_at(lookup) else {
            return Frame {
                address,
                function: None,
                object: None,
                offset: 0,
            };
        };
        let svma = lookup.wrapping_sub(o.bias);
        match o.symbols.functions().lookup(svma) {
            Some((name, offset)) => Frame {
                address,
                function: Some(name.to_owned()),
                object: Some(o.path.display().to_string()),
                offset: offset + u64::from(call_site),
            },
            None => Frame {
                address,
                function: None,
                object: Some(o.path.display().to_string()),
                offset: address.wrapping_sub(o.bias),
            },
        }
    }

    /// The stack of one thread from its registers; `read` gives the 8 bytes at an
    /// address of its memory.
    pub fn unwind(
        &self,
        tid: i32,
        regs: StartRegs,
        mut read: impl FnMut(u64) -> Option<u64>,
    ) -> ThreadStack {
        let mut cache = CacheX86_64::new();
        let mut read_stack = |addr: u64| read(addr).ok_or(());
        let mut frames = Vec::new();
        let mut truncated = None;
        let mut walk = self.unwinder.iter_frames(
            regs.pc,
            UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp),
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
                    frames.push(self.frame(pc, false))
                }
                Ok(Some(FrameAddress::ReturnAddress(ra))) => {
                    let ra = ra.get();
                    if self.object_at(ra - 1).is_none() {
                        truncated = Some(format!(
                            "return address {ra:#x} is in no mapped object: the stack above is corrupt or not unwindable"
                        ));
                        break;
                    }
                    frames.push(self.frame(ra, true));
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
        .map(|s| (s.address(), s.address() + s.size()))
        .filter(|(start, end)| end > start)
        .collect();
    let base_svma = loads.iter().map(|l| l.0).min()? & !0xfff;
    let end_svma = loads.iter().map(|l| l.1).max()?;
    let range = bias.wrapping_add(base_svma)..bias.wrapping_add(end_svma);
    let section = |name: &str| -> Option<(Range<u64>, Section)> {
        let s = elf.section_by_name(name)?;
        let (offset, size) = s.file_range()?;
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        (end <= file.data().len()).then(|| {
            (
                s.address()..s.address() + s.size(),
                Section {
                    file: file.clone(),
                    range: start..end,
                },
            )
        })
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
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
