//! The next definition of each binding: found once, on first call, by `dlsym`.

use crate::{BINDINGS, PROCEDURES, Word};
use std::sync::atomic::{AtomicPtr, Ordering};

#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
static NEXT: [AtomicPtr<libc::c_void>; PROCEDURES] = [UNRESOLVED; PROCEDURES];

/// What a binding returns where no MPI defines it: an error code, never a crash.
extern "C" fn missing() -> Word {
    // MPI_ERR_OTHER in MPICH and Open MPI alike.
    16
}

/// A symbol by name: the next definition after this library, else the MPI's `PMPI_` one
/// wherever the MPI is ([`anywhere`]).
pub(crate) fn symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !next.is_null() {
        return next;
    }
    let mut profiling = b"P".to_vec();
    profiling.extend_from_slice(name.to_bytes_with_nul());
    let profiling = std::ffi::CStr::from_bytes_with_nul(&profiling).unwrap_or(c"");
    anywhere(profiling)
}

/// A data object (or a `PMPI_` procedure) of the MPI by name, as the program sees it:
/// the first definition in the global scope (an executable that refers to it may hold a
/// copy of it, copy relocated, which the library's own definition no longer is), else
/// wherever the MPI is.
pub(crate) fn object(name: &std::ffi::CStr) -> *mut libc::c_void {
    anywhere(name)
}

/// `name` in the global scope; else in a library loaded locally (mpi4py's extension
/// loads the MPI as its own dependency, out of the global scope: only a handle of a
/// library reaches it); else in the MPI library `mqd run` named in `MQD_RECORDER_MPI`,
/// loaded locally. The last is for a call made before the program loaded its MPI: a
/// probe for a procedure (mpi4py asks for `MPI_Abi_get_version` first) gets the MPI's
/// answer, the MPI the program then loads is the same library, and no name of it enters
/// the global scope.
fn anywhere(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    let global = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !global.is_null() {
        return global;
    }
    let local = in_loaded_libraries(name);
    if !local.is_null() {
        return local;
    }
    in_named_mpi(name)
}

/// `name` in the libraries loaded (and their dependencies), by a handle of each.
fn in_loaded_libraries(name: &std::ffi::CStr) -> *mut libc::c_void {
    struct Search<'a> {
        name: &'a std::ffi::CStr,
        own: usize,
        found: *mut libc::c_void,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes its own info and our `Search`.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search<'_>>()) };
        if info.dlpi_name.is_null() || info.dlpi_addr as usize == search.own {
            return 0;
        }
        // SAFETY: a NUL-terminated name the loader keeps while the object is loaded.
        if unsafe { *info.dlpi_name } == 0 {
            return 0;
        }
        // SAFETY: RTLD_NOLOAD only takes a reference to an object already loaded.
        let handle = unsafe { libc::dlopen(info.dlpi_name, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return 0;
        }
        // SAFETY: a handle and a NUL-terminated name.
        search.found = unsafe { libc::dlsym(handle, search.name.as_ptr()) };
        // SAFETY: gives back the reference RTLD_NOLOAD took; the object stays loaded.
        unsafe { libc::dlclose(handle) };
        i32::from(!search.found.is_null())
    }
    let mut search = Search {
        name,
        own: own_base(),
        found: std::ptr::null_mut(),
    };
    // SAFETY: the callback reads the infos it is given and writes our `Search` only.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut search).cast()) };
    search.found
}

/// Where this library is loaded.
fn own_base() -> usize {
    // SAFETY: Dl_info is plain data; all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr of a function of this library, into a zeroed Dl_info.
    if unsafe { libc::dladdr(own_base as *const libc::c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// `name` in the library `$MQD_RECORDER_MPI` names, loaded locally on first need.
fn in_named_mpi(name: &std::ffi::CStr) -> *mut libc::c_void {
    static HANDLE: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
    let mut handle = HANDLE.load(Ordering::Acquire);
    if handle.is_null() {
        // SAFETY: getenv of a NUL-terminated name; the value is copied by dlopen.
        let path = unsafe { libc::getenv(c"MQD_RECORDER_MPI".as_ptr()) };
        if path.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: a NUL-terminated path; the handle is kept for the process's life.
        handle = unsafe { libc::dlopen(path, libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return std::ptr::null_mut();
        }
        HANDLE.store(handle, Ordering::Release);
    }
    // SAFETY: a handle and a NUL-terminated name.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
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
            // Not kept: the program may load its MPI later.
            found = missing as *mut libc::c_void;
        } else {
            NEXT[id].store(found, Ordering::Relaxed);
        }
    }
    // SAFETY: a function pointer is one word, and the caller names its type.
    unsafe { std::mem::transmute_copy::<*mut libc::c_void, F>(&found) }
}
