//! C struct layout under natural alignment, computed from scratch, and the type table that a
//! synthetic image serves to a debugger client.
//!
//! The rules are those of the generic System V psABIs with natural alignment: every scalar
//! aligns to its own size, pointers to the pointer size, arrays to their element, structs and
//! unions to their most aligned member, and a struct's size is padded to a multiple of its
//! alignment. (Real i386 aligns `int64_t` members to 4; this model does not, on purpose: the
//! DLL must read offsets from the type table, never assume them.)
//!
//! Nothing here is shared with the DLL's own layout logic: a bug there cannot hide here.

use std::collections::HashMap;

/// What a type is; the layout rules above only need the size and alignment of each.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// `int`, `char`, an enum, ...
    Scalar,
    /// Any data or function pointer.
    Pointer,
    /// `elem[len]`; `len` 0 is a flexible array member.
    Array,
    /// A `struct`.
    Struct,
    /// A `union`: every member at offset 0.
    Union,
    /// A `typedef` of another type.
    Typedef(usize),
}

/// A named member of a struct or union.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub name: String,
    pub offset: u64,
    pub ty: usize,
}

/// One C type.
#[derive(Debug, Clone)]
pub(crate) struct CType {
    pub kind: Kind,
    pub size: u64,
    pub align: u64,
    pub members: Vec<Member>,
}

/// The types of one synthetic image; the names are what `find_type` answers to.
#[derive(Debug, Clone)]
pub(crate) struct TypeTable {
    types: Vec<CType>,
    names: HashMap<String, usize>,
    pointer_size: u64,
    pointer: Option<usize>,
}

/// `value` rounded up to a multiple of `align` (a power of two or any positive number).
pub(crate) fn round_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

impl TypeTable {
    /// An empty table for a target with `pointer_size`-byte pointers.
    pub fn new(pointer_size: u64) -> TypeTable {
        TypeTable {
            types: Vec::new(),
            names: HashMap::new(),
            pointer_size,
            pointer: None,
        }
    }

    fn push(&mut self, name: Option<&str>, ty: CType) -> usize {
        let id = self.types.len();
        self.types.push(ty);
        if let Some(name) = name {
            self.names.insert(name.to_owned(), id);
        }
        id
    }

    /// A named scalar (`int`, an enum type, ...) of `size` bytes aligned to its size.
    pub fn scalar(&mut self, name: &str, size: u64) -> usize {
        self.push(
            Some(name),
            CType {
                kind: Kind::Scalar,
                size,
                align: size,
                members: Vec::new(),
            },
        )
    }

    /// The (anonymous) pointer type; all pointers share size and alignment.
    pub fn pointer(&mut self) -> usize {
        if let Some(id) = self.pointer {
            return id;
        }
        let size = self.pointer_size;
        let id = self.push(
            None,
            CType {
                kind: Kind::Pointer,
                size,
                align: size,
                members: Vec::new(),
            },
        );
        self.pointer = Some(id);
        id
    }

    /// `elem[len]`; `len` 0 gives a flexible array member (size 0, the element's alignment).
    pub fn array(&mut self, elem: usize, len: u64) -> usize {
        let (size, align) = (self.types[elem].size * len, self.types[elem].align);
        self.push(
            None,
            CType {
                kind: Kind::Array,
                size,
                align,
                members: Vec::new(),
            },
        )
    }

    /// `typedef target name;`
    pub fn typedef(&mut self, name: &str, target: usize) -> usize {
        let (size, align) = (self.types[target].size, self.types[target].align);
        self.push(
            Some(name),
            CType {
                kind: Kind::Typedef(target),
                size,
                align,
                members: Vec::new(),
            },
        )
    }

    /// A struct with `members` in declaration order, laid out with natural alignment.
    pub fn structure(&mut self, name: Option<&str>, members: &[(&str, usize)]) -> usize {
        let mut offset = 0;
        let mut align = 1;
        let mut laid = Vec::with_capacity(members.len());
        for &(member, ty) in members {
            let (size, a) = (self.types[ty].size, self.types[ty].align);
            offset = round_up(offset, a);
            laid.push(Member {
                name: member.to_owned(),
                offset,
                ty,
            });
            offset += size;
            align = align.max(a);
        }
        let size = round_up(offset, align);
        self.push(
            name,
            CType {
                kind: Kind::Struct,
                size,
                align,
                members: laid,
            },
        )
    }

    /// A union of `members`, all at offset 0, sized to the largest, padded to the alignment.
    pub fn union(&mut self, name: Option<&str>, members: &[(&str, usize)]) -> usize {
        let mut size = 0;
        let mut align = 1;
        let mut laid = Vec::with_capacity(members.len());
        for &(member, ty) in members {
            size = size.max(self.types[ty].size);
            align = align.max(self.types[ty].align);
            laid.push(Member {
                name: member.to_owned(),
                offset: 0,
                ty,
            });
        }
        let size = round_up(size, align);
        self.push(
            name,
            CType {
                kind: Kind::Union,
                size,
                align,
                members: laid,
            },
        )
    }

    /// The type named `name`, if the table still serves it.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }

    /// Follows typedefs to the type that has the members.
    fn resolve(&self, mut id: usize) -> usize {
        while let Kind::Typedef(target) = self.types[id].kind {
            id = target;
        }
        id
    }

    /// `sizeof` a type, `None` for an unknown id.
    pub fn size(&self, id: usize) -> Option<u64> {
        self.types.get(id).map(|t| t.size)
    }

    /// `alignof` a type.
    pub fn align_of(&self, id: usize) -> u64 {
        self.types[id].align
    }

    /// Offset of a member, through typedefs. `path` is one member name or a dotted path
    /// through nested members (`"ch4.am"`, `"u.recv.source"`), which is how a client reaches
    /// members of unnamed struct and union types.
    pub fn field_offset(&self, id: usize, path: &str) -> Option<u64> {
        if id >= self.types.len() {
            return None;
        }
        let mut ty = id;
        let mut offset = 0;
        for part in path.split('.') {
            let t = &self.types[self.resolve(ty)];
            if !matches!(t.kind, Kind::Struct | Kind::Union) {
                return None;
            }
            let member = t.members.iter().find(|m| m.name == part)?;
            offset += member.offset;
            ty = member.ty;
        }
        Some(offset)
    }

    /// Offset of `path` in the type named `name`.
    pub fn offset_by_name(&self, name: &str, path: &str) -> Option<u64> {
        self.field_offset(self.lookup(name)?, path)
    }

    /// `sizeof` the type named `name`.
    pub fn size_by_name(&self, name: &str) -> Option<u64> {
        self.size(self.lookup(name)?)
    }

    /// Stops serving the name `name`; returns whether it was served.
    pub fn remove_type(&mut self, name: &str) -> bool {
        self.names.remove(name).is_some()
    }

    /// Serves the type named `from` under the name `to` instead.
    pub fn rename_type(&mut self, from: &str, to: &str) -> bool {
        match self.names.remove(from) {
            Some(id) => {
                self.names.insert(to.to_owned(), id);
                true
            }
            None => false,
        }
    }

    /// Removes a direct member (through typedefs) from the type named `name`.
    pub fn remove_field(&mut self, name: &str, field: &str) -> bool {
        let Some(id) = self.lookup(name) else {
            return false;
        };
        let id = self.resolve(id);
        let members = &mut self.types[id].members;
        let before = members.len();
        members.retain(|m| m.name != field);
        members.len() != before
    }

    /// Moves a direct member (through typedefs) of the type named `name` to `offset`, as a
    /// damaged or foreign type table would; returns whether the member existed.
    pub fn set_member_offset(&mut self, name: &str, field: &str, offset: u64) -> bool {
        let Some(id) = self.lookup(name) else {
            return false;
        };
        let id = self.resolve(id);
        match self.types[id].members.iter_mut().find(|m| m.name == field) {
            Some(member) => {
                member.offset = offset;
                true
            }
            None => false,
        }
    }

    /// Makes the type named `name` (and what it is a typedef of) `size` bytes; returns
    /// whether the type was served.
    pub fn set_size(&mut self, name: &str, size: u64) -> bool {
        let Some(id) = self.lookup(name) else {
            return false;
        };
        let resolved = self.resolve(id);
        self.types[id].size = size;
        self.types[resolved].size = size;
        true
    }

    /// Every served type name, sorted (for reports and tests).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names.keys().cloned().collect();
        names.sort();
        names
    }

    /// The direct members of the type named `name`, through typedefs, with their offsets.
    pub fn members(&self, name: &str) -> Vec<(String, u64)> {
        let Some(id) = self.lookup(name) else {
            return Vec::new();
        };
        self.types[self.resolve(id)]
            .members
            .iter()
            .map(|m| (m.name.clone(), m.offset))
            .collect()
    }
}
