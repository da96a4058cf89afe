//! Python frames read from outside a CPython process, as py-spy reads them: the
//! interpreter's runtime state found by its symbol, each thread's frames walked, each
//! code object's file, qualified name and line. Layouts are facts of each CPython
//! version, kept as data ([`layout`]); every read is bounded and checked, and an
//! interpreter that cannot be read leaves the native frames as they are, with why.

pub mod frames;
pub mod layout;
pub mod linetable;
pub mod merge;

pub use frames::{Interpreter, PyFrame, PyThread};
pub use layout::Layout;

use mqd_target::Memory;
use std::ops::Range;

/// A process's CPython: where its runtime state is, and how it is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// `_PyRuntime`.
    pub address: u64,
    /// Its version's layout.
    pub layout: Layout,
}

/// The most of `_PyRuntime` read to find its debug offsets.
const DEBUG_OFFSETS_READ: usize = 2048;

impl Runtime {
    /// The runtime state at `address` (the `_PyRuntime` symbol) of an interpreter of
    /// version 3.`minor` where its objects say it (`Py_Version`, a file name): 3.13 and
    /// later describe their own layout, 3.8 to 3.12 have tables here.
    pub fn at(memory: &dyn Memory, address: u64, minor: Option<u8>) -> Result<Runtime, String> {
        let mut start = vec![0u8; DEBUG_OFFSETS_READ];
        let n = memory
            .read_partial(address, &mut start)
            .map_err(|e| format!("cannot read _PyRuntime at {address:#x}: {e}"))?;
        if n < 8 {
            return Err(format!("cannot read _PyRuntime at {address:#x}"));
        }
        start.truncate(n);
        if start.starts_with(layout::DEBUG_COOKIE) {
            return Ok(Runtime {
                address,
                layout: layout::from_debug_offsets(&start)?,
            });
        }
        let minor = minor.ok_or("the interpreter's version is not known (no Py_Version, no python3.N in its file names)")?;
        Ok(Runtime {
            address,
            layout: table(
                minor,
                "its _PyRuntime does not start with its debug offsets",
            )?,
        })
    }

    /// Where nothing names `_PyRuntime`: the runtime state of 3.`minor` found in
    /// `ranges` (the interpreter's `.data` and `.bss`), as the first address whose
    /// interpreter lists thread states that name that interpreter back and whose frames
    /// read (py-spy's scan, validated the same way).
    pub fn scan(memory: &dyn Memory, ranges: &[Range<u64>], minor: u8) -> Result<Runtime, String> {
        let layout = table(
            minor,
            "its runtime state is found by its symbol or section only",
        )?;
        let head = layout.runtime_interpreters_head;
        for range in ranges {
            let len = (range.end.saturating_sub(range.start)).min(MAX_SCAN);
            let mut data = vec![0u8; len as usize];
            let n = memory.read_partial(range.start, &mut data).unwrap_or(0);
            let words = data[..n]
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
            for (i, interp) in words.enumerate() {
                let Some(address) = (range.start + 8 * i as u64).checked_sub(head) else {
                    continue;
                };
                if interp == 0 || interp % 8 != 0 || address < range.start {
                    continue;
                }
                let runtime = Runtime {
                    address,
                    layout: layout.clone(),
                };
                if runtime.threads(memory).is_ok_and(|t| {
                    t.iter()
                        .any(|t| !t.frames.is_empty() && t.truncated.is_none())
                }) {
                    return Ok(runtime);
                }
            }
        }
        Err(format!(
            "no symbol names _PyRuntime and no runtime state of Python 3.{minor} was found in the interpreter's data"
        ))
    }

    /// Every thread's Python frames.
    pub fn threads(&self, memory: &dyn Memory) -> Result<Vec<PyThread>, String> {
        Interpreter::new(memory, &self.layout, self.address).threads()
    }
}

/// The table of 3.`minor`, or why there is none: older than mqd reads, or a later
/// version that describes itself, whose `later` (what was missing) is said.
fn table(minor: u8, later: &str) -> Result<Layout, String> {
    match layout::of_version(minor) {
        Some(layout) => Ok(layout.clone()),
        None if minor >= 13 => Err(format!("Python 3.{minor}: {later}")),
        None => Err(format!(
            "Python 3.{minor} is older than mqd reads (3.8 and later)"
        )),
    }
}

/// The most of an interpreter's data a scan reads, per range.
const MAX_SCAN: u64 = 16 << 20;

/// The minor version of a `Py_Version` value (`PY_VERSION_HEX`), if it is 3.x.
pub fn minor_of_hex(version: u64) -> Option<u8> {
    ((version >> 24) & 0xff == 3).then_some(((version >> 16) & 0xff) as u8)
}

/// The minor version a file name says: `python3.11`, `libpython3.12.so.1.0`.
pub fn minor_of_name(path: &str) -> Option<u8> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("lib")
        .unwrap_or(name)
        .strip_prefix("python3.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = &rest[digits.len()..];
    if !(after.is_empty()
        || after.starts_with(".so")
        || after.starts_with('d')
        || after.starts_with('m'))
    {
        return None;
    }
    digits.parse().ok()
}

/// A process's CPython as its objects show it, before its memory is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `_PyRuntime`, where a symbol or its section names it.
    pub runtime: Option<u64>,
    /// Where to look for it otherwise: the interpreter's `.data` and `.bss`.
    pub data: Vec<Range<u64>>,
    /// `Py_Version` (3.11+).
    pub version_at: Option<u64>,
    /// The version its objects' names say.
    pub minor_by_name: Option<u8>,
    /// Its objects (the executable, or `libpython`).
    pub objects: Vec<String>,
    /// glibc's `_thread_db_pthread_tid`: where a thread descriptor keeps its kernel
    /// thread id (its offset is the third `u32`), for versions that record only the
    /// `pthread_t`.
    pub pthread_tid: Option<u64>,
}

impl Found {
    /// Each thread's Python frames merged into its native ones: threads matched by
    /// their kernel ids (3.11+), else by the one glibc keeps in the thread's descriptor
    /// (its `pthread_t`), else only a process's one Python thread, to its one thread
    /// running the evaluation loop.
    pub fn merge(
        &self,
        threads: &mut [mqd_model::ThreadStack],
        memory: &dyn Memory,
    ) -> Result<(), String> {
        let minor = self
            .version_at
            .and_then(|at| {
                let mut b = [0u8; 8];
                memory.read_memory(at, &mut b).ok()?;
                minor_of_hex(u64::from_le_bytes(b))
            })
            .or(self.minor_by_name);
        let runtime = match (self.runtime, minor) {
            (Some(at), _) => Runtime::at(memory, at, minor)?,
            (None, Some(minor)) => Runtime::scan(memory, &self.data, minor)?,
            (None, None) => {
                return Err("nothing names _PyRuntime, nor the interpreter's version".into());
            }
        };
        let python = runtime.threads(memory)?;
        let interpreter = |object: &str| self.objects.iter().any(|o| o == object);
        // One 32-bit id.
        let tid_offset = self
            .pthread_tid
            .and_then(|at| mqd_target::ThreadDbField::read(memory, at))
            .filter(|f| f.bits == 32 && f.count == 1)
            .map(|f| u64::from(f.offset));
        let kernel_id = |py: &PyThread| -> Option<i32> {
            py.native_id.or_else(|| {
                let mut b = [0u8; 4];
                memory.read_memory(py.pthread? + tid_offset?, &mut b).ok()?;
                Some(i32::from_le_bytes(b)).filter(|&t| t > 0)
            })
        };
        for py in &python {
            let thread = match kernel_id(py) {
                Some(id) => threads.iter_mut().find(|t| t.tid == id),
                None if python.len() == 1 => {
                    let mut running = threads.iter_mut().filter(|t| {
                        t.frames
                            .iter()
                            .any(|f| f.function.as_deref() == Some(merge::EVAL_LOOP))
                    });
                    match (running.next(), running.next()) {
                        (Some(t), None) => Some(t),
                        _ => None,
                    }
                }
                None => None,
            };
            if let Some(thread) = thread {
                merge::merge(thread, py, &interpreter);
            }
        }
        Ok(())
    }
}
