//! # mqd-x86: what a caller computed before it called
//!
//! x86-64 code before a call: the call instruction a return address follows, and where
//! a register's value at that call came from, by decoding the caller's function from
//! its start (linear decoding is exact for compiled code) and reading its last basic
//! block backwards.
//!
//! The value is computed as the instructions compute it, from what the caller's frame
//! still holds (callee-saved registers CFI recovered, the stack pointer, frame slots and
//! globals as they are now): moves, loads and addresses, extensions, arithmetic and
//! logic (`(rank + 1) % size` through `cltd; idiv`, `rank ^ 1`, shifts, an array
//! indexed by a loop counter, a structure's field). An instruction whose result depends
//! on flags (`cmov`, `set`), a call in between that may clobber the register, or a block
//! entered from elsewhere makes the value unknown, with the reason.

#![deny(missing_docs)]

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, OpAccess,
    OpKind, Register,
};

/// Where a value came from, as the instructions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An immediate operand.
    Constant,
    /// A callee-saved register (DWARF number) the caller still holds.
    Register(u16),
    /// A variable in memory (global or in a frame) at this address, as it is now.
    Variable(u64),
    /// An address computed by `lea` (or a RIP-relative one).
    Address,
    /// A constant added to (or subtracted from) a value found as above (`rank - 2`).
    Offset,
    /// Computed by the caller's instructions from values found as above (`(rank + 1) %
    /// size`).
    Computed,
    /// The argument register (DWARF number) as the function was entered with it,
    /// unchanged since: what the caller's own caller passed ([`AtCall::entry`]).
    Entry(u16),
}

/// The call instruction that ends at a return address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallTarget {
    /// `call rel32`: the address called.
    Direct(u64),
    /// `call [rip+disp]`: the address of the pointer called through (a GOT slot).
    Slot(u64),
    /// Through a register or other memory: a function pointer.
    Indirect,
}

/// Where a tail jump out of a function leads, for [`Caller::tail_jump`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leads {
    /// Into the function sought.
    There,
    /// Certainly not there (another MPI function).
    Elsewhere,
    /// Maybe there, through other code.
    Anywhere,
}

/// The decoded function of a call, up to and including the call.
#[derive(Clone)]
pub struct Caller {
    code: std::rc::Rc<Vec<Instruction>>,
    /// The direct branches to each address, by their indices.
    branches: std::rc::Rc<std::collections::HashMap<u64, Vec<usize>>>,
    /// Calls known never to return, by index: nothing falls through after them.
    ends: std::rc::Rc<std::collections::HashSet<usize>>,
    /// Index of the call (or tail jump) instruction in `code`.
    call: usize,
    /// The instructions that ran just before it, nearest first: back through each
    /// block's only predecessor, and through a place where control flow merges when the
    /// branch that decides it could be computed.
    path: Vec<usize>,
}

/// Most places where control flow merges that a value is followed through.
const MAX_MERGES: u32 = 8;

/// What the caller's frame still holds at the call: callee-saved registers (`None`
/// where unknown) and the stack pointer at the call; and memory.
pub struct AtCall<'a> {
    /// A register by DWARF number (7, rsp: its value at the call).
    pub register: &'a dyn Fn(u16) -> Option<u64>,
    /// `size` bytes (1 to 8) at an address, little-endian.
    pub read: &'a dyn Fn(u64, usize) -> Option<u64>,
    /// An argument register (DWARF number) as the function was entered: what its
    /// caller passed, where the debugger can tell (from that caller's call site).
    pub entry: &'a dyn Fn(u16) -> Option<u64>,
}

/// The integer argument registers (x86-64 System V) in order, by DWARF number.
pub const ARGUMENT_REGISTERS: [u16; 6] = [5, 4, 1, 2, 8, 9];

/// Registers a call may change (x86-64 System V), by DWARF number.
const CALLER_SAVED: [u16; 9] = [0, 1, 2, 4, 5, 8, 9, 10, 11];
const RSP: u16 = 7;

/// Most instructions of one function decoded.
const MAX_INSTRUCTIONS: usize = 200_000;
/// Most instructions followed back from a call.
const MAX_PATH: usize = 4096;

/// The DWARF number of a general-purpose register (any width).
fn dwarf_number(r: Register) -> Option<u16> {
    Some(match r.full_register() {
        Register::RAX => 0,
        Register::RDX => 1,
        Register::RCX => 2,
        Register::RBX => 3,
        Register::RSI => 4,
        Register::RDI => 5,
        Register::RBP => 6,
        Register::RSP => 7,
        Register::R8 => 8,
        Register::R9 => 9,
        Register::R10 => 10,
        Register::R11 => 11,
        Register::R12 => 12,
        Register::R13 => 13,
        Register::R14 => 14,
        Register::R15 => 15,
        _ => return None,
    })
}

/// Decodes the instruction that ends at `return_address` from the bytes just before it
/// (`bytes` end there, loaded at `return_address - bytes.len()`): a call of 5 bytes
/// (rel32) or 6 (through RIP-relative memory).
pub fn call_before(bytes: &[u8], return_address: u64) -> Option<CallTarget> {
    for len in [5usize, 6, 7, 2, 3] {
        let start = bytes.len().checked_sub(len)?;
        let ip = return_address.checked_sub(len as u64)?;
        let mut decoder = Decoder::with_ip(64, &bytes[start..], ip, DecoderOptions::NONE);
        let i = decoder.decode();
        if i.is_invalid() || i.len() != len || !i.is_call_near() && !i.is_call_near_indirect() {
            continue;
        }
        return Some(target_of(&i));
    }
    None
}

fn target_of(i: &Instruction) -> CallTarget {
    if i.op0_kind() == OpKind::NearBranch64 {
        CallTarget::Direct(i.near_branch64())
    } else if i.op0_kind() == OpKind::Memory && i.is_ip_rel_memory_operand() {
        CallTarget::Slot(i.ip_rel_memory_address())
    } else {
        CallTarget::Indirect
    }
}

/// The GOT slot a PLT entry at `ip` jumps through (`jmp [rip+disp]`, after an
/// `endbr64`, with or without a `bnd` prefix).
pub fn plt_slot(bytes: &[u8], ip: u64) -> Option<u64> {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    for _ in 0..2 {
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        if i.code() == Code::Endbr64 {
            continue;
        }
        return (i.is_jmp_near_indirect()
            && i.op0_kind() == OpKind::Memory
            && i.is_ip_rel_memory_operand())
        .then(|| i.ip_rel_memory_address());
    }
    None
}

/// A function decoded whole: its instructions and the targets of its direct branches.
struct Decoded {
    code: Vec<Instruction>,
    /// The direct branches to each address, by their indices.
    branches: std::collections::HashMap<u64, Vec<usize>>,
}

impl Decoded {
    /// Decodes `function` (its bytes, loaded at `start`); instructions up to `needed`
    /// must decode. `landing_pads` says the function has code reached from no branch
    /// (C++ exception landing pads), and a jump through a table reaches places no
    /// branch names: then no block is known.
    fn new(
        function: &[u8],
        start: u64,
        needed: u64,
        landing_pads: bool,
    ) -> Result<Decoded, &'static str> {
        let mut decoder = Decoder::with_ip(64, function, start, DecoderOptions::NONE);
        let mut code = Vec::new();
        let mut branches: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        let mut table_jump = false;
        while decoder.can_decode() {
            if code.len() >= MAX_INSTRUCTIONS {
                return Err("the caller's function is too large to decode");
            }
            let i = decoder.decode();
            if i.is_invalid() {
                // Padding or data after the code that matters is harmless; before, fatal.
                if i.ip() < needed {
                    return Err("the caller's code does not decode");
                }
                break;
            }
            match i.flow_control() {
                FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
                    if i.op0_kind() == OpKind::NearBranch64 =>
                {
                    branches
                        .entry(i.near_branch64())
                        .or_default()
                        .push(code.len());
                }
                // Through the GOT: a tail call (`-fno-plt`), not a table.
                FlowControl::IndirectBranch if i.is_ip_rel_memory_operand() => {}
                FlowControl::IndirectBranch => table_jump = true,
                _ => {}
            }
            code.push(i);
        }
        if table_jump {
            return Err("the caller jumps through a table: its blocks are not known");
        }
        if landing_pads {
            return Err("the caller has exception landing pads: its blocks are not known");
        }
        Ok(Decoded { code, branches })
    }

    /// The site at instruction `at`, with the instructions that certainly ran before it;
    /// a call `noreturn` says never returns does not fall through to what follows it.
    fn site(self, at: usize, noreturn: &dyn Fn(CallTarget) -> bool) -> Caller {
        // Only a call just before a place branches lead to can cut a way in.
        let ends = (1..self.code.len())
            .filter(|&k| self.branches.contains_key(&self.code[k].ip()))
            .map(|k| k - 1)
            .filter(|&c| {
                matches!(self.code[c].flow_control(), FlowControl::Call)
                    && noreturn(target_of(&self.code[c]))
            })
            .collect();
        let mut caller = Caller {
            code: std::rc::Rc::new(self.code),
            branches: std::rc::Rc::new(self.branches),
            ends: std::rc::Rc::new(ends),
            call: at,
            path: Vec::new(),
        };
        caller.extend_path(at);
        caller
    }
}

/// Whether the function `code` (loaded at `start`) never returns: no `ret`, no jump out
/// of it (a tail call), none through a register or memory (`exit` in a loop, `abort`).
pub fn never_returns(code: &[u8], start: u64) -> bool {
    let end = start + code.len() as u64;
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut decoded = 0;
    while decoder.can_decode() {
        let i = decoder.decode();
        decoded += 1;
        if i.is_invalid() || decoded > MAX_INSTRUCTIONS {
            return false;
        }
        match i.flow_control() {
            FlowControl::Return | FlowControl::IndirectBranch => return false,
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
                if i.op0_kind() != OpKind::NearBranch64
                    || !(start..end).contains(&i.near_branch64()) =>
            {
                return false;
            }
            _ => {}
        }
    }
    decoded > 0
}

/// Whether the instruction after `i` may run right after it.
fn falls_through(i: &Instruction) -> bool {
    matches!(
        i.flow_control(),
        FlowControl::Next
            | FlowControl::Call
            | FlowControl::IndirectCall
            | FlowControl::ConditionalBranch
    )
}

impl Caller {
    /// The instructions control may come to instruction `k` from.
    fn predecessors(&self, k: usize) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .branches
            .get(&self.code[k].ip())
            .cloned()
            .unwrap_or_default();
        if k > 0 && falls_through(&self.code[k - 1]) && !self.ends.contains(&(k - 1)) {
            out.push(k - 1);
        }
        out
    }

    /// Whether the path runs back to the function's first instruction, and nothing
    /// else leads there: the function ran straight from its entry to the call.
    fn reaches_entry(&self) -> bool {
        let first = self.path.last().copied().unwrap_or(self.call);
        first == 0 && self.predecessors(0).is_empty()
    }

    /// Extends the path back from instruction `k` through each only predecessor.
    fn extend_path(&mut self, mut k: usize) {
        let mut seen: std::collections::HashSet<usize> = self.path.iter().copied().collect();
        while self.path.len() < MAX_PATH {
            let [only] = self.predecessors(k)[..] else {
                return;
            };
            if !seen.insert(only) {
                return;
            }
            self.path.push(only);
            k = only;
        }
    }

    /// The path through the place where it ends, when control merges there from a
    /// conditional branch and the instructions it skips (an `if` without `else`, a `?:`)
    /// and that branch's condition, computed on each way in, says which one was taken.
    fn through_merge(&self, frame: &AtCall, depth: u32) -> Option<Caller> {
        let k = *self.path.last().unwrap_or(&self.call);
        let preds = self.predecessors(k);
        let [a, b] = preds[..] else {
            return None;
        };
        let (jump, fall) = if a + 1 == k { (b, a) } else { (a, b) };
        if fall + 1 != k
            || jump >= fall
            || self.code[jump].flow_control() != FlowControl::ConditionalBranch
        {
            return None;
        }
        // The skipped instructions: a straight run from the branch to the merge.
        let mut skipped = Vec::new();
        let mut c = fall;
        while c > jump {
            if self.predecessors(c)[..] != [c - 1] || skipped.len() >= 64 {
                return None;
            }
            skipped.push(c);
            c -= 1;
        }
        let mut consistent = Vec::new();
        for taken in [true, false] {
            let mut way = self.clone();
            if !taken {
                way.path.extend(&skipped);
            }
            way.path.push(jump);
            way.extend_path(jump);
            let at = way.path.len() - way.path.iter().rev().position(|&x| x == jump)? - 1;
            if way.condition(at, frame, depth + 1) == Ok(taken) {
                consistent.push(way);
            }
        }
        match consistent.len() {
            1 => consistent.pop(),
            _ => None,
        }
    }

    /// Whether the condition of the instruction at `path[q]` (a conditional branch,
    /// `cmov`, `set`) holds: the flags the instruction before it sets (`cmp`, `test`),
    /// computed.
    fn condition(&self, q: usize, frame: &AtCall, depth: u32) -> Result<bool, String> {
        use iced_x86::ConditionCode as C;
        let i = &self.code[self.path[q]];
        // The nearest instruction before it that writes the flags.
        let Some(setter_at) =
            (q + 1..self.path.len()).find(|&r| self.code[self.path[r]].rflags_modified() != 0)
        else {
            return Err(format!(
                "the flags {:#x} tests are set before a merge",
                i.ip()
            ));
        };
        let setter = &self.code[self.path[setter_at]];
        let mnemonic = setter.mnemonic();
        if !matches!(mnemonic, iced_x86::Mnemonic::Cmp | iced_x86::Mnemonic::Test) {
            return Err(format!(
                "the flags {:#x} tests are set by {:?}",
                i.ip(),
                mnemonic
            ));
        }
        let width = match setter.op0_kind() {
            OpKind::Register => setter.op0_register().size(),
            _ => setter.memory_size().size(),
        } as u32
            * 8;
        let mask = if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        let (a, _) = self.operand(setter_at, setter, 0, frame, depth)?;
        let (b, _) = self.operand(setter_at, setter, 1, frame, depth)?;
        let (a, b) = (a & mask, b & mask);
        let sign = 1u64 << (width - 1);
        let (result, carry, overflow) = if mnemonic == iced_x86::Mnemonic::Cmp {
            let r = a.wrapping_sub(b) & mask;
            (r, a < b, ((a ^ b) & (a ^ r) & sign) != 0)
        } else {
            (a & b, false, false)
        };
        let zero = result == 0;
        let negative = result & sign != 0;
        Ok(match i.condition_code() {
            C::e => zero,
            C::ne => !zero,
            C::b => carry,
            C::ae => !carry,
            C::be => carry || zero,
            C::a => !carry && !zero,
            C::s => negative,
            C::ns => !negative,
            C::o => overflow,
            C::no => !overflow,
            C::l => negative != overflow,
            C::ge => negative == overflow,
            C::le => zero || negative != overflow,
            C::g => !zero && negative == overflow,
            _ => return Err(format!("{:#x} tests the parity flag", i.ip())),
        })
    }

    /// Decodes `function` (its bytes, loaded at `start`) and finds the call that returns
    /// to `return_address`; `landing_pads` as for [`Caller::tail_jump`].
    pub fn decode(
        function: &[u8],
        start: u64,
        return_address: u64,
        landing_pads: bool,
    ) -> Result<Caller, &'static str> {
        Caller::decode_knowing(function, start, return_address, landing_pads, &|_| false)
    }

    /// [`Caller::decode`], knowing which calls never return (`noreturn`): the code after
    /// one is reached only by a branch.
    pub fn decode_knowing(
        function: &[u8],
        start: u64,
        return_address: u64,
        landing_pads: bool,
        noreturn: &dyn Fn(CallTarget) -> bool,
    ) -> Result<Caller, &'static str> {
        let decoded = Decoded::new(function, start, return_address, landing_pads)?;
        let call = decoded
            .code
            .iter()
            .position(|i| i.next_ip() == return_address)
            .filter(|&c| decoded.code[c].is_call_near() || decoded.code[c].is_call_near_indirect())
            .ok_or("no call instruction ends at the return address")?;
        Ok(decoded.site(call, noreturn))
    }

    /// Decodes `function` (its bytes, loaded at `start`) that a call entered and that
    /// left by a tail jump into another function: the one jump out of it that `leads`
    /// says leads there. Every other jump out must lead elsewhere for sure (a function
    /// that cannot reach it); one that may lead anywhere (through a register, to a
    /// function that may jump on) leaves the way in unknown. `landing_pads`: the function
    /// has C++ exception landing pads (code no branch names).
    pub fn tail_jump(
        function: &[u8],
        start: u64,
        landing_pads: bool,
        leads: &dyn Fn(CallTarget) -> Leads,
    ) -> Result<Caller, String> {
        let end = start + function.len() as u64;
        let decoded = Decoded::new(function, start, end, landing_pads)?;
        let mut there = Vec::new();
        for (k, i) in decoded.code.iter().enumerate() {
            let leaves = match i.flow_control() {
                FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
                    i.op0_kind() != OpKind::NearBranch64
                        || !(start..end).contains(&i.near_branch64())
                }
                FlowControl::IndirectBranch => true,
                _ => false,
            };
            if !leaves {
                continue;
            }
            match leads(target_of(i)) {
                Leads::There => there.push(k),
                Leads::Elsewhere => {}
                Leads::Anywhere => {
                    return Err(format!(
                        "the function the caller called also jumps at {:#x} to where the MPI call may be made",
                        i.ip()
                    ));
                }
            }
        }
        match there[..] {
            [k] => Ok(decoded.site(k, &|_| false)),
            [] => Err(
                "the function the caller called makes no tail call into the MPI function".into(),
            ),
            _ => Err(format!(
                "the function the caller called jumps into the MPI function from {} places: which one was taken is not known",
                there.len()
            )),
        }
    }

    /// What the call (or tail jump) instruction calls.
    pub fn target(&self) -> CallTarget {
        target_of(&self.code[self.call])
    }

    /// What it calls through a register or computed memory (a function pointer, a
    /// table of them), as the caller's registers and memory now give it.
    pub fn indirect_target(&self, frame: &AtCall) -> Result<u64, String> {
        let i = &self.code[self.call];
        match i.op0_kind() {
            OpKind::Memory => {
                let slot = self.address_of(i, 0, frame, 0)?;
                (frame.read)(slot, 8)
                    .ok_or_else(|| format!("the pointer at {slot:#x} is not readable"))
            }
            OpKind::Register => {
                let n = dwarf_number(i.op0_register())
                    .ok_or("the call goes through an unusual register")?;
                self.value(n, 0, frame, 0).map(|(v, _)| v)
            }
            _ => Err("the call's target is not a pointer".into()),
        }
    }

    /// The value of register `number` (DWARF) at the call, and where it came from.
    pub fn register_at_call(&self, number: u16, frame: &AtCall) -> Result<(u64, Origin), String> {
        self.value(number, 0, frame, 0)
    }

    /// Whether instruction `k` writes register `number`.
    fn writes(&self, k: usize, number: u16) -> bool {
        let mut info = InstructionInfoFactory::new();
        info.info(&self.code[k]).used_registers().iter().any(|u| {
            dwarf_number(u.register()) == Some(number)
                && !matches!(
                    u.access(),
                    OpAccess::Read | OpAccess::CondRead | OpAccess::None
                )
        })
    }

    /// The value register `number` holds before the instructions `path[..p]` run (the
    /// ones between that point and the call).
    fn value(
        &self,
        number: u16,
        p: usize,
        frame: &AtCall,
        depth: u32,
    ) -> Result<(u64, Origin), String> {
        if depth > 16 {
            return Err("the value passes through too many registers".into());
        }
        if number == RSP {
            return self.stack_pointer(p, frame).map(|v| (v, Origin::Address));
        }
        // A register the callee keeps, unchanged from here to the call, is the one the
        // caller's frame holds now, however it was computed.
        let kept = !CALLER_SAVED.contains(&number);
        if kept
            && !self.path[..p.min(self.path.len())]
                .iter()
                .any(|&k| self.writes(k, number))
            && let Some(value) = (frame.register)(number)
        {
            return Ok((value, Origin::Register(number)));
        }
        for (q, &k) in self.path.iter().enumerate().skip(p) {
            let i = &self.code[k];
            if matches!(
                i.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall
            ) && !kept
            {
                return Err(format!(
                    "{} was set before a call at {:#x} that may change it",
                    name(number),
                    i.ip()
                ));
            }
            if self.writes(k, number) {
                return self.defined_by(q, number, frame, depth);
            }
        }
        if depth < MAX_MERGES * 4
            && let Some(longer) = self.through_merge(frame, depth)
        {
            return longer.value(number, p, frame, depth + 1);
        }
        // Back to the function's entry, which no branch leads to: an argument register
        // still holds what the function was called with.
        if ARGUMENT_REGISTERS.contains(&number)
            && self.reaches_entry()
            && let Some(value) = (frame.entry)(number)
        {
            return Ok((value, Origin::Entry(number)));
        }
        Err(if kept {
            format!("the caller's {} is not recovered", name(number))
        } else {
            format!(
                "{} is set before a place where the caller's control flow merges",
                name(number)
            )
        })
    }

    /// The value instruction `path[q]`, which writes register `number`, gives it.
    fn defined_by(
        &self,
        q: usize,
        number: u16,
        frame: &AtCall,
        depth: u32,
    ) -> Result<(u64, Origin), String> {
        use iced_x86::Mnemonic as M;
        let i = &self.code[self.path[q]];
        let unknown = || {
            format!(
                "{} is computed at {:#x} ({:?}), which depends on what cannot be known here",
                name(number),
                i.ip(),
                i.mnemonic()
            )
        };
        // Registers an instruction reads have their values from before it.
        let before = q + 1;
        // `cltd; idiv` and friends write rax and rdx whatever their operands.
        match i.mnemonic() {
            M::Cdq | M::Cqo if number == 1 => {
                let (v, _) = self.value(0, before, frame, depth + 1)?;
                let negative = if i.mnemonic() == M::Cdq {
                    (v as u32 as i32) < 0
                } else {
                    (v as i64) < 0
                };
                let all = if i.mnemonic() == M::Cdq {
                    0xffff_ffff
                } else {
                    u64::MAX
                };
                return Ok((if negative { all } else { 0 }, Origin::Computed));
            }
            M::Cdqe | M::Cwde if number == 0 => {
                let (v, origin) = self.value(0, before, frame, depth + 1)?;
                let v = if i.mnemonic() == M::Cdqe {
                    v as u32 as i32 as i64 as u64
                } else {
                    u64::from(v as u16 as i16 as i32 as u32)
                };
                return Ok((v, origin));
            }
            M::Idiv | M::Div if number == 0 || number == 1 => {
                return self
                    .division(q, number, frame, depth)
                    .map(|v| (v, Origin::Computed));
            }
            _ => {}
        }
        if i.op0_kind() != OpKind::Register || dwarf_number(i.op0_register()) != Some(number) {
            return Err(unknown());
        }
        let size = i.op0_register().size();
        let bits = (size * 8) as u32;
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        // A write of 8 or 16 bits keeps the rest of the register; of 32 clears its top.
        let merge = |new: u64| -> Result<u64, String> {
            match size {
                4 | 8 => Ok(new & mask),
                _ => {
                    let (old, _) = self.value(number, before, frame, depth + 1)?;
                    Ok((old & !mask) | (new & mask))
                }
            }
        };
        let operand = |k: u32| self.operand(q, i, k, frame, depth);
        let sign = |v: u64, from: u32| -> u64 {
            if from >= 64 {
                v
            } else {
                let shift = 64 - from;
                (((v << shift) as i64) >> shift) as u64
            }
        };
        if i.condition_code() != iced_x86::ConditionCode::None
            && matches!(i.flow_control(), FlowControl::Next)
        {
            // `cmov`: the source when the condition holds, else the register as it was;
            // `set`: 1 or 0 in a byte.
            let holds = self.condition(q, frame, depth + 1)?;
            let v = if format!("{:?}", i.mnemonic()).starts_with("Set") {
                u64::from(holds)
            } else if holds {
                operand(1)?.0
            } else {
                self.value(number, before, frame, depth + 1)?.0
            };
            return Ok((merge(v)?, Origin::Computed));
        }
        match i.mnemonic() {
            // `xor ecx, ecx`, `sub ecx, ecx`: zero, whatever it held.
            M::Xor | M::Sub
                if i.op1_kind() == OpKind::Register && i.op0_register() == i.op1_register() =>
            {
                Ok((0, Origin::Constant))
            }
            M::Mov => {
                let (v, origin) = operand(1)?;
                Ok((merge(v)?, origin))
            }
            M::Movzx => {
                let (v, origin) = operand(1)?;
                Ok((merge(v)?, origin))
            }
            M::Movsx | M::Movsxd => {
                let from = (i.memory_size().size().max(match i.op1_kind() {
                    OpKind::Register => i.op1_register().size(),
                    _ => 0,
                }) * 8) as u32;
                let (v, origin) = operand(1)?;
                Ok((merge(sign(v, from))?, origin))
            }
            M::Lea => {
                let address = self.address_of(i, before, frame, depth)?;
                Ok((merge(address)?, Origin::Address))
            }
            M::Add | M::Sub | M::And | M::Or | M::Xor | M::Shl | M::Sal | M::Shr | M::Sar => {
                let (a, _) = self.value(number, before, frame, depth + 1)?;
                let (b, origin_b) = operand(1)?;
                let a = a & mask;
                let shift = (b as u32) & if bits == 64 { 63 } else { 31 };
                let v = match i.mnemonic() {
                    M::Add => a.wrapping_add(b),
                    M::Sub => a.wrapping_sub(b),
                    M::And => a & b,
                    M::Or => a | b,
                    M::Xor => a ^ b,
                    M::Shl | M::Sal => a.wrapping_shl(shift),
                    M::Shr => a.wrapping_shr(shift),
                    _ => (sign(a, bits) as i64).wrapping_shr(shift) as u64,
                };
                // `rank - 2`: a constant added to a value, as before.
                let origin = match (i.mnemonic(), origin_b) {
                    (M::Add | M::Sub, Origin::Constant) => Origin::Offset,
                    _ => Origin::Computed,
                };
                Ok((merge(v)?, origin))
            }
            M::Imul if i.op_count() >= 2 => {
                let (a, b) = if i.op_count() == 3 {
                    (operand(1)?.0, operand(2)?.0)
                } else {
                    (
                        self.value(number, before, frame, depth + 1)?.0,
                        operand(1)?.0,
                    )
                };
                Ok((merge(a.wrapping_mul(b))?, Origin::Computed))
            }
            M::Neg | M::Not | M::Inc | M::Dec => {
                let (a, _) = self.value(number, before, frame, depth + 1)?;
                let v = match i.mnemonic() {
                    M::Neg => a.wrapping_neg(),
                    M::Not => !a,
                    M::Inc => a.wrapping_add(1),
                    _ => a.wrapping_sub(1),
                };
                Ok((merge(v)?, Origin::Computed))
            }
            _ => Err(unknown()),
        }
    }

    /// The value of operand `k` of `i` (`path[q]`): a register's, an immediate, or what
    /// a memory operand holds, as it was before `i` ran.
    fn operand(
        &self,
        q: usize,
        i: &Instruction,
        k: u32,
        frame: &AtCall,
        depth: u32,
    ) -> Result<(u64, Origin), String> {
        let before = q + 1;
        match i.op_kind(k) {
            OpKind::Register => {
                let r = i.op_register(k);
                let n = dwarf_number(r).ok_or_else(|| format!("{:#x} reads {r:?}", i.ip()))?;
                let (v, origin) = self.value(n, before, frame, depth + 1)?;
                let v = match r.size() {
                    1 if r.is_gpr8()
                        && matches!(
                            r,
                            Register::AH | Register::BH | Register::CH | Register::DH
                        ) =>
                    {
                        (v >> 8) & 0xff
                    }
                    8 => v,
                    size => v & ((1u64 << (size * 8)) - 1),
                };
                Ok((v, origin))
            }
            OpKind::Memory => {
                let address = self.address_of(i, before, frame, depth)?;
                let size = i.memory_size().size();
                if !(1..=8).contains(&size) {
                    return Err(format!("{:#x} reads {size} bytes at once", i.ip()));
                }
                let v = self.load(q, address, size, frame)?;
                Ok((v, Origin::Variable(address)))
            }
            OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64 => Ok((i.immediate(k), Origin::Constant)),
            _ => Err(format!("{:#x} has an operand mqd does not compute", i.ip())),
        }
    }

    /// What `div` or `idiv` at `path[q]` leaves in rax (`number` 0, the quotient) or rdx
    /// (1, the remainder): the dividend is rdx:rax before it.
    fn division(&self, q: usize, number: u16, frame: &AtCall, depth: u32) -> Result<u64, String> {
        let i = &self.code[self.path[q]];
        let before = q + 1;
        let width = match i.op0_kind() {
            OpKind::Register => i.op0_register().size(),
            _ => i.memory_size().size(),
        };
        let (divisor, _) = self.operand(q, i, 0, frame, depth)?;
        let (low, _) = self.value(0, before, frame, depth + 1)?;
        let (high, _) = self.value(1, before, frame, depth + 1)?;
        let signed = i.mnemonic() == iced_x86::Mnemonic::Idiv;
        let (quotient, remainder) = match width {
            4 => {
                let dividend = (u64::from(high as u32) << 32) | u64::from(low as u32);
                let divisor = divisor as u32;
                if divisor == 0 {
                    return Err(format!("{:#x} divides by zero", i.ip()));
                }
                if signed {
                    let (n, d) = (dividend as i64, i64::from(divisor as i32));
                    let quotient = n.checked_div(d).ok_or("the division overflows")?;
                    if i32::try_from(quotient).is_err() {
                        return Err(format!("{:#x}'s quotient overflows", i.ip()));
                    }
                    (quotient as u32 as u64, (n % d) as u32 as u64)
                } else {
                    let d = u64::from(divisor);
                    let quotient = dividend / d;
                    if quotient > u64::from(u32::MAX) {
                        return Err(format!("{:#x}'s quotient overflows", i.ip()));
                    }
                    (quotient, dividend % d)
                }
            }
            8 => {
                let dividend = (u128::from(high) << 64) | u128::from(low);
                if divisor == 0 {
                    return Err(format!("{:#x} divides by zero", i.ip()));
                }
                if signed {
                    let (n, d) = (dividend as i128, i128::from(divisor as i64));
                    let quotient = n.checked_div(d).ok_or("the division overflows")?;
                    if i64::try_from(quotient).is_err() {
                        return Err(format!("{:#x}'s quotient overflows", i.ip()));
                    }
                    (quotient as u64, (n % d) as u64)
                } else {
                    let d = u128::from(divisor);
                    let quotient = dividend / d;
                    if quotient > u128::from(u64::MAX) {
                        return Err(format!("{:#x}'s quotient overflows", i.ip()));
                    }
                    (quotient as u64, (dividend % d) as u64)
                }
            }
            _ => return Err(format!("{:#x} divides in {width} bytes", i.ip())),
        };
        Ok(if number == 0 { quotient } else { remainder })
    }

    /// The address of `i`'s memory operand, its registers' values those before the
    /// instructions `path[..p]`.
    fn address_of(
        &self,
        i: &Instruction,
        p: usize,
        frame: &AtCall,
        depth: u32,
    ) -> Result<u64, String> {
        if i.is_ip_rel_memory_operand() {
            return Ok(i.ip_rel_memory_address());
        }
        if i.segment_prefix() != Register::None && i.memory_segment() != Register::DS {
            return Err(format!("{:#x} reads thread-local memory", i.ip()));
        }
        let part = |r: Register| -> Result<u64, String> {
            if r == Register::None {
                return Ok(0);
            }
            let n =
                dwarf_number(r).ok_or_else(|| format!("{:#x} addresses through {r:?}", i.ip()))?;
            self.value(n, p, frame, depth + 1).map(|(v, _)| v)
        };
        let base = part(i.memory_base())?;
        let index = part(i.memory_index())?;
        Ok(base
            .wrapping_add(index.wrapping_mul(u64::from(i.memory_index_scale())))
            .wrapping_add(i.memory_displacement64()))
    }

    /// The `size` bytes at `address` that instruction `path[q]` loaded: memory as it is
    /// now, unless an instruction between it and the call stores there (or somewhere the
    /// decoder cannot place).
    fn load(&self, q: usize, address: u64, size: usize, frame: &AtCall) -> Result<u64, String> {
        let mut info = InstructionInfoFactory::new();
        for (r, &k) in self.path.iter().enumerate().take(q) {
            let i = &self.code[k];
            let stores = info.info(i).used_memory().iter().any(|m| {
                matches!(
                    m.access(),
                    OpAccess::Write
                        | OpAccess::CondWrite
                        | OpAccess::ReadWrite
                        | OpAccess::ReadCondWrite
                )
            });
            if !stores {
                continue;
            }
            let at = if matches!(
                i.code(),
                Code::Pushq_imm32 | Code::Pushq_imm8 | Code::Push_r64 | Code::Push_rm64
            ) {
                self.stack_pointer(r + 1, frame)
                    .ok()
                    .map(|sp| sp.wrapping_sub(8))
            } else if i.op0_kind() == OpKind::Memory {
                self.address_of(i, r + 1, frame, 8).ok()
            } else {
                None
            };
            let Some(at) = at else {
                return Err(format!(
                    "a store at {:#x}, between the load and the call, may change the variable",
                    i.ip()
                ));
            };
            let width = u64::from(i.memory_size().size().max(8) as u32);
            if at < address.wrapping_add(size as u64) && address < at.wrapping_add(width) {
                return Err(format!(
                    "the variable is written at {:#x} before the call",
                    i.ip()
                ));
            }
        }
        (frame.read)(address, size).ok_or_else(|| format!("memory at {address:#x} is not readable"))
    }

    /// The stack pointer before the instructions `path[..p]`: the call's, less what
    /// they push.
    fn stack_pointer(&self, p: usize, frame: &AtCall) -> Result<u64, String> {
        let mut sp = (frame.register)(RSP).ok_or("the caller's stack pointer is not recovered")?;
        let mut info = InstructionInfoFactory::new();
        for &k in self.path.iter().take(p) {
            let i = &self.code[k];
            let writes = info.info(i).used_registers().iter().any(|u| {
                u.register().full_register() == Register::RSP
                    && !matches!(
                        u.access(),
                        OpAccess::Read | OpAccess::CondRead | OpAccess::None
                    )
            });
            if !writes {
                continue;
            }
            sp = match i.code() {
                Code::Push_r64 | Code::Pushq_imm32 | Code::Pushq_imm8 | Code::Push_rm64 => {
                    sp.wrapping_add(8)
                }
                Code::Pop_r64 | Code::Pop_rm64 => sp.wrapping_sub(8),
                Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32 if i.op0_register() == Register::RSP => {
                    sp.wrapping_add(i.immediate(1))
                }
                Code::Add_rm64_imm8 | Code::Add_rm64_imm32 if i.op0_register() == Register::RSP => {
                    sp.wrapping_sub(i.immediate(1))
                }
                // A call pushes and its return pops: no change across it.
                _ if matches!(
                    i.flow_control(),
                    FlowControl::Call | FlowControl::IndirectCall
                ) =>
                {
                    sp
                }
                _ => return Err(format!("the stack pointer changes at {:#x}", i.ip())),
            };
        }
        Ok(sp)
    }
}

/// A register's name, for reasons.
pub fn name(number: u16) -> &'static str {
    const NAMES: [&str; 16] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];
    NAMES
        .get(usize::from(number))
        .copied()
        .unwrap_or("a register")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GCC -O0's setup of `MPI_Ssend(one, 1, MPI_INT, right, 1, MPI_COMM_WORLD)`.
    fn o0_ssend() -> Vec<u8> {
        vec![
            0x55, // push rbp
            0x48, 0x89, 0xe5, // mov rbp, rsp
            0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, // mov eax, [rip+0x10] (right)
            0x41, 0xb9, 0x00, 0x00, 0x00, 0x44, // mov r9d, 0x44000000
            0x41, 0xb8, 0x01, 0x00, 0x00, 0x00, // mov r8d, 1
            0x89, 0xc1, // mov ecx, eax
            0xba, 0x03, 0x04, 0x00, 0x4c, // mov edx, 0x4c000403
            0xbe, 0x01, 0x00, 0x00, 0x00, // mov esi, 1
            0x48, 0x8d, 0x3d, 0x20, 0x00, 0x00, 0x00, // lea rdi, [rip+0x20]
            0xe8, 0x00, 0x10, 0x00, 0x00, // call rel32
            0x90, // nop
            0x5d, // pop rbp
            0xc3, // ret
        ]
    }

    #[test]
    fn gcc_o0_arguments_are_followed_to_their_sources() {
        let code = o0_ssend();
        let start = 0x1000;
        let ret = start + 46;
        let caller = Caller::decode(&code, start, ret, false).unwrap();
        assert_eq!(caller.target(), CallTarget::Direct(ret + 0x1000));
        let regs = |n: u16| match n {
            7 => Some(0x7ff0),
            6 => Some(0x7ff8),
            _ => None,
        };
        let read = |a: u64, size: usize| (a == start + 10 + 0x10 && size == 4).then_some(3);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert_eq!(
            caller.register_at_call(9, &frame),
            Ok((0x4400_0000, Origin::Constant))
        );
        assert_eq!(
            caller.register_at_call(2, &frame),
            Ok((3, Origin::Variable(start + 0x1a)))
        );
        assert_eq!(
            caller.register_at_call(8, &frame),
            Ok((1, Origin::Constant))
        );
        assert_eq!(
            caller.register_at_call(5, &frame),
            Ok((start + 41 + 0x20, Origin::Address))
        );
        // r10 was not set in the block, and a callee may clobber it.
        assert!(caller.register_at_call(10, &frame).is_err());
    }

    fn nothing_recovered() -> (
        impl Fn(u16) -> Option<u64>,
        impl Fn(u64, usize) -> Option<u64>,
    ) {
        (|_: u16| None, |_: u64, _: usize| None)
    }

    #[test]
    fn an_argument_the_function_was_entered_with_is_what_its_caller_passed() {
        // gfortran -O2, a helper passing its dummy argument on by reference:
        // sub rsp, 0x38; mov rcx, rdi; lea rdx, [rip+0x20]; mov rdi, rsi; call
        let code = [
            0x48, 0x83, 0xec, 0x38, // sub rsp, 0x38
            0x48, 0x89, 0xf9, // mov rcx, rdi
            0x48, 0x8d, 0x15, 0x20, 0x00, 0x00, 0x00, // lea rdx, [rip+0x20]
            0x48, 0x89, 0xf7, // mov rdi, rsi
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let start = 0x400;
        let ret = start + 22;
        let caller = Caller::decode(&code, start, ret, false).unwrap();
        let (regs, read) = nothing_recovered();
        let entry = |n: u16| match n {
            5 => Some(0x7ffc_1000),
            4 => Some(0x7ffc_2000),
            _ => None,
        };
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &entry,
        };
        assert_eq!(
            caller.register_at_call(2, &frame),
            Ok((0x7ffc_1000, Origin::Entry(5)))
        );
        assert_eq!(
            caller.register_at_call(5, &frame),
            Ok((0x7ffc_2000, Origin::Entry(4)))
        );
        // r8 was never set, and the caller's caller's r8 is not known.
        assert!(caller.register_at_call(8, &frame).is_err());
        // A loop back to the entry: the value there is not the one the function got.
        let mut looping = code.to_vec();
        looping.truncate(22);
        looping.extend([0xeb, 0xe8]); // jmp start (back 24 bytes)
        let caller = Caller::decode(&looping, start, ret, false).unwrap();
        assert!(caller.register_at_call(2, &frame).is_err());
    }

    #[test]
    fn a_value_is_followed_through_a_blocks_only_predecessor_but_not_where_paths_merge() {
        // mov ecx, 5; jmp L; L: call — L's only way in is the jump.
        let code = [
            0xb9, 0x05, 0x00, 0x00, 0x00, // mov ecx, 5
            0xeb, 0x00, // jmp L (next)
            0xe8, 0x00, 0x00, 0x00, 0x00, // L: call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0x100, 0x10c, false).unwrap();
        let (regs, read) = nothing_recovered();
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert_eq!(
            caller.register_at_call(2, &frame),
            Ok((5, Origin::Constant))
        );
        // mov ecx, 5; je L; mov ecx, 6; L: call — two ways in, two values.
        let code = [
            0xb9, 0x05, 0x00, 0x00, 0x00, // mov ecx, 5
            0x74, 0x05, // je L
            0xb9, 0x06, 0x00, 0x00, 0x00, // mov ecx, 6
            0xe8, 0x00, 0x00, 0x00, 0x00, // L: call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0x100, 0x111, false).unwrap();
        let why = caller.register_at_call(2, &frame).unwrap_err();
        assert!(why.contains("merges"), "{why}");
    }

    #[test]
    fn a_constant_added_to_a_value_is_followed() {
        // mov ecx, [rip+0x10] (rank); sub ecx, 2; add edx, 1 (edx unknown); call
        let code = [
            0x8b, 0x0d, 0x10, 0x00, 0x00, 0x00, // mov ecx, [rip+0x10]
            0x83, 0xe9, 0x02, // sub ecx, 2
            0x83, 0xc2, 0x01, // add edx, 1
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0x100, 0x111, false).unwrap();
        let regs = |_: u16| None;
        let read = |a: u64, size: usize| (a == 0x116 && size == 4).then_some(3);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert_eq!(caller.register_at_call(2, &frame), Ok((1, Origin::Offset)));
        // 1 - 2 in 32 bits.
        let read = |a: u64, size: usize| (a == 0x116 && size == 4).then_some(1);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert_eq!(
            caller.register_at_call(2, &frame),
            Ok((0xffff_ffff, Origin::Offset))
        );
        assert!(caller.register_at_call(1, &frame).is_err());
    }

    #[test]
    fn neighbours_by_modulo_and_xor_are_computed_as_the_caller_computes_them() {
        // GCC -O2 of MPI_Ssend(.., (r + 1) % n, ..), r and n in frame slots:
        // mov eax,[rsp+0xc]; add eax,1; cltd; idivl [rsp+0x8]; mov ecx,edx;
        // mov esi,eax (the quotient); mov r8d,[rsp+0xc]; xor r8d,1; call
        let code = [
            0x8b, 0x44, 0x24, 0x0c, // mov eax, [rsp+0xc]
            0x83, 0xc0, 0x01, // add eax, 1
            0x99, // cltd
            0xf7, 0x7c, 0x24, 0x08, // idiv dword [rsp+0x8]
            0x89, 0xd1, // mov ecx, edx
            0x89, 0xc6, // mov esi, eax
            0x44, 0x8b, 0x44, 0x24, 0x0c, // mov r8d, [rsp+0xc]
            0x41, 0x83, 0xf0, 0x01, // xor r8d, 1
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let ret = 0x100 + code.len() as u64 - 1;
        let caller = Caller::decode(&code, 0x100, ret, false).unwrap();
        for (rank, size, right, quotient) in [(3u64, 4u64, 0u64, 1u64), (1, 4, 2, 0), (6, 7, 0, 1)]
        {
            let regs = |n: u16| (n == 7).then_some(0x7000);
            let read = |a: u64, bytes: usize| match (a, bytes) {
                (0x700c, 4) => Some(rank),
                (0x7008, 4) => Some(size),
                _ => None,
            };
            let frame = AtCall {
                register: &regs,
                read: &read,
                entry: &|_| None,
            };
            assert_eq!(
                caller.register_at_call(2, &frame),
                Ok((right, Origin::Computed)),
                "({rank} + 1) % {size}"
            );
            assert_eq!(
                caller.register_at_call(4, &frame).map(|v| v.0),
                Ok(quotient)
            );
            assert_eq!(
                caller.register_at_call(8, &frame).map(|v| v.0),
                Ok(rank ^ 1)
            );
        }
        // A divisor of zero is no value.
        let regs = |n: u16| (n == 7).then_some(0x7000);
        let read = |a: u64, _: usize| (a == 0x700c).then_some(3);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert!(caller.register_at_call(2, &frame).is_err());
    }

    #[test]
    fn code_after_a_call_that_never_returns_is_reached_only_by_its_branch() {
        // mov ecx,[rip+0x20]; test cl,1; jne L; call noreturn; L: lea eax,[rcx+2]; mov ecx,eax; call
        let code = [
            0x8b, 0x0d, 0x20, 0x00, 0x00, 0x00, // mov ecx, [rip+0x20]
            0xf6, 0xc1, 0x01, // test cl, 1
            0x75, 0x05, // jne L
            0xe8, 0x00, 0x01, 0x00, 0x00, // call noreturn (0x210)
            0x8d, 0x41, 0x02, // L: lea eax, [rcx+2]
            0x89, 0xc1, // mov ecx, eax
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let ret = 0x100 + 26;
        let regs = |_: u16| None;
        let at = |v: u64| move |a: u64, size: usize| (a == 0x126 && size == 4).then_some(v);
        // Odd: the branch was taken, whatever the call does.
        let read = at(5);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        let caller = Caller::decode(&code, 0x100, ret, false).unwrap();
        assert_eq!(caller.register_at_call(2, &frame).map(|v| v.0), Ok(7));
        // Even: the way in is through the call, which clobbers rcx; unless it never
        // returns, and then the branch is the only way in.
        let read = at(4);
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert!(caller.register_at_call(2, &frame).is_err());
        let caller = Caller::decode_knowing(&code, 0x100, ret, false, &|t| {
            t == CallTarget::Direct(0x210)
        })
        .unwrap();
        assert_eq!(caller.register_at_call(2, &frame).map(|v| v.0), Ok(6));
        // exit() in a loop: never returns; a function with `ret` does.
        let forever = [0xe8, 0x00, 0x00, 0x00, 0x00, 0xeb, 0xf9]; // call; jmp back
        assert!(never_returns(&forever, 0x400));
        assert!(!never_returns(&[0x90, 0xc3], 0x400));
        assert!(!never_returns(&[0xe9, 0x00, 0x10, 0x00, 0x00], 0x400)); // tail jump out
    }

    #[test]
    fn conditions_are_computed_from_the_flags_compare_and_test_set() {
        // cmp ebx, 3; mov eax, 9; cmove ecx, eax; sete dl; call — rbx is kept.
        let code = [
            0x83, 0xfb, 0x03, // cmp ebx, 3
            0xb8, 0x09, 0x00, 0x00, 0x00, // mov eax, 9 (no flags)
            0x0f, 0x44, 0xc8, // cmove ecx, eax
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0, 16, false).unwrap();
        let read = |_: u64, _: usize| None;
        for (rbx, rcx) in [(3u64, Ok(9u64)), (4, Err(()))] {
            let regs = move |n: u16| (n == 3).then_some(rbx);
            let frame = AtCall {
                register: &regs,
                read: &read,
                entry: &|_| None,
            };
            // Not equal: rcx keeps what it had, which nothing here says.
            assert_eq!(
                caller
                    .register_at_call(2, &frame)
                    .map(|v| v.0)
                    .map_err(|_| ()),
                rcx,
                "rbx {rbx}"
            );
        }
        // The flags set by something else than cmp or test: unknown, and said.
        let code = [
            0x01, 0xd8, // add eax, ebx
            0x0f, 0x44, 0xc8, // cmove ecx, eax
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0, 10, false).unwrap();
        let (regs, read) = nothing_recovered();
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        let why = caller.register_at_call(2, &frame).unwrap_err();
        assert!(why.contains("set by Add"), "{why}");
    }

    #[test]
    fn a_kept_register_is_what_the_caller_holds_however_it_was_computed() {
        // imul ebx, ecx, 16; call — rbx survives the call: the unwound frame has it.
        let code = [
            0x6b, 0xd9, 0x10, // imul ebx, ecx, 16
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xc3,
        ];
        let caller = Caller::decode(&code, 0, 8, false).unwrap();
        let regs = |n: u16| (n == 3).then_some(48);
        let read = |_: u64, _: usize| None;
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert_eq!(
            caller.register_at_call(3, &frame),
            Ok((48, Origin::Register(3)))
        );
    }

    #[test]
    fn a_call_in_between_clobbers_argument_registers_but_not_callee_saved_ones() {
        let code = [
            0xbf, 0x07, 0x00, 0x00, 0x00, // mov edi, 7
            0xbb, 0x09, 0x00, 0x00, 0x00, // mov ebx, 9
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xe8, 0x00, 0x00, 0x00, 0x00, // call (ours)
            0xc3,
        ];
        let caller = Caller::decode(&code, 0, 20, false).unwrap();
        let (regs, read) = nothing_recovered();
        let frame = AtCall {
            register: &regs,
            read: &read,
            entry: &|_| None,
        };
        assert!(
            caller
                .register_at_call(5, &frame)
                .unwrap_err()
                .contains("before a call")
        );
        assert_eq!(
            caller.register_at_call(3, &frame),
            Ok((9, Origin::Constant))
        );
    }

    #[test]
    fn the_plt_slot_is_found_behind_endbr64_and_bnd() {
        // endbr64; bnd jmp [rip+0x2fe2]
        let plt = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xe2, 0x2f, 0x00, 0x00,
        ];
        assert_eq!(plt_slot(&plt, 0x1030), Some(0x1030 + 11 + 0x2fe2));
        // call [rip+0x100] (-fno-plt)
        let call = [0xff, 0x15, 0x00, 0x01, 0x00, 0x00];
        assert_eq!(call_before(&call, 0x206), Some(CallTarget::Slot(0x306)));
    }
}
