//! mqd's tables of MPI ABIs (`mqd_mpi_abi::tables`) against the real headers: a program
//! built with each MPI's compiler wrapper prints what its `mpi.h` says (special ranks and
//! tags, predefined communicators, datatypes and their C sizes) and every value must be
//! what the table says. MPICH's ABI from Debian's MPICH and PyPI's (5.x), the MPI 5
//! standard ABI from PyPI's `mpicc_abi`, Open MPI's from Debian's (4.1) and PyPI's (5.0).
//! Intel MPI has no header of its own here: its programs are built against MPICH's.

mod support;

use mqd_mpi_abi::tables::{
    Abi, Family, MPICH_SPECIALS, OPEN_MPI_DATATYPES, OPEN_MPI_SPECIALS, STANDARD_SPECIALS, Specials,
};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Datatypes with their C sizes, as the program prints them.
const DATATYPES: &[(&str, &str)] = &[
    ("MPI_CHAR", "char"),
    ("MPI_SIGNED_CHAR", "signed char"),
    ("MPI_UNSIGNED_CHAR", "unsigned char"),
    ("MPI_SHORT", "short"),
    ("MPI_UNSIGNED_SHORT", "unsigned short"),
    ("MPI_INT", "int"),
    ("MPI_UNSIGNED", "unsigned"),
    ("MPI_LONG", "long"),
    ("MPI_UNSIGNED_LONG", "unsigned long"),
    ("MPI_LONG_LONG_INT", "long long"),
    ("MPI_UNSIGNED_LONG_LONG", "unsigned long long"),
    ("MPI_FLOAT", "float"),
    ("MPI_DOUBLE", "double"),
    ("MPI_LONG_DOUBLE", "long double"),
    ("MPI_INT8_T", "int8_t"),
    ("MPI_UINT8_T", "uint8_t"),
    ("MPI_INT16_T", "int16_t"),
    ("MPI_UINT16_T", "uint16_t"),
    ("MPI_INT32_T", "int32_t"),
    ("MPI_UINT32_T", "uint32_t"),
    ("MPI_INT64_T", "int64_t"),
    ("MPI_UINT64_T", "uint64_t"),
    ("MPI_C_BOOL", "_Bool"),
    ("MPI_AINT", "MPI_Aint"),
];

/// The program: `NAME VALUE` lines; for Open MPI also whether each handle is the
/// address of the object the table names.
fn source() -> String {
    let mut c = String::from(
        "#include <mpi.h>\n#include <stdio.h>\n#include <stdint.h>\n#include <stdbool.h>\n\
         #define V(x) printf(\"%s %lld\\n\", #x, (long long)(x))\n\
         #define H(x) printf(\"%s %llu\\n\", #x, (unsigned long long)(uintptr_t)(x))\n\
         #define T(x, t) printf(\"%s %llu %zu\\n\", #x, (unsigned long long)(uintptr_t)(x), sizeof(t))\n\
         int main(void) {\n",
    );
    for v in ["MPI_ANY_SOURCE", "MPI_PROC_NULL", "MPI_ROOT", "MPI_ANY_TAG"] {
        c.push_str(&format!("V({v});\n"));
    }
    for h in ["MPI_COMM_WORLD", "MPI_COMM_SELF", "MPI_COMM_NULL"] {
        c.push_str(&format!("H({h});\n"));
    }
    for (name, ty) in DATATYPES {
        c.push_str(&format!("T({name}, {ty});\n"));
    }
    c.push_str("#ifdef OPEN_MPI\n");
    for (symbol, name) in mqd_mpi_abi::tables::OPEN_MPI_COMMS {
        c.push_str(&format!(
            "printf(\"is {name} {symbol} %d\\n\", (void *){name} == (void *)&{symbol});\n"
        ));
    }
    for &(symbol, _) in OPEN_MPI_DATATYPES {
        let name = open_mpi_name(symbol);
        c.push_str(&format!(
            "printf(\"is {name} {symbol} %d\\n\", (void *){name} == (void *)&{symbol});\n"
        ));
    }
    c.push_str("#endif\nreturn 0;\n}\n");
    c
}

/// What `mpicc`'s `mpi.h` says, by name (each line's words after the name).
fn values(mpicc: &Path, dir: &Path) -> HashMap<String, Vec<String>> {
    let src = dir.join("abi.c");
    let exe = dir.join(format!(
        "abi-{}",
        mpicc.display().to_string().replace('/', "_")
    ));
    std::fs::write(&src, source()).unwrap();
    let cc = Command::new(mpicc)
        .args(["-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mpicc.display()));
    assert!(
        cc.status.success(),
        "{}: {}",
        mpicc.display(),
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe).output().expect("run the ABI program");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace().map(str::to_owned);
            let first = words.next()?;
            let rest: Vec<String> = words.collect();
            // "is MPI_X symbol 1": keyed by "is MPI_X".
            Some(if first == "is" {
                (format!("is {}", rest[0]), rest[1..].to_vec())
            } else {
                (first, rest)
            })
        })
        .collect()
}

fn int(v: &HashMap<String, Vec<String>>, name: &str) -> i64 {
    v[name][0].parse().unwrap()
}

fn check_specials(what: &str, v: &HashMap<String, Vec<String>>, s: Specials) {
    assert_eq!(
        int(v, "MPI_ANY_SOURCE"),
        s.any_source,
        "{what}: MPI_ANY_SOURCE"
    );
    assert_eq!(
        int(v, "MPI_PROC_NULL"),
        s.proc_null,
        "{what}: MPI_PROC_NULL"
    );
    assert_eq!(int(v, "MPI_ROOT"), s.root, "{what}: MPI_ROOT");
    assert_eq!(int(v, "MPI_ANY_TAG"), s.any_tag, "{what}: MPI_ANY_TAG");
}

/// An ABI whose handles are values: the table names every predefined communicator and
/// sizes every datatype whose handle carries its size.
fn check_value_handles(what: &str, mpicc: &Path, family: Family, specials: Specials) {
    let dir = tempdir(what);
    let v = values(mpicc, &dir);
    check_specials(what, &v, specials);
    let abi = Abi::new(family);
    for name in ["MPI_COMM_WORLD", "MPI_COMM_SELF", "MPI_COMM_NULL"] {
        let handle: u64 = v[name][0].parse().unwrap();
        assert_eq!(
            abi.predefined_comm(handle),
            Some(name),
            "{what}: {name} {handle:#x}"
        );
    }
    let mut sized = 0;
    for (name, _) in DATATYPES {
        let handle: u64 = v[*name][0].parse().unwrap();
        let size: u64 = v[*name][1].parse().unwrap();
        // A handle without its size is never given a wrong one.
        if let Some(s) = abi.datatype_size(handle) {
            assert_eq!(s, size, "{what}: {name} {handle:#x}");
            sized += 1;
        }
    }
    assert!(sized >= 10, "{what}: only {sized} datatypes sized");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The MPI name of one of Open MPI's predefined datatype objects (`ompi_mpi_int`:
/// `MPI_INT`; its Fortran ones by their own names).
fn open_mpi_name(symbol: &str) -> String {
    match symbol {
        "ompi_mpi_dblprec" => "MPI_DOUBLE_PRECISION".into(),
        "ompi_mpi_cplex" => "MPI_COMPLEX".into(),
        "ompi_mpi_dblcplex" => "MPI_DOUBLE_COMPLEX".into(),
        _ => format!(
            "MPI_{}",
            symbol.trim_start_matches("ompi_mpi_").to_uppercase()
        ),
    }
}

/// Open MPI: handles are the addresses of the objects the table names.
fn check_open_mpi(what: &str, mpicc: &Path) {
    let dir = tempdir(what);
    let v = values(mpicc, &dir);
    check_specials(what, &v, OPEN_MPI_SPECIALS);
    for (symbol, name) in mqd_mpi_abi::tables::OPEN_MPI_COMMS {
        assert_eq!(
            v[&format!("is {name}")],
            [symbol.to_owned(), "1".to_owned()],
            "{what}: {name}"
        );
    }
    for &(symbol, size) in OPEN_MPI_DATATYPES {
        let name = open_mpi_name(symbol);
        assert_eq!(
            v[&format!("is {name}")][1],
            "1",
            "{what}: {name} is {symbol}"
        );
        if let Some(line) = v.get(&name) {
            assert_eq!(
                line[1].parse::<u64>().unwrap(),
                size,
                "{what}: {name}'s size"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mqd-abi-{}-{}",
        what.replace(|c: char| !c.is_alphanumeric(), "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn mpich_abi_tables_match_debians_and_pypis_mpi_h() {
    check_value_handles(
        "Debian's MPICH",
        &support::debian().mpicc,
        Family::Mpich,
        MPICH_SPECIALS,
    );
    check_value_handles(
        "PyPI's MPICH",
        &support::pypi().mpicc,
        Family::Mpich,
        MPICH_SPECIALS,
    );
}

#[test]
fn standard_abi_table_matches_mpi_abi_h() {
    let mpicc = support::pypi().mpicc.with_file_name("mpicc_abi");
    check_value_handles(
        "the MPI 5 standard ABI (PyPI's mpicc_abi)",
        &mpicc,
        Family::Standard,
        STANDARD_SPECIALS,
    );
}

#[test]
fn open_mpi_tables_match_its_mpi_h() {
    check_open_mpi("Debian's Open MPI", &support::debian_open_mpi().mpicc);
    check_open_mpi("PyPI's Open MPI 5", &support::pypi_open_mpi().mpicc);
}
