//! Builds the demo job that `mqd demo` runs and carries inside the binary: an MPIR starter
//! and a rank of the MPI-like runtime of `demo-job/` (MPICH's 5.x debug-queue layout, with
//! the DWARF types a debugger needs), compiled with `$MQD_DEMO_CC`, else `gcc`, else `cc`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SOURCES: [&str; 5] = [
    "mqd_mpich.h",
    "mqd_mpir.h",
    "mqd_runtime.c",
    "scenario.c",
    "starter.c",
];

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let src = root.join("demo-job");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("demo");
    std::fs::create_dir_all(&out)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", out.display()));
    println!("cargo:rerun-if-env-changed=MQD_DEMO_CC");
    for source in SOURCES {
        println!("cargo:rerun-if-changed=demo-job/{source}");
    }
    let cc = env::var("MQD_DEMO_CC").unwrap_or_else(|_| {
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
    // The demo names no library: `mqd demo` gives it the one that goes with it.
    let common = ["-DMQD_DLL_PATH=\"\"", "-DMQD_RANK_PREFIX=\"mqd-demo-\""];
    compile(
        &cc,
        &src,
        &out.join("mqd-demo-ch3"),
        &["-DMQD_LAYOUT_CH3"],
        &common,
        &["mqd_runtime.c", "scenario.c"],
    );
    compile(
        &cc,
        &src,
        &out.join("mqd-demo-starter"),
        &[],
        &common,
        &["starter.c"],
    );
}

fn compile(
    cc: &str,
    src: &Path,
    output: &Path,
    defines: &[&str],
    common: &[&str],
    sources: &[&str],
) {
    let status = Command::new(cc)
        .args([
            "-g",
            "-O0",
            "-fno-omit-frame-pointer",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
        ])
        .arg(format!("-I{}", src.display()))
        .args(defines)
        .args(common)
        .args(sources.iter().map(|s| src.join(s)))
        .arg("-o")
        .arg(output)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "\n\nmqd needs a C compiler to build its demo job: `{cc}` could not be run ({e}).\n\
                 Install one (Debian/Ubuntu: `apt-get install gcc`) or set MQD_DEMO_CC.\n\n"
            )
        });
    if !status.success() {
        panic!(
            "building the demo job's {} failed ({status})",
            output.display()
        );
    }
}
