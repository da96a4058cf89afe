//! What the safe core needs of the debugger, as two small traits, and their
//! implementations over the C callback tables: the only place the core's requests become
//! raw callback calls. In-crate tests implement the traits in Rust.

use crate::error::{Error, Result};
use mqd_abi::types::{
    mqs_image, mqs_image_callbacks, mqs_lang_code, mqs_ok, mqs_process, mqs_process_callbacks,
    mqs_taddr_t, mqs_type,
};
use std::ffi::{CStr, c_int, c_void};
use std::ptr::{self, NonNull};

/// A type the debugger found; meaningful only to the [`ImageServices`] that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeHandle(pub NonNull<c_void>);

/// The debugger's symbols and types of one image.
pub(crate) trait ImageServices {
    /// A C type by name.
    fn find_type(&self, name: &CStr) -> Option<TypeHandle>;
    /// Byte offset of a member (a dotted path reaches into members of unnamed types).
    fn field_offset(&self, ty: TypeHandle, field: &CStr) -> Option<u32>;
    /// `sizeof` a type, when the debugger can say.
    fn size_of(&self, ty: TypeHandle) -> Option<u32>;
    /// Address of a global variable.
    fn find_symbol(&self, name: &CStr) -> Option<u64>;
    /// Looks a function up (a lazily loading debugger then reads its unit's types).
    fn touch_function(&self, name: &CStr);
}

/// The debugger's view of one process's memory.
pub(crate) trait ProcessServices {
    /// Fills `buf` from target address `addr`, all or nothing.
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> Result<()>;
    /// Converts one target scalar (`input.len()` is 1, 2, 4 or 8) to host byte order.
    fn to_host(&self, input: &[u8], output: &mut [u8]) -> Result<()>;
}

/// The image callbacks of `mpi_interface.h` for one image.
pub(crate) struct CImage<'a> {
    pub image: *mut mqs_image,
    pub callbacks: &'a mqs_image_callbacks,
}

impl ImageServices for CImage<'_> {
    fn find_type(&self, name: &CStr) -> Option<TypeHandle> {
        let find = self.callbacks.mqs_find_type_fp?;
        // SAFETY: debugger callback; the name is NUL-terminated and not written to.
        let handle = unsafe {
            find(
                self.image,
                name.as_ptr().cast_mut(),
                mqs_lang_code::mqs_lang_c as i32,
            )
        };
        NonNull::new(handle.cast::<c_void>()).map(TypeHandle)
    }

    fn field_offset(&self, ty: TypeHandle, field: &CStr) -> Option<u32> {
        let offset = self.callbacks.mqs_field_offset_fp?;
        // SAFETY: debugger callback with a handle it gave us.
        let at = unsafe { offset(ty.0.as_ptr().cast::<mqs_type>(), field.as_ptr().cast_mut()) };
        u32::try_from(at).ok()
    }

    fn size_of(&self, ty: TypeHandle) -> Option<u32> {
        let size = self.callbacks.mqs_sizeof_fp?;
        // SAFETY: debugger callback with a handle it gave us.
        let n = unsafe { size(ty.0.as_ptr().cast::<mqs_type>()) };
        u32::try_from(n).ok().filter(|&n| n > 0)
    }

    fn find_symbol(&self, name: &CStr) -> Option<u64> {
        let find = self.callbacks.mqs_find_symbol_fp?;
        let mut addr: mqs_taddr_t = 0;
        // SAFETY: debugger callback; `addr` is a valid out pointer.
        let rc = unsafe { find(self.image, name.as_ptr().cast_mut(), &mut addr) };
        (rc == mqs_ok).then_some(addr as u64)
    }

    fn touch_function(&self, name: &CStr) {
        if let Some(find) = self.callbacks.mqs_find_function_fp {
            // SAFETY: debugger callback; a NULL address is allowed by the interface.
            unsafe {
                find(
                    self.image,
                    name.as_ptr().cast_mut(),
                    mqs_lang_code::mqs_lang_c as i32,
                    ptr::null_mut(),
                )
            };
        }
    }
}

/// The process callbacks of `mpi_interface.h` for one process.
pub(crate) struct CProcess<'a> {
    pub process: *mut mqs_process,
    pub callbacks: &'a mqs_process_callbacks,
}

impl ProcessServices for CProcess<'_> {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let fetch = self
            .callbacks
            .mqs_fetch_data_fp
            .ok_or(Error::MissingCallback)?;
        let len = c_int::try_from(buf.len()).map_err(|_| Error::ImplausibleValue)?;
        // SAFETY: debugger callback writing at most `len` bytes into `buf`.
        let rc = unsafe {
            fetch(
                self.process,
                addr as mqs_taddr_t,
                len,
                buf.as_mut_ptr().cast::<c_void>(),
            )
        };
        if rc == mqs_ok {
            Ok(())
        } else {
            Err(Error::ReadFailed)
        }
    }

    fn to_host(&self, input: &[u8], output: &mut [u8]) -> Result<()> {
        let convert = self
            .callbacks
            .mqs_target_to_host_fp
            .ok_or(Error::MissingCallback)?;
        let n = input.len().min(output.len());
        // SAFETY: debugger callback reading and writing `n` bytes.
        unsafe {
            convert(
                self.process,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                n as c_int,
            )
        };
        Ok(())
    }
}
