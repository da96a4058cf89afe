//! Where CPython keeps what a frame reader needs, version by version (x86-64, a release
//! build: no `Py_TRACE_REFS`, no free threading). 3.8 to 3.12 are tables of offsets,
//! facts of CPython's headers (`Include/internal/pycore_runtime.h`, `pycore_interp.h`,
//! `pycore_frame.h`, `Include/cpython/pystate.h`, `code.h`, `unicodeobject.h`) measured
//! with `offsetof` against each release's installed headers and checked in live
//! processes. 3.13 and later describe themselves: `_PyRuntime` starts with
//! `_Py_DebugOffsets`, whose own layout is a fact of each minor version.

use crate::linetable::Format;

/// How a thread's innermost frame is reached, and how frames link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// 3.8-3.10: `tstate->frame`, frame objects linked by `f_back`.
    FrameObjects { tstate_frame: u64 },
    /// 3.11, 3.12: `tstate->cframe->current_frame`.
    CFrame {
        tstate_cframe: u64,
        cframe_current: u64,
    },
    /// 3.13+: `tstate->current_frame`.
    CurrentFrame { tstate_current: u64 },
}

/// Where a frame says which instruction it is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instr {
    /// An `int` instruction index (`f_lasti`) in units of `unit` bytes.
    Lasti { offset: u64, unit: u64 },
    /// A pointer into the code object's instructions, which start at `code_adaptive`
    /// in it: 3.11/3.12's `prev_instr` points within the current instruction or its
    /// inline caches, 3.13's `instr_ptr` at its start; either maps to its line.
    Pointer { offset: u64, code_adaptive: u64 },
}

/// The offsets of one CPython minor version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// (3, minor).
    pub version: (u8, u8),
    /// `_PyRuntime.interpreters.head`.
    pub runtime_interpreters_head: u64,
    /// `PyInterpreterState.next`.
    pub interp_next: u64,
    /// `PyInterpreterState.threads.head` (`tstate_head` before 3.11).
    pub interp_threads_head: u64,
    /// `PyThreadState.next`.
    pub tstate_next: u64,
    /// `PyThreadState.interp`.
    pub tstate_interp: u64,
    /// `PyThreadState.native_thread_id` (3.11+).
    pub tstate_native_thread_id: Option<u64>,
    /// `PyThreadState.thread_id`: the thread's `pthread_t`.
    pub tstate_thread_id: u64,
    /// The innermost frame.
    pub walk: Walk,
    /// The frame's caller: `f_back`, `previous`.
    pub frame_previous: u64,
    /// The frame's code object: `f_code`, `f_executable`.
    pub frame_code: u64,
    /// Its instruction.
    pub frame_instr: Instr,
    /// `_PyInterpreterFrame.owner` (3.11+).
    pub frame_owner: Option<u64>,
    /// The owner of the shim frames an evaluation loop pushes (3.12+), to be skipped.
    pub owned_by_cstack: Option<u8>,
    /// `_PyInterpreterFrame.is_entry` (3.11 only).
    pub frame_is_entry: Option<u64>,
    /// `co_qualname` (3.11+), else `co_name`.
    pub code_name: u64,
    /// `co_filename`.
    pub code_filename: u64,
    /// `co_firstlineno`.
    pub code_firstlineno: u64,
    /// `co_lnotab` / `co_linetable`.
    pub code_linetable: u64,
    /// The line table's format.
    pub linetable: Format,
    /// `PyTypeObject.tp_name`.
    pub type_name: u64,
    /// `PyASCIIObject.state`.
    pub unicode_state: u64,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters are.
    pub unicode_ascii_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: where other compact strings' are.
    pub unicode_compact_size: u64,
    /// `PyBytesObject.ob_sval`.
    pub bytes_data: u64,
}

/// Offsets common to the frame-object versions (3.8-3.10).
const fn frame_objects(minor: u8, lasti: u64, unit: u64, format: Format) -> Layout {
    Layout {
        version: (3, minor),
        runtime_interpreters_head: 32,
        interp_next: 0,
        interp_threads_head: 8,
        tstate_next: 8,
        tstate_interp: 16,
        tstate_native_thread_id: None,
        tstate_thread_id: 176,
        walk: Walk::FrameObjects { tstate_frame: 24 },
        frame_previous: 24,
        frame_code: 32,
        frame_instr: Instr::Lasti {
            offset: lasti,
            unit,
        },
        frame_owner: None,
        owned_by_cstack: None,
        frame_is_entry: None,
        code_name: 112,
        code_filename: 104,
        code_firstlineno: 40,
        code_linetable: 120,
        linetable: format,
        type_name: 24,
        unicode_state: 32,
        unicode_ascii_size: 48,
        unicode_compact_size: 72,
        bytes_data: 32,
    }
}

const V3_8: Layout = frame_objects(8, 104, 1, Format::Lnotab);
const V3_9: Layout = frame_objects(9, 104, 1, Format::Lnotab);
const V3_10: Layout = frame_objects(10, 96, 2, Format::Pep626);

const V3_11: Layout = Layout {
    version: (3, 11),
    runtime_interpreters_head: 40,
    interp_next: 0,
    interp_threads_head: 16,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_native_thread_id: Some(160),
    tstate_thread_id: 152,
    walk: Walk::CFrame {
        tstate_cframe: 56,
        cframe_current: 8,
    },
    frame_previous: 48,
    frame_code: 32,
    frame_instr: Instr::Pointer {
        offset: 56,
        code_adaptive: 184,
    },
    frame_owner: Some(69),
    owned_by_cstack: None,
    frame_is_entry: Some(68),
    code_name: 128,
    code_filename: 112,
    code_firstlineno: 72,
    code_linetable: 136,
    linetable: Format::Locations,
    type_name: 24,
    unicode_state: 32,
    unicode_ascii_size: 48,
    unicode_compact_size: 72,
    bytes_data: 32,
};

const V3_12: Layout = Layout {
    version: (3, 12),
    runtime_interpreters_head: 40,
    interp_next: 0,
    interp_threads_head: 72,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_native_thread_id: Some(144),
    tstate_thread_id: 136,
    walk: Walk::CFrame {
        tstate_cframe: 56,
        cframe_current: 0,
    },
    frame_previous: 8,
    frame_code: 0,
    frame_instr: Instr::Pointer {
        offset: 56,
        code_adaptive: 192,
    },
    frame_owner: Some(70),
    owned_by_cstack: Some(3),
    frame_is_entry: None,
    code_name: 128,
    code_filename: 112,
    code_firstlineno: 68,
    code_linetable: 136,
    linetable: Format::Locations,
    type_name: 24,
    unicode_state: 32,
    unicode_ascii_size: 40,
    unicode_compact_size: 56,
    bytes_data: 32,
};

/// The layout of 3.`minor` where it is a table here (3.8-3.12).
pub fn of_version(minor: u8) -> Option<&'static Layout> {
    match minor {
        8 => Some(&V3_8),
        9 => Some(&V3_9),
        10 => Some(&V3_10),
        11 => Some(&V3_11),
        12 => Some(&V3_12),
        _ => None,
    }
}

/// `_Py_DebugOffsets`' cookie, at the start of `_PyRuntime` from 3.13 on.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Where a minor version keeps each offset mqd reads inside `_Py_DebugOffsets` (the
/// table is `char cookie[8]` then `uint64_t`s, its order a fact of each version).
struct DebugFields {
    interpreters_head: usize,
    interp_next: usize,
    interp_threads_head: usize,
    tstate_next: usize,
    tstate_interp: usize,
    tstate_current_frame: usize,
    tstate_thread_id: usize,
    tstate_native_thread_id: usize,
    frame_previous: usize,
    frame_executable: usize,
    frame_instr_ptr: usize,
    frame_owner: usize,
    code_filename: usize,
    code_qualname: usize,
    code_linetable: usize,
    code_firstlineno: usize,
    code_adaptive: usize,
    type_name: usize,
    bytes_sval: usize,
    unicode_state: usize,
    unicode_ascii_size: usize,
    /// Smallest table that holds them all.
    size: usize,
}

/// 3.13's `_Py_DebugOffsets` (584 bytes).
const DEBUG_3_13: DebugFields = DebugFields {
    interpreters_head: 40,
    interp_next: 64,
    interp_threads_head: 72,
    tstate_next: 168,
    tstate_interp: 176,
    tstate_current_frame: 184,
    tstate_thread_id: 192,
    tstate_native_thread_id: 200,
    frame_previous: 232,
    frame_executable: 240,
    frame_instr_ptr: 248,
    frame_owner: 264,
    code_filename: 280,
    code_qualname: 296,
    code_linetable: 304,
    code_firstlineno: 312,
    code_adaptive: 344,
    type_name: 376,
    bytes_sval: 528,
    unicode_state: 544,
    unicode_ascii_size: 560,
    size: 584,
};

/// The layout `_Py_DebugOffsets` describes (`table`: the start of `_PyRuntime`), or why
/// it cannot be had.
pub fn from_debug_offsets(table: &[u8]) -> Result<Layout, String> {
    if table.get(..8) != Some(&DEBUG_COOKIE[..]) {
        return Err(
            "_PyRuntime does not start with CPython's debug offsets (no \"xdebugpy\")".into(),
        );
    }
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(table.get(at..at + 8)?.try_into().ok()?))
    };
    let version = word(8).ok_or("the debug offsets are cut short")?;
    let (major, minor) = ((version >> 24) & 0xff, (version >> 16) & 0xff);
    if major != 3 || minor < 13 {
        return Err(format!("the debug offsets say version {version:#x}"));
    }
    if word(16) != Some(0) {
        return Err(format!(
            "Python 3.{minor} is a free-threaded build, whose objects mqd does not read yet"
        ));
    }
    let fields = match minor {
        13 => &DEBUG_3_13,
        _ => {
            return Err(format!(
                "Python 3.{minor}'s debug offsets are laid out in a way mqd does not know (it knows 3.13's)"
            ));
        }
    };
    if table.len() < fields.size {
        return Err("the debug offsets are cut short".into());
    }
    let at = |field: usize| word(field).expect("within the size checked");
    let ascii = at(fields.unicode_ascii_size);
    Ok(Layout {
        version: (3, minor as u8),
        runtime_interpreters_head: at(fields.interpreters_head),
        interp_next: at(fields.interp_next),
        interp_threads_head: at(fields.interp_threads_head),
        tstate_next: at(fields.tstate_next),
        tstate_interp: at(fields.tstate_interp),
        tstate_native_thread_id: Some(at(fields.tstate_native_thread_id)),
        tstate_thread_id: at(fields.tstate_thread_id),
        walk: Walk::CurrentFrame {
            tstate_current: at(fields.tstate_current_frame),
        },
        frame_previous: at(fields.frame_previous),
        frame_code: at(fields.frame_executable),
        frame_instr: Instr::Pointer {
            offset: at(fields.frame_instr_ptr),
            code_adaptive: at(fields.code_adaptive),
        },
        frame_owner: Some(at(fields.frame_owner)),
        owned_by_cstack: Some(3),
        frame_is_entry: None,
        code_name: at(fields.code_qualname),
        code_filename: at(fields.code_filename),
        code_firstlineno: at(fields.code_firstlineno),
        code_linetable: at(fields.code_linetable),
        linetable: Format::Locations,
        type_name: at(fields.type_name),
        unicode_state: at(fields.unicode_state),
        unicode_ascii_size: ascii,
        // PyCompactUnicodeObject: utf8_length and utf8 after the ASCII header.
        unicode_compact_size: ascii + 16,
        bytes_data: at(fields.bytes_sval),
    })
}

#[cfg(test)]
mod tests;
