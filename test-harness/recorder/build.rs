//! Generates one wrapper per C binding of the MPI standard from its machine-readable list
//! (`mpi-standard/apis.json`): the procedure table (names and argument roles) and an
//! exported `MPI_X` for each that records, then calls the next definition.

use serde_json::Value;
use std::fmt::Write as _;

/// A C binding: its name, what each C parameter is to the recorder, whether it returns
/// a `double`.
struct Binding {
    name: String,
    roles: String,
    double: bool,
    /// The large-count form (`_c`): counts are `MPI_Count`, not `int`.
    large: bool,
    /// Collective over its communicator: counted there, in order.
    collective: bool,
    /// What it does to the message accounting: a `Traffic` variant's name.
    traffic: &'static str,
}

/// What each point-to-point procedure (without `_c`) does to the message accounting and
/// the request table (`Traffic` in `lib.rs`).
const TRAFFIC: &[(&str, &str)] = &[
    ("MPI_Send", "Send"),
    ("MPI_Bsend", "Send"),
    ("MPI_Ssend", "Send"),
    ("MPI_Rsend", "Send"),
    ("MPI_Isend", "Send"),
    ("MPI_Ibsend", "Send"),
    ("MPI_Issend", "Send"),
    ("MPI_Irsend", "Send"),
    ("MPI_Recv", "Receive"),
    ("MPI_Sendrecv", "SendReceive"),
    ("MPI_Sendrecv_replace", "SendReceive"),
    ("MPI_Irecv", "Irecv"),
    ("MPI_Isendrecv", "Isendrecv"),
    ("MPI_Isendrecv_replace", "Isendrecv"),
    ("MPI_Send_init", "SendInit"),
    ("MPI_Bsend_init", "SendInit"),
    ("MPI_Ssend_init", "SendInit"),
    ("MPI_Rsend_init", "SendInit"),
    ("MPI_Recv_init", "ReceiveInit"),
    ("MPI_Psend_init", "Untracked"),
    ("MPI_Start", "Start"),
    ("MPI_Startall", "Start"),
    ("MPI_Wait", "Wait"),
    ("MPI_Test", "Test"),
    ("MPI_Waitall", "Waitall"),
    ("MPI_Testall", "Testall"),
    ("MPI_Waitany", "Waitany"),
    ("MPI_Testany", "Testany"),
    ("MPI_Waitsome", "Waitsome"),
    ("MPI_Testsome", "Testsome"),
    ("MPI_Mprobe", "Probe"),
    ("MPI_Improbe", "Probe"),
    ("MPI_Mrecv", "Mrecv"),
    ("MPI_Imrecv", "Mrecv"),
    ("MPI_Cancel", "Cancel"),
    ("MPI_Request_free", "Free"),
];

/// The accounting of `name` (with or without `_c`).
fn traffic(name: &str) -> &'static str {
    let base = name.strip_suffix("_c").unwrap_or(name);
    TRAFFIC
        .iter()
        .find(|(n, _)| *n == base)
        .map_or("None", |(_, t)| t)
}

/// The collective operations (blocking, nonblocking `I`, persistent `_init`) and the
/// constructors collective over a communicator (windows' too): the calls each member
/// makes on it in the same order.
const COLLECTIVES: &[&str] = &[
    "Barrier",
    "Bcast",
    "Gather",
    "Gatherv",
    "Scatter",
    "Scatterv",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
    "Alltoallw",
    "Reduce",
    "Allreduce",
    "Reduce_scatter",
    "Reduce_scatter_block",
    "Scan",
    "Exscan",
    "Neighbor_allgather",
    "Neighbor_allgatherv",
    "Neighbor_alltoall",
    "Neighbor_alltoallv",
    "Neighbor_alltoallw",
];
const CONSTRUCTORS: &[&str] = &[
    "MPI_Comm_dup",
    "MPI_Comm_dup_with_info",
    "MPI_Comm_idup",
    "MPI_Comm_idup_with_info",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_create",
    "MPI_Intercomm_create",
    "MPI_Intercomm_merge",
    "MPI_Cart_create",
    "MPI_Cart_sub",
    "MPI_Graph_create",
    "MPI_Dist_graph_create",
    "MPI_Dist_graph_create_adjacent",
    "MPI_Win_create",
    "MPI_Win_allocate",
    "MPI_Win_allocate_shared",
    "MPI_Win_create_dynamic",
];
/// The synchronisation calls collective over a window's group, counted on the window.
const WINDOW_COLLECTIVES: &[&str] = &["MPI_Win_fence", "MPI_Win_free"];

/// Whether the procedure `name` (without `_c`) is collective over its communicator:
/// `MPI_Bcast`, `MPI_Ibcast`, `MPI_Bcast_init`, a constructor.
fn is_collective(name: &str) -> bool {
    if CONSTRUCTORS.contains(&name) || WINDOW_COLLECTIVES.contains(&name) {
        return true;
    }
    let Some(base) = name.strip_prefix("MPI_") else {
        return false;
    };
    let base = base.strip_suffix("_init").unwrap_or(base);
    if COLLECTIVES.contains(&base) {
        return true;
    }
    base.strip_prefix('I').is_some_and(|rest| {
        let mut chars = rest.chars();
        chars.next().is_some_and(|first| {
            let op = format!("{}{}", first.to_ascii_uppercase(), chars.as_str());
            COLLECTIVES.contains(&op.as_str())
        })
    })
}

/// What a parameter is to the recorder (one letter per word, read by `record.rs`); a
/// variadic tail (`MPI_Pcontrol`) is passed on as the five words the registers hold.
fn roles(p: &Value) -> String {
    match p["kind"].as_str() {
        Some("VARARGS") => ".....".to_owned(),
        _ => role(p).to_string(),
    }
}

fn role(p: &Value) -> char {
    let kind = p["kind"].as_str().unwrap_or("");
    let dir = p["param_direction"].as_str().unwrap_or("");
    let scalar = p["length"].is_null();
    match (kind, dir, scalar) {
        ("COMMUNICATOR", "in", true) => 'c',
        ("COMMUNICATOR", "out", true) => 'C',
        // MPI_Comm_free, MPI_Comm_disconnect: the handle they end, by reference.
        ("COMMUNICATOR", "inout", true) => 'F',
        ("RANK" | "RANK_NNI", "in", true) => 'r',
        ("TAG", "in", true) => 't',
        ("POLYXFER_NUM_ELEM_NNI" | "POLYXFER_NUM_ELEM" | "XFER_NUM_ELEM", "in", true) => 'n',
        ("DATATYPE", "in", true) => 'd',
        ("REQUEST", "out", true) => 'q',
        ("REQUEST", "inout", true) => 'Q',
        ("REQUEST", _, false) => 'A',
        ("ARRAY_LENGTH" | "ARRAY_LENGTH_NNI", "in", true) => 'L',
        ("STATUS", "out", true) => 's',
        ("STATUS", "out", false) => 'S',
        ("LOGICAL", "out", true) => 'f',
        ("INDEX", "out", true) => 'i',
        ("INDEX", "out", false) => 'I',
        ("ARRAY_LENGTH", "out", true) => 'o',
        ("MESSAGE", "out", true) => 'm',
        ("MESSAGE", "inout", true) => 'M',
        ("WINDOW", "in", true) => 'w',
        ("WINDOW", "out", true) => 'W',
        // MPI_Win_free: the window it ends, by reference.
        ("WINDOW", "inout", true) => 'X',
        ("ASSERT", "in", true) => 'a',
        _ => '.',
    }
}

/// The roles a wrapper looks up, in `Binding::at`'s order (`lib.rs`: `ROLES`).
const ROLES: &str = "crtndCFQLAqsSfiIoMmwWXa";

/// Each role's first parameter, 255 where there is none.
fn positions(roles: &str) -> Vec<u8> {
    ROLES
        .chars()
        .map(|r| roles.find(r).map_or(u8::MAX, |i| i as u8))
        .collect()
}

/// The second rank and the second tag (a `MPI_Sendrecv`'s receive half), 255 where none.
fn seconds(roles: &str) -> [u8; 2] {
    ['r', 't'].map(|r| {
        roles
            .char_indices()
            .filter(|&(_, c)| c == r)
            .nth(1)
            .map_or(u8::MAX, |(i, _)| i as u8)
    })
}

fn bindings(apis: &Value) -> Vec<Binding> {
    let mut out = Vec::new();
    for procedure in apis.as_object().expect("apis.json: an object").values() {
        let attrs = &procedure["attributes"];
        if attrs["c_expressible"] != true
            || attrs["callback"] == true
            || !attrs["predefined_function"].is_null()
        {
            continue;
        }
        let name = procedure["name"].as_str().expect("a name").to_owned();
        let params: Vec<&Value> = procedure["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter(|p| !p["suppress"].as_str().unwrap_or("").contains("c_parameter"))
            .collect();
        let returns = procedure["return_kind"].as_str().unwrap_or("");
        let double = matches!(returns, "WALL_TIME" | "TICK_RESOLUTION");
        let small: String = params
            .iter()
            .filter(|p| p["large_only"] != true)
            .map(|p| roles(p))
            .collect();
        let large = params
            .iter()
            .any(|p| p["kind"].as_str().unwrap_or("").starts_with("POLY"))
            || returns.starts_with("POLY");
        let collective = is_collective(&name);
        let traffic = traffic(&name);
        if large {
            out.push(Binding {
                name: format!("{name}_c"),
                roles: params.iter().map(|p| roles(p)).collect(),
                double,
                large: true,
                collective,
                traffic,
            });
        }
        out.push(Binding {
            name,
            roles: small,
            double,
            large: false,
            collective,
            traffic,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn main() {
    let input = "mpi-standard/apis.json";
    println!("cargo::rerun-if-changed={input}");
    let text = std::fs::read_to_string(input).expect("mpi-standard/apis.json");
    let apis: Value = serde_json::from_str(&text).expect("apis.json: JSON");
    let all = bindings(&apis);

    let mut code = String::new();
    let _ = writeln!(code, "/// How many C bindings are wrapped.");
    let _ = writeln!(code, "pub const PROCEDURES: usize = {};", all.len());
    let id = |name: &str| all.iter().position(|b| b.name == name).expect(name);
    let _ = writeln!(
        code,
        "/// The call numbers of `MPI_Init` and `MPI_Init_thread`: the rank is known after them."
    );
    let _ = writeln!(
        code,
        "pub const INITIALISERS: [usize; 2] = [{}, {}];",
        id("MPI_Init"),
        id("MPI_Init_thread")
    );
    let _ = writeln!(code, "pub const FINALIZER: usize = {};", id("MPI_Finalize"));
    let _ = writeln!(
        code,
        "/// The call numbers of the procedures that make an intercommunicator between two groups."
    );
    let _ = writeln!(
        code,
        "pub const GROUP_PAIRERS: [usize; 2] = [{}, {}];",
        id("MPI_Intercomm_create"),
        id("MPI_Intercomm_create_from_groups")
    );
    let mut names = String::new();
    for b in &all {
        names.push_str(&b.name);
        names.push('\0');
    }
    let _ = writeln!(
        code,
        "/// Their names, NUL-terminated, in call-number order."
    );
    let _ = writeln!(
        code,
        "pub static NAMES: [u8; {}] = *b{:?};",
        names.len(),
        names
    );
    let _ = writeln!(
        code,
        "/// Each binding: its name and its parameters' roles."
    );
    let _ = writeln!(code, "pub static BINDINGS: [Binding; PROCEDURES] = [");
    for b in &all {
        let _ = writeln!(
            code,
            "    Binding {{ name: c{:?}, large: {}, collective: {}, traffic: Traffic::{}, makes_request: {}, at: {:?}, second: {:?} }},",
            b.name,
            b.large,
            b.collective,
            b.traffic,
            b.roles.contains('q'),
            positions(&b.roles),
            seconds(&b.roles)
        );
    }
    let _ = writeln!(code, "];");
    let used: std::collections::BTreeSet<(usize, bool)> =
        all.iter().map(|b| (b.roles.len(), b.double)).collect();
    for (n, double) in used {
        let words = vec!["Word"; n].join(", ");
        let (name, ret) = if double {
            ("NextDouble", "f64")
        } else {
            ("Next", "Word")
        };
        let _ = writeln!(
            code,
            "type {name}{n} = unsafe extern \"C\" fn({words}) -> {ret};"
        );
    }
    for (id, b) in all.iter().enumerate() {
        let n = b.roles.len();
        let params: Vec<String> = (0..n).map(|i| format!("a{i}: Word")).collect();
        let args: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        let passed: Vec<String> = (0..n).map(|i| format!("args[{i}]")).collect();
        let (ret, alias) = if b.double {
            ("f64", format!("NextDouble{n}"))
        } else {
            ("Word", format!("Next{n}"))
        };
        let _ = writeln!(
            code,
            "/// The standard's `{}`: recorded, then passed on.",
            b.name
        );
        let _ = writeln!(
            code,
            "///\n/// # Safety\n/// As the binding's own: its arguments are the MPI's to check."
        );
        let _ = writeln!(code, "#[unsafe(no_mangle)]");
        let _ = writeln!(
            code,
            "pub unsafe extern \"C\" fn {}({}) -> {ret} {{",
            b.name,
            params.join(", ")
        );
        let _ = writeln!(
            code,
            "    #[allow(unused_mut)]\n    let mut args: [Word; {n}] = [{}];",
            args.join(", ")
        );
        // A status of the wrapper's own, given the MPI where the program ignores it
        // (the accounting reads a receive's source from it).
        let own_status = if b.roles.contains('s') {
            "Some(&mut status)"
        } else {
            "None"
        };
        if b.roles.contains('s') {
            let _ = writeln!(code, "    let mut status = crate::Status::default();");
        }
        let _ = writeln!(
            code,
            "    let entered = crate::record::enter({id}, &mut args, {own_status});"
        );
        let _ = writeln!(
            code,
            "    // SAFETY: the next definition of this binding, called with the words it was called with."
        );
        let _ = writeln!(
            code,
            "    let result = unsafe {{ crate::next::procedure::<{alias}>({id})({}) }};",
            passed.join(", ")
        );
        let status = if b.double { "0" } else { "result" };
        let _ = writeln!(
            code,
            "    crate::record::leave({id}, entered, {status}, &args);"
        );
        let _ = writeln!(code, "    result");
        let _ = writeln!(code, "}}");
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("wrappers.rs"), code).expect("write wrappers.rs");
}
