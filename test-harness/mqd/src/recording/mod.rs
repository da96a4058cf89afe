//! The hang recorder in the jobs mqd starts (`mqd run`, `mqd launch`): its library
//! (`libmqd_recorder.so`, beside mqd) put first in the ranks' `LD_PRELOAD`, through the
//! launcher: hydra (MPICH, Intel MPI) with `-genv`, Open MPI's `mpirun` with `-x` (it
//! passes no other variable on), anything else (Slurm's `srun`, which exports the whole
//! environment; a rank started alone) by the environment itself. First, so that another
//! tool preloaded by the user is called after it and still sees every call. The ranks
//! load a copy fitted to the job's MPI ([`exports`]).

pub mod exports;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The library's file name.
pub const LIBRARY: &str = "libmqd_recorder.so";

/// The recorder that goes with this mqd: `$MQD_RECORDER`, else beside the binary (a
/// build tree), else in `../lib` (an installation: `PREFIX/bin/mqd`, `PREFIX/lib`).
pub fn library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MQD_RECORDER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(LIBRARY), dir.join("../lib").join(LIBRARY)]
        .into_iter()
        .find(|p| p.is_file())
}

/// How a launcher passes variables to the ranks it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// MPICH's and Intel MPI's hydra: every variable, and `-genv NAME VALUE`.
    Hydra,
    /// Open MPI's `mpirun`/`mpiexec` (ORTE, PRRTE): only those named with `-x`.
    OpenMpi,
    /// Anything else: Slurm's `srun` (the whole environment), a script, a lone rank.
    Other,
}

/// The launcher `program` is: by its name, else (a plain `mpirun` or `mpiexec`) by what
/// its `--version` says, within a few seconds.
pub fn launcher_of(program: &OsStr) -> Launcher {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.as_str() {
        "orterun" | "prterun" | "mpirun.openmpi" | "mpiexec.openmpi" => Launcher::OpenMpi,
        "mpiexec.hydra" | "mpiexec.mpich" | "mpirun.mpich" => Launcher::Hydra,
        "mpirun" | "mpiexec" => version_of(program),
        _ => Launcher::Other,
    }
}

fn version_of(program: &OsStr) -> Launcher {
    let Ok(mut child) = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return Launcher::Other;
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Ok(None) = child.try_wait() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Launcher::Other;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut text = String::new();
    if let Some(mut out) = child.stdout.take() {
        use std::io::Read as _;
        let _ = out.read_to_string(&mut text);
    }
    if text.contains("Open MPI") || text.contains("PRRTE") || text.contains("Open RTE") {
        Launcher::OpenMpi
    } else if text.contains("HYDRA") || text.contains("Intel(R) MPI") {
        Launcher::Hydra
    } else {
        Launcher::Other
    }
}

/// Where fitted copies of the recorder are written: beside the type cache, else in a
/// directory of the user's under the temporary directory.
pub fn fitted_directory() -> PathBuf {
    match mqd_debuginfo::memo::default_directory() {
        Some(types) => types.join("recorder"),
        None => {
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            std::env::temp_dir().join(format!("mqd-recorder-{uid}"))
        }
    }
}

/// The recorder for the job `cmd` started by `launcher`: `library` fitted to the job's
/// MPI and that MPI's library, or why the job runs without one (its MPI's library not
/// found, or unreadable).
pub fn for_job(
    cmd: &[OsString],
    launcher: Launcher,
    library: &Path,
) -> Result<(PathBuf, PathBuf), String> {
    let mpi = exports::mpi_library(cmd, launcher).ok_or_else(|| {
        "the job's MPI library was not found (not linked by its program, not beside its launcher): \
         set MQD_MPI_LIBRARY to it (libmpi.so of the MPI the ranks load)"
            .to_owned()
    })?;
    let (fitted, _) = exports::fitted(library, &mpi, &fitted_directory())?;
    Ok((fitted, mpi))
}

/// The ranks' variables for the recorder: `library` first in `LD_PRELOAD` (before
/// `existing`, the user's), and `MQD_RECORDER_MPI`, the MPI library it calls where the
/// program has not loaded its own yet (a probe before the import of mpi4py's module).
pub fn variables(
    library: &Path,
    mpi: &Path,
    existing: Option<&OsStr>,
) -> Vec<(&'static str, OsString)> {
    let mut preload = library.as_os_str().to_owned();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    vec![
        ("LD_PRELOAD", preload),
        ("MQD_RECORDER_MPI", mpi.as_os_str().to_owned()),
    ]
}

/// A job's command with the recorder in its ranks' environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The command (the launcher's options added after its name).
    pub cmd: Vec<OsString>,
    /// Variables for the launcher's own environment, where the ranks inherit it.
    pub env: Vec<(&'static str, OsString)>,
}

/// `cmd` started by `launcher`, with `variables` in its ranks' environment.
pub fn with_recorder(
    cmd: &[OsString],
    launcher: Launcher,
    variables: Vec<(&'static str, OsString)>,
) -> Recorded {
    let (program, args) = cmd
        .split_first()
        .map_or((None, &[][..]), |(p, a)| (Some(p), a));
    let mut out: Vec<OsString> = program.into_iter().cloned().collect();
    let mut env = Vec::new();
    for (name, value) in variables {
        match launcher {
            Launcher::Hydra => out.extend(["-genv".into(), name.into(), value]),
            Launcher::OpenMpi => {
                let mut x = OsString::from(format!("{name}="));
                x.push(&value);
                out.extend(["-x".into(), x]);
            }
            Launcher::Other => env.push((name, value)),
        }
    }
    out.extend(args.iter().cloned());
    Recorded { cmd: out, env }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &[OsString]) -> Vec<String> {
        cmd.iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect()
    }

    fn cmd(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn each_launcher_is_told_its_own_way_and_the_users_preload_comes_after() {
        let lib = Path::new("/opt/mqd/lib/libmqd_recorder.so");
        let mpi = Path::new("/usr/lib/libmpi.so.12");
        let hydra = with_recorder(
            &cmd("mpiexec.mpich -n 4 ./ring"),
            Launcher::Hydra,
            variables(lib, mpi, None),
        );
        assert_eq!(
            words(&hydra.cmd),
            [
                "mpiexec.mpich",
                "-genv",
                "LD_PRELOAD",
                "/opt/mqd/lib/libmqd_recorder.so",
                "-genv",
                "MQD_RECORDER_MPI",
                "/usr/lib/libmpi.so.12",
                "-n",
                "4",
                "./ring"
            ]
        );
        assert_eq!(hydra.env, []);
        let ompi = with_recorder(
            &cmd("mpirun -n 2 python3 app.py"),
            Launcher::OpenMpi,
            variables(lib, mpi, Some(OsStr::new("/usr/lib/libtool.so"))),
        );
        assert_eq!(
            words(&ompi.cmd),
            [
                "mpirun",
                "-x",
                "LD_PRELOAD=/opt/mqd/lib/libmqd_recorder.so:/usr/lib/libtool.so",
                "-x",
                "MQD_RECORDER_MPI=/usr/lib/libmpi.so.12",
                "-n",
                "2",
                "python3",
                "app.py"
            ]
        );
        let srun = with_recorder(
            &cmd("srun -n 8 ./app"),
            Launcher::Other,
            variables(lib, mpi, Some(OsStr::new(""))),
        );
        assert_eq!(words(&srun.cmd), ["srun", "-n", "8", "./app"]);
        assert_eq!(
            srun.env,
            [
                ("LD_PRELOAD", lib.as_os_str().to_owned()),
                ("MQD_RECORDER_MPI", mpi.as_os_str().to_owned())
            ]
        );
    }

    #[test]
    fn launchers_are_known_by_name() {
        for (name, want) in [
            ("/usr/bin/mpiexec.mpich", Launcher::Hydra),
            ("mpiexec.hydra", Launcher::Hydra),
            ("orterun", Launcher::OpenMpi),
            ("/usr/bin/mpirun.openmpi", Launcher::OpenMpi),
            ("prterun", Launcher::OpenMpi),
            ("srun", Launcher::Other),
            ("./ring", Launcher::Other),
        ] {
            assert_eq!(launcher_of(OsStr::new(name)), want, "{name}");
        }
        // A plain name, no such program: nothing said by its --version.
        assert_eq!(
            launcher_of(OsStr::new("/nonexistent/mpirun")),
            Launcher::Other
        );
    }
}
