//! Every MPI procedure a real MPI library exports is in mqd's table of calls: a frame in
//! any of them is placed by what that call waits for, never "unknown". The libraries are
//! those the tests run: MPICH 4.0.2 with debugger support (ch3, ch4), Debian's MPICH,
//! PyPI's and Intel MPI (PyPI's `impi-rt`), each with its Fortran bindings.

mod support;

use mqd_fixtures::real_mpich::{self, Device};
use mqd_model::calls::{CallClass, canonical};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The MPI libraries an `mpicc` links: its `-L` directories' `libNAME.so` for its `-l`
/// names, and the Fortran bindings beside them.
fn libraries_of(mpicc: &Path) -> Vec<PathBuf> {
    let out = Command::new(mpicc)
        .arg("-show")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mpicc.display()));
    let show = String::from_utf8_lossy(&out.stdout).into_owned();
    let dirs: Vec<PathBuf> = show
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("-L"))
        .map(PathBuf::from)
        .collect();
    let mut names: Vec<String> = show
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("-l"))
        .filter(|l| l.starts_with("mpi"))
        .map(str::to_owned)
        .collect();
    names.push("mpifort".into());
    let mut found = Vec::new();
    for name in names {
        if let Some(lib) = dirs
            .iter()
            .find_map(|d| elf_named(d, &format!("lib{name}.so")))
        {
            found.push(lib);
        }
    }
    assert!(
        found.iter().any(|l| !l.ends_with("libmpifort.so")),
        "{} -show names no MPI library: {show}",
        mpicc.display()
    );
    found
}

/// The ELF file `dir/NAME` or `dir/NAME.VERSION` (PyPI's `libmpi.so` is a linker script).
fn elf_named(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f == name || f.starts_with(&format!("{name}.")))
        })
        .collect();
    candidates.sort();
    candidates
        .into_iter()
        .find(|p| std::fs::read(p).is_ok_and(|bytes| bytes.starts_with(b"\x7fELF")))
}

/// The functions a library defines whose names stand for MPI procedures (`MPI_`,
/// `PMPI_`, `MPIX_`, Fortran's `mpi_..._`).
fn mpi_functions(library: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .expect("nm (scripts/test installs binutils)");
    assert!(out.status.success(), "nm {}", library.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().rev();
            let name = fields.next()?;
            let kind = fields.next()?;
            matches!(kind, "T" | "W" | "i").then_some(name)
        })
        // Intel Fortran's module symbols (`mpi_f08_types_mp_mpi_comm_eq_`, `mpi_base._`)
        // are its modules' helpers (handle comparisons, string conversions) and data, not
        // MPI procedures; a frame in one is inside the MPI library, its place unknown.
        .filter(|name| !name.contains("_mp_") && !name.contains('.'))
        .filter(|name| {
            let lower = name.to_ascii_lowercase();
            let lower = lower.strip_prefix('p').unwrap_or(&lower);
            lower.starts_with("mpi_") || lower.starts_with("mpix_")
        })
        .map(str::to_owned)
        .collect()
}

fn check(mpi: &str, mpicc: &Path) {
    check_libraries(mpi, libraries_of(mpicc));
}

fn check_libraries(mpi: &str, libraries: Vec<PathBuf>) {
    let mut unknown = Vec::new();
    let mut seen = 0;
    for library in libraries {
        for function in mpi_functions(&library) {
            seen += 1;
            if canonical(&function).is_none_or(|c| c.class == CallClass::Unknown) {
                unknown.push(format!("{} in {}", function, library.display()));
            }
        }
    }
    eprintln!(
        "{mpi}: {seen} MPI functions exported, {} unknown",
        unknown.len()
    );
    assert!(seen > 500, "{mpi}: only {seen} MPI functions found");
    assert!(
        unknown.is_empty(),
        "{mpi}: {} exported functions not in the table:\n{}",
        unknown.len(),
        unknown.join("\n")
    );
}

#[test]
fn mpich_with_debugger_support() {
    for device in [Device::Ch3, Device::Ch4] {
        let m = real_mpich::mpich(device);
        check(device.name(), &m.prefix.join("bin/mpicc"));
    }
}

#[test]
fn debians_mpich() {
    check("Debian's mpich", &support::debian().mpicc);
}

#[test]
fn pypis_mpich() {
    let pypi = support::pypi();
    check(pypi.name, &pypi.mpicc);
}

#[test]
fn intel_mpi() {
    let intel = support::intel();
    let lib = intel
        .mpiexec
        .parent()
        .and_then(Path::parent)
        .expect("the environment")
        .join("lib");
    let libraries = ["libmpi.so", "libmpifort.so"]
        .iter()
        .filter_map(|name| elf_named(&lib, name))
        .collect();
    check_libraries(intel.name, libraries);
}
