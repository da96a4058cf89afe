//! Each thread's Python frames, read through [`Memory`] with a [`Layout`]: the
//! interpreters from the runtime state, their threads, each thread's frame chain, and
//! each frame's code object. Every pointer is checked before it is followed (a thread
//! state names its interpreter, a code object has the code type, strings have the
//! string type and a bounded length), every walk is bounded, and code objects are read
//! once per process.

use crate::layout::{Instr, Layout, Walk};
use crate::linetable;
use mqd_target::Memory;
use std::collections::{HashMap, HashSet};

/// Most interpreters, threads per interpreter and frames per thread read.
const MAX_INTERPRETERS: usize = 64;
const MAX_THREADS: usize = 4096;
const MAX_FRAMES: usize = 4096;
/// Longest file name or function name read.
const MAX_STRING: u64 = 4096;
/// Longest line table read.
const MAX_TABLE: u64 = 1 << 20;

/// One Python frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyFrame {
    /// The code object's qualified name (3.11+) or name.
    pub function: String,
    /// Its file.
    pub file: String,
    /// The line being executed, where the line table says it.
    pub line: Option<u32>,
    /// It entered an evaluation loop of its own (the outermost frame a native
    /// `_PyEval_EvalFrameDefault` runs).
    pub entry: bool,
}

/// One thread's Python frames, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyThread {
    /// Its kernel thread id, as the interpreter recorded it (3.11+).
    pub native_id: Option<i32>,
    /// Its `pthread_t` (on glibc, the address of its thread descriptor).
    pub pthread: Option<u64>,
    /// Its frames.
    pub frames: Vec<PyFrame>,
    /// Why its walk ended before its first frame, if it did.
    pub truncated: Option<String>,
}

/// What a code object says.
#[derive(Debug, Clone)]
struct Code {
    function: String,
    file: String,
    first_line: i32,
    table: Vec<u8>,
}

/// A reader of one process's interpreter.
pub struct Interpreter<'a> {
    memory: &'a dyn Memory,
    layout: &'a Layout,
    /// The runtime state (`_PyRuntime`).
    runtime: u64,
    codes: HashMap<u64, Option<Code>>,
    /// The type objects of code and strings, learned from the first frame's code.
    code_type: Option<u64>,
    str_type: Option<u64>,
}

impl<'a> Interpreter<'a> {
    /// The interpreter whose runtime state is at `runtime`, laid out as `layout` says.
    pub fn new(memory: &'a dyn Memory, layout: &'a Layout, runtime: u64) -> Interpreter<'a> {
        Interpreter {
            memory,
            layout,
            runtime,
            codes: HashMap::new(),
            code_type: None,
            str_type: None,
        }
    }

    /// The `len` bytes of the object at `addr`, in one read.
    fn read(&self, addr: u64, len: u64) -> Result<Object, String> {
        let mut data = vec![0u8; len as usize];
        self.memory
            .read_memory(addr, &mut data)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        Ok(Object(data))
    }

    fn word(&self, addr: u64) -> Result<u64, String> {
        Ok(self.read(addr, 8)?.word(0))
    }

    /// Every thread of every interpreter.
    pub fn threads(&mut self) -> Result<Vec<PyThread>, String> {
        let l = self.layout;
        let tstate_len = span(&[
            Some(l.tstate_next),
            Some(l.tstate_interp),
            Some(l.tstate_thread_id),
            l.tstate_native_thread_id,
            Some(match l.walk {
                Walk::FrameObjects { tstate_frame } => tstate_frame,
                Walk::CFrame { tstate_cframe, .. } => tstate_cframe,
                Walk::CurrentFrame { tstate_current } => tstate_current,
            }),
        ]);
        let mut threads = Vec::new();
        let mut interp = self.word(self.runtime + l.runtime_interpreters_head)?;
        if interp == 0 {
            return Err("the interpreter is not initialized (no interpreter state)".into());
        }
        let mut seen = HashSet::new();
        for _ in 0..MAX_INTERPRETERS {
            if interp == 0 || !seen.insert(interp) {
                break;
            }
            let mut address = self.word(interp + l.interp_threads_head)?;
            for _ in 0..MAX_THREADS {
                if address == 0 || !seen.insert(address) {
                    break;
                }
                let tstate = self.read(address, tstate_len)?;
                if tstate.word(l.tstate_interp) != interp {
                    return Err(format!(
                        "the thread state at {address:#x} does not name its interpreter {interp:#x}: a layout that is not this interpreter's"
                    ));
                }
                threads.push(self.thread(&tstate));
                address = tstate.word(l.tstate_next);
            }
            interp = self.word(interp + l.interp_next)?;
        }
        if threads.is_empty() {
            // A running interpreter has its main thread's state at least.
            return Err(
                "the interpreter lists no thread: it is finalizing, or its layout is not the one read".into(),
            );
        }
        Ok(threads)
    }

    fn thread(&mut self, tstate: &Object) -> PyThread {
        let l = self.layout;
        let native_id = l
            .tstate_native_thread_id
            .map(|o| tstate.word(o))
            .and_then(|id| i32::try_from(id).ok())
            .filter(|&id| id > 0);
        let pthread = Some(tstate.word(l.tstate_thread_id)).filter(|&p| p != 0);
        let mut frames: Vec<PyFrame> = Vec::new();
        let mut truncated = None;
        let first = match l.walk {
            Walk::FrameObjects { tstate_frame } => Ok(tstate.word(tstate_frame)),
            Walk::CFrame {
                tstate_cframe,
                cframe_current,
            } => match tstate.word(tstate_cframe) {
                0 => Ok(0),
                cframe => self.word(cframe + cframe_current),
            },
            Walk::CurrentFrame { tstate_current } => Ok(tstate.word(tstate_current)),
        };
        let mut frame = first.unwrap_or_else(|e| {
            truncated = Some(e);
            0
        });
        let frame_len = span(&[
            Some(l.frame_previous),
            Some(l.frame_code),
            Some(match l.frame_instr {
                Instr::Lasti { offset, .. } | Instr::Pointer { offset, .. } => offset,
            }),
            l.frame_owner,
            l.frame_is_entry,
        ]);
        let mut seen = HashSet::new();
        while frame != 0 {
            if !seen.insert(frame) {
                truncated = Some(format!("the frames loop back to {frame:#x}"));
                break;
            }
            if frames.len() == MAX_FRAMES {
                truncated = Some(format!("more than {MAX_FRAMES} Python frames"));
                break;
            }
            let raw = match self.read(frame, frame_len) {
                Ok(raw) => raw,
                Err(e) => {
                    truncated = Some(e);
                    break;
                }
            };
            let shim = l.owned_by_cstack.is_some()
                && l.frame_owner.map(|o| raw.byte(o)) == l.owned_by_cstack;
            if shim {
                // The shim an evaluation loop pushes first: the frame it runs entered it.
                if let Some(entered) = frames.last_mut() {
                    entered.entry = true;
                }
            } else {
                match self.frame(&raw, frame) {
                    Ok(f) => frames.push(f),
                    Err(e) => {
                        truncated = Some(e);
                        break;
                    }
                }
            }
            frame = raw.word(l.frame_previous);
        }
        // The thread's first frame entered the outermost loop.
        if frame == 0
            && l.owned_by_cstack.is_some()
            && let Some(first) = frames.last_mut()
        {
            first.entry = true;
        }
        PyThread {
            native_id,
            pthread,
            frames,
            truncated,
        }
    }

    /// The frame `raw` (at `at`). A 3.12+ frame's entry mark is set by the walk, from
    /// the shim frame that follows it.
    fn frame(&mut self, raw: &Object, at: u64) -> Result<PyFrame, String> {
        let l = self.layout;
        let code_ptr = raw.word(l.frame_code);
        let code = self
            .code(code_ptr)?
            .ok_or_else(|| format!("the frame at {at:#x} has no code object"))?;
        let offset = match l.frame_instr {
            Instr::Lasti { offset, unit } => u64::try_from(raw.int(offset)).ok().map(|i| i * unit),
            Instr::Pointer {
                offset,
                code_adaptive,
            } => raw.word(offset).checked_sub(code_ptr + code_adaptive),
        };
        let entry = match l.frame_is_entry {
            Some(o) => raw.byte(o) != 0,
            // Frame objects each have an evaluation loop of their own.
            None => l.owned_by_cstack.is_none(),
        };
        let line =
            offset.and_then(|o| linetable::line_of(l.linetable, &code.table, code.first_line, o));
        Ok(PyFrame {
            function: code.function,
            file: code.file,
            line,
            entry,
        })
    }

    fn code(&mut self, addr: u64) -> Result<Option<Code>, String> {
        if let Some(code) = self.codes.get(&addr) {
            return Ok(code.clone());
        }
        let code = self.read_code(addr)?;
        self.codes.insert(addr, code.clone());
        Ok(code)
    }

    fn read_code(&mut self, addr: u64) -> Result<Option<Code>, String> {
        if addr == 0 {
            return Ok(None);
        }
        let l = self.layout;
        let header = self.read(
            addr,
            span(&[
                Some(8),
                Some(l.code_name),
                Some(l.code_filename),
                Some(l.code_firstlineno),
                Some(l.code_linetable),
            ]),
        )?;
        let ty = header.word(8);
        match self.code_type {
            Some(t) if t != ty => {
                return Err(format!(
                    "the object at {addr:#x} is not a code object (type {ty:#x}, code's is {t:#x})"
                ));
            }
            Some(_) => {}
            None => {
                // The first one: its type must be named "code".
                let name = self.word(ty + l.type_name)?;
                let name = self.c_string(name, 16)?;
                if name != "code" {
                    return Err(format!(
                        "the frame's code at {addr:#x} is an object of type {name:?}: a layout that is not this interpreter's"
                    ));
                }
                self.code_type = Some(ty);
            }
        }
        let function = self.string(header.word(l.code_name))?;
        let file = self.string(header.word(l.code_filename))?;
        let first_line = header.int(l.code_firstlineno);
        let table = self.bytes_object(header.word(l.code_linetable))?;
        Ok(Some(Code {
            function,
            file,
            first_line,
            table,
        }))
    }

    /// A NUL-terminated string of at most `max` bytes.
    fn c_string(&self, addr: u64, max: usize) -> Result<String, String> {
        let mut buf = vec![0u8; max];
        let n = self
            .memory
            .read_partial(addr, &mut buf)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        let end = buf[..n].iter().position(|&b| b == 0).unwrap_or(n);
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    /// A `str` object's text.
    fn string(&mut self, addr: u64) -> Result<String, String> {
        let l = self.layout;
        let header = self.read(addr, span(&[Some(8), Some(16), Some(l.unicode_state)]))?;
        let ty = header.word(8);
        match self.str_type {
            Some(t) if t != ty => {
                return Err(format!("the object at {addr:#x} is not a str"));
            }
            Some(_) => {}
            None => {
                let name = self.word(ty + l.type_name)?;
                if self.c_string(name, 16)? != "str" {
                    return Err(format!("the object at {addr:#x} is not a str"));
                }
                self.str_type = Some(ty);
            }
        }
        let length = header.word(16);
        // The low byte: the rest of the word is padding, whatever it holds.
        let state = u32::from(header.byte(l.unicode_state));
        let kind = (state >> 2) & 7;
        let compact = state & (1 << 5) != 0;
        let ascii = state & (1 << 6) != 0;
        if !compact || !matches!(kind, 1 | 2 | 4) {
            return Err(format!("the str at {addr:#x} is not a compact string"));
        }
        let bytes = u64::from(kind) * length;
        if bytes > MAX_STRING * 4 {
            return Err(format!("the str at {addr:#x} is {length} characters long"));
        }
        let data = addr
            + if ascii {
                l.unicode_ascii_size
            } else {
                l.unicode_compact_size
            };
        let mut buf = vec![0u8; bytes as usize];
        self.memory
            .read_memory(data, &mut buf)
            .map_err(|e| format!("cannot read {data:#x}: {e}"))?;
        Ok(match kind {
            1 => buf.iter().map(|&b| char::from(b)).collect(),
            2 => char::decode_utf16(
                buf.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]])),
            )
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
            _ => buf
                .chunks_exact(4)
                .map(|c| {
                    char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .unwrap_or(char::REPLACEMENT_CHARACTER)
                })
                .collect(),
        })
    }

    /// A `bytes` object's contents.
    fn bytes_object(&self, addr: u64) -> Result<Vec<u8>, String> {
        let size = self.word(addr + 16)?;
        if size > MAX_TABLE {
            return Err(format!("a line table of {size} bytes at {addr:#x}"));
        }
        let mut buf = vec![0u8; size as usize];
        self.memory
            .read_memory(addr + self.layout.bytes_data, &mut buf)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        Ok(buf)
    }
}

/// The bytes of one target object, read at once, and its fields.
struct Object(Vec<u8>);

impl Object {
    fn field<const N: usize>(&self, at: u64) -> [u8; N] {
        let at = at as usize;
        // The object was read as long as its furthest field ([`span`]).
        self.0
            .get(at..at + N)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; N])
    }

    fn word(&self, at: u64) -> u64 {
        u64::from_le_bytes(self.field(at))
    }

    fn int(&self, at: u64) -> i32 {
        i32::from_le_bytes(self.field(at))
    }

    fn byte(&self, at: u64) -> u8 {
        self.field::<1>(at)[0]
    }
}

/// How much of an object to read to reach each of its 8-byte fields at `offsets`.
fn span(offsets: &[Option<u64>]) -> u64 {
    offsets.iter().flatten().max().map_or(0, |&o| o + 8)
}

#[cfg(test)]
mod tests;
