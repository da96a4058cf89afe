//! A debugger that knows only what MPICH's own library asks for gets a working display
//! from ours, in every layout: the synthetic images served through a restricted type
//! table, once as MPICH's `dbgstub.c` answers (a placeholder type for unknown names, "Panic!"
//! for unknown fields of the types it knows, no `sizeof`) and once as a debugger with
//! partial DWARF (unknown names are simply not found). The display must hold every entry,
//! with the documented fallbacks (sizes from `remote_size`, groups only where no table is
//! needed, no matched source and tag, no CH3 sender notes), and ours must never make the
//! stub panic.

use mqd_fixtures::expect::{ARCHES, Knowledge, assert_display, expected_display_knowing, library};
use mqd_library_host::session::{Session, SessionOptions};
use mqd_synthetic::{CommSpec, Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec, SyntheticTarget};
use mqd_target::{ByteOrder, DebugInfo, Memory, Target, TargetAbi, TargetError, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// How the restricted debugger answers names it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// MPICH's dbgstub: a placeholder for unknown types, complaints for unknown fields
    /// of known types and for unknown symbols, no `sizeof`, every function "found" at 0.
    Stub,
    /// A partial DWARF reader: what it lacks is not found, `sizeof` works.
    PartialDwarf,
}

/// One type as MPICH's library asks for it: its fields, each under the name the library
/// uses and the path where the synthetic image keeps it.
struct KnownType {
    name: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

const fn same(name: &'static str) -> (&'static str, &'static str) {
    (name, name)
}

/// Fields of the types every layout shares, as MPICH 4.0.2's dbgstub knows them.
const COMM: KnownType = KnownType {
    name: "MPIR_Comm",
    fields: &[
        same("name"),
        same("comm_next"),
        same("remote_size"),
        same("rank"),
        same("context_id"),
        same("recvcontext_id"),
        same("dev"),
    ],
};
const COMM_LIST: KnownType = KnownType {
    name: "MPIR_Comm_list",
    fields: &[same("sequence_number"), same("head")],
};
const REQUEST: KnownType = KnownType {
    name: "MPIR_Request",
    fields: &[same("dev"), same("status"), same("cc"), same("next")],
};
const SENDQ: KnownType = KnownType {
    name: "MPIR_Sendq",
    fields: &[
        same("next"),
        same("tag"),
        same("rank"),
        same("context_id"),
        same("sreq"),
    ],
};
const REQUEST_LIST_SYMBOLS: &[&str] = &[
    "MPIR_All_communicators",
    "MPID_Recvq_posted_head_ptr",
    "MPID_Recvq_unexpected_head_ptr",
    "MPIR_Sendq_head",
];

const CH3_REQUEST: KnownType = KnownType {
    name: "MPIDI_Request",
    fields: &[
        same("match"),
        same("user_buf"),
        same("user_count"),
        same("datatype"),
    ],
};
const CH3_MATCH: KnownType = KnownType {
    name: "MPIDI_Message_match",
    fields: &[same("parts")],
};
const CH3_PARTS: KnownType = KnownType {
    name: "MPIDI_Message_match_parts_t",
    fields: &[same("tag"), same("rank"), same("context_id")],
};
// dbgstub answers `am` with the offset of `ch4.am`, and the flat names of MPIDIG_req_t
// with the members of the anonymous `u.recv`.
const CH4_DEVREQ: KnownType = KnownType {
    name: "MPIDI_Devreq_t",
    fields: &[("am", "ch4.am")],
};
const CH4_AM: KnownType = KnownType {
    name: "MPIDIG_req_t",
    fields: &[
        same("buffer"),
        same("count"),
        ("rank", "u.recv.source"),
        ("tag", "u.recv.tag"),
        ("context_id", "u.recv.context_id"),
        same("datatype"),
    ],
};
// MPICH 5.0.1's dbgstub: the debug-queue nodes, and the request only for `cc`.
const DEBUGQ_REQUEST: KnownType = KnownType {
    name: "MPIR_Request",
    fields: &[same("cc")],
};
const DEBUGQ_NODE: KnownType = KnownType {
    name: "MPIR_Debugq",
    fields: &[
        same("next"),
        same("tag"),
        same("rank"),
        same("context_id"),
        same("buf"),
        same("count"),
        same("req"),
    ],
};

/// What MPICH's own library (and so its dbgstub) asks of an image of `layout`.
struct Asks {
    /// Types with the fields asked of them.
    types: &'static [KnownType],
    /// Type names known without fields (compiled out for the other device: their fields
    /// answer -1 without a complaint).
    silent: &'static [&'static str],
    symbols: &'static [&'static str],
}

fn mpich_asks(layout: Layout) -> Asks {
    match layout {
        Layout::Ch3 => Asks {
            types: &[
                COMM,
                COMM_LIST,
                REQUEST,
                SENDQ,
                CH3_REQUEST,
                CH3_MATCH,
                CH3_PARTS,
            ],
            silent: &["MPIDI_Devreq_t", "MPIDIG_req_t", "MPIDIG_comm_t"],
            symbols: REQUEST_LIST_SYMBOLS,
        },
        Layout::Ch4Am => Asks {
            types: &[COMM, COMM_LIST, REQUEST, SENDQ, CH4_DEVREQ, CH4_AM],
            silent: &[
                "MPIDI_Request",
                "MPIDI_Message_match",
                "MPIDI_Message_match_parts_t",
                "MPIDIG_comm_t",
            ],
            symbols: REQUEST_LIST_SYMBOLS,
        },
        Layout::Debugq4 | Layout::Debugq5 => Asks {
            types: &[COMM, COMM_LIST, DEBUGQ_REQUEST, DEBUGQ_NODE],
            silent: &["MPIDIG_comm_t"],
            symbols: &[
                "MPIR_All_communicators",
                "MPIR_Recvq_head",
                "MPIR_Unexpq_head",
                "MPIR_Sendq_head",
            ],
        },
    }
}

/// The one handle dbgstub gives every type name it does not know.
const PLACEHOLDER: TypeId = TypeId(usize::MAX);

/// A synthetic image served through what MPICH's library asks for, recording every
/// question a stub would have answered with "Panic!".
struct Restricted {
    inner: SyntheticTarget,
    mode: Mode,
    /// Known type handle -> (its fields: library name -> image path).
    fields: HashMap<TypeId, HashMap<&'static str, &'static str>>,
    /// Names of the known types, with their handles in the image (if the image has them).
    types: HashMap<&'static str, Option<TypeId>>,
    symbols: &'static [&'static str],
    panics: Rc<RefCell<Vec<String>>>,
}

impl Restricted {
    fn new(inner: SyntheticTarget, mode: Mode, panics: Rc<RefCell<Vec<String>>>) -> Restricted {
        let asks = mpich_asks(inner.layout());
        let mut types = HashMap::new();
        let mut fields = HashMap::new();
        for t in asks.types {
            let id = inner.find_type(t.name);
            types.insert(t.name, id);
            if let Some(id) = id {
                fields.insert(id, t.fields.iter().copied().collect());
            }
        }
        for name in asks.silent {
            types.insert(*name, inner.find_type(name));
        }
        Restricted {
            inner,
            mode,
            fields,
            types,
            symbols: asks.symbols,
            panics,
        }
    }

    fn panic(&self, what: String) {
        self.panics.borrow_mut().push(what);
    }
}

impl Memory for Restricted {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.inner.read_memory(addr, buf)
    }
}

impl DebugInfo for Restricted {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        if self.symbols.contains(&name) {
            return self.inner.find_symbol(name);
        }
        if self.mode == Mode::Stub {
            self.panic(format!("Panic! Unrecognized symbol {name}"));
        }
        None
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        match self.mode {
            Mode::Stub => Some(0),
            Mode::PartialDwarf => self.inner.find_function(name),
        }
    }

    fn find_type(&self, name: &str) -> Option<TypeId> {
        match (self.types.get(name), self.mode) {
            // A known name the image does not have: a stub still answers.
            (Some(Some(id)), _) => Some(*id),
            (Some(None) | None, Mode::Stub) => Some(PLACEHOLDER),
            (Some(None) | None, Mode::PartialDwarf) => None,
        }
    }

    fn type_size(&self, ty: TypeId) -> Option<u64> {
        match self.mode {
            Mode::Stub => None,
            Mode::PartialDwarf => self.inner.type_size(ty),
        }
    }

    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        let Some(known) = self.fields.get(&ty) else {
            // The placeholder, or a name known without fields: -1, silently.
            return None;
        };
        match known.get(field) {
            Some(path) => self.inner.field_offset(ty, path),
            None => {
                if self.mode == Mode::Stub {
                    self.panic(format!("Panic! Unrecognized field {field}"));
                }
                None
            }
        }
    }

    fn abi(&self) -> TargetAbi {
        self.inner.abi()
    }

    fn byte_order(&self) -> ByteOrder {
        self.inner.byte_order()
    }
}

impl Target for Restricted {
    fn name(&self) -> String {
        format!("{} through {:?}", self.inner.name(), self.mode)
    }
}

/// The example process plus what shows each fallback: an intercommunicator whose groups
/// differ in size (its size is the remote one), completed receives (no matched source),
/// a wildcard receive, synchronous and eager unexpected messages (no sender notes).
fn spec(layout: Layout, arch: mqd_synthetic::Arch) -> ProcessSpec {
    let mut spec = ProcessSpec::example(layout, arch);
    spec.comms.push(CommSpec::inter(
        6,
        "uneven inter",
        560,
        576,
        1,
        vec![2, 1],
        vec![0, 3, 5],
    ));
    spec.posted
        .push(RequestSpec::recv(576, 2, 21, 0x6000, 8).completed(2, 21));
    spec.posted
        .push(RequestSpec::recv(576, MPI_ANY_SOURCE, 22, 0x6100, 8));
    spec.unexpected.push(
        RequestSpec::unexpected(576, 0, 23, 4)
            .completed(0, 23)
            .synchronous(),
    );
    spec.sends.push(RequestSpec::send(560, 2, 24, 0x6200, 2));
    spec
}

fn check(mode: Mode) {
    for layout in Layout::ALL {
        for arch in ARCHES {
            let spec = spec(layout, arch);
            let target = spec.build();
            let want = expected_display_knowing(&spec, &target, 1, Knowledge::MpichMinimal);
            let panics = Rc::new(RefCell::new(Vec::new()));
            let restricted = Restricted::new(target, mode, panics.clone());
            let what = restricted.name();
            let mut dbg = Session::new(
                library(),
                SessionOptions {
                    null_sizeof: mode == Mode::Stub,
                    poison_outputs: true,
                    ..SessionOptions::default()
                },
            );
            let p = dbg
                .add_process(Box::new(restricted), 1)
                .unwrap_or_else(|e| panic!("{what}: setup: {e}"));
            let message = dbg.image_message(p).unwrap_or_default().to_owned();
            let got = dbg
                .display(p)
                .unwrap_or_else(|e| panic!("{what}: display: {e}"));
            assert_display(&what, &got, &want);
            assert!(
                panics.borrow().is_empty(),
                "{what}: the stub would have panicked: {:?}",
                panics.borrow()
            );
            // The message names every cost of the fallbacks the display shows.
            for cost in [
                "sizes from remote_size",
                "world ranks unknown",
                "sources and tags of completed receives unknown",
            ] {
                assert!(message.contains(cost), "{what}: {cost:?} not in {message}");
            }
            assert_eq!(
                message.contains("only what MPICH's own library needs was asked"),
                mode == Mode::Stub,
                "{what}: {message}"
            );
            assert_eq!(
                message.contains("eager, rendezvous and synchronous"),
                matches!(layout, Layout::Ch3 | Layout::Ch4Am),
                "{what}: {message}"
            );
        }
    }
}

#[test]
fn mpich_dbgstub_gets_every_entry_in_every_layout() {
    check(Mode::Stub);
}

#[test]
fn partial_dwarf_gets_every_entry_in_every_layout() {
    check(Mode::PartialDwarf);
}
