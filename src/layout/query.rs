//! Asking the debugger about an image's types and symbols, with what is missing named.

use super::types::Missing;
use crate::callbacks::{ImageServices, TypeHandle};
use std::ffi::CStr;

pub(crate) type Found<T> = std::result::Result<T, Missing>;

/// The debugger's types and symbols of one image.
pub(crate) struct ImageQuery<'a> {
    pub services: &'a dyn ImageServices,
    /// Ask only what MPICH's own library asks: the debugger answers for types it does
    /// not know (a stub with a fixed table), and complains about the fields it lacks.
    pub conservative: bool,
}

/// No MPICH object this library reads comes near this size (`MPIR_Comm`, the largest, is
/// a few kB): an offset or size beyond it is a damaged or foreign type table, and trusting
/// it would make every read of an object that large.
pub(crate) const MAX_OBJECT_BYTES: u32 = 64 * 1024;

/// A name no C type has: a debugger that answers it invents types.
const NO_SUCH_TYPE: &CStr = c"<mqd: not a type>";

impl<'a> ImageQuery<'a> {
    /// A query over `services`, conservative when they answer for any type name.
    pub(crate) fn new(services: &'a dyn ImageServices) -> ImageQuery<'a> {
        ImageQuery {
            services,
            conservative: services.find_type(NO_SUCH_TYPE).is_some(),
        }
    }
}

/// A type the debugger found, with the name it was found under.
#[derive(Clone, Copy)]
pub(crate) struct Type {
    handle: TypeHandle,
    pub name: &'static CStr,
}

impl ImageQuery<'_> {
    pub(crate) fn lookup_type(&self, name: &'static CStr) -> Option<Type> {
        let handle = self.services.find_type(name)?;
        Some(Type { handle, name })
    }

    pub(crate) fn find_type(&self, name: &'static CStr) -> Found<Type> {
        self.lookup_type(name).ok_or(Missing::Type(name))
    }

    /// The first of several historical names of a type.
    pub(crate) fn find_type_named(&self, names: &[&'static CStr]) -> Found<Type> {
        names
            .iter()
            .find_map(|n| self.lookup_type(n))
            .ok_or(Missing::Type(names[0]))
    }

    /// A field's offset; one past any MPICH object is no answer (optional fields).
    pub(crate) fn offset_of(&self, ty: Type, field: &'static CStr) -> Option<u32> {
        self.services
            .field_offset(ty.handle, field)
            .filter(|&offset| offset < MAX_OBJECT_BYTES)
    }

    /// A field the layout needs, its absence or an absurd offset named.
    pub(crate) fn field_offset(&self, ty: Type, field: &'static CStr) -> Found<u32> {
        match self.services.field_offset(ty.handle, field) {
            Some(offset) if offset < MAX_OBJECT_BYTES => Ok(offset),
            Some(_) => Err(Missing::Misplaced(ty.name, field)),
            None => Err(Missing::Field(ty.name, field)),
        }
    }

    /// What is wrong with a field the layout could not use: absent, or placed past any
    /// MPICH object.
    pub(crate) fn missing_field(&self, ty: &'static CStr, field: &'static CStr) -> Missing {
        let placed = self
            .lookup_type(ty)
            .and_then(|t| self.services.field_offset(t.handle, field))
            .is_some();
        if placed {
            Missing::Misplaced(ty, field)
        } else {
            Missing::Field(ty, field)
        }
    }

    /// `sizeof` a type; one larger than any MPICH object is no answer.
    pub(crate) fn size_of(&self, ty: Type) -> Option<u32> {
        self.services
            .size_of(ty.handle)
            .filter(|&size| size <= MAX_OBJECT_BYTES)
    }

    /// `sizeof` a typedef such as `MPIR_Context_id_t`, if the debugger can say (MPICH's
    /// own library asks none).
    pub(crate) fn typedef_size(&self, name: &'static CStr) -> Option<u32> {
        self.extra_type(name).and_then(|t| self.size_of(t))
    }

    /// A type MPICH's own library does not ask for; never asked in conservative mode.
    pub(crate) fn extra_type(&self, name: &'static CStr) -> Option<Type> {
        if self.conservative {
            return None;
        }
        self.lookup_type(name)
    }

    /// A field MPICH's own library does not ask for; never asked in conservative mode.
    pub(crate) fn extra_offset(&self, ty: Type, field: &'static CStr) -> Option<u32> {
        if self.conservative {
            return None;
        }
        self.offset_of(ty, field)
    }

    pub(crate) fn has_symbol(&self, name: &CStr) -> bool {
        self.services.find_symbol(name).is_some()
    }

    /// Makes a lazily loading debugger read the unit that defines MPICH's types.
    pub(crate) fn touch_function(&self, name: &CStr) {
        self.services.touch_function(name);
    }
}
