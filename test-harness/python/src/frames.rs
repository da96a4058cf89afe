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

    fn word(&self, addr: u64) -> Result<u64, String> {
        let mut b = [0u8; 8];
        self.memory
            .read_memory(addr, &mut b)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn int(&self, addr: u64) -> Result<i32, String> {
        let mut b = [0u8; 4];
        self.memory
            .read_memory(addr, &mut b)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        Ok(i32::from_le_bytes(b))
    }

    fn byte(&self, addr: u64) -> Result<u8, String> {
        let mut b = [0u8; 1];
        self.memory
            .read_memory(addr, &mut b)
            .map_err(|e| format!("cannot read {addr:#x}: {e}"))?;
        Ok(b[0])
    }

    /// Every thread of every interpreter.
    pub fn threads(&mut self) -> Result<Vec<PyThread>, String> {
        let l = self.layout;
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
            let mut tstate = self.word(interp + l.interp_threads_head)?;
            for _ in 0..MAX_THREADS {
                if tstate == 0 || !seen.insert(tstate) {
                    break;
                }
                if self.word(tstate + l.tstate_interp)? != interp {
                    return Err(format!(
                        "the thread state at {tstate:#x} does not name its interpreter {interp:#x}: a layout that is not this interpreter's"
                    ));
                }
                threads.push(self.thread(tstate));
                tstate = self.word(tstate + l.tstate_next)?;
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

    fn thread(&mut self, tstate: u64) -> PyThread {
        let l = self.layout;
        let native_id = l
            .tstate_native_thread_id
            .and_then(|o| self.word(tstate + o).ok())
            .and_then(|id| i32::try_from(id).ok())
            .filter(|&id| id > 0);
        let pthread = self
            .word(tstate + l.tstate_thread_id)
            .ok()
            .filter(|&p| p != 0);
        let mut frames = Vec::new();
        let mut truncated = None;
        let first = match l.walk {
            Walk::FrameObjects { tstate_frame } => self.word(tstate + tstate_frame),
            Walk::CFrame {
                tstate_cframe,
                cframe_current,
            } => self.word(tstate + tstate_cframe).and_then(|c| {
                if c == 0 {
                    Ok(0)
                } else {
                    self.word(c + cframe_current)
                }
            }),
            Walk::CurrentFrame { tstate_current } => self.word(tstate + tstate_current),
        };
        let mut frame = match first {
            Ok(f) => f,
            Err(e) => {
                return PyThread {
                    native_id,
                    pthread,
                    frames,
                    truncated: Some(e),
                };
            }
        };
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
            match self.frame(frame) {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => {}
                Err(e) => {
                    truncated = Some(e);
                    break;
                }
            }
            match self.word(frame + l.frame_previous) {
                Ok(p) => frame = p,
                Err(e) => {
                    truncated = Some(e);
                    break;
                }
            }
        }
        PyThread {
            native_id,
            pthread,
            frames,
            truncated,
        }
    }

    /// The frame at `frame`: `None` for one the interpreter keeps for itself (a C
    /// stack's shim frame).
    fn frame(&mut self, frame: u64) -> Result<Option<PyFrame>, String> {
        let l = self.layout;
        let owner = match l.frame_owner {
            Some(o) => Some(self.byte(frame + o)?),
            None => None,
        };
        let code_ptr = self.word(frame + l.frame_code)?;
        if owner.is_some_and(|o| Some(o) == l.owned_by_cstack) {
            return Ok(None);
        }
        let code = self
            .code(code_ptr)?
            .ok_or_else(|| format!("the frame at {frame:#x} has no code object"))?;
        let offset = match l.frame_instr {
            Instr::Lasti { offset, unit } => {
                let lasti = self.int(frame + offset)?;
                u64::try_from(lasti).ok().map(|i| i * unit)
            }
            Instr::Pointer {
                offset,
                code_adaptive,
            } => {
                let at = self.word(frame + offset)?;
                at.checked_sub(code_ptr + code_adaptive)
            }
        };
        let entry = match l.frame_is_entry {
            Some(o) => self.byte(frame + o)? != 0,
            None => match l.owned_by_cstack {
                // The frame before it (its caller) is the C stack's shim.
                Some(cstack) => {
                    let previous = self.word(frame + l.frame_previous)?;
                    previous == 0
                        || l.frame_owner
                            .is_some_and(|o| self.byte(previous + o).is_ok_and(|b| b == cstack))
                }
                // Frame objects: each has an evaluation loop of its own.
                None => true,
            },
        };
        let line =
            offset.and_then(|o| linetable::line_of(l.linetable, &code.table, code.first_line, o));
        Ok(Some(PyFrame {
            function: code.function,
            file: code.file,
            line,
            entry,
        }))
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
        let ty = self.word(addr + 8)?;
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
        let function = self.string(self.word(addr + l.code_name)?)?;
        let file = self.string(self.word(addr + l.code_filename)?)?;
        let first_line = self.int(addr + l.code_firstlineno)?;
        let table = self.bytes_object(self.word(addr + l.code_linetable)?)?;
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
        let ty = self.word(addr + 8)?;
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
        let length = self.word(addr + 16)?;
        let state = self.int(addr + l.unicode_state)? as u32;
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

#[cfg(test)]
mod tests;
