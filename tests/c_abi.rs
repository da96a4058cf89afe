//! The library as a C debugger sees it: the header compiles cleanly with the
//! sizes and offsets of MPICH's, the .so loads with RTLD_NOW and exports all
//! 18 entry points, and it needs nothing beyond libc and libgcc.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The library cargo built for this test: `target/<profile>/deps/libmqd_mpich.so`
/// (refreshed on every build) or the copy in `target/<profile>/`, whichever is newer.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("tests live in target/<profile>/deps");
    let candidates = [
        deps.join("libmqd_mpich.so"),
        deps.parent().expect("profile dir").join("libmqd_mpich.so"),
    ];
    candidates
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, p)| p)
        .expect("libmqd_mpich.so not built beside the tests")
}

#[test]
fn header_compiles_with_mpich_sizes_and_library_loads_with_rtld_now() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("mqd-abi-check-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/abi_check.c"))
        .arg("-o")
        .arg(&out)
        .arg("-ldl")
        .status()
        .expect("a C compiler (cc) is installed");
    assert!(
        status.success(),
        "abi_check.c did not compile against include/mpi_interface.h"
    );
    let run = Command::new(&out)
        .arg(library())
        .output()
        .expect("run abi_check");
    let _ = std::fs::remove_file(&out);
    assert!(
        run.status.success(),
        "abi_check failed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        "found 18 of 18 entry points"
    );
}

fn nm(args: &[&str]) -> Vec<String> {
    let out = Command::new("nm")
        .args(args)
        .arg(library())
        .output()
        .expect("nm (binutils) is installed");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect()
}

#[test]
fn exports_exactly_the_interface_and_imports_only_libc_and_libgcc() {
    let exported: Vec<String> = nm(&["-D", "--defined-only"])
        .into_iter()
        .filter(|s| s.starts_with("mqs_"))
        .collect();
    assert_eq!(exported.len(), 18, "exported: {exported:?}");
    for undefined in nm(&["-D", "--undefined-only"]) {
        let (name, version) = undefined.split_once('@').unwrap_or((&undefined, ""));
        let from_libc_or_libgcc = version.starts_with("GLIBC_")
            || version.starts_with("GCC_")
            || name.starts_with("_Unwind_")
            || matches!(
                name,
                "__gmon_start__"
                    | "_ITM_registerTMCloneTable"
                    | "_ITM_deregisterTMCloneTable"
                    | "__cxa_finalize"
                    | "__tls_get_addr"
            );
        assert!(from_libc_or_libgcc, "unexpected import {undefined}");
    }
}

#[test]
fn checked_in_header_matches_the_generated_one() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/mpi_interface.h"))
        .expect("build.rs generated the header");
    let checked_in = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("include/mpi_interface.h"),
    )
    .expect("include/mpi_interface.h exists");
    assert!(
        generated == checked_in,
        "include/mpi_interface.h is stale: refresh it with `MQD_REFRESH_HEADER=1 cargo build -p mqd-mpich`"
    );
}
