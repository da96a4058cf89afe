//! Builds the C fixture programs of `fixtures/` into `OUT_DIR/fixtures/` with
//! `gcc -g -O0 -fno-omit-frame-pointer` (see `src/fixtures.rs` for what they are).
//!
//! The compiler is `$MQD_FIXTURE_CC`, else `gcc` (else `cc`); `strip` and `objcopy` (binutils) make the
//! stripped and separate-debug-file copies. Each rank and the starters name the
//! message-queue library `target/<profile>/deps/libmqd_mpich.so` (beside `OUT_DIR/../../..`) as their
//! `MPIR_dll_name` / `dll_name_64`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Sources of the fixtures, relative to the package root.
const SOURCES: &[&str] = &[
    "fixtures/mqd_mpich.h",
    "fixtures/mqd_mpir.h",
    "fixtures/mqd_runtime.c",
    "fixtures/scenario.c",
    "fixtures/starter.c",
    "fixtures/plain.c",
];

/// Scenario binaries: (output name, layout define).
const LAYOUTS: &[(&str, &str)] = &[
    ("mqd-fixture-ch3", "MQD_LAYOUT_CH3"),
    ("mqd-fixture-ch4", "MQD_LAYOUT_CH4"),
    ("mqd-fixture-debugq4", "MQD_LAYOUT_DEBUGQ4"),
    ("mqd-fixture-debugq5", "MQD_LAYOUT_DEBUGQ5"),
];

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out_dir.join("fixtures");
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=fixtures");
    for source in SOURCES {
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-env-changed=MQD_FIXTURE_CC");

    let dll = dll_path(&out_dir);
    println!("cargo:rustc-env=MQD_FIXTURE_DLL={dll}");
    println!("cargo:rustc-env=MQD_FIXTURE_DIR={}", dir.display());

    let cc = env::var("MQD_FIXTURE_CC").unwrap_or_else(|_| {
        // gcc, else the system's `cc` (any compiler that takes gcc's options).
        let runs = |tool: &str| {
            Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok()
        };
        if !runs("gcc") && runs("cc") {
            "cc"
        } else {
            "gcc"
        }
        .to_owned()
    });
    check_tool(
        &cc,
        "--version",
        "a C compiler (gcc) to build the fixture programs",
    );

    let src = |name: &str| root.join("fixtures").join(name);
    let dll_define = format!("-DMQD_DLL_PATH={}", c_string(&dll));
    let mut jobs: Vec<(String, Command)> = Vec::new();
    let compile = |output: &str, defines: &[&str], sources: &[PathBuf], extra: &[&str]| {
        let mut cmd = Command::new(&cc);
        cmd.args([
            "-g",
            "-O0",
            "-fno-omit-frame-pointer",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
        ])
        .args(extra)
        .arg(format!("-I{}", root.join("fixtures").display()))
        .args(defines)
        .args(sources)
        .arg("-o")
        .arg(dir.join(output));
        (output.to_owned(), cmd)
    };
    let rank_sources = [src("mqd_runtime.c"), src("scenario.c")];
    for &(name, layout) in LAYOUTS {
        let define = format!("-D{layout}");
        jobs.push(compile(name, &[&define, &dll_define], &rank_sources, &[]));
    }
    // DWARF 4 (gcc 11 and later default to 5) for debuggers that must read both.
    jobs.push(compile(
        "mqd-fixture-ch4-dwarf4",
        &["-DMQD_LAYOUT_CH4", &dll_define],
        &rank_sources,
        &["-gdwarf-4"],
    ));
    jobs.push(compile(
        "mqd-fixture-starter",
        &[&dll_define],
        &[src("starter.c")],
        &[],
    ));
    jobs.push(compile(
        "mqd-fixture-starter-mpi2dd",
        &["-DMQD_STARTER_MPI2DD", &dll_define],
        &[src("starter.c")],
        &[],
    ));
    jobs.push(compile("mqd-fixture-plain", &[], &[src("plain.c")], &[]));

    // Two at a time: the machines that build this are small.
    let mut running: Vec<(String, Child)> = Vec::new();
    for (name, mut cmd) in jobs {
        if running.len() >= 2 {
            let (n, child) = running.remove(0);
            finish(&n, child);
        }
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {cc} for {name}: {e}"));
        running.push((name, child));
    }
    for (n, child) in running {
        finish(&n, child);
    }

    // Copies of one scenario binary without debug information, for the error paths.
    let base = dir.join("mqd-fixture-debugq5");
    check_tool(
        "strip",
        "--version",
        "binutils' strip to make the stripped fixtures",
    );
    for (flag, name) in [
        ("--strip-debug", "mqd-fixture-debugq5-strip-debug"),
        ("--strip-all", "mqd-fixture-debugq5-strip-all"),
    ] {
        run(
            Command::new("strip")
                .arg(flag)
                .arg(&base)
                .arg("-o")
                .arg(dir.join(name)),
            name,
        );
    }
    // Debug information in a separate file found through .gnu_debuglink (same directory).
    let debug_file = dir.join("mqd-fixture-debugq5-debuglink.debug");
    let linked = dir.join("mqd-fixture-debugq5-debuglink");
    check_tool(
        "objcopy",
        "--version",
        "binutils' objcopy to make the debuglink fixture",
    );
    run(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&base)
            .arg(&debug_file),
        "mqd-fixture-debugq5-debuglink.debug",
    );
    run(
        Command::new("strip")
            .arg("--strip-debug")
            .arg(&base)
            .arg("-o")
            .arg(&linked),
        "mqd-fixture-debugq5-debuglink",
    );
    run(
        Command::new("objcopy")
            .current_dir(&dir)
            .arg("--add-gnu-debuglink=mqd-fixture-debugq5-debuglink.debug")
            .arg(&linked),
        "mqd-fixture-debugq5-debuglink",
    );
}

/// `target/<profile>/deps/libmqd_mpich.so`, beside three levels above `OUT_DIR`
/// (`target/<profile>/build/<pkg>-<hash>/out`). Cargo writes the library there on every
/// build of a crate that depends on it (the copy in `target/<profile>/` only appears when
/// the root crate itself is built). The directory exists when this runs; the library
/// itself may be built later, so only the directory is canonicalised.
fn dll_path(out_dir: &Path) -> String {
    let profile_dir = out_dir.ancestors().nth(3).unwrap_or_else(|| {
        panic!(
            "OUT_DIR {} is not target/<profile>/build/<pkg>/out",
            out_dir.display()
        )
    });
    let profile_dir = profile_dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("cannot canonicalise {}: {e}", profile_dir.display()));
    let path = profile_dir.join("deps").join("libmqd_mpich.so");
    path.to_str()
        .unwrap_or_else(|| panic!("the library path {} is not UTF-8", path.display()))
        .to_owned()
}

/// `text` as a C string literal for a `-D` definition (no shell is involved).
fn c_string(text: &str) -> String {
    let mut s = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' | '\\' => {
                s.push('\\');
                s.push(ch);
            }
            _ => s.push(ch),
        }
    }
    s.push('"');
    s
}

fn check_tool(tool: &str, arg: &str, what: &str) {
    match Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) => panic!(
            "\n\nmqd-harness needs {what}: `{tool}` could not be run ({e}).\n\
             Install it (Debian/Ubuntu: `apt-get install gcc binutils`) or set MQD_FIXTURE_CC \
             to a C compiler.\n\n"
        ),
    }
}

fn finish(name: &str, child: Child) {
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for the compiler of {name}: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        panic!(
            "building fixture {name} failed ({}):\n{stderr}",
            output.status
        );
    }
    for line in stderr.lines() {
        println!("cargo:warning={name}: {line}");
    }
}

fn run(cmd: &mut Command, name: &str) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("making fixture {name}: {e}"));
    if !output.status.success() {
        panic!(
            "making fixture {name} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
