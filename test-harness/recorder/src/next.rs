//! The next definition of each binding: found once, on first call, by `dlsym`.

use crate::{BINDINGS, PROCEDURES, Word};
use std::sync::atomic::{AtomicPtr, Ordering};

#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
static NEXT: [AtomicPtr<libc::c_void>; PROCEDURES] = [UNRESOLVED; PROCEDURES];

/// What a binding no library defines returns: a program linked against it cannot have
/// been loaded without us, so this is never reached in a job that ran without the
/// recorder. An error code, never a crash.
extern "C" fn missing() -> Word {
    // MPI_ERR_OTHER in MPICH and Open MPI alike.
    16
}

/// A symbol by name: the next definition after this library, else the MPI's `PMPI_` one.
pub(crate) fn symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !next.is_null() {
        return next;
    }
    let mut profiling = b"P".to_vec();
    profiling.extend_from_slice(name.to_bytes_with_nul());
    // SAFETY: as above.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, profiling.as_ptr().cast()) }
}

/// A data object of the MPI by name, as the program sees it: the first definition in
/// the global scope (an executable that refers to it may hold a copy of it, copy
/// relocated, which the library's own definition no longer is).
pub(crate) fn object(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// The next definition of binding `id`, as the function type `F` its prototype has.
///
/// # Safety
/// `F` must be an `extern "C"` function pointer type taking the binding's words.
pub(crate) unsafe fn procedure<F: Copy>(id: usize) -> F {
    let mut found = NEXT[id].load(Ordering::Relaxed);
    if found.is_null() {
        found = symbol(BINDINGS[id].name);
        if found.is_null() {
            found = missing as *mut libc::c_void;
        }
        NEXT[id].store(found, Ordering::Relaxed);
    }
    // SAFETY: a function pointer is one word, and the caller names its type.
    unsafe { std::mem::transmute_copy::<*mut libc::c_void, F>(&found) }
}
