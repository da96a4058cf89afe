//! The Debian package `scripts/deb` builds, from this build's `mqd` and library: its
//! control fields and dependencies, its files (the command, the library, the header, a
//! manual page per command, bash, zsh and fish completions), and its `mqd` running the
//! demo unpacked into a scratch root (`dpkg-deb -x`), with the build tree out of sight
//! of the unpacked command (it finds the library beside itself, in `usr/lib`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn field(deb: &Path, name: &str) -> String {
    let out = Command::new("dpkg-deb")
        .args(["-f"])
        .arg(deb)
        .arg(name)
        .output()
        .expect("dpkg-deb");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_debian_package_holds_mqd_and_runs_its_demo_unpacked() {
    let scratch =
        Scratch(std::env::temp_dir().join(format!("mqd-deb-test-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    let library = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/deb");
    let built = Command::new(script)
        .arg(scratch.0.join("out"))
        .env("MQD_BIN", env!("CARGO_BIN_EXE_mqd"))
        .env("MQD_LIB", &library)
        .env(
            "MQD_RECORDER",
            std::path::Path::new(env!("CARGO_BIN_EXE_mqd")).with_file_name("libmqd_recorder.so"),
        )
        .output()
        .expect("scripts/deb");
    assert!(
        built.status.success(),
        "scripts/deb: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let deb = PathBuf::from(String::from_utf8_lossy(&built.stdout).trim());
    assert!(deb.is_file(), "{}", deb.display());
    assert_eq!(field(&deb, "Package"), "mqd");
    assert_eq!(field(&deb, "Version"), env!("CARGO_PKG_VERSION"));
    let depends = field(&deb, "Depends");
    assert!(depends.contains("libc6 (>="), "Depends: {depends}");
    let root = scratch.0.join("root");
    let unpacked = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .status()
        .expect("dpkg-deb -x");
    assert!(unpacked.success());
    for file in [
        "usr/bin/mqd",
        "usr/lib/libmqd_mpich.so",
        "usr/lib/libmqd_recorder.so",
        "usr/include/mpi_interface.h",
        "usr/share/man/man1/mqd.1.gz",
        "usr/share/man/man1/mqd-run.1.gz",
        "usr/share/man/man1/mqd-job.1.gz",
        "usr/share/bash-completion/completions/mqd",
        "usr/share/zsh/vendor-completions/_mqd",
        "usr/share/fish/vendor_completions.d/mqd.fish",
        "usr/share/doc/mqd/copyright",
    ] {
        let path = root.join(file);
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
            "{file} is missing or empty"
        );
    }
    // The manual page of `mqd run` documents its options; the completions know it.
    let page = Command::new("gzip")
        .arg("-dc")
        .arg(root.join("usr/share/man/man1/mqd-run.1.gz"))
        .output()
        .expect("gzip");
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(page.contains("hang\\-after"), "{page}");
    let bash = std::fs::read_to_string(root.join("usr/share/bash-completion/completions/mqd"))
        .unwrap_or_default();
    assert!(
        bash.contains("--hang-after"),
        "bash completion without run's options"
    );
    // The unpacked mqd runs its demo with its own library (MQD_DLL unset).
    let demo = Command::new(root.join("usr/bin/mqd"))
        .arg("demo")
        .env_remove("MQD_DLL")
        .output()
        .expect("the unpacked mqd");
    let text = String::from_utf8_lossy(&demo.stdout);
    assert_eq!(
        demo.status.code(),
        Some(8),
        "{text}{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    assert!(
        text.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{text}"
    );
    assert!(
        text.contains(&root.join("usr/lib/libmqd_mpich.so").display().to_string()),
        "the demo did not use the package's library: {text}"
    );
}
