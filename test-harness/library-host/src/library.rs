//! Loading an MQD library the way TotalView does.
//!
//! [`MqsLibrary::load`] dlopens the file with `RTLD_NOW | RTLD_LOCAL` (no undefined
//! symbol may remain), resolves the 18 standard `mqs_*` entry points (only
//! `mqs_get_comm_group` is optional: MPICH's own DLL never had it) and the optional
//! non-standard ones padb uses, checks `mqs_version_compatibility() == 2` and
//! `mqs_dll_taddr_width() == sizeof(mqs_taddr_t)`, then hands over the basic callback
//! table once. Any library works: `libmqd_mpich.so`, MPICH's `libtvmpich.so`, Open MPI's
//! `libompi_dbg_msgq.so`.
//!
//! The basic table is the one piece of state an MQD library keeps globally, so it is a
//! `static` here: loading the same path twice shares one copy of the library (dlopen
//! counts references) and the table outlives every load. Asking for the tvtest-style
//! table with NULL `dprints`/`errorstring` ([`BasicOptions`]) would change that global
//! for every other session using the library, so such a load gets a private copy of the
//! file, which the dynamic loader treats as a different library.
//!
//! ```no_run
//! use mqd_library_host::library::MqsLibrary;
//! let lib = MqsLibrary::load("target/debug/libmqd_mpich.so")?;
//! println!("{}", lib.version_string());
//! # Ok::<(), mqd_library_host::library::LoadError>(())
//! ```
// Matching on the ABI's result codes by their spec names (mqs_ok, ...).
#![allow(non_upper_case_globals)]

use crate::callbacks;
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use mqd_abi::entry::*;
use mqd_abi::types::*;
use std::ffi::{CStr, c_char};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The library's entry points, for tests that must call one out of the usual order.
///
/// Valid while the [`MqsLibrary`] they came from lives. Call them inside
/// `Session::with_raw` so callbacks are attributed to that session.
#[derive(Debug, Clone, Copy)]
pub struct RawFunctions {
    /// `mqs_setup_basic_callbacks`.
    pub setup_basic_callbacks: SetupBasicCallbacksFn,
    /// `mqs_version_string`.
    pub version_string: VersionStringFn,
    /// `mqs_version_compatibility`.
    pub version_compatibility: IntFn,
    /// `mqs_dll_taddr_width`.
    pub dll_taddr_width: IntFn,
    /// `mqs_dll_error_string`.
    pub dll_error_string: DllErrorStringFn,
    /// `mqs_setup_image`.
    pub setup_image: SetupImageFn,
    /// `mqs_image_has_queues`.
    pub image_has_queues: ImageHasQueuesFn,
    /// `mqs_destroy_image_info`.
    pub destroy_image_info: DestroyImageInfoFn,
    /// `mqs_setup_process`.
    pub setup_process: SetupProcessFn,
    /// `mqs_process_has_queues`.
    pub process_has_queues: ProcessHasQueuesFn,
    /// `mqs_destroy_process_info`.
    pub destroy_process_info: DestroyProcessInfoFn,
    /// `mqs_update_communicator_list`.
    pub update_communicator_list: ProcessFn,
    /// `mqs_setup_communicator_iterator`.
    pub setup_communicator_iterator: ProcessFn,
    /// `mqs_get_communicator`.
    pub get_communicator: GetCommunicatorFn,
    /// `mqs_get_comm_group`, absent from MPICH's own DLL.
    pub get_comm_group: Option<GetCommGroupFn>,
    /// `mqs_next_communicator`.
    pub next_communicator: ProcessFn,
    /// `mqs_setup_operation_iterator`.
    pub setup_operation_iterator: SetupOperationIteratorFn,
    /// `mqs_next_operation`.
    pub next_operation: NextOperationFn,
    /// Non-standard `mqs_get_global_rank` (padb).
    pub get_global_rank: Option<ProcessFn>,
    /// Non-standard `mqs_get_comm_coll_state` (padb's collective state).
    pub get_comm_coll_state: Option<GetCommCollStateFn>,
    /// Our library's extension `mqd_get_comm_context_ids`.
    pub get_comm_context_ids: Option<GetCommContextIdsFn>,
    /// Our library's extension `mqd_get_mpi_state`.
    pub get_mpi_state: Option<GetMpiStateFn>,
}

/// Why a library could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No file at that path.
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// dlopen refused it (undefined symbols, wrong architecture, not a shared object).
    Open {
        /// The path asked for.
        path: PathBuf,
        /// The dynamic loader's text.
        message: String,
    },
    /// A required entry point is not exported.
    MissingSymbol {
        /// The path asked for.
        path: PathBuf,
        /// The symbol's name.
        symbol: &'static str,
    },
    /// `mqs_version_compatibility` is not [`MQS_INTERFACE_COMPATIBILITY`].
    IncompatibleVersion {
        /// The path asked for.
        path: PathBuf,
        /// What the library returned.
        found: i32,
    },
    /// `mqs_dll_taddr_width` differs from this debugger's `sizeof(mqs_taddr_t)`.
    TaddrWidth {
        /// The path asked for.
        path: PathBuf,
        /// What the library returned.
        found: i32,
        /// `size_of::<mqs_taddr_t>()`.
        expected: usize,
    },
    /// The private copy needed for [`BasicOptions`] could not be made.
    Copy {
        /// The path asked for.
        path: PathBuf,
        /// The I/O error's text.
        message: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound { path } => write!(f, "{}: no such MQD library", path.display()),
            LoadError::Open { path, message } => {
                write!(f, "{}: cannot load MQD library: {message}", path.display())
            }
            LoadError::MissingSymbol { path, symbol } => write!(
                f,
                "{}: not an MQD library: required symbol `{symbol}` is not exported",
                path.display()
            ),
            LoadError::IncompatibleVersion { path, found } => write!(
                f,
                "{}: MQD interface version {found}, this debugger speaks {MQS_INTERFACE_COMPATIBILITY}",
                path.display()
            ),
            LoadError::TaddrWidth {
                path,
                found,
                expected,
            } => write!(
                f,
                "{}: mqs_taddr_t is {found} bytes in the library, {expected} in the debugger",
                path.display()
            ),
            LoadError::Copy { path, message } => {
                write!(
                    f,
                    "{}: cannot make a private copy: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// How the basic callback table handed to the library looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BasicOptions {
    /// Pass NULL for `mqs_dprints_fp` and `mqs_errorstring_fp`, as MPICH's tvtest does:
    /// a library must tolerate it. Such a load uses a private copy of the file.
    pub null_dprints_and_errorstring: bool,
}

/// A loaded MQD library, ready for any number of sessions on any threads.
pub struct MqsLibrary {
    path: PathBuf,
    options: BasicOptions,
    version: String,
    raw: RawFunctions,
    // Last: the entry points above must not outlive it.
    _library: Library,
}

impl fmt::Debug for MqsLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MqsLibrary")
            .field("path", &self.path)
            .field("options", &self.options)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Reads a C string the library owns, if any.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string alive for the duration of the call.
pub(crate) unsafe fn lossy_c_string(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: per the contract.
        Some(
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// The `libmqd_mpich.so` that goes with the running `mqd`: `$MQD_DLL` if set; else, for an
/// installed `mqd` (`PREFIX/bin/mqd`), `PREFIX/lib/libmqd_mpich.so`; else the newest
/// library of the build tree beside the executable (`target/<profile>/` or its `deps/`,
/// also when the executable is a test or an example one directory deeper).
pub fn bundled_library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MQD_DLL") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let installed = exe.parent()?.parent()?.join("lib/libmqd_mpich.so");
    if exe.parent()?.file_name()? == "bin" && installed.is_file() {
        return Some(installed);
    }
    // Cargo refreshes `deps/` on every build of a dependent crate but the copy in the
    // profile directory only when the root crate itself is built: take the newest.
    exe.ancestors()
        .skip(1)
        .take(3)
        .flat_map(|dir| {
            [
                dir.join("libmqd_mpich.so"),
                dir.join("deps/libmqd_mpich.so"),
            ]
        })
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

/// Where the private copy of a library goes: a fresh name per load, so the dynamic
/// loader (which recognises a loaded library by path and by inode) opens it anew.
fn private_copy(path: &Path) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dest = std::env::temp_dir().join(format!(
        "mqd-library-{}-{}-{file}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::copy(path, &dest)?;
    Ok(dest)
}

impl MqsLibrary {
    /// Loads a library with the standard callback table.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        Self::load_with(path, BasicOptions::default())
    }

    /// Loads a library with a chosen basic callback table.
    pub fn load_with(path: impl AsRef<Path>, options: BasicOptions) -> Result<Self, LoadError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(LoadError::NotFound { path });
        }
        let copy = if options.null_dprints_and_errorstring {
            Some(private_copy(&path).map_err(|e| LoadError::Copy {
                path: path.clone(),
                message: e.to_string(),
            })?)
        } else {
            None
        };
        let open_path = copy.as_deref().unwrap_or(&path);
        // SAFETY: loading runs the library's initialisers; that is what loading an MQD
        // library means, and what every debugger does.
        let opened = unsafe { Library::open(Some(open_path), RTLD_NOW | RTLD_LOCAL) };
        if let Some(copy) = &copy {
            // The mapping stays after the name goes; nothing is left behind in /tmp.
            let _ = std::fs::remove_file(copy);
        }
        let library = opened.map_err(|e| LoadError::Open {
            path: path.clone(),
            message: e.to_string(),
        })?;

        macro_rules! required {
            ($name:literal) => {{
                // SAFETY: the type is the one mpi_interface.h declares for this name.
                match unsafe { library.get(concat!($name, "\0").as_bytes()) } {
                    Ok(sym) => *sym,
                    Err(_) => {
                        return Err(LoadError::MissingSymbol {
                            path,
                            symbol: $name,
                        });
                    }
                }
            }};
        }
        macro_rules! optional {
            ($name:literal) => {{
                // SAFETY: as for required!.
                unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|sym| *sym)
            }};
        }
        let raw = RawFunctions {
            setup_basic_callbacks: required!("mqs_setup_basic_callbacks"),
            version_string: required!("mqs_version_string"),
            version_compatibility: required!("mqs_version_compatibility"),
            dll_taddr_width: required!("mqs_dll_taddr_width"),
            dll_error_string: required!("mqs_dll_error_string"),
            setup_image: required!("mqs_setup_image"),
            image_has_queues: required!("mqs_image_has_queues"),
            destroy_image_info: required!("mqs_destroy_image_info"),
            setup_process: required!("mqs_setup_process"),
            process_has_queues: required!("mqs_process_has_queues"),
            destroy_process_info: required!("mqs_destroy_process_info"),
            update_communicator_list: required!("mqs_update_communicator_list"),
            setup_communicator_iterator: required!("mqs_setup_communicator_iterator"),
            get_communicator: required!("mqs_get_communicator"),
            get_comm_group: optional!("mqs_get_comm_group"),
            next_communicator: required!("mqs_next_communicator"),
            setup_operation_iterator: required!("mqs_setup_operation_iterator"),
            next_operation: required!("mqs_next_operation"),
            get_global_rank: optional!("mqs_get_global_rank"),
            get_comm_coll_state: optional!("mqs_get_comm_coll_state"),
            get_comm_context_ids: optional!("mqd_get_comm_context_ids"),
            get_mpi_state: optional!("mqd_get_mpi_state"),
        };

        // SAFETY: argument-free queries, resolved above.
        let version = unsafe { (raw.version_compatibility)() };
        if version != MQS_INTERFACE_COMPATIBILITY {
            return Err(LoadError::IncompatibleVersion {
                path,
                found: version,
            });
        }
        // SAFETY: as above.
        let width = unsafe { (raw.dll_taddr_width)() };
        let expected = size_of::<mqs_taddr_t>();
        if usize::try_from(width).ok() != Some(expected) {
            return Err(LoadError::TaddrWidth {
                path,
                found: width,
                expected,
            });
        }

        let table: &'static mqs_basic_callbacks = if options.null_dprints_and_errorstring {
            &callbacks::BASIC_CALLBACKS_NULL_DIAGNOSTICS
        } else {
            &callbacks::BASIC_CALLBACKS
        };
        // SAFETY: the table is static, so it outlives the library however often it is
        // loaded. Every load of the same copy passes the same pointer.
        unsafe { (raw.setup_basic_callbacks)(table) };
        // SAFETY: the library returns a static string or NULL.
        let version = unsafe { lossy_c_string((raw.version_string)()) }.unwrap_or_default();

        Ok(MqsLibrary {
            path,
            options,
            version,
            raw,
            _library: library,
        })
    }

    /// The path the library was loaded from (as given, not its private copy).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The callback table variant this library was given.
    pub fn options(&self) -> BasicOptions {
        self.options
    }

    /// `mqs_version_string()`, read once at load.
    pub fn version_string(&self) -> &str {
        &self.version
    }

    /// Whether the library exports `mqs_get_comm_group` (MPICH's own DLL does not).
    pub fn has_comm_group(&self) -> bool {
        self.raw.get_comm_group.is_some()
    }

    /// The entry points, for calls outside the usual sequence.
    pub fn raw(&self) -> &RawFunctions {
        &self.raw
    }

    /// The text of a result code: the standard ones, or the library's own (>= 100)
    /// through `mqs_dll_error_string`.
    pub fn error_string(&self, code: i32) -> String {
        match code {
            mqs_ok => "ok".to_owned(),
            mqs_no_information => "no information available".to_owned(),
            mqs_end_of_list => "end of list".to_owned(),
            c if c >= mqs_first_user_code => {
                // SAFETY: resolved entry point; it returns a static string or NULL.
                unsafe { lossy_c_string((self.raw.dll_error_string)(c)) }
                    .unwrap_or_else(|| format!("unknown library error code {c} (no text)"))
            }
            c => format!("invalid result code {c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_reported_as_such() {
        let err = MqsLibrary::load("/nonexistent/libnothing.so").unwrap_err();
        assert_eq!(
            err,
            LoadError::NotFound {
                path: "/nonexistent/libnothing.so".into()
            }
        );
        assert!(err.to_string().contains("no such MQD library"));
    }

    #[test]
    fn a_file_that_is_not_a_library_gives_the_loader_text() {
        let path = std::env::temp_dir().join(format!(
            "mqd-library-host-test-{}-not-a-library.so",
            std::process::id()
        ));
        std::fs::write(&path, b"plain text").unwrap();
        let err = MqsLibrary::load(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        match err {
            LoadError::Open { message, .. } => assert!(!message.is_empty()),
            other => panic!("expected Open, got {other:?}"),
        }
        // The same through the private-copy path, which must clean up after itself.
        std::fs::write(&path, b"plain text").unwrap();
        let err = MqsLibrary::load_with(
            &path,
            BasicOptions {
                null_dprints_and_errorstring: true,
            },
        )
        .unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert!(matches!(err, LoadError::Open { .. }), "{err:?}");
    }

    #[test]
    fn a_library_without_mqs_symbols_names_the_first_missing_one() {
        // libc is loaded in every process and exports no mqs_* symbol.
        for candidate in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
        ] {
            if Path::new(candidate).is_file() {
                let err = MqsLibrary::load(candidate).unwrap_err();
                assert_eq!(
                    err,
                    LoadError::MissingSymbol {
                        path: candidate.into(),
                        symbol: "mqs_setup_basic_callbacks"
                    }
                );
                assert!(err.to_string().contains("`mqs_setup_basic_callbacks`"));
                return;
            }
        }
    }

    #[test]
    fn error_texts_of_version_and_width() {
        let e = LoadError::IncompatibleVersion {
            path: "x.so".into(),
            found: 3,
        };
        assert_eq!(
            e.to_string(),
            "x.so: MQD interface version 3, this debugger speaks 2"
        );
        let e = LoadError::TaddrWidth {
            path: "x.so".into(),
            found: 4,
            expected: 8,
        };
        assert_eq!(
            e.to_string(),
            "x.so: mqs_taddr_t is 4 bytes in the library, 8 in the debugger"
        );
    }
}
