//! A call seen from the caller's side: which function the call instruction before a
//! return address calls (through its PLT slot's relocation where it goes through one),
//! and the integer arguments the caller passed (x86-64 System V: rdi, rsi, rdx, rcx,
//! r8, r9, then the stack). For a library without debug information, the caller (the
//! user's program, usually built with `-g`) is what still knows them.
//!
//! Each argument comes, in this order of trust, from the caller's DWARF call site
//! (`DW_AT_call_value`, evaluated with the caller's registers that CFI recovered), from
//! the instructions that set it up ([`mqd_x86`]), or, for a stack argument, from its
//! stack slot; or it is unknown, with the reason.

use crate::cfi::Registers;
use crate::code::{FrameState, ParameterPlace};
use crate::stack::StackReader;
use mqd_x86::{self as x86, AtCall, CallTarget, Caller, Leads, Origin};

/// Where an argument's value was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The caller's DWARF call site said how to compute it.
    CallSite,
    /// An immediate in the caller's code.
    Constant,
    /// A register the caller keeps across calls.
    Register(&'static str),
    /// A variable of the caller at this address, read as it is now.
    Variable(u64),
    /// An address the caller computed.
    Address,
    /// A constant the caller added to a value it had (`rank - 2`).
    Offset,
    /// Computed by the caller's instructions, emulated, from what its frame holds.
    Computed,
    /// The stack slot the call passed it in, read as it is now.
    StackSlot,
    /// The caller's own argument in this register, unchanged since its caller passed it
    /// (read at that call).
    Entry(&'static str),
}

impl Source {
    /// A few words for a reader.
    pub fn describe(&self) -> String {
        match self {
            Source::CallSite => "the caller's DWARF call site".into(),
            Source::Constant => "a constant in the caller's code".into(),
            Source::Register(r) => format!("the caller's {r}"),
            Source::Variable(a) => format!("the caller's variable at {a:#x}"),
            Source::Address => "an address the caller computed".into(),
            Source::Offset => "a constant the caller added to a value it had".into(),
            Source::Computed => {
                "the caller's instructions, computed from what its frame holds".into()
            }
            Source::StackSlot => "the call's stack slot".into(),
            Source::Entry(r) => {
                format!("the caller's own argument in {r}, as its caller passed it")
            }
        }
    }
}

/// One argument: its value (the full register or stack word) and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    /// The value.
    pub value: u64,
    /// Its source.
    pub source: Source,
}

/// The call a frame is making.
pub struct CallSite<'r> {
    reader: &'r StackReader,
    return_address: u64,
    /// The function called, when the call instruction names it.
    pub callee: Result<String, String>,
    /// The address called, when known (a direct call, a pointer the caller still holds).
    pub target: Option<u64>,
    caller: Result<Caller, String>,
    /// Entered by a tail jump from the function the caller called: no DWARF call site,
    /// and the stack pointer at the jump is 8 below the caller's (its return address).
    tail: bool,
}

pub use mqd_x86::ARGUMENT_REGISTERS;

/// Most bytes of one caller function decoded.
const MAX_FUNCTION: u64 = 1 << 20;

/// The registers and memory a site's values are read from.
fn at_call<'a>(
    register: &'a dyn Fn(u16) -> Option<u64>,
    read: &'a dyn Fn(u64, usize) -> Option<u64>,
    entry: &'a dyn Fn(u16) -> Option<u64>,
) -> AtCall<'a> {
    AtCall {
        register,
        read,
        entry,
    }
}

impl StackReader {
    /// The call that returns to `return_address` (a caller frame's pc); `regs` are the
    /// caller's registers (CFI-recovered) and `read` its memory, for a call through a
    /// pointer.
    pub fn call_site(
        &self,
        return_address: u64,
        regs: &Registers,
        read: &dyn Fn(u64, usize) -> Option<u64>,
    ) -> CallSite<'_> {
        let caller = self.decode_caller(return_address);
        let register = |n: u16| regs.get(n);
        let target = match &caller {
            Ok(c) => match c.target() {
                CallTarget::Indirect => c
                    .indirect_target(&at_call(&register, read, &|_| None))
                    .map(CallTarget::Direct),
                t => Ok(t),
            },
            // Without the function's range, the instruction itself still decodes.
            Err(_) => self
                .code_before(return_address, 7)
                .and_then(|bytes| x86::call_before(bytes, return_address))
                .ok_or_else(|| "no call instruction before the return address".to_owned()),
        };
        let address = match target {
            Ok(CallTarget::Direct(a)) => Some(a),
            _ => None,
        };
        let callee = target.and_then(|t| self.callee_name(t));
        CallSite {
            reader: self,
            return_address,
            callee,
            target: address,
            caller,
            tail: false,
        }
    }

    /// The tail jump by which `function` (which a caller called, returning to
    /// `return_address`) entered a function `wanted` accepts by name; `elsewhere` names
    /// functions that cannot lead there (other MPI functions).
    pub fn tail_call_site(
        &self,
        function: u64,
        return_address: u64,
        wanted: &dyn Fn(&str) -> bool,
        elsewhere: &dyn Fn(&str) -> bool,
    ) -> CallSite<'_> {
        let leads = |t: CallTarget| match self.callee_name(t) {
            Ok(name) if wanted(&name) => Leads::There,
            Ok(name) if elsewhere(&name) => Leads::Elsewhere,
            _ => Leads::Anywhere,
        };
        let caller = self
            .function_code(function)
            .and_then(|(bytes, start, pads)| Caller::tail_jump(bytes, start, pads, &leads));
        let callee = match &caller {
            Ok(c) => self.callee_name(c.target()),
            Err(why) => Err(why.clone()),
        };
        CallSite {
            reader: self,
            return_address,
            callee,
            target: None,
            caller,
            tail: true,
        }
    }

    /// The `len` bytes of code just before `address`.
    fn code_before(&self, address: u64, len: u64) -> Option<&[u8]> {
        let start = address.checked_sub(len)?;
        let o = self.placed_at(start)?;
        o.file.bytes_at(start.wrapping_sub(o.bias), len)
    }

    /// The code of the function containing `address` (its CFI's range): its bytes, its
    /// run-time start, and whether it has exception landing pads.
    fn function_code(&self, address: u64) -> Result<(&[u8], u64, bool), String> {
        let o = self
            .placed_at(address)
            .ok_or("the code address is in no mapped object")?;
        let svma = address.wrapping_sub(o.bias);
        let (range, landing_pads) = o
            .tables
            .and_then(|t| t.function_at(svma))
            .ok_or("the caller's function has no CFI to give its range")?;
        if range.end - range.start > MAX_FUNCTION {
            return Err("the caller's function is too large to decode".into());
        }
        let bytes = o
            .file
            .bytes_at(range.start, range.end - range.start)
            .ok_or("the caller's code is not in its file")?;
        Ok((bytes, range.start.wrapping_add(o.bias), landing_pads))
    }

    fn decode_caller(&self, return_address: u64) -> Result<Caller, String> {
        let (bytes, start, landing_pads) = self.function_code(return_address - 1)?;
        let noreturn = |t: CallTarget| self.never_returns(t);
        Caller::decode_knowing(bytes, start, return_address, landing_pads, &noreturn)
            .map_err(str::to_owned)
    }

    /// Whether a call to `target` never returns: a function of the C library that ends
    /// the process or the thread, or a function whose code has no way out (`exit` in a
    /// loop).
    fn never_returns(&self, target: CallTarget) -> bool {
        const ENDS: &[&str] = &[
            "exit",
            "_exit",
            "_Exit",
            "abort",
            "quick_exit",
            "__assert_fail",
            "__stack_chk_fail",
            "__fortify_fail",
            "pthread_exit",
            "longjmp",
            "siglongjmp",
            "__longjmp_chk",
            "__cxa_throw",
            "__cxa_rethrow",
            "_Unwind_Resume",
            "err",
            "errx",
            "verr",
            "verrx",
        ];
        if let Ok(name) = self.callee_name(target) {
            let base = name.split('@').next().unwrap_or(&name);
            if ENDS.contains(&base) {
                return true;
            }
        }
        match target {
            CallTarget::Direct(address) => {
                self.function_code(address).is_ok_and(|(bytes, start, _)| {
                    start == address && x86::never_returns(bytes, start)
                })
            }
            _ => false,
        }
    }

    /// The name of what a call instruction calls: a symbol at the address, or the
    /// symbol the dynamic loader puts in the GOT slot it (or its PLT entry) goes through.
    fn callee_name(&self, target: CallTarget) -> Result<String, String> {
        let import = |slot: u64| -> Option<String> {
            let o = self.placed_at(slot)?;
            o.file
                .import_at(slot.wrapping_sub(o.bias))
                .map(str::to_owned)
        };
        match target {
            CallTarget::Indirect => {
                Err("the call goes through a function pointer the caller no longer holds".into())
            }
            CallTarget::Slot(slot) => {
                import(slot).ok_or_else(|| format!("no relocation names the slot at {slot:#x}"))
            }
            CallTarget::Direct(address) => {
                let o = self
                    .placed_at(address)
                    .ok_or_else(|| format!("the call's target {address:#x} is not mapped"))?;
                let svma = address.wrapping_sub(o.bias);
                if let Some((name, 0)) = o.symbols.functions().lookup(svma) {
                    return Ok(name.to_owned());
                }
                o.file
                    .bytes_at(svma, 16)
                    .and_then(|b| x86::plt_slot(b, address))
                    .and_then(import)
                    .ok_or_else(|| format!("nothing names the call's target {address:#x}"))
            }
        }
    }
}

impl CallSite<'_> {
    /// The integer arguments `0..count` of the call: `regs` are the caller's registers
    /// at the call (CFI-recovered: only callee-saved ones and the stack pointer known),
    /// `cfa` the caller frame's CFA (its DWARF frame base), `read` `size` bytes of memory,
    /// `entry` an argument register (DWARF number) as the caller was entered with it
    /// (what the caller's caller passed), where known.
    pub fn arguments(
        &self,
        count: usize,
        regs: &Registers,
        cfa: Option<u64>,
        read: &dyn Fn(u64, usize) -> Option<u64>,
        entry: &dyn Fn(u16) -> Option<u64>,
    ) -> Vec<Result<Argument, String>> {
        // At a tail jump the caller's return address is still on the stack.
        let sp = regs
            .get(7)
            .map(|sp| if self.tail { sp.wrapping_sub(8) } else { sp });
        let register = |n: u16| if n == 7 { sp } else { regs.get(n) };
        let word = |a: u64| read(a, 8);
        let frame = FrameState {
            register: &register,
            cfa,
            bias: 0,
            read: &word,
        };
        // The compiler's own account of the call, when it gave one.
        let at = self.return_address - 1;
        let dwarf = (!self.tail)
            .then_some(())
            .and_then(|()| self.reader.placed_at(at))
            .and_then(|o| {
                let code = o.code?;
                let svma = at.wrapping_sub(o.bias);
                Some((code, code.scopes_at(svma)?, svma, o.bias))
            });
        let from_dwarf = |place: ParameterPlace| -> Option<u64> {
            let (code, scopes, svma, bias) = dwarf.as_ref()?;
            let parameter = scopes.call_parameters.iter().find(|p| p.at == place)?;
            let frame = FrameState {
                bias: *bias,
                ..frame
            };
            code.call_value(scopes, parameter, *svma, &frame)
        };
        // A tail jump's function was entered by the caller's own call: no entry values.
        let entry = |n: u16| if self.tail { None } else { entry(n) };
        let at_call = at_call(&register, read, &entry);
        (0..count)
            .map(|i| {
                let place = match ARGUMENT_REGISTERS.get(i) {
                    Some(&r) => ParameterPlace::Register(r),
                    None => ParameterPlace::Stack(8 * (i as i64 - 6)),
                };
                if let Some(value) = from_dwarf(place) {
                    return Ok(Argument {
                        value,
                        source: Source::CallSite,
                    });
                }
                match place {
                    ParameterPlace::Register(r) => {
                        let caller = self.caller.as_ref().map_err(Clone::clone)?;
                        let (value, origin) = caller.register_at_call(r, &at_call)?;
                        Ok(Argument {
                            value,
                            source: match origin {
                                Origin::Constant => Source::Constant,
                                Origin::Register(n) => Source::Register(x86::name(n)),
                                Origin::Variable(a) => Source::Variable(a),
                                Origin::Address => Source::Address,
                                Origin::Offset => Source::Offset,
                                Origin::Computed => Source::Computed,
                                Origin::Entry(n) => Source::Entry(x86::name(n)),
                            },
                        })
                    }
                    ParameterPlace::Stack(offset) => {
                        let sp = regs
                            .get(7)
                            .ok_or("the caller's stack pointer is not known")?;
                        let value = sp
                            .checked_add_signed(offset)
                            .and_then(|a| read(a, 8))
                            .ok_or("the call's stack slot is not readable")?;
                        Ok(Argument {
                            value,
                            source: Source::StackSlot,
                        })
                    }
                }
            })
            .collect()
    }
}
