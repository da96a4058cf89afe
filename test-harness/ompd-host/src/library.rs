//! An OMPD library, loaded and initialized: its entry points, resolved once.
//!
//! It is opened with `RTLD_NOW | RTLD_LOCAL` after `libstdc++.so.6` is opened
//! `RTLD_GLOBAL`: Intel's `libiomp5_db.so` uses the C++ library without naming it
//! among its needs. `ompd_initialize` is given the API version the library says it
//! implements, if that is the one this host speaks, and the host's callback table.

use crate::abi::{self, Rc};
use crate::callbacks::CALLBACKS;
use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW, Symbol};
use std::ffi::{CStr, c_char};
use std::path::{Path, PathBuf};

/// The entry points the host calls.
pub(crate) struct Entry {
    pub process_initialize: abi::ProcessInitialize,
    pub rel_address_space_handle: abi::RelHandle,
    pub get_omp_version: abi::GetOmpVersion,
    pub get_thread_handle: abi::GetThreadHandle,
    pub rel_thread_handle: abi::RelHandle,
    pub get_curr_parallel_handle: abi::GetHandleOf,
    pub get_enclosing_parallel_handle: abi::GetHandleOf,
    pub rel_parallel_handle: abi::RelHandle,
    pub parallel_handle_compare: abi::HandleCompare,
    pub get_curr_task_handle: abi::GetHandleOf,
    pub rel_task_handle: abi::RelHandle,
    pub get_task_function: abi::GetTaskFunction,
    pub get_state: abi::GetState,
    pub enumerate_states: abi::EnumerateStates,
    pub enumerate_icvs: abi::EnumerateIcvs,
    pub get_icv_from_scope: abi::GetIcvFromScope,
}

/// The names of [`Entry`]'s functions, which every OMPD library defines.
pub const ENTRY_POINTS: [&str; 18] = [
    "ompd_get_api_version",
    "ompd_get_version_string",
    "ompd_initialize",
    "ompd_process_initialize",
    "ompd_rel_address_space_handle",
    "ompd_get_omp_version",
    "ompd_get_thread_handle",
    "ompd_rel_thread_handle",
    "ompd_get_curr_parallel_handle",
    "ompd_get_enclosing_parallel_handle",
    "ompd_rel_parallel_handle",
    "ompd_parallel_handle_compare",
    "ompd_get_curr_task_handle",
    "ompd_rel_task_handle",
    "ompd_get_task_function",
    "ompd_get_state",
    "ompd_enumerate_states",
    "ompd_enumerate_icvs",
];

/// A loaded, initialized OMPD library.
pub struct OmpdLibrary {
    pub(crate) entry: Entry,
    get_icv: abi::GetIcvFromScope,
    finalize: Option<unsafe extern "C" fn() -> Rc>,
    /// How it names itself (`ompd_get_version_string`).
    pub version: String,
    /// Where it was loaded from.
    pub path: PathBuf,
    _library: Library,
    _cxx: Option<Library>,
}

impl OmpdLibrary {
    /// Loads the library at `path` and initializes it with the host's callbacks.
    pub fn load(path: &Path) -> Result<OmpdLibrary, String> {
        // SAFETY: loading a C++ runtime runs its constructors, which are sound.
        let cxx = unsafe { Library::open(Some("libstdc++.so.6"), RTLD_NOW | RTLD_GLOBAL) }.ok();
        // SAFETY: loading the library runs its initializers; it is the one the runtime
        // names for debuggers, or the one the user named.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| format!("cannot load the OMPD library {}: {e}", path.display()))?;
        let missing: Vec<&str> = ENTRY_POINTS
            .iter()
            .copied()
            .chain(["ompd_get_icv_from_scope"])
            // SAFETY: only whether the symbol is there.
            .filter(|name| unsafe { library.get::<*const u8>(name.as_bytes()) }.is_err())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{} is not an OMPD library: it lacks {}",
                path.display(),
                missing.join(", ")
            ));
        }
        // SAFETY: each symbol has the type omp-tools.h gives it.
        let get = |name: &str| unsafe {
            library
                .get::<*const u8>(name.as_bytes())
                .map(|s: Symbol<*const u8>| *s)
                .unwrap_or(std::ptr::null())
        };
        macro_rules! entry {
            ($name:literal, $ty:ty) => {{
                let p = get($name);
                // SAFETY: present (checked above), of the header's type.
                unsafe { std::mem::transmute::<*const u8, $ty>(p) }
            }};
        }
        let api: abi::GetApiVersion = entry!("ompd_get_api_version", abi::GetApiVersion);
        let version_string: abi::GetVersionString =
            entry!("ompd_get_version_string", abi::GetVersionString);
        let initialize: abi::Initialize = entry!("ompd_initialize", abi::Initialize);
        let mut api_version = 0i64;
        // SAFETY: an out pointer to a local.
        let rc = unsafe { api(&mut api_version) };
        if rc != abi::RC_OK || api_version != abi::API_VERSION {
            return Err(format!(
                "{} implements OMPD version {api_version} ({}); mqd speaks {}",
                path.display(),
                abi::rc_name(rc),
                abi::API_VERSION
            ));
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: an out pointer to a local; the string is the library's own.
        let version = match unsafe { version_string(&mut text) } {
            abi::RC_OK if !text.is_null() => unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .chars()
                .take(200)
                .collect(),
            _ => String::new(),
        };
        // SAFETY: the table is static, as the library keeps its pointer.
        let rc = unsafe { initialize(api_version, &CALLBACKS) };
        if rc != abi::RC_OK {
            return Err(format!(
                "ompd_initialize of {} failed: {}",
                path.display(),
                abi::rc_name(rc)
            ));
        }
        let entry = Entry {
            process_initialize: entry!("ompd_process_initialize", abi::ProcessInitialize),
            rel_address_space_handle: entry!("ompd_rel_address_space_handle", abi::RelHandle),
            get_omp_version: entry!("ompd_get_omp_version", abi::GetOmpVersion),
            get_thread_handle: entry!("ompd_get_thread_handle", abi::GetThreadHandle),
            rel_thread_handle: entry!("ompd_rel_thread_handle", abi::RelHandle),
            get_curr_parallel_handle: entry!("ompd_get_curr_parallel_handle", abi::GetHandleOf),
            get_enclosing_parallel_handle: entry!(
                "ompd_get_enclosing_parallel_handle",
                abi::GetHandleOf
            ),
            rel_parallel_handle: entry!("ompd_rel_parallel_handle", abi::RelHandle),
            parallel_handle_compare: entry!("ompd_parallel_handle_compare", abi::HandleCompare),
            get_curr_task_handle: entry!("ompd_get_curr_task_handle", abi::GetHandleOf),
            rel_task_handle: entry!("ompd_rel_task_handle", abi::RelHandle),
            get_task_function: entry!("ompd_get_task_function", abi::GetTaskFunction),
            get_state: entry!("ompd_get_state", abi::GetState),
            enumerate_states: entry!("ompd_enumerate_states", abi::EnumerateStates),
            enumerate_icvs: entry!("ompd_enumerate_icvs", abi::EnumerateIcvs),
            get_icv_from_scope: entry!("ompd_get_icv_from_scope", abi::GetIcvFromScope),
        };
        let finalize = {
            let p = get("ompd_finalize");
            // SAFETY: of the header's type where present.
            (!p.is_null()).then(|| unsafe {
                std::mem::transmute::<*const u8, unsafe extern "C" fn() -> Rc>(p)
            })
        };
        Ok(OmpdLibrary {
            get_icv: entry.get_icv_from_scope,
            entry,
            finalize,
            version,
            path: path.to_owned(),
            _library: library,
            _cxx: cxx,
        })
    }

    /// Loads a private copy of the library at `path` (a file of its own, removed once
    /// loaded): an instance that has read no other process.
    pub fn load_private(path: &Path) -> Result<OmpdLibrary, String> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COPIES: AtomicU64 = AtomicU64::new(0);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let copy = std::env::temp_dir().join(format!(
            "mqd-ompd-{}-{}-{name}",
            std::process::id(),
            COPIES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::copy(path, &copy)
            .map_err(|e| format!("cannot copy the OMPD library {}: {e}", path.display()))?;
        let loaded = OmpdLibrary::load(&copy);
        let _ = std::fs::remove_file(&copy);
        let mut library = loaded?;
        library.path = path.to_owned();
        Ok(library)
    }

    /// An ICV's value in the scope of `handle`.
    pub(crate) fn icv(&self, handle: *mut abi::Handle, scope: i32, id: u64) -> Option<i64> {
        let mut value = 0i64;
        // SAFETY: a live handle of the scope's kind, an out pointer to a local.
        (unsafe { (self.get_icv)(handle, scope, id, &mut value) } == abi::RC_OK).then_some(value)
    }
}

impl Drop for OmpdLibrary {
    fn drop(&mut self) {
        if let Some(finalize) = self.finalize {
            // SAFETY: every handle was released; the library ends its use of the host.
            unsafe { finalize() };
        }
    }
}
