//! Which OpenMP runtime a process runs, and which OMPD library it names for debuggers.
//!
//! LLVM's and Intel's runtimes (the objects that define `__kmpc_fork_call`) publish
//! `ompd_dll_locations`, a NULL-terminated vector of file names, once they start. Intel
//! names a bare `libiomp5_db.so`, which sits beside the runtime; Debian's LLVM runtime
//! names a path through a symlink that is not where the library is: each name is looked
//! for as given, then beside the runtime, then beside the file the runtime's path
//! resolves to. GCC's libgomp publishes nothing: it has no OMPD library.

use mqd_debuginfo::AddressSpace;
use mqd_target::Memory;
use std::path::{Path, PathBuf};

/// Most names read from `ompd_dll_locations`, and the longest one.
const MAX_NAMES: usize = 16;
const MAX_NAME: usize = 4096;

/// What a process's OpenMP runtime offers a debugger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// No OpenMP runtime.
    Absent,
    /// GCC's libgomp, at this path.
    Gomp(PathBuf),
    /// An LLVM or Intel runtime without the symbols its OMPD library reads (stripped,
    /// as Debian ships `libomp.so.5`).
    Stripped(PathBuf),
    /// A runtime that has not started yet (`ompd_dll_locations` is NULL): it has no
    /// OpenMP threads.
    NotStarted(PathBuf),
    /// A runtime and the OMPD libraries it names, in its order, as found on this host
    /// (empty: none of them is here; `named` says what it named).
    Found {
        /// The runtime's object.
        runtime: PathBuf,
        /// The libraries found.
        libraries: Vec<PathBuf>,
        /// The names it gives.
        named: Vec<String>,
    },
}

/// The OpenMP runtime of the process of `space`.
pub fn find(space: &AddressSpace, memory: &dyn Memory) -> Runtime {
    let Some(runtime) = space.definer("__kmpc_fork_call") else {
        let gomp = space.objects().into_iter().find(|(p, _)| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libgomp.so"))
        });
        return match gomp {
            Some((path, _)) => Runtime::Gomp(path),
            None => Runtime::Absent,
        };
    };
    let Some(at) = space.find_symbol("ompd_dll_locations") else {
        return Runtime::Stripped(runtime);
    };
    let word = |addr: u64| {
        let mut b = [0u8; 8];
        memory
            .read_memory(addr, &mut b)
            .ok()
            .map(|()| u64::from_le_bytes(b))
    };
    let Some(vector) = word(at).filter(|&v| v != 0) else {
        return Runtime::NotStarted(runtime);
    };
    let mut named: Vec<String> = Vec::new();
    for i in 0..MAX_NAMES as u64 {
        let Some(name) = word(vector + 8 * i).filter(|&p| p != 0) else {
            break;
        };
        match mqd_target::read_c_string(memory, name, MAX_NAME) {
            Ok(bytes) if !bytes.is_empty() => {
                named.push(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => break,
        }
    }
    let mut libraries: Vec<PathBuf> = Vec::new();
    for name in &named {
        for candidate in candidates(name, &runtime) {
            if candidate.is_file() && !libraries.contains(&candidate) {
                libraries.push(candidate);
            }
        }
    }
    Runtime::Found {
        runtime,
        libraries,
        named,
    }
}

/// Where a name the runtime gives may be: as given (an absolute path), beside the
/// runtime, beside the file the runtime's path resolves to.
fn candidates(name: &str, runtime: &Path) -> Vec<PathBuf> {
    let given = Path::new(name);
    let base = given.file_name().map(PathBuf::from);
    let mut out = Vec::new();
    if given.is_absolute() {
        out.push(given.to_owned());
    }
    if let Some(base) = base {
        if let Some(dir) = runtime.parent() {
            out.push(dir.join(&base));
        }
        if let Ok(real) = std::fs::canonicalize(runtime)
            && let Some(dir) = real.parent()
        {
            out.push(dir.join(&base));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_looked_for_beside_the_runtime_and_its_real_file() {
        let dir = std::env::temp_dir().join(format!("mqd-ompd-runtime-{}", std::process::id()));
        let real = dir.join("llvm/lib");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("libomp.so.5"), b"").unwrap();
        let link = dir.join("libomp.so.5");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(real.join("libomp.so.5"), &link).unwrap();
        let found = candidates("/usr/lib/x86_64-linux-gnu/libompd.so", &link);
        assert_eq!(
            found,
            [
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libompd.so"),
                dir.join("libompd.so"),
                std::fs::canonicalize(&real).unwrap().join("libompd.so"),
            ]
        );
        assert_eq!(
            candidates("libiomp5_db.so", &real.join("libomp.so.5"))[0],
            real.join("libiomp5_db.so")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
