//! The demo job `mqd demo` runs: a 4-rank `MPI_Ssend` ring that deadlocks, built from
//! `demo-job/` when `mqd` is built and carried inside the binary, so an installed `mqd`
//! runs it without its build tree.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const STARTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/demo/mqd-demo-starter"));
const RANK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/demo/mqd-demo-ch3"));

/// The demo's programs unpacked into a private directory, removed when dropped.
#[derive(Debug)]
pub struct DemoJob {
    dir: PathBuf,
}

impl DemoJob {
    /// Unpacks the starter and its rank program into a fresh directory under the first of
    /// `$TMPDIR` (or `/tmp`) and `~/.cache/mqd` that lets them run.
    pub fn unpack() -> io::Result<DemoJob> {
        let mut bases = vec![std::env::temp_dir()];
        if let Some(home) = std::env::var_os("HOME") {
            bases.push(Path::new(&home).join(".cache/mqd"));
        }
        let mut last = io::Error::other("no directory to unpack the demo job into");
        for base in bases {
            match DemoJob::unpack_into(&base) {
                Ok(job) if job.runs() => return Ok(job),
                Ok(_) => {
                    last = io::Error::other(format!(
                        "{} does not let programs run (mounted noexec?)",
                        base.display()
                    ))
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn unpack_into(base: &Path) -> io::Result<DemoJob> {
        fs::create_dir_all(base)?;
        let dir = base.join(format!(
            "mqd-demo-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let job = DemoJob { dir };
        for (name, bytes) in [("mqd-demo-starter", STARTER), ("mqd-demo-ch3", RANK)] {
            let path = job.dir.join(name);
            fs::write(&path, bytes)?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
        }
        Ok(job)
    }

    /// Whether the unpacked starter can be executed (it prints its usage).
    fn runs(&self) -> bool {
        Command::new(self.starter())
            .arg("--help")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok()
    }

    fn starter(&self) -> PathBuf {
        self.dir.join("mqd-demo-starter")
    }

    /// The command that starts the job: 4 ranks in a ring, each blocked in `MPI_Ssend` to
    /// its right neighbour.
    pub fn command(&self) -> Command {
        let mut command = Command::new(self.starter());
        command.args(["-n", "4", "--layout", "ch3", "ssend-ring"]);
        command
    }
}

impl Drop for DemoJob {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
