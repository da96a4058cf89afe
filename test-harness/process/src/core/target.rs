//! A core file joined with the symbols and types of the files it maps.

use super::error::CoreError;
use super::file::*;
use crate::process_target::ProcessTarget;
use mqd_debuginfo::AddressSpace;
use mqd_debuginfo::SearchOptions;
use std::path::Path;
use std::path::PathBuf;

/// A core file as a [`Target`](mqd_target::Target): memory from [`CoreFile`],
/// symbols and types from the mapped files through an [`AddressSpace`].
pub type CoreTarget = ProcessTarget<CoreFile>;

impl ProcessTarget<CoreFile> {
    /// Opens a core file and reads the symbols and types of the files it maps. `exe`
    /// names the program's executable when the core does not (no `NT_FILE`) or when it
    /// moved since the crash; it then replaces the executable the core names.
    pub fn open(path: &Path, exe: Option<&Path>) -> Result<CoreTarget, CoreError> {
        let options = SearchOptions {
            executable: exe.map(Path::to_owned),
            ..SearchOptions::default()
        };
        CoreTarget::open_with(path, &options)
    }

    /// [`Self::open`] with every search option: `options.executable` is the executable
    /// override, `options.root` a sysroot under which the mapped files (and their debug
    /// files) are looked for first, `options.debug_dirs` the global debug directories.
    pub fn open_with(path: &Path, options: &SearchOptions) -> Result<CoreTarget, CoreError> {
        let mut core = CoreFile::open(path)?;
        core.set_sysroot(options.root.clone());
        let exe = options.executable.as_deref();
        let main = match (core.has_file_mappings(), exe) {
            (false, None) => {
                return Err(CoreError::NoFileMappings {
                    path: path.to_owned(),
                });
            }
            (false, Some(exe)) => {
                core.reconstruct_mappings(exe)?;
                Some(exe.to_owned())
            }
            (true, Some(exe)) => {
                let original = core
                    .original_executable()
                    .ok_or_else(|| CoreError::Executable {
                        path: path.to_owned(),
                        exe: exe.to_owned(),
                        message:
                            "the core does not say which of its mapped files is the executable \
                              (no AT_PHDR or AT_ENTRY in NT_AUXV)"
                                .into(),
                    })?;
                if original != exe {
                    core.replace_file(&original, exe);
                }
                Some(exe.to_owned())
            }
            (true, None) => core.original_executable(),
        };
        core.problems = core.check_files();
        // An executable given by hand that is not the one the process ran would have its
        // symbols read over another program's memory: every value would be garbage.
        if let Some(exe) = exe
            && let Some(FileProblem::Changed { why, .. }) = core
                .problems
                .iter()
                .find(|p| matches!(p, FileProblem::Changed { path, .. } if path == exe))
        {
            return Err(CoreError::Executable {
                path: path.to_owned(),
                exe: exe.to_owned(),
                message: format!(
                    "it is not the program the core ran ({why}); give the executable that ran, or none to use the one the core names"
                ),
            });
        }
        let mappings = core.mappings();
        let space_options = SearchOptions {
            root: options.root.clone(),
            debug_dirs: options.debug_dirs.clone(),
            executable: main.map(|p| strip_deleted(&p)),
            pid: None,
            type_cache: options.type_cache.clone(),
        };
        let space =
            AddressSpace::from_mappings_with(&mappings, &space_options).map_err(|error| {
                CoreError::DebugInfo {
                    path: path.to_owned(),
                    error,
                }
            })?;
        let exe_name = space
            .main_executable()
            .map(|p| p.display().to_string())
            .or_else(|| core.process_info().map(|i| i.program.clone()))
            .unwrap_or_else(|| "?".into());
        let name = match core.pid() {
            Some(pid) => format!("core {} (pid {pid}, {exe_name})", path.display()),
            None => format!("core {} ({exe_name})", path.display()),
        };
        Ok(ProcessTarget::from_parts(core, space, name))
    }

    /// The crashed process's id.
    pub fn pid(&self) -> Option<i32> {
        self.process.pid()
    }

    /// The main executable's path: the one given to [`Self::open`], else the one the
    /// core maps where its program headers are.
    pub fn executable(&self) -> Option<PathBuf> {
        self.space.main_executable()
    }

    /// Mapped files that are missing or changed since the crash (see
    /// [`CoreFile::check_files`]). Files whose symbols or types could not be read are
    /// in `self.space.problems()`, as for a live process.
    pub fn file_problems(&self) -> &[FileProblem] {
        &self.process.problems
    }

    /// The address ranges the core file should hold but does not (it was cut short).
    pub fn missing_ranges(&self) -> Vec<(u64, u64)> {
        self.process.missing_ranges()
    }

    /// The signal that killed the process, if the core says.
    pub fn signal(&self) -> Option<i32> {
        self.process.signal()
    }

    /// [`Self::file_problems`], one line each.
    pub fn warnings(&self) -> Vec<String> {
        self.process
            .problems
            .iter()
            .map(|p| p.to_string())
            .collect()
    }
}

fn strip_deleted(path: &Path) -> PathBuf {
    match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(p) => PathBuf::from(p),
        None => path.to_owned(),
    }
}
