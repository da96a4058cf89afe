//! The contexts behind `mqs_image *`, `mqs_process *` and `mqs_type *`: each carries a
//! magic number, so that a handle of the wrong kind is refused.

use super::counters::{SessionCounters, bump, current};
use mqd_abi::types::*;
use mqd_target::{Target, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Arc;
// ---------------------------------------------------------------------------------------
// Contexts behind mqs_image *, mqs_process *, mqs_type *

pub(crate) const IMAGE_MAGIC: u64 = u64::from_be_bytes(*b"mqdIMAGE");
pub(crate) const PROCESS_MAGIC: u64 = u64::from_be_bytes(*b"mqdPROCS");
pub(crate) const TYPE_MAGIC: u64 = u64::from_be_bytes(*b"mqdTYPE_");

/// What an `mqs_image *` points to: one per process (ASLR gives each its own addresses).
///
/// It owns the process's [`Target`] because type questions arrive with an image only.
#[repr(C)]
pub(crate) struct ImageContext {
    pub(crate) magic: Cell<u64>, // first field: checked before anything else is trusted
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) target: RefCell<Box<dyn Target>>,
    pub(crate) info: Cell<*mut mqs_image_info>,
    /// Every handle ever returned by `find_type`, kept until the image goes away. Boxed:
    /// the library holds their addresses, which must not move when the Vec grows.
    #[allow(clippy::vec_box)]
    pub(crate) type_handles: RefCell<Vec<Box<TypeHandle>>>,
    /// Current target's `TypeId` -> handle, so each type gets one stable handle.
    pub(crate) types_by_id: RefCell<HashMap<TypeId, *mut TypeHandle>>,
}

/// What an `mqs_type *` points to.
#[repr(C)]
pub(crate) struct TypeHandle {
    pub(crate) magic: Cell<u64>,
    pub(crate) image: *const ImageContext,
    /// `None` once a replaced target no longer knows the type.
    pub(crate) id: Cell<Option<TypeId>>,
    /// The name it was found by, to find it again in a replaced target.
    pub(crate) name: String,
}

/// What an `mqs_process *` points to.
#[repr(C)]
pub(crate) struct ProcessContext {
    pub(crate) magic: Cell<u64>,
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) image: *const ImageContext,
    pub(crate) info: Cell<*mut mqs_process_info>,
    pub(crate) global_rank: c_int,
}

impl ImageContext {
    /// Boxes a new image context; the pointer is what the library sees as `mqs_image *`.
    pub(crate) fn create(counters: Arc<SessionCounters>, target: Box<dyn Target>) -> *mut Self {
        Box::into_raw(Box::new(ImageContext {
            magic: Cell::new(IMAGE_MAGIC),
            counters,
            target: RefCell::new(target),
            info: Cell::new(std::ptr::null_mut()),
            type_handles: RefCell::new(Vec::new()),
            types_by_id: RefCell::new(HashMap::new()),
        }))
    }

    /// Frees an image context and its type handles.
    ///
    /// # Safety
    /// `ptr` came from [`ImageContext::create`], is freed once, and no process context
    /// pointing at it is used afterwards.
    pub(crate) unsafe fn destroy(ptr: *mut Self) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the contract, ptr is a live box we own.
        let ctx = unsafe { Box::from_raw(ptr) };
        ctx.magic.set(0);
        for handle in ctx.type_handles.borrow().iter() {
            handle.magic.set(0);
        }
        drop(ctx);
    }

    /// The library's image info, as it last stored it.
    pub(crate) fn info(&self) -> *mut mqs_image_info {
        self.info.get()
    }

    /// Forgets the image info (after `mqs_destroy_image_info`).
    pub(crate) fn clear_info(&self) {
        self.info.set(std::ptr::null_mut());
    }

    /// The target's human name, for has-queues messages.
    pub(crate) fn target_name(&self) -> String {
        match self.target.try_borrow() {
            Ok(t) => t.name(),
            Err(_) => String::from("<target busy>"),
        }
    }

    /// Swaps in the memory of a process that ran and stopped again.
    ///
    /// Type handles stay valid: each is looked up again by name in the new target.
    pub(crate) fn replace_target(&self, target: Box<dyn Target>) {
        *self.target.borrow_mut() = target;
        let target = self.target.borrow();
        let handles = self.type_handles.borrow();
        let mut by_id = self.types_by_id.borrow_mut();
        by_id.clear();
        for handle in handles.iter() {
            let id = target.find_type(&handle.name);
            handle.id.set(id);
            if let Some(id) = id {
                by_id
                    .entry(id)
                    .or_insert(&**handle as *const TypeHandle as *mut TypeHandle);
            }
        }
    }
}

impl ProcessContext {
    /// Boxes a new process context running `image`.
    pub(crate) fn create(
        counters: Arc<SessionCounters>,
        image: *const ImageContext,
        global_rank: c_int,
    ) -> *mut Self {
        Box::into_raw(Box::new(ProcessContext {
            magic: Cell::new(PROCESS_MAGIC),
            counters,
            image,
            info: Cell::new(std::ptr::null_mut()),
            global_rank,
        }))
    }

    /// Frees a process context.
    ///
    /// # Safety
    /// `ptr` came from [`ProcessContext::create`] and is freed once.
    pub(crate) unsafe fn destroy(ptr: *mut Self) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the contract, ptr is a live box we own.
        let ctx = unsafe { Box::from_raw(ptr) };
        ctx.magic.set(0);
        drop(ctx);
    }

    /// The library's process info, as it last stored it.
    pub(crate) fn info(&self) -> *mut mqs_process_info {
        self.info.get()
    }

    /// Forgets the process info (after `mqs_destroy_process_info`).
    pub(crate) fn clear_info(&self) {
        self.info.set(std::ptr::null_mut());
    }
}

/// Reads the magic word a handle starts with, without trusting anything else about it.
///
/// # Safety
/// `ptr` is NULL or points to at least 8 readable bytes (true of every handle this
/// debugger hands out, whatever its kind).
pub(crate) unsafe fn magic_of(ptr: *const c_void) -> Option<u64> {
    if ptr.is_null() || !(ptr as usize).is_multiple_of(align_of::<u64>()) {
        return None;
    }
    // SAFETY: per the contract; the magic is the first field of every context.
    Some(unsafe { std::ptr::read(ptr as *const u64) })
}

/// Checks an `mqs_image *` from the library, counting a bad one.
pub(crate) unsafe fn image_ctx<'a>(image: *mut mqs_image) -> Option<&'a ImageContext> {
    // SAFETY: handles come from this debugger (or are NULL); see magic_of.
    if unsafe { magic_of(image as *const c_void) } == Some(IMAGE_MAGIC) {
        // SAFETY: the magic says it is a live ImageContext.
        Some(unsafe { &*(image as *const ImageContext) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// Checks an `mqs_process *` from the library, counting a bad one.
pub(crate) unsafe fn process_ctx<'a>(process: *mut mqs_process) -> Option<&'a ProcessContext> {
    // SAFETY: as for image_ctx.
    if unsafe { magic_of(process as *const c_void) } == Some(PROCESS_MAGIC) {
        // SAFETY: the magic says it is a live ProcessContext.
        Some(unsafe { &*(process as *const ProcessContext) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// Checks an `mqs_type *` from the library, counting a bad one.
pub(crate) unsafe fn type_handle<'a>(ty: *mut mqs_type) -> Option<&'a TypeHandle> {
    // SAFETY: as for image_ctx.
    if unsafe { magic_of(ty as *const c_void) } == Some(TYPE_MAGIC) {
        // SAFETY: the magic says it is a live TypeHandle.
        Some(unsafe { &*(ty as *const TypeHandle) })
    } else {
        bump(&current().bad_handles);
        None
    }
}

/// A name passed by the library, if it is a valid NUL-terminated UTF-8 string.
pub(crate) unsafe fn c_name<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the library passes NUL-terminated names (mpi_interface.h).
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}
