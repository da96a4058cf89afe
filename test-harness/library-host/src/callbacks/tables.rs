//! The three callback tables, each body behind one panic guard.

use super::contexts::*;
use super::counters::*;
use super::error_codes::*;
use super::limits::{MALLOC_ALIGN, MAX_ALLOCATION, MAX_DPRINTS_LINES};
use mqd_abi::types::*;
use mqd_target::{Target, TargetAbi, TypeId};
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex};
// ---------------------------------------------------------------------------------------
// Allocation

/// One block handed to the library.
pub(crate) struct Allocation {
    pub(crate) size: usize,
    pub(crate) owner: Arc<SessionCounters>,
}

/// Every live block, keyed by address: the only way to recognise a foreign or double
/// free without reading memory in front of a pointer we may not own.
pub(crate) static ALLOCATIONS: LazyLock<Mutex<HashMap<usize, Allocation>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Bytes written into fresh blocks, so a library reading memory it never initialised
/// sees garbage in tests rather than convenient zeros.
pub(crate) const FRESH_FILL: u8 = 0xCD;
/// Bytes written into freed blocks before they go back to the allocator.
pub(crate) const FREED_FILL: u8 = 0xDD;

pub(crate) fn block_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.max(1), MALLOC_ALIGN).ok()
}

/// `mqs_malloc_fp`: 16-byte aligned, poisoned, recorded for the calling session.
pub(crate) unsafe extern "C" fn cb_malloc(size: usize) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let counters = current();
        bump(&counters.mallocs);
        let Some(layout) = block_layout(size).filter(|_| size <= MAX_ALLOCATION) else {
            bump(&counters.failed_mallocs);
            return std::ptr::null_mut();
        };
        // SAFETY: layout has a non-zero size.
        let block = unsafe { std::alloc::alloc(layout) };
        if block.is_null() {
            bump(&counters.failed_mallocs);
            return std::ptr::null_mut();
        }
        // SAFETY: the block has layout.size() writable bytes.
        unsafe { std::ptr::write_bytes(block, FRESH_FILL, layout.size()) };
        counters
            .outstanding_allocations
            .fetch_add(1, Ordering::Relaxed);
        counters
            .outstanding_bytes
            .fetch_add(size as u64, Ordering::Relaxed);
        lock(&ALLOCATIONS).insert(
            block as usize,
            Allocation {
                size,
                owner: counters,
            },
        );
        block as *mut c_void
    })
}

/// `mqs_free_fp`: frees only blocks `cb_malloc` handed out; anything else is counted.
pub(crate) unsafe extern "C" fn cb_free(ptr: *mut c_void) {
    guard((), || {
        if ptr.is_null() {
            return; // free(NULL) is a no-op in C too
        }
        let removed = lock(&ALLOCATIONS).remove(&(ptr as usize));
        let Some(Allocation { size, owner }) = removed else {
            bump(&current().bad_frees);
            return;
        };
        bump(&owner.frees);
        owner
            .outstanding_allocations
            .fetch_sub(1, Ordering::Relaxed);
        owner
            .outstanding_bytes
            .fetch_sub(size as u64, Ordering::Relaxed);
        if let Some(layout) = block_layout(size) {
            // SAFETY: the block came from std::alloc::alloc with this layout, and the
            // registry entry we just removed made us its only owner.
            unsafe {
                std::ptr::write_bytes(ptr as *mut u8, FREED_FILL, layout.size());
                std::alloc::dealloc(ptr as *mut u8, layout);
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// Basic callbacks

/// `mqs_dprints_fp`: the library's only diagnostic channel, kept per session.
pub(crate) unsafe extern "C" fn cb_dprints(text: *const c_char) {
    guard((), || {
        let counters = current();
        bump(&counters.dprints_calls);
        if text.is_null() {
            return;
        }
        // SAFETY: the library passes a NUL-terminated string.
        let line = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let line = line.strip_suffix('\n').unwrap_or(&line).to_owned();
        let mut lines = lock(&counters.dprints);
        if lines.len() < MAX_DPRINTS_LINES {
            lines.push(line);
        }
    })
}

/// `mqs_errorstring_fp`: static text, so the pointer never dangles.
pub(crate) unsafe extern "C" fn cb_errorstring(code: c_int) -> *mut c_char {
    // The library must treat it as read-only; C's prototype just lacks the const.
    guard(error_text(ERR_INTERNAL).as_ptr() as *mut c_char, || {
        bump(&current().errorstring_calls);
        error_text(code).as_ptr() as *mut c_char
    })
}

pub(crate) unsafe extern "C" fn cb_put_image_info(
    image: *mut mqs_image,
    info: *mut mqs_image_info,
) {
    guard((), || {
        // SAFETY: checked handle.
        if let Some(ctx) = unsafe { image_ctx(image) } {
            bump(&ctx.counters.image_info_calls);
            ctx.info.set(info);
        }
    })
}

pub(crate) unsafe extern "C" fn cb_get_image_info(image: *mut mqs_image) -> *mut mqs_image_info {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { image_ctx(image) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.image_info_calls);
            ctx.info.get()
        })
    })
}

pub(crate) unsafe extern "C" fn cb_put_process_info(
    process: *mut mqs_process,
    info: *mut mqs_process_info,
) {
    guard((), || {
        // SAFETY: checked handle.
        if let Some(ctx) = unsafe { process_ctx(process) } {
            bump(&ctx.counters.process_info_calls);
            ctx.info.set(info);
        }
    })
}

pub(crate) unsafe extern "C" fn cb_get_process_info(
    process: *mut mqs_process,
) -> *mut mqs_process_info {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.process_info_calls);
            ctx.info.get()
        })
    })
}

/// The basic table every library gets: the functions are the same for every session
/// (sessions are told apart by handle or by `SessionScope`), so one static table can
/// outlive any number of loads of the same library.
pub(crate) static BASIC_CALLBACKS: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_malloc_fp: Some(cb_malloc),
    mqs_free_fp: Some(cb_free),
    mqs_dprints_fp: Some(cb_dprints),
    mqs_errorstring_fp: Some(cb_errorstring),
    mqs_put_image_info_fp: Some(cb_put_image_info),
    mqs_get_image_info_fp: Some(cb_get_image_info),
    mqs_put_process_info_fp: Some(cb_put_process_info),
    mqs_get_process_info_fp: Some(cb_get_process_info),
};

/// The basic table as MPICH's tvtest passes it: no `dprints`, no `errorstring`.
pub(crate) static BASIC_CALLBACKS_NULL_DIAGNOSTICS: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_dprints_fp: None,
    mqs_errorstring_fp: None,
    ..BASIC_CALLBACKS
};

// ---------------------------------------------------------------------------------------
// Image callbacks

pub(crate) unsafe extern "C" fn cb_get_type_sizes(
    process: *mut mqs_process,
    sizes: *mut mqs_target_type_sizes,
) {
    guard((), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return;
        };
        bump(&ctx.counters.type_sizes_calls);
        if sizes.is_null() {
            return;
        }
        // SAFETY: the image outlives its processes.
        let image = unsafe { &*ctx.image };
        let value = c_type_sizes(image.target.borrow().abi());
        // Exactly the five standard fields: never past them (Open MPI's copy has more).
        // SAFETY: the library passes a writable mqs_target_type_sizes; it may be unaligned.
        unsafe { std::ptr::write_unaligned(sizes, value) };
    })
}

pub(crate) unsafe extern "C" fn cb_find_function(
    image: *mut mqs_image,
    name: *mut c_char,
    _lang: c_int,
    addr: *mut mqs_taddr_t,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return ERR_BAD_HANDLE;
        };
        bump(&ctx.counters.find_function_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return ERR_INVALID_ARGUMENT;
        };
        let found = ctx.target.borrow().find_function(name);
        let Some(found) = found.and_then(|a| mqs_taddr_t::try_from(a).ok()) else {
            return ERR_FUNCTION_NOT_FOUND;
        };
        // A NULL addr only asks the debugger to load that unit's debug information.
        if !addr.is_null() {
            // SAFETY: the library passes a writable mqs_taddr_t.
            unsafe { std::ptr::write_unaligned(addr, found) };
        }
        mqs_ok
    })
}

pub(crate) unsafe extern "C" fn cb_find_symbol(
    image: *mut mqs_image,
    name: *mut c_char,
    addr: *mut mqs_taddr_t,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return ERR_BAD_HANDLE;
        };
        bump(&ctx.counters.find_symbol_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return ERR_INVALID_ARGUMENT;
        };
        if addr.is_null() {
            return ERR_INVALID_ARGUMENT;
        }
        let found = ctx.target.borrow().find_symbol(name);
        let Some(found) = found.and_then(|a| mqs_taddr_t::try_from(a).ok()) else {
            return ERR_SYMBOL_NOT_FOUND;
        };
        // SAFETY: checked non-NULL; the library passes a writable mqs_taddr_t.
        unsafe { std::ptr::write_unaligned(addr, found) };
        mqs_ok
    })
}

pub(crate) unsafe extern "C" fn cb_find_type(
    image: *mut mqs_image,
    name: *mut c_char,
    _lang: c_int,
) -> *mut mqs_type {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { image_ctx(image) }) else {
            return std::ptr::null_mut();
        };
        bump(&ctx.counters.find_type_calls);
        // SAFETY: library-provided string.
        let Some(name) = (unsafe { c_name(name) }) else {
            return std::ptr::null_mut();
        };
        let Some(id) = ctx.target.borrow().find_type(name) else {
            return std::ptr::null_mut();
        };
        let mut by_id = ctx.types_by_id.borrow_mut();
        let handle = by_id.entry(id).or_insert_with(|| {
            let mut handle = Box::new(TypeHandle {
                magic: Cell::new(TYPE_MAGIC),
                image: ctx as *const ImageContext,
                id: Cell::new(Some(id)),
                name: name.to_owned(),
            });
            // The box's heap address is stable while the Vec owns it.
            let ptr: *mut TypeHandle = &mut *handle;
            ctx.type_handles.borrow_mut().push(handle);
            ptr
        });
        *handle as *mut mqs_type
    })
}

/// The target and type id behind a type handle, if both are still known.
unsafe fn with_type<R>(
    ty: *mut mqs_type,
    f: impl FnOnce(&ImageContext, &dyn Target, TypeId) -> R,
) -> Option<R> {
    // SAFETY: checked handle.
    let handle = unsafe { type_handle(ty) }?;
    // SAFETY: a live handle's image is alive (handles die with it).
    let image = unsafe { &*handle.image };
    let target = image.target.borrow();
    let id = handle.id.get();
    Some(f(image, &**target, id?))
}

pub(crate) unsafe extern "C" fn cb_field_offset(ty: *mut mqs_type, field: *mut c_char) -> c_int {
    guard(-1, || {
        // SAFETY: library-provided string.
        let field = unsafe { c_name(field) };
        // SAFETY: checked inside.
        let r = unsafe {
            with_type(ty, |image, target, id| {
                bump(&image.counters.field_offset_calls);
                field.and_then(|f| target.field_offset(id, f))
            })
        };
        r.flatten()
            .and_then(|off| c_int::try_from(off).ok())
            .unwrap_or(-1)
    })
}

pub(crate) unsafe extern "C" fn cb_sizeof(ty: *mut mqs_type) -> c_int {
    guard(-1, || {
        // SAFETY: checked inside.
        let r = unsafe {
            with_type(ty, |image, target, id| {
                bump(&image.counters.sizeof_calls);
                target.type_size(id)
            })
        };
        r.flatten()
            .and_then(|size| c_int::try_from(size).ok())
            .unwrap_or(-1)
    })
}

/// The image table a debugger normally passes.
pub(crate) static IMAGE_CALLBACKS: mqs_image_callbacks = mqs_image_callbacks {
    mqs_get_type_sizes_fp: Some(cb_get_type_sizes),
    mqs_find_function_fp: Some(cb_find_function),
    mqs_find_symbol_fp: Some(cb_find_symbol),
    mqs_find_type_fp: Some(cb_find_type),
    mqs_field_offset_fp: Some(cb_field_offset),
    mqs_sizeof_fp: Some(cb_sizeof),
};

/// The image table as MPICH's tvtest passes it: no `sizeof`.
pub(crate) static IMAGE_CALLBACKS_NULL_SIZEOF: mqs_image_callbacks = mqs_image_callbacks {
    mqs_sizeof_fp: None,
    ..IMAGE_CALLBACKS
};

// ---------------------------------------------------------------------------------------
// Process callbacks

pub(crate) unsafe extern "C" fn cb_get_global_rank(process: *mut mqs_process) -> c_int {
    guard(MQS_INVALID_PROCESS, || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(MQS_INVALID_PROCESS, |ctx| {
            bump(&ctx.counters.get_global_rank_calls);
            ctx.global_rank
        })
    })
}

pub(crate) unsafe extern "C" fn cb_get_image(process: *mut mqs_process) -> *mut mqs_image {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked handle.
        unsafe { process_ctx(process) }.map_or(std::ptr::null_mut(), |ctx| {
            bump(&ctx.counters.get_image_calls);
            ctx.image as *mut mqs_image
        })
    })
}

/// A target address as the harness's `u64` (`mqs_taddr_t` is C `unsigned long`).
#[allow(clippy::useless_conversion)] // the identity on LP64, a widening elsewhere
pub(crate) fn taddr_to_u64(addr: mqs_taddr_t) -> u64 {
    u64::from(addr)
}

/// Reads target memory all or nothing: `buf` is only written when every byte was read.
pub(crate) fn fetch_into(target: &dyn Target, addr: u64, buf: &mut [u8]) -> c_int {
    // A scratch copy keeps the all-or-nothing promise whatever a Target does on failure;
    // small reads (the common case) stay on the stack.
    let mut small = [0u8; 512];
    let mut large = Vec::new();
    let scratch: &mut [u8] = if buf.len() <= small.len() {
        &mut small[..buf.len()]
    } else {
        large.resize(buf.len(), 0);
        &mut large
    };
    match target.read_memory(addr, scratch) {
        Ok(()) => {
            buf.copy_from_slice(scratch);
            mqs_ok
        }
        Err(_) => ERR_TARGET_UNREADABLE,
    }
}

pub(crate) unsafe extern "C" fn cb_fetch_data(
    process: *mut mqs_process,
    addr: mqs_taddr_t,
    nbytes: c_int,
    buf: *mut c_void,
) -> c_int {
    guard(ERR_INTERNAL, || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return ERR_BAD_HANDLE;
        };
        let counters = &ctx.counters;
        bump(&counters.fetches);
        if let Ok(len) = u64::try_from(nbytes) {
            counters.fetch_bytes.fetch_add(len, Ordering::Relaxed);
            counters.largest_fetch.fetch_max(len, Ordering::Relaxed);
        }
        let result = match usize::try_from(nbytes) {
            Err(_) => ERR_INVALID_ARGUMENT,
            Ok(0) => mqs_ok,
            Ok(_) if buf.is_null() => ERR_INVALID_ARGUMENT,
            Ok(len) => {
                // SAFETY: the library passes a buffer of nbytes writable bytes.
                let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
                // SAFETY: the image outlives its processes.
                let image = unsafe { &*ctx.image };
                fetch_into(&**image.target.borrow(), taddr_to_u64(addr), out)
            }
        };
        if result != mqs_ok {
            bump(&counters.failed_fetches);
        }
        result
    })
}

pub(crate) unsafe extern "C" fn cb_target_to_host(
    process: *mut mqs_process,
    input: *const c_void,
    output: *mut c_void,
    nbytes: c_int,
) {
    guard((), || {
        // SAFETY: checked handle.
        let Some(ctx) = (unsafe { process_ctx(process) }) else {
            return;
        };
        bump(&ctx.counters.target_to_host_calls);
        let Ok(len) = usize::try_from(nbytes) else {
            return;
        };
        if len == 0 || input.is_null() || output.is_null() {
            return;
        }
        // SAFETY: the image outlives its processes.
        let order = unsafe { &*ctx.image }.target.borrow().byte_order();
        // in and out may be the same buffer: copy in first.
        // SAFETY: the library passes nbytes readable bytes at input.
        let scalar = unsafe { std::slice::from_raw_parts(input as *const u8, len) }.to_vec();
        // SAFETY: and nbytes writable bytes at output (no live reference aliases it now).
        let out = unsafe { std::slice::from_raw_parts_mut(output as *mut u8, len) };
        order.to_host(&scalar, out);
    })
}

/// The process table; one static table serves every process.
pub(crate) static PROCESS_CALLBACKS: mqs_process_callbacks = mqs_process_callbacks {
    mqs_get_global_rank_fp: Some(cb_get_global_rank),
    mqs_get_image_fp: Some(cb_get_image),
    mqs_fetch_data_fp: Some(cb_fetch_data),
    mqs_target_to_host_fp: Some(cb_target_to_host),
};

/// The target's ABI as `mqs_get_type_sizes` reports it.
fn c_type_sizes(abi: TargetAbi) -> mqs_target_type_sizes {
    mqs_target_type_sizes {
        short_size: c_int::from(abi.short),
        int_size: c_int::from(abi.int),
        long_size: c_int::from(abi.long),
        long_long_size: c_int::from(abi.long_long),
        pointer_size: c_int::from(abi.pointer),
    }
}
