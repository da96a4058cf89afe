//! The recorder's exports fitted to the job's MPI. The recorder wraps every C procedure of
//! the standard, but an MPI defines fewer (MPICH 4 has no `MPI_Abi_get_version`, Open MPI
//! 4 none of MPI 4's procedures), and programs probe for procedures: mpi4py looks
//! `MPI_Abi_get_version` up by name, libraries refer to newer calls weakly. A wrapper with
//! nothing to call behind it would answer those probes wrongly. So the ranks get a copy of
//! the library in which each procedure the MPI's library does not define is hidden: its
//! dynamic symbol made local, which the dynamic linker's lookups skip.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::Launcher;
use mqd_debuginfo::dynsym;

/// The MPI procedures (`MPI_X`) `library` defines; an error where it defines no
/// `MPI_Init` (not an MPI library).
pub fn defined_procedures(library: &Path) -> Result<HashSet<String>, String> {
    let names: HashSet<String> = dynsym::defined(library)?
        .into_iter()
        .filter(|n| n.starts_with("MPI_"))
        .collect();
    if !names.contains("MPI_Init") {
        return Err(format!("{}: defines no MPI_Init", library.display()));
    }
    Ok(names)
}

/// The recorder the ranks load: `recorder` itself where `mpi` defines every procedure it
/// wraps, else a copy in `dir` with the others hidden (written once per pair of files).
/// Also the number hidden.
pub fn fitted(recorder: &Path, mpi: &Path, dir: &Path) -> Result<(PathBuf, usize), String> {
    let defined = defined_procedures(mpi)?;
    let (bytes, names) =
        dynsym::with_local(recorder, |n| !n.starts_with("MPI_") || defined.contains(n))?;
    if names.is_empty() {
        return Ok((recorder.to_owned(), 0));
    }
    // The copy's name tells the recorder and the set hidden apart: another build of
    // either, or another MPI, is another file.
    let mut hash = Fnv::new();
    hash.write(&bytes);
    let path = dir.join(format!("libmqd_recorder-{:016x}.so", hash.0));
    if std::fs::read(&path).is_ok_and(|on_disk| on_disk == bytes) {
        return Ok((path, names.len()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let partial = dir.join(format!(".libmqd_recorder-{}.partial", std::process::id()));
    std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            format!("{}: {e}", path.display())
        })?;
    Ok((path, names.len()))
}

/// FNV-1a, 64 bits: a name for a file's contents, not a defence against anyone.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The MPI library of the job `cmd` (launcher first): `$MQD_MPI_LIBRARY`; else the one
/// an executable of the command links (its `DT_NEEDED` `libmpi*`/`libmpich*`, found as
/// the dynamic linker would, in its run path, `LD_LIBRARY_PATH` and the system's
/// directories); else the one installed beside the launcher (`PREFIX/bin/mpiexec` and
/// `PREFIX/lib`, Debian's multiarch directory for `/usr/bin`).
pub fn mpi_library(cmd: &[std::ffi::OsString], launcher: Launcher) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MQD_MPI_LIBRARY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let defines_init = |p: &Path| defined_procedures(p).is_ok();
    let linked = cmd
        .iter()
        .skip(1)
        .filter_map(|word| executable(word))
        .find_map(|exe| linked_mpi(&exe).filter(|p| defines_init(p)));
    linked.or_else(|| {
        let launcher_path = executable(cmd.first()?)?;
        beside_launcher(&launcher_path, launcher)
            .into_iter()
            .find(|p| defines_init(p))
    })
}

/// `word` as a file to run: a path, else found in `PATH`.
fn executable(word: &OsStr) -> Option<PathBuf> {
    let path = Path::new(word);
    if word.is_empty() || word.to_string_lossy().starts_with('-') {
        return None;
    }
    if path.components().count() > 1 {
        return path.is_file().then(|| path.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(path))
        .find(|p| p.is_file())
}

/// Where the system's libraries are, after the run path and `LD_LIBRARY_PATH`.
fn system_directories() -> Vec<PathBuf> {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    [
        "/usr/local/lib".to_owned(),
        format!("/usr/lib/{multiarch}"),
        format!("/lib/{multiarch}"),
        "/usr/lib64".to_owned(),
        "/usr/lib".to_owned(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// The MPI library `exe` links, where found.
fn linked_mpi(exe: &Path) -> Option<PathBuf> {
    let dynamic = mqd_debuginfo::elf::Dynamic::read(exe)?;
    let name = dynamic
        .needed
        .iter()
        .map(|n| String::from_utf8_lossy(n))
        .find(|n| n.starts_with("libmpi.so") || n.starts_with("libmpich.so"))?;
    let origin = exe.canonicalize().ok()?.parent()?.to_owned();
    let mut dirs: Vec<PathBuf> = dynamic
        .run_path
        .iter()
        .map(|p| String::from_utf8_lossy(p))
        .flat_map(|p| {
            p.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| PathBuf::from(d.replace("$ORIGIN", &origin.to_string_lossy())))
                .collect::<Vec<_>>()
        })
        .collect();
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&paths).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs.extend(system_directories());
    dirs.into_iter()
        .map(|d| d.join(&*name))
        .find(|p| p.is_file())
}

/// The MPI libraries an installation holding `launcher` would have, most likely first.
fn beside_launcher(launcher: &Path, kind: Launcher) -> Vec<PathBuf> {
    let names: &[&str] = match kind {
        Launcher::Hydra => &["libmpi.so.12", "libmpich.so.12", "libmpi.so"],
        Launcher::OpenMpi => &["libmpi.so.40", "libmpi.so"],
        Launcher::Other => &["libmpi.so", "libmpich.so"],
    };
    let Some(prefix) = launcher
        .canonicalize()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.to_owned()))
    else {
        return Vec::new();
    };
    let multiarch = format!("lib/{}-linux-gnu", std::env::consts::ARCH);
    let dirs = ["lib", "lib64", "lib/release", multiarch.as_str()];
    let mut found = Vec::new();
    for d in dirs {
        found.extend(
            names
                .iter()
                .map(|n| prefix.join(d).join(n))
                .filter(|p| p.is_file()),
        );
    }
    found
}
