//! MPI's ABIs as data: what the handles and special values a program passes to MPI
//! mean, without the library's debug information. Facts from each ABI's `mpi.h`
//! (`test-harness/mqd/tests/mpi_abi.rs` compares them with the real headers):
//! - MPICH's (MPICH, Intel MPI, MVAPICH): `int` handles; a handle's top two bits say
//!   builtin (1), direct (2) or indirect (3), the next four the object kind; builtin
//!   datatypes carry their size in bits 8-15.
//! - Open MPI's: handles are pointers to objects, the predefined ones exported
//!   (`ompi_mpi_comm_world`, `ompi_mpi_int`...).
//! - The MPI 5 standard ABI (`mpi_abi.h`, MPICH's `libmpi_abi`): pointer-sized handles,
//!   predefined ones small integers.

use mqd_debuginfo::AddressSpace;
use std::collections::HashMap;

/// Which ABI a process's MPI library has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// MPICH's (also Intel MPI's).
    Mpich,
    /// Open MPI's.
    OpenMpi,
    /// The MPI 5 standard ABI.
    Standard,
}

/// The special values of ranks and tags of one ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Specials {
    /// `MPI_ANY_SOURCE`.
    pub any_source: i64,
    /// `MPI_PROC_NULL`.
    pub proc_null: i64,
    /// `MPI_ROOT`.
    pub root: i64,
    /// `MPI_ANY_TAG`.
    pub any_tag: i64,
}

/// MPICH's special values: the model's spelling of them.
pub const MPICH_SPECIALS: Specials = Specials {
    any_source: -2,
    proc_null: -1,
    root: -3,
    any_tag: -1,
};

/// Open MPI's.
pub const OPEN_MPI_SPECIALS: Specials = Specials {
    any_source: -1,
    proc_null: -2,
    root: -4,
    any_tag: -1,
};

/// The standard ABI's.
pub const STANDARD_SPECIALS: Specials = Specials {
    any_source: -1,
    proc_null: -3,
    root: -4,
    any_tag: -2,
};

/// MPICH's predefined communicators.
pub const MPICH_COMMS: [(u64, &str); 3] = [
    (0x4400_0000, "MPI_COMM_WORLD"),
    (0x4400_0001, "MPI_COMM_SELF"),
    (0x0400_0000, "MPI_COMM_NULL"),
];

/// The standard ABI's predefined communicators.
pub const STANDARD_COMMS: [(u64, &str); 3] = [
    (0x101, "MPI_COMM_WORLD"),
    (0x102, "MPI_COMM_SELF"),
    (0x100, "MPI_COMM_NULL"),
];

/// The standard ABI's datatypes whose size is not in the handle (the C types of the
/// platform), x86-64 sizes.
pub const STANDARD_DATATYPES: [(u64, &str, u64); 6] = [
    (0x209, "MPI_INT", 4),
    (0x20a, "MPI_LONG", 8),
    (0x210, "MPI_FLOAT", 4),
    (0x214, "MPI_DOUBLE", 8),
    (0x243, "MPI_CHAR", 1),
    (0x247, "MPI_BYTE", 1),
];

/// Open MPI's predefined communicators: the objects their handles point to.
pub const OPEN_MPI_COMMS: [(&str, &str); 3] = [
    ("ompi_mpi_comm_world", "MPI_COMM_WORLD"),
    ("ompi_mpi_comm_self", "MPI_COMM_SELF"),
    ("ompi_mpi_comm_null", "MPI_COMM_NULL"),
];

/// Open MPI's basic datatypes' objects and their sizes on x86-64 (C's, then Fortran's
/// with gfortran's default kinds).
pub const OPEN_MPI_DATATYPES: &[(&str, u64)] = &[
    ("ompi_mpi_char", 1),
    ("ompi_mpi_signed_char", 1),
    ("ompi_mpi_unsigned_char", 1),
    ("ompi_mpi_byte", 1),
    ("ompi_mpi_packed", 1),
    ("ompi_mpi_c_bool", 1),
    ("ompi_mpi_int8_t", 1),
    ("ompi_mpi_uint8_t", 1),
    ("ompi_mpi_short", 2),
    ("ompi_mpi_unsigned_short", 2),
    ("ompi_mpi_int16_t", 2),
    ("ompi_mpi_uint16_t", 2),
    ("ompi_mpi_int", 4),
    ("ompi_mpi_unsigned", 4),
    ("ompi_mpi_float", 4),
    ("ompi_mpi_int32_t", 4),
    ("ompi_mpi_uint32_t", 4),
    ("ompi_mpi_long", 8),
    ("ompi_mpi_unsigned_long", 8),
    ("ompi_mpi_long_long_int", 8),
    ("ompi_mpi_unsigned_long_long", 8),
    ("ompi_mpi_double", 8),
    ("ompi_mpi_int64_t", 8),
    ("ompi_mpi_uint64_t", 8),
    ("ompi_mpi_aint", 8),
    ("ompi_mpi_long_double", 16),
    ("ompi_mpi_character", 1),
    ("ompi_mpi_logical", 4),
    ("ompi_mpi_integer", 4),
    ("ompi_mpi_integer1", 1),
    ("ompi_mpi_integer2", 2),
    ("ompi_mpi_integer4", 4),
    ("ompi_mpi_integer8", 8),
    ("ompi_mpi_real", 4),
    ("ompi_mpi_real4", 4),
    ("ompi_mpi_real8", 8),
    ("ompi_mpi_dblprec", 8),
    ("ompi_mpi_cplex", 8),
    ("ompi_mpi_dblcplex", 16),
];

/// The kinds of handle a Fortran program passes, with Open MPI's table of each
/// (`MPI_Comm_f2c(h)` is `table.addr[h]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleKind {
    /// `MPI_Comm`.
    Comm,
    /// `MPI_Datatype`.
    Datatype,
}

impl HandleKind {
    fn open_mpi_table(self) -> &'static str {
        match self {
            HandleKind::Comm => "ompi_comm_f_to_c_table",
            HandleKind::Datatype => "ompi_datatype_f_to_c_table",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            HandleKind::Comm => "communicators",
            HandleKind::Datatype => "datatypes",
        }
    }
}

/// Where `opal_pointer_array_t` keeps its slot count and slots: in a build without
/// debugging (the objects are 0x78 bytes), and in one with `--enable-debug` (whose
/// object header and mutex are longer).
const POINTER_ARRAY_LAYOUTS: [(u64, u64); 2] = [(88, 112), (152, 176)];

/// Most slots a table is believed to have: a larger count is a misread.
const MAX_TABLE_SLOTS: u64 = 1 << 24;

/// One process's MPI ABI, with the addresses of Open MPI's predefined objects.
#[derive(Debug, Clone)]
pub struct Abi {
    /// Which one.
    pub family: Family,
    objects: HashMap<u64, (&'static str, Option<u64>)>,
    /// Open MPI's Fortran handle tables, by kind, and the address of
    /// `ompi_mpi_comm_world` (slot 0 of the communicators' table: how the layout is told).
    tables: Vec<(HandleKind, u64)>,
    world: Option<u64>,
}

impl Abi {
    /// The ABI of the MPI library `space` maps, if it maps one.
    pub fn of(space: &AddressSpace) -> Option<Abi> {
        if let Some(world) = space.find_symbol("ompi_mpi_comm_world") {
            let mut objects = HashMap::new();
            objects.insert(world, ("MPI_COMM_WORLD", None));
            for (symbol, name) in OPEN_MPI_COMMS {
                if let Some(a) = space.find_symbol(symbol) {
                    objects.insert(a, (name, None));
                }
            }
            for &(symbol, size) in OPEN_MPI_DATATYPES {
                if let Some(a) = space.find_symbol(symbol) {
                    objects.insert(a, (symbol, Some(size)));
                }
            }
            let tables = [HandleKind::Comm, HandleKind::Datatype]
                .into_iter()
                .filter_map(|k| Some((k, space.find_symbol(k.open_mpi_table())?)))
                .collect();
            return Some(Abi {
                family: Family::OpenMpi,
                objects,
                tables,
                world: Some(world),
            });
        }
        space.find_function("PMPI_Init")?;
        let standard = space.objects().iter().any(|(path, _)| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libmpi_abi.so"))
        });
        Some(Abi {
            family: if standard {
                Family::Standard
            } else {
                Family::Mpich
            },
            objects: HashMap::new(),
            tables: Vec::new(),
            world: None,
        })
    }

    /// An ABI without objects (for tests and synthetic processes).
    pub fn new(family: Family) -> Abi {
        Abi {
            family,
            objects: HashMap::new(),
            tables: Vec::new(),
            world: None,
        }
    }

    /// The C handle of a Fortran `INTEGER` handle, as `MPI_Comm_f2c` (or
    /// `MPI_Type_f2c`) would make it in the process: the same `int` in MPICH's ABI, the
    /// object in the slot of Open MPI's table, read through `read` (8 bytes at an
    /// address).
    pub fn from_fortran(
        &self,
        kind: HandleKind,
        value: u64,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Result<u64, String> {
        match self.family {
            Family::Mpich => Ok(u64::from(value as u32)),
            Family::Standard => Err(
                "a Fortran handle of the MPI 5 standard ABI is converted by the library's own MPI_*_f2c, which mqd does not call"
                    .into(),
            ),
            Family::OpenMpi => {
                let table = self
                    .tables
                    .iter()
                    .find(|t| t.0 == kind)
                    .map(|t| t.1)
                    .ok_or_else(|| {
                        format!(
                            "Open MPI's table of Fortran {} ({}) is not among the library's symbols",
                            kind.noun(),
                            kind.open_mpi_table()
                        )
                    })?;
                let (size_at, slots_at) = self.pointer_array_layout(read)?;
                let size = read(table + size_at).ok_or("its table could not be read")? as u32;
                let index = value as u32 as i32;
                if index < 0 || index as u32 >= size {
                    return Err(format!(
                        "Fortran handle {index} is not in Open MPI's table of {} ({size} slots)",
                        kind.noun()
                    ));
                }
                let slots = read(table + slots_at).ok_or("its table could not be read")?;
                read(slots + 8 * index as u64)
                    .filter(|&o| o != 0)
                    .ok_or_else(|| format!("slot {index} of Open MPI's table of {} is empty or unreadable", kind.noun()))
            }
        }
    }

    /// Which layout of `opal_pointer_array_t` the library was built with: the one whose
    /// communicators' slot 0 is `ompi_mpi_comm_world`, as Open MPI sets it at start.
    fn pointer_array_layout(
        &self,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Result<(u64, u64), String> {
        let table = self
            .tables
            .iter()
            .find(|t| t.0 == HandleKind::Comm)
            .map(|t| t.1);
        let (Some(table), Some(world)) = (table, self.world) else {
            return Err(
                "Open MPI's table of Fortran communicators is not among the library's symbols"
                    .into(),
            );
        };
        POINTER_ARRAY_LAYOUTS
            .into_iter()
            .find(|&(size_at, slots_at)| {
                let size = read(table + size_at).map(|s| u64::from(s as u32));
                size.is_some_and(|s| s > 0 && s <= MAX_TABLE_SLOTS)
                    && read(table + slots_at).and_then(&mut *read) == Some(world)
            })
            .ok_or_else(|| "Open MPI's table of Fortran communicators has a layout mqd does not know (its slot 0 is not MPI_COMM_WORLD)".into())
    }

    /// Bytes of one handle as passed (`int` in MPICH's ABI, a pointer otherwise).
    pub fn handle_bits(&self) -> u32 {
        match self.family {
            Family::Mpich => 32,
            Family::OpenMpi | Family::Standard => 64,
        }
    }

    /// Its special ranks and tags.
    pub fn specials(&self) -> Specials {
        match self.family {
            Family::Mpich => MPICH_SPECIALS,
            Family::OpenMpi => OPEN_MPI_SPECIALS,
            Family::Standard => STANDARD_SPECIALS,
        }
    }

    /// A handle as the model keeps it: MPICH's are `int`s (sign-extended), others the
    /// pointer's bits.
    pub fn handle(&self, raw: u64) -> i64 {
        match self.family {
            Family::Mpich => i64::from(raw as u32 as i32),
            _ => raw as i64,
        }
    }

    /// The predefined communicator a handle is.
    pub fn predefined_comm(&self, raw: u64) -> Option<&'static str> {
        match self.family {
            Family::Mpich => MPICH_COMMS
                .iter()
                .find(|c| c.0 == u64::from(raw as u32))
                .map(|c| c.1),
            Family::Standard => STANDARD_COMMS.iter().find(|c| c.0 == raw).map(|c| c.1),
            Family::OpenMpi => self
                .objects
                .get(&raw)
                .filter(|o| o.1.is_none())
                .map(|o| o.0),
        }
    }

    /// The size of one element of a predefined datatype.
    pub fn datatype_size(&self, raw: u64) -> Option<u64> {
        match self.family {
            Family::Mpich => {
                let h = raw as u32;
                const DATATYPE: u32 = 3;
                let size = u64::from((h >> 8) & 0xff);
                (h >> 30 == 1 && (h >> 26) & 0xf == DATATYPE && size > 0).then_some(size)
            }
            Family::Standard => match raw {
                0x240..=0x27f | 0x2c0..=0x2ff => Some(1 << ((raw >> 3) & 7)),
                _ => STANDARD_DATATYPES.iter().find(|d| d.0 == raw).map(|d| d.2),
            },
            Family::OpenMpi => self.objects.get(&raw).and_then(|o| o.1),
        }
    }

    /// A rank argument (source, destination, root) in MPICH's spelling of the special
    /// values; the `int` it was passed as.
    pub fn rank(&self, raw: u64) -> i64 {
        let v = i64::from(raw as u32 as i32);
        let s = self.specials();
        if v == s.any_source {
            MPICH_SPECIALS.any_source
        } else if v == s.proc_null {
            MPICH_SPECIALS.proc_null
        } else if v == s.root {
            MPICH_SPECIALS.root
        } else {
            v
        }
    }

    /// A tag argument in MPICH's spelling of `MPI_ANY_TAG`.
    pub fn tag(&self, raw: u64) -> i64 {
        let v = i64::from(raw as u32 as i32);
        if v == self.specials().any_tag {
            MPICH_SPECIALS.any_tag
        } else {
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_ranks_are_spelled_as_mpich_does_whatever_the_abi() {
        let open = Abi::new(Family::OpenMpi);
        assert_eq!(open.rank((-1i64) as u64), -2, "Open MPI's ANY_SOURCE");
        assert_eq!(open.rank((-2i64) as u64), -1, "Open MPI's PROC_NULL");
        assert_eq!(open.rank(3), 3);
        let standard = Abi::new(Family::Standard);
        assert_eq!(standard.tag((-2i64) as u64), -1, "the standard's ANY_TAG");
        assert_eq!(standard.tag((-1i64) as u64), -1);
        assert_eq!(
            standard.rank((-3i64) as u64),
            -1,
            "the standard's PROC_NULL"
        );
        let mpich = Abi::new(Family::Mpich);
        // An int in a 64-bit register: the upper half is garbage.
        assert_eq!(mpich.rank(0xdead_beef_ffff_fffe), -2);
    }

    #[test]
    fn datatype_sizes_come_from_the_handle_where_the_abi_puts_them() {
        let mpich = Abi::new(Family::Mpich);
        assert_eq!(mpich.datatype_size(0x4c00_0405), Some(4), "MPI_INT");
        assert_eq!(mpich.datatype_size(0x4c00_080b), Some(8), "MPI_DOUBLE");
        assert_eq!(
            mpich.datatype_size(0x8c00_0000),
            None,
            "MPI_FLOAT_INT: no size"
        );
        assert_eq!(mpich.datatype_size(0x4400_0000), None, "a communicator");
        let standard = Abi::new(Family::Standard);
        assert_eq!(standard.datatype_size(0x250), Some(4), "MPI_INT32_T");
        assert_eq!(standard.datatype_size(0x209), Some(4), "MPI_INT");
        assert_eq!(
            mpich.predefined_comm(0xffff_ffff_4400_0000),
            Some("MPI_COMM_WORLD")
        );
        assert_eq!(standard.predefined_comm(0x101), Some("MPI_COMM_WORLD"));
    }
}
