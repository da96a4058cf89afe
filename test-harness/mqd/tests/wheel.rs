//! The wheel `scripts/wheel` builds, from this build's `mqd` and libraries: manylinux-tagged
//! (`auditwheel show`), its binaries stripped of their debug information, installed by
//! `pip` into a new virtual environment, whose `mqd` finds its libraries there (the build
//! tree out of sight: it is given by no variable), runs its demo, and diagnoses a hung
//! mpi4py job of PyPI's mpich (`mqd job`, and `mqd run` preloading the environment's
//! hang recorder).

mod support;

use mqd_fixtures::real_mpich;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::Scratch;

const LIMIT: Duration = Duration::from_secs(120);

/// What a command said, and its exit code.
struct Said {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `mqd` of the environment `venv` with `args`, none of the build's variables set.
fn mqd(venv: &Path, args: &[&str]) -> Said {
    let mut command = Command::new(venv.join("bin/mqd"));
    command
        .args(args)
        .env_remove("MQD_DLL")
        .env_remove("MQD_RECORDER")
        .env("MQD_CACHE_DIR", venv.join("cache"));
    let run = real_mpich::run(command, LIMIT);
    Said {
        code: run.status.and_then(|s| s.code()),
        stdout: String::from_utf8_lossy(&run.stdout).into_owned(),
        stderr: run.stderr,
    }
}

#[test]
fn the_wheel_installs_mqd_into_a_virtual_environment_that_diagnoses_an_mpi4py_hang() {
    let scratch = Scratch::new("wheel");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_mqd"));
    let library = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built");
    let built = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/wheel"))
        .arg(scratch.file("wheels"))
        .env("MQD_BIN", &exe)
        .env("MQD_LIB", &library)
        .env("MQD_RECORDER", exe.with_file_name("libmqd_recorder.so"))
        .stdin(Stdio::null())
        .output()
        .expect("scripts/wheel");
    let said = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "scripts/wheel: {said}");
    let wheel = PathBuf::from(String::from_utf8_lossy(&built.stdout).trim());
    let name = wheel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with(&format!(
            "mqd-{}-py3-none-manylinux_",
            env!("CARGO_PKG_VERSION")
        )) && name.ends_with("_x86_64.whl"),
        "{name}"
    );
    assert!(
        said.contains("is consistent with the"),
        "auditwheel show: {said}"
    );

    let venv = scratch.file("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 -m venv");
    assert!(made.status.success(), "{made:?}");
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--no-index"])
        .arg(&wheel)
        .output()
        .expect("pip");
    assert!(pip.status.success(), "pip install: {pip:?}");
    for file in [
        "bin/mqd",
        "lib/libmqd_mpich.so",
        "lib/libmqd_recorder.so",
        "include/mpi_interface.h",
        "share/man/man1/mqd-run.1",
    ] {
        assert!(venv.join(file).is_file(), "{file} not installed");
    }
    // Shipped stripped of debug information, its symbols kept.
    for file in ["bin/mqd", "lib/libmqd_mpich.so", "lib/libmqd_recorder.so"] {
        let sections = Command::new("readelf")
            .arg("-S")
            .arg(venv.join(file))
            .output()
            .expect("readelf");
        let sections = String::from_utf8_lossy(&sections.stdout);
        assert!(
            !sections.contains(".debug_info"),
            "{file} has debug information"
        );
        assert!(sections.contains(".symtab"), "{file} lost its symbols");
    }

    let demo = mqd(&venv, &["demo"]);
    assert_eq!(demo.code, Some(8), "{}", demo.stderr);
    assert!(
        demo.stdout
            .contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{}",
        demo.stdout
    );
    assert!(
        demo.stdout
            .contains(&format!("({})", venv.join("lib/libmqd_mpich.so").display())),
        "the environment's library reads the queues: {}",
        demo.stdout
    );

    // An mpi4py job of PyPI's mpich (another environment's): each rank waits for a
    // message from its left neighbour that nobody sends. Each READY line is one write:
    // the pieces of a print() of three ranks interleave in mpiexec's output.
    let bin = support::mpi4py_bin();
    let hang = scratch.file("hang.py");
    std::fs::write(
        &hang,
        "import os\nfrom mpi4py import MPI\n\
         c = MPI.COMM_WORLD\nr, n = c.Get_rank(), c.Get_size()\n\
         os.write(1, f'READY {r} {os.getpid()}\\n'.encode())\n\
         c.recv(source=(r - 1) % n, tag=7)\n",
    )
    .unwrap();
    let mut mpiexec = Command::new(bin.join("mpiexec"));
    mpiexec.args(["-n", "3"]).arg(bin.join("python")).arg(&hang);
    let mut job = real_mpich::Job::start(mpiexec, "mpiexec -n 3 python hang.py".into(), 3);
    job.wait_ready(0);
    let starter = job.starter.to_string();
    let dumped = mqd(&venv, &["job", &starter]);
    assert_eq!(dumped.code, Some(8), "{}{}", dumped.stdout, dumped.stderr);
    assert!(
        dumped
            .stdout
            .contains("each blocked in MPI_Mprobe from its left neighbour"),
        "{}",
        dumped.stdout
    );
    drop(job);

    // Under mqd run, the environment's hang recorder proves it from one snapshot.
    let report = scratch.file("report");
    let report_dir = report.to_str().expect("UTF-8");
    let python = bin.join("python");
    let mpiexec = bin.join("mpiexec");
    let run = mqd(
        &venv,
        &[
            "run",
            "--hang-after",
            "3s",
            "--interval",
            "1s",
            "--report",
            report_dir,
            "--",
            mpiexec.to_str().expect("UTF-8"),
            "-n",
            "3",
            python.to_str().expect("UTF-8"),
            hang.to_str().expect("UTF-8"),
        ],
    );
    let text = std::fs::read_to_string(report.join("report.txt")).unwrap_or_default();
    assert_eq!(run.code, Some(8), "{text}{}", run.stderr);
    assert!(
        text.contains("the hang recorder's records read")
            && text.contains("nothing ranks 0-2 sent them is still on its way"),
        "{text}"
    );
}
