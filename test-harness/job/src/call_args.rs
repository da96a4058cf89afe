//! What the MPI call a thread is in was given: its communicator, peer, tag and root,
//! read from the call's frame through the DWARF location expressions of its parameters
//! (where libmpi or the program has DWARF).
//!
//! The registers of the MPI entry point's frame are recovered frame by frame from the
//! innermost one with CFI ([`mqd_debuginfo::cfi`]); each step must land on the frame framehop
//! found, or nothing is read. Only the scopes named after the call (`PMPI_Recv`,
//! `MPI_Recv`, MPICH's inlined `internal_Recv`) are searched, innermost first, so that an
//! MPI-internal callee's `source` is never taken for the call's.

use mqd_debuginfo::AddressSpace;
use mqd_debuginfo::cfi::{self, Registers};
use mqd_debuginfo::code::{FrameState, Located};
use mqd_debuginfo::stack::Frame;
use mqd_debuginfo::stack::StackReader;
use mqd_model::CallArguments;

/// How a communicator handle names its object in MPICH: builtin handles index
/// `MPIR_Comm_builtin`, direct ones `MPIR_Comm_direct`; and where its context id is. The
/// same for request handles and `MPIR_Request_direct`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommLayout {
    builtin: Option<u64>,
    direct: Option<u64>,
    size: Option<u64>,
    context_id: Option<u64>,
    context_id_size: u64,
    request_direct: Option<u64>,
    request_size: Option<u64>,
}

impl CommLayout {
    /// The layout `space`'s debug information describes (nothing without it).
    pub fn of(space: &AddressSpace) -> CommLayout {
        let comm = space.find_type("MPIR_Comm");
        let context_id_size = space
            .find_type("MPIR_Context_id_t")
            .and_then(|t| space.type_size(t))
            .filter(|&s| s == 2 || s == 4)
            .unwrap_or(2);
        CommLayout {
            builtin: space.find_symbol("MPIR_Comm_builtin"),
            direct: space.find_symbol("MPIR_Comm_direct"),
            size: comm.and_then(|t| space.type_size(t)),
            context_id: comm.and_then(|t| space.field_offset(t, "context_id")),
            context_id_size,
            request_direct: space.find_symbol("MPIR_Request_direct"),
            request_size: space
                .find_type("MPIR_Request")
                .and_then(|t| space.type_size(t)),
        }
    }

    /// The object of a request handle: direct ones (kind 2) of the first pool index
    /// `MPIR_Request_direct`; others live in blocks this does not follow.
    fn request_of(&self, handle: i64) -> Option<u64> {
        let handle = handle as u32;
        const REQUEST_OBJECT: u32 = 0xb;
        if handle >> 30 != 2 || (handle >> 26) & 0xf != REQUEST_OBJECT {
            return None;
        }
        // MPICH 4 keeps a pool (VCI) number in bits 20-25: only pool 0 is direct.
        let index = handle & 0x03ff_ffff;
        if index >> 20 != 0 {
            return None;
        }
        self.request_direct?
            .checked_add(u64::from(index).checked_mul(self.request_size?)?)
    }

    /// The object of a handle: builtin (kind 1) and direct (kind 2) communicator
    /// handles; indirect ones (kind 3) live in blocks this does not follow.
    /// The context id of the communicator object at `address`.
    pub fn context_id_at(
        &self,
        address: u64,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<i64> {
        let word = read(address.checked_add(self.context_id?)?)?;
        Some(if self.context_id_size == 2 {
            i64::from(word as u16)
        } else {
            i64::from(word as u32)
        })
    }

    /// The communicator object of MPICH handle `handle`, from its handle tables.
    pub fn object_of(&self, handle: i64) -> Option<u64> {
        let handle = handle as u32;
        const COMM_OBJECT: u32 = 0x1;
        if (handle >> 26) & 0xf != COMM_OBJECT {
            return None;
        }
        let base = match handle >> 30 {
            1 => self.builtin?,
            2 => self.direct?,
            _ => return None,
        };
        base.checked_add(u64::from(handle & 0x03ff_ffff).checked_mul(self.size?)?)
    }
}

/// Most frames between the innermost one and the MPI entry point that are stepped
/// through.
const MAX_STEPS: usize = 64;

/// The registers of physical frame `index` of `frames` (CFI-recovered from `start`, the
/// innermost frame's) and its CFA; `None` unless every step lands on the frame the
/// unwinder found.
pub(crate) fn frame_registers(
    reader: &StackReader,
    frames: &[&Frame],
    start: &Registers,
    index: usize,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Option<(Registers, u64)> {
    if index > MAX_STEPS {
        return None;
    }
    let mut regs = *start;
    for i in 0..=index {
        let pc = regs.pc()?;
        let lookup = if i == 0 { pc } else { pc.checked_sub(1)? };
        let stepped = reader
            .tables_at(lookup)
            .and_then(|t| t.unwind(&regs, i == 0, read))
            .or_else(|| cfi::unwind_by_frame_pointer(&regs, read))?;
        if i == index {
            return Some((regs, stepped.1));
        }
        regs = stepped.0;
        // The same frame framehop found, or nothing is trusted.
        if regs.pc() != Some(frames.get(i + 1)?.address) {
            return None;
        }
    }
    None
}

/// Whether `frame` is the hang recorder's (`libmqd_recorder.so`, or a copy of it fitted to
/// an MPI, `libmqd_recorder-HASH.so`).
fn is_recorder(frame: &Frame) -> bool {
    frame.object.as_deref().is_some_and(|o| {
        std::path::Path::new(o)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libmqd_recorder"))
    })
}

/// Most request handles of one wait call read.
const MAX_REQUESTS: i64 = 4096;

impl CommLayout {
    /// The arguments of the outermost MPI call of `frames` (a stack `reader` unwound
    /// from `start`), where its frame's DWARF locates them.
    pub fn call_arguments(
        &self,
        reader: &StackReader,
        frames: &[Frame],
        start: &Registers,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Option<CallArguments> {
        // Frames the unwinder stepped through: inlined ones have no registers of their own.
        let frames: Vec<&Frame> = frames.iter().filter(|f| !f.inlined).collect();
        // The hang recorder's wrapper keeps no argument where DWARF finds it: the MPI's
        // own frame below it does.
        let (index, call) = frames.iter().enumerate().rev().find_map(|(i, f)| {
            if is_recorder(f) {
                return None;
            }
            let name = f.function.as_deref()?;
            let call = name
                .strip_prefix('P')
                .unwrap_or(name)
                .strip_prefix("MPI_")?;
            Some((i, call.to_owned()))
        })?;
        let (regs, cfa) = frame_registers(reader, &frames, start, index, read)?;
        let cfa = Some(cfa);
        let pc = regs.pc()?;
        let lookup = if index == 0 { pc } else { pc - 1 };
        let (code, bias) = reader.code_at(lookup)?;
        let svma = lookup.wrapping_sub(bias);
        let scopes = code.scopes_at(svma)?;
        let suffix = format!("_{call}");
        let candidates: Vec<_> = scopes
            .scopes
            .iter()
            .rev()
            .filter(|s| s.name.as_deref().is_some_and(|n| n.ends_with(&suffix)))
            .collect();
        let function = candidates.last()?.name.clone()?;
        let words: std::cell::RefCell<&mut dyn FnMut(u64) -> Option<u64>> =
            std::cell::RefCell::new(read);
        let read_word = |a: u64| -> Option<u64> { (words.borrow_mut())(a) };
        let register = |n: u16| regs.get(n);
        let frame = FrameState {
            register: &register,
            cfa,
            bias,
            read: &read_word,
        };
        // The first of `names` that has a value here, innermost scope first.
        let value = |names: &[&str]| -> Option<(u64, u64)> {
            candidates.iter().find_map(|scope| {
                scope
                    .variables
                    .iter()
                    .filter(|v| names.contains(&v.name.as_str()))
                    .find_map(|v| {
                        let size = v.size.unwrap_or(4).clamp(1, 8);
                        let word = match code.locate(&scopes, v, svma, &frame)? {
                            Located::Memory(a) => read_word(a)?,
                            Located::Value(x) => x,
                        };
                        let bits = size * 8;
                        let word = if bits == 64 {
                            word
                        } else {
                            word & ((1u64 << bits) - 1)
                        };
                        Some((word, size))
                    })
            })
        };
        let int = |names: &[&str]| -> Option<i64> {
            let (word, size) = value(names)?;
            Some(match size {
                1 => i64::from(word as u8 as i8),
                2 => i64::from(word as u16 as i16),
                4 => i64::from(word as u32 as i32),
                _ => word as i64,
            })
        };
        let comm = int(&["comm"]);
        let comm_address = value(&["comm_ptr"])
            .map(|(w, _)| w)
            .filter(|&a| a != 0)
            .or_else(|| comm.and_then(|h| self.object_of(h)));
        let context_id = comm_address.and_then(|a| self.context_id_at(a, &mut |w| read_word(w)));
        // The handles a wait call was given: `MPI_Wait(request)`, or `count` of
        // `array_of_requests`.
        let handles: Vec<i64> = match (value(&["array_of_requests"]), int(&["count"])) {
            (Some((array, _)), Some(count)) if (1..=MAX_REQUESTS).contains(&count) => (0..count)
                .map_while(|i| {
                    let word = read_word(array.checked_add(4 * i as u64)?)?;
                    Some(i64::from(word as u32 as i32))
                })
                .collect(),
            _ => value(&["request"])
                .and_then(|(at, _)| read_word(at))
                .map(|word| vec![i64::from(word as u32 as i32)])
                .unwrap_or_default(),
        };
        // MPICH's MPI_Wait holds the request's object itself, whatever its handle.
        let requests = match value(&["request_ptr"]).map(|(w, _)| w).filter(|&a| a != 0) {
            Some(object) if handles.len() <= 1 => vec![Some(object)],
            _ => handles.into_iter().map(|h| self.request_of(h)).collect(),
        };
        // MPI_Sendrecv has both: its `peer` and `tag` are the send's.
        let sendrecv = call.starts_with("Sendrecv");
        let arguments = CallArguments {
            function,
            comm,
            comm_address,
            context_id,
            peer: if sendrecv {
                int(&["dest"])
            } else {
                int(&["source", "dest"])
            },
            tag: int(&["tag", "sendtag"]),
            root: int(&["root"]),
            recv_peer: sendrecv.then(|| int(&["source"])).flatten(),
            recv_tag: sendrecv.then(|| int(&["recvtag"])).flatten(),
            requests,
            ..CallArguments::default()
        };
        let any = arguments.comm.is_some()
            || arguments.comm_address.is_some()
            || arguments.peer.is_some()
            || arguments.tag.is_some()
            || arguments.root.is_some()
            || !arguments.requests.is_empty();
        any.then_some(arguments)
    }
}
