//! The callbacks an OMPD library calls, served from a [`Source`]: the process's memory,
//! its symbols (a thread's own for thread-local ones), its type sizes and its threads.
//!
//! The library gets two kinds of context pointers back from the host: the address
//! space's (a [`Space`]) and a thread's (a [`ThreadContext`] the space owns). Both stay
//! where they are for as long as the library holds handles made with them. Every
//! callback checks that a thread context is one of its space's before it believes it,
//! and no panic leaves a callback.

use crate::abi::{self, Address, Context, Rc, TypeSizes};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A thread of the process: its kernel id and its `pthread_t` (the thread pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsThread {
    /// The kernel's thread id.
    pub tid: i32,
    /// glibc's `pthread_t`, where the thread's registers gave its thread pointer.
    pub pthread: Option<u64>,
}

/// What the callbacks are served from.
pub trait Source {
    /// Reads `buf.len()` bytes at `addr`, all or nothing.
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool;
    /// The address of the symbol `name`; with `thread`, a thread-local variable's in that
    /// thread (else the symbol as a global one).
    fn symbol(&self, name: &str, thread: Option<&OsThread>) -> Option<u64>;
    /// The sizes of C's types in the process.
    fn sizes(&self) -> TypeSizes;
}

/// What the library asked of the process, for the cost of a rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Memory reads (strings included).
    pub reads: u64,
    /// Bytes read (of reads that succeeded).
    pub bytes: u64,
    /// Symbol lookups.
    pub symbols: u64,
    /// Thread contexts asked for by thread id.
    pub thread_lookups: u64,
    /// Microseconds the whole read of the process took, as its reader measured it.
    #[serde(default)]
    pub microseconds: u64,
}

/// A thread's context, as the library holds it.
pub struct ThreadContext {
    thread: OsThread,
}

/// The address space's context: the source, its threads' contexts, the counters.
pub struct Space<'a> {
    source: &'a dyn Source,
    /// Made once and never grown: the library holds pointers into it.
    threads: Vec<ThreadContext>,
    counters: Cell<Counters>,
}

impl<'a> Space<'a> {
    /// The context of a process served by `source`, with `threads`.
    pub fn new(source: &'a dyn Source, threads: &[OsThread]) -> Space<'a> {
        Space {
            source,
            threads: threads
                .iter()
                .map(|&thread| ThreadContext { thread })
                .collect(),
            counters: Cell::new(Counters::default()),
        }
    }

    /// The pointer the library gets.
    pub fn as_context(&self) -> *mut Context {
        self as *const Space as *mut Context
    }

    /// What the library asked so far.
    pub fn counters(&self) -> Counters {
        self.counters.get()
    }

    fn count(&self, f: impl FnOnce(&mut Counters)) {
        let mut c = self.counters.get();
        f(&mut c);
        self.counters.set(c);
    }

    /// The thread behind a thread context the library gave back, if it is one of ours.
    fn thread(&self, context: *mut Context) -> Option<&OsThread> {
        self.threads
            .iter()
            .find(|t| std::ptr::eq(*t, context as *const ThreadContext))
            .map(|t| &t.thread)
    }
}

/// The table given to `ompd_initialize`: plain functions, no state of their own.
pub static CALLBACKS: abi::Callbacks = abi::Callbacks {
    alloc_memory,
    free_memory,
    print_string,
    sizeof_type,
    symbol_addr_lookup,
    read_memory,
    write_memory,
    read_string,
    device_to_host,
    host_to_device,
    get_thread_context_for_thread_id,
};

/// Runs a callback's body; a panic is an error to the library, never an unwind into it.
fn guarded(body: impl FnOnce() -> Rc) -> Rc {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(abi::RC_ERROR)
}

/// The space behind a context pointer.
///
/// # Safety
/// `context` is null or a pointer [`Space::as_context`] gave, to a space alive now.
unsafe fn space<'s>(context: *mut Context) -> Option<&'s Space<'s>> {
    // SAFETY: by the function's contract.
    unsafe { (context as *const Space).as_ref() }
}

unsafe extern "C" fn alloc_memory(bytes: u64, out: *mut *mut c_void) -> Rc {
    guarded(|| {
        if out.is_null() {
            return abi::RC_BAD_INPUT;
        }
        // Zeroed: libraries leave fields of their handles unset.
        // SAFETY: calloc of a size; the library frees it through free_memory.
        let p = unsafe { libc::calloc(1, usize::try_from(bytes.max(1)).unwrap_or(usize::MAX)) };
        // SAFETY: out is the library's pointer to write to.
        unsafe { *out = p };
        if p.is_null() {
            abi::RC_NOMEM
        } else {
            abi::RC_OK
        }
    })
}

unsafe extern "C" fn free_memory(p: *mut c_void) -> Rc {
    // SAFETY: p came from alloc_memory (calloc), or is null.
    guarded(|| unsafe {
        libc::free(p);
        abi::RC_OK
    })
}

unsafe extern "C" fn print_string(_text: *const c_char, _category: c_int) -> Rc {
    // The library's diagnostics are not mqd's output.
    abi::RC_OK
}

unsafe extern "C" fn sizeof_type(context: *mut Context, out: *mut TypeSizes) -> Rc {
    guarded(|| {
        // SAFETY: the context is one the host gave.
        let Some(space) = (unsafe { space(context) }) else {
            return abi::RC_STALE_HANDLE;
        };
        if out.is_null() {
            return abi::RC_BAD_INPUT;
        }
        // SAFETY: out points at the library's struct.
        unsafe { *out = space.source.sizes() };
        abi::RC_OK
    })
}

unsafe extern "C" fn symbol_addr_lookup(
    context: *mut Context,
    thread: *mut Context,
    name: *const c_char,
    out: *mut Address,
    _file: *const c_char,
) -> Rc {
    guarded(|| {
        // SAFETY: the context is one the host gave.
        let Some(space) = (unsafe { space(context) }) else {
            return abi::RC_STALE_HANDLE;
        };
        if name.is_null() || out.is_null() {
            return abi::RC_BAD_INPUT;
        }
        // SAFETY: a NUL-terminated name from the library.
        let Ok(name) = unsafe { CStr::from_ptr(name) }.to_str() else {
            return abi::RC_BAD_INPUT;
        };
        let thread = if thread.is_null() {
            None
        } else {
            match space.thread(thread) {
                Some(t) => Some(t),
                None => return abi::RC_STALE_HANDLE,
            }
        };
        space.count(|c| c.symbols += 1);
        match space.source.symbol(name, thread) {
            Some(address) => {
                // SAFETY: out points at the library's struct.
                unsafe {
                    *out = Address {
                        segment: 0,
                        address,
                    }
                };
                abi::RC_OK
            }
            None => abi::RC_ERROR,
        }
    })
}

unsafe extern "C" fn read_memory(
    context: *mut Context,
    _thread: *mut Context,
    addr: *const Address,
    bytes: u64,
    buffer: *mut c_void,
) -> Rc {
    guarded(|| {
        // SAFETY: the library's arguments, as the callback's contract has them.
        let (space, at, len) = match unsafe { read_arguments(context, addr, bytes, buffer) } {
            Ok(read) => read,
            Err(rc) => return rc,
        };
        let mut bytes = vec![0u8; len];
        if !space.source.read(at, &mut bytes) {
            return abi::RC_ERROR;
        }
        space.count(|c| c.bytes += len as u64);
        // SAFETY: the library's buffer holds `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer as *mut u8, len) };
        abi::RC_OK
    })
}

/// Largest read a library may ask: its structures are small, a corrupt size is not.
const MAX_READ: usize = 16 << 20;

/// A read's space, address and length, checked and counted.
///
/// # Safety
/// `context` is null or a live space's; `addr` null or the library's address.
unsafe fn read_arguments<'s>(
    context: *mut Context,
    addr: *const Address,
    bytes: u64,
    buffer: *mut c_void,
) -> Result<(&'s Space<'s>, u64, usize), Rc> {
    // SAFETY: by the function's contract.
    let space = unsafe { space(context) }.ok_or(abi::RC_STALE_HANDLE)?;
    // SAFETY: as above.
    let addr = unsafe { addr.as_ref() }.ok_or(abi::RC_BAD_INPUT)?;
    let len = usize::try_from(bytes).map_err(|_| abi::RC_BAD_INPUT)?;
    if buffer.is_null() && len > 0 || len > MAX_READ {
        return Err(abi::RC_BAD_INPUT);
    }
    space.count(|c| c.reads += 1);
    Ok((space, addr.address, len))
}

unsafe extern "C" fn read_string(
    context: *mut Context,
    _thread: *mut Context,
    addr: *const Address,
    bytes: u64,
    buffer: *mut c_void,
) -> Rc {
    guarded(|| {
        // SAFETY: the library's arguments, as the callback's contract has them.
        let (space, at, len) = match unsafe { read_arguments(context, addr, bytes, buffer) } {
            Ok(read) => read,
            Err(rc) => return rc,
        };
        // Up to the NUL or `len` bytes, a chunk at a time, then byte by byte where a
        // chunk crosses into unreadable memory.
        let mut text = Vec::with_capacity(len.min(256));
        let mut at = at;
        while text.len() < len {
            let mut chunk = vec![0u8; (len - text.len()).min(64)];
            if !space.source.read(at, &mut chunk) {
                chunk.truncate(1);
                if !space.source.read(at, &mut chunk) {
                    break;
                }
            }
            at = at.wrapping_add(chunk.len() as u64);
            match chunk.iter().position(|&b| b == 0) {
                Some(nul) => {
                    text.extend_from_slice(&chunk[..=nul]);
                    break;
                }
                None => text.extend_from_slice(&chunk),
            }
        }
        if text.is_empty() {
            return abi::RC_ERROR;
        }
        space.count(|c| c.bytes += text.len() as u64);
        // SAFETY: the library's buffer holds `len` bytes; `text` is no longer.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buffer as *mut u8, text.len()) };
        abi::RC_OK
    })
}

unsafe extern "C" fn write_memory(
    _context: *mut Context,
    _thread: *mut Context,
    _addr: *const Address,
    _bytes: u64,
    _buffer: *const c_void,
) -> Rc {
    // mqd reads a process; it never changes one.
    abi::RC_UNSUPPORTED
}

/// The target is the host's own architecture: its values are the host's as they are.
/// Libraries convert in place, so input and output may be one buffer.
unsafe extern "C" fn device_to_host(
    _context: *mut Context,
    input: *const c_void,
    unit: u64,
    count: u64,
    output: *mut c_void,
) -> Rc {
    guarded(|| {
        let Some(len) = unit
            .checked_mul(count)
            .and_then(|n| usize::try_from(n).ok())
        else {
            return abi::RC_BAD_INPUT;
        };
        if len > 0 && (input.is_null() || output.is_null()) {
            return abi::RC_BAD_INPUT;
        }
        // SAFETY: both buffers hold `len` bytes; `copy` allows them to overlap.
        unsafe { std::ptr::copy(input as *const u8, output as *mut u8, len) };
        abi::RC_OK
    })
}

unsafe extern "C" fn host_to_device(
    context: *mut Context,
    input: *const c_void,
    unit: u64,
    count: u64,
    output: *mut c_void,
) -> Rc {
    // SAFETY: the same contract.
    unsafe { device_to_host(context, input, unit, count, output) }
}

unsafe extern "C" fn get_thread_context_for_thread_id(
    context: *mut Context,
    kind: u64,
    size: u64,
    id: *const c_void,
    out: *mut *mut Context,
) -> Rc {
    guarded(|| {
        // SAFETY: the context is one the host gave.
        let Some(space) = (unsafe { space(context) }) else {
            return abi::RC_STALE_HANDLE;
        };
        if id.is_null() || out.is_null() {
            return abi::RC_BAD_INPUT;
        }
        space.count(|c| c.thread_lookups += 1);
        // SAFETY: `id` holds `size` bytes (checked against the kind's size first).
        let value = match (kind, size) {
            (abi::THREAD_ID_PTHREAD, 8) | (abi::THREAD_ID_LWP, 8) => unsafe {
                (id as *const u64).read_unaligned()
            },
            (abi::THREAD_ID_LWP, 4) => u64::from(unsafe { (id as *const u32).read_unaligned() }),
            (abi::THREAD_ID_PTHREAD | abi::THREAD_ID_LWP, _) => return abi::RC_BAD_INPUT,
            _ => return abi::RC_UNSUPPORTED,
        };
        let found = space.threads.iter().find(|t| match kind {
            abi::THREAD_ID_PTHREAD => t.thread.pthread == Some(value),
            _ => u64::try_from(t.thread.tid).ok() == Some(value),
        });
        match found {
            Some(t) => {
                // SAFETY: out is the library's pointer to write to.
                unsafe { *out = t as *const ThreadContext as *mut Context };
                abi::RC_OK
            }
            None => abi::RC_UNAVAILABLE,
        }
    })
}

#[cfg(test)]
mod tests;
