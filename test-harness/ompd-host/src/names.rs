//! What a library's numbers name: the ICVs the host reads (by the names of
//! `omp-tools.h`, numbered by each library its own way) and thread states.

use crate::abi::{self, Handle};
use std::ffi::{CStr, c_char, c_int};

/// The ICVs the host reads, by the numbers the library gives their names.
#[derive(Default)]
pub struct Icvs {
    pub(crate) thread_num: Option<u64>,
    pub(crate) team_size: Option<u64>,
    pub(crate) levels: Option<u64>,
    pub(crate) implicit_task: Option<u64>,
}

impl Icvs {
    pub(crate) fn of(enumerate: abi::EnumerateIcvs, process: *mut Handle) -> Icvs {
        let mut icvs = Icvs::default();
        let mut current = 0u64;
        for _ in 0..1024 {
            let (mut next, mut name, mut scope, mut more) =
                (0u64, std::ptr::null::<c_char>(), 0 as c_int, 0 as c_int);
            // SAFETY: a live process handle, out pointers to locals.
            let rc = unsafe {
                enumerate(
                    process, current, &mut next, &mut name, &mut scope, &mut more,
                )
            };
            if rc != abi::RC_OK {
                break;
            }
            let text = take_string(name);
            match text.as_deref() {
                Some("thread-num-var") => icvs.thread_num = Some(next),
                Some("team-size-var") => icvs.team_size = Some(next),
                Some("ompd-team-size-var") => {
                    icvs.team_size.get_or_insert(next);
                }
                Some("levels-var") => icvs.levels = Some(next),
                Some("implicit-task-var") => icvs.implicit_task = Some(next),
                _ => {}
            }
            if more == 0 || next == current {
                break;
            }
            current = next;
        }
        icvs
    }

    /// A state's name: the header's, else the library's, else its value.
    pub(crate) fn state_name(
        &self,
        enumerate: abi::EnumerateStates,
        process: *mut Handle,
        value: i64,
    ) -> String {
        if let Some(name) = abi::state_name(value) {
            return name.to_owned();
        }
        let mut current = abi::STATE_UNDEFINED;
        for _ in 0..1024 {
            let (mut next, mut name, mut more) = (0i64, std::ptr::null::<c_char>(), 0i64);
            // SAFETY: a live process handle, out pointers to locals.
            let rc = unsafe { enumerate(process, current, &mut next, &mut name, &mut more) };
            if rc != abi::RC_OK {
                break;
            }
            let text = take_string(name);
            if next == value
                && let Some(text) = text
            {
                return text
                    .strip_prefix("ompt_state_")
                    .or_else(|| text.strip_prefix("omp_state_"))
                    .unwrap_or(&text)
                    .to_owned();
            }
            if more == 0 || next == current {
                break;
            }
            current = next;
        }
        format!("state_{value:#x}")
    }
}

/// A name the library gave, copied. Not freed: libraries differ in whether a name is
/// theirs or an allocation of the host's, and a wrong free would be worse than the few
/// bytes a process's names hold.
fn take_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string of the library's.
    let text = unsafe { CStr::from_ptr(p) }
        .to_string_lossy()
        .chars()
        .take(256)
        .collect();
    Some(text)
}
