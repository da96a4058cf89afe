//! Synthetic interpreters: memory images of each CPython version's runtime, threads,
//! frames, code objects and strings, laid out by a generator of its own from the
//! structs' field lists as CPython's headers declare them (C's natural alignment, not
//! the reader's tables), with line tables from an encoder of its own. The reader must
//! find in them the frames the generator put there.

use super::*;
use crate::Runtime;
use mqd_target::TargetError;
use std::collections::HashMap;

/// (field, size, alignment); a field name starting with `_` is padding-only filler.
type Fields = &'static [(&'static str, u64, u64)];

const P: (u64, u64) = (8, 8);

macro_rules! fields {
    ($($name:literal : $ty:expr),* $(,)?) => {{
        const F: Fields = &[$(($name, $ty.0, $ty.1)),*];
        F
    }};
}

const I4: (u64, u64) = (4, 4);
const U2: (u64, u64) = (2, 2);
const U1: (u64, u64) = (1, 1);
const U8: (u64, u64) = (8, 8);
const fn blob(size: u64) -> (u64, u64) {
    (size, 8)
}
const FLEX2: (u64, u64) = (0, 2);
const FLEX1: (u64, u64) = (0, 1);

/// The offset of each field, C's way.
fn lay(fields: Fields) -> HashMap<&'static str, u64> {
    let mut at = 0u64;
    let mut out = HashMap::new();
    for &(name, size, align) in fields {
        at = at.div_ceil(align) * align;
        out.insert(name, at);
        at += size;
    }
    out.insert("sizeof", at.div_ceil(8) * 8);
    out
}

/// One version's structs, as field lists.
struct Version {
    minor: u8,
    runtime: Fields,
    interp: Fields,
    tstate: Fields,
    cframe: Option<Fields>,
    frame: Fields,
    code: Fields,
    ascii: Fields,
    compact: Fields,
}

const VAR_HEAD: [(&str, u64, u64); 3] = [("ob_refcnt", 8, 8), ("ob_type", 8, 8), ("ob_size", 8, 8)];

const OLD_CODE: Fields = fields!(
    "ob_refcnt": U8, "ob_type": P, "co_argcount": I4, "co_posonlyargcount": I4,
    "co_kwonlyargcount": I4, "co_nlocals": I4, "co_stacksize": I4, "co_flags": I4,
    "co_firstlineno": I4, "co_code": P, "co_consts": P, "co_names": P, "co_varnames": P,
    "co_freevars": P, "co_cellvars": P, "co_cell2arg": P, "co_filename": P, "co_name": P,
    "co_linetable": P,
);
const OLD_RUNTIME: Fields = fields!(
    "preinitializing": I4, "preinitialized": I4, "core_initialized": I4, "initialized": I4,
    "finalizing": P, "mutex": P, "head": P, "main": P,
);
const OLD_INTERP: Fields = fields!("next": P, "threads_head": P);
const OLD_TSTATE: Fields = fields!(
    "prev": P, "next": P, "interp": P, "frame": P, "recursion_depth": I4, "overflowed": U1,
    "recursion_critical": U1, "stackcheck_counter": I4, "tracing": I4, "use_tracing": I4,
    "c_profilefunc": P, "c_tracefunc": P, "c_profileobj": P, "c_traceobj": P,
    "curexc_type": P, "curexc_value": P, "curexc_traceback": P, "exc_state": blob(32),
    "exc_info": P, "dict": P, "gilstate_counter": I4, "async_exc": P, "thread_id": U8,
);
const TSTATE_3_10: Fields = fields!(
    "prev": P, "next": P, "interp": P, "frame": P, "recursion_depth": I4,
    "recursion_headroom": I4, "stackcheck_counter": I4, "tracing": I4, "cframe": P,
    "c_profilefunc": P, "c_tracefunc": P, "c_profileobj": P, "c_traceobj": P,
    "curexc_type": P, "curexc_value": P, "curexc_traceback": P, "exc_state": blob(32),
    "exc_info": P, "dict": P, "gilstate_counter": I4, "async_exc": P, "thread_id": U8,
);
const OLD_ASCII: Fields = fields!(
    "ob_refcnt": U8, "ob_type": P, "length": U8, "hash": U8, "state": I4, "wstr": P,
);
const OLD_COMPACT: Fields = fields!(
    "ob_refcnt": U8, "ob_type": P, "length": U8, "hash": U8, "state": I4, "wstr": P,
    "utf8_length": U8, "utf8": P, "wstr_length": U8,
);
const NEW_ASCII: Fields = fields!(
    "ob_refcnt": U8, "ob_type": P, "length": U8, "hash": U8, "state": I4,
);
const NEW_COMPACT: Fields = fields!(
    "ob_refcnt": U8, "ob_type": P, "length": U8, "hash": U8, "state": I4,
    "utf8_length": U8, "utf8": P,
);

fn versions() -> Vec<Version> {
    let frame_3_8: Fields = fields!(
        "ob_refcnt": U8, "ob_type": P, "ob_size": U8, "f_back": P, "f_code": P,
        "f_builtins": P, "f_globals": P, "f_locals": P, "f_valuestack": P, "f_stacktop": P,
        "f_trace": P, "f_trace_lines": U1, "f_trace_opcodes": U1, "f_gen": P, "f_lasti": I4,
        "f_lineno": I4,
    );
    let frame_3_10: Fields = fields!(
        "ob_refcnt": U8, "ob_type": P, "ob_size": U8, "f_back": P, "f_code": P,
        "f_builtins": P, "f_globals": P, "f_locals": P, "f_valuestack": P, "f_trace": P,
        "f_stackdepth": I4, "f_trace_lines": U1, "f_trace_opcodes": U1, "f_gen": P,
        "f_lasti": I4,
    );
    let frame_3_12: Fields = fields!(
        "f_code": P, "previous": P, "f_funcobj": P, "f_globals": P, "f_builtins": P,
        "f_locals": P, "frame_obj": P, "prev_instr": P, "stacktop": I4, "return_offset": U2,
        "owner": U1, "localsplus": FLEX1,
    );
    let code_3_12_head: [(&str, u64, u64); 23] = [
        VAR_HEAD[0],
        VAR_HEAD[1],
        VAR_HEAD[2],
        ("co_consts", 8, 8),
        ("co_names", 8, 8),
        ("co_exceptiontable", 8, 8),
        ("co_flags", 4, 4),
        ("co_argcount", 4, 4),
        ("co_posonlyargcount", 4, 4),
        ("co_kwonlyargcount", 4, 4),
        ("co_stacksize", 4, 4),
        ("co_firstlineno", 4, 4),
        ("co_nlocalsplus", 4, 4),
        ("co_framesize", 4, 4),
        ("co_nlocals", 4, 4),
        ("co_ncellvars", 4, 4),
        ("co_nfreevars", 4, 4),
        ("co_version", 4, 4),
        ("co_localsplusnames", 8, 8),
        ("co_localspluskinds", 8, 8),
        ("co_filename", 8, 8),
        ("co_name", 8, 8),
        ("co_qualname", 8, 8),
    ];
    let leak = |v: Vec<(&'static str, u64, u64)>| -> Fields { Vec::leak(v) };
    let mut code_3_12 = code_3_12_head.to_vec();
    code_3_12.extend_from_slice(fields!(
        "co_linetable": P, "co_weakreflist": P, "_co_cached": P,
        "_co_instrumentation_version": U8, "_co_monitoring": P, "_co_firsttraceable": I4,
        "co_extra": P, "co_code_adaptive": FLEX2,
    ));
    let mut code_3_13 = code_3_12_head.to_vec();
    code_3_13.extend_from_slice(fields!(
        "co_linetable": P, "co_weakreflist": P, "co_executors": P, "_co_cached": P,
        "_co_instrumentation_version": U8, "_co_monitoring": P, "_co_firsttraceable": I4,
        "co_extra": P, "co_code_adaptive": FLEX2,
    ));
    // 3.8-3.10: frame objects; only the thread state's middle and the frame object's
    // tail differ.
    let frame_objects = |minor, tstate, frame| Version {
        minor,
        runtime: OLD_RUNTIME,
        interp: OLD_INTERP,
        tstate,
        cframe: None,
        frame,
        code: OLD_CODE,
        ascii: OLD_ASCII,
        compact: OLD_COMPACT,
    };
    vec![
        frame_objects(8, OLD_TSTATE, frame_3_8),
        frame_objects(9, OLD_TSTATE, frame_3_8),
        frame_objects(10, TSTATE_3_10, frame_3_10),
        Version {
            minor: 11,
            runtime: fields!(
                "_initialized": I4, "preinitializing": I4, "preinitialized": I4,
                "core_initialized": I4, "initialized": I4, "_finalizing": P, "mutex": P,
                "head": P, "main": P,
            ),
            interp: fields!("next": P, "next_unique_id": U8, "threads_head": P),
            tstate: fields!(
                "prev": P, "next": P, "interp": P, "_initialized": I4, "_static": I4,
                "recursion_remaining": I4, "recursion_limit": I4, "recursion_headroom": I4,
                "tracing": I4, "tracing_what": I4, "cframe": P, "c_profilefunc": P,
                "c_tracefunc": P, "c_profileobj": P, "c_traceobj": P, "curexc_type": P,
                "curexc_value": P, "curexc_traceback": P, "exc_info": P, "dict": P,
                "gilstate_counter": I4, "async_exc": P, "thread_id": U8,
                "native_thread_id": U8,
            ),
            cframe: Some(fields!("use_tracing": U1, "current_frame": P, "previous": P)),
            frame: fields!(
                "f_func": P, "f_globals": P, "f_builtins": P, "f_locals": P, "f_code": P,
                "frame_obj": P, "previous": P, "prev_instr": P, "stacktop": I4, "is_entry": U1,
                "owner": U1, "localsplus": FLEX1,
            ),
            code: fields!(
                "ob_refcnt": U8, "ob_type": P, "ob_size": U8, "co_consts": P, "co_names": P,
                "co_exceptiontable": P, "co_flags": I4, "co_warmup": U2,
                "_co_linearray_entry_size": U2, "co_argcount": I4, "co_posonlyargcount": I4,
                "co_kwonlyargcount": I4, "co_stacksize": I4, "co_firstlineno": I4,
                "co_nlocalsplus": I4, "co_nlocals": I4, "co_nplaincellvars": I4,
                "co_ncellvars": I4, "co_nfreevars": I4, "co_localsplusnames": P,
                "co_localspluskinds": P, "co_filename": P, "co_name": P, "co_qualname": P,
                "co_linetable": P, "co_weakreflist": P, "_co_code": P, "_co_linearray": P,
                "_co_firsttraceable": I4, "co_extra": P, "co_code_adaptive": FLEX2,
            ),
            ascii: OLD_ASCII,
            compact: OLD_COMPACT,
        },
        Version {
            minor: 12,
            runtime: fields!(
                "_initialized": I4, "preinitializing": I4, "preinitialized": I4,
                "core_initialized": I4, "initialized": I4, "_finalizing": P, "mutex": P,
                "head": P, "main": P,
            ),
            interp: fields!(
                "next": P, "id": U8, "id_refcount": U8, "requires_idref": I4, "id_mutex": P,
                "_initialized": I4, "finalizing": I4, "monitoring_version": U8,
                "last_restart_version": U8, "next_unique_id": U8, "threads_head": P,
            ),
            tstate: fields!(
                "prev": P, "next": P, "interp": P, "_status": I4,
                "py_recursion_remaining": I4, "py_recursion_limit": I4,
                "c_recursion_remaining": I4, "recursion_headroom": I4, "tracing": I4,
                "what_event": I4, "cframe": P, "c_profilefunc": P, "c_tracefunc": P,
                "c_profileobj": P, "c_traceobj": P, "current_exception": P, "exc_info": P,
                "dict": P, "gilstate_counter": I4, "async_exc": P, "thread_id": U8,
                "native_thread_id": U8,
            ),
            cframe: Some(fields!("current_frame": P, "previous": P)),
            frame: frame_3_12,
            code: leak(code_3_12),
            ascii: NEW_ASCII,
            compact: NEW_COMPACT,
        },
        Version {
            minor: 13,
            runtime: fields!(
                "debug_offsets": blob(584), "_initialized": I4, "preinitializing": I4,
                "preinitialized": I4, "core_initialized": I4, "initialized": I4,
                "_finalizing": P, "_finalizing_id": U8, "mutex": U1, "head": P, "main": P,
            ),
            interp: fields!(
                "ceval": blob(7264), "next": P, "id": U8, "id_refcount": U8,
                "requires_idref": I4, "id_mutex": P, "_whence": U8, "_initialized": I4,
                "_ready": I4, "finalizing": I4, "last_restart_version": U8,
                "next_unique_id": U8, "threads_head": P,
            ),
            tstate: fields!(
                "prev": P, "next": P, "interp": P, "eval_breaker": U8, "_status": I4,
                "_whence": I4, "state": I4, "py_recursion_remaining": I4,
                "py_recursion_limit": I4, "c_recursion_remaining": I4,
                "recursion_headroom": I4, "tracing": I4, "what_event": I4,
                "current_frame": P, "c_profilefunc": P, "c_tracefunc": P, "c_profileobj": P,
                "c_traceobj": P, "current_exception": P, "exc_info": P, "dict": P,
                "gilstate_counter": I4, "async_exc": P, "thread_id": U8,
                "native_thread_id": U8,
            ),
            cframe: None,
            frame: frame_3_12,
            code: leak(code_3_13),
            ascii: NEW_ASCII,
            compact: NEW_COMPACT,
        },
    ]
}

/// Where glibc's thread descriptor keeps the kernel thread id (`_thread_db_pthread_tid`).
const PTHREAD_TID: u64 = 720;

/// 3.13's `_Py_DebugOffsets` after its cookie, in its declared order.
const DEBUG_3_13_ORDER: &[&str] = &[
    "version",
    "free_threaded",
    "runtime.size",
    "runtime.finalizing",
    "runtime.interpreters_head",
    "interp.size",
    "interp.id",
    "interp.next",
    "interp.threads_head",
    "interp.gc",
    "interp.imports_modules",
    "interp.sysdict",
    "interp.builtins",
    "interp.ceval_gil",
    "interp.gil_runtime_state",
    "interp.gil_enabled",
    "interp.gil_locked",
    "interp.gil_holder",
    "tstate.size",
    "tstate.prev",
    "tstate.next",
    "tstate.interp",
    "tstate.current_frame",
    "tstate.thread_id",
    "tstate.native_thread_id",
    "tstate.datastack_chunk",
    "tstate.status",
    "frame.size",
    "frame.previous",
    "frame.executable",
    "frame.instr_ptr",
    "frame.localsplus",
    "frame.owner",
    "code.size",
    "code.filename",
    "code.name",
    "code.qualname",
    "code.linetable",
    "code.firstlineno",
    "code.argcount",
    "code.localsplusnames",
    "code.localspluskinds",
    "code.co_code_adaptive",
    "pyobject.size",
    "pyobject.ob_type",
    "type.size",
    "type.tp_name",
    "type.tp_repr",
    "type.tp_flags",
    "tuple.size",
    "tuple.ob_item",
    "tuple.ob_size",
    "list.size",
    "list.ob_item",
    "list.ob_size",
    "dict.size",
    "dict.ma_keys",
    "dict.ma_values",
    "float.size",
    "float.ob_fval",
    "long.size",
    "long.lv_tag",
    "long.ob_digit",
    "bytes.size",
    "bytes.ob_size",
    "bytes.ob_sval",
    "unicode.size",
    "unicode.state",
    "unicode.length",
    "unicode.asciiobject_size",
    "gc.size",
    "gc.collecting",
];

/// A memory image: one region, filled as objects are made.
struct Image {
    base: u64,
    bytes: Vec<u8>,
}

impl Memory for Image {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let unmapped = TargetError::Unmapped {
            addr,
            len: buf.len(),
        };
        let start = addr.checked_sub(self.base).ok_or(unmapped.clone())? as usize;
        let bytes = self.bytes.get(start..start + buf.len()).ok_or(unmapped)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }
}

impl Image {
    fn alloc(&mut self, size: u64) -> u64 {
        let at = self.base + self.bytes.len() as u64;
        let size = size.div_ceil(16) * 16 + 16;
        self.bytes.resize(self.bytes.len() + size as usize, 0);
        at
    }

    fn put(&mut self, at: u64, value: &[u8]) {
        let start = (at - self.base) as usize;
        self.bytes[start..start + value.len()].copy_from_slice(value);
    }

    fn word(&mut self, at: u64, value: u64) {
        self.put(at, &value.to_le_bytes());
    }

    fn int(&mut self, at: u64, value: i32) {
        self.put(at, &value.to_le_bytes());
    }
}

/// An interpreter's objects, made in an image from a version's field lists.
struct Maker<'v> {
    v: &'v Version,
    image: Image,
    str_type: u64,
    bytes_type: u64,
    code_type: u64,
}

impl<'v> Maker<'v> {
    fn new(v: &'v Version) -> Maker<'v> {
        let mut m = Maker {
            v,
            image: Image {
                base: 0x7f00_0000_0000,
                bytes: Vec::new(),
            },
            str_type: 0,
            bytes_type: 0,
            code_type: 0,
        };
        m.str_type = m.type_object("str");
        m.bytes_type = m.type_object("bytes");
        m.code_type = m.type_object("code");
        m
    }

    fn type_object(&mut self, name: &str) -> u64 {
        let ty = self.image.alloc(64);
        let text = self.image.alloc(name.len() as u64 + 1);
        self.image.put(text, name.as_bytes());
        // PyTypeObject: PyObject_VAR_HEAD, then tp_name.
        self.image.word(ty + 24, text);
        ty
    }

    fn string(&mut self, text: &str) -> u64 {
        let chars: Vec<u32> = text.chars().map(u32::from).collect();
        let max = chars.iter().copied().max().unwrap_or(0);
        let (kind, ascii) = match max {
            0..=0x7f => (1u32, true),
            0x80..=0xff => (1, false),
            0x100..=0xffff => (2, false),
            _ => (4, false),
        };
        let head = if ascii {
            lay(self.v.ascii)
        } else {
            lay(self.v.compact)
        };
        let size = head["sizeof"] + u64::from(kind) * (chars.len() as u64 + 1);
        let s = self.image.alloc(size);
        self.image.word(s + 8, self.str_type);
        self.image.word(s + head["length"], chars.len() as u64);
        // Bits above the low byte are padding, whatever they hold.
        let state = 0xdead_0000 | 1 | (kind << 2) | (1 << 5) | (u32::from(ascii) << 6) | (1 << 7);
        self.image.put(s + head["state"], &state.to_le_bytes());
        let data: Vec<u8> = chars
            .iter()
            .flat_map(|&c| match kind {
                1 => vec![c as u8],
                2 => (c as u16).to_le_bytes().to_vec(),
                _ => c.to_le_bytes().to_vec(),
            })
            .collect();
        self.image.put(s + head["sizeof"], &data);
        s
    }

    fn bytes(&mut self, data: &[u8]) -> u64 {
        let b = self.image.alloc(32 + data.len() as u64 + 1);
        self.image.word(b + 8, self.bytes_type);
        self.image.word(b + 16, data.len() as u64);
        self.image.put(b + 32, data);
        b
    }

    /// A code object at `first` whose code unit `unit` is at line `first + unit`.
    fn code(&mut self, name: &str, file: &str, first: i32, units: u64) -> u64 {
        let c = lay(self.v.code);
        let table = line_table(self.v.minor, units);
        let table = self.bytes(&table);
        let name = self.string(name);
        let file = self.string(file);
        let code = self.image.alloc(c["sizeof"] + 2 * units);
        self.image.word(code + 8, self.code_type);
        let name_field = if self.v.minor >= 11 {
            "co_qualname"
        } else {
            "co_name"
        };
        self.image.word(code + c[name_field], name);
        self.image.word(code + c["co_filename"], file);
        self.image.int(code + c["co_firstlineno"], first);
        self.image.word(code + c["co_linetable"], table);
        code
    }

    /// A frame running `code` at code unit `unit`, called by `previous`; `owner` 3 makes
    /// a 3.12+ shim frame.
    fn frame(&mut self, code: u64, unit: u64, previous: u64, entry: bool, owner: u8) -> u64 {
        let f = lay(self.v.frame);
        let frame = self.image.alloc(f["sizeof"] + 8);
        let minor = self.v.minor;
        if minor <= 10 {
            self.image.word(frame + f["f_back"], previous);
            self.image.word(frame + f["f_code"], code);
            let lasti = if minor == 10 { unit } else { 2 * unit };
            self.image.int(frame + f["f_lasti"], lasti as i32);
            return frame;
        }
        let c = lay(self.v.code);
        self.image.word(frame + f["f_code"], code);
        self.image.word(frame + f["previous"], previous);
        self.image.word(
            frame + f["prev_instr"],
            code + c["co_code_adaptive"] + 2 * unit,
        );
        self.image.put(frame + f["owner"], &[owner]);
        if minor == 11 {
            self.image.put(frame + f["is_entry"], &[u8::from(entry)]);
        }
        frame
    }

    /// The runtime with one interpreter whose threads are `threads`: (native id,
    /// innermost frame).
    fn runtime(&mut self, threads: &[(u64, u64)]) -> u64 {
        let r = lay(self.v.runtime);
        let i = lay(self.v.interp);
        let t = lay(self.v.tstate);
        let runtime = self.image.alloc(r["sizeof"]);
        let interp = self.image.alloc(i["sizeof"]);
        self.image.word(runtime + r["head"], interp);
        let mut next = 0;
        for &(native, frame) in threads.iter().rev() {
            let tstate = self.image.alloc(t["sizeof"]);
            self.image.word(tstate + t["next"], next);
            self.image.word(tstate + t["interp"], interp);
            if let Some(&id) = t.get("native_thread_id") {
                self.image.word(tstate + id, native);
            }
            // glibc's thread descriptor, the kernel thread id at PTHREAD_TID in it.
            let pthread = self.image.alloc(PTHREAD_TID + 8);
            self.image.int(pthread + PTHREAD_TID, native as i32);
            self.image.word(tstate + t["thread_id"], pthread);
            match self.v.cframe {
                Some(cframe) => {
                    let c = lay(cframe);
                    let cf = self.image.alloc(c["sizeof"]);
                    self.image.word(cf + c["current_frame"], frame);
                    self.image.word(tstate + t["cframe"], cf);
                }
                None if self.v.minor >= 13 => self.image.word(tstate + t["current_frame"], frame),
                None => self.image.word(tstate + t["frame"], frame),
            }
            next = tstate;
        }
        self.image.word(interp + i["threads_head"], next);
        if self.v.minor >= 13 {
            self.debug_offsets(runtime);
        }
        runtime
    }

    fn debug_offsets(&mut self, runtime: u64) {
        let (r, i, t) = (lay(self.v.runtime), lay(self.v.interp), lay(self.v.tstate));
        let (f, c) = (lay(self.v.frame), lay(self.v.code));
        let (a, cu) = (lay(self.v.ascii), lay(self.v.compact));
        let values: HashMap<&str, u64> = [
            ("version", 0x030d_00f0),
            ("free_threaded", 0),
            ("runtime.size", r["sizeof"]),
            ("runtime.interpreters_head", r["head"]),
            ("interp.next", i["next"]),
            ("interp.threads_head", i["threads_head"]),
            ("tstate.next", t["next"]),
            ("tstate.interp", t["interp"]),
            ("tstate.current_frame", t["current_frame"]),
            ("tstate.thread_id", t["thread_id"]),
            ("tstate.native_thread_id", t["native_thread_id"]),
            ("frame.previous", f["previous"]),
            ("frame.executable", f["f_code"]),
            ("frame.instr_ptr", f["prev_instr"]),
            ("frame.owner", f["owner"]),
            ("code.filename", c["co_filename"]),
            ("code.name", c["co_name"]),
            ("code.qualname", c["co_qualname"]),
            ("code.linetable", c["co_linetable"]),
            ("code.firstlineno", c["co_firstlineno"]),
            ("code.co_code_adaptive", c["co_code_adaptive"]),
            ("type.tp_name", 24),
            ("bytes.ob_sval", 32),
            ("unicode.state", a["state"]),
            ("unicode.length", a["length"]),
            ("unicode.asciiobject_size", a["sizeof"]),
            ("unicode.size", cu["sizeof"]),
        ]
        .into_iter()
        .collect();
        self.image.put(runtime, b"xdebugpy");
        for (n, name) in DEBUG_3_13_ORDER.iter().enumerate() {
            let value = values.get(name).copied().unwrap_or(0x5a5a);
            self.image.word(runtime + 8 + 8 * n as u64, value);
        }
    }
}

/// A line table in the version's format in which code unit `u` is at line
/// `first + u`, for units `0..units`.
fn line_table(minor: u8, units: u64) -> Vec<u8> {
    let mut t = Vec::new();
    match minor {
        8 | 9 => {
            for _ in 1..units {
                t.extend([2, 1]);
            }
        }
        10 => {
            t.extend([2, 0]);
            for _ in 1..units {
                t.extend([2, 1]);
            }
        }
        _ => {
            // One unit per entry: the first without columns (+0), then one-line
            // entries (+1) and, every third, a long entry (+1, end line, columns).
            t.extend([0x80 | (13 << 3), 0]);
            for u in 1..units {
                if u % 3 == 0 {
                    t.extend([0x80 | (14 << 3), 2, 0, 0x40 | 6, 1, 9]);
                } else {
                    t.extend([0x80 | (11 << 3), 4, 8]);
                }
            }
        }
    }
    t
}

#[test]
fn every_version_s_frames_are_read_from_its_own_layout() {
    for v in versions() {
        let mut m = Maker::new(&v);
        let module = m.code("<module>", "/app/solver.py", 1, 40);
        let run = m.code("Solver.run", "/app/solver.py", 30, 20);
        let step = m.code("step_λ", "/app/kernels/füße.py", 80, 12);
        let helper = m.code("helper", "/app/solver.py", 200, 8);
        let shim = m.code("<shim>", "", 1, 4);
        let v12 = v.minor >= 12;
        // Thread 1: <module> -> Solver.run (inlined Python call) -> step, entered from C.
        let mut f = m.frame(module, 37, 0, true, 0);
        if v12 {
            // Each evaluation loop starts with its shim frame.
            let s = m.frame(shim, 0, 0, false, 3);
            f = m.frame(module, 37, s, true, 0);
        }
        let f = m.frame(run, 9, f, false, 0);
        let f = if v12 {
            m.frame(shim, 0, f, false, 3)
        } else {
            f
        };
        let inner = m.frame(step, 11, f, true, 0);
        // Thread 2: helper only.
        let lone = m.frame(helper, 0, 0, true, 0);
        let runtime = m.runtime(&[(4242, inner), (4243, lone)]);
        let minor = (v.minor < 13).then_some(v.minor);
        let rt =
            Runtime::at(&m.image, runtime, minor).unwrap_or_else(|e| panic!("3.{}: {e}", v.minor));
        assert_eq!(rt.layout.version, (3, v.minor));
        let threads = rt
            .threads(&m.image)
            .unwrap_or_else(|e| panic!("3.{}: {e}", v.minor));
        let what = format!("3.{}: {threads:#?}", v.minor);
        assert_eq!(threads.len(), 2, "{what}");
        let named = v.minor >= 11;
        let expect = |f: &str, file: &str, line, entry| PyFrame {
            function: f.to_owned(),
            file: file.to_owned(),
            line: Some(line),
            entry: entry || !named,
        };
        assert_eq!(
            threads[0].frames,
            [
                expect("step_λ", "/app/kernels/füße.py", 91, true),
                expect("Solver.run", "/app/solver.py", 39, false),
                expect("<module>", "/app/solver.py", 38, true),
            ],
            "{what}"
        );
        assert_eq!(threads[0].truncated, None, "{what}");
        assert_eq!(
            threads[1].frames,
            [expect("helper", "/app/solver.py", 200, true)],
            "{what}"
        );
        let ids: Vec<Option<i32>> = threads.iter().map(|t| t.native_id).collect();
        if v.minor >= 11 {
            assert_eq!(ids, [Some(4242), Some(4243)], "{what}");
        } else {
            assert_eq!(ids, [None, None], "{what}");
        }
    }
}

#[test]
fn a_wrong_layout_or_broken_memory_is_an_error_or_a_truncated_walk_never_a_panic() {
    let v = versions().into_iter().find(|v| v.minor == 11).unwrap();
    let mut m = Maker::new(&v);
    let code = m.code("f", "/a.py", 1, 4);
    let f = m.frame(code, 0, 0, true, 0);
    let runtime = m.runtime(&[(7, f)]);
    // 3.12's layout over 3.11's objects: the thread state does not name its interpreter.
    let wrong = Runtime::at(&m.image, runtime, Some(12)).unwrap();
    let err = wrong.threads(&m.image).unwrap_err();
    assert!(err.contains("layout is not the one read"), "{err}");
    // A frame whose caller points nowhere: the walk says where it ended.
    let mut m = Maker::new(&v);
    let code = m.code("f", "/a.py", 1, 4);
    let f = m.frame(code, 0, 0xdead_0000, false, 0);
    let runtime = m.runtime(&[(7, f)]);
    let threads = Runtime::at(&m.image, runtime, Some(11))
        .unwrap()
        .threads(&m.image)
        .unwrap();
    assert_eq!(threads[0].frames.len(), 1);
    assert!(
        threads[0]
            .truncated
            .as_deref()
            .unwrap()
            .contains("cannot read")
    );
    // A code pointer to something that is not code.
    let mut m = Maker::new(&v);
    let not_code = m.string("not code");
    let f = m.frame(not_code, 0, 0, true, 0);
    let runtime = m.runtime(&[(7, f)]);
    let threads = Runtime::at(&m.image, runtime, Some(11))
        .unwrap()
        .threads(&m.image)
        .unwrap();
    assert!(
        threads[0].truncated.as_deref().unwrap().contains("\"str\""),
        "{threads:?}"
    );
    // Versions without a table, and a runtime that is not there.
    assert!(
        Runtime::at(&m.image, runtime, Some(7))
            .unwrap_err()
            .contains("older")
    );
    assert!(
        Runtime::at(&m.image, runtime, None)
            .unwrap_err()
            .contains("version")
    );
    assert!(
        Runtime::at(&m.image, 0x10, Some(11))
            .unwrap_err()
            .contains("cannot read")
    );
}

#[test]
fn where_no_symbol_names_the_runtime_a_scan_of_the_data_finds_it() {
    for v in versions().into_iter().filter(|v| v.minor <= 12) {
        let mut m = Maker::new(&v);
        let code = m.code("solve", "/app/s.py", 10, 6);
        let f = m.frame(code, 5, 0, true, 0);
        let runtime = m.runtime(&[(9, f)]);
        let whole = m.image.base..m.image.base + m.image.bytes.len() as u64;
        let found = Runtime::scan(&m.image, std::slice::from_ref(&whole), v.minor)
            .unwrap_or_else(|e| panic!("3.{}: {e}", v.minor));
        let threads = found.threads(&m.image).unwrap();
        let direct = Runtime::at(&m.image, runtime, Some(v.minor))
            .unwrap()
            .threads(&m.image)
            .unwrap();
        assert_eq!(threads, direct, "3.{}", v.minor);
        assert_eq!(threads[0].frames[0].line, Some(15), "3.{}", v.minor);
        // Data without one: said, not guessed.
        let empty = m.image.base..m.image.base + 64;
        assert!(Runtime::scan(&m.image, &[empty], v.minor).is_err());
    }
    let v13 = Runtime::scan(
        &Image {
            base: 0,
            bytes: vec![],
        },
        &[],
        13,
    )
    .unwrap_err();
    assert!(v13.contains("symbol or section only"), "{v13}");
}

#[test]
fn threads_are_matched_by_kernel_id_or_through_glibc_s_thread_descriptor() {
    use mqd_model::{Frame, ThreadStack};
    for v in versions() {
        let mut m = Maker::new(&v);
        let a = m.code("worker", "/app/w.py", 10, 4);
        let b = m.code("<module>", "/app/w.py", 1, 4);
        let fa = m.frame(a, 2, 0, true, 0);
        let fb = m.frame(b, 3, 0, true, 0);
        let runtime = m.runtime(&[(301, fa), (300, fb)]);
        // glibc's descriptor of the descriptor: 32 bits, one, at PTHREAD_TID.
        let descriptor = m.image.alloc(12);
        let d: Vec<u8> = [32u32, 1, PTHREAD_TID as u32]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        m.image.put(descriptor, &d);
        let python = format!("/usr/bin/python3.{}", v.minor);
        let native = |tid: i32| ThreadStack {
            openmp: None,
            tid,
            frames: [
                ("select", "/lib/libc.so.6"),
                (crate::merge::EVAL_LOOP, python.as_str()),
            ]
            .iter()
            .map(|(f, o)| Frame {
                function: Some((*f).into()),
                object: Some((*o).into()),
                ..Frame::default()
            })
            .collect(),
            truncated: None,
            call: None,
        };
        let mut threads = vec![native(300), native(301)];
        let found = crate::Found {
            runtime: Some(runtime),
            data: Vec::new(),
            minor_by_name: Some(v.minor),
            version_at: None,
            objects: vec![python.clone()],
            pthread_tid: Some(descriptor),
        };
        found.merge(&mut threads, &m.image).unwrap();
        let names =
            |t: &ThreadStack| -> Vec<String> { t.frames.iter().map(|f| f.label()).collect() };
        assert_eq!(
            names(&threads[0]),
            ["select", "<module> (w.py:4)"],
            "3.{}",
            v.minor
        );
        assert_eq!(
            names(&threads[1]),
            ["select", "worker (w.py:12)"],
            "3.{}",
            v.minor
        );
    }
}

proptest::proptest! {
    /// Random bytes in place of every object: an error or frames, never a panic or a
    /// walk without end.
    #[test]
    fn any_memory_is_read_without_panicking(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 4096),
        minor in 8u8..=12,
    ) {
        let image = Image { base: 0x1000, bytes };
        if let Ok(rt) = Runtime::at(&image, 0x1000, Some(minor)) {
            let _ = rt.threads(&image);
        }
    }
}
