//! The debugger's side of the interface as the library uses it: the global basic
//! callback table, allocation through `mqs_malloc_fp`, and a growable array that
//! lives in debugger memory so that nothing kept between calls uses Rust's heap.

use crate::error::{Error, Result};
use mqd_abi::types::mqs_basic_callbacks;
use std::ffi::{CStr, c_void};
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The one global: the debugger's basic callback table, which it keeps alive.
static BASIC: AtomicPtr<mqs_basic_callbacks> = AtomicPtr::new(ptr::null_mut());

/// Records the table given to `mqs_setup_basic_callbacks`.
pub(crate) fn set_basic(table: *const mqs_basic_callbacks) {
    BASIC.store(table.cast_mut(), Ordering::Release);
}

/// The basic table, or an error when the debugger never gave a usable one.
pub(crate) fn basic() -> Result<&'static mqs_basic_callbacks> {
    let table = BASIC.load(Ordering::Acquire);
    // SAFETY: the debugger promises the table outlives every call into the library.
    let table = unsafe { table.as_ref() }.ok_or(Error::NoBasicCallbacks)?;
    if table.mqs_malloc_fp.is_none() || table.mqs_free_fp.is_none() {
        return Err(Error::NoBasicCallbacks);
    }
    Ok(table)
}

/// Sends one diagnostic line to the debugger, if it takes them.
pub(crate) fn dprint(line: &CStr) {
    if let Ok(table) = basic()
        && let Some(print) = table.mqs_dprints_fp
    {
        // SAFETY: a NUL-terminated string valid for the call.
        unsafe { print(line.as_ptr()) };
    }
}

/// Raw memory from the debugger, aligned for `T` or refused.
fn allocate_bytes<T>(bytes: usize) -> Result<NonNull<T>> {
    let table = basic()?;
    let malloc = table.mqs_malloc_fp.ok_or(Error::NoBasicCallbacks)?;
    // SAFETY: plain C allocation call.
    let raw = unsafe { malloc(bytes.max(1)) };
    let raw = NonNull::new(raw.cast::<T>()).ok_or(Error::OutOfMemory)?;
    if !(raw.as_ptr() as usize).is_multiple_of(align_of::<T>()) {
        release(raw.as_ptr().cast());
        return Err(Error::OutOfMemory);
    }
    Ok(raw)
}

/// Gives memory back to the debugger.
fn release(raw: *mut c_void) {
    if raw.is_null() {
        return;
    }
    if let Ok(table) = basic()
        && let Some(free) = table.mqs_free_fp
    {
        // SAFETY: `raw` came from the same debugger's malloc.
        unsafe { free(raw) };
    }
}

/// Moves `value` into debugger memory.
pub(crate) fn boxed<T>(value: T) -> Result<NonNull<T>> {
    let slot = allocate_bytes::<T>(size_of::<T>())?;
    // SAFETY: fresh, aligned, large enough.
    unsafe { slot.as_ptr().write(value) };
    Ok(slot)
}

/// Drops a value made by [`boxed`] and frees its memory.
///
/// # Safety
/// `value` must come from [`boxed`] and not be used afterwards.
pub(crate) unsafe fn unbox<T>(value: NonNull<T>) {
    // SAFETY: by the caller's contract.
    unsafe { ptr::drop_in_place(value.as_ptr()) };
    release(value.as_ptr().cast());
}

/// A growable array of plain values kept in debugger memory.
pub(crate) struct DebuggerVec<T: Copy> {
    data: *mut T,
    len: usize,
    capacity: usize,
}

impl<T: Copy> DebuggerVec<T> {
    /// An empty array; allocates nothing.
    pub(crate) const fn new() -> Self {
        DebuggerVec {
            data: ptr::null_mut(),
            len: 0,
            capacity: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Makes room for `additional` more values.
    pub(crate) fn reserve(&mut self, additional: usize) -> Result<()> {
        let needed = self.len.checked_add(additional).ok_or(Error::OutOfMemory)?;
        if needed <= self.capacity {
            return Ok(());
        }
        let capacity = needed.max(self.capacity.saturating_mul(2)).max(8);
        let bytes = capacity
            .checked_mul(size_of::<T>())
            .ok_or(Error::OutOfMemory)?;
        let fresh = allocate_bytes::<T>(bytes)?.as_ptr();
        if self.len > 0 {
            // SAFETY: both regions hold at least `len` values and do not overlap.
            unsafe { ptr::copy_nonoverlapping(self.data, fresh, self.len) };
        }
        release(self.data.cast());
        self.data = fresh;
        self.capacity = capacity;
        Ok(())
    }

    pub(crate) fn push(&mut self, value: T) -> Result<()> {
        self.reserve(1)?;
        // SAFETY: reserve made room for one more.
        unsafe { self.data.add(self.len).write(value) };
        self.len += 1;
        Ok(())
    }

    /// Grows to `len` values, filling new slots with `value`.
    pub(crate) fn resize(&mut self, len: usize, value: T) -> Result<()> {
        if len > self.len {
            self.reserve(len - self.len)?;
            for i in self.len..len {
                // SAFETY: within capacity.
                unsafe { self.data.add(i).write(value) };
            }
        }
        self.len = len;
        Ok(())
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        if self.data.is_null() {
            return &[];
        }
        // SAFETY: `len` initialised values.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        if self.data.is_null() {
            return &mut [];
        }
        // SAFETY: `len` initialised values, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }
}

impl<T: Copy> Drop for DebuggerVec<T> {
    fn drop(&mut self) {
        release(self.data.cast());
    }
}
