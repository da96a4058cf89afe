//! Every register of a caller's frame, from DWARF call frame information.
//!
//! framehop walks a stack with only the instruction, stack and frame pointers. Reading a
//! call's arguments needs the registers a compiler keeps them in across calls (x86_64's
//! callee-saved rbx, rbp, r12-r15), which only the CFI rules of every frame below
//! recover. This module applies them, one frame at a time, with gimli: `.eh_frame`
//! through `.eh_frame_hdr`'s binary search table, else `.debug_frame`. Registers a callee
//! may clobber (rax, rcx, rdx, rsi, rdi, r8-r11) are unknown in every caller.

use crate::elf::ElfObject;
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, RegisterRule, UnwindContext,
    UnwindExpression, UnwindSection,
};
use object::{Object, ObjectSection};
use std::ops::Range;
use std::sync::Arc;

/// x86_64 registers by DWARF number (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp,
/// 7 rsp, 8-15 r8-r15, 16 the return address, i.e. rip); `None` where unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Registers(pub [Option<u64>; 17]);

/// DWARF numbers of the x86_64 registers that survive a call.
const CALLEE_SAVED: [usize; 6] = [3, 6, 12, 13, 14, 15];
const SP: usize = 7;
const PC: usize = 16;
const FP: usize = 6;

impl Registers {
    /// From the words of Linux's x86_64 `user_regs_struct` (ptrace, `NT_PRSTATUS`): r15,
    /// r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, rip,
    /// cs, eflags, rsp, ...
    pub fn from_user_regs(words: &[u64]) -> Option<Registers> {
        // DWARF number -> index in user_regs_struct.
        const AT: [usize; 17] = [10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16];
        let mut regs = [None; 17];
        for (dwarf, &at) in AT.iter().enumerate() {
            regs[dwarf] = Some(*words.get(at)?);
        }
        Some(Registers(regs))
    }

    /// A register by DWARF number.
    pub fn get(&self, number: u16) -> Option<u64> {
        self.0.get(usize::from(number)).copied().flatten()
    }

    /// The instruction address.
    pub fn pc(&self) -> Option<u64> {
        self.0[PC]
    }
}

/// The CFI sections of one mapped object.
pub struct FrameTables {
    file: Arc<ElfObject>,
    bias: u64,
    eh_frame: Option<(u64, Range<usize>)>,
    eh_frame_hdr: Option<(u64, Range<usize>)>,
    debug_frame: Option<Range<usize>>,
    text: Option<u64>,
}

impl FrameTables {
    /// The tables of `file`, loaded at `bias`.
    pub(crate) fn new(file: Arc<ElfObject>, bias: u64) -> Option<FrameTables> {
        let elf = object::File::parse(file.data()).ok()?;
        let section = |name: &str| -> Option<(u64, Range<usize>)> {
            let s = elf.section_by_name(name)?;
            let (offset, size) = s.file_range()?;
            let start = usize::try_from(offset).ok()?;
            let end = start.checked_add(usize::try_from(size).ok()?)?;
            (end <= file.data().len()).then_some((s.address(), start..end))
        };
        let eh_frame = section(".eh_frame");
        let eh_frame_hdr = section(".eh_frame_hdr").filter(|(hdr_svma, hdr)| {
            eh_frame.as_ref().is_some_and(|(svma, range)| {
                let frames = *svma..svma.saturating_add(range.len() as u64);
                file.search_table_is_sound(|| {
                    search_table_is_sound(&file.data()[hdr.clone()], *hdr_svma, &frames)
                })
            })
        });
        let debug_frame = section(".debug_frame").map(|s| s.1);
        let text = section(".text").map(|s| s.0);
        drop(elf);
        Some(FrameTables {
            file,
            bias,
            eh_frame,
            eh_frame_hdr,
            debug_frame,
            text,
        })
    }

    /// The caller's registers and this frame's CFA, from `regs` of a frame whose
    /// instruction lies in this object; `top` for the innermost frame (its pc is the
    /// instruction itself, not a return address).
    pub fn unwind(
        &self,
        regs: &Registers,
        top: bool,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<(Registers, u64)> {
        let pc = regs.pc()?;
        let lookup = if top { pc } else { pc.checked_sub(1)? };
        let svma = lookup.wrapping_sub(self.bias);
        let data = self.file.data();
        let mut ctx = UnwindContext::new();
        let mut bases = BaseAddresses::default();
        if let Some(text) = self.text {
            bases = bases.set_text(text);
        }
        let eh = self.eh_frame.as_ref().map(|(svma, range)| {
            bases = bases.clone().set_eh_frame(*svma);
            let mut eh = EhFrame::new(&data[range.clone()], LittleEndian);
            eh.set_address_size(8);
            eh
        });
        let debug = self.debug_frame.as_ref().map(|range| {
            let mut debug = gimli::DebugFrame::new(&data[range.clone()], LittleEndian);
            debug.set_address_size(8);
            debug
        });
        let from_eh = eh.as_ref().and_then(|eh| match &self.eh_frame_hdr {
            Some((hdr_svma, hdr_range)) => {
                bases = bases.clone().set_eh_frame_hdr(*hdr_svma);
                let hdr = EhFrameHdr::new(&data[hdr_range.clone()], LittleEndian);
                let parsed = hdr.parse(&bases, 8).ok()?;
                parsed
                    .table()?
                    .unwind_info_for_address(eh, &bases, &mut ctx, svma, EhFrame::cie_from_offset)
                    .ok()
                    .cloned()
            }
            None => eh
                .unwind_info_for_address(&bases, &mut ctx, svma, EhFrame::cie_from_offset)
                .ok()
                .cloned(),
        });
        // The expressions of a row are in the section it came from.
        let (row, origin) = match (from_eh, &eh) {
            (Some(row), Some(eh)) => (row, Origin::Eh(eh)),
            _ => {
                let debug = debug.as_ref()?;
                let row = debug
                    .unwind_info_for_address(
                        &bases,
                        &mut ctx,
                        svma,
                        gimli::DebugFrame::cie_from_offset,
                    )
                    .ok()?
                    .clone();
                (row, Origin::Debug(debug))
            }
        };
        let expression = |e: &UnwindExpression<usize>| origin.expression(e);
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                regs.get(register.0)?.checked_add_signed(*offset)?
            }
            CfaRule::Expression(e) => evaluate(expression(e)?, regs, None, read)?,
        };
        let mut caller = Registers::default();
        for r in CALLEE_SAVED {
            caller.0[r] = regs.0[r];
        }
        for r in 0..17u16 {
            let Some(rule) = row.register(gimli::Register(r)) else {
                continue;
            };
            caller.0[usize::from(r)] = match rule {
                RegisterRule::Undefined => None,
                RegisterRule::SameValue => regs.get(r),
                RegisterRule::Offset(n) => read(cfa.checked_add_signed(n)?),
                RegisterRule::ValOffset(n) => cfa.checked_add_signed(n),
                RegisterRule::Register(other) => regs.get(other.0),
                RegisterRule::Expression(e) => {
                    let at = evaluate(expression(&e)?, regs, Some(cfa), read)?;
                    read(at)
                }
                RegisterRule::ValExpression(e) => evaluate(expression(&e)?, regs, Some(cfa), read),
                _ => None,
            };
        }
        caller.0[SP] = Some(cfa);
        Some((caller, cfa))
    }
}

impl FrameTables {
    /// The link-time range of the function whose CFI covers `svma` (its FDE), and
    /// whether it has a language-specific data area (C++ landing pads: code reached
    /// from no branch).
    pub(crate) fn function_at(&self, svma: u64) -> Option<(Range<u64>, bool)> {
        let data = self.file.data();
        let mut bases = BaseAddresses::default();
        if let Some(text) = self.text {
            bases = bases.set_text(text);
        }
        let fde = match &self.eh_frame {
            Some((eh_svma, range)) => {
                bases = bases.set_eh_frame(*eh_svma);
                let mut eh = EhFrame::new(&data[range.clone()], LittleEndian);
                eh.set_address_size(8);
                match &self.eh_frame_hdr {
                    Some((hdr_svma, hdr_range)) => {
                        bases = bases.set_eh_frame_hdr(*hdr_svma);
                        let hdr = EhFrameHdr::new(&data[hdr_range.clone()], LittleEndian);
                        let parsed = hdr.parse(&bases, 8).ok()?;
                        parsed
                            .table()?
                            .fde_for_address(&eh, &bases, svma, EhFrame::cie_from_offset)
                            .ok()?
                    }
                    None => eh
                        .fde_for_address(&bases, svma, EhFrame::cie_from_offset)
                        .ok()?,
                }
            }
            None => return None,
        };
        let start = fde.initial_address();
        let end = start.checked_add(fde.len())?;
        Some((start..end, fde.lsda().is_some()))
    }
}

type Expr<'a> = gimli::Expression<gimli::EndianSlice<'a, LittleEndian>>;

/// The section an unwind row came from, where its expressions are.
enum Origin<'s, 'a> {
    Eh(&'s EhFrame<gimli::EndianSlice<'a, LittleEndian>>),
    Debug(&'s gimli::DebugFrame<gimli::EndianSlice<'a, LittleEndian>>),
}

impl<'a> Origin<'_, 'a> {
    fn expression(&self, e: &UnwindExpression<usize>) -> Option<Expr<'a>> {
        match self {
            Origin::Eh(section) => e.get(*section).ok(),
            Origin::Debug(section) => e.get(*section).ok(),
        }
    }
}

/// The value a CFI expression computes from the frame's registers (with the CFA pushed
/// first for register rules).
fn evaluate(
    expression: Expr,
    regs: &Registers,
    cfa: Option<u64>,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Option<u64> {
    use gimli::EvaluationResult as R;
    let encoding = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size: 8,
    };
    let mut eval = expression.evaluation(encoding);
    eval.set_max_iterations(1000);
    if let Some(cfa) = cfa {
        eval.set_initial_value(cfa);
    }
    let mut state = eval.evaluate().ok()?;
    loop {
        state = match state {
            R::Complete => break,
            R::RequiresRegister { register, .. } => eval
                .resume_with_register(gimli::Value::Generic(regs.get(register.0)?))
                .ok()?,
            R::RequiresMemory { address, .. } => eval
                .resume_with_memory(gimli::Value::Generic(read(address)?))
                .ok()?,
            _ => return None,
        };
    }
    match eval.result().first()?.location {
        gimli::Location::Address { address } => Some(address),
        gimli::Location::Value { value } => value.to_u64(u64::MAX).ok(),
        _ => None,
    }
}

/// The caller's registers by frame pointers (code without CFI): the return address and
/// the saved frame pointer sit just above the frame pointer.
pub fn unwind_by_frame_pointer(
    regs: &Registers,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Option<(Registers, u64)> {
    let fp = regs.0[FP]?;
    let cfa = fp.checked_add(16)?;
    let mut caller = Registers::default();
    for r in CALLEE_SAVED {
        caller.0[r] = regs.0[r];
    }
    caller.0[FP] = Some(read(fp)?);
    caller.0[PC] = Some(read(fp + 8)?);
    caller.0[SP] = Some(cfa);
    Some((caller, cfa))
}

/// Whether every FDE that an `.eh_frame_hdr` search table points to lies in `.eh_frame`
/// (at `frames`). gimli finds an FDE's offset by subtracting the section's address from
/// the table's pointer, unchecked: a damaged table would wrap (or panic in a debug build).
/// Without a sound table, the FDEs are searched in `.eh_frame` itself (ours), or frame
/// pointers are followed (framehop).
pub fn search_table_is_sound(hdr: &[u8], hdr_svma: u64, frames: &Range<u64>) -> bool {
    use gimli::{BaseAddresses, EhFrameHdr, LittleEndian, Pointer};
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(hdr_svma)
        .set_eh_frame(frames.start);
    let Ok(parsed) = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8) else {
        return false;
    };
    let Pointer::Direct(start) = parsed.eh_frame_ptr() else {
        return false;
    };
    let Some(table) = parsed.table() else {
        return true;
    };
    let end = start.saturating_add(frames.end - frames.start);
    let mut entries = table.iter(&bases);
    loop {
        match entries.next() {
            Ok(Some((_, Pointer::Direct(fde)))) if (start..end).contains(&fde) => {}
            Ok(None) => return true,
            _ => return false,
        }
    }
}
