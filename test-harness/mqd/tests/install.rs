//! An installed `mqd` (`PREFIX/bin/mqd`, `PREFIX/lib/libmqd_mpich.so`, the layout
//! `scripts/install` makes) runs its demo with the build tree out of sight: in a mount
//! namespace where the whole workspace, `target/` included, is covered by an empty tmpfs.
//! (CI also runs `scripts/install` itself and the demo with `target/` moved away.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A private directory outside the workspace, removed when dropped.
struct Prefix(PathBuf);

impl Prefix {
    fn new() -> Prefix {
        let dir = std::env::temp_dir().join(format!("mqd-install-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        Prefix(dir)
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn installed_mqd_runs_its_demo_without_the_build_tree() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let prefix = Prefix::new();
    let mqd = prefix.0.join("bin/mqd");
    std::fs::copy(env!("CARGO_BIN_EXE_mqd"), &mqd).unwrap();
    let library = mqd_library_host::library::bundled_library().expect("libmqd_mpich.so is built");
    std::fs::copy(&library, prefix.0.join("lib/libmqd_mpich.so")).unwrap();
    assert!(
        !prefix.0.starts_with(&workspace),
        "the prefix must be outside the workspace"
    );

    // The workspace hidden under an empty tmpfs in a private mount namespace, then the demo.
    let script = r#"mount -t tmpfs mqd-hidden "$1" && test -z "$(ls -A "$1")" && exec "$2" demo"#;
    let mut child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&workspace)
        .arg(&mqd)
        .env_remove("MQD_DLL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs; scripts/test installs it");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the installed mqd demo did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(8),
        "installed mqd demo (exit 8: deadlock): {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    assert!(
        stdout.contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0 each blocked in MPI_Ssend"),
        "{stdout}"
    );
}
